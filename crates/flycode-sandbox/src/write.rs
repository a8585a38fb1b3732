//! Writing files so that a crash leaves the old content or the new, never a mix: the new bytes go
//! to a temporary file in the same directory, are flushed (`sync_data`), take the old file's
//! permissions, and replace the name by `rename`; then the directory itself is flushed (both
//! flushes through [`super::durability`], none under `durability = "process"`).
//!
//! Every write of an existing file happens under an exclusive advisory lock on that file, taken
//! again when the name has meanwhile moved on to another file: an append reads the content it
//! extends under the lock, so concurrent appends (threads, sessions, processes) all land, each
//! once, and a precondition on the current content (`expectedSha256`) lets exactly one of two
//! writers with the same expectation win. Where there is no file, there is nothing to lock: the
//! staged file takes the name only if it is still free (`RENAME_NOREPLACE`), and a writer that
//! loses that race starts over against the winner's file (PROTOCOL.md §9, fs.write).

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use cap_std::fs::{Dir, OpenOptions};

use super::content_hash::sha256_hex;
use super::durability::{self, Durability};
use super::error::SandboxError;
use super::files::Sandbox;
use super::journal::{Journal, JournalTarget, Operation};
use super::place::{TEMP_PREFIX, temp_name};
use super::resolve::{LastComponent, RootedPath};
use super::write_mode::WriteMode;

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

/// How many times a write starts over after losing a creation race before it gives up.
const MAX_ATTEMPTS: usize = 100;

/// Where a write goes: the resolved path, its open directory and its final name.
#[derive(Clone, Copy)]
struct Destination<'a> {
    path: &'a RootedPath,
    parent: &'a Dir,
    name: &'a Path,
    input: &'a str,
}

/// What one attempt at a write came to.
enum WriteAttempt {
    /// Written, or refused by the expectation.
    Done(Result<WriteOutcome, HashMismatch>),
    /// There was no file, and another writer created one before this one could: start over.
    LostCreation,
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
        let target = Destination {
            path: &path,
            parent: &parent,
            name: &name,
            input,
        };
        // Each lost creation race means another writer has just created the file: the next
        // attempt finds it and waits for its lock. Only someone creating and removing it again
        // and again could keep a writer here.
        for _ in 0..MAX_ATTEMPTS {
            if let WriteAttempt::Done(result) =
                self.write_once(&target, content, mode, expected_sha256)?
            {
                return Ok(result);
            }
        }
        Err(SandboxError::Io {
            path: input.to_owned(),
            source: std::io::Error::other(format!(
                "the file was created and removed by someone else {MAX_ATTEMPTS} times while flycode tried to write it, so nothing was written; try again when nothing else changes it"
            )),
        })
    }

    /// One attempt at a write: lock what is at the name (or find nothing), check, stage, and put
    /// the staged file in place. Where there was no file, the staged one takes the name only if
    /// it is still free; otherwise another writer created the file meanwhile, nothing was
    /// written, and the caller tries again, against that file.
    fn write_once(
        &self,
        target: &Destination<'_>,
        content: &[u8],
        mode: WriteMode,
        expected_sha256: Option<&str>,
    ) -> Result<WriteAttempt, SandboxError> {
        let Destination {
            path,
            parent,
            name,
            input,
        } = *target;
        let locked = super::lock::lock_what_is_there(parent, name, input, mode)?;
        // Under the lock, what is at the name now. An overwrite reads the old content only to
        // check an expectation, and then streams it through the hash: a 1 MB overwrite would
        // otherwise read, hold and hash the megabyte it is about to replace.
        let old = match (mode, &locked) {
            (WriteMode::Append, Some(file)) => Some(read_whole(file, input)?),
            _ => None,
        };
        if let Some(expected) = expected_sha256 {
            let actual = current_hash(old.as_deref(), locked.as_ref(), input)?;
            if expected != actual {
                return Ok(WriteAttempt::Done(Err(HashMismatch { actual })));
            }
        }
        // An append is staged and renamed too (old content plus the addition): a writer killed
        // part-way through the addition must not leave half of it.
        let whole: Cow<'_, [u8]> = match &old {
            Some(old) => Cow::Owned([old.as_slice(), content].concat()),
            None => Cow::Borrowed(content),
        };
        let sha256 = sha256_hex(&whole);
        let temp = temp_name(name);
        let journal = self.begin_write(path, name, &temp, &sha256, locked.is_none())?;
        // The new file keeps the old one's permissions (read from the locked file itself).
        let permissions = match &locked {
            Some(file) => Some(without_special_bits(
                file.metadata()
                    .map_err(|e| SandboxError::from_io(input, e))?
                    .permissions(),
            )),
            None => None,
        };
        let _staged = stage(parent, &temp, &whole, permissions, input, self.durability())?;
        super::landing::wait();
        let placed = match &locked {
            // Replacing the file whose lock is held: the name still leads to it (checked after
            // locking), and every other flycode writer waits for the lock.
            Some(_) => parent.rename(&temp, parent, name),
            None => super::place::rename_if_free(parent, &temp, name),
        };
        if let Err(error) = placed {
            let _ = parent.remove_file(&temp);
            if locked.is_none() && error.kind() == std::io::ErrorKind::AlreadyExists {
                return Ok(WriteAttempt::LostCreation);
            }
            return Err(SandboxError::from_io(input, error));
        }
        sync_dir(parent, input, self.durability())?;
        drop(journal);
        Ok(WriteAttempt::Done(Ok(WriteOutcome {
            path: path.absolute.clone(),
            bytes_written: content.len() as u64,
            sha256,
            created: locked.is_none(),
        })))
    }

    /// Records in the journal that `name` (of `path`) is about to be replaced by, or `creating`
    /// created from, the staged file `temp` holding content `sha256`; the record lasts until the
    /// journal is dropped. A path that is not UTF-8 cannot be recorded (records are JSON): such a
    /// write goes unrecorded, as before the journal existed.
    fn begin_write(
        &self,
        path: &RootedPath,
        name: &Path,
        temp: &Path,
        sha256: &str,
        creating: bool,
    ) -> Result<Option<Journal>, SandboxError> {
        let parent_relative = path.relative.parent().unwrap_or(Path::new(""));
        let record = JournalTarget::new(
            &self.roots()[path.root.min(self.roots().len().saturating_sub(1))],
            parent_relative,
            name,
            temp,
            None,
            sha256.to_owned(),
            None,
        );
        let Some(record) = record else {
            return Ok(None);
        };
        Journal::begin(
            Operation::Write,
            self.roots(),
            vec![record.creating(creating)],
            self.durability(),
        )
        .map(Some)
    }

    /// The directory holding `path` (created when `create` and missing) and the final name.
    pub fn parent_dir(
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
        let dir = match root.open_dir(parent_relative) {
            Err(error) if create && error.kind() == std::io::ErrorKind::NotFound => {
                // Creating a folder changes the roots: after the change's record.
                super::landing::wait();
                root.create_dir_all(parent_relative)
                    .and_then(|()| root.open_dir(parent_relative))
            }
            opened => opened,
        }
        .map_err(|e| SandboxError::from_io(input, e))?;
        Ok((dir, name))
    }
}

/// The whole content of the locked file (read from its start: it was just opened).
fn read_whole(file: &cap_std::fs::File, input: &str) -> Result<Vec<u8>, SandboxError> {
    let size = file.metadata().map_or(0, |metadata| metadata.len());
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    crate::read::read_to_end_aligned(&mut &*file, &mut bytes)
        .map_err(|e| SandboxError::from_io(input, e))?;
    Ok(bytes)
}

/// The sha256 of the locked file's content, streamed and never remembered: the caller asked for
/// this exact content, and a remembered hash rests on timestamps (which a write through a
/// memory map may not move until later).
fn stream_hash(file: &cap_std::fs::File, input: &str) -> Result<String, SandboxError> {
    super::content_hash::stream_sha256(file).map_err(|e| SandboxError::from_io(input, e))
}

/// The hash of what is at the name now, as an expectation is checked against: of the old content
/// already read, else streamed from the locked file, else `(missing)`.
fn current_hash(
    old: Option<&[u8]>,
    locked: Option<&cap_std::fs::File>,
    input: &str,
) -> Result<String, SandboxError> {
    Ok(match (old, locked) {
        (Some(old), _) => sha256_hex(old),
        (None, Some(file)) => stream_hash(file, input)?,
        (None, None) => "(missing)".to_owned(),
    })
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
    type FolderIdentity = (u64, u64, std::time::SystemTime);
    static CLEANED: Mutex<Option<HashMap<FolderIdentity, Instant>>> = Mutex::new(None);
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
    let identity: FolderIdentity = {
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

/// Writes `content` to the new temporary file `temp` in `parent`, flushed, with `permissions`;
/// removed again if anything fails. The file is returned locked: a writer that finds it at the
/// name before this one is done with it (the link fallback of [`super::place`] gives it a second
/// name for a moment) waits instead of counting that name.
fn stage(
    parent: &Dir,
    temp: &Path,
    content: &[u8],
    permissions: Option<cap_std::fs::Permissions>,
    input: &str,
    durability: Durability,
) -> Result<cap_std::fs::File, SandboxError> {
    let result = (|| {
        let mut file = parent.open_with(temp, OpenOptions::new().write(true).create_new(true))?;
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)?;
        file.write_all(content)?;
        durability::sync_data(&file, durability)?;
        if let Some(permissions) = permissions {
            file.set_permissions(permissions)?;
        }
        Ok::<_, std::io::Error>(file)
    })();
    result.map_err(|error| {
        let _ = parent.remove_file(temp);
        SandboxError::from_io(input, error)
    })
}

/// The permissions to keep, without setuid, setgid and sticky bits: new content must not inherit
/// privileges granted to the old.
pub fn without_special_bits(permissions: cap_std::fs::Permissions) -> cap_std::fs::Permissions {
    #[cfg(unix)]
    {
        use cap_std::fs::PermissionsExt;
        cap_std::fs::Permissions::from_mode(permissions.mode() & 0o777)
    }
    #[cfg(not(unix))]
    permissions
}

/// Flushes a directory, so a rename in it survives a crash (nothing under `process`).
/// (Directory handles are opened for path operations only, so the directory is opened once more,
/// for reading, to be flushed.)
pub fn sync_dir(dir: &Dir, input: &str, durability: Durability) -> Result<(), SandboxError> {
    if durability == Durability::Process {
        return Ok(());
    }
    let handle = dir
        .open_with(".", OpenOptions::new().read(true))
        .map_err(|e| SandboxError::from_io(input, e))?;
    durability::sync_dir(&handle, durability).map_err(|e| SandboxError::from_io(input, e))
}

#[cfg(test)]
#[cfg(unix)]
mod tests {
    use std::os::unix::fs::{PermissionsExt, symlink};

    use super::*;
    use crate::Roots;
    use flycode_protocol::ErrorCode;

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

    /// Every line of `text` and how often it occurs.
    fn line_counts(text: &str) -> HashMap<&str, usize> {
        let mut counts = HashMap::new();
        for line in text.lines() {
            *counts.entry(line).or_insert(0) += 1;
        }
        counts
    }

    #[test]
    fn concurrent_appends_to_a_new_file_all_land_once() {
        let (_t, root, _o, sandbox) = setup();
        for round in 0..10 {
            let path = root.join(format!("log-{round}.txt"));
            let sandbox = &sandbox;
            std::thread::scope(|scope| {
                for writer in 0..6 {
                    let path = path.clone();
                    scope.spawn(move || {
                        for n in 0..15 {
                            let line = format!("writer {writer} line {n} {}\n", "x".repeat(40));
                            let outcome = write(sandbox, &path, &line, WriteMode::Append, None)
                                .unwrap()
                                .unwrap();
                            assert_eq!(outcome.bytes_written, line.len() as u64);
                        }
                    });
                }
            });
            let text = std::fs::read_to_string(&path).unwrap();
            let counts = line_counts(&text);
            assert_eq!(counts.len(), 6 * 15, "round {round}: {text}");
            assert!(counts.values().all(|&n| n == 1), "round {round}: {text}");
            assert!(text.ends_with('\n'));
        }
        let names: Vec<_> = std::fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.starts_with(TEMP_PREFIX))
            .collect();
        assert!(names.is_empty(), "temporaries left: {names:?}");
    }

    #[test]
    fn a_creator_that_loses_the_race_keeps_the_winners_content() {
        let (_t, root, _o, sandbox) = setup();
        for round in 0..20 {
            let path = root.join(format!("new-{round}.txt"));
            let sandbox = &sandbox;
            // Overwrites of a missing file: the last one wins, whole; appends racing them land
            // on whichever content is there when they run, and are never dropped.
            std::thread::scope(|scope| {
                for writer in 0..4 {
                    let path = path.clone();
                    scope.spawn(move || {
                        let mode = if writer % 2 == 0 {
                            WriteMode::Overwrite
                        } else {
                            WriteMode::Append
                        };
                        write(sandbox, &path, &format!("w{writer}\n"), mode, None)
                            .unwrap()
                            .unwrap();
                    });
                }
            });
            let text = std::fs::read_to_string(&path).unwrap();
            // The file is the last overwrite, whole, then whatever was appended after it, once
            // each: an append answered before that overwrite was replaced by it, as asked.
            let lines: Vec<&str> = text.lines().collect();
            assert!(matches!(lines[0], "w0" | "w2"), "round {round}: {text:?}");
            assert!(
                lines[1..].iter().all(|l| matches!(*l, "w1" | "w3")),
                "round {round}: {text:?}"
            );
            let counts = line_counts(&text);
            assert!(counts.values().all(|&n| n == 1), "round {round}: {text:?}");
        }
    }

    #[test]
    fn of_writers_that_expect_no_file_exactly_one_creates_it() {
        let (_t, root, _o, sandbox) = setup();
        for round in 0..20 {
            let path = root.join(format!("once-{round}.txt"));
            let sandbox = &sandbox;
            let winners: Vec<usize> = std::thread::scope(|scope| {
                let handles: Vec<_> = (0..4)
                    .map(|writer| {
                        let path = path.clone();
                        scope.spawn(move || {
                            let content = format!("writer {writer}");
                            let mode = if writer % 2 == 0 {
                                WriteMode::Overwrite
                            } else {
                                WriteMode::Append
                            };
                            match write(sandbox, &path, &content, mode, Some("(missing)")).unwrap()
                            {
                                Ok(outcome) => {
                                    assert!(outcome.created);
                                    Some(writer)
                                }
                                Err(mismatch) => {
                                    assert_ne!(mismatch.actual, "(missing)");
                                    None
                                }
                            }
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .filter_map(|h| h.join().unwrap())
                    .collect()
            });
            assert_eq!(winners.len(), 1, "round {round}: {winners:?}");
            assert_eq!(
                std::fs::read_to_string(&path).unwrap(),
                format!("writer {}", winners[0])
            );
        }
    }

    #[test]
    fn concurrent_creations_of_different_files_in_one_folder_all_land() {
        let (_t, root, _o, sandbox) = setup();
        let sandbox = &sandbox;
        std::thread::scope(|scope| {
            for writer in 0..6 {
                let root = root.clone();
                scope.spawn(move || {
                    for n in 0..20 {
                        let path = root.join(format!("dir/sub/{writer}-{n}.txt"));
                        let mode = if n % 2 == 0 {
                            WriteMode::Overwrite
                        } else {
                            WriteMode::Append
                        };
                        write(sandbox, &path, &format!("{writer} {n}"), mode, None)
                            .unwrap()
                            .unwrap();
                    }
                });
            }
        });
        for writer in 0..6 {
            for n in 0..20 {
                let path = root.join(format!("dir/sub/{writer}-{n}.txt"));
                assert_eq!(
                    std::fs::read_to_string(&path).unwrap(),
                    format!("{writer} {n}")
                );
            }
        }
        assert_eq!(
            std::fs::read_dir(root.join("dir/sub")).unwrap().count(),
            120
        );
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
