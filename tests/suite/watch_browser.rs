//! `flycode watch --browser` (PROTOCOL.md §12, "The browser companion's loopback API"): the real
//! binary on a free loopback port, talked to over raw HTTP as the extension and as an attacker
//! would.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::common::http_exchange as exchange;

/// A running `flycode watch --browser 0`, stopped when dropped.
struct Companion {
    child: Child,
    address: SocketAddr,
    /// The code in the printed pairing link's fragment.
    code: String,
    stderr: Arc<Mutex<String>>,
    _temp: tempfile::TempDir,
    root: PathBuf,
}

impl Companion {
    /// Whether flycode's standard error holds `text` by `limit` from now.
    fn said_within(&self, text: &str, limit: std::time::Duration) -> bool {
        let deadline = std::time::Instant::now() + limit;
        while std::time::Instant::now() < deadline {
            if self.stderr.lock().unwrap().contains(text) {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        self.stderr.lock().unwrap().contains(text)
    }
}

impl Drop for Companion {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start() -> Companion {
    start_with(&[], |_, _| {})
}

/// Starts it with `extra` flags, after `prepare` has written what the test needs into the base
/// folder (the person's settings are `base/config/flycode/flycode.toml`) and the root.
fn start_with(extra: &[&str], prepare: impl FnOnce(&Path, &Path)) -> Companion {
    let temp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(temp.path()).unwrap();
    let root = base.join("root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("notes.txt"), "first line\nsecond line\n").unwrap();
    prepare(&base, &root);
    let mut child = Command::new(env!("CARGO_BIN_EXE_flycode"))
        .args(["watch", "--browser", "0", "--root"])
        .arg(&root)
        .args(extra)
        .env("FLYCODE_STATE_DIR", base.join("state"))
        .env("XDG_CONFIG_HOME", base.join("config"))
        .env_remove("DISPLAY")
        .current_dir(&root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap());
    // Notices (an untrusted project file's) may come before the link.
    let mut said = String::new();
    let link = loop {
        let mut line = String::new();
        if lines.read_line(&mut line).unwrap() == 0 {
            panic!("flycode watch --browser ended without a pairing link: {said}");
        }
        said.push_str(&line);
        if let Some(word) = line.split_whitespace().find(|word| word.contains("/pair#")) {
            break word.to_owned();
        }
    };
    let (base_url, code) = link.split_once("/pair#").unwrap();
    let address = base_url.trim_start_matches("http://").parse().unwrap();
    let stderr = Arc::new(Mutex::new(said));
    let kept = Arc::clone(&stderr);
    std::thread::spawn(move || {
        for line in lines.lines().map_while(Result::ok) {
            kept.lock().unwrap().push_str(&(line + "\n"));
        }
    });
    Companion {
        child,
        address,
        code: code.to_owned(),
        stderr,
        _temp: temp,
        root,
    }
}

/// A request from the extension's own origin unless `headers` says otherwise.
fn request(method: &str, path: &str, headers: &[(&str, &str)], body: Option<&Value>) -> String {
    let mut text = format!("{method} {path} HTTP/1.1\r\n");
    let named = |name: &str| headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    if !named("host") {
        text.push_str("Host: 127.0.0.1\r\n");
    }
    if !named("origin") {
        text.push_str("Origin: chrome-extension://abcdefghijklmnopabcdefghijklmnop\r\n");
    }
    for (name, value) in headers {
        if !value.is_empty() {
            text.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    let body = body.map(Value::to_string).unwrap_or_default();
    if method == "POST" {
        text.push_str("Content-Type: application/json\r\n");
    }
    text.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    text
}

fn pair(companion: &Companion) -> String {
    let (status, body) = exchange(
        companion.address,
        &request(
            "POST",
            "/v1/pair",
            &[],
            Some(&json!({"code": companion.code})),
        ),
    );
    assert_eq!(status, 200, "{body}");
    let token = serde_json::from_str::<Value>(&body).unwrap()["token"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(token.len(), 64);
    token
}

fn reply(companion: &Companion, token: &str, conversation: &str, text: &str) -> Value {
    let bearer = format!("Bearer {token}");
    let (status, body) = exchange(
        companion.address,
        &request(
            "POST",
            "/v1/replies",
            &[("Authorization", &bearer)],
            Some(&json!({"site": "chatgpt.com", "conversation": conversation, "text": text})),
        ),
    );
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

fn call_block(id: &str, tool: &str, args: Value) -> String {
    format!(
        "```flycode-call\n{}\n```\n",
        json!({"id": id, "tool": tool, "args": args})
    )
}

#[test]
fn pairing_takes_the_printed_code_once_and_gives_a_token_that_opens_the_api() {
    let companion = start();
    let (status, _) = exchange(companion.address, &request("GET", "/v1/status", &[], None));
    assert_eq!(status, 401, "unpaired");
    let (status, body) = exchange(
        companion.address,
        &request(
            "POST",
            "/v1/pair",
            &[],
            Some(&json!({"code": "0".repeat(32)})),
        ),
    );
    assert_eq!(status, 403, "a wrong code: {body}");
    let token = pair(&companion);
    let (status, _) = exchange(
        companion.address,
        &request(
            "POST",
            "/v1/pair",
            &[],
            Some(&json!({"code": companion.code})),
        ),
    );
    assert_eq!(status, 403, "the code works once");
    let bearer = format!("Bearer {token}");
    let (status, body) = exchange(
        companion.address,
        &request("GET", "/v1/status", &[("Authorization", &bearer)], None),
    );
    assert_eq!(status, 200, "{body}");
    let status_json = serde_json::from_str::<Value>(&body).unwrap();
    assert_eq!(status_json["paired"], true);
    // The person's [browser] settings, and no question waiting.
    assert_eq!(
        status_json["settings"],
        json!({"autoInsert": true, "autoSubmit": false})
    );
    assert_eq!(status_json["asking"], Value::Null);
    let wrong = format!("Bearer {}", "f".repeat(64));
    let (status, _) = exchange(
        companion.address,
        &request("GET", "/v1/status", &[("Authorization", &wrong)], None),
    );
    assert_eq!(status, 401, "a wrong token");
    // The pairing page holds no secret and runs no script.
    let (status, page) = exchange(
        companion.address,
        &request("GET", "/pair", &[("Origin", "")], None),
    );
    assert_eq!(status, 200);
    assert!(!page.contains(&companion.code) && !page.contains(&token));
    // The terminal's line is read from the child's standard error on a thread of its own.
    assert!(companion.said_within("paired", std::time::Duration::from_secs(10)));
}

#[test]
fn web_pages_other_hosts_preflights_and_plain_posts_are_refused_even_with_the_token() {
    let companion = start();
    let token = pair(&companion);
    let bearer = format!("Bearer {token}");
    let auth = ("Authorization", bearer.as_str());
    let text = call_block(
        "x1",
        "fs.read",
        json!({"path": companion.root.join("notes.txt")}),
    );
    let body = json!({"site": "chatgpt.com", "conversation": "c", "text": text});
    for (what, headers) in [
        (
            "a chat page's script",
            vec![auth, ("Origin", "https://chatgpt.com")],
        ),
        (
            "a page on loopback",
            vec![auth, ("Origin", "http://127.0.0.1:8000")],
        ),
        ("a sandboxed page", vec![auth, ("Origin", "null")]),
        (
            "a rebinding host name",
            vec![auth, ("Host", "attacker.example")],
        ),
    ] {
        let (status, answer) = exchange(
            companion.address,
            &request("POST", "/v1/replies", &headers, Some(&body)),
        );
        assert_eq!(status, 403, "{what}: {answer}");
        let (status, _) = exchange(
            companion.address,
            &request("POST", "/v1/pair", &headers, Some(&json!({"code": "00"}))),
        );
        assert_eq!(status, 403, "{what} pairing");
    }
    let (status, _) = exchange(
        companion.address,
        &request(
            "OPTIONS",
            "/v1/replies",
            &[auth, ("Origin", "https://chatgpt.com")],
            None,
        ),
    );
    assert_eq!(status, 403, "a preflight");
    let plain = format!(
        "POST /v1/replies HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {bearer}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.to_string().len()
    );
    assert_eq!(
        exchange(companion.address, &plain).0,
        415,
        "a form-like post"
    );
    let (status, _) = exchange(
        companion.address,
        &request("GET", "/v1/nothing", &[auth], None),
    );
    assert_eq!(status, 404);
    // No answer carries a CORS header.
    let mut stream = TcpStream::connect(companion.address).unwrap();
    stream
        .write_all(request("GET", "/v1/status", &[auth], None).as_bytes())
        .unwrap();
    let mut raw = String::new();
    let _ = stream.read_to_string(&mut raw);
    assert!(
        !raw.to_ascii_lowercase().contains("access-control-allow"),
        "{raw}"
    );
    // Nothing ran.
    assert!(!companion.stderr.lock().unwrap().contains("fs.read"));
}

#[test]
fn a_reply_runs_once_per_conversation_and_its_answer_is_the_result_block() {
    let companion = start();
    let token = pair(&companion);
    let target = companion.root.join("made.txt");
    let write = call_block(
        "w1",
        "fs.write",
        json!({"path": target, "content": "one\n", "mode": "append"}),
    );
    let first = reply(&companion, &token, "chat-1", &write);
    assert_eq!(first["handled"], "answered", "{first}");
    assert_eq!(first["ok"], true, "{first}");
    assert_eq!(first["replayed"], false);
    assert!(
        first["result"]
            .as_str()
            .unwrap()
            .starts_with("```flycode-result\n[id] w1\n")
    );
    // A re-render or a reload sends the same reply again: answered, not run again.
    let again = reply(&companion, &token, "chat-1", &write);
    assert_eq!(again["replayed"], true, "{again}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "one\n");
    // The same id in another conversation is a call of its own.
    let other = reply(&companion, &token, "chat-2", &write);
    assert_eq!(other["replayed"], false, "{other}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "one\none\n");
    // A read's card line is the body's first line; a reply without a call is ignored.
    let read = reply(
        &companion,
        &token,
        "chat-1",
        &call_block(
            "r1",
            "fs.read",
            json!({"path": companion.root.join("notes.txt")}),
        ),
    );
    assert_eq!(read["firstLine"], "first line", "{read}");
    let prose = reply(&companion, &token, "chat-1", "Just words, no call.");
    assert_eq!(prose["handled"], "ignored");
    // A refused call: its error is the card's line.
    let outside = reply(
        &companion,
        &token,
        "chat-1",
        &call_block("o1", "fs.read", json!({"path": "/etc/passwd"})),
    );
    assert_eq!(outside["ok"], false);
    assert_eq!(outside["code"], "outside_roots", "{outside}");
    let stderr = companion.stderr.lock().unwrap().clone();
    assert!(stderr.contains("(chatgpt.com · chat-1)"), "{stderr}");
    assert!(stderr.contains("(chatgpt.com · chat-2)"), "{stderr}");
}

#[test]
fn the_persons_browser_settings_are_reported_and_a_project_cannot_turn_on_auto_submit() {
    let companion = start_with(&[], |base, root| {
        // The project asks for auto-submit; only the person's own file may.
        std::fs::write(root.join("flycode.toml"), "[browser]\nauto_submit = true\n").unwrap();
        std::fs::create_dir_all(base.join("config/flycode")).unwrap();
        std::fs::write(
            base.join("config/flycode/flycode.toml"),
            "[browser]\nauto_insert = false\n",
        )
        .unwrap();
    });
    let bearer = format!("Bearer {}", pair(&companion));
    let (status, body) = exchange(
        companion.address,
        &request("GET", "/v1/status", &[("Authorization", &bearer)], None),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["settings"],
        json!({"autoInsert": false, "autoSubmit": false}),
        "{}",
        companion.stderr.lock().unwrap()
    );
}

#[test]
fn a_tag_dialect_reply_from_the_page_runs_once_per_conversation_too() {
    let companion = start_with(&["--dialect", "tags", "--yes"], |_, _| {});
    let token = pair(&companion);
    let reply_text = "Appending.\n<bash_call> echo ran >> log.txt </bash_call>\n";
    let first = reply(&companion, &token, "tags-1", reply_text);
    assert_eq!(first["handled"], "answered", "{first}");
    assert!(
        first["result"]
            .as_str()
            .unwrap()
            .starts_with("<bash_call_result exit_code=0"),
        "{first}"
    );
    let again = reply(&companion, &token, "tags-1", reply_text);
    assert_eq!(again["handled"], "answered", "{again}");
    assert_eq!(
        std::fs::read_to_string(companion.root.join("log.txt")).unwrap(),
        "ran\n",
        "the same reply again runs nothing: {again}"
    );
}
