//! `flycode run --resume`: a run stopped by Ctrl-C mid-program, by a server error that outlasted
//! the retries, by its turn budget, or killed outright goes on from its transcript with the same
//! history, and no call runs twice (a counter file grows once per run of the counting program).

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::api_server::{RecordedRequest, Reply, ScriptedServer};
use super::common::{assert_validates, send_signal};
use super::run_anthropic::{Workspace, anthropic_text, anthropic_tool_uses, finish};

/// A `process_run` call that appends a line to `count.txt`, then runs `rest` (shell).
fn counting_call(workspace: &Workspace, rest: &str) -> String {
    let script = format!("echo ran >> count.txt{rest}");
    json!({"command": "sh", "args": ["-c", script], "cwd": workspace.root.display().to_string(),
        "timeoutMs": 600000})
    .to_string()
}

fn runs_of_the_counter(workspace: &Workspace) -> usize {
    std::fs::read_to_string(workspace.root.join("count.txt"))
        .map(|text| text.lines().count())
        .unwrap_or(0)
}

/// The conversation of a request: no system prompt, no `[flycode]` special message (TODO list,
/// notes, role), as `(role, content, call ids, answered id)`.
fn conversation(request: &RecordedRequest) -> Vec<Value> {
    request.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .filter(|m| {
            !(m["role"] == "user"
                && m["content"]
                    .as_str()
                    .is_some_and(|c| c.starts_with("# ") || c.contains("useful information")))
        })
        .cloned()
        .collect()
}

/// Every call id of the request's assistant messages, in order.
fn call_ids(request: &RecordedRequest) -> Vec<String> {
    request.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect()
}

/// The `tool` results of a request, by call id.
fn results(request: &RecordedRequest) -> Vec<(String, String)> {
    request.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The user messages of a request after the last assistant message.
fn last_user_texts(request: &RecordedRequest) -> Vec<String> {
    let messages = request.body["messages"].as_array().unwrap();
    let last_assistant = messages
        .iter()
        .rposition(|m| m["role"] == "assistant")
        .unwrap_or(0);
    messages[last_assistant..]
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn assert_resumed_notice(request: &RecordedRequest, parent: &Path) {
    let texts = last_user_texts(request).join("\n");
    assert!(
        texts.contains("This run continues an earlier one")
            && texts.contains(&parent.display().to_string())
            && texts.contains("Background programs the earlier run started are gone"),
        "{texts}"
    );
}

/// The first line of a transcript, as JSON.
fn first_line(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    serde_json::from_str(text.lines().next().unwrap()).unwrap()
}

/// Starts a run of `task` against `server` (output streams made by `output`) and waits until the
/// called program wrote its pid to `sleeper.pid`; the child and that file's path.
fn start_until_sleeper(
    workspace: &Workspace,
    server: &ScriptedServer,
    task: &str,
    output: fn() -> Stdio,
) -> (std::process::Child, std::path::PathBuf) {
    let mut args = model_args(server);
    args.push(task.into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let child = workspace
        .command(&args)
        .stdout(output())
        .stderr(output())
        .spawn()
        .unwrap();
    let pid_file = workspace.root.join("sleeper.pid");
    wait_for("the program", || {
        std::fs::read_to_string(&pid_file).is_ok_and(|t| t.ends_with('\n'))
    });
    (child, pid_file)
}

fn model_args(server: &ScriptedServer) -> Vec<String> {
    vec![
        "--base-url".into(),
        server.base_url(),
        "--model".into(),
        "scripted-model".into(),
    ]
}

#[test]
fn a_run_stopped_by_ctrl_c_mid_program_resumes_without_running_the_program_again() {
    let workspace = Workspace::new();
    let call = counting_call(&workspace, "; echo $$ > sleeper.pid; exec sleep 300");
    let todo = json!({"items": [{"content": "count once", "status": "in_progress"}]}).to_string();
    let first = ScriptedServer::sequence(vec![
        Reply::sse_tool_calls(&[("todo_1", "agent_todo", todo.as_str())]),
        Reply::sse_tool_calls(&[("p1", "process_run", call.as_str())]),
    ]);
    let (mut child, _) = start_until_sleeper(&workspace, &first, "Count once.", Stdio::piped);
    send_signal(child.id(), "INT");
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert_eq!(runs_of_the_counter(&workspace), 1);
    let parent = workspace.transcript();
    assert_eq!(
        first_line(&parent)["flycode"]["run"]["todos"][0]["content"],
        "count once"
    );

    let second = ScriptedServer::sequence(vec![Reply::sse_text("Counted once; stopping.", 7)]);
    let resumed_record = workspace.base.join("resumed.jsonl");
    let mut args = model_args(&second);
    args.extend(["--resume".into(), parent.display().to_string()]);
    args.extend(["--continue".into(), "Go on.".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let finished = finish(workspace.command_to(&resumed_record, &args));
    assert_eq!(finished.code, 0, "{}", finished.stderr);
    let before = first.requests();
    let after = second.requests();
    assert_eq!(after.len(), 1);
    // The same conversation: what the last request of the first run held, then its last turn.
    let old = conversation(before.last().unwrap());
    let new = conversation(&after[0]);
    assert_eq!(new[..old.len()], old[..], "the history is the same");
    assert_eq!(call_ids(&after[0]), ["todo_1", "p1"]);
    let answered = results(&after[0]);
    assert_eq!(answered.len(), 2);
    assert!(
        answered[1].1.contains("[code] cancelled"),
        "{}",
        answered[1].1
    );
    assert_resumed_notice(&after[0], &parent);
    assert_eq!(last_user_texts(&after[0]).last().unwrap(), "Go on.");
    // The TODO list came back.
    let all: String = after[0].body["messages"].to_string();
    assert!(all.contains("count once"), "{all}");
    assert_eq!(runs_of_the_counter(&workspace), 1, "the program ran once");
    assert_eq!(
        first_line(&resumed_record)["flycode"]["run"]["continues"],
        parent.display().to_string()
    );
    assert_validates(&parent);
    assert_validates(&resumed_record);
}

#[test]
fn a_run_whose_server_failed_past_the_retries_resumes_from_latest() {
    let workspace = Workspace::new();
    let call = counting_call(&workspace, "");
    let first = ScriptedServer::sequence(vec![
        Reply::sse_tool_calls(&[("c1", "process_run", call.as_str())]),
        Reply::error(500, "the server broke"),
    ]);
    let mut args = model_args(&first);
    args.extend(["--max-retries", "1", "--retry-base-ms", "1", "Count."].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let finished = finish(workspace.command(&args));
    assert_ne!(finished.code, 0);
    assert!(
        finished.stderr.contains("the server broke"),
        "{}",
        finished.stderr
    );
    assert_eq!(
        first.requests().len(),
        3,
        "one call, then two failed attempts"
    );
    assert_eq!(runs_of_the_counter(&workspace), 1);

    let second = ScriptedServer::sequence(vec![Reply::sse_text("Counted.", 7)]);
    let mut args = model_args(&second);
    args.extend(["--resume".into(), "latest".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let resumed_record = workspace.base.join("resumed.jsonl");
    let finished = finish(workspace.command_to(&resumed_record, &args));
    assert_eq!(finished.code, 0, "{}", finished.stderr);
    let failed = first.requests();
    let after = second.requests();
    // The failed request's conversation, then the notice.
    let old = conversation(&failed[2]);
    let new = conversation(&after[0]);
    assert_eq!(new[..old.len()], old[..]);
    assert_eq!(new.len(), old.len() + 1, "only the notice was added");
    assert_eq!(call_ids(&after[0]), ["c1"]);
    assert_eq!(runs_of_the_counter(&workspace), 1, "c1 ran once");
    let parent = first_line(&resumed_record)["flycode"]["run"]["continues"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        parent.contains("/state/runs/"),
        "latest is the state folder's newest run: {parent}"
    );
    assert_resumed_notice(&after[0], Path::new(&parent));
    assert_validates(&resumed_record);
}

#[test]
fn a_run_that_used_its_turn_budget_resumes_with_a_new_message() {
    let workspace = Workspace::new();
    let call = counting_call(&workspace, "");
    let first = ScriptedServer::start({
        let call = call.clone();
        move |_, index| {
            let id = format!("c{}", index + 1);
            Reply::sse_tool_calls(&[(id.as_str(), "process_run", call.as_str())])
        }
    });
    let mut args = model_args(&first);
    args.extend(["--max-turns", "2", "Count twice."].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let finished = finish(workspace.command(&args));
    assert_ne!(finished.code, 0);
    assert_eq!(runs_of_the_counter(&workspace), 2);

    let second = ScriptedServer::sequence(vec![
        Reply::sse_tool_calls(&[("c3", "process_run", call.as_str())]),
        Reply::sse_text("Counted three times.", 7),
    ]);
    let mut args = model_args(&second);
    args.extend([
        "--resume".into(),
        workspace.transcript().display().to_string(),
    ]);
    args.push("Count once more, then stop.".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let resumed_record = workspace.base.join("resumed.jsonl");
    let finished = finish(workspace.command_to(&resumed_record, &args));
    assert_eq!(finished.code, 0, "{}", finished.stderr);
    let after = second.requests();
    assert_eq!(call_ids(&after[0]), ["c1", "c2"]);
    assert_eq!(
        results(&after[0]).len(),
        2,
        "both earlier calls have their results"
    );
    assert_eq!(
        last_user_texts(&after[0]).last().unwrap(),
        "Count once more, then stop."
    );
    assert_eq!(call_ids(&after[1]), ["c1", "c2", "c3"]);
    assert_eq!(
        runs_of_the_counter(&workspace),
        3,
        "c1 and c2 were not run again"
    );
    assert_validates(&resumed_record);
}

#[test]
fn a_killed_run_reports_the_call_without_a_result_as_not_run() {
    let workspace = Workspace::new();
    let call = counting_call(&workspace, "; echo $$ > sleeper.pid; exec sleep 300");
    let first = ScriptedServer::always(Reply::sse_tool_calls(&[(
        "k1",
        "process_run",
        call.as_str(),
    )]));
    let (mut child, pid_file) = start_until_sleeper(&workspace, &first, "Count.", Stdio::null);
    send_signal(child.id(), "KILL");
    child.wait().unwrap();
    let sleeper = std::fs::read_to_string(&pid_file).unwrap();
    let _ = std::process::Command::new("kill")
        .args(["-KILL", sleeper.trim()])
        .status();

    let second = ScriptedServer::sequence(vec![Reply::sse_text("It may have counted.", 7)]);
    let mut args = model_args(&second);
    args.extend([
        "--resume".into(),
        workspace.transcript().display().to_string(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let resumed_record = workspace.base.join("resumed.jsonl");
    let finished = finish(workspace.command_to(&resumed_record, &args));
    assert_eq!(finished.code, 0, "{}", finished.stderr);
    let after = second.requests();
    let answered = results(&after[0]);
    assert_eq!(answered.len(), 1);
    assert_eq!(answered[0].0, "k1");
    assert!(answered[0].1.contains("not run"), "{}", answered[0].1);
    assert!(
        last_user_texts(&after[0])
            .join("\n")
            .contains("One call had no result"),
        "{:?}",
        last_user_texts(&after[0])
    );
    assert_eq!(runs_of_the_counter(&workspace), 1, "k1 was not run again");
    assert_validates(&resumed_record);
}

#[test]
fn an_anthropic_run_resumes_with_the_same_history_and_no_call_run_twice() {
    let workspace = Workspace::new();
    let call: Value = serde_json::from_str(&counting_call(&workspace, "")).unwrap();
    let first = ScriptedServer::sequence(vec![
        anthropic_tool_uses(&[("toolu_1", "process_run", call.clone())]),
        Reply::json(
            500,
            json!({"type": "error", "error": {"type": "api_error", "message": "internal"}}),
        ),
    ]);
    let anthropic = |server: &ScriptedServer| {
        vec![
            "--provider".to_owned(),
            "anthropic".to_owned(),
            "--base-url".to_owned(),
            server.base_url(),
            "--model".to_owned(),
            "claude-test".to_owned(),
        ]
    };
    let mut args = anthropic(&first);
    args.extend(["--max-retries", "0", "Count."].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let finished = finish(workspace.command(&args));
    assert_ne!(finished.code, 0);
    assert_eq!(runs_of_the_counter(&workspace), 1);

    let second = ScriptedServer::sequence(vec![anthropic_text("Counted once.")]);
    let mut args = anthropic(&second);
    args.extend([
        "--resume".into(),
        workspace.transcript().display().to_string(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let resumed_record = workspace.base.join("resumed.jsonl");
    let finished = finish(workspace.command_to(&resumed_record, &args));
    assert_eq!(finished.code, 0, "{}", finished.stderr);
    let failed = &first.requests()[1];
    let resumed = &second.requests()[0];
    let old = failed.body["messages"].as_array().unwrap();
    let new = resumed.body["messages"].as_array().unwrap();
    // The same turns: the task, the tool_use, its tool_result (the last user turn grows by the
    // notice; cache marks move to the new last block).
    let strip = |m: &Value| {
        let mut m = m.clone();
        for block in m["content"].as_array_mut().unwrap() {
            block.as_object_mut().unwrap().remove("cache_control");
        }
        m
    };
    assert_eq!(strip(&new[0]), strip(&old[0]));
    assert_eq!(strip(&new[1]), strip(&old[1]));
    assert_eq!(new[1]["content"][1]["id"], "toolu_1");
    assert_eq!(new[2]["content"][0]["tool_use_id"], "toolu_1");
    assert_eq!(strip(&new[2])["content"][0], strip(&old[2])["content"][0]);
    assert!(
        new[2]
            .to_string()
            .contains("This run continues an earlier one")
    );
    assert_eq!(runs_of_the_counter(&workspace), 1, "toolu_1 ran once");
    assert_validates(&resumed_record);
}

/// A text-mode reply holding one `process.run` call block.
fn text_call_reply(id: &str, args: &str) -> Reply {
    let args: Value = serde_json::from_str(args).unwrap();
    let block = json!({"id": id, "tool": "process.run", "args": args});
    Reply::sse_text(&format!("```flycode-call\n{block}\n```"), 7)
}

#[test]
fn a_resumed_text_mode_run_refuses_an_id_the_earlier_run_used() {
    let workspace = Workspace::new();
    let call = counting_call(&workspace, "");
    let first = ScriptedServer::sequence(vec![text_call_reply("call-1", &call)]);
    let mut args = model_args(&first);
    args.extend(["--mode", "text", "--max-turns", "1", "Count."].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let finished = finish(workspace.command(&args));
    assert_ne!(finished.code, 0, "the turn budget ran out");
    assert_eq!(runs_of_the_counter(&workspace), 1);

    let second = ScriptedServer::sequence(vec![
        text_call_reply("call-1", &call),
        Reply::sse_text("Stopping.", 7),
    ]);
    let mut args = model_args(&second);
    args.extend(["--mode".into(), "text".into(), "--resume".into()]);
    args.push(workspace.transcript().display().to_string());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let resumed_record = workspace.base.join("resumed.jsonl");
    let finished = finish(workspace.command_to(&resumed_record, &args));
    assert_eq!(finished.code, 0, "{}", finished.stderr);
    assert_eq!(
        runs_of_the_counter(&workspace),
        1,
        "the reused id was refused, not run"
    );
    let answer = last_user_texts(&second.requests()[1]).join("\n");
    assert!(
        answer.contains("an earlier call of this run used it"),
        "{answer}"
    );
    // `validate` reads the resumed record as one run: the reuse is its duplicate_id, as in a
    // run that never stopped.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_flycode"))
        .arg("validate")
        .arg(&resumed_record)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(
        report.contains("duplicate_id") && report.contains("1 error"),
        "{report}"
    );
}

#[test]
fn a_resumed_run_cannot_write_or_read_the_earlier_transcript() {
    let workspace = Workspace::new();
    // The earlier run is recorded inside the root, where the file tools reach.
    let parent = workspace.root.join("parent.jsonl");
    let first = ScriptedServer::sequence(vec![Reply::sse_text("Done.", 7)]);
    let args = model_args(&first);
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    args.push("Say done.");
    let finished = finish(workspace.command_to(&parent, &args));
    assert_eq!(finished.code, 0, "{}", finished.stderr);
    let before = std::fs::read(&parent).unwrap();

    let target = parent.display().to_string();
    let write = json!({"path": target, "mode": "overwrite", "content": "{}\n"}).to_string();
    let read = json!({"path": target}).to_string();
    let second = ScriptedServer::sequence(vec![
        Reply::sse_tool_calls(&[("w1", "fs_write", write.as_str())]),
        Reply::sse_tool_calls(&[("r1", "fs_read", read.as_str())]),
        Reply::sse_text("Left it alone.", 7),
    ]);
    let mut args = model_args(&second);
    args.extend(["--resume".into(), target.clone(), "Go on.".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let resumed_record = workspace.base.join("resumed.jsonl");
    let finished = finish(workspace.command_to(&resumed_record, &args));
    assert_eq!(finished.code, 0, "{}", finished.stderr);
    assert_eq!(
        std::fs::read(&parent).unwrap(),
        before,
        "the parent is unchanged"
    );
    let requests = second.requests();
    let answered = results(&requests[2]);
    let of = |id: &str| {
        answered
            .iter()
            .find(|(call, _)| call == id)
            .map(|(_, content)| content.clone())
            .unwrap()
    };
    for id in ["w1", "r1"] {
        let result = of(id);
        assert!(
            result.contains("[ok] false") && result.contains("transcript this run records"),
            "{id}: {result}"
        );
    }
    assert_validates(&resumed_record);
}

/// `--resume` talks to the API the run it continues talked to (provider, endpoint, model,
/// recorded in its transcript; never the key) unless a flag says otherwise: the person need not
/// repeat them.
#[test]
fn a_resumed_run_talks_to_the_same_api_and_model_unless_told_otherwise() {
    let workspace = Workspace::new();
    let server = ScriptedServer::sequence(vec![
        Reply::sse_text("First answer.", 7),
        Reply::sse_text("Second answer.", 7),
        Reply::sse_text("Third answer.", 7),
    ]);
    let mut args = model_args(&server);
    args.push("Say something.".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let finished = finish(workspace.command(&args));
    assert_eq!(finished.code, 0, "{}", finished.stderr);
    let transcript = workspace.transcript().display().to_string();
    let resumed = workspace.base.join("resumed.jsonl");
    let finished = finish(workspace.command_to(
        &resumed,
        &["--resume", &transcript, "--continue", "And more."],
    ));
    assert_eq!(finished.code, 0, "{}", finished.stderr);
    assert!(
        finished.stdout.contains("Second answer."),
        "{}",
        finished.stdout
    );
    let requests = server.requests();
    assert_eq!(requests[1].body["model"], "scripted-model");
    // Told otherwise: another model on the same endpoint.
    let finished = finish(workspace.command_to(
        &workspace.base.join("third.jsonl"),
        &[
            "--resume",
            &transcript,
            "--continue",
            "Once more.",
            "--model",
            "other-model",
        ],
    ));
    assert_eq!(finished.code, 0, "{}", finished.stderr);
    assert_eq!(server.requests()[2].body["model"], "other-model");
}
