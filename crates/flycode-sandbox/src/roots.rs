//! Allowed roots: the directories every path argument must lie inside, resolved once at start
//! (symbolic links followed, `..` removed) so later containment checks compare real paths.

use std::path::{Path, PathBuf};

use thiserror::Error;

/// Why a root cannot be used.
#[derive(Debug, Error)]
pub enum RootsError {
    /// The directory does not exist or cannot be resolved.
    #[error(
        "allowed root {path:?} cannot be used: {source}; pass an existing directory with --root"
    )]
    Unresolvable {
        /// The root as given.
        path: PathBuf,
        /// Why it could not be resolved.
        source: std::io::Error,
    },
    /// The root is the file system's root.
    #[error(
        "allowed root {path:?} is the whole file system; name a project directory, or pass --allow-filesystem-root"
    )]
    WholeFileSystem {
        /// The root.
        path: PathBuf,
    },
    /// The path is not a directory.
    #[error("allowed root {path:?} is not a directory; pass a directory with --root")]
    NotADirectory {
        /// The root as given.
        path: PathBuf,
    },
}

/// The resolved allowed roots, in the order given, without duplicates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Roots(Vec<PathBuf>);

impl Roots {
    /// Resolves `dirs` (relative ones against the current directory); the current directory when
    /// `dirs` is empty.
    pub fn resolve(dirs: &[PathBuf]) -> Result<Roots, RootsError> {
        let current = [PathBuf::from(".")];
        let dirs = if dirs.is_empty() { &current[..] } else { dirs };
        let mut roots: Vec<PathBuf> = Vec::new();
        for dir in dirs {
            let resolved = resolve_one(dir)?;
            if !roots.contains(&resolved) {
                roots.push(resolved);
            }
        }
        Ok(Roots(roots))
    }

    /// Refuses `/` (or a drive root) as a root unless `allowed`: it would put the whole machine
    /// in reach.
    pub fn refuse_whole_file_system(&self, allowed: bool) -> Result<(), RootsError> {
        match self.0.iter().find(|root| root.parent().is_none()) {
            Some(root) if !allowed => Err(RootsError::WholeFileSystem { path: root.clone() }),
            _ => Ok(()),
        }
    }

    /// The roots as paths.
    pub fn paths(&self) -> &[PathBuf] {
        &self.0
    }

    /// The roots as display strings.
    pub fn display_strings(&self) -> Vec<String> {
        self.0.iter().map(|p| p.display().to_string()).collect()
    }
}

fn resolve_one(dir: &Path) -> Result<PathBuf, RootsError> {
    let resolved = std::fs::canonicalize(dir).map_err(|source| RootsError::Unresolvable {
        path: dir.to_owned(),
        source,
    })?;
    if !resolved.is_dir() {
        return Err(RootsError::NotADirectory {
            path: dir.to_owned(),
        });
    }
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn resolves_links_and_dot_dot() {
        let temp = tempfile::tempdir().unwrap();
        let real = temp.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, temp.path().join("link")).unwrap();
        let roots =
            Roots::resolve(&[temp.path().join("link/../real"), temp.path().join("link")]).unwrap();
        assert_eq!(roots.paths(), &[std::fs::canonicalize(&real).unwrap()]);
    }

    #[test]
    fn a_missing_root_is_a_clear_error() {
        let error = Roots::resolve(&[PathBuf::from("/no/such/dir")]).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("\"/no/such/dir\" cannot be used"),
            "{error}"
        );
    }
}
