//! The special user messages of every request (filled in by the next commit).
