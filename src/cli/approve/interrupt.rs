//! Ctrl-C while the approval question waits (PROTOCOL.md §10 (Running calls), "Ctrl-C at the
//! question"): the question is cancelled as a refusal, and the command stops.
//!
//! A signal handler only writes a byte to a socket pair; the question waits on the terminal and
//! on that socket at once (`poll`), so a Ctrl-C that arrives at any moment, also just before the
//! wait begins, ends the wait. SIGTERM, SIGHUP and SIGQUIT wake it the same way. Every door also
//! has its own handler (`cli/signals.rs`), which stops it: outside a question that is all a
//! signal does.

use std::fs::File;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use rustix::event::{PollFd, PollFlags, poll};
use rustix::io::Errno;

/// What ended the wait.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Waited {
    /// The terminal has a line to read (or its end).
    Line,
    /// Ctrl-C.
    Interrupted,
}

/// The socket the handler writes to, and for `exec` the flag that keeps Ctrl-C's default action
/// outside a question.
struct Interrupts {
    woken: UnixStream,
    outside_question: Option<Arc<AtomicBool>>,
}

static INTERRUPTS: OnceLock<Option<Interrupts>> = OnceLock::new();

/// Set once a question was cancelled by Ctrl-C.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Makes Ctrl-C cancel a question from now on; the first call in a process decides.
/// `default_outside_questions`: Ctrl-C keeps its default action (the process ends) while no
/// question waits, for a command that has no handler of its own (`exec`). Where the handler
/// cannot be installed, a question waits for its answer as it always did.
pub(crate) fn install(default_outside_questions: bool) {
    INTERRUPTS.get_or_init(|| {
        let (woken, wake) = UnixStream::pair().ok()?;
        woken.set_nonblocking(true).ok()?;
        let outside_question = if default_outside_questions {
            let flag = Arc::new(AtomicBool::new(true));
            signal_hook::flag::register_conditional_default(
                signal_hook::consts::SIGINT,
                Arc::clone(&flag),
            )
            .ok()?;
            Some(flag)
        } else {
            None
        };
        // SIGTERM, SIGHUP and SIGQUIT stop flycode too (`cli/signals.rs`): a question they
        // find waiting is cancelled the same way, rather than left waiting for its answer.
        for signal in [
            signal_hook::consts::SIGTERM,
            signal_hook::consts::SIGHUP,
            signal_hook::consts::SIGQUIT,
        ] {
            signal_hook::low_level::pipe::register(signal, wake.try_clone().ok()?).ok()?;
        }
        signal_hook::low_level::pipe::register(signal_hook::consts::SIGINT, wake).ok()?;
        Some(Interrupts {
            woken,
            outside_question,
        })
    });
}

/// Whether Ctrl-C cancelled a question in this process.
pub(crate) fn was_interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// A question on the terminal, from before its prompt is written until its answer is read: in
/// `exec`, Ctrl-C meanwhile cancels the question instead of ending flycode.
pub(super) struct OpenQuestion {
    interrupts: Option<&'static Interrupts>,
}

impl OpenQuestion {
    /// Opens a question (before its prompt is written, so a Ctrl-C at the prompt's first sight
    /// is already the question's).
    pub(super) fn open() -> OpenQuestion {
        install(false);
        let interrupts = INTERRUPTS.get().and_then(Option::as_ref);
        if let Some(flag) = interrupts.and_then(|i| i.outside_question.as_ref()) {
            flag.store(false, Ordering::SeqCst);
        }
        OpenQuestion { interrupts }
    }

    /// Waits until `tty` has a line to read or Ctrl-C is pressed. A Ctrl-C pressed since the
    /// last question (in `watch` or `run`, which then stop) cancels this one at once: the person
    /// asked to stop. So does a stop signal `exec` received before its question (which installs
    /// the pipe only when it asks). Without [`install`], or where the terminal cannot be polled,
    /// it returns [`Waited::Line`] at once and the read waits as it always did.
    pub(super) fn wait_for_line(&self, tty: &File) -> Waited {
        let Some(interrupts) = self.interrupts else {
            return Waited::Line;
        };
        let waited = loop {
            if crate::cli::signals::stop_signal_arrived() {
                break Waited::Interrupted;
            }
            let mut fds = [
                PollFd::new(tty, PollFlags::IN),
                PollFd::new(&interrupts.woken, PollFlags::IN),
            ];
            match poll(&mut fds, None) {
                Ok(_) if !fds[1].revents().is_empty() => break Waited::Interrupted,
                Ok(_) if !fds[0].revents().is_empty() => break Waited::Line,
                Ok(_) | Err(Errno::INTR) => {}
                Err(_) => break Waited::Line,
            }
        };
        if waited == Waited::Interrupted {
            INTERRUPTED.store(true, Ordering::SeqCst);
        }
        waited
    }
}

impl Drop for OpenQuestion {
    fn drop(&mut self) {
        if let Some(flag) = self.interrupts.and_then(|i| i.outside_question.as_ref()) {
            flag.store(true, Ordering::SeqCst);
        }
    }
}
