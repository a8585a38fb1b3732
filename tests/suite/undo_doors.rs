//! Every door records its calls' changes (PROTOCOL.md §16 (Undo and history)): `watch`, `run`
//! (and `flycode undo --run` takes a whole run back) and `mcp`; `exec` is in `undo.rs`.

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
    let run = changes[0]["run"].as_str().unwrap().to_owned();
    assert_eq!(changes[1]["run"], run.as_str());
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
    assert_eq!(changes[0]["door"], "watch");
    assert_eq!(changes[0]["call"], "w1");
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
    let changes = history(&place);
    assert_eq!(changes[0]["door"], "mcp");
    assert_eq!(
        std::fs::read_to_string(place.root.join("lib.sh")).unwrap(),
        "by mcp\n"
    );
}
