//! What condenses `memory.query`'s findings (PROTOCOL.md §9 (memory.query)): a trait of its
//! own, so the tool trait's file can name it without importing the tool.

/// A model that condenses the windows `memory.query` found (`flycode run`'s light model).
pub trait Condenser: Send + Sync {
    /// The latest `count` user and assistant messages of the current conversation, as
    /// `role: text` lines, oldest first.
    fn recent(&self, count: usize) -> Vec<String>;
    /// One request: `instructions` as the system message, `material` as the user's; the reply.
    fn condense(&self, instructions: &str, material: &str) -> Result<String, String>;
    /// How the current run's own transcripts are named (their file names start so): left out of
    /// the search, so the conversation does not find itself.
    fn own_stems(&self) -> Vec<String>;
}
