use super::*;
use crate::protocol::ToolName;

fn context(mode: CallingMode) -> PromptContext {
    PromptContext {
        working_directory: "/srv/app".to_owned(),
        model_name: "gpt-test-1".to_owned(),
        os_info: "linux x86_64".to_owned(),
        current_date: "2025-03-14".to_owned(),
        roots: vec!["/srv/app".to_owned(), "/srv/shared".to_owned()],
        mode,
        tools: ToolSet::Agent,
        profile: PromptProfile::Full,
        insight: false,
    }
}

fn built(mode: CallingMode) -> String {
    assemble_prompt(&context(mode), &PromptOverrides::default())
        .system
        .unwrap()
}

#[test]
fn text_mode_names_every_agent_tool_by_its_protocol_name() {
    let prompt = built(CallingMode::Text);
    for tool in ToolSet::Agent.tools() {
        assert!(prompt.contains(&format!("`{}`", tool.as_str())), "{tool}");
    }
    assert!(prompt.contains("flycode-call"));
    assert!(prompt.contains("`items[].status`"), "the todo arguments");
}

#[test]
fn native_mode_names_every_agent_tool_by_its_function_name_and_shows_no_block_syntax() {
    let prompt = built(CallingMode::Native);
    for tool in ToolSet::Agent.tools() {
        assert!(
            prompt.contains(&format!("`{}`", tool.native_name())),
            "{tool}"
        );
    }
    assert!(!prompt.contains("flycode-call"));
    assert!(!prompt.contains(&format!("`{}`", ToolName::FsRead.as_str())));
}

#[test]
fn both_modes_explain_the_memory_tools_and_the_inserted_messages() {
    for mode in [CallingMode::Text, CallingMode::Native] {
        let prompt = built(mode);
        for needle in ["TODO list", "AGENTS.md", "FLYCODE.md", "[flycode]"] {
            assert!(prompt.contains(needle), "{mode:?}: {needle}");
        }
    }
}

#[test]
fn the_built_prompt_holds_the_modules_in_order_and_the_environment() {
    for mode in [CallingMode::Text, CallingMode::Native] {
        let prompt = built(mode);
        let order = [
            "You are flycode's agent",
            "## Capabilities",
            "## Tools",
            "## Output style",
            "## Environment",
        ];
        let positions: Vec<usize> = order.iter().map(|m| prompt.find(m).unwrap()).collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{mode:?}");
        for value in [
            "`/srv/app`",
            "gpt-test-1",
            "linux x86_64",
            "2025-03-14",
            "- `/srv/shared`",
        ] {
            assert!(prompt.contains(value), "{mode:?}: {value}");
        }
        assert!(!prompt.contains("{{"), "{mode:?}: a placeholder is left");
    }
}

#[test]
fn the_role_definition_is_the_filled_role_module() {
    let assembled = assemble_prompt(&context(CallingMode::Text), &PromptOverrides::default());
    assert!(
        assembled
            .role_definition
            .starts_with("You are flycode's agent")
    );
    assert!(assembled.role_definition.contains("`/srv/app`"));
    assert!(
        assembled
            .system
            .unwrap()
            .starts_with(assembled.role_definition.trim_end())
    );
}

#[test]
fn a_replaced_role_is_filled_and_used_in_the_built_prompt() {
    let overrides = PromptOverrides {
        role: Some(
            "You review code for {{model_name}} in {{working_directory}}; {{mystery}}.".into(),
        ),
        system: SystemPromptSource::Built,
    };
    let assembled = assemble_prompt(&context(CallingMode::Native), &overrides);
    assert_eq!(
        assembled.role_definition,
        "You review code for gpt-test-1 in /srv/app; {{mystery}}."
    );
    let system = assembled.system.unwrap();
    assert!(system.starts_with("You review code for gpt-test-1"));
    assert!(!system.contains("You are flycode's agent"));
}

#[test]
fn a_custom_system_prompt_is_filled_and_replaces_every_module() {
    let overrides = PromptOverrides {
        role: None,
        system: SystemPromptSource::Custom(
            "Work in {{working_directory}} on {{os_info}} ({{current_date}}, {{model_name}}).\nRoots:\n{{roots}}\n{{unknown}}".into(),
        ),
    };
    let assembled = assemble_prompt(&context(CallingMode::Text), &overrides);
    assert_eq!(
        assembled.system.as_deref(),
        Some(
            "Work in /srv/app on linux x86_64 (2025-03-14, gpt-test-1).\nRoots:\n- `/srv/app`\n- `/srv/shared`\n{{unknown}}"
        )
    );
    assert!(
        assembled
            .role_definition
            .starts_with("You are flycode's agent")
    );
}

#[test]
fn no_system_prompt_leaves_only_the_role_definition() {
    let overrides = PromptOverrides {
        role: None,
        system: SystemPromptSource::None,
    };
    let assembled = assemble_prompt(&context(CallingMode::Text), &overrides);
    assert_eq!(assembled.system, None);
    assert!(!assembled.role_definition.is_empty());
}

#[test]
fn windows_roots_are_escaped_in_the_example_calls() {
    let mut context = context(CallingMode::Text);
    context.roots = vec![r"C:\work\app".to_owned()];
    let prompt = assemble_prompt(&context, &PromptOverrides::default())
        .system
        .unwrap();
    assert!(prompt.contains(r#""path":"C:\\work\\app/README.md""#));
}

#[test]
fn os_info_names_the_os_and_the_architecture() {
    assert_eq!(
        os_info(),
        format!("{} {}", std::env::consts::OS, std::env::consts::ARCH)
    );
}

#[test]
fn the_compact_profile_is_shorter_names_every_tool_and_shows_no_example() {
    for mode in [CallingMode::Text, CallingMode::Native] {
        let full = built(mode);
        let compact = assemble_prompt(
            &PromptContext {
                profile: PromptProfile::Compact,
                ..context(mode)
            },
            &PromptOverrides::default(),
        )
        .system
        .unwrap();
        assert!(
            compact.len() * 4 < full.len() * 3,
            "{mode:?}: {} vs {}",
            compact.len(),
            full.len()
        );
        for tool in ToolSet::Agent.tools() {
            let name = match mode {
                CallingMode::Text => tool.as_str().to_owned(),
                CallingMode::Native => tool.native_name(),
            };
            assert!(compact.contains(&name), "{mode:?}: {tool}");
        }
        assert!(!compact.contains("call-002"), "{mode:?}: no examples");
        assert!(
            compact.contains("[flycode]"),
            "{mode:?}: the special messages"
        );
        assert!(compact.contains("/srv/app"), "{mode:?}: the environment");
    }
}

#[test]
fn the_insight_module_is_off_by_default_and_added_by_its_setting() {
    assert!(!built(CallingMode::Native).contains("★ Insight"));
    let with = assemble_prompt(
        &PromptContext {
            insight: true,
            ..context(CallingMode::Native)
        },
        &PromptOverrides::default(),
    )
    .system
    .unwrap();
    assert!(with.contains("★ Insight"));
}
