//! `flycode watch`: replies arrive from the clipboard or an inbox folder, each call runs once,
//! and the result goes back where the reply came from.
//!
//! - [`handler`]: one text in, one answer out (shared by every source);
//! - [`replay`]: executed call ids and their results, so nothing runs twice;
//! - [`clipboard`]: the clipboard mode;
//! - [`inbox`]: the folder mode;
//! - [`browser`]: the browser companion's loopback server (`--browser`);
//! - [`owner`]: one watcher per source.

pub(crate) mod browser;
pub(crate) mod clipboard;
pub(crate) mod handler;
pub(crate) mod inbox;
pub(crate) mod owner;
pub(crate) mod replay;

pub use handler::{Answer, Handled, Handler, Notice};
pub use replay::ReplayStore;
