//! One watcher per source (PROTOCOL.md §12 (Watching), "One watcher per source"): two `flycode
//! watch` processes on the same clipboard or the same inbox would both answer one copy, and run
//! its side effect twice. The first holds a lock (`flock`, released by the kernel however the
//! process ends) on a file named after its source in the state directory, with its pid in it; a
//! second one on the same source refuses to start and names the first.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::Path;

use crate::sandbox::sha256_hex;

/// What is watched, as the lock names it.
pub(crate) enum WatchedSource<'a> {
    /// The clipboard of an X11 display (`DISPLAY`).
    Clipboard(&'a str),
    /// An inbox folder (canonical where it can be made so).
    Inbox(&'a Path),
}

/// The lock held while this process watches its source; released when it is dropped or the
/// process ends.
#[derive(Debug)]
pub(crate) struct SourceOwner {
    _file: File,
}

/// Another watcher holds the source, or the lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SourceTaken {
    /// Another `flycode watch` (pid, where it could be read) watches this source.
    #[error(
        "another flycode watch{} is already watching {what}: two would both answer each reply and run its calls twice; stop that one first (Ctrl-C in its terminal{}), or watch another source (--inbox DIR)",
        pid.map_or_else(String::new, |pid| format!(" (pid {pid})")),
        pid.map_or_else(String::new, |pid| format!(", or kill {pid}"))
    )]
    Taken {
        /// The source, in words.
        what: String,
        /// The other watcher's pid.
        pid: Option<u32>,
    },
    /// The lock file could not be made or locked.
    #[error("cannot take the watch lock {path}: {source}")]
    Io {
        /// The lock file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
}

impl WatchedSource<'_> {
    /// The source in words.
    fn describe(&self) -> String {
        match self {
            WatchedSource::Clipboard(display) => format!("the clipboard of display {display}"),
            WatchedSource::Inbox(dir) => format!("the inbox {}", dir.display()),
        }
    }

    /// The lock file's name: the kind and a hash of what identifies the source.
    fn lock_name(&self) -> String {
        let (kind, key) = match self {
            WatchedSource::Clipboard(display) => ("clipboard", (*display).to_owned()),
            WatchedSource::Inbox(dir) => {
                let dir =
                    crate::sandbox::host::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
                ("inbox", dir.display().to_string())
            }
        };
        format!("{kind}-{}.lock", &sha256_hex(key.as_bytes())[..16])
    }
}

/// Takes `source` for this process, with the lock file in `state`'s `watch/` folder.
pub(crate) fn take(state: &Path, source: &WatchedSource<'_>) -> Result<SourceOwner, SourceTaken> {
    let dir = state.join("watch");
    let path = dir.join(source.lock_name());
    let fail = |source: std::io::Error| SourceTaken::Io {
        path: path.display().to_string(),
        source,
    };
    crate::sandbox::host::create_dir_all(&dir).map_err(fail)?;
    let mut file = crate::sandbox::host::open_lock_file(&path).map_err(fail)?;
    let locked = rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive);
    match locked {
        Ok(()) => {}
        Err(rustix::io::Errno::WOULDBLOCK) => {
            let mut text = String::new();
            let _ = file.read_to_string(&mut text);
            return Err(SourceTaken::Taken {
                what: source.describe(),
                pid: text.trim().parse().ok(),
            });
        }
        Err(error) => return Err(fail(error.into())),
    }
    file.set_len(0).map_err(fail)?;
    file.rewind().map_err(fail)?;
    file.write_all(std::process::id().to_string().as_bytes())
        .map_err(fail)?;
    Ok(SourceOwner { _file: file })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_owner_of_one_source_is_refused_and_told_the_first_pid() {
        let state = tempfile::tempdir().unwrap();
        let inbox = tempfile::tempdir().unwrap();
        let first = take(state.path(), &WatchedSource::Inbox(inbox.path())).unwrap();
        // flock is per open file: a second open in this process conflicts as another process's
        // would.
        let error = take(state.path(), &WatchedSource::Inbox(inbox.path())).unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains(&format!("(pid {})", std::process::id())),
            "{text}"
        );
        // Another source is free; the first, once dropped, too.
        take(state.path(), &WatchedSource::Clipboard(":0")).unwrap();
        drop(first);
        take(state.path(), &WatchedSource::Inbox(inbox.path())).unwrap();
    }
}
