//! The tools as an MCP client sees them (`tools/list`): snake-case names, the tool schemas as
//! input schemas, the schema descriptions, and annotations saying what each tool may do.

use std::sync::Arc;

use rmcp::model::{Tool, ToolAnnotations};
use serde_json::Value;

use crate::agent::tools::api_parameters;
use crate::protocol::schema::tool_schema;
use crate::protocol::{ToolName, ToolSet};
use crate::tools::registry::is_read_only;

/// Every tool of `set`, in the whitelist's order.
pub(crate) fn tool_list(set: ToolSet) -> Vec<Tool> {
    set.tools()
        .iter()
        .map(|&tool| mcp_tool(tool, set))
        .collect()
}

/// One tool's MCP definition, as a client of `set` is offered it.
pub(crate) fn mcp_tool(tool: ToolName, set: ToolSet) -> Tool {
    let schema = tool_schema(tool);
    let input_schema = match api_parameters(tool, set.tools()) {
        Value::Object(object) => object,
        // Every schema file is an object (a test holds it); an empty object keeps the list valid.
        _ => serde_json::Map::new(),
    };
    Tool::new(
        tool.mcp_name(),
        schema.description.clone(),
        Arc::new(input_schema),
    )
    .with_title(tool.as_str())
    .with_annotations(annotations(tool))
}

/// What the tool may do (PROTOCOL.md §14 (The MCP server)): the read-only tools say so; the tools that replace,
/// remove, move or chmod files or run programs are destructive; the file tools never reach
/// beyond the machine's allowed roots (`openWorldHint: false`), programs may (the network).
pub(crate) fn annotations(tool: ToolName) -> ToolAnnotations {
    let read_only = is_read_only(tool);
    let runs_program = matches!(
        tool,
        ToolName::ProcessRun | ToolName::ShellExec | ToolName::JobInput
    );
    let destructive = runs_program
        || matches!(
            tool,
            ToolName::JobKill
                | ToolName::FsRm
                | ToolName::FsMv
                | ToolName::FsChmod
                | ToolName::FsWrite
                | ToolName::FsWriteBatch
                | ToolName::FsEdit
        );
    let mut annotations = ToolAnnotations::with_title(tool.as_str())
        .read_only(read_only)
        .destructive(destructive)
        .open_world(runs_program);
    if read_only {
        annotations = annotations.idempotent(true);
    }
    annotations
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_client_is_not_offered_the_extended_sets_arguments() {
        let properties = |set: ToolSet| {
            let tool = tool_list(set)
                .into_iter()
                .find(|tool| tool.name == "process_run")
                .unwrap();
            tool.input_schema["properties"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect::<Vec<_>>()
        };
        let seed = properties(ToolSet::Seed);
        assert!(seed.contains(&"command".to_owned()), "{seed:?}");
        assert!(!seed.contains(&"background".to_owned()) && !seed.contains(&"pty".to_owned()));
        let extended = properties(ToolSet::Extended);
        assert!(
            extended.contains(&"background".to_owned()) && extended.contains(&"pty".to_owned())
        );
    }

    #[test]
    fn names_schemas_and_annotations_follow_the_contract() {
        let tools = tool_list(ToolSet::Extended);
        assert_eq!(tools.len(), 22);
        for (tool, &name) in tools.iter().zip(ToolSet::Extended.tools()) {
            assert_eq!(tool.name, name.mcp_name());
            assert!(
                !Value::Object((*tool.input_schema).clone())
                    .to_string()
                    .contains("x-flycode")
            );
            assert_eq!(tool.input_schema["type"], "object");
            let hints = tool.annotations.as_ref().unwrap();
            assert_eq!(hints.read_only_hint, Some(is_read_only(name)), "{name}");
        }
        let hints = |tool: ToolName| annotations(tool);
        assert_eq!(hints(ToolName::FsWriteBatch).destructive_hint, Some(true));
        assert_eq!(hints(ToolName::ProcessRun).destructive_hint, Some(true));
        assert_eq!(hints(ToolName::FsMkdir).destructive_hint, Some(false));
        assert_eq!(hints(ToolName::FsRead).open_world_hint, Some(false));
        assert_eq!(hints(ToolName::ShellExec).open_world_hint, Some(true));
    }
}
