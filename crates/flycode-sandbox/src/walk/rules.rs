//! ripgrep's ignore rules, decided entry by entry while the walk goes through directory handles:
//! the `ignore` crate's own matchers (`Gitignore`), fed with ignore files read through those
//! handles and combined with the precedence of `ignore`'s walker (`dir.rs`): `.rgignore`, then
//! `.ignore`, then `.gitignore`, then `.git/info/exclude`, then the global git excludes file, the
//! deepest directory first within each kind; git's files only inside a git repository and not
//! above its top. It must not open a file by its path, except the global excludes file named by
//! the user's git configuration.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cap_std::fs::Dir;
use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

use super::entry::{EntryKind, WalkEntry};
use super::{open_file, open_subdir};
use crate::files::read_options;

/// The names in one directory that the ignore rules care about, and what each one is.
#[derive(Default)]
pub struct Markers {
    rgignore: Option<EntryKind>,
    ignore: Option<EntryKind>,
    gitignore: Option<EntryKind>,
    git: Option<EntryKind>,
    jj: Option<EntryKind>,
}

impl Markers {
    /// The markers among a directory's entries (no system call).
    pub fn from_entries(entries: &[WalkEntry]) -> Markers {
        let mut markers = Markers::default();
        for entry in entries {
            if let Some(kind) = entry.kind {
                markers.note(&entry.name, kind);
            }
        }
        markers
    }

    /// The markers of a directory above the search path, looked up one by one without following
    /// a link.
    pub fn probe(dir: &Dir) -> Markers {
        let mut markers = Markers::default();
        for name in [".rgignore", ".ignore", ".gitignore", ".git", ".jj"] {
            if let Ok(meta) = dir.symlink_metadata(name) {
                markers.note(OsStr::new(name), EntryKind::of(&meta.file_type()));
            }
        }
        markers
    }

    fn note(&mut self, name: &OsStr, kind: EntryKind) {
        let slot = match name.as_encoded_bytes() {
            b".rgignore" => &mut self.rgignore,
            b".ignore" => &mut self.ignore,
            b".gitignore" => &mut self.gitignore,
            b".git" => &mut self.git,
            b".jj" => &mut self.jj,
            _ => return,
        };
        *slot = Some(kind);
    }

    fn is_empty(&self) -> bool {
        self.rgignore.is_none()
            && self.ignore.is_none()
            && self.gitignore.is_none()
            && self.git.is_none()
            && self.jj.is_none()
    }
}

/// The ignore rules of one directory, linked to those of the nearest directory above that has
/// any (directories without rules or a repository are left out of the chain: they change nothing).
pub struct Level {
    custom: Gitignore,
    ignore: Gitignore,
    git: Gitignore,
    exclude: Gitignore,
    /// This directory holds `.git` (or `.jj`): the top of a repository.
    has_git: bool,
    /// This directory or one above holds a repository.
    any_git: bool,
    /// A directory above the search path, whose rules see the link-free absolute path.
    above: bool,
    parent: Option<Arc<Level>>,
}

/// What every directory's rules share: the search directory's two names, the global excludes,
/// and the root inside which a link to an ignore file is followed.
pub struct Rules {
    /// The search directory as shown (the prefix of every path the walk produces).
    shown: PathBuf,
    /// The search directory's link-free absolute path.
    canonical: PathBuf,
    /// The global git excludes file, rooted at the current directory as ripgrep roots it.
    global: Gitignore,
    /// The allowed root the search lies in, and its absolute path.
    root: Option<(Dir, PathBuf)>,
}

impl Rules {
    /// The ignore rules of a walk of `canonical` (shown as `shown`), reading ignore files up to `root`.
    pub fn new(shown: PathBuf, canonical: PathBuf, root: Option<(Dir, PathBuf)>) -> Rules {
        let global = std::env::current_dir()
            .map(|cwd| GitignoreBuilder::new(cwd).build_global().0)
            .unwrap_or_else(|_| Gitignore::empty());
        Rules {
            shown,
            canonical,
            global,
            root,
        }
    }

    /// The rules of directory `dir` (shown as `path`) on top of `parent`'s, read through `dir`.
    /// `above` marks a directory above the search path, where `path` is link-free and absolute.
    pub fn level(
        &self,
        dir: &Dir,
        path: &Path,
        markers: &Markers,
        above: bool,
        parent: Option<Arc<Level>>,
    ) -> Option<Arc<Level>> {
        if markers.is_empty() {
            return parent;
        }
        let canonical = if above {
            path.to_path_buf()
        } else {
            self.canonical
                .join(path.strip_prefix(&self.shown).unwrap_or(path))
        };
        let place = RulePlace {
            dir,
            canonical: &canonical,
            shown: path,
        };
        let exists = |kind: Option<EntryKind>, name: &str| match kind {
            None => false,
            Some(EntryKind::Link) => self.followed_exists(&place, Path::new(name)),
            Some(_) => true,
        };
        let has_git = exists(markers.git, ".git") || exists(markers.jj, ".jj");
        let custom = self.gitignore(&place, ".rgignore", markers.rgignore);
        let ignore = self.gitignore(&place, ".ignore", markers.ignore);
        let git = self.gitignore(&place, ".gitignore", markers.gitignore);
        let exclude = match markers.git {
            None | Some(EntryKind::Other) => Gitignore::empty(),
            Some(kind) => self.exclude(&place, kind),
        };
        if !has_git
            && [&custom, &ignore, &git, &exclude]
                .iter()
                .all(|g| g.is_empty())
        {
            return parent;
        }
        let any_git = has_git || parent.as_ref().is_some_and(|p| p.any_git);
        Some(Arc::new(Level {
            custom,
            ignore,
            git,
            exclude,
            has_git,
            any_git,
            above,
            parent,
        }))
    }

    /// Whether `path` is ignored or whitelisted by the ignore files of `level` and the directories
    /// above it, with `ignore`'s precedence; `Match::None` when no rule speaks of it.
    pub fn matched(&self, level: Option<&Level>, path: &Path, is_dir: bool) -> Match<()> {
        let Some(level) = level else {
            return Match::None;
        };
        let any_git = level.any_git;
        let (mut custom, mut ignore, mut git, mut exclude) =
            (Match::None, Match::None, Match::None, Match::None);
        let mut saw_git = false;
        let mut absolute: Option<PathBuf> = None;
        let mut node = Some(level);
        while let Some(level) = node {
            if level.above && absolute.is_none() {
                let relative = path.strip_prefix(&self.shown).unwrap_or(path);
                absolute = Some(self.canonical.join(relative));
            }
            let candidate = match &absolute {
                Some(absolute) if level.above => absolute.as_path(),
                _ => path,
            };
            if custom.is_none() {
                custom = level.custom.matched(candidate, is_dir).map(|_| ());
            }
            if ignore.is_none() {
                ignore = level.ignore.matched(candidate, is_dir).map(|_| ());
            }
            if any_git && !saw_git && git.is_none() {
                git = level.git.matched(candidate, is_dir).map(|_| ());
            }
            if any_git && !saw_git && exclude.is_none() {
                exclude = level.exclude.matched(candidate, is_dir).map(|_| ());
            }
            saw_git |= level.has_git;
            node = level.parent.as_deref();
        }
        let global = if any_git {
            self.global.matched(path, is_dir).map(|_| ())
        } else {
            Match::None
        };
        custom.or(ignore).or(git).or(exclude).or(global)
    }

    /// The ignore file `name` of a directory as a matcher rooted at the directory; empty when it
    /// is missing, not a regular file, or a link leading out of the root.
    fn gitignore(&self, place: &RulePlace<'_>, name: &str, kind: Option<EntryKind>) -> Gitignore {
        let file = match kind {
            Some(EntryKind::File) => open_file(place.dir, OsStr::new(name)).ok().map(|(f, _)| f),
            Some(EntryKind::Link) => self.open_followed(place, Path::new(name)),
            Some(EntryKind::Dir | EntryKind::Other) | None => None,
        };
        match file {
            Some(file) => build(place.shown, file),
            None => Gitignore::empty(),
        }
    }

    /// `.git/info/exclude`, or for a linked worktree (`.git` a file naming its git directory) the
    /// exclude file of its repository, as ripgrep finds it.
    fn exclude(&self, place: &RulePlace<'_>, git: EntryKind) -> Gitignore {
        let file = match git {
            EntryKind::Dir => open_subdir(place.dir, OsStr::new(".git"))
                .and_then(|dot_git| open_subdir(&dot_git, OsStr::new("info")))
                .and_then(|info| open_file(&info, OsStr::new("exclude")))
                .ok()
                .map(|(f, _)| f),
            EntryKind::Link => self.open_followed(place, Path::new(".git/info/exclude")),
            EntryKind::File => self.worktree_exclude(place),
            EntryKind::Other => None,
        };
        match file {
            Some(file) => build(place.shown, file),
            None => Gitignore::empty(),
        }
    }

    /// A worktree's `.git` file says `gitdir: DIR`; `DIR/commondir` names the repository's git
    /// directory, whose `info/exclude` applies. Both are read through the root's handle, so only
    /// when they lie inside the root.
    fn worktree_exclude(&self, place: &RulePlace<'_>) -> Option<File> {
        let (dot_git, _) = open_file(place.dir, OsStr::new(".git")).ok()?;
        let line = first_line(dot_git)?;
        let git_dir = place.canonical.join(line.strip_prefix("gitdir: ")?);
        let common = first_line(self.open_absolute(&git_dir.join("commondir"))?)?;
        let common = if common.starts_with('.') {
            git_dir.join(common)
        } else {
            PathBuf::from(common)
        };
        self.open_absolute(&common.join("info/exclude"))
    }

    /// Opens `relative` below a directory, following links only where they stay inside the root
    /// (or, above the root, inside that directory), as the sandbox opens any file; a regular file
    /// only.
    fn open_followed(&self, place: &RulePlace<'_>, relative: &Path) -> Option<File> {
        let inside = self.root.as_ref().and_then(|(root, root_path)| {
            let below = place.canonical.strip_prefix(root_path).ok()?;
            Some((root, below.join(relative)))
        });
        let opened = match inside {
            Some((root, path)) => root.open_with(path, &read_options()),
            None => place.dir.open_with(relative, &read_options()),
        };
        regular(opened.ok()?.into_std())
    }

    /// Opens an absolute path through the root's handle when it lies inside the root.
    fn open_absolute(&self, path: &Path) -> Option<File> {
        let (root, root_path) = self.root.as_ref()?;
        let relative = path.strip_prefix(root_path).ok()?;
        regular(root.open_with(relative, &read_options()).ok()?.into_std())
    }

    /// Whether `relative` exists below a directory, links followed as [`Rules::open_followed`].
    fn followed_exists(&self, place: &RulePlace<'_>, relative: &Path) -> bool {
        let inside = self.root.as_ref().and_then(|(root, root_path)| {
            let below = place.canonical.strip_prefix(root_path).ok()?;
            Some((root, below.join(relative)))
        });
        match inside {
            Some((root, path)) => root.metadata(path).is_ok(),
            None => place.dir.metadata(relative).is_ok(),
        }
    }
}

/// A directory whose rules are being read: its handle, its link-free path, and its path as shown.
struct RulePlace<'a> {
    dir: &'a Dir,
    canonical: &'a Path,
    shown: &'a Path,
}

/// The file if it is a regular one.
fn regular(file: File) -> Option<File> {
    file.metadata().ok()?.is_file().then_some(file)
}

/// The first line of a file, without its terminator.
fn first_line(file: File) -> Option<String> {
    BufReader::new(file).lines().next()?.ok()
}

/// An ignore file's lines as a matcher rooted at `root`, read as `GitignoreBuilder::add` reads
/// them: a byte-order mark dropped, lines that are not globs skipped, reading stopped at the first
/// line that is not UTF-8.
fn build(root: &Path, file: File) -> Gitignore {
    let mut builder = GitignoreBuilder::new(root);
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let Ok(line) = line else { break };
        let line = if i == 0 {
            line.trim_start_matches('\u{feff}')
        } else {
            &line
        };
        // A line that is not a valid glob is skipped, as ripgrep skips it.
        let _ = builder.add_line(None, line);
    }
    builder.build().unwrap_or_else(|_| Gitignore::empty())
}
