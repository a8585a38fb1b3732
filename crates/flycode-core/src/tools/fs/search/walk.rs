//! The walk of `fs.search` through directory handles ([`crate::sandbox::walk`]): every directory
//! is opened relative to the already-open handle of its parent, one name at a time, never
//! following a link (`openat` with `O_NOFOLLOW | O_DIRECTORY` on Unix), and listed through its
//! own handle; files are opened the same way (`O_NOFOLLOW | O_NONBLOCK`) by the workers and
//! checked once open. This file hands the files out in batches, in path order. A directory swapped
//! for a link after it was listed therefore fails to open instead of leading elsewhere, and a
//! directory renamed away after it was opened is still the one searched. No path string is ever
//! resolved again once the search has started.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};

use cap_std::ambient_authority;
use cap_std::fs::Dir;

use super::order::LookaheadGate;
use super::{BATCH, Item, NameFilter, SearchError, SearchJob};
use crate::sandbox::walk::start::{descend, names};
use crate::sandbox::walk::{
    EntryKind, Level, Markers, Rules, Start, WalkEntry, WalkTarget, first_level, list, open_file,
    open_subdir,
};

/// At most this many directories that are done being walked may still hold an open handle for
/// files not yet reported (the walk waits for the report to catch up), which bounds the open
/// descriptors whatever the shape of the tree.
const MAX_OPEN_DIRS: usize = 256;

/// Opens `path` with the process's own authority, for callers without a sandbox (benchmarks,
/// the engine's tests): its link-free form is opened from `/` one name at a time.
pub fn ambient_start(path: &Path) -> Result<Start, SearchError> {
    let io_error = |source| SearchError::Io {
        path: path.to_path_buf(),
        source,
    };
    let canonical = crate::sandbox::host::canonicalize(path).map_err(io_error)?;
    let slash = Dir::open_ambient_dir("/", ambient_authority()).map_err(io_error)?;
    let all = names(&canonical);
    let Some((last, above)) = all.split_last() else {
        return Ok(Start {
            root: slash.try_clone().ok().map(|r| (r, PathBuf::from("/"))),
            target: WalkTarget::Dir(slash),
            ancestors: Vec::new(),
            canonical,
            skip: Vec::new(),
        });
    };
    let root = slash.try_clone().ok().map(|r| (r, PathBuf::from("/")));
    let mut ancestors = descend(slash, Path::new("/"), above);
    if ancestors.len() != all.len() {
        return Err(io_error(io::Error::other(
            "a directory on the way could not be opened",
        )));
    }
    let file_type = match ancestors.last() {
        Some((_, parent)) => parent.symlink_metadata(last).map_err(io_error)?.file_type(),
        None => return Err(io_error(io::ErrorKind::NotFound.into())),
    };
    match EntryKind::of(&file_type) {
        EntryKind::Dir => {
            let Some((_, parent)) = ancestors.last() else {
                return Err(io_error(io::ErrorKind::NotFound.into()));
            };
            let dir = open_subdir(parent, last).map_err(io_error)?;
            Ok(Start {
                target: WalkTarget::Dir(dir),
                ancestors,
                canonical,
                root,
                skip: Vec::new(),
            })
        }
        EntryKind::File => {
            let Some((_, parent)) = ancestors.pop() else {
                return Err(io_error(io::ErrorKind::NotFound.into()));
            };
            let (file, _) = open_file(&parent, last).map_err(io_error)?;
            Ok(Start::file(file))
        }
        // A link where the link-free path was a moment ago: it changed while being opened.
        EntryKind::Link => Err(io_error(io::Error::other(
            "the path was replaced by a link while it was opened",
        ))),
        EntryKind::Other => Err(SearchError::SpecialFile {
            path: path.to_path_buf(),
        }),
    }
}

/// One directory being walked.
struct Frame {
    dir: Arc<Dir>,
    path: PathBuf,
    level: Option<Arc<Level>>,
    entries: std::vec::IntoIter<WalkEntry>,
    /// The index of the last file of this directory handed out.
    last_item: Option<usize>,
}

/// Hands out items in batches of [`BATCH`], never more than the gate allows ahead.
struct Batcher<'a> {
    jobs: mpsc::Sender<SearchJob>,
    gate: &'a LookaheadGate,
    first: usize,
    items: Vec<Item>,
}

impl Batcher<'_> {
    /// The index the next item will have.
    fn next_index(&self) -> usize {
        self.first + self.items.len()
    }

    /// Adds an item; false once the search has stopped.
    fn push(&mut self, item: Item) -> bool {
        self.items.push(item);
        self.items.len() < BATCH || self.flush()
    }

    /// Sends what is gathered, once there is room for it; false once the search has stopped.
    fn flush(&mut self) -> bool {
        if self.items.is_empty() {
            return true;
        }
        let end = self.next_index();
        if !self.gate.wait_for_room(end) {
            return false;
        }
        let items = std::mem::replace(&mut self.items, Vec::with_capacity(BATCH));
        let job = SearchJob {
            first: self.first,
            items,
        };
        self.first = end;
        self.jobs.send(job).is_ok()
    }
}

/// The walk below the search directory, its first listing already read.
pub(super) struct DirWalk {
    pub(super) dir: Dir,
    pub(super) entries: Vec<WalkEntry>,
    /// The rest of the [`Start`]: the directories above, the link-free path, the root.
    pub(super) ancestors: Vec<(PathBuf, Dir)>,
    pub(super) canonical: PathBuf,
    pub(super) root: Option<(Dir, PathBuf)>,
    pub(super) skip: Vec<PathBuf>,
}

impl DirWalk {
    /// Walks the directory (shown as `shown`) in path order (names sorted, a directory's contents
    /// right after its name) and hands out the files to search until the walk ends or the search
    /// stops.
    pub(super) fn run(
        self,
        shown: &Path,
        names: &NameFilter,
        jobs: mpsc::Sender<SearchJob>,
        gate: &LookaheadGate,
    ) {
        let DirWalk {
            dir,
            entries,
            ancestors,
            canonical,
            root,
            skip,
        } = self;
        // flycode's own paths below the walk, as the walk shows them.
        let skip: Vec<PathBuf> = skip
            .iter()
            .filter_map(|own| own.strip_prefix(&canonical).ok())
            .filter(|relative| !relative.as_os_str().is_empty())
            .map(|relative| shown.join(relative))
            .collect();
        let rules = Rules::new(shown.to_path_buf(), canonical, root);
        let level = first_level(&rules, ancestors, &dir, shown, &entries);
        let mut walking = Walking {
            rules,
            names,
            skip,
            gate,
            batcher: Batcher {
                jobs,
                gate,
                first: 0,
                items: Vec::with_capacity(BATCH),
            },
            open_dirs: VecDeque::new(),
            stack: vec![Frame {
                dir: Arc::new(dir),
                path: shown.to_path_buf(),
                level,
                entries: entries.into_iter(),
                last_item: None,
            }],
        };
        walking.walk();
    }
}

/// A walk under way: the directories being walked, innermost last, and the files handed out.
struct Walking<'a> {
    rules: Rules,
    names: &'a NameFilter,
    /// flycode's own paths below the walk, as the walk shows them.
    skip: Vec<PathBuf>,
    gate: &'a LookaheadGate,
    batcher: Batcher<'a>,
    /// Directories done being walked that still hold a handle, by the index of their last file.
    open_dirs: VecDeque<usize>,
    stack: Vec<Frame>,
}

impl Walking<'_> {
    fn walk(&mut self) {
        loop {
            if self.gate.is_stopped() {
                return;
            }
            let Some(frame) = self.stack.last_mut() else {
                break;
            };
            let Some(entry) = frame.entries.next() else {
                self.leave();
                continue;
            };
            if !self.visit(entry) {
                return;
            }
        }
        self.batcher.flush();
    }

    /// Done with the innermost directory: its handle stays open until its last file is reported.
    fn leave(&mut self) {
        if let Some(frame) = self.stack.pop()
            && let Some(last) = frame.last_item
        {
            self.open_dirs.push_back(last);
        }
    }

    /// One entry of the innermost directory; false once the search has stopped.
    fn visit(&mut self, entry: WalkEntry) -> bool {
        let kind = match entry.kind {
            Some(EntryKind::File) => EntryKind::File,
            Some(EntryKind::Dir) => EntryKind::Dir,
            // Links are never followed; FIFOs, sockets and devices are never opened.
            Some(EntryKind::Link | EntryKind::Other) => return true,
            None => return self.batcher.push(Item::Unreadable),
        };
        let Some(frame) = self.stack.last() else {
            return true;
        };
        let path = frame.path.join(&entry.name);
        let is_dir = kind == EntryKind::Dir;
        let level = frame.level.as_deref();
        if self.skip.contains(&path)
            || is_skipped(&self.rules, self.names, level, &path, &entry.name, is_dir)
        {
            return true;
        }
        if is_dir {
            self.enter(&entry.name, path)
        } else {
            self.hand_out(entry.name, path)
        }
    }

    /// Hands out a file of the innermost directory to be searched; false once the search stopped.
    fn hand_out(&mut self, name: OsString, path: PathBuf) -> bool {
        if !self.names.has_extension(&path) {
            return true;
        }
        let index = self.batcher.next_index();
        let Some(frame) = self.stack.last_mut() else {
            return true;
        };
        frame.last_item = Some(index);
        let dir = Arc::clone(&frame.dir);
        self.batcher.push(Item::File { dir, name, path })
    }

    /// Opens and lists the subdirectory `name` of the innermost directory through its handle and
    /// walks it next; false once the search has stopped.
    fn enter(&mut self, name: &OsStr, path: PathBuf) -> bool {
        let Some(frame) = self.stack.last() else {
            return true;
        };
        let parent = Arc::clone(&frame.dir);
        let parent_level = frame.level.clone();
        if self.open_dirs.len() >= MAX_OPEN_DIRS {
            // Wait until the older half of them is reported (their handles closed by then).
            let half = MAX_OPEN_DIRS / 2;
            let last = self.open_dirs.drain(..half).max().unwrap_or(0);
            if !self.batcher.flush() || !self.gate.wait_for_reported(last) {
                return false;
            }
        }
        let opened = open_subdir(&parent, name).and_then(|dir| list(&dir).map(|e| (dir, e)));
        match opened {
            Ok((dir, entries)) => {
                let markers = Markers::from_entries(&entries);
                let level = self.rules.level(&dir, &path, &markers, false, parent_level);
                self.stack.push(Frame {
                    dir: Arc::new(dir),
                    path,
                    level,
                    entries: entries.into_iter(),
                    last_item: None,
                });
                true
            }
            // Gone, not readable, or swapped for a link since it was listed.
            Err(_) => self.batcher.push(Item::Unreadable),
        }
    }
}

/// Whether the walk skips an entry, decided as ripgrep decides it: the glob first (a match either
/// way settles it), then the ignore files, then hidden names.
fn is_skipped(
    rules: &Rules,
    names: &NameFilter,
    level: Option<&Level>,
    path: &Path,
    name: &OsStr,
    is_dir: bool,
) -> bool {
    if let Some(glob) = &names.glob {
        let m = glob.matched(path, is_dir);
        if !m.is_none() {
            return m.is_ignore();
        }
    }
    let m = rules.matched(level, path, is_dir);
    if !m.is_none() {
        return m.is_ignore();
    }
    name.as_encoded_bytes().first() == Some(&b'.')
}
