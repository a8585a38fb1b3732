//! The reply size limit (PROTOCOL.md §1 (Reading a reply: reply size limit), `max_reply_bytes`): a reply over it is refused as
//! `too_large` before it is parsed, by `check`, `exec`, `watch --inbox` and `run`; raising the
//! setting in flycode.toml lets the same reply through; a value out of range is a configuration
//! error naming the file, line, key and range.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::AtomicBool;

use serde_json::{Value, json};

use super::api_server::{Reply, ScriptedServer};
use super::common::{read_stderr_until, send_signal, temp_base_with_root, wait_for_file};
use flycode::agent::client::{ChatRequest, ClientError, ClientSettings, OpenAiProvider, Provider};
use flycode::agent::message::Message;

/// 17 MiB: over the default limit of 16 MiB.
const OVER_DEFAULT: usize = 17 << 20;

/// A folder to work in, its own HOME (where the test writes the user's flycode.toml), and an allowed root.
struct Place {
    _temp: tempfile::TempDir,
    base: PathBuf,
    root: PathBuf,
}

impl Place {
    fn new() -> Place {
        let (temp, base, root) = temp_base_with_root("root");
        Place {
            _temp: temp,
            base,
            root,
        }
    }

    /// `flycode ARGS` in the base folder, which is HOME too.
    fn flycode(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_flycode"));
        for (name, _) in std::env::vars() {
            if name.starts_with("FLYCODE_") || name.starts_with("OPENAI_") {
                command.env_remove(name);
            }
        }
        command
            .current_dir(&self.base)
            .env("HOME", &self.base)
            .env_remove("XDG_CONFIG_HOME")
            .env("FLYCODE_STATE_DIR", self.base.join("state"))
            .env("NO_COLOR", "1")
            .args(args)
            .stdin(Stdio::null());
        command
    }

    /// Writes the user's `flycode.toml` (HOME is the base folder): a project file could only
    /// lower the limit until trusted.
    fn configure(&self, text: &str) {
        let dir = self.base.join(".config/flycode");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("flycode.toml"), text).unwrap();
    }

    /// A reply file: one fs.write call whose content is `content_bytes` of text.
    fn big_reply(&self, content_bytes: usize) -> PathBuf {
        let path = self.base.join("reply.md");
        let head = format!(
            "```flycode-call\n{{\"id\":\"big-1\",\"tool\":\"fs.write\",\"args\":{{\"path\":\"{}/out.txt\",\"mode\":\"overwrite\",\"content\":\"",
            self.root.display()
        );
        let mut text = String::with_capacity(content_bytes + head.len() + 16);
        text.push_str(&head);
        text.push_str(&"abcdefghi\\n".repeat(content_bytes / 11));
        text.push_str(&"x".repeat(content_bytes % 11));
        text.push_str("\"}}\n```\n");
        std::fs::write(&path, &text).unwrap();
        path
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `command` with `input` on its standard input. flycode stops reading past the limit, so
/// the write may fail with a broken pipe: that is the point, not an error.
fn run_with_stdin(mut command: Command, input: Vec<u8>) -> Output {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap();
    output
}

#[test]
fn check_refuses_a_reply_over_the_limit_naming_size_and_limit() {
    let place = Place::new();
    let reply = place.big_reply(OVER_DEFAULT);
    let size = std::fs::metadata(&reply).unwrap().len();
    let output = place
        .flycode(&["check", reply.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(stdout.starts_with("```flycode-result\n"), "{stdout}");
    assert!(
        stdout.contains("[ok] false\n[code] too_large\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "the reply is {size} bytes (17.0 MiB), more than the reply limit of 16777216 bytes (16.0 MiB, max_reply_bytes)"
        )),
        "{stdout}"
    );
    assert!(stdout.contains("[hint] send a shorter reply"), "{stdout}");
    assert!(
        text(&output.stderr).contains("raise max_reply_bytes in flycode.toml"),
        "{}",
        text(&output.stderr)
    );

    let output = place
        .flycode(&["check", "--json", reply.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["verdict"], "invalid");
    assert_eq!(report["call"], Value::Null);
    assert_eq!(report["error"]["code"], "too_large");
    assert!(
        report["error"]["message"]
            .as_str()
            .unwrap()
            .contains("16777216 bytes"),
        "{report}"
    );
}

#[test]
fn a_reply_on_standard_input_is_read_only_up_to_the_limit() {
    let place = Place::new();
    let reply = std::fs::read(place.big_reply(OVER_DEFAULT)).unwrap();
    let output = run_with_stdin(place.flycode(&["check", "-"]), reply);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(stdout.contains("[code] too_large"), "{stdout}");
    assert!(
        stdout.contains(
            "the reply is more than the reply limit of 16777216 bytes (16.0 MiB, max_reply_bytes)"
        ),
        "{stdout}"
    );
}

#[test]
fn exec_answers_too_large_and_runs_nothing() {
    let place = Place::new();
    let reply = place.big_reply(OVER_DEFAULT);
    let root = place.root.to_str().unwrap();
    let output = place
        .flycode(&["exec", reply.to_str().unwrap(), "--root", root])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("[ok] false\n[code] too_large\n"),
        "{stdout}"
    );
    assert!(stdout.contains("16777216 bytes"), "{stdout}");
    assert!(!place.root.join("out.txt").exists(), "the call ran");

    let output = place
        .flycode(&["exec", "--json", reply.to_str().unwrap(), "--root", root])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["ok"], false);
    assert_eq!(report["error"]["code"], "too_large");
    assert!(
        report["text"]
            .as_str()
            .unwrap()
            .contains("[code] too_large")
    );

    let output = run_with_stdin(
        place.flycode(&["exec", "--root", root]),
        std::fs::read(&reply).unwrap(),
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(text(&output.stdout).contains("[code] too_large"));
}

#[test]
fn a_raised_limit_lets_the_same_reply_through() {
    let place = Place::new();
    let reply = place.big_reply(OVER_DEFAULT);
    place.configure("max_reply_bytes = 33554432\n");
    let output = place
        .flycode(&["check", reply.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let call: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(call["id"], "big-1");
    assert_eq!(call["tool"], "fs.write");

    let root = place.root.to_str().unwrap();
    let output = place
        .flycode(&["exec", reply.to_str().unwrap(), "--root", root])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(text(&output.stdout).contains("[ok] true"));
    let written = std::fs::metadata(place.root.join("out.txt")).unwrap().len();
    assert_eq!(written, OVER_DEFAULT as u64 - (OVER_DEFAULT as u64 / 11));

    // And a limit below the reply refuses a smaller one.
    place.configure("max_reply_bytes = 1024\n");
    let small = place.big_reply(2000);
    let output = place
        .flycode(&["check", small.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output.stdout).contains("more than the reply limit of 1024 bytes (1.0 KiB"),
        "{}",
        text(&output.stdout)
    );
}

#[test]
fn an_out_of_range_limit_is_a_configuration_error() {
    let place = Place::new();
    let reply = place.big_reply(10);
    for (value, written) in [
        ("1023", "max_reply_bytes = 1023"),
        ("1073741825", "max_reply_bytes = 1073741825"),
        ("-1", "max_reply_bytes = -1"),
    ] {
        place.configure(&format!("roots = []\nmax_reply_bytes = {value}\n"));
        let output = place
            .flycode(&["check", reply.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{value}");
        let stderr = text(&output.stderr);
        assert!(
            stderr.contains(&format!(
                "flycode.toml:2: {written} is out of range: allowed 1024..=1073741824 (bytes of one model reply)"
            )),
            "{stderr}"
        );
    }
}

#[test]
fn an_inbox_file_over_the_limit_gets_a_too_large_result() {
    let place = Place::new();
    let inbox = place.base.join("inbox");
    std::fs::create_dir_all(&inbox).unwrap();
    place.configure("max_reply_bytes = 4096\n");
    let mut command = place.flycode(&[
        "watch",
        "--yes",
        "--interval-ms",
        "20",
        "--quiet-ms",
        "100",
        "--inbox",
        inbox.to_str().unwrap(),
        "--root",
        place.root.to_str().unwrap(),
    ]);
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    read_stderr_until(&mut child, "Ctrl-C stops.");

    // Over the limit, even without a call block: a file in the inbox is meant as a reply.
    std::fs::write(inbox.join("big.md"), "y".repeat(5000)).unwrap();
    let result = wait_for_file(&inbox.join("big.result.md"));
    assert!(
        result.starts_with("```flycode-result\n")
            && result.contains("[ok] false\n[code] too_large\n"),
        "{result}"
    );
    assert!(
        result
            .contains("the reply is 5000 bytes (4.9 KiB), more than the reply limit of 4096 bytes"),
        "{result}"
    );
    // A reply within the limit is still answered as usual.
    let call = format!(
        "```flycode-call\n{{\"id\":\"c1\",\"tool\":\"fs.write\",\"args\":{{\"path\":\"{}/small.txt\",\"mode\":\"overwrite\",\"content\":\"ok\"}}}}\n```\n",
        place.root.display()
    );
    std::fs::write(inbox.join("small.md"), call).unwrap();
    let result = wait_for_file(&inbox.join("small.result.md"));
    assert!(result.contains("[ok] true"), "{result}");
    assert_eq!(
        std::fs::read_to_string(place.root.join("small.txt")).unwrap(),
        "ok"
    );

    send_signal(child.id(), "TERM");
    let output = child.wait_with_output().unwrap();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    // Answered once (the small reply after it proves several scans went by).
    assert_eq!(stderr.matches("failed: too_large").count(), 1, "{stderr}");
    assert!(stderr.contains("raise max_reply_bytes"), "{stderr}");
}

/// `flycode run` in text mode against `server`, the task and the root in `place`.
fn run_against(place: &Place, server: &ScriptedServer, extra: &[&str]) -> Output {
    let base_url = server.base_url();
    let mut args = vec![
        "run",
        "--base-url",
        &base_url,
        "--model",
        "scripted-model",
        "--yes",
        "--root",
        place.root.to_str().unwrap(),
        "Say something long.",
    ];
    args.extend_from_slice(extra);
    place.flycode(&args).output().unwrap()
}

#[test]
fn run_ends_with_too_large_when_the_server_sends_a_20_mib_reply() {
    let place = Place::new();
    let server = ScriptedServer::always(Reply::completion_text(&varied(20 << 20)));
    let output = run_against(&place, &server, &["--no-stream"]);
    let all = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert_eq!(output.status.code(), Some(1), "{all}");
    assert!(all.contains("too_large"), "{all}");
    assert!(
        all.contains("too large (too_large): it passed the reply limit of 16777216 bytes (16.0 MiB, max_reply_bytes)"),
        "{all}"
    );
    assert_eq!(server.requests().len(), 1, "not retried");

    // Raised in flycode.toml, the same reply is taken (and answered in prose: the run is done).
    place.configure("max_reply_bytes = 33554432\n");
    let output = run_against(&place, &server, &["--no-stream"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
}

/// `bytes` of text that never repeats itself (counting up), so that no reply made of it is cut
/// as degenerate before the size limit is reached.
fn varied(bytes: usize) -> String {
    let mut text = String::with_capacity(bytes + 16);
    let mut number = 0u64;
    while text.len() < bytes {
        text.push_str(&number.to_string());
        text.push(' ');
        number += 1;
    }
    text.truncate(bytes);
    text
}

/// A streamed reply of `pieces` chunks, each carrying `piece_bytes` of text.
fn streamed_text(pieces: usize, piece_bytes: usize) -> Reply {
    let piece = varied(piece_bytes);
    let mut events: Vec<Value> = (0..pieces)
        .map(|_| {
            json!({"object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": null}]})
        })
        .collect();
    events.push(json!({"object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}));
    Reply::sse_events(&events, true, 1 << 20)
}

fn complete(settings: ClientSettings, stream: bool) -> Result<usize, ClientError> {
    let mut provider = OpenAiProvider::new(settings).unwrap();
    let messages = [Message::user("hi")];
    let request = ChatRequest {
        model: "m",
        messages: &messages,
        tools: &[],
        stream,
        max_tokens: 1024,
    };
    let cancel = AtomicBool::new(false);
    provider
        .complete(&request, &mut |_| {}, &cancel)
        .map(|completion| completion.content.len())
}

#[test]
fn a_streamed_reply_is_abandoned_once_its_text_passes_the_limit() {
    // 20 pieces of 1 MiB: the text passes 16 MiB at the seventeenth, long before the end.
    let server = ScriptedServer::always(streamed_text(20, 1 << 20));
    let error = complete(ClientSettings::new(server.base_url()), true).unwrap_err();
    assert!(
        matches!(
            error,
            ClientError::TooLarge {
                framing: false,
                limit: 16_777_216,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(error.to_string().contains("too_large"), "{error}");
    assert_eq!(server.requests().len(), 1, "not retried");

    // The same stream under a higher limit is read whole.
    let mut settings = ClientSettings::new(server.base_url());
    settings.max_reply_bytes = 32 << 20;
    assert_eq!(complete(settings, true).unwrap(), 20 << 20);
}

#[test]
fn tool_call_arguments_count_toward_the_limit() {
    let arguments =
        json!({"path": "/x", "mode": "overwrite", "content": "a".repeat(5000)}).to_string();
    let server = ScriptedServer::always(Reply::completion_tool_calls(&[(
        "c1", "fs_write", &arguments,
    )]));
    let mut settings = ClientSettings::new(server.base_url());
    settings.max_reply_bytes = 4096;
    let error = complete(settings, false).unwrap_err();
    assert!(
        matches!(error, ClientError::TooLarge { framing: false, .. }),
        "{error:?}"
    );
}
