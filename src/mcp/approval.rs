//! Approvals over MCP (PROTOCOL.md §14 (The MCP server)): the call service decides; a call it
//! would ask about is asked through the client's elicitation (a small form: the call, its paths,
//! for a write the size of the change), and refused with a message saying how to allow it in
//! flycode.toml where the client cannot ask.
//!
//! The question is asked in the handler's async code, between the service's decision and its
//! run, and its answer is given to that decision
//! ([`Ruling::answered_in`](crate::tools::executor::Ruling::answered_in), with MCP's words for a
//! question nobody answered, [`ClientWords`]):
//! nothing decides again, so nothing has to match what was shown with what runs. The person may
//! take minutes to answer: no thread and no lock is held meanwhile, so nothing can deadlock on a
//! pending question, and the same answer serves both protocol eras (a server-to-client
//! `elicitation/create` request before 2026-07-28, an `input_required` result from then on).

use std::path::Path;

use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema};

use crate::protocol::{ErrorCode, ToolName};
use crate::tools::ToolError;
use crate::tools::executor::{Approval, DoorWords, Question};

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
/// write the size of the change and the diff the terminal shows: both from the question's
/// preview, the tool's plan of its change (PROTOCOL.md §10 (Running calls), "The diff in the
/// question").
pub(crate) fn elicitation_message(question: &Question) -> String {
    let mut message = format!(
        "flycode asks before this call ({}). Accept to run it, decline to refuse it.\n\n{}",
        question.reason, question.shown
    );
    let Some(preview) = &question.preview else {
        return message;
    };
    if let Some(stat) = preview.stat() {
        message.push_str("\n\n");
        message.push_str(&stat);
    }
    // The same diff the terminal shows, masked and capped.
    message.push_str("\n\nIt would change:\n");
    message.push_str(&preview.text());
    message
}

/// MCP's words for a question nobody answered, per call: the client cannot ask (and how to
/// allow the call instead), or its form brought no answer.
pub(crate) struct ClientWords<'a> {
    /// The client can show the person a form.
    pub can_ask: bool,
    /// Where the setting that would allow the call goes.
    pub advice: AllowAdvice<'a>,
}

impl DoorWords for ClientWords<'_> {
    fn unanswered(&self, question: &Question) -> ToolError {
        let (message, hint) = if self.can_ask {
            unanswered_form(question)
        } else {
            unanswerable(question.judged_as, question, &self.advice)
        };
        ToolError::new(ErrorCode::DeniedByPolicy, message, Some(&hint))
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
fn unanswered_form(question: &Question) -> (String, String) {
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
fn unanswerable(
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
