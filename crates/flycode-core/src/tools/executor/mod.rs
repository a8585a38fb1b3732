//! The call service: every door (`flycode exec`, `watch`, `run` and its sub-agents, `mcp`)
//! runs its calls here, and only here is a call decided, run and recorded.
//!
//! A door opens its [`DoorSession`] once (policy, limits and secrets, the audit log, the undo
//! recorder, the stale-read memory, jobs, hints) and takes its executors from it
//! ([`DoorSession::executor`]; a sub-agent's is a restriction of its parent's).
//!
//! A call is bound to its tool once ([`Invocation`]), then *decided* ([`Executor::decide`]: run,
//! ask the person, or refuse, with the reason; a sub-agent's [`Restriction`] and policy), then,
//! once its question is answered ([`Ruling::answered`], whoever answers: the terminal, `--yes`,
//! an MCP client's form), *run* ([`Executor::run`], with the [`Permit`] the answer made for that
//! invocation and no other): the stale-read guard, the tool, the session's memory, the change
//! record, and at the one exit the masking of flycode's secrets, the one audit line and the
//! result block. [`Executor::execute`] does all of it for the doors that ask on the terminal;
//! what may run beside what is [`schedule`]'s to say.
//!
//! One executor serves every caller, also several at once: it is `Send + Sync` and runs calls
//! through `&self`. The session's memory is behind a lock, and the person is asked one question
//! at a time and the audit log appended one line at a time across the whole process (every
//! executor shares one terminal: a parent's and its sub-agents' alike), so concurrent read-only
//! calls (PROTOCOL.md §13 (The API loop: parallel calls)) share it safely. Everything it needs
//! to know about a tool it asks the tool ([`super::registry`]).

pub mod change;
pub mod conclude;
pub mod door;
pub mod ruling;
pub mod schedule;
pub mod session;

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use self::door::{DoorSession, NoStateDirectory};
use self::ruling::Granted;
pub use self::ruling::{Permit, PermitMismatch, Restriction, Ruling};
pub use super::approval::{
    Approval, Approver, Decider, Door, DoorWords, FixedApprover, Question, Remembered,
    show_whole_call,
};
use super::policy::Policy;
use super::registry::Invocation;
use super::tool::{Notebook, TaskRunner, ToolContext};
use super::{Limits, ToolError, ToolOutput};
use crate::protocol::{Call, ResultBlock, ToolName};
use crate::sandbox::{AuditLog, Sandbox, Session};

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
    /// How long the call took, the wait for the person's answer not counted (the audit log's
    /// `durationMs`).
    pub duration: Duration,
    /// How long it waited for the person's answer.
    pub waited: Duration,
    /// The id of the change it made (`c-42`), where it changed files and the door records
    /// changes (PROTOCOL.md §16 (Undo and history)).
    pub change: Option<String>,
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

/// Runs calls against one sandbox and policy. A door's executors come from its
/// [`DoorSession`]; [`Executor::builder`] is for tests and benchmarks.
pub struct Executor<'a> {
    sandbox: &'a Sandbox,
    policy: &'a Policy,
    /// The stale-read guard's memory, where the caller keeps one.
    session: Option<&'a Mutex<Session>>,
    /// Where executed calls are logged.
    audit: Option<AuditLog>,
    limits: Limits,
    /// Asks the person, where a door runs whole calls ([`Executor::execute`]).
    approver: &'a dyn Approver,
    /// The agent's TODO list and notes, where `agent.todo` and `agent.note` exist (`flycode run`).
    notebook: Option<&'a dyn Notebook>,
    /// Runs `agent.task` (the main agent of `flycode run` only).
    tasks: Option<&'a dyn TaskRunner>,
    /// The only tools this executor runs (a sub-agent's), whatever the call says.
    restriction: Option<Restriction>,
    /// The command the calls come through, for its words to the person.
    door: Door,
    /// The session's background jobs, where the door keeps a session (PROTOCOL.md §10
    /// (Running calls: background jobs)).
    jobs: Option<&'a super::jobs::JobTable>,
    /// Records the changes calls make, where the door keeps an undo store.
    recorder: Option<crate::sandbox::undo::Recorder>,
    /// The hints loaded through this executor (PROTOCOL.md §9 (hint.load)): each executor has
    /// its own, so a sub-agent's hints are its own, unless the door shares one across executors
    /// (`mcp` makes an executor a call).
    hints: Shelf<'a>,
    /// Condenses what `memory.query` finds (`flycode run`'s light model).
    condenser: Option<&'a dyn super::memory::Condenser>,
    /// The door reads only the result block, never the structured data: a tool may leave out
    /// what the block already holds (a read's content), rather than copy it.
    text_only: bool,
}

/// An executor's hint shelf: its own, or one the door keeps.
enum Shelf<'a> {
    Own(super::hint::HintShelf),
    Shared(&'a super::hint::HintShelf),
}

impl Shelf<'_> {
    fn get(&self) -> &super::hint::HintShelf {
        match self {
            Shelf::Own(shelf) => shelf,
            Shelf::Shared(shelf) => shelf,
        }
    }
}

/// Builds an [`Executor`] part by part, for a test or a benchmark: the sandbox, policy and
/// approver it cannot do without, the rest as the caller sets it (no session memory, no audit
/// log, no undo store, the default limits, no notebook, no tasks and no restriction unless set).
/// A door never builds one: it opens a [`DoorSession`], which cannot be opened without its audit
/// log and undo recorder (`tests/suite/architecture.rs` holds that no door calls
/// [`Executor::builder`] or [`Executor::new`]).
pub struct ExecutorBuilder<'a> {
    executor: Executor<'a>,
}

impl<'a> ExecutorBuilder<'a> {
    /// The stale-read guard's memory (PROTOCOL.md §10 (Stale-read guard)).
    pub fn session(mut self, session: Option<&'a Mutex<Session>>) -> Self {
        self.executor.session = session;
        self
    }

    /// Where calls are logged (PROTOCOL.md §10 (Running calls), the audit log).
    pub fn audit(mut self, audit: Option<AuditLog>) -> Self {
        self.executor.audit = audit;
        self
    }

    /// Output cap, default timeout, secrets and the cancel flag.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.executor.limits = limits;
        self
    }

    /// The only tools the executor runs.
    pub fn restriction(mut self, restriction: Restriction) -> Self {
        self.executor.restriction = Some(restriction);
        self
    }

    /// Records every change a call makes (PROTOCOL.md §16 (Undo and history)).
    pub fn undo(mut self, recorder: Option<crate::sandbox::undo::Recorder>) -> Self {
        self.executor.recorder = recorder;
        self
    }

    /// The session's background jobs: `process.run`/`shell.exec` may start jobs and the job
    /// tools work, and the next result block tells the model of jobs that ended.
    pub fn jobs(mut self, jobs: Option<&'a super::jobs::JobTable>) -> Self {
        self.executor.jobs = jobs;
        self
    }

    /// The executor.
    pub fn build(self) -> Executor<'a> {
        self.executor
    }
}

/// One question to the person at a time, in the whole process: there is one terminal, and
/// every executor (the main agent's, each sub-agent's) shares it.
static ASKING: Mutex<()> = Mutex::new(());

impl<'a> Executor<'a> {
    /// Starts an executor on `sandbox` under `policy`, asking `approver` where a call asks (for
    /// tests and benchmarks: a door takes its executors from its [`DoorSession`]).
    pub fn builder(
        sandbox: &'a Sandbox,
        policy: &'a Policy,
        approver: &'a dyn Approver,
    ) -> ExecutorBuilder<'a> {
        ExecutorBuilder {
            executor: Executor {
                sandbox,
                policy,
                session: None,
                audit: None,
                limits: Limits::default(),
                approver,
                notebook: None,
                tasks: None,
                restriction: None,
                door: Door::default(),
                hints: Shelf::Own(super::hint::HintShelf::default()),
                condenser: None,
                text_only: false,
                recorder: None,
                jobs: None,
            },
        }
    }

    /// An executor with nothing but the sandbox, policy and approver: what a one-off caller (a
    /// test, a benchmark) needs.
    pub fn new(
        sandbox: &'a Sandbox,
        policy: &'a Policy,
        approver: &'a dyn Approver,
    ) -> Executor<'a> {
        Executor::builder(sandbox, policy, approver).build()
    }

    /// The session's background jobs, if the door keeps any.
    pub fn job_table(&self) -> Option<&'a super::jobs::JobTable> {
        self.jobs
    }

    /// The sandbox calls run in.
    pub fn sandbox(&self) -> &'a Sandbox {
        self.sandbox
    }

    /// The limits calls run within (their secrets: [`Limits::secrets`]).
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The hints loaded through this executor, oldest first.
    pub fn loaded_hints(&self) -> Vec<super::hint::LoadedHint> {
        self.hints.get().loaded()
    }

    /// This executor, its calls stopped by `cancel` (Ctrl-C, a cancelled MCP request): it kills
    /// a running program and everything it started.
    pub fn cancelled_by(mut self, cancel: Arc<AtomicBool>) -> Executor<'a> {
        self.limits.cancel = Some(cancel);
        self
    }

    /// This executor, its audit lines naming `client` as who sent the calls (`flycode mcp
    /// --http`: PROTOCOL.md §14, "Over HTTP").
    pub fn audited_for(mut self, client: crate::sandbox::AuditClient) -> Executor<'a> {
        self.audit = self.audit.map(|audit| audit.for_client(client));
        self
    }

    /// This executor, with what condenses `memory.query`'s findings (`flycode run`'s light
    /// model).
    pub fn condensing_with(mut self, condenser: &'a dyn super::memory::Condenser) -> Executor<'a> {
        self.condenser = Some(condenser);
        self
    }

    /// This executor as an agent's of `flycode run`: `agent.todo` and `agent.note` keep their
    /// notes in `notebook`, and `tasks` runs `agent.task` (the main agent's only).
    pub fn for_agent(
        mut self,
        notebook: &'a dyn Notebook,
        tasks: Option<&'a dyn TaskRunner>,
    ) -> Executor<'a> {
        self.notebook = Some(notebook);
        self.tasks = tasks;
        self
    }

    /// This executor narrowed: the same sandbox, policy, approver, stale-read memory, notebook,
    /// jobs, audit log, undo recorder, limits and condenser, running only those of
    /// `restriction`'s tools that this one runs (never more; this one's own restriction when
    /// `None`), with hints of its own and no task runner.
    fn narrowed(&self, restriction: Option<Restriction>) -> Executor<'a> {
        let restriction = match restriction {
            Some(restriction) => Some(restriction.within(self.restriction.as_ref())),
            None => self.restriction.clone(),
        };
        Executor {
            sandbox: self.sandbox,
            policy: self.policy,
            session: self.session,
            audit: self.audit.clone(),
            limits: self.limits.clone(),
            approver: self.approver,
            notebook: self.notebook,
            tasks: None,
            restriction,
            door: self.door,
            hints: Shelf::Own(super::hint::HintShelf::default()),
            condenser: self.condenser,
            recorder: self.recorder.clone(),
            jobs: self.jobs,
            text_only: self.text_only,
        }
    }

    /// A sub-agent's executor (PROTOCOL.md §13 (The API loop: sub-agents)): this one narrowed
    /// to `restriction`'s tools, with a stale-read memory (`memory`), notes (`notebook`) and
    /// hints of its own, and no task runner.
    pub fn subagent<'s>(
        &'s self,
        restriction: Restriction,
        memory: &'s Mutex<Session>,
        notebook: &'s dyn Notebook,
    ) -> Executor<'s> {
        Executor {
            session: Some(memory),
            notebook: Some(notebook),
            ..self.narrowed(Some(restriction))
        }
    }

    /// An agent of the tag dialect's tree (PROTOCOL.md §15 (The tag dialect: run)): this
    /// executor (the same sandbox, policy, approver, stale-read memory, jobs, audit log, undo
    /// recorder, limits and condenser), narrowed to `restriction`'s tools when it has one, with
    /// notes (`notebook`, which also holds its live conversation for `memory.query`) and hints
    /// of its own, and no task runner: its `<create_agent>` is run by the loop.
    pub fn tag_agent<'s>(
        &'s self,
        restriction: Option<Restriction>,
        notebook: &'s dyn Notebook,
    ) -> Executor<'s> {
        Executor {
            notebook: Some(notebook),
            ..self.narrowed(restriction)
        }
    }

    /// An executor for a door that reads only the result block (`flycode exec` without
    /// `--json`): tools may leave out of the structured data what the block holds, so that a
    /// 10 MB read is not copied once more for data nobody reads, and `fs.read` may leave a large
    /// whole file's body in the file ([`crate::tools::ToolOutput::kept`]), which the door then
    /// writes out itself.
    pub fn text_only(mut self) -> Self {
        self.text_only = true;
        self
    }

    /// From now on runs only those of the tools `restriction` names that it ran before (a
    /// sub-agent's last turn).
    pub fn restrict(&mut self, restriction: Restriction) {
        self.restriction = Some(restriction.within(self.restriction.as_ref()));
    }

    /// Whether this executor runs `tool` at all (its restriction allows it; policy still
    /// decides each call).
    pub fn allows(&self, tool: ToolName) -> bool {
        self.restriction
            .as_ref()
            .is_none_or(|restriction| restriction.allows(tool))
    }

    /// The only tools this executor runs, when it is restricted.
    pub fn restricted_to(&self) -> Option<&[ToolName]> {
        self.restriction
            .as_ref()
            .map(|restriction| &*restriction.tools)
    }

    /// Runs `call` whole: binds it, decides it, asks this executor's approver where the ruling
    /// asks, runs it and renders its result block.
    pub fn execute(&self, call: &Call) -> Execution {
        match Invocation::new(call) {
            Ok(invocation) => self.execute_invocation(&invocation),
            Err(error) => self.unreadable(call, error),
        }
    }

    /// [`Executor::execute`] for a call its tool has already read (the loop reads each call
    /// once, for its display and its run).
    pub fn execute_invocation(&self, invocation: &Invocation<'_>) -> Execution {
        let ruling = self.decide(invocation);
        let asked = Instant::now();
        let permit = self.ask(ruling);
        let waited = asked.elapsed();
        let mut execution = match self.run(invocation, permit) {
            Ok(execution) => execution,
            // Decided for this very invocation a line above: it cannot be another's.
            Err(mismatch) => self.refuse(invocation.call(), mismatch.into()),
        };
        execution.waited = waited;
        execution
    }

    /// Runs a decided invocation as `permit` allows (a refusal does not run), then logs it and
    /// renders its result block, flycode's secrets masked. A permit decided for another
    /// invocation runs nothing and logs nothing: [`PermitMismatch`].
    pub fn run(
        &self,
        invocation: &Invocation<'_>,
        permit: Permit,
    ) -> Result<Execution, PermitMismatch> {
        let (granted, by) = permit.check(invocation)?;
        Ok(self.run_granted(invocation, granted, by))
    }

    fn run_granted(&self, invocation: &Invocation<'_>, granted: Granted, by: Decider) -> Execution {
        let call = invocation.call();
        let started = Instant::now();
        let (result, decided) = match granted {
            Granted::Refused(error) => (Err(error), Decided::Refused),
            Granted::Unanswered(error) => (Err(error), Decided::Unanswered),
            Granted::Run => {
                let run = || {
                    invocation.bound().run(&ToolContext {
                        sandbox: self.sandbox,
                        limits: &self.limits,
                        notebook: self.notebook,
                        tasks: self.tasks,
                        call_id: call.id.as_deref(),
                        hints: self.hints.get(),
                        condenser: self.condenser,
                        jobs: self.jobs,
                        text_only: self.text_only,
                    })
                };
                let (result, change) = match self.check_stale(invocation) {
                    Ok(()) => self.run_recorded(invocation, run),
                    Err(error) => (Err(error), change::Started::Nothing),
                };
                if let Ok(output) = &result {
                    self.update_session(invocation, output);
                }
                let mut execution = self.conclude(
                    call,
                    started,
                    result,
                    (Decided::Ran, Some(by)),
                    Some(invocation.tool()),
                );
                self.finish_change(invocation, change, &mut execution);
                return execution;
            }
        };
        self.conclude(
            call,
            started,
            result,
            (decided, Some(by)),
            Some(invocation.tool()),
        )
    }

    /// A call whose tool cannot read its arguments although the schema let them through (a
    /// schema bug): answered with the tool's error through the one exit; nothing is decided or
    /// run.
    pub fn unreadable(&self, call: &Call, error: ToolError) -> Execution {
        self.conclude(call, Instant::now(), Err(error), (Decided::Ran, None), None)
    }

    /// A call the door refused before it could be decided (a request cancelled before it
    /// started, roots that share nothing with flycode's): logged and answered like policy's
    /// refusals, through the same exit.
    pub fn refuse(&self, call: &Call, error: ToolError) -> Execution {
        self.conclude(
            call,
            Instant::now(),
            Err(error),
            (Decided::Refused, None),
            None,
        )
    }
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
    use std::path::PathBuf;

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
        let sandbox = sandbox_on(&root);
        let policy = Policy {
            approval: super::super::policy::ApprovalMode::Ask,
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
        let sandbox = sandbox_on(&root);
        let policy = Policy {
            approval: super::super::policy::ApprovalMode::Auto,
            ..Policy::default()
        };
        let session = Mutex::new(Session::in_memory());
        let executor = Executor::builder(&sandbox, &policy, &FixedApprover(Approval::Yes))
            .session(Some(&session))
            .build();
        let path = root.join("a.txt");
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
        let sandbox = sandbox_on(&root);
        let policy = Policy {
            approval: super::super::policy::ApprovalMode::Auto,
            ..Policy::default()
        };
        let session = Mutex::new(Session::in_memory());
        let executor = Executor::builder(&sandbox, &policy, &FixedApprover(Approval::Yes))
            .session(Some(&session))
            .build();
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

    /// An approver that must never be asked (an MCP-style door answers the ruling itself).
    struct NeverAsked;

    impl Approver for NeverAsked {
        fn approve(&self, shown: &str, _reason: &str) -> Approval {
            panic!("the executor asked about {shown} although the door answered");
        }
    }

    fn call(tool: ToolName, args: serde_json::Value) -> Call {
        Call {
            id: Some("c".into()),
            tool,
            args: args.as_object().cloned().unwrap(),
        }
    }

    fn sandbox_on(root: &std::path::Path) -> Sandbox {
        Sandbox::open(&crate::sandbox::Roots::resolve(&[root.to_owned()]).unwrap()).unwrap()
    }

    fn rm_call(path: &std::path::Path) -> Call {
        Call {
            id: Some("c-rm".into()),
            tool: ToolName::FsRm,
            args: serde_json::json!({"path": path})
                .as_object()
                .cloned()
                .unwrap(),
        }
    }

    #[test]
    fn an_answer_given_to_a_decision_runs_exactly_that_call() {
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap();
        std::fs::write(root.join("a.txt"), "one").unwrap();
        std::fs::write(root.join("b.txt"), "two").unwrap();
        let sandbox = sandbox_on(&root);
        let policy = Policy {
            approval: super::super::policy::ApprovalMode::Ask,
            ..Policy::default()
        };
        let executor = Executor::new(&sandbox, &policy, &NeverAsked);
        let call = rm_call(&root.join("a.txt"));
        let invocation = Invocation::new(&call).unwrap();
        let ruling = executor.decide(&invocation);
        let question = ruling.question().cloned().unwrap();
        assert_eq!(question.tool, ToolName::FsRm);
        assert!(question.shown.contains("a.txt"), "{}", question.shown);
        let permit = ruling.answered(Approval::Yes);
        assert!(permit.runs());
        let execution = executor.run(&invocation, permit).unwrap();
        assert!(execution.is_ok(), "{:?}", execution.block);
        assert_eq!(execution.decided, Decided::Ran);
        assert!(!root.join("a.txt").exists());
        assert!(root.join("b.txt").exists(), "another file was touched");
        // Declined: refused, nothing removed.
        let call = rm_call(&root.join("b.txt"));
        let invocation = Invocation::new(&call).unwrap();
        let declined = executor
            .run(
                &invocation,
                executor.decide(&invocation).answered(Approval::No),
            )
            .unwrap();
        assert_eq!(declined.decided, Decided::Refused);
        assert_eq!(declined.block.code.as_deref(), Some("denied_by_policy"));
        assert!(root.join("b.txt").exists());
    }

    #[test]
    fn a_permit_runs_only_the_invocation_it_was_decided_for() {
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap();
        std::fs::write(root.join("a.txt"), "one").unwrap();
        std::fs::write(root.join("b.txt"), "two").unwrap();
        let logs = tempfile::tempdir().unwrap();
        let audit = AuditLog::at(&logs.path().join("audit.jsonl"));
        let sandbox = sandbox_on(&root);
        let policy = Policy {
            approval: super::super::policy::ApprovalMode::Ask,
            ..Policy::default()
        };
        let executor = Executor::builder(&sandbox, &policy, &NeverAsked)
            .audit(Some(audit.clone()))
            .build();
        // A yes to removing a.txt, given to the removal of b.txt: refused, nothing runs.
        let harmless = rm_call(&root.join("a.txt"));
        let harmless = Invocation::new(&harmless).unwrap();
        let yes = executor.decide(&harmless).answered(Approval::Yes);
        assert!(yes.runs());
        let other = Call {
            id: Some("c-other".into()),
            ..rm_call(&root.join("b.txt"))
        };
        let other = Invocation::new(&other).unwrap();
        let mismatch = executor.run(&other, yes).unwrap_err();
        assert_eq!(mismatch.tool, ToolName::FsRm);
        assert_eq!(mismatch.call_id.as_deref(), Some("c-other"));
        assert!(root.join("a.txt").exists() && root.join("b.txt").exists());
        assert!(
            !audit.path().exists(),
            "a mismatch is no call: nothing is logged"
        );
        // The same call bound twice is two invocations: a yes answers one decision only.
        let again = rm_call(&root.join("a.txt"));
        let again = Invocation::new(&again).unwrap();
        let yes = executor.decide(&harmless).answered(Approval::Yes);
        assert!(executor.run(&again, yes).is_err());
        assert!(root.join("a.txt").exists());
        // Its own permit runs it.
        let yes = executor.decide(&harmless).answered(Approval::Yes);
        let ran = executor.run(&harmless, yes).unwrap();
        assert!(ran.is_ok(), "{:?}", ran.block);
        assert!(!root.join("a.txt").exists() && root.join("b.txt").exists());
    }

    #[test]
    fn a_permit_that_refuses_is_bound_to_its_invocation_too() {
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap();
        let sandbox = sandbox_on(&root);
        let policy = Policy {
            approval: super::super::policy::ApprovalMode::ReadOnly,
            ..Policy::default()
        };
        let executor = Executor::new(&sandbox, &policy, &NeverAsked);
        let write = Call {
            id: Some("c-write".into()),
            tool: ToolName::FsWrite,
            args: serde_json::json!({"path": root.join("new.txt"), "mode": "overwrite", "content": "x"})
                .as_object()
                .cloned()
                .unwrap(),
        };
        let first = Invocation::new(&write).unwrap();
        let second = Invocation::new(&write).unwrap();
        let refused = executor.decide(&first).answered(Approval::Yes);
        assert!(!refused.runs());
        let error = executor.run(&second, refused).unwrap_err();
        assert!(error.to_string().contains("another invocation"), "{error}");
    }

    #[test]
    fn a_refused_decision_runs_nothing_and_writes_one_audit_line() {
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap();
        let logs = tempfile::tempdir().unwrap();
        let audit = AuditLog::at(&logs.path().join("audit.jsonl"));
        let sandbox = sandbox_on(&root);
        let policy = Policy {
            approval: super::super::policy::ApprovalMode::ReadOnly,
            ..Policy::default()
        };
        let executor = Executor::builder(&sandbox, &policy, &NeverAsked)
            .audit(Some(audit.clone()))
            .build();
        let call = Call {
            id: Some("c-write".into()),
            tool: ToolName::FsWrite,
            args: serde_json::json!({"path": root.join("new.txt"), "mode": "overwrite", "content": "x"})
                .as_object()
                .cloned()
                .unwrap(),
        };
        let invocation = Invocation::new(&call).unwrap();
        let ruling = executor.decide(&invocation);
        assert!(ruling.refusal().is_some(), "{ruling:?}");
        let execution = executor
            .run(&invocation, ruling.answered(Approval::Yes))
            .unwrap();
        assert_eq!(execution.decided, Decided::Refused);
        assert!(!root.join("new.txt").exists());
        let logged = std::fs::read_to_string(audit.path()).unwrap();
        let lines: Vec<&str> = logged.lines().collect();
        assert_eq!(lines.len(), 1, "{logged}");
        let line: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(line["outcome"], "denied");
        assert_eq!(line["code"], "denied_by_policy");
        assert_eq!(line["id"], "c-write");
    }

    /// Answers yes after a pause, noting when it answered.
    struct SlowYes {
        answered: Mutex<Option<Instant>>,
    }

    impl Approver for SlowYes {
        fn approve(&self, _shown: &str, _reason: &str) -> Approval {
            std::thread::sleep(Duration::from_millis(200));
            *lock(&self.answered) = Some(Instant::now());
            Approval::Yes
        }
    }

    #[test]
    fn the_wait_for_the_person_is_not_in_the_calls_duration() {
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap();
        std::fs::write(root.join("a.txt"), "one").unwrap();
        let sandbox = sandbox_on(&root);
        let policy = Policy::default();
        let approver = SlowYes {
            answered: Mutex::new(None),
        };
        let executor = Executor::new(&sandbox, &policy, &approver);
        let execution = executor.execute(&rm_call(&root.join("a.txt")));
        assert!(execution.is_ok(), "{:?}", execution.block);
        let answered = lock(&approver.answered).unwrap();
        // The run began after the answer: its duration fits in the time since.
        assert!(execution.duration <= answered.elapsed());
        assert!(execution.waited >= Duration::from_millis(200));
    }
}
