//! The agent's built system prompts: snapshots with a fixed context, and every example call of the
//! text-mode prompt is a valid call of the agent tool set.

use flycode::agent::prompt::{CallingMode, PromptContext, PromptOverrides, assemble_prompt};
use flycode::protocol::parse::{BlockKind, parse_reply};
use flycode::protocol::{ClassifyOptions, ToolName, ToolSet, Verdict, classify_reply};

fn built(mode: CallingMode) -> String {
    let context = PromptContext {
        working_directory: "/root/work/flycode".to_owned(),
        model_name: "gpt-4.1".to_owned(),
        os_info: "linux x86_64".to_owned(),
        current_date: "2025-06-01".to_owned(),
        roots: vec!["/root/work/flycode".to_owned(), "/root/notes".to_owned()],
        mode,
        tools: ToolSet::Agent,
    };
    assemble_prompt(&context, &PromptOverrides::default())
        .system
        .unwrap()
}

#[test]
fn every_example_call_in_the_text_mode_prompt_is_a_valid_agent_call() {
    let prompt = built(CallingMode::Text);
    let parsed = parse_reply(&prompt);
    let mut tools = Vec::new();
    for block in parsed.blocks.iter().filter(|b| b.kind == BlockKind::Call) {
        let reply = format!("```flycode-call\n{}```\n", block.content);
        let options = ClassifyOptions {
            tools: ToolSet::Agent,
            ..Default::default()
        };
        match classify_reply(&reply, options).verdict {
            Verdict::Call(call) => tools.push(call.tool),
            other => panic!("{reply}: {other:?}"),
        }
    }
    assert!(tools.contains(&ToolName::AgentTodo), "{tools:?}");
    assert!(tools.contains(&ToolName::AgentNote), "{tools:?}");
    assert!(tools.len() >= 3, "{tools:?}");
    assert!(
        !parsed.has_result_block(),
        "the prompt must not show a result block to copy"
    );
}

#[test]
fn the_native_mode_prompt_has_no_block_to_copy() {
    let parsed = parse_reply(&built(CallingMode::Native));
    assert!(parsed.blocks.is_empty(), "{:?}", parsed.blocks);
}

#[test]
fn agent_prompt_snapshots() {
    insta::assert_snapshot!("agent_prompt_text", built(CallingMode::Text));
    insta::assert_snapshot!("agent_prompt_native", built(CallingMode::Native));
}
