//! `flycode validate` follows sub-agents (PROTOCOL.md §13 (The API loop: sub-agents)): a `flycode run` record whose `agent.task`
//! results name a child transcript has that transcript checked too, its findings reported under
//! the child's own file; a child transcript that is missing is a warning on the parent.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::api_server::ScriptedServer;
use super::common::flycode;
use super::subagent_harness::{Project, block, explore_args, explore_task, parallel, scripted};

// The projects here are `Project::bare()`: the reports count messages, and an `AGENTS.md` would
// add a folder-notes message to every conversation.

impl Project {
    /// A quoted glob matching the parent's transcript and its children's (the folder also holds
    /// the state directory).
    fn both(&self) -> PathBuf {
        self.base.join("run*.jsonl")
    }
}

/// A native run whose parent starts one explore task; the child reads, tries to write (refused:
/// sub-agents are read-only), then completes.
fn native_run(project: &Project) {
    let session = project.path("src/session.rs");
    let server = ScriptedServer::start(scripted(
        vec![explore_task("task_1")],
        vec![parallel(&[
            ("r1", "fs_read", json!({ "path": session })),
            (
                "w1",
                "fs_write",
                json!({"path": session, "mode": "overwrite", "content": "x"}),
            ),
        ])],
    ));
    project.run(&server, &[]);
    let child = std::fs::read_to_string(project.child("task-1")).unwrap();
    assert!(child.contains("denied_by_policy"), "{child}");
    assert!(child.contains("agent_complete"), "{child}");
}

struct Validated {
    code: i32,
    stdout: String,
}

fn validate(args: &[&str], files: &[&Path]) -> Validated {
    let output = flycode()
        .arg("validate")
        .args(args)
        .args(files)
        .output()
        .unwrap();
    Validated {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8(output.stdout).unwrap(),
    }
}

fn validate_json(args: &[&str], files: &[&Path]) -> (i32, Value) {
    let mut all = vec!["--format", "json"];
    all.extend_from_slice(args);
    let validated = validate(&all, files);
    (
        validated.code,
        serde_json::from_str(&validated.stdout).unwrap(),
    )
}

fn show(path: &Path) -> String {
    path.display().to_string()
}

/// `(file, code)` of every finding of a JSON report.
fn findings(report: &Value) -> Vec<(String, String)> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["file"].as_str().unwrap().to_owned(),
                f["code"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Replaces message `index` of the JSON Lines transcript at `path` with `message`.
fn replace_message(path: &Path, index: usize, message: &Value) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines[index] = message.to_string();
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

/// The index of the first assistant message of the JSON Lines transcript at `path`.
fn first_assistant(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .position(|line| serde_json::from_str::<Value>(line).unwrap()["role"] == "assistant")
        .unwrap()
}

// ---------------------------------------------------------------------------------------------
// Clean runs.

#[test]
fn a_native_run_and_its_sub_agent_validate_clean_and_both_files_are_named() {
    let project = Project::bare();
    native_run(&project);
    let parent = project.transcript();
    let child = project.child("task-1");
    let validated = validate(&[], &[&parent]);
    assert_eq!(validated.code, 0, "{}", validated.stdout);
    assert_eq!(
        validated.stdout,
        format!(
            "{}: checked as the transcript of sub-agent task-1 of {}\n2 transcripts, 14 messages, 0 errors, 0 warnings\n",
            show(&child),
            show(&parent)
        )
    );
    let (code, report) = validate_json(&[], &[&parent]);
    assert_eq!(code, 0);
    assert_eq!(report["summary"]["transcripts"], 2);
    assert_eq!(
        report["subagents"],
        json!([{"file": show(&child), "parent": show(&parent), "task_id": "task-1", "named": false}])
    );
}

#[test]
fn a_text_mode_run_and_its_sub_agent_validate_clean() {
    let project = Project::bare();
    let server = ScriptedServer::start(scripted(
        vec![block("call-001", "agent.task", &explore_args(&json!({})))],
        vec![
            block(
                "call-001",
                "fs.read",
                &json!({ "path": project.path("src/session.rs") }),
            ),
            block("call-002", "agent.complete", &json!({ "result": "done" })),
        ],
    ));
    project.run(&server, &["--mode", "text"]);
    let validated = validate(&[], &[&project.transcript()]);
    assert_eq!(validated.code, 0, "{}", validated.stdout);
    assert!(
        validated.stdout.contains(&format!(
            "{}: checked as the transcript of sub-agent task-1 of {}",
            show(&project.child("task-1")),
            show(&project.transcript())
        )),
        "{}",
        validated.stdout
    );
    assert!(
        validated
            .stdout
            .ends_with("2 transcripts, 13 messages, 0 errors, 0 warnings\n"),
        "{}",
        validated.stdout
    );
}

#[test]
fn a_sub_agent_transcript_named_too_is_checked_once() {
    let project = Project::bare();
    native_run(&project);
    let parent = project.transcript();
    let child = project.child("task-1");
    for files in [vec![&*parent, &*child], vec![&*child, &*parent]] {
        let (code, report) = validate_json(&[], &files);
        assert_eq!(code, 0, "{report}");
        assert_eq!(report["summary"]["transcripts"], 2, "{report}");
        assert_eq!(report["subagents"][0]["named"], true, "{report}");
    }
    // A glob matching both: every file once, and no note about a file that was named.
    let validated = validate(&[], &[&project.both()]);
    assert_eq!(validated.code, 0, "{}", validated.stdout);
    assert!(
        validated.stdout.starts_with("2 transcripts, 14 messages"),
        "{}",
        validated.stdout
    );
}

#[test]
fn a_sub_agent_transcript_alone_is_judged_as_a_sub_agents() {
    let project = Project::bare();
    native_run(&project);
    // Its system prompt names agent.complete: the refused fs.write and the completion parse.
    let (code, report) = validate_json(&[], &[&project.child("task-1")]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["summary"]["transcripts"], 1);
}

#[test]
fn a_child_without_a_system_prompt_is_judged_as_a_sub_agent_through_its_parent() {
    let project = Project::bare();
    native_run(&project);
    // Drop the system prompts: only the parent's reference tells that the child is a child.
    for path in [project.transcript(), project.child("task-1")] {
        let text = std::fs::read_to_string(&path).unwrap();
        let kept: Vec<&str> = text
            .lines()
            .filter(|l| serde_json::from_str::<Value>(l).unwrap()["role"] != "system")
            .collect();
        std::fs::write(&path, kept.join("\n") + "\n").unwrap();
    }
    let (code, report) = validate_json(&[], &[&project.transcript()]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["summary"]["transcripts"], 2);
    // Named too, it is still judged as a sub-agent, once.
    let (code, report) = validate_json(&[], &[&project.both()]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["summary"]["transcripts"], 2);
    // Alone, nothing says it is one: agent_complete is not a tool of the main agent.
    let (code, report) = validate_json(&[], &[&project.child("task-1")]);
    assert_eq!(code, 1);
    assert_eq!(
        findings(&report),
        [(show(&project.child("task-1")), "unknown_tool".to_owned())]
    );
}

// ---------------------------------------------------------------------------------------------
// Findings in a child.

#[test]
fn a_protocol_violation_in_a_child_is_reported_under_the_childs_path_in_every_format() {
    let project = Project::bare();
    native_run(&project);
    let parent = project.transcript();
    let child = project.child("task-1");
    let at = first_assistant(&child);
    // The child's first call names a tool that does not exist (a native run's calls are its
    // API tool calls; a block in its text is not read as one).
    let mut message: Value = serde_json::from_str(
        std::fs::read_to_string(&child)
            .unwrap()
            .lines()
            .nth(at)
            .unwrap(),
    )
    .unwrap();
    message["tool_calls"][0]["function"]["name"] = json!("fs_delete");
    replace_message(&child, at, &message);
    let line = at + 1;
    let (code, report) = validate_json(&[], &[&parent]);
    assert_eq!(code, 1, "{report}");
    assert!(
        findings(&report).contains(&(show(&child), "unknown_tool".to_owned())),
        "{report}"
    );
    assert!(
        findings(&report)
            .iter()
            .all(|(file, _)| *file == show(&child)),
        "{report}"
    );
    let human = validate(&[], &[&parent]);
    assert_eq!(human.code, 1);
    assert!(
        human
            .stdout
            .contains(&format!("{}:{line}: error[unknown_tool]", show(&child))),
        "{}",
        human.stdout
    );
    let github = validate(&["--format", "github"], &[&parent]);
    assert_eq!(github.code, 1);
    assert!(
        github.stdout.contains(&format!(
            "::error file={},line={line},title=unknown_tool::",
            show(&child)
        )),
        "{}",
        github.stdout
    );
    let sarif = validate(&["--format", "sarif"], &[&parent]);
    assert_eq!(sarif.code, 1);
    let sarif: Value = serde_json::from_str(&sarif.stdout).unwrap();
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    let located: Vec<&str> = results
        .iter()
        .filter(|r| r["ruleId"] == "unknown_tool")
        .map(|r| {
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(located, [format!("file://{}", show(&child))], "{sarif}");
}

// ---------------------------------------------------------------------------------------------
// Missing children.

#[test]
fn a_missing_sub_agent_transcript_is_a_warning_on_the_parent_and_strict_makes_it_an_error() {
    let project = Project::bare();
    native_run(&project);
    let parent = project.transcript();
    std::fs::remove_file(project.child("task-1")).unwrap();
    let (code, report) = validate_json(&[], &[&parent]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(
        findings(&report),
        [(show(&parent), "missing_subagent_transcript".to_owned())]
    );
    let finding = &report["findings"][0];
    assert_eq!(finding["severity"], "warning");
    let message = finding["message"].as_str().unwrap();
    assert!(message.contains("\"task_1\""), "{message}");
    assert!(
        message.contains(&show(&project.child("task-1"))),
        "{message}"
    );
    assert!(report.get("subagents").is_none(), "{report}");
    // The finding points at the message holding the task's result.
    let index = finding["index"].as_u64().unwrap() as usize;
    let result: Value = serde_json::from_str(
        std::fs::read_to_string(&parent)
            .unwrap()
            .lines()
            .nth(index)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(result["tool_call_id"], "task_1");
    let (code, report) = validate_json(&["--strict"], &[&parent]);
    assert_eq!(code, 1, "{report}");
    assert_eq!(report["findings"][0]["severity"], "error");
}

#[test]
fn a_task_that_failed_before_any_request_needs_no_transcript() {
    let project = Project::bare();
    project.configure("[agent.subagent.explore]\nrole = \"\"\n");
    let server = ScriptedServer::start(scripted(vec![explore_task("task_1")], vec![]));
    project.run(&server, &[]);
    assert!(!project.child("task-1").exists());
    let parent = std::fs::read_to_string(project.transcript()).unwrap();
    assert!(parent.contains("Turns: 0"), "{parent}");
    let validated = validate(&["--strict"], &[&project.transcript()]);
    assert_eq!(validated.code, 0, "{}", validated.stdout);
    assert_eq!(
        validated.stdout,
        "1 transcript, 6 messages, 0 errors, 0 warnings\n"
    );
}
