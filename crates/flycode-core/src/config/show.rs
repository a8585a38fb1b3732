//! The effective settings, each with where its value comes from (`flycode config`), and the one
//! notice that names the settings of an untrusted project file that were not applied
//! (PROTOCOL.md §10 "Configuration"). Text is built here; the command line prints it.

use std::collections::BTreeSet;
use std::path::Path;

use super::Config;
use super::file::Key;
use super::layers::Layers;
use super::setting::SettingSource;

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

/// The defaults of the settings that have one, as a file would write them, in the settings
/// table's order.
fn defaults() -> Vec<(Key, toml::Value)> {
    super::table::SETTINGS
        .iter()
        .filter(|setting| !setting.key.contains(&super::table::ANY))
        .filter_map(|setting| {
            let value = setting.default.value()?;
            Some((Key::of(setting.key), value))
        })
        .collect()
}

/// The variables that override a key of `[agent]` (PROTOCOL.md §13), first set one wins.
/// (`[agent] api_key_env` is not among them: a file naming the key variable wins over
/// `FLYCODE_API_KEY`, which [`rows`] shows when no file names one.)
const VARIABLES: [(&[&str], &[&str]); 5] = [
    (
        &["agent", "base_url"],
        &["FLYCODE_BASE_URL", "LLM_BASE_URL", "OPENAI_BASE_URL"],
    ),
    (&["agent", "model"], &["FLYCODE_MODEL", "LLM_MODEL_ID"]),
    (&["agent", "light", "model"], &["LIGHT_LLM_MODEL_ID"]),
    (&["agent", "light", "base_url"], &["LIGHT_LLM_BASE_URL"]),
    (&["agent", "light", "api_key_env"], &["LIGHT_LLM_API_KEY"]),
];

fn source_text(sources: &[SettingSource]) -> String {
    sources
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every effective setting of `config`, then what was ignored; `env` looks a variable up.
pub fn rows(config: &Config, cwd: &Path, env: &dyn Fn(&str) -> Option<String>) -> Vec<Row> {
    let mut table = Table {
        config,
        env,
        rows: vec![roots_row(config, cwd)],
        shown: BTreeSet::new(),
    };
    table.push_defaulted();
    table.push_other_file_settings();
    table.push_other_variables();
    table.push_state_dir();
    table.push_ignored();
    table.rows
}

/// The rows so far and the keys they show.
struct Table<'a> {
    config: &'a Config,
    env: &'a dyn Fn(&str) -> Option<String>,
    rows: Vec<Row>,
    shown: BTreeSet<Key>,
}

impl Table<'_> {
    fn push(&mut self, key: String, value: toml::Value, source: String) {
        self.rows.push(Row { key, value, source });
    }

    /// The settings that have a default, each from the flag, the variable, the files or the
    /// default, first found; the per-tool rules right under the tool set.
    fn push_defaulted(&mut self) {
        let layers = &self.config.layers;
        for (key, default) in defaults() {
            self.shown.insert(key.clone());
            let (value, source) = if let Some((value, flag)) = flagged(&self.config.flags, &key) {
                (value, flag.to_owned())
            } else if let Some(found) = overridden(self.env, &key) {
                found
            } else if let Some(applied) = layers.settings.get(&key) {
                (applied.value.clone(), source_text(&applied.sources))
            } else {
                (default, "default".to_owned())
            };
            self.push(key.to_string(), value, source);
            if key.is(&["tools", "set"]) {
                self.push_tool_rules();
            }
        }
    }

    fn push_tool_rules(&mut self) {
        let layers = &self.config.layers;
        for (key, applied) in layers
            .settings
            .iter()
            .filter(|(key, _)| key.tool().is_some())
        {
            self.shown.insert(key.clone());
            self.push(
                key.to_string(),
                applied.value.clone(),
                source_text(&applied.sources),
            );
        }
    }

    /// The files' settings without a default (`roots` has its own row).
    fn push_other_file_settings(&mut self) {
        let layers = &self.config.layers;
        for (key, applied) in &layers.settings {
            if self.shown.contains(key) || key.is(&["roots"]) {
                continue;
            }
            let (value, source) = overridden(self.env, key)
                .unwrap_or_else(|| (applied.value.clone(), source_text(&applied.sources)));
            self.push(key.to_string(), value, source);
            self.shown.insert(key.clone());
        }
    }

    /// The variables that set a key no file or default shows.
    fn push_other_variables(&mut self) {
        let main_key: (&[&str], &[&str]) = (
            &["agent", "api_key_env"],
            &["FLYCODE_API_KEY", "LLM_API_KEY", "OPENAI_API_KEY"],
        );
        for (key, names) in VARIABLES.into_iter().chain([main_key]) {
            let key = Key::of(key);
            if self.shown.contains(&key) {
                continue;
            }
            if let Some((value, source)) = variable(self.env, &key, names) {
                self.push(key.to_string(), value, source);
            }
        }
    }

    fn push_state_dir(&mut self) {
        if let Some(dir) = crate::sandbox::state::state_dir() {
            let source = if (self.env)("FLYCODE_STATE_DIR").is_some() {
                "variable FLYCODE_STATE_DIR"
            } else {
                "default"
            };
            self.push(
                "state directory".into(),
                toml::Value::String(dir.display().to_string()),
                source.into(),
            );
        }
    }

    fn push_ignored(&mut self) {
        for ignored in &self.config.layers.ignored {
            self.rows.push(Row {
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
    }
}

/// `roots`: the flags', else the files', else the working directory.
fn roots_row(config: &Config, cwd: &Path) -> Row {
    let paths = |items: &[std::path::PathBuf]| {
        toml::Value::Array(
            items
                .iter()
                .map(|p| toml::Value::String(p.display().to_string()))
                .collect(),
        )
    };
    let (value, source) = if !config.flags.roots.is_empty() {
        (paths(&config.flags.roots), "flag --root".to_owned())
    } else if let Some(applied) = config.layers.settings.get(&Key::of(&["roots"])) {
        (paths(&config.roots), source_text(&applied.sources))
    } else {
        (
            paths(&[cwd.to_owned()]),
            "default (the working directory)".to_owned(),
        )
    };
    Row {
        key: "roots".into(),
        value,
        source,
    }
}

/// The value a flag gives `key`, and the flag.
fn flagged(flags: &super::Flags, key: &Key) -> Option<(toml::Value, &'static str)> {
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
}

/// The first of the variables `names` that is set, as `key`'s value (a key variable by name
/// only, never its secret), and its source.
fn variable(
    env: &dyn Fn(&str) -> Option<String>,
    key: &Key,
    names: &[&str],
) -> Option<(toml::Value, String)> {
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
}

/// The value a variable of [`VARIABLES`] gives `key`, if one is set.
fn overridden(env: &dyn Fn(&str) -> Option<String>, key: &Key) -> Option<(toml::Value, String)> {
    VARIABLES
        .iter()
        .find(|(k, _)| key.is(k))
        .and_then(|(_, names)| variable(env, key, names))
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
