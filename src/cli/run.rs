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
use crate::agent::launch::{Launch, RunOptions};
use crate::agent::prompt::CallingMode;
use crate::agent::summary::human_duration;
use crate::agent::turn::{Ending, RunEvent, RunObserver, RunReport};
use crate::protocol::display::escape_for_terminal;
use crate::protocol::stream::CallBlockFilter;

/// Runs `flycode run`.
pub fn run(args: &RunArgs) -> anyhow::Result<Outcome> {
    // Before the hand-off: a key variable that a file trusted now names is handed off too.
    super::trust::offer_trust(&args.run);
    hand_off_secrets(&args.run.roots, args.run.approve, args.run.tools);
    let task = read_task(args)?;
    let (config, sandbox) = open_sandbox(&args.run)?;
    let mut launch = Launch::prepare(
        &args.settings,
        &config,
        sandbox,
        args.transcript.as_deref(),
        &crate::sandbox::secret_env::value,
    )?;

    let cancel = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // A second Ctrl-C while the first is being honoured ends flycode at once.
        signal_hook::flag::register_conditional_shutdown(signal, 130, Arc::clone(&cancel))
            .context("installing the signal handler")?;
        signal_hook::flag::register(signal, Arc::clone(&cancel))
            .context("installing the signal handler")?;
    }

    let settings = &launch.settings;
    let color =
        !args.json && std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let spinner = Spinner::new(!args.json && std::io::stderr().is_terminal());
    let inner_approver = approver(&args.run);
    let pausing = PausingApprover {
        inner: inner_approver.as_ref(),
        spinner: spinner.clone(),
    };
    let mut observer: Box<dyn RunObserver> = if args.json {
        Box::new(JsonLines)
    } else {
        Box::new(Terminal::new(color, settings.mode, spinner.clone()))
    };
    if !args.json {
        eprintln!(
            "flycode: {} · {} mode · {} · Ctrl-C stops",
            escape_for_terminal(&settings.model),
            mode_name(settings.mode),
            escape_for_terminal(&settings.base_url)
        );
    }
    let options = RunOptions {
        approver: &pausing,
        cancel: &cancel,
        lenient: args.run.lenient,
    };
    let report = launch.run(&task, &options, observer.as_mut());
    Ok(match report.ending {
        Ending::Answered => Outcome::Success,
        Ending::Cancelled => Outcome::Interrupted,
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

/// The terminal display of seed 001.
struct Terminal {
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
}

impl Terminal {
    fn new(color: bool, mode: CallingMode, spinner: Spinner) -> Terminal {
        Terminal {
            running: std::collections::HashMap::new(),
            last_started: None,
            color,
            mode,
            spinner,
            filter: CallBlockFilter::default(),
            streamed: false,
            stdout_at_line_start: true,
        }
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("\u{1b}[{code}m{text}\u{1b}[0m")
        } else {
            text.to_owned()
        }
    }

    fn show_text(&mut self, text: &str) {
        let shown = match self.mode {
            CallingMode::Text => self.filter.push(text),
            CallingMode::Native => text.to_owned(),
        };
        if shown.is_empty() {
            return;
        }
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(escape_for_terminal(&shown).as_bytes());
        let _ = out.flush();
        self.stdout_at_line_start = shown.ends_with('\n');
    }

    fn end_text(&mut self) {
        let rest = self.filter.finish();
        if !rest.is_empty() {
            self.show_text_raw(&rest);
        }
        if !self.stdout_at_line_start {
            println!();
            self.stdout_at_line_start = true;
        }
    }

    fn show_text_raw(&mut self, text: &str) {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(escape_for_terminal(text).as_bytes());
        let _ = out.flush();
        self.stdout_at_line_start = text.ends_with('\n');
    }

    fn finished(&self, report: &RunReport) {
        let (mark, headline) = match &report.ending {
            Ending::Answered => (self.paint("32", "✓"), "done".to_owned()),
            Ending::MaxTurns => (
                self.paint("31", "✗"),
                format!(
                    "stopped after {} turns without an answer (raise --max-turns)",
                    report.turns
                ),
            ),
            Ending::TooManyViolations(detail) => (
                self.paint("31", "✗"),
                format!("stopped: {}", escape_for_terminal(detail)),
            ),
            Ending::Cancelled => (self.paint("33", "■"), "cancelled".to_owned()),
            Ending::ClientFailed(detail) => (
                self.paint("31", "✗"),
                format!("stopped: {}", escape_for_terminal(detail)),
            ),
            Ending::EmptyReply(reason) => (
                self.paint("31", "✗"),
                format!(
                    "stopped: the model sent an empty reply (finish_reason {}); try again, or another model",
                    escape_for_terminal(reason)
                ),
            ),
            // A sub-agent's endings: its task's outcome line says them in a run.
            Ending::Completed => (self.paint("32", "✓"), "completed".to_owned()),
            Ending::Incomplete(detail) => (
                self.paint("33", "■"),
                format!("incomplete: {}", escape_for_terminal(detail)),
            ),
        };
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
                " · {} tokens in, {} out",
                report.usage.prompt_tokens, report.usage.completion_tokens
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
}

impl RunObserver for Terminal {
    fn on_event(&mut self, event: &RunEvent) {
        match event {
            RunEvent::Request { .. } => self.streamed = false,
            RunEvent::TextDelta { text } => {
                self.streamed = true;
                self.show_text(text);
            }
            RunEvent::Retrying {
                attempt,
                delay_ms,
                reason,
            } => {
                self.end_text();
                eprintln!(
                    "{}",
                    self.paint(
                        "33",
                        &format!(
                            "  ↻ {} · retry {attempt} in {}",
                            escape_for_terminal(reason),
                            human_duration(*delay_ms)
                        )
                    )
                );
                self.streamed = false;
            }
            RunEvent::Reply { text, .. } => {
                if !self.streamed {
                    self.show_text(text);
                }
                self.end_text();
            }
            RunEvent::CallStarted {
                id,
                tool,
                subject,
                runs_program,
                ..
            } => {
                eprintln!("{}", start_line(self.color, *tool, subject));
                self.last_started = id.clone();
                self.running
                    .insert(id.clone(), format!("{tool} ({subject})"));
                if *runs_program {
                    self.spinner.start(subject);
                }
            }
            RunEvent::CallFinished {
                id,
                ok,
                summary,
                advice,
                ..
            } => {
                self.spinner.stop();
                let summary = if *ok {
                    summary.clone()
                } else {
                    self.paint("31", summary)
                };
                // Calls running at once finish in any order: an outcome that does not follow
                // its own call's line names the call.
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
            RunEvent::Violation {
                code,
                message,
                consecutive,
                ..
            } => {
                eprintln!(
                    "{} {}",
                    self.paint("31", "✗"),
                    escape_for_terminal(&format!(
                        "invalid reply ({code}, {consecutive} in a row): {message}"
                    ))
                );
            }
            RunEvent::Warning { message } => {
                eprintln!(
                    "{}",
                    self.paint(
                        "33",
                        &format!("  warning: {}", escape_for_terminal(message))
                    )
                );
            }
            RunEvent::Finished(report) => {
                self.end_text();
                self.finished(report);
            }
            RunEvent::Child(child) => self.child_event(child),
        }
    }
}

impl Terminal {
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
            _ => return,
        };
        self.end_text();
        eprintln!("{line}");
        // The task's outcome no longer follows its own line: it names its call.
        self.last_started = None;
    }
}
