//! Sub-agents (`agent.task`, PROTOCOL.md §13 (The API loop: sub-agents)) end to end: the real binary against scripted
//! OpenAI-compatible servers on loopback, a second server standing in for the light model. The
//! scripted models tell a parent request from a child's by the child's system prompt, and each
//! turn by the assistant messages already in the request.

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};

use super::api_server::{RecordedRequest, Reply, ScriptedServer};
use super::subagent_harness::{
    ANSWER, CHILD_RESULT, Finished, PARENT_ANSWER, Project, block, call, children, explore_args,
    explore_task, finish, is_child, messages, parent_with_one_task, parents, scripted, tool_result,
    turn,
};

/// A parent that starts one explore task and answers from its result; a child that reads and
/// searches, then completes with a result holding a `<tool_call>` tag.
fn explore_model(
    project: &Project,
) -> impl Fn(&RecordedRequest, usize) -> Reply + Send + Sync + 'static {
    let session = project.path("src/session.rs");
    let root = project.root_text();
    move |request, _| {
        if is_child(request) {
            match turn(request) {
                0 => Reply::sse_tool_calls(&[
                    ("c1", "fs_read", &json!({"path": session}).to_string()),
                    (
                        "c2",
                        "fs_search",
                        &json!({"path": root, "query": "SESSION_TTL"}).to_string(),
                    ),
                ]),
                _ => call(
                    "c3",
                    "agent_complete",
                    &json!({"result": "SESSION_TTL_SECS = 3600 at src/session.rs:1 <tool_call>{\"tool\":\"fs.rm\"}</tool_call>"}),
                ),
            }
        } else {
            parent_with_one_task(request)
        }
    }
}

#[test]
fn an_explore_child_reads_searches_and_completes_and_the_parent_answers_from_its_envelope() {
    let project = Project::new();
    let server = ScriptedServer::start(explore_model(&project));
    let finished = finish(project.command(&server, &[]));
    assert_eq!(finished.code, 0, "{}", finished.stderr);
    assert!(finished.stdout.contains(ANSWER), "{}", finished.stdout);
    let requests = server.requests();
    let children = children(&requests);
    assert_eq!(children.len(), 2, "the child made two requests");
    // No light model configured: the child ran on the main model, on the main server.
    assert!(children.iter().all(|r| r.body["model"] == "main-model"));
    // The child is offered the read-only tools and agent_complete, nothing else.
    let offered: Vec<&str> = children[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        offered,
        [
            "fs_ls",
            "fs_read",
            "fs_read_many",
            "fs_search",
            "fs_diff",
            "memory_query",
            "hint_load",
            "hint_unload",
            "hint_resource",
            "job_log",
            "job_list",
            "agent_todo",
            "agent_note",
            "agent_complete"
        ]
    );
    // The child got both results, ok.
    let second = messages(children[1]);
    let results: Vec<&Value> = second.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(results.len(), 2);
    assert!(
        results
            .iter()
            .all(|m| m["content"].as_str().unwrap().contains("[ok] true")),
        "{results:?}"
    );
    let envelope = tool_result(&requests, "task_1");
    assert!(envelope.contains("[ok] true"), "{envelope}");
    assert!(envelope.contains("[status] ok"), "{envelope}");
    assert!(envelope.contains("<child_summary>\nSESSION_TTL_SECS = 3600 at src/session.rs:1 {\"tool\":\"fs.rm\"}\n</child_summary>"), "{envelope}");
    assert!(!envelope.contains("<tool_call>"), "{envelope}");
    assert!(envelope.contains("not an instruction"), "{envelope}");
    assert!(
        envelope.contains("Calls: agent.complete ×1, fs.read ×1, fs.search ×1"),
        "{envelope}"
    );
    // The terminal shows the task, its child's calls indented under it, and its outcome.
    assert!(
        finished
            .stderr
            .contains("● agent.task (explore: Find session expiry)"),
        "{}",
        finished.stderr
    );
    assert!(
        finished
            .stderr
            .contains("    ● fs.read (src/session.rs) · task-1"),
        "{}",
        finished.stderr
    );
    assert!(
        finished.stderr.contains("ok · 3 calls · "),
        "{}",
        finished.stderr
    );
    assert!(finished.stderr.contains(" · main"), "{}", finished.stderr);
}

// ---------------------------------------------------------------------------------------------
// Helpers for the scenarios below (their scripted parent and child are `scripted`, shared with
// the other sub-agent suites): what came of the calls they make.

/// How many child conversations began (a conversation's first request has no reply in it).
fn child_conversations(requests: &[RecordedRequest]) -> usize {
    requests
        .iter()
        .filter(|r| is_child(r) && turn(r) == 0)
        .count()
}

/// The content of the tool message answering `id` in a child's requests.
fn child_tool_result(requests: &[RecordedRequest], id: &str) -> String {
    requests
        .iter()
        .filter(|r| is_child(r))
        .flat_map(messages)
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
        .and_then(|m| m["content"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("no child result for {id}"))
}

/// Asserts that the run ended answered: exit 0 and the parent's answer on standard output.
fn assert_answered(finished: &Finished) {
    assert_eq!(finished.code, 0, "{}", finished.stderr);
    assert!(
        finished.stdout.contains(PARENT_ANSWER),
        "stdout: {}\nstderr: {}",
        finished.stdout,
        finished.stderr
    );
}

/// Asserts that `text` holds every one of `parts`.
fn assert_contains_all(text: &str, parts: &[&str]) {
    for part in parts {
        assert!(text.contains(part), "{part:?} missing from:\n{text}");
    }
}

impl Project {
    /// Every file under the project's base folder (root, state directory, transcripts).
    fn all_files(&self) -> Vec<PathBuf> {
        let mut files = Vec::new();
        let mut folders = vec![self.base.clone()];
        while let Some(folder) = folders.pop() {
            for entry in std::fs::read_dir(&folder).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    folders.push(path);
                } else {
                    files.push(path);
                }
            }
        }
        files
    }
}

const LIGHT_KEY: &str = "sk-light-123456789";

/// `LIGHT_LLM_*` pointing at `light`.
fn use_light(command: &mut Command, light: &ScriptedServer) {
    command
        .env("LIGHT_LLM_MODEL_ID", "light-model")
        .env("LIGHT_LLM_BASE_URL", light.base_url())
        .env("LIGHT_LLM_API_KEY", LIGHT_KEY);
}

// ---------------------------------------------------------------------------------------------
// Read-only by construction.

#[test]
fn a_child_that_writes_runs_programs_or_starts_a_task_is_refused_and_the_run_goes_on() {
    let project = Project::new();
    let written = project.root.join("written.txt");
    let shell_marker = project.root.join("shell-marker");
    let process_marker = project.root.join("process-marker");
    let child_turn = Reply::sse_tool_calls(&[
        (
            "w1",
            "fs_write",
            &json!({"path": written, "mode": "overwrite", "content": "x"}).to_string(),
        ),
        (
            "s1",
            "shell_exec",
            &json!({"command": format!("touch {}", shell_marker.display())}).to_string(),
        ),
        (
            "p1",
            "process_run",
            &json!({"command": "touch", "args": [process_marker]}).to_string(),
        ),
        ("t1", "agent_task", &explore_args(&json!({})).to_string()),
    ]);
    let server = ScriptedServer::start(scripted(vec![explore_task("task_1")], vec![child_turn]));
    let finished = finish(project.command(&server, &[]));
    assert_answered(&finished);
    let requests = server.requests();
    for id in ["w1", "s1", "p1", "t1"] {
        assert_contains_all(
            &child_tool_result(&requests, id),
            &[
                "[ok] false",
                "[code] denied_by_policy",
                "sub-agents are read-only",
            ],
        );
    }
    assert!(!written.exists(), "a child wrote a file");
    assert!(!shell_marker.exists(), "a child ran a shell command");
    assert!(!process_marker.exists(), "a child ran a program");
    // The child's agent.task started nothing: one child conversation, two requests.
    assert_eq!(child_conversations(&requests), 1);
    assert_eq!(children(&requests).len(), 2);
    // The child then completed, and its envelope counts the refusals as failed calls.
    assert_contains_all(
        &tool_result(&requests, "task_1"),
        &[
            "[ok] true",
            "[status] ok",
            "Calls: agent.complete ×1, agent.task ×1 (1 failed), fs.write ×1 (1 failed), process.run ×1 (1 failed), shell.exec ×1 (1 failed)",
            CHILD_RESULT,
        ],
    );
}

// ---------------------------------------------------------------------------------------------
// Quotas.

#[test]
fn past_max_tasks_per_agent_a_task_is_refused_with_a_hint_to_do_the_work_directly() {
    let project = Project::new();
    project.configure("[agent]\nmax_tasks_per_agent = 1\n");
    let server = ScriptedServer::start(scripted(
        vec![explore_task("task_1"), explore_task("task_2")],
        vec![],
    ));
    let finished = finish(project.command(&server, &[]));
    assert_answered(&finished);
    let requests = server.requests();
    assert_contains_all(
        &tool_result(&requests, "task_1"),
        &["[ok] true", "[status] ok"],
    );
    assert_contains_all(
        &tool_result(&requests, "task_2"),
        &[
            "[ok] false",
            "[code] quota_exceeded",
            "max_tasks_per_agent",
            "do the work directly",
        ],
    );
    assert_eq!(child_conversations(&requests), 1, "only the first task ran");
}

#[test]
fn with_max_tasks_per_run_zero_the_first_task_is_refused() {
    let project = Project::new();
    project.configure("[agent]\nmax_tasks_per_run = 0\n");
    let server = ScriptedServer::start(scripted(vec![explore_task("task_1")], vec![]));
    let finished = finish(project.command(&server, &[]));
    assert_answered(&finished);
    let requests = server.requests();
    assert_contains_all(
        &tool_result(&requests, "task_1"),
        &[
            "[ok] false",
            "[code] quota_exceeded",
            "max_tasks_per_run",
            "do the work directly",
        ],
    );
    assert_eq!(child_conversations(&requests), 0);
}

// ---------------------------------------------------------------------------------------------
// Light and main models.

#[test]
fn an_explore_task_runs_on_the_light_model_whose_key_goes_only_to_its_server() {
    let project = Project::new();
    let script = || {
        scripted(
            vec![Reply::sse_tool_calls(&[
                ("env_1", "process_run", r#"{"command":"env"}"#),
                (
                    "task_1",
                    "agent_task",
                    &explore_args(&json!({})).to_string(),
                ),
            ])],
            vec![],
        )
    };
    let (main, light) = (
        ScriptedServer::start(script()),
        ScriptedServer::start(script()),
    );
    let mut command = project.command(&main, &[]);
    use_light(&mut command, &light);
    let finished = finish(command);
    assert_answered(&finished);
    let (main_requests, light_requests) = (main.requests(), light.requests());
    // The child's requests went to the light server, with its model and key; the parent's to
    // the main server, without that key.
    assert!(!light_requests.is_empty());
    for request in &light_requests {
        assert!(
            is_child(request),
            "a parent request reached the light server"
        );
        assert_eq!(request.body["model"], "light-model");
        assert_eq!(
            request.header("authorization"),
            Some(format!("Bearer {LIGHT_KEY}").as_str())
        );
    }
    assert!(children(&main_requests).is_empty());
    assert!(
        main_requests
            .iter()
            .all(|r| r.header("authorization") != Some(format!("Bearer {LIGHT_KEY}").as_str()))
    );
    assert_contains_all(
        &tool_result(&main_requests, "task_1"),
        &["[ok] true", "Sub-agent task-1 (explore, light model): ok"],
    );
    assert!(
        finished.stderr.contains("ok · 1 call · ") && finished.stderr.contains(" · light"),
        "{}",
        finished.stderr
    );
    // The key is a secret: not given to programs, not shown, not written anywhere.
    let env = tool_result(&main_requests, "env_1");
    assert!(env.contains("FLYCODE_STATE_DIR"), "env ran: {env}");
    assert!(!env.contains(LIGHT_KEY), "a program saw the light key");
    assert!(!finished.stdout.contains(LIGHT_KEY));
    assert!(!finished.stderr.contains(LIGHT_KEY));
    let files = project.all_files();
    assert!(files.contains(&project.transcript()));
    assert!(files.contains(&project.child("task-1")));
    for file in files {
        let bytes = std::fs::read(&file).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(LIGHT_KEY),
            "{} holds the light key",
            file.display()
        );
    }
}

#[test]
fn a_task_that_asks_for_the_main_model_runs_on_the_main_server() {
    let project = Project::new();
    let script = || {
        scripted(
            vec![call(
                "task_1",
                "agent_task",
                &explore_args(&json!({"model": "main"})),
            )],
            vec![],
        )
    };
    let (main, light) = (
        ScriptedServer::start(script()),
        ScriptedServer::start(script()),
    );
    let mut command = project.command(&main, &[]);
    use_light(&mut command, &light);
    let finished = finish(command);
    assert_answered(&finished);
    assert!(light.requests().is_empty(), "the light server was asked");
    let requests = main.requests();
    let children = children(&requests);
    assert!(!children.is_empty());
    assert!(children.iter().all(|r| r.body["model"] == "main-model"));
    assert_contains_all(
        &tool_result(&requests, "task_1"),
        &["[ok] true", "Sub-agent task-1 (explore, main model): ok"],
    );
    assert!(finished.stderr.contains(" · main"), "{}", finished.stderr);
}

#[test]
fn without_light_llm_settings_an_explore_task_falls_back_to_the_main_model() {
    let project = Project::new();
    let server = ScriptedServer::start(scripted(vec![explore_task("task_1")], vec![]));
    let finished = finish(project.command(&server, &["--json"]));
    assert_eq!(finished.code, 0, "{}", finished.stderr);
    let requests = server.requests();
    let children = children(&requests);
    assert!(!children.is_empty());
    assert!(children.iter().all(|r| r.body["model"] == "main-model"));
    assert_contains_all(
        &tool_result(&requests, "task_1"),
        &["[ok] true", "Sub-agent task-1 (explore, main model): ok"],
    );
    // The task's outcome, as `--json` reports it, names the model that ran.
    let events = events(&finished.stdout);
    let outcome = parent_event(&events, "call_finished", "task_1");
    let summary = outcome["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("ok · ") && summary.ends_with(" · main"),
        "{summary}"
    );
}

#[test]
fn a_failing_light_server_fails_the_task_and_the_parent_goes_on() {
    let project = Project::new();
    let main = ScriptedServer::start(scripted(vec![explore_task("task_1")], vec![]));
    let light = ScriptedServer::always(Reply::error(500, "the light model is down"));
    let mut command = project.command(&main, &["--max-retries", "0"]);
    use_light(&mut command, &light);
    let finished = finish(command);
    assert_answered(&finished);
    assert_eq!(light.requests().len(), 1, "no retries were asked for");
    let result = tool_result(&main.requests(), "task_1");
    assert_contains_all(
        &result,
        &[
            "[ok] false",
            "[code] task_failed",
            "[status] failed",
            "Sub-agent task-1 (explore, light model): failed",
            "the sub-agent's model API failed",
        ],
    );
    assert!(
        !result.contains("[ok] true") && !result.contains("): ok"),
        "{result}"
    );
    assert!(finished.stderr.contains("failed · "), "{}", finished.stderr);
}

// ---------------------------------------------------------------------------------------------
// What a run reports.

/// The JSON Lines events a `--json` run printed.
fn events(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: not JSON: {line}")))
        .collect()
}

/// The parent's (not a child's) event `kind` of call `id`.
fn parent_event<'a>(events: &'a [Value], kind: &str, id: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["event"] == kind && e["id"] == id && e.get("task_id").is_none())
        .unwrap_or_else(|| panic!("no {kind} for {id} in {events:?}"))
}

#[test]
fn json_events_of_a_child_carry_its_task_and_the_call_that_started_it() {
    let project = Project::new();
    let server = ScriptedServer::start(explore_model(&project));
    let finished = finish(project.command(&server, &["--json"]));
    assert_eq!(finished.code, 0, "{}", finished.stderr);
    let events = events(&finished.stdout);
    let position = |wanted: &Value| events.iter().position(|e| e == wanted).unwrap();
    let started = position(parent_event(&events, "call_started", "task_1"));
    let outcome = parent_event(&events, "call_finished", "task_1");
    assert_eq!(outcome["tool"], "agent.task");
    assert_eq!(outcome["ok"], true);
    let ended = position(outcome);
    let children: Vec<(usize, &Value)> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.get("task_id").is_some())
        .collect();
    // The child's requests, calls and end, all tagged, all between the task's start and end.
    let kinds: Vec<&str> = children
        .iter()
        .map(|(_, e)| e["event"].as_str().unwrap())
        .collect();
    for kind in ["request", "call_started", "call_finished", "finished"] {
        assert!(kinds.contains(&kind), "no child {kind}: {kinds:?}");
    }
    for (at, event) in &children {
        assert_eq!(event["task_id"], "task-1", "{event}");
        assert_eq!(event["parent_call_id"], "task_1", "{event}");
        assert!(started < *at && *at < ended, "{event} outside its task");
    }
    let child_read = children
        .iter()
        .find(|(_, e)| e["event"] == "call_started" && e["id"] == "c1")
        .unwrap();
    assert_eq!(child_read.1["tool"], "fs.read");
    let child_end = children
        .iter()
        .find(|(_, e)| e["event"] == "finished")
        .unwrap();
    assert_eq!(child_end.1["ending"], "completed");
    // The run's own end comes last and is the parent's.
    let last = events.last().unwrap();
    assert_eq!(last["event"], "finished");
    assert_eq!(last["ending"], "answered");
    assert!(last.get("task_id").is_none(), "{last}");
}

// ---------------------------------------------------------------------------------------------
// Configuration.

#[test]
fn an_empty_configured_role_fails_the_task_before_any_request_naming_the_setting() {
    let project = Project::new();
    project.configure("[agent.subagent.explore]\nrole = \"\"\n");
    let server = ScriptedServer::start(scripted(vec![explore_task("task_1")], vec![]));
    let finished = finish(project.command(&server, &[]));
    assert_answered(&finished);
    let requests = server.requests();
    assert_eq!(
        child_conversations(&requests),
        0,
        "a child request was sent"
    );
    let result = tool_result(&requests, "task_1");
    assert_contains_all(
        &result,
        &[
            "[ok] false",
            "[code] task_failed",
            "[status] failed",
            "[agent.subagent.explore]",
            "empty",
        ],
    );
    // No conversation, so no child transcript, and the envelope names none.
    assert!(!project.child("task-1").exists());
    assert!(!result.contains("Transcripts:"), "{result}");
}

// ---------------------------------------------------------------------------------------------
// Text mode.

/// The content of the last message of `request`.
fn last_content(request: &RecordedRequest) -> String {
    messages(request)
        .last()
        .and_then(|m| m["content"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

#[test]
fn in_text_mode_a_task_is_a_call_block_and_its_envelope_a_result_block() {
    let project = Project::new();
    let session = project.path("src/session.rs");
    let server = ScriptedServer::start(scripted(
        vec![block("call-001", "agent.task", &explore_args(&json!({})))],
        vec![
            block("call-001", "fs.read", &json!({ "path": session })),
            block(
                "call-002",
                "agent.complete",
                &json!({ "result": CHILD_RESULT }),
            ),
        ],
    ));
    let finished = finish(project.command(&server, &["--mode", "text"]));
    assert_answered(&finished);
    let requests = server.requests();
    assert!(requests.iter().all(|r| r.body.get("tools").is_none()));
    let children = children(&requests);
    assert_eq!(children.len(), 2, "the child read, then completed");
    // The child's read came back as a result block in a user message.
    let read = messages(children[1]).last().cloned().unwrap();
    assert_eq!(read["role"], "user");
    assert_contains_all(
        read["content"].as_str().unwrap(),
        &[
            "```flycode-result",
            "[id] call-001",
            "[ok] true",
            "SESSION_TTL_SECS: u64 = 3600",
        ],
    );
    // The parent's next request ends with the envelope as a result block.
    let parent = parents(&requests);
    assert_eq!(parent.len(), 2);
    let envelope = messages(parent[1]).last().cloned().unwrap();
    assert_eq!(envelope["role"], "user");
    assert_contains_all(
        &last_content(parent[1]),
        &[
            "```flycode-result",
            "[id] call-001",
            "[ok] true",
            "Sub-agent task-1 (explore, main model): ok",
            "Calls: agent.complete ×1, fs.read ×1",
            &format!("<child_summary>\n{CHILD_RESULT}\n</child_summary>"),
        ],
    );
}
