//! File-system tools, one file each (`read.rs` is `fs.read`, with `protocol/schemas/fs.read.json`).

pub mod chmod;
pub mod diff;
pub mod edit;
pub mod ls;
pub mod mkdir;
pub mod mv;
pub mod omission;
pub mod read;
pub mod read_many;
pub mod rm;
pub mod search;
pub mod write;
pub mod write_batch;
