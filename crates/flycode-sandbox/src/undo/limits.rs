//! How much the undo store keeps (`[undo]` in flycode.toml; PROTOCOL.md §16 (Undo and history),
//! "Retention"). Plain data, shared by the recorder and the pruning.

/// How much the store keeps (`[undo]` in flycode.toml).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UndoLimits {
    /// The store's size, at most (blobs), before the oldest changes are pruned.
    pub max_bytes: u64,
    /// Changes older than this are pruned.
    pub max_age_days: u32,
    /// A file larger than this is recorded by hash only, and cannot be restored.
    pub max_file_bytes: u64,
}

impl Default for UndoLimits {
    fn default() -> Self {
        UndoLimits {
            max_bytes: 1 << 30,
            max_age_days: 30,
            max_file_bytes: 64 << 20,
        }
    }
}
