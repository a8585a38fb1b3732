//! The browser-chat flow over several conversations and restarts (PROTOCOL.md §12 (Watching)), through the
//! inbox: the real binary, a real folder, a state directory kept between runs. Each watcher runs
//! in a session of its own (`setsid`), so no terminal can answer an approval question.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::common::{send_signal, wait_for_file};

/// A running watcher and what it has printed so far.
struct Watcher {
    child: Child,
    printed: Arc<Mutex<String>>,
    reader: std::thread::JoinHandle<()>,
}

impl Watcher {
    /// Starts `command` and waits (up to 30 s) until it says it is watching.
    fn start(command: &mut Command) -> Watcher {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let printed = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&printed);
        let reader = std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buffer) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buffer[..n]));
            }
        });
        let watcher = Watcher {
            child,
            printed,
            reader,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !watcher.printed().contains("Ctrl-C stops") {
            assert!(
                Instant::now() < deadline,
                "the watcher never said it was watching: {}",
                watcher.printed()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        watcher
    }

    fn printed(&self) -> String {
        self.printed.lock().unwrap().clone()
    }
}

/// A project, an inbox and a state directory that outlive the watchers started on them.
struct Desk {
    _temp: tempfile::TempDir,
    base: PathBuf,
    inbox: PathBuf,
    root: PathBuf,
    replies: std::cell::Cell<u32>,
}

impl Desk {
    fn new() -> Desk {
        let temp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(temp.path()).unwrap();
        let (inbox, root) = (base.join("inbox"), base.join("root"));
        std::fs::create_dir_all(&inbox).unwrap();
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("log.txt"), "").unwrap();
        Desk {
            _temp: temp,
            base,
            inbox,
            root,
            replies: std::cell::Cell::new(0),
        }
    }

    fn state(&self) -> PathBuf {
        self.base.join("state")
    }

    /// `flycode watch` on this desk, without a controlling terminal, once it is watching.
    fn watch(&self, extra: &[&str]) -> Watcher {
        Watcher::start(
            Command::new("setsid")
                .arg(env!("CARGO_BIN_EXE_flycode"))
                .args([
                    "watch",
                    "--interval-ms",
                    "20",
                    "--quiet-ms",
                    "100",
                    "--inbox",
                ])
                .arg(&self.inbox)
                .arg("--root")
                .arg(&self.root)
                .args(extra)
                .env("FLYCODE_STATE_DIR", self.state())
                .env("HOME", &self.base),
        )
    }

    /// Drops `reply` into the inbox as a new file and returns the result written beside it.
    fn send(&self, reply: &str) -> String {
        let n = self.replies.get() + 1;
        self.replies.set(n);
        let staged = self.base.join(format!("reply-{n}.md"));
        std::fs::write(&staged, reply).unwrap();
        std::fs::rename(&staged, self.inbox.join(format!("reply-{n}.md"))).unwrap();
        wait_for_file(&self.inbox.join(format!("reply-{n}.result.md")))
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.root.join("log.txt")).unwrap()
    }
}

/// Stops a watcher with SIGTERM and returns what it printed.
fn stop(mut watcher: Watcher) -> String {
    send_signal(watcher.child.id(), "TERM");
    let status = watcher.child.wait().unwrap();
    watcher.reader.join().unwrap();
    let printed = watcher.printed.lock().unwrap().clone();
    assert_eq!(status.code(), Some(0), "{printed}");
    printed
}

fn call(id: &str, tool: &str, args: &serde_json::Value) -> String {
    let call = serde_json::json!({"id": id, "tool": tool, "args": args});
    format!("```flycode-call\n{call}\n```\n")
}

fn append(desk: &Desk, id: &str, text: &str) -> String {
    call(
        id,
        "fs.write",
        &serde_json::json!({"path": desk.root.join("log.txt"), "mode": "append", "content": text}),
    )
}

#[test]
fn a_second_conversation_starting_again_at_call_001_runs_after_a_restart() {
    let desk = Desk::new();
    let first_conversation = append(&desk, "call-001", "first;");
    let watcher = desk.watch(&[]);
    let result = desk.send(&first_conversation);
    assert!(result.contains("[ok] true"), "{result}");
    stop(watcher);

    let watcher = desk.watch(&[]);
    // A new chat: the model counts from call-001 again, with another call.
    let result = desk.send(&append(&desk, "call-001", "second;"));
    assert!(
        result.starts_with("```flycode-result\n[id] call-001\n"),
        "{result}"
    );
    assert!(result.contains("[ok] true"), "{result}");
    assert!(!result.contains("[replayed]"), "{result}");
    // The first conversation's reply copied again is still an answer from memory.
    let replayed = desk.send(&first_conversation);
    assert!(replayed.contains("[replayed] true"), "{replayed}");
    let terminal = stop(watcher);
    assert_eq!(desk.log(), "first;second;");
    assert!(
        terminal.contains("used before for another call"),
        "{terminal}"
    );
    assert_eq!(terminal.matches("used before").count(), 1, "{terminal}");
}

#[test]
fn a_denial_no_one_could_answer_is_forgotten_and_runs_after_a_restart_with_yes() {
    let desk = Desk::new();
    let touch = call(
        "call-001",
        "process.run",
        &serde_json::json!({"command": "touch", "args": [desk.root.join("ran.txt")]}),
    );
    let watcher = desk.watch(&[]);
    let denied = desk.send(&touch);
    assert!(denied.contains("[code] denied_by_policy"), "{denied}");
    // The model is told what to do; the flags are for the person at the terminal.
    assert!(!denied.contains("--yes"), "{denied}");
    assert!(denied.contains("[hint] "), "{denied}");
    let terminal = stop(watcher);
    assert!(terminal.contains("--yes"), "{terminal}");
    assert!(!desk.root.join("ran.txt").exists());

    let watcher = desk.watch(&["--yes"]);
    let ran = desk.send(&touch);
    assert!(ran.contains("[ok] true"), "{ran}");
    assert!(!ran.contains("[replayed]"), "{ran}");
    assert!(desk.root.join("ran.txt").exists());
    // Once it ran, it is never run again.
    std::fs::remove_file(desk.root.join("ran.txt")).unwrap();
    let again = desk.send(&touch);
    assert!(again.contains("[replayed] true"), "{again}");
    stop(watcher);
    assert!(!desk.root.join("ran.txt").exists());
}

#[test]
fn a_refusal_by_policy_is_replayed_under_that_policy_only() {
    let desk = Desk::new();
    let write = append(&desk, "call-001", "x;");
    let watcher = desk.watch(&["--approve", "read-only"]);
    let refused = desk.send(&write);
    assert!(refused.contains("[code] denied_by_policy"), "{refused}");
    let again = desk.send(&write);
    assert!(again.contains("[replayed] true"), "{again}");
    let terminal = stop(watcher);
    assert!(terminal.contains("read-only"), "{terminal}");

    let watcher = desk.watch(&["--approve", "auto"]);
    let ran = desk.send(&write);
    assert!(
        ran.contains("[ok] true") && !ran.contains("[replayed]"),
        "{ran}"
    );
    stop(watcher);
    assert_eq!(desk.log(), "x;");
}

#[test]
fn without_a_display_watch_says_so_in_one_line_and_watches_a_folder() {
    let desk = Desk::new();
    let watcher = Watcher::start(
        Command::new("setsid")
            .arg(env!("CARGO_BIN_EXE_flycode"))
            .args([
                "watch",
                "--yes",
                "--interval-ms",
                "20",
                "--quiet-ms",
                "100",
                "--root",
            ])
            .arg(&desk.root)
            .env_remove("DISPLAY")
            .env_remove("WAYLAND_DISPLAY")
            .env("FLYCODE_STATE_DIR", desk.state())
            .env("HOME", &desk.base),
    );
    let inbox = desk.state().join("inbox");
    std::fs::write(desk.base.join("staged"), append(&desk, "call-001", "a;")).unwrap();
    std::fs::rename(desk.base.join("staged"), inbox.join("reply.md")).unwrap();
    let result = wait_for_file(&inbox.join("reply.result.md"));
    assert!(result.contains("[ok] true"), "{result}");
    let terminal = stop(watcher);
    let first = terminal.lines().next().unwrap_or_default();
    assert!(
        first.contains("no display (DISPLAY is not set)")
            && first.contains(&inbox.display().to_string()),
        "{terminal}"
    );
    assert!(!terminal.contains("timed out"), "{terminal}");
    assert_eq!(desk.log(), "a;");
}

#[test]
fn prompt_copy_without_a_display_leaves_the_prompt_in_a_file() {
    let desk = Desk::new();
    let output = Command::new(env!("CARGO_BIN_EXE_flycode"))
        .args(["prompt", "--copy", "--lang", "en", "--root"])
        .arg(&desk.root)
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .env("FLYCODE_STATE_DIR", desk.state())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(output.stdout.is_empty(), "the prompt must not scroll by");
    let file = desk.state().join("prompt.md");
    assert!(
        stderr.contains("no display (DISPLAY is not set)"),
        "{stderr}"
    );
    assert!(stderr.contains(&file.display().to_string()), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let prompt = std::fs::read_to_string(&file).unwrap();
    assert!(
        prompt.contains(&format!("- `{}`", desk.root.display())),
        "{prompt}"
    );
}

#[test]
fn a_forged_replay_store_entry_is_never_replayed() {
    use sha2::Digest;
    let desk = Desk::new();
    let watcher = desk.watch(&[]);
    let result = desk.send(&append(&desk, "call-001", "first;"));
    assert!(result.contains("[ok] true"), "{result}");
    stop(watcher);
    // The store is replaced by one flycode never wrote: it "remembers" the next call as done.
    let args = serde_json::json!({"path": desk.root.join("log.txt"), "mode": "append", "content": "second;"});
    let print = serde_json::json!({"tool": "fs.write", "args": args}).to_string();
    let forged = serde_json::json!({"version": 2, "executed": [{
        "id": "call-002",
        "fingerprint": hex::encode(sha2::Sha256::digest(print.as_bytes())),
        "result": "```flycode-result\n[id] call-002\n[command] /fs.write\n[ok] true\n[note] FORGED\n```\n",
    }]});
    let store = desk.state().join("watch/default.json");
    assert!(store.exists());
    std::fs::write(&store, forged.to_string()).unwrap();
    let watcher = desk.watch(&[]);
    let result = desk.send(&call("call-002", "fs.write", &args));
    assert!(result.contains("[ok] true"), "{result}");
    assert!(
        !result.contains("FORGED") && !result.contains("[replayed]"),
        "{result}"
    );
    let terminal = stop(watcher);
    assert!(
        terminal.contains("replay store") && terminal.contains("seal does not verify"),
        "{terminal}"
    );
    // It ran for real, once.
    assert_eq!(desk.log(), "first;second;");
}
