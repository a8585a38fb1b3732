//! Where flycode keeps state between runs (decided once: [`super::own_places`]), and how its
//! files are written (atomically) and, for the replay stores and sessions, sealed
//! ([`save_sealed`], [`load_sealed`]): no file tool may read or change this directory
//! ([`super::protect`]), and what a program writes there is never taken for flycode's own.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

use thiserror::Error;

use super::seal::{KeyError, Purpose, SealKey, name_of};

/// Saves `value` as JSON in `file`, atomically.
#[cfg(test)]
pub fn save_json(file: &Path, value: &impl Serialize) -> Result<(), StateError> {
    let text = encode(file, value)?;
    write_state(file, &text)
}

/// Why a state file (a session, a replay store, the trust store) could not be read or saved.
#[derive(Debug, Error)]
pub enum StateError {
    /// The file exists but could not be read.
    #[error("{}: {error}", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// The file holds no JSON of the expected shape.
    #[error("{}: {error}", path.display())]
    NotJson {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        error: serde_json::Error,
    },
    /// The value could not be written as JSON (a fault of flycode).
    #[error("{}: cannot encode the state as JSON: {error}", path.display())]
    Unencodable {
        /// The file.
        path: PathBuf,
        /// What the encoder said.
        error: serde_json::Error,
    },
    /// The file (or its folder) could not be written.
    #[error("{}: {error}", path.display())]
    Unwritable {
        /// The file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// The state directory's sealing key could not be read or made.
    #[error("{}: {error}", path.display())]
    NoKey {
        /// The file to be sealed.
        path: PathBuf,
        /// Why there is no key.
        error: KeyError,
    },
}

/// The state directory (not created here): decided once, from the person's environment
/// ([`super::own_places`]).
pub fn state_dir() -> Option<PathBuf> {
    super::own_places::own_places().state_dir.clone()
}

impl SealKey {
    /// The key of the state directory (made on first use), kept for the process's life. Here,
    /// beside the state directory, so that [`super::seal`] knows keys but not where state lives.
    pub fn of_state_dir() -> Result<SealKey, KeyError> {
        let dir = state_dir().ok_or(KeyError::NoStateDir)?;
        SealKey::in_dir(&dir)
    }
}

/// Writes `bytes` to `path` through a hidden temporary file beside it and a rename, creating the
/// directory if needed: a reader never sees half a file. The temporary file has a random name and
/// is created exclusively (never through a link someone planted), its data is flushed before the
/// rename and the directory after it. Only a regular file (or nothing) is replaced: a link, a
/// directory or a device at `path` is an error, never silently turned into a file.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir)?;
    if let Ok(metadata) = std::fs::symlink_metadata(path)
        && !metadata.file_type().is_file()
    {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "{} is not a regular file (a link, a directory or a device); name a new or regular file",
                path.display()
            ),
        ));
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut temp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .tempfile_in(dir)?;
    temp.write_all(bytes)?;
    temp.as_file().sync_data()?;
    temp.persist(path).map_err(|error| error.error)?;
    if let Ok(directory) = std::fs::File::open(dir) {
        // Best effort: some file systems refuse to sync a directory.
        let _ = directory.sync_all();
    }
    Ok(())
}

fn encode(file: &Path, value: &impl Serialize) -> Result<String, StateError> {
    serde_json::to_string(value).map_err(|error| StateError::Unencodable {
        path: file.to_owned(),
        error,
    })
}

fn write_state(file: &Path, text: &str) -> Result<(), StateError> {
    write_atomically(file, text.as_bytes()).map_err(|error| StateError::Unwritable {
        path: file.to_owned(),
        error,
    })
}

/// Saves `value` as JSON in `file`, atomically, sealed for `purpose` with the state directory's
/// key ([`super::seal`]): only flycode can write a file that [`load_sealed`] accepts.
pub fn save_sealed(
    file: &Path,
    purpose: Purpose,
    value: &impl Serialize,
) -> Result<(), StateError> {
    let key = SealKey::of_state_dir().map_err(|error| StateError::NoKey {
        path: file.to_owned(),
        error,
    })?;
    let body = encode(file, value)?;
    let text = key.wrap(purpose, &name_of(file), &body);
    write_state(file, &text)
}

/// Loads JSON that [`save_sealed`] saved in `file` for `purpose`; a missing file is the default
/// value. A file whose seal does not verify (damaged, planted by a program or a tool, written by
/// an older flycode or under another key) is not trusted: the default value comes back with a
/// notice saying so (for standard error), and the file is left for the next save to replace.
pub fn load_sealed<T: DeserializeOwned + Default>(
    file: &Path,
    purpose: Purpose,
) -> Result<(T, Option<String>), StateError> {
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Ok((T::default(), None));
        }
        Err(error) => {
            return Err(StateError::Unreadable {
                path: file.to_owned(),
                error,
            });
        }
    };
    let ignored = |why: String| {
        Ok((
            T::default(),
            Some(format!(
                "{} was ignored (started empty): {why}",
                file.display()
            )),
        ))
    };
    let key = match SealKey::of_state_dir() {
        Ok(key) => key,
        Err(error) => return ignored(format!("its seal cannot be checked ({error})")),
    };
    let Some(body) = key.unwrap(purpose, &name_of(file), &text) else {
        return ignored(
            "its seal does not verify, so flycode did not write it as it is (it is damaged, was changed by a program or a tool, or comes from an older flycode)".into(),
        );
    };
    match serde_json::from_str(body) {
        Ok(value) => Ok((value, None)),
        Err(error) => ignored(format!("it is not what this flycode writes ({error})")),
    }
}

/// Loads JSON from `file`; a missing file is the default value.
pub fn load_json<T: DeserializeOwned + Default>(file: &Path) -> Result<T, StateError> {
    match std::fs::read_to_string(file) {
        Ok(text) => serde_json::from_str(&text).map_err(|error| StateError::NotJson {
            path: file.to_owned(),
            error,
        }),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(T::default()),
        Err(error) => Err(StateError::Unreadable {
            path: file.to_owned(),
            error,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trips_atomically() {
        let temp = tempfile::tempdir().unwrap();
        let file = temp.path().join("deep/state.json");
        assert_eq!(load_json::<Vec<u32>>(&file).unwrap(), Vec::<u32>::new());
        save_json(&file, &vec![1, 2, 3]).unwrap();
        assert_eq!(load_json::<Vec<u32>>(&file).unwrap(), vec![1, 2, 3]);
        let names: Vec<_> = std::fs::read_dir(file.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("state.json")]);
        std::fs::write(&file, "{broken").unwrap();
        assert!(
            load_json::<Vec<u32>>(&file)
                .unwrap_err()
                .to_string()
                .contains("state.json")
        );
    }

    #[test]
    fn a_planted_link_at_any_temporary_name_is_never_written_through() {
        let temp = tempfile::tempdir().unwrap();
        let victim = temp.path().join("victim.txt");
        std::fs::write(&victim, "precious\n").unwrap();
        let dir = temp.path().join("out");
        std::fs::create_dir_all(&dir).unwrap();
        // The old predictable names, for every plausible pid.
        for pid in [std::process::id(), 1, 2, 3] {
            std::os::unix::fs::symlink(&victim, dir.join(format!(".run.jsonl.{pid}.tmp"))).unwrap();
        }
        let target = dir.join("run.jsonl");
        write_atomically(&target, b"record\n").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "record\n");
    }

    #[test]
    fn only_regular_files_are_replaced() {
        let temp = tempfile::tempdir().unwrap();
        let victim = temp.path().join("victim.txt");
        std::fs::write(&victim, "precious\n").unwrap();
        let link = temp.path().join("link.jsonl");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let error = write_atomically(&link, b"x").unwrap_err();
        assert!(error.to_string().contains("not a regular file"), "{error}");
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        let error = write_atomically(temp.path(), b"x").unwrap_err();
        assert!(error.to_string().contains("not a regular file"), "{error}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    }
}
