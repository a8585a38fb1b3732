//! No acknowledged write is lost (issue 22): separate `flycode mcp` and `flycode exec` processes
//! appending to one new file, and writing different new files in one folder, all land; a
//! session's own appends never make its next write stale; a root keeps its owner's bits.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Barrier;

use serde_json::{Value, json};

use super::common::Workspace;

const SESSIONS: usize = 4;
const APPENDS: usize = 50;

/// One `flycode mcp --root ROOT` process, spoken to in raw JSON-RPC lines.
struct McpServer {
    child: Child,
    input: std::process::ChildStdin,
    output: std::io::Lines<BufReader<std::process::ChildStdout>>,
    next_id: u64,
}

impl McpServer {
    fn start(w: &Workspace) -> McpServer {
        let mut child = Command::new(env!("CARGO_BIN_EXE_flycode"))
            .args(["mcp", "--root"])
            .arg(&w.root)
            .env("FLYCODE_STATE_DIR", &w.state)
            .env_remove("XDG_CONFIG_HOME")
            .current_dir(&w.root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let input = child.stdin.take().unwrap();
        let output = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut server = McpServer {
            child,
            input,
            output,
            next_id: 1,
        };
        let answer = server.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
        );
        assert!(answer.get("result").is_some(), "{answer}");
        server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.input, "{message}").unwrap();
        self.input.flush().unwrap();
    }

    /// Sends a request and returns the answer under its id (skipping notifications).
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let line = self
                .output
                .next()
                .expect("the server closed early")
                .unwrap();
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                return message;
            }
        }
    }

    fn finish(mut self) {
        drop(self.input);
        assert!(self.child.wait().unwrap().success());
    }
}

/// Every line of `text` and how often it occurs.
fn line_counts(text: &str) -> HashMap<&str, usize> {
    let mut counts = HashMap::new();
    for line in text.lines() {
        *counts.entry(line).or_insert(0) += 1;
    }
    counts
}

/// The line session `session` appends as its `n`th: long enough that a torn append would show.
fn line(session: usize, n: usize) -> String {
    format!("session {session} append {n} {}", "=".repeat(64))
}

#[test]
fn four_mcp_sessions_appending_to_one_new_file_lose_no_acknowledged_append() {
    let w = Workspace::new();
    let target = w.root.join("shared/log.txt");
    let start = Barrier::new(SESSIONS);
    let acknowledged: Vec<usize> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..SESSIONS)
            .map(|session| {
                let (w, target, start) = (&w, &target, &start);
                scope.spawn(move || {
                    let mut server = McpServer::start(w);
                    start.wait();
                    let mut ok = 0;
                    for n in 0..APPENDS {
                        let answer = server.request(
                            "tools/call",
                            json!({"name": "fs_write", "arguments": {
                                "path": target, "mode": "append",
                                "content": format!("{}\n", line(session, n)),
                            }}),
                        );
                        assert_eq!(answer["result"]["isError"], false, "{answer}");
                        ok += 1;
                    }
                    server.finish();
                    ok
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(acknowledged, vec![APPENDS; SESSIONS]);
    let text = std::fs::read_to_string(&target).unwrap();
    let counts = line_counts(&text);
    for session in 0..SESSIONS {
        for n in 0..APPENDS {
            let expected = line(session, n);
            assert_eq!(
                counts.get(expected.as_str()),
                Some(&1),
                "{expected:?} is not there exactly once"
            );
        }
    }
    assert_eq!(counts.len(), SESSIONS * APPENDS, "stray lines: {text}");
    // Each session's lines are in its own order.
    for session in 0..SESSIONS {
        let mine: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with(&format!("session {session} ")))
            .collect();
        let expected: Vec<String> = (0..APPENDS).map(|n| line(session, n)).collect();
        assert_eq!(mine, expected);
    }
    assert_no_temporaries(&w.root.join("shared"));
    // The audit log holds every call, one whole line each, and no journal record outlives its
    // write.
    let audit = std::fs::read_to_string(w.state.join("audit.jsonl")).unwrap();
    let writes = audit
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .filter(|entry| entry["tool"] == "fs.write" && entry["outcome"] == "ok")
        .count();
    assert_eq!(writes, SESSIONS * APPENDS);
    assert_eq!(journal_records(&w), 0);
}

/// How many records are in the state directory's journal.
fn journal_records(w: &Workspace) -> usize {
    std::fs::read_dir(w.state.join("journal")).map_or(0, |entries| entries.count())
}

fn assert_no_temporaries(dir: &Path) {
    let left: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".flycode-tmp-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn exec_processes_writing_new_files_in_one_folder_and_appending_all_land() {
    let w = Workspace::new();
    let log = w.path("out/log.txt");
    let children: Vec<_> = (0..8)
        .map(|n| {
            let call = if n % 2 == 0 {
                json!({"id": "c", "tool": "fs.write", "args": {
                    "path": w.path(&format!("out/file-{n}.txt")), "mode": "overwrite",
                    "content": format!("file {n}\n")}})
            } else {
                json!({"id": "c", "tool": "fs.write", "args": {
                    "path": log, "mode": "append", "content": format!("append {n}\n")}})
            };
            let mut child = Command::new(env!("CARGO_BIN_EXE_flycode"))
                .args(["exec", "--json", "--root"])
                .arg(&w.root)
                .env("FLYCODE_STATE_DIR", &w.state)
                .env_remove("XDG_CONFIG_HOME")
                .current_dir(&w.root)
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let mut stdin = child.stdin.take().unwrap();
            write!(stdin, "```flycode-call\n{call}\n```\n").unwrap();
            child
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    for n in (0..8).step_by(2) {
        assert_eq!(
            std::fs::read_to_string(w.root.join(format!("out/file-{n}.txt"))).unwrap(),
            format!("file {n}\n")
        );
    }
    let text = std::fs::read_to_string(&log).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort_unstable();
    assert_eq!(lines, ["append 1", "append 3", "append 5", "append 7"]);
    // No journal record outlives its write.
    assert_eq!(journal_records(&w), 0);
}

#[test]
fn a_sessions_own_appends_are_not_stale_but_anyone_elses_change_is() {
    let w = Workspace::new();
    let path = w.path("notes.txt");
    std::fs::write(&path, "start\n").unwrap();
    let session = ["--session", "s1"];
    let run = |call: Value| w.exec_json(&call, &session);
    let read = json!({"id": "r", "tool": "fs.read", "args": {"path": path}});
    let append = |n: usize| {
        json!({"id": format!("a{n}"), "tool": "fs.write", "args": {
            "path": path, "mode": "append", "content": format!("line {n}\n")}})
    };
    assert_eq!(run(read.clone()).0, 0);
    for n in 0..3 {
        let (code, report) = run(append(n));
        assert_eq!(code, 0, "append {n}: {report}");
    }
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "start\nline 0\nline 1\nline 2\n"
    );
    assert_eq!(run(read).0, 0);
    std::fs::write(&path, "changed by someone else\n").unwrap();
    let (code, report) = run(append(3));
    assert_eq!(code, 1);
    assert_eq!(report["error"]["code"], "stale_file", "{report}");
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "changed by someone else\n"
    );
}

#[test]
fn chmod_refuses_to_lock_the_owner_out_of_a_root() {
    let w = Workspace::new();
    let root = w.root.display().to_string();
    for mode in ["000", "600", "u-x", "a=r"] {
        let (code, report) = w.exec_json(
            &json!({"id": "m", "tool": "fs.chmod", "args": {"path": root, "mode": mode}}),
            &["--yes"],
        );
        assert_eq!(code, 1, "{mode}");
        assert_eq!(report["error"]["code"], "denied_by_policy", "{report}");
        let message = report["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("u+rwx"), "{report}");
    }
    let (code, report) = w.exec_json(
        &json!({"id": "m", "tool": "fs.chmod", "args": {"path": root, "mode": "go-rwx"}}),
        &["--yes"],
    );
    assert_eq!(code, 0, "{report}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&w.root).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
}

#[test]
fn appends_racing_a_log_rotation_land_once_each() {
    use flycode::sandbox::{Roots, Sandbox, WriteMode};
    let w = Workspace::new();
    let sandbox = Sandbox::open(&Roots::resolve(std::slice::from_ref(&w.root)).unwrap()).unwrap();
    let log = w.path("app.log");
    let (writers, lines) = (3, 40);
    std::thread::scope(|scope| {
        let sandbox = &sandbox;
        let appenders: Vec<_> = (0..writers)
            .map(|writer| {
                let log = log.clone();
                scope.spawn(move || {
                    for n in 0..lines {
                        let line = format!("{writer} {n}\n");
                        sandbox
                            .write_file(&log, line.as_bytes(), WriteMode::Append, None)
                            .unwrap()
                            .unwrap();
                    }
                })
            })
            .collect();
        // Rotate while they append: app.log becomes app.log.N, and the next append starts a
        // new app.log.
        let mut rotation = 0;
        while appenders.iter().any(|a| !a.is_finished()) {
            if sandbox
                .rename(&log, &w.path(&format!("app.log.{rotation}")), false)
                .is_ok()
            {
                rotation += 1;
            }
        }
    });
    let mut seen: HashMap<String, usize> = HashMap::new();
    for entry in std::fs::read_dir(&w.root).unwrap() {
        let path = entry.unwrap().path();
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            *seen.entry(line.to_owned()).or_insert(0) += 1;
        }
    }
    for writer in 0..writers {
        for n in 0..lines {
            let line = format!("{writer} {n}");
            assert_eq!(seen.get(&line), Some(&1), "{line:?}: {seen:?}");
        }
    }
    assert_eq!(seen.len(), writers * lines);
}

#[test]
fn moving_a_file_onto_another_name_of_itself_does_not_wait_for_itself() {
    use flycode::sandbox::{Roots, Sandbox};
    let w = Workspace::new();
    let sandbox = Sandbox::open(&Roots::resolve(std::slice::from_ref(&w.root)).unwrap()).unwrap();
    std::fs::write(w.root.join("a.txt"), "a").unwrap();
    std::fs::hard_link(w.root.join("a.txt"), w.root.join("b.txt")).unwrap();
    // Two names of one file: one lock, not two (the second would wait for the first forever).
    sandbox
        .rename(&w.path("a.txt"), &w.path("b.txt"), true)
        .unwrap();
    assert_eq!(std::fs::read_to_string(w.root.join("b.txt")).unwrap(), "a");
    sandbox
        .rename(&w.path("b.txt"), &w.path("b.txt"), true)
        .unwrap();
    assert_eq!(std::fs::read_to_string(w.root.join("b.txt")).unwrap(), "a");
}

/// `flycode mcp` stopped by SIGTERM right after a write answered: the write's undo record is
/// on the disk before flycode exits (PROTOCOL.md §16, "Order, and a crash"), not left for the
/// next start as a completed record beside a marker.
#[test]
fn mcp_stopped_by_a_signal_right_after_a_write_leaves_its_undo_record_in_place() {
    let w = Workspace::new();
    let mut server = McpServer::start(&w);
    let answer = server.request(
        "tools/call",
        json!({"name": "fs_write", "arguments": {
            "path": w.root.join("notes.txt"), "mode": "overwrite", "content": "one\n",
        }}),
    );
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    super::common::send_signal(server.child.id(), "TERM");
    let status = server.child.wait().unwrap();
    assert_eq!(status.code(), Some(143));
    let undo = w.state.join("undo");
    let mut changes: Vec<String> = std::fs::read_dir(undo.join("changes"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    changes.sort();
    // No marker `c-1.pending` beside it, and the record is the completed one.
    assert_eq!(changes, ["c-1.json"]);
    // The incomplete record and the completed one appended after it (PROTOCOL.md §16, "The
    // store").
    let record = std::fs::read_to_string(undo.join("changes/c-1.json")).unwrap();
    let lines: Vec<&str> = record
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(lines.len(), 2, "{record}");
    assert!(lines[1].contains(r#""complete":true"#), "{record}");
}

/// A door that writes all day makes its journal record file once, not once per write
/// (PROTOCOL.md §11, "After a crash"): between writes the file waits in `journal-spare/`, the
/// journal itself holds nothing, and the door takes its spare away when it exits. A spare left by
/// a process that is gone is removed by the next start.
#[test]
fn a_session_s_writes_reuse_one_journal_record_file_and_leave_nothing_behind() {
    use std::os::unix::fs::MetadataExt;
    let w = Workspace::new();
    let spares = w.state.join("journal-spare");
    let spare_inodes = || -> Vec<u64> {
        std::fs::read_dir(&spares)
            .map(|entries| {
                entries
                    .map(|e| e.unwrap().metadata().unwrap().ino())
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut server = McpServer::start(&w);
    let mut seen = Vec::new();
    for n in 0..3 {
        let answer = server.request(
            "tools/call",
            json!({"name": "fs_write", "arguments": {
                "path": w.root.join(format!("file-{n}.txt")), "mode": "overwrite",
                "content": format!("{n}\n"),
            }}),
        );
        assert_eq!(answer["result"]["isError"], false, "{answer}");
        assert_eq!(journal_records(&w), 0, "no record outlives its write");
        seen.push(spare_inodes());
    }
    assert_eq!(seen[0].len(), 1, "{seen:?}");
    assert!(seen.iter().all(|inodes| *inodes == seen[0]), "{seen:?}");
    server.finish();
    assert!(spare_inodes().is_empty());

    // A spare of a process that is gone (pid 0 never names a user process): removed by the
    // next start, a live process's left alone.
    let dead = spares.join("0-1-0.json");
    let live = spares.join(format!("{}-0-0.json", std::process::id()));
    std::fs::write(&dead, b"").unwrap();
    std::fs::write(&live, b"").unwrap();
    let (code, report) = w.exec_json(
        &json!({"id": "ls", "tool": "fs.ls", "args": {"path": w.root}}),
        &[],
    );
    assert_eq!(code, 0, "{report}");
    assert!(!dead.exists());
    assert!(live.exists());
}
