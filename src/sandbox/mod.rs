//! The boundary between the model and the machine: allowed roots (and, as flycode grows, policy,
//! atomic writes and process control). Nothing outside this module touches the file system on a
//! model's behalf.

pub mod roots;

pub use roots::{Roots, RootsError};
