//! The agent's built system prompts, the main agent's and a sub-agent's: snapshots with a fixed
//! context, and every example call of a text-mode prompt is a valid call of its tool set.

use flycode::agent::prompt::{
    CallingMode, PromptContext, PromptOverrides, PromptProfile, assemble_prompt, subagent_role,
};
use flycode::protocol::parse::{BlockKind, parse_reply};
use flycode::protocol::{ClassifyOptions, ToolName, ToolSet, Verdict, classify_reply};
use flycode::tools::agent::SubagentType;

fn built(mode: CallingMode) -> String {
    built_for(mode, ToolSet::Agent, None)
}

fn built_for(mode: CallingMode, tools: ToolSet, role: Option<&str>) -> String {
    let context = PromptContext {
        working_directory: "/root/work/flycode".to_owned(),
        model_name: "gpt-4.1".to_owned(),
        os_info: "linux x86_64".to_owned(),
        current_date: "2025-06-01".to_owned(),
        roots: vec!["/root/work/flycode".to_owned(), "/root/notes".to_owned()],
        mode,
        tools,
        profile: PromptProfile::Full,
        insight: false,
    };
    let overrides = PromptOverrides {
        role: role.map(str::to_owned),
        ..PromptOverrides::default()
    };
    assemble_prompt(&context, &overrides).system.unwrap()
}

fn explore_child(mode: CallingMode) -> String {
    built_for(
        mode,
        ToolSet::Subagent,
        Some(subagent_role(SubagentType::Explore)),
    )
}

/// The tools of the example calls in `prompt`, each a valid call of `set`.
fn example_tools(prompt: &str, set: ToolSet) -> Vec<ToolName> {
    let parsed = parse_reply(prompt);
    assert!(
        !parsed.has_result_block(),
        "the prompt must not show a result block to copy"
    );
    let mut tools = Vec::new();
    for block in parsed.blocks.iter().filter(|b| b.kind == BlockKind::Call) {
        let reply = format!("```flycode-call\n{}```\n", block.content);
        let options = ClassifyOptions {
            tools: set,
            ..Default::default()
        };
        match classify_reply(&reply, options).verdict {
            Verdict::Call(call) => tools.push(call.tool),
            other => panic!("{reply}: {other:?}"),
        }
    }
    tools
}

#[test]
fn a_sub_agent_prompt_offers_only_its_tools_and_ends_with_agent_complete() {
    let prompt = explore_child(CallingMode::Text);
    let tools = example_tools(&prompt, ToolSet::Subagent);
    assert!(tools.contains(&ToolName::AgentComplete), "{tools:?}");
    for absent in [
        "fs.write",
        "fs.edit",
        "shell.exec",
        "process.run",
        "agent.task",
    ] {
        assert!(
            !prompt.contains(&format!("`{absent}`")),
            "{absent} is offered"
        );
    }
    assert!(
        prompt.starts_with("You are an exploring sub-agent"),
        "{prompt}"
    );
    assert!(prompt.contains("How you work as a sub-agent"));
    let native = explore_child(CallingMode::Native);
    assert!(native.contains("`agent_complete`"));
    assert!(!native.contains("`fs_edit`") && !native.contains("`agent_task`"));
}

#[test]
fn the_main_prompt_says_when_to_delegate() {
    for mode in [CallingMode::Text, CallingMode::Native] {
        let prompt = built(mode);
        assert!(prompt.contains("### Sub-agents"), "{prompt}");
        assert!(!prompt.contains("How you work as a sub-agent"));
    }
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
    insta::assert_snapshot!("subagent_prompt_text", explore_child(CallingMode::Text));
    insta::assert_snapshot!("subagent_prompt_native", explore_child(CallingMode::Native));
}
