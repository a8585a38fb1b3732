//! Path arguments → paths proven to lie inside an allowed root.
//!
//! Resolution walks the path one component at a time from `/`, the way the kernel does:
//! symbolic links are read and spliced in (at most 40, then it is a loop), `..` removes the last
//! component of what is already resolved (so `R/link/../x` goes where the kernel goes, not where
//! the text suggests), and a missing component ends the walk (the rest is taken literally, `..`
//! excluded). Containment is then decided on the fully resolved path **by components**: `/w/app`
//! contains `/w/app/x` but not `/w/app-evil`.
//!
//! The result is a [`RootedPath`]: which root, and the link-free path relative to it. Opening it
//! goes through that root's directory handle (`cap-std`, openat-based), which refuses to leave
//! the root even if a component is swapped for a link after this check.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io;
use std::path::{Component, Path, PathBuf};

use super::error::SandboxError;
use flycode_protocol::paths::{PathForm, path_form};

/// The most links one resolution may follow, as Linux allows.
const MAX_LINK_HOPS: usize = 40;

/// Whether the last component of a path is followed when it is a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LastComponent {
    /// Follow it: read, write, list, search, chmod, diff, cwd.
    Follow,
    /// Act on the link itself: fs.rm and fs.mv.
    NoFollow,
}

/// A path that resolved inside an allowed root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RootedPath {
    /// The index of the root that contains it.
    pub root: usize,
    /// The absolute resolved path (no links on the way, except possibly the last component under
    /// [`LastComponent::NoFollow`]).
    pub absolute: PathBuf,
    /// The same path relative to its root; empty for the root itself.
    pub relative: PathBuf,
    /// Whether the path exists.
    pub exists: bool,
}

impl RootedPath {
    /// Whether this is an allowed root itself.
    pub fn is_root(&self) -> bool {
        self.relative.as_os_str().is_empty()
    }
}

/// Resolves `input` against `roots` (already canonical).
pub fn resolve_in_roots(
    roots: &[PathBuf],
    input: &str,
    last: LastComponent,
) -> Result<RootedPath, SandboxError> {
    let path = input.to_owned();
    match path_form(input) {
        PathForm::Posix => {}
        PathForm::WindowsDrive | PathForm::WindowsUnc => {
            return Err(SandboxError::UnsupportedPath { path });
        }
        PathForm::Relative => return Err(SandboxError::RelativePath { path }),
    }
    if input.contains('\0') {
        return Err(SandboxError::InvalidPath { path });
    }
    let (absolute, exists) = walk(input, last)?;
    // `file/` names a directory: the kernel refuses it for a file, and so does flycode.
    if exists && (input.ends_with('/') || input.ends_with("/.")) && !absolute.is_dir() {
        return Err(SandboxError::NotDirectory {
            path,
            component: absolute,
        });
    }
    let Some((root, relative)) = roots.iter().enumerate().find_map(|(index, root)| {
        absolute
            .strip_prefix(root)
            .ok()
            .map(|relative| (index, relative.to_owned()))
    }) else {
        return Err(SandboxError::OutsideRoots {
            path,
            roots: roots
                .iter()
                .map(|r| r.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        });
    };
    Ok(RootedPath {
        root,
        absolute,
        relative,
        exists,
    })
}

/// Resolves links and `..` like the kernel; returns the resolved path and whether it exists.
fn walk(input: &str, last: LastComponent) -> Result<(PathBuf, bool), SandboxError> {
    let mut pending: VecDeque<OsString> = components(Path::new(input));
    let mut resolved = PathBuf::from("/");
    let mut hops = 0;
    while let Some(name) = pending.pop_front() {
        if name == ".." {
            resolved.pop();
            continue;
        }
        let candidate = resolved.join(&name);
        let is_last = pending.is_empty();
        match std::fs::symlink_metadata(&candidate) {
            Ok(meta)
                if meta.file_type().is_symlink() && (!is_last || last == LastComponent::Follow) =>
            {
                hops += 1;
                if hops > MAX_LINK_HOPS {
                    return Err(SandboxError::LinkLoop {
                        path: input.to_owned(),
                    });
                }
                let target = match std::fs::read_link(&candidate) {
                    Ok(target) => target,
                    // It stopped being a link between the two looks (EINVAL): look again. The
                    // hop count bounds how often a racing swapper can make us retry.
                    Err(error) if error.kind() == io::ErrorKind::InvalidInput => {
                        pending.push_front(name);
                        continue;
                    }
                    Err(error) => return Err(SandboxError::from_io(input, error)),
                };
                if target.is_absolute() {
                    resolved = PathBuf::from("/");
                }
                for component in components(&target).into_iter().rev() {
                    pending.push_front(component);
                }
            }
            Ok(meta) => {
                if !is_last && !meta.is_dir() {
                    return Err(SandboxError::NotDirectory {
                        path: input.to_owned(),
                        component: candidate,
                    });
                }
                resolved = candidate;
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                // Nothing more exists on disk: the rest is taken literally, but `..` after a
                // missing directory fails in the kernel too.
                resolved = candidate;
                for rest in pending {
                    if rest == ".." {
                        return Err(SandboxError::NotFound {
                            path: input.to_owned(),
                        });
                    }
                    resolved.push(rest);
                }
                return Ok((resolved, false));
            }
            Err(error) => return Err(SandboxError::from_io(input, error)),
        }
    }
    Ok((resolved, true))
}

/// The components of a path as names, `.` and the root dropped, `..` kept as `..`.
fn components(path: &Path) -> VecDeque<OsString> {
    path.components()
        .filter_map(|component| match component {
            Component::Normal(name) => Some(name.to_owned()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => None,
        })
        .collect()
}

#[cfg(test)]
#[cfg(unix)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;
    use flycode_protocol::ErrorCode;

    struct Fixture {
        _temp: tempfile::TempDir,
        root: PathBuf,
        outside: PathBuf,
    }

    /// `base/root` (the allowed root, with `dir/file.txt`) and `base/outside/secret.txt`.
    fn fixture() -> Fixture {
        let temp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(temp.path()).unwrap();
        let root = base.join("root");
        let outside = base.join("outside");
        std::fs::create_dir_all(root.join("dir")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(root.join("dir/file.txt"), "in").unwrap();
        std::fs::write(outside.join("secret.txt"), "secret").unwrap();
        Fixture {
            _temp: temp,
            root,
            outside,
        }
    }

    fn resolve(f: &Fixture, path: &str) -> Result<RootedPath, SandboxError> {
        resolve_in_roots(std::slice::from_ref(&f.root), path, LastComponent::Follow)
    }

    fn code(f: &Fixture, path: &str) -> ErrorCode {
        resolve(f, path).unwrap_err().code()
    }

    fn at(f: &Fixture, relative: &str) -> String {
        format!("{}/{relative}", f.root.display())
    }

    #[test]
    fn paths_inside_resolve_relative_to_their_root() {
        let f = fixture();
        let rooted = resolve(&f, &at(&f, "dir/./file.txt")).unwrap();
        assert_eq!(rooted.relative, PathBuf::from("dir/file.txt"));
        assert!(rooted.exists);
        let rooted = resolve(&f, &at(&f, "dir/new/deeper.txt")).unwrap();
        assert!(!rooted.exists);
        assert!(
            resolve(&f, &f.root.display().to_string())
                .unwrap()
                .is_root()
        );
        assert!(resolve(&f, &format!("{}//dir///file.txt", f.root.display())).is_ok());
    }

    #[test]
    fn a_prefix_sibling_is_not_inside() {
        let f = fixture();
        std::fs::create_dir(f.root.with_file_name("root-evil")).unwrap();
        let sibling = format!("{}-evil/x", f.root.display());
        assert_eq!(code(&f, &sibling), ErrorCode::OutsideRoots);
    }

    #[test]
    fn dot_dot_chains_cannot_leave() {
        let f = fixture();
        assert_eq!(
            code(&f, &at(&f, "../outside/secret.txt")),
            ErrorCode::OutsideRoots
        );
        let deep = format!("{}{}", at(&f, "dir/"), "../".repeat(200));
        assert_eq!(
            code(&f, &format!("{deep}etc/passwd")),
            ErrorCode::OutsideRoots
        );
        // Up and back down again stays inside.
        assert!(resolve(&f, &at(&f, "dir/../../root/dir/file.txt")).is_ok());
    }

    #[test]
    fn names_that_look_like_dots_are_literal() {
        let f = fixture();
        for name in ["..test", "%2e%2e", "...", "..\\..", "~"] {
            let rooted = resolve(&f, &at(&f, name)).unwrap();
            assert_eq!(rooted.relative, PathBuf::from(name));
        }
    }

    #[test]
    fn relative_windows_and_nul_paths_are_refused() {
        let f = fixture();
        assert_eq!(code(&f, "dir/file.txt"), ErrorCode::RelativePath);
        assert_eq!(code(&f, "~/x"), ErrorCode::RelativePath);
        assert_eq!(code(&f, r"C:\work"), ErrorCode::UnsupportedPath);
        assert_eq!(code(&f, r"\\server\share\x"), ErrorCode::UnsupportedPath);
        assert_eq!(code(&f, r"\\?\C:\x"), ErrorCode::UnsupportedPath);
        assert_eq!(code(&f, &at(&f, "a\0b")), ErrorCode::InvalidArgs);
    }

    #[test]
    fn links_out_are_outside_whatever_their_form() {
        let f = fixture();
        symlink(f.outside.join("secret.txt"), f.root.join("abs")).unwrap();
        symlink("../outside/secret.txt", f.root.join("rel")).unwrap();
        symlink(f.root.join("abs"), f.root.join("chain")).unwrap();
        symlink(f.outside.join("new.txt"), f.root.join("dangling")).unwrap();
        symlink(&f.outside, f.root.join("outdir")).unwrap();
        symlink("/proc/self/root/etc/passwd", f.root.join("proc")).unwrap();
        for name in [
            "abs",
            "rel",
            "chain",
            "dangling",
            "outdir/secret.txt",
            "proc",
        ] {
            assert_eq!(code(&f, &at(&f, name)), ErrorCode::OutsideRoots, "{name}");
        }
        // A dangling link out resolves to its outside target: nothing may be created there.
        assert!(!f.outside.join("new.txt").exists());
    }

    #[test]
    fn a_link_followed_by_dot_dot_goes_where_the_kernel_goes() {
        let f = fixture();
        // root/dir/up -> outside, so root/dir/up/.. is outside/.. (the base), not root/dir.
        symlink(&f.outside, f.root.join("dir/up")).unwrap();
        assert_eq!(
            code(&f, &at(&f, "dir/up/../outside/secret.txt")),
            ErrorCode::OutsideRoots
        );
        assert_eq!(
            code(&f, &at(&f, "dir/up/../dir/file.txt")),
            ErrorCode::OutsideRoots
        );
        let back_in = resolve(&f, &at(&f, "dir/up/../root/dir/file.txt")).unwrap();
        assert_eq!(back_in.relative, PathBuf::from("dir/file.txt"));
    }

    #[test]
    fn links_inside_are_followed() {
        let f = fixture();
        symlink("dir/file.txt", f.root.join("alias")).unwrap();
        let rooted = resolve(&f, &at(&f, "alias")).unwrap();
        assert_eq!(rooted.relative, PathBuf::from("dir/file.txt"));
        let link_itself = resolve_in_roots(
            std::slice::from_ref(&f.root),
            &at(&f, "alias"),
            LastComponent::NoFollow,
        )
        .unwrap();
        assert_eq!(link_itself.relative, PathBuf::from("alias"));
    }

    #[test]
    fn a_link_out_can_itself_be_removed_or_moved() {
        let f = fixture();
        symlink(f.outside.join("secret.txt"), f.root.join("abs")).unwrap();
        let rooted = resolve_in_roots(
            std::slice::from_ref(&f.root),
            &at(&f, "abs"),
            LastComponent::NoFollow,
        )
        .unwrap();
        assert_eq!(rooted.relative, PathBuf::from("abs"));
    }

    #[test]
    fn link_loops_fail_promptly() {
        let f = fixture();
        symlink("b", f.root.join("a")).unwrap();
        symlink("a", f.root.join("b")).unwrap();
        symlink("self", f.root.join("self")).unwrap();
        assert_eq!(code(&f, &at(&f, "a")), ErrorCode::IoError);
        assert_eq!(code(&f, &at(&f, "self/x")), ErrorCode::IoError);
    }

    #[test]
    fn a_trailing_slash_needs_a_directory() {
        let f = fixture();
        assert_eq!(code(&f, &at(&f, "dir/file.txt/")), ErrorCode::NotDirectory);
        assert_eq!(code(&f, &at(&f, "dir/file.txt/.")), ErrorCode::NotDirectory);
        assert!(resolve(&f, &at(&f, "dir/")).is_ok());
    }

    #[test]
    fn a_file_in_the_middle_is_not_a_directory() {
        let f = fixture();
        assert_eq!(code(&f, &at(&f, "dir/file.txt/x")), ErrorCode::NotDirectory);
        assert_eq!(code(&f, &at(&f, "missing/../dir")), ErrorCode::NotFound);
    }

    #[test]
    fn a_second_root_is_reachable_through_a_link() {
        let f = fixture();
        symlink(&f.outside, f.root.join("to-second")).unwrap();
        let roots = [f.root.clone(), f.outside.clone()];
        let rooted = resolve_in_roots(
            &roots,
            &at(&f, "to-second/secret.txt"),
            LastComponent::Follow,
        )
        .unwrap();
        assert_eq!(
            (rooted.root, rooted.relative),
            (1, PathBuf::from("secret.txt"))
        );
    }

    #[test]
    fn over_long_components_are_errors_not_crashes() {
        let f = fixture();
        let long = "x".repeat(300);
        assert_eq!(code(&f, &at(&f, &long)), ErrorCode::IoError);
    }
}
