//! The folders whose `flycode.toml` the person trusts: `trusted.json` in the user's configuration
//! directory, one record per folder with the sha256 of the file as it was when trusted. A file
//! that changed since is untrusted again (PROTOCOL.md §10 "Configuration"). The store lives in
//! the configuration directory because no file tool may read or write there and no contained
//! program may read it: a model cannot trust a file for the person.

use std::path::{Path, PathBuf};

use crate::sandbox::sha256_hex;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::sandbox::protect::user_config_dir;
use crate::sandbox::state::StateError;

/// The store's file name in the user's configuration directory.
pub const TRUST_FILE_NAME: &str = "trusted.json";

/// Why the trust store cannot be read or changed.
#[derive(Debug, Error)]
pub enum TrustError {
    /// Neither `XDG_CONFIG_HOME` nor `HOME` says where the configuration directory is.
    #[error("no configuration directory to keep trusted folders in: set HOME or XDG_CONFIG_HOME")]
    NoConfigDir,
    /// The store is damaged or cannot be read.
    #[error(
        "{0}: the list of trusted folders is damaged; remove the file and trust the folders again"
    )]
    Damaged(StateError),
    /// The store cannot be written.
    #[error("{0}")]
    Unsaved(StateError),
    /// The folder has no project file to trust.
    #[error(
        "no flycode.toml applies in {0}: flycode looks for one in the folder and its parents, up to the top of the git repository; there is nothing to trust"
    )]
    NoProjectFile(PathBuf),
}

/// One trusted folder.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trusted {
    /// The folder holding the trusted `flycode.toml` (absolute, links resolved).
    pub dir: PathBuf,
    /// The sha256 (lower-case hex) of the file's bytes when it was trusted.
    pub sha256: String,
    /// When, in seconds since the Unix epoch.
    #[serde(default)]
    pub trusted_at: u64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Store {
    #[serde(default)]
    trusted: Vec<Trusted>,
}

/// The store of the configuration directory `config_dir`.
#[derive(Clone, Debug)]
pub struct TrustStore {
    file: PathBuf,
}

impl TrustStore {
    /// The store in the user's configuration directory.
    pub fn user() -> Result<TrustStore, TrustError> {
        user_config_dir()
            .map(|dir| TrustStore::in_dir(&dir))
            .ok_or(TrustError::NoConfigDir)
    }

    /// The store in `config_dir`.
    pub fn in_dir(config_dir: &Path) -> TrustStore {
        TrustStore {
            file: config_dir.join(TRUST_FILE_NAME),
        }
    }

    /// The store's file.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Every trusted folder, in the order they were trusted.
    pub fn list(&self) -> Result<Vec<Trusted>, TrustError> {
        crate::sandbox::state::load_json::<Store>(&self.file)
            .map(|store| store.trusted)
            .map_err(TrustError::Damaged)
    }

    /// Whether the file of `dir` whose bytes hash to `sha256` is trusted. A store that cannot be
    /// read trusts nothing.
    pub fn is_trusted(&self, dir: &Path, sha256: &str) -> bool {
        self.list().is_ok_and(|list| {
            list.iter()
                .any(|entry| entry.dir == dir && entry.sha256 == sha256)
        })
    }

    /// Trusts `dir`'s file with these bytes, replacing an earlier record of the folder.
    pub fn trust(&self, dir: &Path, bytes: &[u8]) -> Result<Trusted, TrustError> {
        self.trust_sha256(dir, &sha256_hex(bytes))
    }

    /// Trusts `dir`'s file whose bytes hash to `sha256` (lower-case hex), as the configuration
    /// loader recorded it when it read them.
    pub fn trust_sha256(&self, dir: &Path, sha256: &str) -> Result<Trusted, TrustError> {
        let mut list = self.list()?;
        list.retain(|entry| entry.dir != dir);
        let record = Trusted {
            dir: dir.to_owned(),
            sha256: sha256.to_owned(),
            trusted_at: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |elapsed| elapsed.as_secs()),
        };
        list.push(record.clone());
        self.save(list)?;
        Ok(record)
    }

    /// Forgets `dir`; whether it was trusted.
    pub fn revoke(&self, dir: &Path) -> Result<bool, TrustError> {
        let mut list = self.list()?;
        let before = list.len();
        list.retain(|entry| entry.dir != dir);
        if list.len() == before {
            return Ok(false);
        }
        self.save(list)?;
        Ok(true)
    }

    fn save(&self, trusted: Vec<Trusted>) -> Result<(), TrustError> {
        let text = serde_json::to_string_pretty(&Store { trusted }).map_err(|error| {
            TrustError::Unsaved(StateError::Unencodable {
                path: self.file.clone(),
                error,
            })
        })?;
        crate::sandbox::state::write_atomically(&self.file, format!("{text}\n").as_bytes()).map_err(
            |error| {
                TrustError::Unsaved(StateError::Unwritable {
                    path: self.file.clone(),
                    error,
                })
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_file_is_untrusted_and_revoke_forgets() {
        let temp = tempfile::tempdir().unwrap();
        let store = TrustStore::in_dir(temp.path());
        let dir = Path::new("/projects/app");
        assert!(!store.is_trusted(dir, &sha256_hex(b"a")));
        store.trust(dir, b"a").unwrap();
        assert!(store.is_trusted(dir, &sha256_hex(b"a")));
        assert!(!store.is_trusted(dir, &sha256_hex(b"b")));
        assert!(!store.is_trusted(Path::new("/projects"), &sha256_hex(b"a")));
        store.trust(dir, b"b").unwrap();
        assert_eq!(store.list().unwrap().len(), 1);
        assert!(store.is_trusted(dir, &sha256_hex(b"b")));
        assert!(store.revoke(dir).unwrap());
        assert!(!store.revoke(dir).unwrap());
        assert!(!store.is_trusted(dir, &sha256_hex(b"b")));
    }
}
