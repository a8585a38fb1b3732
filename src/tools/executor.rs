//! Running one validated call from start to finish: policy (and the person's approval), the
//! stale-read guard, the tool, the session's memory, the audit log, and the result block.
//!
//! One executor serves every caller, also several at once: it is `Send + Sync` and runs calls
//! through `&self`. The session's memory is behind a lock, and the person is asked one question
//! at a time and the audit log appended one line at a time across the whole process (every
//! executor shares one terminal: a parent's and its sub-agents' alike), so concurrent read-only
//! calls (PROTOCOL.md §13 (The API loop: parallel calls)) share it safely. Everything it needs to know about a tool it asks the tool ([`super::registry`]).

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Instant, SystemTime};

pub use super::approval::{
    Approval, Approver, Decider, FixedApprover, Question, Remembered, show_whole_call,
};
use super::policy::{Decision, Policy};
use super::registry::Invocation;
use super::secrets::Secrets;
use super::tool::{Notebook, RegisteredTool, SessionChange, TaskRunner, ToolContext, failure_line};
use super::{Limits, ToolError, ToolOutput};
use crate::protocol::{Call, ErrorCode, ResultBlock, ToolName, render_command};
use crate::sandbox::{AuditEntry, AuditLog, LastComponent, Sandbox, Session};

/// What running a call produced.
#[derive(Debug)]
pub struct Execution {
    /// The call's id.
    pub id: Option<String>,
    /// The tool.
    pub tool: ToolName,
    /// The call in slash form.
    pub command: String,
    /// The tool's output, when it succeeded, without its body: that has moved into `block`.
    pub output: Option<ToolOutput>,
    /// The error, when it failed.
    pub error: Option<ToolError>,
    /// The rendered answer.
    pub block: ResultBlock,
    /// What it did, in one line for the terminal (the tool's summary).
    pub summary: String,
    /// Why the audit log could not be written, if it could not.
    pub audit_error: Option<String>,
    /// Whether it ran, or who refused it.
    pub decided: Decided,
}

/// Whether a call ran, or why not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decided {
    /// Policy (and the person, where asked) let it run; it succeeded or failed on its own.
    Ran,
    /// Policy or the person refused it: the result depends on the session's policy.
    Refused,
    /// It needed a person's yes and nobody could answer: the result says nothing about the
    /// call, so a watcher must not remember it.
    Unanswered,
}

/// A call that did not get to run, and who decided.
struct Refusal {
    error: ToolError,
    decided: Decided,
    by: Decider,
}

impl Execution {
    /// Whether the call succeeded.
    pub fn is_ok(&self) -> bool {
        self.block.ok
    }

    /// What the person at the terminal could do about a failure (never sent to the model).
    pub fn advice(&self) -> Option<&str> {
        self.error.as_ref().and_then(|e| e.advice.as_deref())
    }
}

/// Runs calls against one sandbox and policy.
pub struct Executor<'a> {
    /// The sandbox.
    pub sandbox: &'a Sandbox,
    /// The approval policy.
    pub policy: &'a Policy,
    /// The stale-read guard's memory, where the caller keeps one.
    pub session: Option<&'a Mutex<Session>>,
    /// Where executed calls are logged.
    pub audit: Option<AuditLog>,
    /// Output cap and default timeout.
    pub limits: Limits,
    /// Asks the person.
    pub approver: &'a dyn Approver,
    /// The agent's TODO list and notes, where `agent.todo` and `agent.note` exist (`flycode run`).
    pub notebook: Option<&'a dyn Notebook>,
    /// Runs `agent.task` (the main agent of `flycode run` only).
    pub tasks: Option<&'a dyn TaskRunner>,
    /// The only tools this executor runs (a sub-agent's), whatever the call says.
    pub restriction: Option<Restriction>,
}

/// The only tools an executor runs, and what its refusal of any other says: a sub-agent's
/// executor runs only the read-only tools (PROTOCOL.md §13 (The API loop: sub-agents)), so a sub-agent is read-only by
/// construction, not only by the tools it is offered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Restriction {
    /// The tools that run.
    pub tools: &'static [ToolName],
    /// Why the others do not, e.g. "sub-agents are read-only".
    pub reason: &'static str,
    /// What the model should do instead.
    pub hint: &'static str,
}

/// One question to the person at a time, in the whole process: there is one terminal, and
/// every executor (the main agent's, each sub-agent's, each MCP call's) shares it.
static ASKING: Mutex<()> = Mutex::new(());

/// One audit-log line at a time, in the whole process.
static LOGGING: Mutex<()> = Mutex::new(());

impl<'a> Executor<'a> {
    /// An executor with no session memory, no audit log, the default limits and no notebook:
    /// what a one-off caller (a test, a benchmark) needs; set the fields it wants otherwise.
    pub fn new(
        sandbox: &'a Sandbox,
        policy: &'a Policy,
        approver: &'a dyn Approver,
    ) -> Executor<'a> {
        Executor {
            sandbox,
            policy,
            session: None,
            audit: None,
            limits: Limits::default(),
            approver,
            notebook: None,
            tasks: None,
            restriction: None,
        }
    }

    /// Runs `call` and renders its result block.
    pub fn execute(&self, call: &Call) -> Execution {
        match Invocation::new(call) {
            Ok(invocation) => self.execute_invocation(&invocation),
            // Arguments the schema let through but the tool cannot read (a schema bug).
            Err(error) => {
                let command = render_command(call.tool, &call.args);
                self.conclude(
                    call,
                    command,
                    Instant::now(),
                    Err(error),
                    (Decided::Ran, None),
                    None,
                )
            }
        }
    }

    /// Runs a call its tool has already read (the loop reads each call once, for its display
    /// and its run) and renders its result block.
    pub fn execute_invocation(&self, invocation: &Invocation<'_>) -> Execution {
        let call = invocation.call;
        let started = Instant::now();
        let command = render_command(call.tool, &call.args);
        let (result, decided, by) = match self.permit(invocation, &command) {
            Err(refusal) => (Err(refusal.error), refusal.decided, refusal.by),
            Ok(by) => {
                let result = self.check_stale(invocation).and_then(|()| {
                    invocation.bound.run(&ToolContext {
                        sandbox: self.sandbox,
                        limits: &self.limits,
                        notebook: self.notebook,
                        tasks: self.tasks,
                        call_id: call.id.as_deref(),
                    })
                });
                if let Ok(output) = &result {
                    self.update_session(invocation, output);
                }
                (result, Decided::Ran, by)
            }
        };
        self.conclude(
            call,
            command,
            started,
            result,
            (decided, Some(by)),
            Some(invocation.tool()),
        )
    }

    /// Logs what became of a call and renders its result block. flycode's secrets are masked
    /// first (PROTOCOL.md §9 (Secrets and masking)), in the result, in the call as logged and shown, and
    /// in the finished block (its id too), so no value of one reaches the model, a transcript or
    /// the audit log. `decided` comes with who decided, where known (the audit log's `approval`).
    fn conclude(
        &self,
        call: &Call,
        command: String,
        started: Instant,
        mut result: Result<ToolOutput, ToolError>,
        (decided, by): (Decided, Option<Decider>),
        tool: Option<&'static dyn RegisteredTool>,
    ) -> Execution {
        let secrets = self.limits.secrets();
        secrets.mask_result(&mut result);
        let command = secrets.mask(&command).into_owned();
        let mut audit_error = None;
        if let Some(audit) = &self.audit {
            let outcome = match (&result, decided) {
                (Ok(_), _) => "ok",
                (Err(_), Decided::Ran) => "failed",
                (Err(_), Decided::Refused | Decided::Unanswered) => "denied",
            };
            let code = result.as_ref().err().map(|e| e.code);
            audit_error =
                log_call(audit, &secrets, call, outcome, code, started.elapsed(), by).err();
        }
        let (block, summary) = match &mut result {
            Ok(output) => {
                let summary = tool.map(|tool| tool.summary(output)).unwrap_or_default();
                // Moved, not copied: a 1 MB read's body is in the block from here on.
                let mut block =
                    ResultBlock::success(call.id.clone(), command.clone(), output.body.take());
                block.fields = output.fields.clone();
                let block = block.capped(self.limits.output_cap, output.continue_hint.as_deref());
                (block, summary)
            }
            Err(error) => {
                let mut block = ResultBlock::failure(
                    call.id.clone(),
                    command.clone(),
                    error.code,
                    error.message.clone(),
                    error.hint.clone(),
                );
                // A program's output matters most when it failed.
                if let Some(output) = &error.output {
                    block.fields = output.fields.clone();
                    block.body = output.body.clone();
                    block = block.capped(self.limits.output_cap, output.continue_hint.as_deref());
                }
                let summary = tool
                    .and_then(|tool| tool.failure_summary(error.code, error.output.as_deref()))
                    .unwrap_or_else(|| failure_line(error.code.as_str(), &error.message));
                (block, summary)
            }
        };
        let (output, error) = match result {
            Ok(output) => (Some(output), None),
            Err(error) => (None, Some(error)),
        };
        let mut block = block;
        secrets.mask_block(&mut block);
        let summary = secrets.mask(&summary).into_owned();
        Execution {
            id: block.id.clone(),
            tool: call.tool,
            command,
            output,
            error,
            block,
            summary,
            audit_error,
            decided,
        }
    }

    /// Policy first, then the person where policy asks.
    fn permit(&self, invocation: &Invocation<'_>, command: &str) -> Result<Decider, Refusal> {
        let call = invocation.call;
        let effects = invocation.effects();
        let resolved: Vec<PathBuf> = effects
            .changed()
            .filter_map(|input| self.sandbox.resolve(input, LastComponent::Follow).ok())
            .map(|path| path.absolute)
            .collect();
        let refused = |error: ToolError| Refusal {
            error,
            decided: Decided::Refused,
            by: Decider::Policy,
        };
        if let Some(restriction) = &self.restriction
            && !restriction.tools.contains(&call.tool)
        {
            let tools: Vec<&str> = restriction.tools.iter().map(|t| t.as_str()).collect();
            return Err(refused(ToolError::new(
                ErrorCode::DeniedByPolicy,
                format!(
                    "{} was not run: {}; the tools that run here are {}",
                    call.tool,
                    restriction.reason,
                    tools.join(", ")
                ),
                Some(restriction.hint),
            )));
        }
        let (reason, in_person) = match self.policy.decide_invocation(invocation, &resolved) {
            Decision::Run => return Ok(Decider::Policy),
            Decision::Deny { reason, advice } => {
                return Err(refused(
                    ToolError::new(
                        ErrorCode::DeniedByPolicy,
                        format!("{} was not run: {reason}", call.tool),
                        Some("ask the user to change the policy, or do without this call"),
                    )
                    .with_advice(advice),
                ));
            }
            Decision::Ask { reason, in_person } => (reason, in_person),
        };
        let shown = show_whole_call(invocation, command, &self.limits);
        let secrets = self.limits.secrets();
        let preview = super::preview::write_preview(call, self.sandbox, &secrets);
        let question = Question {
            call,
            judged_as: invocation.bound.judged_as(),
            shown: &shown,
            reason: &reason,
            in_person,
            preview: preview.as_deref(),
            secrets: &secrets,
        };
        let answer = {
            let _one_question_at_a_time = lock(&ASKING);
            self.approver.ask(&question)
        };
        match answer {
            Approval::Yes => Ok(Decider::Person),
            Approval::Assumed => Ok(Decider::YesFlag),
            Approval::Remembered(Remembered::Tool) => Ok(Decider::SessionTool),
            Approval::Remembered(Remembered::Command) => Ok(Decider::SessionCommand),
            Approval::No => Err(Refusal {
                by: Decider::Declined,
                ..refused(ToolError::new(
                    ErrorCode::DeniedByPolicy,
                    format!("the user declined {}", call.tool),
                    Some("ask the user what to do instead"),
                ))
            }),
            // Nothing was said about the call itself: like a question nobody answered, it is not
            // remembered as this call's answer (a watcher asks again next time).
            Approval::Interrupted => Err(Refusal {
                error: ToolError::new(
                    ErrorCode::DeniedByPolicy,
                    format!(
                        "the user stopped flycode (Ctrl-C) when asked about {}; it was not run",
                        call.tool
                    ),
                    Some("the user stopped this session; nothing more will run in it"),
                ),
                decided: Decided::Unanswered,
                by: Decider::Interrupted,
            }),
            Approval::Unavailable if in_person => Err(Refusal {
                error: ToolError::new(
                    ErrorCode::DeniedByPolicy,
                    format!(
                        "{} needs the user's approval at the terminal ({reason}), and no one was there to give it",
                        call.tool
                    ),
                    Some(
                        "only the user can allow this call, in person; do without it, or ask the user to make the change",
                    ),
                )
                .with_advice(self.approver.unanswered_advice(true)),
                decided: Decided::Unanswered,
                by: Decider::Unanswered,
            }),
            Approval::Unavailable => Err(Refusal {
                error: ToolError::new(
                    ErrorCode::DeniedByPolicy,
                    format!(
                        "{} needs the user's approval ({reason}), and no one was at the terminal to give it",
                        call.tool
                    ),
                    Some(
                        "tell the user what you want to run and why, and wait for them to allow it; or do without this call",
                    ),
                )
                .with_advice(self.approver.unanswered_advice(false)),
                decided: Decided::Unanswered,
                by: Decider::Unanswered,
            }),
        }
    }

    /// A file the model read that changed since may not be changed without expectedSha256.
    fn check_stale(&self, invocation: &Invocation<'_>) -> Result<(), ToolError> {
        let Some(session) = self.session else {
            return Ok(());
        };
        for input in invocation.bound.guarded_paths() {
            let Ok(path) = self.sandbox.resolve(input, LastComponent::Follow) else {
                continue;
            };
            let (seen, distrusted) = {
                let session = lock(session);
                let seen = session.remembered(&path.absolute).map(str::to_owned);
                (seen, session.is_distrusted())
            };
            let Some(seen) = seen else {
                // The session's memory was lost (its file was not flycode's): an existing file
                // it cannot vouch for must be read again first.
                if distrusted && path.exists && self.current_hash(input).is_some() {
                    return Err(ToolError::new(
                        ErrorCode::StaleFile,
                        format!(
                            "{input} may have changed since it was read: this session's memory of earlier reads could not be trusted and was dropped"
                        ),
                        Some(
                            "read it again first (or pass expectedSha256 with the current hash, where the tool takes one)",
                        ),
                    ));
                }
                continue;
            };
            let current = self
                .current_hash(input)
                .unwrap_or_else(|| "(missing)".to_owned());
            if current != seen {
                return Err(ToolError::new(
                    ErrorCode::StaleFile,
                    format!("{input} changed since it was read: its sha256 is now {current}"),
                    Some(
                        "read it again, or pass expectedSha256 with the current hash to change it anyway",
                    ),
                ));
            }
        }
        Ok(())
    }

    fn current_hash(&self, input: &str) -> Option<String> {
        let mut file = self.sandbox.open_for_reading(input).ok()?;
        crate::sandbox::content_hash::current_sha256(&mut file).ok()
    }

    fn update_session(&self, invocation: &Invocation<'_>, output: &ToolOutput) {
        let Some(session) = self.session else {
            return;
        };
        let resolved = |input: &str| -> Option<PathBuf> {
            self.sandbox
                .resolve(input, LastComponent::Follow)
                .ok()
                .map(|p| p.absolute)
        };
        for change in invocation.bound.session_changes(output) {
            match change {
                SessionChange::Read(input) => {
                    if let (Some(path), Some(hash)) = (resolved(input), self.current_hash(input)) {
                        lock(session).remember(&path, &hash);
                    }
                }
                SessionChange::Wrote(input, hash) | SessionChange::Saw(input, hash) => {
                    if let Some(path) = resolved(&input) {
                        lock(session).remember(&path, &hash);
                    }
                }
                // PROTOCOL.md §10 (Stale-read guard): an append carries what the session knew
                // forward; it never makes the session know a file it did not.
                SessionChange::Appended(input, hash) => {
                    if let Some(path) = resolved(&input) {
                        let mut session = lock(session);
                        if session.remembered(&path).is_some() {
                            session.remember(&path, &hash);
                        }
                    }
                }
                // A missing last component still resolves, to the name it had.
                SessionChange::Forget(input) => {
                    if let Some(path) = resolved(input) {
                        lock(session).forget(&path);
                    }
                }
            }
        }
    }
}

/// Appends what became of `call` to the audit log, its arguments as [`crate::sandbox::audit::logged_args`]
/// shows them and every field masked (PROTOCOL.md §9 (Secrets and masking)): the one way a call reaches
/// the log, for the executor and for the refusals the MCP server decides itself. `by` says who
/// let it run or refused it (`approval`), where that is known. Why the log could not be written,
/// if it could not.
pub fn log_call(
    audit: &AuditLog,
    secrets: &Secrets,
    call: &Call,
    outcome: &'static str,
    code: Option<ErrorCode>,
    duration: std::time::Duration,
    by: Option<Decider>,
) -> Result<(), String> {
    let args = crate::sandbox::audit::logged_args(&call.args, &|text| secrets.mask(text));
    let entry = AuditEntry {
        time: SystemTime::now(),
        id: call.id.clone(),
        tool: call.tool.as_str().to_owned(),
        args,
        outcome,
        code: code.map(|code| code.as_str().to_owned()),
        duration,
        approval: by.map(Decider::as_str),
    };
    let _one_line_at_a_time = lock(&LOGGING);
    // A log that cannot be written must not hide the call's own outcome.
    audit
        .append(&entry, secrets)
        .map_err(|error| format!("audit log {}: {error}", audit.path().display()))
}

/// The lock's data, also after a thread panicked while holding it (what it guards stays valid:
/// a session's map, nothing at all).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // fixtures are made directly, outside the sandbox
mod tests {
    use super::*;
    use crate::sandbox::sha256_hex;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn one_executor_can_serve_several_threads() {
        assert_send_sync::<Executor<'static>>();
    }

    /// Counts how many questions are open at once, holding each open a moment.
    struct CountingApprover {
        open: std::sync::atomic::AtomicUsize,
        most: std::sync::atomic::AtomicUsize,
    }

    impl Approver for CountingApprover {
        fn approve(&self, _shown: &str, _reason: &str) -> Approval {
            use std::sync::atomic::Ordering::SeqCst;
            let now = self.open.fetch_add(1, SeqCst) + 1;
            self.most.fetch_max(now, SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(30));
            self.open.fetch_sub(1, SeqCst);
            Approval::No
        }
    }

    #[test]
    fn executors_on_several_threads_ask_one_question_at_a_time() {
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap();
        let sandbox =
            Sandbox::open(&crate::sandbox::Roots::resolve(std::slice::from_ref(&root)).unwrap())
                .unwrap();
        let policy = Policy {
            approval: super::super::policy::Approval::Ask,
            ..Policy::default()
        };
        let approver = CountingApprover {
            open: 0.into(),
            most: 0.into(),
        };
        let call = Call {
            id: None,
            tool: ToolName::FsRm,
            args: serde_json::json!({"path": root.join("a.txt")})
                .as_object()
                .cloned()
                .unwrap(),
        };
        // Separate executors (as a parent and its sub-agents have): one terminal all the same.
        std::thread::scope(|threads| {
            for _ in 0..4 {
                threads.spawn(|| Executor::new(&sandbox, &policy, &approver).execute(&call));
            }
        });
        assert_eq!(approver.most.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[test]
    fn a_read_and_a_write_remember_and_a_remove_forgets() {
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap();
        std::fs::write(root.join("a.txt"), "one").unwrap();
        let sandbox =
            Sandbox::open(&crate::sandbox::Roots::resolve(std::slice::from_ref(&root)).unwrap())
                .unwrap();
        let policy = Policy {
            approval: super::super::policy::Approval::Auto,
            ..Policy::default()
        };
        let session = Mutex::new(Session::in_memory());
        let executor = Executor {
            session: Some(&session),
            ..Executor::new(&sandbox, &policy, &FixedApprover(Approval::Yes))
        };
        let path = root.join("a.txt");
        let call = |tool: ToolName, args: serde_json::Value| Call {
            id: Some("c".into()),
            tool,
            args: args.as_object().cloned().unwrap(),
        };
        assert!(
            executor
                .execute(&call(ToolName::FsRead, serde_json::json!({"path": path})))
                .is_ok()
        );
        assert_eq!(
            lock(&session).remembered(&path),
            Some(sha256_hex(b"one").as_str())
        );
        std::fs::write(&path, "changed behind its back").unwrap();
        let stale = executor.execute(&call(
            ToolName::FsWrite,
            serde_json::json!({"path": path, "mode": "overwrite", "content": "two"}),
        ));
        assert_eq!(stale.block.code.as_deref(), Some("stale_file"));
        std::fs::write(&path, "one").unwrap();
        let written = executor.execute(&call(
            ToolName::FsWrite,
            serde_json::json!({"path": path, "mode": "overwrite", "content": "two"}),
        ));
        assert!(written.is_ok(), "{:?}", written.block);
        assert_eq!(
            lock(&session).remembered(&path),
            Some(sha256_hex(b"two").as_str())
        );
        let removed = executor.execute(&call(ToolName::FsRm, serde_json::json!({"path": path})));
        assert!(removed.is_ok());
        assert_eq!(lock(&session).remembered(&path), None);
    }

    #[test]
    fn a_sessions_own_appends_never_make_its_next_write_stale() {
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap();
        let sandbox =
            Sandbox::open(&crate::sandbox::Roots::resolve(std::slice::from_ref(&root)).unwrap())
                .unwrap();
        let policy = Policy {
            approval: super::super::policy::Approval::Auto,
            ..Policy::default()
        };
        let session = Mutex::new(Session::in_memory());
        let executor = Executor {
            session: Some(&session),
            ..Executor::new(&sandbox, &policy, &FixedApprover(Approval::Yes))
        };
        let call = |tool: ToolName, args: serde_json::Value| Call {
            id: Some("c".into()),
            tool,
            args: args.as_object().cloned().unwrap(),
        };
        let append = |path: &PathBuf, line: &str| {
            executor.execute(&call(
                ToolName::FsWrite,
                serde_json::json!({"path": path, "mode": "append", "content": line}),
            ))
        };
        // Appends to a file the session never read: another writer's lines in between are no
        // reason to refuse (nothing was read that could be stale), and nothing is remembered.
        let log = root.join("log.txt");
        assert!(append(&log, "mine 1\n").is_ok());
        std::fs::write(&log, "mine 1\ntheirs\n").unwrap();
        assert!(append(&log, "mine 2\n").is_ok());
        assert_eq!(lock(&session).remembered(&log), None);
        // Read, then its own appends: each one's hash is remembered, so none is stale.
        let notes = root.join("notes.txt");
        std::fs::write(&notes, "start\n").unwrap();
        assert!(
            executor
                .execute(&call(ToolName::FsRead, serde_json::json!({"path": notes})))
                .is_ok()
        );
        for n in 0..3 {
            let done = append(&notes, &format!("line {n}\n"));
            assert!(done.is_ok(), "{:?}", done.block);
        }
        let whole = std::fs::read(&notes).unwrap();
        assert_eq!(
            lock(&session).remembered(&notes),
            Some(sha256_hex(&whole).as_str())
        );
        // A change by anyone else still counts.
        std::fs::write(&notes, "rewritten by someone else\n").unwrap();
        let stale = append(&notes, "late\n");
        assert_eq!(stale.block.code.as_deref(), Some("stale_file"));
    }
}
