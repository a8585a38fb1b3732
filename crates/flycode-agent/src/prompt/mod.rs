//! The agent's system prompt, assembled from modules (seed 001): role, capabilities, the tool
//! guide of the calling mode, output style and an environment section. The templates live in
//! `protocol/prompts/agent/`; the tool lists and the argument reference are generated from the
//! schemas of the tool set ([`ToolSet::Agent`], or [`ToolSet::Subagent`] for a sub-agent, whose
//! role is `subagent-<type>.md` and whose capabilities module is `subagent.md`) by [`crate::protocol::prompt`]. Pure: no clock, no environment.
//!
//! Placeholders, filled in one pass (a value is never searched for placeholders, and an unknown
//! placeholder is left as written): `{{working_directory}}`, `{{model_name}}`, `{{os_info}}`,
//! `{{current_date}}`, `{{roots}}` (a bullet list) everywhere, including the user's own role or
//! system prompt; the tool guides also know `{{tool_names}}`, `{{tool_reference}}` (text mode)
//! and `{{root_json}}` (the first root escaped for a JSON string).

pub mod template;

use crate::protocol::prompt::{
    PromptLanguage, ToolNaming, first_root, json_string_body, tool_names_for, tool_reference_for,
    tool_signatures_for,
};
use crate::protocol::{ToolName, ToolSet};
use flycode_core::tools::agent::SubagentType;

use template::fill;

const ROLE: &str = include_str!("../../../../protocol/prompts/agent/role.md");
const CAPABILITIES: &str = include_str!("../../../../protocol/prompts/agent/capabilities.md");
const TOOLS_TEXT: &str = include_str!("../../../../protocol/prompts/agent/tools.text.md");
const TOOLS_NATIVE: &str = include_str!("../../../../protocol/prompts/agent/tools.native.md");
const STYLE: &str = include_str!("../../../../protocol/prompts/agent/style.md");
const ENVIRONMENT: &str = include_str!("../../../../protocol/prompts/agent/environment.md");
const TOOLS_TEXT_COMPACT: &str =
    include_str!("../../../../protocol/prompts/agent/tools.text.compact.md");
const TOOLS_NATIVE_COMPACT: &str =
    include_str!("../../../../protocol/prompts/agent/tools.native.compact.md");
const INSIGHT: &str = include_str!("../../../../protocol/prompts/agent/insight.md");
const SUBAGENT: &str = include_str!("../../../../protocol/prompts/agent/subagent.md");
const SUBAGENT_TOOLS_TEXT: &str =
    include_str!("../../../../protocol/prompts/agent/subagent.tools.text.md");
const SUBAGENT_TOOLS_NATIVE: &str =
    include_str!("../../../../protocol/prompts/agent/subagent.tools.native.md");

/// The built-in role of a sub-agent type (`protocol/prompts/agent/subagent-<type>.md`).
pub fn subagent_role(subagent: SubagentType) -> &'static str {
    match subagent {
        SubagentType::General => {
            include_str!("../../../../protocol/prompts/agent/subagent-general.md")
        }
        SubagentType::Explore => {
            include_str!("../../../../protocol/prompts/agent/subagent-explore.md")
        }
        SubagentType::Summary => {
            include_str!("../../../../protocol/prompts/agent/subagent-summary.md")
        }
        SubagentType::Plan => include_str!("../../../../protocol/prompts/agent/subagent-plan.md"),
    }
}

/// How the model calls tools.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum CallingMode {
    /// The model writes `flycode-call` blocks; results come back as user messages.
    #[default]
    Text,
    /// The tools are API functions (`fs_read`); results come back as `tool` messages.
    Native,
}

/// How much the system prompt says (PROTOCOL.md §13 (The API loop: prompt profiles)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum PromptProfile {
    /// Every module with its examples.
    #[default]
    Full,
    /// A short tool guide without examples, for small-context local models: role,
    /// capabilities, the short guide and the environment.
    Compact,
}

/// What the prompt is filled with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PromptContext {
    /// The directory the agent starts in, absolute.
    pub working_directory: String,
    /// The model's name as the API knows it.
    pub model_name: String,
    /// The operating system and architecture, e.g. `linux x86_64` (see [`os_info`]).
    pub os_info: String,
    /// Today, `YYYY-MM-DD`: passed in, so the same context always gives the same prompt.
    pub current_date: String,
    /// The allowed roots, absolute, in display form.
    pub roots: Vec<String>,
    /// How the model calls tools.
    pub mode: CallingMode,
    /// The tools the prompt offers: [`ToolSet::Agent`] for the main agent,
    /// [`ToolSet::Subagent`] for a sub-agent (whose capabilities module then says how a
    /// sub-agent works).
    pub tools: ToolSet,
    /// How much the prompt says.
    pub profile: PromptProfile,
    /// Whether the `★ Insight` module (seed 001's `INSIGHT_FORMAT_GUIDE`) is added.
    pub insight: bool,
}

/// What the user configured instead of the built-in modules.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PromptOverrides {
    /// Replaces the role module (placeholders are filled in it too).
    pub role: Option<String>,
    /// Where the system prompt comes from.
    pub system: SystemPromptSource,
}

/// Where the system prompt comes from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum SystemPromptSource {
    /// The built-in modules (the default).
    #[default]
    Built,
    /// The user's whole system prompt (placeholders are filled in it).
    Custom(String),
    /// No system prompt: the role definition is then promoted to the system message by
    /// [`crate::context::assemble_request`].
    None,
}

/// The assembled prompt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AssembledPrompt {
    /// The system prompt; `None` when [`SystemPromptSource::None`] was configured.
    pub system: Option<String>,
    /// The role definition, filled: sent as the first special message of every request.
    pub role_definition: String,
}

/// `linux x86_64`: the operating system and architecture flycode was built for.
pub fn os_info() -> String {
    format!("{} {}", std::env::consts::OS, std::env::consts::ARCH)
}

/// Assembles the system prompt and the role definition for `context`.
pub fn assemble_prompt(context: &PromptContext, overrides: &PromptOverrides) -> AssembledPrompt {
    let roots = root_list(&context.roots);
    let environment = [
        ("working_directory", context.working_directory.as_str()),
        ("model_name", context.model_name.as_str()),
        ("os_info", context.os_info.as_str()),
        ("current_date", context.current_date.as_str()),
        ("roots", roots.as_str()),
    ];
    let role_definition = fill(overrides.role.as_deref().unwrap_or(ROLE), &environment);
    let system = match &overrides.system {
        SystemPromptSource::Built => {
            Some(built_system_prompt(&role_definition, context, &environment))
        }
        SystemPromptSource::Custom(text) => Some(fill(text, &environment)),
        SystemPromptSource::None => None,
    };
    AssembledPrompt {
        system,
        role_definition,
    }
}

/// Role, capabilities, tool guide, style and environment, separated by blank lines.
fn built_system_prompt(
    role_definition: &str,
    context: &PromptContext,
    environment: &[(&str, &str)],
) -> String {
    let tool_guide = tool_guide(context, environment);
    let capabilities = match context.tools {
        ToolSet::Subagent => SUBAGENT,
        _ => CAPABILITIES,
    };
    let mut modules = vec![
        role_definition.trim_end().to_owned(),
        fill(capabilities, environment).trim_end().to_owned(),
        tool_guide.trim_end().to_owned(),
    ];
    if context.profile == PromptProfile::Full {
        modules.push(fill(STYLE, environment).trim_end().to_owned());
    }
    if context.insight {
        modules.push(INSIGHT.trim_end().to_owned());
    }
    modules.push(fill(ENVIRONMENT, environment).trim_end().to_owned());
    modules.join("\n\n") + "\n"
}

/// The tool-usage guide of the calling mode.
fn tool_guide(context: &PromptContext, environment: &[(&str, &str)]) -> String {
    let root_json = json_string_body(first_root(&context.roots));
    let subagent = context.tools == ToolSet::Subagent;
    let compact = context.profile == PromptProfile::Compact;
    let (template, naming) = match (context.mode, subagent) {
        (CallingMode::Text, _) if compact => (TOOLS_TEXT_COMPACT, ToolNaming::Protocol),
        (CallingMode::Native, _) if compact => (TOOLS_NATIVE_COMPACT, ToolNaming::Native),
        (CallingMode::Text, false) => (TOOLS_TEXT, ToolNaming::Protocol),
        (CallingMode::Native, false) => (TOOLS_NATIVE, ToolNaming::Native),
        (CallingMode::Text, true) => (SUBAGENT_TOOLS_TEXT, ToolNaming::Protocol),
        (CallingMode::Native, true) => (SUBAGENT_TOOLS_NATIVE, ToolNaming::Native),
    };
    // The compact native guide names the functions only: each function carries its own
    // description, and saying it twice is the largest part of a small model's first read.
    let tool_names = if compact && context.mode == CallingMode::Native {
        context
            .tools
            .tools()
            .iter()
            .map(|tool| tool.native_name())
            .collect::<Vec<_>>()
            .join(", ")
    } else {
        tool_names_for(context.tools, naming)
    };
    let tool_reference = match context.mode {
        CallingMode::Text if compact => tool_signatures_for(context.tools),
        CallingMode::Text => tool_reference_for(PromptLanguage::En, context.tools)
            .trim_end()
            .to_owned(),
        CallingMode::Native => String::new(),
    };
    let edit_guideline = edit_guideline(context.tools, naming);
    let mut values = environment.to_vec();
    values.extend([
        ("edit_guideline", edit_guideline.as_str()),
        ("tool_names", tool_names.as_str()),
        ("tool_reference", tool_reference.as_str()),
        ("root_json", root_json.as_str()),
    ]);
    fill(template, &values)
}

/// The guide's advice on reading and changing files, naming only tools of `set`: the extended
/// tools where they are offered, else reading and writing whole files.
fn edit_guideline(set: ToolSet, naming: ToolNaming) -> String {
    let name = |tool: ToolName| match naming {
        ToolNaming::Protocol => tool.as_str().to_owned(),
        ToolNaming::Native => tool.native_name(),
    };
    let (read, write) = (name(ToolName::FsRead), name(ToolName::FsWrite));
    let placeholder = "never replace content with a placeholder such as `// ... rest of the code unchanged` (it is refused).";
    // A text-mode call is a block, a native one a function: only the first is "a call" here.
    let call = if naming == ToolNaming::Protocol {
        " call"
    } else {
        ""
    };
    if set.contains(ToolName::FsEdit) {
        let mut guideline = format!(
            "Read several files with one `{}`{call} instead of one `{read}` each. Change part of an existing file with `{}`, copying each `oldText` exactly from the file, instead of rewriting it with `{write}`; {placeholder}",
            name(ToolName::FsReadMany),
            name(ToolName::FsEdit),
        );
        if set.contains(ToolName::JobLog) {
            guideline.push_str(&format!(
                " A program that must keep running (a dev server, a watcher, a REPL) starts with `\"background\": true` on `{}` (`\"pty\": true` for one that needs a terminal): the answer names its job; read its output with `{}` (`startLine` = the last `nextLine`, `waitMs` to wait for lines), talk to it with `{}`, list jobs with `{}` and end it with `{}` when done. A `[jobs]` line tells you when a job ended.",
                name(ToolName::ShellExec),
                name(ToolName::JobLog),
                name(ToolName::JobInput),
                name(ToolName::JobList),
                name(ToolName::JobKill),
            ));
        }
        guideline
    } else {
        format!(
            "To change an existing file, read it first, then write it whole with `{write}`, every line written out; {placeholder}"
        )
    }
}

/// One bullet per root.
fn root_list(roots: &[String]) -> String {
    roots
        .iter()
        .map(|root| format!("- `{root}`"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests;
