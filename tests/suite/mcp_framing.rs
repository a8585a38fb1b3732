//! `flycode mcp` driven line by line from Rust, without an SDK in between: what a client that
//! writes its own JSON-RPC sees (PROTOCOL.md §14, Framing), down to a request line over the
//! 16 MiB limit.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{Value, json};

use super::common::Workspace;

/// A running `flycode mcp --root ROOT`, initialized, with its standard input and output.
struct Server {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl Server {
    fn start(w: &Workspace) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_flycode"))
            .args(["mcp", "--approve", "auto", "--root"])
            .arg(&w.root)
            .env("FLYCODE_STATE_DIR", &w.state)
            .env_remove("XDG_CONFIG_HOME")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let input = child.stdin.take().unwrap();
        let output = BufReader::new(child.stdout.take().unwrap());
        let mut server = Server {
            child,
            input,
            output,
        };
        server.send(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "framing-test", "version": "1"}}}),
        );
        let answer = server.receive();
        assert_eq!(answer["id"], 0, "{answer}");
        assert!(answer["result"]["serverInfo"].is_object(), "{answer}");
        server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    fn send_line(&mut self, line: &[u8]) {
        self.input.write_all(line).unwrap();
        self.input.write_all(b"\n").unwrap();
        self.input.flush().unwrap();
    }

    fn send(&mut self, message: &Value) {
        self.send_line(message.to_string().as_bytes());
    }

    fn receive(&mut self) -> Value {
        let mut line = String::new();
        assert!(
            self.output.read_line(&mut line).unwrap() > 0,
            "the server closed its output"
        );
        serde_json::from_str(&line).unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_request_line_over_the_limit_is_answered_under_its_id_and_the_server_goes_on() {
    let w = Workspace::new();
    let mut server = Server::start(&w);
    let content = "x".repeat(17 << 20);
    let big = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "fs_write", "arguments": {"path": w.path("big.txt"), "content": content}}})
    .to_string();
    server.send_line(big.as_bytes());
    server.send(&json!({"jsonrpc": "2.0", "id": 8, "method": "ping"}));
    let refusal = server.receive();
    assert_eq!(refusal["id"], 7, "{refusal}");
    assert_eq!(refusal["error"]["code"], -32600, "{refusal}");
    let message = refusal["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!("request too large: {} bytes, ", big.len()))
            && message.contains("over the 16 MiB limit")
            && message.contains("fs_write in parts with mode \"append\""),
        "{message}"
    );
    let pong = server.receive();
    assert_eq!(pong["id"], 8, "{pong}");
    assert!(pong["result"].is_object(), "{pong}");
    assert!(
        !w.root.join("big.txt").exists(),
        "the dropped call did not run"
    );
    // A call that fits is still served.
    server.send(&json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
        "name": "fs_write", "arguments": {"path": w.path("small.txt"), "mode": "overwrite", "content": "ok\n"}}}));
    let done = server.receive();
    assert_eq!(done["id"], 9, "{done}");
    assert_eq!(done["result"]["isError"], false, "{done}");
    assert_eq!(
        std::fs::read_to_string(w.root.join("small.txt")).unwrap(),
        "ok\n"
    );
}

/// What `flycode mcp` answers to an `fs_read` call whose `head` is written as `head`: the
/// `[code]` and `[hint]` lines of the failure text, or `None` when it ran.
pub(super) fn mcp_verdict_on_head(w: &Workspace, heads: &[&str]) -> Vec<Option<(String, String)>> {
    let mut server = Server::start(w);
    let path = serde_json::to_string(&w.path("notes.txt")).unwrap();
    heads
        .iter()
        .enumerate()
        .map(|(index, head)| {
            let line = format!(
                r#"{{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{{"name":"fs_read","arguments":{{"path":{path},"head":{head}}}}}}}"#,
                100 + index
            );
            server.send_line(line.as_bytes());
            let answer = server.receive();
            assert_eq!(answer["id"], 100 + index, "{answer}");
            if answer["result"]["isError"] != true {
                return None;
            }
            let text = answer["result"]["content"][0]["text"].as_str().unwrap().to_owned();
            let header = |name: &str| {
                text.lines()
                    .find_map(|l| l.strip_prefix(&format!("[{name}] ")))
                    .unwrap_or_default()
                    .to_owned()
            };
            Some((header("code"), header("hint")))
        })
        .collect()
}
