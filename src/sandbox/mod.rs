//! The boundary between the model and the machine: allowed roots and containment, file access
//! through root directory handles, atomic writes, protected paths, process control, the audit log
//! and session memory. Nothing outside this module touches the file system or starts a process on
//! a model's behalf.

// The sandbox is the boundary: the one module that may touch the file system and start programs
// (clippy.toml forbids it everywhere else).
#![allow(clippy::disallowed_methods)]

pub(crate) mod audit;
pub(crate) mod batch;
pub mod contain;
pub(crate) mod content_hash;
pub(crate) mod durability;
#[cfg(test)]
mod durability_tests;
pub(crate) mod error;
pub(crate) mod files;
pub(crate) mod handles;
pub(crate) mod host;
pub(crate) mod journal;
pub mod landing;
pub(crate) mod lock;
pub mod mask;
pub(crate) mod ops;
pub mod own_places;
pub(crate) mod place;
#[cfg(target_os = "linux")]
mod privileges;
pub(crate) mod process;
pub(crate) mod protect;
pub(crate) mod read;
pub(crate) mod resolve;
pub(crate) mod roots;
pub mod seal;
pub(crate) mod secret_env;
pub(crate) mod session;
pub(crate) mod state;
pub(crate) mod state_gc;
pub mod undo;
pub(crate) mod walk;
pub(crate) mod write;
pub(crate) mod write_mode;

pub use audit::{AuditEntry, AuditLog, RecentEntries};
pub use batch::{BatchFile, BatchRefusal};
pub use content_hash::sha256_hex;
pub use durability::Durability;
pub use error::SandboxError;
pub use files::Sandbox;
pub use ops::Removed;
pub use process::guard::hidden_mode;
pub use process::reserve_descriptor_table;
pub use process::{ProcessError, ProcessOutcome, ProcessSpec, run_process};
pub use protect::Protection;
pub use resolve::{LastComponent, RootedPath, resolve_in_roots};
pub use roots::{Roots, RootsError};
pub use session::Session;
pub use write::{HashMismatch, WriteOutcome};
pub use write_mode::WriteMode;
