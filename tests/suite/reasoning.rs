//! Calls drafted in a reply's reasoning never run (PROTOCOL.md §1 (Reading a reply), §15): a
//! reasoning model that writes a `flycode-call` block, a seed 000 tag or a native text call
//! inside `<think>…</think>` / `<thinking>…</thinking>`, wherever that stands in its reply, or
//! before a lone `</think>` (a chat template that put the opening tag in the prompt), has it set
//! aside, silently, at every door: check, exec, watch and run, in both dialects.

use std::path::Path;
use std::process::Stdio;

use serde_json::json;

use super::api_server::{Reply, ScriptedServer};
use super::common::{
    Workspace, clean_run_command, flycode, send_signal, spawn_watch, temp_base_with_root,
    wait_for_file,
};

/// A `flycode-call` block that would create `path`.
fn creating_call(id: &str, path: &str) -> String {
    let call = json!({"id": id, "tool": "fs.write", "args": {"path": path, "mode": "overwrite", "content": "pwned"}});
    format!("```flycode-call\n{call}\n```\n")
}

/// A reply that reasons (not at its start) about a call it then does not make.
fn drafted_in_reasoning(path: &str) -> String {
    format!(
        "Let me think this through.\n<think>\nI could overwrite it:\n{}That would be wrong.\n</think>\nNothing needs to change.\n",
        creating_call("c1", path)
    )
}

#[test]
fn check_and_exec_never_run_a_call_block_drafted_in_reasoning() {
    let w = Workspace::new();
    let target = w.path("pwned.txt");
    for reply in [
        drafted_in_reasoning(&target),
        // A second reasoning element, right after a first one.
        format!(
            "<think>short</think>\n<THINKING>\n{}</THINKING>\nNo call today.",
            creating_call("c2", &target)
        ),
        // A closing tag alone: a template put `<think>` in the prompt.
        format!(
            "{}is tempting, but no.\n</think>\nAll good.",
            creating_call("c3", &target)
        ),
    ] {
        let checked = flycode()
            .args(["check", "--json", "--lenient"])
            .write_stdin(reply.clone())
            .output()
            .unwrap();
        let verdict: serde_json::Value = serde_json::from_slice(&checked.stdout).unwrap();
        assert_eq!(verdict["verdict"], "none", "{reply}\n{verdict}");
        let output = w
            .exec_command(&["--lenient", "--yes"])
            .write_stdin(reply.clone())
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(3), "{reply}");
        assert!(
            !Path::new(&target).exists(),
            "the drafted call ran: {reply}"
        );
    }
    // The call after the reasoning is the reply's, and runs.
    let reply = format!(
        "<think>\n{}</think>\n{}",
        creating_call("draft", &w.path("draft.txt")),
        creating_call("c4", &w.path("real.txt"))
    );
    let (code, report) = {
        let output = w
            .exec_command(&["--yes"])
            .write_stdin(reply)
            .output()
            .unwrap();
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        (output.status.code(), report)
    };
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["id"], "c4");
    assert!(w.root.join("real.txt").exists() && !w.root.join("draft.txt").exists());
}

#[test]
fn exec_and_check_in_the_tag_dialect_skip_tags_drafted_in_reasoning() {
    let w = Workspace::new();
    for reply in [
        "Checking first.\n<thinking>maybe <bash_call>touch pwned.txt</bash_call>?</thinking>\n<bash_call>echo checked</bash_call>\n",
        "<bash_call>touch pwned.txt</bash_call> would be wrong.</think>\n<bash_call>echo checked</bash_call>\n",
        "<think>a</think>Now:\n<think>\n```\n</think>\n```\n<builtin>\nsmart_edit\npath: pwned.txt\nmode: Create\nnew_text:\n<<<\nx\n>>>\n</builtin>\n</think>\n<bash_call>echo checked</bash_call>",
    ] {
        let checked = flycode()
            .args(["check", "--json", "--dialect", "tags"])
            .write_stdin(reply)
            .output()
            .unwrap();
        let report: serde_json::Value = serde_json::from_slice(&checked.stdout).unwrap();
        assert_eq!(
            report["calls"].as_array().map(Vec::len),
            Some(1),
            "{reply}\n{report}"
        );
        let output = w
            .exec_command(&["--dialect", "tags", "--yes"])
            .write_stdin(reply)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(stdout.contains("checked"), "{reply}\n{stdout}");
        assert!(
            !w.root.join("pwned.txt").exists(),
            "a drafted tag ran: {reply}"
        );
    }
}

#[test]
fn watch_never_runs_tags_drafted_in_reasoning() {
    let (_temp, base, root) = temp_base_with_root("root");
    let inbox = base.join("inbox");
    std::fs::create_dir_all(&inbox).unwrap();
    let child = spawn_watch(
        &inbox,
        &root,
        &base.join("state"),
        &["--dialect", "tags"],
        &[],
    );
    std::fs::write(
        inbox.join("one.md"),
        "On it.\n<think>\n<bash_call>touch pwned.txt</bash_call>\n</think>\n<bash_call>echo from-answer</bash_call>\n",
    )
    .unwrap();
    let answer = wait_for_file(&inbox.join("one.result.md"));
    assert!(answer.contains("from-answer"), "{answer}");
    assert_eq!(answer.matches("<bash_call_result").count(), 1, "{answer}");
    // A reply whose only tag is in its reasoning is prose: not answered.
    std::fs::write(
        inbox.join("two.md"),
        "Hmm.\n<thinking><bash_call>touch pwned.txt</bash_call></thinking>\nDone.\n",
    )
    .unwrap();
    std::fs::write(inbox.join("three.md"), "<bash_call>echo last</bash_call>").unwrap();
    assert!(wait_for_file(&inbox.join("three.result.md")).contains("last"));
    assert!(!inbox.join("two.result.md").exists());
    assert!(!root.join("pwned.txt").exists(), "a drafted tag ran");
    send_signal(child.id(), "TERM");
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0));
}

/// `flycode run` in `root` against `server`, with `extra` flags.
fn run(base: &Path, root: &Path, server: &ScriptedServer, extra: &[&str]) -> std::process::Output {
    clean_run_command(base, root)
        .args(["run", "--yes", "--root"])
        .arg(root)
        .arg("--base-url")
        .arg(server.base_url())
        .args(["--model", "reasoning-model"])
        .args(extra)
        .arg("Tidy up.")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn run_never_recovers_a_text_call_drafted_in_reasoning() {
    let (_temp, base, root) = temp_base_with_root("app");
    let drafted = json!({"name": "shell_exec", "arguments": {"command": "touch pwned.txt"}});
    let reply = format!(
        "Thinking.\n<think>\n<tool_call>\n{drafted}\n</tool_call>\n</think>\nNothing to tidy: the folder is clean."
    );
    let server = ScriptedServer::start(move |_, _| Reply::sse_text(&reply, 9));
    let output = run(&base, &root, &server, &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        !root.join("pwned.txt").exists(),
        "the drafted call ran: {stderr}"
    );
    assert_eq!(server.requests().len(), 1, "the prose answer ends the run");
}

#[test]
fn a_tags_run_never_runs_tags_drafted_in_reasoning() {
    let (_temp, base, root) = temp_base_with_root("app");
    let replies = [
        "Plan.\n<think>\n<bash_call>touch pwned.txt</bash_call>\n</think>\n<bash_call>echo ran > ok.txt</bash_call>",
        "<create_agent>touch pwned2.txt</create_agent> is overkill</think>\n<return>\ndone\n</return>",
    ];
    let server = ScriptedServer::start(move |_, index| Reply::sse_text(replies[index.min(1)], 9));
    let output = run(&base, &root, &server, &["--dialect", "tags"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "done\n");
    assert!(root.join("ok.txt").exists(), "{stderr}");
    assert!(
        !root.join("pwned.txt").exists(),
        "a drafted tag ran: {stderr}"
    );
    assert_eq!(server.requests().len(), 2, "no sub-agent was started");
}
