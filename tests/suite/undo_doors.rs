//! Every door that runs calls records their changes (PROTOCOL.md §16 (Undo and history)) and
//! logs them (PROTOCOL.md §10 (Running calls), the audit log), in both dialects: `exec`, `exec
//! --dialect tags`, `watch`, `watch --dialect tags`, `run` (and `flycode undo --run` takes a whole
//! run back), `run --dialect tags` and `mcp`. Each door opens one session that cannot be opened
//! without its audit log and undo recorder (ARCHITECTURE.md, "The call service"); these tests
//! hold that through the real binary. Every file tool's undo, through `exec`, is in `undo.rs`.

use super::common::spawn_watch;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::api_server::{Reply, ScriptedServer};
use super::common::{flycode, send_signal, wait_for_file};

struct Place {
    _temp: tempfile::TempDir,
    base: PathBuf,
    root: PathBuf,
    state: PathBuf,
}

fn place() -> Place {
    let temp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(temp.path()).unwrap();
    let root = base.join("root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("lib.sh"), "old lib\n").unwrap();
    Place {
        _temp: temp,
        state: base.join("state"),
        root,
        base,
    }
}

fn history(place: &Place) -> Vec<Value> {
    let output = flycode()
        .args(["history", "--json"])
        .env("FLYCODE_STATE_DIR", &place.state)
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn write_call(path: &Path, content: &str) -> Value {
    json!({"path": path, "mode": "overwrite", "content": content})
}

/// A tag-dialect reply: `smart_edit` in Create mode, which replaces `path` with `text`.
fn smart_edit_create(path: &Path, text: &str) -> String {
    format!(
        "<builtin>\nsmart_edit\npath: {}\nmode: Create\nnew_text:\n<<<\n{text}\n>>>\n</builtin>\n",
        path.display()
    )
}

/// The audit log's lines.
fn audit(place: &Place) -> Vec<Value> {
    std::fs::read_to_string(place.state.join("audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The door's one call changed `lib.sh` (from "old lib"): history lists it as `door`'s change
/// by `tool`, the audit log has its line (`ok`, the same call id), and `flycode undo` puts the
/// old content back.
fn assert_recorded_logged_and_undone(place: &Place, door: &str, tool: &str) {
    let changes = history(place);
    assert_eq!(changes.len(), 1, "{door}: {changes:?}");
    let change = &changes[0];
    assert_eq!(change["door"], door, "{change}");
    assert_eq!(change["tool"], tool, "{change}");
    let lib = place.root.join("lib.sh").display().to_string();
    assert!(
        change["paths"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p == lib.as_str()),
        "{change}"
    );
    let logged = audit(place);
    let line = logged
        .iter()
        .find(|line| line["id"] == change["call"])
        .unwrap_or_else(|| panic!("{door}: no audit line for {change}: {logged:?}"));
    assert_eq!(line["tool"], tool, "{line}");
    assert_eq!(line["outcome"], "ok", "{line}");
    assert_ne!(
        std::fs::read_to_string(place.root.join("lib.sh")).unwrap(),
        "old lib\n"
    );
    let undone = flycode()
        .args(["undo", "--root"])
        .arg(&place.root)
        .env("FLYCODE_STATE_DIR", &place.state)
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .unwrap();
    assert!(undone.status.success(), "{door}: {undone:?}");
    assert_eq!(
        std::fs::read_to_string(place.root.join("lib.sh")).unwrap(),
        "old lib\n",
        "{door}"
    );
}

/// `flycode exec --yes FLAGS --root ROOT` on `reply`.
fn exec(place: &Place, flags: &[&str], reply: &str) -> std::process::Output {
    flycode()
        .args(["exec", "--yes"])
        .args(flags)
        .arg("--root")
        .arg(&place.root)
        .env("FLYCODE_STATE_DIR", &place.state)
        .env_remove("XDG_CONFIG_HOME")
        .current_dir(&place.root)
        .write_stdin(reply.to_owned())
        .output()
        .unwrap()
}

#[test]
fn exec_records_and_logs_its_call() {
    let place = place();
    let call = json!({"id": "e1", "tool": "fs.write", "args": write_call(&place.root.join("lib.sh"), "by exec\n")});
    let output = exec(&place, &[], &format!("```flycode-call\n{call}\n```\n"));
    assert!(output.status.success(), "{output:?}");
    assert_recorded_logged_and_undone(&place, "exec", "fs.write");
}

#[test]
fn exec_in_the_tag_dialect_records_and_logs_its_writes() {
    let place = place();
    let reply = smart_edit_create(&place.root.join("lib.sh"), "by exec tags");
    let output = exec(&place, &["--dialect", "tags"], &reply);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{output:?}");
    assert!(
        stdout.contains("<builtin_result name=smart_edit ok=true>"),
        "{stdout}"
    );
    assert_eq!(
        std::fs::read_to_string(place.root.join("lib.sh")).unwrap(),
        "by exec tags\n"
    );
    assert_recorded_logged_and_undone(&place, "exec", "fs.write");
}

#[test]
fn a_run_is_recorded_and_undone_whole() {
    let place = place();
    let steps = [
        write_call(&place.root.join("new.txt"), "made by the run\n"),
        write_call(&place.root.join("lib.sh"), "new lib\n"),
    ];
    let server = ScriptedServer::start(move |_, index| match steps.get(index) {
        Some(args) => {
            let call = json!({"id": format!("call-{index}"), "tool": "fs.write", "args": args});
            Reply::sse_text(&format!("```flycode-call\n{call}\n```"), 3)
        }
        None => Reply::sse_text("Done.", 3),
    });
    let output = Command::new(env!("CARGO_BIN_EXE_flycode"))
        .current_dir(&place.root)
        .env("HOME", &place.base)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("OPENAI_API_KEY")
        .env("FLYCODE_STATE_DIR", &place.state)
        .env("NO_COLOR", "1")
        .args(["run", "--mode", "text", "--base-url"])
        .arg(server.base_url())
        .args(["--model", "scripted-model", "--yes", "--root"])
        .arg(&place.root)
        .arg("Change two files.")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("· c-2"),
        "the terminal line names the change: {stderr}"
    );
    let changes = history(&place);
    assert_eq!(changes.len(), 2, "{changes:?}");
    assert!(changes.iter().all(|c| c["door"] == "run"), "{changes:?}");
    let logged = audit(&place);
    for change in &changes {
        assert!(
            logged
                .iter()
                .any(|line| line["id"] == change["call"] && line["outcome"] == "ok"),
            "{change} is not in the audit log: {logged:?}"
        );
    }
    let run = changes[0]["run"].as_str().unwrap().to_owned();
    assert_eq!(changes[1]["run"], run.as_str());
    // One run id everywhere: the transcript is named by the id history knows.
    assert!(
        place
            .state
            .join("runs")
            .join(format!("{run}.jsonl"))
            .is_file(),
        "no transcript named after the run {run}: {:?}",
        std::fs::read_dir(place.state.join("runs"))
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect::<Vec<_>>()
    );
    assert!(
        stderr.contains(&format!(
            "this run made 2 changes to files; `flycode undo --run {run}`"
        )),
        "{stderr}"
    );
    let undone = flycode()
        .args(["undo", "--run", &run, "--root"])
        .arg(&place.root)
        .env("FLYCODE_STATE_DIR", &place.state)
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .unwrap();
    assert!(undone.status.success(), "{undone:?}");
    assert!(!place.root.join("new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(place.root.join("lib.sh")).unwrap(),
        "old lib\n"
    );
}

#[test]
fn watch_records_its_calls_and_shows_the_id() {
    let place = place();
    let inbox = place.base.join("inbox");
    std::fs::create_dir_all(&inbox).unwrap();
    let child = spawn_watch(&inbox, &place.root, &place.state, &[], &[]);
    let call = json!({"id": "w1", "tool": "fs.write", "args": write_call(&place.root.join("lib.sh"), "watched\n")});
    std::fs::write(
        inbox.join("one.md"),
        format!("```flycode-call\n{call}\n```\n"),
    )
    .unwrap();
    let result = wait_for_file(&inbox.join("one.result.md"));
    send_signal(child.id(), "TERM");
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(result.contains("[change] c-1"), "{result}");
    assert!(stderr.contains("· c-1"), "{stderr}");
    let changes = history(&place);
    assert_eq!(changes[0]["call"], "w1");
    assert_recorded_logged_and_undone(&place, "watch", "fs.write");
}

#[test]
fn watch_in_the_tag_dialect_records_and_logs_its_writes() {
    let place = place();
    let inbox = place.base.join("inbox");
    std::fs::create_dir_all(&inbox).unwrap();
    let child = spawn_watch(
        &inbox,
        &place.root,
        &place.state,
        &["--dialect", "tags"],
        &[],
    );
    std::fs::write(
        inbox.join("one.md"),
        smart_edit_create(&place.root.join("lib.sh"), "by watch tags"),
    )
    .unwrap();
    let result = wait_for_file(&inbox.join("one.result.md"));
    send_signal(child.id(), "TERM");
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    assert!(
        result.contains("<builtin_result name=smart_edit ok=true>"),
        "{result}"
    );
    assert_recorded_logged_and_undone(&place, "watch", "fs.write");
}

#[test]
fn run_in_the_tag_dialect_records_and_logs_its_writes() {
    let place = place();
    let replies = [
        smart_edit_create(&place.root.join("lib.sh"), "by run tags"),
        "<return>\nlib.sh rewritten\n</return>".to_owned(),
    ];
    let server = ScriptedServer::start(move |_, index| {
        Reply::sse_text(&replies[index.min(replies.len() - 1)], 3)
    });
    let output = Command::new(env!("CARGO_BIN_EXE_flycode"))
        .current_dir(&place.root)
        .env("HOME", &place.base)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("OPENAI_API_KEY")
        .env("FLYCODE_STATE_DIR", &place.state)
        .env("NO_COLOR", "1")
        .args(["run", "--dialect", "tags", "--base-url"])
        .arg(server.base_url())
        .args(["--model", "scripted-model", "--yes", "--root"])
        .arg(&place.root)
        .arg("Rewrite lib.sh.")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(place.root.join("lib.sh")).unwrap(),
        "by run tags\n"
    );
    assert_recorded_logged_and_undone(&place, "run", "fs.write");
}

#[test]
fn mcp_records_its_calls_and_returns_the_id() {
    let place = place();
    let mut child = Command::new(env!("CARGO_BIN_EXE_flycode"))
        .args(["mcp", "--root"])
        .arg(&place.root)
        .env("FLYCODE_STATE_DIR", &place.state)
        .env("XDG_CONFIG_HOME", place.base.join("config"))
        .current_dir(&place.root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let call = json!({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "fs_write", "arguments": write_call(&place.root.join("lib.sh"), "by mcp\n")}
    });
    for line in [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned(),
        call.to_string(),
    ] {
        writeln!(stdin, "{line}").unwrap();
    }
    stdin.flush().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let answer = loop {
        let line = lines.next().expect("the server closed early").unwrap();
        let value: Value = serde_json::from_str(&line).unwrap();
        if value["id"] == 2 {
            break value;
        }
    };
    drop(stdin);
    assert!(child.wait().unwrap().success());
    assert_eq!(
        answer["result"]["structuredContent"]["change"], "c-1",
        "{answer}"
    );
    assert_eq!(
        std::fs::read_to_string(place.root.join("lib.sh")).unwrap(),
        "by mcp\n"
    );
    assert_recorded_logged_and_undone(&place, "mcp", "fs.write");
}

/// A door whose calls could be neither looked up nor undone does not run them: without a state
/// directory for the audit log and the undo store, `exec` (either dialect) stops before the
/// call, exit 2, and says why.
#[test]
fn without_a_state_directory_no_door_runs_a_call() {
    let place = place();
    let call = json!({"id": "n1", "tool": "fs.write", "args": write_call(&place.root.join("new.txt"), "x\n")});
    for (flags, reply) in [
        (vec![], format!("```flycode-call\n{call}\n```\n")),
        (
            vec!["--dialect", "tags"],
            smart_edit_create(&place.root.join("new.txt"), "x"),
        ),
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_flycode"))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .args(["exec", "--yes"])
            .args(&flags)
            .arg("--root")
            .arg(&place.root)
            .current_dir(&place.root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(reply.as_bytes())
            .unwrap();
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(
            stderr.contains("no state directory for the audit log and the undo store"),
            "{stderr}"
        );
        assert!(!place.root.join("new.txt").exists(), "{flags:?}: {stderr}");
    }
}
