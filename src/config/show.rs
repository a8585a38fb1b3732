//! The effective settings, each with where its value comes from (`flycode config`), and the one
//! notice that names the settings of an untrusted project file that were not applied
//! (PROTOCOL.md §10 "Configuration"). Text is built here; the command line prints it.

use std::path::Path;

use super::Config;
use super::file::Key;
use super::layers::Layers;
use super::setting::Source;
use crate::protocol::DEFAULT_BODY_CAP;

/// One effective setting.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The key as written in a file: `approval`, `[agent] model`.
    pub key: String,
    /// Its effective value (for a key variable, its name only: never a secret).
    pub value: toml::Value,
    /// Where it comes from: `flag --approve`, `variable FLYCODE_MODEL`, `FILE:LINE`, `default`,
    /// or `ignored: untrusted project file FILE:LINE (why)`.
    pub source: String,
}

/// The defaults of the settings that have one, as a file would write them.
fn defaults() -> Vec<(Key, toml::Value)> {
    let number = |n: usize| toml::Value::Integer(i64::try_from(n).unwrap_or(i64::MAX));
    let mut list = vec![
        (Key::of(&["approval"]), "ask".into()),
        (Key::of(&["protected"]), toml::Value::Array(Vec::new())),
        (Key::of(&["output_cap"]), number(DEFAULT_BODY_CAP)),
        (
            Key::of(&["max_reply_bytes"]),
            number(super::reply_limit::DEFAULT_MAX_REPLY_BYTES),
        ),
        (Key::of(&["timeout_ms"]), 60_000.into()),
        (Key::of(&["tools", "set"]), "seed".into()),
        (Key::of(&["process_sandbox"]), "workspace-write".into()),
        (Key::of(&["process_network"]), true.into()),
        (Key::of(&["secret_env"]), toml::Value::Array(Vec::new())),
    ];
    let agent: [(&str, toml::Value); 15] = [
        ("mode", "native".into()),
        ("max_turns", 50.into()),
        ("max_violations", 3.into()),
        ("max_parallel", 4.into()),
        ("stream", true.into()),
        ("connect_timeout_ms", 10_000.into()),
        ("read_timeout_ms", 120_000.into()),
        ("max_retries", 4.into()),
        ("retry_base_ms", 500.into()),
        ("system_prompt", true.into()),
        ("max_tasks_per_run", 32.into()),
        ("max_tasks_per_agent", 16.into()),
        ("subagent_max_turns", 30.into()),
        ("subagent_timeout_ms", 600_000.into()),
        ("strict", false.into()),
    ];
    list.extend(
        agent
            .into_iter()
            .map(|(key, value)| (Key::of(&["agent", key]), value)),
    );
    list
}

/// The variables that override a key of `[agent]` (PROTOCOL.md §13), first set one wins.
/// (`[agent] api_key_env` is not among them: a file naming the key variable wins over
/// `FLYCODE_API_KEY`, which [`rows`] shows when no file names one.)
const VARIABLES: [(&[&str], &[&str]); 5] = [
    (
        &["agent", "base_url"],
        &["FLYCODE_BASE_URL", "OPENAI_BASE_URL"],
    ),
    (&["agent", "model"], &["FLYCODE_MODEL"]),
    (&["agent", "light", "model"], &["LIGHT_LLM_MODEL_ID"]),
    (&["agent", "light", "base_url"], &["LIGHT_LLM_BASE_URL"]),
    (&["agent", "light", "api_key_env"], &["LIGHT_LLM_API_KEY"]),
];

fn source_text(sources: &[Source]) -> String {
    sources
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every effective setting of `config`, then what was ignored; `env` looks a variable up.
pub fn rows(config: &Config, cwd: &Path, env: &dyn Fn(&str) -> Option<String>) -> Vec<Row> {
    let layers = &config.layers;
    let flags = &config.flags;
    let mut rows = Vec::new();
    let strings = |items: Vec<String>| {
        toml::Value::Array(items.into_iter().map(toml::Value::String).collect())
    };
    let paths = |items: &[std::path::PathBuf]| {
        strings(items.iter().map(|p| p.display().to_string()).collect())
    };
    rows.push(if !flags.roots.is_empty() {
        Row {
            key: "roots".into(),
            value: paths(&flags.roots),
            source: "flag --root".into(),
        }
    } else if let Some(applied) = layers.settings.get(&Key::of(&["roots"])) {
        Row {
            key: "roots".into(),
            value: paths(&config.roots),
            source: source_text(&applied.sources),
        }
    } else {
        Row {
            key: "roots".into(),
            value: paths(&[cwd.to_owned()]),
            source: "default (the working directory)".into(),
        }
    });
    let flagged = |key: &Key| -> Option<(toml::Value, &str)> {
        if key.is(&["approval"]) {
            return flags
                .approval
                .map(|a| (toml::Value::String(a.as_str().into()), "flag --approve"));
        }
        if key.is(&["tools", "set"]) {
            return flags
                .tool_set
                .map(|set| (toml::Value::String(set.as_str().into()), "flag --tools"));
        }
        None
    };
    let variable = |key: &Key, names: &[&str]| -> Option<(toml::Value, String)> {
        let (name, value) = names.iter().find_map(|name| {
            env(name)
                .filter(|v| !v.trim().is_empty())
                .map(|value| (*name, value))
        })?;
        let value = if name.ends_with("_KEY") || key.0.last().is_some_and(|k| k == "api_key_env") {
            format!("(the key in {name})")
        } else {
            value
        };
        Some((toml::Value::String(value), format!("variable {name}")))
    };
    let overridden = |key: &Key| {
        VARIABLES
            .iter()
            .find(|(k, _)| key.is(k))
            .and_then(|(_, names)| variable(key, names))
    };
    let mut shown = std::collections::BTreeSet::new();
    for (key, default) in defaults() {
        shown.insert(key.clone());
        let (value, source) = if let Some((value, flag)) = flagged(&key) {
            (value, flag.to_owned())
        } else if let Some(found) = overridden(&key) {
            found
        } else if let Some(applied) = layers.settings.get(&key) {
            (applied.value.clone(), source_text(&applied.sources))
        } else {
            (default, "default".to_owned())
        };
        let is_tool_set = key.is(&["tools", "set"]);
        rows.push(Row {
            key: key.to_string(),
            value,
            source,
        });
        if is_tool_set {
            // The per-tool rules right under the set they belong with.
            for (key, applied) in layers
                .settings
                .iter()
                .filter(|(key, _)| key.tool().is_some())
            {
                shown.insert(key.clone());
                rows.push(Row {
                    key: key.to_string(),
                    value: applied.value.clone(),
                    source: source_text(&applied.sources),
                });
            }
        }
    }
    for (key, applied) in &layers.settings {
        if shown.contains(key) || key.is(&["roots"]) {
            continue;
        }
        let (value, source) = overridden(key)
            .unwrap_or_else(|| (applied.value.clone(), source_text(&applied.sources)));
        rows.push(Row {
            key: key.to_string(),
            value,
            source,
        });
        shown.insert(key.clone());
    }
    let main_key: (&[&str], &[&str]) = (
        &["agent", "api_key_env"],
        &["FLYCODE_API_KEY", "OPENAI_API_KEY"],
    );
    for (key, names) in VARIABLES.into_iter().chain([main_key]) {
        let key = Key::of(key);
        if shown.contains(&key) {
            continue;
        }
        if let Some((value, source)) = variable(&key, names) {
            rows.push(Row {
                key: key.to_string(),
                value,
                source,
            });
        }
    }
    if let Some(dir) = crate::sandbox::state::state_dir() {
        rows.push(Row {
            key: "state directory".into(),
            value: toml::Value::String(dir.display().to_string()),
            source: if env("FLYCODE_STATE_DIR").is_some() {
                "variable FLYCODE_STATE_DIR".into()
            } else {
                "default".into()
            },
        });
    }
    for ignored in &layers.ignored {
        rows.push(Row {
            key: ignored.key.to_string(),
            value: ignored.value.clone(),
            source: format!(
                "ignored: untrusted project file {}:{} ({})",
                ignored.path.display(),
                ignored.line,
                ignored.why
            ),
        });
    }
    rows
}

/// The notice naming each setting of the untrusted project file that was not applied, with its
/// line, and the command that trusts the folder; `None` when nothing was ignored.
pub fn notice(layers: &Layers) -> Option<String> {
    let first = layers.ignored.first()?;
    let (_, dir, _) = layers.project()?;
    let mut text = format!(
        "flycode: the project file {} is not trusted, so {} of its settings {} ignored (each would loosen safety):\n",
        first.path.display(),
        layers.ignored.len(),
        if layers.ignored.len() == 1 {
            "was"
        } else {
            "were"
        },
    );
    for ignored in &layers.ignored {
        text.push_str(&format!(
            "  {}:{}: {} = {} ({})\n",
            ignored.path.display(),
            ignored.line,
            ignored.key,
            ignored.value,
            ignored.why
        ));
    }
    text.push_str(&format!(
        "flycode: if you trust this folder's flycode.toml, review it and run: {}",
        trust_command(dir)
    ));
    Some(text)
}

/// The notice in brief, for a model's eyes (the MCP server's instructions): which settings were
/// ignored and where, never their values, which the untrusted file chose.
pub fn brief_notice(layers: &Layers) -> Option<String> {
    let first = layers.ignored.first()?;
    let (_, dir, _) = layers.project()?;
    let settings = layers
        .ignored
        .iter()
        .map(|ignored| format!("{} (line {})", ignored.key, ignored.line))
        .collect::<Vec<_>>()
        .join(", ");
    let text = format!(
        "Configuration: the project file {} is not trusted, so these settings of it were ignored: {settings}. Only the person can trust it ({}).",
        first.path.display(),
        trust_command(dir)
    );
    Some(crate::protocol::display::escape_for_display(&text).into_owned())
}

/// `flycode trust DIR`, the folder quoted for a POSIX shell when it needs it.
pub fn trust_command(dir: &Path) -> String {
    let text = dir.display().to_string();
    let plain = text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+,:@%".contains(c));
    if plain {
        format!("flycode trust {text}")
    } else {
        format!("flycode trust '{}'", text.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trust_command_quotes_what_a_shell_would_split() {
        assert_eq!(trust_command(Path::new("/a/b")), "flycode trust /a/b");
        assert_eq!(
            trust_command(Path::new("/a b/it's")),
            "flycode trust '/a b/it'\\''s'"
        );
    }
}
