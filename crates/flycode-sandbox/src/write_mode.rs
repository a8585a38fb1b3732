//! How a file is written: replaced whole, or added to. A word of its own, because the write itself
//! ([`super::write`], [`super::batch`]) and the lock it takes first both decide by it (appending
//! through a file with several names is refused where the lock is taken).

/// How to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteMode {
    /// Replace the whole content atomically.
    Overwrite,
    /// Add to the end.
    Append,
}
