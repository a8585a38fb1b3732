//! Asking the person on the terminal before a call runs (PROTOCOL.md §10 (Running calls)): the
//! question (the call as it will run, the diff a write would make, why it asks), the answers
//! given for the rest of the session (kept in memory only), and Ctrl-C at the question.

mod interrupt;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::sync::Mutex;

pub(crate) use self::interrupt::was_interrupted;
use self::interrupt::{OpenQuestion, Waited};
use crate::protocol::ToolName;
use crate::protocol::display::{escape_for_display, escape_lines_for_display};
use crate::tools::executor::{Approval, Approver, Question, Remembered};

/// How many calls the command asks about: `exec` one, `watch` and `run` a session of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Asking {
    /// `exec`: one call, so no answer for the rest of the session is offered.
    OneCall,
    /// `watch`, `run`: answers for the rest of the session are offered; the command's own
    /// Ctrl-C handler stops it.
    Session,
}

/// The approver for a command: `--yes` answers for the person (but for the calls only a person
/// may allow), otherwise the terminal asks. Ctrl-C cancels a question from here on.
pub(crate) fn approver(yes: bool, asking: Asking) -> Box<dyn Approver> {
    // Every door has its own handler now (`cli/signals.rs`): Ctrl-C outside a question is its.
    // `watch` and `run` wake their next question with a Ctrl-C pressed before it (they stop);
    // `exec` asks at most once, and installs this when it does (a socket pair and four handlers
    // less in the start of a call that asks nothing, issue 41).
    if asking == Asking::Session {
        interrupt::install(false);
    }
    let terminal = TerminalApprover::new(asking);
    if yes {
        Box::new(YesApprover { terminal })
    } else {
        Box::new(terminal)
    }
}

/// What the question offers beyond yes and no: the answers for the rest of the session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SessionOffer {
    /// The tool the call is judged as (what `t` allows).
    pub judged_as: ToolName,
    /// The tool the call names, when it differs (a `process.run` of a shell).
    pub named: ToolName,
}

/// The question put to the person: the call exactly as it will run, laid out in lines (see
/// [`show_whole_call`](crate::tools::executor::show_whole_call)), what it would change in files
/// (`preview`), why it needs a yes, and, where `offer` says so, the answers for the rest of the
/// session. The line breaks of `shown` and `preview` stay line breaks; within each line every
/// control, bidirectional and invisible character is escaped, tabs and carriage returns included
/// ([`escape_lines_for_display`]). `reason` is one line: all of it is escaped.
pub(crate) fn approval_question(
    shown: &str,
    reason: &str,
    preview: Option<&str>,
    offer: Option<SessionOffer>,
) -> String {
    let mut question = String::from("\nflycode wants to run:\n");
    push_indented(&mut question, shown);
    if let Some(preview) = preview {
        question.push_str("It would change:\n");
        push_indented(&mut question, preview);
    }
    question.push_str(&format!("({})\n", escape_for_display(reason)));
    match offer {
        None => question.push_str("Run it? [y/N] "),
        Some(offer) => {
            let program = matches!(offer.judged_as, ToolName::ShellExec | ToolName::ProcessRun);
            let exact = if program { "command" } else { "call" };
            let counted = if offer.named == offer.judged_as {
                String::new()
            } else {
                format!(" (a {} of a shell counts as one)", offer.named)
            };
            question.push_str(&format!(
                "  y = yes · n or Enter = no · Ctrl-C = no, and stop flycode\n  c = yes, and to this exact {exact} again until flycode stops\n  t = yes, and to every {} call{counted} until flycode stops\nRun it? [y/N/c/t] ",
                offer.judged_as
            ));
        }
    }
    question
}

/// Each line of `text`, escaped and indented by two spaces.
fn push_indented(question: &mut String, text: &str) {
    for line in escape_lines_for_display(text).split('\n') {
        question.push_str("  ");
        question.push_str(line);
        question.push('\n');
    }
}

/// `--yes`: answers yes, except for the calls only a person may allow (a change to the
/// instruction files, a dangerous environment), which still go to the terminal.
pub(crate) struct YesApprover {
    terminal: TerminalApprover,
}

impl Approver for YesApprover {
    fn approve(&self, _shown: &str, _reason: &str) -> Approval {
        Approval::Assumed
    }

    fn approve_in_person(&self, shown: &str, reason: &str) -> Approval {
        self.terminal.approve_in_person(shown, reason)
    }

    fn ask(&self, question: &Question) -> Approval {
        if question.in_person {
            self.terminal.ask(question)
        } else {
            Approval::Assumed
        }
    }
}

/// What the person allowed for the rest of this process: never written anywhere, never
/// consulted for a call only a person may allow.
#[derive(Debug, Default)]
struct Allowed {
    /// Every call judged as one of these tools.
    tools: BTreeSet<ToolName>,
    /// These exact calls: the tool judged and the call as shown.
    calls: BTreeSet<(ToolName, String)>,
}

/// Asks on the controlling terminal (never standard input, which may carry the reply).
pub(crate) struct TerminalApprover {
    /// The answers for the rest of the session, where they are offered.
    allowed: Option<Mutex<Allowed>>,
}

/// A line read from the terminal, or why none was.
enum Reply {
    Line(String),
    Interrupted,
    Unavailable,
}

impl TerminalApprover {
    /// An approver that asks on the terminal.
    pub(crate) fn new(asking: Asking) -> TerminalApprover {
        TerminalApprover {
            allowed: (asking == Asking::Session).then(Mutex::default),
        }
    }

    /// Puts `prompt` on the terminal and reads the answer.
    fn put(&self, prompt: &str) -> Reply {
        let question = OpenQuestion::open();
        let Ok(tty) = crate::sandbox::host::open_terminal() else {
            return Reply::Unavailable;
        };
        let Ok(mut writer) = tty.try_clone() else {
            return Reply::Unavailable;
        };
        if writer
            .write_all(prompt.as_bytes())
            .and_then(|()| writer.flush())
            .is_err()
        {
            return Reply::Unavailable;
        }
        if question.wait_for_line(&tty) == Waited::Interrupted {
            // The terminal echoed `^C` after the prompt.
            let _ = writer.write_all(b"\nflycode: Ctrl-C: not run, stopping\n");
            return Reply::Interrupted;
        }
        let mut answer = String::new();
        if BufReader::new(tty).read_line(&mut answer).is_err() {
            return Reply::Unavailable;
        }
        Reply::Line(answer.trim().to_ascii_lowercase())
    }

    /// Asks, without answers for the session.
    fn ask_once(&self, prompt: &str) -> Approval {
        match self.put(prompt) {
            Reply::Line(answer) if is_yes(&answer) => Approval::Yes,
            Reply::Line(_) => Approval::No,
            Reply::Interrupted => Approval::Interrupted,
            Reply::Unavailable => Approval::Unavailable,
        }
    }
}

fn is_yes(answer: &str) -> bool {
    matches!(answer, "y" | "yes")
}

impl Approver for TerminalApprover {
    fn approve(&self, shown: &str, reason: &str) -> Approval {
        self.ask_once(&approval_question(shown, reason, None, None))
    }

    fn ask(&self, question: &Question) -> Approval {
        // Masked already (PROTOCOL.md §9 (Secrets and masking)).
        let (shown, reason) = (&question.shown, &question.reason);
        let preview = question.preview.as_ref().map(|preview| preview.text());
        let preview = preview.as_deref();
        let Some(allowed) = self.allowed.as_ref().filter(|_| !question.in_person) else {
            return self.ask_once(&approval_question(shown, reason, preview, None));
        };
        let key = (question.judged_as, question.identity.clone());
        {
            let allowed = lock(allowed);
            if allowed.tools.contains(&question.judged_as) {
                return Approval::Remembered(Remembered::Tool);
            }
            if allowed.calls.contains(&key) {
                return Approval::Remembered(Remembered::Command);
            }
        }
        let offer = SessionOffer {
            judged_as: question.judged_as,
            named: question.tool,
        };
        let prompt = approval_question(shown, reason, preview, Some(offer));
        match self.put(&prompt) {
            Reply::Line(answer) if is_yes(&answer) => Approval::Yes,
            Reply::Line(answer) if answer == "c" => {
                lock(allowed).calls.insert(key);
                Approval::Yes
            }
            Reply::Line(answer) if answer == "t" => {
                lock(allowed).tools.insert(question.judged_as);
                Approval::Yes
            }
            Reply::Line(_) => Approval::No,
            Reply::Interrupted => Approval::Interrupted,
            Reply::Unavailable => Approval::Unavailable,
        }
    }
}

/// The lock's data, also after a thread panicked while holding it (a set stays a set).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_question_keeps_the_lines_of_the_call_and_escapes_within_them() {
        let question = approval_question(
            "/shell.exec\n  command:\n    │ echo one\r\u{2028}\u{1b}[2K\n    │ echo two",
            "shell.exec asks first\nRun it? [y/N] y",
            None,
            None,
        );
        assert_eq!(
            question,
            "\nflycode wants to run:\n  /shell.exec\n    command:\n      │ echo one\\r\\u{2028}\\u{001B}[2K\n      │ echo two\n(shell.exec asks first\\nRun it? [y/N] y)\nRun it? [y/N] "
        );
    }

    #[test]
    fn the_diff_is_shown_in_its_lines_escaped_and_the_session_answers_offered() {
        let question = approval_question(
            "/fs.write /w/a.txt --mode overwrite --content <4 bytes>",
            "the configuration asks before fs.write",
            Some("--- /w/a.txt\n+++ /w/a.txt\n@@ -1 +1 @@\n-old\u{1b}[2K\n+new"),
            Some(SessionOffer {
                judged_as: ToolName::FsWrite,
                named: ToolName::FsWrite,
            }),
        );
        assert!(
            question.contains(
                "It would change:\n  --- /w/a.txt\n  +++ /w/a.txt\n  @@ -1 +1 @@\n  -old\\u{001B}[2K\n  +new\n(the configuration"
            ),
            "{question}"
        );
        assert!(
            question.contains("c = yes, and to this exact call again until flycode stops"),
            "{question}"
        );
        assert!(
            question.ends_with(
                "t = yes, and to every fs.write call until flycode stops\nRun it? [y/N/c/t] "
            ),
            "{question}"
        );
    }

    #[test]
    fn a_shell_judged_process_run_is_offered_as_shell_exec() {
        let question = approval_question(
            "/process.run bash -c ls",
            "shell.exec asks first",
            None,
            Some(SessionOffer {
                judged_as: ToolName::ShellExec,
                named: ToolName::ProcessRun,
            }),
        );
        assert!(question.contains("this exact command again"), "{question}");
        assert!(
            question.contains(
                "t = yes, and to every shell.exec call (a process.run of a shell counts as one)"
            ),
            "{question}"
        );
    }

    #[test]
    fn yes_answers_for_the_person_but_not_in_person() {
        let yes = YesApprover {
            terminal: TerminalApprover::new(Asking::Session),
        };
        assert_eq!(
            yes.approve("/fs.rm /w/a", "fs.rm asks first"),
            Approval::Assumed
        );
    }
}
