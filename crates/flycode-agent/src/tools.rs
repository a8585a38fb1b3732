//! The tools as the API sees them: function definitions for native mode, made from the schemas of
//! `protocol/schemas/` with their names mapped to the API's allowed characters (`fs.read` ↔
//! `fs_read`, see [`ToolName::native_name`]).

use serde_json::{Map, Value, json};

use super::prompt::PromptProfile;
use crate::protocol::schema::tool_schema;
use crate::protocol::{ToolName, ToolSet};

/// The `tools` entries of a Chat Completions request: every tool of `tools` (the agent set, a
/// sub-agent's) as a function whose parameters are its schema, without flycode's own
/// `x-flycode-*` annotations and the `$schema`/`title` keys that some servers refuse, and
/// without the schema's own `description`, which is the function's already: every byte of the
/// first request is read by a local model's CPU before it answers (PROTOCOL.md §13 (The API
/// loop: prompt profiles)).
pub fn native_tool_definitions(
    tools: &[ToolName],
    profile: PromptProfile,
    agents: &[String],
) -> Vec<Value> {
    let extended = offers_jobs(tools);
    tools
        .iter()
        .map(|&tool| {
            let schema = tool_schema(tool);
            let mut parameters = api_schema(&schema.document, true, extended);
            if let Some(object) = parameters.as_object_mut() {
                object.remove("description");
            }
            if tool == ToolName::AgentTask {
                offer_agent_names(&mut parameters, agents);
            }
            // The compact profile gives arguments by name and type alone, as its text-mode
            // guide does, and each function's purpose in its first sentence.
            let description = if profile == PromptProfile::Compact {
                strip_descriptions(&mut parameters);
                // flycode refuses an unknown argument itself, naming the ones the tool takes.
                if let Some(object) = parameters.as_object_mut() {
                    object.remove("additionalProperties");
                }
                first_sentence(&schema.description)
            } else {
                schema.description.as_str()
            };
            json!({
                "type": "function",
                "function": {
                    "name": tool.native_name(),
                    "description": description,
                    "parameters": parameters,
                }
            })
        })
        .collect()
}

/// `agent.task`'s `name` as the run can take it: one of the predefined agents there are (an
/// enum, so a model cannot invent one), or, with none, not offered at all.
fn offer_agent_names(parameters: &mut Value, agents: &[String]) {
    let Some(properties) = parameters
        .get_mut("properties")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    if agents.is_empty() {
        properties.remove("name");
    } else if let Some(name) = properties.get_mut("name").and_then(Value::as_object_mut) {
        name.remove("pattern");
        name.insert("enum".to_owned(), json!(agents));
    }
}

/// The first sentence of `text` (up to its first full stop followed by a space), or all of it.
fn first_sentence(text: &str) -> &str {
    text.find(". ").map_or(text, |end| &text[..=end])
}

/// Removes the `description` and `default` keywords from every schema under `schema` (not a
/// property that happens to be called so): what an argument is for and what it is when left out
/// are the full profile's; the compact one keeps names, types and forms.
fn strip_descriptions(schema: &mut Value) {
    let Value::Object(object) = schema else {
        return;
    };
    object.remove("description");
    object.remove("default");
    for (key, inner) in object.iter_mut() {
        match (key.as_str(), inner) {
            ("properties", Value::Object(properties)) => {
                properties.values_mut().for_each(strip_descriptions);
            }
            (_, Value::Array(items)) => items.iter_mut().for_each(strip_descriptions),
            (_, inner @ Value::Object(_)) => strip_descriptions(inner),
            _ => {}
        }
    }
}

/// A tool's schema as other programs take it (the API's `parameters`, an MCP tool's
/// `inputSchema`): without flycode's `x-flycode-*` annotations and the document keys
/// `$schema`/`title`, and, for a client of a set without background jobs (`tools` is the set's
/// whole list), without the arguments of the extended set only (`background`, `pty`), which it
/// would be refused.
pub fn api_parameters(tool: ToolName, tools: &[ToolName]) -> Value {
    api_schema(&tool_schema(tool).document, true, offers_jobs(tools))
}

/// Whether a client offered `tools` may start background jobs: the extended set's arguments
/// (`x-flycode-extended`) are for it.
fn offers_jobs(tools: &[ToolName]) -> bool {
    tools.contains(&ToolName::JobLog)
}

/// The tool of `set` a native function name stands for.
pub fn tool_for_function(name: &str, set: ToolSet) -> Option<ToolName> {
    ToolName::from_native_name(name, set)
}

fn api_schema(value: &Value, is_top: bool, extended: bool) -> Value {
    let is_extended_only =
        |property: &Value| property.get("x-flycode-extended") == Some(&Value::Bool(true));
    match value {
        Value::Object(object) => {
            let mut kept = Map::new();
            for (key, inner) in object {
                let is_annotation = key.starts_with("x-flycode");
                let is_document_key = is_top && matches!(key.as_str(), "$schema" | "title");
                // A property literally named like a keyword must stay: only strip keywords.
                let in_properties = key == "properties";
                if is_annotation || is_document_key {
                    continue;
                }
                let inner = if in_properties {
                    match inner {
                        Value::Object(properties) => Value::Object(
                            properties
                                .iter()
                                .filter(|(_, p)| extended || !is_extended_only(p))
                                .map(|(name, p)| (name.clone(), api_schema(p, false, extended)))
                                .collect(),
                        ),
                        other => other.clone(),
                    }
                } else {
                    api_schema(inner, false, extended)
                };
                kept.insert(key.clone(), inner);
            }
            Value::Object(kept)
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| api_schema(v, false, extended))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_task_offers_a_name_only_among_the_predefined_agents_there_are() {
        let name_of = |agents: &[String]| {
            native_tool_definitions(&[ToolName::AgentTask], PromptProfile::Full, agents)[0]
                ["function"]["parameters"]["properties"]["name"]
                .clone()
        };
        assert_eq!(name_of(&[]), Value::Null, "no agents: no name to invent");
        let named = name_of(&["reviewer".to_owned(), "tester".to_owned()]);
        assert_eq!(named["enum"], json!(["reviewer", "tester"]));
        assert!(named.get("pattern").is_none());
    }

    #[test]
    fn every_agent_tool_is_a_function_with_its_schema() {
        let definitions = native_tool_definitions(ToolSet::Agent.tools(), PromptProfile::Full, &[]);
        assert_eq!(definitions.len(), ToolSet::Agent.tools().len());
        for definition in &definitions {
            let name = definition["function"]["name"].as_str().unwrap();
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
                "{name} has characters APIs refuse"
            );
            let tool = tool_for_function(name, ToolSet::Agent).unwrap();
            let parameters = &definition["function"]["parameters"];
            assert_eq!(parameters["type"], "object");
            assert_eq!(parameters["additionalProperties"], false);
            assert!(!parameters.to_string().contains("x-flycode"), "{tool}");
            assert!(parameters.get("description").is_none(), "{tool}: said once");
            assert_eq!(
                definition["function"]["description"].as_str(),
                Some(tool_schema(tool).description.as_str())
            );
            assert_eq!(
                parameters["required"],
                tool_schema(tool).document["required"],
                "{tool}"
            );
        }
    }

    #[test]
    fn the_compact_profile_keeps_names_types_and_required_but_no_descriptions() {
        let full = native_tool_definitions(&[ToolName::AgentTask], PromptProfile::Full, &[]);
        let compact = native_tool_definitions(&[ToolName::AgentTask], PromptProfile::Compact, &[]);
        let (full, compact) = (&full[0]["function"], &compact[0]["function"]);
        // The purpose in its first sentence.
        let (whole, first) = (
            full["description"].as_str().unwrap(),
            compact["description"].as_str().unwrap(),
        );
        assert!(whole.starts_with(first) && first.ends_with('.') && first.len() < whole.len());
        assert!(compact["parameters"].get("additionalProperties").is_none());
        assert!(!compact["parameters"].to_string().contains("\"default\""));
        assert_eq!(
            full["parameters"]["required"],
            compact["parameters"]["required"]
        );
        let properties = compact["parameters"]["properties"].as_object().unwrap();
        assert!(
            properties.contains_key("description"),
            "a property so named stays"
        );
        assert!(properties.values().all(|p| p.get("description").is_none()));
        assert!(compact.to_string().len() < full.to_string().len());
    }

    #[test]
    fn names_map_back_both_ways() {
        assert_eq!(
            tool_for_function("fs_writeBatch", ToolSet::Agent),
            Some(ToolName::FsWriteBatch)
        );
        assert_eq!(
            tool_for_function("agent_todo", ToolSet::Agent),
            Some(ToolName::AgentTodo)
        );
        assert_eq!(tool_for_function("fs_nope", ToolSet::Agent), None);
        assert_eq!(tool_for_function("agent_complete", ToolSet::Agent), None);
        assert_eq!(
            tool_for_function("agent_complete", ToolSet::All),
            Some(ToolName::AgentComplete)
        );
    }
}
