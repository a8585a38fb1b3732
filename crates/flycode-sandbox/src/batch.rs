//! Writing several files all or nothing (`fs.writeBatch`).
//!
//! 1. Every path is resolved and checked; two names for one file, or a file and a path below it,
//!    are refused before anything happens.
//! 2. Every existing file is locked (in path order, so two batches cannot deadlock) and every
//!    precondition checked: regular file, no appending to hard-linked files, `expectedSha256`.
//! 3. Every new content (for `append`: old content plus the addition) is staged in a flushed
//!    temporary file beside its target; missing parent directories are created and remembered.
//! 4. Only then are the targets replaced, each old file first kept under a backup name by a hard
//!    link. If a replacement fails, the ones already done are put back, and the temporaries,
//!    backups and created directories are removed: no file has changed.

use std::io::Write;
use std::path::{Path, PathBuf};

use cap_std::fs::{Dir, OpenOptions};

use super::content_hash::sha256_hex;
use super::error::SandboxError;
use super::files::Sandbox;
use super::journal::{Journal, JournalTarget, Operation};
use super::place::temp_name;
use super::resolve::{LastComponent, RootedPath};
use super::write::{HashMismatch, WriteOutcome};
use super::write_mode::WriteMode;

/// How many times a batch starts over after losing a race to create one of its files.
const MAX_ATTEMPTS: usize = 100;

/// One file of a batch.
#[derive(Clone, Debug)]
pub struct BatchFile {
    /// The path as given.
    pub path: String,
    /// The text to write.
    pub content: Vec<u8>,
    /// Overwrite or append.
    pub mode: WriteMode,
    /// The sha256 the current content must have.
    pub expected_sha256: Option<String>,
}

/// Why a batch was refused before anything changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BatchRefusal {
    /// `files[index]` does not have the expected hash.
    Mismatch {
        /// Which file.
        index: usize,
        /// Its current hash.
        mismatch: HashMismatch,
    },
    /// Two entries name the same file, or one lies below another.
    Conflict {
        /// What collides.
        message: String,
    },
}

/// One file of a batch, decided: its names, its new content and what the call will report.
struct BatchPlan {
    name: PathBuf,
    temp: PathBuf,
    /// The backup name, for a file that exists.
    backup: Option<PathBuf>,
    first_missing: Option<PathBuf>,
    content: Vec<u8>,
    outcome: WriteOutcome,
}

struct Staged {
    parent: Dir,
    name: PathBuf,
    temp: PathBuf,
    backup: Option<PathBuf>,
    /// Whether the backup name has been made (a hard link to the old file).
    linked: bool,
    /// The staged file, locked until the batch is over: once it is at its name, another writer
    /// waits for the batch (which may still put the old file back) instead of changing it.
    _lock: cap_std::fs::File,
    existed: bool,
    outcome: WriteOutcome,
}

impl Sandbox {
    /// Writes every file or none.
    pub fn write_batch(
        &self,
        files: &[BatchFile],
    ) -> Result<Result<Vec<WriteOutcome>, BatchRefusal>, SandboxError> {
        let mut resolved: Vec<RootedPath> = Vec::with_capacity(files.len());
        for file in files {
            let path = self.resolve(&file.path, LastComponent::Follow)?;
            if path.is_root() {
                return Err(SandboxError::IsDirectory {
                    path: file.path.clone(),
                });
            }
            self.protection().check(&file.path, &path.absolute)?;
            resolved.push(path);
        }
        if let Some(message) = find_conflict(files, &resolved) {
            return Ok(Err(BatchRefusal::Conflict { message }));
        }
        // A batch that loses a race to create one of its files has changed nothing (it was put
        // back): it starts over, and then finds that file and waits for its lock.
        for _ in 0..MAX_ATTEMPTS {
            if let Some(result) = self.write_batch_once(files, &resolved)? {
                return Ok(result);
            }
        }
        Err(SandboxError::Io {
            path: files.first().map(|f| f.path.clone()).unwrap_or_default(),
            source: std::io::Error::other(format!(
                "files of the batch were created and removed by someone else {MAX_ATTEMPTS} times while flycode tried to write them, so nothing was written; try again when nothing else changes them"
            )),
        })
    }

    /// One attempt at a batch; `None` when another writer created one of its new files first
    /// (everything was put back).
    fn write_batch_once(
        &self,
        files: &[BatchFile],
        resolved: &[RootedPath],
    ) -> Result<Option<Result<Vec<WriteOutcome>, BatchRefusal>>, SandboxError> {
        let Locked { locks, mut current } = self.lock_existing(files, resolved)?;
        if let Some(refusal) = first_mismatch(files, &current) {
            return Ok(Some(Err(refusal)));
        }
        // Record the whole batch before the first temporary file, then stage everything; on
        // failure remove what was staged and created.
        let plans: Vec<BatchPlan> = files
            .iter()
            .enumerate()
            .map(|(index, file)| self.plan(file, &resolved[index], current[index].take()))
            .collect();
        let mut journal = self.begin_batch(&plans, resolved)?;
        let mut created_dirs = Vec::new();
        let mut staged = Vec::new();
        for (index, plan) in plans.into_iter().enumerate() {
            match self.stage(&files[index], &resolved[index], plan, &mut created_dirs) {
                Ok(item) => staged.push(item),
                Err(error) => {
                    discard(&staged);
                    self.remove_created(&created_dirs);
                    return Err(error);
                }
            }
        }
        if let Some(Err(error)) = journal.as_mut().map(Journal::replacing) {
            discard(&staged);
            self.remove_created(&created_dirs);
            return Err(error);
        }
        if !self.replace_all(files, &mut staged, &created_dirs)? {
            return Ok(None);
        }
        // Each folder is flushed once, however many of the batch's files it holds (PROTOCOL.md §9
        // (fs.writeBatch)); best effort, as every rename is done and the answer is "written".
        let mut flushed = std::collections::HashSet::new();
        for item in &staged {
            if let Some(backup) = item.backup.as_ref().filter(|_| item.linked) {
                let _ = item.parent.remove_file(backup);
            }
            if flushed.insert(item.outcome.path.parent().map(Path::to_path_buf)) {
                let _ = super::write::sync_dir(&item.parent, "", self.durability());
            }
        }
        drop(journal);
        drop(locks);
        Ok(Some(Ok(staged
            .into_iter()
            .map(|item| item.outcome)
            .collect())))
    }

    /// Locks the files that exist, in path order (so two batches never wait for each other),
    /// and reads what each holds now.
    fn lock_existing(
        &self,
        files: &[BatchFile],
        resolved: &[RootedPath],
    ) -> Result<Locked, SandboxError> {
        let mut order: Vec<usize> = (0..files.len()).collect();
        order.sort_by(|a, b| resolved[*a].absolute.cmp(&resolved[*b].absolute));
        let mut locks = Vec::new();
        let mut current: Vec<Option<Vec<u8>>> = vec![None; files.len()];
        for &index in &order {
            let file = &files[index];
            let Some(parent) = self.existing_parent(&file.path, &resolved[index])? else {
                continue;
            };
            let name = file_name(&resolved[index]);
            if let Some((handle, bytes)) = lock_and_read(&parent, &name, &file.path, file.mode)? {
                locks.push(handle);
                current[index] = Some(bytes);
            }
        }
        Ok(Locked { locks, current })
    }

    /// Records the whole batch in the journal, before its first temporary file. Paths that are
    /// not UTF-8 cannot be recorded (records are JSON): such a batch goes unrecorded, as before
    /// the journal existed.
    fn begin_batch(
        &self,
        plans: &[BatchPlan],
        resolved: &[RootedPath],
    ) -> Result<Option<Journal>, SandboxError> {
        let targets: Option<Vec<JournalTarget>> = plans
            .iter()
            .zip(resolved)
            .map(|(plan, path)| {
                JournalTarget::new(
                    self.root_path(path),
                    path.relative.parent().unwrap_or(Path::new("")),
                    &plan.name,
                    &plan.temp,
                    plan.backup.as_deref(),
                    plan.outcome.sha256.clone(),
                    plan.first_missing.as_deref(),
                )
                .map(|target| target.creating(plan.outcome.created))
            })
            .collect();
        let Some(targets) = targets else {
            return Ok(None);
        };
        Journal::begin(
            Operation::WriteBatch,
            self.roots(),
            targets,
            self.durability(),
        )
        .map(Some)
    }

    /// Puts every staged file in place, keeping backups so that a failure can be undone: on one,
    /// everything done is put back, and the error comes back, or `false` when another writer
    /// created one of the new files first.
    fn replace_all(
        &self,
        files: &[BatchFile],
        staged: &mut [Staged],
        created_dirs: &[CreatedDirs],
    ) -> Result<bool, SandboxError> {
        super::landing::wait();
        for done in 0..staged.len() {
            if let Err(error) = replace(&mut staged[done]) {
                for item in staged[..done].iter().rev() {
                    restore(item);
                }
                discard(staged);
                self.remove_created(created_dirs);
                if !staged[done].existed && error.kind() == std::io::ErrorKind::AlreadyExists {
                    return Ok(false);
                }
                return Err(SandboxError::from_io(&files[done].path, error));
            }
        }
        Ok(true)
    }

    /// The parent directory of `path` if it exists.
    fn existing_parent(&self, input: &str, path: &RootedPath) -> Result<Option<Dir>, SandboxError> {
        match self.parent_dir(input, path, false) {
            Ok((dir, _)) => Ok(Some(dir)),
            Err(SandboxError::NotFound { .. }) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// The canonical root holding `path`.
    fn root_path(&self, path: &RootedPath) -> &Path {
        let roots = self.roots();
        &roots[path.root.min(roots.len().saturating_sub(1))]
    }

    /// Everything about one file that the journal records, decided before anything is made.
    fn plan(&self, file: &BatchFile, path: &RootedPath, current: Option<Vec<u8>>) -> BatchPlan {
        let root = self.root_dir(path);
        // The first missing ancestor: removing it undoes the whole creation.
        let mut first_missing = None;
        if let Some(parent) = path.relative.parent() {
            for ancestor in parent.ancestors().filter(|a| !a.as_os_str().is_empty()) {
                if root.symlink_metadata(ancestor).is_err() {
                    first_missing = Some(ancestor.to_owned());
                }
            }
        }
        let content = match (file.mode, &current) {
            (WriteMode::Append, Some(old)) => [old.as_slice(), file.content.as_slice()].concat(),
            _ => file.content.clone(),
        };
        let name = file_name(path);
        BatchPlan {
            temp: temp_name(&name),
            backup: current
                .is_some()
                .then(|| temp_name(&PathBuf::from(format!("backup-{}", name.display())))),
            name,
            first_missing,
            outcome: WriteOutcome {
                path: path.absolute.clone(),
                bytes_written: file.content.len() as u64,
                sha256: sha256_hex(&content),
                created: current.is_none(),
            },
            content,
        }
    }

    fn stage(
        &self,
        file: &BatchFile,
        path: &RootedPath,
        plan: BatchPlan,
        created_dirs: &mut Vec<CreatedDirs>,
    ) -> Result<Staged, SandboxError> {
        let root = self.root_dir(path);
        if let Some(parent) = path.relative.parent() {
            // Created by an earlier file of this batch, or not: only a creation now is undone.
            let mut first_missing = None;
            for ancestor in parent.ancestors().filter(|a| !a.as_os_str().is_empty()) {
                if root.symlink_metadata(ancestor).is_err() {
                    first_missing = Some(ancestor.to_owned());
                }
            }
            if let Some(missing) = first_missing {
                super::landing::wait();
                root.create_dir_all(parent)
                    .map_err(|e| SandboxError::from_io(&file.path, e))?;
                created_dirs.push(CreatedDirs {
                    root: path.root,
                    first: missing,
                    last: parent.to_owned(),
                });
            }
        }
        let (parent, name) = self.parent_dir(&file.path, path, false)?;
        super::write::clean_stale_temporaries(&parent, self.roots());
        let temp = plan.temp;
        let permissions = parent
            .metadata(&name)
            .ok()
            .map(|m| super::write::without_special_bits(m.permissions()));
        let written = (|| {
            let mut handle =
                parent.open_with(&temp, OpenOptions::new().write(true).create_new(true))?;
            rustix::fs::flock(&handle, rustix::fs::FlockOperation::LockExclusive)?;
            handle.write_all(&plan.content)?;
            super::durability::sync_data(&handle, self.durability())?;
            if let Some(permissions) = permissions {
                handle.set_permissions(permissions)?;
            }
            Ok::<_, std::io::Error>(handle)
        })();
        let handle = match written {
            Ok(handle) => handle,
            Err(error) => {
                let _ = parent.remove_file(&temp);
                return Err(SandboxError::from_io(&file.path, error));
            }
        };
        Ok(Staged {
            _lock: handle,
            existed: plan.backup.is_some(),
            outcome: plan.outcome,
            parent,
            name,
            temp,
            backup: plan.backup,
            linked: false,
        })
    }

    /// Removes the directories the batch created, deepest first, each only while it is empty:
    /// another writer may have put a file in one meanwhile, and that file stays.
    fn remove_created(&self, created: &[CreatedDirs]) {
        for dirs in created.iter().rev() {
            let Some(handle) = self.root_handle(dirs.root) else {
                continue;
            };
            for dir in dirs.last.ancestors() {
                if !dir.starts_with(&dirs.first) || handle.remove_dir(dir).is_err() {
                    break;
                }
            }
        }
    }
}

/// The files of a batch as they are, under their locks.
struct Locked {
    /// The locks of the files that exist, held until the batch is done.
    locks: Vec<cap_std::fs::File>,
    /// Each file's content, by the batch's order (`None`: no file).
    current: Vec<Option<Vec<u8>>>,
}

/// The directories a batch created on the way to one file: `first` (the first that was missing)
/// down to `last` (the file's own directory), relative to root number `root`.
struct CreatedDirs {
    root: usize,
    first: PathBuf,
    last: PathBuf,
}

fn file_name(path: &RootedPath) -> PathBuf {
    path.relative
        .file_name()
        .map(PathBuf::from)
        .unwrap_or_default()
}

/// The first file whose content is not what its call expected (`expectedSha256`), as a refusal.
fn first_mismatch(files: &[BatchFile], current: &[Option<Vec<u8>>]) -> Option<BatchRefusal> {
    files.iter().enumerate().find_map(|(index, file)| {
        let expected = file.expected_sha256.as_ref()?;
        let actual = current[index]
            .as_deref()
            .map_or_else(|| "(missing)".to_owned(), sha256_hex);
        (*expected != actual).then_some(BatchRefusal::Mismatch {
            index,
            mismatch: HashMismatch { actual },
        })
    })
}

/// Locks an existing file (the one at the name once locked) and reads it; `None` when there is
/// no file.
fn lock_and_read(
    parent: &Dir,
    name: &Path,
    input: &str,
    mode: WriteMode,
) -> Result<Option<(cap_std::fs::File, Vec<u8>)>, SandboxError> {
    let Some(mut file) = super::lock::lock_what_is_there(parent, name, input, mode)? else {
        return Ok(None);
    };
    let size = file.metadata().map_or(0, |metadata| metadata.len());
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    crate::read::read_to_end_aligned(&mut file, &mut bytes)
        .map_err(|e| SandboxError::from_io(input, e))?;
    Ok(Some((file, bytes)))
}

/// Two names for one file (also through hard links), or a file with another below it: the batch
/// cannot be ordered.
fn find_conflict(files: &[BatchFile], resolved: &[RootedPath]) -> Option<String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let identity = |p: &RootedPath| {
            std::fs::metadata(&p.absolute)
                .ok()
                .map(|m| (m.dev(), m.ino()))
        };
        let ids: Vec<_> = resolved.iter().map(identity).collect();
        for (i, a) in ids.iter().enumerate() {
            if let Some(j) = ids.iter().skip(i + 1).position(|b| a.is_some() && a == b) {
                let j = i + 1 + j;
                return Some(format!(
                    "files[{i}] ({}) and files[{j}] ({}) are the same file (hard links)",
                    files[i].path, files[j].path
                ));
            }
        }
    }
    for (i, a) in resolved.iter().enumerate() {
        for (j, b) in resolved.iter().enumerate().skip(i + 1) {
            if a.absolute == b.absolute {
                return Some(format!(
                    "files[{i}] ({}) and files[{j}] ({}) name the same file",
                    files[i].path, files[j].path
                ));
            }
            let (outer, inner, o, n) = if b.absolute.starts_with(&a.absolute) {
                (i, j, a, b)
            } else {
                (j, i, b, a)
            };
            if n.absolute.starts_with(&o.absolute) {
                return Some(format!(
                    "files[{inner}] ({}) lies below files[{outer}] ({}), which is a file in the same batch",
                    files[inner].path, files[outer].path
                ));
            }
        }
    }
    None
}

/// Puts one staged file at its name: over the old file (kept under its backup name first), or,
/// for a new file, only if the name is still free (`AlreadyExists` when another writer created it
/// meanwhile).
fn replace(item: &mut Staged) -> std::io::Result<()> {
    if !item.existed {
        return super::place::rename_if_free(&item.parent, &item.temp, &item.name);
    }
    if let Some(backup) = &item.backup {
        item.parent.hard_link(&item.name, &item.parent, backup)?;
        item.linked = true;
    }
    item.parent.rename(&item.temp, &item.parent, &item.name)
}

/// Puts a replaced file back (or removes a created one).
fn restore(item: &Staged) {
    match item.backup.as_ref().filter(|_| item.linked) {
        Some(backup) => {
            let _ = item.parent.rename(backup, &item.parent, &item.name);
        }
        None => {
            let _ = item.parent.remove_file(&item.name);
        }
    }
}

fn discard(staged: &[Staged]) {
    for item in staged {
        let _ = item.parent.remove_file(&item.temp);
        if let Some(backup) = item.backup.as_ref().filter(|_| item.linked) {
            let _ = item.parent.remove_file(backup);
        }
    }
}

#[cfg(test)]
#[cfg(unix)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;
    use crate::Roots;
    use crate::place::TEMP_PREFIX;
    use flycode_protocol::ErrorCode;

    fn setup() -> (tempfile::TempDir, PathBuf, Sandbox) {
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap().join("root");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("a.txt"), "old a").unwrap();
        std::fs::write(root.join("b.txt"), "old b").unwrap();
        let sandbox = Sandbox::open(&Roots::resolve(std::slice::from_ref(&root)).unwrap()).unwrap();
        (temp, root, sandbox)
    }

    fn file(root: &Path, name: &str, content: &str) -> BatchFile {
        BatchFile {
            path: format!("{}/{name}", root.display()),
            content: content.as_bytes().to_vec(),
            mode: WriteMode::Overwrite,
            expected_sha256: None,
        }
    }

    /// Every file below `root`, with its content: the state a failed batch must not change.
    fn snapshot(root: &Path) -> Vec<(PathBuf, String)> {
        let mut all = Vec::new();
        let mut stack = vec![root.to_owned()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    all.push((path.clone(), "<dir>".to_owned()));
                    stack.push(path);
                } else {
                    all.push((
                        path.clone(),
                        std::fs::read_to_string(&path).unwrap_or_default(),
                    ));
                }
            }
        }
        all.sort();
        all
    }

    #[test]
    fn concurrent_batches_and_appends_to_new_files_lose_nothing() {
        let (_t, root, sandbox) = setup();
        let log = root.join("new/log.txt");
        let sandbox = &sandbox;
        std::thread::scope(|scope| {
            for writer in 0..6 {
                let (root, log) = (root.clone(), log.clone());
                scope.spawn(move || {
                    for n in 0..12 {
                        let line = format!("{writer} {n}\n");
                        if writer < 4 {
                            let mut append = file(&root, "new/log.txt", &line);
                            append.mode = WriteMode::Append;
                            let own = file(&root, &format!("new/{writer}-{n}.txt"), &line);
                            sandbox.write_batch(&[append, own]).unwrap().unwrap();
                        } else {
                            sandbox
                                .write_file(
                                    &log.display().to_string(),
                                    line.as_bytes(),
                                    WriteMode::Append,
                                    None,
                                )
                                .unwrap()
                                .unwrap();
                        }
                    }
                });
            }
        });
        let text = std::fs::read_to_string(&log).unwrap();
        let mut lines: Vec<&str> = text.lines().collect();
        lines.sort_unstable();
        let mut expected: Vec<String> = (0..6)
            .flat_map(|w| (0..12).map(move |n| format!("{w} {n}")))
            .collect();
        expected.sort_unstable();
        assert_eq!(lines, expected);
        for writer in 0..4 {
            for n in 0..12 {
                let own = root.join(format!("new/{writer}-{n}.txt"));
                assert_eq!(
                    std::fs::read_to_string(own).unwrap(),
                    format!("{writer} {n}\n")
                );
            }
        }
        // Nothing staged is left behind.
        assert_eq!(std::fs::read_dir(root.join("new")).unwrap().count(), 49);
    }

    #[test]
    fn writes_every_file() {
        let (_t, root, sandbox) = setup();
        let mut append = file(&root, "a.txt", " + more");
        append.mode = WriteMode::Append;
        let outcomes = sandbox
            .write_batch(&[
                append,
                file(&root, "new/dir/c.txt", "c"),
                file(&root, "b.txt", "new b"),
            ])
            .unwrap()
            .unwrap();
        assert_eq!(outcomes.len(), 3);
        assert_eq!(
            std::fs::read_to_string(root.join("a.txt")).unwrap(),
            "old a + more"
        );
        assert_eq!(
            std::fs::read_to_string(root.join("new/dir/c.txt")).unwrap(),
            "c"
        );
        assert_eq!(
            std::fs::read_to_string(root.join("b.txt")).unwrap(),
            "new b"
        );
        assert_eq!(outcomes[0].sha256, sha256_hex(b"old a + more"));
        let leftovers: Vec<_> = snapshot(&root)
            .into_iter()
            .filter(|(p, _)| p.display().to_string().contains(TEMP_PREFIX))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn a_failed_precondition_changes_nothing() {
        let (_t, root, sandbox) = setup();
        let before = snapshot(&root);
        let mut stale = file(&root, "b.txt", "new b");
        stale.expected_sha256 = Some(sha256_hex(b"something else"));
        let refusal = sandbox
            .write_batch(&[
                file(&root, "a.txt", "new a"),
                file(&root, "new/c.txt", "c"),
                stale,
            ])
            .unwrap()
            .unwrap_err();
        assert_eq!(
            refusal,
            BatchRefusal::Mismatch {
                index: 2,
                mismatch: HashMismatch {
                    actual: sha256_hex(b"old b")
                }
            }
        );
        assert_eq!(snapshot(&root), before);
    }

    #[test]
    fn aliases_and_nested_paths_are_conflicts() {
        let (_t, root, sandbox) = setup();
        symlink("a.txt", root.join("alias")).unwrap();
        let before = snapshot(&root);
        for batch in [
            vec![file(&root, "a.txt", "1"), file(&root, "alias", "2")],
            vec![file(&root, "a.txt", "1"), file(&root, "./a.txt", "2")],
            vec![file(&root, "x", "1"), file(&root, "x/y", "2")],
        ] {
            let refusal = sandbox.write_batch(&batch).unwrap().unwrap_err();
            assert!(
                matches!(refusal, BatchRefusal::Conflict { .. }),
                "{refusal:?}"
            );
        }
        assert_eq!(snapshot(&root), before);
    }

    #[test]
    fn hard_links_to_one_file_are_a_conflict_not_a_deadlock() {
        let (_t, root, sandbox) = setup();
        std::fs::hard_link(root.join("a.txt"), root.join("h.txt")).unwrap();
        let refusal = sandbox
            .write_batch(&[file(&root, "a.txt", "1"), file(&root, "h.txt", "2")])
            .unwrap()
            .unwrap_err();
        assert!(
            matches!(refusal, BatchRefusal::Conflict { ref message } if message.contains("hard links")),
            "{refusal:?}"
        );
    }

    #[test]
    fn a_failure_while_staging_changes_nothing() {
        let (_t, root, sandbox) = setup();
        // A 250-byte name is valid, but its temporary name is too long: staging fails after the
        // directory for it was created and other files were staged. All of it is undone.
        let before = snapshot(&root);
        let long = format!("made/{}", "n".repeat(250));
        let error = sandbox
            .write_batch(&[
                file(&root, "a.txt", "new a"),
                file(&root, "other/c.txt", "c"),
                file(&root, &long, "x"),
            ])
            .unwrap_err();
        assert_eq!(error.code(), ErrorCode::IoError);
        assert_eq!(snapshot(&root), before);
    }

    #[test]
    fn a_file_in_the_way_of_a_directory_is_refused_first() {
        let (_t, root, sandbox) = setup();
        let before = snapshot(&root);
        let error = sandbox
            .write_batch(&[
                file(&root, "a.txt", "new a"),
                file(&root, "b.txt/inner", "x"),
            ])
            .unwrap_err();
        assert_eq!(error.code(), ErrorCode::NotDirectory);
        assert_eq!(snapshot(&root), before);
    }

    #[test]
    fn an_outside_path_refuses_the_whole_batch() {
        let (_t, root, sandbox) = setup();
        let before = snapshot(&root);
        let mut outside = file(&root, "a.txt", "x");
        outside.path = "/tmp/flycode-batch-outside.txt".into();
        let error = sandbox
            .write_batch(&[file(&root, "a.txt", "new"), outside])
            .unwrap_err();
        assert_eq!(error.code(), ErrorCode::OutsideRoots);
        assert_eq!(snapshot(&root), before);
    }
}
