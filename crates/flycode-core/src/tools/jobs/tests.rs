//! Background jobs through the call service with real processes: start, read, write, kill,
//! the session's end, the bounds, the notice. No timing thresholds: outcomes and `/proc` only.

#![cfg(target_os = "linux")]
#![allow(clippy::disallowed_methods)] // fixtures are made and read directly

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::JobTable;
use crate::protocol::{Call, ResultBlock, ToolName, ToolSet};
use crate::sandbox::{Sandbox, Session};
use crate::tools::Limits;
use crate::tools::executor::{Approval, Executor, FixedApprover, Restriction};
use crate::tools::policy::{ApprovalMode, Policy};

struct Place {
    _temp: tempfile::TempDir,
    root: PathBuf,
    sandbox: Sandbox,
    policy: Policy,
    session: Mutex<Session>,
}

fn place() -> Place {
    let temp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(temp.path()).unwrap();
    let sandbox =
        Sandbox::open(&crate::sandbox::Roots::resolve(std::slice::from_ref(&root)).unwrap())
            .unwrap();
    Place {
        _temp: temp,
        root,
        sandbox,
        policy: Policy {
            approval: ApprovalMode::Auto,
            ..Policy::default()
        },
        session: Mutex::new(Session::in_memory()),
    }
}

fn limits() -> Limits {
    Limits {
        tool_set: ToolSet::Extended,
        ..Limits::default()
    }
}

static YES: FixedApprover = FixedApprover(Approval::Yes);

fn executor<'a>(place: &'a Place, jobs: Option<&'a JobTable>) -> Executor<'a> {
    Executor::builder(&place.sandbox, &place.policy, &YES)
        .session(Some(&place.session))
        .limits(limits())
        .jobs(jobs)
        .build()
}

fn call(tool: ToolName, args: Value) -> Call {
    Call {
        id: Some("c".into()),
        tool,
        args: args.as_object().cloned().unwrap(),
    }
}

fn run(executor: &Executor<'_>, tool: ToolName, args: Value) -> ResultBlock {
    executor.execute(&call(tool, args)).block
}

fn header<'b>(block: &'b ResultBlock, key: &str) -> Option<&'b str> {
    block
        .fields
        .iter()
        .find(|(name, _)| name == key)
        .map(|(_, value)| value.as_str())
}

fn body(block: &ResultBlock) -> &str {
    block.body.as_deref().unwrap_or_default()
}

/// Starts `command` through `shell.exec` in the background; its job id and pid.
fn start(executor: &Executor<'_>, command: &str, pty: bool) -> (String, i32) {
    let block = run(
        executor,
        ToolName::ShellExec,
        json!({"command": command, "background": true, "pty": pty}),
    );
    assert!(block.ok, "{block:?}");
    let job = header(&block, "job").unwrap().to_owned();
    let pid = header(&block, "pid").unwrap().parse().unwrap();
    (job, pid)
}

/// `job.log` with a long wait: returns when a line at or past `start` arrives, or at the end.
fn wait_log(executor: &Executor<'_>, job: &str, start: u64) -> ResultBlock {
    run(
        executor,
        ToolName::JobLog,
        json!({"jobId": job, "startLine": start, "waitMs": 60000}),
    )
}

/// Whether `pid` is alive (not gone, not a zombie).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let (_, fields) = stat.rsplit_once(')')?;
            fields.split_whitespace().next().map(|state| state != "Z")
        })
        .unwrap_or(false)
}

/// The pids a script wrote to `dir/pids`, one a line, once there are `count`.
fn pids(dir: &Path, count: usize) -> Vec<i32> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(dir.join("pids")).unwrap_or_default();
        let pids: Vec<i32> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
        if pids.len() >= count {
            return pids;
        }
        assert!(
            Instant::now() < deadline,
            "the pids never appeared: {text:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_background_http_server_answers_a_foreground_call() {
    let place = place();
    let jobs = JobTable::new(1 << 20, 8);
    let executor = executor(&place, Some(&jobs));
    let (job, _) = start(
        &executor,
        "exec python3 -u -m http.server 0 --bind 127.0.0.1",
        false,
    );
    let block = wait_log(&executor, &job, 1);
    assert_eq!(header(&block, "state"), Some("running"), "{block:?}");
    let line = body(&block).lines().next().unwrap().to_owned();
    let port = line
        .split("port ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no port in {line:?}"));
    std::fs::write(place.root.join("hello.txt"), "hello from the root").unwrap();
    let fetch = format!(
        "python3 -c \"import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:{port}/hello.txt').read().decode())\""
    );
    let answer = run(&executor, ToolName::ShellExec, json!({"command": fetch}));
    assert!(answer.ok, "{answer:?}");
    assert!(body(&answer).contains("hello from the root"), "{answer:?}");
    // The server logged the request.
    let next: u64 = header(&block, "nextLine").unwrap().parse().unwrap();
    let logged = wait_log(&executor, &job, next);
    assert!(body(&logged).contains("GET /hello.txt"), "{logged:?}");
    assert!(body(&logged).contains("[stderr]"), "{logged:?}");
}

#[test]
fn job_log_pages_with_next_line_waits_for_lines_and_for_the_end_and_cat_echoes_input() {
    let place = place();
    let jobs = JobTable::new(1 << 20, 8);
    let executor = executor(&place, Some(&jobs));
    let (job, _) = start(
        &executor,
        "echo one; echo two; echo three; cat; echo end",
        false,
    );
    // Returns at the first line while the job still runs (cat waits for input).
    let first = wait_log(&executor, &job, 1);
    assert_eq!(header(&first, "state"), Some("running"));
    assert!(body(&first).starts_with("1\tone\n"), "{first:?}");
    let paged = run(
        &executor,
        ToolName::JobLog,
        json!({"jobId": job, "startLine": 1, "maxLines": 2, "waitMs": 60000}),
    );
    let paged = if header(&paged, "lines") == Some("3") {
        paged
    } else {
        wait_log(&executor, &job, 3);
        run(
            &executor,
            ToolName::JobLog,
            json!({"jobId": job, "startLine": 1, "maxLines": 2}),
        )
    };
    assert_eq!(body(&paged), "1\tone\n2\ttwo\n");
    assert_eq!(header(&paged, "nextLine"), Some("3"));
    let echoed = run(
        &executor,
        ToolName::JobInput,
        json!({"jobId": job, "input": "ping\n", "waitMs": 60000}),
    );
    assert!(echoed.ok, "{echoed:?}");
    assert_eq!(body(&echoed), "4\tping\n");
    let closed = run(
        &executor,
        ToolName::JobInput,
        json!({"jobId": job, "input": "", "closeStdin": true, "waitMs": 0}),
    );
    assert!(closed.ok, "{closed:?}");
    // Waits for the end (or the last line), then the state says how it ended.
    let mut end = wait_log(&executor, &job, 5);
    while header(&end, "state") == Some("running") {
        end = wait_log(&executor, &job, 6);
    }
    assert_eq!(header(&end, "state"), Some("exited"), "{end:?}");
    assert_eq!(header(&end, "exitCode"), Some("0"));
    let all = run(&executor, ToolName::JobLog, json!({"jobId": job}));
    assert_eq!(body(&all), "1\tone\n2\ttwo\n3\tthree\n4\tping\n5\tend\n");
}

#[test]
fn job_input_reaches_python_under_a_pseudo_terminal() {
    let place = place();
    let jobs = JobTable::new(1 << 20, 8);
    let executor = executor(&place, Some(&jobs));
    let (job, _) = start(&executor, "exec python3 -i -q", true);
    let mut seen = String::new();
    for _ in 0..20 {
        let answer = run(
            &executor,
            ToolName::JobInput,
            json!({"jobId": job, "input": "print(6 * 7)\n", "waitMs": 5000}),
        );
        assert!(answer.ok, "{answer:?}");
        seen.push_str(body(&answer));
        if seen.contains("\t42") {
            break;
        }
    }
    assert!(
        seen.contains("print(6 * 7)"),
        "the terminal echoes: {seen:?}"
    );
    assert!(seen.contains("\t42"), "{seen:?}");
    let killed = run(&executor, ToolName::JobKill, json!({"jobId": job}));
    assert!(killed.ok);
    assert_ne!(header(&killed, "state"), Some("running"));
}

#[test]
fn job_kill_ends_the_whole_tree() {
    let place = place();
    let jobs = JobTable::new(1 << 20, 8);
    let executor = executor(&place, Some(&jobs));
    let dir = place.root.display().to_string();
    let script = format!(
        "sleep 300 & echo $! >> {dir}/pids; (setsid sleep 300 & echo $! >> {dir}/pids); echo $$ >> {dir}/pids; wait"
    );
    let (job, _) = start(&executor, &script, false);
    let pids = pids(&place.root, 3);
    assert!(pids.iter().all(|&pid| alive(pid)));
    let killed = run(
        &executor,
        ToolName::JobKill,
        json!({"jobId": job, "signal": "KILL"}),
    );
    assert!(killed.ok, "{killed:?}");
    assert_eq!(header(&killed, "state"), Some("killed"));
    for pid in pids {
        assert!(!alive(pid), "{pid} survived job.kill");
    }
    let listed = run(&executor, ToolName::JobList, json!({}));
    assert!(
        body(&listed).contains(&format!("{job}\tkilled")),
        "{listed:?}"
    );
}

#[test]
fn the_sessions_end_leaves_no_process() {
    let place = place();
    let jobs = JobTable::new(1 << 20, 8);
    let dir = place.root.display().to_string();
    {
        let executor = executor(&place, Some(&jobs));
        start(
            &executor,
            &format!("sleep 300 & echo $! >> {dir}/pids; echo $$ >> {dir}/pids; wait"),
            false,
        );
        start(
            &executor,
            &format!("echo $$ >> {dir}/pids; exec sleep 300"),
            true,
        );
    }
    let pids = pids(&place.root, 3);
    assert!(pids.iter().all(|&pid| alive(pid)));
    drop(jobs);
    for pid in pids {
        assert!(!alive(pid), "{pid} outlived its session");
    }
}

#[test]
fn past_max_running_a_start_is_quota_exceeded() {
    let place = place();
    let jobs = JobTable::new(1 << 20, 1);
    let executor = executor(&place, Some(&jobs));
    start(&executor, "sleep 300", false);
    let refused = run(
        &executor,
        ToolName::ShellExec,
        json!({"command": "sleep 300", "background": true}),
    );
    assert_eq!(
        refused.code.as_deref(),
        Some("quota_exceeded"),
        "{refused:?}"
    );
    assert_eq!(jobs.running(), 1);
}

#[test]
fn a_100_mb_job_stays_within_its_log_bound() {
    let place = place();
    let bound = 1 << 20;
    let jobs = JobTable::new(bound, 8);
    let executor = executor(&place, Some(&jobs));
    let (job, _) = start(
        &executor,
        "python3 -c \"import sys\nline = 'x' * 99 + '\\n'\nfor _ in range(1_000_000): sys.stdout.write(line)\"",
        false,
    );
    let mut end = wait_log(&executor, &job, 1);
    while header(&end, "state") == Some("running") {
        let next: u64 = header(&end, "lines").unwrap().parse().unwrap();
        end = wait_log(&executor, &job, next + 1);
    }
    assert_eq!(header(&end, "exitCode"), Some("0"), "{end:?}");
    assert_eq!(header(&end, "lines"), Some("1000000"));
    let first = run(
        &executor,
        ToolName::JobLog,
        json!({"jobId": job, "maxLines": 1}),
    );
    assert!(body(&first).starts_with("[lines 1-"), "{first:?}");
    assert!(header(&first, "dropped").is_some());
    let dir = jobs.log_dir().unwrap();
    let stored: u64 = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().metadata().unwrap().len())
        .sum();
    assert!(stored <= bound, "{stored} bytes on disk");
    let last = run(
        &executor,
        ToolName::JobLog,
        json!({"jobId": job, "startLine": 1_000_000}),
    );
    assert_eq!(body(&last), format!("1000000\t{}\n", "x".repeat(99)));
}

#[test]
fn sub_agents_may_read_jobs_but_not_start_write_or_kill_them() {
    let place = place();
    let jobs = JobTable::new(1 << 20, 8);
    let (job, _) = start(&executor(&place, Some(&jobs)), "sleep 300", false);
    let restriction = Restriction {
        tools: std::borrow::Cow::Borrowed(&ToolName::SUBAGENT),
        reason: "sub-agents are read-only",
        hint: "ask the parent",
    };
    let sub = Executor::builder(&place.sandbox, &place.policy, &YES)
        .limits(limits())
        .restriction(restriction)
        .jobs(Some(&jobs))
        .build();
    assert!(run(&sub, ToolName::JobList, json!({})).ok);
    assert!(run(&sub, ToolName::JobLog, json!({"jobId": job})).ok);
    for (tool, args) in [
        (
            ToolName::ShellExec,
            json!({"command": "sleep 1", "background": true}),
        ),
        (
            ToolName::ProcessRun,
            json!({"command": "sleep", "args": ["1"], "background": true}),
        ),
        (ToolName::JobKill, json!({"jobId": job})),
        (ToolName::JobInput, json!({"jobId": job, "input": "x"})),
    ] {
        let refused = run(&sub, tool, args);
        assert_eq!(
            refused.code.as_deref(),
            Some("denied_by_policy"),
            "{refused:?}"
        );
    }
    assert_eq!(jobs.running(), 1);
}

#[test]
fn without_a_session_background_is_refused_naming_the_doors_that_keep_jobs() {
    let place = place();
    let executor = executor(&place, None);
    let refused = run(
        &executor,
        ToolName::ShellExec,
        json!({"command": "sleep 1", "background": true}),
    );
    assert!(!refused.ok);
    let error = refused.error.clone().unwrap_or_default();
    for door in ["watch", "run", "mcp"] {
        assert!(error.contains(door), "{error}");
    }
}

#[test]
fn the_next_result_block_tells_of_an_ended_job_once() {
    let place = place();
    let jobs = JobTable::new(1 << 20, 8);
    let executor = executor(&place, Some(&jobs));
    let (job, _) = start(&executor, "echo a; echo b", false);
    let mut end = wait_log(&executor, &job, 1);
    let mut notices: Vec<String> = header(&end, "jobs")
        .map(str::to_owned)
        .into_iter()
        .collect();
    while header(&end, "state") == Some("running") {
        end = wait_log(&executor, &job, 3);
        notices.extend(header(&end, "jobs").map(str::to_owned));
    }
    // The call that saw the end (at the latest) carries the notice.
    assert_eq!(notices.len(), 1, "{notices:?}");
    let notice = &notices[0];
    assert!(
        notice.starts_with(&format!("{job} exited 0 after ")),
        "{notice}"
    );
    assert!(notice.ends_with(" s (2 lines)"), "{notice}");
    let again = run(&executor, ToolName::JobList, json!({}));
    assert_eq!(header(&again, "jobs"), None, "told once: {again:?}");
    assert_eq!(header(&again, "count"), Some("1"));
}

#[test]
fn the_seed_set_offers_no_background() {
    let place = place();
    let jobs = JobTable::new(1 << 20, 8);
    let executor = Executor::builder(&place.sandbox, &place.policy, &YES)
        .limits(Limits::default())
        .jobs(Some(&jobs))
        .build();
    let refused = run(
        &executor,
        ToolName::ShellExec,
        json!({"command": "sleep 1", "background": true}),
    );
    assert_eq!(refused.code.as_deref(), Some("invalid_args"), "{refused:?}");
    assert_eq!(jobs.running(), 0);
}
