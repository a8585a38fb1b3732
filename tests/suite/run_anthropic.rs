//! `flycode run` against a scripted Anthropic Messages server on loopback: streamed tool use with
//! two parallel calls, the headers and prompt-caching marks of every request, an overloaded 529
//! retried after its `retry-after`, busy `error` events in a stream (retried before any content,
//! ending a resumable run after it), text mode, and sub-agents on an Anthropic light model.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::api_server::{RecordedRequest, Reply, ScriptedServer};
use super::common::assert_validates;

const KEY: &str = "sk-ant-test-0123456789";

/// A root with two files, the state folder and the transcript beside it.
pub(super) struct Workspace {
    _temp: tempfile::TempDir,
    pub base: PathBuf,
    pub root: PathBuf,
}

impl Workspace {
    pub(super) fn new() -> Workspace {
        let temp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(temp.path()).unwrap();
        let root = base.join("app");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("a.txt"), "alpha\n").unwrap();
        std::fs::write(root.join("b.txt"), "beta\n").unwrap();
        Workspace {
            _temp: temp,
            base,
            root,
        }
    }

    pub(super) fn path(&self, name: &str) -> String {
        self.root.join(name).display().to_string()
    }

    pub(super) fn transcript(&self) -> PathBuf {
        self.base.join("run.jsonl")
    }

    /// `flycode run` with a clean environment (no API variables of the test's own), `--yes`,
    /// the root and the transcript; the caller adds the endpoint, the task and the rest.
    pub(super) fn command(&self, args: &[&str]) -> Command {
        self.command_to(&self.transcript(), args)
    }

    /// [`Workspace::command`] recording the run (also) in `transcript`.
    pub(super) fn command_to(&self, transcript: &Path, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_flycode"));
        for (name, _) in std::env::vars() {
            if ["FLYCODE_", "OPENAI_", "ANTHROPIC_", "LIGHT_LLM_", "LLM_"]
                .iter()
                .any(|prefix| name.starts_with(prefix))
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
            .args(["run", "--yes", "--root"])
            .arg(&self.root)
            .arg("--transcript")
            .arg(transcript)
            .args(args)
            .stdin(Stdio::null());
        command
    }
}

/// How a run ended.
pub(super) struct Finished {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

pub(super) fn finish(mut command: Command) -> Finished {
    let output = command.output().unwrap();
    Finished {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// A Messages API event stream (`event:` and `data:` lines), cut into 9-byte chunks.
fn anthropic_stream(events: &[Value]) -> Reply {
    let mut body = String::new();
    for event in events {
        body.push_str(&format!(
            "event: {}\ndata: {event}\n\n",
            event["type"].as_str().unwrap()
        ));
    }
    Reply::sse_bytes(body.as_bytes(), 9)
}

fn message_start() -> Value {
    json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
        "role": "assistant", "content": [], "model": "claude-test", "stop_reason": null,
        "usage": {"input_tokens": 40, "cache_read_input_tokens": 300,
            "cache_creation_input_tokens": 0, "output_tokens": 1}}})
}

fn message_end(stop_reason: &str) -> [Value; 2] {
    [
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason,
            "stop_sequence": null}, "usage": {"output_tokens": 12}}),
        json!({"type": "message_stop"}),
    ]
}

/// A streamed reply of text, in pieces of 4 characters.
pub(super) fn anthropic_text(text: &str) -> Reply {
    let mut events = vec![
        message_start(),
        json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}}),
        json!({"type": "ping"}),
    ];
    let chars: Vec<char> = text.chars().collect();
    for piece in chars.chunks(4) {
        let piece: String = piece.iter().collect();
        events.push(json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": piece}}));
    }
    events.push(json!({"type": "content_block_stop", "index": 0}));
    events.extend(message_end("end_turn"));
    anthropic_stream(&events)
}

/// A streamed reply with a line of text, then `tool_use` blocks `(id, name, input)` whose input
/// arrives as `input_json_delta` pieces of 5 bytes.
pub(super) fn anthropic_tool_uses(calls: &[(&str, &str, Value)]) -> Reply {
    let mut events = vec![
        message_start(),
        json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": "Reading both."}}),
        json!({"type": "content_block_stop", "index": 0}),
    ];
    for (n, (id, name, input)) in calls.iter().enumerate() {
        let index = n + 1;
        events.push(json!({"type": "content_block_start", "index": index,
            "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}));
        for piece in input.to_string().as_bytes().chunks(5) {
            events.push(json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "input_json_delta",
                    "partial_json": String::from_utf8_lossy(piece)}}));
        }
        events.push(json!({"type": "content_block_stop", "index": index}));
    }
    events.extend(message_end("tool_use"));
    anthropic_stream(&events)
}

/// Anthropic's overloaded answer: 529 with an `overloaded_error` body.
pub(super) fn overloaded() -> Reply {
    Reply::json(
        529,
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    )
    .with_header("retry-after", "0")
}

/// The text of every block of a Messages API message.
pub(super) fn block_texts(message: &Value) -> Vec<String> {
    message["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .map(|b| {
                    b["text"]
                        .as_str()
                        .or_else(|| b["content"].as_str())
                        .unwrap_or_default()
                        .to_owned()
                })
                .collect()
        })
        .unwrap_or_default()
}

fn check_anthropic_request(request: &RecordedRequest) {
    assert_eq!(request.path, "/v1/messages");
    assert_eq!(request.header("x-api-key"), Some(KEY));
    assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
    assert!(request.header("authorization").is_none());
    assert_eq!(request.body["max_tokens"], 8192);
    let system = request.body["system"].as_array().unwrap();
    assert_eq!(
        system.last().unwrap()["cache_control"],
        json!({"type": "ephemeral"})
    );
    let messages = request.body["messages"].as_array().unwrap();
    let last = messages.last().unwrap()["content"].as_array().unwrap();
    assert_eq!(
        last.last().unwrap()["cache_control"],
        json!({"type": "ephemeral"}),
        "the last message is marked for caching"
    );
    for pair in messages.windows(2) {
        assert_ne!(pair[0]["role"], pair[1]["role"], "roles alternate");
    }
}

#[test]
fn anthropic_streamed_parallel_tool_use_with_caching_and_a_retried_529() {
    let workspace = Workspace::new();
    let (a, b) = (workspace.path("a.txt"), workspace.path("b.txt"));
    let server = ScriptedServer::sequence(vec![
        overloaded(),
        anthropic_tool_uses(&[
            ("toolu_a", "fs_read", json!({"path": a})),
            ("toolu_b", "fs_read", json!({"path": b})),
        ]),
        anthropic_text("a.txt says alpha and b.txt says beta."),
    ]);
    let mut command = workspace.command(&[
        "--provider",
        "anthropic",
        "--model",
        "claude-test",
        "--json",
        "Read a.txt and b.txt.",
    ]);
    command.env("ANTHROPIC_API_KEY", KEY).env(
        "ANTHROPIC_BASE_URL",
        server.base_url().trim_end_matches("/v1"),
    );
    let finished = finish(command);
    assert_eq!(finished.code, 0, "{}{}", finished.stdout, finished.stderr);
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "the 529 was retried once");
    assert_eq!(
        requests[0].body, requests[1].body,
        "the retry is the same request"
    );
    for request in &requests {
        check_anthropic_request(request);
    }
    // Both results answer their tool_use in one user message, results first.
    let messages = requests[2].body["messages"].as_array().unwrap();
    let assistant = &messages[messages.len() - 2];
    let uses: Vec<&str> = assistant["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "tool_use")
        .map(|b| b["id"].as_str().unwrap())
        .collect();
    assert_eq!(uses, ["toolu_a", "toolu_b"]);
    let results = messages.last().unwrap()["content"].as_array().unwrap();
    assert_eq!(results[0]["tool_use_id"], "toolu_a");
    assert_eq!(results[1]["tool_use_id"], "toolu_b");
    let texts = block_texts(messages.last().unwrap());
    assert!(
        texts[0].contains("alpha") && texts[1].contains("beta"),
        "{texts:?}"
    );
    // The stats count the cache reads.
    let last_line = finished.stdout.lines().last().unwrap();
    let end: Value = serde_json::from_str(last_line).unwrap();
    assert_eq!(end["usage"]["cache_read_tokens"], 600, "{last_line}");
    assert_eq!(end["usage"]["prompt_tokens"], 680, "{last_line}");
    assert!(!finished.stdout.contains(KEY) && !finished.stderr.contains(KEY));
    assert_validates(&workspace.transcript());
}

#[test]
fn anthropic_text_mode_runs_a_call_block_and_answers() {
    let workspace = Workspace::new();
    let call =
        json!({"id": "call-1", "tool": "fs.read", "args": {"path": workspace.path("a.txt")}});
    let server = ScriptedServer::sequence(vec![
        anthropic_text(&format!("```flycode-call\n{call}\n```")),
        anthropic_text("a.txt says alpha."),
    ]);
    let mut command =
        workspace.command(&["--mode", "text", "--model", "claude-test", "Read a.txt."]);
    // Found from the Anthropic variables alone.
    command
        .env("ANTHROPIC_API_KEY", KEY)
        .env("ANTHROPIC_BASE_URL", server.base_url());
    let finished = finish(command);
    assert_eq!(finished.code, 0, "{}", finished.stderr);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        check_anthropic_request(request);
        assert!(
            request.body.get("tools").is_none(),
            "text mode offers no tools"
        );
    }
    let messages = requests[1].body["messages"].as_array().unwrap();
    let last = block_texts(messages.last().unwrap()).join("\n");
    assert!(
        last.contains("flycode-result") && last.contains("alpha"),
        "{last}"
    );
    assert!(
        finished.stdout.contains("a.txt says alpha."),
        "{}",
        finished.stdout
    );
    assert_validates(&workspace.transcript());
}

#[test]
fn sub_agents_run_on_an_anthropic_light_model() {
    let workspace = Workspace::new();
    let a = workspace.path("a.txt");
    let light = ScriptedServer::sequence(vec![
        anthropic_tool_uses(&[("toolu_r", "fs_read", json!({"path": a}))]),
        anthropic_tool_uses(&[(
            "toolu_done",
            "agent_complete",
            json!({"result": "a.txt holds alpha"}),
        )]),
    ]);
    let task = json!({"description": "Read a", "prompt": "Read a.txt and report.",
        "subagentType": "explore", "model": "light"})
    .to_string();
    let main = ScriptedServer::sequence(vec![
        Reply::sse_tool_calls(&[("t1", "agent_task", task.as_str())]),
        Reply::sse_text("The sub-agent says a.txt holds alpha.", 7),
    ]);
    // The user's own file: a project file would need `flycode trust` to choose an endpoint.
    let config_dir = workspace.base.join(".config/flycode");
    std::fs::create_dir_all(&config_dir).unwrap();
    std::fs::write(
        config_dir.join("flycode.toml"),
        format!(
            "[agent.light]\nprovider = \"anthropic\"\nmodel = \"claude-light\"\nbase_url = \"{}\"\napi_key_env = \"MY_ANTHROPIC_KEY\"\n",
            light.base_url()
        ),
    )
    .unwrap();
    let mut command = workspace.command(&[
        "--base-url",
        &main.base_url(),
        "--model",
        "main-model",
        "Ask a sub-agent about a.txt.",
    ]);
    command.env("MY_ANTHROPIC_KEY", KEY);
    let finished = finish(command);
    assert_eq!(finished.code, 0, "{}", finished.stderr);
    let light_requests = light.requests();
    assert_eq!(light_requests.len(), 2, "the child ran on the light model");
    for request in &light_requests {
        check_anthropic_request(request);
        assert_eq!(request.body["model"], "claude-light");
    }
    let main_requests = main.requests();
    assert_eq!(main_requests[0].path, "/v1/chat/completions");
    assert!(main_requests[0].header("x-api-key").is_none());
    let envelope = main_requests[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(envelope.contains("a.txt holds alpha"), "{envelope}");
    assert_validates(&workspace.transcript());
}

/// An `error` event of `kind` inside a stream, after `before`.
fn stream_error_after(before: &[Value], kind: &str) -> Reply {
    let mut events = vec![message_start()];
    events.extend_from_slice(before);
    events.push(json!({"type": "error", "error": {"type": kind, "message": "Overloaded now"}}));
    anthropic_stream(&events)
}

fn anthropic_command(workspace: &Workspace, server: &ScriptedServer, extra: &[&str]) -> Command {
    let mut args = vec![
        "--provider",
        "anthropic",
        "--model",
        "claude-test",
        "--retry-base-ms",
        "1",
    ];
    args.extend_from_slice(extra);
    let mut command = workspace.command(&args);
    command
        .env("ANTHROPIC_API_KEY", KEY)
        .env("ANTHROPIC_BASE_URL", server.base_url());
    command
}

#[test]
fn a_busy_error_event_before_any_content_is_retried_like_a_529() {
    let workspace = Workspace::new();
    let server = ScriptedServer::sequence(vec![
        stream_error_after(&[json!({"type": "ping"})], "overloaded_error"),
        stream_error_after(&[], "rate_limit_error"),
        anthropic_text("Nothing to do."),
    ]);
    let finished = finish(anthropic_command(&workspace, &server, &["Say hi."]));
    assert_eq!(finished.code, 0, "{}{}", finished.stdout, finished.stderr);
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "both error events were retried");
    assert_eq!(requests[0].body, requests[2].body, "the same request again");
    assert!(
        finished.stdout.contains("Nothing to do."),
        "{}",
        finished.stdout
    );
    assert_validates(&workspace.transcript());
}

#[test]
fn a_busy_error_event_after_text_ends_the_run_and_it_can_be_resumed() {
    let workspace = Workspace::new();
    let partial = [
        json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": "Let me th"}}),
    ];
    let server = ScriptedServer::sequence(vec![
        stream_error_after(&partial, "overloaded_error"),
        anthropic_text("never asked for"),
    ]);
    let finished = finish(anthropic_command(&workspace, &server, &["Say hi."]));
    assert_ne!(finished.code, 0, "{}", finished.stdout);
    assert_eq!(
        server.requests().len(),
        1,
        "not retried once text had arrived"
    );
    assert!(
        finished.stderr.contains("Overloaded now")
            && finished.stderr.contains("broke off")
            && finished.stderr.contains("flycode run --resume"),
        "{}",
        finished.stderr
    );
    // What streamed before the break is shown on standard error; standard output (a pipe)
    // gets an answer only.
    assert!(finished.stderr.contains("Let me th"), "{}", finished.stderr);
    assert!(
        !finished.stdout.contains("Let me th"),
        "{}",
        finished.stdout
    );

    let second = ScriptedServer::sequence(vec![anthropic_text("Hi.")]);
    let record = workspace.base.join("resumed.jsonl");
    let mut command = workspace.command_to(
        &record,
        &[
            "--provider",
            "anthropic",
            "--model",
            "claude-test",
            "--resume",
        ],
    );
    command
        .arg(workspace.transcript())
        .env("ANTHROPIC_API_KEY", KEY)
        .env("ANTHROPIC_BASE_URL", second.base_url());
    let resumed = finish(command);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert!(resumed.stdout.contains("Hi."), "{}", resumed.stdout);
    let sent = second.requests()[0].body["messages"].to_string();
    assert!(sent.contains("Say hi."), "the history goes on: {sent}");
    assert_validates(&record);
}
