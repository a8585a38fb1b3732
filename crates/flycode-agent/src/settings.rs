//! The settings of a run, resolved from command-line flags, then the environment, then the
//! `[agent]` table of `flycode.toml`, then defaults. A setting that has no default and is given
//! nowhere is an error naming the flag, the variables and the key that would give it.

pub mod compaction;
pub mod provider;

use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;

use crate::client::ProviderKind;
pub use compaction::{Compaction, known_context};

use super::prompt::{CallingMode, PromptProfile};
use crate::config::range::{self, SettingRange};
use crate::config::{AgentConfig, SubagentRoleConfig};
use flycode_core::tools::agent::SubagentType;

/// What the command line says: the flags of `flycode run` that override the environment and the
/// `[agent]` table (the CLI flattens them into its arguments).
#[derive(Clone, Debug, Default, clap::Args)]
pub struct SettingFlags {
    /// Which API the server speaks: openai (Chat Completions) or anthropic (Messages)
    /// [env: found from ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL when no OpenAI setting is given].
    #[arg(long, value_name = "PROVIDER")]
    pub provider: Option<String>,
    /// Never compact the conversation, even when it nears the model's context.
    #[arg(long)]
    pub no_compact: bool,
    /// The API's base URL, e.g. `https://api.openai.com/v1` [env: FLYCODE_BASE_URL, OPENAI_BASE_URL].
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// The model [env: FLYCODE_MODEL].
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// How the model calls tools: native function calls (default) or flycode-call blocks.
    #[arg(long, value_enum, value_name = "MODE")]
    pub mode: Option<CallingMode>,
    /// Requests at most (default 50).
    #[arg(long, value_name = "N")]
    pub max_turns: Option<u32>,
    /// Invalid replies in a row before stopping (default 3).
    #[arg(long, value_name = "N")]
    pub max_violations: Option<u32>,
    /// Wait for whole replies instead of streaming them.
    #[arg(long)]
    pub no_stream: bool,
    /// Connect timeout in milliseconds (default 10000).
    #[arg(long, value_name = "MS")]
    pub connect_timeout_ms: Option<u64>,
    /// Longest silence allowed within a response, in milliseconds (default 120000).
    #[arg(long, value_name = "MS")]
    pub read_timeout_ms: Option<u64>,
    /// Retries on 429, 5xx, timeouts and lost connections (default 4).
    #[arg(long, value_name = "N")]
    pub max_retries: Option<u32>,
    /// First retry delay in milliseconds, doubled each time, with jitter (default 500).
    #[arg(long, value_name = "MS")]
    pub retry_base_ms: Option<u64>,
    /// Replace the role definition with this file's text.
    #[arg(long, value_name = "FILE")]
    pub role_file: Option<PathBuf>,
    /// Replace the whole system prompt with this file's text.
    #[arg(long, value_name = "FILE", conflicts_with = "no_system_prompt")]
    pub system_prompt_file: Option<PathBuf>,
    /// Send no system prompt: the role definition takes its place.
    #[arg(long)]
    pub no_system_prompt: bool,
    /// Strict envelopes: a sub-agent task's result also carries the agent.task call's id
    /// (`tool_call_id`).
    #[arg(long)]
    pub strict: bool,
    /// The most tokens one reply may have, sent as the request's `max_tokens` (default 8192).
    #[arg(long, value_name = "N")]
    pub max_reply_tokens: Option<u32>,
    /// Longest wait for a response's first event, in milliseconds (default: 600000 for a
    /// loopback or private-network endpoint, else the read timeout).
    #[arg(long, value_name = "MS")]
    pub first_byte_timeout_ms: Option<u64>,
    /// The system prompt's profile: `full` (default) or `compact` (a short tool guide without
    /// examples, for small-context local models).
    #[arg(long = "prompt", value_enum, value_name = "PROFILE")]
    pub prompt_profile: Option<PromptProfile>,
}

/// Where the system prompt comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SystemPromptChoice {
    /// Built from the modules of `protocol/prompts/agent/`.
    Built,
    /// The user's file.
    File(PathBuf),
    /// None: the role definition takes its place.
    None,
}

impl SystemPromptChoice {
    /// The file the prompt comes from, if it is one.
    pub fn file(&self) -> Option<&std::path::Path> {
        match self {
            SystemPromptChoice::File(path) => Some(path),
            _ => None,
        }
    }
}

impl RoleChoice {
    /// The file the role definition comes from, if it is one.
    pub fn file(&self) -> Option<&std::path::Path> {
        match self {
            RoleChoice::File(path) => Some(path),
            _ => None,
        }
    }
}

/// Where the role definition comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RoleChoice {
    /// The built-in module.
    Built,
    /// Text from `flycode.toml`.
    Text(String),
    /// The user's file.
    File(PathBuf),
}

/// Everything a run needs to know before it starts.
#[derive(Clone, Debug)]
pub struct ResolvedSettings {
    /// Which API the endpoint speaks.
    pub provider: ProviderKind,
    /// When the conversation is compacted.
    pub compaction: Compaction,
    /// The endpoint, e.g. `http://127.0.0.1:8080/v1`.
    pub base_url: String,
    /// The model name.
    pub model: String,
    /// The API key, when one is set (local servers need none).
    pub api_key: Option<String>,
    /// Which variable the key came from, for messages.
    pub api_key_source: Option<String>,
    /// Text or native calls.
    pub mode: CallingMode,
    /// Requests at most.
    pub max_turns: u32,
    /// Invalid turns in a row before stopping.
    pub max_violations: u32,
    /// Read-only calls of one turn running at once (PROTOCOL.md §13 (The API loop: parallel calls)).
    pub max_parallel: u32,
    /// The special messages move forward only every this many results (`[agent]
    /// special_every`, PROTOCOL.md §13 (The API loop: special messages)).
    pub special_every: u32,
    /// Stream replies.
    pub stream: bool,
    /// Connect timeout.
    pub connect_timeout: Duration,
    /// Longest silence within a response.
    pub read_timeout: Duration,
    /// Retries on 429, 5xx, timeouts and connection failures.
    pub max_retries: u32,
    /// First back-off delay.
    pub retry_base: Duration,
    /// The role definition's source.
    pub role: RoleChoice,
    /// The system prompt's source.
    pub system_prompt: SystemPromptChoice,
    /// The light model of sub-agents, when one is configured.
    pub light: Option<LightModel>,
    /// Quotas and budgets of sub-agent tasks.
    pub tasks: TaskLimits,
    /// The role of each sub-agent type, in the order of [`SubagentType::ALL`].
    pub subagent_roles: [RoleChoice; 4],
    /// Strict envelopes: a task's envelope carries `tool_call_id`.
    pub strict: bool,
    /// How long and how large a reply may be (PROTOCOL.md §13 (The API loop: bounded replies)).
    pub bounds: ReplyBounds,
    /// The system prompt's profile.
    pub prompt_profile: PromptProfile,
    /// Whether the `★ Insight` module is in the system prompt (`[agent] insight`).
    pub insight: bool,
}

/// How long and how large one reply may be (PROTOCOL.md §13 (The API loop: bounded replies)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplyBounds {
    /// The request's token limit (`max_tokens`).
    pub max_reply_tokens: u32,
    /// The longest wait for the first event of a response, when one is configured (else
    /// [`ReplyBounds::first_byte_timeout`] picks it by endpoint): reading a long prompt on a
    /// CPU takes minutes before anything comes.
    pub first_byte_timeout: Option<Duration>,
    /// The longest one request may take, from sending to the reply's end; past it the reply is
    /// cut and the model told.
    pub turn_timeout: Duration,
}

impl ReplyBounds {
    /// The first-byte timeout for `base_url`: the configured one, else ten minutes for a
    /// loopback or private-network endpoint, else `read_timeout`; never below `read_timeout`.
    pub fn first_byte_timeout(&self, base_url: &str, read_timeout: Duration) -> Duration {
        match self.first_byte_timeout {
            Some(timeout) => timeout,
            None if is_local_endpoint(base_url) => LOCAL_FIRST_BYTE_TIMEOUT.max(read_timeout),
            None => read_timeout,
        }
    }
}

/// The default `max_reply_tokens`.
pub const DEFAULT_MAX_REPLY_TOKENS: u32 = 8192;
/// The default first-byte timeout of a loopback or private-network endpoint.
pub const LOCAL_FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(600);
/// The default time limit of one request.
pub const DEFAULT_TURN_TIMEOUT: Duration = Duration::from_secs(1800);

impl ResolvedSettings {
    /// Where the role of `subagent` comes from.
    pub fn subagent_role(&self, subagent: SubagentType) -> &RoleChoice {
        let index = SubagentType::ALL
            .iter()
            .position(|&t| t == subagent)
            .unwrap_or(0);
        &self.subagent_roles[index]
    }
}

/// The light model (`LIGHT_LLM_*`, `[agent.light]`): a model name at least; the endpoint and
/// the key default to the main ones, the key only where the endpoint is the main one too.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LightModel {
    /// Which API its endpoint speaks (`[agent.light] provider`, else the main one's).
    pub provider: ProviderKind,
    /// The model name.
    pub model: String,
    /// The endpoint.
    pub base_url: String,
    /// Its key, when one is set.
    pub api_key: Option<String>,
    /// Which variable the key came from.
    pub api_key_source: Option<String>,
}

/// The quotas and budgets of sub-agent tasks (PROTOCOL.md §13 (The API loop: sub-agents)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskLimits {
    /// Tasks per run at most.
    pub per_run: u32,
    /// Tasks per agent at most.
    pub per_agent: u32,
    /// A sub-agent's requests before its last turn.
    pub max_turns: u32,
    /// A sub-agent's time before its last turn.
    pub time_limit: Duration,
}

impl Default for TaskLimits {
    fn default() -> TaskLimits {
        TaskLimits {
            per_run: 32,
            per_agent: 16,
            max_turns: 30,
            time_limit: Duration::from_secs(600),
        }
    }
}

/// A setting that cannot be resolved.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum SettingsError {
    /// No value anywhere.
    #[error(
        "no {what} is set: pass {flag}, set {variables}, or put {key} in the [agent] table of flycode.toml"
    )]
    Missing {
        /// What is missing, e.g. "model".
        what: &'static str,
        /// The flag, e.g. `--model NAME`.
        flag: &'static str,
        /// The variables, e.g. `FLYCODE_MODEL`.
        variables: &'static str,
        /// The file key, e.g. `model = "..."`.
        key: &'static str,
    },
    /// `api_key_env` names a variable that is not set.
    #[error(
        "flycode.toml's {setting} says the API key is in {variable}, but {variable} is not set: export it, or remove {setting}"
    )]
    KeyVariableUnset {
        /// The setting that names it: `api_key_env`, or `api_key_env in [agent.light]`.
        setting: &'static str,
        /// The variable.
        variable: String,
    },
    /// A number is outside its range.
    #[error("{}", range.out_of_range(written))]
    OutOfRange {
        /// The setting as written, e.g. `--max-turns 0`.
        written: String,
        /// What is accepted.
        range: SettingRange,
    },
    /// A value is unknown.
    #[error("{setting}: {problem}")]
    Invalid {
        /// The setting.
        setting: &'static str,
        /// What is wrong and what is accepted.
        problem: String,
    },
}

/// The default turn budget.
pub const DEFAULT_MAX_TURNS: u32 = 50;
/// The default number of invalid turns in a row that stops a run.
pub const DEFAULT_MAX_VIOLATIONS: u32 = 3;
/// The default number of read-only calls of one turn that run at once.
pub const DEFAULT_MAX_PARALLEL: u32 = 4;

/// The files the configuration puts into prompts (`[agent] role_file`, `system_prompt_file`,
/// `[agent.subagent.T] role_file`): what they say becomes the model's instructions, so no tool
/// may change them at any door, not only in the run that reads them (PROTOCOL.md §10 (Running
/// calls), "Protected paths").
pub fn prompt_files(file: &AgentConfig) -> Vec<PathBuf> {
    let roles = &file.subagent;
    [&roles.general, &roles.explore, &roles.summary, &roles.plan]
        .into_iter()
        .flatten()
        .filter_map(|role| role.role_file.clone())
        .chain(file.role_file.clone())
        .chain(file.system_prompt_file.clone())
        .collect()
}

/// Flags over the environment (`env` looks a variable up) over the file over defaults. The
/// first setting that cannot be resolved is the error, in the order of the struct's fields
/// after the endpoint (base URL, model, key).
pub fn resolve_settings(
    flags: &SettingFlags,
    file: &AgentConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ResolvedSettings, SettingsError> {
    let provider = provider::resolve_provider(flags, file, env)?;
    let base_url = resolve_base_url(flags, file, env, provider)?;
    let model = resolve_model(flags, file, env, provider)?;
    let (api_key, api_key_source) = resolve_api_key(file, env, provider)?;
    let millis = |flag: Option<u64>, file: Option<u64>, range: &SettingRange, default: u64| {
        in_range(flag, file, range).map(|ms| Duration::from_millis(ms.unwrap_or(default)))
    };
    Ok(ResolvedSettings {
        mode: resolve_mode(flags, file)?,
        max_turns: in_range(flags.max_turns, file.max_turns, &range::MAX_TURNS)?
            .unwrap_or(DEFAULT_MAX_TURNS),
        max_violations: in_range(
            flags.max_violations,
            file.max_violations,
            &range::MAX_VIOLATIONS,
        )?
        .unwrap_or(DEFAULT_MAX_VIOLATIONS),
        max_parallel: in_range(None, file.max_parallel, &range::MAX_PARALLEL)?
            .unwrap_or(DEFAULT_MAX_PARALLEL),
        special_every: in_range(None, file.special_every, &range::SPECIAL_EVERY)?.unwrap_or(1),
        stream: !flags.no_stream && file.stream.unwrap_or(true),
        connect_timeout: millis(
            flags.connect_timeout_ms,
            file.connect_timeout_ms,
            &range::CONNECT_TIMEOUT_MS,
            10_000,
        )?,
        read_timeout: millis(
            flags.read_timeout_ms,
            file.read_timeout_ms,
            &range::READ_TIMEOUT_MS,
            120_000,
        )?,
        max_retries: in_range(flags.max_retries, file.max_retries, &range::MAX_RETRIES)?
            .unwrap_or(4),
        retry_base: millis(
            flags.retry_base_ms,
            file.retry_base_ms,
            &range::RETRY_BASE_MS,
            500,
        )?,
        role: resolve_role(flags, file),
        system_prompt: resolve_system_prompt(flags, file),
        light: resolve_light(file, (&base_url, provider), api_key.as_deref(), env)?,
        compaction: compaction::resolve_compaction(flags, file, &model)?,
        provider,
        tasks: resolve_task_limits(file)?,
        subagent_roles: [
            &file.subagent.general,
            &file.subagent.explore,
            &file.subagent.summary,
            &file.subagent.plan,
        ]
        .map(subagent_role),
        strict: flags.strict || file.strict.unwrap_or(false),
        bounds: resolve_bounds(flags, file)?,
        prompt_profile: resolve_profile(flags, file)?,
        insight: file.insight.unwrap_or(false),
        base_url,
        model,
        api_key,
        api_key_source,
    })
}

/// The first of the variables `names` that is set and not blank.
fn first_set(env: &dyn Fn(&str) -> Option<String>, names: &[&str]) -> Option<String> {
    names
        .iter()
        .find_map(|name| env(name).filter(|value| !value.trim().is_empty()))
}

/// `--max-reply-tokens`, `--first-byte-timeout-ms` and the file's `turn_timeout_ms`.
fn resolve_bounds(flags: &SettingFlags, file: &AgentConfig) -> Result<ReplyBounds, SettingsError> {
    Ok(ReplyBounds {
        max_reply_tokens: in_range(
            flags.max_reply_tokens,
            file.max_reply_tokens,
            &range::MAX_REPLY_TOKENS,
        )?
        .unwrap_or(DEFAULT_MAX_REPLY_TOKENS),
        first_byte_timeout: in_range(
            flags.first_byte_timeout_ms,
            file.first_byte_timeout_ms,
            &range::FIRST_BYTE_TIMEOUT_MS,
        )?
        .map(Duration::from_millis),
        turn_timeout: in_range(None, file.turn_timeout_ms, &range::TURN_TIMEOUT_MS)?
            .map_or(DEFAULT_TURN_TIMEOUT, Duration::from_millis),
    })
}

/// Whether `base_url`'s host is this machine or a private network: `localhost`, a loopback,
/// private (RFC 1918, `fc00::/7`) or link-local address.
pub fn is_local_endpoint(base_url: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(base_url) else {
        return false;
    };
    let Some(host) = url.host_str() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(ip)) => ip.is_loopback() || ip.is_private() || ip.is_link_local(),
        Ok(std::net::IpAddr::V6(ip)) => {
            let first = ip.segments()[0];
            ip.is_loopback() || (first & 0xfe00) == 0xfc00 || (first & 0xffc0) == 0xfe80
        }
        Err(_) => host.eq_ignore_ascii_case("localhost") || host.ends_with(".localhost"),
    }
}

/// `--prompt`, else the file's `prompt` (`full` or `compact`), else full.
fn resolve_profile(
    flags: &SettingFlags,
    file: &AgentConfig,
) -> Result<PromptProfile, SettingsError> {
    match (flags.prompt_profile, file.prompt.as_deref()) {
        (Some(profile), _) => Ok(profile),
        (None, None | Some("full")) => Ok(PromptProfile::Full),
        (None, Some("compact")) => Ok(PromptProfile::Compact),
        (None, Some(other)) => Err(SettingsError::Invalid {
            setting: "prompt",
            problem: format!("{other:?} is not a prompt profile: use \"full\" or \"compact\""),
        }),
    }
}

/// `--base-url`, `FLYCODE_BASE_URL`, `LLM_BASE_URL` or `OPENAI_BASE_URL`, or the file's: an
/// http(s) address.
fn resolve_base_url(
    flags: &SettingFlags,
    file: &AgentConfig,
    env: &dyn Fn(&str) -> Option<String>,
    kind: ProviderKind,
) -> Result<String, SettingsError> {
    let base_url = flags
        .base_url
        .clone()
        .or_else(|| first_set(env, provider::base_url_variables(kind)))
        .or_else(|| file.base_url.clone())
        .or_else(|| provider::default_base_url(kind).map(str::to_owned))
        .ok_or(SettingsError::Missing {
            what: "API base URL",
            flag: "--base-url URL",
            variables: "FLYCODE_BASE_URL (or LLM_BASE_URL, OPENAI_BASE_URL)",
            key: "base_url = \"...\"",
        })?;
    if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
        return Err(SettingsError::Invalid {
            setting: "base URL",
            problem: format!(
                "{base_url:?} is not an http:// or https:// address, e.g. https://api.openai.com/v1"
            ),
        });
    }
    Ok(base_url)
}

/// `--model`, `FLYCODE_MODEL`, `LLM_MODEL_ID`, or the file's.
fn resolve_model(
    flags: &SettingFlags,
    file: &AgentConfig,
    env: &dyn Fn(&str) -> Option<String>,
    kind: ProviderKind,
) -> Result<String, SettingsError> {
    flags
        .model
        .clone()
        .or_else(|| first_set(env, provider::model_variables(kind)))
        .or_else(|| file.model.clone())
        .ok_or(SettingsError::Missing {
            what: "model",
            flag: "--model NAME",
            variables: "FLYCODE_MODEL (or LLM_MODEL_ID)",
            key: "model = \"...\"",
        })
}

/// The API key and the variable it came from: the one `api_key_env` names (which must be
/// set), else `FLYCODE_API_KEY`, `LLM_API_KEY` or `OPENAI_API_KEY`, else none.
fn resolve_api_key(
    file: &AgentConfig,
    env: &dyn Fn(&str) -> Option<String>,
    kind: ProviderKind,
) -> Result<(Option<String>, Option<String>), SettingsError> {
    if let Some(variable) = &file.api_key_env {
        return match env(variable).filter(|v| !v.trim().is_empty()) {
            Some(key) => Ok((Some(key), Some(variable.clone()))),
            None => Err(SettingsError::KeyVariableUnset {
                setting: "api_key_env",
                variable: variable.clone(),
            }),
        };
    }
    Ok(provider::key_variables(kind)
        .iter()
        .find_map(|name| {
            env(name)
                .filter(|v| !v.trim().is_empty())
                .map(|key| (Some(key), Some((*name).to_owned())))
        })
        .unwrap_or((None, None)))
}

/// `--mode`, else the file's `mode` (`text` or `native`), else native.
fn resolve_mode(flags: &SettingFlags, file: &AgentConfig) -> Result<CallingMode, SettingsError> {
    match (flags.mode, file.mode.as_deref()) {
        (Some(mode), _) => Ok(mode),
        (None, None | Some("native")) => Ok(CallingMode::Native),
        (None, Some("text")) => Ok(CallingMode::Text),
        (None, Some(other)) => Err(SettingsError::Invalid {
            setting: "mode",
            problem: format!("{other:?} is not a mode: use \"text\" or \"native\""),
        }),
    }
}

/// `--role-file`, else the file's `role_file`, else its `role`, else the built-in role.
fn resolve_role(flags: &SettingFlags, file: &AgentConfig) -> RoleChoice {
    match (&flags.role_file, &file.role_file, &file.role) {
        (Some(path), _, _) | (None, Some(path), _) => RoleChoice::File(path.clone()),
        (None, None, Some(text)) => RoleChoice::Text(text.clone()),
        (None, None, None) => RoleChoice::Built,
    }
}

/// `--no-system-prompt`, else a prompt file (flag over file), else the file's
/// `system_prompt = false`, else the built prompt.
fn resolve_system_prompt(flags: &SettingFlags, file: &AgentConfig) -> SystemPromptChoice {
    if flags.no_system_prompt {
        SystemPromptChoice::None
    } else if let Some(path) = flags
        .system_prompt_file
        .clone()
        .or(file.system_prompt_file.clone())
    {
        SystemPromptChoice::File(path)
    } else if file.system_prompt == Some(false) {
        SystemPromptChoice::None
    } else {
        SystemPromptChoice::Built
    }
}

/// `LIGHT_LLM_*` over `[agent.light]`; `None` without a model name. A key is sent to the light
/// endpoint only when it is the main endpoint or a key is configured for it: the main key never
/// goes to another server.
fn resolve_light(
    file: &AgentConfig,
    (main_base_url, main_provider): (&str, ProviderKind),
    main_key: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<LightModel>, SettingsError> {
    let set = |name: &str| env(name).filter(|value| !value.trim().is_empty());
    let table = file.light.clone().unwrap_or_default();
    let Some(model) = set("LIGHT_LLM_MODEL_ID").or(table.model) else {
        // A table that sets where and how but not which model is a mistake, not "no light
        // model" (the variables alone, unset or partly set, fall back as the contract says).
        if file.light.is_some() {
            return Err(SettingsError::Invalid {
                setting: "[agent.light]",
                problem: "it names no model: add model = \"...\" to it (or set LIGHT_LLM_MODEL_ID), or remove the table".to_owned(),
            });
        }
        return Ok(None);
    };
    let base_url = set("LIGHT_LLM_BASE_URL")
        .or(table.base_url)
        .unwrap_or_else(|| main_base_url.to_owned());
    if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
        return Err(SettingsError::Invalid {
            setting: "light model base URL",
            problem: format!(
                "{base_url:?} is not an http:// or https:// address (LIGHT_LLM_BASE_URL or base_url in [agent.light])"
            ),
        });
    }
    let (api_key, api_key_source) = if let Some(key) = set("LIGHT_LLM_API_KEY") {
        (Some(key), Some("LIGHT_LLM_API_KEY".to_owned()))
    } else if let Some(variable) = &table.api_key_env {
        match set(variable) {
            Some(key) => (Some(key), Some(variable.clone())),
            None => {
                return Err(SettingsError::KeyVariableUnset {
                    setting: "api_key_env in [agent.light]",
                    variable: variable.clone(),
                });
            }
        }
    } else if same_endpoint(&base_url, main_base_url) {
        (main_key.map(str::to_owned), None)
    } else {
        (None, None)
    };
    let provider = match set("LIGHT_LLM_PROVIDER").or(table.provider) {
        Some(name) => provider::parse_provider(&name, "provider in [agent.light]")?,
        None => main_provider,
    };
    Ok(Some(LightModel {
        provider,
        model,
        base_url,
        api_key,
        api_key_source,
    }))
}

/// Whether two base URLs are the same endpoint (a trailing `/` aside): the main key may go to it.
fn same_endpoint(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}

fn resolve_task_limits(file: &AgentConfig) -> Result<TaskLimits, SettingsError> {
    let defaults = TaskLimits::default();
    Ok(TaskLimits {
        per_run: in_range(None, file.max_tasks_per_run, &range::MAX_TASKS_PER_RUN)?
            .unwrap_or(defaults.per_run),
        per_agent: in_range(None, file.max_tasks_per_agent, &range::MAX_TASKS_PER_AGENT)?
            .unwrap_or(defaults.per_agent),
        max_turns: in_range(None, file.subagent_max_turns, &range::SUBAGENT_MAX_TURNS)?
            .unwrap_or(defaults.max_turns),
        time_limit: in_range(None, file.subagent_timeout_ms, &range::SUBAGENT_TIMEOUT_MS)?
            .map_or(defaults.time_limit, Duration::from_millis),
    })
}

fn subagent_role(config: &Option<SubagentRoleConfig>) -> RoleChoice {
    match config {
        Some(SubagentRoleConfig {
            role_file: Some(path),
            ..
        }) => RoleChoice::File(path.clone()),
        Some(SubagentRoleConfig {
            role: Some(text), ..
        }) => RoleChoice::Text(text.clone()),
        _ => RoleChoice::Built,
    }
}

/// The flag's value if given, else the file's, refused when outside `range`: the file was
/// checked when it was read, but a table built in code was not, so both are checked here.
fn in_range<T: Copy + Into<u64>>(
    flag: Option<T>,
    file: Option<T>,
    range: &SettingRange,
) -> Result<Option<T>, SettingsError> {
    let (value, from_flag) = match (flag, file) {
        (Some(value), _) => (value, true),
        (None, Some(value)) => (value, false),
        (None, None) => return Ok(None),
    };
    let number: u64 = value.into();
    if range.contains(i128::from(number)) {
        return Ok(Some(value));
    }
    let written = match (from_flag, range.flag) {
        (true, Some(flag)) => format!("{flag} {number}"),
        _ => format!("{} = {number}", range.key),
    };
    Err(SettingsError::OutOfRange {
        written,
        range: *range,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn resolve(
        flags: &SettingFlags,
        file: &AgentConfig,
        vars: &[(&str, &str)],
    ) -> Result<ResolvedSettings, SettingsError> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        resolve_settings(flags, file, &|name| vars.get(name).cloned())
    }

    #[test]
    fn flags_win_over_the_environment_which_wins_over_the_file() {
        let file = AgentConfig {
            base_url: Some("http://file/v1".into()),
            model: Some("file-model".into()),
            ..AgentConfig::default()
        };
        let vars = [
            ("FLYCODE_MODEL", "env-model"),
            ("OPENAI_BASE_URL", "http://env/v1"),
        ];
        let flags = SettingFlags {
            model: Some("flag-model".into()),
            ..SettingFlags::default()
        };
        let settings = resolve(&flags, &file, &vars).unwrap();
        assert_eq!(settings.model, "flag-model");
        assert_eq!(settings.base_url, "http://env/v1");
        let settings = resolve(&SettingFlags::default(), &file, &[]).unwrap();
        assert_eq!(
            (settings.model.as_str(), settings.base_url.as_str()),
            ("file-model", "http://file/v1")
        );
        assert_eq!(settings.mode, CallingMode::Native);
        assert_eq!((settings.max_turns, settings.max_violations), (50, 3));
        assert!(settings.stream);
    }

    #[test]
    fn a_missing_setting_names_the_flag_and_the_variable() {
        let error = resolve(&SettingFlags::default(), &AgentConfig::default(), &[])
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("--base-url") && error.contains("FLYCODE_BASE_URL"),
            "{error}"
        );
        let error = resolve(
            &SettingFlags::default(),
            &AgentConfig::default(),
            &[("FLYCODE_BASE_URL", "http://x/v1")],
        )
        .unwrap_err()
        .to_string();
        assert!(
            error.contains("--model") && error.contains("FLYCODE_MODEL"),
            "{error}"
        );
    }

    #[test]
    fn llm_variables_sit_between_flycodes_and_openais() {
        let llm = [
            ("LLM_BASE_URL", "http://127.0.0.1:8080/v1"),
            ("LLM_MODEL_ID", "qwen"),
            ("LLM_API_KEY", "sk-llm"),
            ("OPENAI_BASE_URL", "https://api.openai.com/v1"),
            ("OPENAI_API_KEY", "sk-openai"),
        ];
        let settings = resolve(&SettingFlags::default(), &AgentConfig::default(), &llm).unwrap();
        assert_eq!(settings.base_url, "http://127.0.0.1:8080/v1");
        assert_eq!(settings.model, "qwen");
        assert_eq!(settings.api_key.as_deref(), Some("sk-llm"));
        assert_eq!(settings.api_key_source.as_deref(), Some("LLM_API_KEY"));
        let mut both = llm.to_vec();
        both.extend([("FLYCODE_MODEL", "mine"), ("FLYCODE_API_KEY", "sk-mine")]);
        let settings = resolve(&SettingFlags::default(), &AgentConfig::default(), &both).unwrap();
        assert_eq!(settings.model, "mine");
        assert_eq!(settings.api_key.as_deref(), Some("sk-mine"));
        let missing = resolve(&SettingFlags::default(), &AgentConfig::default(), &[]).unwrap_err();
        assert!(missing.to_string().contains("LLM_BASE_URL"), "{missing}");
    }

    #[test]
    fn local_endpoints_wait_ten_minutes_for_the_first_byte() {
        for local in [
            "http://127.0.0.1:8080/v1",
            "http://localhost:11434/v1",
            "http://[::1]:8080/v1",
            "http://192.168.1.20:8080/v1",
            "http://10.0.0.5/v1",
            "http://172.16.3.4/v1",
        ] {
            assert!(is_local_endpoint(local), "{local}");
        }
        for remote in [
            "https://api.openai.com/v1",
            "http://8.8.8.8/v1",
            "http://172.32.0.1/v1",
        ] {
            assert!(!is_local_endpoint(remote), "{remote}");
        }
        let read = Duration::from_secs(120);
        let bounds = ReplyBounds {
            max_reply_tokens: DEFAULT_MAX_REPLY_TOKENS,
            first_byte_timeout: None,
            turn_timeout: DEFAULT_TURN_TIMEOUT,
        };
        assert_eq!(
            bounds.first_byte_timeout("http://127.0.0.1:8080/v1", read),
            LOCAL_FIRST_BYTE_TIMEOUT
        );
        assert_eq!(
            bounds.first_byte_timeout("https://api.openai.com/v1", read),
            read
        );
        let set = ReplyBounds {
            first_byte_timeout: Some(Duration::from_secs(5)),
            ..bounds
        };
        assert_eq!(
            set.first_byte_timeout("http://127.0.0.1/v1", read),
            Duration::from_secs(5)
        );
    }

    #[test]
    fn the_key_comes_from_the_named_variable_or_the_usual_ones() {
        let base = [("FLYCODE_BASE_URL", "http://x/v1"), ("FLYCODE_MODEL", "m")];
        let settings = resolve(&SettingFlags::default(), &AgentConfig::default(), &base).unwrap();
        assert_eq!(settings.api_key, None);
        let with_openai = [base[0], base[1], ("OPENAI_API_KEY", "sk-openai")];
        let settings = resolve(
            &SettingFlags::default(),
            &AgentConfig::default(),
            &with_openai,
        )
        .unwrap();
        assert_eq!(settings.api_key.as_deref(), Some("sk-openai"));
        assert_eq!(settings.api_key_source.as_deref(), Some("OPENAI_API_KEY"));
        let named = AgentConfig {
            api_key_env: Some("MY_KEY".into()),
            ..AgentConfig::default()
        };
        let error = resolve(&SettingFlags::default(), &named, &with_openai).unwrap_err();
        assert_eq!(
            error,
            SettingsError::KeyVariableUnset {
                setting: "api_key_env",
                variable: "MY_KEY".into()
            }
        );
        assert!(!error.to_string().contains("sk-openai"));
    }

    #[test]
    fn bad_values_are_refused_with_what_is_accepted() {
        let base = [("FLYCODE_BASE_URL", "http://x/v1"), ("FLYCODE_MODEL", "m")];
        let file = AgentConfig {
            mode: Some("json".into()),
            ..AgentConfig::default()
        };
        let error = resolve(&SettingFlags::default(), &file, &base)
            .unwrap_err()
            .to_string();
        assert!(error.contains("\"text\" or \"native\""), "{error}");
        let flags = SettingFlags {
            base_url: Some("api.openai.com".into()),
            ..SettingFlags::default()
        };
        let error = resolve(&flags, &AgentConfig::default(), &base)
            .unwrap_err()
            .to_string();
        assert!(error.contains("https://"), "{error}");
    }

    #[test]
    fn a_flag_out_of_range_is_refused_like_the_same_key_in_the_file() {
        let base = [("FLYCODE_BASE_URL", "http://x/v1"), ("FLYCODE_MODEL", "m")];
        let flags = SettingFlags {
            max_turns: Some(0),
            ..SettingFlags::default()
        };
        let error = resolve(&flags, &AgentConfig::default(), &base)
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "--max-turns 0 is out of range: allowed 1..=10000 (requests per run)"
        );
        let flags = SettingFlags {
            read_timeout_ms: Some(0),
            ..SettingFlags::default()
        };
        let error = resolve(&flags, &AgentConfig::default(), &base)
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("--read-timeout-ms 0 is out of range: allowed 1..=3600000"),
            "{error}"
        );
        let file = AgentConfig {
            max_violations: Some(0),
            ..AgentConfig::default()
        };
        let error = resolve(&SettingFlags::default(), &file, &base)
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("max_violations = 0 is out of range: allowed 1..="),
            "{error}"
        );
        // A flag in range wins over the file, whose value is not looked at then.
        let flags = SettingFlags {
            max_violations: Some(1),
            max_retries: Some(0),
            retry_base_ms: Some(0),
            ..SettingFlags::default()
        };
        let settings = resolve(&flags, &file, &base).unwrap();
        assert_eq!((settings.max_violations, settings.max_retries), (1, 0));
        assert_eq!(settings.retry_base, Duration::ZERO);
    }

    #[test]
    fn prompt_sources_follow_flags_then_the_file() {
        let base = [("FLYCODE_BASE_URL", "http://x/v1"), ("FLYCODE_MODEL", "m")];
        let file = AgentConfig {
            role: Some("You are terse.".into()),
            system_prompt: Some(false),
            ..AgentConfig::default()
        };
        let settings = resolve(&SettingFlags::default(), &file, &base).unwrap();
        assert_eq!(settings.role, RoleChoice::Text("You are terse.".into()));
        assert_eq!(settings.system_prompt, SystemPromptChoice::None);
        let flags = SettingFlags {
            system_prompt_file: Some("/p.md".into()),
            ..SettingFlags::default()
        };
        let settings = resolve(&flags, &AgentConfig::default(), &base).unwrap();
        assert_eq!(
            settings.system_prompt,
            SystemPromptChoice::File("/p.md".into())
        );
    }

    #[test]
    fn the_light_model_needs_a_name_and_never_gets_the_main_key_on_another_server() {
        let base = [
            ("FLYCODE_BASE_URL", "http://main/v1"),
            ("FLYCODE_MODEL", "m"),
            ("FLYCODE_API_KEY", "sk-main"),
        ];
        let light = |vars: &[(&str, &str)], file: &AgentConfig| {
            let mut all = base.to_vec();
            all.extend_from_slice(vars);
            resolve(&SettingFlags::default(), file, &all).map(|s| s.light)
        };
        let none = AgentConfig::default();
        assert_eq!(
            light(&[("LIGHT_LLM_BASE_URL", "http://l/v1")], &none),
            Ok(None)
        );
        let same_server = light(&[("LIGHT_LLM_MODEL_ID", "small")], &none)
            .unwrap()
            .unwrap();
        assert_eq!(same_server.base_url, "http://main/v1");
        assert_eq!(same_server.api_key.as_deref(), Some("sk-main"));
        let elsewhere = light(
            &[
                ("LIGHT_LLM_MODEL_ID", "small"),
                ("LIGHT_LLM_BASE_URL", "http://other/v1"),
            ],
            &none,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            elsewhere.api_key, None,
            "the main key stays with its server"
        );
        let own_key = light(
            &[
                ("LIGHT_LLM_MODEL_ID", "small"),
                ("LIGHT_LLM_BASE_URL", "http://other/v1"),
                ("LIGHT_LLM_API_KEY", "sk-light"),
            ],
            &none,
        )
        .unwrap()
        .unwrap();
        assert_eq!(own_key.api_key.as_deref(), Some("sk-light"));
        // The variables win over [agent.light]; a key variable it names must be set.
        let file = AgentConfig {
            light: Some(crate::config::LightModelConfig {
                provider: None,
                model: Some("file-small".into()),
                base_url: None,
                api_key_env: Some("MY_LIGHT_KEY".into()),
            }),
            ..AgentConfig::default()
        };
        assert_eq!(
            light(&[], &file).unwrap_err(),
            SettingsError::KeyVariableUnset {
                setting: "api_key_env in [agent.light]",
                variable: "MY_LIGHT_KEY".into()
            }
        );
        let from_file = light(&[("MY_LIGHT_KEY", "sk-file")], &file)
            .unwrap()
            .unwrap();
        assert_eq!(
            (from_file.model.as_str(), from_file.api_key.as_deref()),
            ("file-small", Some("sk-file"))
        );
        assert_eq!(from_file.api_key_source.as_deref(), Some("MY_LIGHT_KEY"));
        let env_wins = light(
            &[("LIGHT_LLM_MODEL_ID", "env-small"), ("MY_LIGHT_KEY", "k")],
            &file,
        )
        .unwrap()
        .unwrap();
        assert_eq!(env_wins.model, "env-small");
        // The same server written with a trailing slash still gets the main key.
        let slash = light(
            &[
                ("LIGHT_LLM_MODEL_ID", "small"),
                ("LIGHT_LLM_BASE_URL", "http://main/v1/"),
            ],
            &none,
        )
        .unwrap()
        .unwrap();
        assert_eq!(slash.api_key.as_deref(), Some("sk-main"));
        // A table without a model is an error naming it.
        let no_model = AgentConfig {
            light: Some(crate::config::LightModelConfig {
                provider: None,
                model: None,
                base_url: Some("http://other/v1".into()),
                api_key_env: None,
            }),
            ..AgentConfig::default()
        };
        let error = light(&[], &no_model).unwrap_err().to_string();
        assert!(
            error.contains("[agent.light]") && error.contains("model"),
            "{error}"
        );
    }

    #[test]
    fn task_limits_default_to_the_contract_and_roles_to_the_built_ones() {
        let base = [("FLYCODE_BASE_URL", "http://x/v1"), ("FLYCODE_MODEL", "m")];
        let settings = resolve(&SettingFlags::default(), &AgentConfig::default(), &base).unwrap();
        assert_eq!(settings.tasks, TaskLimits::default());
        assert_eq!(
            (
                settings.tasks.per_run,
                settings.tasks.per_agent,
                settings.tasks.max_turns
            ),
            (32, 16, 30)
        );
        assert_eq!(settings.tasks.time_limit, Duration::from_secs(600));
        assert!(!settings.strict);
        let file = AgentConfig {
            max_tasks_per_agent: Some(2),
            subagent_timeout_ms: Some(5000),
            strict: Some(true),
            subagent: crate::config::SubagentRolesConfig {
                plan: Some(SubagentRoleConfig {
                    role: Some(String::new()),
                    role_file: None,
                }),
                ..Default::default()
            },
            ..AgentConfig::default()
        };
        let settings = resolve(&SettingFlags::default(), &file, &base).unwrap();
        assert_eq!(settings.tasks.per_agent, 2);
        assert_eq!(settings.tasks.time_limit, Duration::from_secs(5));
        assert!(settings.strict);
        assert_eq!(
            settings.subagent_role(SubagentType::Plan),
            &RoleChoice::Text(String::new())
        );
        assert_eq!(
            settings.subagent_role(SubagentType::Explore),
            &RoleChoice::Built
        );
    }
}
