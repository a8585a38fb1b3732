//! flycode's own places, decided once (PROTOCOL.md §11 Security, "flycode's own places"): the
//! state folder (journal, audit log, undo store, sessions, the seal key, the secret hand-off)
//! and the person's configuration folder. Both come from the person's environment as flycode
//! was started, before any configuration file is read, and are kept for the process's life; an
//! image restarted to take its secrets out of its environment ([`super::secret_env`]) is handed
//! the very same places by name ([`carry`]), so nothing a project file says, and nothing taken
//! out of the environment, can move or hide them.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The variable that names the state folder, and carries it to a restarted image.
pub const STATE_DIR_VARIABLE: &str = "FLYCODE_STATE_DIR";
/// The variable that names the person's configuration folder, and carries it to a restarted
/// image.
pub const CONFIG_DIR_VARIABLE: &str = "FLYCODE_CONFIG_DIR";

/// flycode's own places as this process decided them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnPlaces {
    /// The state folder, absolute (not created here); `None` where the environment names none.
    pub state_dir: Option<PathBuf>,
    /// The person's configuration folder (holding their `flycode.toml` and trust store), links
    /// resolved where it exists.
    pub config_dir: Option<PathBuf>,
}

static PLACES: OnceLock<OwnPlaces> = OnceLock::new();

/// This process's places: decided from the environment on the first call, the same ever after.
pub fn own_places() -> &'static OwnPlaces {
    PLACES.get_or_init(|| decide(&|name| std::env::var_os(name)))
}

/// Decides the places now, before anything else can: the first thing `main` does.
pub fn decide_own_places() {
    let _ = own_places();
}

/// Names this process's places in `command`'s environment, so that a restarted image of flycode
/// decides exactly these.
pub fn carry(command: &mut std::process::Command) {
    let places = own_places();
    if let Some(dir) = &places.state_dir {
        command.env(STATE_DIR_VARIABLE, dir);
    }
    if let Some(dir) = &places.config_dir {
        command.env(CONFIG_DIR_VARIABLE, dir);
    }
}

/// The places the variables (`var` looks one up) name.
fn decide(var: &dyn Fn(&str) -> Option<std::ffi::OsString>) -> OwnPlaces {
    OwnPlaces {
        state_dir: state_dir(var).map(|dir| absolute(&dir)),
        config_dir: config_dir(var).map(|dir| std::fs::canonicalize(&dir).unwrap_or(dir)),
    }
}

/// `$FLYCODE_STATE_DIR`, else `$XDG_STATE_HOME/flycode`, else `~/.local/state/flycode` (the
/// platform's local data directory elsewhere).
fn state_dir(var: &dyn Fn(&str) -> Option<std::ffi::OsString>) -> Option<PathBuf> {
    if let Some(dir) = var(STATE_DIR_VARIABLE)
        .map(PathBuf::from)
        .filter(|dir| !dir.as_os_str().is_empty())
    {
        return Some(dir);
    }
    // The library's own unit tests write files through the sandbox, which journals every write:
    // they keep their journal and sessions in a folder of their own, never in the user's.
    if cfg!(test) {
        return Some(
            std::env::temp_dir().join(format!("flycode-unit-tests-{}", std::process::id())),
        );
    }
    if let Some(dir) = var("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
    {
        return Some(dir.join("flycode"));
    }
    if cfg!(windows) {
        return var("LOCALAPPDATA").map(|dir| PathBuf::from(dir).join("flycode"));
    }
    var("HOME").map(|home| PathBuf::from(home).join(".local/state/flycode"))
}

/// `$FLYCODE_CONFIG_DIR`, else `$XDG_CONFIG_HOME/flycode`, else `~/.config/flycode`.
fn config_dir(var: &dyn Fn(&str) -> Option<std::ffi::OsString>) -> Option<PathBuf> {
    // Relative, it is taken from the working directory, as `FLYCODE_STATE_DIR` is.
    if let Some(dir) = var(CONFIG_DIR_VARIABLE)
        .map(PathBuf::from)
        .filter(|dir| !dir.as_os_str().is_empty())
    {
        return Some(absolute(&dir));
    }
    let base = var("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| var("HOME").map(|home| PathBuf::from(home).join(".config")))?;
    Some(base.join("flycode"))
}

/// `path` made absolute against the working directory as flycode started (a relative
/// `FLYCODE_STATE_DIR` must name the same folder in a restarted image and after a `cd`).
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn the_configuration_folder_follows_the_variables_in_order() {
        let places = decide(&env(&[("HOME", "/home/me")]));
        assert_eq!(
            places.config_dir.as_deref(),
            Some(Path::new("/home/me/.config/flycode"))
        );
        let places = decide(&env(&[
            ("HOME", "/home/me"),
            ("XDG_CONFIG_HOME", "/x"),
            ("FLYCODE_CONFIG_DIR", "/carried"),
        ]));
        assert_eq!(places.config_dir.as_deref(), Some(Path::new("/carried")));
        // A relative XDG_CONFIG_HOME is ignored, as the XDG rules say.
        let places = decide(&env(&[("HOME", "/h"), ("XDG_CONFIG_HOME", "rel")]));
        assert_eq!(
            places.config_dir.as_deref(),
            Some(Path::new("/h/.config/flycode"))
        );
    }

    #[test]
    fn named_folders_are_made_absolute() {
        let places = decide(&env(&[
            ("FLYCODE_STATE_DIR", "rel/state"),
            ("FLYCODE_CONFIG_DIR", "rel/config"),
        ]));
        let dir = places.state_dir.unwrap();
        assert!(dir.is_absolute() && dir.ends_with("rel/state"), "{dir:?}");
        let dir = places.config_dir.unwrap();
        assert!(dir.is_absolute() && dir.ends_with("rel/config"), "{dir:?}");
    }

    #[test]
    fn the_places_are_decided_once() {
        assert_eq!(own_places(), own_places());
        assert!(std::ptr::eq(own_places(), own_places()));
    }
}
