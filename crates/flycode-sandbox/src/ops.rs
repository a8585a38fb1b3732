//! Directory creation, removal, moves and permission changes, each through the root's directory
//! handle after the path was resolved and checked.
//!
//! Removal and moves act on a link itself (its last component is not followed); an allowed root
//! is never removed or moved; a move never clobbers unless asked, atomically (`RENAME_NOREPLACE`
//! on Linux), and falls back to copy-then-remove across file systems.

use std::path::Path;

use cap_std::fs::Dir;
#[cfg(unix)]
use cap_std::fs::Permissions;

use super::error::SandboxError;
use super::files::Sandbox;
use super::resolve::LastComponent;

/// What a removal removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removed {
    /// A file or a link.
    File,
    /// A directory and everything in it.
    Directory,
    /// Nothing was there (`force`).
    Nothing,
}

impl Sandbox {
    /// Creates a directory; with `parents`, like `mkdir -p`.
    pub fn make_dir(&self, input: &str, parents: bool) -> Result<(), SandboxError> {
        let path = self.resolve(input, LastComponent::Follow)?;
        self.protection().check(input, &path.absolute)?;
        if path.exists {
            let is_dir = self.metadata(input).is_ok_and(|m| m.is_dir());
            if parents && is_dir {
                return Ok(());
            }
            return Err(SandboxError::AlreadyExists {
                path: input.to_owned(),
            });
        }
        let root = self.root_dir(&path);
        let made = if parents {
            root.create_dir_all(&path.relative)
        } else {
            root.create_dir(&path.relative)
        };
        made.map_err(|e| SandboxError::from_io(input, e))
    }

    /// Removes a file, a link (never its target) or, with `recursive`, a directory tree.
    pub fn remove(
        &self,
        input: &str,
        recursive: bool,
        force: bool,
    ) -> Result<Removed, SandboxError> {
        let path = match self.resolve(input, LastComponent::NoFollow) {
            Err(SandboxError::NotFound { .. }) if force => return Ok(Removed::Nothing),
            other => other?,
        };
        if self.holds_a_root(&path.absolute) {
            return Err(SandboxError::Denied {
                path: input.to_owned(),
                reason: "this is (or holds) an allowed root, which flycode never removes".into(),
            });
        }
        if !path.exists {
            return if force {
                Ok(Removed::Nothing)
            } else {
                Err(SandboxError::NotFound {
                    path: input.to_owned(),
                })
            };
        }
        let (parent, name) = self.parent_dir(input, &path, false)?;
        let metadata = parent
            .symlink_metadata(&name)
            .map_err(|e| SandboxError::from_io(input, e))?;
        if metadata.is_dir() {
            if !recursive {
                return Err(SandboxError::IsDirectory {
                    path: input.to_owned(),
                });
            }
            self.protection().check_tree(input, &path.absolute)?;
            // cap-std removes the tree without following links inside it.
            parent
                .remove_dir_all(&name)
                .map_err(|e| SandboxError::from_io(input, e))?;
            return Ok(Removed::Directory);
        }
        self.protection().check(input, &path.absolute)?;
        // A writer of this file finishes first; one that comes later finds it gone (PROTOCOL.md
        // §9, fs.write, "Concurrent writers").
        let _lock = super::lock::lock_entry(&parent, &name, &[]);
        parent
            .remove_file(&name)
            .map_err(|e| SandboxError::from_io(input, e))?;
        Ok(Removed::File)
    }

    /// Moves `from` to the final name `to`; an existing `to` needs `overwrite`.
    pub fn rename(&self, from: &str, to: &str, overwrite: bool) -> Result<(), SandboxError> {
        let source = self.resolve(from, LastComponent::NoFollow)?;
        let target = self.resolve(to, LastComponent::NoFollow)?;
        if !source.exists {
            return Err(SandboxError::NotFound {
                path: from.to_owned(),
            });
        }
        for (input, path) in [(from, &source), (to, &target)] {
            if self.holds_a_root(&path.absolute) {
                return Err(SandboxError::Denied {
                    path: input.to_owned(),
                    reason:
                        "this is (or holds) an allowed root, which flycode never moves or replaces"
                            .into(),
                });
            }
        }
        if target.absolute.starts_with(&source.absolute) && target.absolute != source.absolute {
            return Err(SandboxError::Denied {
                path: to.to_owned(),
                reason: format!("cannot move {from} into itself"),
            });
        }
        // A move changes everything below both names: check the whole trees, as fs.rm does.
        // A missing target is checked as a tree too: moving a folder of the model's to where one
        // of flycode's own directories would be made (`~/.local` before the state directory
        // exists) would plant its content there.
        self.protection().check_tree(from, &source.absolute)?;
        self.protection().check_tree(to, &target.absolute)?;
        let (source_dir, source_name) = self.parent_dir(from, &source, false)?;
        let (target_dir, target_name) = self.parent_dir(to, &target, true)?;
        if target.exists && !overwrite {
            return Err(SandboxError::AlreadyExists {
                path: to.to_owned(),
            });
        }
        // Writers of either file finish first, and later ones find the names as the move left
        // them: an append never lands on a name the move has just emptied or filled. Locked in
        // path order, as fs.writeBatch locks, so two moves cannot wait for each other.
        let mut ends = [
            (&source.absolute, &source_dir, &source_name),
            (&target.absolute, &target_dir, &target_name),
        ];
        ends.sort_by(|a, b| a.0.cmp(b.0));
        let mut locks: Vec<std::fs::File> = Vec::new();
        for (_, dir, name) in ends {
            if let Some(lock) = super::lock::lock_entry(dir, name, &locks) {
                locks.push(lock);
            }
        }
        let moved = if overwrite {
            source_dir.rename(&source_name, &target_dir, &target_name)
        } else {
            rename_no_replace(&source_dir, &source_name, &target_dir, &target_name)
        };
        match moved {
            Ok(()) => Ok(()),
            Err(error) if error.raw_os_error() == Some(CROSS_DEVICE) => copy_then_remove(
                &source_dir,
                &source_name,
                &target_dir,
                &target_name,
                overwrite,
                to,
            ),
            Err(error) => Err(SandboxError::from_io(to, error)),
        }
    }

    /// Sets permission bits (never setuid, setgid or sticky).
    pub fn set_mode(&self, input: &str, mode: u32) -> Result<(), SandboxError> {
        if mode & 0o7000 != 0 {
            return Err(SandboxError::Denied {
                path: input.to_owned(),
                reason: format!(
                    "mode {mode:04o} sets setuid, setgid or sticky bits, which flycode never sets"
                ),
            });
        }
        let path = self.resolve(input, LastComponent::Follow)?;
        self.protection().check(input, &path.absolute)?;
        self.keep_roots_usable(input, &path.absolute, mode)?;
        #[cfg(unix)]
        {
            use cap_std::fs::MetadataExt;
            let metadata = self.metadata(input)?;
            if metadata.is_file() && metadata.nlink() > 1 {
                return Err(SandboxError::Denied {
                    path: input.to_owned(),
                    reason: format!(
                        "the file has {} hard links, and its other names may lie outside the roots or be protected",
                        metadata.nlink()
                    ),
                });
            }
        }
        let root = self.root_dir(&path);
        #[cfg(not(unix))]
        {
            let _ = root;
            return Err(SandboxError::Denied {
                path: input.to_owned(),
                reason: "fs.chmod sets Unix permission bits, which this platform does not have"
                    .into(),
            });
        }
        #[cfg(unix)]
        let permissions = permissions_from_mode(mode);
        #[cfg(unix)]
        if path.is_root() {
            return root
                .open_with(".", cap_std::fs::OpenOptions::new().read(true))
                .and_then(|dir| dir.set_permissions(permissions))
                .map_err(|e| SandboxError::from_io(input, e));
        }
        #[cfg(unix)]
        return root
            .set_permissions(&path.relative, permissions)
            .map_err(|e| SandboxError::from_io(input, e));
    }

    /// Refuses a mode that takes from an allowed root the owner's read, write or search
    /// permission, or from a directory holding one the owner's search permission: flycode and
    /// the programs it runs would lose the root (PROTOCOL.md §9, fs.chmod).
    fn keep_roots_usable(
        &self,
        input: &str,
        absolute: &Path,
        mode: u32,
    ) -> Result<(), SandboxError> {
        let (needed, what, names) = if self.roots().iter().any(|root| root == absolute) {
            (0o700, "an allowed root", "read, write and search (u+rwx)")
        } else if self.holds_a_root(absolute) {
            (
                0o100,
                "a directory that holds an allowed root",
                "search (u+x)",
            )
        } else {
            return Ok(());
        };
        if mode & needed == needed {
            return Ok(());
        }
        Err(SandboxError::Denied {
            path: input.to_owned(),
            reason: format!(
                "this is {what}, and mode {mode:04o} would take the owner's {names} permission from it, locking flycode and its programs out; keep those bits (e.g. {:04o}), or change the files inside it instead",
                mode | needed
            ),
        })
    }

    /// The current permission bits of what `input` names.
    pub fn mode_of(&self, input: &str) -> Result<u32, SandboxError> {
        let metadata = self.metadata(input)?;
        #[cfg(unix)]
        {
            use cap_std::fs::PermissionsExt;
            Ok(metadata.permissions().mode() & 0o7777)
        }
        #[cfg(not(unix))]
        Ok(if metadata.permissions().readonly() {
            0o444
        } else {
            0o666
        })
    }
}

/// The operating system's "cross-device link" (EXDEV).
const CROSS_DEVICE: i32 = 18;

#[cfg(unix)]
fn permissions_from_mode(mode: u32) -> Permissions {
    use cap_std::fs::PermissionsExt;
    Permissions::from_mode(mode)
}

/// Renames only if the target does not exist, atomically where the platform allows.
#[cfg(target_os = "linux")]
fn rename_no_replace(from_dir: &Dir, from: &Path, to_dir: &Dir, to: &Path) -> std::io::Result<()> {
    use std::os::fd::AsFd;
    rustix::fs::renameat_with(
        from_dir.as_fd(),
        from,
        to_dir.as_fd(),
        to,
        rustix::fs::RenameFlags::NOREPLACE,
    )
    .map_err(std::io::Error::from)
}

/// Elsewhere: a hard link then unlink of the old name for files (fails if the target exists),
/// a checked rename for directories.
#[cfg(not(target_os = "linux"))]
fn rename_no_replace(from_dir: &Dir, from: &Path, to_dir: &Dir, to: &Path) -> std::io::Result<()> {
    if to_dir.symlink_metadata(to).is_ok() {
        return Err(std::io::Error::from(std::io::ErrorKind::AlreadyExists));
    }
    from_dir.rename(from, to_dir, to)
}

/// Across file systems: copy the source (files, links and trees; special files refused) under a
/// temporary name beside the target, and only then replace the target and remove the source, so a
/// failure part-way changes nothing.
fn copy_then_remove(
    from_dir: &Dir,
    from: &Path,
    to_dir: &Dir,
    to: &Path,
    overwrite: bool,
    shown: &str,
) -> Result<(), SandboxError> {
    let fail = |e: std::io::Error| SandboxError::from_io(shown, e);
    let staging = std::path::PathBuf::from(format!(
        "{}{}-move-{}",
        super::place::TEMP_PREFIX,
        std::process::id(),
        to.display()
    ));
    if let Err(error) = copy_tree(from_dir, from, to_dir, &staging) {
        let _ = remove_any(to_dir, &staging);
        return Err(match error.kind() {
            std::io::ErrorKind::Unsupported => SandboxError::SpecialFile {
                path: shown.to_owned(),
                kind: "FIFO, socket or device",
            },
            _ => fail(error),
        });
    }
    if overwrite && to_dir.symlink_metadata(to).is_ok() {
        remove_any(to_dir, to).map_err(fail)?;
    }
    to_dir.rename(&staging, to_dir, to).map_err(fail)?;
    remove_any(from_dir, from).map_err(fail)
}

fn remove_any(dir: &Dir, name: &Path) -> std::io::Result<()> {
    if dir.symlink_metadata(name)?.is_dir() {
        dir.remove_dir_all(name)
    } else {
        dir.remove_file(name)
    }
}

fn copy_tree(from_dir: &Dir, from: &Path, to_dir: &Dir, to: &Path) -> std::io::Result<()> {
    let metadata = from_dir.symlink_metadata(from)?;
    if metadata.is_symlink() {
        let target = from_dir.read_link_contents(from)?;
        return to_dir.symlink_contents(target, to);
    }
    if metadata.is_dir() {
        to_dir.create_dir(to)?;
        let source = from_dir.open_dir(from)?;
        let target = to_dir.open_dir(to)?;
        for entry in source.entries()? {
            let name = entry?.file_name();
            copy_tree(&source, Path::new(&name), &target, Path::new(&name))?;
        }
        return target.set_permissions(".", metadata.permissions());
    }
    if !metadata.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "special files are never copied",
        ));
    }
    from_dir.copy(from, to_dir, to).map(|_| ())
}

#[cfg(test)]
#[cfg(unix)]
mod tests {
    use std::os::unix::fs::{PermissionsExt, symlink};
    use std::path::PathBuf;

    use super::*;
    use crate::Roots;
    use flycode_protocol::ErrorCode;

    fn setup() -> (tempfile::TempDir, PathBuf, PathBuf, Sandbox) {
        let temp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(temp.path()).unwrap();
        let root = base.join("root");
        let outside = base.join("outside");
        std::fs::create_dir_all(root.join("dir/sub")).unwrap();
        std::fs::write(root.join("dir/sub/f.txt"), "f").unwrap();
        std::fs::write(root.join("a.txt"), "a").unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("keep.txt"), "keep").unwrap();
        let sandbox = Sandbox::open(&Roots::resolve(std::slice::from_ref(&root)).unwrap()).unwrap();
        (temp, root, outside, sandbox)
    }

    fn p(root: &Path, relative: &str) -> String {
        format!("{}/{relative}", root.display())
    }

    #[test]
    fn mkdir_follows_the_contract() {
        let (_t, root, _o, sandbox) = setup();
        sandbox.make_dir(&p(&root, "new"), false).unwrap();
        assert!(root.join("new").is_dir());
        assert_eq!(
            sandbox
                .make_dir(&p(&root, "new"), false)
                .unwrap_err()
                .code(),
            ErrorCode::AlreadyExists
        );
        assert_eq!(
            sandbox
                .make_dir(&p(&root, "x/y"), false)
                .unwrap_err()
                .code(),
            ErrorCode::NotFound
        );
        sandbox.make_dir(&p(&root, "x/y/z"), true).unwrap();
        sandbox.make_dir(&p(&root, "x/y/z"), true).unwrap();
        assert_eq!(
            sandbox
                .make_dir(&p(&root, "a.txt"), true)
                .unwrap_err()
                .code(),
            ErrorCode::AlreadyExists
        );
    }

    #[test]
    fn rm_follows_the_contract() {
        let (_t, root, outside, sandbox) = setup();
        assert_eq!(
            sandbox
                .remove(&p(&root, "dir"), false, false)
                .unwrap_err()
                .code(),
            ErrorCode::IsDirectory
        );
        assert_eq!(
            sandbox
                .remove(&p(&root, "gone"), false, false)
                .unwrap_err()
                .code(),
            ErrorCode::NotFound
        );
        assert_eq!(
            sandbox.remove(&p(&root, "gone"), false, true).unwrap(),
            Removed::Nothing
        );
        assert_eq!(
            sandbox
                .remove(&root.display().to_string(), true, true)
                .unwrap_err()
                .code(),
            ErrorCode::DeniedByPolicy
        );
        // A link out is removed itself; its target and a tree's link target survive.
        symlink(outside.join("keep.txt"), root.join("link")).unwrap();
        symlink(&outside, root.join("dir/sub/out")).unwrap();
        assert_eq!(
            sandbox.remove(&p(&root, "link"), false, false).unwrap(),
            Removed::File
        );
        assert_eq!(
            sandbox.remove(&p(&root, "dir"), true, false).unwrap(),
            Removed::Directory
        );
        assert!(!root.join("dir").exists() && !root.join("link").exists());
        assert_eq!(
            std::fs::read_to_string(outside.join("keep.txt")).unwrap(),
            "keep"
        );
    }

    #[test]
    fn mv_never_clobbers_unless_asked() {
        let (_t, root, outside, sandbox) = setup();
        std::fs::write(root.join("b.txt"), "b").unwrap();
        assert_eq!(
            sandbox
                .rename(&p(&root, "a.txt"), &p(&root, "b.txt"), false)
                .unwrap_err()
                .code(),
            ErrorCode::AlreadyExists
        );
        assert_eq!(std::fs::read_to_string(root.join("b.txt")).unwrap(), "b");
        sandbox
            .rename(&p(&root, "a.txt"), &p(&root, "b.txt"), true)
            .unwrap();
        assert_eq!(std::fs::read_to_string(root.join("b.txt")).unwrap(), "a");
        sandbox
            .rename(&p(&root, "b.txt"), &p(&root, "deep/er/c.txt"), false)
            .unwrap();
        assert!(root.join("deep/er/c.txt").is_file());
        assert_eq!(
            sandbox
                .rename(&p(&root, "dir"), &p(&root, "dir/sub/x"), false)
                .unwrap_err()
                .code(),
            ErrorCode::DeniedByPolicy
        );
        assert_eq!(
            sandbox
                .rename(
                    &p(&root, "dir"),
                    &outside.join("x").display().to_string(),
                    false
                )
                .unwrap_err()
                .code(),
            ErrorCode::OutsideRoots
        );
        // A link out can be renamed; it still points where it did.
        symlink(outside.join("keep.txt"), root.join("link")).unwrap();
        sandbox
            .rename(&p(&root, "link"), &p(&root, "link2"), false)
            .unwrap();
        assert_eq!(
            std::fs::read_link(root.join("link2")).unwrap(),
            outside.join("keep.txt")
        );
    }

    #[test]
    fn protected_paths_are_never_changed() {
        let (_t, root, _o, sandbox) = setup();
        std::fs::create_dir_all(root.join("repo/.git/hooks")).unwrap();
        std::fs::write(root.join("flycode.toml"), "").unwrap();
        let denied = |result: Result<(), SandboxError>| {
            assert_eq!(result.unwrap_err().code(), ErrorCode::DeniedByPolicy)
        };
        denied(sandbox.make_dir(&p(&root, "repo/.git/hooks/x"), true));
        denied(sandbox.remove(&p(&root, "repo"), true, false).map(|_| ()));
        denied(
            sandbox
                .remove(&p(&root, "flycode.toml"), false, false)
                .map(|_| ()),
        );
        denied(sandbox.rename(
            &p(&root, "a.txt"),
            &p(&root, "repo/.git/hooks/pre-commit"),
            false,
        ));
        denied(sandbox.rename(&p(&root, "flycode.toml"), &p(&root, "x.toml"), false));
        denied(sandbox.set_mode(&p(&root, "flycode.toml"), 0o600));
        let written = sandbox.write_file(
            &p(&root, "repo/.git/hooks/pre-commit"),
            b"evil",
            crate::WriteMode::Overwrite,
            None,
        );
        assert_eq!(written.unwrap_err().code(), ErrorCode::DeniedByPolicy);
        assert!(
            root.join("repo/.git/hooks")
                .read_dir()
                .unwrap()
                .next()
                .is_none()
        );
    }

    #[test]
    fn moving_a_tree_that_holds_protected_paths_is_refused() {
        let (_t, root, _o, sandbox) = setup();
        std::fs::create_dir_all(root.join("repo/.git")).unwrap();
        std::fs::create_dir_all(root.join("other")).unwrap();
        let denied = |result: Result<(), SandboxError>| {
            assert_eq!(result.unwrap_err().code(), ErrorCode::DeniedByPolicy)
        };
        denied(sandbox.rename(&p(&root, "repo"), &p(&root, "moved"), false));
        denied(sandbox.rename(&p(&root, "other"), &p(&root, "repo"), true));
        assert!(root.join("repo/.git").is_dir());
    }

    #[test]
    fn chmod_never_goes_through_hard_links() {
        let (_t, root, outside, sandbox) = setup();
        std::fs::hard_link(outside.join("keep.txt"), root.join("alias")).unwrap();
        assert_eq!(
            sandbox
                .set_mode(&p(&root, "alias"), 0o666)
                .unwrap_err()
                .code(),
            ErrorCode::DeniedByPolicy
        );
    }

    #[test]
    fn a_nested_root_is_never_removed_or_moved() {
        let (_t, root, _o, _) = setup();
        let roots = Roots::resolve(&[root.clone(), root.join("dir")]).unwrap();
        let sandbox = Sandbox::open(&roots).unwrap();
        assert_eq!(
            sandbox
                .remove(&p(&root, "dir"), true, false)
                .unwrap_err()
                .code(),
            ErrorCode::DeniedByPolicy
        );
        assert_eq!(
            sandbox
                .rename(&p(&root, "dir"), &p(&root, "elsewhere"), false)
                .unwrap_err()
                .code(),
            ErrorCode::DeniedByPolicy
        );
        assert!(root.join("dir/sub/f.txt").exists());
    }

    #[test]
    fn a_cross_device_move_refuses_special_files_and_changes_nothing() {
        let (_t, root, _o, sandbox) = setup();
        assert!(
            std::process::Command::new("mkfifo")
                .arg(root.join("dir/sub/pipe"))
                .status()
                .unwrap()
                .success()
        );
        let dir = sandbox.root_dir(
            &sandbox
                .resolve(&root.display().to_string(), LastComponent::Follow)
                .unwrap(),
        );
        let error = copy_then_remove(dir, Path::new("dir"), dir, Path::new("copy"), false, "copy")
            .unwrap_err();
        assert_eq!(error.code(), ErrorCode::SpecialFile);
        assert!(root.join("dir/sub/f.txt").exists());
        let names: Vec<_> = std::fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(
            !names
                .iter()
                .any(|n| n.to_string_lossy().contains("flycode-tmp")),
            "{names:?}"
        );
    }

    #[test]
    fn chmod_never_locks_the_owner_out_of_a_root() {
        let (_t, root, _o, sandbox) = setup();
        let shown = root.display().to_string();
        for mode in [0o000, 0o600, 0o500, 0o300, 0o077] {
            let error = sandbox.set_mode(&shown, mode).unwrap_err();
            assert_eq!(error.code(), ErrorCode::DeniedByPolicy, "{mode:o}");
            assert!(error.to_string().contains("u+rwx"), "{error}");
        }
        assert_eq!(sandbox.mode_of(&shown).unwrap() & 0o700, 0o700);
        // Modes that keep the owner's bits are fine, on the root and below it.
        sandbox.set_mode(&shown, 0o700).unwrap();
        assert_eq!(sandbox.mode_of(&shown).unwrap(), 0o700);
        sandbox.set_mode(&shown, 0o755).unwrap();
        std::fs::create_dir(root.join("sub")).unwrap();
        sandbox.set_mode(&p(&root, "sub"), 0o000).unwrap();
        sandbox.set_mode(&p(&root, "sub"), 0o755).unwrap();
        // A directory holding a nested root must keep its search bit.
        std::fs::create_dir(root.join("sub/inner")).unwrap();
        let roots = Roots::resolve(&[root.clone(), root.join("sub/inner")]).unwrap();
        let nested = Sandbox::open(&roots).unwrap();
        let error = nested.set_mode(&p(&root, "sub"), 0o600).unwrap_err();
        assert!(error.to_string().contains("u+x"), "{error}");
        nested.set_mode(&p(&root, "sub"), 0o711).unwrap();
    }

    #[test]
    fn chmod_sets_bits_but_never_special_ones() {
        let (_t, root, _o, sandbox) = setup();
        sandbox.set_mode(&p(&root, "a.txt"), 0o640).unwrap();
        assert_eq!(
            std::fs::metadata(root.join("a.txt"))
                .unwrap()
                .permissions()
                .mode()
                & 0o7777,
            0o640
        );
        assert_eq!(sandbox.mode_of(&p(&root, "a.txt")).unwrap(), 0o640);
        for mode in [0o4755, 0o2755, 0o1777] {
            assert_eq!(
                sandbox
                    .set_mode(&p(&root, "a.txt"), mode)
                    .unwrap_err()
                    .code(),
                ErrorCode::DeniedByPolicy
            );
        }
    }

    #[test]
    fn copies_trees_with_links_when_renaming_is_impossible() {
        let (_t, root, _o, sandbox) = setup();
        symlink("f.txt", root.join("dir/sub/alias")).unwrap();
        let dir = sandbox.root_dir(
            &sandbox
                .resolve(&root.display().to_string(), LastComponent::Follow)
                .unwrap(),
        );
        copy_then_remove(dir, Path::new("dir"), dir, Path::new("copy"), false, "copy").unwrap();
        assert_eq!(
            std::fs::read_to_string(root.join("copy/sub/f.txt")).unwrap(),
            "f"
        );
        assert_eq!(
            std::fs::read_link(root.join("copy/sub/alias")).unwrap(),
            PathBuf::from("f.txt")
        );
        assert!(!root.join("dir").exists());
    }
}
