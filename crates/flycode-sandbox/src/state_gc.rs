//! Removing old files from the state directory (`flycode gc`, PROTOCOL.md §10 (Running calls:
//! the state directory)): run transcripts, watch replay stores, exec sessions, a copied prompt
//! and journal records set aside as rejected, when they were last changed before a cut-off.
//! Never the seal key, the audit log, the journal's own records (a live or crashed process's
//! undo information) or a secret hand-off file: those are not in the lists below. Only regular
//! files are removed, each looked at without following a link, so a link planted in the state
//! directory removes nothing it points to.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The kinds of files `flycode gc` may remove, each in its own place of the state directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GarbageKind {
    /// `runs/*.jsonl`: a run's transcript (sub-agents' included).
    Transcript,
    /// `watch/*.json`: a watch session's replay store.
    ReplayStore,
    /// `sessions/*.json`: an exec session's stale-read memory.
    Session,
    /// `prompt.md`: the prompt `prompt --copy` wrote without a display.
    Prompt,
    /// `journal/rejected/*`: journal records set aside as not flycode's.
    RejectedRecord,
}

impl GarbageKind {
    /// Every kind, in the order a report lists them.
    pub const ALL: [GarbageKind; 5] = [
        GarbageKind::Transcript,
        GarbageKind::ReplayStore,
        GarbageKind::Session,
        GarbageKind::Prompt,
        GarbageKind::RejectedRecord,
    ];

    /// What the person reads: `transcript`, `replay store`...
    pub fn noun(self) -> &'static str {
        match self {
            GarbageKind::Transcript => "transcript",
            GarbageKind::ReplayStore => "replay store",
            GarbageKind::Session => "session",
            GarbageKind::Prompt => "copied prompt",
            GarbageKind::RejectedRecord => "rejected journal record",
        }
    }

    /// The folder inside the state directory and the file extension it holds (`None`: any).
    fn place(self) -> (&'static str, Option<&'static str>) {
        match self {
            GarbageKind::Transcript => ("runs", Some("jsonl")),
            GarbageKind::ReplayStore => ("watch", Some("json")),
            GarbageKind::Session => ("sessions", Some("json")),
            GarbageKind::Prompt => ("", Some("md")),
            GarbageKind::RejectedRecord => ("journal/rejected", None),
        }
    }
}

/// One file that was (or, in a dry run, would be) removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Garbage {
    /// The file.
    pub path: PathBuf,
    /// Its kind.
    pub kind: GarbageKind,
    /// Its size.
    pub bytes: u64,
}

/// What a collection did.
#[derive(Debug, Default)]
pub struct Collected {
    /// The files removed (or to remove, in a dry run).
    pub removed: Vec<Garbage>,
    /// The files that could not be removed, and why.
    pub failed: Vec<(PathBuf, String)>,
}

/// Removes (unless `dry_run`) the files of `state` that `flycode gc` may remove and that were
/// last changed before `cutoff`.
pub fn collect_garbage(state: &Path, cutoff: SystemTime, dry_run: bool) -> Collected {
    let mut collected = Collected::default();
    for kind in GarbageKind::ALL {
        for garbage in old_files(state, kind, cutoff) {
            if dry_run {
                collected.removed.push(garbage);
                continue;
            }
            match std::fs::remove_file(&garbage.path) {
                Ok(()) => collected.removed.push(garbage),
                Err(error) => collected.failed.push((garbage.path, error.to_string())),
            }
        }
    }
    collected
}

/// The regular files of `kind`'s place changed before `cutoff`, sorted by path.
fn old_files(state: &Path, kind: GarbageKind, cutoff: SystemTime) -> Vec<Garbage> {
    let (folder, extension) = kind.place();
    let dir = state.join(folder);
    // The folder itself must be a real folder: a link to elsewhere is not followed.
    if !folder.is_empty()
        && !std::fs::symlink_metadata(&dir).is_ok_and(|meta| meta.file_type().is_dir())
    {
        return Vec::new();
    }
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut found: Vec<Garbage> = entries
        .flatten()
        .filter_map(|entry| {
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let wanted = match (kind, extension) {
                (GarbageKind::Prompt, _) => name == "prompt.md",
                (_, Some(extension)) => path.extension().is_some_and(|e| e == extension),
                (_, None) => true,
            };
            let meta = std::fs::symlink_metadata(&path).ok()?;
            let old = meta.modified().is_ok_and(|changed| changed < cutoff);
            (wanted && meta.file_type().is_file() && old).then_some(Garbage {
                path,
                kind,
                bytes: meta.len(),
            })
        })
        .collect();
    found.sort_by(|a, b| a.path.cmp(&b.path));
    found
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // fixtures are made directly
mod tests {
    use super::*;
    use std::time::Duration;

    fn aged(path: &Path, days: u64) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "x").unwrap();
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(SystemTime::now() - Duration::from_secs(days * 86_400))
            .unwrap();
    }

    #[test]
    fn only_old_run_files_go_and_flycodes_own_state_stays() {
        let temp = tempfile::tempdir().unwrap();
        let state = temp.path();
        for (name, days) in [
            ("runs/old.jsonl", 40),
            ("runs/new.jsonl", 1),
            ("sessions/s.json", 40),
            ("watch/w.json", 40),
            ("prompt.md", 40),
            ("journal/rejected/r.json", 40),
            ("journal/1-2-3.json", 40),
            ("seal.key", 40),
            ("audit.jsonl", 40),
            ("secret-handoff-1-abc", 40),
        ] {
            aged(&state.join(name), days);
        }
        let cutoff = SystemTime::now() - Duration::from_secs(30 * 86_400);
        let dry = collect_garbage(state, cutoff, true);
        assert_eq!(dry.removed.len(), 5);
        assert!(
            state.join("runs/old.jsonl").exists(),
            "a dry run removes nothing"
        );
        let done = collect_garbage(state, cutoff, false);
        let mut gone: Vec<String> = done
            .removed
            .iter()
            .map(|g| g.path.strip_prefix(state).unwrap().display().to_string())
            .collect();
        gone.sort();
        assert_eq!(
            gone,
            [
                "journal/rejected/r.json",
                "prompt.md",
                "runs/old.jsonl",
                "sessions/s.json",
                "watch/w.json"
            ]
        );
        for kept in [
            "runs/new.jsonl",
            "journal/1-2-3.json",
            "seal.key",
            "audit.jsonl",
            "secret-handoff-1-abc",
        ] {
            assert!(state.join(kept).exists(), "{kept}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_link_in_the_state_directory_removes_nothing_it_points_to() {
        let temp = tempfile::tempdir().unwrap();
        let state = temp.path().join("state");
        let outside = temp.path().join("outside");
        aged(&outside.join("precious.jsonl"), 40);
        std::fs::create_dir_all(&state).unwrap();
        std::os::unix::fs::symlink(&outside, state.join("runs")).unwrap();
        let cutoff = SystemTime::now() - Duration::from_secs(86_400);
        let done = collect_garbage(&state, cutoff, false);
        assert!(done.removed.is_empty());
        assert!(outside.join("precious.jsonl").exists());
    }
}
