//! The client's roots (`roots/list`) only narrow flycode's (PROTOCOL.md §14 (The MCP server)).
//!
//! The allowed roots of a call are the intersection of flycode's roots (`--root`, flycode.toml,
//! the current directory) and the client's: a client root inside a flycode root counts as
//! itself, a flycode root inside a client root counts as itself, anything else not at all. A
//! client that declares no roots capability leaves flycode's roots as they are. The
//! intersection is taken when a call arrives, from the roots the client last sent (fetched
//! again after `notifications/roots/list_changed`), and the call runs in a sandbox opened on it:
//! a path outside it is `outside_roots` like any other, and a program's default working
//! directory and writable places are the narrowed roots too.

use std::path::{Path, PathBuf};

/// The path a `file://` URI names (`file:///home/a%20b` → `/home/a b`); `None` for any other
/// scheme, a remote host, or a path that is not absolute.
pub(crate) fn file_uri_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    // `file:///p` (empty host) or `file://localhost/p`.
    let path = if rest.starts_with('/') {
        rest
    } else {
        rest.strip_prefix("localhost")?
    };
    let decoded = percent_decode(path)?;
    let path = PathBuf::from(decoded);
    path.is_absolute().then_some(path)
}

/// `%XX` escapes decoded; `None` for a malformed escape or bytes that are not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' {
            let hex = text.get(index + 1..index + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            index += 3;
        } else {
            out.push(bytes[index]);
            index += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The roots a call may use: every client root inside a flycode root, and every flycode root
/// inside a client root, in the client's order, without duplicates. Both lists are resolved
/// (absolute, links followed); containment is by path components.
pub(crate) fn narrow(flycode: &[PathBuf], client: &[PathBuf]) -> Vec<PathBuf> {
    let mut narrowed: Vec<PathBuf> = Vec::new();
    let mut keep = |path: &Path| {
        if !narrowed.iter().any(|kept| kept == path) {
            narrowed.push(path.to_owned());
        }
    };
    for theirs in client {
        for ours in flycode {
            if theirs.starts_with(ours) {
                keep(theirs);
            } else if ours.starts_with(theirs) {
                keep(ours);
            }
        }
    }
    narrowed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_uris_become_paths() {
        assert_eq!(
            file_uri_path("file:///home/a%20b"),
            Some(PathBuf::from("/home/a b"))
        );
        assert_eq!(
            file_uri_path("file://localhost/w"),
            Some(PathBuf::from("/w"))
        );
        assert_eq!(file_uri_path("file://server/share"), None);
        assert_eq!(file_uri_path("https://example.com/w"), None);
        assert_eq!(file_uri_path("file:///bad%zz"), None);
    }

    #[test]
    fn client_roots_only_narrow() {
        let ours = [PathBuf::from("/work/app"), PathBuf::from("/work/lib")];
        let paths = |list: &[&str]| list.iter().map(PathBuf::from).collect::<Vec<_>>();
        assert_eq!(
            narrow(&ours, &paths(&["/work/app/src"])),
            paths(&["/work/app/src"])
        );
        assert_eq!(
            narrow(&ours, &paths(&["/work"])),
            paths(&["/work/app", "/work/lib"])
        );
        assert_eq!(
            narrow(&ours, &paths(&["/work/app-evil", "/etc"])),
            Vec::<PathBuf>::new()
        );
        assert_eq!(
            narrow(&ours, &paths(&["/work/lib", "/work/app/x"])),
            paths(&["/work/lib", "/work/app/x"])
        );
    }
}
