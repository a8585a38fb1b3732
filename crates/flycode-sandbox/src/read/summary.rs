//! What a read reports of a file besides the part: its size, lines and sha256 (of bytes held
//! whole, or in one bounded pass over a file too large to hold), and what its handle says of it.

use std::io::{Read, Seek};
use std::time::SystemTime;

use sha2::{Digest, Sha256};

use super::count::count_newlines;
use super::part::{ReadError, ReadPlan};
use super::stream::{read_full, seek};

/// What `includeMeta` reports of the content: its size, lines and hash.
pub struct ReadSummary {
    /// Its size in bytes.
    pub size: u64,
    /// Its lines.
    pub lines: u64,
    /// The sha256 of its bytes, in hex.
    pub sha256: String,
}

/// The summary of content held whole.
pub fn bytes_summary(bytes: &[u8]) -> ReadSummary {
    ReadSummary {
        size: bytes.len() as u64,
        lines: count_newlines(bytes) + u64::from(!bytes.is_empty() && !bytes.ends_with(b"\n")),
        sha256: hex::encode(Sha256::digest(bytes)),
    }
}

/// The summary of a file too large to read whole: one pass in blocks, so memory stays bounded
/// (time does not: the whole file is read).
pub fn stream_summary<R: Read + Seek>(
    file: &mut R,
    plan: &ReadPlan,
) -> Result<ReadSummary, ReadError> {
    seek(file, 0)?;
    let mut buf = vec![0; plan.block];
    let (mut size, mut newlines, mut last_byte) = (0u64, 0u64, None);
    let mut hasher = Sha256::new();
    loop {
        let got = read_full(file, &mut buf)?;
        if got == 0 {
            break;
        }
        hasher.update(&buf[..got]);
        newlines += count_newlines(&buf[..got]);
        last_byte = buf[..got].last().copied();
        size += got as u64;
    }
    Ok(ReadSummary {
        size,
        lines: newlines + u64::from(last_byte.is_some_and(|b| b != b'\n')),
        sha256: hex::encode(hasher.finalize()),
    })
}

/// What the file's handle says of it: its size, when it was last changed and its permissions (`0644`, or
/// `readonly`/`readwrite` where there are no mode bits).
pub struct FileFacts {
    /// Its size in bytes.
    pub size: u64,
    /// When it was last changed, where the system says.
    pub modified: Option<SystemTime>,
    /// `0644`, or `readonly`/`readwrite`.
    pub permissions: String,
}

/// The [`FileFacts`] of an open file.
pub fn file_facts(file: &std::fs::File) -> Result<FileFacts, ReadError> {
    let metadata = file.metadata().map_err(ReadError::Io)?;
    #[cfg(unix)]
    let permissions = {
        use std::os::unix::fs::PermissionsExt;
        format!("{:04o}", metadata.permissions().mode() & 0o7777)
    };
    #[cfg(not(unix))]
    let permissions = if metadata.permissions().readonly() {
        "readonly"
    } else {
        "readwrite"
    }
    .to_owned();
    Ok(FileFacts {
        size: metadata.len(),
        modified: metadata.modified().ok(),
        permissions,
    })
}
