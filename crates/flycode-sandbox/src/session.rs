//! The stale-read guard's memory: for each file the model read, the sha256 it saw (or, after the
//! session's own write, the sha256 of what it wrote). A file that changed since (by anything but
//! this session) may not be overwritten, appended, moved, removed or chmodded without an explicit
//! `expectedSha256` (PROTOCOL.md §10, Stale-read guard).
//!
//! A session is named (`--session NAME`) and kept as JSON in the state directory, so the guard
//! works across `flycode exec` runs; `watch` and `run` keep one per run. The file is sealed
//! ([`super::seal`]): one flycode did not write as it is (a forged one would make the guard take
//! a changed file for the one the model saw) is not used. The session then starts empty, as a
//! new one does, and flycode says so on standard error: a file read before is then not known to
//! have been read, the same as after `--session` with a new name.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::seal::Purpose;
use super::state::{StateError, load_sealed, save_sealed, state_dir};

/// What a session remembers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// Resolved path → sha256 the model last saw (or flycode last wrote).
    reads: BTreeMap<PathBuf, String>,
    /// Set for good once a stored session could not be trusted: what it said the model read is
    /// lost, so a file not read since may only be changed with `expectedSha256`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    distrusted: bool,
    #[serde(skip)]
    file: Option<PathBuf>,
    /// Why the stored session was not used (for standard error).
    #[serde(skip)]
    notice: Option<String>,
}

/// Why a session cannot be opened or saved.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The name holds something other than letters, digits, `-` and `_`.
    #[error("session name {0:?} may only hold letters, digits, '-' and '_'")]
    BadName(String),
    /// Nowhere to keep it.
    #[error("no state directory (set FLYCODE_STATE_DIR or HOME)")]
    NoStateDir,
    /// Its file cannot be read or written.
    #[error(transparent)]
    State(#[from] StateError),
}

impl Session {
    /// A session kept only in memory.
    pub fn in_memory() -> Session {
        Session::default()
    }

    /// The named session from the state directory (empty if new). Names are letters, digits,
    /// `-` and `_`.
    pub fn load(name: &str) -> Result<Session, SessionError> {
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(SessionError::BadName(name.to_owned()));
        }
        let dir = state_dir().ok_or(SessionError::NoStateDir)?;
        Session::load_from(&dir.join("sessions").join(format!("{name}.json")))
    }

    /// A session kept in `file`. One whose seal does not verify (not written by flycode) is
    /// not trusted: the session starts empty, with a [`Session::notice`] saying why.
    pub fn load_from(file: &Path) -> Result<Session, SessionError> {
        let (mut session, notice): (Session, _) = load_sealed(file, Purpose::Session)?;
        session.file = Some(file.to_owned());
        if let Some(notice) = notice {
            session.distrusted = true;
            session.notice = Some(format!(
                "session: {notice}; until it is read again, a file may only be changed with expectedSha256 (start another --session to begin afresh)"
            ));
        }
        Ok(session)
    }

    /// Why the stored session was not used, if it was not.
    pub fn notice(&self) -> Option<&str> {
        self.notice.as_deref()
    }

    /// Writes the session back, if it has a file (atomically: temp file, rename), sealed.
    pub fn save(&self) -> Result<(), SessionError> {
        match &self.file {
            Some(file) => Ok(save_sealed(file, Purpose::Session, self)?),
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

    /// Whether the session's memory of earlier reads was lost because its file could not be
    /// trusted: an existing file not read since may only be changed with `expectedSha256`.
    pub fn is_distrusted(&self) -> bool {
        self.distrusted
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

    #[test]
    fn a_session_flycode_did_not_seal_is_not_used() {
        let temp = tempfile::tempdir().unwrap();
        let file = temp.path().join("sessions/s2.json");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        // A forged session saying the model saw the file as it is now.
        let forged = serde_json::json!({"reads": {"/w/a.txt": "abc"}});
        std::fs::write(&file, forged.to_string()).unwrap();
        let session = Session::load_from(&file).unwrap();
        assert_eq!(session.remembered(Path::new("/w/a.txt")), None);
        assert!(session.notice().unwrap().contains("seal does not verify"));
        // It stays distrusted after it is saved again, sealed.
        assert!(session.is_distrusted());
        session.save().unwrap();
        let again = Session::load_from(&file).unwrap();
        assert!(again.is_distrusted() && again.notice().is_none());
        // Its own seal, moved to another session's name, does not open there either.
        let mut genuine = Session::load_from(&temp.path().join("sessions/s3.json")).unwrap();
        genuine.remember(Path::new("/w/a.txt"), "abc");
        genuine.save().unwrap();
        std::fs::copy(temp.path().join("sessions/s3.json"), &file).unwrap();
        assert!(Session::load_from(&file).unwrap().notice().is_some());
    }
}
