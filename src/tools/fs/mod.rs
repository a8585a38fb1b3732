//! File-system tools, one file each (`read.rs` is `fs.read`, with `protocol/schemas/fs.read.json`).

pub(crate) mod chmod;
pub(crate) mod diff;
pub mod edit;
pub mod ls;
pub(crate) mod mkdir;
pub(crate) mod mv;
pub(crate) mod omission;
pub mod read;
pub mod read_many;
pub(crate) mod rm;
pub mod search;
pub(crate) mod write;
pub(crate) mod write_batch;
