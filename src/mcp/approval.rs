//! Approvals over MCP (PROTOCOL.md §14 (The MCP server)): flycode's policy decides first; a call it would ask about
//! is asked through the client's elicitation (a small form: the call, its paths, for a write the
//! size of the change), and refused with a message saying how to allow it in flycode.toml where
//! the client cannot ask.
//!
//! The question is asked before the executor runs, in the handler's async code, and the
//! executor gets an [`AnsweredApprover`] holding the answer. The person may take minutes to
//! answer: no thread and no lock is held meanwhile, so nothing can deadlock on a pending
//! question, and the same answer serves both protocol eras (a server-to-client
//! `elicitation/create` request before 2026-07-28, an `input_required` result from then on).
//! The executor still decides on its own: the approver answers only the question that was put
//! to the person (the same call, shown the same way) and says "nobody could answer" to any
//! other.

use std::io::Read;
use std::path::Path;

use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema};

use crate::protocol::{ToolName, render_command};
use crate::sandbox::{LastComponent, Sandbox};
use crate::tools::Limits;
use crate::tools::executor::{Approval, Approver, show_whole_call};
use crate::tools::policy::{Decision, Policy};
use crate::tools::registry::Invocation;

/// A question policy wants answered before a call runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Question {
    /// The whole call as the person must see it (see [`show_whole_call`]).
    pub shown: String,
    /// Why it needs a yes.
    pub reason: String,
    /// Only a person may answer (instruction files, dangerous environments): no configuration
    /// can allow it.
    pub in_person: bool,
}

/// The question policy would put for this call, exactly as the executor will put it; `None`
/// when the call runs or is refused without asking.
pub(crate) fn question(
    invocation: &Invocation<'_>,
    sandbox: &Sandbox,
    policy: &Policy,
    limits: &Limits,
) -> Option<Question> {
    let call = invocation.call;
    let resolved: Vec<std::path::PathBuf> = invocation
        .effects()
        .changed()
        .filter_map(|input| sandbox.resolve(input, LastComponent::Follow).ok())
        .map(|path| path.absolute)
        .collect();
    match policy.decide_invocation(invocation, &resolved) {
        Decision::Ask { reason, in_person } => Some(Question {
            shown: show_whole_call(invocation, &render_command(call.tool, &call.args), limits),
            reason,
            in_person,
        }),
        Decision::Run | Decision::Deny { .. } => None,
    }
}

/// Answers the one question the person was asked, with their answer; any other question
/// (the call resolved differently by the time it ran) gets "nobody could answer".
pub(crate) struct AnsweredApprover {
    /// The call as it was shown to the person, if they were asked.
    pub asked: Option<String>,
    /// What they answered.
    pub answer: Approval,
}

#[cfg(test)]
impl AnsweredApprover {
    /// An approver for a call nobody was asked about.
    pub(crate) fn unasked() -> AnsweredApprover {
        AnsweredApprover {
            asked: None,
            answer: Approval::Unavailable,
        }
    }
}

impl Approver for AnsweredApprover {
    fn approve(&self, shown: &str, _reason: &str) -> Approval {
        match &self.asked {
            Some(asked) if asked == shown => self.answer.clone(),
            _ => Approval::Unavailable,
        }
    }

    /// The person answered in the client's own form, so the answer is theirs.
    fn approve_in_person(&self, shown: &str, reason: &str) -> Approval {
        self.approve(shown, reason)
    }
}

/// The person's answer in an elicitation result: accept runs the call; decline and cancel
/// refuse it.
pub(crate) fn answer_of(result: &ElicitResult) -> Approval {
    match result.action {
        ElicitationAction::Accept => Approval::Yes,
        _ => Approval::No,
    }
}

/// The form: the question as its message and no fields (accept or decline is the answer).
pub(crate) fn elicitation(message: String) -> ElicitRequestParams {
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: ElicitationSchema::new(Default::default()),
    }
}

/// The message of the form: why, the call in full (its paths among its arguments), and for a
/// write the size of the change where it is cheap to tell.
pub(crate) fn elicitation_message(
    question: &Question,
    invocation: &Invocation<'_>,
    sandbox: &Sandbox,
) -> String {
    let mut message = format!(
        "flycode asks before this call ({}). Accept to run it, decline to refuse it.\n\n{}",
        question.reason, question.shown
    );
    if let Some(stat) = change_stat(invocation, sandbox) {
        message.push_str("\n\n");
        message.push_str(&stat);
    }
    message
}

/// Files (and new contents) larger than this are not compared for a diff stat.
const DIFF_STAT_LIMIT: u64 = 1 << 20;

/// The longest a diff stat may take.
const DIFF_STAT_TIME: std::time::Duration = std::time::Duration::from_millis(100);

/// `change: +3 -1 lines` for an overwrite of a file small enough to compare; a count for a batch
/// or an edit.
fn change_stat(invocation: &Invocation<'_>, sandbox: &Sandbox) -> Option<String> {
    let args = &invocation.call.args;
    match invocation.call.tool {
        ToolName::FsWrite => {
            let path = args.get("path")?.as_str()?;
            let content = args.get("content")?.as_str()?;
            if content.len() as u64 > DIFF_STAT_LIMIT {
                return None;
            }
            let appending = args.get("mode").and_then(|m| m.as_str()) == Some("append");
            let old = match sandbox.open_for_reading(path) {
                Ok(file) => {
                    let mut bytes = Vec::new();
                    file.take(DIFF_STAT_LIMIT + 1)
                        .read_to_end(&mut bytes)
                        .ok()?;
                    if bytes.len() as u64 > DIFF_STAT_LIMIT {
                        return None;
                    }
                    String::from_utf8(bytes).ok()?
                }
                Err(_) => String::new(),
            };
            let new = if appending {
                std::borrow::Cow::Owned(format!("{old}{content}"))
            } else {
                std::borrow::Cow::Borrowed(content)
            };
            let (mut added, mut removed) = (0usize, 0usize);
            // The question is asked on the server's one thread: a diff that would take long is
            // cut short (its counts are then an upper bound, which is still a fair stat).
            let diff = similar::TextDiff::configure()
                .timeout(DIFF_STAT_TIME)
                .diff_lines(old.as_str(), new.as_ref());
            for change in diff.iter_all_changes() {
                match change.tag() {
                    similar::ChangeTag::Insert => added += 1,
                    similar::ChangeTag::Delete => removed += 1,
                    similar::ChangeTag::Equal => {}
                }
            }
            Some(format!("change: +{added} -{removed} lines"))
        }
        ToolName::FsWriteBatch => {
            let files = args.get("files")?.as_array()?;
            Some(format!(
                "change: {} files written all or nothing",
                files.len()
            ))
        }
        ToolName::FsEdit => {
            let edits = args.get("edits")?.as_array()?;
            Some(format!("change: {} exact-text edits", edits.len()))
        }
        _ => None,
    }
}

/// Where the setting that allows a call goes: the flycode.toml to edit, and the `--approve`
/// flag the server was started with, if any (it overrides the file).
pub(crate) struct AllowAdvice<'a> {
    /// The flycode.toml to edit, by its full path.
    pub config_file: &'a Path,
    /// `--approve ask` or `--approve read-only`, as the server was started.
    pub approve_flag: Option<&'a str>,
}

/// What a refusal says when a client that can ask got no answer for this exact call (its form
/// failed, or the call would now run differently than it was shown).
pub(crate) fn unanswered_form(tool: ToolName, question: &Question) -> (String, String) {
    (
        format!(
            "{tool} needs the user's approval ({}), and the client's approval form brought no answer for this exact call (the form failed, or the call would now run differently than it was shown); nothing was run",
            question.reason
        ),
        "send the call again to be asked again, or do without it".to_owned(),
    )
}

/// What a refusal says when the client cannot ask the person (no elicitation): the message
/// the model and the person read, and the hint for the model.
pub(crate) fn unanswerable(
    tool: ToolName,
    judged_as: ToolName,
    question: &Question,
    advice: &AllowAdvice<'_>,
) -> (String, String) {
    let config_file = advice.config_file;
    let flag = advice
        .approve_flag
        .map(|flag| {
            format!(" The server was started with {flag}, which overrides the file: change it to --approve auto in the client's configuration of the server, or drop it.")
        })
        .unwrap_or_default();
    if question.in_person {
        (
            format!(
                "{tool} needs the user's own approval ({}), and this MCP client cannot ask (it does not support elicitation); no setting in flycode.toml allows it",
                question.reason
            ),
            "do without this call, or ask the user to make the change themselves".to_owned(),
        )
    } else {
        (
            format!(
                "{tool} needs the user's approval ({}), and this MCP client cannot ask (it does not support elicitation). To allow it, set approval = \"auto\" in {}, or allow this tool alone with [tools] \"{judged_as}\" = \"allow\" there, and restart the server.{flag}",
                question.reason,
                config_file.display()
            ),
            "tell the user what you want to run and why, and how to allow it; or do without this call".to_owned(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_approver_answers_only_the_question_asked() {
        let approver = AnsweredApprover {
            asked: Some("/process.run ls".into()),
            answer: Approval::Yes,
        };
        assert_eq!(approver.approve("/process.run ls", "r"), Approval::Yes);
        assert_eq!(
            approver.approve_in_person("/process.run ls", "r"),
            Approval::Yes
        );
        assert_eq!(
            approver.approve("/process.run rm", "r"),
            Approval::Unavailable
        );
        assert_eq!(
            AnsweredApprover::unasked().approve("/process.run ls", "r"),
            Approval::Unavailable
        );
    }

    #[test]
    fn decline_and_cancel_refuse() {
        assert_eq!(
            answer_of(&ElicitResult::new(ElicitationAction::Accept)),
            Approval::Yes
        );
        assert_eq!(
            answer_of(&ElicitResult::new(ElicitationAction::Decline)),
            Approval::No
        );
        assert_eq!(
            answer_of(&ElicitResult::new(ElicitationAction::Cancel)),
            Approval::No
        );
    }

    #[test]
    fn the_refusal_says_how_to_allow_it() {
        let question = Question {
            shown: "/process.run ls".into(),
            reason: "process.run asks first".into(),
            in_person: false,
        };
        let file = Path::new("/home/me/.config/flycode/flycode.toml");
        let advice = AllowAdvice {
            config_file: file,
            approve_flag: None,
        };
        let (message, _) = unanswerable(
            ToolName::ProcessRun,
            ToolName::ProcessRun,
            &question,
            &advice,
        );
        assert!(!message.contains("--approve"), "{message}");
        let flagged = AllowAdvice {
            config_file: file,
            approve_flag: Some("--approve ask"),
        };
        let (with_flag, _) = unanswerable(
            ToolName::ProcessRun,
            ToolName::ProcessRun,
            &question,
            &flagged,
        );
        assert!(
            with_flag.contains("started with --approve ask, which overrides the file"),
            "{with_flag}"
        );
        let (unanswered, _) = unanswered_form(ToolName::ProcessRun, &question);
        assert!(
            unanswered.contains("no answer for this exact call")
                && !unanswered.contains("cannot ask"),
            "{unanswered}"
        );
        assert!(
            message.contains("approval = \"auto\" in /home/me/.config/flycode/flycode.toml"),
            "{message}"
        );
        assert!(
            message.contains("[tools] \"process.run\" = \"allow\""),
            "{message}"
        );
        let (message, _) = unanswerable(
            ToolName::FsWrite,
            ToolName::FsWrite,
            &Question {
                in_person: true,
                ..question
            },
            &advice,
        );
        assert!(message.contains("no setting in flycode.toml"), "{message}");
    }
}
