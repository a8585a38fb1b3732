//! `memory.query`, hints and predefined agents (PROTOCOL.md §9 (memory.query), (hint.load),
//! (Hints and predefined agents)) end to end: real `flycode run`s against scripted models on
//! loopback leave transcripts that a later run's `memory.query` finds (condensed by the light
//! model) and `flycode exec` returns as they are; hints loaded in a run reach the next request's
//! context and their resources are confined to their folder; a predefined agent runs a task with
//! its role and tools; `flycode prompt --dialect tags` renders the seed 000 prompt.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use super::api_server::{RecordedRequest, Reply, ScriptedServer};
use super::common::Workspace;
use super::subagent_harness::{
    Finished, Project, block, call, children, finish, is_child, messages, parents, text,
    tool_result, turn,
};

/// What the first earlier run's model said.
const ZEBRA: &str = "The zebra migration runs with flyway from scripts/zebra.sh.";
/// What the second earlier run's model said.
const CACHE: &str = "The cache keeps entries for 42 seconds.";
/// What the light model answers every condensing request with.
const SUMMARY: &str = "Earlier work: zebra migration uses flyway (scripts/zebra.sh).";

/// `command` with the project's own configuration folder.
fn with_config_home(mut command: Command, project: &Project) -> Command {
    command.env("XDG_CONFIG_HOME", project.base.join("cfg"));
    command
}

fn run_to_end(project: &Project, server: &ScriptedServer, extra: &[&str]) -> Finished {
    let finished = finish(with_config_home(project.command(server, extra), project));
    assert_eq!(finished.code, 0, "{}", finished.stderr);
    finished
}

/// Two earlier runs, each answering with one sentence: their transcripts are in the state
/// folder's `runs/`.
fn two_earlier_runs(project: &Project) {
    for said in [ZEBRA, CACHE] {
        let server = ScriptedServer::start(move |_: &RecordedRequest, _| Reply::sse_text(said, 9));
        run_to_end(project, &server, &[]);
    }
    let runs = std::fs::read_dir(project.state_runs()).unwrap().count();
    assert_eq!(runs, 2, "two earlier transcripts");
}

#[test]
fn memory_query_in_run_is_condensed_by_the_light_model_from_earlier_runs() {
    let project = Project::bare();
    two_earlier_runs(&project);
    let main = ScriptedServer::start(|request: &RecordedRequest, _| match turn(request) {
        0 => call("m1", "memory_query", &json!({"query": "zebra migration"})),
        _ => Reply::sse_text("Answered from memory.", 7),
    });
    let light = ScriptedServer::start(|_: &RecordedRequest, _| Reply::completion_text(SUMMARY));
    let mut command = with_config_home(project.command(&main, &[]), &project);
    command
        .env("LIGHT_LLM_MODEL_ID", "light-model")
        .env("LIGHT_LLM_BASE_URL", light.base_url());
    let finished = finish(command);
    assert_eq!(finished.code, 0, "{}", finished.stderr);
    // The light model got one condensing request holding the zebra window, not the cache one.
    let asked = light.requests();
    assert_eq!(asked.len(), 1);
    let sent = messages(&asked[0]);
    assert!(text(&sent[0]).contains("condense"), "{sent:?}");
    assert!(text(&sent[1]).contains(ZEBRA), "{sent:?}");
    assert!(!text(&sent[1]).contains(CACHE), "{sent:?}");
    assert!(text(&sent[1]).contains("Question: zebra migration"));
    // The model got the summary, which names no session.
    let result = tool_result(&main.requests(), "m1");
    assert!(result.contains("Condensed by the light model"), "{result}");
    assert!(result.contains(SUMMARY), "{result}");
    assert!(!result.contains(".jsonl"), "{result}");
}

#[test]
fn memory_query_without_a_model_returns_the_best_windows_as_they_are() {
    let project = Project::bare();
    two_earlier_runs(&project);
    let reply = format!(
        "```flycode-call\n{}\n```\n",
        json!({"id": "q", "tool": "memory.query", "args": {"query": "how long does the cache keep entries", "limit": 1}})
    );
    let output = super::common::flycode()
        .args(["exec", "--json", "--tools", "extended", "--root"])
        .arg(&project.root)
        .env("FLYCODE_STATE_DIR", project.base.join("state"))
        .env("XDG_CONFIG_HOME", project.base.join("cfg"))
        .current_dir(&project.root)
        .write_stdin(reply)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let body = report.to_string();
    assert!(body.contains("as they are"), "{body}");
    assert!(body.contains("42 seconds"), "{body}");
    assert!(!body.contains("zebra"), "{body}");
}

/// `memory.query` through `flycode exec` in `project`'s root, with `env` set: the report.
fn exec_memory_query(project: &Project, args: &Value, env: &[(&str, &str)]) -> Value {
    let reply = format!(
        "```flycode-call\n{}\n```\n",
        json!({"id": "q", "tool": "memory.query", "args": args})
    );
    let mut command = super::common::flycode();
    command
        .args(["exec", "--json", "--tools", "extended", "--root"])
        .arg(&project.root)
        .env("FLYCODE_STATE_DIR", project.base.join("state"))
        .env("XDG_CONFIG_HOME", project.base.join("cfg"))
        .env_remove("FLYCODE_MEMORY_ALL_ROOTS")
        .current_dir(&project.root);
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.write_stdin(reply).output().unwrap();
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn memory_query_keeps_no_call_arguments_and_other_projects_only_when_the_person_opts_in() {
    let project = Project::bare();
    // An earlier text-mode run here wrote a secret with a call, then said what it did.
    let secret = "ZEBRA_TOKEN=hunter2-4f9a";
    let write = json!({"path": project.path(".env"), "mode": "overwrite", "content": secret});
    let server = ScriptedServer::start(move |request: &RecordedRequest, _| match turn(request) {
        0 => block("w1", "fs.write", &write),
        _ => Reply::sse_text("Saved the zebra credentials to .env.", 7),
    });
    run_to_end(&project, &server, &["--mode", "text"]);
    // An earlier run in another project of the same person, about zebras too.
    let other = project.base.join("other");
    std::fs::create_dir_all(&other).unwrap();
    let server = ScriptedServer::start(|_: &RecordedRequest, _| {
        Reply::sse_text("The other zebra project keeps its keys in vault-b.", 7)
    });
    let output = super::common::clean_run_command(&project.base, &other)
        .args(["run", "--yes", "--base-url"])
        .arg(server.base_url())
        .args(["--model", "main-model", "--root"])
        .arg(&other)
        .arg("Where are the zebra keys?")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    let found =
        exec_memory_query(&project, &json!({"query": "zebra credentials keys"}), &[]).to_string();
    assert!(found.contains("Saved the zebra credentials"), "{found}");
    assert!(found.contains("[call: fs.write]"), "{found}");
    assert!(
        !found.contains("hunter2"),
        "a call's argument came back: {found}"
    );
    assert!(
        !found.contains("vault-b"),
        "another project's run came back: {found}"
    );
    // The person opts in; the arguments still stay out.
    let everywhere = exec_memory_query(
        &project,
        &json!({"query": "zebra credentials keys"}),
        &[("FLYCODE_MEMORY_ALL_ROOTS", "1")],
    )
    .to_string();
    assert!(everywhere.contains("vault-b"), "{everywhere}");
    assert!(!everywhere.contains("hunter2"), "{everywhere}");
    // A model cannot opt in through the call.
    let asked = exec_memory_query(&project, &json!({"query": "zebra", "allRoots": true}), &[]);
    assert_eq!(asked["error"]["code"], "invalid_args", "{asked}");
}

/// A user hint `style` with a resource, a link out of its folder, and a file beside it.
fn style_hint(project: &Project) -> PathBuf {
    let hint = project.base.join("cfg/flycode/hints/style");
    std::fs::create_dir_all(hint.join("res")).unwrap();
    std::fs::write(
        hint.join("HINT.md"),
        "# House style\nAnswer in haiku. HINTMARK-7\n",
    )
    .unwrap();
    std::fs::write(hint.join("res/a.txt"), "resource inside").unwrap();
    std::fs::write(project.base.join("secret.txt"), "OUTSIDE-SECRET").unwrap();
    std::os::unix::fs::symlink(project.base.join("secret.txt"), hint.join("link")).unwrap();
    hint
}

#[test]
fn a_loaded_hint_joins_the_next_request_and_its_resources_stay_in_its_folder() {
    let project = Project::bare();
    style_hint(&project);
    let escapes = [
        "../../../../secret.txt",
        "link",
        "/etc/passwd",
        "res/../../../../secret.txt",
    ];
    let server = ScriptedServer::start(move |request: &RecordedRequest, _| {
        let turn = turn(request);
        match turn {
            0 => call("h0", "hint_load", &json!({"name": "style"})),
            1 => call("h1", "hint_resource", &json!({"path": "res/a.txt"})),
            2..=5 => call(
                &format!("h{turn}"),
                "hint_resource",
                &json!({"path": escapes[turn - 2]}),
            ),
            6 => call("h6", "hint_unload", &json!({})),
            _ => Reply::sse_text("Done.", 7),
        }
    });
    run_to_end(&project, &server, &[]);
    let requests = server.requests();
    let holds_hint = |request: &RecordedRequest| {
        messages(request).iter().any(|m| {
            text(m).starts_with("[flycode] Loaded hints") && text(m).contains("HINTMARK-7")
        })
    };
    assert!(!holds_hint(&requests[0]), "no hint before hint.load");
    assert!(holds_hint(&requests[1]), "the next request holds HINT.md");
    assert!(!holds_hint(&requests[7]), "gone after hint.unload");
    assert!(tool_result(&requests, "h1").contains("resource inside"));
    for id in ["h2", "h3", "h4", "h5"] {
        let result = tool_result(&requests, id);
        assert!(!result.contains("OUTSIDE-SECRET"), "{id}: {result}");
        assert!(
            result.contains("\"ok\": false") || result.contains("[ok] false"),
            "{id}: {result}"
        );
    }
}

#[test]
fn an_untrusted_projects_hint_is_refused_and_a_users_hint_loads_in_exec() {
    let w = Workspace::new();
    std::fs::write(w.root.join("flycode.toml"), "output_cap = 65536\n").unwrap();
    std::fs::create_dir_all(w.root.join(".flycode/hints/proj")).unwrap();
    std::fs::write(w.root.join(".flycode/hints/proj/HINT.md"), "PROJECT HINT").unwrap();
    let config = w.state.parent().unwrap().join("cfg");
    std::fs::create_dir_all(config.join("flycode/hints/mine")).unwrap();
    std::fs::write(config.join("flycode/hints/mine/HINT.md"), "MY HINT").unwrap();
    let exec = |name: &str| -> Value {
        let call = json!({"id": "l", "tool": "hint.load", "args": {"name": name}});
        let output = w
            .exec_command(&["--tools", "extended"])
            .env("XDG_CONFIG_HOME", &config)
            .env("HOME", w.state.parent().unwrap())
            .write_stdin(format!("```flycode-call\n{call}\n```\n"))
            .output()
            .unwrap();
        serde_json::from_slice(&output.stdout).unwrap()
    };
    let refused = exec("proj").to_string();
    assert!(
        refused.contains("denied_by_policy") && refused.contains("not trusted"),
        "{refused}"
    );
    assert!(!refused.contains("PROJECT HINT"), "{refused}");
    let loaded = exec("mine").to_string();
    assert!(loaded.contains("MY HINT"), "{loaded}");
    let unknown = exec("nope").to_string();
    assert!(
        unknown.contains("not_found") && unknown.contains("available: mine"),
        "{unknown}"
    );
}

/// A user agent `reviewer` that may only read.
fn reviewer(config: &Path) {
    std::fs::create_dir_all(config.join("flycode/agents")).unwrap();
    std::fs::write(
        config.join("flycode/agents/reviewer.md"),
        "---\ndescription: Reviews one file\ntools: fs.read\n---\nREVIEWER-ROLE: you review code.\n",
    )
    .unwrap();
}

#[test]
fn agent_task_with_a_name_runs_the_predefined_agent_with_its_role_and_tools() {
    let project = Project::bare();
    reviewer(&project.base.join("cfg"));
    let session = project.path("src/session.rs");
    let root = project.root_text();
    let server = ScriptedServer::start(move |request: &RecordedRequest, _| {
        if is_child(request) {
            return match turn(request) {
                0 => call("s", "fs_search", &json!({"path": root, "query": "x"})),
                1 => call("r", "fs_read", &json!({"path": session})),
                _ => call("done", "agent_complete", &json!({"result": "reviewed"})),
            };
        }
        let task = |name: &str| json!({"description": "Review it", "prompt": "Review src/session.rs", "name": name});
        match turn(request) {
            0 => call("t0", "agent_task", &task("nobody")),
            1 => call("t1", "agent_task", &task("reviewer")),
            _ => Reply::sse_text("Reviewed.", 7),
        }
    });
    run_to_end(&project, &server, &[]);
    let requests = server.requests();
    let unknown = tool_result(&requests, "t0");
    assert!(
        unknown.contains("no predefined agent called \\\"nobody\\\"") || unknown.contains("nobody"),
        "{unknown}"
    );
    assert!(unknown.contains("available: reviewer"), "{unknown}");
    let child = children(&requests);
    assert_eq!(child.len(), 3, "one child, three turns");
    let system = text(&messages(child[0])[0]).to_owned();
    assert!(system.contains("REVIEWER-ROLE"), "{system}");
    assert!(
        system.contains("The tools you may use: fs.read, agent.complete"),
        "{system}"
    );
    let child_results: Vec<String> = messages(child[2])
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| text(m).to_owned())
        .collect();
    assert!(
        child_results[0].contains("denied_by_policy"),
        "{child_results:?}"
    );
    assert!(
        child_results[1].contains("SESSION_TTL_SECS"),
        "{child_results:?}"
    );
    assert!(tool_result(&requests, "t1").contains("reviewed"));
    assert_eq!(parents(&requests).len(), 3);
}

#[test]
fn prompt_dialect_tags_renders_the_tree_with_git_branch_agents_and_hints() {
    let w = Workspace::new();
    std::fs::create_dir_all(w.root.join("src")).unwrap();
    std::fs::write(w.root.join("src/lib.rs"), "").unwrap();
    std::fs::write(w.root.join(".gitignore"), "build/\n").unwrap();
    std::fs::create_dir_all(w.root.join("build")).unwrap();
    std::fs::write(w.root.join("build/out.o"), "").unwrap();
    let git = |args: &[&str]| {
        let status = Command::new("git")
            .args(args)
            .current_dir(&w.root)
            .status()
            .unwrap();
        assert!(status.success());
    };
    git(&["init", "-q", "-b", "topic-branch-9"]);
    let config = w.state.parent().unwrap().join("cfg");
    reviewer(&config);
    std::fs::create_dir_all(config.join("flycode/hints/style")).unwrap();
    std::fs::write(
        config.join("flycode/hints/style/HINT.md"),
        "# Writes in house style\n",
    )
    .unwrap();
    for (lang, words) in [("zh", "工作目录"), ("en", "Working folders")] {
        let output = super::common::flycode()
            .args(["prompt", "--dialect", "tags", "--lang", lang, "--root"])
            .arg(&w.root)
            .env("XDG_CONFIG_HOME", &config)
            .env("FLYCODE_STATE_DIR", &w.state)
            .current_dir(&w.root)
            .output()
            .unwrap();
        assert!(output.status.success());
        let prompt = String::from_utf8(output.stdout).unwrap();
        assert!(prompt.contains(words), "{prompt}");
        assert!(prompt.contains("topic-branch-9"), "{prompt}");
        assert!(prompt.contains("src/\n    lib.rs"), "{prompt}");
        assert!(!prompt.contains("out.o"), "{prompt}");
        assert!(
            prompt.contains("- reviewer: Reviews one file ("),
            "{prompt}"
        );
        assert!(
            prompt.contains("- style: Writes in house style"),
            "{prompt}"
        );
        assert!(
            prompt.contains("{print $0}") && !prompt.contains("{tree_info}"),
            "{prompt}"
        );
    }
}
