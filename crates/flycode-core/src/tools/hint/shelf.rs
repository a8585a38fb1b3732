//! The hints a conversation has loaded (PROTOCOL.md §9 (hint.load)) and how a hint's files are
//! read: every read goes through a sandbox whose one root is the hint's folder, so `..`, an
//! absolute path or a link that leads out of the folder is refused as it would be for any root.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::protocol::ErrorCode;
use crate::sandbox::{Roots, Sandbox};
use crate::tools::ToolError;

/// One loaded hint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadedHint {
    /// Its name (its folder's).
    pub name: String,
    /// Its folder, links resolved.
    pub dir: PathBuf,
    /// Its `HINT.md`.
    pub text: String,
}

/// The hints loaded in one conversation, oldest first. Each executor keeps one, so a sub-agent's
/// hints are its own.
#[derive(Debug, Default)]
pub struct HintShelf {
    loaded: Mutex<Vec<LoadedHint>>,
}

impl HintShelf {
    /// The loaded hints, oldest first.
    pub fn loaded(&self) -> Vec<LoadedHint> {
        self.lock().clone()
    }

    /// Loads `hint`, replacing an earlier load of the same name.
    pub fn load(&self, hint: LoadedHint) {
        let mut loaded = self.lock();
        loaded.retain(|held| held.name != hint.name);
        loaded.push(hint);
    }

    /// Unloads `name` (every hint when `None`); the names unloaded.
    pub fn unload(&self, name: Option<&str>) -> Vec<String> {
        let mut loaded = self.lock();
        let (gone, kept): (Vec<LoadedHint>, Vec<LoadedHint>) = loaded
            .drain(..)
            .partition(|held| name.is_none_or(|name| held.name == name));
        *loaded = kept;
        gone.into_iter().map(|hint| hint.name).collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<LoadedHint>> {
        self.loaded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Reads `relative` inside `dir`, at most `cap` bytes (more is `too_large`). `relative` must be
/// a relative path without `..`; the file is opened through a sandbox rooted at `dir`, so a link
/// leading out of it is refused.
pub fn read_confined(dir: &Path, relative: &str, cap: usize) -> Result<Vec<u8>, ToolError> {
    check_relative(relative)?;
    let roots = Roots::resolve(&[dir.to_path_buf()])
        .map_err(|error| ToolError::new(ErrorCode::NotFound, error.to_string(), None))?;
    let sandbox = Sandbox::open(&roots)?;
    let root = roots.paths().first().cloned().unwrap_or_default();
    let full = root.join(relative);
    let input = full.to_string_lossy();
    let file = sandbox.open_for_reading(&input).map_err(|error| {
        let mut error = ToolError::from(error);
        // The sandbox speaks of roots; here the one root is the hint's folder.
        error.hint = Some(format!(
            "name a file inside the hint's folder {}, relative to it",
            root.display()
        ));
        error
    })?;
    let mut bytes = Vec::new();
    let limit = u64::try_from(cap).unwrap_or(u64::MAX).saturating_add(1);
    file.take(limit)
        .read_to_end(&mut bytes)
        .map_err(|e| ToolError::new(ErrorCode::IoError, format!("{relative}: {e}"), None))?;
    if bytes.len() > cap {
        return Err(ToolError::new(
            ErrorCode::TooLarge,
            format!("{relative} is larger than {cap} bytes"),
            Some("read a smaller resource"),
        ));
    }
    Ok(bytes)
}

/// Refuses an empty or absolute path, `..`, NUL and backslashes before anything is opened.
fn check_relative(relative: &str) -> Result<(), ToolError> {
    let refuse = |why: &str| {
        Err(ToolError::new(
            ErrorCode::OutsideRoots,
            format!("{relative:?} {why}"),
            Some("give the path relative to the hint's folder, e.g. templates/report.md"),
        ))
    };
    let path = Path::new(relative);
    if relative.trim().is_empty() {
        return refuse("is empty");
    }
    if path.is_absolute() || relative.starts_with(['/', '\\']) || relative.contains(':') {
        return refuse("is absolute: resources are named relative to the hint's folder");
    }
    if relative.contains(['\0', '\\']) {
        return refuse("holds a NUL byte or a backslash");
    }
    if path
        .components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return refuse("climbs out with '..'");
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // fixtures are made directly, outside the sandbox
mod tests {
    use super::*;

    #[test]
    fn reads_inside_and_refuses_every_way_out() {
        let temp = tempfile::tempdir().unwrap();
        let hint = temp.path().join("hint");
        std::fs::create_dir_all(hint.join("sub")).unwrap();
        std::fs::write(hint.join("sub/a.txt"), "inside").unwrap();
        std::fs::write(temp.path().join("secret.txt"), "outside").unwrap();
        std::os::unix::fs::symlink(temp.path().join("secret.txt"), hint.join("link")).unwrap();
        assert_eq!(read_confined(&hint, "sub/a.txt", 100).unwrap(), b"inside");
        for bad in [
            "../secret.txt",
            "sub/../../secret.txt",
            "/etc/passwd",
            "link",
            "",
            "C:x",
        ] {
            let error = read_confined(&hint, bad, 100).unwrap_err();
            assert!(
                matches!(
                    error.code,
                    ErrorCode::OutsideRoots | ErrorCode::NotFound | ErrorCode::PermissionDenied
                ),
                "{bad}: {error:?}"
            );
        }
        let error = read_confined(&hint, "sub/a.txt", 3).unwrap_err();
        assert_eq!(error.code, ErrorCode::TooLarge);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// No path made of `..`, `.`, names, links and separators reads anything outside.
        #[test]
        fn no_generated_path_reads_outside_the_hint(
            parts in proptest::collection::vec(
                proptest::sample::select(vec!["..", ".", "sub", "a.txt", "link", "dirlink", "", "/", "..%2f", "secret.txt"]),
                1..7,
            ),
            lead in proptest::sample::select(vec!["", "/", "./", "sub/"]),
        ) {
            let temp = tempfile::tempdir().unwrap();
            let hint = temp.path().join("hint");
            std::fs::create_dir_all(hint.join("sub")).unwrap();
            std::fs::write(hint.join("sub/a.txt"), "inside").unwrap();
            std::fs::write(temp.path().join("secret.txt"), "OUTSIDE").unwrap();
            std::os::unix::fs::symlink(temp.path().join("secret.txt"), hint.join("link")).unwrap();
            std::os::unix::fs::symlink(temp.path(), hint.join("dirlink")).unwrap();
            let path = format!("{lead}{}", parts.join("/"));
            if let Ok(bytes) = read_confined(&hint, &path, 1000) {
                proptest::prop_assert_eq!(bytes, b"inside".to_vec(), "{}", path);
            }
        }
    }

    #[test]
    fn a_second_load_replaces_and_unload_names_what_left() {
        let shelf = HintShelf::default();
        let hint = |name: &str, text: &str| LoadedHint {
            name: name.to_owned(),
            dir: PathBuf::from("/h"),
            text: text.to_owned(),
        };
        shelf.load(hint("a", "1"));
        shelf.load(hint("b", "2"));
        shelf.load(hint("a", "3"));
        let names: Vec<String> = shelf.loaded().into_iter().map(|h| h.text).collect();
        assert_eq!(names, ["2", "3"]);
        assert_eq!(shelf.unload(Some("b")), ["b"]);
        assert_eq!(shelf.unload(None), ["a"]);
        assert!(shelf.loaded().is_empty());
    }
}
