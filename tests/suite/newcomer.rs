//! What a newcomer trips on, through the real binary: `run --tools`, where an invalid reply's
//! prose goes, native-mode wording, the advice each door gives, slash commands, error messages,
//! `fs.writeBatch`'s refusals, the prompt's language, completions and `log --help`.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::api_server::{Reply, ScriptedServer};
use super::common::{Workspace, flycode, temp_base_with_root};

/// A root and a state folder for `flycode run` against a scripted server.
struct Place {
    _temp: tempfile::TempDir,
    base: PathBuf,
    root: PathBuf,
}

impl Place {
    fn new() -> Place {
        let (temp, base, root) = temp_base_with_root("app");
        std::fs::write(root.join("lib.sh"), "add() { echo 1; }\n").unwrap();
        Place {
            _temp: temp,
            base,
            root,
        }
    }

    fn path(&self, name: &str) -> String {
        self.root.join(name).display().to_string()
    }

    /// `flycode run` against `server` with `flags`, no `--yes`, standard input closed.
    fn run(&self, server: &ScriptedServer, flags: &[&str]) -> std::process::Output {
        let mut command = flycode();
        for (name, _) in std::env::vars() {
            if name.starts_with("FLYCODE_")
                || name.starts_with("OPENAI_")
                || name.starts_with("LLM_")
            {
                command.env_remove(name);
            }
        }
        command
            .current_dir(&self.root)
            .env("HOME", &self.base)
            .env_remove("XDG_CONFIG_HOME")
            .env("FLYCODE_STATE_DIR", self.base.join("state"))
            .env("NO_COLOR", "1")
            .args(["run", "--base-url"])
            .arg(server.base_url())
            .args(["--model", "scripted-model", "--root"])
            .arg(&self.root)
            .arg("--transcript")
            .arg(self.base.join("run.jsonl"))
            .args(flags)
            .arg("Look at lib.sh.")
            .write_stdin("")
            .output()
            .unwrap()
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The function names a native request offered.
fn offered(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["function"]["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn run_honours_tools_seed_and_offers_extended_by_default() {
    let place = Place::new();
    let server = ScriptedServer::always(Reply::sse_text("Nothing to do.", 9));
    let seed = place.run(&server, &["--tools", "seed"]);
    assert_eq!(seed.status.code(), Some(0), "{}", text(&seed.stderr));
    let default = place.run(&server, &[]);
    assert_eq!(default.status.code(), Some(0), "{}", text(&default.stderr));
    let requests = server.requests();
    let (seed_request, default_request) = (&requests[0].body, &requests[1].body);

    let seed_tools = offered(seed_request);
    assert!(
        seed_tools.contains(&"fs_write_batch".to_owned()),
        "{seed_tools:?}"
    );
    assert!(
        seed_tools.contains(&"agent_todo".to_owned()),
        "{seed_tools:?}"
    );
    assert!(
        !seed_tools
            .iter()
            .any(|t| t == "fs_edit" || t == "fs_read_many"),
        "{seed_tools:?}"
    );
    let seed_prompt = seed_request["messages"][0]["content"].as_str().unwrap();
    assert!(
        !seed_prompt.contains("fs_edit") && !seed_prompt.contains("fs_read_many"),
        "{seed_prompt}"
    );

    // MCP's spelling: one name a tool in both doors.
    let default_tools = offered(default_request);
    for name in ["fs_edit", "fs_read_many", "fs_write_batch", "agent_task"] {
        assert!(
            default_tools.contains(&name.to_owned()),
            "{name}: {default_tools:?}"
        );
    }
    assert!(
        !default_tools
            .iter()
            .any(|t| t.chars().any(|c| c.is_ascii_uppercase())),
        "{default_tools:?}"
    );
}

#[test]
fn run_tools_seed_refuses_fs_edit_and_names_the_flag() {
    let place = Place::new();
    let path = place.path("lib.sh");
    let server = ScriptedServer::start(move |_, index| match index {
        0 => Reply::sse_text(
            &format!(
                "```flycode-call\n{}\n```",
                json!({"id": "call-001", "tool": "fs.edit", "args": {"path": path, "edits": [{"oldText": "1", "newText": "2"}]}})
            ),
            9,
        ),
        _ => Reply::sse_text("Done.", 9),
    });
    let output = place.run(&server, &["--mode", "text", "--tools", "seed"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let second = serde_json::to_string(&server.requests()[1].body).unwrap();
    assert!(second.contains("[code] unknown_tool"), "{second}");
    assert!(second.contains("flycode run --tools extended"), "{second}");
    assert_eq!(
        std::fs::read_to_string(place.root.join("lib.sh")).unwrap(),
        "add() { echo 1; }\n"
    );
}

#[test]
fn an_invalid_replys_prose_goes_to_stderr_never_stdout() {
    let place = Place::new();
    let path = place.path("lib.sh");
    let server = ScriptedServer::start(move |_, index| match index {
        0 => Reply::sse_text(
            &format!(
                "Let me peek first.\n```flycode-call\n{{\"id\":\"call-001\",\"tool\":\"fs.read\",\"args\":{{\"path\":\"{path}\"}}}}\n```"
            ),
            9,
        ),
        _ => Reply::sse_text("It echoes 1.", 9),
    });
    let output = place.run(&server, &["--mode", "text"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert_eq!(stdout, "It echoes 1.\n", "stderr: {stderr}");
    assert!(stderr.contains("Let me peek first."), "{stderr}");
    assert!(stderr.contains("text_outside_block"), "{stderr}");
}

#[test]
fn native_errors_speak_of_the_arguments_and_a_bad_turn_is_one_line() {
    let place = Place::new();
    let server = ScriptedServer::start(move |_, index| match index {
        0 => Reply::sse_tool_calls(&[
            ("fc_1", "fs_read", "{\"path\": "),
            ("fc_2", "fs_ls", "{not json"),
        ]),
        _ => Reply::sse_text("Giving up.", 9),
    });
    let output = place.run(&server, &[]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let stderr = text(&output.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| l.contains("invalid")).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].contains("arguments are not valid JSON"),
        "{stderr}"
    );
    assert!(lines[0].contains("1 more invalid call"), "{stderr}");
    assert!(!stderr.contains("flycode-call block"), "{stderr}");
    let second = serde_json::to_string(&server.requests()[1].body).unwrap();
    assert!(second.contains("arguments are not valid JSON"), "{second}");
    assert!(
        !second.contains("the flycode-call block is not valid JSON"),
        "{second}"
    );
}

#[test]
fn a_native_answer_holding_a_call_block_runs_it_is_shown_and_validate_warns() {
    let place = Place::new();
    let call = json!({"id": "call-001", "tool": "fs.read", "args": {"path": place.path("lib.sh")}});
    let server = ScriptedServer::sequence(vec![
        Reply::sse_text(&format!("```flycode-call\n{call}\n```"), 9),
        Reply::sse_text("Read it.", 9),
    ]);
    let output = place.run(&server, &[]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let stderr = text(&output.stderr);
    // Native mode recovers the one unambiguous call written as text (PROTOCOL.md §13).
    assert!(
        stderr.contains("the model wrote a fs.read call as text (a flycode-call block)"),
        "{stderr}"
    );
    let second = &server.requests()[1].body;
    assert!(
        second["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["role"] == "tool"),
        "{second}"
    );
    let report = flycode()
        .args(["validate", "--format", "json"])
        .arg(place.base.join("run.jsonl"))
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&report.stdout).unwrap();
    let codes: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["call_block_in_native_reply"], "{report}");
}

#[test]
fn an_old_native_name_is_still_accepted() {
    let place = Place::new();
    let args = json!({"files": [{"path": place.path("a.txt"), "content": "a"}]}).to_string();
    let server = ScriptedServer::start(move |_, index| match index {
        0 => Reply::sse_tool_calls(&[("fc_1", "fs_writeBatch", args.as_str())]),
        _ => Reply::sse_text("Wrote it.", 9),
    });
    let output = place.run(&server, &["--yes"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(
        std::fs::read_to_string(place.root.join("a.txt")).unwrap(),
        "a"
    );
}

#[test]
fn run_without_a_task_shows_the_task_file_and_dash_in_its_usage() {
    let output = flycode().arg("run").output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = text(&output.stderr);
    assert!(stderr.contains("--task-file FILE"), "{stderr}");
    assert!(stderr.contains("flycode run [OPTIONS] -"), "{stderr}");
}

#[test]
fn run_advises_re_running_with_yes() {
    let place = Place::new();
    let call = json!({"id": "call-001", "tool": "process.run", "args": {"command": "true"}});
    let server = ScriptedServer::start(move |_, index| match index {
        0 => Reply::sse_text(&format!("```flycode-call\n{call}\n```"), 9),
        _ => Reply::sse_text("Could not.", 9),
    });
    let output = place.run(&server, &["--mode", "text", "--approve", "ask"]);
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("to allow it: no terminal could answer; re-run with --yes"),
        "{stderr}"
    );
    assert!(!stderr.contains("copy the reply again"), "{stderr}");
}

#[test]
fn exec_advises_running_it_again_with_yes() {
    let work = Workspace::new();
    let output = work
        .exec_command(&["--approve", "ask", "--slash", "/process.run true"])
        .write_stdin("")
        .output()
        .unwrap();
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("to allow it: no terminal could answer; run it again with --yes"),
        "{stderr}"
    );
    assert!(!stderr.contains("restart flycode"), "{stderr}");
}

#[test]
fn a_slash_command_without_its_slash_is_named_so() {
    let work = Workspace::new();
    let output = work
        .exec_command(&["--slash", "fs.ls /tmp"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("a slash command starts with `/`"),
        "{stderr}"
    );
    assert!(stderr.contains("\"/fs.ls /tmp\""), "{stderr}");
}

#[test]
fn an_os_error_is_printed_once() {
    let work = Workspace::new();
    let missing = work.root.join("missing");
    let output = flycode()
        .args(["exec", "--slash", "/fs.ls /tmp", "--root"])
        .arg(&missing)
        .env("FLYCODE_STATE_DIR", &work.state)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = text(&output.stderr);
    assert_eq!(stderr.matches("os error 2").count(), 1, "{stderr}");
}

#[test]
fn a_write_batch_refusal_names_the_entry_and_says_nothing_was_written() {
    let work = Workspace::new();
    let call = json!({"id": "c1", "tool": "fs.writeBatch", "args": {"files": [
        {"path": work.path("a.txt"), "content": "a"},
        {"path": "/etc/flycode-never-here", "content": "b"},
    ]}});
    let (code, report) = work.exec_json(&call, &["--yes"]);
    assert_eq!(code, 1, "{report}");
    let message = report.to_string();
    assert!(
        message.contains("files[1] (/etc/flycode-never-here)"),
        "{report}"
    );
    assert!(message.contains("no file was written"), "{report}");
    assert!(!work.root.join("a.txt").exists());
}

#[test]
fn the_omission_hint_names_fs_edit_only_where_it_is_offered() {
    let work = Workspace::new();
    let old: String = (1..=60)
        .map(|n| format!("line {n} of the real code\n"))
        .collect();
    std::fs::write(work.root.join("big.rs"), &old).unwrap();
    let call = json!({"id": "c1", "tool": "fs.write", "args": {"path": work.path("big.rs"), "mode": "overwrite", "content": "fn main() {}\n// ... rest of the code unchanged\n"}});
    let (_, seed) = work.exec_json(&call, &["--yes"]);
    assert_eq!(seed["error"]["code"], "omission_placeholder", "{seed}");
    assert!(!seed.to_string().contains("fs.edit"), "{seed}");
    let (_, extended) = work.exec_json(&call, &["--yes", "--tools", "extended"]);
    assert!(extended.to_string().contains("use fs.edit"), "{extended}");
}

#[test]
fn agent_todo_shows_how_many_items_on_its_command_line() {
    let place = Place::new();
    let args = json!({"items": [
        {"content": "one", "status": "done"},
        {"content": "two", "status": "pending"},
    ]})
    .to_string();
    let server = ScriptedServer::start(move |_, index| match index {
        0 => Reply::sse_tool_calls(&[("fc_1", "agent_todo", args.as_str())]),
        _ => Reply::sse_text("Planned.", 9),
    });
    let output = place.run(&server, &["--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let started: Vec<Value> = text(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|event| event["event"] == "call_started")
        .collect();
    assert_eq!(
        started[0]["command"], "/agent.todo --items <2 items>",
        "{started:?}"
    );
}

fn prompt_with(vars: &[(&str, &str)], flags: &[&str]) -> String {
    let work = Workspace::new();
    let mut command = flycode();
    command
        .arg("prompt")
        .args(flags)
        .arg("--root")
        .arg(&work.root)
        .env("FLYCODE_STATE_DIR", &work.state)
        .env_remove("LC_ALL")
        .env_remove("LC_MESSAGES")
        .env_remove("LANG");
    for (name, value) in vars {
        command.env(name, value);
    }
    let output = command.output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    // The roots differ between workspaces: compare the prompts without them.
    text(&output.stdout).replace(&work.root.display().to_string(), "ROOT")
}

#[test]
fn the_prompts_language_follows_the_locale() {
    let english = prompt_with(&[], &["--lang", "en"]);
    let chinese = prompt_with(&[], &["--lang", "zh"]);
    assert_ne!(english, chinese);
    assert_eq!(prompt_with(&[], &[]), english, "no locale: English");
    assert_eq!(prompt_with(&[("LANG", "zh_CN.UTF-8")], &[]), chinese);
    assert_eq!(
        prompt_with(&[("LC_MESSAGES", "zh_TW"), ("LANG", "en_US")], &[]),
        chinese
    );
    assert_eq!(
        prompt_with(&[("LC_ALL", "C"), ("LANG", "zh_CN.UTF-8")], &[]),
        english,
        "LC_ALL wins"
    );
    assert_eq!(
        prompt_with(&[("LANG", "zh_CN.UTF-8")], &["--lang", "en"]),
        english,
        "--lang wins"
    );
}

#[test]
fn completions_name_the_subcommands_in_every_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let output = flycode().args(["completions", shell]).output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{shell}");
        let script = text(&output.stdout);
        for command in ["validate", "watch", "exec", "completions"] {
            assert!(script.contains(command), "{shell} lacks {command}");
        }
    }
}

#[test]
fn completions_into_a_closed_pipe_end_quietly() {
    // `flycode completions bash | head -1`: the reader is gone before the script is written.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_flycode"))
        .args(["completions", "bash"])
        .stdout(writer)
        .output()
        .unwrap();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn log_help_says_where_the_log_is() {
    let output = flycode().args(["log", "--help"]).output().unwrap();
    let help = text(&output.stdout);
    assert!(
        help.contains("audit.jsonl") && help.contains("FLYCODE_STATE_DIR"),
        "{help}"
    );
}

/// A file of `days` ago at `path`.
fn aged(path: &std::path::Path, days: u64) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, "0123456789").unwrap();
    let then = std::time::SystemTime::now() - std::time::Duration::from_secs(days * 86_400);
    filetime::set_file_mtime(path, filetime::FileTime::from_system_time(then)).unwrap();
}

fn gc(base: &std::path::Path, project: &std::path::Path, flags: &[&str]) -> (i32, String) {
    let output = flycode()
        .arg("gc")
        .args(flags)
        .current_dir(project)
        .env("HOME", base)
        .env("XDG_CONFIG_HOME", base.join("config"))
        .env("FLYCODE_STATE_DIR", base.join("state"))
        .output()
        .unwrap();
    (
        output.status.code().unwrap(),
        text(&output.stdout) + &text(&output.stderr),
    )
}

#[test]
fn gc_removes_old_run_files_and_never_flycodes_own_state() {
    let temp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(temp.path()).unwrap();
    let project = base.join("project");
    std::fs::create_dir_all(&project).unwrap();
    let state = base.join("state");
    for (name, days) in [
        ("runs/old.jsonl", 40),
        ("runs/recent.jsonl", 20),
        ("sessions/s.json", 40),
        ("watch/w.json", 40),
        ("journal/1-2-3.json", 400),
        ("seal.key", 400),
        ("audit.jsonl", 400),
    ] {
        aged(&state.join(name), days);
    }
    let (code, said) = gc(&base, &project, &["--dry-run"]);
    assert_eq!(code, 0, "{said}");
    assert!(
        said.contains("would remove 3 files (30 B) older than 30 days"),
        "{said}"
    );
    assert!(state.join("runs/old.jsonl").exists());

    // The user's keep_days applies; an untrusted project file cannot lower it.
    std::fs::create_dir_all(base.join("config/flycode")).unwrap();
    std::fs::write(
        base.join("config/flycode/flycode.toml"),
        "[state]\nkeep_days = 10\n",
    )
    .unwrap();
    std::fs::write(project.join("flycode.toml"), "[state]\nkeep_days = 1\n").unwrap();
    aged(&state.join("runs/yesterday.jsonl"), 2);
    let (code, said) = gc(&base, &project, &[]);
    assert_eq!(code, 0, "{said}");
    assert!(
        said.contains("removed 4 files (40 B) older than 10 days"),
        "{said}"
    );
    assert!(
        said.contains("2 transcripts, 1 replay store, 1 session"),
        "{said}"
    );
    for gone in [
        "runs/old.jsonl",
        "runs/recent.jsonl",
        "sessions/s.json",
        "watch/w.json",
    ] {
        assert!(!state.join(gone).exists(), "{gone}");
    }
    for kept in [
        "runs/yesterday.jsonl",
        "journal/1-2-3.json",
        "seal.key",
        "audit.jsonl",
    ] {
        assert!(state.join(kept).exists(), "{kept}");
    }
    // flycode config lists the setting and where it comes from.
    let shown = flycode()
        .arg("config")
        .current_dir(&project)
        .env("HOME", &base)
        .env("XDG_CONFIG_HOME", base.join("config"))
        .output()
        .unwrap();
    let shown = text(&shown.stdout);
    assert!(shown.contains("keep_days"), "{shown}");
}
