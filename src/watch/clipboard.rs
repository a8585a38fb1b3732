//! The clipboard mode: a copied reply with a call is answered by putting its result block on the
//! clipboard, ready to paste back.
//!
//! The clipboard is read every interval, and only a hash is compared, so unchanged text is never
//! parsed again and an idle watcher costs next to nothing. The text flycode wrote itself is
//! recognised by its hash and ignored (and, holding a result block, would be ignored anyway).
//!
//! The reply limit (`max_reply_bytes`) is checked by the handler before parsing. The clipboard
//! library hands over the whole text, so a huge copy still costs its own size once; the check
//! keeps the parse (up to 8 times that size) from happening.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use thiserror::Error;

use super::handler::{Handled, Handler};

/// Why no clipboard could be opened: the cause in words a person can act on.
#[derive(Debug, Error)]
pub(crate) enum ClipboardUnavailable {
    /// There is no display to hold a clipboard (SSH, containers, CI).
    #[error("no display ({reason})")]
    NoDisplay {
        /// What is missing, e.g. "DISPLAY is not set".
        reason: String,
    },
    /// A display is named, but its clipboard could not be reached.
    #[error("cannot reach the clipboard of display {display} ({reason})")]
    Unreachable {
        /// The display named by `DISPLAY` (or the platform's).
        display: String,
        /// What the platform said.
        reason: String,
    },
}

/// Why a result could not be put on the clipboard (another program may hold it, or the display
/// went away).
#[derive(Debug, Error)]
#[error("{reason}")]
pub(crate) struct ClipboardWriteError {
    /// What the platform said.
    pub reason: String,
}

/// Whether this platform's clipboard lives on an X11 display named by `DISPLAY` (Linux and the
/// other Unix desktops; not macOS or Windows, whose clipboards need no display variable).
const CLIPBOARD_NEEDS_X11: bool = cfg!(all(unix, not(target_os = "macos")));

/// The display the clipboard would be on, or why there is none. Looked at before the clipboard
/// is opened, so a machine without a display gets that cause named (the X11 library would say
/// "connection timed out").
pub(crate) fn display() -> Result<String, ClipboardUnavailable> {
    if !CLIPBOARD_NEEDS_X11 {
        return Ok("the system clipboard".to_owned());
    }
    let set = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty());
    match (set("DISPLAY"), set("WAYLAND_DISPLAY")) {
        (Some(display), _) => Ok(display.to_string_lossy().into_owned()),
        (None, Some(_)) => Err(ClipboardUnavailable::NoDisplay {
            reason: "WAYLAND_DISPLAY is set but DISPLAY is not: flycode reaches the clipboard through X11, so it needs XWayland".to_owned(),
        }),
        (None, None) => Err(ClipboardUnavailable::NoDisplay {
            reason: "DISPLAY is not set".to_owned(),
        }),
    }
}

/// Where replies are read from and results written to.
pub(crate) trait Clipboard {
    /// The clipboard's text, if it holds text.
    fn read(&mut self) -> Option<String>;
    /// Replaces the clipboard's content.
    fn write(&mut self, text: &str) -> Result<(), ClipboardWriteError>;
}

/// The system clipboard (X11 on Linux, the native one on macOS and Windows).
pub(crate) struct SystemClipboard(arboard::Clipboard);

impl SystemClipboard {
    /// Opens the system clipboard.
    pub(crate) fn open() -> Result<SystemClipboard, ClipboardUnavailable> {
        let display = display()?;
        arboard::Clipboard::new().map(SystemClipboard).map_err(|e| {
            ClipboardUnavailable::Unreachable {
                display,
                reason: e.to_string(),
            }
        })
    }

    /// Puts `text` on the clipboard and keeps serving it until another program replaces it
    /// (an X11 clipboard's content lives only as long as the program that owns it), or until
    /// the clipboard can no longer be read (its display went away): the clipboard is looked at
    /// every second, and two looks in a row that do not find `text` end the hold. Without that,
    /// a holder whose X server ended (a logout, a test's Xvfb) would wait forever.
    pub(crate) fn hold_until_replaced(self, text: &str) -> Result<(), ClipboardUnavailable> {
        let unreachable = |e: arboard::Error| ClipboardUnavailable::Unreachable {
            display: display().unwrap_or_default(),
            reason: e.to_string(),
        };
        let mut watcher = arboard::Clipboard::new().map_err(unreachable)?;
        let (done_out, done) = mpsc::channel();
        let held = text.to_owned();
        let mut clipboard = self.0;
        // The waiting set runs on its own thread: this one watches, and returning from here
        // ends the process, that thread with it.
        std::thread::spawn(move || {
            let set = clipboard.set();
            #[cfg(all(unix, not(target_os = "macos")))]
            let set = {
                use arboard::SetExtLinux;
                set.wait()
            };
            let _ = done_out.send(set.text(held));
        });
        let mut misses = 0;
        loop {
            match done.recv_timeout(Duration::from_secs(1)) {
                Ok(set) => return set.map_err(unreachable),
                Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            if watcher.get_text().ok().as_deref() == Some(text) {
                misses = 0;
            } else {
                misses += 1;
                if misses >= 2 {
                    return Ok(());
                }
            }
        }
    }
}

impl Clipboard for SystemClipboard {
    fn read(&mut self) -> Option<String> {
        self.0.get_text().ok()
    }

    fn write(&mut self, text: &str) -> Result<(), ClipboardWriteError> {
        self.0
            .set_text(text.to_owned())
            .map_err(|e| ClipboardWriteError {
                reason: e.to_string(),
            })
    }
}

/// The hidden command that keeps a text on an X11 clipboard after flycode exits.
pub(crate) const HOLD_CLIPBOARD_COMMAND: &str = "hold-clipboard";

/// Puts `text` on the clipboard so that it stays there after flycode exits (`prompt --copy`, and
/// `watch`'s last result when it stops). An X11 clipboard lives only as long as the program
/// that owns it, so a detached `flycode hold-clipboard` keeps serving it (as xclip does) until
/// another program copies something. Where this process owns the clipboard, it must let go
/// first (drop its [`SystemClipboard`]): its own copy of `text` would pass for the holder's.
pub(crate) fn keep_on_clipboard(text: &str) -> Result<(), ClipboardUnavailable> {
    let display = display()?;
    if !cfg!(all(unix, not(target_os = "macos"))) {
        return SystemClipboard::open()?.write(text).map_err(|error| {
            ClipboardUnavailable::Unreachable {
                display,
                reason: error.reason,
            }
        });
    }
    // Fail early, with the real cause, where the display cannot be reached.
    let mut clipboard = SystemClipboard::open()?;
    let unreachable = |reason: String| ClipboardUnavailable::Unreachable {
        display: display.clone(),
        reason,
    };
    let mut holder = crate::sandbox::host::spawn_detached_self(HOLD_CLIPBOARD_COMMAND)
        .map_err(|e| unreachable(e.to_string()))?;
    if let Some(mut input) = holder.stdin.take() {
        input
            .write_all(text.as_bytes())
            .map_err(|e| unreachable(e.to_string()))?;
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if clipboard.read().as_deref() == Some(text) {
            return Ok(());
        }
        if let Ok(Some(status)) = holder.try_wait() {
            return Err(unreachable(format!(
                "the process keeping the text on the clipboard ended ({status})"
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = holder.kill();
    Err(unreachable(
        "the text did not appear on the clipboard within 10 s".to_owned(),
    ))
}

fn fingerprint(text: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}

/// Watches `clipboard` every `interval` until `shutdown` is set; `ready` hears once that the
/// text on the clipboard at start was seen (what is copied after it is answered), `report` of
/// every answer (and of a result that could not be put on the clipboard) and every notice.
///
/// Calls are handled on a worker thread, in the order they were copied, so a call waiting for
/// the person's approval does not stop new copies from being noticed; a later copy of the same
/// call is answered from the replay store once the first is decided, without asking again.
pub(crate) fn run_clipboard(
    clipboard: &mut dyn Clipboard,
    interval: Duration,
    handler: &mut Handler<'_>,
    shutdown: &AtomicBool,
    ready: &mut dyn FnMut(),
    report: &mut dyn FnMut(&Handled),
) {
    let (texts, incoming) = mpsc::channel::<String>();
    let (answers_out, answers) = mpsc::channel::<Handled>();
    std::thread::scope(|scope| {
        scope.spawn(move || {
            for text in incoming {
                let handled = handler.handle(&text);
                if handled != Handled::Ignored && answers_out.send(handled).is_err() {
                    break;
                }
            }
        });
        let mut deliver =
            |clipboard: &mut dyn Clipboard, mut handled: Handled, last_seen: &mut Option<u64>| {
                if let Handled::Answered(answer) = &mut handled {
                    match clipboard.write(&answer.block) {
                        // flycode's own write must not come back as a new copy.
                        Ok(()) => *last_seen = Some(fingerprint(&answer.block)),
                        Err(error) => {
                            answer.store_error =
                                Some(format!("cannot put the result on the clipboard: {error}"));
                        }
                    }
                }
                report(&handled);
            };
        // What is on the clipboard at start was copied before flycode was asked to act: leave it.
        let mut last_seen = clipboard.read().map(|text| fingerprint(&text));
        ready();
        while !shutdown.load(Ordering::SeqCst) {
            // Wait for the interval, but deliver an answer the moment it is ready.
            match answers.recv_timeout(interval) {
                Ok(handled) => {
                    deliver(clipboard, handled, &mut last_seen);
                    while let Ok(handled) = answers.try_recv() {
                        deliver(clipboard, handled, &mut last_seen);
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
            let Some(text) = clipboard.read() else {
                continue;
            };
            let seen = fingerprint(&text);
            if last_seen == Some(seen) {
                continue;
            }
            last_seen = Some(seen);
            if texts.send(text).is_err() {
                break;
            }
        }
        // Let the worker finish what it holds (a running call completes), then hand it back.
        drop(texts);
        for handled in answers {
            deliver(clipboard, handled, &mut last_seen);
        }
    });
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // fixtures are made directly, outside the sandbox
mod tests {
    use std::collections::VecDeque;

    use super::*;
    use crate::sandbox::{Roots, Sandbox};
    use crate::tools::executor::{Approval, Executor, FixedApprover};
    use crate::tools::policy::Policy;
    use crate::watch::ReplayStore;

    /// A clipboard that plays a script of copies, then stops the loop. It moves to the next copy
    /// only once every call it handed out has been answered, so the script is deterministic.
    struct Scripted<'a> {
        copies: VecDeque<String>,
        current: String,
        written: Vec<String>,
        calls_given: usize,
        reads: &'a std::sync::atomic::AtomicUsize,
        shutdown: &'a AtomicBool,
    }

    impl Clipboard for Scripted<'_> {
        fn read(&mut self) -> Option<String> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            if self.written.len() < self.calls_given {
                return Some(self.current.clone());
            }
            if let Some(next) = self.copies.pop_front() {
                if next.contains("```flycode-call") {
                    self.calls_given += 1;
                }
                self.current = next;
            } else {
                self.shutdown.store(true, Ordering::SeqCst);
            }
            Some(self.current.clone())
        }

        fn write(&mut self, text: &str) -> Result<(), ClipboardWriteError> {
            self.current = text.to_owned();
            self.written.push(text.to_owned());
            Ok(())
        }
    }

    #[test]
    fn each_new_copy_is_answered_and_own_writes_are_not() {
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap();
        std::fs::write(root.join("a.txt"), "hello").unwrap();
        let sandbox = Sandbox::open(&Roots::resolve(std::slice::from_ref(&root)).unwrap()).unwrap();
        let policy = Policy::default();
        let approver = FixedApprover(Approval::Yes);
        let mut handler = Handler {
            executor: Executor::new(&sandbox, &policy, &approver),
            replay: ReplayStore::in_memory(),
            lenient: false,
            tools: crate::protocol::ToolSet::Seed,
            policy_key: String::new(),
            max_reply_bytes: 16 << 20,
            on_start: None,
            dialect: crate::protocol::dialect::Dialect::Flycode,
            failed_last: Vec::new(),
        };
        let reply = format!(
            "```flycode-call\n{{\"id\":\"c1\",\"tool\":\"fs.write\",\"args\":{{\"path\":\"{}/log.txt\",\"mode\":\"append\",\"content\":\"x\\n\"}}}}\n```",
            root.display()
        );
        let shutdown = AtomicBool::new(false);
        let reads = std::sync::atomic::AtomicUsize::new(0);
        let mut clipboard = Scripted {
            copies: ["before start", &reply, &reply, "prose", &reply]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            current: String::new(),
            written: Vec::new(),
            calls_given: 0,
            reads: &reads,
            shutdown: &shutdown,
        };
        let mut answers = 0;
        run_clipboard(
            &mut clipboard,
            Duration::from_millis(0),
            &mut handler,
            &shutdown,
            &mut || {},
            &mut |_| answers += 1,
        );
        // Every copy of the reply is answered (the result replaced it on the clipboard, so the
        // next copy is new), but only the first ran; prose and the text at start earn nothing.
        assert_eq!(answers, 3);
        assert!(clipboard.written[0].contains("[ok] true"));
        assert_eq!(
            std::fs::read_to_string(root.join("log.txt")).unwrap(),
            "x\n"
        );
        assert!(!clipboard.written[0].contains("[replayed]"));
        assert!(clipboard.written[1].contains("[replayed] true"));
        assert!(clipboard.written[2].contains("[replayed] true"));
    }

    #[test]
    fn a_copy_over_the_limit_is_answered_too_large_and_a_large_prose_copy_is_left_alone() {
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap();
        let sandbox = Sandbox::open(&Roots::resolve(std::slice::from_ref(&root)).unwrap()).unwrap();
        let policy = Policy::default();
        let approver = FixedApprover(Approval::Yes);
        let mut handler = Handler {
            executor: Executor::new(&sandbox, &policy, &approver),
            replay: ReplayStore::in_memory(),
            lenient: false,
            tools: crate::protocol::ToolSet::Seed,
            policy_key: String::new(),
            max_reply_bytes: 1024,
            on_start: None,
            dialect: crate::protocol::dialect::Dialect::Flycode,
            failed_last: Vec::new(),
        };
        let big_call = format!(
            "```flycode-call\n{{\"id\":\"c1\",\"tool\":\"fs.read\",\"args\":{{\"path\":\"{}/a.txt\"}}}}\n```\n{}",
            root.display(),
            " ".repeat(2000)
        );
        let big_prose = "a log line\n".repeat(300);
        let shutdown = AtomicBool::new(false);
        let reads = std::sync::atomic::AtomicUsize::new(0);
        let mut clipboard = Scripted {
            copies: ["start", &big_prose, &big_call]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            current: String::new(),
            written: Vec::new(),
            calls_given: 0,
            reads: &reads,
            shutdown: &shutdown,
        };
        let mut codes = Vec::new();
        run_clipboard(
            &mut clipboard,
            Duration::from_millis(0),
            &mut handler,
            &shutdown,
            &mut || {},
            &mut |handled| {
                if let Handled::Answered(answer) = handled {
                    codes.push(answer.code.clone());
                }
            },
        );
        assert_eq!(codes, [Some("too_large".to_owned())]);
        assert_eq!(clipboard.written.len(), 1, "the prose copy was replaced");
        assert!(
            clipboard.written[0].contains("[code] too_large"),
            "{}",
            clipboard.written[0]
        );
    }

    /// Approves only after the clipboard was read `after` more times: it can only say yes if the
    /// poller kept looking at the clipboard while the call waited.
    struct Patient<'a> {
        reads: &'a std::sync::atomic::AtomicUsize,
        after: usize,
    }

    impl crate::tools::executor::Approver for Patient<'_> {
        fn approve(&self, _shown: &str, _reason: &str) -> Approval {
            let target = self.reads.load(Ordering::SeqCst) + self.after;
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            while std::time::Instant::now() < deadline {
                if self.reads.load(Ordering::SeqCst) >= target {
                    return Approval::Yes;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Approval::No
        }
    }

    #[test]
    fn a_call_waiting_for_approval_does_not_stop_the_watching() {
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap();
        std::fs::write(root.join("gone.txt"), "x").unwrap();
        let sandbox = Sandbox::open(&Roots::resolve(std::slice::from_ref(&root)).unwrap()).unwrap();
        let policy = Policy::default();
        let reads = std::sync::atomic::AtomicUsize::new(0);
        let approver = Patient {
            reads: &reads,
            after: 25,
        };
        let mut handler = Handler {
            executor: Executor::new(&sandbox, &policy, &approver),
            replay: ReplayStore::in_memory(),
            lenient: false,
            tools: crate::protocol::ToolSet::Seed,
            policy_key: String::new(),
            max_reply_bytes: 16 << 20,
            on_start: None,
            dialect: crate::protocol::dialect::Dialect::Flycode,
            failed_last: Vec::new(),
        };
        // fs.rm asks under the default policy.
        let reply = format!(
            "```flycode-call\n{{\"id\":\"r1\",\"tool\":\"fs.rm\",\"args\":{{\"path\":\"{}/gone.txt\"}}}}\n```",
            root.display()
        );
        let shutdown = AtomicBool::new(false);
        let mut clipboard = Scripted {
            copies: ["start", &reply].iter().map(|s| s.to_string()).collect(),
            current: String::new(),
            written: Vec::new(),
            calls_given: 0,
            reads: &reads,
            shutdown: &shutdown,
        };
        run_clipboard(
            &mut clipboard,
            Duration::from_millis(0),
            &mut handler,
            &shutdown,
            &mut || {},
            &mut |_| {},
        );
        assert!(
            clipboard.written[0].contains("[ok] true"),
            "{}",
            clipboard.written[0]
        );
        assert!(!root.join("gone.txt").exists());
    }
}
