//! Writing files so that a crash leaves the old content or the new, never a mix: the new bytes go
//! to a temporary file in the same directory, are flushed (`sync_data`), take the old file's
//! permissions, and replace the name by `rename`; then the directory itself is flushed.
//!
//! A precondition on the current content (`expectedSha256`) is checked under an exclusive
//! advisory lock on the file, so two writers with the same expectation cannot both win.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cap_std::fs::{Dir, OpenOptions};
use sha2::{Digest, Sha256};

use super::error::SandboxError;
use super::files::{Sandbox, check_regular};
use super::journal::{Journal, Operation, Target};
use super::resolve::{LastComponent, RootedPath};

/// Where a temporary file's name starts: hidden, and recognisable as flycode's.
pub const TEMP_PREFIX: &str = ".flycode-tmp-";

/// How to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteMode {
    /// Replace the whole content atomically.
    Overwrite,
    /// Add to the end.
    Append,
}

/// What a write did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteOutcome {
    /// The resolved file.
    pub path: PathBuf,
    /// Bytes written.
    pub bytes_written: u64,
    /// The sha256 of the whole file afterwards, lowercase hex.
    pub sha256: String,
    /// Whether the file was created.
    pub created: bool,
}

/// A failed `expectedSha256` precondition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HashMismatch {
    /// The current hash, or `(missing)`.
    pub actual: String,
}

/// The lowercase hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

impl Sandbox {
    /// Writes `content` to `input` (links followed; missing parent directories inside the root
    /// are created). With `expected_sha256`, the current content must hash to it (`(missing)`
    /// for no file) or nothing is written.
    pub fn write_file(
        &self,
        input: &str,
        content: &[u8],
        mode: WriteMode,
        expected_sha256: Option<&str>,
    ) -> Result<Result<WriteOutcome, HashMismatch>, SandboxError> {
        let path = self.resolve(input, LastComponent::Follow)?;
        if path.is_root() {
            return Err(SandboxError::IsDirectory {
                path: input.to_owned(),
            });
        }
        self.protection().check(input, &path.absolute)?;
        let (parent, name) = self.parent_dir(input, &path, true)?;
        clean_stale_temporaries(&parent, self.roots());
        let locked = lock_what_is_there(&parent, &name, input, mode)?;
        // Under the lock, what is at the name now. An overwrite reads the old content only to
        // check an expectation, and then streams it through the hash: a 1 MB overwrite would
        // otherwise read, hold and hash the megabyte it is about to replace.
        let old = match (mode, &locked) {
            (WriteMode::Append, Some(file)) => Some(read_whole(file, input)?),
            _ => None,
        };
        if let Some(expected) = expected_sha256 {
            let actual = match (&old, &locked) {
                (Some(old), _) => sha256_hex(old),
                (None, Some(file)) => stream_hash(file, input)?,
                (None, None) => "(missing)".to_owned(),
            };
            if expected != actual {
                return Ok(Err(HashMismatch { actual }));
            }
        }
        // An append is staged and renamed too (old content plus the addition): a writer killed
        // part-way through the addition must not leave half of it.
        let whole: Cow<'_, [u8]> = match &old {
            Some(old) => Cow::Owned([old.as_slice(), content].concat()),
            None => Cow::Borrowed(content),
        };
        let sha256 = sha256_hex(&whole);
        let temp = temp_name(&name);
        let parent_relative = path.relative.parent().unwrap_or(Path::new(""));
        let target = Target::new(
            &self.roots()[path.root.min(self.roots().len().saturating_sub(1))],
            parent_relative,
            &name,
            &temp,
            None,
            sha256.clone(),
            None,
        );
        // A path that is not UTF-8 cannot be recorded (records are JSON): such a write goes
        // unrecorded, as before the journal existed.
        let journal = match target {
            Some(target) => Some(Journal::begin(
                Operation::Write,
                self.roots(),
                vec![target.creating(locked.is_none())],
            )?),
            None => None,
        };
        replace_atomically(&parent, &name, &temp, &whole, input)?;
        sync_dir(&parent, input)?;
        drop(journal);
        Ok(Ok(WriteOutcome {
            path: path.absolute.clone(),
            bytes_written: content.len() as u64,
            sha256,
            created: locked.is_none(),
        }))
    }

    /// The directory holding `path` (created when `create` and missing) and the final name.
    pub(crate) fn parent_dir(
        &self,
        input: &str,
        path: &RootedPath,
        create: bool,
    ) -> Result<(Dir, PathBuf), SandboxError> {
        let name = path
            .relative
            .file_name()
            .map(PathBuf::from)
            .ok_or_else(|| SandboxError::IsDirectory {
                path: input.to_owned(),
            })?;
        let parent_relative = path.relative.parent().unwrap_or(Path::new(""));
        let root = self.root_dir(path);
        if parent_relative.as_os_str().is_empty() {
            let dir = root
                .try_clone()
                .map_err(|e| SandboxError::from_io(input, e))?;
            return Ok((dir, name));
        }
        if create {
            root.create_dir_all(parent_relative)
                .map_err(|e| SandboxError::from_io(input, e))?;
        }
        let dir = root
            .open_dir(parent_relative)
            .map_err(|e| SandboxError::from_io(input, e))?;
        Ok((dir, name))
    }
}

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

/// The whole content of the locked file (read from its start: it was just opened).
fn read_whole(file: &cap_std::fs::File, input: &str) -> Result<Vec<u8>, SandboxError> {
    let mut bytes = Vec::new();
    (&*file)
        .read_to_end(&mut bytes)
        .map_err(|e| SandboxError::from_io(input, e))?;
    Ok(bytes)
}

/// The sha256 of the locked file's content, streamed and never remembered: the caller asked for
/// this exact content, and a remembered hash rests on timestamps (which a write through a
/// memory map may not move until later).
fn stream_hash(file: &cap_std::fs::File, input: &str) -> Result<String, SandboxError> {
    super::content_hash::stream_sha256(file).map_err(|e| SandboxError::from_io(input, e))
}

/// Checks an existing file before changing it, then locks it exclusively: only regular files, and
/// no appending to a file with other hard links (its other names may lie outside the roots;
/// overwrite only replaces this name).
pub(super) fn lock_for_change(
    file: &cap_std::fs::File,
    input: &str,
    mode: WriteMode,
) -> Result<(), SandboxError> {
    let metadata = file
        .metadata()
        .map_err(|e| SandboxError::from_io(input, e))?;
    check_regular(input, &metadata.file_type())?;
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
    let _ = mode;
    rustix::fs::flock(file, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| SandboxError::from_io(input, e.into()))
}

/// A fresh temporary name beside `name`: flycode's prefix, this process, a counter shared by every
/// writer in it (so two writes in one process never pick the same name), and the final name.
pub(crate) fn temp_name(name: &Path) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    PathBuf::from(format!(
        "{TEMP_PREFIX}{}-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed),
        name.display()
    ))
}

/// Locks the file at `name`, if there is one, and keeps the lock only once the locked file is
/// still the one at the name: a writer that waited while another replaced the file would
/// otherwise hold the lock of a file no longer there and race the next writer.
fn lock_what_is_there(
    parent: &Dir,
    name: &Path,
    input: &str,
    mode: WriteMode,
) -> Result<Option<cap_std::fs::File>, SandboxError> {
    loop {
        let Some(file) = open_existing(parent, name, input)? else {
            return Ok(None);
        };
        lock_for_change(&file, input, mode)?;
        if same_file(&file, parent, name) {
            return Ok(Some(file));
        }
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

/// Removes temporary files that a killed flycode left in `dir`: those whose process no longer
/// runs (on Linux), or older than an hour (elsewhere). A journal record may still cover them (a
/// flycode killed while this one runs): the records of dead processes are recovered first, so a
/// half-done batch is finished or undone rather than losing its backups here.
///
/// A folder is looked through at most once a minute per process (folders told apart by device,
/// inode and creation time): listing it on every write would make each write to a large folder
/// pay for the listing.
pub fn clean_stale_temporaries(dir: &Dir, roots: &[std::path::PathBuf]) {
    if !due_for_cleaning(dir, Instant::now()) {
        return;
    }
    let abandoned = |dir: &Dir| -> Vec<std::ffi::OsString> {
        let Ok(entries) = dir.entries() else {
            return Vec::new();
        };
        entries
            .filter_map(Result::ok)
            .filter(is_abandoned)
            .map(|entry| entry.file_name())
            .collect()
    };
    if abandoned(dir).is_empty() {
        return;
    }
    for line in super::journal::recover_interrupted(Some(roots)) {
        eprintln!("flycode: {line}");
    }
    for name in abandoned(dir) {
        let _ = dir.remove_file(&name);
    }
}

/// How long a folder that was looked through for abandoned temporaries is not looked at again.
const CLEANED_FOR: Duration = Duration::from_secs(60);

/// Whether `dir` was not looked through in the last [`CLEANED_FOR`] (and it now counts as looked
/// through). Folders are told apart by device, inode and creation time (an inode number is reused
/// by a folder made after one was removed); one without a creation time is always due.
fn due_for_cleaning(dir: &Dir, now: Instant) -> bool {
    type Identity = (u64, u64, std::time::SystemTime);
    static CLEANED: Mutex<Option<HashMap<Identity, Instant>>> = Mutex::new(None);
    #[cfg(unix)]
    let identity = {
        use cap_std::fs::MetadataExt;
        let Ok(metadata) = dir.dir_metadata() else {
            return true;
        };
        let Ok(created) = metadata.created() else {
            return true;
        };
        (metadata.dev(), metadata.ino(), created.into_std())
    };
    #[cfg(not(unix))]
    let identity: Identity = {
        let _ = dir;
        return true;
    };
    let mut cleaned = CLEANED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let cleaned = cleaned.get_or_insert_with(HashMap::new);
    if cleaned
        .get(&identity)
        .is_some_and(|at| now.saturating_duration_since(*at) < CLEANED_FOR)
    {
        return false;
    }
    if cleaned.len() >= 4096 {
        cleaned.retain(|_, at| now.saturating_duration_since(*at) < CLEANED_FOR);
    }
    cleaned.insert(identity, now);
    true
}

fn is_abandoned(entry: &cap_std::fs::DirEntry) -> bool {
    let name = entry.file_name();
    let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(TEMP_PREFIX)) else {
        return false;
    };
    let pid: Option<u32> = rest.split('-').next().and_then(|p| p.parse().ok());
    if cfg!(target_os = "linux") {
        pid.is_some_and(|pid| {
            pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists()
        })
    } else {
        entry
            .metadata()
            .ok()
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.into_std().elapsed().ok())
            .is_some_and(|age| age.as_secs() > 3600)
    }
}

/// Temporary file in the same directory, flushed, permissions kept, renamed over the name.
fn replace_atomically(
    parent: &Dir,
    name: &Path,
    temp: &Path,
    content: &[u8],
    input: &str,
) -> Result<(), SandboxError> {
    let permissions = parent
        .metadata(name)
        .ok()
        .map(|m| without_special_bits(m.permissions()));
    let result = (|| {
        let mut file = parent
            .open_with(temp, OpenOptions::new().write(true).create_new(true))
            .map_err(|e| SandboxError::from_io(input, e))?;
        file.write_all(content)
            .map_err(|e| SandboxError::from_io(input, e))?;
        file.sync_data()
            .map_err(|e| SandboxError::from_io(input, e))?;
        if let Some(permissions) = permissions {
            file.set_permissions(permissions)
                .map_err(|e| SandboxError::from_io(input, e))?;
        }
        parent
            .rename(temp, parent, name)
            .map_err(|e| SandboxError::from_io(input, e))
    })();
    if result.is_err() {
        let _ = parent.remove_file(temp);
    }
    result
}

/// The permissions to keep, without setuid, setgid and sticky bits: new content must not inherit
/// privileges granted to the old.
pub(crate) fn without_special_bits(
    permissions: cap_std::fs::Permissions,
) -> cap_std::fs::Permissions {
    #[cfg(unix)]
    {
        use cap_std::fs::PermissionsExt;
        cap_std::fs::Permissions::from_mode(permissions.mode() & 0o777)
    }
    #[cfg(not(unix))]
    permissions
}

/// Flushes a directory, so a rename in it survives a crash. (Directory handles are opened for
/// path operations only, so the directory is opened once more, for reading, to be flushed.)
fn sync_dir(dir: &Dir, input: &str) -> Result<(), SandboxError> {
    let handle = dir
        .open_with(".", OpenOptions::new().read(true))
        .map_err(|e| SandboxError::from_io(input, e))?;
    handle
        .sync_all()
        .map_err(|e| SandboxError::from_io(input, e))
}

#[cfg(test)]
#[cfg(unix)]
mod tests {
    use std::os::unix::fs::{PermissionsExt, symlink};

    use super::*;
    use crate::protocol::ErrorCode;
    use crate::sandbox::Roots;

    fn setup() -> (tempfile::TempDir, PathBuf, PathBuf, Sandbox) {
        let temp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(temp.path()).unwrap();
        let root = base.join("root");
        let outside = base.join("outside");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let sandbox = Sandbox::open(&Roots::resolve(std::slice::from_ref(&root)).unwrap()).unwrap();
        (temp, root, outside, sandbox)
    }

    fn write(
        sandbox: &Sandbox,
        path: &Path,
        content: &str,
        mode: WriteMode,
        expected: Option<&str>,
    ) -> Result<Result<WriteOutcome, HashMismatch>, SandboxError> {
        sandbox.write_file(
            &path.display().to_string(),
            content.as_bytes(),
            mode,
            expected,
        )
    }

    #[test]
    fn overwrite_creates_parents_and_reports_the_hash() {
        let (_t, root, _o, sandbox) = setup();
        let path = root.join("a/b/new.txt");
        let outcome = write(&sandbox, &path, "hello", WriteMode::Overwrite, None)
            .unwrap()
            .unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "hello");
        assert!(outcome.created);
        assert_eq!(outcome.sha256, sha256_hex(b"hello"));
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(root.join("a/b"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("new.txt")]);
    }

    #[test]
    fn overwrite_keeps_permissions_and_append_appends() {
        let (_t, root, _o, sandbox) = setup();
        let path = root.join("run.sh");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o751)).unwrap();
        write(&sandbox, &path, "#!/bin/sh\n", WriteMode::Overwrite, None)
            .unwrap()
            .unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o751
        );
        let outcome = write(&sandbox, &path, "echo hi\n", WriteMode::Append, None)
            .unwrap()
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "#!/bin/sh\necho hi\n"
        );
        assert_eq!(outcome.sha256, sha256_hex(b"#!/bin/sh\necho hi\n"));
        assert!(!outcome.created);
    }

    #[test]
    fn a_stale_hash_writes_nothing() {
        let (_t, root, _o, sandbox) = setup();
        let path = root.join("a.txt");
        std::fs::write(&path, "current").unwrap();
        let mismatch = write(
            &sandbox,
            &path,
            "new",
            WriteMode::Overwrite,
            Some(&sha256_hex(b"older")),
        )
        .unwrap()
        .unwrap_err();
        assert_eq!(mismatch.actual, sha256_hex(b"current"));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "current");
        let missing = write(
            &sandbox,
            &root.join("none.txt"),
            "x",
            WriteMode::Overwrite,
            Some(&sha256_hex(b"")),
        )
        .unwrap()
        .unwrap_err();
        assert_eq!(missing.actual, "(missing)");
        assert!(!root.join("none.txt").exists());
        assert!(
            write(
                &sandbox,
                &path,
                "new",
                WriteMode::Overwrite,
                Some(&sha256_hex(b"current"))
            )
            .unwrap()
            .is_ok()
        );
        // An append checks the expectation against the content it extends.
        let stale_append = write(
            &sandbox,
            &path,
            "more",
            WriteMode::Append,
            Some(&sha256_hex(b"current")),
        )
        .unwrap()
        .unwrap_err();
        assert_eq!(stale_append.actual, sha256_hex(b"new"));
        let appended = write(
            &sandbox,
            &path,
            "more",
            WriteMode::Append,
            Some(&sha256_hex(b"new")),
        )
        .unwrap()
        .unwrap();
        assert_eq!(appended.sha256, sha256_hex(b"newmore"));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "newmore");
    }

    #[test]
    fn a_folder_is_looked_through_for_temporaries_at_most_once_a_minute() {
        let temp = tempfile::tempdir().unwrap();
        let dir = Dir::open_ambient_dir(temp.path(), cap_std::ambient_authority()).unwrap();
        let now = Instant::now();
        assert!(due_for_cleaning(&dir, now));
        let has_creation_time = dir.dir_metadata().unwrap().created().is_ok();
        // Without a creation time a folder cannot be told from a later one: it is always due.
        assert_eq!(
            due_for_cleaning(&dir, now + Duration::from_secs(59)),
            !has_creation_time
        );
        assert!(due_for_cleaning(
            &dir,
            now + CLEANED_FOR + Duration::from_secs(1)
        ));
    }

    #[test]
    fn writes_through_links_stay_inside_and_never_create_outside() {
        let (_t, root, outside, sandbox) = setup();
        symlink(outside.join("created.txt"), root.join("dangling")).unwrap();
        symlink(&outside, root.join("outdir")).unwrap();
        for name in ["dangling", "outdir/x.txt", "../outside/y.txt"] {
            let error =
                write(&sandbox, &root.join(name), "x", WriteMode::Overwrite, None).unwrap_err();
            assert_eq!(error.code(), ErrorCode::OutsideRoots, "{name}");
        }
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
        std::fs::write(root.join("target.txt"), "t").unwrap();
        symlink("target.txt", root.join("alias")).unwrap();
        write(
            &sandbox,
            &root.join("alias"),
            "via link",
            WriteMode::Overwrite,
            None,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            std::fs::read_to_string(root.join("target.txt")).unwrap(),
            "via link"
        );
    }

    #[test]
    fn appending_to_a_file_with_other_names_is_refused() {
        let (_t, root, outside, sandbox) = setup();
        std::fs::write(outside.join("shared.txt"), "shared").unwrap();
        std::fs::hard_link(outside.join("shared.txt"), root.join("alias.txt")).unwrap();
        let error = write(
            &sandbox,
            &root.join("alias.txt"),
            "x",
            WriteMode::Append,
            None,
        )
        .unwrap_err();
        assert_eq!(error.code(), ErrorCode::DeniedByPolicy);
        assert_eq!(
            std::fs::read_to_string(outside.join("shared.txt")).unwrap(),
            "shared"
        );
        // Overwrite replaces the name only: the outside file keeps its content.
        write(
            &sandbox,
            &root.join("alias.txt"),
            "new",
            WriteMode::Overwrite,
            None,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            std::fs::read_to_string(outside.join("shared.txt")).unwrap(),
            "shared"
        );
        assert_eq!(
            std::fs::read_to_string(root.join("alias.txt")).unwrap(),
            "new"
        );
    }

    #[test]
    fn temporaries_of_dead_writers_are_cleaned() {
        let (_t, root, _o, sandbox) = setup();
        let abandoned = root.join(format!("{TEMP_PREFIX}4194303-0-a.txt"));
        std::fs::write(&abandoned, "half").unwrap();
        write(
            &sandbox,
            &root.join("a.txt"),
            "whole",
            WriteMode::Overwrite,
            None,
        )
        .unwrap()
        .unwrap();
        assert!(!abandoned.exists());
    }

    #[test]
    fn overwriting_drops_setuid_and_setgid() {
        let (_t, root, _o, sandbox) = setup();
        let path = root.join("tool");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o6755)).unwrap();
        write(&sandbox, &path, "new", WriteMode::Overwrite, None)
            .unwrap()
            .unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777,
            0o755
        );
    }

    #[test]
    fn special_files_are_never_written() {
        let (_t, root, _o, sandbox) = setup();
        let fifo = root.join("pipe");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let error = write(&sandbox, &fifo, "x", WriteMode::Append, None).unwrap_err();
        assert_eq!(error.code(), ErrorCode::SpecialFile);
    }

    #[test]
    fn concurrent_writers_with_the_same_expectation_have_one_winner() {
        let (_t, root, _o, sandbox) = setup();
        let path = root.join("race.txt");
        for round in 0..20 {
            std::fs::write(&path, format!("base {round}")).unwrap();
            let expected = sha256_hex(format!("base {round}").as_bytes());
            let sandbox = &sandbox;
            let wins: usize = std::thread::scope(|scope| {
                let handles: Vec<_> = (0..4)
                    .map(|writer| {
                        let (path, expected) = (path.clone(), expected.clone());
                        scope.spawn(move || {
                            let content = format!("writer {writer}");
                            write(
                                sandbox,
                                &path,
                                &content,
                                WriteMode::Overwrite,
                                Some(&expected),
                            )
                            .unwrap()
                            .is_ok()
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| usize::from(h.join().unwrap()))
                    .sum()
            });
            assert_eq!(wins, 1, "round {round}");
        }
    }
}
