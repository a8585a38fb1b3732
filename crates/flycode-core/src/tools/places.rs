//! Where the tools that read flycode's own material look (PROTOCOL.md §9 (Tools: memory and
//! hints)): the state directory (earlier sessions, for `memory.query`), the user's configuration
//! directory and the project folder (hints and predefined agents). A door fills it from its
//! configuration; the project's folder counts only when the person trusts its `flycode.toml`,
//! because what a hint or a predefined agent says becomes the model's instructions.

use std::path::{Path, PathBuf};

/// The folders behind `memory.query`, the hint tools and predefined agents.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Places {
    /// flycode's state directory (`runs/` holds the transcripts of earlier runs).
    pub state_dir: Option<PathBuf>,
    /// `$XDG_CONFIG_HOME/flycode` (or `~/.config/flycode`): the user's hints and agents.
    pub user_config: Option<PathBuf>,
    /// The project folder (the one holding the `flycode.toml` that applies) and whether the
    /// person trusts it.
    pub project: Option<(PathBuf, bool)>,
    /// `memory.query` searches the saved sessions of every project, not only those whose roots
    /// overlap the session's: the person's opt-in, [`MEMORY_ALL_ROOTS`] in flycode's environment
    /// (nothing a model writes in a call can set it).
    pub memory_all_roots: bool,
}

/// The environment variable by which the person lets `memory.query` search every project's
/// saved sessions: `1`, `true` or `yes`.
pub const MEMORY_ALL_ROOTS: &str = "FLYCODE_MEMORY_ALL_ROOTS";

impl Places {
    /// The state and configuration directories the environment names, no project.
    pub fn from_environment() -> Places {
        let all_roots = std::env::var(MEMORY_ALL_ROOTS).is_ok_and(|value| {
            matches!(
                value.trim().to_ascii_lowercase().as_str(),
                "1" | "true" | "yes"
            )
        });
        Places {
            state_dir: crate::sandbox::state::state_dir(),
            user_config: crate::sandbox::protect::user_config_dir(),
            project: None,
            memory_all_roots: all_roots,
        }
    }

    /// The folder `sub` (`hints`, `agents`) of each place in the order they are searched: the
    /// trusted project's `.flycode/SUB` first, then the user's `SUB`. An untrusted project's
    /// folder is left out (see [`Places::untrusted_project_dir`]).
    pub fn search_dirs(&self, sub: &str) -> Vec<PathBuf> {
        let project = self
            .project
            .as_ref()
            .filter(|(_, trusted)| *trusted)
            .map(|(dir, _)| dir.join(".flycode").join(sub));
        let user = self.user_config.as_ref().map(|dir| dir.join(sub));
        project.into_iter().chain(user).collect()
    }

    /// Whether `path` (a hint's folder, an agent's file, as found in [`Places::search_dirs`]) may
    /// be read into a prompt: the user's are the user's; in the project, only what stays inside
    /// the project folder once links are resolved. A `.flycode/hints/NAME` or `.flycode/agents`
    /// that is a link leading out of the project would carry a file from elsewhere (the person's
    /// `~/.ssh`, another project) into the model's instructions, and is refused (PROTOCOL.md §9
    /// (Hints), (Predefined agents)).
    pub fn stays_in_place(&self, path: &Path) -> bool {
        let Some((project, _)) = &self.project else {
            return true;
        };
        if !path.starts_with(project.join(".flycode")) {
            return true;
        }
        match (
            crate::sandbox::host::canonicalize(project),
            crate::sandbox::host::canonicalize(path),
        ) {
            (Ok(project), Ok(resolved)) => resolved.starts_with(project),
            _ => false,
        }
    }

    /// `.flycode/SUB` of the project when the person does not trust it: named in a refusal.
    pub fn untrusted_project_dir(&self, sub: &str) -> Option<PathBuf> {
        self.project
            .as_ref()
            .filter(|(_, trusted)| !*trusted)
            .map(|(dir, _)| dir.join(".flycode").join(sub))
    }
}

/// Whether `name` can name a hint or a predefined agent: 1 to 64 letters, digits, `.`, `_` and
/// `-`, not starting with `.` (so never `.` or `..`), no path separator.
pub fn is_plain_name(name: &str) -> bool {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
    first_ok
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Whether `path` exists as a directory (links followed; flycode's own configuration).
pub fn is_dir(path: &Path) -> bool {
    crate::sandbox::host::canonicalize(path).is_ok_and(|resolved| {
        crate::sandbox::host::symlink_metadata(&resolved).is_ok_and(|m| m.is_dir())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_have_no_separators_or_dots_first() {
        for good in ["review", "a.b", "x_1-2", "A"] {
            assert!(is_plain_name(good), "{good}");
        }
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "a/b",
            "a\\b",
            ".hidden",
            "a b",
            &"x".repeat(65),
        ] {
            assert!(!is_plain_name(bad), "{bad}");
        }
    }

    #[test]
    fn an_untrusted_project_is_not_searched() {
        let places = Places {
            state_dir: None,
            user_config: Some(PathBuf::from("/c")),
            project: Some((PathBuf::from("/p"), false)),
            memory_all_roots: false,
        };
        assert_eq!(places.search_dirs("hints"), [PathBuf::from("/c/hints")]);
        assert_eq!(
            places.untrusted_project_dir("hints"),
            Some(PathBuf::from("/p/.flycode/hints"))
        );
        let trusted = Places {
            project: Some((PathBuf::from("/p"), true)),
            ..places
        };
        assert_eq!(
            trusted.search_dirs("agents"),
            [
                PathBuf::from("/p/.flycode/agents"),
                PathBuf::from("/c/agents")
            ]
        );
    }
}
