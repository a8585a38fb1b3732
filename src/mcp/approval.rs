//! Approvals over MCP (PROTOCOL.md §14 (The MCP server)): the call service decides; a call it
//! would ask about is asked through the client's elicitation (a small form: the call, its paths,
//! for a write the size of the change), and refused with a message saying how to allow it in
//! flycode.toml where the client cannot ask.
//!
//! The question is asked in the handler's async code, between the service's decision and its
//! run, and its answer is given to that decision ([`Ruling::answered`](crate::tools::executor::Ruling::answered)):
//! nothing decides again, so nothing has to match what was shown with what runs. The person may
//! take minutes to answer: no thread and no lock is held meanwhile, so nothing can deadlock on a
//! pending question, and the same answer serves both protocol eras (a server-to-client
//! `elicitation/create` request before 2026-07-28, an `input_required` result from then on).

use std::io::Read;
use std::path::Path;

use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema};

use crate::protocol::ToolName;
use crate::sandbox::Sandbox;
use crate::tools::executor::{Approval, Question};
use crate::tools::registry::Invocation;

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
/// write the size of the change where it is cheap to tell and the diff the terminal shows.
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
    // The same diff the terminal shows, masked and capped (PROTOCOL.md §10 (Running calls)).
    if let Some(preview) = &question.preview {
        message.push_str("\n\nIt would change:\n");
        message.push_str(preview);
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
/// failed).
pub(crate) fn unanswered_form(question: &Question) -> (String, String) {
    (
        format!(
            "{} needs the user's approval ({}), and the client's approval form brought no answer for this exact call (the form failed); nothing was run",
            question.tool, question.reason
        ),
        "send the call again to be asked again, or do without it".to_owned(),
    )
}

/// What a refusal says when the client cannot ask the person (no elicitation): the message
/// the model and the person read, and the hint for the model.
pub(crate) fn unanswerable(
    judged_as: ToolName,
    question: &Question,
    advice: &AllowAdvice<'_>,
) -> (String, String) {
    let tool = question.tool;
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
            tool: ToolName::ProcessRun,
            shown: "/process.run ls".into(),
            reason: "process.run asks first".into(),
            in_person: false,
            judged_as: ToolName::ProcessRun,
            preview: None,
            identity: String::new(),
        };
        let file = Path::new("/home/me/.config/flycode/flycode.toml");
        let advice = AllowAdvice {
            config_file: file,
            approve_flag: None,
        };
        let (message, _) = unanswerable(ToolName::ProcessRun, &question, &advice);
        assert!(!message.contains("--approve"), "{message}");
        let flagged = AllowAdvice {
            config_file: file,
            approve_flag: Some("--approve ask"),
        };
        let (with_flag, _) = unanswerable(ToolName::ProcessRun, &question, &flagged);
        assert!(
            with_flag.contains("started with --approve ask, which overrides the file"),
            "{with_flag}"
        );
        let (unanswered, _) = unanswered_form(&question);
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
            &Question {
                tool: ToolName::FsWrite,
                in_person: true,
                ..question
            },
            &advice,
        );
        assert!(message.contains("no setting in flycode.toml"), "{message}");
    }
}
