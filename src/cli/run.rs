//! `flycode run`: the API-backed loop on the terminal. The reply's prose streams to standard
//! output (call blocks left out: each call gets its own `●` line instead); calls, results,
//! retries and the final figures go to standard error. `--json` prints the loop's events as JSON
//! Lines on standard output instead.

use std::io::{IsTerminal, Read, Write};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::{Context, bail};

use super::progress::{PausingApprover, Spinner, start_line};
use super::{Outcome, RunArgs, approver, hand_off_secrets, open_sandbox};
use crate::agent::events::ChildEvent;
use crate::agent::launch::{Launch, RunOptions, Speaking};
use crate::agent::prompt::CallingMode;
use crate::agent::summary::human_duration;
use crate::agent::turn::{RunEnding, RunEvent, RunObserver, RunReport};
use crate::protocol::ToolName;
use crate::protocol::display::escape_for_terminal;
use crate::protocol::stream::CallBlockFilter;

/// Runs `flycode run`.
pub(crate) fn run(args: &RunArgs) -> anyhow::Result<Outcome> {
    // Before anything is read or started (PROTOCOL.md §11 (Security), "No program outlives
    // flycode").
    crate::sandbox::process::guard::guard_this_process();
    let cancel = Arc::new(AtomicBool::new(false));
    super::signals::install(super::signals::StopDoor::Run, Some(Arc::clone(&cancel)))?;
    // Before the hand-off: a key variable that a file trusted now names is handed off too.
    let loaded = super::trust::offer_trust(
        &args.run,
        crate::config::Config::load(&super::config_flags(&args.run)),
    );
    hand_off_secrets(loaded.as_ref().ok())?;
    let resumed = args
        .resume
        .as_deref()
        .map(crate::agent::launch::load_resumed)
        .transpose()?;
    let task = match (&resumed, &args.continue_with) {
        (None, _) => Some(read_task(args)?),
        (Some(_), Some(message)) => Some(message.clone()),
        (Some(_), None) if args.task.is_some() || args.task_file.is_some() => {
            Some(read_task(args)?)
        }
        (Some(_), None) => None,
    };
    let (config, sandbox) = open_sandbox(&args.run, loaded)?;
    // A resumed run talks to the API the run it continues talked to, unless a flag says
    // otherwise (PROTOCOL.md §13 (The API loop: resuming a run)).
    let mut flags = args.settings.clone();
    if let Some(endpoint) = resumed
        .as_ref()
        .and_then(|resumed| resumed.endpoint.as_ref())
    {
        let told = flags.provider.is_some() || flags.base_url.is_some();
        if !told {
            flags.provider = Some(endpoint.provider.clone());
            flags.base_url = Some(endpoint.base_url.clone());
        }
        if flags.model.is_none() && (!told || flags.base_url.as_deref() == Some(&endpoint.base_url))
        {
            flags.model = Some(endpoint.model.clone());
        }
    }
    // A resumed run goes on in the dialect it spoke, unless a flag says otherwise.
    let resumed_dialect = resumed
        .as_ref()
        .and_then(|resumed| resumed.endpoint.as_ref())
        .map(|endpoint| match endpoint.dialect.as_deref() {
            Some("tags") => crate::protocol::dialect::Dialect::Tags,
            _ => crate::protocol::dialect::Dialect::Flycode,
        });
    let dialect = args
        .run
        .dialect
        .or(resumed_dialect)
        .unwrap_or_else(|| super::dialect(None, &config));
    let language = match args
        .lang
        .unwrap_or_else(|| super::Language::from_locale(&|name| std::env::var(name).ok()))
    {
        super::Language::Zh => crate::protocol::prompt::PromptLanguage::Zh,
        super::Language::En => crate::protocol::prompt::PromptLanguage::En,
    };
    let mut launch = Launch::prepare(
        &flags,
        &config,
        sandbox,
        args.transcript.as_deref(),
        &crate::sandbox::secret_env::value,
        Speaking { dialect, language },
    )?;

    let settings = &launch.settings;
    let color =
        !args.json && std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let spinner = Spinner::new(!args.json && std::io::stderr().is_terminal());
    let terminal_approver = approver(&args.run, super::approve::Asking::Session);
    let pausing = PausingApprover {
        inner: terminal_approver.as_ref(),
        spinner: spinner.clone(),
        asking: None,
    };
    let mut observer: Box<dyn RunObserver> = if args.json {
        Box::new(JsonLines)
    } else {
        Box::new(RunTerminal::new(color, settings.mode, spinner.clone()).speaking(dialect))
    };
    let tags = dialect == crate::protocol::dialect::Dialect::Tags;
    if !args.json {
        // The tag dialect is read from the reply's text whatever the calling mode.
        let mode = if tags {
            "tag dialect".to_owned()
        } else {
            format!("{} mode", mode_name(settings.mode))
        };
        eprintln!(
            "flycode: {} · {} API · {mode} · {} · Ctrl-C stops",
            escape_for_terminal(&settings.model),
            settings.provider.as_str(),
            escape_for_terminal(&settings.base_url)
        );
    }
    let options = RunOptions {
        approver: &pausing,
        cancel: &cancel,
        lenient: args.run.lenient,
    };
    let report = match resumed {
        Some(resumed) => {
            if !args.json {
                eprintln!(
                    "flycode: resuming {} ({} messages)",
                    escape_for_terminal(&resumed.parent.display().to_string()),
                    resumed.history.len()
                );
            }
            launch.resume(resumed, task.as_deref(), &options, observer.as_mut())
        }
        None => launch.run(
            task.as_deref().unwrap_or_default(),
            &options,
            observer.as_mut(),
        ),
    };
    let changes = launch.changes_recorded();
    if changes > 0 {
        eprintln!(
            "flycode: this run made {changes} change{} to files; `flycode undo --run {}` takes {} back",
            if changes == 1 { "" } else { "s" },
            crate::sandbox::undo::session_id(),
            if changes == 1 { "it" } else { "them all" },
        );
    }
    Ok(match report.ending {
        RunEnding::Answered => Outcome::Success,
        RunEnding::Cancelled => Outcome::Interrupted,
        _ => Outcome::Failure,
    })
}

fn read_task(args: &RunArgs) -> anyhow::Result<String> {
    let task = match (&args.task_file, args.task.as_deref()) {
        (Some(path), _) => crate::sandbox::host::read_to_string(path)
            .with_context(|| format!("cannot read the task from {}", path.display()))?,
        (None, Some("-")) => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("cannot read the task from standard input (it must be UTF-8 text)")?;
            text
        }
        (None, Some(task)) => task.to_owned(),
        (None, None) => String::new(),
    };
    if task.trim().is_empty() {
        bail!("the task is empty: say what to do, e.g. flycode run \"fix the failing test\"");
    }
    Ok(task)
}

fn mode_name(mode: CallingMode) -> &'static str {
    match mode {
        CallingMode::Text => "text",
        CallingMode::Native => "native",
    }
}

/// `1 turn`, `3 turns`.
fn count(number: u64, noun: &str) -> String {
    if number == 1 {
        format!("1 {noun}")
    } else {
        format!("{number} {noun}s")
    }
}

/// `--json`: every event as one JSON line on standard output.
struct JsonLines;

impl RunObserver for JsonLines {
    fn on_event(&mut self, event: &RunEvent) {
        let mut out = std::io::stdout().lock();
        if let Ok(line) = serde_json::to_string(event) {
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        }
    }
}

/// The terminal display of seed 001. Standard output carries the model's prose; a reply that
/// turns out invalid has its prose on standard error instead (PROTOCOL.md §13 (The API loop:
/// display)).
struct RunTerminal {
    /// The calls started and not yet finished, by id, as their `●` line named them.
    running: std::collections::HashMap<Option<String>, String>,
    /// The call whose `●` line was printed last, while nothing has been printed after it.
    last_started: Option<String>,
    color: bool,
    mode: CallingMode,
    spinner: Spinner,
    filter: CallBlockFilter,
    streamed: bool,
    stdout_at_line_start: bool,
    /// Text mode: the prose of the reply that arrived, held until its verdict says where it goes.
    held_prose: Option<String>,
    /// The tag dialect: replies stay off the terminal (their tags show as calls), and the
    /// top agent's `<return>` is the answer printed at the end.
    tags: bool,
    /// Native mode: the calls of the latest reply, and its invalid ones as they were judged,
    /// shown as one line once the turn's judging is over.
    turn_calls: usize,
    invalid_calls: Vec<InvalidCall>,
    /// Standard error is a terminal: a lone call's `└ executing...` line shows while it runs,
    /// then gives way to its outcome.
    live: bool,
    /// `└ executing...` is on the screen, its line not ended.
    executing_line: bool,
    /// The last half-minute the "waiting for the model" line was printed for.
    waiting_shown: Option<u64>,
    /// Standard output is not a terminal (a pipe, a file: `flycode run … > answer.md`): it
    /// gets the final answer alone, at the end, as the peers' print modes give it; the prose
    /// as it streams (preambles, text beside calls) goes to standard error (PROTOCOL.md §13
    /// (The API loop: display)).
    answer_only: bool,
}

/// A native call that was judged invalid.
struct InvalidCall {
    code: String,
    message: String,
    consecutive: u32,
}

impl RunTerminal {
    fn new(color: bool, mode: CallingMode, spinner: Spinner) -> RunTerminal {
        let live = spinner.is_enabled();
        RunTerminal {
            running: std::collections::HashMap::new(),
            last_started: None,
            color,
            mode,
            spinner,
            filter: CallBlockFilter::default(),
            streamed: false,
            stdout_at_line_start: true,
            held_prose: None,
            tags: false,
            turn_calls: 0,
            invalid_calls: Vec::new(),
            live,
            executing_line: false,
            answer_only: !std::io::stdout().is_terminal(),
            waiting_shown: None,
        }
    }

    /// The same display for a run in `dialect`.
    fn speaking(mut self, dialect: crate::protocol::dialect::Dialect) -> RunTerminal {
        self.tags = dialect == crate::protocol::dialect::Dialect::Tags;
        self
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("\u{1b}[{code}m{text}\u{1b}[0m")
        } else {
            text.to_owned()
        }
    }

    /// Native mode: prose streams to standard output as it arrives (text beside calls is never
    /// invalid there). Text mode holds it (see [`RunTerminal::hold_reply`]).
    fn show_text(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        let text = escape_for_terminal(text);
        if self.answer_only {
            let mut out = std::io::stderr().lock();
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
        } else {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
        }
        self.stdout_at_line_start = text.ends_with('\n');
    }

    fn end_text(&mut self) {
        if !self.stdout_at_line_start {
            if self.answer_only {
                eprintln!();
            } else {
                println!();
            }
            self.stdout_at_line_start = true;
        }
    }

    /// Text mode: the reply's prose, its call block left out, waits for the verdict.
    fn hold_reply(&mut self, text: &str) {
        let mut prose = self.filter.push(text);
        prose.push_str(&self.filter.finish());
        self.filter = CallBlockFilter::default();
        self.held_prose = Some(prose);
    }

    /// The held prose goes to standard output, or for an invalid reply to standard error.
    fn release_prose(&mut self, invalid: bool) {
        let Some(prose) = self.held_prose.take() else {
            return;
        };
        let prose = prose.trim_end();
        if prose.trim().is_empty() {
            return;
        }
        if invalid {
            eprintln!("{}", self.paint("2", &escape_for_terminal(prose)));
        } else {
            self.show_text(prose);
            self.end_text();
        }
    }

    /// Native mode: the turn's invalid calls as one line: an invalid reply when none of its
    /// calls was valid, else the calls that were not run.
    fn flush_invalid_calls(&mut self) {
        let Some(first) = self.invalid_calls.first() else {
            return;
        };
        let more = match self.invalid_calls.len() {
            1 => String::new(),
            2 => " (and 1 more invalid call)".to_owned(),
            n => format!(" (and {} more invalid calls)", n - 1),
        };
        let line = if self.invalid_calls.len() >= self.turn_calls {
            format!(
                "invalid reply ({}, {} in a row): {}{more}",
                first.code, first.consecutive, first.message
            )
        } else {
            format!(
                "{} of {} calls not run ({}): {}{more}",
                self.invalid_calls.len(),
                self.turn_calls,
                first.code,
                first.message
            )
        };
        eprintln!("{} {}", self.paint("31", "✗"), escape_for_terminal(&line));
        self.invalid_calls.clear();
    }

    fn finished(&self, report: &RunReport) {
        let (mark, headline) = self.ending_line(&report.ending, report.turns);
        let failed = if report.failed_calls > 0 {
            format!(" ({} failed)", report.failed_calls)
        } else {
            String::new()
        };
        let tokens = if report
            .usage
            .prompt_tokens
            .saturating_add(report.usage.completion_tokens)
            > 0
        {
            format!(
                " · {} tokens in{}, {} out",
                report.usage.prompt_tokens,
                match report.usage.cache_read_tokens {
                    0 => String::new(),
                    cached => format!(" ({cached} cached)"),
                },
                report.usage.completion_tokens
            )
        } else {
            String::new()
        };
        eprintln!(
            "{mark} {headline} · {} · {}{failed}{tokens} · {}",
            count(u64::from(report.turns), "turn"),
            count(u64::from(report.calls), "call"),
            human_duration(u64::try_from(report.duration.as_millis()).unwrap_or(u64::MAX))
        );
        for path in &report.transcript {
            eprintln!(
                "{}",
                self.paint("2", &format!("  transcript: {}", path.display()))
            );
        }
    }

    /// The mark and the headline of the last line.
    fn ending_line(&self, ending: &RunEnding, turns: u32) -> (String, String) {
        let red = |text: String| (self.paint("31", "✗"), text);
        match ending {
            RunEnding::Answered => (self.paint("32", "✓"), "done".to_owned()),
            RunEnding::MaxTurns => red(format!(
                "stopped after {turns} turns without an answer (raise --max-turns)"
            )),
            RunEnding::TooManyViolations(detail) | RunEnding::ClientFailed(detail) => {
                red(format!("stopped: {}", escape_for_terminal(detail)))
            }
            RunEnding::Cancelled => (self.paint("33", "■"), "cancelled".to_owned()),
            RunEnding::EmptyReply(reason) => red(format!(
                "stopped: the model sent an empty reply (finish_reason {}); try again, or another model",
                escape_for_terminal(reason)
            )),
            // A sub-agent's endings: its task's outcome line says them in a run.
            RunEnding::Completed => (self.paint("32", "✓"), "completed".to_owned()),
            RunEnding::Incomplete(detail) => (
                self.paint("33", "■"),
                format!("incomplete: {}", escape_for_terminal(detail)),
            ),
        }
    }

    fn retrying(&mut self, attempt: u32, delay_ms: u64, reason: &str) {
        self.end_text();
        eprintln!(
            "{}",
            self.paint(
                "33",
                &format!(
                    "  ↻ {} · retry {attempt} in {}",
                    escape_for_terminal(reason),
                    human_duration(delay_ms)
                )
            )
        );
        self.streamed = false;
    }

    fn reply(&mut self, text: &str, tool_calls: usize) {
        if self.tags {
            return;
        }
        match self.mode {
            CallingMode::Text => self.hold_reply(text),
            CallingMode::Native => {
                if !self.streamed {
                    self.show_text(text);
                }
                self.end_text();
                self.turn_calls = tool_calls;
            }
        }
    }

    fn call_started(
        &mut self,
        id: &Option<String>,
        tool: ToolName,
        subject: &str,
        runs_program: bool,
    ) {
        eprintln!("{}", start_line(self.color, tool, subject));
        self.last_started = id.clone();
        self.running
            .insert(id.clone(), format!("{tool} ({subject})"));
        if runs_program {
            self.spinner.start(subject);
        } else if self.live {
            // Seed 001's drawing: the line gives way to the outcome when the call ends.
            eprint!("  └ {}", self.paint("2", "executing..."));
            self.executing_line = true;
        }
    }

    fn call_finished(
        &mut self,
        id: &Option<String>,
        ok: bool,
        summary: &str,
        advice: Option<&str>,
    ) {
        self.spinner.stop();
        if std::mem::take(&mut self.executing_line) {
            eprint!("\r\u{1b}[2K");
        }
        // Seed 001: an outcome with errors ends with ⚠️ (a failed call, or a partial one).
        let warn = if !ok || has_errors(summary) {
            " ⚠️"
        } else {
            ""
        };
        let summary = if ok {
            format!("{summary}{warn}")
        } else {
            self.paint("31", &format!("{summary}{warn}"))
        };
        // Calls running at once finish in any order: an outcome that does not follow its own
        // call's line names the call.
        let named = self.running.remove(id);
        match named {
            Some(call) if self.last_started != *id => eprintln!("  └ {call}: {summary}"),
            _ => eprintln!("  └ {summary}"),
        }
        self.last_started = None;
        if let Some(advice) = advice {
            eprintln!(
                "    {}",
                self.paint(
                    "33",
                    &format!("to allow it: {}", escape_for_terminal(advice))
                )
            );
        }
    }

    /// An invalid reply: one line a turn. Text mode says it at once; native mode gathers the
    /// turn's invalid calls (see [`RunTerminal::flush_invalid_calls`]).
    fn violation(&mut self, code: &str, message: &str, consecutive: u32) {
        match self.mode {
            CallingMode::Native => self.invalid_calls.push(InvalidCall {
                code: code.to_owned(),
                message: message.to_owned(),
                consecutive,
            }),
            CallingMode::Text => {
                self.release_prose(true);
                eprintln!(
                    "{} {}",
                    self.paint("31", "✗"),
                    escape_for_terminal(&format!(
                        "invalid reply ({code}, {consecutive} in a row): {message}"
                    ))
                );
            }
        }
    }

    /// The model has not answered yet: a line at once and every half-minute after.
    fn waiting(&mut self, elapsed_ms: u64) {
        let slot = elapsed_ms / 30_000;
        if self.waiting_shown.is_some_and(|shown| shown >= slot) {
            return;
        }
        self.waiting_shown = Some(slot);
        eprintln!(
            "{}",
            self.paint(
                "2",
                &format!(
                    "  ⋯ waiting for the model to read the prompt · {}",
                    human_duration(elapsed_ms)
                )
            )
        );
    }

    fn warning(&self, message: &str) {
        eprintln!(
            "{}",
            self.paint(
                "33",
                &format!("  warning: {}", escape_for_terminal(message))
            )
        );
    }
}

impl RunObserver for RunTerminal {
    fn on_event(&mut self, event: &RunEvent) {
        // Whatever follows a reply's judging settles where its prose goes and ends its line of
        // invalid calls.
        if !matches!(
            event,
            RunEvent::Violation { .. } | RunEvent::TextDelta { .. }
        ) {
            self.release_prose(false);
            self.flush_invalid_calls();
        }
        let own_outcome =
            matches!(event, RunEvent::CallFinished { id, .. } if *id == self.last_started);
        if self.executing_line && !own_outcome {
            eprintln!();
            self.executing_line = false;
        }
        match event {
            RunEvent::Request { .. } => {
                self.streamed = false;
                self.waiting_shown = None;
            }
            RunEvent::Waiting { elapsed_ms } => self.waiting(*elapsed_ms),
            RunEvent::ReplyCut { message, .. } => {
                self.end_text();
                eprintln!(
                    "{}",
                    self.paint("33", &format!("  ✂ {}", escape_for_terminal(message)))
                );
            }
            RunEvent::CallRecovered { tool, form, .. } => {
                self.end_text();
                eprintln!(
                    "{}",
                    self.paint(
                        "33",
                        &format!(
                            "  ↳ the model wrote a {tool} call as text ({}): running it as a tool call",
                            escape_for_terminal(form)
                        )
                    )
                );
            }
            RunEvent::ParallelCalls { count } => {
                self.end_text();
                eprintln!(
                    "{}",
                    self.paint("2", &format!("Executing tools in parallel ({count})"))
                );
            }
            RunEvent::TextDelta { text } => {
                if self.mode == CallingMode::Native {
                    self.streamed = true;
                    self.show_text(text);
                }
            }
            RunEvent::Retrying {
                attempt,
                delay_ms,
                reason,
            } => self.retrying(*attempt, *delay_ms, reason),
            RunEvent::Reply {
                text, tool_calls, ..
            } => self.reply(text, *tool_calls),
            RunEvent::CallStarted {
                id,
                tool,
                subject,
                runs_program,
                ..
            } => self.call_started(id, *tool, subject, *runs_program),
            RunEvent::CallFinished {
                id,
                ok,
                summary,
                advice,
                ..
            } => self.call_finished(id, *ok, summary, advice.as_deref()),
            RunEvent::Violation {
                code,
                message,
                consecutive,
                ..
            } => self.violation(code, message, *consecutive),
            RunEvent::Warning { message } => self.warning(message),
            RunEvent::Compacted {
                replaced,
                tokens_before,
                tokens_after,
                ..
            } => {
                self.end_text();
                eprintln!(
                    "{}",
                    self.paint(
                        "2",
                        &format!(
                            "  ⟳ compacted: {replaced} older messages replaced by a summary · ~{tokens_before} → ~{tokens_after} tokens"
                        )
                    )
                );
            }
            RunEvent::Finished(report) => {
                self.end_text();
                // The tag dialect's answer never streamed; a redirected standard output gets
                // the answer alone.
                if (self.tags || self.answer_only)
                    && report.ending == RunEnding::Answered
                    && let Some(answer) = &report.answer
                {
                    println!("{}", escape_for_terminal(answer));
                }
                self.finished(report);
            }
            RunEvent::Child(child) => self.child_event(child),
        }
    }
}

/// Whether an outcome line reports errors in a call that succeeded in part (`Read 3 files
/// (8.2 KB), 2 errors`).
fn has_errors(summary: &str) -> bool {
    summary.split(", ").any(|part| {
        let mut words = part.split_whitespace();
        matches!(
            (words.next(), words.next()),
            (Some(n), Some("error" | "errors")) if n.parse::<u64>().is_ok_and(|n| n > 0)
        )
    })
}

impl RunTerminal {
    /// A sub-agent's calls, indented under its task's line; its text stays off the terminal
    /// (the parent gets its result), and its end shows as the task's outcome line.
    fn child_event(&mut self, child: &ChildEvent) {
        let task = self.paint("2", &format!(" · {}", child.task_id));
        let line = match &*child.event {
            RunEvent::CallStarted { tool, subject, .. } => {
                format!("    {} {tool} ({subject}){task}", self.paint("36", "●"))
            }
            RunEvent::CallFinished { ok, summary, .. } => {
                let summary = if *ok {
                    summary.clone()
                } else {
                    self.paint("31", summary)
                };
                format!("      └ {summary}{task}")
            }
            RunEvent::Violation { code, message, .. } => format!(
                "    {} {}{task}",
                self.paint("31", "✗"),
                escape_for_terminal(&format!("invalid reply ({code}): {message}"))
            ),
            RunEvent::Retrying {
                attempt,
                delay_ms,
                reason,
            } => self.paint(
                "33",
                &format!(
                    "    ↻ {} · retry {attempt} in {}{task}",
                    escape_for_terminal(reason),
                    human_duration(*delay_ms)
                ),
            ),
            RunEvent::Warning { message } => self.paint(
                "33",
                &format!("    warning: {}{task}", escape_for_terminal(message)),
            ),
            RunEvent::Compacted {
                replaced,
                tokens_before,
                tokens_after,
                ..
            } => self.paint(
                "2",
                &format!(
                    "    ⟳ compacted: {replaced} messages · ~{tokens_before} → ~{tokens_after} tokens{task}"
                ),
            ),
            _ => return,
        };
        self.end_text();
        eprintln!("{line}");
        // The task's outcome no longer follows its own line: it names its call.
        self.last_started = None;
    }
}
