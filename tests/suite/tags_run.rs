//! `flycode run --dialect tags` end to end (PROTOCOL.md §15 (The tag dialect: run)): the real
//! binary against a scripted model on loopback that speaks seed 000's tags: bash_call,
//! read_file paging, smart_edit in all four modes on BOM/CRLF files, a create_agent whose child
//! returns, and a `<return>` that ends the run. Every request is checked for what it carries.

use serde_json::Value;

use super::api_server::{Reply, ScriptedServer};
use super::common::flycode;

const BOM_CRLF: &str = "\u{feff}[server]\r\nhost = localhost\r\nport = 8080\r\n";

/// The replies, in the order the agents ask (the child's two in the middle).
fn script() -> Vec<String> {
    let edit = |mode: &str, path: &str, new: &str| {
        format!(
            "<builtin>\nsmart_edit\npath: {path}\nmode: {mode}\nnew_text:\n<<<\n{new}\n>>>\n</builtin>\n"
        )
    };
    vec![
        "I'll look around.\n<bash_call> printf 'made\\n' > made.txt; cat made.txt </bash_call>\n<builtin>\nread_file\npath: notes.txt\nmax_lines: 2\n</builtin>\n".to_owned(),
        format!(
            "<builtin>\nsmart_edit\npath: a.ini\nold_text:\n<<<\nhost = localhost\n>>>\nnew_text:\n<<<\nhost = 0.0.0.0\n>>>\n</builtin>\n{}{}{}",
            edit("Prepend", "a.ini", "; top"),
            edit("Append", "a.ini", "debug = true"),
            edit("Create", "b.ini", "[client]\nretries = 3"),
        ),
        "<builtin>\nread_file\npath: notes.txt\nstart_line: 3\nmax_lines: 2\n</builtin>".to_owned(),
        "<create_agent> Count the .ini files in the root. </create_agent>".to_owned(),
        "<bash_call> ls *.ini | wc -l </bash_call>".to_owned(),
        "<return>\nchild: 2 ini files\n</return>".to_owned(),
        "<return>\nAll done: edited a.ini, created b.ini.\n</return>".to_owned(),
    ]
}

#[test]
fn a_tags_run_works_through_tools_and_a_child_and_ends_at_return() {
    let temp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(temp.path()).unwrap();
    let root = base.join("app");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("notes.txt"), "one\ntwo\nthree\nfour\nfive\n").unwrap();
    std::fs::write(root.join("a.ini"), BOM_CRLF).unwrap();
    std::fs::write(root.join("b.ini"), BOM_CRLF).unwrap();
    let replies = script();
    let server = ScriptedServer::start(move |_, index| {
        Reply::sse_text(&replies[index.min(replies.len() - 1)], 7)
    });
    let transcript = base.join("run.jsonl");
    let output = flycode()
        .current_dir(&root)
        .env("HOME", &base)
        .env_remove("XDG_CONFIG_HOME")
        .env("FLYCODE_STATE_DIR", base.join("state"))
        .env("NO_COLOR", "1")
        .args(["run", "--dialect", "tags", "--base-url"])
        .arg(server.base_url())
        .args(["--model", "scripted-model", "--yes", "--root"])
        .arg(&root)
        .arg("--transcript")
        .arg(&transcript)
        .arg("Tidy the configuration.")
        .write_stdin("")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "All done: edited a.ini, created b.ini.\n"
    );

    // The files: every mode kept the BOM and the CRLF line ends.
    assert_eq!(
        std::fs::read_to_string(root.join("made.txt")).unwrap(),
        "made\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("a.ini")).unwrap(),
        "\u{feff}; top\r\n[server]\r\nhost = 0.0.0.0\r\nport = 8080\r\ndebug = true\r\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("b.ini")).unwrap(),
        "\u{feff}[client]\r\nretries = 3\r\n"
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 7, "{stderr}");
    let first_results = requests[1].last_text();
    assert!(
        first_results.starts_with("<bash_call_result exit_code=0 duration_ms="),
        "{first_results}"
    );
    assert!(first_results.contains("made\n"), "{first_results}");
    assert!(
        first_results
            .contains("[lines] 1-2 of 5\n[more] true\n[next_start_line] 3\n[data]\none\ntwo\n"),
        "{first_results}"
    );
    let edits = requests[2].last_text();
    assert_eq!(
        edits
            .matches("<builtin_result name=smart_edit ok=true>")
            .count(),
        4,
        "{edits}"
    );
    let page = requests[3].last_text();
    assert!(
        page.contains("[lines] 3-4 of 5\n[more] true\n[next_start_line] 5\n"),
        "{page}"
    );
    // The child starts fresh: its prompt and its task only.
    let child: &Vec<Value> = requests[4].body["messages"].as_array().unwrap();
    assert_eq!(child.len(), 2);
    assert_eq!(child[1]["content"], "Count the .ini files in the root.");
    assert!(requests[5].last_text().contains("2\n"));
    let summary = requests[6].last_text();
    assert!(
        summary.starts_with("<child_summary ok=true>\n[note] "),
        "{summary}"
    );
    assert!(summary.contains("child: 2 ini files"), "{summary}");

    // The run's record (and its child's) passes validate.
    let validated = flycode()
        .args(["validate", "--dialect", "tags"])
        .arg(&transcript)
        .arg(base.join("run.task-1.jsonl"))
        .env("FLYCODE_STATE_DIR", base.join("state"))
        .output()
        .unwrap();
    assert_eq!(
        validated.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&validated.stdout)
    );
}

#[test]
fn a_predefined_agent_never_gets_a_tool_its_parent_may_not_use() {
    let temp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(temp.path()).unwrap();
    let root = base.join("app");
    std::fs::create_dir_all(&root).unwrap();
    // A repository's agent files: `lead` may only read and delegate; `shell` names shell.exec.
    let agents = base.join("cfg/flycode/agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(
        agents.join("lead.md"),
        "---\ntools: fs.read, agent.task\n---\nYou lead; delegate the work.\n",
    )
    .unwrap();
    std::fs::write(
        agents.join("shell.md"),
        "---\ntools: shell.exec, agent.task\n---\nYou run commands.\n",
    )
    .unwrap();
    // Depth first: the top agent, `lead`, `shell` (twice), `lead`, the top agent.
    let replies = [
        "<create_agent name=lead> Look around. </create_agent>",
        "<create_agent name=shell> Make a marker file. </create_agent>",
        "<bash_call> touch pwned.txt </bash_call>",
        "<return>\ntried\n</return>",
        "<return>\nlead done\n</return>",
        "<return>\nAll done.\n</return>",
    ];
    let server = ScriptedServer::start(move |_, index| {
        Reply::sse_text(replies[index.min(replies.len() - 1)], 7)
    });
    let output = super::common::clean_run_command(&base, &root)
        .env("XDG_CONFIG_HOME", base.join("cfg"))
        .args(["run", "--dialect", "tags", "--yes", "--base-url"])
        .arg(server.base_url())
        .args(["--model", "scripted-model", "--root"])
        .arg(&root)
        .arg("Tidy up.")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(!root.join("pwned.txt").exists(), "shell.exec ran: {stderr}");
    let requests = server.requests();
    assert_eq!(requests.len(), 6, "{stderr}");
    let refused = requests[3].last_text();
    assert!(
        refused.contains("denied_by_policy") && refused.contains("shell.exec was not run"),
        "{refused}"
    );
    // `shell` is told the tools it really has: those `lead` has too.
    let system = requests[2].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        system.contains("The tools you may use: agent.task. Other calls are refused."),
        "{system}"
    );
}
