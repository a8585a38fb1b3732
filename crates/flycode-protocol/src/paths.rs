//! The syntactic form of a path argument: which platform's absolute form it has, if any.
//!
//! This is only the protocol's check (PROTOCOL.md §1 (Reading a reply) `relative_path`); whether the path lies inside
//! an allowed root is the sandbox's business.

/// The form of a path string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathForm {
    /// `/…`
    Posix,
    /// `C:\…` or `C:/…`
    WindowsDrive,
    /// `\\server\share\…`, including the verbatim `\\?\` and device `\\.\` prefixes.
    WindowsUnc,
    /// Anything else: `a/b`, `./a`, `~/a`, `C:a`, `\a`, the empty string.
    Relative,
}

impl PathForm {
    /// Whether the path is absolute on some platform.
    pub fn is_absolute(self) -> bool {
        self != PathForm::Relative
    }
}

/// Classifies `path` by its leading characters.
pub fn path_form(path: &str) -> PathForm {
    let bytes = path.as_bytes();
    if bytes.first() == Some(&b'/') {
        PathForm::Posix
    } else if bytes.len() >= 3
        && bytes[0].is_ascii_alphabetic()
        && bytes[1] == b':'
        && matches!(bytes[2], b'\\' | b'/')
    {
        PathForm::WindowsDrive
    } else if is_unc(path) {
        PathForm::WindowsUnc
    } else {
        PathForm::Relative
    }
}

/// `\\server\share\...`: a non-empty server and share (`?` and `.` count as servers, for the
/// verbatim and device prefixes), separated by backslashes.
fn is_unc(path: &str) -> bool {
    let Some(rest) = path.strip_prefix(r"\\") else {
        return false;
    };
    let mut parts = rest.splitn(3, '\\');
    let server = parts.next().unwrap_or_default();
    let share = parts.next().unwrap_or_default();
    !server.is_empty() && !share.is_empty() && !server.contains('/')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_forms_are_recognized() {
        assert_eq!(path_form("/root/work"), PathForm::Posix);
        assert_eq!(path_form("//server/share"), PathForm::Posix);
        assert_eq!(path_form(r"C:\work\app"), PathForm::WindowsDrive);
        assert_eq!(path_form("d:/work"), PathForm::WindowsDrive);
        assert_eq!(path_form(r"\\server\share\x"), PathForm::WindowsUnc);
        assert_eq!(path_form(r"\\?\C:\x"), PathForm::WindowsUnc);
    }

    #[test]
    fn relative_forms_are_rejected() {
        for path in [
            "",
            "a/b",
            "./a",
            "../a",
            "~/a",
            "C:foo",
            r"\foo",
            "C:",
            "%2e%2e/x",
            r"\\",
            r"\\x",
            r"\\server",
            r"\\\x",
            r"\\server\",
        ] {
            assert_eq!(path_form(path), PathForm::Relative, "{path:?}");
        }
    }
}
