//! The harness shared by the sub-agent suites (`subagents`, `subagents_flow`,
//! `validate_subagents`): a project to run `flycode run` in against a scripted OpenAI-compatible
//! server on loopback, and a scripted model that tells a child's request from the parent's by the
//! child's system prompt, and each turn by the assistant messages already in the request.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::api_server::{RecordedRequest, Reply, ScriptedServer};

/// The heading of the sub-agent capabilities module: only a child's system prompt has it.
pub(super) const CHILD_MARK: &str = "How you work as a sub-agent";

/// The parent's answer once its task is back (`parent_with_one_task`).
pub(super) const ANSWER: &str =
    "Sessions expire after SESSION_TTL_SECS (3600 s), src/session.rs:1.";

/// What the parent of `scripted` answers once its script is played.
pub(super) const PARENT_ANSWER: &str = "Done: the sub-agent's findings are above.";

/// What a child of `scripted` completes with once its script is played.
pub(super) const CHILD_RESULT: &str = "SESSION_TTL_SECS = 3600 at src/session.rs:1";

/// A temporary folder (`base`) holding the allowed root `app/`, the state folder `state/` and
/// the run's transcripts; removed when dropped.
pub(super) struct Project {
    _temp: tempfile::TempDir,
    /// The temporary folder: `HOME`, the state folder's parent, where the transcripts go.
    pub base: PathBuf,
    /// The allowed root and working directory of the run, `base/app`.
    pub root: PathBuf,
}

impl Project {
    /// An allowed root `app/` with a source file and an `AGENTS.md`, the state folder beside it.
    pub(super) fn new() -> Project {
        let project = Project::bare();
        std::fs::write(
            project.root.join("AGENTS.md"),
            "Sessions live in src/session.rs.\n",
        )
        .unwrap();
        project
    }

    /// The same without the `AGENTS.md`, so no conversation gets a folder-notes message (for
    /// tests that count the messages of a transcript).
    pub(super) fn bare() -> Project {
        let temp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(temp.path()).unwrap();
        let root = base.join("app");
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(
            root.join("src/session.rs"),
            "pub const SESSION_TTL_SECS: u64 = 3600;\n\npub fn expire() {}\n",
        )
        .unwrap();
        Project {
            _temp: temp,
            base,
            root,
        }
    }

    /// A `new` project with this `flycode.toml` in the root.
    pub(super) fn with_config(config: &str) -> Project {
        let project = Project::new();
        project.configure(config);
        project
    }

    /// Writes `text` as the project's `flycode.toml` (read from the working directory, the root).
    pub(super) fn configure(&self, text: &str) {
        std::fs::write(self.root.join("flycode.toml"), text).unwrap();
    }

    /// The absolute path of `name` under the root, as text.
    pub(super) fn path(&self, name: &str) -> String {
        self.root.join(name).display().to_string()
    }

    /// The root, as text.
    pub(super) fn root_text(&self) -> String {
        self.root.display().to_string()
    }

    /// The parent's transcript (`--transcript`).
    pub(super) fn transcript(&self) -> PathBuf {
        self.base.join("run.jsonl")
    }

    /// The transcript of the run's sub-agent `task_id` (e.g. `task-1`), next to the parent's.
    pub(super) fn child(&self, task_id: &str) -> PathBuf {
        self.base.join(format!("run.{task_id}.jsonl"))
    }

    /// Where the state folder keeps the records of runs.
    pub(super) fn state_runs(&self) -> PathBuf {
        self.base.join("state/runs")
    }

    /// `flycode run` of the question "Where do sessions expire?" against `server` with model
    /// `main-model`, `--yes`, the root and the transcript, then `extra` arguments; no
    /// `FLYCODE_*`, `OPENAI_*` or `LIGHT_LLM_*` variables of the test's own environment, no
    /// standard input.
    pub(super) fn command(&self, server: &ScriptedServer, extra: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_flycode"));
        for (name, _) in std::env::vars() {
            if name.starts_with("FLYCODE_")
                || name.starts_with("OPENAI_")
                || name.starts_with("LIGHT_LLM_")
            {
                command.env_remove(name);
            }
        }
        command
            .current_dir(&self.root)
            .env("HOME", &self.base)
            .env("FLYCODE_STATE_DIR", self.base.join("state"))
            .env("NO_COLOR", "1")
            .args(["run", "--base-url"])
            .arg(server.base_url())
            .args(["--model", "main-model", "--yes", "--root"])
            .arg(&self.root)
            .arg("--transcript")
            .arg(self.transcript())
            .arg("Where do sessions expire?")
            .args(extra)
            .stdin(Stdio::null());
        command
    }

    /// Runs `command(server, extra)` to the end and asserts that it exited 0.
    pub(super) fn run(&self, server: &ScriptedServer, extra: &[&str]) -> Finished {
        let finished = finish(self.command(server, extra));
        assert_eq!(finished.code, 0, "{}", finished.stderr);
        finished
    }
}

/// How a run ended: its exit code (-1 if killed by a signal) and its output.
pub(super) struct Finished {
    /// The exit code, -1 without one.
    pub code: i32,
    /// Standard output, lossily decoded.
    pub stdout: String,
    /// Standard error, lossily decoded.
    pub stderr: String,
}

/// Runs `command` to the end.
pub(super) fn finish(mut command: Command) -> Finished {
    let output = command.output().unwrap();
    Finished {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Runs the project against `server` and asserts the run itself went well: exit 0 and `ANSWER`
/// on standard output.
pub(super) fn run_ok(project: &Project, server: &ScriptedServer) -> Finished {
    let finished = project.run(server, &[]);
    assert!(finished.stdout.contains(ANSWER), "{}", finished.stdout);
    finished
}

/// The messages of a request.
pub(super) fn messages(request: &RecordedRequest) -> Vec<Value> {
    request.body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The text content of a message, empty if it has none.
pub(super) fn text(message: &Value) -> &str {
    message["content"].as_str().unwrap_or_default()
}

/// Whether `request` is a child's: its system prompt has `CHILD_MARK`.
pub(super) fn is_child(request: &RecordedRequest) -> bool {
    messages(request)
        .first()
        .is_some_and(|m| text(m).contains(CHILD_MARK))
}

/// The requests of child conversations, in order.
pub(super) fn children(requests: &[RecordedRequest]) -> Vec<&RecordedRequest> {
    requests.iter().filter(|r| is_child(r)).collect()
}

/// The requests of the parent, in order.
pub(super) fn parents(requests: &[RecordedRequest]) -> Vec<&RecordedRequest> {
    requests.iter().filter(|r| !is_child(r)).collect()
}

/// How many replies of this conversation came before this request.
pub(super) fn turn(request: &RecordedRequest) -> usize {
    messages(request)
        .iter()
        .filter(|m| m["role"] == "assistant")
        .count()
}

/// The content of the tool message answering `id` in the parent's requests.
pub(super) fn tool_result(requests: &[RecordedRequest], id: &str) -> String {
    parents(requests)
        .into_iter()
        .flat_map(messages)
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
        .map(|m| text(&m).to_owned())
        .unwrap_or_else(|| panic!("no result for {id}"))
}

/// A native reply making one call.
pub(super) fn call(id: &str, tool: &str, args: &Value) -> Reply {
    let arguments = args.to_string();
    Reply::sse_tool_calls(&[(id, tool, arguments.as_str())])
}

/// One native reply calling all of `calls` `(id, tool, arguments)` at once.
pub(super) fn parallel(calls: &[(&str, &str, Value)]) -> Reply {
    let arguments: Vec<String> = calls.iter().map(|(_, _, args)| args.to_string()).collect();
    let calls: Vec<(&str, &str, &str)> = calls
        .iter()
        .zip(&arguments)
        .map(|((id, tool, _), args)| (*id, *tool, args.as_str()))
        .collect();
    Reply::sse_tool_calls(&calls)
}

/// A text-mode reply: one `flycode-call` block.
pub(super) fn block(id: &str, tool: &str, args: &Value) -> Reply {
    let call = json!({"id": id, "tool": tool, "args": args});
    Reply::sse_text(&format!("```flycode-call\n{call}\n```"), 5)
}

/// A child's `agent_complete` call, id `done`.
pub(super) fn complete(result: &str) -> Reply {
    call("done", "agent_complete", &json!({ "result": result }))
}

/// The arguments of an explore task, plus `extra` fields (e.g. `"model"`).
pub(super) fn explore_args(extra: &Value) -> Value {
    let mut args = json!({
        "description": "Find session expiry",
        "prompt": "Find where sessions expire under the root.",
        "subagentType": "explore",
    });
    if let (Some(args), Some(extra)) = (args.as_object_mut(), extra.as_object()) {
        args.extend(extra.clone());
    }
    args
}

/// A parent turn starting one explore task as call `id`.
pub(super) fn explore_task(id: &str) -> Reply {
    call(id, "agent_task", &explore_args(&json!({})))
}

/// A parent that starts one explore task (`task_1`) and then answers `ANSWER`.
pub(super) fn parent_with_one_task(request: &RecordedRequest) -> Reply {
    match turn(request) {
        0 => explore_task("task_1"),
        _ => Reply::sse_text(ANSWER, 7),
    }
}

/// A model that plays `parent` (one reply a turn) and then answers `PARENT_ANSWER`, and plays
/// `child` for every child conversation and then completes with `CHILD_RESULT`. A test may run
/// it on two servers, so a request that reaches the wrong server is answered, and the test's
/// assertions about who got what decide.
pub(super) fn scripted(
    parent: Vec<Reply>,
    child: Vec<Reply>,
) -> impl Fn(&RecordedRequest, usize) -> Reply + Send + Sync + 'static {
    move |request, _| {
        let turn = turn(request);
        if is_child(request) {
            child
                .get(turn)
                .cloned()
                .unwrap_or_else(|| complete(CHILD_RESULT))
        } else {
            parent
                .get(turn)
                .cloned()
                .unwrap_or_else(|| Reply::sse_text(PARENT_ANSWER, 7))
        }
    }
}
