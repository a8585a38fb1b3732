//! `flycode run` against scripted servers that behave like small models on local servers
//! (llama.cpp's `llama-server`, Ollama): calls written as text in native mode, a reply that
//! repeats itself forever, a first byte that takes longer than the idle timeout, the token limit
//! in every request, and the `LLM_*` variables (PROTOCOL.md §13).

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use super::api_server::{RecordedRequest, Reply, ScriptedServer};
use super::common::{clean_run_command, temp_base_with_root};

/// A project with one file to read.
struct Place {
    _temp: tempfile::TempDir,
    base: PathBuf,
    root: PathBuf,
}

impl Place {
    fn new() -> Place {
        let (temp, base, root) = temp_base_with_root("app");
        std::fs::write(root.join("lib.sh"), "add() { echo $(( $1 + $2 )); }\n").unwrap();
        Place {
            _temp: temp,
            base,
            root,
        }
    }

    fn path(&self, name: &str) -> String {
        self.root.join(name).display().to_string()
    }

    fn transcript(&self) -> PathBuf {
        self.base.join("run.jsonl")
    }

    /// `flycode run` in a clean environment, without endpoint or model: `extra` gives them.
    fn bare_command(&self, extra: &[&str]) -> Command {
        let mut command = clean_run_command(&self.base, &self.root);
        command
            .args(["run", "--yes", "--root"])
            .arg(&self.root)
            .arg("--transcript")
            .arg(self.transcript())
            .args(extra)
            .arg("Read lib.sh and say what it does.")
            .stdin(Stdio::null());
        command
    }

    fn run(&self, server: &Server, extra: &[&str]) -> Output {
        let mut args = vec!["--base-url", &server.base_url_owned, "--model", "qwen-test"];
        args.extend_from_slice(extra);
        self.bare_command(&args).output().unwrap()
    }

    /// The transcript's messages.
    fn transcript_messages(&self) -> Vec<Value> {
        std::fs::read_to_string(self.transcript())
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    /// `flycode validate --format json` of the transcript (`strict` adds `--strict`): its exit
    /// code and finding codes.
    fn validate(&self, strict: bool) -> (Option<i32>, Vec<String>) {
        let mut command = Command::new(env!("CARGO_BIN_EXE_flycode"));
        command.args(["validate", "--format", "json"]);
        if strict {
            command.arg("--strict");
        }
        let output = command.arg(self.transcript()).output().unwrap();
        let report: Value = serde_json::from_slice(&output.stdout).unwrap();
        let codes = report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["code"].as_str().unwrap_or_default().to_owned())
            .collect();
        (output.status.code(), codes)
    }
}

/// A server and its base URL as a `String` (for argument lists).
struct Server {
    inner: ScriptedServer,
    base_url_owned: String,
}

impl std::ops::Deref for Server {
    type Target = ScriptedServer;
    fn deref(&self) -> &ScriptedServer {
        &self.inner
    }
}

fn server(inner: ScriptedServer) -> Server {
    let base_url_owned = inner.base_url();
    Server {
        inner,
        base_url_owned,
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The messages of a request.
fn messages(request: &RecordedRequest) -> &Vec<Value> {
    request.body["messages"].as_array().unwrap()
}

/// Every request carries the token limit.
fn assert_token_limit(requests: &[RecordedRequest], limit: u64) {
    assert!(!requests.is_empty());
    for request in requests {
        assert_eq!(request.body["max_tokens"], limit, "{}", request.body);
        // flycode's own notes never go to the server.
        for message in messages(request) {
            assert!(message.get("flycode").is_none(), "{message}");
        }
    }
}

/// The `tool` messages of a request.
fn tool_results(request: &RecordedRequest) -> Vec<String> {
    messages(request)
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn a_json_block_call_in_native_text_runs_and_validate_warns() {
    let place = Place::new();
    let call = json!({"name": "fs_read", "arguments": {"path": place.path("lib.sh")}});
    let server = server(ScriptedServer::sequence(vec![
        Reply::sse_text(&format!("I will read the file.\n```json\n{call}\n```"), 9),
        Reply::sse_text("It adds two numbers.", 9),
    ]));
    let output = place.run(&server, &[]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("fs.read call as text"), "{stderr}");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_token_limit(&requests, 8192);
    let results = tool_results(&requests[1]);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(results[0].contains("echo $(( $1 + $2 ))"), "{}", results[0]);
    let reply = messages(&requests[1])
        .iter()
        .find(|m| m["role"] == "assistant")
        .unwrap();
    assert_eq!(reply["tool_calls"][0]["function"]["name"], "fs_read");
    let recorded = place.transcript_messages();
    assert!(
        recorded
            .iter()
            .any(|m| m["flycode"]["recovered_from_text"] == true),
        "{recorded:?}"
    );
    let (code, codes) = place.validate(false);
    assert_eq!(code, Some(0), "{codes:?}");
    assert!(
        codes.iter().any(|c| c == "call_block_in_native_reply"),
        "{codes:?}"
    );
    let (code, _) = place.validate(true);
    assert_ne!(code, Some(0), "--strict makes the warning an error");
}

#[test]
fn a_tool_call_element_in_the_content_runs() {
    let place = Place::new();
    let call = json!({"name": "fs_ls", "arguments": {"path": place.root.display().to_string()}});
    let server = server(ScriptedServer::sequence(vec![
        Reply::sse_text(&format!("<tool_call>\n{call}\n</tool_call>"), 5),
        Reply::sse_text("There is one file.", 9),
    ]));
    let output = place.run(&server, &["--max-reply-tokens", "512"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let requests = server.requests();
    assert_token_limit(&requests, 512);
    let results = tool_results(&requests[1]);
    assert_eq!(results.len(), 1);
    assert!(results[0].contains("lib.sh"), "{}", results[0]);
}

#[test]
fn two_calls_in_the_text_are_corrected_not_guessed() {
    let place = Place::new();
    let first = json!({"name": "fs_read", "arguments": {"path": place.path("lib.sh")}});
    let second = json!({"name": "fs_rm", "arguments": {"path": place.path("lib.sh")}});
    let server = server(ScriptedServer::sequence(vec![
        Reply::sse_text(
            &format!("```json\n{first}\n```\nthen\n```json\n{second}\n```"),
            9,
        ),
        Reply::sse_text("Sorry; it adds two numbers.", 9),
    ]));
    let output = place.run(&server, &[]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("2 calls as text"), "{stderr}");
    assert!(
        std::path::Path::new(&place.path("lib.sh")).exists(),
        "nothing ran"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert!(tool_results(&requests[1]).is_empty());
    let last = messages(&requests[1]).last().unwrap().clone();
    assert_eq!(last["role"], "user");
    assert!(
        last["content"]
            .as_str()
            .unwrap()
            .contains("through the tools API"),
        "{last}"
    );
    let (code, codes) = place.validate(false);
    assert_eq!(code, Some(0), "{codes:?}");
}

/// A stream that says `line` forever (as far as any client will read), with no end.
fn endless(line: &str) -> Reply {
    let mut events =
        vec![json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})];
    for _ in 0..20_000 {
        events.push(
            json!({"choices": [{"index": 0, "delta": {"content": line}, "finish_reason": null}]}),
        );
    }
    Reply::sse_events(&events, false, 4096)
}

#[test]
fn a_reply_repeating_a_line_forever_is_cut_corrected_and_the_run_goes_on() {
    let place = Place::new();
    let server = server(ScriptedServer::sequence(vec![
        endless("You are flycode's agent, a careful software engineer.\n"),
        Reply::sse_text("It adds two numbers.", 9),
    ]));
    let output = place.run(&server, &[]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("repeated the same text"), "{stderr}");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_token_limit(&requests, 8192);
    let sent = messages(&requests[1]);
    let cut = sent
        .iter()
        .rev()
        .find(|m| m["role"] == "assistant")
        .unwrap();
    assert_eq!(
        cut["content"]
            .as_str()
            .unwrap()
            .matches("careful software engineer")
            .count(),
        1,
        "the reply is kept up to its first repetition"
    );
    let correction = sent.last().unwrap();
    assert!(
        correction["content"]
            .as_str()
            .unwrap()
            .contains("repeated the same text"),
        "{correction}"
    );
    let recorded = place.transcript_messages();
    assert!(
        recorded
            .iter()
            .any(|m| m["flycode"]["partial"] == "repetition"),
        "{recorded:?}"
    );
    assert_eq!(place.validate(false).0, Some(0));
}

#[test]
fn a_first_byte_later_than_the_idle_timeout_but_within_the_first_byte_timeout_succeeds() {
    let place = Place::new();
    // Headers and a keep-alive comment at once, then silence longer than the idle timeout
    // before the first event: a model reading its prompt.
    let answer = Reply::sse_text("It adds two numbers.", 4096);
    let Reply::Sse { chunks, .. } = answer else {
        unreachable!()
    };
    let body: Vec<u8> = chunks.concat();
    let server = server(ScriptedServer::always(Reply::Sse {
        chunks: vec![b": ping\n\n".to_vec(), body],
        delay_between: Duration::from_millis(1500),
    }));
    let output = place.run(
        &server,
        &[
            "--read-timeout-ms",
            "300",
            "--first-byte-timeout-ms",
            "60000",
            "--max-retries",
            "0",
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn the_response_head_may_come_late_too() {
    let place = Place::new();
    let server = server(ScriptedServer::start(|_, _| {
        std::thread::sleep(Duration::from_millis(1500));
        Reply::sse_text("It adds two numbers.", 9)
    }));
    let output = place.run(&server, &["--read-timeout-ms", "300", "--max-retries", "0"]);
    // Loopback: the first-byte timeout defaults to ten minutes.
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn llm_variables_configure_the_main_model() {
    let place = Place::new();
    let server = server(ScriptedServer::always(Reply::sse_text("Done.", 9)));
    let output = place
        .bare_command(&[])
        .env("LLM_BASE_URL", server.base_url())
        .env("LLM_MODEL_ID", "qwen2.5-coder-1.5b")
        .env("LLM_API_KEY", "sk-local-test")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let request = &server.requests()[0];
    assert_eq!(request.body["model"], "qwen2.5-coder-1.5b");
    assert_eq!(
        request.header("authorization"),
        Some("Bearer sk-local-test")
    );
    // FLYCODE_* wins over LLM_*.
    let output = place
        .bare_command(&[])
        .env("LLM_BASE_URL", server.base_url())
        .env("LLM_MODEL_ID", "qwen2.5-coder-1.5b")
        .env("FLYCODE_MODEL", "flycode-model")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(server.requests()[1].body["model"], "flycode-model");
}

#[test]
fn the_parallel_batch_is_an_event_and_a_line() {
    let place = Place::new();
    let path = place.path("lib.sh");
    let args = json!({"path": path}).to_string();
    let model = || {
        server(ScriptedServer::sequence(vec![
            Reply::sse_tool_calls(&[("c1", "fs_read", &args), ("c2", "fs_read", &args)]),
            Reply::sse_text("Done.", 9),
        ]))
    };
    let output = place.run(&model(), &["--json"]);
    let stdout = text(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}{}",
        text(&output.stderr)
    );
    assert!(
        stdout.contains(r#""event":"parallel_calls","count":2"#),
        "{stdout}"
    );
    let output = place.run(&model(), &[]);
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("Executing tools in parallel (2)"),
        "{stderr}"
    );
}

/// A short line repeated 80 times (3.2 KB, under the 4 KiB the byte rule needs) is a loop too:
/// the line rule cuts it, the model is told, and the run goes on (a small model on a CPU repeated
/// such a line for minutes without being cut).
#[test]
fn a_short_line_repeated_under_four_kibibytes_is_cut_by_lines() {
    let place = Place::new();
    let mut events =
        vec![json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})];
    for _ in 0..80 {
        events.push(json!({"choices": [{"index": 0, "delta": {"content": "I will check the lib.sh file now.\n"}, "finish_reason": null}]}));
    }
    events.push(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}));
    let server = server(ScriptedServer::sequence(vec![
        Reply::sse_events(&events, true, 4096),
        Reply::sse_text("It adds two numbers.", 9),
    ]));
    let output = place.run(&server, &[]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("repeated the same text"), "{stderr}");
    assert_eq!(server.requests().len(), 2, "{stderr}");
    assert!(text(&output.stdout).contains("It adds two numbers."));
}

/// A server that gives one id to every call of a reply and reuses it in the next (Xinference
/// does): the calls run, are answered under ids of their own that pair their results, and no
/// repeat counts against the model (the ids are the server's).
#[test]
fn ids_a_server_repeats_are_not_the_models_violation() {
    let place = Place::new();
    let read = json!({"path": place.path("lib.sh")}).to_string();
    let list = json!({"path": place.root.display().to_string()}).to_string();
    let server = server(ScriptedServer::sequence(vec![
        Reply::sse_tool_calls(&[("call_0", "fs_read", &read), ("call_0", "fs_ls", &list)]),
        Reply::sse_tool_calls(&[("call_0", "fs_read", &read)]),
        Reply::sse_text("It adds two numbers.", 9),
    ]));
    let output = place.run(&server, &[]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("new id"), "{stderr}");
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "{stderr}");
    let sent = messages(&requests[2]);
    let results: Vec<String> = sent
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(results, ["call_0", "call_0_2", "call_0_3"], "{sent:?}");
    for message in sent.iter().filter(|m| m["role"] == "tool") {
        assert!(
            message["content"].as_str().unwrap().contains("[ok] true"),
            "{message}"
        );
    }
    assert_eq!(place.validate(false).0, Some(0));
}

/// A small model that invents a tool name in a ```json block (`list_files`) has made an
/// attempted call, not its answer: nothing runs, it is told that no such tool exists and which
/// one is closest, and the run goes on.
#[test]
fn unset_optional_arguments_run_without_and_are_warned_of_in_the_result_and_in_validate() {
    let place = Place::new();
    let call = format!(
        "```flycode-call\n{}\n```",
        json!({"id": "call-001", "tool": "fs.search", "args": {"path": place.root.display().to_string(), "query": "add", "glob": "", "limit": null}})
    );
    let server = server(ScriptedServer::sequence(vec![
        Reply::sse_text(&call, 9),
        Reply::sse_text("It adds two numbers.", 9),
    ]));
    let output = place.run(&server, &["--mode", "text"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let requests = server.requests();
    let result = messages(&requests[1]).last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(result.contains("[ok] true"), "{result}");
    assert!(
        result.contains("[warning] \"glob\": \"\", \"limit\": null taken as not given"),
        "{result}"
    );
    let (code, codes) = place.validate(false);
    assert_eq!(code, Some(0), "a warning, not an error: {codes:?}");
    assert!(
        codes.iter().any(|c| c.contains("unset_argument")),
        "{codes:?}"
    );
}

#[test]
fn in_text_mode_a_call_in_a_json_fence_is_an_attempted_call_not_the_answer() {
    let place = Place::new();
    let lib = place.path("lib.sh");
    // The right call in the wrong fence, then an invented name, then the call as the protocol
    // writes it, then the answer.
    let wrong_fence = format!(
        "```json\n{}\n```",
        json!({"id": "call-001", "tool": "fs.read", "args": {"path": lib}})
    );
    let invented = format!(
        "```json\n{}\n```",
        json!({"name": "read_file", "arguments": {"path": lib}})
    );
    let right = format!(
        "```flycode-call\n{}\n```",
        json!({"id": "call-002", "tool": "fs.read", "args": {"path": lib}})
    );
    let server = server(ScriptedServer::sequence(vec![
        Reply::sse_text(&wrong_fence, 9),
        Reply::sse_text(&invented, 9),
        Reply::sse_text(&right, 9),
        Reply::sse_text("It adds two numbers.", 9),
    ]));
    let output = place.run(&server, &["--mode", "text"]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let requests = server.requests();
    assert_eq!(
        requests.len(),
        4,
        "a call-shaped block was taken for the answer: {stderr}"
    );
    let said = |request: &RecordedRequest| {
        messages(request).last().unwrap()["content"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let first = said(&requests[1]);
    assert!(
        first.contains("a ```json block") && first.contains("nothing was run"),
        "{first}"
    );
    assert!(first.contains("```flycode-call"), "{first}");
    let second = said(&requests[2]);
    assert!(second.contains("no tool named \"read_file\""), "{second}");
    assert!(second.contains("fs.read"), "{second}");
    // Only the protocol's own block ran, and only the answer is on standard output.
    assert!(
        said(&requests[3]).contains("[ok] true"),
        "{}",
        said(&requests[3])
    );
    assert_eq!(text(&output.stdout).trim(), "It adds two numbers.");
}

#[test]
fn a_call_shaped_block_with_an_invented_name_is_an_attempted_call_not_the_answer() {
    let place = Place::new();
    let invented = format!(
        "```json\n{}\n```",
        json!({"name": "list_files", "arguments": {"path": place.root.display().to_string()}})
    );
    let server = server(ScriptedServer::sequence(vec![
        Reply::sse_text(&invented, 9),
        Reply::sse_text("It adds two numbers.", 9),
    ]));
    let output = place.run(&server, &[]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let requests = server.requests();
    assert_eq!(
        requests.len(),
        2,
        "the invented call was taken for the answer: {stderr}"
    );
    let correction = messages(&requests[1]).last().unwrap().clone();
    let said = correction["content"].as_str().unwrap();
    assert!(said.contains("no tool named \"list_files\""), "{said}");
    assert!(said.contains("fs_ls"), "{said}");
    assert!(text(&output.stdout).contains("It adds two numbers."));
}

#[test]
fn the_first_request_points_back_at_the_task_and_special_every_holds_the_block_still() {
    let place = Place::new();
    let config = place.base.join(".config/flycode");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("flycode.toml"), "[agent]\nspecial_every = 4\n").unwrap();
    let lib = place.path("lib.sh");
    let mut replies: Vec<Reply> = (1..=7)
        .map(|n| {
            let call =
                json!({"id": format!("call-{n:03}"), "tool": "fs.read", "args": {"path": lib}});
            Reply::sse_text(&format!("```flycode-call\n{call}\n```"), 9)
        })
        .collect();
    replies.push(Reply::sse_text("It adds two numbers.", 9));
    let server = server(ScriptedServer::sequence(replies));
    let output = place.run(&server, &["--mode", "text"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let requests = server.requests();
    assert_eq!(requests.len(), 8);
    // The first request: the task, the block, and last the way back to the task.
    let first = messages(&requests[0]);
    let last = first.last().unwrap()["content"].as_str().unwrap();
    assert!(
        last.starts_with("[flycode] End of the messages flycode inserted"),
        "{last}"
    );
    assert!(
        last.contains("Your task is the first user message"),
        "{last}"
    );
    // The block (the role definition first) stays after the first result for four turns, then
    // jumps four results on: results before it, request by request.
    let before_block: Vec<usize> = requests
        .iter()
        .map(|request| {
            let messages = messages(request);
            let at = messages
                .iter()
                .position(|m| {
                    m["content"]
                        .as_str()
                        .is_some_and(|c| c.starts_with("[flycode] Role definition"))
                })
                .expect("the block is in every request");
            messages[..at]
                .iter()
                .filter(|m| {
                    m["content"]
                        .as_str()
                        .is_some_and(|c| c.contains("```flycode-result"))
                })
                .count()
        })
        .collect();
    assert_eq!(before_block, [0, 0, 0, 1, 1, 1, 1, 5]);
}

#[test]
fn the_compact_native_first_request_of_the_seed_set_is_under_2500_tokens() {
    let place = Place::new();
    let server = server(ScriptedServer::sequence(vec![Reply::sse_text("Done.", 9)]));
    let output = place.run(
        &server,
        &["--mode", "native", "--tools", "seed", "--prompt", "compact"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let body = server.requests()[0].body.to_string();
    // Tokens estimated as bytes / 4, as bench/first-request.py and the README count them.
    assert!(body.len() / 4 < 2500, "{} bytes: {body}", body.len());
    // Each function is described once, in its definition; the guide names them only.
    let system = messages(&server.requests()[0])[0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        system.contains("Functions: fs_ls, fs_mkdir, fs_read"),
        "{system}"
    );
    assert!(!system.contains("List a directory"), "{system}");
}

#[test]
fn a_long_silence_before_the_first_token_is_said_on_the_terminal() {
    let place = Place::new();
    // A CPU reading a long prompt: nothing at all for six seconds, then the answer.
    let server = server(ScriptedServer::start(|_, _| {
        std::thread::sleep(Duration::from_secs(6));
        Reply::sse_text("It adds two numbers.", 9)
    }));
    let output = place.run(&server, &[]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("waiting for the model to read the prompt"),
        "no word during the silence: {stderr}"
    );
    assert_eq!(text(&output.stdout).trim(), "It adds two numbers.");
}
