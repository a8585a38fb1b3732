//! File-system tools (`fs.*`).

pub mod search;
