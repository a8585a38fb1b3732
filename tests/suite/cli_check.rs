//! `flycode check` run as a user runs it: the real binary, real files, real pipes.

use predicates::prelude::*;
use serde_json::{Value, json};

use super::common::flycode;

const VALID: &str = "```flycode-call\n{\"id\":\"call-001\",\"tool\":\"fs.read\",\"args\":{\"path\":\"/tmp/a.txt\",\"head\":200}}\n```\n";

fn check_json(reply: &str, extra: &[&str]) -> (i32, Value) {
    let output = flycode()
        .arg("check")
        .arg("--json")
        .args(extra)
        .write_stdin(reply)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    (output.status.code().unwrap(), report)
}

#[test]
fn a_valid_call_prints_the_normalized_call_and_exits_0() {
    flycode()
        .arg("check")
        .write_stdin(VALID)
        .assert()
        .code(0)
        .stdout("{\"id\":\"call-001\",\"tool\":\"fs.read\",\"args\":{\"path\":\"/tmp/a.txt\",\"head\":200}}\n");
}

#[test]
fn json_output_for_a_call() {
    let (code, report) = check_json(VALID, &[]);
    assert_eq!(code, 0);
    assert_eq!(
        report,
        json!({"verdict": "call", "call": {"id": "call-001", "tool": "fs.read", "args": {"path": "/tmp/a.txt", "head": 200}}, "error": null, "warnings": []})
    );
}

#[test]
fn json_output_for_prose_exits_3() {
    let (code, report) = check_json("这是一个普通回答。", &[]);
    assert_eq!(code, 3);
    assert_eq!(
        report,
        json!({"verdict": "none", "call": null, "error": null, "warnings": []})
    );
}

#[test]
fn json_output_for_a_violation_has_code_message_and_hint() {
    let (code, report) = check_json(&format!("I'll read it.\n{VALID}"), &[]);
    assert_eq!(code, 1);
    assert_eq!(report["verdict"], "invalid");
    assert_eq!(report["call"], Value::Null);
    assert_eq!(report["error"]["code"], "text_outside_block");
    assert!(
        report["error"]["message"]
            .as_str()
            .unwrap()
            .contains("I'll read it.")
    );
    assert!(
        report["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("block alone")
    );
}

#[test]
fn lenient_accepts_text_with_a_warning() {
    let (code, report) = check_json(&format!("I'll read it.\n{VALID}"), &["--lenient"]);
    assert_eq!(code, 0);
    assert_eq!(report["verdict"], "call");
    assert_eq!(report["warnings"][0]["code"], "text_outside_block");
}

#[test]
fn a_violation_prints_the_result_block_the_model_would_receive() {
    let reply = "```flycode-call\n{\"id\":\"call-007\",\"tool\":\"fs.raed\",\"args\":{\"path\":\"/tmp/a.txt\"}}\n```";
    flycode()
        .arg("check")
        .write_stdin(reply)
        .assert()
        .code(1)
        .stdout(
            "```flycode-result\n[id] call-007\n[command] /fs.raed --path /tmp/a.txt\n[ok] false\n[code] unknown_tool\n[error] \"fs.raed\" is not a flycode tool\n[hint] Did you mean \"fs.read\"? The tools are: fs.ls, fs.mkdir, fs.read, fs.search, fs.write, fs.rm, fs.mv, fs.chmod, fs.writeBatch, fs.diff, process.run, shell.exec.\n```\n",
        );
}

#[test]
fn reads_a_reply_file_and_dash_means_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("reply.md");
    std::fs::write(&file, VALID).unwrap();
    flycode().arg("check").arg(&file).assert().code(0);
    flycode()
        .args(["check", "-"])
        .write_stdin(VALID)
        .assert()
        .code(0);
}

#[test]
fn warnings_go_to_stderr_in_text_mode() {
    flycode()
        .arg("check")
        .write_stdin(format!("\u{00A0}{VALID}"))
        .assert()
        .code(0)
        .stderr(predicate::str::contains("warning[normalized_whitespace]"));
}

#[test]
fn usage_errors_exit_2_with_a_clear_message() {
    flycode()
        .args(["check", "/no/such/reply.md"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot read /no/such/reply.md"));
    flycode().args(["check", "--bogus"]).assert().code(2);
    flycode().arg("frobnicate").assert().code(2);
    flycode().assert().code(2);
}

#[test]
fn non_utf8_input_is_a_usage_error_naming_the_offset() {
    flycode()
        .arg("check")
        .write_stdin(&b"abc\xff\xfe"[..])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "not UTF-8 text (invalid byte at offset 3)",
        ));
}

#[test]
fn a_huge_reply_is_checked() {
    let content = "x".repeat(8 * 1024 * 1024);
    let reply = format!(
        "```flycode-call\n{{\"id\":\"c\",\"tool\":\"fs.write\",\"args\":{{\"path\":\"/tmp/x\",\"mode\":\"overwrite\",\"content\":\"{content}\"}}}}\n```\n"
    );
    let (code, report) = check_json(&reply, &[]);
    assert_eq!(code, 0);
    assert_eq!(
        report["call"]["args"]["content"].as_str().unwrap().len(),
        content.len()
    );
}

#[test]
fn json_output_matches_every_reply_fixture() {
    let fixtures = super::common::repo_root().join("fixtures/replies");
    for (verdict, exit) in [("call", 0), ("none", 3), ("invalid", 1)] {
        for path in super::common::files_in(&fixtures.join(verdict), "md") {
            let expect = std::fs::read_to_string(path.with_extension("expect")).unwrap();
            let mut command = flycode();
            command.arg("check").arg("--json").arg(&path);
            if expect.contains("lenient: true") {
                command.arg("--lenient");
            }
            if let Some(set) = expect.lines().find_map(|l| l.strip_prefix("tools: ")) {
                command.args(["--tools", set]);
            }
            let output = command.output().unwrap();
            let name = path.display();
            assert_eq!(output.status.code(), Some(exit), "{name}");
            let report: Value = serde_json::from_slice(&output.stdout).unwrap();
            assert_eq!(report["verdict"], verdict, "{name}");
            let code = expect.lines().find_map(|l| l.strip_prefix("code: "));
            assert_eq!(report["error"]["code"].as_str(), code, "{name}");
            assert_eq!(report["call"].is_null(), verdict != "call", "{name}");
            for key in ["verdict", "call", "error", "warnings"] {
                assert!(report.get(key).is_some(), "{name}: no {key}");
            }
        }
    }
}

/// About 2 MB of one shape that made a full CommonMark parser allocate per byte, then a call.
fn pathological_reply(unit: &str) -> String {
    let mut reply = unit.repeat(2_000_000 / unit.len());
    reply.push_str("\n\n");
    reply.push_str(VALID);
    reply
}

#[test]
fn pathological_markdown_is_judged_like_any_text_around_a_call() {
    for unit in ["[", "*a", "[a](", "> ", "a\n", "- ", "<div>", "```"] {
        let reply = pathological_reply(unit);
        let (code, report) = check_json(&reply, &[]);
        let (lenient_code, lenient) = check_json(&reply, &["--lenient"]);
        if unit == "```" {
            // A fence of 2 million backticks holds the rest, call block included: prose.
            assert_eq!((code, &report["verdict"]), (3, &json!("none")), "{report}");
            continue;
        }
        assert_eq!(code, 1, "{unit}: {report}");
        assert_eq!(
            report["error"]["code"], "text_outside_block",
            "{unit}: {report}"
        );
        assert_eq!(lenient_code, 0, "{unit}: {lenient}");
        assert_eq!(lenient["call"]["id"], "call-001", "{unit}: {lenient}");
    }
}

#[test]
fn the_id_of_a_broken_block_is_named_on_standard_error_by_check_and_exec() {
    let broken = "```flycode-call\n{\"id\":\"c7\",\"tool\":\"fs.read\",\"args\":{\"path\":\"/tmp/a\",}}\n```\n";
    let temp = tempfile::tempdir().unwrap();
    for command in [
        vec!["check"],
        vec!["exec", "--root", temp.path().to_str().unwrap()],
    ] {
        flycode()
            .args(&command)
            .env("FLYCODE_STATE_DIR", temp.path().join("state"))
            .write_stdin(broken)
            .assert()
            .code(1)
            .stdout(predicate::str::contains("[id] flycode-invalid-call"))
            .stderr(predicate::str::contains(
                "note: the broken call block is call c7 (its id as written",
            ));
    }
    // A block whose id the answer carries needs no note.
    flycode()
        .arg("check")
        .write_stdin("```flycode-call\n{\"id\":\"c8\",\"tool\":\"fs.raed\",\"args\":{}}\n```\n")
        .assert()
        .code(1)
        .stdout(predicate::str::contains("[id] c8"))
        .stderr(predicate::str::contains("note:").not());
}
