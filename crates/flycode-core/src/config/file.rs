//! One `flycode.toml` read key by key: every setting with the line it is on, and every mistake of
//! the file at once (unknown keys with a "did you mean", bad values, numbers out of range, tool
//! names that are no tool), so `flycode config --check` can list them all in one run. It reads
//! text only: which file applies, and whether its settings are trusted, is [`super::layers`]'s.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::IntoDeserializer;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::FileConfig;
use crate::protocol::{ToolName, ToolSet};

/// A setting's place in the file: `["approval"]`, `["agent", "light", "model"]`,
/// `["tools", "shell.exec"]`. `tools = "extended"` is read as `["tools", "set"]`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key(pub Vec<String>);

impl Key {
    /// The key of `parts`.
    pub fn of(parts: &[&str]) -> Key {
        Key(parts.iter().map(|part| (*part).to_owned()).collect())
    }

    /// Whether the key is `parts`.
    pub fn is(&self, parts: &[&str]) -> bool {
        self.0.len() == parts.len() && self.0.iter().zip(parts).all(|(a, b)| a == b)
    }

    /// The tool a `[tools]` entry names, if it is one.
    pub fn tool(&self) -> Option<ToolName> {
        match self.0.as_slice() {
            [table, name] if table == "tools" && name != "set" => ToolName::from_name(name),
            _ => None,
        }
    }
}

impl fmt::Display for Key {
    /// As a person writes it on one line: `approval`, `[agent] model`, `[agent.light] base_url`,
    /// `[tools] "shell.exec"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let quote = |part: &String| {
            if part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                part.clone()
            } else {
                format!("{part:?}")
            }
        };
        match self.0.split_last() {
            None => Ok(()),
            Some((last, [])) => f.write_str(&quote(last)),
            Some((last, table)) => {
                let table = table.iter().map(quote).collect::<Vec<_>>().join(".");
                write!(f, "[{table}] {}", quote(last))
            }
        }
    }
}

/// One setting of a file.
#[derive(Clone, Debug, PartialEq)]
pub struct SettingEntry {
    /// Where it is in the file's tables.
    pub key: Key,
    /// Its value, already checked.
    pub value: toml::Value,
    /// The 1-based line of its key.
    pub line: usize,
}

/// A mistake of a file: what is wrong, where, and what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mistake {
    /// The file.
    pub path: PathBuf,
    /// The 1-based line.
    pub line: usize,
    /// What is wrong, naming the key.
    pub message: String,
}

impl fmt::Display for Mistake {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.path.display(), self.line, self.message)
    }
}

/// A file read key by key.
#[derive(Clone, Debug, Default)]
pub struct ParsedFile {
    /// The file.
    pub path: PathBuf,
    /// The settings that are right, in file order.
    pub entries: Vec<SettingEntry>,
    /// Everything wrong with it, in file order.
    pub mistakes: Vec<Mistake>,
}

impl ParsedFile {
    /// The setting at `key`, if the file has it.
    pub fn get(&self, key: &Key) -> Option<&SettingEntry> {
        self.entries.iter().find(|entry| &entry.key == key)
    }
}

/// The keys a table at `parent` may hold: the settings table's ([`super::table::children`]).
fn table_keys(parent: &[String]) -> Option<Vec<&'static str>> {
    super::table::children(parent)
}

/// The first variable a `secret_env` list or a key variable (`api_key_env`) names that flycode
/// reads for itself (PROTOCOL.md §10 "Configuration"): a secret variable is taken out of
/// flycode's own environment at start, so naming HOME or XDG_STATE_HOME would move flycode's
/// state folder, its settings and its seal key where a program can reach them.
fn reserved_variable(key: &Key, value: &toml::Value) -> Option<String> {
    let names: Vec<&str> = if key.is(&["secret_env"]) {
        value
            .as_array()?
            .iter()
            .filter_map(toml::Value::as_str)
            .collect()
    } else if key.is(&["agent", "api_key_env"]) || key.is(&["agent", "light", "api_key_env"]) {
        vec![value.as_str()?]
    } else {
        return None;
    };
    names
        .into_iter()
        // flycode's own key variables (FLYCODE_API_KEY…) are secrets already.
        .find(|name| {
            crate::sandbox::secret_env::is_own_variable(name)
                && !crate::tools::process::SECRET_VARIABLES.contains(name)
        })
        .map(str::to_owned)
}

/// Reads `text`, the contents of `path`, key by key.
pub fn parse(path: &Path, text: &str) -> ParsedFile {
    let mut file = ParsedFile {
        path: path.to_owned(),
        ..ParsedFile::default()
    };
    let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
    let (table, errors) = DeTable::parse_recoverable(text);
    for error in errors {
        let line = error.span().map_or(1, |span| line_of(span.start));
        file.push_mistake(line, format!("not valid TOML: {}", error.message().trim()));
    }
    let mut reader = Reader {
        file: &mut file,
        line_of: &line_of,
    };
    reader.table(&[], table.get_ref());
    file.entries.sort_by_key(|entry| entry.line);
    file.mistakes.sort_by_key(|mistake| mistake.line);
    file
}

struct Reader<'a> {
    file: &'a mut ParsedFile,
    line_of: &'a dyn Fn(usize) -> usize,
}

impl Reader<'_> {
    fn table(&mut self, parent: &[String], table: &DeTable<'_>) {
        let Some(known) = table_keys(parent) else {
            return;
        };
        for (name, value) in table {
            let line = (self.line_of)(name.span().start);
            let mut key = parent.to_vec();
            key.push(name.get_ref().to_string());
            let name = name.get_ref().as_ref();
            if key.len() == 1 && name == "tools" {
                self.tools(value, line);
                continue;
            }
            if !known.contains(&name) {
                let place = match parent {
                    [] => "the top level".to_owned(),
                    _ => format!("[{}]", parent.join(".")),
                };
                let hint = did_you_mean(name, &known)
                    .map(|near| format!(" (did you mean {near:?}?)"))
                    .unwrap_or_default();
                self.file.push_mistake(
                    line,
                    format!(
                        "unknown key {name:?} in {place}{hint}; the keys are: {}",
                        known.join(", ")
                    ),
                );
                continue;
            }
            let key = Key(key);
            if table_keys(&key.0).is_some() {
                match value.get_ref() {
                    DeValue::Table(inner) => self.table(&key.0, inner),
                    other => self.file.push_mistake(
                        line,
                        format!("{key} must be a table, not {}", other.type_str()),
                    ),
                }
                continue;
            }
            self.leaf(key, value, line);
        }
    }

    /// Checks one value by reading a file that holds only it, so the message is the one a whole
    /// file would give (ranges, variants) and every key is checked on its own.
    fn leaf(&mut self, key: Key, value: &Spanned<DeValue<'_>>, line: usize) {
        let value = match toml::Value::deserialize(value.clone().into_deserializer()) {
            Ok(value) => value,
            Err(error) => {
                self.file
                    .push_mistake(line, format!("{key}: {}", error.message()));
                return;
            }
        };
        // The range is the settings table's; the file's types check the rest.
        if let (Some(range), Some(number)) = (
            super::table::lookup(&key.0).and_then(|setting| setting.range),
            value.as_integer(),
        ) && !range.contains(i128::from(number))
        {
            self.file.push_mistake(
                line,
                range.out_of_range(&format!("{} = {number}", range.key)),
            );
            return;
        }
        let mut nested = value.clone();
        for part in key.0.iter().rev() {
            let mut table = toml::Table::new();
            table.insert(part.clone(), nested);
            nested = toml::Value::Table(table);
        }
        if let Err(error) = FileConfig::deserialize(nested) {
            let message = error.message().to_owned();
            let message = if message.contains(key.0.last().map_or("", String::as_str)) {
                message
            } else {
                format!("{key}: {message}")
            };
            self.file.push_mistake(line, message);
            return;
        }
        if let Some(reserved) = reserved_variable(&key, &value) {
            self.file.push_mistake(
                line,
                format!(
                    "{key} names {reserved}, a variable flycode reads for itself (HOME, PATH, USER, LOGNAME, SHELL, TMPDIR, LANG, LC_*, DISPLAY, WAYLAND_DISPLAY, XDG_*, FLYCODE_*); remove it: hiding it would change where flycode keeps its own state and settings"
                ),
            );
            return;
        }
        self.file.entries.push(SettingEntry { key, value, line });
    }

    /// `tools = "extended"` or the `[tools]` table of a set and per-tool rules.
    fn tools(&mut self, value: &Spanned<DeValue<'_>>, line: usize) {
        match value.get_ref() {
            DeValue::String(name) => self.tool_set(name, "tools", line),
            DeValue::Table(table) => {
                for (name, rule) in table {
                    let line = (self.line_of)(name.span().start);
                    let name = name.get_ref().as_ref();
                    let Some(text) = rule.get_ref().as_str() else {
                        self.file.push_mistake(
                            line,
                            format!(
                                "[tools] {name:?} must be a string, not {}",
                                rule.get_ref().type_str()
                            ),
                        );
                        continue;
                    };
                    if name == "set" {
                        self.tool_set(text, "set", line);
                    } else {
                        self.tool_rule(name, text, line);
                    }
                }
            }
            other => self.file.push_mistake(
                line,
                format!(
                    "tools must be a tool set (\"seed\" or \"extended\") or a [tools] table, not {}",
                    other.type_str()
                ),
            ),
        }
    }

    fn tool_set(&mut self, name: &str, written: &str, line: usize) {
        if ToolSet::from_name(name).is_some() {
            self.file.entries.push(SettingEntry {
                key: Key::of(&["tools", "set"]),
                value: toml::Value::String(name.to_owned()),
                line,
            });
            return;
        }
        let hint = did_you_mean(name, &["seed", "extended"])
            .map(|near| format!(" (did you mean {near:?}?)"))
            .unwrap_or_default();
        self.file.push_mistake(
            line,
            format!("{written} = {name:?} is not a tool set{hint}: use \"seed\" or \"extended\""),
        );
    }

    fn tool_rule(&mut self, name: &str, rule: &str, line: usize) {
        if ToolName::from_name(name).is_none() {
            let hint = ToolName::nearest(name, ToolSet::All)
                .map(|near| format!(" (did you mean \"{near}\"?)"))
                .unwrap_or_default();
            self.file.push_mistake(
                line,
                format!("[tools] names {name:?}, which is not a flycode tool{hint}"),
            );
            return;
        }
        if !matches!(rule, "allow" | "ask" | "deny") {
            let hint = did_you_mean(rule, &["allow", "ask", "deny"])
                .map(|near| format!(" (did you mean {near:?}?)"))
                .unwrap_or_default();
            self.file.push_mistake(
                line,
                format!(
                    "[tools] {name:?} = {rule:?} is not a rule{hint}: use \"allow\", \"ask\" or \"deny\""
                ),
            );
            return;
        }
        self.file.entries.push(SettingEntry {
            key: Key(vec!["tools".to_owned(), name.to_owned()]),
            value: toml::Value::String(rule.to_owned()),
            line,
        });
    }
}

impl ParsedFile {
    fn push_mistake(&mut self, line: usize, message: String) {
        self.mistakes.push(Mistake {
            path: self.path.clone(),
            line,
            message,
        });
    }
}

/// The candidate closest to `written`, when one is close enough to be what was meant.
pub fn did_you_mean<'a>(written: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let written = written.to_lowercase().replace('-', "_");
    candidates
        .iter()
        .map(|candidate| {
            let score = strsim::normalized_damerau_levenshtein(&written, candidate);
            (*candidate, score)
        })
        .filter(|(_, score)| *score >= 0.6)
        // The first of equally close candidates: they are listed most common first.
        .fold(None, |best: Option<(&str, f64)>, next| match best {
            Some(best) if best.1 >= next.1 => Some(best),
            _ => Some(next),
        })
        .map(|(candidate, _)| candidate)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> ParsedFile {
        parse(Path::new("/p/flycode.toml"), text)
    }

    #[test]
    fn every_setting_has_its_line() {
        let file = read(
            "approval = \"ask\"\n\n[tools]\n\"shell.exec\" = \"deny\"\nset = \"extended\"\n[agent]\nmodel = \"m\"\n[agent.light]\nmodel = \"l\"\n",
        );
        assert!(file.mistakes.is_empty(), "{:?}", file.mistakes);
        let line = |parts: &[&str]| file.get(&Key::of(parts)).map(|e| e.line);
        assert_eq!(line(&["approval"]), Some(1));
        assert_eq!(line(&["tools", "shell.exec"]), Some(4));
        assert_eq!(line(&["tools", "set"]), Some(5));
        assert_eq!(line(&["agent", "model"]), Some(7));
        assert_eq!(line(&["agent", "light", "model"]), Some(9));
        assert_eq!(
            read("tools = \"seed\"\n")
                .get(&Key::of(&["tools", "set"]))
                .map(|e| e.value.clone()),
            Some(toml::Value::String("seed".into()))
        );
    }

    #[test]
    fn reports_every_mistake_with_a_hint() {
        let file = read(
            "aproval = \"auto\"\noutput_cap = 10\n[tools]\n\"shell.exc\" = \"allow\"\n\"fs.read\" = \"alow\"\n[agent]\nmodle = \"m\"\nmax_turns = 0\n",
        );
        let lines = file
            .mistakes
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>();
        assert_eq!(file.mistakes.len(), 6, "{lines:#?}");
        assert!(lines[0].contains(":1:") && lines[0].contains("did you mean \"approval\""));
        assert!(lines[1].contains(":2: output_cap = 10 is out of range"));
        assert!(lines[2].contains(":4:") && lines[2].contains("did you mean \"shell.exec\""));
        assert!(lines[3].contains(":5:") && lines[3].contains("did you mean \"allow\""));
        assert!(lines[4].contains(":7:") && lines[4].contains("did you mean \"model\""));
        assert!(lines[5].contains(":8: max_turns = 0 is out of range"));
    }

    #[test]
    fn a_bad_value_names_its_key_and_line() {
        let file = read("roots = []\napproval = \"sometimes\"\n[agent]\nstream = \"yes\"\n");
        let lines = file
            .mistakes
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].contains(":2:") && lines[0].contains("sometimes"));
        assert!(lines[1].contains(":4:") && lines[1].contains("stream"));
        assert_eq!(file.entries.len(), 1);
    }

    #[test]
    fn broken_toml_is_a_mistake_with_its_line() {
        let file = read("approval = \"ask\"\nroots = [\n");
        assert!(!file.mistakes.is_empty());
        assert!(file.mistakes[0].message.starts_with("not valid TOML"));
    }

    #[test]
    fn keys_display_as_written() {
        assert_eq!(Key::of(&["approval"]).to_string(), "approval");
        assert_eq!(
            Key::of(&["tools", "shell.exec"]).to_string(),
            "[tools] \"shell.exec\""
        );
        assert_eq!(
            Key::of(&["agent", "light", "base_url"]).to_string(),
            "[agent.light] base_url"
        );
    }
}
