//! Asking the person on the terminal before a call runs.

use std::io::{BufRead, BufReader, Write};

use crate::protocol::display::{escape_for_display, escape_lines_for_display};
use crate::tools::executor::{Approval, Approver};

/// The question put to the person: the call exactly as it will run, laid out in lines (see
/// [`show_whole_call`](crate::tools::executor::show_whole_call)), and why it needs a yes. The
/// line breaks of `shown` stay line breaks; within each line every control, bidirectional and
/// invisible character is escaped, tabs and carriage returns included
/// ([`escape_lines_for_display`]). `reason` is one line: all of it is escaped.
pub fn approval_question(shown: &str, reason: &str) -> String {
    let mut question = String::from("\nflycode wants to run:\n");
    for line in escape_lines_for_display(shown).split('\n') {
        question.push_str("  ");
        question.push_str(line);
        question.push('\n');
    }
    question.push_str(&format!("({})\nRun it? [y/N] ", escape_for_display(reason)));
    question
}

/// `--yes`: answers yes, except for the calls only a person may allow (a change to the
/// instruction files, a dangerous environment), which still go to the terminal.
pub struct YesApprover;

impl Approver for YesApprover {
    fn approve(&self, _shown: &str, _reason: &str) -> Approval {
        Approval::Yes
    }

    fn approve_in_person(&self, shown: &str, reason: &str) -> Approval {
        TerminalApprover.approve(shown, reason)
    }
}

/// Asks on the controlling terminal (never standard input, which may carry the reply).
pub struct TerminalApprover;

impl Approver for TerminalApprover {
    fn approve(&self, shown: &str, reason: &str) -> Approval {
        let Ok(tty) = crate::sandbox::host::open_terminal() else {
            return Approval::Unavailable;
        };
        let Ok(mut writer) = tty.try_clone() else {
            return Approval::Unavailable;
        };
        let prompt = approval_question(shown, reason);
        if writer
            .write_all(prompt.as_bytes())
            .and_then(|()| writer.flush())
            .is_err()
        {
            return Approval::Unavailable;
        }
        let mut answer = String::new();
        if BufReader::new(tty).read_line(&mut answer).is_err() {
            return Approval::Unavailable;
        }
        if matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes") {
            Approval::Yes
        } else {
            Approval::No
        }
    }
}

#[cfg(test)]
mod tests {
    use super::approval_question;

    #[test]
    fn the_question_keeps_the_lines_of_the_call_and_escapes_within_them() {
        let question = approval_question(
            "/shell.exec\n  command:\n    │ echo one\r\u{2028}\u{1b}[2K\n    │ echo two",
            "shell.exec asks first\nRun it? [y/N] y",
        );
        assert_eq!(
            question,
            "\nflycode wants to run:\n  /shell.exec\n    command:\n      │ echo one\\r\\u{2028}\\u{001B}[2K\n      │ echo two\n(shell.exec asks first\\nRun it? [y/N] y)\nRun it? [y/N] "
        );
    }
}
