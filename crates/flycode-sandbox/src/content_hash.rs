//! The sha256 of a file's current content, for the stale-read guard: streamed (a large file is
//! never held whole), and remembered per file while the file is provably unchanged, so reading
//! parts of one large file again and again hashes it once.
//!
//! A remembered hash is keyed by the file (device and inode) and holds the file's size, modification
//! and status-change times as they were when it was hashed. It is used only when all of them are
//! the same now, and it is kept only when the file had been still for [`SETTLED`] before it was
//! hashed: timestamps may be coarse, and a change made in the same tick as the hash must still
//! change the times (a write after hashing sets the status-change time to "now", later than a time
//! that was already [`SETTLED`] old). A file that was changed recently is hashed every time.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};

/// How long a file must have been unchanged for its hash to be remembered.
pub const SETTLED: Duration = Duration::from_secs(3);

/// Files remembered at most; past it the memory starts afresh.
const REMEMBERED: usize = 4096;

/// What identifies a file and its state, from `fstat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Identity {
    device: u64,
    inode: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct State {
    size: u64,
    modified: (i64, i64),
    changed: (i64, i64),
}

static REMEMBERED_HASHES: Mutex<Option<HashMap<Identity, (State, String)>>> = Mutex::new(None);

/// The lowercase hex sha256 of what `file` holds now (read from its start).
pub fn current_sha256(file: &mut File) -> std::io::Result<String> {
    let known = identity_and_state(file);
    if let Some((identity, state)) = known
        && let Some(hash) = remembered(identity, state)
    {
        return Ok(hash);
    }
    let hash = stream_sha256(&mut *file)?;
    if let Some((identity, state)) = known
        && settled(state, SystemTime::now())
        // The file did not change while it was read.
        && identity_and_state(file).map(|(_, after)| after) == Some(state)
    {
        remember(identity, state, &hash);
    }
    Ok(hash)
}

/// The lowercase hex sha256 of everything `reader` yields, read in pieces (constant memory),
/// never from the remembered hashes: for a check that must see the bytes as they are now.
pub fn stream_sha256(reader: impl Read) -> std::io::Result<String> {
    stream_sha256_len(reader).map(|(sha256, _)| sha256)
}

/// The sha256 of everything `reader` gives, and how many bytes that was.
pub fn stream_sha256_len(mut reader: impl Read) -> std::io::Result<(String, u64)> {
    let mut hasher = Sha256::new();
    let mut buffer = crate::read::BlockBuffer::new(256 * 1024);
    let buffer = buffer.block();
    let mut length: u64 = 0;
    loop {
        match reader.read(buffer) {
            Ok(0) => break,
            Ok(n) => {
                hasher.update(&buffer[..n]);
                length += n as u64;
            }
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok((hex::encode(hasher.finalize()), length))
}

#[cfg(unix)]
fn identity_and_state(file: &File) -> Option<(Identity, State)> {
    use std::os::unix::fs::MetadataExt;
    let metadata = file.metadata().ok()?;
    Some((
        Identity {
            device: metadata.dev(),
            inode: metadata.ino(),
        },
        State {
            size: metadata.size(),
            modified: (metadata.mtime(), metadata.mtime_nsec()),
            changed: (metadata.ctime(), metadata.ctime_nsec()),
        },
    ))
}

#[cfg(not(unix))]
fn identity_and_state(_file: &File) -> Option<(Identity, State)> {
    None
}

/// Whether a file in `state` had been still for [`SETTLED`] at `now`.
fn settled(state: State, now: SystemTime) -> bool {
    let Ok(now) = now.duration_since(SystemTime::UNIX_EPOCH) else {
        return false;
    };
    let latest = state.modified.max(state.changed);
    let Ok(latest) = u64::try_from(latest.0) else {
        return false;
    };
    latest.saturating_add(SETTLED.as_secs()) < now.as_secs()
}

fn remembered(identity: Identity, state: State) -> Option<String> {
    let memory = REMEMBERED_HASHES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match memory.as_ref()?.get(&identity) {
        Some((known, hash)) if *known == state => Some(hash.clone()),
        _ => None,
    }
}

fn remember(identity: Identity, state: State, hash: &str) {
    let mut memory = REMEMBERED_HASHES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let map = memory.get_or_insert_with(HashMap::new);
    if map.len() >= REMEMBERED {
        map.clear();
    }
    map.insert(identity, (state, hash.to_owned()));
}

/// The lowercase hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // fixtures are made directly
mod tests {
    use std::io::{Seek, Write};

    use super::*;
    use crate::sha256_hex;

    #[test]
    fn the_hash_is_the_contents_and_a_fresh_file_is_hashed_every_time() {
        let temp = tempfile::tempdir().unwrap();
        let path = temp.path().join("a.txt");
        std::fs::write(&path, b"one").unwrap();
        let mut file = File::open(&path).unwrap();
        assert_eq!(current_sha256(&mut file).unwrap(), sha256_hex(b"one"));
        // Same size, same second: only a file that had settled is remembered, so this one is
        // hashed again and the change is seen.
        let mut writer = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        writer.write_all(b"two").unwrap();
        drop(writer);
        let mut file = File::open(&path).unwrap();
        assert_eq!(current_sha256(&mut file).unwrap(), sha256_hex(b"two"));
    }

    #[test]
    fn only_a_settled_state_is_remembered() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        let at = |seconds| State {
            size: 1,
            modified: (seconds, 0),
            changed: (seconds, 0),
        };
        assert!(settled(at(900), now));
        assert!(!settled(at(999), now));
        assert!(!settled(
            State {
                changed: (999, 0),
                ..at(900)
            },
            now
        ));
    }

    #[test]
    fn a_remembered_hash_is_used_only_for_the_same_state() {
        let identity = Identity {
            device: u64::MAX,
            inode: 7,
        };
        let state = State {
            size: 3,
            modified: (10, 0),
            changed: (10, 0),
        };
        remember(identity, state, "h");
        assert_eq!(remembered(identity, state).as_deref(), Some("h"));
        let later = State {
            changed: (11, 0),
            ..state
        };
        assert_eq!(remembered(identity, later), None);
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(b"x").unwrap();
        file.rewind().unwrap();
        assert_eq!(stream_sha256(&mut file).unwrap(), sha256_hex(b"x"));
    }
}
