//! What the call service decides about a call before it runs ([`Ruling`]), the question it
//! puts to the person ([`Question`]), and what the ruling comes to once answered ([`Permit`]).
//!
//! A call is decided once (PROTOCOL.md §10 (Running calls)). Whoever answers the question, the
//! terminal, `--yes` or an MCP client's form (PROTOCOL.md §14 (The MCP server)), answers that
//! decision, and the answered ruling is what runs: no door decides again, and no door compares
//! what was shown with what will run.

use crate::protocol::{ErrorCode, ToolName};
use crate::tools::ToolError;
use crate::tools::approval::{Approval, Decider, Question, Remembered};

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

/// A ruling with its question answered: what [`Executor::run`](super::Executor::run) does with
/// the call. Only a ruling makes a permit that runs; a door may make only refusals.
#[derive(Debug)]
pub struct Permit {
    pub(super) granted: Granted,
    /// Who let it run or refused it (the audit log's `approval`); `None` for a refusal the door
    /// decided itself.
    pub(super) by: Option<Decider>,
}

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
        Permit::by(Granted::Refused(error), None)
    }

    /// A question nobody could answer, in the door's words (an MCP client that cannot ask).
    pub fn unanswered(error: ToolError) -> Permit {
        Permit::by(Granted::Unanswered(error), Some(Decider::Unanswered))
    }

    fn by(granted: Granted, by: Option<Decider>) -> Permit {
        Permit { granted, by }
    }

    /// Whether the call will run.
    pub fn runs(&self) -> bool {
        matches!(self.granted, Granted::Run)
    }
}

impl Ruling {
    /// The ruling with `answer` given to its question; a ruling that asks nothing ignores it.
    /// "Nobody could answer" is refused in the terminal's words (see [`Permit::unanswered`] for
    /// a door's own).
    pub fn answered(self, answer: Approval) -> Permit {
        match self {
            Ruling::Run => Permit::by(Granted::Run, Some(Decider::Policy)),
            Ruling::Refuse(error) => Permit::by(Granted::Refused(error), Some(Decider::Policy)),
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
        let run = |by| Permit::by(Granted::Run, Some(by));
        match answer {
            Approval::Yes => run(Decider::Person),
            Approval::Assumed => run(Decider::YesFlag),
            Approval::Remembered(Remembered::Tool) => run(Decider::SessionTool),
            Approval::Remembered(Remembered::Command) => run(Decider::SessionCommand),
            Approval::No => Permit::by(
                Granted::Refused(ToolError::new(
                    ErrorCode::DeniedByPolicy,
                    format!("the user declined {tool}"),
                    Some("ask the user what to do instead"),
                )),
                Some(Decider::Declined),
            ),
            // Nothing was said about the call itself: like a question nobody answered, it is not
            // remembered as this call's answer (a watcher asks again next time).
            Approval::Interrupted => Permit::by(
                Granted::Unanswered(ToolError::new(
                    ErrorCode::DeniedByPolicy,
                    format!("the user stopped flycode (Ctrl-C) when asked about {tool}; it was not run"),
                    Some("the user stopped this session; nothing more will run in it"),
                )),
                Some(Decider::Interrupted),
            ),
            Approval::Unavailable if in_person => Permit::unanswered(
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
            ),
            Approval::Unavailable => Permit::unanswered(
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
            ),
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
