//! `flycode watch`: replies arrive from the clipboard or an inbox folder, each call runs once,
//! and the result goes back where the reply came from.
//!
//! - [`handler`]: one text in, one answer out (shared by both modes);
//! - [`replay`]: executed call ids and their results, so nothing runs twice;
//! - [`clipboard`]: the clipboard mode;
//! - [`inbox`]: the folder mode.

pub mod clipboard;
pub mod handler;
pub mod inbox;
pub mod replay;

pub use handler::{Answer, Handled, Handler, Notice};
pub use replay::ReplayStore;
