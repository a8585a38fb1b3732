//! Protected paths: what no file tool may write, move, remove or chmod, whatever the approval
//! mode. flycode's own configuration (`flycode.toml` anywhere in the roots, the user's flycode
//! configuration directory) and everything inside a `.git` directory (hooks run code) are always
//! protected; the configuration can add glob patterns but never remove these.
//!
//! flycode's own files go further (PROTOCOL.md §10, "Protected paths"): no file tool may even
//! read them, inside a root or not: the state directory (its journal, audit log, replay stores,
//! sessions, transcripts and the key that seals them), the user's configuration directory, and
//! the files this run records (its transcripts). The audit log and the replay stores hold other
//! calls' content, and the journal decides what the next start does. The one exception is the
//! default inbox (`STATE/inbox`): the replies and results there are the user's, readable but not
//! changed by tools. [`Protection::own_reason`] is asked by the sandbox for every path it
//! resolves ([`super::Sandbox::resolve`]), so no tool can miss it; walks skip the directories of
//! [`Protection::own_paths`].

use std::path::{Path, PathBuf};

use globset::{Glob, GlobSet, GlobSetBuilder};

use super::error::SandboxError;

/// The file name of flycode's configuration.
pub const CONFIG_FILE_NAME: &str = "flycode.toml";

/// The set of protected paths.
#[derive(Clone, Debug)]
pub struct Protection {
    config_dir: Option<PathBuf>,
    state_dir: Option<PathBuf>,
    extra: GlobSet,
    extra_patterns: Vec<String>,
    own_files: Vec<PathBuf>,
    records: Vec<PathBuf>,
    /// [`Protection::own_dirs`], resolved on first use: every path a tool names is checked
    /// against them, and resolving them (`canonicalize`, up the ancestors of a directory not
    /// made yet) on each check cost more than the rest of a small call. Only flycode makes these
    /// directories, and no tool or program may turn an ancestor of one into a link, so what they
    /// resolve to does not change while flycode runs.
    settled_dirs: std::sync::OnceLock<Vec<(PathBuf, OwnDir)>>,
}

impl Default for Protection {
    fn default() -> Protection {
        Protection {
            config_dir: user_config_dir(),
            state_dir: super::state::state_dir(),
            extra: GlobSet::empty(),
            extra_patterns: Vec::new(),
            own_files: Vec::new(),
            records: Vec::new(),
            settled_dirs: std::sync::OnceLock::new(),
        }
    }
}

/// The folder of the state directory that `watch` uses as its inbox when there is no display:
/// the replies and results there are the user's, readable by tools (never changed by them).
pub const STATE_INBOX: &str = "inbox";

/// `path` with links resolved as far as it exists: the deepest existing ancestor canonical, the
/// missing rest as given (a state directory flycode has not made yet is compared the same way
/// a path the model names is resolved).
pub fn settled(path: &Path) -> PathBuf {
    let mut missing = Vec::new();
    let mut existing = path;
    loop {
        if let Ok(canonical) = std::fs::canonicalize(existing) {
            return missing
                .iter()
                .rev()
                .fold(canonical, |path: PathBuf, name| path.join(name));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                missing.push(name.to_owned());
                existing = parent;
            }
            _ => return path.to_owned(),
        }
    }
}

/// Which of flycode's own directories a path lies in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OwnDir {
    State,
    Config,
}

/// The person's configuration folder, decided once ([`super::own_places`]): `$FLYCODE_CONFIG_DIR`,
/// else `$XDG_CONFIG_HOME/flycode`, else `~/.config/flycode`.
pub fn user_config_dir() -> Option<PathBuf> {
    super::own_places::own_places().config_dir.clone()
}

/// Why the `protected` patterns of flycode.toml cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ProtectError {
    /// A pattern is not a glob.
    #[error("protected path {pattern:?}: {kind}; write a glob such as \"**/secrets/**\"")]
    BadPattern {
        /// The pattern as written.
        pattern: String,
        /// What is wrong with it.
        kind: globset::ErrorKind,
    },
    /// The patterns could not be combined.
    #[error("protected paths: {0}")]
    Unusable(globset::Error),
}

impl Protection {
    /// Adds glob patterns (matched against absolute resolved paths, e.g. `**/secrets/**`).
    pub fn with_patterns(mut self, patterns: &[String]) -> Result<Protection, ProtectError> {
        let mut builder = GlobSetBuilder::new();
        for pattern in patterns {
            builder.add(Glob::new(pattern).map_err(|e| ProtectError::BadPattern {
                pattern: pattern.clone(),
                kind: e.kind().clone(),
            })?);
        }
        self.extra = builder.build().map_err(ProtectError::Unusable)?;
        self.extra_patterns = patterns.to_vec();
        Ok(self)
    }

    /// Adds files flycode itself reads or writes while it runs (a role or system prompt file, a
    /// run's transcript): the agent must not change what it is told or what is recorded.
    pub fn with_own_files(mut self, files: &[PathBuf]) -> Protection {
        for file in files {
            let resolved = match (file.parent(), file.file_name()) {
                (Some(dir), Some(name)) => std::fs::canonicalize(if dir.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    dir
                })
                .map(|dir| dir.join(name))
                .unwrap_or_else(|_| file.clone()),
                _ => file.clone(),
            };
            let resolved = std::fs::canonicalize(&resolved).unwrap_or(resolved);
            self.own_files.push(resolved);
        }
        self
    }

    /// Adds files flycode records during this run (its transcripts): like
    /// [`Protection::with_own_files`], and no tool may read them either.
    pub fn with_records(mut self, files: &[PathBuf]) -> Protection {
        let before = self.own_files.len();
        self = self.with_own_files(files);
        let added = self.own_files.split_off(before);
        self.records.extend(added.iter().cloned());
        self.own_files.extend(added);
        self
    }

    /// Sets the user configuration directory (tests, or a platform without one).
    pub fn with_config_dir(mut self, dir: Option<PathBuf>) -> Protection {
        self.config_dir = dir;
        self.settled_dirs = std::sync::OnceLock::new();
        self
    }

    /// Sets the state directory (tests, or a platform without one).
    pub fn with_state_dir(mut self, dir: Option<PathBuf>) -> Protection {
        self.state_dir = dir;
        self.settled_dirs = std::sync::OnceLock::new();
        self
    }

    /// flycode's own directories (links resolved as far as they exist when first asked).
    fn own_dirs(&self) -> &[(PathBuf, OwnDir)] {
        self.settled_dirs.get_or_init(|| {
            let state = self.state_dir.iter().map(|d| (settled(d), OwnDir::State));
            let config = self.config_dir.iter().map(|d| (settled(d), OwnDir::Config));
            state.chain(config).collect()
        })
    }

    /// The files this run records (its transcripts), links resolved.
    pub fn records(&self) -> &[PathBuf] {
        &self.records
    }

    /// What a walk through the roots (fs.search, fs.ls, fs.readMany's patterns) must not enter or
    /// show: flycode's own directories and the files it records, links resolved.
    pub fn own_paths(&self) -> Vec<PathBuf> {
        self.own_dirs()
            .iter()
            .map(|(dir, _)| dir.clone())
            .chain(self.records.iter().cloned())
            .collect()
    }

    /// Why `path` (absolute, resolved, inside the allowed `root`) is flycode's own and no tool
    /// may read or change it, if it is. A root that lies inside one of flycode's directories
    /// (tests do this) is the user's: only paths of that directory outside the root are
    /// flycode's, and those are outside the roots anyway.
    pub fn own_reason(&self, path: &Path, root: &Path) -> Option<String> {
        for (dir, which) in self.own_dirs() {
            if !path.starts_with(dir) || (root.starts_with(dir) && root != dir) {
                continue;
            }
            let reason = match which {
                // The default inbox holds the user's replies and results.
                OwnDir::State if path.starts_with(dir.join(STATE_INBOX)) => continue,
                OwnDir::State => format!(
                    "it is flycode's own, inside its state directory {}: no file tool reads or changes anything there, even inside a root, because the audit log and the replay stores hold other calls' content and the journal, sessions and key decide what flycode does; ask the user if you need something from it",
                    dir.display()
                ),
                OwnDir::Config => format!(
                    "it is flycode's own, inside the user's flycode configuration directory {}: no file tool reads or changes anything there; ask the user if you need a setting",
                    dir.display()
                ),
            };
            return Some(reason);
        }
        if self.records.iter().any(|record| record == path) {
            return Some(
                "it is flycode's own: a transcript this run records; no file tool reads or changes it"
                    .into(),
            );
        }
        None
    }

    /// Why `path` (absolute, resolved) is protected, if it is.
    pub fn reason(&self, path: &Path) -> Option<String> {
        // Compared without regard to ASCII case: on a case-insensitive file system `.GIT` is `.git`.
        let is = |name: &std::ffi::OsStr, wanted: &str| {
            name.to_str()
                .is_some_and(|n| n.eq_ignore_ascii_case(wanted))
        };
        if path.components().any(|c| is(c.as_os_str(), ".git")) {
            return Some("it is inside a .git directory, whose hooks run code".into());
        }
        if path
            .file_name()
            .is_some_and(|name| is(name, CONFIG_FILE_NAME))
        {
            return Some("it is flycode's configuration".into());
        }
        if let Some(dir) = &self.config_dir
            && path.starts_with(dir)
        {
            return Some("it is inside flycode's configuration directory".into());
        }
        if let Some((dir, _)) = self
            .own_dirs()
            .iter()
            .find(|(_, which)| *which == OwnDir::State)
            && path.starts_with(dir.join(STATE_INBOX))
        {
            return Some(
                "it is inside flycode's default inbox: what is there is the user's replies and flycode's results"
                    .into(),
            );
        }
        if self.own_files.iter().any(|own| own == path) {
            return Some("flycode reads or records it during this run".into());
        }
        if self.extra.is_match(path) {
            return Some("it matches a protected-path pattern of the configuration".into());
        }
        None
    }

    /// Refuses a change to `path`.
    pub fn check(&self, input: &str, path: &Path) -> Result<(), SandboxError> {
        match self.reason(path) {
            Some(reason) => Err(SandboxError::Denied {
                path: input.to_owned(),
                reason: format!("flycode never changes this path: {reason}"),
            }),
            None => Ok(()),
        }
    }

    /// Refuses to remove a tree that holds a protected path.
    pub fn check_tree(&self, input: &str, dir: &Path) -> Result<(), SandboxError> {
        self.check(input, dir)?;
        if let Some(own) = self
            .own_paths()
            .into_iter()
            .find(|own| own.starts_with(dir))
        {
            return Err(SandboxError::Denied {
                path: input.to_owned(),
                reason: format!(
                    "it holds {}, which is flycode's own (its state, configuration or a transcript of this run): flycode never removes or moves it",
                    own.display()
                ),
            });
        }
        let walker = ignore::WalkBuilder::new(dir)
            .standard_filters(false)
            .follow_links(false)
            .build();
        for entry in walker.filter_map(Result::ok) {
            if let Some(reason) = self.reason(entry.path()) {
                return Err(SandboxError::Denied {
                    path: input.to_owned(),
                    reason: format!(
                        "it holds {}, which flycode never changes: {reason}",
                        entry.path().display()
                    ),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_config_and_patterns_are_protected() {
        let protection = Protection::default()
            .with_config_dir(Some(PathBuf::from("/home/u/.config/flycode")))
            .with_patterns(&["**/secrets/**".to_owned()])
            .unwrap();
        for path in [
            "/w/app/.git/hooks/pre-commit",
            "/w/app/.git",
            "/w/app/flycode.toml",
            "/w/app/sub/flycode.toml",
            "/home/u/.config/flycode/anything",
            "/w/app/secrets/key.pem",
            "/w/app/.GIT/hooks/x",
            "/w/app/FlyCode.TOML",
        ] {
            assert!(protection.reason(Path::new(path)).is_some(), "{path}");
        }
        for path in [
            "/w/app/src/main.rs",
            "/w/app/.github/x.yml",
            "/w/app/flycode.toml.bak",
            "/w/app/git",
        ] {
            assert!(protection.reason(Path::new(path)).is_none(), "{path}");
        }
    }

    #[test]
    fn flycodes_own_files_are_refused_for_any_access_but_a_root_inside_them_is_the_users() {
        let temp = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(temp.path()).unwrap();
        // Neither directory exists yet: compared as they will be made.
        let state = home.join(".local/state/flycode");
        let config = home.join(".config/flycode");
        let transcript = home.join("run.jsonl");
        let protection = Protection::default()
            .with_state_dir(Some(state.clone()))
            .with_config_dir(Some(config.clone()))
            .with_records(std::slice::from_ref(&transcript));
        for own in [
            state.join("audit.jsonl"),
            state.join("journal/1-2-3.json"),
            state.clone(),
            config.join("flycode.toml"),
            transcript.clone(),
        ] {
            let reason = protection.own_reason(&own, &home).unwrap();
            assert!(reason.contains("flycode's own"), "{reason}");
        }
        assert!(
            protection
                .own_reason(&home.join("src/main.rs"), &home)
                .is_none()
        );
        // The default inbox is readable, not writable.
        let inbox = state.join("inbox/r.result.md");
        assert!(protection.own_reason(&inbox, &home).is_none());
        assert!(protection.reason(&inbox).is_some());
        // A root inside the state directory is the user's.
        let inner = state.join("ws");
        assert!(
            protection
                .own_reason(&inner.join("a.txt"), &inner)
                .is_none()
        );
        assert!(
            protection
                .own_reason(&state.join("a.txt"), &state)
                .is_some()
        );
        // No tree holding one may be removed, and walks skip them.
        assert!(protection.check_tree("home", &home.join(".local")).is_err());
        assert!(protection.own_paths().contains(&state));
    }

    #[test]
    fn a_tree_holding_a_protected_path_cannot_be_removed() {
        let temp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(temp.path().join("repo/.git/hooks")).unwrap();
        std::fs::create_dir_all(temp.path().join("plain/a")).unwrap();
        let protection = Protection::default().with_config_dir(None);
        let error = protection
            .check_tree("repo", &temp.path().join("repo"))
            .unwrap_err();
        assert!(error.to_string().contains(".git"), "{error}");
        assert!(
            protection
                .check_tree("plain", &temp.path().join("plain"))
                .is_ok()
        );
    }
}
