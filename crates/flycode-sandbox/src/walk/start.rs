//! Where a walk starts: the path opened through directory handles before the walk begins, with
//! the directories above it (whose ignore files still apply) opened one name at a time without
//! following a link.

use std::ffi::OsStr;
use std::fs::File;
use std::path::{Component, Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::Dir;

use super::open_subdir;
use crate::{RootedPath, Sandbox, SandboxError};

/// Where a walk starts, opened through directory handles before the walk starts.
pub struct Start {
    /// What the walk starts from.
    pub target: WalkTarget,
    /// The directories above a directory target, outermost first, with their link-free paths:
    /// only their ignore files are read.
    pub ancestors: Vec<(PathBuf, Dir)>,
    /// The directory target's link-free absolute path.
    pub canonical: PathBuf,
    /// The root inside which a link to an ignore file may be followed, and its absolute path.
    pub root: Option<(Dir, PathBuf)>,
    /// Link-free absolute paths the walk never enters or hands out: flycode's own files.
    pub skip: Vec<PathBuf>,
}

/// What the search path is.
pub enum WalkTarget {
    /// A directory, walked.
    Dir(Dir),
    /// A file, searched alone.
    File(File),
}

impl Start {
    /// A directory already opened inside the allowed root `root` (whose absolute path is
    /// `root_path`), at `relative` below it; `canonical` is its link-free absolute path. The
    /// directories above it are opened one name at a time without following links: inside the
    /// root from the root's handle, above the root from `/`.
    pub fn directory(
        dir: Dir,
        canonical: PathBuf,
        root: &Dir,
        root_path: &Path,
        relative: &Path,
    ) -> Start {
        let mut ancestors = Vec::new();
        let above = names(root_path);
        if let Some((_, above)) = above.split_last()
            && let Ok(slash) = Dir::open_ambient_dir("/", ambient_authority())
        {
            ancestors.extend(descend(slash, Path::new("/"), above));
        }
        let inside = names(relative);
        if let Some((_, inside)) = inside.split_last()
            && let Ok(root) = root.try_clone()
        {
            ancestors.extend(descend(root, root_path, inside));
        }
        Start {
            target: WalkTarget::Dir(dir),
            ancestors,
            canonical,
            root: root.try_clone().ok().map(|r| (r, root_path.to_path_buf())),
            skip: Vec::new(),
        }
    }

    /// The same start, never entering or handing out `paths` (link-free, absolute): flycode's
    /// own directories and files ([`crate::Protection::own_paths`]).
    pub fn skipping(mut self, paths: Vec<PathBuf>) -> Start {
        self.skip = paths;
        self
    }

    /// A single file, already opened for reading.
    pub fn file(file: File) -> Start {
        Start {
            target: WalkTarget::File(file),
            ancestors: Vec::new(),
            canonical: PathBuf::new(),
            root: None,
            skip: Vec::new(),
        }
    }
}

/// Opens the directory `input` through the sandbox, ready to be walked: a [`Start`] and its
/// resolved path (the prefix of every path the walk gives).
pub fn open_dir_start(sandbox: &Sandbox, input: &str) -> Result<(Start, RootedPath), SandboxError> {
    let (dir, path) = sandbox.open_dir(input)?;
    let root = sandbox.root_dir(&path);
    let root_path = path
        .absolute
        .ancestors()
        .nth(path.relative.components().count())
        .unwrap_or(&path.absolute)
        .to_path_buf();
    let start = Start::directory(dir, path.absolute.clone(), root, &root_path, &path.relative)
        .skipping(sandbox.protection().own_paths());
    Ok((start, path))
}

/// The normal components of a path, as names.
pub fn names(path: &Path) -> Vec<&OsStr> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name),
            _ => None,
        })
        .collect()
}

/// `start` (at `start_path`) and the directories below it along `names`, each opened from the one
/// before without following links; stops at the first that cannot be opened.
pub fn descend(start: Dir, start_path: &Path, names: &[&OsStr]) -> Vec<(PathBuf, Dir)> {
    let mut chain = Vec::with_capacity(names.len() + 1);
    let mut path = start_path.to_path_buf();
    let mut current = start;
    for name in names {
        let next = open_subdir(&current, name);
        chain.push((path.clone(), current));
        path.push(name);
        match next {
            Ok(next) => current = next,
            Err(_) => return chain,
        }
    }
    chain.push((path, current));
    chain
}
