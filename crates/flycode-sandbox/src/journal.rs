//! What an interrupted `fs.write`, `fs.edit` or `fs.writeBatch` left behind, and how the next
//! start of flycode finishes or undoes it (PROTOCOL.md §11 Security, "After a crash").
//!
//! Before a write creates its first temporary file, it records in `STATE/journal/` every target
//! (root, directory, name), the temporary and backup names it will use and the sha256 of the
//! content it will write. That first record is not flushed: until the first rename every target
//! still holds its whole old content, so the record only lets the next start remove temporary
//! files after flycode was killed, for which the page cache (which outlives the process) is
//! enough. After a power loss such a record may be empty, and is then dropped (at worst
//! `.flycode-tmp-…` files, and a batch's new empty folders, remain beside the whole old files).
//! A single file's replacement (fs.write, fs.edit) is one rename of a flushed temporary file,
//! whole old or whole new even after a power loss, and needs no more. A batch records a second
//! phase, "replacing", after every temporary file is flushed and before the first rename; under
//! `durability = "full"` that record is flushed, and so is the journal's folder (its rename),
//! because from then on only it can say which renames belong together
//! ([`super::durability`]). The record is taken out of the journal when the operation is over,
//! whether it succeeded or failed (its file is kept for the process's next write, renamed into
//! `STATE/journal-spare/`: [`super::spare_records`]).
//!
//! At its next start, flycode reads the records of processes that are gone and decides:
//! - still staging, or a rename missing (a temporary file is still there): undo. Temporary files
//!   are removed, replaced files get their backups back, files the batch created are removed, and
//!   so are the (empty) directories it created: the batch is all old.
//! - every rename done (no temporary file left): finish. The backups are removed: all new.
//!
//! Recovery walks from `/` to each recorded directory one component at a time without following
//! links, and only removes or renames the exact names flycode creates (`.flycode-tmp-…`). The only
//! other name it touches is a target being undone, and only when the record says the operation
//! created it and its content is still exactly what the operation wrote (checked through a
//! handle opened without following links).
//!
//! Records are sealed ([`super::seal`]: HMAC-SHA256 of the record's name and bytes under a key
//! only flycode reads) and carry the roots of the run that wrote them. Recovery acts only on a
//! record whose seal verifies and whose targets all lie in its recorded roots (and, where the
//! caller knows them, in this run's: a record outside those is left for a run that has them).
//! Anything else in the journal (damaged, planted by a program or a tool, from an older flycode)
//! is never acted on or deleted: it is moved to `journal/rejected/` and reported.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use cap_std::fs::Dir;
use serde::{Deserialize, Serialize};

use super::content_hash::sha256_hex;
use super::durability::Durability;
use super::error::SandboxError;
use super::handles::{open_file, open_subdir};
use super::place::TEMP_PREFIX;
use super::record_owner::{open_record, owner_of};
pub use super::record_owner::{own_start_time, owner_is_alive};
use super::seal::{Purpose, SealKey};
use super::spare_records::Spare;

/// The directory of the records, inside the state directory.
const JOURNAL_DIR: &str = "journal";

/// Where records that are not flycode's (or cannot be read) are set aside, inside the journal.
pub const REJECTED_DIR: &str = "rejected";

/// Which operation a record belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Operation {
    /// One file replaced through one temporary file (fs.write, fs.edit).
    Write,
    /// Several files, all or none (fs.writeBatch).
    WriteBatch,
}

/// How far the operation got.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Phase {
    /// Temporary files are being written; nothing is renamed yet.
    Staging,
    /// Every temporary file is complete; the renames have begun.
    Replacing,
}

/// One target of an operation, as recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalTarget {
    /// The canonical root holding the file.
    pub root: String,
    /// The file's directory, relative to the root (empty for the root itself).
    pub dir: String,
    /// The file's name.
    pub name: String,
    /// The temporary file beside it.
    pub temp: String,
    /// The backup of the old file, kept during a batch's renames.
    pub backup: Option<String>,
    /// The sha256 of the new content.
    pub sha256: String,
    /// The first directory the operation created on the way to `dir` (relative to the root).
    pub created: Option<String>,
    /// Whether the operation creates the file (there was none): only then may undoing it remove
    /// the file, and only while it holds exactly the content recorded.
    #[serde(default)]
    pub new_file: bool,
}

impl JournalTarget {
    /// A target from paths; `None` when one of them is not UTF-8 (a record is JSON text).
    pub fn new(
        root: &Path,
        dir: &Path,
        name: &Path,
        temp: &Path,
        backup: Option<&Path>,
        sha256: String,
        created: Option<&Path>,
    ) -> Option<JournalTarget> {
        let text = |p: &Path| p.to_str().map(str::to_owned);
        Some(JournalTarget {
            root: text(root)?,
            dir: text(dir)?,
            name: text(name)?,
            temp: text(temp)?,
            backup: match backup {
                Some(b) => Some(text(b)?),
                None => None,
            },
            sha256,
            created: match created {
                Some(c) => Some(text(c)?),
                None => None,
            },
            new_file: false,
        })
    }

    /// The same target, recorded as creating its file (`true`) or replacing one.
    pub fn creating(mut self, new_file: bool) -> JournalTarget {
        self.new_file = new_file;
        self
    }

    /// The target's file, as a path.
    fn path(&self) -> PathBuf {
        Path::new(&self.root).join(&self.dir).join(&self.name)
    }
}

/// A record as stored (sealed, see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Record {
    operation: Operation,
    phase: Phase,
    /// The allowed roots of the run that wrote it: every target's root is one of them.
    roots: Vec<String>,
    targets: Vec<JournalTarget>,
}

/// The record of one operation in flight: created by [`Journal::begin`], taken out of the
/// journal when dropped (after the operation has cleaned up after itself, successful or not).
pub struct Journal {
    file: Option<PathBuf>,
    record: Record,
    /// Whether a batch's "replacing" record is flushed.
    durability: Durability,
    /// The record's file, open and locked while the operation runs (a recovering flycode leaves
    /// a locked record alone), given back to this process's spares when it ends
    /// ([`super::spare_records`]).
    slot: Option<Spare>,
}

impl Journal {
    /// Records an operation of a run with the allowed `roots` before its first temporary file
    /// is created. Without a state directory there is nowhere to record it, and the operation
    /// goes on unrecorded.
    pub fn begin(
        operation: Operation,
        roots: &[PathBuf],
        targets: Vec<JournalTarget>,
        durability: Durability,
    ) -> Result<Journal, SandboxError> {
        let mut journal = Journal {
            file: None,
            durability,
            record: Record {
                operation,
                phase: Phase::Staging,
                roots: roots
                    .iter()
                    .filter_map(|root| root.to_str().map(str::to_owned))
                    .collect(),
                targets,
            },
            slot: None,
        };
        let Some(state) = super::state::state_dir() else {
            return Ok(journal);
        };
        let dir = state.join(JOURNAL_DIR);
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let file = dir.join(format!(
            "{}-{}-{}.json",
            std::process::id(),
            own_start_time(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        journal.slot = Some(store(&state, &file, &journal.record, journal.durability)?);
        journal.file = Some(file);
        Ok(journal)
    }

    /// Records that every temporary file is complete and the renames begin.
    pub fn replacing(&mut self) -> Result<(), SandboxError> {
        self.record.phase = Phase::Replacing;
        if let (Some(file), Some(state)) = (&self.file, super::state::state_dir()) {
            // The new record replaces the old one by a rename, which frees the old one's file:
            // it is not given back as a spare, but stays locked until the new one is in its
            // place. Where the new one cannot be stored, the operation's end removes the record.
            let old = self.slot.take();
            let stored = store(&state, file, &self.record, self.durability);
            drop(old);
            self.slot = Some(stored?);
        }
        Ok(())
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        let Some(file) = &self.file else {
            return;
        };
        // A record that outlives a finished operation is harmless: recovery finds every rename
        // done (or nothing staged) and has nothing to change.
        match self.slot.take() {
            Some(slot) if std::fs::rename(file, &slot.path).is_ok() => {
                super::spare_records::give_back(slot);
            }
            _ => {
                let _ = std::fs::remove_file(file);
            }
        }
    }
}

fn journal_error(file: &Path, error: std::io::Error) -> SandboxError {
    SandboxError::Io {
        path: file.display().to_string(),
        source: std::io::Error::new(
            error.kind(),
            format!(
                "cannot record the write in flycode's journal ({error}), so nothing was written; make the state directory writable or set FLYCODE_STATE_DIR to one that is"
            ),
        ),
    }
}

/// Writes the record into a spare record file ([`super::spare_records`]) and renames it into
/// the journal as `file` (so a record is never seen half written), flushing the data and the
/// directory for a batch's "replacing" record (see the module documentation), and returns the
/// record's file, locked.
fn store(
    state: &Path,
    file: &Path,
    record: &Record,
    durability: Durability,
) -> Result<Spare, SandboxError> {
    use std::os::unix::fs::FileExt;
    let durable = record.operation == Operation::WriteBatch
        && record.phase == Phase::Replacing
        && durability == Durability::Full;
    let fail = |e| journal_error(file, e);
    let dir = file.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(fail)?;
    let key = SealKey::of_state_dir().map_err(|e| fail(std::io::Error::other(e)))?;
    let name = file.file_name().unwrap_or_default().to_string_lossy();
    let body = serde_json::to_string(record).map_err(|e| fail(std::io::Error::other(e)))?;
    let text = key.wrap(Purpose::Journal, &name, &body).into_bytes();
    let spare = super::spare_records::take(state).map_err(fail)?;
    let written = (|| {
        // What an earlier operation left in it is cut off after the new record.
        spare.file.write_all_at(&text, 0)?;
        spare
            .file
            .set_len(u64::try_from(text.len()).unwrap_or(u64::MAX))?;
        if durable {
            super::durability::sync_data(&spare.file, durability)?;
        }
        std::fs::rename(&spare.path, file)?;
        if durable {
            super::durability::sync_dir(File::open(dir)?, durability)?;
        }
        Ok(())
    })();
    match written {
        Ok(()) => Ok(spare),
        Err(error) => {
            if spare.path.exists() {
                super::spare_records::give_back(spare);
            }
            Err(fail(error))
        }
    }
}

/// What recovery decided for an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoveryDecision {
    /// Every rename was done: keep the new files, remove the backups.
    Finish,
    /// Put the old state back.
    Undo,
}

/// The decision for an operation in `phase` whose temporary files are (`true`) or are not still
/// there. A temporary file that is gone after staging was renamed into place.
pub fn decide(phase: Phase, temp_present: &[bool]) -> RecoveryDecision {
    match phase {
        Phase::Replacing if temp_present.iter().all(|present| !present) => RecoveryDecision::Finish,
        _ => RecoveryDecision::Undo,
    }
}

/// What to do with one target once the decision is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoveryStep {
    /// Nothing was changed at this target.
    Nothing,
    /// Remove the temporary file (and the backup, a second name of the old file, if present).
    RemoveTemporary,
    /// Remove the backup: the new file stays.
    RemoveBackup,
    /// Rename the backup over the new file.
    RestoreBackup,
    /// Remove the file the operation created.
    RemoveCreated,
    /// The file changed since the crash (or its backup is gone): leave it, remove the backup.
    LeaveChanged,
}

/// What one target needs, from what is found there.
pub fn step(
    decision: RecoveryDecision,
    phase: Phase,
    temp_present: bool,
    has_backup: bool,
    holds_new_content: bool,
    backup_present: bool,
    new_file: bool,
) -> RecoveryStep {
    match decision {
        RecoveryDecision::Finish if backup_present => RecoveryStep::RemoveBackup,
        RecoveryDecision::Finish => RecoveryStep::Nothing,
        RecoveryDecision::Undo if temp_present => RecoveryStep::RemoveTemporary,
        // Nothing is renamed while staging: a missing temporary file was never made.
        RecoveryDecision::Undo if phase == Phase::Staging => RecoveryStep::Nothing,
        RecoveryDecision::Undo if !holds_new_content || (has_backup && !backup_present) => {
            RecoveryStep::LeaveChanged
        }
        RecoveryDecision::Undo if has_backup => RecoveryStep::RestoreBackup,
        // Only a file the operation itself created is ever removed.
        RecoveryDecision::Undo if new_file => RecoveryStep::RemoveCreated,
        RecoveryDecision::Undo => RecoveryStep::LeaveChanged,
    }
}

/// Finishes or undoes every operation that a flycode process now gone left unfinished, and
/// returns one line per operation saying what was done (for standard error). `roots` are the
/// allowed roots of this run, where it knows them: a record whose files lie outside them is left
/// for a run that has them.
///
/// Only a record flycode itself sealed is acted on, and only on files inside the roots it
/// records; anything else found in the journal (damaged, planted, written by another key or an
/// older flycode) is moved to `journal/rejected/`, reported, and never acted on or deleted.
pub fn recover_interrupted(roots: Option<&[PathBuf]>) -> Vec<String> {
    let Some(state) = super::state::state_dir() else {
        return Vec::new();
    };
    super::spare_records::remove_dead_owners(&state);
    let dir = state.join(JOURNAL_DIR);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut names: Vec<OsString> = entries
        .filter_map(|e| e.ok().map(|e| e.file_name()))
        .collect();
    names.sort();
    let mut key = None;
    let mut lines = Vec::new();
    for name in names {
        let text = name.to_string_lossy();
        let (stem, is_temporary) = match text.strip_prefix('.') {
            Some(rest) => (rest.trim_end_matches(".tmp"), true),
            None => (text.as_ref(), false),
        };
        let Some((pid, start)) = owner_of(stem) else {
            continue;
        };
        if owner_is_alive(pid, start) {
            continue;
        }
        let file = dir.join(&name);
        if is_temporary {
            // A record its writer never finished: nothing was staged after it.
            let _ = std::fs::remove_file(&file);
            continue;
        }
        let key = match key.get_or_insert_with(|| SealKey::in_dir(&state)) {
            Ok(key) => key,
            Err(error) => {
                lines.push(format!(
                    "cannot check the journal's records of interrupted writes, so none was acted on: {error}"
                ));
                break;
            }
        };
        if let Some(line) = recover_file(&file, key, roots) {
            lines.push(line);
        }
    }
    lines
}

/// Why a record is not acted on.
enum Foreign {
    /// Its bytes could not be read.
    Unreadable,
    /// Its seal does not verify.
    Unsealed,
    /// Sealed, but not a record this flycode understands, or naming a file outside its roots.
    Invalid,
}

/// The record in `text` (stored as `name`) if flycode sealed it and it names only files inside
/// the roots it records.
fn authentic(key: &SealKey, name: &str, text: &str) -> Result<Record, Foreign> {
    let body = key
        .unwrap(Purpose::Journal, name, text)
        .ok_or(Foreign::Unsealed)?;
    let record: Record = serde_json::from_str(body).map_err(|_| Foreign::Invalid)?;
    let inside = |target: &JournalTarget| {
        record.roots.contains(&target.root)
            && Path::new(&target.root).is_absolute()
            && Path::new(&target.dir)
                .components()
                .all(|c| matches!(c, Component::Normal(_)))
    };
    if record.targets.iter().all(inside) {
        Ok(record)
    } else {
        Err(Foreign::Invalid)
    }
}

/// Moves a record that is not acted on into `journal/rejected/` (never over another one) and
/// says so.
fn set_aside(file: &Path, why: Foreign) -> String {
    let why = match why {
        Foreign::Unreadable => "it cannot be read",
        Foreign::Unsealed => {
            "its seal does not verify: it is damaged, or flycode did not write it (a program or a tool may have planted it)"
        }
        Foreign::Invalid => "it is not a record this flycode understands",
    };
    let dir = file.parent().unwrap_or(Path::new(".")).join(REJECTED_DIR);
    let name = file.file_name().unwrap_or_default().to_string_lossy();
    let moved = std::fs::create_dir_all(&dir).and_then(|()| {
        for n in 0..1000 {
            let target = if n == 0 {
                dir.join(name.as_ref())
            } else {
                dir.join(format!("{name}.{n}"))
            };
            // Linked, then unlinked: never replaces a record set aside before.
            match std::fs::hard_link(file, &target) {
                Ok(()) => {
                    std::fs::remove_file(file)?;
                    return Ok(target);
                }
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(error) => return Err(error),
            }
        }
        Err(std::io::Error::from(std::io::ErrorKind::AlreadyExists))
    });
    match moved {
        Ok(target) => format!(
            "set aside the journal record {} and did nothing it says: {why}; it is kept as {} for you to look at",
            file.display(),
            target.display()
        ),
        Err(error) => format!(
            "did nothing the journal record {} says: {why}; it could not be moved aside ({error}), look at it, then remove it",
            file.display()
        ),
    }
}

fn recover_file(file: &Path, key: &SealKey, roots: Option<&[PathBuf]>) -> Option<String> {
    let mut handle = open_record(file)?;
    let mut text = String::new();
    let read = handle.read_to_string(&mut text);
    // Only a single file's record is written unflushed, so only it can be empty after a power
    // loss (a batch's is flushed before anything is staged); the file it covered is whole, old or
    // new, and nothing can be done with an empty record but drop it. A record that could not be
    // read (not UTF-8, an I/O error) is not known to be empty: it is set aside.
    if read.is_ok() && text.is_empty() {
        let _ = std::fs::remove_file(file);
        return None;
    }
    let name = file.file_name().unwrap_or_default().to_string_lossy();
    let record = match read {
        Err(_) => Err(Foreign::Unreadable),
        Ok(_) => authentic(key, &name, &text),
    };
    let record = match record {
        Ok(record) => record,
        Err(Foreign::Unsealed) if sealed_for_an_earlier_operation(key, &name, &text) => {
            // A reused record file (`spare_records`) whose new record and its rename did not
            // both reach the disk before a power loss: it holds the record of an operation of
            // the same process that had ended. Nothing to do, and not a planted record.
            let _ = std::fs::remove_file(file);
            return None;
        }
        Err(why) => return Some(set_aside(file, why)),
    };
    let what = operation_of(&record);
    if let Some(roots) = roots
        && let Some(outside) = record
            .targets
            .iter()
            .map(JournalTarget::path)
            .find(|path| !roots.iter().any(|root| path.starts_with(root)))
    {
        return Some(format!(
            "left the record of an interrupted {what} from an earlier run as it is: {} is outside this run's roots; a run whose roots hold it will finish or undo it",
            outside.display()
        ));
    }
    let (decision, problems) = recover(&record);
    let _ = std::fs::remove_file(file);
    let done = match decision {
        RecoveryDecision::Finish => "finished",
        RecoveryDecision::Undo => "undid",
    };
    let mut line = format!("{done} an interrupted {what} from an earlier run");
    if !problems.is_empty() {
        line.push_str(&format!(" (left as found: {})", problems.join("; ")));
    }
    Some(line)
}

/// How many earlier record names of its process a record that does not verify under its own is
/// tried under ([`sealed_for_an_earlier_operation`]): at about a microsecond each, a start after
/// a power loss spends at most a few hundredths of a second per such record.
const EARLIER_OPERATIONS_SEARCHED: u64 = 16_384;

/// Whether `text`, found as the record `name` (`PID-START-N.json`), is sealed under the name of
/// an earlier record of the same process (`PID-START-K.json`, K < N): what a power loss can leave
/// in a record file that process reused ([`super::spare_records`]).
fn sealed_for_an_earlier_operation(key: &SealKey, name: &str, text: &str) -> bool {
    let Some(stem) = name.strip_suffix(".json") else {
        return false;
    };
    let Some((owner, number)) = stem.rsplit_once('-') else {
        return false;
    };
    let Ok(number) = number.parse::<u64>() else {
        return false;
    };
    // The operations just before: a process's spare files are reused in turn, so a stale one
    // holds a recent record; and a name planted with a huge number costs a bounded search.
    owner_of(name).is_some()
        && (number.saturating_sub(EARLIER_OPERATIONS_SEARCHED)..number)
            .rev()
            .any(|earlier| {
                key.unwrap(Purpose::Journal, &format!("{owner}-{earlier}.json"), text)
                    .is_some()
            })
}

/// The interrupted operation in words: `write of /w/a.txt`, `fs.writeBatch of 3 files`.
fn operation_of(record: &Record) -> String {
    match (record.operation, record.targets.as_slice()) {
        (Operation::Write, [target]) => format!("write of {}", target.path().display()),
        (Operation::Write, _) => "write".to_owned(),
        (Operation::WriteBatch, targets) => format!(
            "fs.writeBatch of {} file{}",
            targets.len(),
            if targets.len() == 1 { "" } else { "s" }
        ),
    }
}

/// A recorded directory, opened from `/` one component at a time without following links.
struct RecordPlace {
    dir: Dir,
    shown: PathBuf,
}

/// Opens `root/relative` without following any link on the way.
fn open_place(root: &str, relative: &str) -> std::io::Result<RecordPlace> {
    let root = Path::new(root);
    let relative = Path::new(relative);
    let invalid = || std::io::Error::from(std::io::ErrorKind::InvalidInput);
    if !root.is_absolute() {
        return Err(invalid());
    }
    let mut dir = Dir::open_ambient_dir("/", cap_std::ambient_authority())?;
    for component in root.components().chain(relative.components()) {
        match component {
            Component::RootDir => {}
            Component::Normal(name) => dir = open_subdir(&dir, name)?,
            _ => return Err(invalid()),
        }
    }
    Ok(RecordPlace {
        dir,
        shown: root.join(relative),
    })
}

/// Whether `name` is one component (no separator, not `.` or `..`).
fn is_single(name: &str) -> bool {
    let mut components = Path::new(name).components();
    matches!(components.next(), Some(Component::Normal(n)) if n == OsStr::new(name))
        && components.next().is_none()
}

/// Whether `name` is a single name of the kind flycode creates.
fn is_ours(name: &str) -> bool {
    is_single(name) && name.starts_with(TEMP_PREFIX)
}

/// Whether `name` exists in `dir` (as anything: a link counts, and is never followed).
fn present(dir: &Dir, name: &str) -> bool {
    dir.symlink_metadata(name).is_ok()
}

/// Whether the regular file `name` in `dir` holds content with the `sha256`.
fn holds(dir: &Dir, name: &str, sha256: &str) -> bool {
    let Ok((mut file, metadata)) = open_file(dir, OsStr::new(name)) else {
        return false;
    };
    let mut bytes = Vec::new();
    metadata.is_file() && file.read_to_end(&mut bytes).is_ok() && sha256_hex(&bytes) == sha256
}

/// Carries out the decision for a record; returns it with what could not be done.
fn recover(record: &Record) -> (RecoveryDecision, Vec<String>) {
    let mut problems = Vec::new();
    let places: Vec<Option<RecordPlace>> = record
        .targets
        .iter()
        .map(|target| open_target_place(target, &mut problems))
        .collect();
    let temp_present: Vec<bool> = record
        .targets
        .iter()
        .zip(&places)
        .map(|(target, place)| {
            place
                .as_ref()
                .is_some_and(|p| present(&p.dir, &target.temp))
        })
        .collect();
    let decision = decide(record.phase, &temp_present);
    for ((target, place), &temp_present) in record.targets.iter().zip(&places).zip(&temp_present) {
        let Some(place) = place else { continue };
        let recovered = Recovered {
            decision,
            phase: record.phase,
            temp_present,
        };
        recover_target(target, place, recovered, &mut problems);
    }
    if decision == RecoveryDecision::Undo {
        for target in &record.targets {
            remove_created_dirs(target);
        }
    }
    (decision, problems)
}

/// The directory of a recorded target, if its entry is valid and the directory is there; what
/// is wrong otherwise goes to `problems` (a directory that is gone is no problem: nothing there
/// to finish or undo).
fn open_target_place(target: &JournalTarget, problems: &mut Vec<String>) -> Option<RecordPlace> {
    let valid = is_single(&target.name)
        && is_ours(&target.temp)
        && target.backup.as_deref().is_none_or(is_ours);
    if !valid {
        problems.push(format!("an invalid entry for {}", target.name));
        return None;
    }
    match open_place(&target.root, &target.dir) {
        Ok(place) => Some(place),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
        Err(error) => {
            problems.push(format!(
                "{}: {error}",
                Path::new(&target.root).join(&target.dir).display()
            ));
            None
        }
    }
}

/// What the recovery of a whole record decided, and what it found of one target's staged file.
#[derive(Clone, Copy)]
struct Recovered {
    decision: RecoveryDecision,
    phase: Phase,
    temp_present: bool,
}

/// Finishes or undoes one target in its directory `place`, as the record's decision says;
/// what could not be done goes to `problems`.
fn recover_target(
    target: &JournalTarget,
    place: &RecordPlace,
    recovered: Recovered,
    problems: &mut Vec<String>,
) {
    let dir = &place.dir;
    let backup_present = target.backup.as_deref().is_some_and(|b| present(dir, b));
    let holds_new = holds(dir, &target.name, &target.sha256);
    let action = step(
        recovered.decision,
        recovered.phase,
        recovered.temp_present,
        target.backup.is_some(),
        holds_new,
        backup_present,
        target.new_file,
    );
    let backup = target.backup.as_deref().unwrap_or_default();
    let result = match action {
        RecoveryStep::Nothing => Ok(()),
        RecoveryStep::RemoveTemporary => dir.remove_file(&target.temp).and_then(|()| {
            if backup_present {
                dir.remove_file(backup)?;
            }
            Ok(())
        }),
        RecoveryStep::RemoveBackup => dir.remove_file(backup),
        RecoveryStep::RestoreBackup => dir.rename(backup, dir, &target.name),
        RecoveryStep::RemoveCreated => dir.remove_file(&target.name),
        RecoveryStep::LeaveChanged => {
            problems.push(format!(
                "{} changed since",
                place.shown.join(&target.name).display()
            ));
            if backup_present {
                dir.remove_file(backup)
            } else {
                Ok(())
            }
        }
    };
    if let Err(error) = result {
        problems.push(format!(
            "{}: {error}",
            place.shown.join(&target.name).display()
        ));
    }
    if let Ok(handle) = dir.open_with(".", cap_std::fs::OpenOptions::new().read(true)) {
        let _ = handle.sync_all();
    }
}

/// Removes the directories an undone operation created for `target`, deepest first, each only if
/// it is empty.
fn remove_created_dirs(target: &JournalTarget) {
    let Some(created) = &target.created else {
        return;
    };
    let dir: Vec<&OsStr> = Path::new(&target.dir)
        .components()
        .map(|c| c.as_os_str())
        .collect();
    let depth = Path::new(created).components().count();
    if depth == 0 || !Path::new(&target.dir).starts_with(created) {
        return;
    }
    for end in (depth..=dir.len()).rev() {
        let parent: PathBuf = dir[..end - 1].iter().collect();
        // A parent that cannot be opened was never made either (killed before it) or is not
        // the operation's to remove: the levels above are tried all the same, and rmdir leaves
        // any of them that holds something.
        let Ok(place) = open_place(&target.root, &parent.to_string_lossy()) else {
            continue;
        };
        // rmdir never follows a link and fails on a directory that is not empty. A directory
        // that is not there was never made (killed between two of `create_dir_all`'s mkdirs):
        // the ones above it may still be the operation's.
        match place.dir.remove_dir(dir[end - 1]) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(_) => return,
        }
    }
}

#[cfg(test)]
#[cfg(unix)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_finished_only_when_every_rename_is_done() {
        assert_eq!(
            decide(Phase::Replacing, &[false, false]),
            RecoveryDecision::Finish
        );
        assert_eq!(decide(Phase::Replacing, &[]), RecoveryDecision::Finish);
        assert_eq!(
            decide(Phase::Replacing, &[false, true]),
            RecoveryDecision::Undo
        );
        assert_eq!(
            decide(Phase::Replacing, &[true, true]),
            RecoveryDecision::Undo
        );
        // While staging nothing is renamed, whatever is missing.
        assert_eq!(
            decide(Phase::Staging, &[false, false]),
            RecoveryDecision::Undo
        );
    }

    #[test]
    fn each_target_gets_the_step_its_state_calls_for() {
        use Phase::{Replacing, Staging};
        use RecoveryDecision::{Finish, Undo};
        // (decision, phase, temp, has backup, holds new, backup present) -> step
        let cases = [
            (
                (Finish, Replacing, false, true, true, true),
                RecoveryStep::RemoveBackup,
            ),
            (
                (Finish, Replacing, false, false, true, false),
                RecoveryStep::Nothing,
            ),
            (
                (Undo, Staging, true, false, false, false),
                RecoveryStep::RemoveTemporary,
            ),
            (
                (Undo, Staging, false, true, false, false),
                RecoveryStep::Nothing,
            ),
            // Killed between the backup link and the rename: the old file is still in place.
            (
                (Undo, Replacing, true, true, false, true),
                RecoveryStep::RemoveTemporary,
            ),
            (
                (Undo, Replacing, false, true, true, true),
                RecoveryStep::RestoreBackup,
            ),
            (
                (Undo, Replacing, false, false, true, false),
                RecoveryStep::RemoveCreated,
            ),
            // Someone wrote the file after the crash: their content stays.
            (
                (Undo, Replacing, false, true, false, true),
                RecoveryStep::LeaveChanged,
            ),
            (
                (Undo, Replacing, false, false, false, false),
                RecoveryStep::LeaveChanged,
            ),
            (
                (Undo, Replacing, false, true, true, false),
                RecoveryStep::LeaveChanged,
            ),
        ];
        for ((decision, phase, temp, has, new, present), expected) in cases {
            // A target without a backup is a file the operation created.
            assert_eq!(
                step(decision, phase, temp, has, new, present, !has),
                expected,
                "{decision:?} {phase:?} temp={temp} has_backup={has} new={new} backup={present}"
            );
        }
    }

    #[test]
    fn only_flycode_names_are_touched() {
        assert!(is_ours(".flycode-tmp-1-2-a.txt"));
        for name in [
            "a.txt",
            ".flycode-tmp-x/../../etc",
            "../.flycode-tmp-1",
            "",
            ".",
        ] {
            assert!(!is_ours(name), "{name}");
        }
        assert!(is_single("a.txt"));
        assert!(!is_single("a/b") && !is_single("..") && !is_single("/a"));
        assert_eq!(owner_of("12-345-6.json"), Some((12, 345)));
        assert_eq!(owner_of("garbage"), None);
    }

    fn key() -> SealKey {
        SealKey::from_bytes([3; 32])
    }

    /// `record` sealed as flycode stores it, under `name` in `dir`.
    fn store_sealed(dir: &Path, name: &str, record: &Record) -> PathBuf {
        let file = dir.join(name);
        let body = serde_json::to_string(record).unwrap();
        std::fs::write(&file, key().wrap(Purpose::Journal, name, &body)).unwrap();
        file
    }

    fn rejected(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir.join(REJECTED_DIR))
            .map(|entries| {
                entries
                    .map(|e| e.unwrap().file_name().into_string().unwrap())
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn an_empty_record_is_dropped_and_a_garbled_one_set_aside() {
        let temp = tempfile::tempdir().unwrap();
        let empty = temp.path().join("1-2-3.json");
        std::fs::write(&empty, b"").unwrap();
        assert_eq!(recover_file(&empty, &key(), None), None);
        assert!(!empty.exists(), "an empty record (a power loss) is dropped");
        let garbled = temp.path().join("1-2-4.json");
        std::fs::write(&garbled, b"{\"operation\":").unwrap();
        let message = recover_file(&garbled, &key(), None).unwrap();
        assert!(
            message.contains("set aside the journal record"),
            "{message}"
        );
        assert!(!garbled.exists());
        // Bytes that are not UTF-8 read as nothing, but the record is not empty: kept aside.
        let unreadable = temp.path().join("1-2-5.json");
        std::fs::write(&unreadable, b"{\"operation\":\"batch\xff").unwrap();
        let message = recover_file(&unreadable, &key(), None).unwrap();
        assert!(message.contains("cannot be read"), "{message}");
        assert_eq!(rejected(temp.path()).len(), 2);
        // A second record of the same name never replaces the first one set aside.
        std::fs::write(&garbled, b"again").unwrap();
        recover_file(&garbled, &key(), None).unwrap();
        assert!(rejected(temp.path()).contains(&"1-2-4.json.1".to_owned()));
    }

    #[test]
    fn a_reused_record_file_holding_an_earlier_record_of_its_process_is_dropped_quietly() {
        let temp = tempfile::tempdir().unwrap();
        let record = Record {
            operation: Operation::Write,
            phase: Phase::Staging,
            roots: vec![temp.path().display().to_string()],
            targets: Vec::new(),
        };
        let body = serde_json::to_string(&record).unwrap();
        // What a power loss can leave in `1-2-7.json`: the record of that process's operation 5,
        // which used the file before (spare_records). Dropped, nothing reported.
        let stale = temp.path().join("1-2-7.json");
        std::fs::write(&stale, key().wrap(Purpose::Journal, "1-2-5.json", &body)).unwrap();
        assert_eq!(recover_file(&stale, &key(), None), None);
        assert!(!stale.exists());
        // Sealed for a later operation of that process, or for another process: not what a
        // reused file can hold, so set aside as before.
        for sealed_as in ["1-2-9.json", "1-3-5.json", "9-2-5.json"] {
            std::fs::write(&stale, key().wrap(Purpose::Journal, sealed_as, &body)).unwrap();
            let line = recover_file(&stale, &key(), None).unwrap();
            assert!(line.contains("seal does not verify"), "{sealed_as}: {line}");
        }
        assert_eq!(rejected(temp.path()).len(), 3);
        // A name planted with the largest number is searched a bounded way back, and set aside.
        let planted = temp.path().join(format!("1-2-{}.json", u64::MAX));
        std::fs::write(&planted, key().wrap(Purpose::Journal, "1-2-5.json", &body)).unwrap();
        let line = recover_file(&planted, &key(), None).unwrap();
        assert!(line.contains("seal does not verify"), "{line}");
    }

    #[test]
    fn a_forged_record_is_set_aside_and_nothing_it_names_is_touched() {
        let temp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(temp.path()).unwrap();
        let (root, outside, journal) = (base.join("root"), base.join("outside"), base.join("j"));
        for dir in [&root, &outside, &journal] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(outside.join("victim"), "precious").unwrap();
        let decoy = target(&root, "", "decoy.txt", 1, false, "x");
        std::fs::write(root.join(&decoy.temp), "x").unwrap();
        let mut victim = target(Path::new("/"), "", "victim", 2, false, "precious");
        victim.dir = outside.strip_prefix("/").unwrap().display().to_string();
        victim.new_file = true;
        let record = Record {
            operation: Operation::WriteBatch,
            phase: Phase::Replacing,
            roots: vec![root.display().to_string()],
            targets: vec![decoy.clone(), victim.clone()],
        };
        // Unsealed, sealed with another key, or sealed for another name: all foreign.
        let plain = journal.join("1-2-0.json");
        std::fs::write(&plain, serde_json::to_string(&record).unwrap()).unwrap();
        let other = journal.join("1-2-1.json");
        let body = serde_json::to_string(&record).unwrap();
        std::fs::write(
            &other,
            SealKey::from_bytes([4; 32]).wrap(Purpose::Journal, "1-2-1.json", &body),
        )
        .unwrap();
        let renamed = journal.join("1-2-2.json");
        std::fs::write(&renamed, key().wrap(Purpose::Journal, "9-9-9.json", &body)).unwrap();
        for file in [&plain, &other, &renamed] {
            let line = recover_file(file, &key(), None).unwrap();
            assert!(line.contains("seal does not verify"), "{line}");
        }
        // Sealed by flycode's key, but naming a root the run did not have: never acted on.
        let sealed = store_sealed(&journal, "1-2-3.json", &record);
        let line = recover_file(&sealed, &key(), None).unwrap();
        assert!(line.contains("not a record"), "{line}");
        assert_eq!(
            std::fs::read_to_string(outside.join("victim")).unwrap(),
            "precious"
        );
        assert!(root.join(&decoy.temp).exists());
        assert_eq!(rejected(&journal).len(), 4);
    }

    #[test]
    fn a_file_the_operation_did_not_create_is_never_removed() {
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap();
        let mut t = target(&root, "", "a.txt", 1, false, "new");
        // Recorded as replacing a file (without a backup: a record flycode never writes).
        t.new_file = false;
        // A second target not yet renamed: the batch is undone.
        let pending = target(&root, "", "b.txt", 2, false, "b");
        let record = |t: &JournalTarget| Record {
            operation: Operation::WriteBatch,
            phase: Phase::Replacing,
            roots: vec![root.display().to_string()],
            targets: vec![t.clone(), pending.clone()],
        };
        std::fs::write(root.join("a.txt"), "new").unwrap();
        std::fs::write(root.join(&pending.temp), "b").unwrap();
        let (decision, problems) = recover(&record(&t));
        assert_eq!(
            (decision, problems.len()),
            (RecoveryDecision::Undo, 1),
            "{problems:?}"
        );
        assert!(root.join("a.txt").exists());
        t.new_file = true;
        std::fs::write(root.join(&pending.temp), "b").unwrap();
        assert_eq!(recover(&record(&t)), (RecoveryDecision::Undo, vec![]));
        assert!(!root.join("a.txt").exists());
    }

    #[test]
    fn a_record_outside_this_runs_roots_is_left_for_a_run_that_has_them() {
        let temp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(temp.path()).unwrap();
        let (root, other, journal) = (base.join("root"), base.join("other"), base.join("j"));
        for dir in [&root, &other, &journal] {
            std::fs::create_dir_all(dir).unwrap();
        }
        let t = target(&root, "", "a.txt", 1, false, "new");
        std::fs::write(root.join(&t.temp), "new").unwrap();
        let record = Record {
            operation: Operation::Write,
            phase: Phase::Staging,
            roots: vec![root.display().to_string()],
            targets: vec![t.clone()],
        };
        let file = store_sealed(&journal, "1-2-3.json", &record);
        let line = recover_file(&file, &key(), Some(std::slice::from_ref(&other))).unwrap();
        assert!(line.contains("outside this run's roots"), "{line}");
        assert!(file.exists() && root.join(&t.temp).exists());
        // A program another test thread starts holds the record's lock between its fork and its
        // exec (flock is shared across fork): the record is then left to "the other
        // recoverer", as it should be. Asked again, this run recovers it.
        let line = (0..100)
            .find_map(|_| {
                recover_file(&file, &key(), Some(std::slice::from_ref(&root))).or_else(|| {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    None
                })
            })
            .unwrap();
        assert!(line.starts_with("undid an interrupted write of"), "{line}");
        assert!(!file.exists() && !root.join(&t.temp).exists());
        assert!(rejected(&journal).is_empty());
    }

    fn target(
        root: &Path,
        dir: &str,
        name: &str,
        n: u32,
        backup: bool,
        new: &str,
    ) -> JournalTarget {
        JournalTarget {
            root: root.display().to_string(),
            dir: dir.to_owned(),
            name: name.to_owned(),
            temp: format!("{TEMP_PREFIX}999-{n}-{name}"),
            backup: backup.then(|| format!("{TEMP_PREFIX}999-{n}-backup-{name}")),
            sha256: sha256_hex(new.as_bytes()),
            created: None,
            new_file: !backup,
        }
    }

    #[test]
    fn an_undone_batch_removes_the_folders_it_made_even_when_it_was_killed_between_two_of_them() {
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap();
        // The batch was to make fresh/sub; it was killed after fresh, before sub.
        std::fs::create_dir_all(root.join("fresh")).unwrap();
        let mut c = target(&root, "fresh/sub", "c.txt", 3, false, "new c");
        c.created = Some("fresh".into());
        let record = Record {
            operation: Operation::WriteBatch,
            phase: Phase::Staging,
            roots: vec![root.display().to_string()],
            targets: vec![c],
        };
        let (decision, problems) = recover(&record);
        assert_eq!((decision, problems), (RecoveryDecision::Undo, vec![]));
        assert!(!root.join("fresh").exists(), "the folder it made is gone");
    }

    #[test]
    fn an_undone_batch_removes_its_first_folder_when_two_levels_below_it_were_never_made() {
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap();
        // The batch was to make a/b/c; it was killed after a, before b.
        std::fs::create_dir_all(root.join("a")).unwrap();
        std::fs::write(root.join("kept.txt"), "not the batch's").unwrap();
        let mut c = target(&root, "a/b/c", "c.txt", 3, false, "new c");
        c.created = Some("a".into());
        let record = Record {
            operation: Operation::WriteBatch,
            phase: Phase::Staging,
            roots: vec![root.display().to_string()],
            targets: vec![c],
        };
        let (decision, problems) = recover(&record);
        assert_eq!((decision, problems), (RecoveryDecision::Undo, vec![]));
        assert!(!root.join("a").exists(), "the folder it made is gone");
        assert!(root.join("kept.txt").exists());
    }

    #[test]
    fn an_interrupted_batch_is_undone_and_a_complete_one_finished() {
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap();
        std::fs::create_dir_all(root.join("sub/new")).unwrap();
        // a.txt renamed (backup kept), b.txt not yet (temp and backup link there), c.txt created.
        let a = target(&root, "", "a.txt", 1, true, "new a");
        let b = target(&root, "", "b.txt", 2, true, "new b");
        let mut c = target(&root, "sub/new", "c.txt", 3, false, "new c");
        c.created = Some("sub".into());
        std::fs::write(root.join("a.txt"), "new a").unwrap();
        std::fs::write(root.join(a.backup.as_ref().unwrap()), "old a").unwrap();
        std::fs::write(root.join("b.txt"), "old b").unwrap();
        std::fs::write(root.join(&b.temp), "new b").unwrap();
        std::fs::hard_link(root.join("b.txt"), root.join(b.backup.as_ref().unwrap())).unwrap();
        std::fs::write(root.join("sub/new/c.txt"), "new c").unwrap();
        let record = Record {
            operation: Operation::WriteBatch,
            phase: Phase::Replacing,
            roots: vec![root.display().to_string()],
            targets: vec![a, b, c],
        };
        let (decision, problems) = recover(&record);
        assert_eq!((decision, problems), (RecoveryDecision::Undo, vec![]));
        let names: Vec<_> = std::fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        assert_eq!(names, ["a.txt", "b.txt"]);
        assert_eq!(
            std::fs::read_to_string(root.join("a.txt")).unwrap(),
            "old a"
        );
        assert_eq!(
            std::fs::read_to_string(root.join("b.txt")).unwrap(),
            "old b"
        );

        // All renamed: the backups go, the new files stay.
        let a = target(&root, "", "a.txt", 4, true, "new a");
        std::fs::write(root.join("a.txt"), "new a").unwrap();
        std::fs::write(root.join(a.backup.as_ref().unwrap()), "old a").unwrap();
        let record = Record {
            operation: Operation::WriteBatch,
            phase: Phase::Replacing,
            roots: vec![root.display().to_string()],
            targets: vec![a],
        };
        assert_eq!(recover(&record), (RecoveryDecision::Finish, vec![]));
        assert_eq!(std::fs::read_dir(&root).unwrap().count(), 2);
        assert_eq!(
            std::fs::read_to_string(root.join("a.txt")).unwrap(),
            "new a"
        );
    }

    #[test]
    fn recovery_never_follows_a_link_out() {
        let temp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(temp.path()).unwrap();
        let root = base.join("root");
        let outside = base.join("outside");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("sub")).unwrap();
        let t = target(&root, "sub", "a.txt", 1, false, "new");
        std::fs::write(outside.join(&t.temp), "precious").unwrap();
        std::fs::write(outside.join("a.txt"), "new").unwrap();
        let record = Record {
            operation: Operation::WriteBatch,
            phase: Phase::Replacing,
            roots: vec![root.display().to_string()],
            targets: vec![t.clone()],
        };
        let (_, problems) = recover(&record);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(outside.join(&t.temp).exists() && outside.join("a.txt").exists());
    }
}
