//! The boundary between the model and the machine: allowed roots (and, as flycode grows, policy,
//! atomic writes and process control). Nothing outside this module touches the file system on a
//! model's behalf.

pub mod audit;
pub mod batch;
pub mod error;
pub mod files;
pub mod ops;
pub mod protect;
pub mod resolve;
pub mod roots;
pub mod session;
pub mod state;
pub mod write;

pub use audit::{AuditEntry, AuditLog};
pub use batch::{BatchFile, BatchRefusal};
pub use error::SandboxError;
pub use files::Sandbox;
pub use ops::Removed;
pub use protect::Protection;
pub use resolve::{LastComponent, RootedPath, resolve_in_roots};
pub use roots::{Roots, RootsError};
pub use session::Session;
pub use write::{HashMismatch, WriteMode, WriteOutcome, sha256_hex};
