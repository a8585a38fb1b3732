//! How long the undo store keeps changes (PROTOCOL.md §16 (Undo and history), "Retention"):
//! changes older than `[undo] max_age_days` go, then the oldest ones until the contents the rest
//! need fit in `[undo] max_bytes`; contents no change needs any more are removed with them.
//! `flycode gc` prunes, and every door's start does once a day; both say what went. Within a
//! session, a change that stores contents prunes at once when the store's running count says it
//! has outgrown `max_bytes` ([`count_change`]), down to nine tenths of it: a pruning reads every
//! record and lists every content, so a store kept exactly at its limit paid that at every
//! change (4 KB writes in one session with 1 MiB kept, about 250 changes: 1.8 ms a write before
//! the store was full, 2.9–3.2 ms after; 2.5–2.8 ms pruned to nine tenths, issue 41).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use super::change::ChangeRecord;
use super::limits::UndoLimits;
use super::store::UndoStore;

/// What pruning removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    /// The changes removed, oldest first.
    pub changes: Vec<String>,
    /// How many of them were older than `max_age_days`.
    pub too_old: usize,
    /// The bytes of content freed.
    pub freed: u64,
    /// The bytes of content the store holds now.
    pub kept: u64,
}

/// The stamp that says when the store was last pruned at a door's start.
const STAMP: &str = "pruned";

/// Prunes the store to `limits`, now.
pub fn prune(store: &UndoStore, limits: UndoLimits, now: SystemTime) -> Pruned {
    prune_keeping(store, limits, limits.max_bytes, now, None)
}

/// What a pruning within a session leaves at most: nine tenths of `max_bytes`, so that the
/// next one comes only after the store has grown by a tenth again.
fn session_target(limits: UndoLimits) -> u64 {
    limits.max_bytes - limits.max_bytes / 10
}

/// Counts the contents a change (`newest`) just `stored`; where `prune`, prunes the store if
/// the count says it has outgrown `[undo] max_bytes` (to nine tenths of it, and to
/// `max_age_days`), keeping `newest` whatever its size (the call that made it has just said its
/// id): the limit holds within a session, not only at a door's start.
pub fn count_change(store: &UndoStore, limits: UndoLimits, newest: &str, stored: u64, prune: bool) {
    let Ok(count) = store.count_added(stored) else {
        return;
    };
    if !prune || count <= limits.max_bytes {
        return;
    }
    prune_keeping(
        store,
        limits,
        session_target(limits),
        SystemTime::now(),
        Some(newest),
    );
}

/// Prunes the changes older than `limits.max_age_days`, then the oldest until the contents the
/// rest need are at most `target` bytes, never `keep` or a change after it.
fn prune_keeping(
    store: &UndoStore,
    limits: UndoLimits,
    target: u64,
    now: SystemTime,
    keep: Option<&str>,
) -> Pruned {
    // Held from the snapshot of the records to the sweep of the contents: a change being
    // recorded holds the lock shared from looking its contents up until its record is written,
    // so no content a record is about to name is swept as unneeded. Without the lock (a store
    // that cannot have one), nothing is pruned; a store that does not exist is not made for it.
    if !store.dir().exists() {
        return Pruned::default();
    }
    let Some(_alone) = store.lock(true) else {
        return Pruned::default();
    };
    let (records, _) = store.records();
    let sizes: BTreeMap<String, u64> = store
        .blob_files()
        .into_iter()
        .map(|(sha256, _, bytes)| (sha256, bytes))
        .collect();
    let cutoff = now
        .checked_sub(Duration::from_secs(u64::from(limits.max_age_days) * 86_400))
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs());
    let mut uses: BTreeMap<String, usize> = BTreeMap::new();
    for record in &records {
        for sha256 in unique(record) {
            *uses.entry(sha256).or_default() += 1;
        }
    }
    let mut kept: u64 = uses.keys().filter_map(|sha| sizes.get(sha)).sum();
    let mut pruned = Pruned::default();
    // Oldest first; a change under way is never pruned (it stops the walk: what is newer stays).
    for record in records
        .iter()
        .take_while(|record| record.complete && Some(record.id.as_str()) != keep)
    {
        let old = record.time < cutoff;
        if !old && kept <= target {
            break;
        }
        if store.remove(&record.id).is_err() {
            break;
        }
        for sha256 in unique(record) {
            if let Some(count) = uses.get_mut(&sha256) {
                *count -= 1;
                if *count == 0 {
                    kept -= sizes.get(&sha256).copied().unwrap_or(0);
                }
            }
        }
        pruned.too_old += usize::from(old);
        pruned.changes.push(record.id.clone());
    }
    let (dropped, remaining): (Vec<ChangeRecord>, Vec<ChangeRecord>) = records
        .into_iter()
        .partition(|record| pruned.changes.contains(&record.id));
    pruned.freed = store.sweep_blobs(&remaining, &dropped);
    pruned.kept = kept;
    let _ = store.set_count(kept);
    pruned
}

fn unique(record: &ChangeRecord) -> std::collections::BTreeSet<String> {
    record.blobs().into_iter().collect()
}

/// Prunes the store if it was not pruned in the last day (a door's start); `None` when not due.
pub fn prune_if_due(store: &UndoStore, limits: UndoLimits) -> Option<Pruned> {
    let stamp = store.dir().join(STAMP);
    let due = std::fs::metadata(&stamp)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_none_or(|age| age > Duration::from_secs(86_400));
    if !due || !store.dir().exists() {
        return None;
    }
    let _ = std::fs::write(&stamp, b"");
    Some(prune(store, limits, SystemTime::now()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::durability::Durability;

    /// A change being recorded holds the store's lock shared from looking its contents up until
    /// its record is written; pruning, which sweeps the contents no record names, waits for it,
    /// so it never removes a content a record is about to name.
    #[test]
    fn pruning_waits_for_a_change_being_recorded() {
        let state = tempfile::tempdir().unwrap();
        let store = UndoStore::at(&state.path().join("undo"), Durability::Process);
        let recording = store.lock(false).expect("the store can be locked");
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            let pruning = scope.spawn(|| {
                prune(&store, UndoLimits::default(), SystemTime::now());
                done.store(true, std::sync::atomic::Ordering::SeqCst);
            });
            // Time enough for a pruning that did not wait to have ended.
            std::thread::sleep(Duration::from_millis(300));
            assert!(
                !done.load(std::sync::atomic::Ordering::SeqCst),
                "pruning ran while a change was being recorded"
            );
            drop(recording);
            pruning.join().unwrap();
        });
        assert!(done.load(std::sync::atomic::Ordering::SeqCst));
    }

    #[test]
    fn pruning_a_store_that_does_not_exist_makes_nothing() {
        let state = tempfile::tempdir().unwrap();
        let store = UndoStore::at(&state.path().join("undo"), Durability::Process);
        let pruned = prune(&store, UndoLimits::default(), SystemTime::now());
        assert!(pruned.changes.is_empty());
        assert!(!state.path().join("undo").exists());
    }
}
