//! What the call service decides about a call before it runs ([`Ruling`]), the question it
//! puts to the person ([`Question`]), and what the ruling comes to once answered ([`Permit`]).
//!
//! A call is decided once (PROTOCOL.md §10 (Running calls)). Whoever answers the question, the
//! terminal, `--yes` or an MCP client's form (PROTOCOL.md §14 (The MCP server)), answers that
//! decision, and the answered ruling is what runs: no door decides again, and no door compares
//! what was shown with what will run.

use crate::protocol::{ErrorCode, ToolName};
use crate::tools::ToolError;
use crate::tools::approval::Approval;

/// What the call service rules for a call, before anything runs.
#[derive(Debug)]
pub enum Ruling {
    /// Run it.
    Run,
    /// Ask the person first.
    Ask(Question),
    /// Refuse it (`denied_by_policy`), saying why.
    Refuse(ToolError),
}

/// A question the person must answer before a call runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Question {
    /// The tool asked about.
    pub tool: ToolName,
    /// The whole call as the person must see it (see
    /// [`show_whole_call`](crate::tools::approval::show_whole_call)).
    pub shown: String,
    /// Why it needs a yes.
    pub reason: String,
    /// Only a person may answer, never `--yes` nor any setting: the call would change what the
    /// agent is told (`AGENTS.md`, `FLYCODE.md`) or what a program loads (`LD_PRELOAD`...).
    pub in_person: bool,
}

/// A ruling with its question answered: what [`Executor::run`](super::Executor::run) does with
/// the call. Only a ruling makes a permit that runs; a door may make only refusals.
#[derive(Debug)]
pub struct Permit(pub(super) Granted);

/// What a permit allows.
#[derive(Debug)]
pub(super) enum Granted {
    /// The call runs.
    Run,
    /// Policy, the person or the door refused it: its result depends on the session's policy.
    Refused(ToolError),
    /// It needed a person's yes and nobody could answer: its result says nothing of the call.
    Unanswered(ToolError),
}

impl Permit {
    /// A refusal the door decided itself (a request cancelled before it ran, roots that share
    /// nothing with flycode's): logged and answered like policy's.
    pub fn refused(error: ToolError) -> Permit {
        Permit(Granted::Refused(error))
    }

    /// A question nobody could answer, in the door's words (an MCP client that cannot ask).
    pub fn unanswered(error: ToolError) -> Permit {
        Permit(Granted::Unanswered(error))
    }

    /// Whether the call will run.
    pub fn runs(&self) -> bool {
        matches!(self.0, Granted::Run)
    }
}

impl Ruling {
    /// The ruling with `answer` given to its question; a ruling that asks nothing ignores it.
    /// "Nobody could answer" is refused in the terminal's words (see [`Permit::unanswered`] for
    /// a door's own).
    pub fn answered(self, answer: Approval) -> Permit {
        match self {
            Ruling::Run => Permit(Granted::Run),
            Ruling::Refuse(error) => Permit(Granted::Refused(error)),
            Ruling::Ask(question) => question.answered(answer),
        }
    }

    /// The question, where the ruling asks one.
    pub fn question(&self) -> Option<&Question> {
        match self {
            Ruling::Ask(question) => Some(question),
            Ruling::Run | Ruling::Refuse(_) => None,
        }
    }
}

impl Question {
    /// The permit `answer` gives.
    fn answered(self, answer: Approval) -> Permit {
        let Question {
            tool,
            reason,
            in_person,
            ..
        } = self;
        match answer {
            Approval::Yes => Permit(Granted::Run),
            Approval::No => Permit(Granted::Refused(ToolError::new(
                ErrorCode::DeniedByPolicy,
                format!("the user declined {tool}"),
                Some("ask the user what to do instead"),
            ))),
            Approval::Unavailable if in_person => Permit(Granted::Unanswered(
                ToolError::new(
                    ErrorCode::DeniedByPolicy,
                    format!(
                        "{tool} needs the user's approval at the terminal ({reason}), and no one was there to give it"
                    ),
                    Some(
                        "only the user can allow this call, in person; do without it, or ask the user to make the change",
                    ),
                )
                .with_advice(
                    "only a person at a terminal can allow this call (--yes does not): run flycode in a terminal and copy the reply again",
                ),
            )),
            Approval::Unavailable => Permit(Granted::Unanswered(
                ToolError::new(
                    ErrorCode::DeniedByPolicy,
                    format!(
                        "{tool} needs the user's approval ({reason}), and no one was at the terminal to give it"
                    ),
                    Some(
                        "tell the user what you want to run and why, and wait for them to allow it; or do without this call",
                    ),
                )
                .with_advice(
                    "no terminal could answer; restart flycode with --yes (or --approve auto) and send the same call again (in watch: copy the reply again)",
                ),
            )),
        }
    }
}

/// The refusal of policy's `Deny`.
pub(super) fn denied(tool: ToolName, reason: &str, advice: String) -> ToolError {
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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Restriction {
    /// The tools that run.
    pub tools: &'static [ToolName],
    /// Why the others do not, e.g. "sub-agents are read-only".
    pub reason: &'static str,
    /// What the model should do instead.
    pub hint: &'static str,
}

impl Restriction {
    /// The refusal of a tool this restriction leaves out.
    pub(super) fn refusal(&self, tool: ToolName) -> ToolError {
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
