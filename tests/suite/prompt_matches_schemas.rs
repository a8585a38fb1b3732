//! The generated prompt and the schemas name exactly the same tools and arguments, and every
//! example call in the prompt is a valid call.

use std::collections::BTreeSet;

use flycode::protocol::parse::{BlockKind, parse_reply};
use flycode::protocol::prompt::{PromptLanguage, chat_prompt};
use flycode::protocol::schema::tool_schema;
use flycode::protocol::{ClassifyOptions, ToolName, Verdict, classify_reply};

fn prompts() -> Vec<String> {
    [PromptLanguage::Zh, PromptLanguage::En]
        .into_iter()
        .map(|language| chat_prompt(language, &["/root/work/flycode".to_owned()]))
        .collect()
}

/// Argument names documented under each tool's heading: lines "- `name` (...)".
fn documented_arguments(prompt: &str, tool: ToolName) -> BTreeSet<String> {
    let heading = format!(". `{tool}` — ");
    let start = prompt
        .find(&heading)
        .unwrap_or_else(|| panic!("no section for {tool}"));
    let section = &prompt[start..];
    let end = section[heading.len()..]
        .find("\n\n")
        .map_or(section.len(), |i| i + heading.len());
    section[..end]
        .lines()
        .filter_map(|line| line.strip_prefix("- `"))
        .filter_map(|rest| rest.split_once("` ("))
        .map(|(name, _)| name.to_owned())
        .collect()
}

fn schema_arguments(tool: ToolName) -> BTreeSet<String> {
    let schema = &tool_schema(tool).document;
    let mut names = BTreeSet::new();
    for (name, property) in schema["properties"].as_object().unwrap() {
        // The extended set's own arguments (`background`, `pty`) are not the seed prompt's.
        if property["x-flycode-extended"] == true {
            continue;
        }
        names.insert(name.clone());
        if let Some(items) = property["items"]["properties"].as_object() {
            names.extend(items.keys().map(|inner| format!("{name}[].{inner}")));
        }
    }
    names
}

#[test]
fn the_prompt_documents_exactly_the_schemas_arguments() {
    for prompt in prompts() {
        for tool in ToolName::ALL {
            assert_eq!(
                documented_arguments(&prompt, tool),
                schema_arguments(tool),
                "{tool}"
            );
        }
    }
}

#[test]
fn every_tool_name_in_the_prompt_is_a_real_tool_and_all_are_listed() {
    let pattern = regex_lite_tool_names();
    for prompt in prompts() {
        let named: BTreeSet<&str> = pattern(&prompt);
        let real: BTreeSet<&str> = ToolName::ALL.iter().map(|t| t.as_str()).collect();
        // read.file appears only as the counter-example of an invalid tool name.
        let named: BTreeSet<&str> = named.into_iter().filter(|n| *n != "read.file").collect();
        assert_eq!(named, real);
    }
}

/// Backticked or quoted words that look like tool names (`x.y`, lowercase start).
fn regex_lite_tool_names() -> impl Fn(&str) -> BTreeSet<&str> {
    |prompt: &str| {
        let mut names = BTreeSet::new();
        for piece in prompt.split(['`', '"', '/', ' ', '\n', '(', ')', ',', '，', '：']) {
            let mut parts = piece.split('.');
            let (Some(group), Some(verb), None) = (parts.next(), parts.next(), parts.next()) else {
                continue;
            };
            let is_word = |w: &str| !w.is_empty() && w.chars().all(|c| c.is_ascii_alphabetic());
            if is_word(group)
                && is_word(verb)
                && ["fs", "process", "shell", "read"].contains(&group)
            {
                names.insert(piece);
            }
        }
        names
    }
}

#[test]
fn every_example_call_in_the_prompt_is_valid() {
    for prompt in prompts() {
        let parsed = parse_reply(&prompt);
        let calls: Vec<_> = parsed
            .blocks
            .iter()
            .filter(|b| b.kind == BlockKind::Call)
            .collect();
        assert!(calls.len() >= 14, "only {} example calls", calls.len());
        for block in calls {
            let reply = format!("```flycode-call\n{}```\n", block.content);
            let verdict = classify_reply(&reply, ClassifyOptions::default()).verdict;
            assert!(matches!(verdict, Verdict::Call(_)), "{reply}: {verdict:?}");
        }
        assert!(
            !parsed.has_result_block(),
            "the prompt must not show a result block to copy"
        );
    }
}

#[test]
fn prompt_snapshots() {
    let [zh, en] = <[String; 2]>::try_from(prompts()).unwrap();
    insta::assert_snapshot!("prompt_zh", zh);
    insta::assert_snapshot!("prompt_en", en);
}
