//! The protocol corrections of issue 12 and the header budget of PROTOCOL.md §4 (The result block: header budget), through the real
//! binary: huge arguments keep answers small, calls without an id are answered under flycode's
//! own id, and a relative path's hint names the user's root.

use serde_json::{Value, json};

use super::common::flycode;

/// Headers of any answer here stay under this many bytes, whatever the call held.
const HEADER_BUDGET: usize = 8 * 1024;

fn block(call: &Value) -> String {
    format!("```flycode-call\n{call}\n```\n")
}

/// `flycode check` of `reply`: its exit code and what it printed.
fn check(reply: &str, dir: &std::path::Path) -> (i32, String) {
    // The folder is HOME too: the user's configuration is `dir/.config/flycode/flycode.toml`.
    let output = flycode()
        .arg("check")
        .current_dir(dir)
        .env("HOME", dir)
        .env_remove("XDG_CONFIG_HOME")
        .write_stdin(reply)
        .output()
        .unwrap();
    let text = String::from_utf8(output.stdout).unwrap();
    (output.status.code().unwrap(), text)
}

fn header(block: &str, key: &str) -> String {
    let prefix = format!("[{key}] ");
    block
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no [{key}] in {block}"))
        .to_owned()
}

#[test]
fn megabyte_arguments_keep_the_answer_small_and_say_what_was_wrong() {
    let temp = tempfile::tempdir().unwrap();
    let huge = "a".repeat(1 << 20);
    let cases = [
        (
            json!({"id": "call-001", "tool": "fs.read", "args": {"path": format!("/{huge}"), "head": 0}}),
            "invalid_args",
            "argument \"head\" must be at least 1",
        ),
        (
            json!({"id": "call-001", "tool": "fs.read", "args": {"path": huge}}),
            "relative_path",
            "path must be an absolute path",
        ),
        (
            json!({"id": huge, "tool": "fs.read", "args": {"path": "/a"}}),
            "invalid_id",
            "it is longer than 512 characters",
        ),
        (
            json!({"id": "call-001", "tool": huge, "args": {"path": format!("/{huge}")}}),
            "unknown_tool",
            "is not a flycode tool",
        ),
    ];
    for (call, code, says) in cases {
        let (exit, answer) = check(&block(&call), temp.path());
        assert_eq!(exit, 1, "{code}");
        assert!(
            answer.len() < HEADER_BUDGET,
            "{code}: {} bytes",
            answer.len()
        );
        assert_eq!(header(&answer, "code"), code);
        assert!(header(&answer, "error").contains(says), "{answer}");
        assert!(answer.contains("…(10485"), "{code}: {answer}");
    }
}

#[test]
fn a_tool_error_that_echoes_a_megabyte_path_stays_small() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    // Long but legal: 1000 nested names of 250 bytes, none of which exists.
    let missing: String = (0..1000)
        .map(|i| format!("/{}{i:03}", "d".repeat(247)))
        .collect();
    let path = format!("{}{missing}", root.display());
    let call = json!({"id": "call-001", "tool": "fs.read", "args": {"path": path}});
    let output = flycode()
        .args(["exec", "--root"])
        .arg(&root)
        .env("FLYCODE_STATE_DIR", state.path())
        .write_stdin(block(&call))
        .output()
        .unwrap();
    let answer = String::from_utf8(output.stdout).unwrap();
    assert_eq!(output.status.code(), Some(1), "{answer}");
    assert!(answer.len() < HEADER_BUDGET, "{} bytes", answer.len());
    assert!(header(&answer, "command").contains("chars)"), "{answer}");
    assert!(!header(&answer, "code").is_empty(), "{answer}");
}

#[test]
fn a_call_without_an_id_is_answered_under_flycodes_id_not_none() {
    let temp = tempfile::tempdir().unwrap();
    for call in [
        json!({"tool": "fs.read", "args": {"path": "/a"}}),
        json!({"id": null, "tool": "fs.read", "args": {"path": "/a"}}),
        json!({"id": "", "tool": "fs.read", "args": {"path": "/a"}}),
        json!({"id": 3, "tool": "fs.read", "args": {"path": "/a"}}),
    ] {
        let (exit, answer) = check(&block(&call), temp.path());
        assert_eq!(exit, 1);
        assert_eq!(header(&answer, "id"), "flycode-invalid-call", "{answer}");
    }
    // flycode's id is not one a call may take.
    let call = json!({"id": "flycode-invalid-call", "tool": "fs.read", "args": {"path": "/a"}});
    let (_, answer) = check(&block(&call), temp.path());
    assert_eq!(header(&answer, "code"), "invalid_id");
    // A slash command typed by a person still runs as (none).
    let state = tempfile::tempdir().unwrap();
    let output = flycode()
        .args(["exec", "--root"])
        .arg(temp.path())
        .env("FLYCODE_STATE_DIR", state.path())
        .args(["--slash", "/fs.read relative.txt"])
        .output()
        .unwrap();
    let answer = String::from_utf8(output.stdout).unwrap();
    assert_eq!(header(&answer, "id"), "(none)", "{answer}");
}

#[test]
fn the_relative_path_hint_uses_the_first_root() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    let call = json!({"id": "call-001", "tool": "fs.read", "args": {"path": "src/main.rs"}});
    let output = flycode()
        .args(["exec", "--root"])
        .arg(&root)
        .env("FLYCODE_STATE_DIR", state.path())
        .write_stdin(block(&call))
        .output()
        .unwrap();
    let answer = String::from_utf8(output.stdout).unwrap();
    let expected = format!("e.g. {}/src/main.rs.", root.display());
    assert!(header(&answer, "hint").ends_with(&expected), "{answer}");

    // check takes the roots exec would be given: here the current folder.
    let (_, answer) = check(&block(&call), temp.path());
    assert!(header(&answer, "hint").ends_with(&expected), "{answer}");
    // The user's file (a project file's roots outside the project apply only once trusted).
    std::fs::create_dir_all(temp.path().join(".config/flycode")).unwrap();
    std::fs::write(
        temp.path().join(".config/flycode/flycode.toml"),
        "roots = [\"/srv/app\", \"/srv/other\"]\n",
    )
    .unwrap();
    let (_, answer) = check(&block(&call), temp.path());
    assert!(
        header(&answer, "hint").ends_with("e.g. /srv/app/src/main.rs."),
        "{answer}"
    );
}

#[test]
fn process_run_without_args_reads_back_to_the_same_call() {
    let temp = tempfile::tempdir().unwrap();
    let call = json!({"id": "call-001", "tool": "process.run", "args": {"command": "ls", "cwd": "/a", "timeoutMs": 0}});
    let (_, answer) = check(&block(&call), temp.path());
    assert_eq!(
        header(&answer, "command"),
        "/process.run --cwd /a --timeoutMs 0 ls"
    );
}

#[test]
fn reversed_spans_are_refused_by_check() {
    let temp = tempfile::tempdir().unwrap();
    for (arg, value, form) in [("range", "500-100", "0-4096"), ("lines", "60-20", "20-60")] {
        let call = json!({"id": "call-001", "tool": "fs.read", "args": {"path": "/a", arg: value}});
        let (exit, answer) = check(&block(&call), temp.path());
        assert_eq!(exit, 1, "{answer}");
        assert_eq!(header(&answer, "code"), "invalid_args");
        assert!(header(&answer, "hint").contains(form), "{answer}");
    }
}
