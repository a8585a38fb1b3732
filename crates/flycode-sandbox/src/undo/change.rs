//! A change record (PROTOCOL.md §16 (Undo and history)): what one call (or undo) changed,
//! path by path, as the store keeps it. Plain data.

use serde::{Deserialize, Serialize};

use super::image::Image;

/// One path of a change: what it held before and after.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PathChange {
    /// The absolute path (resolved when the change began).
    pub path: String,
    /// What it held before.
    pub before: Image,
    /// What it held after; `None` while the change is under way.
    #[serde(default)]
    pub after: Option<Image>,
}

/// One change: a call of a file tool (or of a program, recorded without paths), or an undo.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangeRecord {
    /// `c-N`.
    pub id: String,
    /// `N`: the order changes were made in.
    pub seq: u64,
    /// Whether the after-images are in (false while the call runs, or if flycode was killed).
    pub complete: bool,
    /// Settled after flycode was killed during the change: the after-images were read later.
    #[serde(default)]
    pub recovered: bool,
    /// The process that made it, and when that process started (to tell whether it still runs).
    pub pid: u32,
    /// The process's start time, as the kernel counts it.
    pub start: u64,
    /// `exec`, `watch`, `run`, `mcp` or `undo`.
    pub door: String,
    /// The run or session: one id per flycode process.
    pub session: String,
    /// The call's id, where it had one.
    pub call: Option<String>,
    /// The tool (`fs.write`), or `undo`.
    pub tool: String,
    /// When it began, in seconds since 1970.
    pub time: u64,
    /// The call ran a program: what the program changed is not recorded.
    #[serde(default)]
    pub program: bool,
    /// The changes an undo took back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub undoes: Vec<String>,
    /// The paths, in the order the call named them.
    pub paths: Vec<PathChange>,
    /// Lines added (text files up to 1 MiB).
    pub added: u64,
    /// Lines removed.
    pub removed: u64,
    /// Bytes this change added to the store.
    pub stored_bytes: u64,
}

impl ChangeRecord {
    /// The contents the record needs from the store.
    pub fn blobs(&self) -> Vec<String> {
        self.paths
            .iter()
            .flat_map(|path| path.before.blobs())
            .collect()
    }
}
