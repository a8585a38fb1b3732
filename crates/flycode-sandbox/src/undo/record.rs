//! Change records and the [`Recorder`] that makes them (PROTOCOL.md §16 (Undo and history)):
//! before a call changes anything, the pre-image of every path it names goes into the store and
//! a record marked incomplete is written; after the call, the after-images are added and the
//! record is marked complete (or removed, if nothing changed). A record left incomplete by a
//! killed flycode is settled by [`settle_interrupted`] from what the files hold.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use cap_std::fs::Dir;

use super::capture::ImageCapture;
use super::change::{ChangeRecord, PathChange};
use super::image::Image;
use super::limits::UndoLimits;
use super::store::{StagedBlob, UndoStore};
use crate::error::SandboxError;
use crate::files::Sandbox;
use crate::resolve::LastComponent;

/// Records the changes one door's calls make. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Recorder {
    store: std::sync::Arc<UndoStore>,
    door: &'static str,
    limits: UndoLimits,
    /// How many changes it recorded (shared by its clones).
    recorded: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// Whether it keeps `[undo] max_bytes` as it goes (a door that serves many calls).
    prunes: bool,
}

/// A path a call names, and how it is looked at.
#[derive(Clone, Copy, Debug)]
pub struct Named<'a> {
    /// The path as the call gave it.
    pub input: &'a str,
    /// The call removes or moves what the path names itself (a link, not its target);
    /// otherwise links are followed.
    pub whole: bool,
    /// A folder is recorded with everything in it; otherwise only the folder itself (its mode)
    /// of an existing folder matters.
    pub deep: bool,
    /// The call replaces or removes the files at the path (a new file takes the name, or the
    /// name goes; never an append or a chmod, which change the file itself): their old
    /// contents are kept by a second name in the store instead of a copy.
    pub replaced: bool,
    /// The call appends to the file at the path: its old content stays at the start of the new
    /// one, so it is recorded by length and hash ([`Image::File::prefix`]) instead of a copy.
    pub appended: bool,
}

/// A change under way: its record (written, incomplete) and what is needed to finish it.
#[derive(Debug)]
pub struct Pending {
    record: ChangeRecord,
    depth: Vec<bool>,
    /// For each path recorded as the call named it (not a folder above it that the call
    /// creates), the path as the call gave it: what the tool says it wrote there is found by it.
    named: Vec<Option<String>>,
    seen: BTreeMap<String, Vec<u8>>,
    /// The contents this change put into the store itself (not there before it began): a change
    /// that ends up changing nothing takes them out again ([`UndoStore::discard_fresh`]).
    fresh: Vec<String>,
    /// When it began (the records written since are the only ones that can share `fresh`).
    began: SystemTime,
}

impl Pending {
    /// The change's id.
    pub fn id(&self) -> &str {
        &self.record.id
    }

    /// Notes the changes this one (an undo) takes back.
    pub fn undoes(&mut self, ids: Vec<String>) {
        self.record.undoes = ids;
    }
}

/// Why a change could not be recorded.
#[derive(Debug, thiserror::Error)]
pub enum UndoError {
    /// A path is outside the roots or protected (the call itself will say so).
    #[error("{0}")]
    Sandbox(#[from] SandboxError),
    /// The store could not be written or a file read.
    #[error("the undo store {}: {source}", path.display())]
    UndoStore {
        /// The store's folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// The id of this process's run or session: its start time and process id.
pub fn session_id() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        let stamp: String = flycode_protocol::time::format_rfc3339(SystemTime::now())
            .chars()
            .filter(|c| *c != '-' && *c != ':')
            .collect();
        format!("{stamp}-{}", std::process::id())
    })
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Recorder {
    /// A recorder for `door`'s calls, storing in `store`.
    pub fn new(store: UndoStore, door: &'static str, limits: UndoLimits) -> Recorder {
        Recorder {
            store: std::sync::Arc::new(store),
            door,
            limits,
            recorded: std::sync::Arc::default(),
            prunes: false,
        }
    }

    /// The same recorder, keeping `[undo] max_bytes` within the session: after a change that
    /// stored contents, the store is pruned at once if its running count is over the limit
    /// (PROTOCOL.md §16 (Undo and history), "Retention"). For a door that serves many calls;
    /// a one-shot `exec` leaves it to the daily pruning at a door's start and `flycode gc`.
    pub fn pruning_as_it_goes(mut self) -> Recorder {
        self.prunes = true;
        self
    }

    /// How many changes this recorder (and its clones) recorded.
    pub fn recorded(&self) -> u64 {
        self.recorded.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The store.
    pub fn store(&self) -> &UndoStore {
        &self.store
    }

    /// The limits.
    pub fn limits(&self) -> UndoLimits {
        self.limits
    }

    fn fail(&self, source: std::io::Error) -> UndoError {
        UndoError::UndoStore {
            path: self.store.dir().to_owned(),
            source,
        }
    }

    /// Records the pre-images of `paths` and writes the incomplete record, before the call's
    /// change lands (before the tool runs, or on a thread beside it, see
    /// [`crate::landing`]). Where it fails, no file it linked keeps a second name.
    pub fn begin(
        &self,
        sandbox: &Sandbox,
        tool: &str,
        call: Option<&str>,
        paths: &[Named<'_>],
    ) -> Result<Pending, UndoError> {
        let began = SystemTime::now();
        // Held while contents are looked up and named, until the record is written: a change
        // that changed nothing removes what it stored only when no one is between the two.
        let _reusing = self.store.lock(false);
        let mut seen = BTreeMap::new();
        let mut record = self.blank(tool, call);
        let mut depth = Vec::new();
        let mut inputs = Vec::new();
        let mut capture = ImageCapture {
            store: Some(&self.store),
            max_file_bytes: self.limits.max_file_bytes,
            deep: false,
            link: false,
            append: false,
            known_sha256: None,
            seen: Some(&mut seen),
            stored_bytes: 0,
            staged: Vec::new(),
        };
        let captured = paths.iter().try_for_each(|named| {
            let (path, parent, name, exact) = entry_point(sandbox, named)?;
            capture.deep = named.deep;
            capture.link = named.replaced;
            capture.append = named.appended;
            inputs.push(exact.then(|| named.input.to_owned()));
            let before = capture
                .image(&parent, &name)
                .map_err(|e| self.fail(with_path(e, &path)))?;
            // What the call creates where nothing was is recorded whole afterwards.
            depth.push(named.deep || before == Image::Absent);
            record.paths.push(PathChange {
                path: path.display().to_string(),
                before,
                after: None,
            });
            Ok::<(), UndoError>(())
        });
        record.stored_bytes = capture.stored_bytes;
        let staged = std::mem::take(&mut capture.staged);
        drop(capture);
        let linked: Vec<String> = staged.iter().filter_map(StagedBlob::linked).collect();
        let fresh: Vec<String> = staged.iter().map(StagedBlob::sha256).collect();
        let created = captured.and_then(|()| {
            self.store
                .create(&mut record, staged)
                .map_err(|e| self.fail(e))
        });
        if let Err(error) = created {
            // No change will name the files linked so far: they must not keep a second name.
            let _ = self.store.detach_shared(&linked);
            return Err(error);
        }
        Ok(Pending {
            record,
            depth,
            named: inputs,
            seen,
            fresh,
            began,
        })
    }

    /// A record of a call that ran a program: no paths (what programs change is not recorded).
    pub fn program(&self, tool: &str, call: Option<&str>) -> Result<String, UndoError> {
        let mut record = self.blank(tool, call);
        record.program = true;
        record.complete = true;
        self.store
            .create(&mut record, Vec::new())
            .map_err(|e| self.fail(e))?;
        Ok(record.id)
    }

    /// A record with nothing in it yet.
    pub fn blank(&self, tool: &str, call: Option<&str>) -> ChangeRecord {
        ChangeRecord {
            pid: std::process::id(),
            start: crate::journal::own_start_time(),
            door: self.door.to_owned(),
            session: session_id().to_owned(),
            call: call.map(str::to_owned),
            tool: tool.to_owned(),
            time: now_secs(),
            ..ChangeRecord::default()
        }
    }

    /// Adds the after-images and marks the record complete; removes it if nothing changed. The
    /// change's id, if one remains. `written` holds the sha256 the tool reported for each file
    /// it wrote, by the path it gave in its output or the path as the call named it: those
    /// after-images take it rather than hashing the file again.
    pub fn finish(
        &self,
        mut pending: Pending,
        written: &BTreeMap<String, String>,
    ) -> Result<Option<String>, UndoError> {
        let record = &mut pending.record;
        for ((change, deep), input) in record
            .paths
            .iter_mut()
            .zip(&pending.depth)
            .zip(&pending.named)
        {
            let known = input.as_ref().and_then(|input| {
                written
                    .get(&change.path)
                    .or_else(|| written.get(input))
                    .map(String::as_str)
            });
            let after = capture_now(
                Path::new(&change.path),
                *deep,
                self.limits.max_file_bytes,
                known,
                Some(&mut pending.seen),
            )
            .map_err(|e| self.fail(e))?;
            change.after = Some(after);
        }
        let before: Vec<String> = record
            .paths
            .iter()
            .flat_map(|change| change.before.blobs())
            .collect();
        if record.paths.iter().all(unchanged) {
            // Nothing changed (the call failed, or wrote what was there): no record, and no
            // content it stored stays behind (PROTOCOL.md §16 (Undo and history)).
            self.store.remove(&record.id).map_err(|e| self.fail(e))?;
            let kept: Vec<String> = self
                .store
                .discard_fresh(&pending.fresh, pending.began)
                .map_err(|e| self.fail(e))?;
            let shared: Vec<String> = before
                .into_iter()
                .filter(|b| kept.contains(b) || !pending.fresh.contains(b))
                .collect();
            self.store
                .detach_shared(&shared)
                .map_err(|e| self.fail(e))?;
            return Ok(None);
        }
        // A blob still sharing its file with a name in the roots (the file had other names)
        // gets a copy of its own.
        self.store
            .detach_shared(&before)
            .map_err(|e| self.fail(e))?;
        (record.added, record.removed) = count_lines(&record.paths, &pending.seen);
        for bytes in std::mem::take(&mut pending.seen).into_values() {
            super::capture::give_back(bytes);
        }
        record.complete = true;
        self.store
            .save_completed(record)
            .map_err(|e| self.fail(e))?;
        self.recorded
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // The rest off the call's path, while it answers: the completed record readable now is
        // flushed, the record renamed to its finished name, the store's size counted.
        let (store, limits, prunes) =
            (std::sync::Arc::clone(&self.store), self.limits, self.prunes);
        let (id, stored_bytes) = (record.id.clone(), record.stored_bytes);
        super::completion::spawn(move || {
            // Where this fails, the marker stays: the next door's start settles the change
            // (silently from its completed record if that verifies, else from the files, saying
            // so).
            let _ = store.make_durable(&id);
            if stored_bytes > 0 {
                super::retention::count_change(&store, limits, &id, stored_bytes, prunes);
            }
        });
        Ok(Some(record.id.clone()))
    }
}

fn with_path(error: std::io::Error, path: &Path) -> std::io::Error {
    std::io::Error::new(error.kind(), format!("{}: {error}", path.display()))
}

/// Whether a path holds after what it held before.
fn unchanged(change: &PathChange) -> bool {
    change
        .after
        .as_ref()
        .is_some_and(|after| after.same_as(&change.before))
}

/// Where a named path is recorded: the path itself, or the highest folder on the way to it that
/// does not exist yet (the call will create it, and the undo removes it), with its open parent,
/// and whether that is the path itself.
fn entry_point(
    sandbox: &Sandbox,
    named: &Named<'_>,
) -> Result<(PathBuf, Dir, PathBuf, bool), UndoError> {
    let last = if named.whole {
        LastComponent::NoFollow
    } else {
        LastComponent::Follow
    };
    let resolved = sandbox.resolve(named.input, last)?;
    let root = sandbox.root_dir(&resolved);
    let mut relative = PathBuf::new();
    for component in resolved.relative.components() {
        relative.push(component);
        if root.symlink_metadata(&relative).is_err() {
            break;
        }
    }
    let exact = relative == resolved.relative;
    let base = resolved
        .absolute
        .ancestors()
        .nth(resolved.relative.components().count())
        .unwrap_or(Path::new("/"))
        .to_owned();
    let name = relative
        .file_name()
        .map(PathBuf::from)
        .ok_or_else(|| SandboxError::Denied {
            path: named.input.to_owned(),
            reason: "an allowed root itself is not recorded for undo".into(),
        })?;
    let parent_relative = relative.parent().unwrap_or(Path::new(""));
    let parent = if parent_relative.as_os_str().is_empty() {
        root.try_clone()
    } else {
        root.open_dir(parent_relative)
    }
    .map_err(|e| SandboxError::from_io(named.input, e))?;
    Ok((base.join(&relative), parent, name, exact))
}

/// What `path` holds now, by hash only; links on the way to it are followed, the last not.
pub fn capture_now(
    path: &Path,
    deep: bool,
    max_file_bytes: u64,
    known_sha256: Option<&str>,
    seen: Option<&mut BTreeMap<String, Vec<u8>>>,
) -> std::io::Result<Image> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Ok(Image::Absent);
    };
    let parent = match Dir::open_ambient_dir(parent, cap_std::ambient_authority()) {
        Ok(parent) => parent,
        Err(error) if is_missing(&error) => return Ok(Image::Absent),
        Err(error) => return Err(error),
    };
    ImageCapture {
        store: None,
        max_file_bytes,
        deep,
        link: false,
        append: false,
        known_sha256,
        seen,
        stored_bytes: 0,
        staged: Vec::new(),
    }
    .image(&parent, Path::new(name))
}

fn is_missing(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
    )
}

/// Lines added and removed over the files the change touched (inside folders too), where their
/// contents were seen.
fn count_lines(paths: &[PathChange], seen: &BTreeMap<String, Vec<u8>>) -> (u64, u64) {
    let mut counts = (0, 0);
    for change in paths {
        if let Some(after) = &change.after {
            count_in(&change.before, after, seen, &mut counts);
        }
    }
    counts
}

fn count_in(
    before: &Image,
    after: &Image,
    seen: &BTreeMap<String, Vec<u8>>,
    counts: &mut (u64, u64),
) {
    if before.same_as(after) {
        return;
    }
    if before.is_deep() || after.is_deep() {
        let names: std::collections::BTreeSet<String> = [before, after]
            .iter()
            .filter_map(|image| match image {
                Image::Dir {
                    entries: Some(entries),
                    ..
                } => Some(entries.keys().cloned()),
                _ => None,
            })
            .flatten()
            .collect();
        for name in names {
            if let (Some(b), Some(a)) = (before.child(&name), after.child(&name)) {
                count_in(b, a, seen, counts);
            }
        }
        return;
    }
    let bytes = |image: &Image| -> Option<&[u8]> {
        match image {
            Image::File { sha256, .. } => seen.get(sha256).map(Vec::as_slice),
            Image::Dir { .. } => None,
            _ => Some(&[]),
        }
    };
    let (Some(old), Some(new)) = (bytes(before), bytes(after)) else {
        return;
    };
    let (old, new) = differing_lines(old, new);
    // A content that is not UTF-8 is counted through a lossy copy.
    let (old, new) = (String::from_utf8_lossy(old), String::from_utf8_lossy(new));
    let diff = similar::TextDiff::configure()
        .timeout(std::time::Duration::from_millis(100))
        .diff_lines(old.as_ref(), new.as_ref());
    for change in diff.iter_all_changes() {
        match change.tag() {
            similar::ChangeTag::Insert => counts.0 += 1,
            similar::ChangeTag::Delete => counts.1 += 1,
            similar::ChangeTag::Equal => {}
        }
    }
}

/// `old` and `new` without the whole lines they begin and end with alike: the lines a diff
/// would find equal anyway, so the diff (and the text conversion before it) looks at only the
/// part that changed, not the whole of a large file around a small edit.
fn differing_lines<'a>(old: &'a [u8], new: &'a [u8]) -> (&'a [u8], &'a [u8]) {
    let common = common_prefix(old, new);
    // Back to the start of the line the first difference is on.
    let start = old[..common]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |newline| newline + 1);
    let (old, new) = (&old[start..], &new[start..]);
    let common = common_suffix(old, new);
    // Forward to the start of a line in both: the suffix kept out is whole lines.
    let whole_lines = |text: &[u8], from: usize| from == 0 || text[from - 1] == b'\n';
    let mut cut = common;
    while cut > 0 && !(whole_lines(old, old.len() - cut) && whole_lines(new, new.len() - cut)) {
        cut -= 1;
    }
    (&old[..old.len() - cut], &new[..new.len() - cut])
}

/// Settles the records that a flycode killed during a change left incomplete: from what the
/// paths hold now (the crash journal has already made each write whole old or whole new), a
/// change that left everything as it was is removed, any other is completed and marked
/// recovered. Returns a line for each record settled.
pub fn settle_interrupted(store: &UndoStore, limits: UndoLimits) -> Vec<String> {
    let mut lines = Vec::new();
    for id in store.marked_pending() {
        let Some(mut record) = store.record(&id) else {
            // No record (killed before it was written), or one that is not flycode's.
            // (A marker younger than a minute may be a live process's, its record not yet written.)
            // An empty record is what a power loss leaves of one whose data had not reached
            // the disk when its name had (they are flushed together, before the change lands):
            // the change never landed.
            let changes = store.dir().join("changes");
            let old_marker = store.marker_age(&id).is_some_and(|age| age.as_secs() > 60);
            let record_len = [format!("{id}.open"), format!("{id}.json")]
                .iter()
                .find_map(|name| std::fs::metadata(changes.join(name)).ok())
                .map(|metadata| metadata.len());
            match record_len {
                None if old_marker => {
                    let _ = store.settled(&id);
                }
                Some(0) if old_marker => {
                    let _ = store.remove(&id);
                }
                _ => {}
            }
            continue;
        };
        if record.complete {
            // Completed (perhaps not flushed yet, by a flycode that ended before it put it on
            // the disk): on the disk now, and the marker gone.
            let _ = store.make_durable(&id);
            continue;
        }
        if crate::journal::owner_is_alive(record.pid, record.start) {
            continue;
        }
        let mut failed = false;
        for change in &mut record.paths {
            let deep = change.before.is_deep() || change.before == Image::Absent;
            match capture_now(
                Path::new(&change.path),
                deep,
                limits.max_file_bytes,
                None,
                None,
            ) {
                Ok(after) => change.after = Some(after),
                Err(_) => failed = true,
            }
        }
        if failed {
            continue;
        }
        // A killed flycode may have left a linked pre-image sharing its file.
        let _ = store.detach_shared(&record.blobs());
        let outcome = if record.paths.iter().all(unchanged) {
            store
                .remove(&record.id)
                .map(|()| "it had changed nothing: removed")
        } else {
            record.complete = true;
            record.recovered = true;
            store
                .save(&record, true)
                .and_then(|()| store.settled(&record.id))
                .map(|()| "completed from what the files hold now")
        };
        if let Ok(what) = outcome {
            lines.push(format!(
                "change {} ({} by an interrupted flycode): {what}",
                record.id, record.tool
            ));
        }
    }
    lines
}

/// How many bytes `a` and `b` begin with alike (compared a block at a time: a large file around a
/// small edit is mostly alike).
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 64;
    let length = a.len().min(b.len());
    let mut alike = 0;
    while alike + BLOCK <= length && a[alike..alike + BLOCK] == b[alike..alike + BLOCK] {
        alike += BLOCK;
    }
    alike
        + a[alike..length]
            .iter()
            .zip(&b[alike..length])
            .take_while(|(x, y)| x == y)
            .count()
}

/// How many bytes `a` and `b` end with alike.
fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 64;
    let length = a.len().min(b.len());
    let (a_end, b_end) = (a.len(), b.len());
    let mut alike = 0;
    while alike + BLOCK <= length
        && a[a_end - alike - BLOCK..a_end - alike] == b[b_end - alike - BLOCK..b_end - alike]
    {
        alike += BLOCK;
    }
    alike
        + a[..a_end - alike]
            .iter()
            .rev()
            .zip(b[..b_end - alike].iter().rev())
            .take_while(|(x, y)| x == y)
            .count()
}

#[cfg(test)]
mod tests {
    use super::{ChangeRecord, UndoLimits, UndoStore, differing_lines, settle_interrupted};
    use crate::durability::Durability;
    use proptest::prelude::*;

    #[test]
    fn an_empty_record_a_power_loss_left_under_way_is_removed_once_it_is_old() {
        // This flycode's record under way (its own marker), and an older one's record beside
        // its marker.
        for (files, marker) in [
            (&["c-1.open"][..], "c-1.open"),
            (&["c-1.json", "c-1.pending"][..], "c-1.pending"),
        ] {
            let state = tempfile::tempdir().unwrap();
            let store = UndoStore::at(&state.path().join("undo"), Durability::Process);
            let changes = state.path().join("undo/changes");
            std::fs::create_dir_all(&changes).unwrap();
            for file in files {
                std::fs::write(changes.join(file), b"").unwrap();
            }
            // Young, it may be a live flycode's, its record not written yet: left alone.
            assert!(settle_interrupted(&store, UndoLimits::default()).is_empty());
            assert!(files.iter().all(|file| changes.join(file).exists()));
            let two_minutes_ago =
                std::time::SystemTime::now() - std::time::Duration::from_secs(120);
            std::fs::File::options()
                .write(true)
                .open(changes.join(marker))
                .unwrap()
                .set_modified(two_minutes_ago)
                .unwrap();
            settle_interrupted(&store, UndoLimits::default());
            assert_eq!(std::fs::read_dir(&changes).unwrap().count(), 0, "{files:?}");
        }
    }

    #[test]
    fn a_change_completed_but_not_yet_on_the_disk_is_put_there_by_the_next_start() {
        let state = tempfile::tempdir().unwrap();
        let store = UndoStore::at(&state.path().join("undo"), Durability::Process);
        // A flycode that ended after the call answered, before its completion thread ran.
        let mut record = ChangeRecord {
            tool: "fs.write".to_owned(),
            ..ChangeRecord::default()
        };
        store.create(&mut record, Vec::new()).unwrap();
        record.complete = true;
        store.save_completed(&record).unwrap();
        // Nothing to say about it (it was not interrupted), and nothing left but the record.
        assert!(settle_interrupted(&store, UndoLimits::default()).is_empty());
        let names: Vec<String> = std::fs::read_dir(state.path().join("undo/changes"))
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| !name.starts_with('.'))
            .collect();
        assert_eq!(names, [format!("{}.json", record.id)]);
        let on_disk = store.record(&record.id).unwrap();
        assert!(on_disk.complete && !on_disk.recovered);
    }

    fn counted(old: &[u8], new: &[u8]) -> (usize, usize) {
        let (old, new) = (String::from_utf8_lossy(old), String::from_utf8_lossy(new));
        let diff = similar::TextDiff::from_lines(old.as_ref(), new.as_ref());
        let changes: Vec<similar::ChangeTag> = diff.iter_all_changes().map(|c| c.tag()).collect();
        (
            changes
                .iter()
                .filter(|t| **t == similar::ChangeTag::Insert)
                .count(),
            changes
                .iter()
                .filter(|t| **t == similar::ChangeTag::Delete)
                .count(),
        )
    }

    #[test]
    fn only_the_lines_that_differ_are_left_to_diff() {
        let old = b"one\ntwo\nthree\nfour\n";
        let new = b"one\nTWO\nthree\nfour\n";
        assert_eq!(differing_lines(old, new), (&b"two\n"[..], &b"TWO\n"[..]));
        assert_eq!(differing_lines(b"a\n", b"b\na\n"), (&b""[..], &b"b\n"[..]));
        assert_eq!(differing_lines(b"x\ny", b"x\nz"), (&b"y"[..], &b"z"[..]));
        assert_eq!(differing_lines(b"same\n", b"same\n"), (&b""[..], &b""[..]));
        // Past the blocks compared at once.
        let (long_old, long_new) = (
            "x\n".repeat(100) + "a\n" + &"y\n".repeat(100),
            "x\n".repeat(100) + "b\n" + &"y\n".repeat(100),
        );
        assert_eq!(
            differing_lines(long_old.as_bytes(), long_new.as_bytes()),
            (&b"a\n"[..], &b"b\n"[..])
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// Trimming the alike lines at both ends never changes the lines counted as added and
        /// removed.
        #[test]
        fn trimming_keeps_the_counts(
            old in proptest::collection::vec(prop::sample::select(vec!["a\n", "b\n", "c", "\n", "é\n", "a", "long line of text that fills a block or more, long line of text\n"]), 0..40),
            new in proptest::collection::vec(prop::sample::select(vec!["a\n", "b\n", "c", "\n", "é\n", "a", "long line of text that fills a block or more, long line of text\n"]), 0..40),
        ) {
            let (old, new) = (old.concat(), new.concat());
            let (trimmed_old, trimmed_new) = differing_lines(old.as_bytes(), new.as_bytes());
            prop_assert_eq!(counted(trimmed_old, trimmed_new), counted(old.as_bytes(), new.as_bytes()));
        }
    }
}
