//! When and how a conversation is compacted (PROTOCOL.md §13 (The API loop: compaction)):
//! `[agent] compact_at` (percent of the context, default 80), `[agent] context_tokens` (else
//! known for common models, else 128k), `[agent] keep_turns` (default 4), and `--no-compact`.

use super::{SettingFlags, SettingsError};
use crate::config::AgentConfig;

/// The default threshold, in percent of the model's context.
pub const DEFAULT_COMPACT_AT: u32 = 80;
/// The default number of recent turns kept whole.
pub const DEFAULT_KEEP_TURNS: u32 = 4;
/// The context assumed for a model flycode does not know.
pub const DEFAULT_CONTEXT_TOKENS: u64 = 128_000;

/// The compaction settings of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Compaction {
    /// Off with `--no-compact`.
    pub enabled: bool,
    /// Compact when the next request would pass this percent of `context_tokens`.
    pub at_percent: u32,
    /// The model's context, in tokens.
    pub context_tokens: u64,
    /// The most recent turns kept whole.
    pub keep_turns: u32,
}

impl Compaction {
    /// The request size, in tokens, past which the conversation is compacted.
    pub fn threshold(&self) -> u64 {
        self.context_tokens
            .saturating_mul(u64::from(self.at_percent))
            / 100
    }
}

/// The context of well-known models by name prefix (lower case), longest first where they
/// share a start.
const KNOWN_CONTEXTS: &[(&str, u64)] = &[
    ("claude", 200_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("gpt-5", 400_000),
    ("o3", 200_000),
    ("o4", 200_000),
    ("gemini", 1_048_576),
    ("deepseek", 128_000),
    ("qwen", 32_768),
    ("llama", 128_000),
];

/// The context of `model`, when flycode knows it (a `vendor/` prefix is ignored).
pub fn known_context(model: &str) -> Option<u64> {
    let name = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    KNOWN_CONTEXTS
        .iter()
        .find(|(prefix, _)| name.starts_with(prefix))
        .map(|&(_, tokens)| tokens)
}

/// The run's compaction settings for `model`.
pub fn resolve_compaction(
    flags: &SettingFlags,
    file: &AgentConfig,
    model: &str,
) -> Result<Compaction, SettingsError> {
    let at_percent = file.compact_at.unwrap_or(DEFAULT_COMPACT_AT);
    if !(10..=95).contains(&at_percent) {
        return Err(SettingsError::Invalid {
            setting: "compact_at",
            problem: format!("{at_percent} is not a percent from 10 to 95 (default 80)"),
        });
    }
    let context_tokens = file
        .context_tokens
        .or_else(|| known_context(model))
        .unwrap_or(DEFAULT_CONTEXT_TOKENS);
    if context_tokens < 1_000 {
        return Err(SettingsError::Invalid {
            setting: "context_tokens",
            problem: format!("{context_tokens} tokens is too small a context: give 1000 or more"),
        });
    }
    let keep_turns = file.keep_turns.unwrap_or(DEFAULT_KEEP_TURNS);
    if !(1..=100).contains(&keep_turns) {
        return Err(SettingsError::Invalid {
            setting: "keep_turns",
            problem: format!("{keep_turns} is not from 1 to 100 (default 4)"),
        });
    }
    Ok(Compaction {
        enabled: !flags.no_compact,
        at_percent,
        context_tokens,
        keep_turns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_models_have_known_contexts_and_others_the_default() {
        assert_eq!(known_context("claude-sonnet-4-5"), Some(200_000));
        assert_eq!(known_context("openai/gpt-4o-mini"), Some(128_000));
        assert_eq!(known_context("my-local-model"), None);
        let compaction =
            resolve_compaction(&SettingFlags::default(), &AgentConfig::default(), "x").unwrap();
        assert_eq!(compaction.context_tokens, DEFAULT_CONTEXT_TOKENS);
        assert_eq!(compaction.threshold(), 102_400);
        assert!(compaction.enabled);
    }

    #[test]
    fn out_of_range_values_are_refused() {
        let file = AgentConfig {
            compact_at: Some(100),
            ..AgentConfig::default()
        };
        assert!(resolve_compaction(&SettingFlags::default(), &file, "x").is_err());
    }
}
