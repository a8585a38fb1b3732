//! The boundary between the model and the machine: allowed roots and containment, file access
//! through root directory handles, atomic writes, protected paths, process control, the audit log
//! and session memory. Nothing outside this module touches the file system or starts a process on
//! a model's behalf.

// The sandbox is the boundary: the one module that may touch the file system and start programs
// (clippy.toml forbids it everywhere else).
#![allow(clippy::disallowed_methods)]

pub mod audit;
pub mod batch;
pub mod beside;
pub mod contain;
pub mod content_hash;
pub mod durability;
#[cfg(test)]
mod durability_tests;
pub mod error;
pub mod files;
pub mod handles;
pub mod host;
pub mod journal;
pub mod landing;
pub mod lock;
pub mod mask;
pub mod ops;
pub mod own_places;
pub mod place;
#[cfg(target_os = "linux")]
pub mod privileges;
pub mod process;
pub mod protect;
pub mod read;
pub mod record_owner;
pub mod resolve;
pub mod roots;
pub mod seal;
pub mod secret_env;
pub mod session;
pub mod spare_records;
pub mod state;
pub mod state_gc;
pub mod undo;
pub mod walk;
mod workers;
pub mod write;
pub mod write_mode;

pub use audit::{AuditClient, AuditEntry, AuditLog, RecentEntries};
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
