//! The `flycode` command line: argument definitions and one module per command. This is the only
//! code that prints; it reads its input and hands the work to the library.

pub(crate) mod approve;
pub(crate) mod check;
pub(crate) mod check_tags;
pub(crate) mod config;
pub(crate) mod early_reply;
pub mod exec;
pub(crate) mod exec_tags;
pub(crate) mod gc;
pub mod history;
pub(crate) mod log;
pub(crate) mod mcp;
pub(crate) mod progress;
pub(crate) mod prompt;
pub(crate) mod run;
pub mod signals;
pub(crate) mod trust;
pub mod undo;
pub(crate) mod validate;
pub(crate) mod watch;

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand, ValueEnum};

use crate::config::reply_limit::{ReplyTooLarge, read_reply};

/// How a command ended, as the process exit status (PROTOCOL.md §7 (Commands)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// 0: a valid call, an ok result, a clean transcript.
    Success = 0,
    /// 1: a protocol violation, a failed result, findings.
    Failure = 1,
    /// 2: a usage or configuration error.
    Usage = 2,
    /// 3: the input holds no call.
    NoCall = 3,
    /// 130: stopped by Ctrl-C (`flycode run`; `flycode exec` at the approval question), as a
    /// shell reports a process ended by SIGINT.
    Interrupted = 130,
}

/// flycode: let a chat model work on this machine through flycode-call blocks, safely.
#[derive(Debug, Parser)]
#[command(name = "flycode", version, about, long_about = None, after_help = ENVIRONMENT_HELP)]
pub struct Cli {
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// The command line of this process, parsed. `exec`, the command a script runs once per
    /// call, is parsed against its own subcommand alone: building the whole tree of every
    /// command's flags costs it half a millisecond of a start-up measured in milliseconds
    /// (issue 41). Anything the short parse does not accept (`--help`, a mistake) is parsed
    /// again in full, so that help and errors read as they always do.
    pub fn from_command_line() -> Cli {
        Cli::from_args(std::env::args_os().collect())
    }

    /// `args` (the program's name first) parsed as [`Cli::from_command_line`] does.
    pub fn from_args(args: Vec<std::ffi::OsString>) -> Cli {
        use clap::{Args, FromArgMatches};
        if args.get(1).is_some_and(|command| command == "exec") {
            let exec_only = clap::Command::new("flycode")
                .subcommand(ExecArgs::augment_args(clap::Command::new("exec")));
            if let Ok(matches) = exec_only.try_get_matches_from(&args)
                && let Ok(cli) = Cli::from_arg_matches(&matches)
            {
                return cli;
            }
        }
        Cli::parse_from(args)
    }
}

/// The environment variables flycode reads, as `flycode --help` lists them (every one the README
/// names).
const ENVIRONMENT_HELP: &str = "\
Environment:
  FLYCODE_STATE_DIR, XDG_STATE_HOME   the state folder (audit log, undo store, sessions, transcripts)
  FLYCODE_CONFIG_DIR, XDG_CONFIG_HOME the person's configuration folder (flycode/flycode.toml)
  FLYCODE_BASE_URL, LLM_BASE_URL, OPENAI_BASE_URL, ANTHROPIC_BASE_URL
                                      flycode run: the API's endpoint
  FLYCODE_MODEL, LLM_MODEL_ID, ANTHROPIC_MODEL
                                      flycode run: the model
  FLYCODE_API_KEY, LLM_API_KEY, OPENAI_API_KEY, ANTHROPIC_API_KEY
                                      flycode run: the API key (kept from programs, masked)
  LIGHT_LLM_MODEL_ID, LIGHT_LLM_BASE_URL, LIGHT_LLM_API_KEY, LIGHT_LLM_PROVIDER, FLYCODE_LIGHT_API_KEY
                                      flycode run: the light model of sub-agents and summaries
  FLYCODE_MEMORY_ALL_ROOTS=1          memory.query searches runs of every root, not only this one's
  FLYCODE_DEBUG_CONFIG_READS          say at the end how many configuration files were read
  FLYCODE_TEST_PYTHON                 the test suite: a python that has the official mcp package
  FLYCODE_REPO                        the README's CI example: the git URL to install flycode from
  DISPLAY                             flycode watch: the X11 display whose clipboard is watched
flycode sets FLYCODE_SECRET_HANDOFF and FLYCODE_GUARDIAN for itself; they are not settings.";

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Give the verdict on one model reply: print the normalized call, or the flycode-result
    /// block a violation earns. Exit 0 call, 1 invalid, 3 no call.
    Check(CheckArgs),
    /// Print the effective settings and where each comes from (flag, variable, file:line,
    /// default, or ignored as untrusted); --check lists every mistake of the files. Exit 2 on a
    /// mistake.
    Config(ConfigArgs),
    /// Judge one reply (or a slash command), run its call under the policy, print the
    /// flycode-result block. Exit 0 ok, 1 failed or invalid, 3 no call, 130 Ctrl-C at the
    /// approval question.
    Exec(ExecArgs),
    /// Remove the state directory's run files (transcripts, replay stores, sessions) older than
    /// `[state] keep_days` (default 30), and say what was removed and how many bytes.
    ///
    /// Never the audit log, the seal key or the journal's records.
    Gc(GcArgs),
    /// List the changes flycode made to files, newest first: id, time, door, run, call, tool,
    /// paths, lines added and removed (what programs changed is not recorded).
    History(history::HistoryArgs),
    /// Print the most recent entries of the audit log (damaged lines are skipped and named on
    /// standard error).
    ///
    /// The log is audit.jsonl in the state directory: $FLYCODE_STATE_DIR, else
    /// $XDG_STATE_HOME/flycode, else ~/.local/state/flycode (%LOCALAPPDATA%\flycode on Windows).
    Log(LogArgs),
    /// Serve the tools to an MCP client (Claude Desktop, Cursor, Codex...) over standard input
    /// and output, under the same roots, policy and audit log.
    Mcp(McpArgs),
    /// Print the system prompt to paste into a browser chat.
    Prompt(PromptArgs),
    /// Work on a task through an OpenAI-compatible or Anthropic API until the model answers in prose.
    /// Exit 0 answered, 1 stopped early or failed, 2 usage or settings, 130 Ctrl-C.
    #[command(
        override_usage = "flycode run [OPTIONS] <TASK>\n       flycode run [OPTIONS] -   (the task from standard input)\n       flycode run [OPTIONS] --task-file FILE\n       flycode run [OPTIONS] --resume [TRANSCRIPT|latest] [--continue MESSAGE]"
    )]
    Run(Box<RunArgs>),
    /// Trust the flycode.toml that applies in a folder (default: here), so that its settings that
    /// loosen safety apply too; a change to the file makes it untrusted again.
    Trust(TrustArgs),
    /// Take changes back, newest first (default: the last one). A path changed since is a
    /// conflict: nothing is touched unless --force. The undo is a change too. Exit 0 done, 1 not.
    Undo(undo::UndoArgs),
    /// Check recorded conversations against the protocol (for CI). Exit 0 clean, 1 errors.
    Validate(ValidateArgs),
    /// Answer replies as they arrive: copied to the clipboard (the default) or dropped into a
    /// folder (--inbox DIR; without a display, a folder in the state directory).
    Watch(WatchArgs),
    /// Print a completion script for a shell (bash, zsh, fish, elvish, powershell), e.g.
    /// `flycode completions bash > ~/.local/share/bash-completion/completions/flycode`.
    Completions(CompletionsArgs),
    /// Keep the text on standard input on the clipboard until something else is copied (used by
    /// `prompt --copy`, as xclip does).
    #[command(name = "hold-clipboard", hide = true)]
    HoldClipboard,
}

/// `flycode watch` arguments.
#[derive(Debug, clap::Args)]
pub struct WatchArgs {
    /// Watch this folder for reply files (*.md, *.txt) and write NAME.result.md beside each.
    #[arg(long, value_name = "DIR", conflicts_with = "browser")]
    pub inbox: Option<PathBuf>,
    /// Answer the flycode browser extension's replies from chat pages, on 127.0.0.1 at PORT
    /// (default 4681; 0 picks a free port); prints the link that pairs the extension.
    #[arg(long, value_name = "PORT", num_args = 0..=1, default_missing_value = "4681")]
    pub browser: Option<u16>,
    /// Roots, approval and reading flags.
    #[command(flatten)]
    pub run: RunFlags,
    /// The session whose executed calls are remembered (default: "default").
    #[arg(long, value_name = "NAME")]
    pub session: Option<String>,
    /// Forget the session's executed calls first.
    #[arg(long)]
    pub new_session: bool,
    /// Also answer the reply files present at start.
    #[arg(long)]
    pub existing: bool,
    /// How often to look at the clipboard or the folder, in milliseconds.
    #[arg(long, default_value_t = 100, value_name = "MS")]
    pub interval_ms: u64,
    /// How long a file must stay unchanged before it is read, in milliseconds.
    #[arg(long, default_value_t = 250, value_name = "MS")]
    pub quiet_ms: u64,
}

/// `flycode run` arguments. Settings not given here come from FLYCODE_* variables (OPENAI_*
/// accepted), then the `[agent]` table of flycode.toml.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The task, in words; - reads it from standard input. With --resume: a new message to
    /// the resumed run.
    #[arg(value_name = "TASK", required_unless_present_any = ["task_file", "resume"])]
    pub task: Option<String>,
    /// Go on with an earlier run from its last complete turn: its transcript, or `latest` (the
    /// newest run in the state folder; the default). The run is recorded in a new transcript
    /// that names the earlier one.
    #[arg(long, value_name = "TRANSCRIPT", num_args = 0..=1, default_missing_value = "latest")]
    pub resume: Option<String>,
    /// With --resume: a new user message after the resumed conversation.
    #[arg(long = "continue", value_name = "MESSAGE", requires = "resume", conflicts_with_all = ["task", "task_file"])]
    pub continue_with: Option<String>,
    /// Read the task from this file.
    #[arg(long, value_name = "FILE", conflicts_with = "task")]
    pub task_file: Option<PathBuf>,
    /// Print the run's events as JSON Lines on standard output.
    #[arg(long)]
    pub json: bool,
    /// Also write the transcript (JSON Lines) here.
    #[arg(long, value_name = "FILE")]
    pub transcript: Option<PathBuf>,
    /// The language of the tag dialect's prompt (seed 000's Chinese or its English; default:
    /// the locale's, as `flycode prompt`). The flycode dialect's agent prompt is English.
    #[arg(long, value_enum)]
    pub lang: Option<Language>,
    /// The model, endpoint, mode, budgets, timeouts and prompt files.
    #[command(flatten)]
    pub settings: crate::agent::settings::SettingFlags,
    /// Roots, approval and reading flags.
    #[command(flatten)]
    pub run: RunFlags,
}

/// `flycode config` arguments.
#[derive(Debug, clap::Args)]
pub struct ConfigArgs {
    /// Instead of the settings, report every mistake of every file that applies here (or of
    /// FILE only), with "did you mean" hints. Exit 2 when there is one.
    #[arg(long, value_name = "FILE", num_args = 0..=1)]
    pub check: Option<Option<PathBuf>>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Roots as `exec` would be given them.
    #[command(flatten)]
    pub roots: RootFlags,
    /// Approval mode as `exec` would be given it.
    #[arg(long, value_enum, value_name = "MODE")]
    pub approve: Option<ApproveMode>,
    /// The tool set as `exec` would be given it.
    #[arg(long = "tools", value_enum, value_name = "SET")]
    pub tools: Option<ToolSetChoice>,
}

/// `flycode trust` arguments.
#[derive(Debug, clap::Args)]
pub struct TrustArgs {
    /// The folder whose flycode.toml to trust: the nearest one from here upward, up to the top of
    /// the git repository (default: the current directory).
    #[arg(value_name = "DIR", conflicts_with = "list")]
    pub dir: Option<PathBuf>,
    /// List the trusted folders and whether each file is unchanged since.
    #[arg(long)]
    pub list: bool,
    /// Stop trusting the folder instead.
    #[arg(long, conflicts_with = "list")]
    pub revoke: bool,
}

/// The flags of a command that runs calls, as the configuration takes them.
pub(crate) fn config_flags(flags: &RunFlags) -> crate::config::Flags {
    crate::config::Flags {
        roots: flags.roots.roots.clone(),
        approval: flags.approve.map(Into::into),
        tool_set: flags.tools.map(Into::into),
    }
}

/// `flycode validate` arguments.
#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// Transcripts: files (- for standard input), directories, or quoted globs.
    #[arg(value_name = "FILE", required = true)]
    pub inputs: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Human)]
    pub format: OutputFormat,
    /// Accept text around call blocks, reporting it as a warning.
    #[arg(long)]
    pub lenient: bool,
    /// Treat warnings as errors.
    #[arg(long)]
    pub strict: bool,
    /// The protocol style of the transcripts: flycode or tags; default: flycode.toml's
    /// `dialect`, else detected per transcript (tags when its replies hold tags and no
    /// flycode-call block).
    #[arg(long, value_enum, value_name = "DIALECT")]
    pub dialect: Option<crate::protocol::dialect::Dialect>,
    /// The tool set the calls in text blocks may name (native tool calls, which only `flycode
    /// run` makes, are judged against its set): seed (the twelve tools, the default) or extended (adds fs.readMany and
    /// fs.edit); default: flycode.toml's `tools`, else seed.
    #[arg(long = "tools", value_enum, value_name = "SET")]
    pub tools: Option<ToolSetChoice>,
}

/// An output format of `flycode validate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// `path:line: error[code] message` lines and a summary.
    Human,
    /// One JSON object with findings and a summary.
    Json,
    /// GitHub Actions annotations.
    Github,
    /// SARIF 2.1.0.
    Sarif,
}

/// `flycode check` arguments.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The reply to check: a file, or - (the default) for standard input.
    #[arg(value_name = "FILE|-")]
    pub input: Option<PathBuf>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Accept text around the call block, reporting it as a warning.
    #[arg(long)]
    pub lenient: bool,
    /// The tool set: seed (the twelve tools, the default) or extended (adds fs.readMany and
    /// fs.edit); default: flycode.toml's `tools`, else seed.
    #[arg(long = "tools", value_enum, value_name = "SET")]
    pub tools: Option<ToolSetChoice>,
    /// The protocol style of the replies: flycode (fenced flycode-call blocks) or tags (seed
    /// 000's bash_call, builtin, create_agent and return tags); default: flycode.toml's
    /// `dialect`, else flycode.
    #[arg(long, value_enum, value_name = "DIALECT")]
    pub dialect: Option<crate::protocol::dialect::Dialect>,
    /// The roots `exec` would be given: a relative path of a tag-dialect builtin is judged
    /// inside the first, as `exec --dialect tags` takes it.
    #[command(flatten)]
    pub roots: RootFlags,
}

/// The first of the roots `config` names, resolved as `exec` resolves them (the current
/// directory when none is named): where `check` and `exec` take a tag-dialect builtin's
/// relative path, and the example of a relative path's hint. Where they do not resolve (a
/// root that does not exist here), the first as written when it is absolute, else `None`.
pub(crate) fn first_root(config: &crate::config::Config) -> Option<String> {
    match crate::sandbox::Roots::resolve(&config.roots) {
        Ok(roots) => roots.paths().first().map(|root| root.display().to_string()),
        Err(_) => (config.roots.first())
            .filter(|root| root.is_absolute())
            .map(|root| root.display().to_string()),
    }
}

/// `flycode exec` arguments.
#[derive(Debug, clap::Args)]
pub struct ExecArgs {
    /// The reply holding the call: a file, or - (the default) for standard input.
    #[arg(value_name = "FILE|-", conflicts_with = "slash")]
    pub input: Option<PathBuf>,
    /// Run a slash command instead, e.g. "/fs.read /abs/path --head 200".
    #[arg(long, value_name = "CMD")]
    pub slash: Option<String>,
    /// Roots, approval and reading flags.
    #[command(flatten)]
    pub run: RunFlags,
    /// Print one JSON object instead of the result block.
    #[arg(long)]
    pub json: bool,
    /// Remember reads across runs under this name, for the stale-read guard.
    #[arg(long, value_name = "NAME")]
    pub session: Option<String>,
}

/// The allowed roots, resolved the same way by every command that names them (`prompt`,
/// `exec`, `watch`, `run`): `--root`, else flycode.toml's `roots`, else the current directory.
#[derive(Debug, Default, clap::Args)]
pub struct RootFlags {
    /// An allowed root (repeatable; default: flycode.toml's roots, else the current directory).
    #[arg(long = "root", value_name = "DIR")]
    pub roots: Vec<PathBuf>,
    /// Allow / (or a drive root) as an allowed root.
    #[arg(long)]
    pub allow_filesystem_root: bool,
}

/// Flags shared by the commands that run calls (`exec`, `watch`, `run`).
#[derive(Debug, clap::Args)]
pub struct RunFlags {
    /// Allowed roots.
    #[command(flatten)]
    pub roots: RootFlags,
    /// Approval mode.
    #[arg(long, value_enum, value_name = "MODE")]
    pub approve: Option<ApproveMode>,
    /// Answer yes to every approval question.
    #[arg(long)]
    pub yes: bool,
    /// Accept text around the call block, reporting it as a warning.
    #[arg(long)]
    pub lenient: bool,
    /// The tool set: seed (the twelve tools) or extended (adds fs.readMany, fs.edit,
    /// memory.query and the hint tools).
    /// exec and watch: default flycode.toml's `tools`, else seed. run: default extended (the
    /// file's `tools` is the chat front ends'), plus the agent's own tools.
    #[arg(long = "tools", value_enum, value_name = "SET")]
    pub tools: Option<ToolSetChoice>,
    /// The protocol style of the replies: flycode (fenced flycode-call blocks) or tags (seed
    /// 000's bash_call, builtin, create_agent and return tags); default: flycode.toml's
    /// `dialect`, else flycode.
    #[arg(long, value_enum, value_name = "DIALECT")]
    pub dialect: Option<crate::protocol::dialect::Dialect>,
}

/// `flycode mcp` arguments.
#[derive(Debug, clap::Args)]
pub struct McpArgs {
    /// Allowed roots (a client's own roots can only narrow them).
    #[command(flatten)]
    pub roots: RootFlags,
    /// Approval mode; `ask` asks through the client's elicitation form where it has one.
    #[arg(long, value_enum, value_name = "MODE")]
    pub approve: Option<ApproveMode>,
    /// The tool set served: extended (the default: adds fs.readMany, fs.edit, memory.query and
    /// the hint tools) or seed.
    #[arg(long = "tools", value_enum, value_name = "SET")]
    pub tools: Option<ToolSetChoice>,
    /// Serve over MCP's streamable HTTP transport instead of stdio, on ADDR: a port (on
    /// loopback), or HOST:PORT (default 127.0.0.1:4680). Every request needs the secret
    /// (--show-secret); another address than loopback only when you name it.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = mcp::DEFAULT_HTTP_ADDR)]
    pub http: Option<String>,
    /// Over HTTP: let clients change files and run programs, as policy allows (without it, or
    /// `[mcp] allow_changes_over_http = true` in your own flycode.toml, they only read).
    #[arg(long, requires = "http")]
    pub allow_changes: bool,
    /// Over HTTP: a Host name to answer to besides loopback, such as a tunnel's public name
    /// (repeatable).
    #[arg(long, value_name = "NAME", requires = "http")]
    pub allow_host: Vec<String>,
    /// Over HTTP: a web page's origin (scheme://host:port) whose requests are taken, such as a
    /// local MCP inspector's (repeatable); every other page is refused.
    #[arg(long, value_name = "ORIGIN", requires = "http")]
    pub allow_origin: Vec<String>,
    /// Print the secret HTTP clients present (made on first use), with the header and the URL
    /// that carry it, and exit.
    #[arg(long, conflicts_with = "rotate_secret")]
    pub show_secret: bool,
    /// Replace the secret (clients holding the old one are refused from then on), print the new
    /// one, and exit.
    #[arg(long)]
    pub rotate_secret: bool,
}

/// `flycode gc` arguments.
#[derive(Debug, clap::Args)]
pub struct GcArgs {
    /// Say what would be removed, and remove nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// `flycode completions` arguments.
#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell to complete in.
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

/// `flycode log` arguments.
#[derive(Debug, clap::Args)]
pub struct LogArgs {
    /// How many of the most recent entries to show (0 shows none).
    #[arg(short = 'n', long, default_value_t = 20)]
    pub count: usize,
    /// Print the entries as JSON Lines.
    #[arg(long)]
    pub json: bool,
}

/// An approval mode on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ApproveMode {
    /// Run everything (some calls still ask).
    Auto,
    /// Ask before running programs, removing, moving and chmodding.
    Ask,
    /// Refuse every tool that writes or runs.
    ReadOnly,
}

impl From<ApproveMode> for crate::tools::policy::ApprovalMode {
    fn from(mode: ApproveMode) -> Self {
        match mode {
            ApproveMode::Auto => crate::tools::policy::ApprovalMode::Auto,
            ApproveMode::Ask => crate::tools::policy::ApprovalMode::Ask,
            ApproveMode::ReadOnly => crate::tools::policy::ApprovalMode::ReadOnly,
        }
    }
}

/// `flycode prompt` arguments.
#[derive(Debug, clap::Args)]
pub struct PromptArgs {
    /// The prompt's language (default: the locale's: LC_ALL, else LC_MESSAGES, else LANG;
    /// zh... is Chinese, anything else English).
    #[arg(long, value_enum)]
    pub lang: Option<Language>,
    /// The allowed roots to name in the prompt, resolved as `watch` and `exec` resolve them.
    #[command(flatten)]
    pub roots: RootFlags,
    /// Put the prompt on the clipboard instead of printing it (without a display: write it to
    /// a file in the state directory and print the file's path).
    #[arg(long)]
    pub copy: bool,
    /// The tool set: seed (the twelve tools, the default) or extended (adds fs.readMany and
    /// fs.edit); default: flycode.toml's `tools`, else seed.
    #[arg(long = "tools", value_enum, value_name = "SET")]
    pub tools: Option<ToolSetChoice>,
    /// The protocol style the prompt teaches: flycode (fenced call blocks, the default) or tags
    /// (seed 000's `<bash_call>`/`<builtin>`/`<create_agent>`/`<return>`, with the roots' tree,
    /// the predefined agents and the hints filled in).
    #[arg(long, value_enum, value_name = "DIALECT")]
    pub dialect: Option<crate::protocol::dialect::Dialect>,
}

/// A tool set on the command line (PROTOCOL.md §9 (Tools)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ToolSetChoice {
    /// The twelve tools of the seed protocol.
    Seed,
    /// The twelve plus fs.readMany, fs.edit, memory.query and the hint tools.
    Extended,
}

impl From<ToolSetChoice> for crate::protocol::ToolSet {
    fn from(choice: ToolSetChoice) -> Self {
        match choice {
            ToolSetChoice::Seed => crate::protocol::ToolSet::Seed,
            ToolSetChoice::Extended => crate::protocol::ToolSet::Extended,
        }
    }
}

/// A prompt language.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Language {
    /// Chinese.
    Zh,
    /// English.
    En,
}

impl Language {
    /// The language of the locale: the first of LC_ALL, LC_MESSAGES and LANG that is set and not
    /// empty (as POSIX orders them); `zh...` is Chinese, anything else (or nothing) English.
    pub fn from_locale(var: &dyn Fn(&str) -> Option<String>) -> Language {
        let locale = ["LC_ALL", "LC_MESSAGES", "LANG"]
            .iter()
            .filter_map(|name| var(name))
            .find(|value| !value.is_empty());
        match locale {
            Some(value) if value.to_ascii_lowercase().starts_with("zh") => Language::Zh,
            _ => Language::En,
        }
    }
}

/// Runs one parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<Outcome> {
    let outcome = run_command(cli.command);
    // The change records the door completed after its calls answered go on the disk before
    // flycode exits (PROTOCOL.md §16 (Undo and history), "Order, and a crash").
    crate::sandbox::undo::wait_for_completions();
    // The journal's spare record files go with the process (PROTOCOL.md §11, "After a crash").
    crate::sandbox::spare_records::release();
    report_config_reads();
    outcome
}

fn run_command(command: Command) -> anyhow::Result<Outcome> {
    match command {
        Command::Check(args) => check::run(&args),
        Command::Config(args) => config::run(&args),
        Command::Exec(args) => exec::run(&args),
        Command::Gc(args) => gc::run(&args),
        Command::History(args) => history::run(&args),
        Command::Undo(args) => undo::run(&args),
        Command::Log(args) => log::run(&args),
        Command::Mcp(args) => mcp::run(args),
        Command::Prompt(args) => prompt::run(&args),
        Command::Run(args) => run::run(&args),
        Command::Trust(args) => trust::run(&args),
        Command::Validate(args) => validate::run(&args),
        Command::Watch(args) => watch::run(&args),
        Command::Completions(args) => {
            use clap::CommandFactory;
            use std::io::Write;
            let mut command = Cli::command();
            // Made whole first, then written: clap_complete panics on a failed write, and a
            // reader that goes away (`flycode completions bash | head`) is not an error.
            let mut script = Vec::new();
            clap_complete::generate(args.shell, &mut command, "flycode", &mut script);
            std::io::stdout().lock().write_all(&script)?;
            Ok(Outcome::Success)
        }
        Command::HoldClipboard => prompt::hold_clipboard(),
    }
}

/// An error as the person reads it: the message and each cause after a `: `, leaving out a
/// cause whose text the message already holds (an error that names its OS error in its own
/// words would otherwise show it twice).
pub fn describe_error(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let cause = cause.to_string();
        if text.is_empty() {
            text = cause;
        } else if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

/// Reads a reply as UTF-8 text: a file, or standard input for `-` or nothing; `Ok(Err(..))`
/// for a reply over `limit` bytes (PROTOCOL.md §1 (Reading a reply: reply size limit)), of which at most `limit + 1` bytes are read (a
/// file's length is looked at first, so an oversized file is not read at all). Standard input is
/// not drained past the limit: the writer sees the pipe close, as with `head`.
pub(crate) fn read_input(
    input: Option<&PathBuf>,
    limit: usize,
) -> anyhow::Result<Result<String, ReplyTooLarge>> {
    let (read, name) = match input {
        Some(path) if path.as_os_str() != "-" => {
            let file = crate::sandbox::host::open(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            let size = file.metadata().ok().map(|meta| meta.len());
            (
                read_reply(file, limit, size)
                    .with_context(|| format!("cannot read {}", path.display()))?,
                path.display().to_string(),
            )
        }
        _ => (
            read_reply(std::io::stdin().lock(), limit, None)
                .context("cannot read standard input")?,
            "standard input".to_owned(),
        ),
    };
    match read {
        Ok(bytes) => reply_text(bytes, &name).map(Ok),
        Err(too_large) => Ok(Err(too_large)),
    }
}

/// A reply's bytes as text; an error naming `name` (the file, or standard input) where they are
/// not UTF-8.
pub(crate) fn reply_text(bytes: Vec<u8>, name: &str) -> anyhow::Result<String> {
    match String::from_utf8(bytes) {
        Ok(text) => Ok(text),
        Err(error) => bail!(
            "{name} is not UTF-8 text (invalid byte at offset {}); save the reply as UTF-8",
            error.utf8_error().valid_up_to()
        ),
    }
}

/// Tells the person on the terminal how to accept a refused reply (the result block speaks to
/// the model, which cannot change the configuration).
pub(crate) fn advise_too_large(too_large: &ReplyTooLarge) {
    eprintln!(
        "flycode: the reply is over the reply limit; to accept it, {}",
        too_large.advice()
    );
}

/// The layered configuration (PROTOCOL.md §10 "Configuration"), read and merged once: the
/// command passes it down from here. The first time in a process, also the notice on standard
/// error that names what an untrusted project file said and was not applied, with the command
/// that trusts it.
pub(crate) fn load_config(flags: &crate::config::Flags) -> anyhow::Result<crate::config::Config> {
    accept_config(crate::config::Config::load(flags))
}

/// The configuration a command loaded earlier (it may have been offered for trust and handed
/// its secrets off already), or its error; shows the untrusted-settings notice once.
pub(crate) fn accept_config(
    loaded: Result<crate::config::Config, crate::config::ConfigError>,
) -> anyhow::Result<crate::config::Config> {
    let config = loaded?;
    if let Some(notice) = crate::config::show::notice(&config.layers) {
        show_notice_once(&notice);
    }
    Ok(config)
}

/// `FLYCODE_DEBUG_CONFIG_READS` set: says on standard error how many configuration files this
/// process read (PROTOCOL.md §10 "Configuration": each is read once per process).
pub(crate) fn report_config_reads() {
    if std::env::var_os("FLYCODE_DEBUG_CONFIG_READS").is_some() {
        eprintln!(
            "flycode: debug: configuration files read: {}",
            crate::config::layers::files_read()
        );
    }
}

/// Prints the untrusted-settings notice on standard error unless this process already did.
pub(crate) fn show_notice_once(notice: &str) {
    static NOTICE_SHOWN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !NOTICE_SHOWN.swap(true, std::sync::atomic::Ordering::SeqCst) {
        eprintln!("{}", crate::protocol::display::escape_for_terminal(notice));
    }
}

/// The configuration and the allowed roots: one resolution for every command, with the same
/// refusals (a missing directory, the whole file system without `--allow-filesystem-root`).
pub(crate) fn load_roots(
    flags: &RootFlags,
    approval: Option<ApproveMode>,
    tools: Option<ToolSetChoice>,
) -> anyhow::Result<(crate::config::Config, crate::sandbox::Roots)> {
    let config = load_config(&crate::config::Flags {
        roots: flags.roots.clone(),
        approval: approval.map(Into::into),
        tool_set: tools.map(Into::into),
    })?;
    let roots = allowed_roots(&config, flags)?;
    Ok((config, roots))
}

/// The allowed roots `config` names, refused as [`load_roots`] says.
fn allowed_roots(
    config: &crate::config::Config,
    flags: &RootFlags,
) -> anyhow::Result<crate::sandbox::Roots> {
    let roots = crate::sandbox::Roots::resolve(&config.roots)?;
    roots.refuse_whole_file_system(flags.allow_filesystem_root)?;
    Ok(roots)
}

/// Takes flycode's secrets out of its own environment, where a program could read them through
/// `/proc` (see [`crate::sandbox::secret_env`]): called first thing by every command that runs
/// programs, before standard input is read or a thread started, since it may restart flycode.
/// The secret variables are the fixed ones and those the command's configuration (loaded once,
/// before) names (`api_key_env`, `secret_env`); a configuration that does not load gives the
/// fixed ones alone (the command then reports the error itself).
pub(crate) fn hand_off_secrets(config: Option<&crate::config::Config>) -> anyhow::Result<()> {
    let limits = config.map_or_else(crate::tools::Limits::default, crate::config::Config::limits);
    crate::sandbox::secret_env::hand_off(&limits.secret_names()).map_err(anyhow::Error::msg)
}

/// The configuration (`loaded` once, at the command's start) and the sandbox the run flags
/// describe; also readies flycode to run programs (its environment unreadable to them, a child
/// subreaper) and says once, on stderr, when this kernel cannot contain them as configured (they
/// will then be refused).
pub(crate) fn open_sandbox(
    flags: &RunFlags,
    loaded: Result<crate::config::Config, crate::config::ConfigError>,
) -> anyhow::Result<(crate::config::Config, crate::sandbox::Sandbox)> {
    crate::sandbox::process::prepare_to_run_programs();
    let config = accept_config(loaded)?;
    let roots = allowed_roots(&config, &flags.roots)?;
    // Before anything can write: finish or undo what a killed flycode left, inside this run's
    // roots (PROTOCOL.md §11 Security, "After a crash").
    for line in crate::sandbox::journal::recover_interrupted(Some(roots.paths())) {
        eprintln!("flycode: {line}");
    }
    // Then the change records a killed flycode left incomplete, from what the files now hold
    // (PROTOCOL.md §16 (Undo and history)).
    if let Some(store) = crate::sandbox::undo::UndoStore::open_default(config.durability) {
        for line in crate::sandbox::undo::settle_interrupted(&store, config.undo) {
            eprintln!("flycode: {line}");
        }
        if let Some(pruned) = crate::sandbox::undo::prune_if_due(&store, config.undo) {
            gc::report_pruned(&pruned, config.undo, "flycode: ");
        }
    }
    if let Some(warning) =
        crate::sandbox::contain::startup_warning(config.process_sandbox, config.process_network)
    {
        eprintln!("flycode: {warning}");
    }
    // The role and prompt files the configuration names are the person's at every door.
    let protection = crate::sandbox::Protection::default()
        .with_patterns(&config.protected)
        .map_err(anyhow::Error::msg)?
        .with_own_files(&crate::agent::settings::prompt_files(&config.agent));
    let sandbox = crate::sandbox::Sandbox::open(&roots)?
        .with_protection(protection)
        .with_durability(config.durability);
    Ok((config, sandbox))
}

/// The dialect a command speaks: `--dialect`, else flycode.toml's `dialect`, else flycode.
pub(crate) fn dialect(
    flag: Option<crate::protocol::dialect::Dialect>,
    config: &crate::config::Config,
) -> crate::protocol::dialect::Dialect {
    flag.unwrap_or(config.dialect)
}

/// `--yes` answers every question a person need not answer; otherwise the terminal asks
/// (answers for the rest of the session where `asking` is a session, PROTOCOL.md §10 (Running
/// calls)).
pub(crate) fn approver(
    flags: &RunFlags,
    asking: approve::Asking,
) -> Box<dyn crate::tools::executor::Approver> {
    approve::approver(flags.yes, asking)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &[&str]) -> Vec<std::ffi::OsString> {
        std::iter::once("flycode")
            .chain(line.iter().copied())
            .map(Into::into)
            .collect()
    }

    #[test]
    fn the_short_parse_of_exec_gives_what_the_full_parse_gives() {
        let lines: &[&[&str]] = &[
            &["exec"],
            &["exec", "--slash", "/fs.read a.txt"],
            &[
                "exec", "--root", "/tmp", "--root", "/srv", "--json", "reply.md",
            ],
            &[
                "exec",
                "--yes",
                "--approve",
                "read-only",
                "--session",
                "s1",
                "-",
            ],
            &[
                "exec",
                "--dialect",
                "tags",
                "--tools",
                "extended",
                "--lenient",
                "reply.md",
            ],
            &[
                "exec",
                "--allow-filesystem-root",
                "--root",
                "/",
                "--slash",
                "/fs.ls /",
            ],
        ];
        for line in lines {
            let full = Cli::try_parse_from(args(line)).expect("a valid exec line");
            assert_eq!(
                format!("{:?}", Cli::from_args(args(line))),
                format!("{full:?}"),
                "{line:?}"
            );
        }
    }

    #[test]
    fn exec_with_a_mistake_still_gets_the_full_error() {
        let short = clap::Command::new("flycode").subcommand(
            <ExecArgs as clap::Args>::augment_args(clap::Command::new("exec")),
        );
        assert!(
            short
                .try_get_matches_from(args(&["exec", "--no-such-flag"]))
                .is_err()
        );
        let full = Cli::try_parse_from(args(&["exec", "--no-such-flag"])).unwrap_err();
        assert!(full.to_string().contains("--no-such-flag"), "{full}");
    }
}
