//! `fs.ls`: a directory's entries, sorted by path, to a depth; directories end with `/`, links
//! show their target and are never followed, files show their size; a summary line ends the list.
//! The tree is walked as fs.search walks it ([`crate::sandbox::walk`]): through directory handles,
//! hiding `.git` and what the ignore files ignore unless `all` is set (PROTOCOL.md §9 (fs.ls)).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cap_std::fs::Dir;
use globset::{Glob, GlobMatcher};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::protocol::ErrorCode;
use crate::protocol::ToolName;
use crate::sandbox::Sandbox;
use crate::sandbox::walk::{self, Level, Markers, Rules, Start, WalkTarget, open_dir_start};
use crate::tools::tool::{ApprovalClass, Effects, Tool, ToolContext, shorten_path};
use crate::tools::{ToolError, ToolOutput};

/// The most entries one listing shows (with `glob`, the most matches); past it the listing stops
/// and says so.
pub const MAX_ENTRIES: usize = 20_000;

/// The most entries one listing visits looking for matches, a bound on the time a `glob` over a
/// huge tree takes; past it the listing stops and says how far it got.
pub const MAX_VISITED: usize = 500_000;

/// The arguments of `fs.ls` (see `protocol/schemas/fs.ls.json`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LsArgs {
    /// The directory.
    pub path: String,
    /// Levels to list, 1 = the directory's own entries.
    #[serde(default = "default_depth")]
    pub depth: u32,
    /// Only entries whose name matches.
    pub glob: Option<String>,
    /// Show everything: also `.git` and what the ignore files ignore.
    #[serde(default)]
    pub all: bool,
    /// Show each file's size (one `statx` per file); `false` lists names and kinds from the
    /// directory alone, as `ls` without `-l` does (PROTOCOL.md §9 (fs.ls)).
    #[serde(default = "default_sizes")]
    pub sizes: bool,
}

fn default_depth() -> u32 {
    1
}

fn default_sizes() -> bool {
    true
}

/// What an entry is.
#[derive(Clone, Debug, PartialEq, Eq)]
enum ListedKind {
    Directory,
    /// `size` is `None` when the listing was asked without sizes.
    File {
        size: Option<u64>,
    },
    Link {
        target: String,
    },
    Other {
        what: &'static str,
    },
}

struct ListedEntry {
    relative: PathBuf,
    kind: ListedKind,
}

/// A listing in progress: what is kept, and why it stopped early, if it did.
struct ListingWalk<'a> {
    matcher: Option<&'a GlobMatcher>,
    entries: Vec<ListedEntry>,
    visited: usize,
    max_entries: usize,
    max_visited: usize,
    stop: Option<Stop>,
    /// flycode's own directories below the listed one (relative to it): shown, never entered.
    skip: Vec<PathBuf>,
    /// Whether files are stat'ed for their size.
    sizes: bool,
    /// The ignore rules, and the listed directory's absolute path they see entries under; `None`
    /// with `all`, which shows everything.
    rules: Option<(Rules, PathBuf)>,
    /// Entries hidden by `.git` or the ignore rules (a hidden directory counts once: it is not
    /// entered).
    hidden: usize,
}

/// Why a listing stopped before the tree ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    /// `max_entries` entries were kept and another one would have been.
    Entries,
    /// `max_visited` entries were visited; matches may lie beyond.
    Visited,
}

/// Runs `fs.ls`.
pub fn run(sandbox: &Sandbox, args: &LsArgs) -> Result<ToolOutput, ToolError> {
    run_with(sandbox, args, MAX_ENTRIES, MAX_VISITED)
}

fn run_with(
    sandbox: &Sandbox,
    args: &LsArgs,
    max_entries: usize,
    max_visited: usize,
) -> Result<ToolOutput, ToolError> {
    let matcher = match &args.glob {
        Some(pattern) => Some(
            Glob::new(pattern)
                .map_err(|e| {
                    ToolError::new(
                        ErrorCode::InvalidArgs,
                        format!("fs.ls: glob {pattern:?}: {}", e.kind()),
                        None,
                    )
                })?
                .compile_matcher(),
        ),
        None => None,
    };
    let (start, resolved) = open_dir_start(sandbox, &args.path)?;
    let Start {
        target,
        ancestors,
        canonical,
        root,
        skip,
    } = start;
    let WalkTarget::Dir(dir) = target else {
        return Err(ToolError::new(
            ErrorCode::NotDirectory,
            format!("fs.ls: {} is not a directory", resolved.absolute.display()),
            None,
        ));
    };
    let skip = skip
        .iter()
        .filter_map(|own| own.strip_prefix(&canonical).ok())
        .filter(|relative| !relative.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .collect();
    let shown = resolved.absolute.clone();
    let rules = (!args.all).then(|| (Rules::new(shown.clone(), canonical, root), shown.clone()));
    let mut walk = ListingWalk {
        matcher: matcher.as_ref(),
        entries: Vec::new(),
        visited: 0,
        max_entries,
        max_visited,
        stop: None,
        skip,
        sizes: args.sizes,
        rules,
        hidden: 0,
    };
    let Ok(entries) = walk::list(&dir) else {
        return Ok(output(&resolved.absolute, walk));
    };
    let level = walk
        .rules
        .as_ref()
        .and_then(|(rules, shown)| walk::first_level(rules, ancestors, &dir, shown, &entries));
    walk.list(&dir, Path::new(""), entries, level, args.depth.clamp(1, 16));
    Ok(output(&resolved.absolute, walk))
}

fn output(root: &Path, mut walk: ListingWalk<'_>) -> ToolOutput {
    walk.entries.sort_by(|a, b| a.relative.cmp(&b.relative));
    let shown: Vec<&ListedEntry> = walk.entries.iter().collect();
    let truncated = walk.stop.is_some();
    let body = render(root, &shown, &walk);
    // Built in place: `json!` would copy the 10,000 entries of a large listing once more.
    let mut data = serde_json::Map::new();
    data.insert("path".into(), Value::String(root.display().to_string()));
    data.insert(
        "entries".into(),
        Value::Array(shown.iter().map(|e| entry_json(e)).collect()),
    );
    data.insert("truncated".into(), Value::Bool(truncated));
    let mut data = Value::Object(data);
    let mut fields = Vec::new();
    if truncated {
        fields.push(("truncated".to_owned(), "true".to_owned()));
    }
    if walk.hidden > 0 {
        data["hidden"] = json!(walk.hidden);
    }
    if walk.stop == Some(Stop::Visited) {
        // The matches shown are those found so far, not all there are.
        data["visited"] = json!(walk.visited);
        fields.push((
            "visited".to_owned(),
            format!("{} entries, then stopped", walk.visited),
        ));
    }
    ToolOutput {
        body: Some(body),
        fields,
        data,
        continue_hint: Some("list a subdirectory, or use a smaller depth or a glob".to_owned()),
        kept: None,
    }
}

fn matches_name(matcher: &GlobMatcher, relative: &Path) -> bool {
    relative
        .file_name()
        .is_some_and(|name| matcher.is_match(name))
}

impl ListingWalk<'_> {
    /// Collects the entries of `dir` (listed as `entries`; its path relative to the listed
    /// directory is `prefix`, its ignore rules `level`) that match, descending into every
    /// directory that is not hidden to `depth` whether it matches or not.
    fn list(
        &mut self,
        dir: &Dir,
        prefix: &Path,
        entries: Vec<walk::WalkEntry>,
        level: Option<Arc<Level>>,
        depth: u32,
    ) {
        // The files of this directory whose sizes are still to be read, by their index in
        // `self.entries`: read together at the end, in parallel when there are many.
        let mut unsized_files = Vec::new();
        for entry in entries {
            if self.stop.is_some() {
                break;
            }
            if self.visited >= self.max_visited {
                self.stop = Some(Stop::Visited);
                break;
            }
            self.visited += 1;
            let Some(kind) = entry.kind else {
                continue;
            };
            let relative = prefix.join(&entry.name);
            let is_dir = kind == walk::EntryKind::Dir;
            if self.is_hidden(level.as_deref(), &relative, &entry.name, is_dir) {
                self.hidden += 1;
                continue;
            }
            if self.matcher.is_none_or(|m| matches_name(m, &relative)) {
                if self.entries.len() >= self.max_entries {
                    self.stop = Some(Stop::Entries);
                    break;
                }
                if self.sizes && kind == walk::EntryKind::File {
                    unsized_files.push(self.entries.len());
                }
                self.entries.push(ListedEntry {
                    relative: relative.clone(),
                    // A file's size is read below, with its siblings'.
                    kind: kind_of(dir, &entry.name, kind, false),
                });
            }
            if is_dir && depth > 1 && !self.skip.contains(&relative) {
                self.descend(dir, &entry.name, &relative, level.clone(), depth - 1);
            }
        }
        read_sizes(dir, &mut self.entries, &unsized_files);
    }

    /// Lists the subdirectory `name` of `dir` (opened through `dir`'s handle, never through a
    /// link) on top of the rules `parent`.
    fn descend(
        &mut self,
        dir: &Dir,
        name: &OsStr,
        relative: &Path,
        parent: Option<Arc<Level>>,
        depth: u32,
    ) {
        let Ok(child) = walk::open_subdir(dir, name) else {
            return;
        };
        let Ok(entries) = walk::list(&child) else {
            return;
        };
        let level = match &self.rules {
            Some((rules, shown)) => {
                let markers = Markers::from_entries(&entries);
                rules.level(&child, &shown.join(relative), &markers, false, parent)
            }
            None => None,
        };
        self.list(&child, relative, entries, level, depth);
    }

    /// Whether the entry at `relative` is hidden: `.git`, or ignored by the ignore files (as
    /// fs.search decides it, but hidden names are shown); nothing is with `all`.
    fn is_hidden(
        &self,
        level: Option<&Level>,
        relative: &Path,
        name: &OsStr,
        is_dir: bool,
    ) -> bool {
        let Some((rules, shown)) = &self.rules else {
            return false;
        };
        name == ".git"
            || rules
                .matched(level, &shown.join(relative), is_dir)
                .is_ignore()
    }
}

/// What the entry `name` of `dir` is, for the listing: a link's target is read, never followed.
/// `sizes: false` leaves a file's size unread: the kind comes from the directory listing itself.
fn kind_of(dir: &Dir, name: &OsStr, kind: walk::EntryKind, sizes: bool) -> ListedKind {
    match kind {
        walk::EntryKind::Link => {
            let target = dir
                .read_link_contents(name)
                .map(|t| t.display().to_string())
                .unwrap_or_else(|_| "?".to_owned());
            ListedKind::Link { target }
        }
        walk::EntryKind::Dir => ListedKind::Directory,
        walk::EntryKind::File => ListedKind::File {
            size: sizes.then(|| dir.symlink_metadata(name).map(|m| m.len()).unwrap_or(0)),
        },
        walk::EntryKind::Other => ListedKind::Other {
            what: dir
                .symlink_metadata(name)
                .map_or("other", |m| other_kind(&m.file_type())),
        },
    }
}

/// Fewer files than this are stat'ed on the listing's own thread: a thread costs more than the
/// `statx` calls it would share.
const PARALLEL_SIZES_FROM: usize = 512;

/// Reads the sizes of the files at `indices` of `entries`, all in `dir`: one `statx` each (the
/// directory listing holds no sizes), spread over the machine's cores when there are many, since
/// on a large flat folder these calls are most of the listing's time (issue 41).
fn read_sizes(dir: &Dir, entries: &mut [ListedEntry], indices: &[usize]) {
    let size_of = |index: &usize| {
        let name = entries[*index].relative.file_name().unwrap_or_default();
        dir.symlink_metadata(name).map(|m| m.len()).unwrap_or(0)
    };
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(8)
        .min(indices.len() / PARALLEL_SIZES_FROM)
        .max(1);
    let sizes: Vec<u64> = if threads == 1 {
        indices.iter().map(size_of).collect()
    } else {
        let chunk = indices.len().div_ceil(threads);
        std::thread::scope(|scope| {
            let workers: Vec<_> = indices
                .chunks(chunk)
                .map(|part| scope.spawn(|| part.iter().map(size_of).collect::<Vec<u64>>()))
                .collect();
            workers
                .into_iter()
                .zip(indices.chunks(chunk))
                // A thread that could not finish leaves its files to this one.
                .flat_map(|(worker, part)| {
                    worker
                        .join()
                        .unwrap_or_else(|_| part.iter().map(size_of).collect())
                })
                .collect()
        })
    };
    for (index, size) in indices.iter().zip(sizes) {
        entries[*index].kind = ListedKind::File { size: Some(size) };
    }
}

fn other_kind(file_type: &cap_std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use cap_std::fs::FileTypeExt;
        if file_type.is_fifo() {
            return "fifo";
        }
        if file_type.is_socket() {
            return "socket";
        }
        if file_type.is_block_device() || file_type.is_char_device() {
            return "device";
        }
    }
    let _ = file_type;
    "other"
}

fn render(root: &Path, entries: &[&ListedEntry], walk: &ListingWalk<'_>) -> String {
    use std::fmt::Write as _;
    let mut out = format!("{}/\n", root.display().to_string().trim_end_matches('/'));
    out.reserve(entries.len() * 24);
    let (mut dirs, mut files, mut links, mut others, mut bytes) = (0, 0, 0, 0, 0u64);
    // `write!` into the one buffer: no string is made per entry but a name that is not UTF-8.
    for entry in entries {
        let relative = path_text(&entry.relative);
        let name = crate::protocol::display::escape_for_display(&relative);
        let _ = match &entry.kind {
            ListedKind::Directory => {
                dirs += 1;
                writeln!(out, "{name}/")
            }
            ListedKind::File { size: Some(size) } => {
                files += 1;
                bytes += size;
                writeln!(out, "{name}  {size}")
            }
            ListedKind::File { size: None } => {
                files += 1;
                writeln!(out, "{name}")
            }
            ListedKind::Link { target } => {
                links += 1;
                let target = crate::protocol::display::escape_for_display(target);
                writeln!(out, "{name} -> {target}")
            }
            ListedKind::Other { what } => {
                others += 1;
                writeln!(out, "{name}  ({what})")
            }
        };
    }
    let size = if walk.sizes {
        format!(" ({})", human_size(bytes))
    } else {
        String::new()
    };
    let _ = write!(
        out,
        "{dirs} director{}, {files} file{}{size}, {links} link{}",
        if dirs == 1 { "y" } else { "ies" },
        if files == 1 { "" } else { "s" },
        if links == 1 { "" } else { "s" },
    );
    if others > 0 {
        let _ = write!(out, ", {others} other");
    }
    let kept = if walk.matcher.is_some() {
        "matching entries"
    } else {
        "entries"
    };
    let _ = match walk.stop {
        Some(Stop::Entries) => write!(out, "; stopped after {} {kept}", walk.max_entries),
        Some(Stop::Visited) => write!(
            out,
            "; stopped after visiting {} entries: more {kept} may lie beyond",
            walk.visited
        ),
        None => Ok(()),
    };
    out.push('\n');
    if walk.hidden > 0 {
        let _ = writeln!(
            out,
            "{} hidden by .git and ignore files; pass all: true to show them",
            crate::tools::tool::plural(walk.hidden, "entry")
        );
    }
    out
}

/// The path as text: `to_str` (a fast UTF-8 check) first, the lossy form (U+FFFD for each bad
/// sequence, as `Path::display` writes it) only for a name that is not UTF-8.
fn path_text(path: &Path) -> std::borrow::Cow<'_, str> {
    match path.to_str() {
        Some(text) => std::borrow::Cow::Borrowed(text),
        None => path.to_string_lossy(),
    }
}

fn entry_json(entry: &ListedEntry) -> Value {
    let path = path_text(&entry.relative).into_owned();
    match &entry.kind {
        ListedKind::Directory => json!({"path": path, "type": "directory"}),
        ListedKind::File { size: Some(size) } => {
            json!({"path": path, "type": "file", "size": size})
        }
        ListedKind::File { size: None } => json!({"path": path, "type": "file"}),
        ListedKind::Link { target } => json!({"path": path, "type": "link", "target": target}),
        ListedKind::Other { what } => json!({"path": path, "type": what}),
    }
}

/// `1.2 KiB`, `3 B`: sizes for people.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// `fs.ls` in the registry.
pub struct FsLs;

impl Tool for FsLs {
    type Args = LsArgs;
    const NAME: ToolName = ToolName::FsLs;

    fn approval(&self) -> ApprovalClass {
        ApprovalClass::Read
    }

    fn effects<'a>(&self, args: &'a LsArgs) -> Effects<'a> {
        Effects::reading([args.path.as_str()])
    }

    fn subject(&self, args: &LsArgs, roots: &[PathBuf]) -> String {
        shorten_path(&args.path, roots)
    }

    fn summary(&self, output: &ToolOutput) -> String {
        let count = output
            .data
            .get("entries")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        format!("Listed {}", crate::tools::tool::plural(count, "entry"))
    }

    fn run(&self, context: &ToolContext<'_>, args: &LsArgs) -> Result<ToolOutput, ToolError> {
        run(context.sandbox, args)
    }
}

#[cfg(test)]
#[cfg(unix)]
#[allow(clippy::disallowed_methods)] // fixtures are made directly, outside the sandbox
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;
    use crate::sandbox::Roots;

    fn tree() -> (tempfile::TempDir, PathBuf, Sandbox) {
        let temp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(temp.path()).unwrap();
        let root = base.join("root");
        std::fs::create_dir_all(root.join("src/deep/deeper")).unwrap();
        std::fs::write(root.join("README.md"), "hello").unwrap();
        std::fs::write(root.join("src/main.rs"), "fn main() {}\n").unwrap();
        std::fs::write(root.join("src/deep/deeper/x.rs"), "").unwrap();
        std::fs::write(root.join(".hidden"), "h").unwrap();
        std::fs::create_dir(base.join("outside")).unwrap();
        std::fs::write(base.join("outside/secret.txt"), "s").unwrap();
        symlink(base.join("outside"), root.join("out")).unwrap();
        let sandbox = Sandbox::open(&Roots::resolve(std::slice::from_ref(&root)).unwrap()).unwrap();
        (temp, root, sandbox)
    }

    fn ls(sandbox: &Sandbox, args: Value) -> Result<ToolOutput, ToolError> {
        run(
            sandbox,
            &crate::tools::parse_args("fs.ls", args.as_object().unwrap())?,
        )
    }

    #[test]
    fn a_large_folder_shows_every_file_with_its_own_size() {
        // Enough files that their sizes are read on several threads.
        let (_temp, root, sandbox) = tree();
        let many = root.join("many");
        std::fs::create_dir(&many).unwrap();
        let count = 3 * PARALLEL_SIZES_FROM + 7;
        for i in 0..count {
            std::fs::write(many.join(format!("f{i:05}")), "x".repeat(i % 97)).unwrap();
        }
        let out = ls(&sandbox, json!({"path": many.display().to_string()})).unwrap();
        let entries = out.data["entries"].as_array().unwrap();
        assert_eq!(entries.len(), count);
        for (i, entry) in entries.iter().enumerate() {
            assert_eq!(entry["path"], format!("f{i:05}"));
            assert_eq!(entry["size"], i % 97, "{entry}");
        }
        let body = out.body.unwrap();
        assert!(body.contains("\nf00096  96\n"), "{}", &body[..200]);
    }

    #[test]
    fn without_sizes_a_listing_is_the_same_but_for_the_sizes() {
        let (_temp, root, sandbox) = tree();
        let path = root.display().to_string();
        let with = ls(&sandbox, json!({"path": path, "depth": 3})).unwrap();
        let without = ls(&sandbox, json!({"path": path, "depth": 3, "sizes": false})).unwrap();
        let with_body = with.body.unwrap();
        let body = without.body.unwrap();
        // The same entries in the same order; a file line is its name alone.
        assert!(body.contains("\nREADME.md\n"), "{body}");
        assert!(with_body.contains("\nREADME.md  5\n"), "{with_body}");
        assert!(
            body.contains("src/main.rs\n") && body.contains("out -> "),
            "{body}"
        );
        assert!(body.contains(", 3 files, 1 link\n"), "{body}");
        assert!(
            with_body.contains(", 3 files (19 B), 1 link\n"),
            "{with_body}"
        );
        let names = |data: &Value| -> Vec<(String, String)> {
            data["entries"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| (e["path"].to_string(), e["type"].to_string()))
                .collect()
        };
        assert_eq!(names(&with.data), names(&without.data));
        let entries = without.data["entries"].as_array().unwrap();
        assert!(entries.iter().all(|e| e.get("size").is_none()));
        assert!(
            with.data["entries"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["size"] == 5)
        );
    }

    #[test]
    fn lists_one_level_sorted_with_kinds_and_a_summary() {
        let (_temp, root, sandbox) = tree();
        let output = ls(&sandbox, json!({"path": root.display().to_string()})).unwrap();
        let body = output.body.unwrap();
        let expected = format!(
            "{}/\n.hidden  1\nREADME.md  5\nout -> {}\nsrc/\n1 directory, 2 files (6 B), 1 link\n",
            root.display(),
            root.with_file_name("outside").display()
        );
        assert_eq!(body, expected);
    }

    #[test]
    fn depth_descends_but_never_through_links() {
        let (_temp, root, sandbox) = tree();
        let output = ls(
            &sandbox,
            json!({"path": root.display().to_string(), "depth": 16}),
        )
        .unwrap();
        let body = output.body.unwrap();
        assert!(body.contains("src/deep/deeper/x.rs  0\n"), "{body}");
        assert!(!body.contains("secret"), "followed a link out: {body}");
    }

    #[test]
    fn glob_filters_by_name() {
        let (_temp, root, sandbox) = tree();
        let output = ls(
            &sandbox,
            json!({"path": root.display().to_string(), "depth": 4, "glob": "*.rs"}),
        )
        .unwrap();
        let paths: Vec<&str> = output.data["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["path"].as_str().unwrap())
            .collect();
        assert_eq!(paths, vec!["src/deep/deeper/x.rs", "src/main.rs"]);
    }

    /// 25,000 files, 600 of them matching: every match is listed, however many entries the
    /// walk visits to find them (it once stopped after visiting 20,000 entries).
    #[test]
    fn glob_limits_count_matches_not_entries_visited() {
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap();
        for d in 0..25 {
            let dir = root.join(format!("d{d:02}"));
            std::fs::create_dir(&dir).unwrap();
            for f in 0..1000 {
                let name = if f >= 976 {
                    format!("f{f:04}.md")
                } else {
                    format!("f{f:04}.txt")
                };
                std::fs::write(dir.join(name), "").unwrap();
            }
        }
        let sandbox = Sandbox::open(&Roots::resolve(std::slice::from_ref(&root)).unwrap()).unwrap();
        let output = ls(
            &sandbox,
            json!({"path": root.display().to_string(), "depth": 2, "glob": "*.md"}),
        )
        .unwrap();
        let entries = output.data["entries"].as_array().unwrap();
        assert_eq!(entries.len(), 600);
        assert_eq!(entries[599]["path"], "d24/f0999.md");
        assert_eq!(output.data["truncated"], false);
        assert!(output.fields.is_empty(), "{:?}", output.fields);
        assert!(
            output
                .body
                .unwrap()
                .ends_with("0 directories, 600 files (0 B), 0 links\n")
        );
    }

    #[test]
    fn a_listing_that_stops_early_says_so() {
        let (_temp, root, sandbox) = tree();
        let args = |glob: &str| -> LsArgs {
            crate::tools::parse_args(
                "fs.ls",
                json!({"path": root.display().to_string(), "depth": 16, "glob": glob})
                    .as_object()
                    .unwrap(),
            )
            .unwrap()
        };
        // Three matches exist; a limit of two keeps two and says there is more.
        let output = run_with(&sandbox, &args("*"), 2, MAX_VISITED).unwrap();
        assert_eq!(output.data["entries"].as_array().unwrap().len(), 2);
        assert_eq!(
            output.fields,
            vec![("truncated".to_owned(), "true".to_owned())]
        );
        assert!(
            output
                .body
                .unwrap()
                .contains("; stopped after 2 matching entries"),
        );
        // A limit equal to the matches is not a truncation.
        let output = run_with(&sandbox, &args("*.rs"), 2, MAX_VISITED).unwrap();
        assert_eq!(output.data["truncated"], false);
        // The visit bound: what was found so far, and an honest note that more may exist.
        let output = run_with(&sandbox, &args("*.rs"), MAX_ENTRIES, 4).unwrap();
        assert_eq!(output.data["truncated"], true);
        assert_eq!(output.data["visited"], 4);
        assert_eq!(
            output.fields,
            vec![
                ("truncated".to_owned(), "true".to_owned()),
                ("visited".to_owned(), "4 entries, then stopped".to_owned())
            ]
        );
        let body = output.body.unwrap();
        assert!(
            body.contains(
                "; stopped after visiting 4 entries: more matching entries may lie beyond"
            ),
            "{body}"
        );
    }

    #[test]
    fn refusals_and_errors_have_codes() {
        let (_temp, root, sandbox) = tree();
        let code = |path: String| ls(&sandbox, json!({"path": path})).unwrap_err().code;
        assert_eq!(
            code(format!("{}/out", root.display())),
            ErrorCode::OutsideRoots
        );
        assert_eq!(
            code(format!("{}/README.md", root.display())),
            ErrorCode::NotDirectory
        );
        assert_eq!(
            code(format!("{}/missing", root.display())),
            ErrorCode::NotFound
        );
        assert_eq!(code("/etc".to_owned()), ErrorCode::OutsideRoots);
    }

    #[test]
    fn sizes_read_well() {
        assert_eq!(human_size(0), "0 B");
        assert_eq!(human_size(1536), "1.5 KiB");
        assert_eq!(human_size(5 * 1024 * 1024), "5.0 MiB");
    }
}
