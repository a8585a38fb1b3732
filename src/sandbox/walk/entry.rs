//! One directory's entries, listed through its open handle: each with its name and what the
//! listing says it is (a link is never looked through). The walks of fs.search, fs.readMany and
//! fs.ls all list directories this way.

use std::ffi::OsString;
use std::io;

use cap_std::fs::Dir;

/// What a directory entry is, as its directory listing says (a link is never looked through).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    File,
    Dir,
    Link,
    Other,
}

impl Kind {
    pub(crate) fn of(file_type: &cap_std::fs::FileType) -> Kind {
        if file_type.is_symlink() {
            Kind::Link
        } else if file_type.is_dir() {
            Kind::Dir
        } else if file_type.is_file() {
            Kind::File
        } else {
            Kind::Other
        }
    }
}

/// One entry of a directory listing; `kind` is `None` when the entry could not be read.
pub(crate) struct Entry {
    pub(crate) name: OsString,
    pub(crate) kind: Option<Kind>,
}

/// A directory's entries through its handle, sorted by name (entries that could not be read
/// first, as `walkdir` sorts them).
pub(crate) fn list(dir: &Dir) -> io::Result<Vec<Entry>> {
    let mut entries = Vec::new();
    for entry in dir.entries()? {
        entries.push(match entry {
            Ok(entry) => {
                let name = entry.file_name();
                let kind = match entry.file_type() {
                    Ok(t) if t.is_file() || t.is_dir() || t.is_symlink() => Some(Kind::of(&t)),
                    // The listing did not say (or said something rare): ask without following.
                    _ => dir
                        .symlink_metadata(&name)
                        .ok()
                        .map(|m| Kind::of(&m.file_type())),
                };
                Entry { name, kind }
            }
            Err(_) => Entry {
                name: OsString::new(),
                kind: None,
            },
        });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(entries)
}
