//! A writer killed at any moment leaves every file wholly old or wholly new, never torn: the real
//! binary is started on a large fs.write or fs.writeBatch and killed after a varying delay, many
//! times. (The delays only vary where the kill lands; nothing here measures time.)

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;

fn run_and_kill(root: &std::path::Path, state: &std::path::Path, reply: &str, delay: Duration) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_flycode"))
        .args(["exec", "--approve", "auto", "--root"])
        .arg(root)
        .env("FLYCODE_STATE_DIR", state)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // The child may already be gone when the kill comes early: a broken pipe is fine.
    let _ = stdin.write_all(reply.as_bytes());
    drop(stdin);
    std::thread::sleep(delay);
    let _ = child.kill();
    let _ = child.wait();
}

fn run_to_the_end(root: &std::path::Path, state: &std::path::Path, reply: &str) {
    super::common::flycode()
        .args(["exec", "--approve", "auto", "--root"])
        .arg(root)
        .env("FLYCODE_STATE_DIR", state)
        .write_stdin(reply.to_owned())
        .assert()
        .code(0);
}

/// Delays spread over the writer's whole run, from a fixed pseudo-random sequence.
fn delays(count: u64, max_ms: u64) -> impl Iterator<Item = Duration> {
    (0..count).map(move |i| Duration::from_millis((i * 7919 + 13) % max_ms))
}

fn assert_whole(path: &std::path::Path, old: &str, new: &str) -> bool {
    let content = std::fs::read_to_string(path).unwrap();
    assert!(
        content == old || content == new,
        "{} is torn: {} bytes",
        path.display(),
        content.len()
    );
    content == new
}

#[test]
fn a_killed_write_leaves_the_old_or_the_new_file() {
    let temp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(temp.path()).unwrap().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let target = root.join("big.txt");
    let old = "o".repeat(2 * 1024 * 1024);
    let new = "n".repeat(4 * 1024 * 1024);
    let call = json!({"id": "w", "tool": "fs.write", "args": {"path": target, "mode": "overwrite", "content": new}});
    let reply = format!("```flycode-call\n{call}\n```\n");
    let mut outcomes = (0, 0);
    for delay in delays(16, 600) {
        std::fs::write(&target, &old).unwrap();
        run_and_kill(&root, &temp.path().join("state"), &reply, delay);
        if assert_whole(&target, &old, &new) {
            outcomes.1 += 1
        } else {
            outcomes.0 += 1
        }
    }
    // Leftover temporaries of killed writers are cleaned by the next write.
    std::fs::write(&target, &old).unwrap();
    run_to_the_end(&root, &temp.path().join("state"), &reply);
    let names: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        names,
        vec![std::ffi::OsString::from("big.txt")],
        "after {outcomes:?}"
    );
}

#[test]
fn a_killed_batch_leaves_each_file_whole() {
    let temp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(temp.path()).unwrap().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let names = ["one.txt", "two.txt", "three.txt"];
    let old = "o".repeat(512 * 1024);
    let new = "n".repeat(1024 * 1024);
    let files: Vec<_> = names
        .iter()
        .map(|n| json!({"path": root.join(n), "content": new}))
        .collect();
    let call = json!({"id": "b", "tool": "fs.writeBatch", "args": {"files": files}});
    let reply = format!("```flycode-call\n{call}\n```\n");
    for delay in delays(12, 500) {
        for name in names {
            std::fs::write(root.join(name), &old).unwrap();
        }
        run_and_kill(&root, &temp.path().join("state"), &reply, delay);
        for name in names {
            assert_whole(&root.join(name), &old, &new);
        }
    }
}
