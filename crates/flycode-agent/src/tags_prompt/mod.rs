//! The system prompt of the tag dialect (seed 000; PROTOCOL.md §9 (Hints and predefined agents:
//! the tag dialect's prompt)): the seed's text in Chinese, and its English translation, as
//! templates in `protocol/prompts/tags/`, filled by [`render_tags_prompt`]. `flycode prompt
//! --dialect tags` prints it, and `flycode run --dialect tags` sends it as the system prompt.
//!
//! The templates keep the seed's placeholder syntax (Python's `str.format`): `{tree_info}`,
//! `{predefined_section}` and `{hint_metadata}` are filled, `{{` and `}}` stand for single braces,
//! and anything else in braces is left as written. Filled in one pass: a value is never searched
//! for placeholders. Unlike [`super::prompt`], rendering reads the file system (the roots' trees,
//! git, the hint and agent folders).

pub mod tree;

use std::path::PathBuf;

use crate::protocol::prompt::PromptLanguage;
use flycode_core::tools::places::Places;

const TEMPLATE_ZH: &str = include_str!("../../../../protocol/prompts/tags/system.zh.md");
const TEMPLATE_EN: &str = include_str!("../../../../protocol/prompts/tags/system.en.md");

/// The tag dialect's system prompt in `language` for an agent working in `roots` (canonical
/// paths, the first the working folder), listing the predefined agents and hints of `places`.
///
/// `{tree_info}` is a tree of each root that honours `.gitignore`/`.ignore` and skips hidden
/// files, capped in depth and entries, with the git branch and status of a root that is a git
/// repository; `{predefined_section}` lists the predefined agents (name, description, tools);
/// `{hint_metadata}` lists the hints that `hint.load` can load.
pub fn render_tags_prompt(language: PromptLanguage, roots: &[PathBuf], places: &Places) -> String {
    let template = match language {
        PromptLanguage::Zh => TEMPLATE_ZH,
        PromptLanguage::En => TEMPLATE_EN,
    };
    render_tags_template(template, language, roots, places)
}

/// A tag-dialect prompt of the person's own (`run --system-prompt-file`, e.g. seed 000's as
/// written) with the placeholders of [`render_tags_prompt`] filled in `language`.
pub fn render_tags_template(
    template: &str,
    language: PromptLanguage,
    roots: &[PathBuf],
    places: &Places,
) -> String {
    let tree_info = tree::tree_info(language, roots);
    let predefined = predefined_section(language, places);
    let hints = hint_metadata(language, places);
    fill(template, &|name| match name {
        "tree_info" => Some(tree_info.clone()),
        "predefined_section" => Some(predefined.clone()),
        "hint_metadata" => Some(hints.clone()),
        _ => None,
    })
}

/// `template` with `{name}` replaced by `value(name)` where it has one, `{{` and `}}` made single.
fn fill(template: &str, value: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(template.len() + 1024);
    let mut rest = template;
    while let Some(at) = rest.find(['{', '}']) {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if tail.starts_with("{{") || tail.starts_with("}}") {
            out.push_str(&tail[..1]);
            rest = &tail[2..];
            continue;
        }
        if tail.starts_with('{')
            && let Some(end) = tail.find('}')
            && let Some(filled) = value(&tail[1..end])
        {
            out.push_str(&filled);
            rest = &tail[end + 1..];
            continue;
        }
        out.push_str(&tail[..1]);
        rest = &tail[1..];
    }
    out.push_str(rest);
    out
}

fn predefined_section(language: PromptLanguage, places: &Places) -> String {
    let agents = super::predefined::available_agents(places);
    let (heading, none, tools_word) = match language {
        PromptLanguage::Zh => (
            "**预定义 Agent（<create_agent name=名称> 可用）：**",
            "（当前没有预定义 Agent）",
            "工具",
        ),
        PromptLanguage::En => (
            "**Predefined agents (for <create_agent name=NAME>):**",
            "(no predefined agents here)",
            "tools",
        ),
    };
    if agents.is_empty() {
        return format!("{heading}\n{none}");
    }
    let lines: Vec<String> = agents
        .iter()
        .map(|agent| {
            let tools = agent.tools.as_ref().map_or_else(String::new, |tools| {
                let names: Vec<&str> = tools.iter().map(|t| t.as_str()).collect();
                format!(" ({tools_word}: {})", names.join(", "))
            });
            format!("- {}: {}{tools}", agent.name, one_line(&agent.description))
        })
        .collect();
    format!("{heading}\n{}", lines.join("\n"))
}

fn hint_metadata(language: PromptLanguage, places: &Places) -> String {
    let hints = flycode_core::tools::hint::available_hints(places);
    let (heading, none) = match language {
        PromptLanguage::Zh => ("**可加载的 hint：**", "（当前没有可加载的 hint）"),
        PromptLanguage::En => ("**Hints you can load:**", "(no hints here)"),
    };
    if hints.is_empty() {
        return format!("{heading}\n{none}");
    }
    let lines: Vec<String> = hints
        .iter()
        .map(|hint| format!("- {}: {}", hint.name, one_line(&hint.summary)))
        .collect();
    format!("{heading}\n{}", lines.join("\n"))
}

/// `text` on one line, control characters dropped: a file's words never start a new line of
/// the prompt.
fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>()
        .trim()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_known_placeholders_once_and_unescapes_braces() {
        let value = |name: &str| (name == "a").then(|| "{b} {{x}}".to_owned());
        assert_eq!(
            fill("[{a}] {{print $0}} {c} }", &value),
            "[{b} {{x}}] {print $0} {c} }"
        );
    }

    proptest::proptest! {
        /// Any text fills without a panic, and text without braces comes back unchanged.
        #[test]
        fn filling_never_panics_and_keeps_plain_text(text in "\\PC{0,80}") {
            let value = |_: &str| Some("V".to_owned());
            let filled = fill(&text, &value);
            if !text.contains(['{', '}']) {
                proptest::prop_assert_eq!(filled, text);
            }
        }
    }

    #[test]
    fn both_templates_hold_every_placeholder() {
        for template in [TEMPLATE_ZH, TEMPLATE_EN] {
            for name in ["{tree_info}", "{predefined_section}", "{hint_metadata}"] {
                assert_eq!(template.matches(name).count(), 1, "{name}");
            }
        }
    }
}
