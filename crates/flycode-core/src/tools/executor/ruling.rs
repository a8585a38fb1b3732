//! What the call service decides about a call before it runs ([`Ruling`]), the question it
//! puts to the person ([`Question`]), and what the ruling comes to once answered ([`Permit`]).
//!
//! A call is decided once (PROTOCOL.md §10 (Running calls)). Whoever answers the question, the
//! terminal, `--yes` or an MCP client's form (PROTOCOL.md §14 (The MCP server)), answers that
//! decision, and the answered ruling is what runs: no door decides again, and no door compares
//! what was shown with what will run.
//!
//! Both are made here and nowhere else: a ruling only by [`Executor::decide`], a permit only by
//! answering a ruling ([`Ruling::answered`]). Each carries the [`InvocationId`] of the invocation
//! it was decided for, and [`Executor::run`](super::Executor::run) refuses a permit for any other
//! ([`PermitMismatch`]): no door can make a permit that runs, or run one call on another's yes.
//! Deciding only reads: policy, the paths as they resolve now, and for a question the preview
//! of the change ([`Tool::preview`](crate::tools::tool::Tool::preview), a plan, never a run).

use std::path::PathBuf;

use super::{Executor, lock};
use crate::protocol::{ErrorCode, ToolName, render_command};
use crate::sandbox::{LastComponent, SandboxError};
use crate::tools::ToolError;
use crate::tools::approval::{Approval, Decider, DoorWords, Question, Remembered, show_whole_call};
use crate::tools::policy::Judgement;
use crate::tools::registry::{Invocation, InvocationId};

/// What the call service rules for one invocation, before anything runs. Made only by
/// [`Executor::decide`], for the invocation it decided.
#[derive(Debug)]
pub struct Ruling {
    decision: Decision,
    /// The invocation decided.
    invocation: InvocationId,
}

/// What a ruling says.
#[derive(Debug)]
enum Decision {
    /// Run it.
    Run,
    /// Ask the person first.
    Ask(Question),
    /// Refuse it (`denied_by_policy`), saying why.
    Refuse(ToolError),
}

/// A ruling with its question answered: what [`Executor::run`](super::Executor::run) does with
/// the invocation it was decided for. Only a ruling makes a permit.
#[derive(Debug)]
pub struct Permit {
    granted: Granted,
    /// Who let it run or refused it (the audit log's `approval`).
    by: Decider,
    /// The invocation it was decided for: it runs no other.
    invocation: InvocationId,
}

/// What a permit allows.
#[derive(Debug)]
pub(super) enum Granted {
    /// The call runs.
    Run,
    /// Policy or the person refused it: its result depends on the session's policy.
    Refused(ToolError),
    /// It needed a person's yes and nobody could answer: its result says nothing of the call.
    Unanswered(ToolError),
}

/// A permit given to run another invocation than the one it was decided for: nothing runs.
#[derive(Debug, thiserror::Error)]
#[error(
    "the permit to run {tool} was decided for another invocation than call {}: it was not run",
    call_id.as_deref().unwrap_or("(no id)")
)]
pub struct PermitMismatch {
    /// The tool of the invocation the permit was given to run.
    pub tool: ToolName,
    /// That invocation's call id.
    pub call_id: Option<String>,
}

impl From<PermitMismatch> for ToolError {
    fn from(mismatch: PermitMismatch) -> ToolError {
        ToolError::new(
            ErrorCode::DeniedByPolicy,
            mismatch.to_string(),
            Some("send the call again: it is decided anew"),
        )
    }
}

impl Permit {
    /// Whether the call will run.
    pub fn runs(&self) -> bool {
        matches!(self.granted, Granted::Run)
    }

    /// What it allows and who decided, once it is shown to be `invocation`'s.
    pub(super) fn check(
        self,
        invocation: &Invocation<'_>,
    ) -> Result<(Granted, Decider), PermitMismatch> {
        if self.invocation != invocation.id() {
            return Err(PermitMismatch {
                tool: invocation.call().tool,
                call_id: invocation.call().id.clone(),
            });
        }
        Ok((self.granted, self.by))
    }
}

impl Ruling {
    /// The ruling with `answer` given to its question; a ruling that asks nothing ignores it.
    /// "Nobody could answer" is refused in the terminal's words (`watch`'s, see
    /// [`Ruling::answered_in`] for a door's own).
    pub fn answered(self, answer: Approval) -> Permit {
        self.answered_in(answer, &super::Door::default())
    }

    /// The same, with a question nobody could answer refused in `words`.
    pub fn answered_in(self, answer: Approval, words: &dyn DoorWords) -> Permit {
        let invocation = self.invocation;
        let (granted, by) = match self.decision {
            Decision::Run => (Granted::Run, Decider::Policy),
            Decision::Refuse(error) => (Granted::Refused(error), Decider::Policy),
            Decision::Ask(question) => question.answered(answer, words),
        };
        Permit {
            granted,
            by,
            invocation,
        }
    }

    /// The question, where the ruling asks one.
    pub fn question(&self) -> Option<&Question> {
        match &self.decision {
            Decision::Ask(question) => Some(question),
            Decision::Run | Decision::Refuse(_) => None,
        }
    }

    /// The refusal, where the ruling refuses the call.
    pub fn refusal(&self) -> Option<&ToolError> {
        match &self.decision {
            Decision::Refuse(error) => Some(error),
            Decision::Run | Decision::Ask(_) => None,
        }
    }
}

impl Executor<'_> {
    /// Decides the call: the restriction first, then policy (its paths judged as they resolve
    /// now, so a link to `AGENTS.md` counts as one); nothing runs, nothing is written and nobody
    /// is asked. A question carries the tool's preview of what the call would change.
    pub fn decide(&self, invocation: &Invocation<'_>) -> Ruling {
        let decision = self.decision(invocation);
        Ruling {
            decision,
            invocation: invocation.id(),
        }
    }

    /// The refusal the sandbox would give `invocation` whatever the person answered: a path it
    /// names (a program's working folder included) outside the roots, relative, or flycode's
    /// own. Read only; `None` where the call may run (a missing file is the tool's to report).
    fn refused_anyway(&self, invocation: &Invocation<'_>) -> Option<ToolError> {
        let effects = invocation.effects();
        effects
            .reads
            .iter()
            .chain(&effects.writes)
            .chain(&effects.creates)
            .find_map(
                |input| match self.sandbox.resolve(input, LastComponent::Follow) {
                    Err(
                        error @ (SandboxError::OutsideRoots { .. }
                        | SandboxError::RelativePath { .. }
                        | SandboxError::UnsupportedPath { .. }
                        | SandboxError::InvalidPath { .. }
                        | SandboxError::Denied { .. }),
                    ) => Some(ToolError::from(error)),
                    _ => None,
                },
            )
    }

    fn decision(&self, invocation: &Invocation<'_>) -> Decision {
        let call = invocation.call();
        if let Some(restriction) = &self.restriction
            && !restriction.tools.contains(&call.tool)
        {
            return Decision::Refuse(restriction.refusal(call.tool));
        }
        let resolved: Vec<PathBuf> = invocation
            .effects()
            .changed()
            .filter_map(|input| self.sandbox.resolve(input, LastComponent::Follow).ok())
            .map(|path| path.absolute)
            .collect();
        match self.policy.judge_invocation(invocation, &resolved) {
            Judgement::Run => Decision::Run,
            Judgement::Deny { reason, advice } => {
                Decision::Refuse(denied(call.tool, &reason, advice))
            }
            Judgement::Ask { reason, in_person } => {
                // Never ask the person about a call the sandbox will refuse anyway.
                if let Some(refusal) = self.refused_anyway(invocation) {
                    return Decision::Refuse(refusal);
                }
                let secrets = self.limits.secrets();
                let shown = show_whole_call(
                    invocation,
                    &render_command(call.tool, &call.args),
                    &self.limits,
                );
                Decision::Ask(Question {
                    tool: call.tool,
                    judged_as: invocation.bound().judged_as(),
                    identity: crate::sandbox::sha256_hex(shown.as_bytes()),
                    shown: secrets.mask(&shown).into_owned(),
                    reason: secrets.mask(&reason).into_owned(),
                    in_person,
                    preview: invocation.bound().preview(self.sandbox, &secrets),
                })
            }
        }
    }

    /// Puts the ruling's question, if any, to this executor's approver, one question at a time
    /// in the whole process, and returns the answered ruling; nobody's answer is refused in this
    /// executor's door's words.
    pub fn ask(&self, ruling: Ruling) -> Permit {
        let answer = match ruling.question() {
            Some(question) => {
                let _one_question_at_a_time = lock(&super::ASKING);
                self.approver.ask(question)
            }
            None => Approval::Unavailable,
        };
        ruling.answered_in(answer, &self.door)
    }
}

impl Question {
    /// What `answer` allows, and who decided.
    fn answered(self, answer: Approval, words: &dyn DoorWords) -> (Granted, Decider) {
        let tool = self.tool;
        match answer {
            Approval::Yes => (Granted::Run, Decider::Person),
            Approval::Assumed => (Granted::Run, Decider::YesFlag),
            Approval::Remembered(Remembered::Tool) => (Granted::Run, Decider::SessionTool),
            Approval::Remembered(Remembered::Command) => (Granted::Run, Decider::SessionCommand),
            Approval::No => (
                Granted::Refused(ToolError::new(
                    ErrorCode::DeniedByPolicy,
                    format!("the user declined {tool}"),
                    Some("ask the user what to do instead"),
                )),
                Decider::Declined,
            ),
            // Nothing was said about the call itself: like a question nobody answered, it is not
            // remembered as this call's answer (a watcher asks again next time).
            Approval::Interrupted => (
                Granted::Unanswered(ToolError::new(
                    ErrorCode::DeniedByPolicy,
                    format!(
                        "the user stopped flycode (Ctrl-C) when asked about {tool}; it was not run"
                    ),
                    Some("the user stopped this session; nothing more will run in it"),
                )),
                Decider::Interrupted,
            ),
            Approval::Unavailable => (
                Granted::Unanswered(words.unanswered(&self)),
                Decider::Unanswered,
            ),
        }
    }
}

/// The refusal of policy's `Deny`.
fn denied(tool: ToolName, reason: &str, advice: String) -> ToolError {
    ToolError::new(
        ErrorCode::DeniedByPolicy,
        format!("{tool} was not run: {reason}"),
        Some("ask the user to change the policy, or do without this call"),
    )
    .with_advice(advice)
}

/// The only tools an executor runs, and what its refusal of any other says: a sub-agent's
/// executor runs only the read-only tools (PROTOCOL.md §13 (The API loop: sub-agents)), so a
/// sub-agent is read-only by construction, not only by the tools it is offered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restriction {
    /// The tools that run (fewer for a predefined agent that names its tools).
    pub tools: std::borrow::Cow<'static, [ToolName]>,
    /// Why the others do not, e.g. "sub-agents are read-only".
    pub reason: &'static str,
    /// What the model should do instead.
    pub hint: &'static str,
}

impl Restriction {
    /// Whether `tool` runs under this restriction.
    pub fn allows(&self, tool: ToolName) -> bool {
        self.tools.contains(&tool)
    }

    /// This restriction inside `outer`: only the tools both let run. A narrower executor can
    /// never run a tool the one it was made from refused (PROTOCOL.md §9 (Predefined agents)).
    pub fn within(self, outer: Option<&Restriction>) -> Restriction {
        match outer {
            Some(outer) if self.tools.iter().any(|tool| !outer.allows(*tool)) => Restriction {
                tools: std::borrow::Cow::Owned(
                    self.tools
                        .iter()
                        .copied()
                        .filter(|tool| outer.allows(*tool))
                        .collect(),
                ),
                ..self
            },
            _ => self,
        }
    }

    /// The refusal of a tool this restriction leaves out.
    fn refusal(&self, tool: ToolName) -> ToolError {
        let tools: Vec<&str> = self.tools.iter().map(|t| t.as_str()).collect();
        ToolError::new(
            ErrorCode::DeniedByPolicy,
            format!(
                "{tool} was not run: {}; the tools that run here are {}",
                self.reason,
                tools.join(", ")
            ),
            Some(self.hint),
        )
    }
}
