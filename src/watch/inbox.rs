//! The inbox mode: reply files (`*.md`, `*.txt`) dropped into a folder are answered with a
//! `NAME.result.md` written atomically beside them.
//!
//! A file is taken once it is completely written: its size and modification time have stayed the
//! same for a quiet period (so both write-then-rename and slow writers work). Each content is
//! answered once; result files and hidden files are never taken as input; files present at start
//! are skipped unless asked for. The loop takes its shutdown signal as a parameter, so tests (and
//! Ctrl-C) stop it between files.
//!
//! A file over the reply limit (`max_reply_bytes`) is answered `too_large` by its size, never
//! read into memory: it is hashed as it streams past (to answer it once), and hashed again only
//! when its size or modification time changes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use notify::{RecursiveMode, Watcher};
use thiserror::Error;

use super::handler::{Handled, Handler};
use crate::config::reply_limit::{ReplyTooLarge, read_reply};
use crate::sandbox::sha256_hex;
use crate::sandbox::state::write_atomically;

/// The suffix of result files.
pub(crate) const RESULT_SUFFIX: &str = ".result.md";

/// How the inbox is watched.
#[derive(Clone, Debug)]
pub(crate) struct InboxOptions {
    /// The folder.
    pub dir: PathBuf,
    /// How long a file must stay unchanged before it is read.
    pub quiet: Duration,
    /// How often the folder is looked at when no event arrives.
    pub poll: Duration,
    /// Also answer the files present at start.
    pub existing: bool,
}

/// Why the inbox cannot be watched (exit 2).
#[derive(Debug, Error)]
pub(crate) enum InboxError {
    /// The folder is missing or unreadable.
    #[error("inbox {path}: {source}; create the folder or pass another --inbox")]
    Unreadable {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

#[derive(Clone, Copy, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
}

struct Tracked {
    stamp: Stamp,
    stable_since: Instant,
    answered_hash: Option<String>,
    /// The stamp `answered_hash` was taken at: a file over the reply limit is hashed again only
    /// once it changed (hashing it costs a read of the whole file, unlike a reply).
    hashed_at: Option<Stamp>,
}

/// Whether `path` is a reply file to answer.
pub(crate) fn is_reply_file(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    !name.starts_with('.')
        && !name.ends_with(RESULT_SUFFIX)
        && (name.ends_with(".md") || name.ends_with(".txt"))
}

/// `reply.md` → `reply.result.md`, `reply.txt` → `reply.result.md`.
pub(crate) fn result_path(reply: &Path) -> PathBuf {
    let stem = reply
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    reply.with_file_name(format!("{stem}{RESULT_SUFFIX}"))
}

/// An inbox being watched: the files present at start are known (and skipped unless
/// `existing`), so a file that appears after [`Inbox::open`] returns is answered.
pub(crate) struct Inbox {
    options: InboxOptions,
    tracked: HashMap<PathBuf, Tracked>,
    wake: mpsc::Receiver<()>,
    // Kept alive for its events.
    _watcher: Option<notify::RecommendedWatcher>,
}

impl Inbox {
    /// Looks at the folder for the first time and starts listening for changes.
    pub(crate) fn open(options: &InboxOptions) -> Result<Inbox, InboxError> {
        let unreadable = |source| InboxError::Unreadable {
            path: options.dir.clone(),
            source,
        };
        let (events, wake) = mpsc::channel();
        // Only what changes the folder's files wakes the loop: never the opens and reads of its
        // own scans, which would wake it to scan again, forever.
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            if event.is_ok_and(|event| changes_files(&event.kind)) {
                let _ = events.send(());
            }
        })
        .ok()
        .and_then(|mut watcher| {
            watcher
                .watch(&options.dir, RecursiveMode::NonRecursive)
                .ok()
                .map(|()| watcher)
        });
        let mut tracked: HashMap<PathBuf, Tracked> = HashMap::new();
        for (path, stamp) in scan(&options.dir).map_err(unreadable)? {
            let answered_hash = if options.existing {
                None
            } else {
                hash_file(&path).ok()
            };
            tracked.insert(
                path,
                Tracked {
                    stamp,
                    stable_since: Instant::now(),
                    hashed_at: answered_hash.as_ref().map(|_| stamp),
                    answered_hash,
                },
            );
        }
        Ok(Inbox {
            options: options.clone(),
            tracked,
            wake,
            _watcher: watcher,
        })
    }

    /// Answers reply files until `shutdown` is set; `report` hears of every answer and notice.
    pub(crate) fn run(
        mut self,
        handler: &mut Handler<'_>,
        shutdown: &AtomicBool,
        report: &mut dyn FnMut(&Path, &Handled),
    ) {
        let (options, tracked, wake) = (&self.options, &mut self.tracked, &self.wake);
        let notified = self._watcher.is_some();
        let mut last_scan = Instant::now();
        // The reply files the last scan found (a file removed since waits for nothing).
        let mut present: std::collections::HashSet<PathBuf> = tracked.keys().cloned().collect();
        while !shutdown.load(Ordering::SeqCst) {
            // Every poll the shutdown is looked at; the folder only when something happened in
            // it, a file waits for its quiet period, or nothing tells of changes (no watcher), and
            // every few seconds anyway, in case the kernel dropped an event.
            let woken = wake.recv_timeout(options.poll).is_ok();
            while wake.try_recv().is_ok() {}
            let now = Instant::now();
            let waiting = tracked.iter().any(|(path, entry)| {
                entry.hashed_at != Some(entry.stamp) && present.contains(path)
            });
            if notified && !woken && !waiting && now.duration_since(last_scan) < RESCAN {
                continue;
            }
            last_scan = now;
            let Ok(files) = scan(&options.dir) else {
                continue;
            };
            present = files.iter().map(|(path, _)| path.clone()).collect();
            for (path, stamp) in files {
                let entry = tracked.entry(path.clone()).or_insert(Tracked {
                    stamp,
                    stable_since: now,
                    answered_hash: None,
                    hashed_at: None,
                });
                if entry.stamp != stamp {
                    entry.stamp = stamp;
                    entry.stable_since = now;
                    continue;
                }
                if now.duration_since(entry.stable_since) < options.quiet {
                    continue;
                }
                let limit = handler.max_reply_bytes;
                let (hash, handled) = if stamp.len > limit as u64 {
                    if entry.hashed_at == Some(stamp) {
                        continue;
                    }
                    // Not read into memory: hashed as it streams past, then refused by its size.
                    let Ok(hash) = hash_file(&path) else {
                        continue;
                    };
                    let too_large = ReplyTooLarge {
                        size: Some(stamp.len),
                        limit,
                    };
                    (hash, Reading::TooLarge(too_large))
                } else {
                    let bytes = match read_bounded(&path, limit, stamp.len) {
                        Ok(Ok(bytes)) => bytes,
                        // It grew after it was looked at: its new size is seen on the next scan.
                        Ok(Err(_)) | Err(_) => continue,
                    };
                    (sha256_hex(&bytes), Reading::Text(bytes))
                };
                entry.hashed_at = Some(stamp);
                if entry.answered_hash.as_deref() == Some(hash.as_str()) {
                    continue;
                }
                entry.answered_hash = Some(hash);
                let handled = match handled {
                    Reading::TooLarge(too_large) => {
                        handler.refuse_too_large(&too_large, Instant::now())
                    }
                    Reading::Text(bytes) => handler.handle(&String::from_utf8_lossy(&bytes)),
                };
                match handled {
                    Handled::Ignored => {}
                    Handled::Noticed(_) => report(&path, &handled),
                    Handled::Answered(mut answer) => {
                        if let Err(error) =
                            write_atomically(&result_path(&path), answer.block.as_bytes())
                        {
                            answer.store_error = Some(format!("cannot write the result: {error}"));
                        }
                        report(&path, &Handled::Answered(answer));
                    }
                }
                if shutdown.load(Ordering::SeqCst) {
                    break;
                }
            }
        }
    }
}

/// How often a watched inbox is scanned when no event came: a safety net for an event the
/// kernel dropped (its queue overflowed), not the way files are found.
const RESCAN: Duration = Duration::from_secs(5);

/// Whether an event of `kind` can mean a file in the folder changed: anything but an open, a
/// read or the close of a file that was only read (a writer's close is a change).
fn changes_files(kind: &notify::EventKind) -> bool {
    use notify::event::{AccessKind, AccessMode};
    match kind {
        notify::EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        notify::EventKind::Access(_) => false,
        _ => true,
    }
}

/// A reply file as read: its bytes, or its refusal by size.
enum Reading {
    Text(Vec<u8>),
    TooLarge(ReplyTooLarge),
}

/// Reads at most `limit + 1` bytes of `path` (of `len` bytes when it was looked at).
fn read_bounded(
    path: &Path,
    limit: usize,
    len: u64,
) -> std::io::Result<Result<Vec<u8>, ReplyTooLarge>> {
    let file = crate::sandbox::host::open(path)?;
    read_reply(file, limit, Some(len))
}

/// The lowercase hex sha256 of a file's content, read in pieces: a file of any size is hashed in
/// constant memory (the same value [`sha256_hex`] gives for its bytes).
fn hash_file(path: &Path) -> std::io::Result<String> {
    crate::sandbox::content_hash::stream_sha256(crate::sandbox::host::open(path)?)
}

/// Reply files in `dir` with their size and modification time.
fn scan(dir: &Path) -> std::io::Result<Vec<(PathBuf, Stamp)>> {
    let mut files = Vec::new();
    for entry in crate::sandbox::host::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        if !is_reply_file(&path) {
            continue;
        }
        let Ok(meta) = entry.metadata() else { continue };
        if !meta.is_file() {
            continue;
        }
        files.push((
            path,
            Stamp {
                len: meta.len(),
                modified: meta.modified().ok(),
            },
        ));
    }
    files.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(files)
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // fixtures are made directly, outside the sandbox
mod tests {
    use super::*;

    #[test]
    fn a_file_hashed_in_pieces_hashes_as_its_bytes() {
        let temp = tempfile::tempdir().unwrap();
        let path = temp.path().join("reply.md");
        let bytes: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(hash_file(&path).unwrap(), sha256_hex(&bytes));
    }

    #[test]
    fn reply_files_and_result_names() {
        assert!(is_reply_file(Path::new("/in/reply.md")));
        assert!(is_reply_file(Path::new("/in/reply.txt")));
        assert!(!is_reply_file(Path::new("/in/reply.result.md")));
        assert!(!is_reply_file(Path::new("/in/.reply.md.123.tmp")));
        assert!(!is_reply_file(Path::new("/in/.hidden.md")));
        assert!(!is_reply_file(Path::new("/in/image.png")));
        assert_eq!(
            result_path(Path::new("/in/a.txt")),
            PathBuf::from("/in/a.result.md")
        );
        assert_eq!(
            result_path(Path::new("/in/a.b.md")),
            PathBuf::from("/in/a.b.result.md")
        );
    }
}
