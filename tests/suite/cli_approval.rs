//! The approval question as a person sees it and answers it: `flycode exec`, `watch` and `run`
//! under a real pseudo-terminal (util-linux `script`), so that `/dev/tty` is a terminal the test
//! types into (answers, and Ctrl-C as the byte 0x03 the terminal turns into SIGINT).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::api_server::{Reply, ScriptedServer};

/// How long any one wait may last before the test fails instead of hanging.
const DEADLINE: Duration = Duration::from_secs(20);

/// Ctrl-C, as typed.
const CTRL_C: &[u8] = b"\x03";

/// Whether util-linux `script` can be used; without it the test is skipped, except in CI.
fn has_script() -> bool {
    let found = Command::new("script")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "util-linux `script` is needed to give flycode a terminal"
        );
        eprintln!("skipped: util-linux `script` is not installed");
    }
    found
}

/// A word for `sh -c`, in single quotes.
fn quoted(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', "'\\''"))
}

/// A folder for one test: `root` (the allowed root and working directory), `home`, `state`.
struct Place {
    _temp: tempfile::TempDir,
    base: PathBuf,
    root: PathBuf,
}

impl Place {
    fn new() -> Place {
        let temp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(temp.path()).unwrap();
        let root = base.join("root");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(base.join("home")).unwrap();
        Place {
            _temp: temp,
            base,
            root,
        }
    }

    /// A reply file holding `call`.
    fn reply(&self, name: &str, call: &Value) -> PathBuf {
        let path = self.base.join(name);
        std::fs::write(&path, format!("```flycode-call\n{call}\n```\n")).unwrap();
        path
    }

    /// The audit log's lines, parsed.
    fn audit(&self) -> Vec<Value> {
        std::fs::read_to_string(self.base.join("state/audit.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    /// `flycode ARGS` on a terminal of its own.
    fn terminal(&self, args: &[String], env: &[(&str, &str)]) -> Terminal {
        let mut command = quoted(Path::new(env!("CARGO_BIN_EXE_flycode")));
        for arg in args {
            command.push(' ');
            command.push_str(&quoted(Path::new(arg)));
        }
        let mut script = Command::new("script");
        script
            .args(["-qfec", &command, "/dev/null"])
            .current_dir(&self.root)
            .env("SHELL", "/bin/sh")
            .env("HOME", self.base.join("home"))
            .env("XDG_CONFIG_HOME", self.base.join("home/.config"))
            .env("FLYCODE_STATE_DIR", self.base.join("state"))
            .env("TERM", "dumb")
            .env("NO_COLOR", "1");
        for (name, _) in std::env::vars() {
            if name.starts_with("FLYCODE_API") || name.starts_with("OPENAI_") {
                script.env_remove(name);
            }
        }
        for (name, value) in env {
            script.env(name, value);
        }
        Terminal::start(script)
    }
}

/// A program on a pseudo-terminal: what it wrote there so far, and a keyboard.
struct Terminal {
    child: Child,
    keyboard: Option<ChildStdin>,
    receiver: mpsc::Receiver<Vec<u8>>,
    reader: Option<std::thread::JoinHandle<()>>,
    seen: Vec<u8>,
}

impl Terminal {
    fn start(mut script: Command) -> Terminal {
        let mut child = script
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let (sender, receiver) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            while let Ok(read) = stdout.read(&mut buffer) {
                if read == 0 || sender.send(buffer[..read].to_vec()).is_err() {
                    break;
                }
            }
        });
        Terminal {
            keyboard: child.stdin.take(),
            child,
            receiver,
            reader: Some(reader),
            seen: Vec::new(),
        }
    }

    /// Everything shown so far, carriage returns dropped.
    fn output(&self) -> String {
        String::from_utf8_lossy(&self.seen).replace('\r', "")
    }

    /// Waits until the output holds `marker` `times` times; fails the test (and ends the
    /// program) at the deadline.
    fn wait_for(&mut self, marker: &str, times: usize) {
        let deadline = Instant::now() + DEADLINE;
        while self.output().matches(marker).count() < times {
            let left = deadline.checked_duration_since(Instant::now());
            match left.map(|left| self.receiver.recv_timeout(left)) {
                Some(Ok(chunk)) => self.seen.extend(chunk),
                _ => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    panic!(
                        "no {times}× {marker:?} within {DEADLINE:?}:\n{}",
                        self.output()
                    );
                }
            }
        }
    }

    fn type_keys(&mut self, keys: &[u8]) {
        let keyboard = self.keyboard.as_mut().unwrap();
        keyboard.write_all(keys).unwrap();
        keyboard.flush().unwrap();
    }

    /// Waits for the program to end; `None` (after ending it) if it is still running at the
    /// deadline.
    fn finish(&mut self) -> Option<ExitStatus> {
        let deadline = Instant::now() + DEADLINE;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break Some(status);
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        self.keyboard.take();
        if let Some(reader) = self.reader.take() {
            reader.join().unwrap();
        }
        self.seen.extend(self.receiver.try_iter().flatten());
        status
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn args(words: &[&str], rest: &[&Path]) -> Vec<String> {
    words
        .iter()
        .map(|w| (*w).to_owned())
        .chain(rest.iter().map(|p| p.display().to_string()))
        .collect()
}

#[test]
fn a_multi_line_script_is_asked_about_in_real_lines_and_a_no_leaves_it_unrun() {
    if !has_script() {
        return;
    }
    let place = Place::new();
    let reply = place.reply(
        "reply.md",
        &json!({
            "id": "t1",
            "tool": "shell.exec",
            "args": {"command": "echo one\necho two\ntouch ran.txt"}
        }),
    );
    let mut terminal = place.terminal(&args(&["exec", "--root"], &[&place.root, &reply]), &[]);
    terminal.wait_for("Run it? [y/N]", 1);
    terminal.type_keys(b"n\n");
    terminal.wait_for("denied_by_policy", 1);
    let status = terminal.finish();
    let output = terminal.output();
    assert!(
        status.is_some(),
        "flycode did not finish within {DEADLINE:?}:\n{output}"
    );

    let lines: Vec<&str> = output.lines().collect();
    let one = lines
        .iter()
        .position(|line| line.ends_with("│ echo one"))
        .unwrap_or_else(|| panic!("no `echo one` line:\n{output}"));
    assert!(
        lines[one + 1].ends_with("│ echo two") && lines[one + 2].ends_with("│ touch ran.txt"),
        "the script's lines are not the question's lines:\n{output}"
    );
    // The question, not the result block after it, whose [command] is the one-line slash form.
    let question = &output[..output.find("Run it? [y/N]").unwrap()];
    assert!(!question.contains("\\n"), "{question}");
    assert!(
        question.contains(if cfg!(target_os = "linux") {
            "sandbox: Landlock: it writes only inside the allowed roots, a private temporary directory and /dev/null"
        } else {
            "sandbox: none on this platform: the program runs with your user's rights"
        }),
        "{question}"
    );
    assert!(
        question.contains("cwd: the first allowed root"),
        "{question}"
    );
    // exec answers one call: nothing is offered for the rest of a session.
    assert!(output.contains("Run it? [y/N] "), "{output}");
    assert!(!output.contains("[y/N/c/t]"), "{output}");
    assert!(output.contains("denied_by_policy"), "{output}");
    assert_eq!(status.and_then(|s| s.code()), Some(1), "{output}");
    assert!(
        !place.root.join("ran.txt").exists(),
        "the declined script ran:\n{output}"
    );
    let audit = place.audit();
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0]["outcome"], "denied");
    assert_eq!(audit[0]["approval"], "declined");
}

#[test]
fn ctrl_c_at_execs_question_refuses_the_call_logs_it_and_exits_130() {
    if !has_script() {
        return;
    }
    let place = Place::new();
    let reply = place.reply(
        "reply.md",
        &json!({"id": "t1", "tool": "shell.exec", "args": {"command": "touch ran.txt"}}),
    );
    let mut terminal = place.terminal(&args(&["exec", "--root"], &[&place.root, &reply]), &[]);
    terminal.wait_for("Run it? [y/N]", 1);
    terminal.type_keys(CTRL_C);
    let status = terminal.finish();
    let output = terminal.output();
    assert_eq!(status.and_then(|s| s.code()), Some(130), "{output}");
    // The refusal is the call's answer, printed and logged like a no.
    assert!(output.contains("[code] denied_by_policy"), "{output}");
    assert!(output.contains("stopped flycode (Ctrl-C)"), "{output}");
    assert!(!place.root.join("ran.txt").exists(), "{output}");
    let audit = place.audit();
    assert_eq!(audit.len(), 1, "{output}\n{audit:?}");
    assert_eq!(audit[0]["tool"], "shell.exec");
    assert_eq!(audit[0]["outcome"], "denied");
    assert_eq!(audit[0]["code"], "denied_by_policy");
    assert_eq!(audit[0]["approval"], "interrupted");
}

/// The same for a call that starts no program (`fs.rm` asks under `ask`): that `exec` runs
/// without a guardian or a signal thread, and its question still takes the Ctrl-C.
#[test]
fn ctrl_c_at_the_question_of_an_exec_that_runs_no_program_refuses_the_call_and_exits_130() {
    if !has_script() {
        return;
    }
    let place = Place::new();
    std::fs::write(place.root.join("keep.txt"), "kept\n").unwrap();
    let reply = place.reply(
        "reply.md",
        &json!({"id": "r1", "tool": "fs.rm", "args": {"path": place.root.join("keep.txt")}}),
    );
    let mut terminal = place.terminal(&args(&["exec", "--root"], &[&place.root, &reply]), &[]);
    terminal.wait_for("[y/N]", 1);
    terminal.type_keys(CTRL_C);
    let status = terminal.finish();
    let output = terminal.output();
    assert_eq!(status.and_then(|s| s.code()), Some(130), "{output}");
    assert!(output.contains("[code] denied_by_policy"), "{output}");
    assert!(place.root.join("keep.txt").exists(), "{output}");
    let audit = place.audit();
    assert_eq!(audit.len(), 1, "{output}\n{audit:?}");
    assert_eq!(audit[0]["tool"], "fs.rm");
    assert_eq!(audit[0]["approval"], "interrupted");
}

/// `flycode watch` on an inbox folder, on a terminal, once it says it is watching.
fn watch(place: &Place, extra: &[&str]) -> (Terminal, PathBuf) {
    let inbox = place.base.join("inbox");
    std::fs::create_dir_all(&inbox).unwrap();
    let mut words = vec![
        "watch".to_owned(),
        "--interval-ms".to_owned(),
        "20".to_owned(),
        "--quiet-ms".to_owned(),
        "50".to_owned(),
        "--inbox".to_owned(),
        inbox.display().to_string(),
        "--root".to_owned(),
        place.root.display().to_string(),
    ];
    words.extend(extra.iter().map(|w| (*w).to_owned()));
    let mut terminal = place.terminal(&words, &[]);
    terminal.wait_for("Ctrl-C stops.", 1);
    (terminal, inbox)
}

/// Drops a reply holding `call` into the inbox.
fn drop_reply(inbox: &Path, name: &str, call: &Value) {
    let staged = inbox.with_file_name(format!("{name}.staged"));
    std::fs::write(&staged, format!("```flycode-call\n{call}\n```\n")).unwrap();
    std::fs::rename(staged, inbox.join(format!("{name}.md"))).unwrap();
}

#[test]
fn ctrl_c_at_watchs_question_refuses_the_call_and_stops_watching() {
    if !has_script() {
        return;
    }
    let place = Place::new();
    let (mut terminal, inbox) = watch(&place, &[]);
    drop_reply(
        &inbox,
        "one",
        &json!({"id": "w1", "tool": "shell.exec", "args": {"command": "touch ran.txt"}}),
    );
    terminal.wait_for("Run it? [y/N/c/t]", 1);
    terminal.type_keys(CTRL_C);
    let status = terminal.finish();
    let output = terminal.output();
    assert!(
        status.is_some(),
        "watch still waited after Ctrl-C at the question:\n{output}"
    );
    assert!(!place.root.join("ran.txt").exists(), "{output}");
    let audit = place.audit();
    assert_eq!(audit.len(), 1, "{output}\n{audit:?}");
    assert_eq!(audit[0]["outcome"], "denied");
    assert_eq!(audit[0]["approval"], "interrupted");
}

#[test]
fn session_answers_allow_an_exact_command_or_a_tool_until_flycode_stops_but_never_in_person() {
    if !has_script() {
        return;
    }
    let place = Place::new();
    let (mut terminal, inbox) = watch(&place, &[]);
    let shell = |id: &str, command: &str| json!({"id": id, "tool": "shell.exec", "args": {"command": command}});
    // c: this exact command again, without asking.
    drop_reply(&inbox, "r1", &shell("r1", "echo one >> log.txt"));
    terminal.wait_for("Run it? [y/N/c/t]", 1);
    assert!(
        terminal
            .output()
            .contains("c = yes, and to this exact command again until flycode stops"),
        "{}",
        terminal.output()
    );
    terminal.type_keys(b"c\n");
    let _ = common_wait(&inbox.join("r1.result.md"));
    drop_reply(&inbox, "r2", &shell("r2", "echo one >> log.txt"));
    let _ = common_wait(&inbox.join("r2.result.md"));
    // Another command is asked about; t: every shell.exec from now on.
    drop_reply(&inbox, "r3", &shell("r3", "echo two >> log.txt"));
    terminal.wait_for("Run it? [y/N/c/t]", 2);
    terminal.type_keys(b"t\n");
    let _ = common_wait(&inbox.join("r3.result.md"));
    drop_reply(&inbox, "r4", &shell("r4", "echo three >> log.txt"));
    let _ = common_wait(&inbox.join("r4.result.md"));
    // A call only a person may allow is asked about all the same, with no session answers.
    drop_reply(
        &inbox,
        "r5",
        &json!({"id": "r5", "tool": "shell.exec", "args": {"command": "echo four >> log.txt", "env": {"LD_PRELOAD": "/nonexistent.so"}}}),
    );
    terminal.wait_for("Run it?", 3);
    terminal.wait_for("Run it? [y/N] ", 1);
    terminal.type_keys(b"n\n");
    let refused = common_wait(&inbox.join("r5.result.md"));
    assert!(refused.contains("denied_by_policy"), "{refused}");
    terminal.type_keys(CTRL_C);
    let status = terminal.finish();
    let output = terminal.output();
    assert!(status.is_some(), "{output}");
    assert_eq!(output.matches("Run it?").count(), 3, "{output}");
    assert_eq!(
        std::fs::read_to_string(place.root.join("log.txt")).unwrap(),
        "one\none\ntwo\nthree\n"
    );
    let how: Vec<(String, String)> = place
        .audit()
        .iter()
        .map(|line| {
            (
                line["id"].as_str().unwrap().to_owned(),
                line["approval"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected = [
        ("r1", "person"),
        ("r2", "session-command"),
        ("r3", "person"),
        ("r4", "session-tool"),
        ("r5", "declined"),
    ];
    assert_eq!(
        how,
        expected
            .iter()
            .map(|(id, by)| ((*id).to_owned(), (*by).to_owned()))
            .collect::<Vec<_>>()
    );
    // Remembered in this process only: nothing about them is written to the state directory.
    let state = std::fs::read_dir(place.base.join("state")).unwrap();
    for entry in state.flatten() {
        if entry.file_type().unwrap().is_file() && entry.file_name() != "audit.jsonl" {
            let text = String::from_utf8_lossy(&std::fs::read(entry.path()).unwrap()).into_owned();
            assert!(!text.contains("session-tool"), "{text}");
        }
    }
}

fn common_wait(path: &Path) -> String {
    super::common::wait_for_file(path)
}

#[test]
fn a_write_question_shows_the_diff_capped_with_secrets_masked() {
    if !has_script() {
        return;
    }
    let place = Place::new();
    let key = "sk-approval-diff-secret-123456";
    // An `ask` rule tightens, so it applies from an untrusted project file.
    std::fs::write(
        place.root.join("flycode.toml"),
        "[tools]\n\"fs.write\" = \"ask\"\n",
    )
    .unwrap();
    let old: String = std::iter::once(format!("KEY={key}\n"))
        .chain((1..=60).map(|n| format!("line {n}\n")))
        .collect();
    let new: String = std::iter::once(format!("KEY={key}\n"))
        .chain((1..=60).map(|n| format!("LINE {n}\n")))
        .collect();
    let file = place.root.join("notes.txt");
    std::fs::write(&file, &old).unwrap();
    let reply = place.reply(
        "reply.md",
        &json!({"id": "d1", "tool": "fs.write", "args": {"path": file, "mode": "overwrite", "content": new}}),
    );
    let mut terminal = place.terminal(
        &args(&["exec", "--root"], &[&place.root, &reply]),
        &[("FLYCODE_API_KEY", key)],
    );
    terminal.wait_for("Run it? [y/N]", 1);
    let output = terminal.output();
    let question = &output[output.find("flycode wants to run:").unwrap()..];
    let changes = &question[question
        .find("It would change:\n")
        .unwrap_or_else(|| panic!("no diff in the question:\n{question}"))..];
    let diff: Vec<&str> = changes
        .lines()
        .skip(1)
        .take_while(|line| line.starts_with("  "))
        .collect();
    assert_eq!(diff[0], format!("  --- {}", file.display()), "{question}");
    assert_eq!(diff[1], format!("  +++ {}", file.display()), "{question}");
    assert!(diff.contains(&"  -line 1"), "{question}");
    assert_eq!(diff[2], "  @@ -1,61 +1,61 @@", "{question}");
    // 40 lines of diff (of 124), then the count of the rest.
    assert_eq!(diff.len(), 41, "{question}");
    assert_eq!(diff[40], "  … 84 more lines", "{question}");
    assert!(!output.contains(key), "the key is shown:\n{output}");
    assert!(
        diff.contains(&format!("   KEY={}", "*".repeat(key.len())).as_str()),
        "{question}"
    );
    terminal.type_keys(b"y\n");
    let status = terminal.finish();
    let output = terminal.output();
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{output}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), new);
    let audit = place.audit();
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0]["outcome"], "ok");
    assert_eq!(audit[0]["approval"], "person");
}

#[test]
fn an_edit_question_shows_the_planned_diff_and_a_no_leaves_the_file_untouched() {
    if !has_script() {
        return;
    }
    let place = Place::new();
    // An `ask` rule tightens, so it applies from an untrusted project file.
    std::fs::write(
        place.root.join("flycode.toml"),
        "[tools]\n\"fs.edit\" = \"ask\"\n",
    )
    .unwrap();
    let file = place.root.join("main.rs");
    let old = "fn main() {\n    println!(\"hi\");\n}\n";
    std::fs::write(&file, old).unwrap();
    let modified = std::fs::metadata(&file).unwrap().modified().unwrap();
    let reply = place.reply(
        "reply.md",
        &json!({"id": "e1", "tool": "fs.edit", "args": {"path": file, "edits": [{"oldText": "\"hi\"", "newText": "\"hello\""}]}}),
    );
    let mut terminal = place.terminal(
        &args(
            &["exec", "--tools", "extended", "--root"],
            &[&place.root, &reply],
        ),
        &[],
    );
    terminal.wait_for("Run it? [y/N]", 1);
    let output = terminal.output();
    let question = &output[output.find("flycode wants to run:").unwrap()..];
    let changes = &question[question
        .find("It would change:\n")
        .unwrap_or_else(|| panic!("no diff in the question:\n{question}"))..];
    let diff: Vec<&str> = changes
        .lines()
        .skip(1)
        .take_while(|line| line.starts_with("  "))
        .collect();
    assert_eq!(diff[0], format!("  --- {}", file.display()), "{question}");
    assert_eq!(diff[1], format!("  +++ {}", file.display()), "{question}");
    assert!(diff.contains(&"  -    println!(\"hi\");"), "{question}");
    assert!(diff.contains(&"  +    println!(\"hello\");"), "{question}");
    // Deciding only planned the edit: nothing was written while the question waited.
    assert_eq!(std::fs::read_to_string(&file).unwrap(), old);
    terminal.type_keys(b"n\n");
    terminal.wait_for("denied_by_policy", 1);
    let status = terminal.finish();
    let output = terminal.output();
    assert_eq!(status.and_then(|s| s.code()), Some(1), "{output}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), old, "{output}");
    assert_eq!(
        std::fs::metadata(&file).unwrap().modified().unwrap(),
        modified
    );
    let mut names: Vec<String> = std::fs::read_dir(&place.root)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["flycode.toml", "main.rs"], "{output}");
    let audit = place.audit();
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0]["tool"], "fs.edit");
    assert_eq!(audit[0]["outcome"], "denied");
    assert_eq!(audit[0]["approval"], "declined");
}

#[test]
fn ctrl_c_at_runs_question_refuses_the_call_and_stops_the_run() {
    if !has_script() {
        return;
    }
    let place = Place::new();
    let call =
        json!({"id": "call-001", "tool": "shell.exec", "args": {"command": "touch ran.txt"}});
    let server =
        ScriptedServer::always(Reply::sse_text(&format!("```flycode-call\n{call}\n```"), 5));
    let words = vec![
        "run".to_owned(),
        "--base-url".to_owned(),
        server.base_url(),
        "--model".to_owned(),
        "scripted-model".to_owned(),
        "--mode".to_owned(),
        "text".to_owned(),
        "--root".to_owned(),
        place.root.display().to_string(),
        "--transcript".to_owned(),
        place.base.join("run.jsonl").display().to_string(),
        "Touch a file.".to_owned(),
    ];
    let mut terminal = place.terminal(&words, &[("FLYCODE_API_KEY", "test-key-not-secret")]);
    terminal.wait_for("Run it? [y/N/c/t]", 1);
    terminal.type_keys(CTRL_C);
    let status = terminal.finish();
    let output = terminal.output();
    assert_eq!(status.and_then(|s| s.code()), Some(130), "{output}");
    assert!(!place.root.join("ran.txt").exists(), "{output}");
    // One request: the run stopped instead of sending the refusal back to the model.
    assert_eq!(server.requests().len(), 1, "{output}");
    let audit = place.audit();
    assert_eq!(audit.len(), 1, "{output}\n{audit:?}");
    assert_eq!(audit[0]["outcome"], "denied");
    assert_eq!(audit[0]["approval"], "interrupted");
}

#[test]
fn a_call_the_policy_runs_is_logged_as_allowed_by_policy_and_log_shows_it() {
    let w = super::common::Workspace::new();
    let (code, _) = w.exec_json(
        &json!({"id": "p1", "tool": "fs.write", "args": {"path": w.path("a.txt"), "mode": "overwrite", "content": "a\n"}}),
        &[],
    );
    assert_eq!(code, 0);
    let log = std::fs::read_to_string(w.state.join("audit.jsonl")).unwrap();
    let entry: Value = serde_json::from_str(log.lines().next().unwrap()).unwrap();
    assert_eq!(entry["approval"], "policy", "{log}");
    let shown = super::common::flycode()
        .args(["log", "-n", "1"])
        .env("FLYCODE_STATE_DIR", &w.state)
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains("p1  fs.write  ok (policy)  "), "{shown}");
}
