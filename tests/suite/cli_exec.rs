//! `flycode exec` and `flycode log` run as a user runs them.

use predicates::prelude::*;
use serde_json::{Value, json};

use super::common::{Workspace, flycode, send_signal};

/// A [`Workspace`] whose root holds `notes.txt` ("first\n").
fn workspace() -> Workspace {
    let w = Workspace::new();
    std::fs::write(w.root.join("notes.txt"), "first\n").unwrap();
    w
}

#[test]
fn json_output_has_the_documented_fields() {
    let w = workspace();
    let (code, report) = w.exec_json(
        &json!({"id": "c1", "tool": "fs.read", "args": {"path": w.path("notes.txt")}}),
        &[],
    );
    assert_eq!(code, 0);
    for key in ["id", "tool", "command", "ok", "error", "result", "text"] {
        assert!(report.get(key).is_some(), "no {key}: {report}");
    }
    assert_eq!(report["id"], "c1");
    assert_eq!(report["result"]["content"], "first\n");
    assert!(
        report["text"]
            .as_str()
            .unwrap()
            .starts_with("```flycode-result\n[id] c1\n")
    );
    let (code, report) = w.exec_json(
        &json!({"id": "c2", "tool": "fs.read", "args": {"path": "/etc/passwd"}}),
        &[],
    );
    assert_eq!(code, 1);
    assert_eq!(report["error"]["code"], "outside_roots");
    assert_eq!(report["result"], Value::Null);
}

#[test]
fn the_stale_read_guard_spans_runs_of_one_session() {
    let w = workspace();
    let notes = w.path("notes.txt");
    let session = ["--session", "s1"];
    let (code, _) = w.exec_json(
        &json!({"id": "r1", "tool": "fs.read", "args": {"path": notes}}),
        &session,
    );
    assert_eq!(code, 0);
    std::fs::write(&notes, "changed by someone else\n").unwrap();
    let write = |id: &str, extra: Value| {
        let mut args = json!({"path": notes, "mode": "overwrite", "content": "mine\n"});
        args.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        w.exec_json(
            &json!({"id": id, "tool": "fs.write", "args": args}),
            &session,
        )
    };
    let (code, report) = write("w1", json!({}));
    assert_eq!(code, 1);
    assert_eq!(report["error"]["code"], "stale_file");
    assert_eq!(
        std::fs::read_to_string(&notes).unwrap(),
        "changed by someone else\n"
    );
    let current = flycode::sandbox::sha256_hex(b"changed by someone else\n");
    assert_eq!(write("w2", json!({"expectedSha256": current})).0, 0);
    // flycode's own write updated what the session remembers.
    assert_eq!(write("w3", json!({})).0, 0);
    // Without the session nothing is remembered, so nothing is stale.
    std::fs::write(&notes, "again\n").unwrap();
    let (code, _) = w.exec_json(&json!({"id": "w4", "tool": "fs.write", "args": {"path": notes, "mode": "append", "content": "x"}}), &[]);
    assert_eq!(code, 0);
}

#[test]
fn every_call_is_audited_and_log_prints_them() {
    let w = workspace();
    w.exec_json(&json!({"id": "a1", "tool": "fs.write", "args": {"path": w.path("new.txt"), "mode": "overwrite", "content": "top secret"}}), &[]);
    w.exec_json(
        &json!({"id": "a2", "tool": "fs.rm", "args": {"path": w.path("new.txt")}}),
        &[],
    );
    let log = std::fs::read_to_string(w.state.join("audit.jsonl")).unwrap();
    assert!(!log.contains("top secret"), "{log}");
    let entries: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(entries.len(), 2);
    assert_eq!(
        (entries[0]["id"].as_str(), entries[0]["outcome"].as_str()),
        (Some("a1"), Some("ok"))
    );
    assert_eq!(entries[1]["outcome"], "denied");
    assert_eq!(entries[1]["code"], "denied_by_policy");
    flycode()
        .args(["log", "-n", "1"])
        .env("FLYCODE_STATE_DIR", &w.state)
        .assert()
        .code(0)
        .stdout(predicate::str::contains(
            "a2  fs.rm  denied denied_by_policy",
        ));
}

#[test]
fn log_shows_as_many_entries_as_asked_and_none_for_zero() {
    let w = workspace();
    let log = |count: &str| {
        let output = flycode()
            .args(["log", "-n", count])
            .env("FLYCODE_STATE_DIR", &w.state)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0));
        String::from_utf8(output.stdout).unwrap()
    };
    assert_eq!(log("0"), "", "an empty log");
    for id in ["r1", "r2"] {
        w.exec_json(
            &json!({"id": id, "tool": "fs.read", "args": {"path": w.path("notes.txt")}}),
            &[],
        );
    }
    assert_eq!(log("0"), "");
    let one = log("1");
    assert_eq!(one.lines().count(), 1, "{one}");
    assert!(one.contains("r2  fs.read  ok"), "{one}");
    assert_eq!(log("5").lines().count(), 2);
}

#[test]
fn log_marks_a_changed_or_forged_line_as_unverified() {
    let w = workspace();
    w.exec_json(
        &json!({"id": "real", "tool": "fs.read", "args": {"path": w.path("notes.txt")}}),
        &[],
    );
    let log_path = w.state.join("audit.jsonl");
    let text = std::fs::read_to_string(&log_path).unwrap();
    // A line that says a refused call ran, and a copy of the real line with its outcome changed.
    let forged = "{\"time\":\"2026-01-01T00:00:00Z\",\"id\":\"forged\",\"tool\":\"shell.exec\",\"args\":{},\"outcome\":\"ok\",\"code\":null,\"durationMs\":1,\"seal\":\"00\"}\n";
    let changed = text.replace("\"id\":\"real\"", "\"id\":\"edited\"");
    std::fs::write(&log_path, format!("{text}{forged}{changed}")).unwrap();
    let output = flycode()
        .args(["log", "-n", "5"])
        .env("FLYCODE_STATE_DIR", &w.state)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let stdout = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{stdout}");
    assert!(
        lines[0].contains("real") && !lines[0].contains("(unverified)"),
        "{stdout}"
    );
    assert!(
        lines[1].contains("forged") && lines[1].ends_with("(unverified)"),
        "{stdout}"
    );
    assert!(
        lines[2].contains("edited") && lines[2].ends_with("(unverified)"),
        "{stdout}"
    );
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("2 lines of ")
            && stderr.contains("carry no valid seal")
            && stderr.contains(": 2, 3;"),
        "{stderr}"
    );
}

#[test]
fn log_skips_a_damaged_line_and_names_it_on_stderr() {
    let w = workspace();
    for id in ["d1", "d2"] {
        w.exec_json(
            &json!({"id": id, "tool": "fs.read", "args": {"path": w.path("notes.txt")}}),
            &[],
        );
    }
    // A torn, non-UTF-8 line between the two good ones, and a cut-off one at the end.
    let log_path = w.state.join("audit.jsonl");
    let text = std::fs::read(&log_path).unwrap();
    let newline = text.iter().position(|b| *b == b'\n').unwrap();
    let mut damaged = text[..=newline].to_vec();
    damaged.extend(b"{\"id\":\"torn\xff\xfe\n");
    damaged.extend(&text[newline + 1..]);
    damaged.extend(b"{\"time\":\"2026-");
    std::fs::write(&log_path, damaged).unwrap();
    let output = flycode()
        .args(["log", "-n", "5"])
        .env("FLYCODE_STATE_DIR", &w.state)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 2, "{stdout}");
    assert!(stdout.contains("d1  fs.read  ok"), "{stdout}");
    assert!(stdout.contains("d2  fs.read  ok"), "{stdout}");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("skipped 2 damaged lines of ") && stderr.contains(": 2, 4;"),
        "{stderr}"
    );
    let json = flycode()
        .args(["log", "--json"])
        .env("FLYCODE_STATE_DIR", &w.state)
        .output()
        .unwrap();
    assert_eq!(json.status.code(), Some(0));
    let lines: Vec<Value> = String::from_utf8(json.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
}

#[test]
fn the_configuration_file_can_deny_a_tool() {
    let w = workspace();
    std::fs::write(
        w.root.join("flycode.toml"),
        "[tools]\n\"fs.write\" = \"deny\"\n",
    )
    .unwrap();
    let (code, report) = w.exec_json(&json!({"id": "c", "tool": "fs.write", "args": {"path": w.path("x"), "mode": "overwrite", "content": ""}}), &[]);
    assert_eq!(code, 1);
    assert_eq!(report["error"]["code"], "denied_by_policy");
    // flycode.toml itself is protected.
    let (_, report) = w.exec_json(&json!({"id": "d", "tool": "fs.write", "args": {"path": w.path("flycode.toml"), "mode": "overwrite", "content": ""}}), &["--approve", "auto"]);
    assert_eq!(report["error"]["code"], "denied_by_policy");
    std::fs::write(w.root.join("flycode.toml"), "colour = 1\n").unwrap();
    flycode()
        .args(["exec", "--slash", "/fs.ls /"])
        .current_dir(&w.root)
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("flycode.toml:1:").and(predicate::str::contains("colour")),
        );
}

#[test]
fn the_whole_file_system_is_not_a_root_unless_asked() {
    flycode()
        .args(["exec", "--root", "/", "--slash", "/fs.ls /"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--allow-filesystem-root"));
}

#[test]
fn replies_without_a_valid_call() {
    let w = workspace();
    flycode()
        .args(["exec", "--root"])
        .arg(&w.root)
        .env("FLYCODE_STATE_DIR", &w.state)
        .write_stdin("Just prose.")
        .assert()
        .code(3);
    flycode()
        .args(["exec", "--root"])
        .arg(&w.root)
        .env("FLYCODE_STATE_DIR", &w.state)
        .write_stdin("```flycode-call\n{\"id\":\"c\",\"tool\":\"fs.raed\",\"args\":{}}\n```")
        .assert()
        .code(1)
        .stdout(predicate::str::contains("[code] unknown_tool"));
    flycode()
        .args(["exec", "--slash", "/fs.read relative.txt", "--root"])
        .arg(&w.root)
        .assert()
        .code(1)
        .stdout(predicate::str::contains(
            "[id] (none)\n[command] /fs.read relative.txt\n[ok] false\n[code] relative_path",
        ));
}

#[test]
fn racing_writer_processes_with_one_expectation_have_one_winner() {
    let w = workspace();
    let notes = w.path("notes.txt");
    let expected = flycode::sandbox::sha256_hex(b"first\n");
    for round in 0..5 {
        std::fs::write(&notes, "first\n").unwrap();
        let children: Vec<_> = (0..4)
            .map(|writer| {
                let call = json!({"id": format!("r{round}-{writer}"), "tool": "fs.write", "args": {
                    "path": notes, "mode": "overwrite", "content": format!("writer {writer}\n"), "expectedSha256": expected
                }});
                let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_flycode"))
                    .args(["exec", "--root"])
                    .arg(&w.root)
                    .env("FLYCODE_STATE_DIR", &w.state)
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::null())
                    .spawn()
                    .unwrap();
                use std::io::Write;
                let mut stdin = child.stdin.take().unwrap();
                stdin.write_all(format!("```flycode-call\n{call}\n```\n").as_bytes()).unwrap();
                drop(stdin);
                child
            })
            .collect();
        let winners = children
            .into_iter()
            .map(|mut child| child.wait().unwrap().success())
            .filter(|ok| *ok)
            .count();
        assert_eq!(winners, 1, "round {round}");
        assert!(
            std::fs::read_to_string(&notes)
                .unwrap()
                .starts_with("writer ")
        );
    }
}

/// `exec` reads its reply before it starts its guardian (a reply that starts no program needs
/// none), and gives the worker all of it again: a reply of more than a mebibyte, read only in
/// part before the split, runs its program whole, under the guardian (PROTOCOL.md §11
/// (Security), "No program outlives flycode").
#[test]
fn a_long_reply_read_before_the_split_runs_its_program_under_the_guardian() {
    let w = workspace();
    let call = json!({"id": "long", "tool": "shell.exec", "args": {
        "command": "tr '\\0' ' ' < /proc/$(ps -o ppid= -p $PPID | tr -d ' ')/cmdline; echo; echo done"
    }});
    let reply = format!(
        "{}\n\n```flycode-call\n{call}\n```\n",
        "Some prose the model wrote first. ".repeat(40_000)
    );
    assert!(reply.len() > 1 << 20);
    let output = w
        .exec_command(&["--approve", "auto", "--yes", "--lenient"])
        .write_stdin(reply)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["ok"], true, "{report}");
    let stdout = report["result"]["stdout"].as_str().unwrap_or_default();
    assert!(stdout.contains("__flycode-guardian"), "{report}");
    assert!(stdout.contains("done"), "{report}");
}

/// A reply that names no program tool runs without a guardian, and reads and writes as ever,
/// secrets masked (they stay in its environment: no program can read it).
#[test]
fn a_reply_that_runs_no_program_needs_no_guardian_and_still_masks_secrets() {
    let w = workspace();
    std::fs::write(w.root.join("env.txt"), "key=sk-early-0123456789abcdef\n").unwrap();
    let output = w
        .exec_command(&[])
        .env("FLYCODE_API_KEY", "sk-early-0123456789abcdef")
        .write_stdin(format!(
            "```flycode-call\n{}\n```\n",
            json!({"id": "r", "tool": "fs.read", "args": {"path": w.path("env.txt")}})
        ))
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["ok"], true, "{report}");
    assert!(
        !report.to_string().contains("sk-early-0123456789abcdef"),
        "{report}"
    );
}

/// `flycode --help` lists every environment variable the README names.
#[test]
fn help_lists_every_environment_variable_the_readme_names() {
    let readme = std::fs::read_to_string(super::common::repo_root().join("README.md")).unwrap();
    let output = flycode().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&output.stdout);
    let prefixes = [
        "FLYCODE_",
        "LLM_",
        "LIGHT_LLM_",
        "OPENAI_",
        "ANTHROPIC_",
        "XDG_",
    ];
    let mut missing = Vec::new();
    for word in readme.split(|c: char| !(c.is_ascii_uppercase() || c == '_' || c.is_ascii_digit()))
    {
        if prefixes.iter().any(|p| word.starts_with(p)) && word.len() > 6 && !help.contains(word) {
            missing.push(word.to_owned());
        }
    }
    missing.sort();
    missing.dedup();
    assert!(missing.is_empty(), "not in --help: {missing:?}\n{help}");
}

/// A call the sandbox will refuse anyway is refused before the person is asked: a program whose
/// working folder is outside the roots gets `outside_roots` at once, not a question (here, with
/// no terminal to ask, a `denied_by_policy` that `--yes` would only turn into the same refusal).
#[test]
fn a_program_whose_folder_is_outside_the_roots_is_refused_before_asking() {
    let w = workspace();
    let outside = tempfile::tempdir().unwrap();
    let (code, report) = w.exec_json(
        &json!({"id": "p1", "tool": "process.run", "args": {"command": "ls", "cwd": outside.path()}}),
        &[],
    );
    assert_eq!(code, 1, "{report}");
    assert_eq!(report["error"]["code"], "outside_roots", "{report}");
    // Inside the roots, the same call is a question (no terminal here: refused, with advice).
    let (_, report) = w.exec_json(
        &json!({"id": "p2", "tool": "process.run", "args": {"command": "ls", "cwd": w.root}}),
        &[],
    );
    assert_eq!(report["error"]["code"], "denied_by_policy", "{report}");
}

/// The usual mistakes of small models get hints that say what to do: a Python triple-quoted
/// string in the JSON, a whole command line in `process.run`'s `command`.
#[test]
fn a_call_refused_for_its_optional_arguments_comes_with_the_repaired_call() {
    let w = workspace();
    std::fs::write(w.path("notes.txt"), "one\ntwo\n").unwrap();
    // A small model's habit: every argument it was shown, filled.
    let (_, report) = w.exec_json(
        &json!({"id": "t1", "tool": "fs.read", "args": {"path": w.path("notes.txt"), "head": 1, "tail": 10}}),
        &[],
    );
    assert_eq!(report["error"]["code"], "mutually_exclusive", "{report}");
    let hint = report["error"]["hint"].as_str().unwrap_or_default();
    let repaired =
        json!({"id": "t1", "tool": "fs.read", "args": {"path": w.path("notes.txt"), "head": 1}});
    assert!(hint.contains(&repaired.to_string()), "{hint}");
    // Null and empty optional arguments are taken as not given: the call runs.
    let (_, report) = w.exec_json(
        &json!({"id": "t2", "tool": "fs.search", "args": {"path": w.root, "query": "two", "glob": "", "limit": null}}),
        &[],
    );
    assert_eq!(report["ok"], true, "{report}");
    // Its result says what it ran without, so the model learns to leave them out.
    let text = report["text"].as_str().unwrap();
    assert!(
        text.contains("[warning] \"glob\": \"\", \"limit\": null taken as not given"),
        "{text}"
    );
}

#[test]
fn small_model_mistakes_get_hints_that_say_what_to_do() {
    let w = workspace();
    let reply = format!(
        "```flycode-call\n{{\"id\":\"t1\",\"tool\":\"fs.write\",\"args\":{{\"path\":\"{}\",\"mode\":\"overwrite\",\"content\":\"\"\"print(1)\"\"\"}}}}\n```\n",
        w.path("x.py")
    );
    let output = w.exec_command(&[]).write_stdin(reply).output().unwrap();
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["error"]["code"], "invalid_json", "{report}");
    assert!(
        report["error"]["hint"]
            .as_str()
            .unwrap_or_default()
            .contains("no triple-quoted strings"),
        "{report}"
    );
    let (_, report) = w.exec_json(
        &json!({"id": "t2", "tool": "process.run", "args": {"command": "ls -la", "cwd": w.root}}),
        &["--approve", "auto", "--yes"],
    );
    assert_eq!(report["error"]["code"], "command_not_found", "{report}");
    assert!(
        report["error"]["hint"]
            .as_str()
            .unwrap_or_default()
            .contains("put its arguments in args"),
        "{report}"
    );
}

/// Ctrl-C during the call of an `exec` that runs no program (no guardian, no thread waiting for
/// signals): the call is cancelled, its result printed, and flycode exits with 130.
#[test]
fn ctrl_c_cancels_the_call_of_an_exec_that_runs_no_program() {
    let w = workspace();
    // 40 MB of lines without the word: a search long enough to be stopped half-way.
    let lines = "the quick brown fox jumps over the lazy dog 0123456789\n".repeat(4_700);
    for i in 0..160 {
        std::fs::write(w.root.join(format!("f{i}.txt")), &lines).unwrap();
    }
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_flycode"))
        .args(["exec", "--json", "--root"])
        .arg(&w.root)
        .args([
            "--slash",
            &format!("/fs.search {} zzqqxx", w.root.display()),
        ])
        .env("FLYCODE_STATE_DIR", &w.state)
        .env_remove("XDG_CONFIG_HOME")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Under way once it has read a megabyte (its handlers are installed before the call).
    let io = format!("/proc/{}/io", child.id());
    let read_so_far = || {
        std::fs::read_to_string(&io)
            .ok()
            .and_then(|text| {
                let line = text.lines().find(|line| line.starts_with("rchar:"))?;
                line["rchar:".len()..].trim().parse::<u64>().ok()
            })
            .unwrap_or(0)
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while read_so_far() < 1 << 20 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    send_signal(child.id(), "INT");
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["ok"], false, "{report}");
    assert_eq!(report["error"]["code"], "cancelled", "{report}");
}
