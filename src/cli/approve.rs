//! Asking the person on the terminal before a call runs.

use std::io::{BufRead, BufReader, Write};

use crate::protocol::display::escape_for_display;
use crate::tools::executor::{Approval, Approver};

/// The question put to the person: the call exactly as it will run, every control, bidirectional
/// and invisible character escaped, and why it needs a yes.
pub fn approval_question(shown: &str, reason: &str) -> String {
    format!(
        "\nflycode wants to run:\n  {}\n({})\nRun it? [y/N] ",
        escape_for_display(shown),
        escape_for_display(reason)
    )
}

/// `--yes`: answers yes, except for the calls only a person may allow (a change to the
/// instruction files, a dangerous environment), which still go to the terminal.
pub struct YesApprover;

impl Approver for YesApprover {
    fn approve(&mut self, _shown: &str, _reason: &str) -> Approval {
        Approval::Yes
    }

    fn approve_in_person(&mut self, shown: &str, reason: &str) -> Approval {
        TerminalApprover.approve(shown, reason)
    }
}

/// Asks on the controlling terminal (never standard input, which may carry the reply).
pub struct TerminalApprover;

impl Approver for TerminalApprover {
    fn approve(&mut self, shown: &str, reason: &str) -> Approval {
        let Ok(tty) = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
        else {
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
