//! Staged temporary files: their names (hidden, flycode's prefix, unique in the process), and
//! putting one at a name where no file was: only if the name is still free, atomically, so two
//! writers that both found no file cannot both create it (the second rename would silently
//! replace the first one's file and lose what it wrote).
//!
//! A writer that loses the race gets `AlreadyExists`, removes nothing, and starts over against
//! the winner's file under that file's lock (PROTOCOL.md §9, fs.write). Replacing an existing
//! file is not done here: that is a plain rename made while holding the old file's lock.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use cap_std::fs::Dir;

/// Where a temporary file's name starts: hidden, and recognisable as flycode's.
pub const TEMP_PREFIX: &str = ".flycode-tmp-";

/// A fresh temporary name beside `name`: flycode's prefix, this process, a counter shared by every
/// writer in it (so two writes in one process never pick the same name), and the final name.
pub fn temp_name(name: &Path) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    PathBuf::from(format!(
        "{TEMP_PREFIX}{}-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed),
        name.display()
    ))
}

/// Renames `temp` to `name` in `dir` only if nothing is at `name`; `AlreadyExists` otherwise.
///
/// Linux: `renameat2` with `RENAME_NOREPLACE`. Where a file system does not support the flag
/// (`EINVAL`), and on other Unix systems: a hard link to the name (which fails if the name
/// exists), then the temporary name is removed. Elsewhere (not built yet): a check, then a
/// rename, where a race remains.
pub fn rename_if_free(dir: &Dir, temp: &Path, name: &Path) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsFd;
        match rustix::fs::renameat_with(
            dir.as_fd(),
            temp,
            dir.as_fd(),
            name,
            rustix::fs::RenameFlags::NOREPLACE,
        ) {
            Ok(()) => return Ok(()),
            Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => {}
            Err(error) => return Err(error.into()),
        }
    }
    link_then_unlink(dir, temp, name)
}

/// A hard link cannot replace an existing name: the first creator wins, the others see
/// `AlreadyExists`. The temporary name goes afterwards (left behind by a crash in between, it is
/// removed as abandoned by the next write in the folder, or by recovery).
#[cfg(unix)]
fn link_then_unlink(dir: &Dir, temp: &Path, name: &Path) -> std::io::Result<()> {
    dir.hard_link(temp, dir, name)?;
    let _ = dir.remove_file(temp);
    Ok(())
}

#[cfg(not(unix))]
fn link_then_unlink(dir: &Dir, temp: &Path, name: &Path) -> std::io::Result<()> {
    if dir.symlink_metadata(name).is_ok() {
        return Err(std::io::Error::from(std::io::ErrorKind::AlreadyExists));
    }
    dir.rename(temp, dir, name)
}

#[cfg(test)]
#[cfg(unix)]
mod tests {
    use super::*;

    #[test]
    fn a_taken_name_is_never_replaced() {
        let temp = tempfile::tempdir().unwrap();
        let dir = Dir::open_ambient_dir(temp.path(), cap_std::ambient_authority()).unwrap();
        std::fs::write(temp.path().join("t1"), "first").unwrap();
        std::fs::write(temp.path().join("t2"), "second").unwrap();
        rename_if_free(&dir, Path::new("t1"), Path::new("a.txt")).unwrap();
        let lost = rename_if_free(&dir, Path::new("t2"), Path::new("a.txt")).unwrap_err();
        assert_eq!(lost.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(
            std::fs::read_to_string(temp.path().join("a.txt")).unwrap(),
            "first"
        );
        // The loser's staged file is still there, for the caller to retry with or remove.
        assert!(temp.path().join("t2").exists() && !temp.path().join("t1").exists());
        // The fallback behaves the same.
        let lost = link_then_unlink(&dir, Path::new("t2"), Path::new("a.txt")).unwrap_err();
        assert_eq!(lost.kind(), std::io::ErrorKind::AlreadyExists);
        link_then_unlink(&dir, Path::new("t2"), Path::new("b.txt")).unwrap();
        assert!(!temp.path().join("t2").exists());
        assert_eq!(
            std::fs::read_to_string(temp.path().join("b.txt")).unwrap(),
            "second"
        );
    }
}
