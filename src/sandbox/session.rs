//! The stale-read guard's memory: for each file the model read, the sha256 it saw (or, after the
//! session's own write, the sha256 of what it wrote). A file that changed since (by anything but
//! this session) may not be overwritten, appended, moved, removed or chmodded without an explicit
//! `expectedSha256` (PROTOCOL.md §10, Stale-read guard).
//!
//! A session is named (`--session NAME`) and kept as JSON in the state directory, so the guard
//! works across `flycode exec` runs; `watch` and `run` keep one per run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::state::{load_json, save_json, state_dir};

/// What a session remembers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// Resolved path → sha256 the model last saw (or flycode last wrote).
    reads: BTreeMap<PathBuf, String>,
    #[serde(skip)]
    file: Option<PathBuf>,
}

impl Session {
    /// A session kept only in memory.
    pub fn in_memory() -> Session {
        Session::default()
    }

    /// The named session from the state directory (empty if new). Names are letters, digits,
    /// `-` and `_`.
    pub fn load(name: &str) -> Result<Session, String> {
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(format!(
                "session name {name:?} may only hold letters, digits, '-' and '_'"
            ));
        }
        let dir = state_dir().ok_or("no state directory (set FLYCODE_STATE_DIR or HOME)")?;
        Session::load_from(&dir.join("sessions").join(format!("{name}.json")))
    }

    /// A session kept in `file`.
    pub fn load_from(file: &Path) -> Result<Session, String> {
        let mut session: Session = load_json(file)?;
        session.file = Some(file.to_owned());
        Ok(session)
    }

    /// Writes the session back, if it has a file (atomically: temp file, rename).
    pub fn save(&self) -> Result<(), String> {
        match &self.file {
            Some(file) => save_json(file, self),
            None => Ok(()),
        }
    }

    /// The model saw `path` with this hash (fs.read), or flycode wrote it.
    pub fn remember(&mut self, path: &Path, sha256: &str) {
        self.reads.insert(path.to_owned(), sha256.to_owned());
    }

    /// The path is gone (removed or moved away).
    pub fn forget(&mut self, path: &Path) {
        self.reads.remove(path);
    }

    /// The hash remembered for `path`, if the model read it.
    pub fn remembered(&self, path: &Path) -> Option<&str> {
        self.reads.get(path).map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_persist_between_loads() {
        let temp = tempfile::tempdir().unwrap();
        let file = temp.path().join("sessions/s1.json");
        let mut session = Session::load_from(&file).unwrap();
        session.remember(Path::new("/w/a.txt"), "abc");
        session.save().unwrap();
        let again = Session::load_from(&file).unwrap();
        assert_eq!(again.remembered(Path::new("/w/a.txt")), Some("abc"));
        assert!(Session::load("../escape").is_err());
    }
}
