//! Configuration: defaults, the user's `flycode.toml`, the project's, the environment and the
//! flags, merged key by key into one [`Config`] (PROTOCOL.md §10 "Configuration"). [`mod@file`] reads
//! one file key by key, [`layers`] finds the files and merges them, setting aside what an
//! untrusted project file says that would loosen safety, [`trust`] keeps the trusted folders and
//! [`show`] says where each setting comes from. A mistake in a file (an unknown key, a bad value,
//! a number outside its range, never raised or lowered into it) is an error naming the file, line
//! and key, every mistake of every file at once:
//! `flycode.toml:3: output_cap = 10 is out of range: allowed 1024..=16777216 (bytes of a result
//! body)`. The ranges ([`range`]), which bind the flags of `flycode run` as well:
//!
//! | key | allowed | default |
//! | --- | --- | --- |
//! | `output_cap` | 1024..=16777216 bytes | 65536 |
//! | `max_reply_bytes` | 1024..=1073741824 bytes | 16777216 |
//! | `timeout_ms` | 100..=600000 ms (a call's `timeoutMs` may go down to 1) | 60000 |
//! | `[state] keep_days` | 1..=36500 days | 30 |
//! | `[undo] max_bytes` | 1048576..=1099511627776 bytes | 1073741824 |
//! | `[undo] max_age_days` | 1..=36500 days | 30 |
//! | `[undo] max_file_bytes` | 0..=1099511627776 bytes | 67108864 |
//! | `[jobs] log_bytes` | 65536..=1073741824 bytes | 8388608 |
//! | `[jobs] max_running` | 1..=64 | 8 |
//! | `[agent] max_turns` | 1..=10000 | 50 |
//! | `[agent] max_violations` | 1..=100 | 3 |
//! | `[agent] max_parallel` | 1..=64 | 4 |
//! | `[agent] special_every` | 1..=20 | 1 |
//! | `[agent] connect_timeout_ms` | 1..=600000 | 10000 |
//! | `[agent] read_timeout_ms` | 1..=3600000 | 120000 |
//! | `[agent] max_retries` | 0..=100 | 4 |
//! | `[agent] retry_base_ms` | 0..=30000 (the back-off is capped at 30 s) | 500 |
//!
//! ```toml
//! roots = ["/home/me/project"]       # allowed roots (flags win)
//! approval = "ask"                   # auto | ask | read-only
//! protected = ["**/secrets/**"]      # extra protected paths (globs)
//! output_cap = 65536                 # bytes of a result body
//! max_reply_bytes = 16777216         # a larger reply is refused as too_large, unparsed
//! timeout_ms = 60000                 # default process timeout
//! process_sandbox = "workspace-write" # what programs may write (Linux, Landlock): workspace-write
//!                                    # (the roots and a private TMPDIR) | read-only | off
//! process_network = true             # false: programs get no TCP connect or bind (Linux 6.7+)
//! secret_env = ["GITHUB_TOKEN"]      # more variables kept from programs, their values masked
//!                                    # as *** in every result (8 characters or longer)
//! dialect = "tags"                   # the protocol style: flycode (default) | tags (--dialect wins)
//! durability = "full"                # full: a write survives a power loss (fsyncs) | process:
//!                                    # no fsyncs, atomic only against a killed flycode
//!
//! tools = "extended"                 # the tool set of prompt/check/exec/watch/validate:
//!                                    # seed (default) | extended (--tools wins)
//!
//! [tools]                            # per-tool overrides: allow | ask | deny
//! set = "extended"                   # the tool set, when the table is present (TOML cannot
//! "shell.exec" = "deny"              # have both `tools = "..."` and `[tools]`)
//!
//! [agent]                            # flycode run (flags and FLYCODE_* variables win)
//! base_url = "http://127.0.0.1:8080/v1"
//! model = "qwen2.5-coder-32b"
//! api_key_env = "MY_PROVIDER_KEY"    # the variable holding the key; never the key itself
//! mode = "native"                    # text | native
//! max_turns = 50
//! max_violations = 3
//! max_parallel = 4                   # read-only calls of one turn running at once
//! special_every = 1                  # the special messages move every N results (a local
//!                                    # server re-reads less with 3-5)
//! stream = true
//! connect_timeout_ms = 10000
//! read_timeout_ms = 120000
//! max_retries = 4
//! role_file = "prompts/role.md"      # replaces the role definition (or role = "...")
//! system_prompt_file = "prompt.md"   # replaces the whole system prompt
//! system_prompt = false              # send no system prompt: the role definition takes its place
//! max_tasks_per_run = 32             # agent.task: sub-agent tasks per run at most
//! max_tasks_per_agent = 16           # ... and per agent (only the main agent starts tasks)
//! subagent_max_turns = 30            # a sub-agent's requests before its last turn
//! subagent_timeout_ms = 600000       # a sub-agent's time before its last turn
//! strict = false                     # true: task envelopes carry tool_call_id (or --strict)
//!
//! [agent.light]                      # the light model of sub-agents (LIGHT_LLM_* win);
//! model = "qwen2.5-coder-7b"         # unset: sub-agents asking for it use the main model
//! base_url = "http://127.0.0.1:8081/v1"
//! api_key_env = "LIGHT_KEY"          # the variable holding its key
//!
//! [state]                            # the state directory (flycode gc)
//! keep_days = 30                     # run files older than this are removed; an untrusted
//!                                    # project file may raise it, never lower it
//!
//! [undo]                             # the undo store (flycode history, flycode undo)
//! max_bytes = 1073741824             # the oldest changes go first beyond this
//! max_age_days = 30                  # changes older than this are pruned
//! max_file_bytes = 67108864          # a larger file is recorded by hash only
//! [jobs]                             # background jobs (PROTOCOL.md §10 (Running calls:
//! log_bytes = 8388608                # background jobs)): one job's output file at most
//! max_running = 8                    # jobs running at once in one session
//!
//! [mcp]
//! allow_changes_over_http = false    # flycode mcp --http clients may change files and run
//!                                    # programs (PROTOCOL.md §14, "Over HTTP"); your own file only
//!
//! [browser]                          # the browser companion (PROTOCOL.md §12)
//! auto_insert = true                 # put each result into the chat's message box
//! auto_submit = false                # and send it; your own file only
//!
//! [agent.subagent.explore]           # a sub-agent type's role (general|explore|summary|plan)
//! role_file = "prompts/explore.md"   # or role = "..."; an empty role is an error
//! ```

pub mod file;
pub mod layers;
pub mod loosen;
pub mod range;
pub mod reply_limit;
pub mod setting;
pub mod show;
pub mod table;
pub mod trust;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use thiserror::Error;

use crate::protocol::{DEFAULT_BODY_CAP, ToolName, ToolSet};
use crate::sandbox::Durability;
use crate::sandbox::contain::ProgramSandbox;
use crate::sandbox::protect::{CONFIG_FILE_NAME, user_config_dir};
use crate::tools::policy::{ApprovalMode, Policy, ToolRule};
use file::{Key, Mistake};
use layers::{FileKind, LayerFile, Layers};
use trust::TrustStore;

/// Why the configuration cannot be used (exit 2).
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid.
    #[error("{path}:{line}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// What is wrong, naming the key.
        message: String,
    },
    /// The files have mistakes: every one of them, in file order.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Mistakes(Vec<Mistake>),
}

/// The configuration file's contents.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    roots: Option<Vec<PathBuf>>,
    approval: Option<ApprovalMode>,
    protected: Option<Vec<String>>,
    #[serde(default, deserialize_with = "range::output_cap")]
    output_cap: Option<usize>,
    #[serde(default, deserialize_with = "range::max_reply_bytes")]
    max_reply_bytes: Option<usize>,
    #[serde(default, deserialize_with = "range::timeout_ms")]
    timeout_ms: Option<u64>,
    tools: Option<ToolsSetting>,
    process_sandbox: Option<ProgramSandbox>,
    process_network: Option<bool>,
    secret_env: Option<Vec<String>>,
    durability: Option<Durability>,
    dialect: Option<crate::protocol::dialect::Dialect>,
    agent: Option<AgentConfig>,
    state: Option<StateConfig>,
    jobs: Option<JobsConfig>,
    undo: Option<UndoConfig>,
    mcp: Option<McpConfig>,
    browser: Option<BrowserConfig>,
}

/// The `[browser]` table: what the browser companion does with a result (PROTOCOL.md §12, "The
/// browser extension").
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct BrowserConfig {
    auto_insert: Option<bool>,
    auto_submit: Option<bool>,
}

/// The `[mcp]` table: what `flycode mcp` allows its clients.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct McpConfig {
    allow_changes_over_http: Option<bool>,
}

/// The `[undo]` table: how much the undo store keeps (PROTOCOL.md §16 (Undo and history)).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct UndoConfig {
    #[serde(default, deserialize_with = "range::undo_max_bytes")]
    max_bytes: Option<u64>,
    #[serde(default, deserialize_with = "range::undo_max_age_days")]
    max_age_days: Option<u32>,
    #[serde(default, deserialize_with = "range::undo_max_file_bytes")]
    max_file_bytes: Option<u64>,
}

/// The `[jobs]` table: the bounds of a session's background jobs.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct JobsConfig {
    #[serde(default, deserialize_with = "range::log_bytes")]
    log_bytes: Option<u64>,
    #[serde(default, deserialize_with = "range::max_running")]
    max_running: Option<u32>,
}

/// The `[state]` table: how long the state directory keeps a run's files.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct StateConfig {
    #[serde(default, deserialize_with = "range::keep_days")]
    keep_days: Option<u32>,
}

/// The undo store's limits: the table's, the defaults where it says nothing.
fn undo_limits(table: UndoConfig) -> crate::sandbox::undo::UndoLimits {
    let default = crate::sandbox::undo::UndoLimits::default();
    crate::sandbox::undo::UndoLimits {
        max_bytes: table.max_bytes.unwrap_or(default.max_bytes),
        max_age_days: table.max_age_days.unwrap_or(default.max_age_days),
        max_file_bytes: table.max_file_bytes.unwrap_or(default.max_file_bytes),
    }
}

/// How long `flycode gc` keeps a file of the state directory, unless `[state] keep_days` says.
pub const DEFAULT_KEEP_DAYS: u32 = 30;

/// `tools`: the tool set's name (`tools = "extended"`), or the `[tools]` table of per-tool rules
/// with an optional `set` key.
#[derive(Debug, Deserialize)]
#[serde(
    untagged,
    expecting = "a tool set (\"seed\" or \"extended\") or a [tools] table"
)]
enum ToolsSetting {
    Set(String),
    Table(BTreeMap<String, String>),
}

/// The `[agent]` table: settings of `flycode run` as the file gives them. Paths are resolved
/// against the file's folder. The API key itself is deliberately not a setting: a project file
/// gets committed, so only the name of the variable holding it is.
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// `openai` or `anthropic`.
    pub provider: Option<String>,
    /// Compact when a request would pass this percent of the context (default 80).
    pub compact_at: Option<u32>,
    /// The model's context in tokens (else known for common models, else 128000).
    pub context_tokens: Option<u64>,
    /// Recent turns kept whole by compaction (default 4).
    pub keep_turns: Option<u32>,
    /// The endpoint, e.g. `https://api.openai.com/v1`.
    pub base_url: Option<String>,
    /// The model name.
    pub model: Option<String>,
    /// The environment variable holding the API key.
    pub api_key_env: Option<String>,
    /// `text` or `native`.
    pub mode: Option<String>,
    /// Requests per run at most.
    #[serde(default, deserialize_with = "range::max_turns")]
    pub max_turns: Option<u32>,
    /// Consecutive invalid replies before the run stops.
    #[serde(default, deserialize_with = "range::max_violations")]
    pub max_violations: Option<u32>,
    /// Read-only calls of one turn running at once.
    #[serde(default, deserialize_with = "range::max_parallel")]
    pub max_parallel: Option<u32>,
    /// The special messages move forward only every this many results.
    #[serde(default, deserialize_with = "range::special_every")]
    pub special_every: Option<u32>,
    /// Stream replies (SSE).
    pub stream: Option<bool>,
    /// Connect timeout in milliseconds.
    #[serde(default, deserialize_with = "range::connect_timeout_ms")]
    pub connect_timeout_ms: Option<u64>,
    /// Longest silence within a response, in milliseconds.
    #[serde(default, deserialize_with = "range::read_timeout_ms")]
    pub read_timeout_ms: Option<u64>,
    /// Retries on 429, 5xx, timeouts and connection failures.
    #[serde(default, deserialize_with = "range::max_retries")]
    pub max_retries: Option<u32>,
    /// First back-off delay in milliseconds.
    #[serde(default, deserialize_with = "range::retry_base_ms")]
    pub retry_base_ms: Option<u64>,
    /// Replaces the role definition.
    pub role: Option<String>,
    /// A file replacing the role definition.
    pub role_file: Option<PathBuf>,
    /// A file replacing the whole system prompt.
    pub system_prompt_file: Option<PathBuf>,
    /// `false`: send no system prompt (the role definition becomes the system message).
    pub system_prompt: Option<bool>,
    /// Sub-agent tasks per run at most.
    #[serde(default, deserialize_with = "range::max_tasks_per_run")]
    pub max_tasks_per_run: Option<u32>,
    /// Sub-agent tasks per agent at most.
    #[serde(default, deserialize_with = "range::max_tasks_per_agent")]
    pub max_tasks_per_agent: Option<u32>,
    /// A sub-agent's requests before its last turn.
    #[serde(default, deserialize_with = "range::subagent_max_turns")]
    pub subagent_max_turns: Option<u32>,
    /// A sub-agent's time before its last turn, in milliseconds.
    #[serde(default, deserialize_with = "range::subagent_timeout_ms")]
    pub subagent_timeout_ms: Option<u64>,
    /// `[agent.light]`: the light model of sub-agents.
    pub light: Option<LightModelConfig>,
    /// `[agent.subagent.<type>]`: the role of each sub-agent type.
    #[serde(default)]
    pub subagent: SubagentRolesConfig,
    /// Strict envelopes: a sub-agent task's result carries the `agent.task` call's id.
    pub strict: Option<bool>,
    /// The request's token limit (`max_tokens`).
    #[serde(default, deserialize_with = "range::max_reply_tokens")]
    pub max_reply_tokens: Option<u32>,
    /// Longest wait for a response's first event, in milliseconds.
    #[serde(default, deserialize_with = "range::first_byte_timeout_ms")]
    pub first_byte_timeout_ms: Option<u64>,
    /// The longest one request may take, in milliseconds.
    #[serde(default, deserialize_with = "range::turn_timeout_ms")]
    pub turn_timeout_ms: Option<u64>,
    /// The system prompt's profile: `full` or `compact`.
    pub prompt: Option<String>,
    /// Add the `★ Insight` module to the system prompt.
    pub insight: Option<bool>,
}

/// `[agent.light]`: the light model sub-agents may run on (`LIGHT_LLM_*` win).
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LightModelConfig {
    /// `openai` or `anthropic`; the main model's when unset.
    pub provider: Option<String>,
    /// The model name.
    pub model: Option<String>,
    /// The endpoint; the main one when unset.
    pub base_url: Option<String>,
    /// The variable holding its key.
    pub api_key_env: Option<String>,
}

/// `[agent.subagent]`: a role per sub-agent type.
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubagentRolesConfig {
    /// `general`.
    pub general: Option<SubagentRoleConfig>,
    /// `explore`.
    pub explore: Option<SubagentRoleConfig>,
    /// `summary`.
    pub summary: Option<SubagentRoleConfig>,
    /// `plan`.
    pub plan: Option<SubagentRoleConfig>,
}

/// `[agent.subagent.<type>]`: a role replacing the built-in one of the type.
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubagentRoleConfig {
    /// The role's text.
    pub role: Option<String>,
    /// A file holding it.
    pub role_file: Option<PathBuf>,
}

/// What the command line says, before the files are read.
#[derive(Debug, Default, Clone)]
pub struct Flags {
    /// `--root` values.
    pub roots: Vec<PathBuf>,
    /// `--approve`.
    pub approval: Option<ApprovalMode>,
    /// `--tools`.
    pub tool_set: Option<ToolSet>,
}

/// The resolved configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Allowed roots, unresolved (the sandbox resolves them).
    pub roots: Vec<PathBuf>,
    /// The approval policy.
    pub policy: Policy,
    /// Extra protected-path globs.
    pub protected: Vec<String>,
    /// Result body cap in bytes.
    pub output_cap: usize,
    /// The largest reply read and parsed, in bytes (PROTOCOL.md §1 (Reading a reply: reply size limit)); a larger one is `too_large`.
    pub max_reply_bytes: usize,
    /// Default process timeout in milliseconds.
    pub timeout_ms: u64,
    /// The tool set of the chat front ends (PROTOCOL.md §9 (Tools)): `--tools`, else the file's, else
    /// `seed`.
    pub tool_set: ToolSet,
    /// `process_sandbox`: how programs are contained (PROTOCOL.md §9 (Tools: what programs may do)); `workspace-write` unless
    /// set.
    pub process_sandbox: ProgramSandbox,
    /// `process_network`: whether programs may use TCP; `true` unless set.
    pub process_network: bool,
    /// `secret_env`: more variables holding secrets (kept from programs, masked in results).
    pub secret_env: Vec<String>,
    /// `durability`: what a write flushes before it answers (PROTOCOL.md §9 (fs.write), "What
    /// is synced"); `full` unless set.
    pub durability: Durability,
    /// `dialect`: the protocol style of `check`, `exec`, `watch`, `run` and `validate` when
    /// `--dialect` is not given (PROTOCOL.md §15 (The tag dialect)); `flycode` unless set.
    pub dialect: crate::protocol::dialect::Dialect,
    /// `[state] keep_days`: `flycode gc` removes the state directory's run files older than this.
    pub keep_days: u32,
    /// `[undo]`: how much the undo store keeps (PROTOCOL.md §16 (Undo and history)).
    pub undo: crate::sandbox::undo::UndoLimits,
    /// `[jobs] log_bytes`: what one background job's output file holds at most.
    pub job_log_bytes: u64,
    /// `[jobs] max_running`: how many background jobs a session runs at once.
    pub max_running_jobs: u32,
    /// `[mcp] allow_changes_over_http`: `flycode mcp --http` lets its clients change files and
    /// run programs (policy permitting) as if started with `--allow-changes`; a setting only the
    /// person's own file makes (PROTOCOL.md §14, "Over HTTP").
    pub mcp_http_allows_changes: bool,
    /// `[browser] auto_insert`: the browser companion puts each result into the chat's message
    /// box (the extension's menu may change it for a site).
    pub browser_auto_insert: bool,
    /// `[browser] auto_submit`: the browser companion also sends it; a setting only the person's
    /// own file makes (PROTOCOL.md §12, "The browser extension").
    pub browser_auto_submit: bool,
    /// The `[agent]` table, its paths made absolute.
    pub agent: AgentConfig,
    /// The files read and what each key's value comes from, including the settings of an
    /// untrusted project file that were not applied.
    pub layers: Layers,
    /// The flags it was loaded with.
    pub flags: Flags,
}

impl AgentConfig {
    /// The variables `[agent] api_key_env` and `[agent.light] api_key_env` name: they hold API
    /// keys as much as `FLYCODE_API_KEY` does, so every door keeps them from programs and masks
    /// their values (PROTOCOL.md §9 (Secrets and masking)), not only `flycode run`, which reads
    /// them.
    pub fn key_variables(&self) -> Vec<String> {
        self.api_key_env
            .iter()
            .chain(self.light.iter().flat_map(|light| &light.api_key_env))
            .cloned()
            .collect()
    }
}

impl Config {
    /// The limits the tools work within, at every door: among the secrets, the key variables
    /// the configuration names (`api_key_env`), so that no door can forget to keep them from
    /// programs and mask them (PROTOCOL.md §9 (Secrets and masking)).
    pub fn limits(&self) -> crate::tools::Limits {
        crate::tools::Limits {
            extra_secrets: self.agent.key_variables(),
            output_cap: self.output_cap,
            default_timeout_ms: self.timeout_ms,
            secret_env: self.secret_env.clone(),
            program_sandbox: self.process_sandbox,
            program_network: self.process_network,
            tool_set: self.tool_set,
            places: crate::tools::places::Places {
                project: self
                    .layers
                    .project()
                    .map(|(_, dir, trusted)| (dir.to_owned(), trusted)),
                ..crate::tools::places::Places::from_environment()
            },
            job_log_bytes: self.job_log_bytes,
            max_running_jobs: self.max_running_jobs,
            ..crate::tools::Limits::default()
        }
    }

    /// Flags over the environment over the project's file over the user's file over defaults
    /// (PROTOCOL.md §10 "Configuration"), the project file judged against the user's trust store.
    pub fn load(flags: &Flags) -> Result<Config, ConfigError> {
        // A working directory that is gone has no project file (the user's still applies).
        let cwd = std::env::current_dir().ok();
        let user_dir = user_config_dir();
        let store = user_dir.as_deref().map(TrustStore::in_dir);
        let layers = layers::load(cwd.as_deref(), user_dir.as_deref(), store.as_ref())?;
        Config::from_layers(flags, layers)
    }

    /// Reads the configuration from `path` only, as the user's own file (tests).
    pub fn load_from(flags: &Flags, path: &Path) -> Result<Config, ConfigError> {
        let parsed = layers::read(path)?;
        let layers = layers::merge(vec![LayerFile {
            parsed,
            kind: FileKind::User,
        }]);
        Config::from_layers(flags, layers)
    }

    /// The configuration the merged `layers` and `flags` give; an error listing every mistake of
    /// every file when any has one.
    pub fn from_layers(flags: &Flags, layers: Layers) -> Result<Config, ConfigError> {
        let mistakes = layers.mistakes();
        if !mistakes.is_empty() {
            return Err(ConfigError::Mistakes(mistakes));
        }
        let mut root = toml::Table::new();
        for (key, applied) in &layers.settings {
            insert_nested(&mut root, &key.0, applied.value.clone());
        }
        let file = FileConfig::deserialize(toml::Value::Table(root)).map_err(|error| {
            ConfigError::Invalid {
                path: PathBuf::from(CONFIG_FILE_NAME),
                line: 1,
                message: error.message().to_owned(),
            }
        })?;
        Config::resolve(flags, file, layers)
    }

    /// The same configuration with its project file trusted: the files read at start merged
    /// again (not read again), once the person trusted the very bytes that were read.
    pub fn trusting_project(self) -> Result<Config, ConfigError> {
        let mut files = self.layers.files;
        for file in &mut files {
            if let FileKind::Project { trusted, .. } = &mut file.kind {
                *trusted = true;
            }
        }
        Config::from_layers(&self.flags, layers::merge(files))
    }

    /// The file a person edits to change a setting: the project's when trusted, else the
    /// user's.
    pub fn settings_file(&self) -> Option<PathBuf> {
        match self.layers.project() {
            Some((path, _, true)) => Some(path.to_owned()),
            _ => user_config_dir().map(|dir| dir.join(CONFIG_FILE_NAME)),
        }
    }

    fn resolve(flags: &Flags, file: FileConfig, layers: Layers) -> Result<Config, ConfigError> {
        let (overrides, file_set) = tool_rules(file.tools, &layers)?;
        let agent = agent_beside_files(file.agent.unwrap_or_default(), &layers);
        let roots = if flags.roots.is_empty() {
            roots_beside_file(file.roots.unwrap_or_default(), &layers)
        } else {
            flags.roots.clone()
        };
        Ok(Config {
            roots,
            policy: Policy {
                approval: flags.approval.or(file.approval).unwrap_or_default(),
                overrides,
                read_only_advice: None,
            },
            protected: file.protected.unwrap_or_default(),
            output_cap: file.output_cap.unwrap_or(DEFAULT_BODY_CAP),
            max_reply_bytes: file
                .max_reply_bytes
                .unwrap_or(reply_limit::DEFAULT_MAX_REPLY_BYTES),
            timeout_ms: file.timeout_ms.unwrap_or(60_000),
            tool_set: flags.tool_set.or(file_set).unwrap_or_default(),
            process_sandbox: file.process_sandbox.unwrap_or_default(),
            process_network: file.process_network.unwrap_or(true),
            secret_env: file.secret_env.unwrap_or_default(),
            durability: file.durability.unwrap_or_default(),
            dialect: file.dialect.unwrap_or_default(),
            keep_days: file
                .state
                .and_then(|state| state.keep_days)
                .unwrap_or(DEFAULT_KEEP_DAYS),
            undo: undo_limits(file.undo.unwrap_or_default()),
            job_log_bytes: file
                .jobs
                .as_ref()
                .and_then(|jobs| jobs.log_bytes)
                .unwrap_or(crate::tools::jobs::DEFAULT_LOG_BYTES),
            max_running_jobs: file
                .jobs
                .as_ref()
                .and_then(|jobs| jobs.max_running)
                .unwrap_or(crate::tools::jobs::DEFAULT_MAX_RUNNING),
            mcp_http_allows_changes: file
                .mcp
                .and_then(|mcp| mcp.allow_changes_over_http)
                .unwrap_or(false),
            browser_auto_insert: file
                .browser
                .as_ref()
                .and_then(|browser| browser.auto_insert)
                .unwrap_or(true),
            browser_auto_submit: file
                .browser
                .as_ref()
                .and_then(|browser| browser.auto_submit)
                .unwrap_or(false),
            agent,
            layers,
            flags: flags.clone(),
        })
    }
}

/// The `[tools]` rules and the tool set the files name (`tools = "..."` or `[tools] set`); an
/// error naming the file and line of a set, tool or rule that does not exist.
fn tool_rules(
    tools: Option<ToolsSetting>,
    layers: &Layers,
) -> Result<(BTreeMap<ToolName, ToolRule>, Option<ToolSet>), ConfigError> {
    let invalid = |key: &str, message: String| {
        let key = if key == "tools" || key == "set" {
            Key::of(&["tools", "set"])
        } else {
            Key(vec!["tools".to_owned(), key.to_owned()])
        };
        let (path, line) = line_of(layers, &key);
        ConfigError::Invalid {
            path,
            line,
            message,
        }
    };
    let set_name = |name: &str, key: &str| {
        ToolSet::from_name(name).ok_or_else(|| {
            invalid(
                key,
                format!("{key} = {name:?} is not a tool set: use \"seed\" or \"extended\""),
            )
        })
    };
    let mut overrides = BTreeMap::new();
    let table = match tools {
        None => return Ok((overrides, None)),
        Some(ToolsSetting::Set(name)) => return Ok((overrides, Some(set_name(&name, "tools")?))),
        Some(ToolsSetting::Table(table)) => table,
    };
    let mut file_set = None;
    for (name, rule) in table {
        if name == "set" {
            file_set = Some(set_name(&rule, "set")?);
            continue;
        }
        let Some(tool) = ToolName::from_name(&name) else {
            return Err(invalid(
                &name,
                format!("[tools] names {name:?}, which is not a flycode tool"),
            ));
        };
        let rule = match rule.as_str() {
            "allow" => ToolRule::Allow,
            "ask" => ToolRule::Ask,
            "deny" => ToolRule::Deny,
            other => {
                return Err(invalid(
                    &name,
                    format!(
                        "[tools] {name:?} = {other:?} is not a rule: use \"allow\", \"ask\" or \"deny\""
                    ),
                ));
            }
        };
        overrides.insert(tool, rule);
    }
    Ok((overrides, file_set))
}

/// The file and line that set `key` (the first, for the lists that add up).
fn line_of(layers: &Layers, key: &Key) -> (PathBuf, usize) {
    layers
        .settings
        .get(key)
        .and_then(|applied| applied.sources.first())
        .and_then(|source| match source {
            setting::SettingSource::File { path, line } => Some((path.clone(), *line)),
            _ => None,
        })
        .unwrap_or_else(|| (PathBuf::from(CONFIG_FILE_NAME), 1))
}

/// The folder of the file that set `key`: a relative path in it is relative to this.
fn base_of(layers: &Layers, key: &[&str]) -> PathBuf {
    layers
        .settings
        .get(&Key::of(key))
        .map(|applied| applied.base.clone())
        .unwrap_or_default()
}

/// The `[agent]` table with its relative file paths made absolute, beside the file that set
/// each.
fn agent_beside_files(mut agent: AgentConfig, layers: &Layers) -> AgentConfig {
    let beside = |path: &mut PathBuf, key: &[&str]| {
        if path.is_relative() {
            *path = base_of(layers, key).join(&*path);
        }
    };
    if let Some(path) = &mut agent.role_file {
        beside(path, &["agent", "role_file"]);
    }
    if let Some(path) = &mut agent.system_prompt_file {
        beside(path, &["agent", "system_prompt_file"]);
    }
    for (name, role) in [
        ("general", &mut agent.subagent.general),
        ("explore", &mut agent.subagent.explore),
        ("summary", &mut agent.subagent.summary),
        ("plan", &mut agent.subagent.plan),
    ] {
        if let Some(path) = role.as_mut().and_then(|role| role.role_file.as_mut()) {
            beside(path, &["agent", "subagent", name, "role_file"]);
        }
    }
    agent
}

/// The files' `roots`, a relative one beside the file that set it.
fn roots_beside_file(roots: Vec<PathBuf>, layers: &Layers) -> Vec<PathBuf> {
    let base = base_of(layers, &["roots"]);
    roots
        .into_iter()
        .map(|root| {
            if root.is_relative() {
                base.join(root)
            } else {
                root
            }
        })
        .collect()
}

/// Puts `value` at `key` in `table`, making the tables on the way.
fn insert_nested(table: &mut toml::Table, key: &[String], value: toml::Value) {
    match key {
        [] => {}
        [last] => {
            table.insert(last.clone(), value);
        }
        [first, rest @ ..] => {
            let inner = table
                .entry(first.clone())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            if let toml::Value::Table(inner) = inner {
                insert_nested(inner, rest, value);
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // fixtures are made directly, outside the sandbox
mod tests {
    use super::*;

    fn load(text: &str, flags: &Flags) -> Result<Config, ConfigError> {
        let temp = tempfile::tempdir().unwrap();
        let path = temp.path().join("flycode.toml");
        std::fs::write(&path, text).unwrap();
        Config::load_from(flags, &path)
    }

    #[test]
    fn trusting_the_project_applies_the_bytes_read_without_reading_again() {
        let temp = tempfile::tempdir().unwrap();
        let project = temp.path().canonicalize().unwrap();
        std::fs::create_dir_all(project.join(".git")).unwrap();
        std::fs::write(project.join("flycode.toml"), "approval = \"auto\"\n").unwrap();
        let layers = layers::load(Some(&project), None, None).unwrap();
        let config = Config::from_layers(&Flags::default(), layers).unwrap();
        assert_eq!(config.policy.approval, ApprovalMode::Ask);
        assert_eq!(config.layers.ignored.len(), 1);
        // Changed on disk after it was read: what the person was shown is what gets trusted.
        std::fs::write(project.join("flycode.toml"), "approval = \"read-only\"\n").unwrap();
        let trusted = config.trusting_project().unwrap();
        assert_eq!(trusted.policy.approval, ApprovalMode::Auto);
        assert!(trusted.layers.ignored.is_empty());
        assert_eq!(trusted.layers.project().map(|(_, _, t)| t), Some(true));
    }

    #[test]
    fn reads_every_key() {
        let config = load(
            "roots = [\"/srv/app\"]\napproval = \"read-only\"\nprotected = [\"**/secrets/**\"]\noutput_cap = 4096\nmax_reply_bytes = 1048576\ntimeout_ms = 5000\n[tools]\n\"shell.exec\" = \"deny\"\n",
            &Flags::default(),
        )
        .unwrap();
        assert_eq!(config.roots, vec![PathBuf::from("/srv/app")]);
        assert_eq!(config.policy.approval, ApprovalMode::ReadOnly);
        assert_eq!(
            config.policy.overrides.get(&ToolName::ShellExec),
            Some(&ToolRule::Deny)
        );
        assert_eq!((config.output_cap, config.timeout_ms), (4096, 5000));
        assert_eq!(config.max_reply_bytes, 1 << 20);
        assert_eq!(
            load("", &Flags::default()).unwrap().max_reply_bytes,
            16 << 20
        );
        assert_eq!(config.protected, vec!["**/secrets/**".to_owned()]);
    }

    #[test]
    fn durability_is_full_unless_set_and_names_a_bad_word() {
        assert_eq!(
            load("", &Flags::default()).unwrap().durability,
            Durability::Full
        );
        assert_eq!(
            load("durability = \"process\"\n", &Flags::default())
                .unwrap()
                .durability,
            Durability::Process
        );
        let error = load("roots = []\ndurability = \"none\"\n", &Flags::default())
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("flycode.toml:2:") && error.contains("process"),
            "{error}"
        );
    }

    #[test]
    fn the_dialect_is_flycode_unless_set_and_names_a_bad_word() {
        use crate::protocol::dialect::Dialect;
        assert_eq!(
            load("", &Flags::default()).unwrap().dialect,
            Dialect::Flycode
        );
        assert_eq!(
            load("dialect = \"tags\"\n", &Flags::default())
                .unwrap()
                .dialect,
            Dialect::Tags
        );
        let error = load("roots = []\ndialect = \"tagz\"\n", &Flags::default())
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("flycode.toml:2:") && error.contains("tags"),
            "{error}"
        );
    }

    #[test]
    fn reads_the_program_settings_and_checks_their_values() {
        let config = load("", &Flags::default()).unwrap();
        assert_eq!(config.process_sandbox, ProgramSandbox::WorkspaceWrite);
        assert!(config.process_network);
        assert!(config.secret_env.is_empty());
        let config = load(
            "process_sandbox = \"read-only\"\nprocess_network = false\nsecret_env = [\"GITHUB_TOKEN\"]\n",
            &Flags::default(),
        )
        .unwrap();
        assert_eq!(config.process_sandbox, ProgramSandbox::ReadOnly);
        assert!(!config.process_network);
        let limits = config.limits();
        assert_eq!(limits.program_sandbox, ProgramSandbox::ReadOnly);
        assert!(!limits.program_network);
        assert!(limits.secret_names().contains(&"GITHUB_TOKEN".to_owned()));
        assert_eq!(
            load("process_sandbox = \"off\"\n", &Flags::default())
                .unwrap()
                .process_sandbox,
            ProgramSandbox::Off
        );
        let error = load(
            "roots = []\nprocess_sandbox = \"strict\"\n",
            &Flags::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            error.contains("flycode.toml:2:") && error.contains("workspace-write"),
            "{error}"
        );
    }

    #[test]
    fn http_clients_may_change_files_only_where_the_persons_file_says_so() {
        assert!(!load("", &Flags::default()).unwrap().mcp_http_allows_changes);
        assert!(
            load("[mcp]\nallow_changes_over_http = true\n", &Flags::default())
                .unwrap()
                .mcp_http_allows_changes
        );
        let setting =
            table::lookup(&["mcp".to_owned(), "allow_changes_over_http".to_owned()]).unwrap();
        assert!(matches!(setting.safety, table::Safety::PersonOnly(_)));
    }

    #[test]
    fn reads_the_agent_table_with_paths_beside_the_file() {
        let temp = tempfile::tempdir().unwrap();
        let path = temp.path().join("flycode.toml");
        std::fs::write(
            &path,
            "[agent]\nmodel = \"m\"\nmode = \"text\"\nmax_turns = 7\nrole_file = \"role.md\"\nsystem_prompt = false\n",
        )
        .unwrap();
        let config = Config::load_from(&Flags::default(), &path).unwrap();
        assert_eq!(config.agent.model.as_deref(), Some("m"));
        assert_eq!(config.agent.max_turns, Some(7));
        assert_eq!(config.agent.system_prompt, Some(false));
        assert_eq!(config.agent.role_file, Some(temp.path().join("role.md")));
        let error = load("[agent]\napi_key = \"sk-123\"\n", &Flags::default())
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("api_key") && error.contains(":2:"),
            "{error}"
        );
    }

    #[test]
    fn the_tool_set_is_a_string_or_the_set_key_of_the_tools_table() {
        let config = load("tools = \"extended\"\n", &Flags::default()).unwrap();
        assert_eq!(config.tool_set, ToolSet::Extended);
        let config = load(
            "[tools]\nset = \"extended\"\n\"fs.edit\" = \"deny\"\n",
            &Flags::default(),
        )
        .unwrap();
        assert_eq!(config.tool_set, ToolSet::Extended);
        assert_eq!(
            config.policy.overrides.get(&ToolName::FsEdit),
            Some(&ToolRule::Deny)
        );
        assert_eq!(load("", &Flags::default()).unwrap().tool_set, ToolSet::Seed);
        let error = load("roots = []\ntools = \"all\"\n", &Flags::default())
            .unwrap_err()
            .to_string();
        assert!(
            error.ends_with(
                "flycode.toml:2: tools = \"all\" is not a tool set: use \"seed\" or \"extended\""
            ),
            "{error}"
        );
        let error = load("[tools]\n\"fs.read\" = \"maybe\"\n", &Flags::default())
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("flycode.toml:2:") && error.contains("\"allow\", \"ask\" or \"deny\""),
            "{error}"
        );
    }

    #[test]
    fn flags_win_over_the_file() {
        let flags = Flags {
            roots: vec![PathBuf::from("/flag")],
            approval: Some(ApprovalMode::Auto),
            tool_set: Some(ToolSet::Seed),
        };
        let config = load(
            "roots = [\"/file\"]\napproval = \"ask\"\ntools = \"extended\"\n",
            &flags,
        )
        .unwrap();
        assert_eq!(config.roots, vec![PathBuf::from("/flag")]);
        assert_eq!(config.tool_set, ToolSet::Seed);
        assert_eq!(config.policy.approval, ApprovalMode::Auto);
    }

    /// A file setting `key = value` at a known line, after a comment and a string that name the
    /// same key; `[agent]` keys in their table. Returns the text and the line.
    fn file_setting(key: &str, value: i128) -> (String, usize) {
        let head = format!("# {key} = 1 is what a comment says\nprotected = [\"{key} = 1\"]\n");
        if matches!(key, "output_cap" | "max_reply_bytes" | "timeout_ms") {
            (
                format!("{head}{key} = {value}\n[agent]\nmodel = \"m\"\n"),
                3,
            )
        } else {
            (format!("{head}[agent]\n{key} = {value}\n"), 4)
        }
    }

    #[test]
    fn a_number_out_of_range_is_an_error_naming_line_key_and_range() {
        for range in range::ALL {
            for bad in [i128::from(range.min) - 1, i128::from(range.max) + 1] {
                let (text, line) = file_setting(range.key, bad);
                let error = load(&text, &Flags::default()).unwrap_err().to_string();
                let expected = format!(
                    "flycode.toml:{line}: {} = {bad} is out of range: allowed {}..={} ({})",
                    range.key, range.min, range.max, range.unit
                );
                assert!(error.ends_with(&expected), "{error}\nwanted {expected}");
            }
        }
    }

    #[test]
    fn the_bounds_of_a_range_are_accepted() {
        for range in range::ALL {
            for good in [range.min, range.max] {
                let (text, _) = file_setting(range.key, i128::from(good));
                let config = load(&text, &Flags::default()).unwrap();
                let read = match range.key {
                    "output_cap" => config.output_cap as u64,
                    "max_reply_bytes" => config.max_reply_bytes as u64,
                    "timeout_ms" => config.timeout_ms,
                    "max_turns" => config.agent.max_turns.map(u64::from).unwrap(),
                    "max_violations" => config.agent.max_violations.map(u64::from).unwrap(),
                    "max_parallel" => config.agent.max_parallel.map(u64::from).unwrap(),
                    "special_every" => config.agent.special_every.map(u64::from).unwrap(),
                    "connect_timeout_ms" => config.agent.connect_timeout_ms.unwrap(),
                    "read_timeout_ms" => config.agent.read_timeout_ms.unwrap(),
                    "max_retries" => config.agent.max_retries.map(u64::from).unwrap(),
                    "retry_base_ms" => config.agent.retry_base_ms.unwrap(),
                    "max_tasks_per_run" => config.agent.max_tasks_per_run.map(u64::from).unwrap(),
                    "max_tasks_per_agent" => {
                        config.agent.max_tasks_per_agent.map(u64::from).unwrap()
                    }
                    "subagent_max_turns" => config.agent.subagent_max_turns.map(u64::from).unwrap(),
                    "subagent_timeout_ms" => config.agent.subagent_timeout_ms.unwrap(),
                    "max_reply_tokens" => config.agent.max_reply_tokens.map(u64::from).unwrap(),
                    "first_byte_timeout_ms" => config.agent.first_byte_timeout_ms.unwrap(),
                    "turn_timeout_ms" => config.agent.turn_timeout_ms.unwrap(),
                    other => panic!("no test reads {other}"),
                };
                assert_eq!(read, good, "{}", range.key);
            }
        }
    }

    #[test]
    fn the_documented_example_error_is_the_real_one() {
        let error = load("roots = []\n\noutput_cap = 10\n", &Flags::default())
            .unwrap_err()
            .to_string();
        assert!(
            error.ends_with(
                "flycode.toml:3: output_cap = 10 is out of range: allowed 1024..=16777216 (bytes of a result body)"
            ),
            "{error}"
        );
        let error = load("timeout_ms = 0\n", &Flags::default())
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(":1: timeout_ms = 0 is out of range: allowed 100..=600000"),
            "{error}"
        );
    }

    #[test]
    fn errors_name_the_file_line_and_key() {
        let error = load("roots = []\n\ncolour = \"red\"\n", &Flags::default()).unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains("flycode.toml:3:") && text.contains("colour"),
            "{text}"
        );
        let error = load("approval = \"sometimes\"\n", &Flags::default())
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(":1:") && error.contains("sometimes"),
            "{error}"
        );
        let error = load("[tools]\n\"fs.raed\" = \"deny\"\n", &Flags::default())
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(":2:") && error.contains("fs.raed"),
            "{error}"
        );
    }
}
