//! Sub-agents (PROTOCOL.md §13 (The API loop: sub-agents), §11) end to end, the flow of a task: a child that never completes,
//! two tasks of one turn running at once, Ctrl-C during a child, where a child's special
//! messages sit (seed 004), and the transcripts a task leaves. The real binary runs against a
//! scripted OpenAI-compatible server on loopback; the scripted model tells a child's request from
//! the parent's by the child's system prompt, and each turn by the assistant messages already in
//! the request.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::api_server::{RecordedRequest, Reply, ScriptedServer};
use super::common::send_signal;
use super::subagent_harness::{
    ANSWER, CHILD_MARK, Project, call, children, complete, is_child, messages, parallel,
    parent_with_one_task, parents, run_ok, text, tool_result, turn,
};

/// A hang guard: no wait in these tests lasts longer than this.
const HANG_GUARD: Duration = Duration::from_secs(30);

/// The task prompt of a child's request: its first user message.
fn task_prompt(request: &RecordedRequest) -> String {
    messages(request)
        .iter()
        .find(|m| m["role"] == "user")
        .map(|m| text(m).to_owned())
        .unwrap_or_default()
}

/// The native names of the tools a request offers.
fn offered(request: &RecordedRequest) -> Vec<String> {
    request.body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| {
                    t["function"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned()
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The messages of a JSON Lines transcript; every line must be a JSON object.
fn read_jsonl(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .map(|line| {
            let value: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{}: not JSON: {e}: {line}", path.display()));
            assert!(value.is_object(), "{}: {line}", path.display());
            value
        })
        .collect()
}

/// `flycode validate` on `files`, which must be clean.
fn assert_validates(files: &[&Path]) {
    let output = Command::new(env!("CARGO_BIN_EXE_flycode"))
        .arg("validate")
        .args(files)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "validate {files:?}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Waits (hang guard only) until `done`.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + HANG_GUARD;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

// --- 1. A child that never completes -----------------------------------------------------------

const FIRST_PROSE: &str = "I think sessions expire somewhere in src/session.rs.";
const SECOND_PROSE: &str = "SESSION_TTL_SECS is 3600 in src/session.rs; I did not check callers.";

#[test]
fn a_child_that_answers_in_prose_gets_one_last_turn_and_its_task_ends_partial() {
    let project = Project::new();
    let server = ScriptedServer::start(|request, _| {
        if !is_child(request) {
            return parent_with_one_task(request);
        }
        match turn(request) {
            0 => Reply::sse_text(FIRST_PROSE, 9),
            _ => Reply::sse_text(SECOND_PROSE, 9),
        }
    });
    run_ok(&project, &server);
    let requests = server.requests();
    let children = children(&requests);
    assert_eq!(children.len(), 2, "one request, then the last turn");
    // The last turn: flycode says so in a user message, and offers agent_complete alone.
    let last = messages(children[1]);
    let told = last.last().unwrap();
    assert_eq!(told["role"], "user");
    assert!(text(told).starts_with("[flycode]"), "{told}");
    assert!(text(told).contains("This is your last turn"), "{told}");
    assert!(
        text(told).contains("without calling agent.complete"),
        "{told}"
    );
    assert_eq!(offered(children[1]), ["agent_complete"]);
    // The task is partial, not failed, and hands over what the child said.
    let envelope = tool_result(&requests, "task_1");
    assert!(envelope.contains("[ok] true"), "{envelope}");
    assert!(envelope.contains("[status] partial"), "{envelope}");
    assert!(envelope.contains(SECOND_PROSE), "{envelope}");
    assert!(
        envelope.contains("the sub-agent did not finish"),
        "{envelope}"
    );
    // The parent went on and answered.
    assert_eq!(parents(&requests).len(), 2);
}

#[test]
fn a_child_past_its_turn_budget_gets_a_last_turn_in_which_only_agent_complete_runs() {
    let project = Project::with_config("[agent]\nsubagent_max_turns = 2\n");
    let (root, session) = (project.root_text(), project.path("src/session.rs"));
    let server = ScriptedServer::start(move |request, _| {
        if !is_child(request) {
            return parent_with_one_task(request);
        }
        match turn(request) {
            // A note, so the task has something to show for itself.
            0 => parallel(&[
                ("ls_1", "fs_ls", json!({"path": root})),
                (
                    "note_1",
                    "agent_note",
                    json!({"note": "the sessions are in src/session.rs"}),
                ),
            ]),
            1 => call("ls_2", "fs_ls", &json!({"path": root})),
            // The last turn: it reads instead of completing.
            _ => call("read_1", "fs_read", &json!({"path": session})),
        }
    });
    run_ok(&project, &server);
    let requests = server.requests();
    let children = children(&requests);
    assert_eq!(
        children.len(),
        3,
        "two requests of budget, then the last turn"
    );
    assert!(
        offered(children[1]).contains(&"fs_ls".to_owned()),
        "the second request is still a normal one"
    );
    let told = messages(children[2]);
    let told = told
        .iter()
        .rev()
        .find(|m| {
            m["role"] == "user" && text(m).starts_with("[flycode]") && text(m).contains("last turn")
        })
        .unwrap_or_else(|| panic!("no last-turn message: {told:?}"));
    assert!(
        text(told).contains("you used all 2 requests of your budget"),
        "{told}"
    );
    assert_eq!(offered(children[2]), ["agent_complete"]);
    // The read of the last turn was refused, as the child's own transcript shows.
    let recorded = read_jsonl(&project.child("task-1"));
    let refused = recorded
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "read_1")
        .unwrap_or_else(|| panic!("the read was not answered: {recorded:?}"));
    assert!(text(refused).contains("[ok] false"), "{refused}");
    assert!(
        text(refused).contains("[code] denied_by_policy"),
        "{refused}"
    );
    assert!(
        text(refused).contains("this is your last turn"),
        "{refused}"
    );
    assert!(!text(refused).contains("SESSION_TTL_SECS"), "{refused}");
    // Partial, with what the child saved.
    let envelope = tool_result(&requests, "task_1");
    assert!(envelope.contains("[ok] true"), "{envelope}");
    assert!(envelope.contains("[status] partial"), "{envelope}");
    assert!(
        envelope.contains("the sessions are in src/session.rs"),
        "{envelope}"
    );
    assert!(
        envelope.contains("fs.read ×1 (1 failed)"),
        "the refusal is counted: {envelope}"
    );
    assert_eq!(parents(&requests).len(), 2, "the parent went on");
}

// --- 2. Two tasks in one turn ------------------------------------------------------------------

/// Holds each child's first request until both children's first requests have arrived.
#[derive(Default)]
struct Meeting {
    state: Mutex<MeetingState>,
    arrived: Condvar,
}

#[derive(Default)]
struct MeetingState {
    /// The task prompts that have arrived, in order.
    arrived: Vec<String>,
    /// The task prompts that saw the other's request arrive while they were held.
    met: Vec<String>,
}

impl Meeting {
    /// Waits (hang guard: 10 s) for a second arrival; records whether it came.
    fn arrive(&self, prompt: String) {
        let mut state = self.state.lock().unwrap();
        state.arrived.push(prompt.clone());
        self.arrived.notify_all();
        let deadline = Instant::now() + Duration::from_secs(10);
        while state.arrived.len() < 2 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            state = self.arrived.wait_timeout(state, left).unwrap().0;
        }
        state.met.push(prompt);
    }

    fn met(&self) -> Vec<String> {
        let mut met = self.state.lock().unwrap().met.clone();
        met.sort();
        met
    }
}

const PROMPT_A: &str = "Find where sessions are created.";
const PROMPT_B: &str = "Find where sessions expire.";

#[test]
fn two_tasks_in_one_turn_run_at_once_and_come_back_in_call_order() {
    let project = Project::new();
    let meeting = Arc::new(Meeting::default());
    let server = {
        let meeting = Arc::clone(&meeting);
        ScriptedServer::start(move |request, _| {
            if is_child(request) {
                let prompt = task_prompt(request);
                meeting.arrive(prompt.clone());
                let result = if prompt == PROMPT_A {
                    "created in src/session.rs (result A)"
                } else {
                    "expire after SESSION_TTL_SECS (result B)"
                };
                return complete(result);
            }
            match turn(request) {
                0 => parallel(&[
                    (
                        "task_a",
                        "agent_task",
                        json!({"description": "Find session creation", "prompt": PROMPT_A, "subagentType": "explore"}),
                    ),
                    (
                        "task_b",
                        "agent_task",
                        json!({"description": "Find session expiry", "prompt": PROMPT_B, "subagentType": "explore"}),
                    ),
                ]),
                _ => Reply::sse_text(ANSWER, 7),
            }
        })
    };
    run_ok(&project, &server);
    assert_eq!(
        meeting.met(),
        [PROMPT_A, PROMPT_B],
        "each child's first request arrived while the other's was held"
    );
    let requests = server.requests();
    let parents = parents(&requests);
    assert_eq!(parents.len(), 2);
    let results: Vec<Value> = messages(parents[1])
        .into_iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    let ids: Vec<&str> = results
        .iter()
        .map(|m| m["tool_call_id"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        ids,
        ["task_a", "task_b"],
        "results in the order of the calls"
    );
    for (result, expected) in results.iter().zip(["(result A)", "(result B)"]) {
        assert!(text(result).contains("[ok] true"), "{result}");
        assert!(text(result).contains("[status] ok"), "{result}");
        assert!(text(result).contains(expected), "{result}");
    }
}

// --- 3. Ctrl-C during a child ------------------------------------------------------------------

#[test]
fn ctrl_c_during_a_child_cancels_the_run_and_the_task_is_recorded_cancelled() {
    let project = Project::new();
    let server = ScriptedServer::start(|request, _| {
        if is_child(request) {
            // The child's model never answers.
            Reply::Stall { after: Vec::new() }
        } else {
            parent_with_one_task(request)
        }
    });
    let mut running = project
        .command(&server, &[])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the child's request reached the server", || {
        server.requests().iter().any(is_child)
    });
    send_signal(running.id(), "INT");
    wait_until("flycode stopped after Ctrl-C", || {
        running.try_wait().unwrap().is_some()
    });
    let output = running.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("cancelled"), "{stderr}");
    let requests = server.requests();
    assert_eq!(
        parents(&requests).len(),
        1,
        "nothing was asked after Ctrl-C"
    );
    assert_eq!(children(&requests).len(), 1);
    // The parent's record holds the task's result: cancelled, with its envelope.
    let recorded = read_jsonl(&project.transcript());
    let result = recorded
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "task_1")
        .unwrap_or_else(|| panic!("no agent_task result recorded: {recorded:?}"));
    let result = text(result);
    assert!(result.contains("[ok] false"), "{result}");
    assert!(result.contains("[code] cancelled"), "{result}");
    assert!(result.contains("[status] cancelled"), "{result}");
    assert!(
        result.contains("Sub-agent task-1 (explore, main model): cancelled"),
        "{result}"
    );
}

// --- 4. Where a child's special messages sit (seed 004) ----------------------------------------

/// A request's messages in short: `system`, `user: <first line>`, `[role]`, `[todo]`,
/// `[notes]`, `[folder notes]`, `assistant → id, id`, `tool id`.
fn shape(request: &RecordedRequest) -> Vec<String> {
    messages(request)
        .iter()
        .map(|m| {
            let content = text(m);
            match m["role"].as_str().unwrap_or_default() {
                "system" => "system".to_owned(),
                "user" if content.starts_with("[flycode] Role definition") => "[role]".to_owned(),
                "user" if content.starts_with("[flycode] TODO list") => "[todo]".to_owned(),
                "user" if content.starts_with("[flycode] Useful information") => {
                    "[notes]".to_owned()
                }
                "user" if content.starts_with("[flycode] Folder notes") => {
                    "[folder notes]".to_owned()
                }
                "user" => format!("user: {}", content.lines().next().unwrap_or_default()),
                "assistant" => {
                    let ids: Vec<&str> = m["tool_calls"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|c| c["id"].as_str().unwrap_or_default())
                        .collect();
                    format!("assistant → {}", ids.join(", "))
                }
                "tool" => format!("tool {}", m["tool_call_id"].as_str().unwrap_or_default()),
                other => other.to_owned(),
            }
        })
        .collect()
}

const TODO_ITEM: &str = "Check the session module for the expiry";
const CHILD_TASK: &str = "Find where sessions expire under the root.";

#[test]
fn a_childs_special_messages_sit_where_seed_004_says() {
    let project = Project::new();
    let (root, session) = (project.root_text(), project.path("src/session.rs"));
    let server = ScriptedServer::start(move |request, _| {
        if !is_child(request) {
            return parent_with_one_task(request);
        }
        let ls = json!({"path": root});
        let read = json!({"path": session});
        match turn(request) {
            0 => call(
                "todo_1",
                "agent_todo",
                &json!({"items": [{"content": TODO_ITEM, "status": "in_progress"}]}),
            ),
            1 => call("ls_1", "fs_ls", &ls),
            2 => call("read_1", "fs_read", &read),
            3 => parallel(&[
                ("ls_2", "fs_ls", ls.clone()),
                ("read_2", "fs_read", read.clone()),
                (
                    "search_1",
                    "fs_search",
                    json!({"path": root, "query": "SESSION_TTL"}),
                ),
                ("ls_3", "fs_ls", ls),
            ]),
            _ => complete("SESSION_TTL_SECS = 3600 at src/session.rs:1"),
        }
    });
    run_ok(&project, &server);
    let requests = server.requests();
    let children = children(&requests);
    assert_eq!(children.len(), 5);
    let task = format!("user: {CHILD_TASK}");

    // The first request: the child's system prompt, its task, then its special messages (no
    // TODO list yet).
    let first = messages(children[0]);
    let role = std::fs::read_to_string(
        super::common::repo_root().join("protocol/prompts/agent/subagent-explore.md"),
    )
    .unwrap();
    let role_start = role.split("{{").next().unwrap().trim();
    assert!(role_start.len() > 20, "{role_start}");
    assert!(text(&first[0]).contains(role_start), "{}", first[0]);
    assert!(text(&first[2]).contains(role_start), "{}", first[2]);
    assert!(text(&first[3]).contains("Sessions live in src/session.rs."));
    // Nothing follows the block yet: it ends pointing back at the task.
    let pointer = format!(
        "user: {}",
        "[flycode] End of the messages flycode inserted (they are not the task). Your task is the first user message of this conversation: go on with it now. Call a tool if it needs the files or a program; answer in prose when it is done."
    );
    assert_eq!(
        shape(children[0]),
        ["system", &task, "[role]", "[folder notes]", &pointer]
    );

    // Fewer than three results: still right after the task; the TODO list now among them.
    assert_eq!(
        shape(children[2]),
        [
            "system",
            &task,
            "[role]",
            "[todo]",
            "[folder notes]",
            "assistant → todo_1",
            "tool todo_1",
            "assistant → ls_1",
            "tool ls_1",
        ]
    );
    let todo = messages(children[2])
        .into_iter()
        .find(|m| text(m).starts_with("[flycode] TODO list"))
        .unwrap();
    assert!(text(&todo).contains(TODO_ITEM), "{todo}");

    // Three results: right after the third from the last.
    assert_eq!(
        shape(children[3]),
        [
            "system",
            &task,
            "assistant → todo_1",
            "tool todo_1",
            "[role]",
            "[todo]",
            "[folder notes]",
            "assistant → ls_1",
            "tool ls_1",
            "assistant → read_1",
            "tool read_1",
        ]
    );

    // The third from the last is one of four parallel results: after the last of them, never
    // between the calls and their results.
    assert_eq!(
        shape(children[4]),
        [
            "system",
            &task,
            "assistant → todo_1",
            "tool todo_1",
            "assistant → ls_1",
            "tool ls_1",
            "assistant → read_1",
            "tool read_1",
            "assistant → ls_2, read_2, search_1, ls_3",
            "tool ls_2",
            "tool read_2",
            "tool search_1",
            "tool ls_3",
            "[role]",
            "[todo]",
            "[folder notes]",
            &pointer,
        ]
    );

    // The child's TODO list is its own: the parent never sees it.
    for request in parents(&requests) {
        let sent = serde_json::to_string(&request.body).unwrap();
        assert!(!sent.contains(TODO_ITEM), "{sent}");
        assert!(!sent.contains("[flycode] TODO list"), "{sent}");
    }
}

// --- 5. The recorded transcripts ---------------------------------------------------------------

#[test]
fn a_task_leaves_a_child_transcript_next_to_each_parent_transcript_and_both_validate() {
    let project = Project::new();
    let session = project.path("src/session.rs");
    let server = ScriptedServer::start(move |request, _| {
        if !is_child(request) {
            return parent_with_one_task(request);
        }
        match turn(request) {
            0 => call("read_1", "fs_read", &json!({"path": session})),
            _ => complete("SESSION_TTL_SECS = 3600 at src/session.rs:1"),
        }
    });
    run_ok(&project, &server);

    let parent = project.transcript();
    let child = project.child("task-1");
    let state_parents: Vec<PathBuf> = super::common::files_in(&project.state_runs(), "jsonl")
        .into_iter()
        .filter(|path| !path.to_string_lossy().contains(".task-"))
        .collect();
    assert_eq!(state_parents.len(), 1, "{state_parents:?}");
    let state_parent = &state_parents[0];
    let stem = state_parent.file_stem().unwrap().to_string_lossy();
    let state_child = project.state_runs().join(format!("{stem}.task-1.jsonl"));

    for path in [&parent, state_parent] {
        let recorded = read_jsonl(path);
        assert_eq!(recorded[0]["role"], "system", "{}", path.display());
        assert!(
            !text(&recorded[0]).contains(CHILD_MARK),
            "{}",
            path.display()
        );
        let envelope = recorded
            .iter()
            .find(|m| m["role"] == "tool" && m["tool_call_id"] == "task_1")
            .unwrap_or_else(|| panic!("{}: no task result", path.display()));
        assert!(text(envelope).contains("[status] ok"), "{envelope}");
        // The parent's record names the child's files: next to each parent record.
        let named: Vec<&str> = text(envelope)
            .lines()
            .find_map(|line| line.strip_prefix("Transcripts: "))
            .unwrap_or_else(|| panic!("the envelope names no transcript: {envelope}"))
            .split(", ")
            .collect();
        let expected = [
            state_child.display().to_string(),
            child.display().to_string(),
        ];
        assert_eq!(named, expected, "{envelope}");
    }
    for path in [&child, &state_child] {
        let recorded = read_jsonl(path);
        assert_eq!(recorded[0]["role"], "system", "{}", path.display());
        assert!(
            text(&recorded[0]).contains(CHILD_MARK),
            "{}",
            path.display()
        );
        assert!(
            recorded
                .iter()
                .any(|m| m["role"] == "tool" && m["tool_call_id"] == "read_1"),
            "{}: the child's read is on record",
            path.display()
        );
        // It ends with the agent_complete call and its result.
        let ending: Vec<&Value> = recorded.iter().rev().take(2).collect();
        assert_eq!(ending[1]["role"], "assistant", "{}", path.display());
        assert_eq!(
            ending[1]["tool_calls"][0]["function"]["name"],
            "agent_complete",
            "{}",
            path.display()
        );
        assert_eq!(ending[0]["tool_call_id"], "done", "{}", path.display());
        assert!(text(ending[0]).contains("[ok] true"), "{}", ending[0]);
    }
    assert_eq!(
        read_jsonl(&child),
        read_jsonl(&state_child),
        "both copies hold the same"
    );

    assert_validates(&[&parent]);
    assert_validates(&[&parent, &child]);
    assert_validates(&[state_parent, &state_child]);
}
