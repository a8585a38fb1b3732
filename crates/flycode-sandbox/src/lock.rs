//! Which file a writer locks, and when the lock counts: an exclusive advisory lock (`flock`) on
//! the file at a name, kept only once the name still leads to the locked file. Every flycode
//! operation that replaces, removes or moves a file's name holds that file's lock while it does,
//! so writers of one file (threads, sessions, processes) take turns, and one that waited while
//! the name moved on locks the file now there (PROTOCOL.md §9, fs.write, "Concurrent writers").
//! The locks are on the files themselves: no lock file is left in a user's folder.

use std::path::Path;

use cap_std::fs::Dir;

use super::error::SandboxError;
use super::files::check_regular;
use super::write_mode::WriteMode;

/// The file at `name` (links followed), opened for reading without blocking; `None` if there is
/// none.
fn open_existing(
    parent: &Dir,
    name: &Path,
    input: &str,
) -> Result<Option<cap_std::fs::File>, SandboxError> {
    let options = super::files::read_options();
    match parent.open_with(name, &options) {
        Ok(file) => Ok(Some(file)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(SandboxError::from_io(input, error)),
    }
}

/// Checks an existing file before changing it and locks it exclusively: only regular files, and
/// no appending to a file with other hard links (its other names may lie outside the roots;
/// overwrite only replaces this name). A batch keeps a second name (its backup) of a file only
/// while it holds that file's lock; the undo recorder keeps one of a file a call is about to
/// replace or remove, from just before the call's change lands until it has (PROTOCOL.md §16
/// (Undo and history), "How a content is kept"), so an append or chmod by another call in that
/// moment is refused, and can be made again.
fn lock_for_change(
    file: &cap_std::fs::File,
    input: &str,
) -> Result<cap_std::fs::Metadata, SandboxError> {
    let metadata = file
        .metadata()
        .map_err(|e| SandboxError::from_io(input, e))?;
    check_regular(input, &metadata.file_type())?;
    rustix::fs::flock(file, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| SandboxError::from_io(input, e.into()))?;
    file.metadata().map_err(|e| SandboxError::from_io(input, e))
}

/// Refuses to append to a file with more than one name.
fn check_links(
    metadata: &cap_std::fs::Metadata,
    input: &str,
    mode: WriteMode,
) -> Result<(), SandboxError> {
    #[cfg(unix)]
    {
        use cap_std::fs::MetadataExt;
        if mode == WriteMode::Append && metadata.nlink() > 1 {
            return Err(SandboxError::Denied {
                path: input.to_owned(),
                reason: format!(
                    "the file has {} hard links, and appending would change them all; overwrite it instead",
                    metadata.nlink()
                ),
            });
        }
    }
    #[cfg(not(unix))]
    let _ = (metadata, input, mode);
    Ok(())
}

/// Locks the file at `name`, if there is one, and keeps the lock only once the locked file is
/// still the one at the name: a writer that waited while another replaced the file would
/// otherwise hold the lock of a file no longer there and race the next writer.
pub(super) fn lock_what_is_there(
    parent: &Dir,
    name: &Path,
    input: &str,
    mode: WriteMode,
) -> Result<Option<cap_std::fs::File>, SandboxError> {
    loop {
        let Some(file) = open_existing(parent, name, input)? else {
            return Ok(None);
        };
        let metadata = lock_for_change(&file, input)?;
        if same_file(&file, parent, name) {
            check_links(&metadata, input, mode)?;
            return Ok(Some(file));
        }
    }
}

/// Locks the regular file at `name` itself (a link is not followed, and gets no lock), as
/// [`lock_what_is_there`] does, for an operation that removes or moves the name: a writer that
/// holds the file's lock finishes first, and one that waits finds the name gone or moved on and
/// starts over. `None` where there is no regular file, or it cannot be opened (unreadable), or it
/// is one of the `held` files (two names of one file: a second lock on it would wait for the
/// first forever): the operation then goes on without this lock.
pub(super) fn lock_entry(
    parent: &Dir,
    name: &Path,
    held: &[std::fs::File],
) -> Option<std::fs::File> {
    loop {
        let (file, metadata) = super::handles::open_file(parent, name.as_os_str()).ok()?;
        if !metadata.is_file() || held.iter().any(|h| same_inode(h, &metadata)) {
            return None;
        }
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive).ok()?;
        #[cfg(unix)]
        {
            use cap_std::fs::MetadataExt as _;
            use std::os::unix::fs::MetadataExt as _;
            let now = parent.symlink_metadata(name).ok()?;
            let locked = file.metadata().ok()?;
            if now.dev() == locked.dev() && now.ino() == locked.ino() {
                return Some(file);
            }
        }
        #[cfg(not(unix))]
        return Some(file);
    }
}

/// Whether `file` is the file `metadata` describes.
fn same_inode(file: &std::fs::File, metadata: &std::fs::Metadata) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        file.metadata()
            .is_ok_and(|m| m.dev() == metadata.dev() && m.ino() == metadata.ino())
    }
    #[cfg(not(unix))]
    {
        let _ = (file, metadata);
        false
    }
}

/// Whether the open `file` is the one at `name` now.
fn same_file(file: &cap_std::fs::File, parent: &Dir, name: &Path) -> bool {
    #[cfg(unix)]
    {
        use cap_std::fs::MetadataExt;
        match (file.metadata(), parent.metadata(name)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (file, parent, name);
        true
    }
}

#[cfg(test)]
#[cfg(unix)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_counts_for_the_file_at_the_name_and_never_twice_for_one_file() {
        let temp = tempfile::tempdir().unwrap();
        let dir = Dir::open_ambient_dir(temp.path(), cap_std::ambient_authority()).unwrap();
        std::fs::write(temp.path().join("a.txt"), "a").unwrap();
        std::fs::hard_link(temp.path().join("a.txt"), temp.path().join("b.txt")).unwrap();
        std::os::unix::fs::symlink("a.txt", temp.path().join("link")).unwrap();
        let held = lock_entry(&dir, Path::new("a.txt"), &[]).unwrap();
        // Another name of the held file is not locked again (that would wait forever).
        assert!(lock_entry(&dir, Path::new("b.txt"), std::slice::from_ref(&held)).is_none());
        // A link itself gets no lock, and nothing is no file.
        assert!(lock_entry(&dir, Path::new("link"), &[]).is_none());
        assert!(lock_entry(&dir, Path::new("none"), &[]).is_none());
        // Appending is refused for a file with two names, overwriting is not.
        drop(held);
        let error =
            lock_what_is_there(&dir, Path::new("a.txt"), "a.txt", WriteMode::Append).unwrap_err();
        assert_eq!(error.code(), flycode_protocol::ErrorCode::DeniedByPolicy);
        assert!(
            lock_what_is_there(&dir, Path::new("a.txt"), "a.txt", WriteMode::Overwrite)
                .unwrap()
                .is_some()
        );
        assert!(
            lock_what_is_there(&dir, Path::new("none"), "none", WriteMode::Append)
                .unwrap()
                .is_none()
        );
    }
}
