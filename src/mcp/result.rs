//! A call's result as MCP sends it (PROTOCOL.md §14 (The MCP server)): text content a model reads, plus
//! `structuredContent`, the same object `flycode exec --json` prints; a failure is
//! `isError: true` with its code, message and hint in the text.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::Value;

use crate::protocol::{ResultBlock, ToolName};
use crate::tools::secrets::Secrets;

/// The text a model reads: the block's body alone where the block has nothing else to say;
/// otherwise the failure's `[code]`, `[error]`, `[hint]` and the other headers (`[exitCode]`,
/// `[truncated]`...) as the result block writes them, then `[data]` and the body.
pub(crate) fn result_text(block: &ResultBlock) -> String {
    let mut head: Vec<String> = Vec::new();
    if !block.ok {
        for (key, value) in [
            ("code", &block.code),
            ("error", &block.error),
            ("hint", &block.hint),
        ] {
            if let Some(value) = value {
                head.push(format!("[{key}] {value}"));
            }
        }
    }
    head.extend(
        block
            .fields
            .iter()
            .map(|(key, value)| format!("[{key}] {value}")),
    );
    let body = block.body.as_deref().filter(|body| !body.is_empty());
    match (head.is_empty(), body) {
        (true, Some(body)) => body.to_owned(),
        (true, None) => "(done, no output)".to_owned(),
        (false, None) => head.join("\n"),
        (false, Some(body)) => format!("{}\n[data]\n{body}", head.join("\n")),
    }
}

/// The `CallToolResult` for a result block the server made itself (an unknown tool, arguments
/// the schema refuses), masked here (PROTOCOL.md §9 (Secrets and masking)): the block (id,
/// command, error, hint, headers, body) and the structured data.
pub(crate) fn call_tool_result(
    mut block: ResultBlock,
    tool: Option<ToolName>,
    mut data: Option<Value>,
    secrets: &Secrets,
) -> CallToolResult {
    secrets.mask_block(&mut block);
    if let Some(data) = &mut data {
        secrets.mask_value(data);
    }
    execution_result(block, tool, data)
}

/// The `CallToolResult` for a block and structured data the call service made (and masked, at
/// its one exit: not again here).
///
/// `structuredContent` is [`ResultBlock::report`]: what `flycode exec --json` prints without its
/// `text` member, since the whole block rendered again would repeat the body a third time (it is
/// in the text content and, for most tools, in `result`), tripling what a 1 MB read sends.
///
/// Takes the block: a body that is the whole text moves into it rather than being copied.
pub(crate) fn execution_result(
    mut block: ResultBlock,
    tool: Option<ToolName>,
    data: Option<Value>,
) -> CallToolResult {
    let text = if block.ok
        && block.fields.is_empty()
        && block.body.as_ref().is_some_and(|b| !b.is_empty())
    {
        block.body.take().unwrap_or_default()
    } else {
        result_text(&block)
    };
    let content = vec![ContentBlock::text(text)];
    let mut result = if block.ok {
        CallToolResult::success(content)
    } else {
        CallToolResult::error(content)
    };
    result.structured_content = Some(block.report(tool, data));
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ErrorCode;
    use serde_json::json;

    #[test]
    fn a_success_is_its_body_and_a_failure_names_code_message_and_hint() {
        let ok = ResultBlock::success(
            Some("c".into()),
            "/fs.read /w/a".into(),
            Some("hello\n".into()),
        );
        let result = call_tool_result(
            ok.clone(),
            Some(ToolName::FsRead),
            Some(json!({"size": 6})),
            &Secrets::default(),
        );
        assert_eq!(result.is_error, Some(false));
        assert_eq!(result_text(&ok), "hello\n");
        let structured = result.structured_content.unwrap();
        assert_eq!(structured["ok"], true);
        assert_eq!(structured["tool"], "fs.read");
        assert_eq!(structured["result"]["size"], 6);
        assert!(structured.get("text").is_none());

        let failed = ResultBlock::failure(
            Some("c".into()),
            "/fs.read /etc/passwd".into(),
            ErrorCode::OutsideRoots,
            "/etc/passwd is outside the allowed roots".into(),
            Some("use a path inside the roots".into()),
        );
        let result = call_tool_result(
            failed.clone(),
            Some(ToolName::FsRead),
            None,
            &Secrets::default(),
        );
        assert_eq!(result.is_error, Some(true));
        assert_eq!(
            result_text(&failed),
            "[code] outside_roots\n[error] /etc/passwd is outside the allowed roots\n[hint] use a path inside the roots"
        );
        assert_eq!(
            result.structured_content.unwrap()["error"]["code"],
            "outside_roots"
        );
    }

    #[test]
    fn an_answer_is_masked_in_its_text_and_its_structured_content() {
        let key = "sk-live-0123456789abcdef";
        let secrets = Secrets::from_values([key.to_owned()]);
        let failed = ResultBlock::failure(
            Some(format!("mcp-{key}")),
            format!("/fs.read /w/{key}"),
            ErrorCode::NotFound,
            format!("/w/{key} does not exist"),
            Some(format!("try {key}")),
        );
        let result = call_tool_result(
            failed,
            Some(ToolName::FsRead),
            Some(json!({"path": key, key: [key]})),
            &secrets,
        );
        let shown = serde_json::to_string(&result).unwrap();
        assert!(!shown.contains("sk-live"), "{shown}");
        assert!(shown.contains("/w/*** does not exist"), "{shown}");
        let structured = result.structured_content.unwrap();
        assert_eq!(structured["id"], "mcp-***");
        assert_eq!(structured["command"], "/fs.read /w/***");
        assert_eq!(structured["result"]["***"][0], "***");
        let ok = ResultBlock::success(None, "/fs.read /w/a".into(), Some(format!("{key}\n")));
        let result = call_tool_result(ok, Some(ToolName::FsRead), None, &secrets);
        let shown = serde_json::to_string(&result).unwrap();
        assert!(
            !shown.contains("sk-live") && shown.contains("***"),
            "{shown}"
        );
    }
}
