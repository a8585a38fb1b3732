//! The allowed roots as open directory handles, and file access through them.
//!
//! Every path is first resolved and checked by [`resolve_in_roots`] (and refused if it is one of
//! flycode's own files, [`Protection::own_reason`]); the file is then opened
//! relative to its root's directory handle with `cap-std`, whose openat-based resolution never
//! leaves that directory. A component swapped for a link after the check therefore cannot lead
//! outside: the open fails, and the path is resolved again to report why.

use std::fs::File;
use std::path::{Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::{Dir, FileType, Metadata, OpenOptions};

use super::durability::Durability;
use super::error::SandboxError;
use super::protect::Protection;
use super::resolve::{LastComponent, RootedPath, resolve_in_roots};
use super::roots::Roots;

/// The operating system's "not a directory" (ENOTDIR).
const NOT_A_DIRECTORY: i32 = 20;

/// The allowed roots, opened once.
pub struct Sandbox {
    roots: Vec<PathBuf>,
    dirs: Vec<Dir>,
    protection: Protection,
    durability: Durability,
}

impl Sandbox {
    /// Opens a directory handle for every root.
    pub fn open(roots: &Roots) -> Result<Sandbox, SandboxError> {
        let mut dirs = Vec::new();
        for root in roots.paths() {
            let shown = root.display().to_string();
            let dir = Dir::open_ambient_dir(root, ambient_authority())
                .map_err(|e| SandboxError::from_io(&shown, e))?;
            dirs.push(dir);
        }
        Ok(Sandbox {
            roots: roots.paths().to_vec(),
            dirs,
            protection: Protection::default(),
            durability: Durability::default(),
        })
    }

    /// Replaces the protected paths (the built-in ones always stay).
    pub fn with_protection(mut self, protection: Protection) -> Sandbox {
        self.protection = protection;
        self
    }

    /// Adds `files` to the records no tool may read or change ([`Protection::with_records`]):
    /// for a run that learns of a record after its sandbox was built (a resumed run's parent
    /// transcript).
    pub fn add_records(&mut self, files: &[PathBuf]) {
        self.protection = self.protection.clone().with_records(files);
    }

    /// What writes flush before they answer (PROTOCOL.md §9 (fs.write), "What is synced").
    pub fn with_durability(mut self, durability: Durability) -> Sandbox {
        self.durability = durability;
        self
    }

    /// What writes flush before they answer.
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// The protected paths.
    pub fn protection(&self) -> &Protection {
        &self.protection
    }

    /// The roots, canonical.
    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// Resolves a path argument inside the roots. Every file tool's path goes through here, so
    /// this is where flycode's own files are refused, for reading as for changing
    /// ([`Protection::own_reason`]).
    pub fn resolve(&self, input: &str, last: LastComponent) -> Result<RootedPath, SandboxError> {
        let path = resolve_in_roots(&self.roots, input, last)?;
        let root = self
            .roots
            .get(path.root)
            .map_or(Path::new("/"), PathBuf::as_path);
        if let Some(reason) = self.protection.own_reason(&path.absolute, root) {
            return Err(SandboxError::Denied {
                path: input.to_owned(),
                reason,
            });
        }
        Ok(path)
    }

    /// Whether `absolute` is an allowed root or lies above one.
    pub fn holds_a_root(&self, absolute: &std::path::Path) -> bool {
        self.roots.iter().any(|root| root.starts_with(absolute))
    }

    /// The directory handle of the root that holds `path`.
    pub fn root_dir(&self, path: &RootedPath) -> &Dir {
        // A RootedPath only comes from `resolve`, whose root index is one of ours.
        &self.dirs[path.root.min(self.dirs.len().saturating_sub(1))]
    }

    /// The directory handle of root number `index`.
    pub fn root_handle(&self, index: usize) -> Option<&Dir> {
        self.dirs.get(index)
    }

    /// Opens a regular file for reading. FIFOs, sockets and devices are refused without ever
    /// blocking (the open is non-blocking, and the opened file is checked, not the name).
    pub fn open_for_reading(&self, input: &str) -> Result<File, SandboxError> {
        let path = self.resolve(input, LastComponent::Follow)?;
        self.open_resolved_for_reading(input, &path)
    }

    /// [`Sandbox::open_for_reading`] of a path `resolve` has already placed inside a root (for a
    /// caller that resolved it to name or compare it): opened from its root's handle, so a
    /// component swapped for a link since still cannot lead outside.
    pub fn open_resolved_for_reading(
        &self,
        input: &str,
        path: &RootedPath,
    ) -> Result<File, SandboxError> {
        let options = read_options();
        let file = self
            .root_dir(path)
            .open_with(&path.relative, &options)
            .map_err(|error| self.explain_open_failure(input, error))?;
        let metadata = file
            .metadata()
            .map_err(|e| SandboxError::from_io(input, e))?;
        check_regular(input, &metadata.file_type())?;
        Ok(file.into_std())
    }

    /// Opens the directory `input` names (links followed), with its resolved path.
    pub fn open_dir(&self, input: &str) -> Result<(Dir, RootedPath), SandboxError> {
        let path = self.resolve(input, LastComponent::Follow)?;
        let root = self.root_dir(&path);
        let opened = if path.is_root() {
            root.try_clone()
        } else {
            root.open_dir(&path.relative)
        };
        let dir = opened.map_err(|error| {
            if error.raw_os_error() == Some(NOT_A_DIRECTORY) {
                SandboxError::NotDirectory {
                    path: input.to_owned(),
                    component: path.absolute.clone(),
                }
            } else {
                self.explain_open_failure(input, error)
            }
        })?;
        Ok((dir, path))
    }

    /// The metadata of what `input` names (links followed).
    pub fn metadata(&self, input: &str) -> Result<Metadata, SandboxError> {
        let path = self.resolve(input, LastComponent::Follow)?;
        if path.is_root() {
            return self
                .root_dir(&path)
                .dir_metadata()
                .map_err(|e| SandboxError::from_io(input, e));
        }
        self.root_dir(&path)
            .metadata(&path.relative)
            .map_err(|error| self.explain_open_failure(input, error))
    }

    /// An open failed after the path was checked: if the path now resolves outside (a component
    /// was swapped for a link), say so; otherwise report the operating system's error.
    fn explain_open_failure(&self, input: &str, error: std::io::Error) -> SandboxError {
        match self.resolve(input, LastComponent::Follow) {
            Err(refusal) => refusal,
            // cap-std refuses a path that leads out of the root (a link swapped in after the
            // check) with a PermissionDenied of its own, without an OS error number; it may have
            // been swapped back by now, so say what happened rather than re-resolve.
            Ok(_)
                if error.kind() == std::io::ErrorKind::PermissionDenied
                    && error.raw_os_error().is_none() =>
            {
                SandboxError::OutsideRoots {
                    path: input.to_owned(),
                    roots: self
                        .roots
                        .iter()
                        .map(|r| r.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                }
            }
            Ok(_) => SandboxError::from_io(input, error),
        }
    }
}

/// Options to open a file for reading that never block (a FIFO opens at once) and never make a
/// terminal the controlling one; what was opened is checked afterwards.
pub fn read_options() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use cap_std::fs::OpenOptionsExt;
        let flags = rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOCTTY;
        // The flag bits are small positive constants: the conversion cannot fail.
        options.custom_flags(i32::try_from(flags.bits()).unwrap_or(0));
    }
    options
}

/// Refuses anything but a regular file, naming what it is.
pub fn check_regular(input: &str, file_type: &FileType) -> Result<(), SandboxError> {
    if file_type.is_file() {
        return Ok(());
    }
    if file_type.is_dir() {
        return Err(SandboxError::IsDirectory {
            path: input.to_owned(),
        });
    }
    #[cfg(unix)]
    let kind = {
        use cap_std::fs::FileTypeExt;
        if file_type.is_fifo() {
            "FIFO"
        } else if file_type.is_socket() {
            "socket"
        } else {
            "device"
        }
    };
    #[cfg(not(unix))]
    let kind = "special file";
    Err(SandboxError::SpecialFile {
        path: input.to_owned(),
        kind,
    })
}

#[cfg(test)]
#[cfg(unix)]
mod tests {
    use std::io::Read;
    use std::os::unix::fs::symlink;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;
    use flycode_protocol::ErrorCode;

    struct Fixture {
        _temp: tempfile::TempDir,
        root: PathBuf,
        outside: PathBuf,
        sandbox: Sandbox,
    }

    fn fixture() -> Fixture {
        let temp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(temp.path()).unwrap();
        let root = base.join("root");
        let outside = base.join("outside");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(root.join("file.txt"), "inside").unwrap();
        std::fs::write(outside.join("secret.txt"), "SECRET").unwrap();
        let sandbox = Sandbox::open(&Roots::resolve(std::slice::from_ref(&root)).unwrap()).unwrap();
        Fixture {
            _temp: temp,
            root,
            outside,
            sandbox,
        }
    }

    fn read(f: &Fixture, relative: &str) -> Result<String, SandboxError> {
        let mut text = String::new();
        f.sandbox
            .open_for_reading(&format!("{}/{relative}", f.root.display()))?
            .read_to_string(&mut text)
            .unwrap();
        Ok(text)
    }

    #[test]
    fn reads_a_file_inside() {
        let f = fixture();
        assert_eq!(read(&f, "file.txt").unwrap(), "inside");
    }

    #[test]
    fn fifos_and_devices_are_refused_without_blocking() {
        let f = fixture();
        let status = std::process::Command::new("mkfifo")
            .arg(f.root.join("pipe"))
            .status()
            .unwrap();
        assert!(status.success());
        assert_eq!(read(&f, "pipe").unwrap_err().code(), ErrorCode::SpecialFile);
        symlink("/dev/zero", f.root.join("zero")).unwrap();
        // /dev/zero is outside the root: refused before it is ever opened.
        assert_eq!(
            read(&f, "zero").unwrap_err().code(),
            ErrorCode::OutsideRoots
        );
        let roots = Roots::resolve(&[f.root.clone(), PathBuf::from("/dev")]).unwrap();
        let sandbox = Sandbox::open(&roots).unwrap();
        let error = sandbox.open_for_reading("/dev/zero").unwrap_err();
        assert_eq!(error.code(), ErrorCode::SpecialFile);
        assert!(error.to_string().contains("device"), "{error}");
    }

    #[test]
    fn a_directory_is_not_a_file() {
        let f = fixture();
        std::fs::create_dir(f.root.join("sub")).unwrap();
        assert_eq!(read(&f, "sub").unwrap_err().code(), ErrorCode::IsDirectory);
    }

    #[test]
    fn an_escape_refused_by_cap_std_is_outside_roots_not_permission_denied() {
        let f = fixture();
        let input = f.root.join("file.txt").display().to_string();
        let escape = std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            "a path led outside of the filesystem",
        );
        let refusal = f.sandbox.explain_open_failure(&input, escape);
        assert_eq!(refusal.code(), ErrorCode::OutsideRoots);
        let real = std::io::Error::from_raw_os_error(13);
        let refusal = f.sandbox.explain_open_failure(&input, real);
        assert_eq!(refusal.code(), ErrorCode::PermissionDenied);
    }

    #[test]
    fn swapping_a_file_for_a_link_out_never_leaks_the_target() {
        let f = fixture();
        let target = f.root.join("swapped");
        let stop = Arc::new(AtomicBool::new(false));
        let swapper = {
            let (stop, target, outside) = (stop.clone(), target.clone(), f.outside.clone());
            std::thread::spawn(move || {
                let staged_file = target.with_extension("file");
                let staged_link = target.with_extension("link");
                while !stop.load(Ordering::Relaxed) {
                    std::fs::write(&staged_file, "harmless").unwrap();
                    std::fs::rename(&staged_file, &target).unwrap();
                    // Leave the harmless file in place a moment so both states get read.
                    std::thread::sleep(std::time::Duration::from_micros(100));
                    let _ = std::fs::remove_file(&staged_link);
                    symlink(outside.join("secret.txt"), &staged_link).unwrap();
                    std::fs::rename(&staged_link, &target).unwrap();
                }
            })
        };
        for _ in 0..3000 {
            match read(&f, "swapped") {
                Ok(text) => assert_eq!(text, "harmless", "read the file outside the root"),
                // A refusal must say why: the path led outside (or was mid-rename).
                Err(error) => assert!(
                    matches!(error.code(), ErrorCode::OutsideRoots | ErrorCode::NotFound),
                    "unexpected refusal: {error}"
                ),
            }
        }
        stop.store(true, Ordering::Relaxed);
        swapper.join().unwrap();
    }
}
