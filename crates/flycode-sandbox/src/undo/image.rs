//! What a path held at one moment (an [`Image`]): nothing, a file (mode, size, sha256), a link
//! (its target), a directory (mode and, where the change needs it, everything in it)
//! (PROTOCOL.md §16 (Undo and history)). Plain data: [`super::capture`] reads one from the disk.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

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
        /// The content is not stored but kept where it was: it is the first `size` bytes of what
        /// the change left (the file was appended to). An undo cuts the file back to `size`
        /// bytes once those still hash to `sha256` (PROTOCOL.md §16 (Undo and history), "How a
        /// content is kept").
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        prefix: bool,
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
    /// The stored contents this image needs from the store (its files', inside folders too).
    pub fn blobs(&self) -> Vec<String> {
        fn walk(image: &Image, out: &mut Vec<String>) {
            match image {
                Image::File {
                    sha256,
                    stored: true,
                    ..
                } => out.push(sha256.clone()),
                Image::Dir {
                    entries: Some(entries),
                    ..
                } => entries.values().for_each(|child| walk(child, out)),
                _ => {}
            }
        }
        let mut out = Vec::new();
        walk(self, &mut out);
        out
    }

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
