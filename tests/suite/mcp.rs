//! `flycode mcp` end to end (PROTOCOL.md §14 (The MCP server)), driven by an independent client: the official Python
//! MCP SDK (`mcp` from PyPI), through tests/mcp/client.py. Each scenario runs in both protocol
//! eras: `legacy` (the initialize handshake: the server asks with its own requests) and `auto`
//! (2026-07-28: the server asks through `input_required` results).
//!
//! The client lives in a virtual environment the tests make themselves on first use
//! (`target/tmp/mcp-venv`), or in the python `FLYCODE_TEST_PYTHON` names. Without either these
//! tests fail and say what is missing; set `FLYCODE_SKIP_MCP_TESTS=1` to skip them on purpose.

#![allow(clippy::disallowed_methods)] // fixtures are made and inspected directly

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use super::common::repo_root;

pub(super) const MODES: [&str; 2] = ["legacy", "auto"];

/// The pinned version of the official Python MCP SDK the tests drive `flycode mcp` with.
const MCP_SDK_VERSION: &str = "2.3.0";

/// The python that has the `mcp` package, or `None` when the tests are skipped on purpose:
/// `FLYCODE_TEST_PYTHON`, else a virtual environment the tests make themselves on first use
/// ([`ensure_venv`]), so a plain `cargo test` on a fresh clone needs no other step.
pub(super) fn python() -> Option<PathBuf> {
    if std::env::var_os("FLYCODE_SKIP_MCP_TESTS").is_some_and(|v| v == "1") {
        eprintln!("FLYCODE_SKIP_MCP_TESTS=1: skipping the MCP end-to-end tests");
        return None;
    }
    let python = match std::env::var_os("FLYCODE_TEST_PYTHON") {
        Some(python) => PathBuf::from(python),
        None => ensure_venv(),
    };
    assert!(
        has_sdk(&python),
        "the MCP tests need the official Python MCP SDK, and {} cannot import mcp {MCP_SDK_VERSION}.\n\
         The tests make target/tmp/mcp-venv themselves (python3 with venv and pip, and PyPI, are needed once);\n\
         or point FLYCODE_TEST_PYTHON at a python that has it; FLYCODE_SKIP_MCP_TESTS=1 skips these tests",
        python.display()
    );
    Some(python)
}

/// Whether `python` imports the pinned `mcp` package.
fn has_sdk(python: &Path) -> bool {
    Command::new(python)
        .args([
            "-c",
            &format!(
                "import mcp, importlib.metadata as m, sys; sys.exit(m.version('mcp') != '{MCP_SDK_VERSION}')"
            ),
        ])
        .output()
        .is_ok_and(|output| output.status.success())
}

/// Makes `target/tmp/mcp-venv` with the pinned SDK unless it is there already, and returns its
/// python. Test threads and test processes (nextest) may get here at once: a lock file held with
/// `flock` lets one install while the others wait, then find it done.
fn ensure_venv() -> PathBuf {
    static VENV: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    VENV.get_or_init(|| {
        let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        std::fs::create_dir_all(&base).unwrap();
        let venv = base.join("mcp-venv");
        let python = venv.join("bin/python");
        let lock = std::fs::File::create(base.join("mcp-venv.lock")).unwrap();
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive).unwrap();
        if !has_sdk(&python) {
            eprintln!(
                "making {} with mcp {MCP_SDK_VERSION} (once)",
                venv.display()
            );
            let made = Command::new("python3")
                .args(["-m", "venv", "--clear"])
                .arg(&venv)
                .status()
                .is_ok_and(|status| status.success());
            let installed = made
                && Command::new(venv.join("bin/pip"))
                    .args(["install", "--quiet", "--disable-pip-version-check"])
                    .arg(format!("mcp=={MCP_SDK_VERSION}"))
                    .status()
                    .is_ok_and(|status| status.success());
            if !installed {
                eprintln!("could not make {}; see the messages above", venv.display());
            }
        }
        python
    })
    .clone()
}

/// A root, a state directory (for the audit log) and an empty configuration directory.
pub(super) struct Place {
    _temp: tempfile::TempDir,
    pub(super) root: PathBuf,
    pub(super) state: PathBuf,
    pub(super) config: PathBuf,
}

pub(super) fn place() -> Place {
    let temp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(temp.path()).unwrap();
    let (root, state, config) = (base.join("root"), base.join("state"), base.join("config"));
    for dir in [&root, &state, &config] {
        std::fs::create_dir(dir).unwrap();
    }
    // A hint for `every_tool` to load and read (PROTOCOL.md §9 (hint.load)).
    let hint = config.join("flycode/hints/mcp-hint");
    std::fs::create_dir_all(&hint).unwrap();
    std::fs::write(hint.join("HINT.md"), "MCP HINT\n").unwrap();
    Place {
        _temp: temp,
        root,
        state,
        config,
    }
}

/// Plays `scenario` in `mode` against `flycode mcp --root ROOT extra...` and returns what the
/// client saw.
fn play(python: &Path, place: &Place, scenario: &str, mode: &str, extra: &[&str]) -> Value {
    let output = Command::new(python)
        .arg(repo_root().join("tests/mcp/client.py"))
        .args([scenario, mode, env!("CARGO_BIN_EXE_flycode")])
        .arg(&place.root)
        .args(extra)
        .env("FLYCODE_STATE_DIR", &place.state)
        .env("XDG_CONFIG_HOME", &place.config)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the client failed ({scenario}, {mode}):\n{stdout}\n{stderr}"
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"))
}

pub(super) fn audit_lines(place: &Place) -> Vec<Value> {
    std::fs::read_to_string(place.state.join("audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

pub(super) fn code(result: &Value) -> &str {
    result["structured"]["error"]["code"].as_str().unwrap_or("")
}

#[test]
fn every_tool_is_listed_and_answers_in_both_protocol_eras() {
    let Some(python) = python() else { return };
    // ^[a-zA-Z0-9_-]{1,64}$
    let is_mcp_name = |name: &str| {
        (1..=64).contains(&name.len())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    };
    for (mode, version) in MODES.into_iter().zip(["2025-11-25", "2026-07-28"]) {
        let place = place();
        let report = play(&python, &place, "tools", mode, &["--approve", "auto"]);
        assert_eq!(report["protocolVersion"], version, "{mode}");

        let tools = report["tools"].as_array().unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "fs_ls",
                "fs_mkdir",
                "fs_read",
                "fs_search",
                "fs_write",
                "fs_rm",
                "fs_mv",
                "fs_chmod",
                "fs_write_batch",
                "fs_diff",
                "process_run",
                "shell_exec",
                "fs_read_many",
                "fs_edit",
                "memory_query",
                "hint_load",
                "hint_unload",
                "hint_resource",
                "job_log",
                "job_list",
                "job_input",
                "job_kill"
            ]
        );
        for tool in tools {
            let name = tool["name"].as_str().unwrap();
            assert!(is_mcp_name(name), "{name}");
            assert_eq!(tool["inputSchema"]["type"], "object", "{name}");
            assert!(
                !tool["inputSchema"].to_string().contains("x-flycode"),
                "{name}"
            );
            assert!(!tool["description"].as_str().unwrap().is_empty(), "{name}");
            let hints = &tool["annotations"];
            let read_only = [
                "fs_ls",
                "fs_read",
                "fs_search",
                "fs_diff",
                "fs_read_many",
                "memory_query",
                "hint_resource",
                "job_log",
                "job_list",
            ]
            .contains(&name);
            let destructive = [
                "fs_rm",
                "fs_mv",
                "fs_chmod",
                "fs_write",
                "fs_write_batch",
                "fs_edit",
                "process_run",
                "shell_exec",
                "job_input",
                "job_kill",
            ]
            .contains(&name);
            let runs_program = ["process_run", "shell_exec", "job_input"].contains(&name);
            assert_eq!(hints["readOnlyHint"], read_only, "{name}");
            assert_eq!(hints["destructiveHint"], destructive, "{name}");
            assert_eq!(hints["openWorldHint"], runs_program, "{name}");
        }

        let calls = report["calls"].as_array().unwrap();
        let called: Vec<&str> = calls.iter().map(|c| c["tool"].as_str().unwrap()).collect();
        for name in &names {
            assert!(called.contains(name), "{name} was not called");
        }
        for call in calls {
            assert_eq!(call["isError"], false, "{mode}: {call}");
            assert_eq!(call["structured"]["ok"], true, "{mode}: {call}");
        }
        let text_of = |tool: &str| {
            calls.iter().find(|c| c["tool"] == tool).unwrap()["text"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        assert!(
            text_of("fs_read").ends_with("one\ntwo"),
            "{}",
            text_of("fs_read")
        );
        assert!(text_of("fs_search").contains("a.txt:2:two"));
        assert!(text_of("process_run").contains("hello from mcp"));
        assert!(text_of("shell_exec").contains("42"));
        assert!(
            text_of("job_input").contains("ping"),
            "{}",
            text_of("job_input")
        );
        assert_eq!(
            std::fs::read_to_string(place.root.join("a.txt")).unwrap(),
            "one\ndeux\nthree\n"
        );
        assert_eq!(
            std::fs::read_to_string(place.root.join("sub/c.txt")).unwrap(),
            "sea\n"
        );
        assert!(!place.root.join("b2.txt").exists());

        assert_eq!(report["outside"]["isError"], true);
        assert_eq!(code(&report["outside"]), "outside_roots");
        assert!(
            report["outside"]["text"]
                .as_str()
                .unwrap()
                .contains("[code] outside_roots")
        );
        assert_eq!(report["bad"]["isError"], true);
        assert_eq!(code(&report["bad"]), "invalid_args");
        assert!(report["bad"]["text"].as_str().unwrap().contains("head"));
        assert_eq!(report["unknown"]["isError"], true);
        assert_eq!(code(&report["unknown"]), "unknown_tool");

        // The audit log holds every call that ran, under its MCP request's id.
        let audit = audit_lines(&place);
        for name in [
            "fs.write",
            "fs.rm",
            "process.run",
            "shell.exec",
            "fs.readMany",
        ] {
            assert!(
                audit.iter().any(|e| e["tool"] == name
                    && e["outcome"] == "ok"
                    && e["id"].as_str().unwrap().starts_with("mcp-")),
                "{mode}: {name} not in the audit log"
            );
        }
        assert!(audit.iter().any(|e| e["code"] == "outside_roots"));
    }
}

#[test]
fn an_asked_call_runs_when_accepted_and_is_refused_when_declined() {
    let Some(python) = python() else { return };
    for mode in MODES {
        let place = place();
        let report = play(&python, &place, "elicit", mode, &["--approve", "ask"]);
        let questions = report["questions"].as_array().unwrap();
        assert_eq!(questions.len(), 2, "{mode}: {questions:?}");
        assert!(
            questions[0]
                .as_str()
                .unwrap()
                .contains("/process.run echo please-accept"),
            "{questions:?}"
        );
        assert_eq!(report["accepted"]["isError"], false, "{mode}: {report}");
        assert!(
            report["accepted"]["text"]
                .as_str()
                .unwrap()
                .contains("please-accept")
        );
        assert_eq!(report["declined"]["isError"], true, "{mode}: {report}");
        assert_eq!(code(&report["declined"]), "denied_by_policy");
        assert!(
            report["declined"]["text"]
                .as_str()
                .unwrap()
                .contains("declined")
        );
        let audit = audit_lines(&place);
        assert!(
            audit
                .iter()
                .any(|e| e["outcome"] == "ok" && e["tool"] == "process.run")
        );
        assert!(
            audit
                .iter()
                .any(|e| e["outcome"] == "denied" && e["tool"] == "process.run")
        );
    }
}

#[test]
fn without_elicitation_an_asked_call_is_refused_with_how_to_allow_it() {
    let Some(python) = python() else { return };
    for mode in MODES {
        let place = place();
        let report = play(&python, &place, "no-elicitation", mode, &[]);
        for key in ["accepted", "declined"] {
            let result = &report[key];
            assert_eq!(result["isError"], true, "{mode}: {result}");
            assert_eq!(code(result), "denied_by_policy");
            let text = result["text"].as_str().unwrap();
            // The file to edit is named: with none read, the user's (the client chose the
            // server's working folder, so a bare "flycode.toml" would not say which).
            let file = place.config.join("flycode").join("flycode.toml");
            assert!(
                text.contains(&format!("approval = \"auto\" in {}", file.display())),
                "{text}"
            );
            assert!(
                text.contains("[tools] \"process.run\" = \"allow\""),
                "{text}"
            );
        }
    }
}

#[test]
fn the_clients_roots_only_narrow_flycodes() {
    let Some(python) = python() else { return };
    for mode in MODES {
        let place = place();
        let report = play(&python, &place, "roots", mode, &[]);
        assert_eq!(report["inside"]["isError"], false, "{mode}: {report}");
        assert_eq!(report["inside"]["text"], "inside\n");
        assert_eq!(report["outside"]["isError"], true, "{mode}: {report}");
        assert_eq!(code(&report["outside"]), "outside_roots");
    }
}

#[test]
fn client_roots_that_share_nothing_with_flycodes_refuse_every_call() {
    let Some(python) = python() else { return };
    for mode in MODES {
        let place = place();
        let report = play(&python, &place, "roots-disjoint", mode, &[]);
        for key in ["read", "list"] {
            let result = &report[key];
            assert_eq!(result["isError"], true, "{mode}: {result}");
            assert_eq!(code(result), "outside_roots", "{mode}: {result}");
            let text = result["text"].as_str().unwrap();
            assert!(
                text.contains("none of the client's roots") && text.contains("elsewhere"),
                "{text}"
            );
        }
    }
}

#[test]
fn the_approval_form_of_a_write_shows_the_size_of_the_change() {
    let Some(python) = python() else { return };
    for mode in MODES {
        let place = place();
        let report = play(&python, &place, "elicit-write", mode, &["--approve", "ask"]);
        let questions: Vec<&str> = report["questions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|q| q.as_str().unwrap())
            .collect();
        assert_eq!(questions.len(), 2, "{mode}: {questions:?}");
        // "two" becomes "2", "four ..." is added: +2 -1 against the three lines on disk.
        assert!(
            questions[0].contains("change: +2 -1 lines"),
            "{mode}: {}",
            questions[0]
        );
        assert!(questions[0].contains("/fs.write"), "{}", questions[0]);
        // The terminal's diff too: the line that goes, the lines that come.
        assert!(
            questions[0].contains("It would change:\n") && questions[0].contains("-two\n"),
            "{mode}: {}",
            questions[0]
        );
        assert!(questions[0].contains("+2\n"), "{mode}: {}", questions[0]);
        assert!(
            questions[1].contains("change: +1 -4 lines"),
            "{mode}: {}",
            questions[1]
        );
        assert_eq!(report["accepted"]["isError"], false, "{mode}: {report}");
        assert_eq!(report["declined"]["isError"], true, "{mode}: {report}");
        assert_eq!(code(&report["declined"]), "denied_by_policy");
        assert_eq!(
            report["content"], "one\n2\nthree\nfour please-accept\n",
            "the accepted write landed and the declined one did not"
        );
    }
}

#[test]
fn a_cancelled_call_kills_its_process_tree_and_long_runs_report_progress() {
    let Some(python) = python() else { return };
    for mode in MODES {
        let place = place();
        let report = play(&python, &place, "cancel", mode, &["--approve", "auto"]);
        let pid = report["childPid"].as_u64().unwrap();
        assert!(
            !report["progress"].as_array().unwrap().is_empty(),
            "{mode}: no progress notification: {report}"
        );
        assert_eq!(report["after"]["isError"], false, "{mode}: {report}");
        assert_eq!(
            report["goneWhileConnected"], true,
            "{mode}: the cancellation did not kill the program's child: {report}"
        );
        // The kill is prompt, but the client may be done before the server: wait for it.
        let proc = PathBuf::from(format!("/proc/{pid}"));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while proc.exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(
            !proc.exists(),
            "{mode}: the program's child {pid} is still running"
        );
        let audit = audit_lines(&place);
        assert!(
            audit
                .iter()
                .any(|e| e["tool"] == "process.run" && e["code"] == "cancelled"),
            "{mode}: {audit:?}"
        );
    }
}

/// `flycode mcp --root ROOT` with its standard streams piped, for a test that speaks raw lines.
fn spawn_raw(place: &Place) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_flycode"))
        .args(["mcp", "--root"])
        .arg(&place.root)
        .env("FLYCODE_STATE_DIR", &place.state)
        .env("XDG_CONFIG_HOME", &place.config)
        .current_dir(&place.root)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

const INITIALIZE: [&str; 2] = [
    r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#,
    r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
];

#[test]
fn lines_that_are_not_requests_are_ignored_or_answered_under_their_id() {
    use std::io::{BufRead, BufReader, Write};
    let place = place();
    let target = place.root.join("a.txt");
    let mut child = spawn_raw(&place);
    let mut stdin = child.stdin.take().unwrap();
    let write = serde_json::json!({
        "jsonrpc": "2.0", "id": 6, "method": "tools/call",
        "params": {"name": "fs_write", "arguments": {
            "path": target, "mode": "overwrite", "content": "line \"one\"\n\u{e9}\ttwo\n"
        }}
    });
    let read_with_meta = serde_json::json!({
        "jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "fs_read", "arguments": {"path": target}, "_meta": {"progressToken": "p"}}
    });
    let lines = [
        INITIALIZE[0].to_owned(),
        INITIALIZE[1].to_owned(),
        "this is not JSON".to_owned(),
        String::new(),
        r#"{"jsonrpc":"2.0","method":"notifications/made-up","params":5}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":5,"method":7}"#.to_owned(),
        write.to_string(),
    ];
    for line in &lines {
        writeln!(stdin, "{line}").unwrap();
    }
    stdin.flush().unwrap();
    let mut answers: Vec<Value> = Vec::new();
    let mut output = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next_answer = |answers: &mut Vec<Value>| {
        let line = output.next().expect("the server closed early").unwrap();
        answers.push(serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}")));
    };
    while answers.len() < 3 {
        next_answer(&mut answers);
    }
    // Calls run concurrently: the read goes once the write has answered.
    writeln!(stdin, "{read_with_meta}").unwrap();
    stdin.flush().unwrap();
    next_answer(&mut answers);
    drop(stdin);
    let rest: Vec<String> = output.map(Result::unwrap).collect();
    assert!(child.wait().unwrap().success());
    let ids: Vec<&Value> = answers.iter().map(|a| &a["id"]).collect();
    assert!(
        rest.is_empty(),
        "only four answers: {answers:?} then {rest:?}"
    );
    assert!(
        [1, 5, 6, 7]
            .iter()
            .all(|id| ids.contains(&&Value::from(*id))),
        "{ids:?}"
    );
    let invalid = answers.iter().find(|a| a["id"] == 5).unwrap();
    assert_eq!(invalid["error"]["code"], -32600, "{invalid}");
    let written = answers.iter().find(|a| a["id"] == 6).unwrap();
    assert_eq!(written["result"]["isError"], false, "{written}");
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "line \"one\"\n\u{e9}\ttwo\n"
    );
    let read = answers.iter().find(|a| a["id"] == 7).unwrap();
    assert_eq!(
        read["result"]["content"][0]["text"], "line \"one\"\n\u{e9}\ttwo\n",
        "{read}"
    );
}

#[test]
fn standard_output_carries_only_protocol_messages() {
    use std::io::{BufRead, BufReader, Write};
    let place = place();
    let mut child = spawn_raw(&place);
    let mut stdin = child.stdin.take().unwrap();
    let requests = [
        INITIALIZE[0],
        INITIALIZE[1],
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
    ];
    for request in requests {
        writeln!(stdin, "{request}").unwrap();
    }
    stdin.flush().unwrap();
    let mut messages: Vec<Value> = Vec::new();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // Every line up to the listing's answer must be a JSON-RPC message.
    while !messages.iter().any(|m| m["id"] == 2) {
        let line = lines
            .next()
            .expect("the server closed its output early")
            .unwrap();
        let message: Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
        assert_eq!(message["jsonrpc"], "2.0", "{line}");
        messages.push(message);
    }
    drop(stdin);
    // After the client hangs up, nothing but protocol follows, and the server ends.
    for line in lines {
        let line = line.unwrap();
        let message: Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
        assert_eq!(message["jsonrpc"], "2.0", "{line}");
    }
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let listed = messages.iter().find(|m| m["id"] == 2).unwrap();
    assert_eq!(listed["result"]["tools"].as_array().unwrap().len(), 22);
    // The server's own words went to standard error.
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("flycode mcp: serving extended tools")
    );
}
