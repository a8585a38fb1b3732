//! What `agent.task` asks for (PROTOCOL.md §13 (The API loop: sub-agents)): the task, its kind
//! of sub-agent and its model. A file of its own because two sides carry it: the tool
//! ([`super::task`]) reads it from the call, and [`TaskRunner`](crate::tools::tool::TaskRunner)
//! hands it to the sub-agent layer, so the tool trait's file needs it without needing the tool.

use serde::{Deserialize, Serialize};

/// The kind of sub-agent, each with its own role prompt.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SubagentType {
    /// Anything read-only.
    #[default]
    General,
    /// Finds files and code.
    Explore,
    /// Condenses content.
    Summary,
    /// Drafts a step-by-step plan.
    Plan,
}

impl SubagentType {
    /// Every type, in the contract's order.
    pub const ALL: [SubagentType; 4] = [
        SubagentType::General,
        SubagentType::Explore,
        SubagentType::Summary,
        SubagentType::Plan,
    ];

    /// `general`, `explore`...
    pub fn as_str(self) -> &'static str {
        match self {
            SubagentType::General => "general",
            SubagentType::Explore => "explore",
            SubagentType::Summary => "summary",
            SubagentType::Plan => "plan",
        }
    }

    /// The model a task of this type uses when the call names none: the light one for work
    /// that is mostly reading (explore, summary), the main one for judgement (general, plan).
    pub fn default_model(self) -> ModelChoice {
        match self {
            SubagentType::Explore | SubagentType::Summary => ModelChoice::Light,
            SubagentType::General | SubagentType::Plan => ModelChoice::Main,
        }
    }
}

/// Which model a sub-agent runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelChoice {
    /// `LIGHT_LLM_*` / `[agent.light]`, falling back to the main model.
    Light,
    /// The run's own model.
    Main,
}

impl ModelChoice {
    /// `light` or `main`.
    pub fn as_str(self) -> &'static str {
        match self {
            ModelChoice::Light => "light",
            ModelChoice::Main => "main",
        }
    }
}

/// The arguments of `agent.task`.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskArgs {
    /// A short title.
    pub description: String,
    /// The whole task for the sub-agent.
    pub prompt: String,
    /// Its kind.
    #[serde(default)]
    pub subagent_type: SubagentType,
    /// Its model, when the call names one.
    pub model: Option<ModelChoice>,
    /// The predefined agent to run it (PROTOCOL.md §9 (Hints and predefined agents)).
    pub name: Option<String>,
}

impl TaskArgs {
    /// The model asked for, or the type's default.
    pub fn model_choice(&self) -> ModelChoice {
        self.model
            .unwrap_or_else(|| self.subagent_type.default_model())
    }
}
