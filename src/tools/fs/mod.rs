//! File-system tools, one file each (`read.rs` is `fs.read`, with `protocol/schemas/fs.read.json`).

pub mod ls;
pub mod read;
