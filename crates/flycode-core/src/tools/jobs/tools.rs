//! `job.log`, `job.list`, `job.input` and `job.kill` (PROTOCOL.md §9 (Tools: background jobs)):
//! typed arguments, what policy needs to know, and the rendering of what the job table holds.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{Job, JobTable};
use crate::protocol::{ErrorCode, ToolName};
use crate::sandbox::process::job::StopSignal;
use crate::sandbox::process::job_log::{JobEnd, LogView, Origin};
use crate::tools::tool::{ApprovalClass, Effects, Program, Tool, ToolContext, field};
use crate::tools::{ToolError, ToolOutput};

/// `maxLines` unless given, and the most it may be.
const DEFAULT_MAX_LINES: u64 = 200;
const MOST_LINES: u64 = 2000;

/// `job.input`'s wait unless given.
const DEFAULT_INPUT_WAIT_MS: u64 = 1000;

/// Once `job.input`'s answer began to arrive, this long without more output ends the wait.
const QUIET: Duration = Duration::from_millis(100);

/// The most `job.input` writes in one call: more is `too_large`, before anything is written.
const INPUT_CAP: usize = 1 << 20;

/// The least time `job.input` gives a job to take its input, whatever `waitMs` says.
const LEAST_INPUT_WAIT: Duration = Duration::from_secs(1);

/// How often a wait looks at the cancel flag (Ctrl-C in `run`, a cancelled MCP request).
const CANCEL_CHECK: Duration = Duration::from_millis(100);

/// How many of a killed job's last lines `job.kill` shows.
const KILL_TAIL: u64 = 20;

/// The arguments of `job.log`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobLogArgs {
    /// `job-N`.
    pub job_id: String,
    /// The first line to show (1-based; default 1).
    pub start_line: Option<u64>,
    /// How many lines at most (default 200, at most 2000).
    pub max_lines: Option<u64>,
    /// How long to wait for a line at or past `startLine`, or the job's end.
    pub wait_ms: Option<u64>,
}

/// The arguments of `job.list` (none).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobListArgs {}

/// The arguments of `job.input`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobInputArgs {
    /// `job-N`.
    pub job_id: String,
    /// What to write to the job's stdin, as given (end a line with `\n`).
    pub input: String,
    /// Close stdin after writing (end of file).
    #[serde(default)]
    pub close_stdin: bool,
    /// How long to wait for the job's answer.
    pub wait_ms: Option<u64>,
    /// No variables: policy's view of the "program" this input feeds.
    #[serde(skip)]
    no_env: Map<String, Value>,
}

/// The arguments of `job.kill`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobKillArgs {
    /// `job-N`.
    pub job_id: String,
    /// `INT`, `TERM` (default) or `KILL`.
    pub signal: Option<String>,
}

/// The session's table, or why there is none.
fn table<'a>(context: &ToolContext<'a>) -> Result<&'a JobTable, ToolError> {
    context.jobs.ok_or_else(no_session)
}

/// The error of a job tool or a background start where calls have no session.
pub fn no_session() -> ToolError {
    ToolError::new(
        ErrorCode::InvalidArgs,
        "background jobs live in a session: flycode watch, flycode run or flycode mcp; this door runs single calls (flycode exec) and keeps no job",
        Some(
            "run the program in the foreground (without background), or use flycode watch, run or mcp",
        ),
    )
}

/// The headers every job tool shows about a job.
fn job_fields(job: &Job, view: &LogView) -> Vec<(String, String)> {
    let mut fields = vec![
        ("job".to_owned(), job.id.clone()),
        ("state".to_owned(), job.state().to_owned()),
    ];
    match view.end {
        Some(JobEnd::Exited(code)) => fields.push(("exitCode".to_owned(), code.to_string())),
        Some(JobEnd::Killed(signal)) => fields.push(("signal".to_owned(), signal.to_string())),
        _ => {}
    }
    fields.push(("lines".to_owned(), view.total.to_string()));
    fields
}

/// The lines as the body shows them: `12\ttext`, stderr's `12\t[stderr] text`.
fn render_lines(view: &LogView, from: u64) -> (String, u64) {
    let mut body = String::new();
    if from < view.first_kept && view.first_kept > 1 {
        body.push_str(&format!(
            "[lines {from}-{} were dropped: the job's log keeps its most recent output ([jobs] log_bytes)]\n",
            view.first_kept - 1
        ));
    }
    let mut next = from.max(view.first_kept).min(view.total + 1);
    for line in &view.lines {
        let mark = if line.origin == Origin::Err {
            "[stderr] "
        } else {
            ""
        };
        body.push_str(&format!("{}\t{mark}{}\n", line.number, line.text));
        next = line.number + 1;
    }
    if next > view.total {
        for (origin, text) in &view.unfinished {
            let mark = if *origin == Origin::Err {
                "stderr, "
            } else {
                ""
            };
            body.push_str(&format!("[unfinished line, {mark}no newline yet] {text}\n"));
        }
    }
    (body, next)
}

/// `job.log`: lines of a job's output, waiting for them when asked.
fn read_log(table: &JobTable, args: &JobLogArgs) -> Result<ToolOutput, ToolError> {
    let job = table.get(&args.job_id)?;
    let start = args.start_line.unwrap_or(1).max(1);
    let max = args
        .max_lines
        .unwrap_or(DEFAULT_MAX_LINES)
        .clamp(1, MOST_LINES);
    if let Some(wait) = args.wait_ms.filter(|&ms| ms > 0) {
        let deadline = Instant::now() + Duration::from_millis(wait.min(60_000));
        job.log()
            .wait_until(Some(deadline), |total, _, ended| total >= start || ended);
    }
    let view = job
        .log()
        .view(start, usize::try_from(max).unwrap_or(usize::MAX));
    let (body, next) = render_lines(&view, start);
    let mut fields = job_fields(&job, &view);
    fields.push(("nextLine".to_owned(), next.to_string()));
    if start < view.first_kept && view.first_kept > 1 {
        fields.push((
            "dropped".to_owned(),
            format!("{start}-{}", view.first_kept - 1),
        ));
    }
    if let Some(why) = job.log().failure() {
        fields.push(("logError".to_owned(), why));
    }
    let data = json!({
        "jobId": job.id,
        "state": job.state(),
        "lines": view.total,
        "nextLine": next,
        "firstKept": view.first_kept,
    });
    Ok(ToolOutput {
        body: Some(body),
        fields,
        data,
        continue_hint: Some(format!(
            "read on with job.log {{\"jobId\": \"{}\", \"startLine\": {next}}}",
            job.id
        )),
        kept: None,
    })
}

/// `job.list`: the session's jobs.
fn list(table: &JobTable) -> ToolOutput {
    let mut body = String::new();
    let mut rows = Vec::new();
    for job in table.jobs() {
        let view = job.log().view(u64::MAX, 0);
        let exit = match view.end {
            Some(JobEnd::Exited(code)) => format!("exit {code}"),
            Some(JobEnd::Killed(signal)) => format!("signal {signal}"),
            _ => "-".to_owned(),
        };
        let seconds = job.running_time().as_secs_f64();
        body.push_str(&format!(
            "{}\t{}\tpid {}\t{exit}\t{seconds:.1} s\t{} lines\t{}{}\n",
            job.id,
            job.state(),
            job.process.pid(),
            view.total,
            job.command,
            if job.pty { " (pty)" } else { "" }
        ));
        rows.push(json!({
            "jobId": job.id,
            "command": job.command,
            "state": job.state(),
            "pid": job.process.pid(),
            "exitCode": match view.end { Some(JobEnd::Exited(code)) => Some(code), _ => None },
            "runningMs": u64::try_from(job.running_time().as_millis()).unwrap_or(u64::MAX),
            "lines": view.total,
            "pty": job.pty,
        }));
    }
    if rows.is_empty() {
        body.push_str("no background jobs in this session\n");
    }
    ToolOutput {
        body: Some(body),
        fields: vec![
            ("count".to_owned(), rows.len().to_string()),
            ("running".to_owned(), table.running().to_string()),
        ],
        data: json!({ "jobs": rows }),
        continue_hint: None,
        kept: None,
    }
}

/// Waits on `log` like
/// [`JobOutputLog::wait_until`](crate::sandbox::process::job_log::JobOutputLog::wait_until),
/// and also ends the wait (false) once `cancel` is set.
fn wait_log(
    log: &crate::sandbox::process::job_log::JobOutputLog,
    deadline: Instant,
    cancel: Option<&std::sync::atomic::AtomicBool>,
    ready: impl Fn(u64, u64, bool) -> bool,
) -> bool {
    let Some(cancel) = cancel else {
        return log.wait_until(Some(deadline), ready);
    };
    loop {
        if cancel.load(std::sync::atomic::Ordering::SeqCst) {
            return false;
        }
        let slice = (Instant::now() + CANCEL_CHECK).min(deadline);
        if log.wait_until(Some(slice), &ready) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
    }
}

/// `job.input`: writes (non-blocking, bounded, capped: a job that does not read its stdin never
/// holds up the session), then collects what the job answers within the wait.
fn input(
    table: &JobTable,
    args: &JobInputArgs,
    cancel: Option<&std::sync::atomic::AtomicBool>,
) -> Result<ToolOutput, ToolError> {
    let job = table.get(&args.job_id)?;
    if args.input.len() > INPUT_CAP {
        return Err(ToolError::new(
            ErrorCode::TooLarge,
            format!(
                "the input is {} bytes; job.input writes at most {INPUT_CAP} bytes at a time",
                args.input.len()
            ),
            Some("send it in parts, or write it to a file in the root and have the job read that"),
        ));
    }
    if job.log().end().is_some() {
        return Err(ToolError::new(
            ErrorCode::InvalidArgs,
            format!("{} has ended: it reads no more input", job.id),
            Some("job.log shows what it printed; start it again if needed"),
        ));
    }
    let (before, changes) = job.log().position();
    let wait = Duration::from_millis(args.wait_ms.unwrap_or(DEFAULT_INPUT_WAIT_MS).min(60_000));
    let written = job
        .process
        .write_input(
            args.input.as_bytes(),
            args.close_stdin,
            Instant::now() + wait.max(LEAST_INPUT_WAIT),
            cancel,
        )
        .map_err(|error| {
            ToolError::new(
                ErrorCode::IoError,
                format!("cannot write to {}'s stdin: {error}", job.id),
                Some("the job may have closed its input; see job.log"),
            )
        })?;
    if written < args.input.len() {
        let total = args.input.len();
        if cancel.is_some_and(|flag| flag.load(std::sync::atomic::Ordering::SeqCst)) {
            return Err(ToolError::new(
                ErrorCode::Cancelled,
                format!(
                    "job.input was cancelled after {written} of {total} bytes were written to {}",
                    job.id
                ),
                None,
            ));
        }
        return Err(ToolError::new(
            ErrorCode::Timeout,
            format!(
                "{} took only {written} of {total} bytes of input within {} ms: it is not reading its stdin; the rest was not written",
                job.id,
                wait.max(LEAST_INPUT_WAIT).as_millis()
            ),
            Some("job.log shows what the job is doing; job.kill ends it"),
        ));
    }
    let deadline = Instant::now() + wait;
    let log = job.log();
    if wait_log(log, deadline, cancel, |_, now, ended| {
        now > changes || ended
    }) {
        // The answer has begun: take it until the job is quiet, ends, or the wait is over.
        loop {
            let (_, seen) = log.position();
            let until = (Instant::now() + QUIET).min(deadline);
            if !wait_log(log, until, cancel, |_, now, ended| now > seen || ended)
                || log.end().is_some()
            {
                break;
            }
        }
    }
    let view = log.view(before + 1, usize::try_from(MOST_LINES).unwrap_or(2000));
    let (body, next) = render_lines(&view, before + 1);
    let mut fields = job_fields(&job, &view);
    fields.push(("nextLine".to_owned(), next.to_string()));
    Ok(ToolOutput {
        body: Some(body),
        fields,
        data: json!({ "jobId": job.id, "state": job.state(), "nextLine": next }),
        continue_hint: None,
        kept: None,
    })
}

/// `job.kill`: ends the job and its tree; its last state and lines.
fn kill(table: &JobTable, args: &JobKillArgs) -> Result<ToolOutput, ToolError> {
    let job = table.get(&args.job_id)?;
    let signal = match args.signal.as_deref() {
        Some("INT") => StopSignal::Int,
        Some("KILL") => StopSignal::Kill,
        _ => StopSignal::Term,
    };
    let already = job.log().end().is_some();
    if !already {
        job.kill(signal);
    }
    let total = job.log().position().0;
    let from = total.saturating_sub(KILL_TAIL) + 1;
    let view = job
        .log()
        .view(from, usize::try_from(KILL_TAIL).unwrap_or(20));
    let (lines, next) = render_lines(&view, from);
    let said = if already {
        format!("{} had already ended", job.id)
    } else {
        format!("{} and everything it started were ended", job.id)
    };
    let mut fields = job_fields(&job, &view);
    fields.push(("nextLine".to_owned(), next.to_string()));
    Ok(ToolOutput {
        body: Some(format!("{said}; its last lines:\n{lines}")),
        fields,
        data: json!({ "jobId": job.id, "state": job.state() }),
        continue_hint: None,
        kept: None,
    })
}

/// `job.log` in the registry.
pub struct JobLog;
/// `job.list` in the registry.
pub struct JobList;
/// `job.input` in the registry.
pub struct JobInput;
/// `job.kill` in the registry.
pub struct JobKill;

/// `job-2 · 40 lines · running`.
fn job_summary(output: &ToolOutput) -> String {
    let job = field(output, "job").unwrap_or("job");
    let lines = field(output, "lines").unwrap_or("0");
    let state = field(output, "state").unwrap_or("?");
    format!("{job} · {lines} lines · {state}")
}

impl Tool for JobLog {
    type Args = JobLogArgs;
    const NAME: ToolName = ToolName::JobLog;

    fn approval(&self) -> ApprovalClass {
        ApprovalClass::Read
    }

    fn effects<'a>(&self, _args: &'a JobLogArgs) -> Effects<'a> {
        Effects::default()
    }

    fn subject(&self, args: &JobLogArgs, _roots: &[PathBuf]) -> String {
        match args.start_line {
            Some(line) => format!("{} from line {line}", args.job_id),
            None => args.job_id.clone(),
        }
    }

    fn summary(&self, output: &ToolOutput) -> String {
        job_summary(output)
    }

    fn run(&self, context: &ToolContext<'_>, args: &JobLogArgs) -> Result<ToolOutput, ToolError> {
        read_log(table(context)?, args)
    }
}

impl Tool for JobList {
    type Args = JobListArgs;
    const NAME: ToolName = ToolName::JobList;

    fn approval(&self) -> ApprovalClass {
        ApprovalClass::Read
    }

    fn effects<'a>(&self, _args: &'a JobListArgs) -> Effects<'a> {
        Effects::default()
    }

    fn subject(&self, _args: &JobListArgs, _roots: &[PathBuf]) -> String {
        "jobs".to_owned()
    }

    fn summary(&self, output: &ToolOutput) -> String {
        let jobs = field(output, "count").unwrap_or("0");
        let running = field(output, "running").unwrap_or("0");
        format!("{jobs} jobs · {running} running")
    }

    fn run(&self, context: &ToolContext<'_>, _args: &JobListArgs) -> Result<ToolOutput, ToolError> {
        Ok(list(table(context)?))
    }
}

impl Tool for JobInput {
    type Args = JobInputArgs;
    const NAME: ToolName = ToolName::JobInput;

    fn approval(&self) -> ApprovalClass {
        ApprovalClass::AsksFirst
    }

    /// Input to a running program is as powerful as the shell line that could have started it.
    fn judged_as(&self, _args: &JobInputArgs) -> ToolName {
        ToolName::ShellExec
    }

    fn effects<'a>(&self, args: &'a JobInputArgs) -> Effects<'a> {
        Effects {
            program: Some(Program {
                command: &args.input,
                shell: true,
                env: &args.no_env,
            }),
            ..Effects::default()
        }
    }

    fn subject(&self, args: &JobInputArgs, _roots: &[PathBuf]) -> String {
        format!("{} ← {}", args.job_id, args.input.trim_end())
    }

    fn summary(&self, output: &ToolOutput) -> String {
        job_summary(output)
    }

    fn run(&self, context: &ToolContext<'_>, args: &JobInputArgs) -> Result<ToolOutput, ToolError> {
        input(table(context)?, args, context.limits.cancel.as_deref())
    }
}

impl Tool for JobKill {
    type Args = JobKillArgs;
    const NAME: ToolName = ToolName::JobKill;

    fn approval(&self) -> ApprovalClass {
        ApprovalClass::Write
    }

    fn effects<'a>(&self, _args: &'a JobKillArgs) -> Effects<'a> {
        Effects::default()
    }

    fn subject(&self, args: &JobKillArgs, _roots: &[PathBuf]) -> String {
        match &args.signal {
            Some(signal) => format!("{} ({signal})", args.job_id),
            None => args.job_id.clone(),
        }
    }

    fn summary(&self, output: &ToolOutput) -> String {
        job_summary(output)
    }

    fn run(&self, context: &ToolContext<'_>, args: &JobKillArgs) -> Result<ToolOutput, ToolError> {
        kill(table(context)?, args)
    }
}
