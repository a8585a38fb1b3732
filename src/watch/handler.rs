//! One copied (or dropped) reply in, one answer out: the logic both watch modes share.
//!
//! Text without a `flycode-call` block is ignored, and so is any text holding a
//! `flycode-result` block (the person copying a result to paste it back, or flycode's own
//! write). A reply with a call block earns a result: the error result of an invalid reply, the
//! stored result of a call already executed (`[replayed] true`), or the result of running it.

use std::time::{Duration, Instant};

use crate::protocol::parse::parse_reply;
use crate::protocol::verdict::violation_result;
use crate::protocol::{
    ClassifyOptions, ErrorCode, ResultBlock, Verdict, classify_reply, render_command,
};
use crate::tools::executor::Executor;

use super::replay::{Recall, ReplayStore};

/// What became of one text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Handled {
    /// Not a reply with a call: nothing to do.
    Ignored,
    /// A result to hand back.
    Answered(Answer),
}

/// The result of one reply, with what the terminal line shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The call in slash form, or the attempted call of an invalid reply.
    pub command: String,
    /// Whether the result says `[ok] true`.
    pub ok: bool,
    /// The error code of a failure.
    pub code: Option<String>,
    /// The rendered result block.
    pub block: String,
    /// Bytes of the result body.
    pub body_bytes: usize,
    /// How long it took.
    pub duration: Duration,
    /// Answered from the replay store, not run.
    pub replayed: bool,
    /// The replay store could not be saved (the call ran; a restart might run it again).
    pub store_error: Option<String>,
}

/// Answers replies for one watch session.
pub struct Handler<'a> {
    /// Runs calls.
    pub executor: Executor<'a>,
    /// Calls already executed.
    pub replay: ReplayStore,
    /// Accept text around the call block.
    pub lenient: bool,
}

impl Handler<'_> {
    /// Handles one text.
    pub fn handle(&mut self, text: &str) -> Handled {
        let started = Instant::now();
        let parsed = parse_reply(text);
        if parsed.has_result_block() || parsed.call_blocks().next().is_none() {
            return Handled::Ignored;
        }
        let classification = classify_reply(
            text,
            ClassifyOptions {
                lenient: self.lenient,
                ..Default::default()
            },
        );
        let (command, block, replayed, store_error) = match classification.verdict {
            Verdict::None => return Handled::Ignored,
            Verdict::Invalid { error, attempt } => {
                let block = violation_result(&error, &attempt);
                (block.command.clone(), block, false, None)
            }
            Verdict::Call(call) => match self.replay.recall(&call) {
                Recall::Replay(text) => match ResultBlock::parse_rendered(&text) {
                    Ok(block) => (block.command.clone(), block, true, None),
                    Err(_) => return Handled::Ignored,
                },
                Recall::Conflict => {
                    let command = render_command(call.tool, &call.args);
                    let block = ResultBlock::failure(
                        call.id.clone(),
                        command.clone(),
                        ErrorCode::InvalidId.as_str(),
                        format!(
                            "call id {:?} was already used for a different call in this session",
                            call.id.as_deref().unwrap_or_default()
                        ),
                        Some("give every call a new id, e.g. the next call-NNN".into()),
                    );
                    (command, block, false, None)
                }
                Recall::New => {
                    let execution = self.executor.execute(&call);
                    let rendered = execution.block.render();
                    let store_error = self.replay.remember(&call, &rendered).err();
                    (
                        execution.command.clone(),
                        execution.block,
                        false,
                        store_error,
                    )
                }
            },
        };
        Handled::Answered(Answer {
            command,
            ok: block.ok,
            code: block.code.clone(),
            body_bytes: block.body.as_ref().map_or(0, String::len),
            block: block.render(),
            duration: started.elapsed(),
            replayed,
            store_error,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::{Roots, Sandbox};
    use crate::tools::Limits;
    use crate::tools::executor::{Approval, FixedApprover};
    use crate::tools::policy::Policy;

    #[test]
    fn calls_run_once_results_and_prose_are_ignored() {
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap();
        std::fs::write(root.join("log.txt"), "").unwrap();
        let sandbox = Sandbox::open(&Roots::resolve(std::slice::from_ref(&root)).unwrap()).unwrap();
        let policy = Policy::default();
        let mut approver = FixedApprover(Approval::Yes);
        let mut handler = Handler {
            executor: Executor {
                sandbox: &sandbox,
                policy: &policy,
                session: None,
                audit: None,
                limits: Limits::default(),
                approver: &mut approver,
            },
            replay: ReplayStore::in_memory(),
            lenient: false,
        };
        let append = format!(
            "```flycode-call\n{{\"id\":\"c1\",\"tool\":\"fs.write\",\"args\":{{\"path\":\"{}/log.txt\",\"mode\":\"append\",\"content\":\"x\"}}}}\n```",
            root.display()
        );
        for _ in 0..5 {
            assert!(matches!(handler.handle(&append), Handled::Answered(_)));
        }
        assert_eq!(
            std::fs::read_to_string(root.join("log.txt")).unwrap(),
            "x",
            "ran more than once"
        );
        let Handled::Answered(answer) = handler.handle(&append) else {
            panic!()
        };
        assert!(answer.replayed && answer.block.contains("[replayed] true"));
        assert_eq!(handler.handle("just prose"), Handled::Ignored);
        assert_eq!(
            handler.handle(&answer.block),
            Handled::Ignored,
            "its own result"
        );
        let Handled::Answered(invalid) = handler.handle("Sure!\n```flycode-call\n{}\n```") else {
            panic!()
        };
        assert_eq!(invalid.code.as_deref(), Some("text_outside_block"));
    }
}
