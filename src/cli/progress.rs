//! What the terminal shows while a call runs, shared by `run` and `watch`: the call's start line
//! (`● fs.read (README.md)`), a spinner while a program runs (only on a terminal), and an
//! approver that stops the spinner while the person is asked.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::agent::summary::{human_duration, invocation_subject};
use crate::protocol::{Call, ToolName};
use crate::tools::executor::{Approval, Approver, Question};
use crate::tools::registry::Invocation;
use crate::tools::secrets::Secrets;

/// `text` in the ANSI colour `code` when `color`, else as it is.
pub(crate) fn paint(color: bool, code: &str, text: &str) -> String {
    if color {
        format!("\u{1b}[{code}m{text}\u{1b}[0m")
    } else {
        text.to_owned()
    }
}

/// A call's start line: `● fs.read (README.md)`.
pub(crate) fn start_line(color: bool, tool: ToolName, subject: &str) -> String {
    format!("{} {tool} ({subject})", paint(color, "36", "●"))
}

/// What a call's start line shows, read from the call by its tool.
pub(crate) struct CallStart {
    /// The tool.
    pub tool: ToolName,
    /// Its main argument, short, masked and safe for the terminal.
    pub subject: String,
    /// It runs a program (a spinner shows while it runs).
    pub runs_program: bool,
}

impl CallStart {
    /// The start of `call`, its subject relative to `roots`.
    pub(crate) fn of(call: &Call, roots: &[std::path::PathBuf], secrets: &Secrets) -> CallStart {
        let invocation = Invocation::new(call).ok();
        CallStart {
            tool: call.tool,
            subject: invocation
                .as_ref()
                .map(|invocation| invocation_subject(invocation, roots, secrets))
                .unwrap_or_default(),
            runs_program: invocation
                .as_ref()
                .is_some_and(|invocation| invocation.effects().program.is_some()),
        }
    }
}

/// A spinner on standard error while a program runs; paused while the person is asked.
#[derive(Clone)]
pub(crate) struct Spinner {
    enabled: bool,
    state: Arc<SpinnerState>,
}

#[derive(Default)]
struct SpinnerState {
    running: AtomicBool,
    paused: AtomicBool,
    thread: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Spinner {
    /// A spinner that shows only when `enabled` (standard error is a terminal).
    pub(crate) fn new(enabled: bool) -> Spinner {
        Spinner {
            enabled,
            state: Arc::new(SpinnerState::default()),
        }
    }

    /// Whether it shows (standard error is a terminal).
    pub(crate) fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// Shows the spinner with `label` (after a moment: quick programs show none).
    pub(crate) fn start(&self, label: &str) {
        if !self.enabled {
            return;
        }
        self.stop();
        self.state.running.store(true, Ordering::SeqCst);
        let state = Arc::clone(&self.state);
        let label = label.to_owned();
        let handle = std::thread::spawn(move || {
            const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
            let started = Instant::now();
            let mut frame = 0;
            // Quick programs finish before the first frame: no flicker.
            std::thread::sleep(Duration::from_millis(300));
            while state.running.load(Ordering::SeqCst) {
                if !state.paused.load(Ordering::SeqCst) {
                    let elapsed = human_duration(
                        u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                    );
                    let mut err = std::io::stderr().lock();
                    let _ = write!(err, "\r\u{1b}[2K  {} {label} · {elapsed}", FRAMES[frame]);
                    let _ = err.flush();
                    frame = (frame + 1) % FRAMES.len();
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        if let Ok(mut slot) = self.state.thread.lock() {
            *slot = Some(handle);
        }
    }

    /// Stops the spinner and clears its line.
    pub(crate) fn stop(&self) {
        self.state.running.store(false, Ordering::SeqCst);
        let handle = self
            .state
            .thread
            .lock()
            .ok()
            .and_then(|mut slot| slot.take());
        if let Some(handle) = handle {
            let _ = handle.join();
            self.clear_line();
        }
    }

    fn pause(&self, paused: bool) {
        self.state.paused.store(paused, Ordering::SeqCst);
        if paused {
            self.clear_line();
        }
    }

    fn clear_line(&self) {
        if self.enabled {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\u{1b}[2K");
            let _ = err.flush();
        }
    }
}

/// Stops the spinner while the person reads the approval question.
pub(crate) struct PausingApprover<'a> {
    /// The approver that asks.
    pub inner: &'a dyn Approver,
    /// The spinner to pause.
    pub spinner: Spinner,
    /// Raised while a question waits for the person (the browser companion's cards show it).
    pub asking: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

impl PausingApprover<'_> {
    fn waiting<T>(&self, ask: impl FnOnce() -> T) -> T {
        use std::sync::atomic::Ordering;
        self.spinner.pause(true);
        if let Some(asking) = &self.asking {
            asking.store(true, Ordering::SeqCst);
        }
        let answer = ask();
        if let Some(asking) = &self.asking {
            asking.store(false, Ordering::SeqCst);
        }
        self.spinner.pause(false);
        answer
    }
}

impl Approver for PausingApprover<'_> {
    fn approve(&self, shown: &str, reason: &str) -> Approval {
        self.waiting(|| self.inner.approve(shown, reason))
    }

    fn approve_in_person(&self, shown: &str, reason: &str) -> Approval {
        self.waiting(|| self.inner.approve_in_person(shown, reason))
    }

    fn ask(&self, question: &Question) -> Approval {
        self.waiting(|| self.inner.ask(question))
    }
}
