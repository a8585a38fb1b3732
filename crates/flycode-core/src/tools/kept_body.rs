//! A result body left in its file until the door writes it out (PROTOCOL.md §9 (fs.read), "A
//! large file written out from where it is"): what `fs.read` gives a door that prints only the
//! result block ([`crate::tools::executor::Executor::text_only`], which writes it out) for a large whole text
//! file, instead of the file's content in memory. The first pass (which also chose the fence)
//! was the tool's; the second is [`KeptBody::write_out`], the door's.

use std::io::{Seek, SeekFrom};
use std::sync::{Arc, Mutex, PoisonError};

use crate::sandbox::mask::MaskingReader;
use crate::sandbox::read::{BlockBuffer, KeptError, TextScan, copy_text};
use crate::tools::secrets::Secrets;

/// A whole text file checked by a first pass, to be written out by a second.
#[derive(Clone, Debug)]
pub struct KeptBody {
    inner: Arc<Kept>,
}

#[derive(Debug)]
struct Kept {
    /// The file, open since the tool checked it (a name swapped since changes nothing).
    file: std::fs::File,
    /// The path as the call named it, for the notice of a change.
    path: String,
    scan: TextScan,
    /// Masked in the second pass as in the first.
    secrets: Secrets,
    /// The first pass's buffer, reused by the second.
    buffer: Mutex<BlockBuffer>,
}

impl PartialEq for KeptBody {
    fn eq(&self, other: &KeptBody) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl KeptBody {
    /// The body of `file` (named `path` by the call), which the first pass found to hold
    /// `scan`, read through `buffer`, with `secrets` masked.
    pub fn new(
        file: std::fs::File,
        path: &str,
        scan: TextScan,
        secrets: Secrets,
        buffer: BlockBuffer,
    ) -> KeptBody {
        KeptBody {
            inner: Arc::new(Kept {
                file,
                path: path.to_owned(),
                scan,
                secrets,
                buffer: Mutex::new(buffer),
            }),
        }
    }

    /// What the first pass found.
    pub fn scan(&self) -> &TextScan {
        &self.inner.scan
    }

    /// The path as the call named it.
    pub fn path(&self) -> &str {
        &self.inner.path
    }

    /// Sends the file's text to `sink` in pieces, each checked against the first pass and the
    /// fence (`fence_len` backticks) before it goes: the bytes sent, or
    /// [`KeptError::Changed`] with how many went out before the file was found changed.
    pub fn write_out(
        &self,
        fence_len: usize,
        sink: impl FnMut(&str) -> std::io::Result<()>,
    ) -> Result<u64, KeptError> {
        let mut file = &self.inner.file;
        file.seek(SeekFrom::Start(0)).map_err(KeptError::Read)?;
        let mut buffer = self
            .inner
            .buffer
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let reader = MaskingReader::new(file, &self.inner.secrets);
        copy_text(reader, &mut buffer, &self.inner.scan, fence_len, sink)
    }
}
