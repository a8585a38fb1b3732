//! Running the valid calls of one turn (for the loop of `flycode run`): in the order the call
//! service's scheduler plans ([`schedule::runs`]: each maximal run of consecutive read-only calls
//! at once, on the threads of [`super::parallel`], every other call alone), each call's start
//! and end reported to the observer, the results kept in call order.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;

use super::events::{RunEvent, RunObserver, RunReport};
use super::parallel;
use super::summary::invocation_subject;
use crate::protocol::{Call, ErrorCode, ResultBlock, ToolName, render_command};
use flycode_core::tools::executor::schedule::{self, CallClass};
use flycode_core::tools::executor::{Execution, Executor};
use flycode_core::tools::registry::Invocation;

/// What runs the valid calls of a turn: the run's executor, how many read-only calls may run at
/// once, and Ctrl-C.
pub(super) struct TurnCalls<'r, 'a> {
    /// The run's executor, shared by the calls that run at once.
    pub executor: &'r Executor<'a>,
    /// Read-only calls running at once at most.
    pub max_parallel: usize,
    /// Set by Ctrl-C.
    pub cancel: &'r AtomicBool,
    /// What the run's sub-agents report while their tasks run (the main agent's only): passed
    /// on to the observer as it comes.
    pub relay: Option<&'r Receiver<RunEvent>>,
}

impl TurnCalls<'_, '_> {
    /// Runs the calls of one turn and returns their results in call order: each maximal run of
    /// consecutive read-only calls at once (at most `max_parallel`), every other call alone.
    pub(super) fn run_planned(
        &self,
        report: &mut RunReport,
        planned: Vec<PlannedCall>,
        observer: &mut dyn RunObserver,
    ) -> Vec<ResultBlock> {
        let classes: Vec<CallClass> = planned
            .iter()
            .map(|p| match p {
                PlannedCall::Run(call) => CallClass::of(call.tool),
                // An answered call keeps the runs on either side of it apart, as it did when
                // it was sent.
                PlannedCall::Answered(_) => CallClass::Exclusive,
            })
            .collect();
        let mut planned: Vec<Option<PlannedCall>> = planned.into_iter().map(Some).collect();
        let mut blocks = Vec::with_capacity(planned.len());
        for run in schedule::runs(&classes) {
            let mut calls = Vec::new();
            for slot in &mut planned[run] {
                match slot.take() {
                    Some(PlannedCall::Answered(block)) => blocks.push(block),
                    Some(PlannedCall::Run(call)) => calls.push(call),
                    None => {}
                }
            }
            // A task runs off this thread even alone, so its sub-agent's calls show as they run.
            // Every other lone call runs here: its `●` line is printed before it may ask the
            // person, which a call on another thread could not promise.
            let starts_task = calls.iter().any(|call| call.tool == ToolName::AgentTask);
            match calls.len() {
                0 => {}
                1 if !(starts_task && self.relay.is_some()) => {
                    blocks.push(self.run_call(report, &calls[0], observer));
                }
                _ => blocks.extend(self.run_at_once(report, &calls, observer)),
            }
        }
        blocks
    }

    /// Runs read-only `calls` concurrently, sharing the executor; their events reach `observer`
    /// as they happen (each carries its call's id), their results come back in call order.
    fn run_at_once(
        &self,
        report: &mut RunReport,
        calls: &[Call],
        observer: &mut dyn RunObserver,
    ) -> Vec<ResultBlock> {
        let executions = self.run_on_threads(report, calls, observer);
        // A call Ctrl-C kept from starting is answered all the same.
        calls
            .iter()
            .zip(executions)
            .map(|(call, execution)| execution.map_or_else(|| not_run(call), |e| e.block))
            .collect()
    }

    /// Runs read-only `calls` concurrently (one alone on this thread), each reported as in
    /// [`TurnCalls::run_planned`]; their executions in call order, `None` for a call Ctrl-C
    /// kept from starting. The tag dialect's turns make their answers from these.
    pub(super) fn run_reads(
        &self,
        report: &mut RunReport,
        calls: &[Call],
        observer: &mut dyn RunObserver,
    ) -> Vec<Option<Execution>> {
        match calls {
            [call] => vec![self.run_alone(report, call, observer)],
            _ => self.run_on_threads(report, calls, observer),
        }
    }

    /// Runs `calls` on worker threads, at most `max_parallel` at once.
    fn run_on_threads(
        &self,
        report: &mut RunReport,
        calls: &[Call],
        observer: &mut dyn RunObserver,
    ) -> Vec<Option<Execution>> {
        let executor = &self.executor;
        let roots = executor.sandbox().roots();
        let secrets = executor.limits().secrets();
        let read: Vec<ReadCall<'_>> = calls.iter().map(ReadCall::new).collect();
        if calls.len() > 1 {
            observer.on_event(&RunEvent::ParallelCalls { count: calls.len() });
        }
        let executions = parallel::run_bounded(
            &read,
            self.max_parallel,
            self.cancel,
            |call| call.execute(executor),
            |event| match event {
                parallel::Progress::Tick => self.pass_on_relayed(observer),
                parallel::Progress::Started(index) => {
                    report.calls += 1;
                    observer.on_event(&read[index].started_event(roots, &secrets));
                }
                parallel::Progress::Finished(index, execution) => {
                    report_finished(report, &calls[index], execution, observer);
                }
            },
        );
        self.pass_on_relayed(observer);
        executions
    }

    /// Runs the one call of a turn (text mode) and returns its result block.
    pub(super) fn run_one(
        &self,
        report: &mut RunReport,
        call: Call,
        observer: &mut dyn RunObserver,
    ) -> ResultBlock {
        let fallback = not_run(&call);
        self.run_planned(report, vec![PlannedCall::Run(call)], observer)
            .pop()
            .unwrap_or(fallback)
    }

    /// Passes on what the sub-agents reported since the last time.
    fn pass_on_relayed(&self, observer: &mut dyn RunObserver) {
        if let Some(relay) = self.relay {
            for event in relay.try_iter() {
                observer.on_event(&event);
            }
        }
    }

    /// Runs one valid call and returns its result block.
    pub(super) fn run_call(
        &self,
        report: &mut RunReport,
        call: &Call,
        observer: &mut dyn RunObserver,
    ) -> ResultBlock {
        self.run_alone(report, call, observer)
            .map_or_else(|| not_run(call), |execution| execution.block)
    }

    /// Runs one valid call on this thread, reported as it starts and ends; `None` when Ctrl-C
    /// kept it from starting.
    pub(super) fn run_alone(
        &self,
        report: &mut RunReport,
        call: &Call,
        observer: &mut dyn RunObserver,
    ) -> Option<Execution> {
        if self.cancel.load(Ordering::SeqCst) {
            return None;
        }
        let read = ReadCall::new(call);
        observer.on_event(&read.started_event(
            self.executor.sandbox().roots(),
            &self.executor.limits().secrets(),
        ));
        report.calls += 1;
        let execution = read.execute(self.executor);
        report_finished(report, call, &execution, observer);
        Some(execution)
    }
}

/// A call of a turn: judged valid and to be run, or already answered (a violation).
pub(super) enum PlannedCall {
    Run(Call),
    Answered(ResultBlock),
}

/// A call its tool has read once, for its display line and for its run.
struct ReadCall<'c> {
    call: &'c Call,
    /// `None` where the tool cannot read arguments the schema let through (a schema bug): the
    /// executor answers that call with the tool's error.
    invocation: Option<Invocation<'c>>,
}

impl<'c> ReadCall<'c> {
    fn new(call: &'c Call) -> ReadCall<'c> {
        ReadCall {
            call,
            invocation: Invocation::new(call).ok(),
        }
    }

    fn started_event(
        &self,
        roots: &[std::path::PathBuf],
        secrets: &flycode_core::tools::secrets::Secrets,
    ) -> RunEvent {
        let call = self.call;
        RunEvent::CallStarted {
            id: call.id.clone(),
            tool: call.tool,
            subject: self
                .invocation
                .as_ref()
                .map(|invocation| invocation_subject(invocation, roots, secrets))
                .unwrap_or_default(),
            command: render_command(call.tool, &call.args),
            runs_program: self
                .invocation
                .as_ref()
                .is_some_and(|invocation| invocation.effects().program.is_some()),
        }
    }

    fn execute(&self, executor: &Executor<'_>) -> Execution {
        match &self.invocation {
            Some(invocation) => executor.execute_invocation(invocation),
            None => executor.execute(self.call),
        }
    }
}

/// Reports a call's end. Its duration is the call's own: the wait for the person's answer is
/// not in it.
fn report_finished(
    report: &mut RunReport,
    call: &Call,
    execution: &Execution,
    observer: &mut dyn RunObserver,
) {
    if let Some(message) = &execution.audit_error {
        observer.on_event(&RunEvent::Warning {
            message: message.clone(),
        });
    }
    let advice = execution.advice().map(str::to_owned);
    let block = &execution.block;
    if !block.ok {
        report.failed_calls += 1;
    }
    observer.on_event(&RunEvent::CallFinished {
        id: call.id.clone(),
        tool: call.tool,
        ok: block.ok,
        code: block.code.clone(),
        summary: execution.summary.clone(),
        advice,
        duration_ms: u64::try_from(execution.duration.as_millis()).unwrap_or(u64::MAX),
    });
}

/// The answer to a call Ctrl-C kept from running.
fn not_run(call: &Call) -> ResultBlock {
    ResultBlock::failure(
        call.id.clone(),
        render_command(call.tool, &call.args),
        ErrorCode::Cancelled,
        "not run: the user stopped the run (Ctrl-C)".to_owned(),
        None,
    )
}
