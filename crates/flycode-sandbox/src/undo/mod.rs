//! Undo and history (PROTOCOL.md §16 (Undo and history)): every change a file tool makes, in
//! every door, is recorded before it lands (the pre-image of each path in a content-addressed
//! store in the state directory, then the after-image), and can be listed and taken back by the
//! person (`flycode history`, `flycode undo`). Here, in the sandbox, because recording reads the
//! files and restoring writes them: through the roots' handles, never following a link.

pub mod capture;
pub mod change;
pub mod completion;
pub mod image;
pub mod limits;
pub mod record;
pub mod restore;
pub mod retention;
pub mod store;

pub use change::{ChangeRecord, PathChange};
pub use completion::wait_for_completions;
pub use image::Image;
pub use limits::UndoLimits;
pub use record::{Named, Pending, Recorder, UndoError, session_id, settle_interrupted};
pub use restore::{Plan, Step, Unrestorable, apply, describe, plan};
pub use retention::{Pruned, prune, prune_if_due};
pub use store::UndoStore;
