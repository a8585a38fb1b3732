//! `process.run` (a program, no shell) and `shell.exec` (`/bin/sh -c`): run in the working
//! directory the sandbox checked, with flycode's secrets removed from the environment, inside the
//! containment `process_sandbox` and `process_network` ask for (PROTOCOL.md §9 (Tools: what programs may do),
//! [`crate::sandbox::contain`]); stdout and stderr captured separately; `ok` is exit status 0.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::protocol::ErrorCode;
use crate::protocol::ToolName;
use crate::sandbox::contain::Containment;
use crate::sandbox::process::StreamOutput;
use crate::sandbox::{
    LastComponent, ProcessError, ProcessOutcome, ProcessSpec, Sandbox, run_process,
};
use crate::tools::tool::{ApprovalClass, Effects, Program, Tool, ToolContext, field};
use crate::tools::{Limits, ToolError, ToolOutput};

/// Environment variables that hold flycode's own secrets: never passed to a child, their values
/// masked everywhere. Every key variable flycode reads by name is here (`flycode run` finds the
/// key in `FLYCODE_API_KEY`, `LLM_API_KEY`, `OPENAI_API_KEY` or `ANTHROPIC_API_KEY`, the light
/// model's in `LIGHT_LLM_API_KEY`), whichever door runs: a key exported for `run` is in the
/// environment of `exec`, `watch` and `mcp` too.
pub const SECRET_VARIABLES: [&str; 6] = [
    "ANTHROPIC_API_KEY",
    "FLYCODE_API_KEY",
    "LLM_API_KEY",
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
    /// Start it as a background job of the session and answer at once.
    #[serde(default)]
    pub background: bool,
    /// With `background`: under a pseudo-terminal.
    #[serde(default)]
    pub pty: bool,
}

/// Runs `process.run` (`shell` false) or `shell.exec` (`shell` true), in the foreground or,
/// with `background`, as a job of the session.
fn run_call(
    context: &ToolContext<'_>,
    args: &ProcessArgs,
    shell: bool,
) -> Result<ToolOutput, ToolError> {
    if args.background {
        start_job(context, args, shell)
    } else if args.pty {
        Err(ToolError::new(
            ErrorCode::InvalidArgs,
            "pty is for background jobs only: a foreground call's program has no terminal",
            Some("add \"background\": true, or leave pty out"),
        ))
    } else {
        run(context.sandbox, args, context.limits, shell)
    }
}

/// Starts the call's program as a background job (PROTOCOL.md §10 (Running calls: background
/// jobs)): contained, with its environment, exactly as in the foreground, but left running.
fn start_job(
    context: &ToolContext<'_>,
    args: &ProcessArgs,
    shell: bool,
) -> Result<ToolOutput, ToolError> {
    let limits = context.limits;
    let jobs = context
        .jobs
        .ok_or_else(crate::tools::jobs::tools::no_session)?;
    if !limits.tool_set.contains(ToolName::JobLog) {
        return Err(ToolError::new(
            ErrorCode::InvalidArgs,
            format!(
                "background jobs belong to the extended tool set, and this session offers the {} set",
                limits.tool_set.as_str()
            ),
            Some("run the program in the foreground (without background)"),
        ));
    }
    let cwd = working_directory(context.sandbox, args)?;
    let spec = process_spec(context.sandbox, args, limits, shell, cwd, Duration::MAX);
    let command = if shell {
        args.command.clone()
    } else {
        std::iter::once(args.command.as_str())
            .chain(args.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let job = jobs.start(crate::tools::jobs::NewJob {
        spec: &spec,
        command,
        pty: args.pty,
        secrets: limits.secrets(),
        process_error,
    })?;
    let terminal = if args.pty {
        " under a pseudo-terminal"
    } else {
        ""
    };
    let id = &job.id;
    let body = format!(
        "started {id} in the background{terminal}; it runs until it ends, job.kill ends it, or this session ends.\n\
         read its output: job.log {{\"jobId\": \"{id}\", \"waitMs\": 2000}} (then startLine = nextLine)\n\
         write to its stdin: job.input {{\"jobId\": \"{id}\", \"input\": \"...\\n\"}}\n\
         end it: job.kill {{\"jobId\": \"{id}\"}}\n"
    );
    let pid = job.process.pid();
    Ok(ToolOutput {
        body: Some(body),
        fields: vec![
            ("job".to_owned(), id.clone()),
            ("pid".to_owned(), pid.to_string()),
        ],
        data: json!({ "jobId": id, "pid": pid, "pty": args.pty }),
        continue_hint: None,
        kept: None,
    })
}

/// Runs `process.run` (`shell` false) or `shell.exec` (`shell` true) in the foreground.
pub fn run(
    sandbox: &Sandbox,
    args: &ProcessArgs,
    limits: &Limits,
    shell: bool,
) -> Result<ToolOutput, ToolError> {
    let cwd = working_directory(sandbox, args)?;
    let timeout = Duration::from_millis(
        args.timeout_ms
            .unwrap_or(limits.default_timeout_ms)
            .clamp(1, 600_000),
    );
    let spec = process_spec(sandbox, args, limits, shell, cwd, timeout);
    let mut outcome = run_process(&spec).map_err(process_error)?;
    let secrets = limits.secrets();
    outcome.stdout.mask(&secrets);
    outcome.stderr.mask(&secrets);
    let output = render(&outcome, limits.output_cap);
    judge_outcome(&outcome, output, &args.command, timeout)
}

/// The directory the program runs in: the model's `cwd`, resolved and checked, else the first
/// root.
fn working_directory(sandbox: &Sandbox, args: &ProcessArgs) -> Result<PathBuf, ToolError> {
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
    Ok(cwd)
}

/// What to start: the program or the shell line, its environment (the call's variables set,
/// flycode's secrets removed) and its containment.
fn process_spec(
    sandbox: &Sandbox,
    args: &ProcessArgs,
    limits: &Limits,
    shell: bool,
    cwd: PathBuf,
    timeout: Duration,
) -> ProcessSpec {
    let env_set = args
        .env
        .iter()
        .map(|(name, value)| (name.clone(), value.as_str().unwrap_or_default().to_owned()))
        .collect();
    // The hand-off variable names a file programs have no business with (already deleted).
    let mut env_remove = limits.secret_names();
    env_remove.push(crate::sandbox::secret_env::HANDOFF_VARIABLE.to_owned());
    // The run's transcripts are flycode's own even where they lie in a root (`--transcript`).
    let containment = Containment::new(
        limits.program_sandbox,
        limits.program_network,
        sandbox.roots(),
    )
    .map(|containment| containment.hiding(sandbox.protection().records().iter().cloned()));
    if shell {
        ProcessSpec {
            env_set,
            env_remove,
            cancel: limits.cancel.clone(),
            containment,
            ..ProcessSpec::shell(&args.command, cwd, timeout, limits.output_cap)
        }
    } else {
        ProcessSpec {
            program: args.command.clone(),
            args: args.args.clone(),
            cwd,
            env_set,
            env_remove,
            timeout,
            output_cap: limits.output_cap,
            cancel: limits.cancel.clone(),
            containment,
        }
    }
}

/// A program that could not be started, as the model's error (with a hint where there is one,
/// and the person's advice for a machine that cannot contain programs).
pub fn process_error(error: ProcessError) -> ToolError {
    let hint = match &error {
        // A whole command line in `command` (a small model's usual mistake).
        ProcessError::CommandNotFound { program }
            if program.trim().contains(char::is_whitespace) =>
        {
            Some(
                "command names the program alone: put its arguments in args, e.g. \"command\": \"ls\", \"args\": [\"-la\", \"/abs/dir\"], or send the whole line to shell.exec",
            )
        }
        ProcessError::CommandNotFound { .. } => {
            Some("check the program's name, or run it through shell.exec if it is a shell built-in")
        }
        ProcessError::Uncontainable { .. } => Some(
            "programs cannot run on this machine as flycode is set up; do the work with the file tools, or tell the user what you would run",
        ),
        _ => None,
    };
    let advice = match &error {
        ProcessError::Uncontainable { advice, .. } => Some(*advice),
        _ => None,
    };
    let tool_error = ToolError::new(error.code(), error.to_string(), hint);
    match advice {
        Some(advice) => tool_error.with_advice(advice),
        None => tool_error,
    }
}

/// The call's result from how the program ended: its output when it exited 0, else the error
/// (cancelled, timed out, another status) carrying that output.
fn judge_outcome(
    outcome: &ProcessOutcome,
    output: ToolOutput,
    command: &str,
    timeout: Duration,
) -> Result<ToolOutput, ToolError> {
    let (code, message, hint) = if outcome.cancelled {
        (
            ErrorCode::Cancelled,
            format!(
                "{command} was stopped by the user (Ctrl-C); it and everything it started were killed"
            ),
            Some("the user stopped the run: do not run it again unless asked"),
        )
    } else if outcome.timed_out {
        (
            ErrorCode::Timeout,
            format!(
                "{command} ran past its {} ms deadline; it and everything it started were killed",
                timeout.as_millis()
            ),
            Some("raise timeoutMs (at most 600000), or run something shorter"),
        )
    } else {
        let how = match (outcome.exit_code, outcome.signal) {
            (Some(0), _) => return Ok(output),
            (Some(code), _) => format!("exited with status {code}"),
            (None, Some(signal)) => format!("was killed by signal {signal}"),
            (None, None) => "ended abnormally".to_owned(),
        };
        (ErrorCode::NonzeroExit, format!("{command} {how}"), None)
    };
    let mut error = ToolError::new(code, message, hint);
    error.output = Some(Box::new(output));
    Err(error)
}

/// The label line of each stream's section.
const LABELS: [&str; 2] = ["--- stdout ---\n", "--- stderr ---\n"];

/// What to do when a stream was cut.
const CUT_ADVICE: &str =
    "redirect it to a file and read that with fs.read, or filter it (grep, tail)";

/// The line that stands for the bytes left out between a stream's head and its tail.
fn omitted_marker(omitted: u64) -> String {
    format!("[… {omitted} bytes omitted …]\n")
}

/// The line that ends a cut stream's section: the true total the program wrote, and what of it
/// is shown.
fn cut_note(name: &str, total: u64, head: u64, tail: u64) -> String {
    format!(
        "[flycode: {name} truncated: showed {} of {total} bytes (the first {head} and the last \
         {tail}); {CUT_ADVICE}]\n",
        head + tail
    )
}

/// One stream as it will be shown.
struct Section {
    /// The section, label line included.
    text: String,
    /// The section without its label and note, for the structured data.
    shown: String,
    /// Whether bytes were left out.
    cut: bool,
    /// Every byte the program wrote to the stream.
    total: u64,
}

/// `text`, ending with a newline unless empty: the next line of the body must start a line.
fn push_lines(out: &mut String, text: &str) {
    out.push_str(text);
    if !text.is_empty() && !text.ends_with('\n') {
        out.push('\n');
    }
}

/// The section for a stream shown within `budget` bytes of its own text (label, marker and note
/// are reserved apart).
fn section(name: &'static str, label: &str, stream: &StreamOutput, budget: usize) -> Section {
    let excerpt = stream.excerpt(budget);
    let mut shown = String::new();
    push_lines(&mut shown, &excerpt.head);
    if excerpt.is_cut() {
        shown.push_str(&omitted_marker(excerpt.omitted));
        push_lines(&mut shown, &excerpt.tail);
    }
    let mut text = String::with_capacity(label.len() + shown.len());
    text.push_str(label);
    text.push_str(&shown);
    if excerpt.is_cut() {
        text.push_str(&cut_note(
            name,
            stream.total,
            excerpt.head_bytes,
            excerpt.tail_bytes,
        ));
    }
    Section {
        text,
        shown,
        cut: excerpt.is_cut(),
        total: stream.total,
    }
}

/// What showing a whole stream costs (its trailing newline included), if it was kept whole.
fn whole_len(stream: &StreamOutput) -> Option<usize> {
    let len = stream.full_len()?;
    let needs_newline = len > 0 && stream.tail.last().or(stream.head.last()) != Some(&b'\n');
    Some(len + usize::from(needs_newline))
}

/// What cutting a stream may add besides its kept text: the marker, the note, and a newline
/// after the head and after the tail. Every number in them is at most the stream's total.
fn cut_reserve(name: &str, stream: &StreamOutput) -> usize {
    let total = stream.total;
    omitted_marker(total).len() + cut_note(name, total, total, total).len() + 2
}

/// How many bytes of text each stream may show in a body of at most `cap` bytes. Each stream
/// gets half of what labels, markers and notes leave; a stream that needs less than its half is
/// shown whole and the other stream gets the rest (a short stderr leaves room for more of a
/// long stdout, and the reverse).
fn budgets(streams: [&StreamOutput; 2], cap: usize) -> [usize; 2] {
    let labels: usize = LABELS.iter().map(|label| label.len()).sum();
    let needs = streams.map(whole_len);
    if let [Some(out), Some(err)] = needs
        && labels + out + err <= cap
    {
        return [out, err];
    }
    let reserves = [
        cut_reserve("stdout", streams[0]),
        cut_reserve("stderr", streams[1]),
    ];
    // One stream whole, the other cut with all that is left.
    for (whole, cut) in [(0, 1), (1, 0)] {
        let pool = cap.saturating_sub(labels + reserves[cut]);
        if let Some(need) = needs[whole]
            && need <= pool / 2
        {
            let mut budgets = [0; 2];
            budgets[whole] = need;
            budgets[cut] = pool - need;
            return budgets;
        }
    }
    let pool = cap.saturating_sub(labels + reserves[0] + reserves[1]);
    [pool / 2, pool - pool / 2]
}

/// The body: a `--- stdout ---` section, then a `--- stderr ---` section, within `cap` bytes in
/// all (labels, markers and notes included), so the executor's generic cap never cuts it; a
/// cut stream shows its head, a `[… N bytes omitted …]` line, its tail, and a note with the true
/// total. Headers for the status.
fn render(outcome: &ProcessOutcome, cap: usize) -> ToolOutput {
    let [out_budget, err_budget] = budgets([&outcome.stdout, &outcome.stderr], cap);
    let stdout = section("stdout", LABELS[0], &outcome.stdout, out_budget);
    let stderr = section("stderr", LABELS[1], &outcome.stderr, err_budget);
    let body = [stdout.text.as_str(), &stderr.text].concat();
    let mut fields = Vec::new();
    if let Some(code) = outcome.exit_code {
        fields.push(("exitCode".to_owned(), code.to_string()));
    }
    if let Some(signal) = outcome.signal {
        fields.push(("signal".to_owned(), signal.to_string()));
    }
    let duration_ms = u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX);
    fields.push(("durationMs".to_owned(), duration_ms.to_string()));
    if stdout.cut || stderr.cut {
        fields.push(("truncated".to_owned(), "true".to_owned()));
    }
    let data = json!({
        "exitCode": outcome.exit_code,
        "signal": outcome.signal,
        "stdout": stdout.shown,
        "stderr": stderr.shown,
        "stdoutTruncated": stdout.cut,
        "stderrTruncated": stderr.cut,
        "stdoutBytes": stdout.total,
        "stderrBytes": stderr.total,
        "timedOut": outcome.timed_out,
        "durationMs": duration_ms,
    });
    ToolOutput {
        body: Some(body),
        fields,
        data,
        continue_hint: Some(
            "redirect the output to a file and read it with fs.read, or filter it (grep, head)"
                .to_owned(),
        ),
        kept: None,
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
        run_call(context, args, false)
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
        run_call(context, args, true)
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

/// `Exit 0 · 1.3 s`, `Killed by signal 9`, `Started job-1 (pid 4242)`.
fn process_summary(output: &ToolOutput) -> String {
    if let (Some(job), Some(pid)) = (field(output, "job"), field(output, "pid")) {
        return format!("Started {job} in the background (pid {pid})");
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream as the runner captures it with a per-stream capture of `cap` bytes.
    fn stream(data: &[u8], cap: usize) -> StreamOutput {
        let head = cap / 2;
        if data.len() <= cap {
            let split = head.min(data.len());
            return StreamOutput {
                head: data[..split].to_vec(),
                tail: data[split..].to_vec(),
                total: data.len() as u64,
            };
        }
        StreamOutput {
            head: data[..head].to_vec(),
            tail: data[data.len() - (cap - head)..].to_vec(),
            total: data.len() as u64,
        }
    }

    fn outcome(stdout: &[u8], stderr: &[u8], cap: usize) -> ProcessOutcome {
        ProcessOutcome {
            exit_code: Some(1),
            signal: None,
            stdout: stream(stdout, cap),
            stderr: stream(stderr, cap),
            timed_out: false,
            cancelled: false,
            duration: Duration::from_millis(5),
        }
    }

    /// A key printed anywhere, also across the edges of the dropped middle of a long output or
    /// across head and tail of a whole one, shows none of its bytes.
    #[test]
    fn a_secret_anywhere_in_the_output_is_masked_also_at_the_edges_of_a_cut() {
        let key = "sk-live-0123456789abcdef";
        let secrets = crate::sandbox::mask::Secrets::from_values([key.to_owned()]);
        let cap = 64;
        for length in [40, 64, 200] {
            for at in 0..length {
                let mut data = "z".repeat(length).into_bytes();
                data.splice(at..at, key.bytes());
                data.truncate(length + key.len());
                let mut stream = stream(&data, cap);
                stream.mask(&secrets);
                let shown = stream.text();
                let clear: Vec<&str> = shown.split(['*', 'z', '\u{FFFD}']).collect();
                assert!(
                    clear.iter().all(|piece| piece.is_empty()),
                    "{length} {at}: {shown:?}"
                );
            }
        }
    }

    fn lines(prefix: &str, count: usize) -> Vec<u8> {
        (0..count)
            .map(|i| format!("{prefix} {i:06}\n"))
            .collect::<String>()
            .into_bytes()
    }

    fn body(output: &ToolOutput) -> &str {
        output.body.as_deref().unwrap()
    }

    fn truncated(output: &ToolOutput) -> bool {
        field(output, "truncated") == Some("true")
    }

    #[test]
    fn small_streams_are_shown_whole() {
        let output = render(&outcome(b"out\n", b"err", 1024), 1024);
        assert_eq!(body(&output), "--- stdout ---\nout\n--- stderr ---\nerr\n");
        assert!(!truncated(&output));
        assert_eq!(field(&output, "exitCode"), Some("1"));
    }

    #[test]
    fn body_never_exceeds_the_cap() {
        let sizes = [0, 1, 100, 500, 1000, 2000, 5000, 40_000, 300_000];
        for cap in [1024, 4096, 65_536] {
            for out in sizes {
                for err in sizes {
                    let (stdout, stderr) = (lines("o", out / 9), lines("e", err / 9));
                    let output = render(&outcome(&stdout, &stderr, cap), cap);
                    let text = body(&output);
                    assert!(text.len() <= cap, "cap {cap}, {out}+{err}: {}", text.len());
                    assert!(text.contains("--- stderr ---\n"));
                    let whole = 30 + stdout.len() + stderr.len() <= cap;
                    assert_eq!(truncated(&output), !whole, "cap {cap}, {out}+{err}");
                }
            }
        }
    }

    #[test]
    fn the_executors_cap_leaves_the_layout_alone() {
        let cap = 4096;
        let output = render(&outcome(&lines("o", 10_000), b"FAILED: x\n", cap), cap);
        let block = crate::protocol::ResultBlock::success(None, String::new(), output.body.clone())
            .capped(cap, None);
        assert_eq!(block.body, output.body);
        assert!(body(&output).ends_with("--- stderr ---\nFAILED: x\n"));
    }

    #[test]
    fn a_short_stream_gives_its_unused_half_to_the_other() {
        let cap = 4096;
        let stdout = lines("o", 10_000);
        let output = render(&outcome(&stdout, b"", cap), cap);
        let shown = body(&output).matches("o 0").count() * 9;
        assert!(shown > cap * 3 / 4, "{shown}");
        let output = render(&outcome(b"", &stdout, cap), cap);
        let shown = body(&output).matches("o 0").count() * 9;
        assert!(shown > cap * 3 / 4, "{shown}");
    }

    #[test]
    fn both_long_streams_get_half_each() {
        let cap = 4096;
        let output = render(&outcome(&lines("o", 10_000), &lines("e", 10_000), cap), cap);
        let text = body(&output);
        let (out, err) = text.split_once("--- stderr ---\n").unwrap();
        assert!(
            out.len().abs_diff(err.len()) < 30,
            "{} {}",
            out.len(),
            err.len()
        );
        assert!(out.starts_with("--- stdout ---\no 000000\n"));
        assert!(out.contains("o 009999\n[flycode: stdout truncated: "));
        assert!(err.starts_with("e 000000\n"));
        assert!(err.contains("e 009999\n[flycode: stderr truncated: "));
        assert!(err.contains(" of 90000 bytes (the first "));
    }

    #[test]
    fn cut_section_shows_head_marker_tail_and_true_total() {
        let cap = 1024;
        let stdout = lines("o", 1000);
        let output = render(&outcome(&stdout, b"", cap), cap);
        let text = body(&output);
        let marker = text.lines().find(|line| line.starts_with("[… ")).unwrap();
        let omitted: u64 = marker
            .trim_start_matches("[… ")
            .trim_end_matches(" bytes omitted …]")
            .parse()
            .unwrap();
        let shown = text.matches("o 0").count() as u64 * 9;
        assert_eq!(shown + omitted, 9000);
        let note = format!("[flycode: stdout truncated: showed {shown} of 9000 bytes (the first ");
        assert!(text.contains(&note), "{text}");
        assert_eq!(output.data["stdoutBytes"], 9000);
        assert_eq!(output.data["stdoutTruncated"], true);
        assert_eq!(output.data["stderrTruncated"], false);
    }
}
