//! The two tool sets (PROTOCOL.md §9 (Tools)): `seed` by default, `extended` by `--tools extended` or
//! `tools = "extended"` in flycode.toml; the prompt, the whitelist and the validator agree.
#![allow(clippy::disallowed_methods)] // fixtures are made directly, outside the sandbox

use serde_json::Value;

use super::common::flycode;

const READ_MANY: &str = "```flycode-call\n{\"id\":\"call-001\",\"tool\":\"fs.readMany\",\"args\":{\"paths\":[\"/tmp/a.txt\"]}}\n```\n";

/// A folder to run in, with no flycode.toml unless the test writes one, and no user config.
struct Place {
    dir: tempfile::TempDir,
}

impl Place {
    fn new() -> Place {
        Place {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn flycode(&self) -> assert_cmd::Command {
        let mut command = flycode();
        command
            .current_dir(self.dir.path())
            .env("HOME", self.dir.path())
            .env("XDG_CONFIG_HOME", self.dir.path().join("config"))
            .env("FLYCODE_STATE_DIR", self.dir.path().join("state"));
        command
    }

    fn check(&self, extra: &[&str]) -> (i32, Value) {
        let output = self
            .flycode()
            .args(["check", "--json"])
            .args(extra)
            .write_stdin(READ_MANY)
            .output()
            .unwrap();
        let report = serde_json::from_slice(&output.stdout).unwrap();
        (output.status.code().unwrap(), report)
    }
}

#[test]
fn the_seed_set_refuses_an_extended_tool_and_names_the_switch() {
    let place = Place::new();
    let (code, report) = place.check(&[]);
    assert_eq!(code, 1);
    assert_eq!(report["error"]["code"], "unknown_tool");
    let hint = report["error"]["hint"].as_str().unwrap();
    assert!(hint.contains("--tools extended"), "{hint}");
    assert!(hint.contains("fs.readMany"), "{hint}");
}

#[test]
fn the_extended_set_accepts_read_many_and_edit() {
    let place = Place::new();
    let (code, report) = place.check(&["--tools", "extended"]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["call"]["tool"], "fs.readMany");
    let (code, _) = place.check(&["--tools", "seed"]);
    assert_eq!(code, 1);
}

#[test]
fn flycode_toml_chooses_the_set_and_the_flag_wins() {
    let place = Place::new();
    std::fs::write(
        place.dir.path().join("flycode.toml"),
        "tools = \"extended\"\n",
    )
    .unwrap();
    assert_eq!(place.check(&[]).0, 0);
    assert_eq!(place.check(&["--tools", "seed"]).0, 1);
    std::fs::write(
        place.dir.path().join("flycode.toml"),
        "[tools]\nset = \"extended\"\n\"shell.exec\" = \"deny\"\n",
    )
    .unwrap();
    assert_eq!(place.check(&[]).0, 0);
}

#[test]
fn the_prompt_offers_exactly_the_set() {
    let place = Place::new();
    for lang in ["en", "zh"] {
        let seed = place
            .flycode()
            .args(["prompt", "--lang", lang])
            .output()
            .unwrap();
        let seed = String::from_utf8(seed.stdout).unwrap();
        assert!(seed.contains("fs.writeBatch") && !seed.contains("fs.readMany"));
        let extended = place
            .flycode()
            .args(["prompt", "--lang", lang, "--tools", "extended"])
            .output()
            .unwrap();
        let extended = String::from_utf8(extended.stdout).unwrap();
        assert!(extended.contains("- `fs.readMany`"), "{lang}");
        assert!(extended.contains("- `fs.edit`"), "{lang}");
        assert!(
            extended.contains("\"tool\":\"fs.edit\""),
            "{lang}: an example"
        );
    }
}

#[test]
fn exec_runs_an_extended_call_only_in_the_extended_set() {
    let place = Place::new();
    let root = place.dir.path().canonicalize().unwrap();
    std::fs::write(root.join("a.txt"), "alpha\n").unwrap();
    let slash = format!("/fs.readMany {}/a.txt", root.display());
    let refused = place
        .flycode()
        .args(["exec", "--slash", &slash])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stdout).contains("[code] unknown_tool"));
    let accepted = place
        .flycode()
        .args(["exec", "--tools", "extended", "--slash", &slash])
        .output()
        .unwrap();
    let accepted = String::from_utf8_lossy(&accepted.stdout);
    assert!(!accepted.contains("[code] unknown_tool"), "{accepted}");
    assert!(accepted.contains("[command] /fs.readMany "), "{accepted}");
    assert!(accepted.contains("[ok] true"), "{accepted}");
    assert!(
        accepted.contains("/a.txt (6 B, 1 line) ===\nalpha\n"),
        "{accepted}"
    );
}

#[test]
fn validate_judges_call_blocks_against_the_chosen_set() {
    let place = Place::new();
    let transcript = place.dir.path().join("chat.jsonl");
    let reply =
        serde_json::to_string(&serde_json::json!({"role": "assistant", "content": READ_MANY}))
            .unwrap();
    let result = serde_json::to_string(&serde_json::json!({"role": "user", "content": "```flycode-result\n[id] call-001\n[command] /fs.readMany /tmp/a.txt\n[ok] true\n[data]\n=== File: /tmp/a.txt (1 B, 1 lines) ===\na\n```"})).unwrap();
    std::fs::write(&transcript, format!("{reply}\n{result}\n")).unwrap();
    let seed = place
        .flycode()
        .args(["validate"])
        .arg(&transcript)
        .output()
        .unwrap();
    assert_eq!(seed.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&seed.stdout).contains("unknown_tool"));
    place
        .flycode()
        .args(["validate", "--tools", "extended"])
        .arg(&transcript)
        .assert()
        .code(0);
}

/// An MCP client of the seed set is offered only the arguments the seed set accepts:
/// `process_run` without `background` and `pty` (it would be refused them); the extended set
/// offers both.
#[test]
fn an_mcp_client_of_the_seed_set_is_not_offered_background_or_pty() {
    let offered = |set: &str| -> Vec<String> {
        let place = Place::new();
        let requests = [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        ]
        .join("\n")
            + "\n";
        let output = flycode()
            .args(["mcp", "--tools", set, "--root"])
            .arg(place.dir.path())
            .env("FLYCODE_STATE_DIR", place.dir.path().join(".state"))
            .env_remove("XDG_CONFIG_HOME")
            .write_stdin(requests)
            .output()
            .unwrap();
        let listed = String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .find(|message| message["id"] == 2)
            .unwrap_or_else(|| panic!("no tools/list answer: {output:?}"));
        let tool = listed["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|tool| tool["name"] == "process_run")
            .cloned()
            .unwrap();
        tool["inputSchema"]["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    };
    let seed = offered("seed");
    assert!(seed.contains(&"command".to_owned()), "{seed:?}");
    assert!(
        !seed
            .iter()
            .any(|name| name == "background" || name == "pty"),
        "{seed:?}"
    );
    let extended = offered("extended");
    assert!(
        extended.iter().any(|name| name == "background"),
        "{extended:?}"
    );
}
