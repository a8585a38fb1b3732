//! Taking changes back (PROTOCOL.md §16 (Undo and history), "Undo"): a plan first, which reads
//! but never writes (every path checked against the state its change left, newest change first,
//! as each undo would leave it for the next), then the restores, each through the sandbox: the
//! path must lie in this run's roots, must not be protected, and must still resolve to the path
//! recorded (a link planted on the way since is a refusal, never followed).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use cap_std::fs::Dir;

use super::capture::missing_content;
use super::change::ChangeRecord;
use super::image::Image;
use super::record::{Named, Pending, Recorder, UndoError, capture_now};
use super::store::UndoStore;
use crate::durability::sync_data;
use crate::error::SandboxError;
use crate::files::Sandbox;
use crate::resolve::LastComponent;

/// One path to put back.
#[derive(Clone, Debug)]
pub struct Step {
    /// The change it belongs to.
    pub change: String,
    /// The path.
    pub path: String,
    /// What the change left there.
    pub left: Image,
    /// What is there now (or will be, once the newer changes are undone).
    pub now: Image,
    /// What the undo puts there.
    pub restore: Image,
}

impl Step {
    /// Whether the path is not in the state its change left: someone changed it since.
    pub fn is_conflict(&self) -> bool {
        !self.now.same_as(&self.left)
    }

    /// Whether the undo changes anything at this path.
    pub fn changes_anything(&self) -> bool {
        !self.now.same_as(&self.restore)
    }
}

/// A path whose old content cannot be had: the undo would not restore it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unrestorable {
    /// The path.
    pub path: String,
    /// Why, in words for the person.
    pub why: &'static str,
}

/// The store does not hold the content.
const NOT_STORED: &str = "its content was recorded by hash only (larger than [undo] max_file_bytes), is no longer stored, or was changed since in the store (a program wrote to the file it kept)";
/// An append's old content is no longer the start of the file.
const PREFIX_GONE: &str = "it was appended to, and the file no longer begins with what it held before the append (its start was changed since)";

/// What an undo would do.
#[derive(Debug, Default)]
pub struct Plan {
    /// The steps, in the order they run (newest change first, its paths last to first).
    pub steps: Vec<Step>,
    /// Paths whose old content cannot be had, and why.
    pub unrestorable: Vec<Unrestorable>,
    /// Changes that ran programs: nothing of theirs can be put back.
    pub programs: Vec<String>,
}

impl Plan {
    /// The steps in conflict.
    pub fn conflicts(&self) -> impl Iterator<Item = &Step> {
        self.steps.iter().filter(|step| step.is_conflict())
    }
}

/// Plans the undo of `changes` (newest first), reading the paths as they are now.
pub fn plan(store: &UndoStore, changes: &[ChangeRecord], max_file_bytes: u64) -> Plan {
    let mut planned = Plan::default();
    let mut state: BTreeMap<String, Image> = BTreeMap::new();
    for change in changes {
        if change.program {
            planned.programs.push(change.id.clone());
        }
        for path in change.paths.iter().rev() {
            let left = path.after.clone().unwrap_or(Image::Absent);
            let deep = left.is_deep() || path.before.is_deep();
            let now = lookup(&state, &path.path)
                .map_or_else(|| read_now(&path.path, deep, max_file_bytes), Ok)
                .unwrap_or(Image::Special);
            let mut missing = Vec::new();
            missing_content(&path.before, store, &path.path, &mut missing);
            if !prefix_available(store, &path.path, &now, &path.before) {
                planned.unrestorable.push(Unrestorable {
                    path: path.path.clone(),
                    why: PREFIX_GONE,
                });
            }
            planned
                .unrestorable
                .extend(missing.into_iter().map(|path| Unrestorable {
                    path,
                    why: NOT_STORED,
                }));
            state.retain(|key, _| !is_inside(key, &path.path));
            state.insert(path.path.clone(), path.before.clone());
            planned.steps.push(Step {
                change: change.id.clone(),
                path: path.path.clone(),
                left,
                now,
                restore: path.before.clone(),
            });
        }
    }
    planned
}

/// Whether the content `before` keeps as a prefix (an append's, [`Image::File::prefix`]) is
/// where it says, at the start of what the path holds at that point of the plan (`now`): the
/// file on the disk, cut back by the newer appends undone before it, or a content the store
/// holds. Any other `before` is not a prefix: true.
fn prefix_available(store: &UndoStore, path: &str, now: &Image, before: &Image) -> bool {
    let Image::File {
        prefix: true,
        size,
        sha256,
        ..
    } = before
    else {
        return true;
    };
    match now {
        Image::File {
            size: now_size,
            stored,
            prefix,
            sha256: now_sha256,
            ..
        } if now_size >= size => {
            if *stored && !*prefix {
                // An older content the plan puts back first: the prefix is that content's.
                return store
                    .blob(now_sha256)
                    .ok()
                    .and_then(|bytes| bytes.get(..usize::try_from(*size).ok()?).map(sha256_of))
                    .is_some_and(|hash| &hash == sha256);
            }
            prefix_hash(path, *size).is_ok_and(|hash| &hash == sha256)
        }
        _ => false,
    }
}

fn sha256_of(bytes: &[u8]) -> String {
    crate::content_hash::sha256_hex(bytes)
}

/// The sha256 of the first `size` bytes of the file at `path` (links on the way followed, the
/// last not), read in pieces; an error if the file is shorter.
fn prefix_hash(path: &str, size: u64) -> std::io::Result<String> {
    use std::io::Read;
    let path = Path::new(path);
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(std::io::ErrorKind::NotFound.into());
    };
    let parent = Dir::open_ambient_dir(parent, cap_std::ambient_authority())?;
    let (file, _) = crate::handles::open_file(&parent, name)?;
    let (hash, length) = crate::content_hash::stream_sha256_len(file.take(size))?;
    if length != size {
        return Err(shorter_than_before());
    }
    Ok(hash)
}

fn shorter_than_before() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::UnexpectedEof,
        "the file is shorter than what it held before the append",
    )
}

/// Cuts the file `name` of `parent` back to its first `size` bytes (an append undone): they are
/// copied in pieces to a temporary file, hashed as they pass, and the copy takes the name only
/// if they still hash to `sha256` (else it is removed and nothing changes).
fn cut_back(
    parent: &Dir,
    name: &Path,
    (size, sha256, mode): (u64, &str, u32),
    sandbox: &Sandbox,
) -> std::io::Result<()> {
    use sha2::{Digest, Sha256};
    use std::io::Read;
    let (file, _) = crate::handles::open_file(parent, name.as_os_str())?;
    let temp = crate::place::temp_name(name);
    let mut copy = parent.open_with(
        &temp,
        cap_std::fs::OpenOptions::new().write(true).create_new(true),
    )?;
    let copied = (|| {
        let mut source = file.take(size);
        let mut hasher = Sha256::new();
        let mut buffer = vec![0u8; 256 * 1024];
        let mut length: u64 = 0;
        loop {
            let read = match source.read(&mut buffer) {
                Ok(0) => break,
                Ok(read) => read,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(error) => return Err(error),
            };
            hasher.update(&buffer[..read]);
            copy.write_all(&buffer[..read])?;
            length += read as u64;
        }
        if length != size {
            return Err(shorter_than_before());
        }
        if hex::encode(hasher.finalize()) != sha256 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "the file no longer begins with what it held before the append",
            ));
        }
        sync_data(&copy, sandbox.durability())
    })();
    drop(copy);
    if let Err(error) = copied {
        let _ = parent.remove_file(&temp);
        return Err(error);
    }
    set_mode(parent, &temp, mode)?;
    parent.rename(&temp, parent, name)
}

fn read_now(path: &str, deep: bool, max_file_bytes: u64) -> std::io::Result<Image> {
    capture_now(Path::new(path), deep, max_file_bytes, None, None)
}

fn is_inside(path: &str, folder: &str) -> bool {
    path.strip_prefix(folder)
        .is_some_and(|rest| rest.starts_with('/'))
}

/// What an earlier step of the plan leaves at `path` (itself or inside a folder it restores).
fn lookup(state: &BTreeMap<String, Image>, path: &str) -> Option<Image> {
    if let Some(image) = state.get(path) {
        return Some(image.clone());
    }
    let (folder, image) = state.iter().find(|(key, _)| is_inside(path, key))?;
    let mut image = image;
    for name in path[folder.len() + 1..].split('/') {
        image = image.child(name)?;
    }
    Some(image.clone())
}

/// Carries out `plan` (conflicts already accepted by the caller), recorded as a change of its
/// own that takes back `undoes`; its id.
pub fn apply(
    recorder: &Recorder,
    sandbox: &Sandbox,
    plan: &Plan,
    undoes: Vec<String>,
) -> Result<Option<String>, UndoError> {
    let steps: Vec<&Step> = plan.steps.iter().filter(|s| s.changes_anything()).collect();
    // A path several of the changes touched is recorded once: as it is before the undo, and
    // after it (a record naming it twice would conflict with itself when it is undone).
    let deep = |path: &str| {
        steps.iter().any(|step| {
            step.path == path && !matches!(step.restore, Image::Dir { entries: None, .. })
        })
    };
    let mut seen = std::collections::BTreeSet::new();
    let named: Vec<Named<'_>> = steps
        .iter()
        .filter(|step| seen.insert(step.path.as_str()))
        .map(|step| Named {
            input: &step.path,
            whole: true,
            deep: deep(&step.path),
            // Copied: a restore may write in place of what is there (a folder's mode).
            replaced: false,
            appended: false,
        })
        .collect();
    let mut pending: Pending = recorder.begin(sandbox, "undo", None, &named)?;
    pending.undoes(undoes);
    // A path moved away and now where the move put it goes back by a move.
    let mut moved_to: Vec<Option<usize>> = vec![None; steps.len()];
    for index in 0..steps.len() {
        if let Some(from) = moved_here(&steps, index, &moved_to) {
            moved_to[from] = Some(index);
        }
    }
    let mut result = Ok(());
    let mut done = vec![false; steps.len()];
    for (index, step) in steps.iter().enumerate() {
        if done[index] {
            continue;
        }
        result = match moved_to[index] {
            Some(back) => {
                done[back] = true;
                sandbox.rename(&step.path, &steps[back].path, false)
            }
            None => restore(sandbox, recorder.store(), step),
        };
        if result.is_err() {
            break;
        }
    }
    let id = recorder.finish(pending, &std::collections::BTreeMap::new())?;
    result?;
    Ok(id)
}

/// The step of the same change whose path now holds exactly what `index` restores, and is to
/// be emptied (not yet claimed by another): a move, taken back by moving it again.
fn moved_here(steps: &[&Step], index: usize, claimed: &[Option<usize>]) -> Option<usize> {
    let step = steps[index];
    if step.restore == Image::Absent || step.now != Image::Absent {
        return None;
    }
    steps.iter().enumerate().position(|(other, candidate)| {
        claimed[other].is_none()
            && other != index
            && candidate.change == step.change
            && candidate.restore == Image::Absent
            && candidate.now.same_as(&step.restore)
    })
}

/// Puts one path back as `step.restore` says.
fn restore(sandbox: &Sandbox, store: &UndoStore, step: &Step) -> Result<(), SandboxError> {
    let input = step.path.as_str();
    let rooted = sandbox.resolve(input, LastComponent::NoFollow)?;
    if rooted.absolute != Path::new(input) || rooted.is_root() {
        return Err(SandboxError::Denied {
            path: input.to_owned(),
            reason: format!(
                "it now resolves to {} (a link on the way was changed since): undo never follows it",
                rooted.absolute.display()
            ),
        });
    }
    sandbox.protection().check(input, &rooted.absolute)?;
    let (parent, name) = sandbox.parent_dir(input, &rooted, true)?;
    let fail = |error: std::io::Error| SandboxError::from_io(input, error);
    if let (
        Image::Dir { .. },
        Image::Dir {
            mode,
            entries: None,
        },
    ) = (&step.now, &step.restore)
    {
        return set_mode(&parent, &name, *mode).map_err(fail);
    }
    // An append's old content is the start of the file there now: copied from it, never
    // held whole in memory.
    if let Image::File {
        prefix: true,
        size,
        sha256,
        mode,
        ..
    } = &step.restore
    {
        return cut_back(&parent, &name, (*size, sha256, *mode), sandbox).map_err(fail);
    }
    match parent.symlink_metadata(&name) {
        Ok(metadata) if metadata.is_dir() => {
            sandbox.protection().check_tree(input, &rooted.absolute)?;
            parent.remove_dir_all(&name).map_err(fail)?;
        }
        Ok(_) => parent.remove_file(&name).map_err(fail)?,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(fail(error)),
    }
    create(&parent, &name, &step.restore, store, sandbox).map_err(fail)
}

/// Makes `name` in `parent` what `image` describes (nothing is there).
fn create(
    parent: &Dir,
    name: &Path,
    image: &Image,
    store: &UndoStore,
    sandbox: &Sandbox,
) -> std::io::Result<()> {
    match image {
        Image::Absent => Ok(()),
        Image::File { mode, sha256, .. } => {
            let bytes = store.blob(sha256)?;
            let temp = crate::place::temp_name(name);
            let mut file = parent.open_with(
                &temp,
                cap_std::fs::OpenOptions::new().write(true).create_new(true),
            )?;
            file.write_all(&bytes)?;
            sync_data(&file, sandbox.durability())?;
            drop(file);
            set_mode(parent, &temp, *mode)?;
            parent.rename(&temp, parent, name)
        }
        Image::Link { target } => parent.symlink_contents(target, name),
        Image::Dir { mode, entries } => {
            if parent.symlink_metadata(name).is_err() {
                parent.create_dir(name)?;
            }
            if let Some(entries) = entries {
                let folder = crate::handles::open_subdir(parent, name.as_os_str())?;
                for (child, image) in entries {
                    create(&folder, Path::new(child), image, store, sandbox)?;
                }
            }
            set_mode(parent, name, *mode)
        }
        Image::Special => Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "a FIFO, socket or device is never restored",
        )),
    }
}

fn set_mode(parent: &Dir, name: &Path, mode: u32) -> std::io::Result<()> {
    use cap_std::fs::PermissionsExt;
    // Never setuid, setgid or sticky (PROTOCOL.md §9, fs.chmod).
    parent.set_permissions(name, cap_std::fs::Permissions::from_mode(mode & 0o777))
}

/// What the undo would do at `step.path`: a unified diff for each text file it changes (inside
/// folders too), a line for anything else.
pub fn describe(store: &UndoStore, step: &Step) -> String {
    let mut out = String::new();
    describe_path(store, &step.path, &step.now, &step.restore, &mut out);
    out
}

fn describe_path(store: &UndoStore, path: &str, now: &Image, before: &Image, out: &mut String) {
    if now.same_as(before) {
        return;
    }
    let is_tree = |image: &Image| image.is_deep();
    match (now, before) {
        (Image::File { sha256: a, .. }, Image::File { sha256: b, .. }) if a == b => {
            out.push_str(&format!(
                "{path}: mode {} -> {}\n",
                mode_of(now),
                mode_of(before)
            ));
        }
        (Image::File { .. } | Image::Absent, Image::File { .. } | Image::Absent) => {
            let current = content_now(path, now);
            let restored = match before {
                Image::File {
                    prefix: true, size, ..
                } => current
                    .as_deref()
                    .and_then(|bytes| bytes.get(..usize::try_from(*size).ok()?))
                    .map(<[u8]>::to_vec),
                Image::File { sha256, .. } => store.blob(sha256).ok(),
                _ => Some(Vec::new()),
            };
            out.push_str(&text_diff(path, current.as_deref(), restored.as_deref()));
        }
        _ if (is_tree(now) || *now == Image::Absent)
            && (is_tree(before) || *before == Image::Absent) =>
        {
            if mode_of(now) != mode_of(before) {
                out.push_str(&format!(
                    "{path}/: {} now, {} after undo\n",
                    summary(now),
                    summary(before)
                ));
            }
            let names: std::collections::BTreeSet<&String> =
                entries(now).chain(entries(before)).collect();
            for name in names {
                if let (Some(a), Some(b)) = (now.child(name), before.child(name)) {
                    describe_path(store, &format!("{path}/{name}"), a, b, out);
                }
            }
        }
        _ => out.push_str(&format!(
            "{path}: {} now, {} after undo\n",
            summary(now),
            summary(before)
        )),
    }
}

fn entries(image: &Image) -> impl Iterator<Item = &String> {
    match image {
        Image::Dir {
            entries: Some(entries),
            ..
        } => Some(entries.keys()),
        _ => None,
    }
    .into_iter()
    .flatten()
}

fn mode_of(image: &Image) -> String {
    match image {
        Image::File { mode, .. } | Image::Dir { mode, .. } => format!("{mode:04o}"),
        _ => "-".into(),
    }
}

fn summary(image: &Image) -> String {
    match image {
        Image::Dir {
            mode,
            entries: Some(entries),
        } => format!("a folder ({} entries, mode {mode:04o})", entries.len()),
        Image::Dir { mode, .. } => format!("a folder (mode {mode:04o})"),
        Image::Link { target } => format!("a link to {target}"),
        Image::File { size, mode, .. } => format!("a file ({size} bytes, mode {mode:04o})"),
        Image::Absent => "nothing".into(),
        Image::Special => "a special file".into(),
    }
}

/// The content at `path` now, if it is the file `image` says.
fn content_now(path: &str, image: &Image) -> Option<Vec<u8>> {
    let Image::File { .. } = image else {
        return Some(Vec::new());
    };
    let path = PathBuf::from(path);
    let parent = Dir::open_ambient_dir(path.parent()?, cap_std::ambient_authority()).ok()?;
    let name = path.file_name()?;
    if !parent.symlink_metadata(name).ok()?.is_file() {
        return None;
    }
    parent.read(name).ok()
}

fn text_diff(path: &str, now: Option<&[u8]>, before: Option<&[u8]>) -> String {
    let (Some(now), Some(before)) = (now, before) else {
        return format!("{path}: content not stored, the difference cannot be shown\n");
    };
    match (std::str::from_utf8(now), std::str::from_utf8(before)) {
        (Ok(now), Ok(before)) => similar::TextDiff::from_lines(now, before)
            .unified_diff()
            .context_radius(3)
            .header(&format!("{path} (now)"), &format!("{path} (after undo)"))
            .to_string(),
        _ => format!(
            "{path}: binary content, {} bytes now, {} bytes after undo\n",
            now.len(),
            before.len()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(sha: &str) -> Image {
        Image::File {
            mode: 0o644,
            size: 1,
            sha256: sha.into(),
            stored: true,
            prefix: false,
        }
    }

    #[test]
    fn a_path_inside_a_folder_an_earlier_step_restores_is_read_from_that_folder() {
        let mut state = BTreeMap::new();
        let folder = Image::Dir {
            mode: 0o755,
            entries: Some(BTreeMap::from([("x.txt".to_owned(), file("aa"))])),
        };
        state.insert("/r/a".to_owned(), folder);
        assert_eq!(lookup(&state, "/r/a/x.txt"), Some(file("aa")));
        assert_eq!(lookup(&state, "/r/a/y.txt"), Some(Image::Absent));
        assert_eq!(
            lookup(&state, "/r/ab"),
            None,
            "a sibling with a longer name"
        );
        assert!(is_inside("/r/a/x", "/r/a") && !is_inside("/r/ab", "/r/a"));
    }

    #[test]
    fn a_folder_recorded_without_its_entries_matches_on_its_mode() {
        let shallow = Image::Dir {
            mode: 0o755,
            entries: None,
        };
        let deep = Image::Dir {
            mode: 0o755,
            entries: Some(BTreeMap::new()),
        };
        assert!(shallow.same_as(&deep));
        let other_mode = Image::Dir {
            mode: 0o700,
            entries: None,
        };
        assert!(!shallow.same_as(&other_mode));
        assert!(!file("aa").same_as(&file("bb")));
    }
}
