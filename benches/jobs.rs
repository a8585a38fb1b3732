//! The latency from a background job's output line to the answer of a `job.log` call that was
//! waiting for it (`waitMs`), through the whole call service.
//!
//! Target: under 5 ms. Each iteration starts a `job.log` waiting for the next line on another
//! thread, lets it block, then writes a line to the job (`cat`, which echoes it) with `job.input`
//! (`waitMs: 0`, so it returns once written) and measures from just before that write to the
//! waiting call's answer: the pipe, `cat`'s echo, the log's append and the waiter's wake-up
//! (a condition variable, no polling) are all inside the figure.

#![allow(clippy::disallowed_methods)] // a benchmark makes its fixtures directly
#![allow(clippy::unwrap_used)] // a benchmark that cannot set up has nothing to measure

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use flycode::protocol::{Call, ToolName, ToolSet};
use flycode::sandbox::{Roots, Sandbox};
use flycode::tools::Limits;
use flycode::tools::executor::{Approval, Executor, FixedApprover};
use flycode::tools::policy::{ApprovalMode, Policy};
use serde_json::{Value, json};

fn call(tool: ToolName, args: Value) -> Call {
    Call {
        id: Some("b".into()),
        tool,
        args: args.as_object().cloned().unwrap_or_default(),
    }
}

fn line_to_answer(c: &mut Criterion) {
    let temp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(temp.path()).unwrap();
    let sandbox = Sandbox::open(&Roots::resolve(&[root]).unwrap()).unwrap();
    let policy = Policy {
        approval: ApprovalMode::Auto,
        ..Policy::default()
    };
    let approver = FixedApprover(Approval::Yes);
    let limits = Limits {
        tool_set: ToolSet::Extended,
        ..Limits::default()
    };
    let jobs = limits.job_table();
    let executor = Executor::builder(&sandbox, &policy, &approver)
        .limits(limits)
        .jobs(Some(&jobs))
        .build();
    let started = executor.execute(&call(
        ToolName::ShellExec,
        json!({"command": "cat", "background": true}),
    ));
    assert!(started.is_ok(), "{:?}", started.block);
    let mut next = 1_u64;
    c.bench_function("job_log_line_to_answer", |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                let (ready, waiting) = std::sync::mpsc::channel();
                let (wrote_at, answered_at) = std::thread::scope(|scope| {
                    let waiter = scope.spawn(|| {
                        let _ = ready.send(());
                        let answer = executor.execute(&call(
                            ToolName::JobLog,
                            json!({"jobId": "job-1", "startLine": next, "waitMs": 60000}),
                        ));
                        assert!(answer.is_ok());
                        Instant::now()
                    });
                    let _ = waiting.recv();
                    // Let the waiter reach its wait: the figure is the wake-up, not the start.
                    std::thread::sleep(Duration::from_millis(2));
                    let wrote_at = Instant::now();
                    executor.execute(&call(
                        ToolName::JobInput,
                        json!({"jobId": "job-1", "input": "line\n", "waitMs": 0}),
                    ));
                    (wrote_at, waiter.join().unwrap_or_else(|_| Instant::now()))
                });
                next += 1;
                total += answered_at.saturating_duration_since(wrote_at);
            }
            total
        })
    });
    jobs.end_session();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(Duration::from_secs(5));
    targets = line_to_answer
}
criterion_main!(benches);
