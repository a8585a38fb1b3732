//! Background jobs at every door that lives (PROTOCOL.md §10 (Running calls: background jobs)):
//! the real binary in `watch`, `mcp` and `run`, its jobs' end told, and nothing left running when
//! the session ends; `exec` refuses them. Real processes, pids checked in `/proc`.

use super::common::spawn_watch;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::common::{send_signal, wait_for_file};

/// A folder with the allowed root, the state and config folders and a home.
struct Place {
    _temp: tempfile::TempDir,
    base: PathBuf,
    root: PathBuf,
}

fn place() -> Place {
    let temp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(temp.path()).unwrap();
    let root = base.join("root");
    for dir in ["root", "state", "config", "home", "inbox"] {
        std::fs::create_dir_all(base.join(dir)).unwrap();
    }
    Place {
        _temp: temp,
        base,
        root,
    }
}

fn flycode(place: &Place, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_flycode"));
    command
        .args(args)
        .env("FLYCODE_STATE_DIR", place.base.join("state"))
        .env("XDG_CONFIG_HOME", place.base.join("config"))
        .env("HOME", place.base.join("home"))
        .current_dir(&place.root);
    command
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

/// The pids the jobs wrote to `root/pids`, once there are `count`.
fn pids(root: &Path, count: usize) -> Vec<i32> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(root.join("pids")).unwrap_or_default();
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

/// A job that leaves a grandchild and writes both pids.
fn server_script(root: &Path) -> String {
    let pids = root.join("pids");
    let pids = pids.display();
    format!("sleep 300 & echo $! >> {pids}; echo $$ >> {pids}; echo serving; wait")
}

fn call_block(id: &str, tool: &str, args: &Value) -> String {
    let call = json!({"id": id, "tool": tool, "args": args});
    format!("```flycode-call\n{call}\n```\n")
}

#[test]
fn exec_refuses_background_and_names_the_doors_that_keep_jobs() {
    let place = place();
    let block = call_block(
        "c1",
        "shell.exec",
        &json!({"command": "sleep 300", "background": true}),
    );
    let output = flycode(&place, &["exec", "--yes", "--tools", "extended", "--root"])
        .arg(&place.root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            child.stdin.take().unwrap().write_all(block.as_bytes())?;
            child.wait_with_output()
        })
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("[ok] false"), "{stdout}");
    for door in ["flycode watch", "flycode run", "flycode mcp"] {
        assert!(stdout.contains(door), "{stdout}");
    }
}

#[test]
fn watch_tells_of_an_ended_job_and_its_ctrl_c_leaves_no_process() {
    let place = place();
    let inbox = place.base.join("inbox");
    let (config, home) = (place.base.join("config"), place.base.join("home"));
    let child = spawn_watch(
        &inbox,
        &place.root,
        &place.base.join("state"),
        &["--tools", "extended"],
        &[("XDG_CONFIG_HOME", &config), ("HOME", &home)],
    );
    let script = server_script(&place.root);
    let reply = call_block(
        "c1",
        "shell.exec",
        &json!({"command": script, "background": true}),
    );
    std::fs::write(inbox.join("one.md"), reply).unwrap();
    let first = wait_for_file(&inbox.join("one.result.md"));
    assert!(first.contains("[job] job-1"), "{first}");
    let reply = call_block(
        "c2",
        "shell.exec",
        &json!({"command": "echo done", "background": true}),
    );
    std::fs::write(inbox.join("two.md"), reply).unwrap();
    assert!(wait_for_file(&inbox.join("two.result.md")).contains("[job] job-2"));
    // Waits for job-2's end: the answer that sees it carries the notice.
    let reply = call_block(
        "c3",
        "job.log",
        &json!({"jobId": "job-2", "startLine": 2, "waitMs": 60000}),
    );
    std::fs::write(inbox.join("three.md"), reply).unwrap();
    let third = wait_for_file(&inbox.join("three.result.md"));
    assert!(third.contains("[state] exited"), "{third}");
    assert!(third.contains("[jobs] job-2 exited 0 after "), "{third}");
    let pids = pids(&place.root, 2);
    assert!(pids.iter().all(|&pid| alive(pid)));
    send_signal(child.id(), "INT");
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("[jobs] job-2 exited 0 after "), "{stderr}");
    for pid in pids {
        assert!(!alive(pid), "{pid} outlived flycode watch");
    }
}

/// Sends one JSON-RPC line.
fn send(stdin: &mut impl Write, message: &Value) {
    writeln!(stdin, "{message}").unwrap();
    stdin.flush().unwrap();
}

fn tools_call(id: u64, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": name, "arguments": arguments}})
}

#[test]
fn mcp_notifies_the_client_of_an_ended_job_and_its_disconnect_leaves_no_process() {
    let place = place();
    let mut child = flycode(&place, &["mcp", "--approve", "auto", "--root"])
        .arg(&place.root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    send(
        &mut stdin,
        &json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}),
    );
    send(
        &mut stdin,
        &json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
    );
    let script = server_script(&place.root);
    send(
        &mut stdin,
        &tools_call(
            2,
            "shell_exec",
            json!({"command": script, "background": true}),
        ),
    );
    send(
        &mut stdin,
        &tools_call(
            3,
            "shell_exec",
            json!({"command": "echo done", "background": true}),
        ),
    );
    let mut seen = Vec::new();
    let mut notified = None;
    while notified.is_none() {
        let line = lines.next().expect("the server closed early").unwrap();
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["method"] == "notifications/message" {
            notified = Some(message);
        } else {
            seen.push(message);
        }
    }
    let notified = notified.unwrap();
    let text = notified["params"]["data"].as_str().unwrap_or_default();
    assert!(text.starts_with("[jobs] job-"), "{notified}");
    assert!(text.contains(" exited 0 after "), "{notified}");
    assert_eq!(notified["params"]["logger"], "flycode.jobs");
    let pids = pids(&place.root, 2);
    assert!(pids.iter().all(|&pid| alive(pid)));
    drop(stdin);
    let _rest: Vec<_> = lines.collect();
    assert!(child.wait().unwrap().success());
    for pid in pids {
        assert!(!alive(pid), "{pid} outlived the MCP connection");
    }
    let started: Vec<&Value> = seen.iter().filter(|m| m["id"] == 2).collect();
    assert_eq!(started.len(), 1, "{seen:?}");
    assert_eq!(started[0]["result"]["isError"], false, "{seen:?}");
}

#[test]
fn run_tells_the_model_of_an_ended_job_and_its_ctrl_c_leaves_no_process() {
    use super::api_server::{Reply, ScriptedServer};
    let place = place();
    let script = server_script(&place.root);
    let steps: Vec<(&str, String)> = vec![
        (
            "shell_exec",
            json!({"command": script, "background": true}).to_string(),
        ),
        (
            "shell_exec",
            json!({"command": "echo done", "background": true}).to_string(),
        ),
        (
            "job_log",
            json!({"jobId": "job-2", "startLine": 2, "waitMs": 60000}).to_string(),
        ),
    ];
    let server = ScriptedServer::start(move |_, index| match steps.get(index) {
        Some((name, arguments)) => {
            let id = format!("fc_{index}");
            Reply::sse_tool_calls(&[(id.as_str(), name, arguments.as_str())])
        }
        None => Reply::sse_then_stall(&[json!({
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Let me look"}}]
        })]),
    });
    let mut command = flycode(&place, &["run", "--base-url"]);
    for (name, _) in std::env::vars() {
        if name.starts_with("FLYCODE_") || name.starts_with("OPENAI_") {
            command.env_remove(name);
        }
    }
    let child = command
        .env("FLYCODE_STATE_DIR", place.base.join("state"))
        .arg(server.base_url())
        .args(["--model", "scripted-model", "--yes", "--root"])
        .arg(&place.root)
        .arg("Start the server and check it.")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.requests().len() < 4 {
        assert!(
            Instant::now() < deadline,
            "the run never made its 4th request"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let pids = pids(&place.root, 2);
    assert!(pids.iter().all(|&pid| alive(pid)));
    send_signal(child.id(), "INT");
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("[jobs] job-2 exited 0 after "), "{stderr}");
    for pid in pids {
        assert!(!alive(pid), "{pid} outlived flycode run");
    }
    let request = &server.requests()[3];
    let messages = request.body["messages"].as_array().unwrap();
    let text = |m: &Value| m["content"].as_str().unwrap_or_default().to_owned();
    let special = messages
        .iter()
        .map(text)
        .find(|t| t.starts_with("[flycode] Background jobs"))
        .unwrap_or_else(|| panic!("no jobs message: {messages:?}"));
    assert!(special.contains("job-2 exited 0 after "), "{special}");
    assert!(special.contains("job-1 running for "), "{special}");
    let results: Vec<String> = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(text)
        .collect();
    assert!(
        results
            .iter()
            .any(|t| t.contains("[jobs] job-2 exited 0 after ")),
        "{results:?}"
    );
}

/// A model starts a job that never reads its stdin, then pours more input into it than any pipe
/// holds: the call answers (the job took only part of it), the session goes on, `job.kill`
/// gets through, and input over the cap is refused before anything is written.
#[test]
fn job_input_to_a_job_that_never_reads_does_not_wedge_the_session() {
    let place = place();
    let mut child = flycode(&place, &["mcp", "--approve", "auto", "--root"])
        .arg(&place.root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (lines_to, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if lines_to.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    // The answer to request `id`, or a failure naming the wedge (the server is then killed).
    let answer = |id: u64, child: &mut std::process::Child| -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(line) = lines.recv_timeout(left) else {
                let _ = child.kill();
                let _ = child.wait();
                panic!("request {id} was never answered: the session is wedged");
            };
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                return message;
            }
        }
    };
    send(
        &mut stdin,
        &json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}),
    );
    send(
        &mut stdin,
        &json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
    );
    send(
        &mut stdin,
        &tools_call(
            2,
            "shell_exec",
            json!({"command": "sleep 300", "background": true}),
        ),
    );
    let started = answer(2, &mut child);
    assert_eq!(started["result"]["isError"], false, "{started}");
    let flood = "y".repeat(512 * 1024);
    send(
        &mut stdin,
        &tools_call(
            3,
            "job_input",
            json!({"jobId": "job-1", "input": flood, "waitMs": 200}),
        ),
    );
    let poured = answer(3, &mut child);
    let text = poured["result"].to_string();
    assert_eq!(poured["result"]["isError"], true, "{text}");
    assert!(text.contains("not reading its stdin"), "{text}");
    send(
        &mut stdin,
        &tools_call(
            4,
            "job_input",
            json!({"jobId": "job-1", "input": "z".repeat(2 << 20)}),
        ),
    );
    let capped = answer(4, &mut child);
    assert!(
        capped["result"].to_string().contains("too_large"),
        "{capped}"
    );
    send(
        &mut stdin,
        &tools_call(5, "job_kill", json!({"jobId": "job-1", "signal": "KILL"})),
    );
    let killed = answer(5, &mut child);
    assert_eq!(killed["result"]["isError"], false, "{killed}");
    assert!(killed["result"].to_string().contains("ended"), "{killed}");
    drop(stdin);
    assert!(child.wait().unwrap().success());
}
