//! One copied (or dropped) reply in, one answer out: the logic both watch modes share.
//!
//! Text without a `flycode-call` block is ignored, and so is any text holding a
//! `flycode-result` block (the person copying a result to paste it back, or flycode's own
//! write), and a copy of flycode's chat prompt (its example calls are not calls). A reply with a
//! call block earns a result: the error result of an invalid reply, the stored result of a call
//! already executed (`[replayed] true`), or the result of running it.
//!
//! A call without its fence (a near miss, PROTOCOL.md §12 (Watching)) is never run: running
//! unfenced text would let any pasted text run tools. It earns a word on the terminal, and,
//! where the call is whole, an invalid-call answer asking the model to send it fenced.

use std::time::{Duration, Instant};

use crate::config::reply_limit::{ReplyTooLarge, check_reply_size};
use crate::protocol::parse::parse_reply;
use crate::protocol::prompt::is_chat_prompt;
use crate::protocol::salvage::{find_near_miss, legible_id};
use crate::protocol::verdict::violation_result_with_root;
use crate::protocol::{
    Call, ClassifyOptions, ErrorCode, ResultBlock, ToolSet, Verdict, classify_reply,
};
use crate::tools::executor::{Decided, Execution, Executor};
use crate::tools::fs::ls::human_size;

/// The info string that opens a call block: a text over the limit without it is no reply.
const CALL_INFO: &str = "flycode-call";

use super::replay::{Recall, ReplayStore};

/// What became of one text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Handled {
    /// Not a reply with a call: nothing to do.
    Ignored,
    /// A result to hand back.
    Answered(Box<Answer>),
    /// Nothing to hand back, but something the person should hear of (a call without its
    /// fence that cannot be answered, or was answered before).
    Noticed(Notice),
}

/// A word for the person about a text that looked like a call but was none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    /// What was seen, e.g. "a call in a ```json block, not ```flycode-call".
    pub seen: String,
    /// What to do about it.
    pub advice: String,
}

/// The result of one reply, with what the terminal line shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The call in slash form, or the attempted call of an invalid reply.
    pub command: String,
    /// The result's `[id]`.
    pub id: Option<String>,
    /// Whether the result says `[ok] true`.
    pub ok: bool,
    /// The error code of a failure.
    pub code: Option<String>,
    /// The rendered result block.
    pub block: String,
    /// Bytes of the result body.
    pub body_bytes: usize,
    /// How long it took, the wait for the person's answer left out (PROTOCOL.md §12 (Watching)).
    pub duration: Duration,
    /// How long the person took to answer the approval question.
    pub waited: Duration,
    /// Answered from the replay store, not run.
    pub replayed: bool,
    /// The replay store could not be saved (the call ran; a restart might run it again).
    pub store_error: Option<String>,
    /// The call's id was used before for a different call (a new conversation): it ran as new.
    pub reused_id: bool,
    /// What the person could do about a refusal (flags, configuration); not in the block.
    pub advice: Option<String>,
    /// The call's start line was shown (through [`Handler::on_start`]) before it ran.
    pub announced: bool,
    /// The id written in a call block whose JSON is broken: the answer's `[id]` cannot carry
    /// it (PROTOCOL.md §3 (The answer to an invalid reply)), the terminal names it.
    pub legible_id: Option<String>,
    /// Set when the answer is to a call without its fence: what was seen and what to do.
    pub near_miss: Option<Notice>,
    /// The change the call made (`c-42`), for the terminal line (PROTOCOL.md §16 (Undo and
    /// history)).
    pub change: Option<String>,
}

impl Answer {
    /// An answer not yet filled in by its block.
    pub(crate) fn empty() -> Answer {
        Answer {
            command: String::new(),
            id: None,
            ok: false,
            code: None,
            block: String::new(),
            body_bytes: 0,
            duration: Duration::ZERO,
            waited: Duration::ZERO,
            replayed: false,
            store_error: None,
            reused_id: false,
            advice: None,
            announced: false,
            legible_id: None,
            near_miss: None,
            change: None,
        }
    }
}

/// Answers replies for one watch session.
pub struct Handler<'a> {
    /// Runs calls.
    pub executor: Executor<'a>,
    /// Calls already executed.
    pub replay: ReplayStore,
    /// Accept text around the call block.
    pub lenient: bool,
    /// The tools a call may name.
    pub tools: ToolSet,
    /// The session's policy key (see [`policy_key`]): a refusal is replayed only under it.
    pub policy_key: String,
    /// The reply limit (`max_reply_bytes`): a larger text is answered `too_large`, unparsed.
    pub max_reply_bytes: usize,
    /// Hears of a valid call just before it runs (not of a replayed one): the terminal's start
    /// line and spinner.
    pub on_start: Option<&'a (dyn Fn(&Call) + Sync)>,
    /// The replies' dialect (PROTOCOL.md §15 (The tag dialect)).
    pub dialect: crate::protocol::dialect::Dialect,
    /// The tool and arguments of the calls of the last reply that failed: an exact repeat in
    /// the next reply is not run (seed 003, R5).
    pub failed_last: Vec<(
        crate::protocol::ToolName,
        serde_json::Map<String, serde_json::Value>,
    )>,
}

/// A key for everything that decides whether a call may run: roots, approval mode, `--yes`,
/// per-tool rules and protected paths. Two sessions with the same key refuse the same calls.
pub(crate) fn policy_key(
    roots: &[std::path::PathBuf],
    policy: &crate::tools::policy::Policy,
    yes: bool,
    protected: &[String],
) -> String {
    let described = format!("{roots:?}|{policy:?}|yes={yes}|{protected:?}");
    crate::sandbox::sha256_hex(described.as_bytes())
}

impl Handler<'_> {
    /// Handles one text.
    ///
    /// A text over the reply limit is not parsed (parsing takes up to 8 times its size): it is
    /// answered `too_large` if it names a call block at all, else ignored, as a large copy
    /// that has nothing to do with flycode must not have its clipboard replaced.
    pub fn handle(&mut self, text: &str) -> Handled {
        let started = Instant::now();
        if self.dialect == crate::protocol::dialect::Dialect::Tags {
            return self.handle_tags(text, started);
        }
        if let Err(too_large) = check_reply_size(text.len() as u64, self.max_reply_bytes) {
            if !text.contains(CALL_INFO) {
                return Handled::Ignored;
            }
            return self.refuse_too_large(&too_large, started);
        }
        let parsed = parse_reply(text);
        if parsed.has_result_block() || is_chat_prompt(text) {
            return Handled::Ignored;
        }
        if parsed.call_blocks().next().is_none() {
            return self.answer_near_miss(&parsed.text, started);
        }
        let classification = classify_reply(
            text,
            ClassifyOptions {
                lenient: self.lenient,
                tools: self.tools,
            },
        );
        let mut answer = Answer::empty();
        let block = match classification.verdict {
            Verdict::None => return Handled::Ignored,
            Verdict::Invalid { error, attempt } => {
                if attempt.id.is_none() && parsed.call_blocks().count() == 1 {
                    answer.legible_id = parsed.call_blocks().find_map(|b| legible_id(&b.content));
                }
                let root = self.executor.sandbox().roots().first();
                let root = root.map(|root| root.display().to_string());
                violation_result_with_root(&error, &attempt, root.as_deref())
            }
            Verdict::Call(call) => match self.run_or_replay(&call, &mut answer) {
                Some(mut block) => {
                    // Arguments given as null or "" and run without (PROTOCOL.md §3).
                    if let Some(warning) =
                        crate::protocol::verdict::unset_argument_warning(&classification.warnings)
                    {
                        block.fields.push(("warning".to_owned(), warning));
                    }
                    block
                }
                None => return Handled::Ignored,
            },
        };
        Handled::Answered(Box::new(self.finish(block, answer, started)))
    }

    /// The stored result of a call run before, else the result of running it (remembered).
    /// `None` for a stored result that no longer reads as a block.
    fn run_or_replay(&mut self, call: &Call, answer: &mut Answer) -> Option<ResultBlock> {
        match self.replay.recall(call, &self.policy_key) {
            Recall::Replay(text) => {
                let block = ResultBlock::parse_rendered(&text).ok()?;
                answer.replayed = true;
                Some(block)
            }
            Recall::New if self.repeats_failed(call) => Some(repeated_failed_call(
                call.id.clone(),
                crate::protocol::render_command(call.tool, &call.args),
            )),
            recall @ (Recall::New | Recall::ReusedId) => {
                answer.reused_id = recall == Recall::ReusedId;
                if let Some(on_start) = self.on_start {
                    on_start(call);
                    answer.announced = true;
                }
                let execution = self.executor.execute(call);
                self.failed_last.clear();
                self.note_failure(call, &execution.block);
                answer.waited = execution.waited;
                answer.change.clone_from(&execution.change);
                let rendered = execution.block.render();
                answer.advice = execution.advice().map(str::to_owned);
                answer.store_error = self
                    .remember(call, &execution, &rendered)
                    .err()
                    .map(|error| error.to_string());
                Some(execution.block)
            }
        }
    }

    /// `answer` completed from `block`, masked as it leaves, whoever made it (PROTOCOL.md §9
    /// (Secrets and masking)).
    fn finish(&self, mut block: ResultBlock, mut answer: Answer, started: Instant) -> Answer {
        self.executor.limits().secrets().mask_block(&mut block);
        answer.command.clone_from(&block.command);
        answer.id.clone_from(&block.id);
        answer.ok = block.ok;
        answer.code.clone_from(&block.code);
        answer.body_bytes = block.body.as_ref().map_or(0, String::len);
        answer.block = block.render();
        answer.duration = started.elapsed().saturating_sub(answer.waited);
        answer
    }

    /// A text with no call block that may still hold a call without its fence (PROTOCOL.md §12
    /// (Watching)). Never run; answered `text_outside_block` when the call is whole and was not
    /// answered before (its fenced copy ran: "not run" would be false), else only noticed. The
    /// answer is not remembered, so the fenced call that follows runs.
    fn answer_near_miss(&self, text: &str, started: Instant) -> Handled {
        let Some(miss) = find_near_miss(text) else {
            return Handled::Ignored;
        };
        let notice = Notice {
            seen: miss.seen(),
            advice: miss.advice().to_owned(),
        };
        let (Some(call), Some(block)) = (&miss.call, miss.result()) else {
            return Handled::Noticed(notice);
        };
        if let Recall::Replay(_) = self.replay.recall(call, &self.policy_key) {
            let id = call.id.as_deref().unwrap_or_default();
            return Handled::Noticed(Notice {
                advice: format!(
                    "call {id} was answered before: nothing to do (its result was on the clipboard or in its result file)"
                ),
                ..notice
            });
        }
        let answer = Answer {
            near_miss: Some(notice),
            ..Answer::empty()
        };
        Handled::Answered(Box::new(self.finish(block, answer, started)))
    }

    /// The answer to a reply over the reply limit (also for an inbox file not read because of
    /// its size): the `too_large` block, and for the terminal the size and the setting to raise.
    pub fn refuse_too_large(&self, too_large: &ReplyTooLarge, started: Instant) -> Handled {
        let block = too_large.result_block();
        let size = too_large
            .size
            .map_or_else(String::new, |size| format!(" of {}", human_size(size)));
        Handled::Answered(Box::new(Answer {
            command: format!("(a reply{size}, over max_reply_bytes: not read)"),
            id: block.id.clone(),
            code: block.code.clone(),
            block: block.render(),
            duration: started.elapsed(),
            advice: Some(too_large.advice()),
            ..Answer::empty()
        }))
    }

    /// A reply in the tag dialect (PROTOCOL.md §15 (The tag dialect: doors)): its tool tags
    /// run in order and answered together, a violation answered, prose, a `<return>` and a text
    /// holding a result tag (a result copied back, or flycode's own) ignored. Tags carry no ids:
    /// the reply is the key, and a tag of a reply answered before is replayed, not run again
    /// ([`ReplayStore::recall_tag`]).
    fn handle_tags(&mut self, text: &str, started: Instant) -> Handled {
        use crate::protocol::tags::{TagResult, TagVerdict, read_tags};
        if let Err(too_large) = check_reply_size(text.len() as u64, self.max_reply_bytes) {
            if !["<bash_call", "<builtin", "<create_agent"]
                .iter()
                .any(|tag| text.contains(tag))
            {
                return Handled::Ignored;
            }
            let result = TagResult::failure(
                "reply",
                ErrorCode::TooLarge,
                &too_large.to_string(),
                "Send a shorter reply; write large content in parts (smart_edit with mode: Append).",
            );
            let answer = Answer {
                command: "(a reply over max_reply_bytes: not read)".into(),
                code: Some(ErrorCode::TooLarge.as_str().into()),
                advice: Some(too_large.advice()),
                ..Answer::empty()
            };
            return Handled::Answered(Box::new(finish_text(result.render(), answer, started)));
        }
        let secrets = self.executor.limits().secrets();
        let (text, mut answer) = match read_tags(text) {
            TagVerdict::None | TagVerdict::Return(_) => return Handled::Ignored,
            TagVerdict::Invalid(violation) if violation.code == ErrorCode::ForgedResult => {
                return Handled::Ignored;
            }
            TagVerdict::Invalid(violation) => {
                let answer = Answer {
                    command: "(a reply that runs nothing)".into(),
                    code: Some(violation.code.as_str().into()),
                    ..Answer::empty()
                };
                let shown =
                    crate::tags::render_answers(&[&TagResult::violation(&violation)], &secrets);
                (shown, answer)
            }
            // A last `<return>` ends no agent here: the tags before it run.
            TagVerdict::Tags(tags) | TagVerdict::TagsThenReturn(tags, _) => {
                self.run_tags(&tags, &super::replay::reply_key(text))
            }
        };
        answer.command = secrets.mask(&answer.command).into_owned();
        Handled::Answered(Box::new(finish_text(text, answer, started)))
    }

    /// Runs a reply's tool tags in order, each replayed instead when this reply's tag was
    /// answered before; their results, rendered and masked, and the terminal's line.
    fn run_tags(&mut self, tags: &[crate::protocol::tags::Tag], reply: &str) -> (String, Answer) {
        let secrets = self.executor.limits().secrets();
        let mut answer = Answer::empty();
        let (mut shown, mut names) = (Vec::new(), Vec::new());
        let mut replayed = 0;
        let failed_before = std::mem::take(&mut self.failed_last);
        answer.ok = true;
        for (index, tag) in tags.iter().enumerate() {
            let place = index + 1;
            if let Some(stored) = self.replay.recall_tag(reply, place, &self.policy_key) {
                replayed += 1;
                answer.ok &= is_ok_result(&stored);
                shown.push(stored);
                names.push(tag.kind.name().to_owned());
                continue;
            }
            let door = crate::tags::TagDoor::new(&self.executor);
            let one = match door.plan(tag, &format!("tag-{place}")) {
                crate::tags::TagStep::Run { call, shape } => {
                    let repeated = failed_before
                        .iter()
                        .any(|(tool, args)| *tool == call.tool && *args == call.args);
                    let one = if repeated {
                        shape.refused(&repeated_failed_tag())
                    } else {
                        shape.finish(self.executor.execute(&call))
                    };
                    if !one.ok
                        && one
                            .result
                            .body
                            .lines()
                            .all(|line| line != "[code] cancelled")
                    {
                        self.failed_last.push((call.tool, call.args.clone()));
                    }
                    one
                }
                step => door.run(step),
            };
            let rendered = crate::tags::render_answers(&[&one.result], &secrets);
            answer.ok &= one.ok;
            match &one.execution {
                Some(execution) => {
                    names.push(execution.command.clone());
                    answer.waited += execution.waited;
                    if answer.code.is_none() {
                        answer.code.clone_from(&execution.block.code);
                    }
                    if answer.advice.is_none() {
                        answer.advice = execution.advice().map(str::to_owned);
                    }
                }
                None => names.push(one.result.tag.name().to_owned()),
            }
            let stored = match one
                .execution
                .as_ref()
                .map(|e| (e.decided, policy_dependent(e), e.tool))
            {
                // A tag that only reads runs again when copied again (PROTOCOL.md §12
                // (Watching), "Replay").
                Some((_, _, tool)) if crate::tools::registry::is_read_only(tool) => Ok(()),
                Some((Decided::Unanswered, _, _)) => Ok(()),
                Some((_, true, _)) => {
                    let policy = Some(self.policy_key.as_str());
                    self.replay.remember_tag(reply, place, &rendered, policy)
                }
                _ => self.replay.remember_tag(reply, place, &rendered, None),
            };
            if let Err(error) = stored {
                answer.store_error.get_or_insert(error.to_string());
            }
            shown.push(rendered);
        }
        answer.replayed = replayed > 0 && replayed == tags.len();
        answer.command = names.join("; ");
        (shown.join("\n"), answer)
    }

    /// Whether `call` repeats exactly a call of the last reply that failed.
    fn repeats_failed(&self, call: &Call) -> bool {
        self.failed_last
            .iter()
            .any(|(tool, args)| *tool == call.tool && *args == call.args)
    }

    /// Keeps `call` for the next reply's R5 check when its result failed (not when the person
    /// stopped it).
    fn note_failure(&mut self, call: &Call, block: &ResultBlock) {
        if !block.ok && block.code.as_deref() != Some(ErrorCode::Cancelled.as_str()) {
            self.failed_last.push((call.tool, call.args.clone()));
        }
    }

    /// Stores what a call earned: a result that ran for good; a refusal only under this
    /// session's policy; a refusal nobody could answer not at all.
    fn remember(
        &mut self,
        call: &Call,
        execution: &Execution,
        rendered: &str,
    ) -> Result<(), crate::sandbox::state::StateError> {
        match execution.decided {
            Decided::Unanswered => Ok(()),
            _ if policy_dependent(execution) => {
                self.replay.remember(call, rendered, Some(&self.policy_key))
            }
            _ => self.replay.remember(call, rendered, None),
        }
    }
}

/// The answer to a call that repeats exactly one whose result just failed (seed 003, R5).
fn repeated_failed_call(id: Option<String>, command: String) -> ResultBlock {
    ResultBlock::failure(
        id,
        command,
        ErrorCode::RepeatedFailedCall,
        "not run: this call repeats exactly (same tool, equal arguments) the call whose result just failed".to_owned(),
        Some("correct what the error said (other arguments), or ask the user; do not send the same failing call again".to_owned()),
    )
}

/// [`repeated_failed_call`] in the tag form.
fn repeated_failed_tag() -> crate::protocol::tags::TagError {
    crate::protocol::tags::TagError::new(
        ErrorCode::RepeatedFailedCall,
        "not run: this repeats exactly the call whose result just failed".into(),
        "Correct what the error said, or ask the user; do not send the same failing call again."
            .into(),
    )
}

/// Whether what a call earned says only that this session's policy refused it (nothing ran):
/// remembered under the policy's key, so another policy runs it.
fn policy_dependent(execution: &Execution) -> bool {
    execution.decided == Decided::Refused
        || execution
            .error
            .as_ref()
            .is_some_and(|e| matches!(e.code, ErrorCode::DeniedByPolicy | ErrorCode::OutsideRoots))
}

/// Whether a stored result tag reports success: by its opening tag, `ok=true`, or for a
/// `<bash_call_result>` the exit code 0.
fn is_ok_result(stored: &str) -> bool {
    let open = stored.lines().next().unwrap_or_default();
    if open.starts_with("<bash_call_result") {
        open.contains(" exit_code=0 ")
    } else {
        !open.contains(" ok=false")
    }
}
/// Completes `answer` with rendered text that is already masked (the tag dialect's results).
fn finish_text(text: String, mut answer: Answer, started: Instant) -> Answer {
    answer.body_bytes = text.len();
    answer.block = text;
    answer.duration = started.elapsed().saturating_sub(answer.waited);
    answer
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // fixtures are made directly, outside the sandbox
mod tests {
    use super::*;
    use crate::sandbox::{Roots, Sandbox};
    use crate::tools::executor::{Approval, FixedApprover};
    use crate::tools::policy::Policy;

    #[test]
    fn calls_run_once_results_and_prose_are_ignored() {
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap();
        std::fs::write(root.join("log.txt"), "").unwrap();
        let sandbox = Sandbox::open(&Roots::resolve(std::slice::from_ref(&root)).unwrap()).unwrap();
        let policy = Policy::default();
        let approver = FixedApprover(Approval::Yes);
        let mut handler = Handler {
            executor: Executor::new(&sandbox, &policy, &approver),
            replay: ReplayStore::in_memory(),
            lenient: false,
            tools: ToolSet::Seed,
            policy_key: String::new(),
            max_reply_bytes: 16 << 20,
            on_start: None,
            dialect: crate::protocol::dialect::Dialect::Flycode,
            failed_last: Vec::new(),
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

    #[test]
    fn a_near_miss_is_answered_not_run_not_remembered_and_only_noticed_once_it_ran() {
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap();
        std::fs::write(root.join("log.txt"), "").unwrap();
        let sandbox = Sandbox::open(&Roots::resolve(std::slice::from_ref(&root)).unwrap()).unwrap();
        let policy = Policy::default();
        let approver = FixedApprover(Approval::Yes);
        let started = std::sync::atomic::AtomicUsize::new(0);
        let on_start = |_: &Call| {
            started.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        };
        let mut handler = Handler {
            executor: Executor::new(&sandbox, &policy, &approver),
            replay: ReplayStore::in_memory(),
            lenient: false,
            tools: ToolSet::Seed,
            policy_key: String::new(),
            max_reply_bytes: 16 << 20,
            on_start: Some(&on_start),
            dialect: crate::protocol::dialect::Dialect::Flycode,
            failed_last: Vec::new(),
        };
        let json = format!(
            "{{\"id\":\"c1\",\"tool\":\"fs.write\",\"args\":{{\"path\":\"{}/log.txt\",\"mode\":\"append\",\"content\":\"x\"}}}}",
            root.display()
        );
        let unfenced = format!("```json\n{json}\n```");
        let Handled::Answered(answer) = handler.handle(&unfenced) else {
            panic!("not answered")
        };
        assert_eq!(answer.code.as_deref(), Some("text_outside_block"));
        assert_eq!(answer.id.as_deref(), Some("c1"));
        assert!(answer.near_miss.is_some() && !answer.announced);
        assert!(handler.replay.is_empty(), "the near miss was remembered");
        assert_eq!(std::fs::read_to_string(root.join("log.txt")).unwrap(), "");
        // The fenced call runs (announced first), then its unfenced copy is only noticed.
        let Handled::Answered(ran) = handler.handle(&format!("```flycode-call\n{json}\n```"))
        else {
            panic!("not answered")
        };
        assert!(ran.ok && ran.announced && !ran.replayed, "{}", ran.block);
        assert_eq!(started.load(std::sync::atomic::Ordering::SeqCst), 1);
        let Handled::Noticed(notice) = handler.handle(&unfenced) else {
            panic!("answered twice")
        };
        assert!(notice.advice.contains("answered before"), "{notice:?}");
        assert_eq!(std::fs::read_to_string(root.join("log.txt")).unwrap(), "x");
        // A broken block's id is read for the terminal; its answer keeps flycode-invalid-call.
        let Handled::Answered(broken) =
            handler.handle("```flycode-call\n{\"id\":\"c7\",\"tool\":\"fs.read\",}\n```")
        else {
            panic!("not answered")
        };
        assert_eq!(broken.id.as_deref(), Some("flycode-invalid-call"));
        assert_eq!(broken.legible_id.as_deref(), Some("c7"));
    }

    #[test]
    fn a_text_over_the_limit_is_refused_unparsed_if_it_names_a_call_block() {
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap();
        let sandbox = Sandbox::open(&Roots::resolve(std::slice::from_ref(&root)).unwrap()).unwrap();
        let policy = Policy::default();
        let approver = FixedApprover(Approval::Yes);
        let mut handler = Handler {
            executor: Executor::new(&sandbox, &policy, &approver),
            replay: ReplayStore::in_memory(),
            lenient: false,
            tools: ToolSet::Seed,
            policy_key: String::new(),
            max_reply_bytes: 1024,
            on_start: None,
            dialect: crate::protocol::dialect::Dialect::Flycode,
            failed_last: Vec::new(),
        };
        let call = format!(
            "```flycode-call\n{{\"id\":\"c1\",\"tool\":\"fs.write\",\"args\":{{\"path\":\"{}/a.txt\",\"mode\":\"overwrite\",\"content\":\"{}\"}}}}\n```",
            root.display(),
            "a".repeat(2000)
        );
        let Handled::Answered(answer) = handler.handle(&call) else {
            panic!("not answered")
        };
        assert_eq!(answer.code.as_deref(), Some("too_large"));
        assert!(
            answer
                .block
                .contains(&format!("the reply is {} bytes", call.len()))
        );
        assert!(answer.advice.unwrap().contains("max_reply_bytes"));
        assert!(!root.join("a.txt").exists(), "the call ran");
        // A large copy that is no reply (a log, a document) is left alone.
        assert_eq!(handler.handle(&"log line\n".repeat(500)), Handled::Ignored);
        // At the limit, the same call is read and run.
        handler.max_reply_bytes = call.len();
        let Handled::Answered(answer) = handler.handle(&call) else {
            panic!("not answered")
        };
        assert!(answer.ok, "{}", answer.block);
    }
}
