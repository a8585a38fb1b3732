//! `process.run` (a program, no shell) and `shell.exec` (`/bin/sh -c`): run in the working
//! directory the sandbox checked, with flycode's secrets removed from the environment; stdout and
//! stderr captured separately; `ok` is exit status 0.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::protocol::ErrorCode;
use crate::protocol::ToolName;
use crate::sandbox::{
    LastComponent, ProcessError, ProcessOutcome, ProcessSpec, Sandbox, run_process,
};
use crate::tools::tool::{ApprovalClass, Effects, Program, Tool, ToolContext, field};
use crate::tools::{Limits, ToolError, ToolOutput};

/// Environment variables that hold flycode's own secrets: never passed to a child.
pub const SECRET_VARIABLES: [&str; 4] = [
    "FLYCODE_API_KEY",
    "OPENAI_API_KEY",
    "LIGHT_LLM_API_KEY",
    "FLYCODE_LIGHT_API_KEY",
];

/// The arguments of `process.run` and `shell.exec`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProcessArgs {
    /// The program (process.run) or command line (shell.exec).
    pub command: String,
    /// The program's arguments (process.run only).
    #[serde(default)]
    pub args: Vec<String>,
    /// The working directory.
    pub cwd: Option<String>,
    /// The deadline.
    pub timeout_ms: Option<u64>,
    /// Extra environment variables.
    #[serde(default)]
    pub env: Map<String, Value>,
}

/// Runs `process.run` (`shell` false) or `shell.exec` (`shell` true).
pub fn run(
    sandbox: &Sandbox,
    args: &ProcessArgs,
    limits: &Limits,
    shell: bool,
) -> Result<ToolOutput, ToolError> {
    let cwd =
        match &args.cwd {
            Some(cwd) => {
                let (_, path) = sandbox.open_dir(cwd)?;
                path.absolute
            }
            None => sandbox.roots().first().cloned().ok_or_else(|| {
                ToolError::new(ErrorCode::IoError, "no allowed root to run in", None)
            })?,
        };
    // The model's cwd was resolved and checked: it cannot widen what the process reaches beyond
    // what the roots already allow (CVE-2025-59532).
    let _ = sandbox.resolve(&cwd.display().to_string(), LastComponent::Follow)?;
    let timeout = Duration::from_millis(
        args.timeout_ms
            .unwrap_or(limits.default_timeout_ms)
            .clamp(1, 600_000),
    );
    let env_set = args
        .env
        .iter()
        .map(|(name, value)| (name.clone(), value.as_str().unwrap_or_default().to_owned()))
        .collect();
    let spec = if shell {
        ProcessSpec {
            env_set,
            env_remove: secrets(limits),
            cancel: limits.cancel.clone(),
            ..ProcessSpec::shell(&args.command, cwd, timeout, limits.output_cap)
        }
    } else {
        ProcessSpec {
            program: args.command.clone(),
            args: args.args.clone(),
            cwd,
            env_set,
            env_remove: secrets(limits),
            timeout,
            output_cap: limits.output_cap,
            cancel: limits.cancel.clone(),
        }
    };
    let outcome = run_process(&spec).map_err(|error| {
        let hint = match &error {
            ProcessError::CommandNotFound { .. } => Some(
                "check the program's name, or run it through shell.exec if it is a shell built-in",
            ),
            _ => None,
        };
        ToolError::new(error.code(), error.to_string(), hint)
    })?;
    let output = render(&outcome);
    if outcome.cancelled {
        let mut error = ToolError::new(
            ErrorCode::Cancelled,
            format!(
                "{} was stopped by the user (Ctrl-C); it and everything it started were killed",
                args.command
            ),
            Some("the user stopped the run: do not run it again unless asked"),
        );
        error.output = Some(Box::new(output));
        return Err(error);
    }
    if outcome.timed_out {
        let mut error = ToolError::new(
            ErrorCode::Timeout,
            format!(
                "{} ran past its {} ms deadline; it and everything it started were killed",
                args.command,
                timeout.as_millis()
            ),
            Some("raise timeoutMs (at most 600000), or run something shorter"),
        );
        error.output = Some(Box::new(output));
        return Err(error);
    }
    match outcome.exit_code {
        Some(0) => Ok(output),
        status => {
            let how = match (status, outcome.signal) {
                (Some(code), _) => format!("exited with status {code}"),
                (None, Some(signal)) => format!("was killed by signal {signal}"),
                (None, None) => "ended abnormally".to_owned(),
            };
            let mut error = ToolError::new(
                ErrorCode::NonzeroExit,
                format!("{} {how}", args.command),
                None,
            );
            error.output = Some(Box::new(output));
            Err(error)
        }
    }
}

fn secrets(limits: &Limits) -> Vec<String> {
    SECRET_VARIABLES
        .iter()
        .map(|s| (*s).to_owned())
        .chain(limits.extra_secrets.iter().cloned())
        .collect()
}

/// The body: stdout, then stderr, each under its own marker line; headers for the status.
fn render(outcome: &ProcessOutcome) -> ToolOutput {
    let mut body = String::new();
    let mut section = |name: &str, text: &str, truncated: bool, total: u64| {
        body.push_str(&format!("--- {name} ---\n"));
        body.push_str(text);
        if !text.is_empty() && !text.ends_with('\n') {
            body.push('\n');
        }
        if truncated {
            body.push_str(&format!(
                "[flycode: {name} cut at {} of {total} bytes]\n",
                text.len()
            ));
        }
    };
    section(
        "stdout",
        &outcome.stdout,
        outcome.stdout_truncated,
        outcome.stdout_bytes,
    );
    section(
        "stderr",
        &outcome.stderr,
        outcome.stderr_truncated,
        outcome.stderr_bytes,
    );
    let mut fields = Vec::new();
    if let Some(code) = outcome.exit_code {
        fields.push(("exitCode".to_owned(), code.to_string()));
    }
    if let Some(signal) = outcome.signal {
        fields.push(("signal".to_owned(), signal.to_string()));
    }
    let duration_ms = u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX);
    fields.push(("durationMs".to_owned(), duration_ms.to_string()));
    if outcome.stdout_truncated || outcome.stderr_truncated {
        fields.push(("truncated".to_owned(), "true".to_owned()));
    }
    ToolOutput {
        body: Some(body),
        fields,
        data: json!({
            "exitCode": outcome.exit_code,
            "signal": outcome.signal,
            "stdout": outcome.stdout,
            "stderr": outcome.stderr,
            "stdoutTruncated": outcome.stdout_truncated,
            "stderrTruncated": outcome.stderr_truncated,
            "timedOut": outcome.timed_out,
            "durationMs": duration_ms,
        }),
        continue_hint: Some(
            "redirect the output to a file and read it with fs.read, or filter it (grep, head)"
                .to_owned(),
        ),
    }
}

/// Programs that run code given to them (shells, interpreters) or run another program for the
/// caller (`env`, `timeout`, `nice`, `xargs`, `find`...): whatever their arguments, running them is
/// as powerful as a shell, so policy judges them as `shell.exec`.
pub fn is_shell_like(program: &str) -> bool {
    let name = program.rsplit(['/', '\\']).next().unwrap_or(program);
    let name = name
        .strip_suffix(".exe")
        .unwrap_or(name)
        .to_ascii_lowercase();
    const PROGRAMS: [&str; 44] = [
        "sh",
        "bash",
        "dash",
        "zsh",
        "ksh",
        "mksh",
        "fish",
        "csh",
        "tcsh",
        "ash",
        "busybox",
        "cmd",
        "powershell",
        "pwsh",
        "perl",
        "ruby",
        "node",
        "nodejs",
        "deno",
        "bun",
        "php",
        "lua",
        "luajit",
        "awk",
        "gawk",
        "mawk",
        "nawk",
        "tclsh",
        "osascript",
        "env",
        "timeout",
        "nice",
        "nohup",
        "setsid",
        "xargs",
        "find",
        "sudo",
        "doas",
        "stdbuf",
        "unshare",
        "chroot",
        "ionice",
        "taskset",
        "script",
    ];
    PROGRAMS.contains(&name.as_str())
        || name.starts_with("python")
        || name.starts_with("pypy")
        || name.starts_with("perl5")
}

/// `process.run` in the registry.
pub struct ProcessRun;

/// `shell.exec` in the registry.
pub struct ShellExec;

impl Tool for ProcessRun {
    type Args = ProcessArgs;
    const NAME: ToolName = ToolName::ProcessRun;

    fn approval(&self) -> ApprovalClass {
        ApprovalClass::AsksFirst
    }

    fn effects<'a>(&self, args: &'a ProcessArgs) -> Effects<'a> {
        program_effects(args, false)
    }

    /// A shell, an interpreter or a program that runs other programs is judged as shell.exec.
    fn judged_as(&self, args: &ProcessArgs) -> ToolName {
        if is_shell_like(&args.command) {
            ToolName::ShellExec
        } else {
            ToolName::ProcessRun
        }
    }

    fn subject(&self, args: &ProcessArgs, _roots: &[PathBuf]) -> String {
        std::iter::once(args.command.as_str())
            .chain(args.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn summary(&self, output: &ToolOutput) -> String {
        process_summary(output)
    }

    fn failure_summary(&self, code: ErrorCode, output: Option<&ToolOutput>) -> Option<String> {
        program_failure_summary(code, output)
    }

    fn run(&self, context: &ToolContext<'_>, args: &ProcessArgs) -> Result<ToolOutput, ToolError> {
        run(context.sandbox, args, context.limits, false)
    }
}

impl Tool for ShellExec {
    type Args = ProcessArgs;
    const NAME: ToolName = ToolName::ShellExec;

    fn approval(&self) -> ApprovalClass {
        ApprovalClass::AsksFirst
    }

    fn effects<'a>(&self, args: &'a ProcessArgs) -> Effects<'a> {
        program_effects(args, true)
    }

    fn subject(&self, args: &ProcessArgs, _roots: &[PathBuf]) -> String {
        args.command.clone()
    }

    fn summary(&self, output: &ToolOutput) -> String {
        process_summary(output)
    }

    fn failure_summary(&self, code: ErrorCode, output: Option<&ToolOutput>) -> Option<String> {
        program_failure_summary(code, output)
    }

    fn run(&self, context: &ToolContext<'_>, args: &ProcessArgs) -> Result<ToolOutput, ToolError> {
        run(context.sandbox, args, context.limits, true)
    }
}

fn program_effects(args: &ProcessArgs, shell: bool) -> Effects<'_> {
    Effects {
        reads: args.cwd.as_deref().into_iter().collect(),
        program: Some(Program {
            command: &args.command,
            shell,
            env: &args.env,
        }),
        ..Effects::default()
    }
}

/// `Exit 0 · 1.3 s`, `Killed by signal 9`.
fn process_summary(output: &ToolOutput) -> String {
    let status = match (field(output, "exitCode"), field(output, "signal")) {
        (Some(code), _) => format!("Exit {code}"),
        (None, Some(signal)) => format!("Killed by signal {signal}"),
        (None, None) => "Ended".to_owned(),
    };
    match field(output, "durationMs").and_then(|ms| ms.parse::<u64>().ok()) {
        Some(ms) => format!("{status} · {}", human_duration(ms)),
        None => status,
    }
}

/// A program that ran and failed is summed up by its exit status.
fn program_failure_summary(code: ErrorCode, output: Option<&ToolOutput>) -> Option<String> {
    match output {
        Some(output) if code == ErrorCode::NonzeroExit => Some(process_summary(output)),
        _ => None,
    }
}

/// `850 ms`, `1.3 s`, `2 min 5 s`.
pub fn human_duration(ms: u64) -> String {
    match ms {
        0..1000 => format!("{ms} ms"),
        1000..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        _ => format!("{} min {} s", ms / 60_000, (ms % 60_000) / 1000),
    }
}
