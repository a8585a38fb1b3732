//! The undo store's files (PROTOCOL.md §16 (Undo and history), "The store"): `STATE/undo/blobs/`
//! holds file contents named by their sha256 (each written once, however many changes share
//! it), `STATE/undo/changes/c-N.json` one sealed record per change. A blob is checked against its
//! name when read back, and a record whose seal does not verify is never acted on: a program that
//! writes into the state directory cannot make `flycode undo` write what it chose.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use std::os::fd::AsFd;

use super::super::durability::{Durability, Flush, sync_at_once, sync_data, sync_dir};
use super::super::seal::{Purpose, SealKey};
use super::change::ChangeRecord;

/// How many linked old files a change keeps open until its flushes ([`UndoStore::create`]):
/// enough for the flushes to overlap, few enough that a large batch never nears the limit on
/// open files.
const LINKED_KEPT_OPEN: usize = 128;

/// The file that counts the bytes of content the store holds ([`UndoStore::count_added`]).
const SIZE_COUNT: &str = "size";

/// The undo store in a state directory.
#[derive(Debug)]
pub struct UndoStore {
    dir: PathBuf,
    durability: Durability,
    /// The state directory's key, once read.
    key: std::sync::OnceLock<SealKey>,
    /// Set once the store's own folder is known to exist and be private.
    private: std::sync::OnceLock<()>,
}

impl UndoStore {
    /// The store in `STATE/undo`, where there is a state directory.
    pub fn open_default(durability: Durability) -> Option<UndoStore> {
        super::super::state::state_dir().map(|state| UndoStore {
            dir: state.join("undo"),
            durability,
            key: std::sync::OnceLock::new(),
            private: std::sync::OnceLock::new(),
        })
    }

    /// The store in `dir` (a benchmark's, a test's).
    pub fn at(dir: &Path, durability: Durability) -> UndoStore {
        UndoStore {
            dir: dir.to_owned(),
            durability,
            key: std::sync::OnceLock::new(),
            private: std::sync::OnceLock::new(),
        }
    }

    /// The store's folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where a new blob goes: `blobs/` itself, one folder, so that a change that stores a
    /// hundred contents flushes one folder, not a hundred.
    fn blob_path(&self, sha256: &str) -> PathBuf {
        self.dir.join("blobs").join(sha256)
    }

    /// Where the blob `sha256` is: `blobs/`, or the shard folder (`blobs/ab/`) where the first
    /// stores of this round put it.
    fn stored_blob(&self, sha256: &str) -> Option<PathBuf> {
        let flat = self.blob_path(sha256);
        if flat.is_file() {
            return Some(flat);
        }
        let shard = self
            .dir
            .join("blobs")
            .join(sha256.get(..2).unwrap_or("00"))
            .join(sha256);
        shard.is_file().then_some(shard)
    }

    fn changes(&self) -> PathBuf {
        self.dir.join("changes")
    }

    /// Whether the content with this hash is stored.
    pub fn has_blob(&self, sha256: &str) -> bool {
        is_hex_hash(sha256) && self.stored_blob(sha256).is_some()
    }

    /// Whether the content `bytes` (whose sha256 is `sha256`) is stored, as far as its length
    /// tells: a blob of another length is damaged (a program wrote to a kept file), and is
    /// removed so that this change stores the content again.
    fn holds_whole(&self, sha256: &str, bytes: &[u8]) -> bool {
        let Some(path) = self.stored_blob(sha256) else {
            return false;
        };
        if std::fs::metadata(&path).is_ok_and(|m| m.len() == len(bytes)) {
            return true;
        }
        let _ = std::fs::remove_file(path);
        false
    }

    /// Creates a folder of the store, and the store's own folder readable by its owner only:
    /// a kept file keeps its mode, and the store holds what files held before they were
    /// overwritten or removed.
    fn make_dir(&self, dir: &Path) -> std::io::Result<()> {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        if self.private.get().is_some() && self.dir.is_dir() {
            return std::fs::create_dir_all(dir);
        }
        if !self.dir.is_dir() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&self.dir)?;
        }
        let own = std::fs::symlink_metadata(&self.dir)?;
        if own.permissions().mode() & 0o077 != 0 {
            std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o700))?;
        }
        let _ = self.private.set(());
        std::fs::create_dir_all(dir)
    }

    /// Whether the content with this hash is stored and still hashes to its name (a kept file
    /// a program wrote to since does not).
    pub fn holds_intact(&self, sha256: &str) -> bool {
        let Some(path) = self.stored_blob(sha256) else {
            return false;
        };
        std::fs::File::open(path)
            .and_then(|file| super::super::content_hash::stream_sha256(&file))
            .is_ok_and(|actual| actual == sha256)
    }

    /// Writes `bytes` (whose sha256 is `sha256`) to a temporary file beside its blob, unless
    /// stored (or staged) already; the bytes it will add. Nothing is flushed or named yet:
    /// [`UndoStore::create`] does that for all of a change's contents at once.
    pub fn stage_blob(
        &self,
        sha256: &str,
        bytes: &[u8],
        staged: &mut Vec<StagedBlob>,
    ) -> std::io::Result<u64> {
        let path = self.blob_path(sha256);
        if self.holds_whole(sha256, bytes) || staged.iter().any(|blob| blob.path() == path) {
            return Ok(0);
        }
        let dir = path.parent().unwrap_or(&self.dir);
        self.make_dir(dir)?;
        let mut temp = tempfile::Builder::new().prefix(".blob.").tempfile_in(dir)?;
        temp.write_all(bytes)?;
        staged.push(StagedBlob::Copied { temp, path });
        Ok(len(bytes))
    }

    /// Keeps the file `name` in `parent` (open as `file`, `before` its metadata taken before
    /// `bytes` were read from it, which hash to `sha256`) as its blob by giving it a second
    /// name in the store rather than copying it: for a call that replaces or removes the file,
    /// whose old content then lives on only there (PROTOCOL.md §16 (Undo and history), "How a
    /// content is kept"). Its data is flushed (under `full`; nothing to write when it is on the
    /// disk already), its name with the folder when the change is created. Where the link may
    /// not or cannot be made (another user's file, an empty one, setuid bits, another file
    /// system, a file changed while it was read) the content is copied as
    /// [`UndoStore::stage_blob`] does. The bytes it will add.
    pub fn stage_linked_blob(
        &self,
        source: (&cap_std::fs::Dir, &Path, &std::fs::File),
        before: &std::fs::Metadata,
        sha256: &str,
        bytes: &[u8],
        staged: &mut Vec<StagedBlob>,
    ) -> std::io::Result<u64> {
        let path = self.blob_path(sha256);
        if self.holds_whole(sha256, bytes) || staged.iter().any(|blob| blob.path() == path) {
            return Ok(0);
        }
        let dir = path.parent().unwrap_or(&self.dir);
        self.make_dir(dir)?;
        if linkable(before) && link_unchanged(source, before, dir, sha256) {
            // The old file's own data may not be on the disk yet (a program wrote it a moment
            // ago): once the change lands, this is its only copy. [`UndoStore::create`] flushes
            // it, beside the change's other flushes; past the first few of a change (each kept
            // open until then), here.
            let open = staged
                .iter()
                .filter(|blob| matches!(blob, StagedBlob::Linked { file: Some(_), .. }))
                .count();
            // A descriptor that cannot be had (the process at its limit) costs the flush here,
            // not the recording.
            let kept = (open < LINKED_KEPT_OPEN)
                .then(|| source.2.try_clone().ok())
                .flatten();
            let file = match kept {
                Some(file) => Some(file),
                None => {
                    sync_data(source.2, self.durability)?;
                    None
                }
            };
            staged.push(StagedBlob::Linked { path, file });
            return Ok(len(bytes));
        }
        self.stage_blob(sha256, bytes, staged)
    }

    /// Gives each of `sha256s` that still shares its file with a name outside the store (the
    /// call that linked it failed or changed nothing, or the file had other names) a copy of
    /// its own, so that nothing written to that file later reaches the store, and so that the
    /// file has one name again (flycode refuses to append to or chmod a file with several). A
    /// blob that no longer matches its name is removed: it could not be restored anyway.
    pub fn detach_shared(&self, sha256s: &[String]) -> std::io::Result<()> {
        use std::os::unix::fs::MetadataExt;
        for sha256 in sha256s {
            let Some(path) = self.stored_blob(sha256) else {
                continue;
            };
            let shared = std::fs::symlink_metadata(&path).is_ok_and(|m| m.nlink() > 1);
            if !shared {
                continue;
            }
            let bytes = std::fs::read(&path)?;
            if super::super::content_hash::sha256_hex(&bytes) != *sha256 {
                std::fs::remove_file(&path)?;
                continue;
            }
            let dir = path.parent().unwrap_or(&self.dir);
            let mut temp = tempfile::Builder::new().prefix(".blob.").tempfile_in(dir)?;
            temp.write_all(&bytes)?;
            sync_data(temp.as_file(), self.durability)?;
            temp.persist(&path).map_err(|e| e.error)?;
        }
        Ok(())
    }

    /// Flushes the staged copies' data (all at once) and gives each its name (a blob someone
    /// else stored meanwhile is kept); the folders to flush (a linked blob's too: its name is
    /// new) and the linked files, whose data is still to flush.
    fn name_blobs(
        &self,
        staged: Vec<StagedBlob>,
    ) -> std::io::Result<(BTreeSet<PathBuf>, Vec<std::fs::File>)> {
        let copies: Vec<Flush<'_>> = staged
            .iter()
            .filter_map(|blob| match blob {
                StagedBlob::Copied { temp, .. } => Some(Flush::Data(temp.as_file().as_fd())),
                StagedBlob::Linked { .. } => None,
            })
            .collect();
        sync_at_once(&copies, self.durability)?;
        drop(copies);
        let mut folders = BTreeSet::new();
        let mut linked = Vec::new();
        for blob in staged {
            folders.insert(blob.path().parent().unwrap_or(&self.dir).to_owned());
            match blob {
                StagedBlob::Copied { temp, path } => match temp.persist_noclobber(&path) {
                    Ok(_) => {}
                    Err(error) if error.error.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(error) => return Err(error.error),
                },
                StagedBlob::Linked { file, .. } => linked.extend(file),
            }
        }
        Ok((folders, linked))
    }

    /// The content stored under `sha256`, checked against it.
    pub fn blob(&self, sha256: &str) -> std::io::Result<Vec<u8>> {
        if !is_hex_hash(sha256) {
            return Err(invalid(format!("{sha256} is not a sha256")));
        }
        let path = self.stored_blob(sha256).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{sha256} is not stored"),
            )
        })?;
        let bytes = std::fs::read(path)?;
        if super::super::content_hash::sha256_hex(&bytes) != sha256 {
            return Err(invalid(format!(
                "the stored content {sha256} is damaged (its hash differs)"
            )));
        }
        Ok(bytes)
    }

    /// Names the change's staged contents, gives `record` the next free id (`c-N`) and writes
    /// it, sealed, as a new file `c-N.open`: two processes never take the same id (the file is
    /// created exclusively, and given up where `c-N.json` appeared meanwhile). Under `full`, the
    /// copied contents' data is flushed before they are named; then the linked files' data, the
    /// record's and every folder that got a name (`blobs/`, and `changes/` with the record) are
    /// flushed together, each on a thread of its own ([`sync_at_once`]), so that all of it is
    /// on the disk before the change lands. No order is needed among those: nothing names a
    /// flushed thing until they have all ended.
    pub fn create(
        &self,
        record: &mut ChangeRecord,
        staged: Vec<StagedBlob>,
    ) -> std::io::Result<()> {
        let (mut folders, linked) = self.name_blobs(staged)?;
        let changes = self.changes();
        self.make_dir(&changes)?;
        let counter = self.dir.join("next");
        let mut seq = std::fs::read_to_string(&counter)
            .ok()
            .and_then(|text| text.trim().parse::<u64>().ok())
            .unwrap_or(1)
            .max(1);
        let written = loop {
            record.seq = seq;
            record.id = format!("c-{seq}");
            let finished = changes.join(record_name(&record.id));
            if finished.symlink_metadata().is_ok() {
                seq += 1;
                continue;
            }
            // The record under way is its own marker (`c-N.open`): settled after a crash,
            // renamed to `c-N.json` once its completed record is on the disk.
            let open = self.open_path(&record.id);
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&open)
            {
                Ok(mut file) => {
                    // Another flycode may have finished `c-N` between the look above and the
                    // creation: then the id is its, and this one tries the next.
                    if finished.symlink_metadata().is_ok() {
                        drop(file);
                        remove_if_there(&open)?;
                        seq += 1;
                        continue;
                    }
                    file.write_all(first_line(self.sealed(record)?).as_bytes())?;
                    break file;
                }
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => seq += 1,
                Err(error) => return Err(error),
            }
        };
        // A hint only: a lost update costs a retry, never a reused id.
        let _ = std::fs::write(&counter, format!("{}\n", seq + 1));
        folders.insert(changes);
        let folders: Vec<std::fs::File> = folders
            .iter()
            .filter_map(|folder| std::fs::File::open(folder).ok())
            .collect();
        let flushes: Vec<Flush<'_>> = linked
            .iter()
            .chain(std::iter::once(&written))
            .map(|file| Flush::Data(file.as_fd()))
            .chain(folders.iter().map(|folder| Flush::Dir(folder.as_fd())))
            .collect();
        sync_at_once(&flushes, self.durability)?;
        if record.complete {
            // Complete from the start (a call that ran a program): nothing to wait for.
            self.finish(&record.id)?;
        }
        Ok(())
    }

    /// The state directory's key (the store lives in `STATE/undo`).
    fn key(&self) -> Result<SealKey, crate::seal::KeyError> {
        if let Some(key) = self.key.get() {
            return Ok(key.clone());
        }
        let key = SealKey::in_dir(self.dir.parent().unwrap_or(&self.dir))?;
        Ok(self.key.get_or_init(|| key).clone())
    }

    fn sealed(&self, record: &ChangeRecord) -> std::io::Result<String> {
        let key = self
            .key()
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let body = serde_json::to_string(record).map_err(std::io::Error::other)?;
        Ok(key.wrap(Purpose::Undo, &record_name(&record.id), &body))
    }

    /// Replaces a record already created, atomically, its data flushed (under `full`), and its
    /// folder too where `settling` (a crash's record, whose marker goes next). The data is
    /// flushed before the rename because a file system may otherwise put the rename on the disk
    /// before the data, leaving an empty record in place of the incomplete one.
    pub fn save(&self, record: &ChangeRecord, settling: bool) -> std::io::Result<()> {
        let changes = self.changes();
        let mut temp = tempfile::Builder::new()
            .prefix(".record.")
            .tempfile_in(&changes)?;
        temp.write_all(first_line(self.sealed(record)?).as_bytes())?;
        sync_data(temp.as_file(), self.durability)?;
        // A record under way changes its name here: no pruning lists the records meanwhile.
        let _listed_alone = self.lock(false);
        temp.persist(changes.join(record_name(&record.id)))
            .map_err(|e| e.error)?;
        // The record under way, and a completed record of an older flycode that never reached
        // the disk whole, are replaced by this one.
        remove_if_there(&self.open_path(&record.id))?;
        remove_if_there(&self.done_path(&record.id))?;
        if settling && let Ok(folder) = std::fs::File::open(&changes) {
            sync_dir(&folder, self.durability)?;
        }
        Ok(())
    }

    /// Appends `record`, complete, to its incomplete record's file (`c-N.open`), sealed under
    /// the record's own name: readable at once (the last line whose seal verifies is the record,
    /// for [`UndoStore::record`] and [`UndoStore::records`]), but not flushed.
    /// [`UndoStore::make_durable`] puts it on the disk after the call has answered
    /// ([`super::completion`]). The incomplete record's bytes are left as they are (the append
    /// starts on a block of its own, [`first_line`]): until the completed one is on the disk,
    /// a crash finds the incomplete one to settle from. No file is made for it (a new file
    /// would cost an allocation on the call's path, and a rename over the record a freed one).
    pub fn save_completed(&self, record: &ChangeRecord) -> std::io::Result<()> {
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(self.open_path(&record.id))?;
        let mut line = self.sealed(record)?;
        line.push('\n');
        file.write_all(line.as_bytes())
    }

    /// Puts the completed record of `id` ([`UndoStore::save_completed`]) on the disk: its
    /// file's data flushed (under `full`), then renamed from `c-N.open` to `c-N.json` (its folder
    /// not flushed: a crash that loses the rename leaves a completed record under way, which the
    /// next start renames). An older flycode's completed record waiting beside the record
    /// (`c-N.done`) is flushed and renamed over it, and its marker dropped. Nothing to do where
    /// the record is in place already (another flycode settled it meanwhile) or gone.
    pub fn make_durable(&self, id: &str) -> std::io::Result<()> {
        let done = self.done_path(id);
        match std::fs::File::open(&done) {
            Ok(file) => {
                sync_data(&file, self.durability)?;
                match std::fs::rename(&done, self.changes().join(record_name(id))) {
                    Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                        return Err(error);
                    }
                    _ => {}
                }
                return self.settled(id);
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(error),
        }
        match std::fs::File::open(self.open_path(id)) {
            Ok(file) => sync_data(&file, self.durability)?,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return self.settled(id);
            }
            Err(error) => return Err(error),
        }
        self.finish(id)
    }

    /// Renames the record under way of `id` to its finished name, never over another record.
    /// Under the store's lock (shared), so that no pruning lists the records while one changes
    /// its name (a listing could miss it).
    fn finish(&self, id: &str) -> std::io::Result<()> {
        let _listed_alone = self.lock(false);
        let (open, finished) = (self.open_path(id), self.changes().join(record_name(id)));
        let renamed = match rustix::fs::renameat_with(
            rustix::fs::CWD,
            &open,
            rustix::fs::CWD,
            &finished,
            rustix::fs::RenameFlags::NOREPLACE,
        ) {
            // A file system without the flag: a second name (refused where one is there), then
            // the first one dropped.
            Err(rustix::io::Errno::INVAL) => {
                std::fs::hard_link(&open, &finished).and_then(|()| std::fs::remove_file(&open))
            }
            renamed => renamed.map_err(std::io::Error::from),
        };
        match renamed {
            Ok(()) => self.settled(id),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => self.settled(id),
            // Finished already: a flycode that settled this change was stopped between writing
            // the finished record and removing this one. Where the finished record is this very
            // change's, this one goes; anything else (another process's record under this id)
            // is left as it is.
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
                let name = record_name(id);
                let same_change = match (
                    self.read_sealed(&open, &name),
                    self.read_sealed(&finished, &name),
                ) {
                    (Some(under_way), Some(done)) => {
                        (
                            under_way.pid,
                            under_way.start,
                            under_way.time,
                            &under_way.session,
                        ) == (done.pid, done.start, done.time, &done.session)
                    }
                    _ => false,
                };
                if same_change {
                    remove_if_there(&open)?;
                }
                self.settled(id)
            }
            Err(error) => Err(error),
        }
    }

    /// The record of a change under way: the change's marker too (PROTOCOL.md §16 (Undo and
    /// history), "The store").
    fn open_path(&self, id: &str) -> PathBuf {
        self.changes().join(format!("{id}.open"))
    }

    /// Where an older flycode put a completed record waiting to be put on the disk (this one
    /// appends it to the record's own file, [`UndoStore::save_completed`]).
    fn done_path(&self, id: &str) -> PathBuf {
        self.changes().join(format!("{id}.done"))
    }

    /// The record sealed in `path` under the name `name`, if its seal verifies.
    ///
    /// A record file holds one sealed record a line, the incomplete one first and the
    /// completed one appended ([`UndoStore::save_completed`]): the last whose seal verifies is
    /// the record (a completed one a crash left torn does not, and the incomplete one before it
    /// is read).
    fn read_sealed(&self, path: &Path, name: &str) -> Option<ChangeRecord> {
        let bytes = std::fs::read(path).ok()?;
        let key = self.key().ok()?;
        // Line by line: a torn line may end inside a character, and must not take the whole
        // lines before it along.
        bytes
            .rsplit(|byte| *byte == b'\n')
            .filter_map(|line| std::str::from_utf8(line).ok())
            .map(str::trim)
            .filter(|line| !line.is_empty())
            .find_map(|line| key.unwrap(Purpose::Undo, name, line))
            .and_then(|body| serde_json::from_str::<ChangeRecord>(body).ok())
            .filter(|record| record_name(&record.id) == name)
    }

    /// Takes the store's lock: shared while a change looks its contents up and names them (until
    /// its record is written), exclusive while [`UndoStore::discard_fresh`] removes contents, so
    /// that no change relies on a content found in the store that is removed before its record
    /// names it. `None` where the lock cannot be had (then nothing is discarded).
    pub fn lock(&self, exclusive: bool) -> Option<std::fs::File> {
        self.make_dir(&self.dir).ok()?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.dir.join("lock"))
            .ok()?;
        let operation = if exclusive {
            rustix::fs::FlockOperation::LockExclusive
        } else {
            rustix::fs::FlockOperation::LockShared
        };
        rustix::fs::flock(&file, operation).ok()?;
        Some(file)
    }

    /// Removes the contents `fresh` that a change which changed nothing stored itself, unless a
    /// record written since `began` needs one (another change found it in the store meanwhile).
    /// A removed blob that was the old file itself (linked) only loses its second name. The
    /// contents kept.
    pub fn discard_fresh(
        &self,
        fresh: &[String],
        began: std::time::SystemTime,
    ) -> std::io::Result<Vec<String>> {
        if fresh.is_empty() {
            return Ok(Vec::new());
        }
        let Some(_alone) = self.lock(true) else {
            return Ok(fresh.to_vec());
        };
        // Timestamps may be coarse: a little before the start counts as since.
        let since = began
            .checked_sub(std::time::Duration::from_secs(2))
            .unwrap_or(began);
        let mut needed = BTreeSet::new();
        for entry in std::fs::read_dir(self.changes())?.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let recent = entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|modified| modified >= since);
            let id = name
                .strip_suffix(".json")
                .or_else(|| name.strip_suffix(".open"));
            if let (true, Some(id)) = (recent, id)
                && let Some(record) = self.record(id)
            {
                needed.extend(record.blobs());
            }
        }
        let mut kept = Vec::new();
        for sha256 in fresh {
            if needed.contains(sha256) {
                kept.push(sha256.clone());
                continue;
            }
            if let Some(path) = self.stored_blob(sha256) {
                match std::fs::remove_file(path) {
                    Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                        return Err(error);
                    }
                    _ => {}
                }
            }
        }
        Ok(kept)
    }

    /// Removes a record (a call that changed nothing, a pruned change).
    pub fn remove(&self, id: &str) -> std::io::Result<()> {
        remove_if_there(&self.done_path(id))?;
        remove_if_there(&self.changes().join(record_name(id)))?;
        // Last: while it is there, no other process takes the id (and writes a record this
        // would then remove).
        remove_if_there(&self.open_path(id))?;
        self.settled(id)
    }

    /// The marker an older flycode made for a change under way, beside its record.
    fn marker(&self, id: &str) -> PathBuf {
        self.changes().join(format!("{id}.pending"))
    }

    /// Where the first stores of this round put the markers.
    fn older_marker(&self, id: &str) -> PathBuf {
        self.dir.join("pending").join(id)
    }

    /// Drops an older flycode's marker of a change (it is complete, or gone).
    pub fn settled(&self, id: &str) -> std::io::Result<()> {
        for marker in [self.marker(id), self.older_marker(id)] {
            match std::fs::remove_file(marker) {
                Err(error) if error.kind() != std::io::ErrorKind::NotFound => return Err(error),
                _ => {}
            }
        }
        Ok(())
    }

    /// How long ago the change `id` was marked as under way (its record under way made, or an
    /// older flycode's marker), if it is.
    pub fn marker_age(&self, id: &str) -> Option<std::time::Duration> {
        [self.open_path(id), self.marker(id), self.older_marker(id)]
            .iter()
            .find_map(|marker| std::fs::metadata(marker).and_then(|m| m.modified()).ok())
            .and_then(|made| made.elapsed().ok())
    }

    /// The ids of the changes under way: records `c-N.open`, and older flycodes' markers.
    pub fn marked_pending(&self) -> Vec<String> {
        let names = |dir: PathBuf| -> Vec<String> {
            std::fs::read_dir(dir)
                .map(|entries| {
                    entries
                        .flatten()
                        .map(|entry| entry.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default()
        };
        let mut ids: Vec<String> = names(self.changes())
            .into_iter()
            .filter_map(|name| {
                name.strip_suffix(".open")
                    .or_else(|| name.strip_suffix(".pending"))
                    .map(str::to_owned)
            })
            .chain(names(self.dir.join("pending")))
            .filter(|id| id.starts_with("c-"))
            .collect();
        ids.sort();
        ids.dedup();
        ids
    }

    /// The record `id`, if it exists and its seal verifies: finished (`c-N.json`) or under way
    /// (`c-N.open`, its completed line where one was appended, [`UndoStore::save_completed`]).
    pub fn record(&self, id: &str) -> Option<ChangeRecord> {
        let name = record_name(id);
        let finished = self.changes().join(&name);
        self.read_sealed(&self.done_path(id), &name)
            .or_else(|| self.read_sealed(&finished, &name))
            .or_else(|| self.read_sealed(&self.open_path(id), &name))
            // Renamed between the two looks.
            .or_else(|| self.read_sealed(&finished, &name))
    }

    /// [`UndoStore::records`], under the store's lock (shared): no record changes its name while
    /// they are listed (one listed in that moment could be missed). For a reader that holds no
    /// lock of the store's; a pruning, which holds it exclusively, calls
    /// [`UndoStore::records`].
    pub fn records_listed_alone(&self) -> (Vec<ChangeRecord>, Vec<String>) {
        // A store without records is not made (with its lock file) for a look at it.
        let _listed_alone = self.changes().is_dir().then(|| self.lock(false));
        self.records()
    }

    /// Every record whose seal verifies, oldest first, and a notice for each file that is not
    /// one (left alone, never acted on).
    pub fn records(&self) -> (Vec<ChangeRecord>, Vec<String>) {
        let mut records = Vec::new();
        let mut notices = Vec::new();
        let Ok(entries) = std::fs::read_dir(self.changes()) else {
            return (records, notices);
        };
        if let Err(error) = self.key() {
            return (records, vec![format!("cannot check the records: {error}")]);
        }
        let names: BTreeSet<String> = entries
            .flatten()
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with("c-"))
            .collect();
        for name in &names {
            let id = match name.strip_suffix(".open") {
                // Under way, and not finished meanwhile (then its finished name is read).
                Some(id) if !names.contains(&record_name(id)) => id,
                _ => match name.strip_suffix(".json") {
                    Some(id) => id,
                    None => continue,
                },
            };
            let path = self.changes().join(name);
            let name = &record_name(id);
            // An older flycode's completed record first, where one waits beside it (read before
            // the record itself: renamed over it meanwhile, it is found there).
            let done = names
                .contains(&format!("{id}.done"))
                .then(|| self.read_sealed(&self.done_path(id), name))
                .flatten();
            let record = done
                .or_else(|| self.read_sealed(&path, name))
                // Finished between the listing and the read: under its finished name now.
                .or_else(|| self.read_sealed(&self.changes().join(name), name));
            // A record under way that does not verify yet may be a live change's, its first
            // line being written: said only once it is a minute old (then settled, or left).
            let young_under_way = path.extension().is_some_and(|ext| ext == "open")
                && self.marker_age(id).is_none_or(|age| age.as_secs() <= 60);
            match record {
                Some(record) => records.push(record),
                None if young_under_way => {}
                None => notices.push(format!(
                    "{} was ignored: its seal does not verify (damaged, or not written by flycode)",
                    path.display()
                )),
            }
        }
        records.sort_by_key(|record| record.seq);
        (records, notices)
    }

    /// Removes every blob no record in `records` needs: those `dropped` needed at once, any
    /// other once it is an hour old. The bytes freed.
    pub fn sweep_blobs(&self, records: &[ChangeRecord], dropped: &[ChangeRecord]) -> u64 {
        let was_needed: std::collections::BTreeSet<String> =
            dropped.iter().flat_map(ChangeRecord::blobs).collect();
        let needed: std::collections::BTreeSet<String> =
            records.iter().flat_map(ChangeRecord::blobs).collect();
        let mut freed = 0;
        // By the change time: a blob that is an old file linked in a moment ago has that
        // file's modification time, but its change time is the link's.
        let recent = |path: &Path| {
            use std::os::unix::fs::MetadataExt;
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            std::fs::symlink_metadata(path)
                .map(|m| u64::try_from(m.ctime()).unwrap_or(0))
                .is_ok_and(|changed| now.saturating_sub(changed) < 3600)
        };
        for (sha256, path, bytes) in self.blob_files() {
            // A change being recorded now stores its contents before its record.
            if !needed.contains(&sha256)
                && (was_needed.contains(&sha256) || !recent(&path))
                && std::fs::remove_file(&path).is_ok()
            {
                freed += bytes;
            }
        }
        freed
    }

    /// Adds `bytes` to the count of the contents the store holds (the file `size`, changed
    /// under its own lock by every flycode that stores), counting the blobs first where there
    /// is no count yet; the count after. The count only grows between prunings (a content
    /// removed is not taken off): it is at least what the store holds, so a pruning that it
    /// calls for finds the truth and sets it ([`UndoStore::set_count`]).
    pub fn count_added(&self, bytes: u64) -> std::io::Result<u64> {
        use std::io::{Read, Seek};
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(self.dir.join(SIZE_COUNT))?;
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)?;
        let mut text = String::new();
        file.read_to_string(&mut text)?;
        let count = match text.trim().parse::<u64>() {
            Ok(count) => count.saturating_add(bytes),
            // The blobs counted include the ones just stored.
            Err(_) => self.blob_files().iter().map(|(_, _, size)| size).sum(),
        };
        file.set_len(0)?;
        file.rewind()?;
        file.write_all(count.to_string().as_bytes())?;
        Ok(count)
    }

    /// Sets the count of the contents the store holds (after a pruning counted them).
    pub fn set_count(&self, bytes: u64) -> std::io::Result<()> {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(self.dir.join(SIZE_COUNT))?;
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)?;
        file.set_len(0)?;
        (&file).write_all(bytes.to_string().as_bytes())
    }

    /// Every stored blob: its hash, file and size (in `blobs/`, and in the shard folders of
    /// older stores).
    pub fn blob_files(&self) -> Vec<(String, PathBuf, u64)> {
        let mut blobs = Vec::new();
        let Ok(entries) = std::fs::read_dir(self.dir.join("blobs")) else {
            return blobs;
        };
        let mut shards = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => shards.push(entry.path()),
                // A blob, or the temporary file of a flycode killed while it stored one.
                Ok(kind)
                    if kind.is_file() && (is_hex_hash(&name) || name.starts_with(".blob.")) =>
                {
                    let bytes = entry.metadata().map(|m| m.len()).unwrap_or(0);
                    blobs.push((name, entry.path(), bytes));
                }
                _ => {}
            }
        }
        for shard in shards {
            let Ok(files) = std::fs::read_dir(shard) else {
                continue;
            };
            for file in files.flatten() {
                let name = file.file_name().to_string_lossy().into_owned();
                let bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
                blobs.push((name, file.path(), bytes));
            }
        }
        blobs
    }
}

/// A content on its way into the store, not yet flushed nor (for a copy) named.
#[derive(Debug)]
pub enum StagedBlob {
    /// A copy in a temporary file beside its blob.
    Copied {
        /// The temporary file.
        temp: tempfile::NamedTempFile,
        /// The blob it becomes.
        path: PathBuf,
    },
    /// The old file itself, under the blob's name already (a hard link).
    Linked {
        /// The blob.
        path: PathBuf,
        /// The file open, for flushing its data with the change's other flushes (`None`:
        /// flushed already).
        file: Option<std::fs::File>,
    },
}

impl StagedBlob {
    /// The sha256 of the content.
    pub fn sha256(&self) -> String {
        self.path()
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// The sha256 of a file linked in (already under its blob's name).
    pub fn linked(&self) -> Option<String> {
        match self {
            StagedBlob::Linked { path, .. } => path
                .file_name()
                .map(|name| name.to_string_lossy().into_owned()),
            StagedBlob::Copied { .. } => None,
        }
    }

    fn path(&self) -> &Path {
        match self {
            StagedBlob::Copied { path, .. } | StagedBlob::Linked { path, .. } => path,
        }
    }
}

/// Whether a file may be kept by a second name: one of flycode's user's own (another user's
/// file is copied, never made to live on in this user's state directory), not empty (an empty
/// file costs nothing to copy, and is the content most often shared), and without setuid,
/// setgid or sticky bits.
fn linkable(file: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    file.uid() == rustix::process::geteuid().as_raw() && file.len() > 0 && file.mode() & 0o7000 == 0
}

/// Links `name` in `parent` into `dir` as `sha256`, and keeps the link only where it names the
/// very file that was read (`file`, by device and inode) and that file's size and modification
/// time are still those of `before` (taken before it was read): a file swapped or written to
/// meanwhile is copied instead, from the bytes that were hashed. (The link itself changes the
/// file's change time, so that is not compared.)
fn link_unchanged(
    source: (&cap_std::fs::Dir, &Path, &std::fs::File),
    before: &std::fs::Metadata,
    dir: &Path,
    sha256: &str,
) -> bool {
    use std::os::unix::fs::MetadataExt;
    let (parent, name, file) = source;
    let Ok(store) = cap_std::fs::Dir::open_ambient_dir(dir, cap_std::ambient_authority()) else {
        return false;
    };
    if parent.hard_link(name, &store, sha256).is_err() {
        return false;
    }
    let identity = |m: &std::fs::Metadata| (m.dev(), m.ino());
    let content = |m: &std::fs::Metadata| (m.size(), m.mtime(), m.mtime_nsec());
    let linked = store.symlink_metadata(sha256).map(|m| {
        use cap_std::fs::MetadataExt as _;
        (m.dev(), m.ino())
    });
    let kept = match (linked, file.metadata()) {
        (Ok(linked), Ok(now)) => {
            linked == identity(before)
                && identity(&now) == identity(before)
                && content(&now) == content(before)
        }
        _ => false,
    };
    if !kept {
        let _ = store.remove_file(sha256);
    }
    kept
}

fn len(bytes: &[u8]) -> u64 {
    u64::try_from(bytes.len()).unwrap_or(u64::MAX)
}

/// How a record file's first line ends: on a block boundary of the file, so that the completed
/// record appended later ([`UndoStore::save_completed`]) starts in a block of its own and the
/// disk never rewrites a block holding the incomplete record while the completed one goes on
/// it (a power loss then cannot take the incomplete record with it).
const RECORD_BLOCK: usize = 4096;

/// A record's first line: `sealed`, spaces up to the block boundary, a line feed.
fn first_line(mut sealed: String) -> String {
    let padding = (RECORD_BLOCK - (sealed.len() + 1) % RECORD_BLOCK) % RECORD_BLOCK;
    sealed.extend(std::iter::repeat_n(' ', padding));
    sealed.push('\n');
    sealed
}

/// Removes `path`; one that is not there is no error.
fn remove_if_there(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(error),
        _ => Ok(()),
    }
}

/// A record's file name.
fn record_name(id: &str) -> String {
    format!("{id}.json")
}

fn is_hex_hash(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

fn invalid(message: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::content_hash::sha256_hex;

    fn store() -> (tempfile::TempDir, UndoStore) {
        let state = tempfile::tempdir().unwrap();
        let store = UndoStore::at(&state.path().join("undo"), Durability::Process);
        std::fs::create_dir_all(store.dir().join("blobs")).unwrap();
        (state, store)
    }

    #[test]
    fn a_blob_in_the_shard_folder_of_an_older_store_is_still_found() {
        let (_state, store) = store();
        let hash = sha256_hex(b"older\n");
        let shard = store.dir().join("blobs").join(&hash[..2]);
        std::fs::create_dir_all(&shard).unwrap();
        std::fs::write(shard.join(&hash), b"older\n").unwrap();
        assert!(store.has_blob(&hash));
        assert_eq!(store.blob(&hash).unwrap(), b"older\n");
        assert_eq!(store.blob_files()[0].0, hash);
    }

    #[test]
    fn markers_beside_the_records_and_in_an_older_store_s_folder_are_both_found() {
        let (_state, store) = store();
        std::fs::create_dir_all(store.dir().join("changes")).unwrap();
        std::fs::create_dir_all(store.dir().join("pending")).unwrap();
        std::fs::write(store.marker("c-2"), b"").unwrap();
        std::fs::write(store.dir().join("pending/c-1"), b"").unwrap();
        assert_eq!(store.marked_pending(), ["c-1", "c-2"]);
        assert!(store.marker_age("c-1").is_some());
        store.settled("c-1").unwrap();
        store.settled("c-2").unwrap();
        assert!(store.marked_pending().is_empty());
    }

    fn record(id: &str, complete: bool) -> ChangeRecord {
        ChangeRecord {
            id: id.to_owned(),
            seq: 1,
            tool: "fs.write".to_owned(),
            complete,
            ..ChangeRecord::default()
        }
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| !name.starts_with('.'))
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_completed_record_is_appended_to_its_record_readable_at_once_and_flushed_after() {
        let (_state, store) = store();
        let mut incomplete = record("", false);
        store.create(&mut incomplete, Vec::new()).unwrap();
        let id = incomplete.id.clone();
        let file = store.changes().join(format!("{id}.open"));
        assert_eq!(names(&store.changes()), [format!("{id}.open")]);
        let first = std::fs::read(&file).unwrap();
        assert_eq!(
            first.len() % RECORD_BLOCK,
            0,
            "the first line fills whole blocks"
        );
        let mut complete = incomplete.clone();
        complete.complete = true;
        store.save_completed(&complete).unwrap();
        // Readable at once, through both ways of reading; the incomplete record's bytes as
        // they were, and the marker still there; no other file.
        assert!(store.record(&id).unwrap().complete);
        let (records, notices) = store.records();
        assert!(notices.is_empty(), "{notices:?}");
        assert_eq!(records.len(), 1);
        assert!(records[0].complete);
        assert!(std::fs::read(&file).unwrap().starts_with(&first));
        assert_eq!(names(&store.changes()), [format!("{id}.open")]);
        store.make_durable(&id).unwrap();
        assert_eq!(names(&store.changes()), [format!("{id}.json")]);
        assert!(store.record(&id).unwrap().complete);
        // A second time (another flycode settling it meanwhile) finds nothing to do.
        store.make_durable(&id).unwrap();
        assert!(store.record(&id).unwrap().complete);
    }

    #[test]
    fn a_completed_record_that_did_not_reach_the_disk_whole_leaves_the_incomplete_one_in_force() {
        let (_state, store) = store();
        let mut incomplete = record("", false);
        store.create(&mut incomplete, Vec::new()).unwrap();
        let id = incomplete.id.clone();
        let file = store.changes().join(format!("{id}.open"));
        let first = std::fs::read(&file).unwrap();
        let mut complete = incomplete.clone();
        complete.complete = true;
        let whole = store.sealed(&complete).unwrap();
        // What a power loss can leave of a completed record not yet flushed: nothing, a part,
        // or zeros (a file whose size reached the disk before its data).
        // A torn line may end inside a character (a path's `é`, here cut after its first byte).
        let cut_in_a_character = [&whole.as_bytes()[..20], "é".as_bytes()].concat();
        let cut_in_a_character = &cut_in_a_character[..cut_in_a_character.len() - 1];
        for torn in [
            &b""[..],
            b"{\"mac\":",
            &whole.as_bytes()[..whole.len() - 1],
            &[0; 40],
            cut_in_a_character,
        ] {
            std::fs::write(&file, [&first[..], torn].concat()).unwrap();
            assert!(!store.record(&id).unwrap().complete);
            let (records, notices) = store.records();
            assert!(notices.is_empty(), "{notices:?}");
            assert!(!records[0].complete);
        }
        // Settled from the files, the record saved in its place is whole again.
        store.save(&complete, true).unwrap();
        assert!(store.record(&id).unwrap().complete);
        assert_eq!(names(&store.changes()), [format!("{id}.json")]);
        store.remove(&id).unwrap();
        assert!(names(&store.changes()).is_empty());
    }

    #[test]
    fn a_record_under_way_not_written_yet_is_no_alarm_until_it_is_a_minute_old() {
        let (_state, store) = store();
        std::fs::create_dir_all(store.changes()).unwrap();
        let open = store.open_path("c-3");
        std::fs::write(&open, b"").unwrap();
        let (records, notices) = store.records();
        assert!(records.is_empty() && notices.is_empty(), "{notices:?}");
        std::fs::File::options()
            .write(true)
            .open(&open)
            .unwrap()
            .set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(120))
            .unwrap();
        let (_, notices) = store.records();
        assert_eq!(notices.len(), 1, "{notices:?}");
        assert!(notices[0].contains("c-3.open"), "{notices:?}");
    }

    #[test]
    fn a_record_under_way_whose_change_was_finished_already_goes_and_another_s_is_kept() {
        let (_state, store) = store();
        let mut under_way = record("", false);
        under_way.pid = 41;
        store.create(&mut under_way, Vec::new()).unwrap();
        let id = under_way.id.clone();
        let mut complete = under_way.clone();
        complete.complete = true;
        store.save_completed(&complete).unwrap();
        // A flycode settling it stopped between writing `c-N.json` and removing `c-N.open`.
        std::fs::write(
            store.changes().join(record_name(&id)),
            store.sealed(&complete).unwrap(),
        )
        .unwrap();
        store.make_durable(&id).unwrap();
        assert_eq!(names(&store.changes()), [record_name(&id)]);
        // Another process's record under the same id (a flycode from before `.open` writing the
        // store at the same moment): neither is removed or replaced.
        let mut mine = record("", false);
        mine.pid = 41;
        store.create(&mut mine, Vec::new()).unwrap();
        let mut theirs = mine.clone();
        theirs.pid = 42;
        std::fs::write(
            store.changes().join(record_name(&mine.id)),
            store.sealed(&theirs).unwrap(),
        )
        .unwrap();
        store.make_durable(&mine.id).unwrap();
        assert!(store.open_path(&mine.id).exists());
        assert_eq!(store.record(&mine.id).unwrap().pid, 42);
    }

    #[test]
    fn a_completed_record_an_older_flycode_left_beside_its_record_is_read_and_put_in_place() {
        let (_state, store) = store();
        std::fs::create_dir_all(store.changes()).unwrap();
        // An older flycode's change under way: its incomplete record, its marker, and its
        // completed record waiting beside them.
        let older = |id: &str, done: &[u8]| {
            let incomplete = record(id, false);
            std::fs::write(
                store.changes().join(record_name(id)),
                store.sealed(&incomplete).unwrap(),
            )
            .unwrap();
            std::fs::write(store.marker(id), b"").unwrap();
            std::fs::write(store.done_path(id), done).unwrap();
        };
        let mut complete = record("c-7", true);
        complete.seq = 7;
        older("c-7", store.sealed(&complete).unwrap().as_bytes());
        assert_eq!(store.marked_pending(), ["c-7"]);
        assert!(store.record("c-7").unwrap().complete);
        assert!(store.records().0[0].complete);
        store.make_durable("c-7").unwrap();
        assert_eq!(names(&store.changes()), ["c-7.json"]);
        assert!(store.record("c-7").unwrap().complete);
        // Torn, it is not read, and removing the change removes it too.
        older("c-8", b"{\"mac\":");
        assert!(!store.record("c-8").unwrap().complete);
        store.remove("c-8").unwrap();
        assert_eq!(names(&store.changes()), ["c-7.json"]);
    }

    #[test]
    fn an_old_file_linked_in_a_moment_ago_is_not_swept_as_old() {
        let (state, store) = store();
        // A file last written two days ago, just linked in by a change whose record is not
        // written yet.
        let file = state.path().join("old.txt");
        std::fs::write(&file, b"old\n").unwrap();
        let two_days = std::time::SystemTime::now() - std::time::Duration::from_secs(2 * 86_400);
        std::fs::File::options()
            .write(true)
            .open(&file)
            .unwrap()
            .set_modified(two_days)
            .unwrap();
        let hash = sha256_hex(b"old\n");
        std::fs::hard_link(&file, store.dir().join("blobs").join(&hash)).unwrap();
        assert_eq!(store.sweep_blobs(&[], &[]), 0);
        assert!(store.has_blob(&hash));
    }
}
