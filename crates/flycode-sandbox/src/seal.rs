//! Seals on flycode's own records (PROTOCOL.md §11 Security, "After a crash"): the journal,
//! the watch replay stores, the sessions and each audit-log line carry an HMAC-SHA256 (RFC 2104,
//! built here from `sha2` in a few lines rather than another dependency) under a 256-bit key
//! that only flycode can read, so that a record a program or a tool planted in the state
//! directory is told apart from one flycode wrote, and never acted on.
//!
//! The key is drawn from the operating system (`/dev/urandom`) the first time it is needed and
//! kept in `STATE/seal.key`, mode 0600: written to a fresh temporary file first and then linked
//! into place without replacing anything, so it is created exclusively, whole, and never through
//! a link; an existing key is opened without following a link and must be a regular 32-byte
//! file. No file tool may read it (the state directory is flycode's own, see
//! [`super::protect`]) and no program may (Landlock, [`super::contain`]).
//!
//! A seal covers a purpose (journal, replay, session, audit), the record's name and its exact
//! bytes, so a record cannot be moved to another name or used for another purpose. This module
//! knows nothing of what the records mean.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::Deserialize;
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

/// The key file's name, in the state directory.
pub const KEY_FILE: &str = "seal.key";

/// The key's length in bytes (256 bits).
pub const KEY_BYTES: usize = 32;

/// SHA-256's block size, for HMAC.
const BLOCK: usize = 64;

/// HMAC-SHA256 of `message` under `key` (RFC 2104).
pub fn hmac_sha256(key: &[u8], message: &[&[u8]]) -> [u8; 32] {
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.map(|k| k ^ byte);
    let mut inner = Sha256::new();
    inner.update(pad(0x36));
    for part in message {
        inner.update(part);
    }
    let mut outer = Sha256::new();
    outer.update(pad(0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

/// Compares two byte strings in time that does not depend on where they differ.
pub fn equal_in_constant_time(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// What a sealed record is for: a seal made for one purpose never opens another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// A journal record (an interrupted write).
    Journal,
    /// A watch session's replay store.
    Replay,
    /// A session of the stale-read guard.
    Session,
    /// A line of the audit log.
    Audit,
    /// A change record of the undo store.
    Undo,
}

impl Purpose {
    fn label(self) -> &'static [u8] {
        match self {
            Purpose::Journal => b"flycode journal record",
            Purpose::Replay => b"flycode replay store",
            Purpose::Session => b"flycode session",
            Purpose::Audit => b"flycode audit line",
            Purpose::Undo => b"flycode change record",
        }
    }
}

/// The key of a state directory.
#[derive(Clone)]
pub struct SealKey([u8; KEY_BYTES]);

impl std::fmt::Debug for SealKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SealKey(..)")
    }
}

/// Why a key could not be had.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// No state directory is known.
    #[error("no state directory: set FLYCODE_STATE_DIR or HOME")]
    NoStateDir,
    /// The key file exists but is not one flycode made.
    #[error(
        "{0} is not flycode's key (a regular file of 32 bytes, mode 0600): remove it, and flycode makes a new one (records sealed with the old one are then set aside at the next start)"
    )]
    Damaged(PathBuf),
    /// Reading or creating it failed.
    #[error(
        "{path}: {source}; make the state directory writable or set FLYCODE_STATE_DIR to one that is"
    )]
    Io {
        /// The key file.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
}

impl SealKey {
    /// The key kept in `dir` (made if there is none).
    pub fn in_dir(dir: &Path) -> Result<SealKey, KeyError> {
        static KEPT: Mutex<Option<(PathBuf, SealKey)>> = Mutex::new(None);
        let mut kept = KEPT
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((kept_dir, key)) = kept.as_ref()
            && kept_dir == dir
        {
            return Ok(key.clone());
        }
        let key = load_or_create(dir)?;
        *kept = Some((dir.to_owned(), key.clone()));
        Ok(key)
    }

    /// A key from bytes (tests).
    pub fn from_bytes(bytes: [u8; KEY_BYTES]) -> SealKey {
        SealKey(bytes)
    }

    /// The seal of `body`, stored under `name` for `purpose`, as hex.
    pub fn seal(&self, purpose: Purpose, name: &str, body: &[u8]) -> String {
        hex::encode(hmac_sha256(
            &self.0,
            &[purpose.label(), b"\0", name.as_bytes(), b"\0", body],
        ))
    }

    /// Whether `mac` (hex) is the seal of `body` under `name` for `purpose`.
    pub fn verifies(&self, purpose: Purpose, name: &str, body: &[u8], mac: &str) -> bool {
        let Ok(given) = hex::decode(mac) else {
            return false;
        };
        let expected = hmac_sha256(
            &self.0,
            &[purpose.label(), b"\0", name.as_bytes(), b"\0", body],
        );
        equal_in_constant_time(&given, &expected)
    }

    /// `body` (JSON text) wrapped with its seal: `{"mac":"…","body":…}`.
    pub fn wrap(&self, purpose: Purpose, name: &str, body: &str) -> String {
        let mac = self.seal(purpose, name, body.as_bytes());
        format!("{{\"mac\":\"{mac}\",\"body\":{body}}}")
    }

    /// The body of a wrapped record, if its seal verifies; `None` for anything else (not a
    /// wrapped record, a seal made with another key, name or purpose, a changed byte).
    pub fn unwrap<'t>(&self, purpose: Purpose, name: &str, text: &'t str) -> Option<&'t str> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Wrapped<'a> {
            mac: String,
            #[serde(borrow)]
            body: &'a RawValue,
        }
        let wrapped: Wrapped<'t> = serde_json::from_str(text).ok()?;
        let body = wrapped.body.get();
        self.verifies(purpose, name, body.as_bytes(), &wrapped.mac)
            .then_some(body)
    }
}

/// The file name of `path` as text, for a seal (empty if it has none).
pub fn name_of(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn load_or_create(dir: &Path) -> Result<SealKey, KeyError> {
    private_key_file(dir, KEY_FILE).map(SealKey)
}

/// The 32 random bytes kept in `dir/name` (a regular file of mode 0600, never a link), made
/// if there is none: the seal key, and `flycode mcp --http`'s access secret.
pub fn private_key_file(dir: &Path, name: &str) -> Result<[u8; KEY_BYTES], KeyError> {
    let path = dir.join(name);
    let io = |source| KeyError::Io {
        path: path.clone(),
        source,
    };
    match read_key(&path) {
        Ok(key) => return Ok(key),
        Err(ReadKey::Missing) => {}
        Err(ReadKey::Damaged) => return Err(KeyError::Damaged(path)),
        Err(ReadKey::Io(error)) => return Err(io(error)),
    }
    let (temp, bytes) = new_key_file(dir, name).map_err(io)?;
    // Linked into place, never replacing: when two flycodes start at once, one key wins and both
    // use it.
    match temp.persist_noclobber(&path) {
        Ok(_) => {
            sync_dir(dir);
            Ok(bytes)
        }
        Err(error) if error.error.kind() == std::io::ErrorKind::AlreadyExists => {
            match read_key(&path) {
                Ok(key) => Ok(key),
                Err(ReadKey::Missing | ReadKey::Damaged) => Err(KeyError::Damaged(path)),
                Err(ReadKey::Io(error)) => Err(io(error)),
            }
        }
        Err(error) => Err(io(error.error)),
    }
}

/// Replaces `dir/name` with 32 new random bytes (mode 0600) in one step, and returns them: a
/// reader sees the old key or the new one, never a part.
pub fn replace_private_key_file(dir: &Path, name: &str) -> Result<[u8; KEY_BYTES], KeyError> {
    let path = dir.join(name);
    let io = |source| KeyError::Io {
        path: path.clone(),
        source,
    };
    let (temp, bytes) = new_key_file(dir, name).map_err(io)?;
    temp.persist(&path).map_err(|error| io(error.error))?;
    sync_dir(dir);
    Ok(bytes)
}

/// `N` bytes from the operating system's random source (`/dev/urandom`): keys, secrets, one-time
/// codes.
pub fn random_bytes<const N: usize>() -> std::io::Result<[u8; N]> {
    let mut bytes = [0u8; N];
    std::fs::File::open("/dev/urandom").and_then(|mut random| random.read_exact(&mut bytes))?;
    Ok(bytes)
}

/// A new key file beside `dir/name`, written and flushed but not yet in place, and its bytes.
fn new_key_file(
    dir: &Path,
    name: &str,
) -> std::io::Result<(tempfile::NamedTempFile, [u8; KEY_BYTES])> {
    std::fs::create_dir_all(dir)?;
    let bytes = random_bytes::<KEY_BYTES>()?;
    // tempfile makes the file exclusively (O_EXCL), mode 0600, under a random name.
    let mut temp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .rand_bytes(16)
        .tempfile_in(dir)?;
    temp.write_all(&bytes)?;
    temp.as_file().sync_all()?;
    Ok((temp, bytes))
}

/// Flushes `dir`'s entries, so a key just linked into it survives a crash.
fn sync_dir(dir: &Path) {
    if let Ok(directory) = std::fs::File::open(dir) {
        let _ = directory.sync_all();
    }
}

enum ReadKey {
    Missing,
    Damaged,
    Io(std::io::Error),
}

/// Reads the key file without following a link; it must be a regular 32-byte file of mode 0600.
fn read_key(path: &Path) -> Result<[u8; KEY_BYTES], ReadKey> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        let flags = rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK;
        options.custom_flags(i32::try_from(flags.bits()).unwrap_or(0));
    }
    let mut file = match options.open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Err(ReadKey::Missing),
        // ELOOP: a link where the key should be.
        Err(error) if error.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
            return Err(ReadKey::Damaged);
        }
        Err(error) => return Err(ReadKey::Io(error)),
    };
    let metadata = file.metadata().map_err(ReadKey::Io)?;
    #[cfg(unix)]
    let private = {
        use std::os::unix::fs::MetadataExt;
        metadata.mode() & 0o077 == 0
    };
    #[cfg(not(unix))]
    let private = true;
    if !metadata.is_file() || metadata.len() != KEY_BYTES as u64 || !private {
        return Err(ReadKey::Damaged);
    }
    let mut bytes = [0u8; KEY_BYTES];
    file.read_exact(&mut bytes).map_err(ReadKey::Io)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231() {
        // Test case 1.
        let mac = hmac_sha256(&[0x0b; 20], &[b"Hi There"]);
        assert_eq!(
            hex::encode(mac),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        // Test case 2: a short key, the message in parts.
        let mac = hmac_sha256(b"Jefe", &[b"what do ya want ", b"for nothing?"]);
        assert_eq!(
            hex::encode(mac),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // Test case 6: a key longer than a block is hashed first.
        let mac = hmac_sha256(
            &[0xaa; 131],
            &[b"Test Using Larger Than Block-Size Key - Hash Key First"],
        );
        assert_eq!(
            hex::encode(mac),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn a_seal_opens_only_its_own_body_name_and_purpose() {
        let key = SealKey::from_bytes([7; 32]);
        let wrapped = key.wrap(Purpose::Journal, "1-2-3.json", r#"{"a":1}"#);
        assert_eq!(
            key.unwrap(Purpose::Journal, "1-2-3.json", &wrapped),
            Some(r#"{"a":1}"#)
        );
        assert_eq!(key.unwrap(Purpose::Journal, "1-2-4.json", &wrapped), None);
        assert_eq!(key.unwrap(Purpose::Session, "1-2-3.json", &wrapped), None);
        let other = SealKey::from_bytes([8; 32]);
        assert_eq!(other.unwrap(Purpose::Journal, "1-2-3.json", &wrapped), None);
        let changed = wrapped.replace(r#""a":1"#, r#""a":2"#);
        assert_eq!(key.unwrap(Purpose::Journal, "1-2-3.json", &changed), None);
        assert_eq!(
            key.unwrap(Purpose::Journal, "1-2-3.json", r#"{"a":1}"#),
            None
        );
    }

    #[test]
    fn the_key_is_made_once_private_and_never_through_a_link() {
        use std::os::unix::fs::PermissionsExt;
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("state");
        let first = load_or_create(&dir).unwrap();
        let again = load_or_create(&dir).unwrap();
        assert_eq!(first.0, again.0);
        let meta = std::fs::metadata(dir.join(KEY_FILE)).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(meta.len(), 32);
        // A link planted where the key would be is refused, and its target left alone.
        let other = temp.path().join("other");
        std::fs::create_dir_all(&other).unwrap();
        let planted = temp.path().join("planted");
        std::fs::write(&planted, [1u8; 32]).unwrap();
        std::os::unix::fs::symlink(&planted, other.join(KEY_FILE)).unwrap();
        assert!(matches!(load_or_create(&other), Err(KeyError::Damaged(_))));
        assert_eq!(std::fs::read(&planted).unwrap(), [1u8; 32]);
        // A key readable by others is not flycode's.
        let loose = temp.path().join("loose");
        std::fs::create_dir_all(&loose).unwrap();
        std::fs::write(loose.join(KEY_FILE), [1u8; 32]).unwrap();
        std::fs::set_permissions(loose.join(KEY_FILE), std::fs::Permissions::from_mode(0o644))
            .unwrap();
        assert!(matches!(load_or_create(&loose), Err(KeyError::Damaged(_))));
    }
}
