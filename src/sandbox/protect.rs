//! Protected paths: what no file tool may write, move, remove or chmod, whatever the approval
//! mode. flycode's own configuration (`flycode.toml` anywhere in the roots, the user's flycode
//! configuration directory) and everything inside a `.git` directory (hooks run code) are always
//! protected; the configuration can add glob patterns but never remove these.

use std::path::{Path, PathBuf};

use globset::{Glob, GlobSet, GlobSetBuilder};

use super::error::SandboxError;

/// The file name of flycode's configuration.
pub const CONFIG_FILE_NAME: &str = "flycode.toml";

/// The set of protected paths.
#[derive(Clone, Debug)]
pub struct Protection {
    config_dir: Option<PathBuf>,
    extra: GlobSet,
    extra_patterns: Vec<String>,
    own_files: Vec<PathBuf>,
}

impl Default for Protection {
    fn default() -> Protection {
        Protection {
            config_dir: user_config_dir(),
            extra: GlobSet::empty(),
            extra_patterns: Vec::new(),
            own_files: Vec::new(),
        }
    }
}

/// `$XDG_CONFIG_HOME/flycode` or `~/.config/flycode` (the platform's equivalent elsewhere).
pub fn user_config_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")))?;
    let dir = base.join("flycode");
    Some(std::fs::canonicalize(&dir).unwrap_or(dir))
}

impl Protection {
    /// Adds glob patterns (matched against absolute resolved paths, e.g. `**/secrets/**`).
    pub fn with_patterns(mut self, patterns: &[String]) -> Result<Protection, String> {
        let mut builder = GlobSetBuilder::new();
        for pattern in patterns {
            builder.add(
                Glob::new(pattern)
                    .map_err(|e| format!("protected path {pattern:?}: {}", e.kind()))?,
            );
        }
        self.extra = builder.build().map_err(|e| e.to_string())?;
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

    /// Sets the user configuration directory (tests, or a platform without one).
    pub fn with_config_dir(mut self, dir: Option<PathBuf>) -> Protection {
        self.config_dir = dir;
        self
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
