//! What a path held at one moment (an [`Image`]): nothing, a file (mode, size, sha256), a link
//! (its target), a directory (mode and, where the change needs it, everything in it), and how one
//! is captured through a directory handle without following links (PROTOCOL.md §16 (Undo and
//! history)). Capturing stores each file's content in the [`super::store::Store`] when asked to.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use cap_std::fs::Dir;
use serde::{Deserialize, Serialize};

use super::super::handles::{open_file, open_subdir};
use super::store::Store;

/// What one path held.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Image {
    /// Nothing was there.
    Absent,
    /// A regular file.
    File {
        /// Permission bits.
        mode: u32,
        /// Its length.
        size: u64,
        /// The sha256 of its content.
        sha256: String,
        /// Whether the content is in the store (a file over `[undo] max_file_bytes`, and any
        /// after-image, is recorded by hash only).
        #[serde(default)]
        stored: bool,
    },
    /// A symbolic link (never followed).
    Link {
        /// What it points to.
        target: String,
    },
    /// A directory.
    Dir {
        /// Permission bits.
        mode: u32,
        /// What it held, by name; `None` where only the directory itself matters (a chmod, an
        /// existing folder a write goes into).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        entries: Option<BTreeMap<String, Image>>,
    },
    /// A FIFO, socket or device: noted, never restored.
    Special,
}

impl Image {
    /// Whether `self` and `other` describe the same state (whether the content was stored does
    /// not matter; a directory recorded without its entries matches on its mode alone).
    pub fn same_as(&self, other: &Image) -> bool {
        match (self, other) {
            (Image::Absent, Image::Absent) | (Image::Special, Image::Special) => true,
            (
                Image::File {
                    mode: m1,
                    sha256: s1,
                    ..
                },
                Image::File {
                    mode: m2,
                    sha256: s2,
                    ..
                },
            ) => m1 == m2 && s1 == s2,
            (Image::Link { target: a }, Image::Link { target: b }) => a == b,
            (
                Image::Dir {
                    mode: m1,
                    entries: e1,
                },
                Image::Dir {
                    mode: m2,
                    entries: e2,
                },
            ) => m1 == m2 && same_entries(e1.as_ref(), e2.as_ref()),
            _ => false,
        }
    }

    /// Whether the image records a whole tree (a directory with its entries).
    pub fn is_deep(&self) -> bool {
        matches!(
            self,
            Image::Dir {
                entries: Some(_),
                ..
            }
        )
    }

    /// A word for what it is (`file`, `link`, `folder`, `nothing`).
    pub fn noun(&self) -> &'static str {
        match self {
            Image::Absent => "nothing",
            Image::File { .. } => "file",
            Image::Link { .. } => "link",
            Image::Dir { .. } => "folder",
            Image::Special => "special file",
        }
    }

    /// Every file content the image needs that the store does not hold (`(relative name,
    /// sha256)`): an undo cannot restore those.
    pub fn missing_content(&self, store: &Store, at: &str, out: &mut Vec<String>) {
        match self {
            Image::File { sha256, stored, .. } if !*stored || !store.has_blob(sha256) => {
                out.push(at.to_owned());
            }
            Image::Dir {
                entries: Some(entries),
                ..
            } => {
                for (name, child) in entries {
                    child.missing_content(store, &format!("{at}/{name}"), out);
                }
            }
            _ => {}
        }
    }

    /// The image of `name` inside this one, where this is a directory recorded whole.
    pub fn child(&self, name: &str) -> Option<&Image> {
        match self {
            Image::Dir {
                entries: Some(entries),
                ..
            } => Some(entries.get(name).unwrap_or(&Image::Absent)),
            Image::Absent | Image::File { .. } | Image::Link { .. } | Image::Special => {
                Some(&Image::Absent)
            }
            Image::Dir { entries: None, .. } => None,
        }
    }
}

fn same_entries(a: Option<&BTreeMap<String, Image>>, b: Option<&BTreeMap<String, Image>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => {
            a.len() == b.len()
                && a.iter()
                    .zip(b)
                    .all(|((n1, i1), (n2, i2))| n1 == n2 && i1.same_as(i2))
        }
        _ => true,
    }
}

/// How an image is captured.
pub(crate) struct Capture<'s> {
    /// Where file contents go; `None` records hashes only (an after-image, a check).
    pub store: Option<&'s Store>,
    /// Files larger than this are recorded by hash only.
    pub max_file_bytes: u64,
    /// Whether a directory is captured with everything in it.
    pub deep: bool,
    /// Contents of small files seen (sha256 → bytes), for counting changed lines.
    pub seen: Option<&'s mut BTreeMap<String, Vec<u8>>>,
    /// Bytes newly written to the store.
    pub stored_bytes: u64,
}

/// Files up to this size are kept in memory during a call, to count the lines it changed.
const COUNTED_BYTES: u64 = 1 << 20;

impl Capture<'_> {
    /// The image of `name` in `parent`, links not followed.
    pub(crate) fn image(&mut self, parent: &Dir, name: &Path) -> std::io::Result<Image> {
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
        let (mut file, _) = open_file(parent, name.as_os_str())?;
        if size > self.max_file_bytes || (self.store.is_none() && size > COUNTED_BYTES) {
            let sha256 = super::super::content_hash::stream_sha256(&file)?;
            return Ok(Image::File {
                mode,
                size,
                sha256,
                stored: false,
            });
        }
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        file.read_to_end(&mut bytes)?;
        let sha256 = super::super::content_hash::sha256_hex(&bytes);
        let stored = match self.store {
            Some(store) => {
                self.stored_bytes += store.put_blob(&sha256, &bytes)?;
                true
            }
            None => false,
        };
        let length = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
        if let Some(seen) = self.seen.as_deref_mut()
            && length <= COUNTED_BYTES
        {
            seen.insert(sha256.clone(), bytes);
        }
        Ok(Image::File {
            mode,
            size: length,
            sha256,
            stored,
        })
    }
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
