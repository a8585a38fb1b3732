//! Which protocol style a model speaks: flycode's fenced JSON blocks or seed 000's tags
//! (PROTOCOL.md §15 (The tag dialect)).

/// The protocol style of a conversation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dialect {
    /// Fenced `flycode-call` / `flycode-result` blocks (PROTOCOL.md §1 (Reading a reply)).
    #[default]
    Flycode,
    /// Seed 000's plain-text tags: `<bash_call>`, `<builtin>`, `<create_agent>`, `<return>`.
    Tags,
}
