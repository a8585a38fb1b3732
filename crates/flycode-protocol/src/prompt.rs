//! The chat-UI system prompt: a template from `protocol/prompts/` whose tool list and argument
//! reference are generated from the schemas, and whose roots and examples use the user's roots.
//!
//! Placeholders: `{{roots}}` (a bullet list), `{{root}}` (the first root, for prose),
//! `{{root_json}}` (the first root escaped for use inside a JSON string), `{{tool_names}}`,
//! `{{tool_reference}}`, `{{risky_extended}}` (`/fs.edit`: the risky tools beyond the seed's)
//! and `{{extended_examples}}` (the extended tools' examples; empty for the seed set).

use serde_json::Value;

use super::schema::{ArgKind, ToolSchema, tool_schema};
use super::tool_name::{ToolName, ToolSet};

/// The language of the prompt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PromptLanguage {
    /// Chinese, the default (the protocol's original language).
    #[default]
    Zh,
    /// English.
    En,
}

impl PromptLanguage {
    fn template(self) -> &'static str {
        match self {
            PromptLanguage::Zh => include_str!("../../../protocol/prompts/chat.zh.md"),
            PromptLanguage::En => include_str!("../../../protocol/prompts/chat.en.md"),
        }
    }

    fn extended_examples(self) -> &'static str {
        match self {
            PromptLanguage::Zh => include_str!("../../../protocol/prompts/chat.extended.zh.md"),
            PromptLanguage::En => include_str!("../../../protocol/prompts/chat.extended.en.md"),
        }
    }
}

/// Builds the chat prompt of the seed set for `roots` (already absolute, in display form).
pub fn chat_prompt(language: PromptLanguage, roots: &[String]) -> String {
    chat_prompt_for(language, ToolSet::Seed, roots)
}

/// Builds the chat prompt of the tool set `set` for `roots`: its whitelist, its argument
/// reference and, for the extended set, the extended tools' examples.
pub fn chat_prompt_for(language: PromptLanguage, set: ToolSet, roots: &[String]) -> String {
    let first_root = first_root(roots);
    let root_list: Vec<String> = roots.iter().map(|r| format!("- `{r}`")).collect();
    let extended_examples = match set {
        ToolSet::Seed | ToolSet::SeedAgent => String::new(),
        ToolSet::Extended | ToolSet::Agent | ToolSet::Subagent | ToolSet::All => {
            format!("\n{}", language.extended_examples().trim_end())
        }
    };
    let risky_extended: String = set
        .tools()
        .iter()
        .filter(|&&tool| {
            !ToolSet::Seed.contains(tool)
                && !tool_schema(tool).is_read_only
                && !ToolName::AGENT_TOOLS.contains(&tool)
                && !ToolName::CONTEXT_TOOLS.contains(&tool)
        })
        .map(|tool| format!("/{tool}"))
        .collect();
    language
        .template()
        .replace("{{extended_examples}}", &extended_examples)
        .replace("{{roots}}", &root_list.join("\n"))
        .replace("{{tool_names}}", &tool_names_for(set, ToolNaming::Protocol))
        .replace("{{tool_reference}}", &tool_reference_for(language, set))
        .replace("{{risky_extended}}", &risky_extended)
        .replace("{{root_json}}", &json_string_body(first_root))
        .replace("{{root}}", first_root)
}

/// Whether `text` is a copy of flycode's chat prompt (it opens with a template's first line, as
/// `flycode prompt --copy` or a chat's copy button gives it): it holds example calls, and a
/// watcher must leave it alone instead of answering it as a reply with many calls.
pub fn is_chat_prompt(text: &str) -> bool {
    let text = text.trim_start_matches(|c: char| c.is_whitespace() || c == '\u{FEFF}');
    [PromptLanguage::Zh, PromptLanguage::En]
        .iter()
        .any(|language| {
            language
                .template()
                .lines()
                .next()
                .is_some_and(|first| !first.trim().is_empty() && text.starts_with(first.trim()))
        })
}

/// The first root without its trailing separator (a drive or file-system root keeps it), for
/// prose and examples; `/` when there is no root.
pub fn first_root(roots: &[String]) -> &str {
    roots
        .first()
        .map(|r| trim_trailing_separator(r))
        .unwrap_or("/")
}

/// `text` escaped for use between the quotes of a JSON string (`C:\\work` for `C:\work`).
pub fn json_string_body(text: &str) -> String {
    let quoted = Value::String(text.to_owned()).to_string();
    quoted[1..quoted.len() - 1].to_owned()
}

fn trim_trailing_separator(root: &str) -> &str {
    let trimmed = root.trim_end_matches(['/', '\\']);
    if trimmed.is_empty() || trimmed.ends_with(':') {
        root
    } else {
        trimmed
    }
}

/// How a tool list names the tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolNaming {
    /// The protocol names of call blocks, `fs.read`, one bullet each.
    Protocol,
    /// The API function names of native tool calling, `fs_read`, each with its one-line purpose.
    Native,
}

/// The bullet list of the tools of `set`, in prompt order.
pub fn tool_names_for(set: ToolSet, naming: ToolNaming) -> String {
    let lines: Vec<String> = set
        .tools()
        .iter()
        .map(|&tool| match naming {
            ToolNaming::Protocol => format!("- `{}`", tool.as_str()),
            ToolNaming::Native => format!(
                "- `{}` — {}",
                tool.native_name(),
                tool_schema(tool).description
            ),
        })
        .collect();
    lines.join("\n")
}

/// The numbered per-tool argument reference of the chat whitelist.
pub fn tool_reference(language: PromptLanguage) -> String {
    tool_reference_for(language, ToolSet::Seed)
}

/// The numbered per-tool argument reference of the tools of `set`.
pub fn tool_reference_for(language: PromptLanguage, set: ToolSet) -> String {
    let mut out = String::new();
    for (number, &tool) in set.tools().iter().enumerate() {
        let schema = tool_schema(tool);
        let document = offered_arguments(&schema.document, set);
        out.push_str(&format!(
            "\n{}. `{}` — {}\n- `{}`\n",
            number + 1,
            tool,
            schema.description,
            compact_signature(&document)
        ));
        describe_properties(&mut out, &document, "", language);
        for rule in rules(schema, language) {
            out.push_str(&format!("- {rule}\n"));
        }
    }
    out
}

/// One line per tool of `set`: its name, its one-line purpose and its argument signature, without
/// per-argument descriptions or rules (the compact prompt profile, PROTOCOL.md §13 (The API
/// loop: prompt profiles)).
pub fn tool_signatures_for(set: ToolSet) -> String {
    set.tools()
        .iter()
        .map(|&tool| {
            let schema = tool_schema(tool);
            format!(
                "- `{tool}` {} — {}",
                compact_signature(&schema.document),
                schema.description
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The schema without the arguments marked `x-flycode-extended` (`background`, `pty`) when `set`
/// is not the extended one: the seed prompt stays the seed protocol's.
fn offered_arguments(document: &Value, set: ToolSet) -> Value {
    let mut document = document.clone();
    if !set.contains(ToolName::JobLog)
        && let Some(properties) = document["properties"].as_object_mut()
    {
        properties.retain(|_, property| property["x-flycode-extended"] != Value::Bool(true));
    }
    document
}

/// `{"path": string, "depth"?: integer}`, the seed's compact notation.
fn compact_signature(schema: &Value) -> String {
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let parts: Vec<String> = schema["properties"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, property)| {
            let optional = if required.contains(&name.as_str()) {
                ""
            } else {
                "?"
            };
            format!("\"{name}\"{optional}: {}", type_notation(property))
        })
        .collect();
    format!("{{{}}}", parts.join(", "))
}

fn type_notation(property: &Value) -> String {
    if let Some(options) = property["enum"].as_array() {
        return options
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("|");
    }
    match property["type"].as_str() {
        Some("array") if property["items"]["type"] == "object" => {
            format!("[{}]", compact_signature(&property["items"]))
        }
        Some("array") => format!("{}[]", property["items"]["type"].as_str().unwrap_or("any")),
        Some("object") => "{NAME: string}".to_owned(),
        Some(other) => other.to_owned(),
        None => "any".to_owned(),
    }
}

/// One bullet per argument: name, constraints, description. Nested objects use `files[].path`.
fn describe_properties(out: &mut String, schema: &Value, prefix: &str, language: PromptLanguage) {
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for (name, property) in schema["properties"].as_object().into_iter().flatten() {
        let mut facts = Vec::new();
        facts.push(match (required.contains(&name.as_str()), language) {
            (true, PromptLanguage::Zh) => "必填".to_owned(),
            (true, PromptLanguage::En) => "required".to_owned(),
            (false, PromptLanguage::Zh) => "可选".to_owned(),
            (false, PromptLanguage::En) => "optional".to_owned(),
        });
        if property["x-flycode-path"] == true {
            facts.push(match language {
                PromptLanguage::Zh => "绝对路径".to_owned(),
                PromptLanguage::En => "absolute path".to_owned(),
            });
        }
        match (property["minimum"].as_i64(), property["maximum"].as_i64()) {
            (Some(min), Some(max)) => facts.push(format!("{min}..{max}")),
            (Some(min), None) => facts.push(format!(">= {min}")),
            (None, Some(max)) => facts.push(format!("<= {max}")),
            (None, None) => {}
        }
        if let (Some(min), Some(max)) =
            (property["minItems"].as_i64(), property["maxItems"].as_i64())
        {
            facts.push(match language {
                PromptLanguage::Zh => format!("{min}..{max} 项"),
                PromptLanguage::En => format!("{min}..{max} items"),
            });
        }
        if let Some(default) = property.get("default") {
            facts.push(match language {
                PromptLanguage::Zh => format!("默认 {default}"),
                PromptLanguage::En => format!("default {default}"),
            });
        }
        let description = property["description"].as_str().unwrap_or_default();
        out.push_str(&format!(
            "- `{prefix}{name}` ({}): {description}\n",
            facts.join(", ")
        ));
        if property["type"] == "array" && property["items"]["type"] == "object" {
            describe_properties(
                out,
                &property["items"],
                &format!("{prefix}{name}[]."),
                language,
            );
        }
    }
}

/// Exclusive groups and the slash-form note, in the prompt's language.
fn rules(schema: &ToolSchema, language: PromptLanguage) -> Vec<String> {
    let mut rules = Vec::new();
    for group in &schema.exclusive {
        let names: Vec<String> = group.fields.iter().map(|f| format!("`{f}`")).collect();
        rules.push(match (group.is_required, language) {
            (false, PromptLanguage::Zh) => format!("{} 互斥，最多给一个。", names.join("/")),
            (false, PromptLanguage::En) => format!("At most one of {}.", names.join(", ")),
            (true, PromptLanguage::Zh) => {
                format!("{} 二选一，必须且只能给一个。", names.join(" 与 "))
            }
            (true, PromptLanguage::En) => format!("Exactly one of {}.", names.join(", ")),
        });
    }
    // The all-or-nothing rule is fs.writeBatch's; agent.todo's list of objects has none.
    if schema.tool == ToolName::FsWriteBatch
        && schema.args.iter().any(|a| a.kind == ArgKind::ObjectList)
    {
        rules.push(match language {
            PromptLanguage::Zh => "同一路径不得出现两次；全部成功或全部不变。".to_owned(),
            PromptLanguage::En => "No path twice; all files are written or none is.".to_owned(),
        });
    }
    rules
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_matches_the_seed_notation() {
        assert_eq!(
            compact_signature(&tool_schema(ToolName::FsLs).document),
            r#"{"path": string, "depth"?: integer, "glob"?: string, "all"?: boolean, "sizes"?: boolean}"#
        );
        assert_eq!(
            compact_signature(&tool_schema(ToolName::FsWrite).document),
            r#"{"path": string, "mode": "overwrite"|"append", "content": string, "expectedSha256"?: string}"#
        );
    }

    #[test]
    fn windows_roots_are_escaped_inside_json_examples() {
        let prompt = chat_prompt(PromptLanguage::En, &[r"C:\work\app".to_owned()]);
        assert!(prompt.contains(r#""path":"C:\\work\\app","depth":2"#));
        assert!(prompt.contains(r"List C:\work\app two levels deep."));
    }

    #[test]
    fn every_placeholder_is_filled() {
        for language in [PromptLanguage::Zh, PromptLanguage::En] {
            for set in [ToolSet::Seed, ToolSet::Extended] {
                let prompt = chat_prompt_for(language, set, &["/srv/app/".to_owned()]);
                assert!(!prompt.contains("{{"), "{language:?} {set:?}");
                assert!(prompt.contains("\"/srv/app/README.md\""));
            }
        }
    }

    #[test]
    fn the_seed_prompt_names_only_the_twelve_and_the_extended_one_its_fourteen() {
        for language in [PromptLanguage::Zh, PromptLanguage::En] {
            let seed = chat_prompt_for(language, ToolSet::Seed, &["/srv".to_owned()]);
            assert!(!seed.contains("fs.readMany") && !seed.contains("fs.edit"));
            assert!(
                seed.contains("fs.write/fs.writeBatch/fs.rm/fs.mv/fs.chmod/process.run/shell.exec")
            );
            let extended = chat_prompt_for(language, ToolSet::Extended, &["/srv".to_owned()]);
            assert!(extended.contains("- `fs.readMany`") && extended.contains("- `fs.edit`"));
            assert!(
                extended.contains("\"tool\":\"fs.edit\""),
                "an fs.edit example"
            );
            assert!(
                extended.contains("\"tool\":\"fs.readMany\""),
                "an fs.readMany example"
            );
            assert!(extended.contains("process.run/shell.exec/fs.edit"));
        }
    }
}
