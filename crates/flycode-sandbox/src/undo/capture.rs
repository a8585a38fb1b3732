//! Reading an [`Image`] of a path from the disk through a directory handle, links never
//! followed (PROTOCOL.md §16 (Undo and history)); a file's content goes into the
//! [`UndoStore`] when asked to.

use std::collections::BTreeMap;
use std::path::Path;

use cap_std::fs::Dir;

use super::super::handles::{open_file, open_subdir};
use super::image::Image;
use super::store::{StagedBlob, UndoStore};

/// The paths (`at` and below) of every file content the image needs that the store does not
/// hold, or holds damaged: an undo cannot restore those.
pub fn missing_content(image: &Image, store: &UndoStore, at: &str, out: &mut Vec<String>) {
    match image {
        // A prefix is checked against the file it is kept in when the undo is planned.
        Image::File { prefix: true, .. } => {}
        Image::File { sha256, stored, .. } if !*stored || !store.holds_intact(sha256) => {
            out.push(at.to_owned());
        }
        Image::Dir {
            entries: Some(entries),
            ..
        } => {
            for (name, child) in entries {
                missing_content(child, store, &format!("{at}/{name}"), out);
            }
        }
        _ => {}
    }
}

/// How an image is captured.
pub struct ImageCapture<'s> {
    /// Where file contents go; `None` records hashes only (an after-image, a check).
    pub store: Option<&'s UndoStore>,
    /// Files larger than this are recorded by hash only.
    pub max_file_bytes: u64,
    /// Whether a directory is captured with everything in it.
    pub deep: bool,
    /// Whether the call replaces or removes the files captured (a new file takes the name, or
    /// the name goes): their contents are then kept by a second name rather than copied.
    pub link: bool,
    /// Whether the call appends to the file captured: its content is recorded by length and
    /// hash ([`Image::File::prefix`]), never copied.
    pub append: bool,
    /// The sha256 of the file captured, where the tool that just wrote it said it: an
    /// after-image takes it rather than reading the file again to hash it.
    pub known_sha256: Option<&'s str>,
    /// Contents of small files seen (sha256 → bytes), for counting changed lines.
    pub seen: Option<&'s mut BTreeMap<String, Vec<u8>>>,
    /// Bytes newly written to the store.
    pub stored_bytes: u64,
    /// The contents written for the store, to be flushed and named together.
    pub staged: Vec<StagedBlob>,
}

/// Files up to this size are kept in memory during a call, to count the lines it changed.
const COUNTED_BYTES: u64 = 1 << 20;

impl ImageCapture<'_> {
    /// The image of `name` in `parent`, links not followed.
    pub fn image(&mut self, parent: &Dir, name: &Path) -> std::io::Result<Image> {
        use cap_std::fs::PermissionsExt;
        let metadata = match parent.symlink_metadata(name) {
            Ok(metadata) => metadata,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Image::Absent),
            Err(error) => return Err(error),
        };
        let mode = metadata.permissions().mode() & 0o7777;
        let kind = metadata.file_type();
        if kind.is_symlink() {
            let target = parent.read_link_contents(name)?;
            return Ok(Image::Link {
                target: utf8(target.as_os_str())?.to_owned(),
            });
        }
        if kind.is_dir() {
            // What a tool said it wrote is a file's hash, never a folder's content's.
            self.known_sha256 = None;
            let entries = if self.deep {
                Some(self.entries(&open_subdir(parent, name.as_os_str())?)?)
            } else {
                None
            };
            return Ok(Image::Dir { mode, entries });
        }
        if !kind.is_file() {
            return Ok(Image::Special);
        }
        self.file(parent, name, mode, metadata.len())
    }

    fn entries(&mut self, dir: &Dir) -> std::io::Result<BTreeMap<String, Image>> {
        let mut entries = BTreeMap::new();
        for entry in dir.entries()? {
            let name = entry?.file_name();
            let image = self.image(dir, Path::new(&name))?;
            entries.insert(utf8(&name)?.to_owned(), image);
        }
        Ok(entries)
    }

    fn file(&mut self, parent: &Dir, name: &Path, mode: u32, size: u64) -> std::io::Result<Image> {
        let counted = self.seen.is_some() && size <= COUNTED_BYTES;
        if let (None, Some(sha256)) = (self.store, self.known_sha256) {
            if counted {
                let (mut file, _) = open_file(parent, name.as_os_str())?;
                let mut bytes = spare_buffer(size);
                crate::read::read_to_end_aligned(&mut file, &mut bytes)?;
                self.see(sha256, bytes);
            }
            return Ok(Image::File {
                mode,
                size,
                sha256: sha256.to_owned(),
                stored: false,
                prefix: false,
            });
        }
        let (mut file, _) = open_file(parent, name.as_os_str())?;
        // An append keeps what it extends: the length and hash say which part of the new file
        // the old one was (a copy would cost the whole file again, at every append).
        let prefix = self.append && self.store.is_some();
        if size > self.max_file_bytes
            || (prefix && !counted)
            || (self.store.is_none() && size > COUNTED_BYTES)
        {
            let (sha256, length) = super::super::content_hash::stream_sha256_len(&file)?;
            return Ok(Image::File {
                mode,
                size: length,
                sha256,
                stored: false,
                prefix,
            });
        }
        let before = file.metadata()?;
        let mut bytes = spare_buffer(size);
        crate::read::read_to_end_aligned(&mut file, &mut bytes)?;
        let sha256 = super::super::content_hash::sha256_hex(&bytes);
        let stored = match self.store {
            _ if prefix => false,
            Some(store) if self.link => {
                self.stored_bytes += store.stage_linked_blob(
                    (parent, name, &file),
                    &before,
                    &sha256,
                    &bytes,
                    &mut self.staged,
                )?;
                true
            }
            Some(store) => {
                self.stored_bytes += store.stage_blob(&sha256, &bytes, &mut self.staged)?;
                true
            }
            None => false,
        };
        let length = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
        if length <= COUNTED_BYTES {
            self.see(&sha256, bytes);
        }
        Ok(Image::File {
            mode,
            size: length,
            sha256,
            stored,
            prefix,
        })
    }

    /// Keeps a small file's content for counting the lines the call changed.
    fn see(&mut self, sha256: &str, bytes: Vec<u8>) {
        if let Some(seen) = self.seen.as_deref_mut() {
            seen.insert(sha256.to_owned(), bytes);
        }
    }
}

thread_local! {
    /// A buffer a finished change gave back, for the next one to read into: a fresh buffer of a
    /// megabyte costs more in page faults than reading the megabyte into it.
    static SPARE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// An empty buffer for `size` bytes, the spare one if there is one.
fn spare_buffer(size: u64) -> Vec<u8> {
    let mut buffer = SPARE.with(|spare| std::mem::take(&mut *spare.borrow_mut()));
    buffer.reserve(usize::try_from(size).unwrap_or(0));
    buffer
}

/// Keeps `buffer` (emptied) as this thread's spare, if it is larger than the one kept and at
/// most twice the largest content counted.
pub fn give_back(mut buffer: Vec<u8>) {
    let limit = usize::try_from(2 * COUNTED_BYTES).unwrap_or(usize::MAX);
    if buffer.capacity() > limit {
        return;
    }
    buffer.clear();
    SPARE.with(|spare| {
        let mut spare = spare.borrow_mut();
        if buffer.capacity() > spare.capacity() {
            *spare = buffer;
        }
    });
}

/// A name as UTF-8: a change record is JSON text, so a name that is not cannot be recorded.
fn utf8(name: &std::ffi::OsStr) -> std::io::Result<&str> {
    name.to_str().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "{} is not UTF-8, which a change record cannot hold",
                name.to_string_lossy()
            ),
        )
    })
}
