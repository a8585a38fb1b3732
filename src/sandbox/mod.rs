//! The boundary between the model and the machine: allowed roots and process control (and, as
//! flycode grows, policy and atomic writes). Nothing outside this module touches the file system
//! or starts a process on a model's behalf.

pub mod error;
pub mod process;
pub mod resolve;
pub mod roots;

pub use error::SandboxError;
pub use process::{ProcessError, ProcessOutcome, ProcessSpec, run_process};
pub use resolve::{LastComponent, RootedPath, resolve_in_roots};
pub use roots::{Roots, RootsError};
