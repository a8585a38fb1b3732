//! The tools the model calls, one file per tool (`tools/fs/search.rs` ↔ `fs.search` ↔
//! `protocol/schemas/fs.search.json`). Tools render no blocks and know no roots: the sandbox has
//! resolved their paths before they run.

pub mod fs;
