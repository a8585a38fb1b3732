//! flycode's secrets out of its own environment (PROTOCOL.md §9 (Tools: what programs may do)): a program flycode runs may be able
//! to read `/proc/<flycode's pid>/environ` (as root, on kernels whose Landlock does not cover it),
//! and that file keeps the environment flycode was *started* with, whatever flycode does to its
//! own copy later. So on Linux, a command that runs programs hands its secrets to a fresh image of
//! itself, started without them:
//!
//! 1. [`hand_off`] finds the secret variables set (non-empty), writes their names and values as
//!    JSON to a new file `secret-handoff-<pid>-<random>` in the state directory (created
//!    exclusively, mode 0600; the state directory is out of programs' reach), and replaces the
//!    process with itself (`execve`: same pid, same arguments and standard streams) without those
//!    variables and with `FLYCODE_SECRET_HANDOFF` naming the file.
//! 2. The new image's [`hand_off`] sees the variable, checks the file (a regular file in the state
//!    directory, named for this pid, owned by this user, mode 0600, opened without following a
//!    link), reads it, deletes it and holds the values in memory.
//! 3. Whoever needs a secret's value asks [`value`]: the held value first, then the environment.
//!
//! The cost is one extra `execve` at start, only when a secret variable is set. The restarted
//! image is handed flycode's own places by name ([`super::own_places::carry`]), so it finds the
//! file where the first image put it whatever variables were taken away. If the hand-off cannot
//! be made (no state directory, `execve` refused) or received, flycode deletes the file and
//! stops with an error: it never runs programs with a key it could not take back out of its
//! environment. Elsewhere than Linux this does nothing (no `/proc` to read a process's
//! environment through).

use std::sync::OnceLock;

/// The variable naming the hand-off file in the new image.
pub const HANDOFF_VARIABLE: &str = "FLYCODE_SECRET_HANDOFF";

/// The prefix of a hand-off file's name; the pid and a random part follow.
const FILE_PREFIX: &str = "secret-handoff-";

/// The largest hand-off file read: names and values of a few keys.
const MAX_HANDOFF_BYTES: u64 = 1 << 20;

/// The secrets received through a hand-off, name and value.
static HELD: OnceLock<Vec<(String, String)>> = OnceLock::new();

/// Whether flycode reads the variable `name` for itself (where its state, its settings and its
/// seal key are, how it talks, where it finds programs): such a variable is never a secret to
/// take out of flycode's environment (PROTOCOL.md §10 "Configuration").
pub fn is_own_variable(name: &str) -> bool {
    const OWN: [&str; 9] = [
        "HOME",
        "PATH",
        "USER",
        "LOGNAME",
        "SHELL",
        "TMPDIR",
        "LANG",
        "DISPLAY",
        "WAYLAND_DISPLAY",
    ];
    const OWN_PREFIXES: [&str; 3] = ["XDG_", "FLYCODE_", "LC_"];
    OWN.contains(&name) || OWN_PREFIXES.iter().any(|prefix| name.starts_with(prefix))
}

/// The value of the secret variable `name`: the one handed off to this process first, then the
/// environment's.
pub fn value(name: &str) -> Option<String> {
    if let Some((_, value)) = HELD
        .get()
        .and_then(|held| held.iter().find(|(held_name, _)| held_name == name))
    {
        return Some(value.clone());
    }
    std::env::var(name).ok()
}

/// Takes flycode's secrets (the variables `names`) out of its environment, as the module says:
/// receives a hand-off made to this process, or makes one and does not return. `Err` says why
/// the secrets could not be taken out (the command must stop: a program could read them). Call it
/// first thing in a command that runs programs, before reading standard input or starting
/// threads.
pub fn hand_off(names: &[String]) -> Result<(), String> {
    #[cfg(target_os = "linux")]
    {
        linux::hand_off(names)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = names;
        Ok(())
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::collections::BTreeMap;
    use std::io::{Read, Write};
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    use std::os::unix::process::CommandExt;
    use std::path::{Path, PathBuf};

    use super::{FILE_PREFIX, HANDOFF_VARIABLE, HELD, MAX_HANDOFF_BYTES};
    use crate::state::state_dir;

    /// Why the secrets could not be handed to the restarted image, or taken from the file.
    #[derive(Debug, thiserror::Error)]
    enum HandoffError {
        /// Nowhere to put the file.
        #[error("no state directory: set FLYCODE_STATE_DIR or HOME")]
        NoStateDir,
        /// A file or folder could not be made, written or read.
        #[error("{}: {error}", path.display())]
        Io {
            /// The file or folder.
            path: PathBuf,
            /// Why.
            error: std::io::Error,
        },
        /// The pairs could not be written as JSON (a fault of flycode).
        #[error("{0}")]
        Unencodable(serde_json::Error),
        /// The file could not be kept past its handle.
        #[error("keeping the hand-off file: {0}")]
        NotKept(std::io::Error),
        /// The file is not one flycode made.
        #[error("{} is not a regular file of this user's with mode 0600", .0.display())]
        NotPrivate(PathBuf),
        /// The file was read but could not be deleted.
        #[error("removing {}: {error}", path.display())]
        NotRemoved {
            /// The file.
            path: PathBuf,
            /// Why.
            error: std::io::Error,
        },
        /// The file holds no JSON object of names and values.
        #[error("{}: {error}", path.display())]
        NotJson {
            /// The file.
            path: PathBuf,
            /// What the parser said.
            error: serde_json::Error,
        },
    }

    /// An [`HandoffError::Io`] for `path`.
    fn io_at(path: &Path) -> impl Fn(std::io::Error) -> HandoffError + '_ {
        move |error| HandoffError::Io {
            path: path.to_owned(),
            error,
        }
    }

    pub(super) fn hand_off(names: &[String]) -> Result<(), String> {
        if let Some(path) = std::env::var_os(HANDOFF_VARIABLE).map(PathBuf::from)
            && is_named_for_this_process(&path)
        {
            // This image was started by a hand-off: never make another one.
            let pairs = take(&path)?;
            let _ = HELD.set(pairs.into_iter().collect());
            return Ok(());
        }
        // A variable left by another flycode (flycode run by a program flycode ran) names
        // another pid's file: ignored.
        let pairs: BTreeMap<String, String> = names
            .iter()
            .filter_map(|name| {
                std::env::var(name)
                    .ok()
                    .filter(|value| !value.is_empty())
                    .map(|value| (name.clone(), value))
            })
            .collect();
        if pairs.is_empty() {
            return Ok(());
        }
        let refuse = |why: String| {
            Err(format!(
                "cannot take the secret variables ({}) out of flycode's own environment ({why}), where a program could read them from /proc; set FLYCODE_STATE_DIR to a folder of yours, or unset them",
                pairs.keys().cloned().collect::<Vec<_>>().join(", ")
            ))
        };
        let path = match write_handoff(&pairs) {
            Ok(path) => path,
            Err(why) => return refuse(why.to_string()),
        };
        let error = match std::env::current_exe() {
            Ok(program) => {
                let mut command = std::process::Command::new(program);
                command
                    .args(std::env::args_os().skip(1))
                    .env(HANDOFF_VARIABLE, &path);
                for name in pairs.keys() {
                    command.env_remove(name);
                }
                // The restarted image decides the very places this one did.
                crate::own_places::carry(&mut command);
                // Only returns on failure.
                command.exec()
            }
            Err(error) => error,
        };
        let _ = std::fs::remove_file(&path);
        refuse(format!("restarting flycode failed: {error}"))
    }

    /// Takes the hand-off file at `path`, made for this process: its pairs, or why the command
    /// must stop. A file that cannot be taken is deleted all the same (a secret must not stay on
    /// disk), unless it lies outside the state folder (then it is not flycode's to delete).
    fn take(path: &Path) -> Result<BTreeMap<String, String>, String> {
        if !is_in_state_dir(path) {
            return Err(format!(
                "the secrets handed over at start are in {}, outside flycode's state folder; flycode will not read them there. Start flycode again",
                path.display()
            ));
        }
        receive(path).map_err(|why| {
            let _ = std::fs::remove_file(path);
            format!(
                "the secrets handed over at start could not be read ({why}); the file is deleted. Start flycode again"
            )
        })
    }

    /// Whether `path` names a hand-off file made for this pid (the pid survives `execve`;
    /// another process's variable, inherited, names another pid).
    fn is_named_for_this_process(path: &Path) -> bool {
        let prefix = format!("{FILE_PREFIX}{}-", std::process::id());
        path.file_name()
            .and_then(|name| name.to_str())
            .is_some_and(|name| name.starts_with(&prefix))
    }

    /// Whether `path` lies directly in the state directory.
    fn is_in_state_dir(path: &Path) -> bool {
        state_dir().is_some_and(|dir| path.parent() == Some(dir.as_path()))
    }

    /// Whether `path` names a hand-off file made for this pid in the state directory.
    #[cfg(test)]
    fn is_for_this_process(path: &Path) -> bool {
        is_named_for_this_process(path) && is_in_state_dir(path)
    }

    /// Writes the pairs to a new file in the state directory, readable by this user alone.
    fn write_handoff(pairs: &BTreeMap<String, String>) -> Result<PathBuf, HandoffError> {
        let dir = state_dir().ok_or(HandoffError::NoStateDir)?;
        std::fs::create_dir_all(&dir).map_err(io_at(&dir))?;
        let text = serde_json::to_string(pairs).map_err(HandoffError::Unencodable)?;
        // tempfile creates the file exclusively (O_EXCL), mode 0600, under a random name.
        let mut file = tempfile::Builder::new()
            .prefix(&format!("{FILE_PREFIX}{}-", std::process::id()))
            .rand_bytes(16)
            .tempfile_in(&dir)
            .map_err(io_at(&dir))?;
        let written = file
            .write_all(text.as_bytes())
            .and_then(|()| file.as_file().sync_data());
        written.map_err(io_at(file.path()))?;
        file.into_temp_path()
            .keep()
            .map_err(|e| HandoffError::NotKept(e.error))
    }

    /// Reads and deletes the hand-off file, after checking it is one flycode made.
    fn receive(path: &Path) -> Result<BTreeMap<String, String>, HandoffError> {
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(path)
            .map_err(io_at(path))?;
        let meta = file.metadata().map_err(io_at(path))?;
        if !meta.file_type().is_file()
            || meta.uid() != rustix::process::geteuid().as_raw()
            || meta.mode() & 0o777 != 0o600
        {
            return Err(HandoffError::NotPrivate(path.to_owned()));
        }
        let mut text = String::new();
        let read = (&mut file)
            .take(MAX_HANDOFF_BYTES)
            .read_to_string(&mut text);
        // Deleted whatever it holds: a secret must not stay on disk.
        let removed = std::fs::remove_file(path);
        read.map_err(io_at(path))?;
        removed.map_err(|error| HandoffError::NotRemoved {
            path: path.to_owned(),
            error,
        })?;
        serde_json::from_str(&text).map_err(|error| HandoffError::NotJson {
            path: path.to_owned(),
            error,
        })
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn only_a_file_named_for_this_pid_in_the_state_directory_is_taken() {
            let Some(dir) = state_dir() else { return };
            let pid = std::process::id();
            assert!(is_for_this_process(
                &dir.join(format!("{FILE_PREFIX}{pid}-abc"))
            ));
            assert!(!is_for_this_process(
                &dir.join(format!("{FILE_PREFIX}{}-abc", pid.wrapping_add(1)))
            ));
            assert!(!is_for_this_process(
                &dir.join("sub").join(format!("{FILE_PREFIX}{pid}-abc"))
            ));
            assert!(!is_for_this_process(Path::new(&format!(
                "/tmp/{FILE_PREFIX}{pid}-abc"
            ))));
        }

        #[test]
        fn a_hand_off_that_cannot_be_received_is_deleted_and_stops_the_command() {
            let Some(dir) = state_dir() else { return };
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join(format!("{FILE_PREFIX}{}-planted", std::process::id()));
            std::fs::write(&path, br#"{"FLYCODE_API_KEY":"sk-0123456789"}"#).unwrap();
            // Readable by others: not a file flycode made.
            let mode = std::os::unix::fs::PermissionsExt::from_mode(0o644);
            std::fs::set_permissions(&path, mode).unwrap();
            let error = take(&path).unwrap_err();
            assert!(
                error.contains("could not be read") && error.contains("deleted"),
                "{error}"
            );
            assert!(!path.exists());
            // Outside the state folder: refused, and not flycode's to delete.
            let temp = tempfile::tempdir().unwrap();
            let outside = temp
                .path()
                .join(format!("{FILE_PREFIX}{}-x", std::process::id()));
            std::fs::write(&outside, "{}").unwrap();
            assert!(
                take(&outside)
                    .unwrap_err()
                    .contains("outside flycode's state folder")
            );
            assert!(outside.exists());
        }

        #[test]
        fn a_hand_off_file_round_trips_and_is_deleted_once_read() {
            let temp = tempfile::tempdir().unwrap();
            let mut file = tempfile::Builder::new()
                .prefix(FILE_PREFIX)
                .tempfile_in(temp.path())
                .unwrap();
            file.write_all(br#"{"FLYCODE_API_KEY":"sk-0123456789"}"#)
                .unwrap();
            let path = file.into_temp_path().keep().unwrap();
            let pairs = receive(&path).unwrap();
            assert_eq!(pairs["FLYCODE_API_KEY"], "sk-0123456789");
            assert!(!path.exists());
        }

        #[test]
        fn a_link_or_a_file_others_may_read_is_refused() {
            let temp = tempfile::tempdir().unwrap();
            let real = temp.path().join("real");
            std::fs::write(&real, "{}").unwrap();
            let mode = |mode| std::os::unix::fs::PermissionsExt::from_mode(mode);
            // A link to a file that would pass is refused: it is not followed.
            std::fs::set_permissions(&real, mode(0o600)).unwrap();
            let link = temp.path().join("link");
            std::os::unix::fs::symlink(&real, &link).unwrap();
            assert!(receive(&link).is_err());
            assert!(link.exists() && real.exists());
            std::fs::set_permissions(&real, mode(0o644)).unwrap();
            let error = receive(&real).unwrap_err();
            assert!(error.to_string().contains("mode 0600"), "{error}");
            assert!(real.exists());
        }
    }
}
