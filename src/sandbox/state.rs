//! Where flycode keeps state between runs: `$FLYCODE_STATE_DIR`, else `$XDG_STATE_HOME/flycode`,
//! else `~/.local/state/flycode` (the platform's local data directory elsewhere).

use std::path::PathBuf;

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
