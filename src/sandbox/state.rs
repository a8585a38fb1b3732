//! Where flycode keeps state between runs: `$FLYCODE_STATE_DIR`, else `$XDG_STATE_HOME/flycode`,
//! else `~/.local/state/flycode` (the platform's local data directory elsewhere).

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

/// The state directory (not created here).
pub fn state_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("FLYCODE_STATE_DIR").map(PathBuf::from) {
        return Some(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
    {
        return Some(dir.join("flycode"));
    }
    if cfg!(windows) {
        return std::env::var_os("LOCALAPPDATA").map(|dir| PathBuf::from(dir).join("flycode"));
    }
    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".local/state/flycode"))
}

/// Writes `bytes` to `path` through a hidden temporary file beside it and a rename, creating the
/// directory if needed: a reader never sees half a file.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    std::fs::write(&temp, bytes)?;
    std::fs::rename(&temp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&temp);
    })
}

/// Saves `value` as JSON in `file`, atomically.
pub fn save_json(file: &Path, value: &impl Serialize) -> Result<(), String> {
    let text = serde_json::to_string(value).map_err(|e| e.to_string())?;
    write_atomically(file, text.as_bytes()).map_err(|e| format!("{}: {e}", file.display()))
}

/// Loads JSON from `file`; a missing file is the default value.
pub fn load_json<T: DeserializeOwned + Default>(file: &Path) -> Result<T, String> {
    match std::fs::read_to_string(file) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| format!("{}: {e}", file.display())),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(T::default()),
        Err(error) => Err(format!("{}: {error}", file.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trips_atomically() {
        let temp = tempfile::tempdir().unwrap();
        let file = temp.path().join("deep/state.json");
        assert_eq!(load_json::<Vec<u32>>(&file), Ok(Vec::new()));
        save_json(&file, &vec![1, 2, 3]).unwrap();
        assert_eq!(load_json::<Vec<u32>>(&file), Ok(vec![1, 2, 3]));
        let names: Vec<_> = std::fs::read_dir(file.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("state.json")]);
        std::fs::write(&file, "{broken").unwrap();
        assert!(
            load_json::<Vec<u32>>(&file)
                .unwrap_err()
                .contains("state.json")
        );
    }
}
