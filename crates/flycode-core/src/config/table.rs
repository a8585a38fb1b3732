//! Every setting of `flycode.toml`, declared once (PROTOCOL.md §10 "Configuration: the settings
//! table"): its place in the file, its default, its range and, required for every entry, what a
//! value does to safety. The file reader takes its keys from here ([`children`]), `flycode
//! config` its defaults (`show.rs`), and the judgement of an untrusted project file its rule
//! ([`lookup`] → [`Safety`]). A key that is not in the table is not read at all, and an untrusted
//! file's key without an entry would be ignored: the table fails closed. [`Safety`] has no
//! default, so no entry can leave out what its value does to safety.

use super::range::{self, SettingRange};

/// What a setting's value does to safety, and so what an untrusted project file may say of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Safety {
    /// Neither loosens nor tightens (how replies are written, how a reply is streamed): any file
    /// may set it.
    Neutral,
    /// Every value adds safety (more protected paths, more variables kept from programs): any
    /// file may add to it.
    Tightens,
    /// A number that gives more of something (time, requests, bytes, tasks) as it grows: an
    /// untrusted file may lower it, never raise it over what the layers below say.
    LargerLoosens,
    /// A number that keeps more of the person's records as it grows: an untrusted file may
    /// raise it, never lower it. The words say what a smaller one would do.
    SmallerLoosens(&'static str),
    /// Words ordered from the tightest to the loosest: an untrusted file may move toward the
    /// first, never toward the last.
    Ranked(&'static [&'static str]),
    /// A rule of its own in [`super::loosen`], named here.
    Rule(Rule),
    /// Only the person's own files and flags may set it; the reason is shown beside an untrusted
    /// file's value, which is ignored.
    PersonOnly(&'static str),
}

/// The settings judged by a rule of their own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// `roots`: inside the project folder and inside the roots below.
    Roots,
    /// `[tools] "NAME"`: never asks less than the layers below.
    PerTool,
    /// `process_network`: may turn the network off, never on.
    Network,
    /// The model, its endpoint, its key variable: only the value the layers below say (it could
    /// send the API key, or the work, elsewhere).
    SameAsYours,
    /// The prompt's text and prompt files: a file must lie inside the project (it would carry a
    /// file of the person's to the model's endpoint); the text itself counts as the project's
    /// `AGENTS.md` does, and like it no model may change it (PROTOCOL.md §10).
    ProjectPrompt,
}

/// A default as a file would write it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefaultValue {
    /// None shown (the value depends on other settings, or on the machine).
    None,
    /// A string.
    Text(&'static str),
    /// A number.
    Integer(i64),
    /// A boolean.
    Bool(bool),
    /// An empty list.
    EmptyList,
    /// Not shown (flycode chooses by the endpoint or the model), but the most flycode would
    /// choose: what an untrusted file's number is compared with.
    Unshown(i64),
}

impl DefaultValue {
    /// As `flycode config` shows it.
    pub fn value(self) -> Option<toml::Value> {
        match self {
            DefaultValue::None | DefaultValue::Unshown(_) => None,
            DefaultValue::Text(text) => Some(text.into()),
            DefaultValue::Integer(number) => Some(number.into()),
            DefaultValue::Bool(flag) => Some(flag.into()),
            DefaultValue::EmptyList => Some(toml::Value::Array(Vec::new())),
        }
    }

    /// The number it is, for a numeric rule with nothing below it.
    pub fn integer(self) -> Option<i64> {
        match self {
            DefaultValue::Integer(number) | DefaultValue::Unshown(number) => Some(number),
            _ => None,
        }
    }

    /// The text it is, for a ranked rule with nothing below it.
    pub fn text(self) -> Option<&'static str> {
        match self {
            DefaultValue::Text(text) => Some(text),
            _ => None,
        }
    }
}

/// One setting.
#[derive(Clone, Copy, Debug)]
pub struct Setting {
    /// Its place in the file; [`ANY`] stands for any one name (a sub-agent type, a tool).
    pub key: &'static [&'static str],
    /// Its default.
    pub default: DefaultValue,
    /// The numbers it accepts, where it is a number with a range.
    pub range: Option<&'static SettingRange>,
    /// What a value does to safety.
    pub safety: Safety,
}

/// The part of a key that stands for any one name.
pub const ANY: &str = "*";

/// The names that may stand for [`ANY`] under `[agent.subagent]`.
pub const SUBAGENT_TYPES: [&str; 4] = ["general", "explore", "summary", "plan"];

const fn setting(
    key: &'static [&'static str],
    default: DefaultValue,
    range: Option<&'static SettingRange>,
    safety: Safety,
) -> Setting {
    Setting {
        key,
        default,
        range,
        safety,
    }
}

const fn number(
    key: &'static [&'static str],
    default: i64,
    range: &'static SettingRange,
) -> Setting {
    setting(
        key,
        DefaultValue::Integer(default),
        Some(range),
        Safety::LargerLoosens,
    )
}

/// Every setting. The order is `flycode config`'s (the settings with a default, in order) and
/// "did you mean"'s (the first of equally close keys).
pub const SETTINGS: &[Setting] = &[
    setting(
        &["approval"],
        DefaultValue::Text("ask"),
        None,
        Safety::Ranked(&["read-only", "ask", "auto"]),
    ),
    setting(
        &["protected"],
        DefaultValue::EmptyList,
        None,
        Safety::Tightens,
    ),
    number(
        &["output_cap"],
        crate::protocol::DEFAULT_BODY_CAP as i64,
        &range::OUTPUT_CAP,
    ),
    number(
        &["max_reply_bytes"],
        super::reply_limit::DEFAULT_MAX_REPLY_BYTES as i64,
        &range::MAX_REPLY_BYTES,
    ),
    number(&["timeout_ms"], 60_000, &range::TIMEOUT_MS),
    // The set only offers tools: whether a call of one runs is policy's, per call (the
    // extended set's jobs ask as their commands do).
    setting(
        &["tools", "set"],
        DefaultValue::Text("seed"),
        None,
        Safety::Neutral,
    ),
    setting(
        &["process_sandbox"],
        DefaultValue::Text("workspace-write"),
        None,
        Safety::Ranked(&["read-only", "workspace-write", "off"]),
    ),
    setting(
        &["process_network"],
        DefaultValue::Bool(true),
        None,
        Safety::Rule(Rule::Network),
    ),
    // Names flycode reads for itself are refused from every file (super::file).
    setting(
        &["secret_env"],
        DefaultValue::EmptyList,
        None,
        Safety::Tightens,
    ),
    // "process" gives up surviving a power loss (PROTOCOL.md §9 (fs.write)).
    setting(
        &["durability"],
        DefaultValue::Text("full"),
        None,
        Safety::Ranked(&["full", "process"]),
    ),
    setting(
        &["dialect"],
        DefaultValue::Text("flycode"),
        None,
        Safety::Neutral,
    ),
    setting(
        &["state", "keep_days"],
        DefaultValue::Integer(super::DEFAULT_KEEP_DAYS as i64),
        Some(&range::KEEP_DAYS),
        Safety::SmallerLoosens("flycode gc would remove more"),
    ),
    setting(
        &["undo", "max_bytes"],
        DefaultValue::Integer(1 << 30),
        Some(&range::UNDO_MAX_BYTES),
        Safety::SmallerLoosens("the undo store would forget more"),
    ),
    setting(
        &["undo", "max_age_days"],
        DefaultValue::Integer(30),
        Some(&range::UNDO_MAX_AGE_DAYS),
        Safety::SmallerLoosens("the undo store would forget more"),
    ),
    setting(
        &["undo", "max_file_bytes"],
        DefaultValue::Integer(64 << 20),
        Some(&range::UNDO_MAX_FILE_BYTES),
        Safety::SmallerLoosens("the undo store would forget more"),
    ),
    number(
        &["jobs", "log_bytes"],
        crate::tools::jobs::DEFAULT_LOG_BYTES as i64,
        &range::LOG_BYTES,
    ),
    number(
        &["jobs", "max_running"],
        crate::tools::jobs::DEFAULT_MAX_RUNNING as i64,
        &range::MAX_RUNNING,
    ),
    // A remote client changing files is the person's decision alone.
    setting(
        &["mcp", "allow_changes_over_http"],
        DefaultValue::Bool(false),
        None,
        Safety::PersonOnly(
            "would let clients of flycode mcp --http change files and run programs; only your own flycode.toml may",
        ),
    ),
    // What the browser companion does with a result; sending it by itself lets the model's
    // calls follow one another with nobody pressing send, the person's decision alone.
    setting(
        &["browser", "auto_insert"],
        DefaultValue::Bool(true),
        None,
        Safety::Neutral,
    ),
    setting(
        &["browser", "auto_submit"],
        DefaultValue::Bool(false),
        None,
        Safety::PersonOnly(
            "would send each result into the chat by itself, so the model's calls follow one another with nobody pressing send; only your own flycode.toml may",
        ),
    ),
    // The endpoint first: the order is also "did you mean"'s, most common first.
    setting(
        &["agent", "provider"],
        DefaultValue::None,
        None,
        Safety::Rule(Rule::SameAsYours),
    ),
    setting(
        &["agent", "base_url"],
        DefaultValue::None,
        None,
        Safety::Rule(Rule::SameAsYours),
    ),
    setting(
        &["agent", "model"],
        DefaultValue::None,
        None,
        Safety::Rule(Rule::SameAsYours),
    ),
    setting(
        &["agent", "api_key_env"],
        DefaultValue::None,
        None,
        Safety::Rule(Rule::SameAsYours),
    ),
    // A later compaction keeps more of the conversation in every request.
    setting(
        &["agent", "compact_at"],
        DefaultValue::Integer(80),
        None,
        Safety::LargerLoosens,
    ),
    setting(
        &["agent", "keep_turns"],
        DefaultValue::Integer(4),
        None,
        Safety::LargerLoosens,
    ),
    setting(
        &["agent", "mode"],
        DefaultValue::Text("native"),
        None,
        Safety::Neutral,
    ),
    number(&["agent", "max_turns"], 50, &range::MAX_TURNS),
    number(&["agent", "max_violations"], 3, &range::MAX_VIOLATIONS),
    number(&["agent", "max_parallel"], 4, &range::MAX_PARALLEL),
    // Where the special messages sit, not what anything may do: neutral.
    setting(
        &["agent", "special_every"],
        DefaultValue::Integer(1),
        Some(&range::SPECIAL_EVERY),
        Safety::Neutral,
    ),
    setting(
        &["agent", "stream"],
        DefaultValue::Bool(true),
        None,
        Safety::Neutral,
    ),
    number(
        &["agent", "connect_timeout_ms"],
        10_000,
        &range::CONNECT_TIMEOUT_MS,
    ),
    number(
        &["agent", "read_timeout_ms"],
        120_000,
        &range::READ_TIMEOUT_MS,
    ),
    number(&["agent", "max_retries"], 4, &range::MAX_RETRIES),
    number(&["agent", "retry_base_ms"], 500, &range::RETRY_BASE_MS),
    // false sends no system prompt at all: the rules of the protocol with it.
    setting(
        &["agent", "system_prompt"],
        DefaultValue::Bool(true),
        None,
        Safety::PersonOnly(
            "sends no system prompt, so the model is no longer told the protocol's rules or the allowed roots; only your own flycode.toml may",
        ),
    ),
    number(
        &["agent", "max_tasks_per_run"],
        32,
        &range::MAX_TASKS_PER_RUN,
    ),
    number(
        &["agent", "max_tasks_per_agent"],
        16,
        &range::MAX_TASKS_PER_AGENT,
    ),
    number(
        &["agent", "subagent_max_turns"],
        30,
        &range::SUBAGENT_MAX_TURNS,
    ),
    number(
        &["agent", "subagent_timeout_ms"],
        600_000,
        &range::SUBAGENT_TIMEOUT_MS,
    ),
    setting(
        &["agent", "strict"],
        DefaultValue::Bool(false),
        None,
        Safety::Neutral,
    ),
    number(
        &["agent", "max_reply_tokens"],
        8192,
        &range::MAX_REPLY_TOKENS,
    ),
    number(
        &["agent", "turn_timeout_ms"],
        1_800_000,
        &range::TURN_TIMEOUT_MS,
    ),
    setting(
        &["agent", "prompt"],
        DefaultValue::Text("full"),
        None,
        Safety::Rule(Rule::ProjectPrompt),
    ),
    setting(
        &["agent", "insight"],
        DefaultValue::Bool(false),
        None,
        Safety::Rule(Rule::ProjectPrompt),
    ),
    // Without a default row.
    setting(
        &["roots"],
        DefaultValue::None,
        None,
        Safety::Rule(Rule::Roots),
    ),
    setting(
        &["tools", ANY],
        DefaultValue::None,
        None,
        Safety::Rule(Rule::PerTool),
    ),
    // The context assumed for a model flycode does not know (known models may have more).
    setting(
        &["agent", "context_tokens"],
        DefaultValue::Unshown(128_000),
        None,
        Safety::LargerLoosens,
    ),
    setting(
        &["agent", "role"],
        DefaultValue::None,
        None,
        Safety::Rule(Rule::ProjectPrompt),
    ),
    setting(
        &["agent", "role_file"],
        DefaultValue::None,
        None,
        Safety::Rule(Rule::ProjectPrompt),
    ),
    setting(
        &["agent", "system_prompt_file"],
        DefaultValue::None,
        None,
        Safety::Rule(Rule::ProjectPrompt),
    ),
    // Its default depends on the endpoint (PROTOCOL.md §13): 600000 at most.
    setting(
        &["agent", "first_byte_timeout_ms"],
        DefaultValue::Unshown(600_000),
        Some(&range::FIRST_BYTE_TIMEOUT_MS),
        Safety::LargerLoosens,
    ),
    setting(
        &["agent", "light", "model"],
        DefaultValue::None,
        None,
        Safety::Rule(Rule::SameAsYours),
    ),
    setting(
        &["agent", "light", "base_url"],
        DefaultValue::None,
        None,
        Safety::Rule(Rule::SameAsYours),
    ),
    setting(
        &["agent", "light", "api_key_env"],
        DefaultValue::None,
        None,
        Safety::Rule(Rule::SameAsYours),
    ),
    setting(
        &["agent", "light", "provider"],
        DefaultValue::None,
        None,
        Safety::Rule(Rule::SameAsYours),
    ),
    setting(
        &["agent", "subagent", ANY, "role"],
        DefaultValue::None,
        None,
        Safety::Rule(Rule::ProjectPrompt),
    ),
    setting(
        &["agent", "subagent", ANY, "role_file"],
        DefaultValue::None,
        None,
        Safety::Rule(Rule::ProjectPrompt),
    ),
];

/// Whether `pattern` (with [`ANY`]) names `key`.
fn matches(pattern: &[&str], key: &[String]) -> bool {
    pattern.len() == key.len()
        && pattern
            .iter()
            .zip(key)
            .all(|(part, name)| *part == ANY || part == name)
}

/// The setting at `key`, if flycode has one there.
pub fn lookup(key: &[String]) -> Option<&'static Setting> {
    // An exact entry (`[tools] set`) before a pattern (`[tools] "NAME"`).
    SETTINGS
        .iter()
        .find(|setting| {
            setting.key.iter().zip(key).all(|(p, k)| p == k) && setting.key.len() == key.len()
        })
        .or_else(|| SETTINGS.iter().find(|setting| matches(setting.key, key)))
}

/// The names a table at `parent` may hold, in the table's order, or `None` when `parent` is no
/// table (a setting, or nothing). `[tools]` is read apart (a string or a table of tool names).
pub fn children(parent: &[String]) -> Option<Vec<&'static str>> {
    let mut names: Vec<&'static str> = Vec::new();
    for setting in SETTINGS {
        let Some((head, rest)) = setting.key.split_at_checked(parent.len()) else {
            continue;
        };
        if rest.is_empty() || !head.iter().zip(parent).all(|(p, k)| *p == ANY || p == k) {
            continue;
        }
        if rest[0] == ANY {
            // Only `[agent.subagent]` holds tables named by the person's choice of type.
            if setting.key.starts_with(&["agent", "subagent"]) && parent.len() == 2 {
                for name in SUBAGENT_TYPES {
                    if !names.contains(&name) {
                        names.push(name);
                    }
                }
            }
            continue;
        }
        if !names.contains(&rest[0]) {
            names.push(rest[0]);
        }
    }
    if parent.len() > 2
        && parent[..2] == ["agent", "subagent"]
        && !SUBAGENT_TYPES.contains(&parent[2].as_str())
    {
        return None;
    }
    (!names.is_empty()).then_some(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(parts: &[&str]) -> Vec<String> {
        parts.iter().map(|part| (*part).to_owned()).collect()
    }

    #[test]
    fn every_setting_is_declared_once() {
        for (index, setting) in SETTINGS.iter().enumerate() {
            assert!(
                SETTINGS[..index]
                    .iter()
                    .all(|other| other.key != setting.key),
                "{:?} is declared twice",
                setting.key
            );
        }
    }

    #[test]
    fn every_range_is_a_settings_and_only_one() {
        for range in range::ALL {
            let owners = SETTINGS
                .iter()
                .filter(|setting| {
                    setting.range == Some(&range) || setting.range.is_some_and(|r| r == &range)
                })
                .count();
            assert_eq!(owners, 1, "{} belongs to {owners} settings", range.key);
        }
    }

    #[test]
    fn nothing_that_names_a_variable_a_prompt_or_an_endpoint_is_neutral() {
        for parts in [
            &["agent", "api_key_env"][..],
            &["agent", "light", "api_key_env"],
            &["agent", "role_file"],
            &["agent", "system_prompt_file"],
            &["agent", "subagent", "explore", "role_file"],
            &["agent", "base_url"],
            &["agent", "max_parallel"],
            &["agent", "max_tasks_per_run"],
            &["jobs", "max_running"],
        ] {
            let setting = lookup(&key(parts)).unwrap();
            assert_ne!(setting.safety, Safety::Neutral, "{parts:?}");
        }
    }

    #[test]
    fn the_tables_hold_what_the_settings_say() {
        assert!(children(&key(&[])).unwrap().contains(&"agent"));
        assert_eq!(
            children(&key(&["jobs"])).unwrap(),
            ["log_bytes", "max_running"]
        );
        assert_eq!(
            children(&key(&["agent", "subagent"])).unwrap(),
            SUBAGENT_TYPES
        );
        assert_eq!(
            children(&key(&["agent", "subagent", "plan"])).unwrap(),
            ["role", "role_file"]
        );
        assert_eq!(children(&key(&["agent", "subagent", "nope"])), None);
        assert_eq!(children(&key(&["agent", "model"])), None);
        assert_eq!(children(&key(&["nothing"])), None);
    }

    #[test]
    fn an_exact_entry_wins_over_a_pattern() {
        assert_eq!(
            lookup(&key(&["tools", "set"])).unwrap().safety,
            Safety::Neutral
        );
        assert_eq!(
            lookup(&key(&["tools", "fs.rm"])).unwrap().safety,
            Safety::Rule(Rule::PerTool)
        );
        assert!(lookup(&key(&["agent", "unknown"])).is_none());
    }
}
