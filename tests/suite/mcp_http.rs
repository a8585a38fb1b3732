//! `flycode mcp --http` end to end (PROTOCOL.md §14 (The MCP server), "Over HTTP"): a real
//! server on a loopback port, driven by the official Python MCP SDK's streamable HTTP client
//! (tests/mcp/client.py, as the stdio tests drive it) in both protocol eras, and by raw HTTP
//! requests for what a client should never get through: no or a wrong secret, a web page's
//! Origin, a rebinding Host, an oversized body, a client that stalls or never reads.

#![allow(clippy::disallowed_methods)] // fixtures are made and inspected directly

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::common::http_exchange as exchange;

use super::common::repo_root;
use super::mcp::{MODES, Place, audit_lines, code, place, python};

/// A running `flycode mcp --http` on a free loopback port, stopped when dropped.
struct HttpServer {
    child: Child,
    /// `http://127.0.0.1:PORT/mcp`.
    url: String,
    address: SocketAddr,
    secret: String,
    /// What it wrote to standard error.
    stderr: Arc<Mutex<String>>,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `flycode mcp --http 127.0.0.1:0 --root ROOT extra...` and waits for its address.
fn serve(place: &Place, extra: &[&str]) -> HttpServer {
    let mut child = Command::new(env!("CARGO_BIN_EXE_flycode"))
        .args(["mcp", "--http", "127.0.0.1:0", "--root"])
        .arg(&place.root)
        .args(extra)
        .env("FLYCODE_STATE_DIR", &place.state)
        .env("XDG_CONFIG_HOME", &place.config)
        .current_dir(&place.root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap());
    let stderr = Arc::new(Mutex::new(String::new()));
    let (mut url, mut secret) = (None, None);
    while url.is_none() || secret.is_none() {
        let mut line = String::new();
        if lines.read_line(&mut line).unwrap() == 0 {
            panic!(
                "flycode mcp --http ended before serving: {}",
                stderr.lock().unwrap()
            );
        }
        stderr.lock().unwrap().push_str(&line);
        if let Some(rest) = line.split(" at ").nth(1).filter(|_| url.is_none()) {
            url = rest.split(';').next().map(str::to_owned);
        }
        if let Some(rest) = line.split("Bearer ").nth(1) {
            secret = rest.split('"').next().map(str::to_owned);
        }
    }
    // The rest of standard error is kept for the assertions' messages.
    let kept = Arc::clone(&stderr);
    std::thread::spawn(move || {
        for line in lines.lines().map_while(Result::ok) {
            kept.lock().unwrap().push_str(&(line + "\n"));
        }
    });
    let url = url.unwrap();
    let address = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .parse()
        .unwrap();
    HttpServer {
        child,
        url,
        address,
        secret: secret.unwrap(),
        stderr,
    }
}

/// Plays `scenario` in `mode` against `server` with the Python SDK's HTTP client.
fn play(python: &Path, place: &Place, server: &HttpServer, scenario: &str, mode: &str) -> Value {
    let output = Command::new(python)
        .arg(repo_root().join("tests/mcp/client.py"))
        .args([scenario, mode, &server.url])
        .arg(&place.root)
        .env("FLYCODE_MCP_SECRET", &server.secret)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the client failed ({scenario}, {mode}):\n{stdout}\n{stderr}\nserver:\n{}",
        server.stderr.lock().unwrap()
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"))
}

/// A POST of `body` to `path` with these extra header lines (each ending in `\r\n`).
fn post(path: &str, headers: &str, body: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

#[test]
fn every_tool_answers_over_http_in_both_eras_and_the_audit_log_names_the_client() {
    let Some(python) = python() else { return };
    for (mode, version) in MODES.into_iter().zip(["2025-11-25", "2026-07-28"]) {
        let place = place();
        let server = serve(&place, &["--allow-changes", "--approve", "auto"]);
        let report = play(&python, &place, &server, "tools", mode);
        assert_eq!(report["protocolVersion"], version, "{mode}");
        let tools = report["tools"].as_array().unwrap();
        assert!(
            tools.iter().any(|tool| tool["name"] == "fs_write"),
            "{mode}"
        );
        for call in report["calls"].as_array().unwrap() {
            assert_eq!(call["isError"], false, "{mode}: {call}");
        }
        assert_eq!(code(&report["outside"]), "outside_roots", "{mode}");
        assert_eq!(report["bad"]["isError"], true, "{mode}");
        assert_eq!(code(&report["unknown"]), "unknown_tool", "{mode}");
        assert_eq!(
            std::fs::read_to_string(place.root.join("a.txt")).unwrap(),
            "one\ndeux\nthree\n"
        );
        // Every call is audited with who sent it: the SDK's name, and a loopback address.
        let audit = audit_lines(&place);
        let written = audit
            .iter()
            .find(|entry| entry["tool"] == "fs.write")
            .unwrap_or_else(|| panic!("{mode}: {audit:?}"));
        assert!(
            written["client"]["name"]
                .as_str()
                .unwrap()
                .starts_with("mcp "),
            "{mode}: {written}"
        );
        assert!(
            written["client"]["address"]
                .as_str()
                .unwrap()
                .starts_with("127.0.0.1:"),
            "{mode}: {written}"
        );
    }
}

#[test]
fn a_remote_client_only_reads_until_the_person_allows_changes() {
    let Some(python) = python() else { return };
    for mode in MODES {
        let place = place();
        let server = serve(&place, &["--approve", "auto"]);
        let report = play(&python, &place, &server, "read-only", mode);
        assert_eq!(report["read"]["isError"], false, "{mode}: {report}");
        assert_eq!(report["read"]["text"], "kept\n");
        for refused in ["write", "run"] {
            assert_eq!(
                code(&report[refused]),
                "denied_by_policy",
                "{mode}: {report}"
            );
            let text = report[refused]["text"].as_str().unwrap();
            assert!(text.contains("read-only"), "{mode}: {report}");
            // The person reads the chat: the refusal says how they allow changes.
            assert!(
                text.contains("[advice] ") && text.contains("--allow-changes"),
                "{mode}: {text}"
            );
        }
        assert_eq!(report["content"], "kept\n", "nothing was written");
        assert_eq!(report["ran"], false, "nothing was run");
    }
    // The person's own file allows changes as the flag does; a project's file cannot.
    let place = place();
    let user_file = place.config.join("flycode/flycode.toml");
    std::fs::write(&user_file, "[mcp]\nallow_changes_over_http = true\n").unwrap();
    let server = serve(&place, &["--approve", "auto"]);
    let report = play(&python, &place, &server, "read-only", "legacy");
    assert_eq!(report["write"]["isError"], false, "{report}");
    assert_eq!(report["content"], "changed\n");
    drop(server);
    let place = super::mcp::place();
    std::fs::write(
        place.root.join("flycode.toml"),
        "[mcp]\nallow_changes_over_http = true\n",
    )
    .unwrap();
    let server = serve(&place, &["--approve", "auto"]);
    let report = play(&python, &place, &server, "read-only", "legacy");
    assert_eq!(code(&report["write"]), "denied_by_policy", "{report}");
}

#[test]
fn an_asked_call_is_asked_through_the_clients_form_over_http() {
    let Some(python) = python() else { return };
    for mode in MODES {
        let place = place();
        let server = serve(&place, &["--allow-changes", "--approve", "ask"]);
        let report = play(&python, &place, &server, "elicit", mode);
        assert_eq!(
            report["questions"].as_array().unwrap().len(),
            2,
            "{mode}: {report}"
        );
        assert_eq!(report["accepted"]["isError"], false, "{mode}: {report}");
        assert_eq!(
            code(&report["declined"]),
            "denied_by_policy",
            "{mode}: {report}"
        );
        // A client that cannot show a form, and no terminal to ask on: refused, saying how.
        let report = play(&python, &place, &server, "no-elicitation", mode);
        for key in ["accepted", "declined"] {
            assert_eq!(code(&report[key]), "denied_by_policy", "{mode}: {report}");
            assert!(
                report[key]["text"]
                    .as_str()
                    .unwrap()
                    .contains("[tools] \"process.run\" = \"allow\""),
                "{mode}: {report}"
            );
        }
    }
}

#[test]
fn a_cancelled_call_over_http_kills_its_program_and_long_runs_report_progress() {
    let Some(python) = python() else { return };
    for mode in MODES {
        let place = place();
        let server = serve(&place, &["--allow-changes", "--approve", "auto"]);
        let report = play(&python, &place, &server, "cancel", mode);
        assert!(
            !report["progress"].as_array().unwrap().is_empty(),
            "{mode}: no progress: {report}"
        );
        assert_eq!(report["goneWhileConnected"], true, "{mode}: {report}");
        assert_eq!(report["after"]["isError"], false, "{mode}: {report}");
    }
}

#[test]
fn two_sessions_run_side_by_side_and_a_sessions_jobs_are_its_own_and_end_with_it() {
    let Some(python) = python() else { return };
    for mode in MODES {
        let place = place();
        let server = serve(&place, &["--allow-changes", "--approve", "auto"]);
        let report = play(&python, &place, &server, "parallel", mode);
        for name in ["left", "right"] {
            let session = &report["sessions"][name];
            assert_eq!(session["write"]["isError"], false, "{mode}: {report}");
            assert!(
                session["run"]["text"].as_str().unwrap().contains(name),
                "{mode}: {report}"
            );
        }
        assert!(
            report["ownJobs"]["text"]
                .as_str()
                .unwrap()
                .contains("job-1"),
            "{report}"
        );
        let pid = report["jobPid"].as_u64().unwrap();
        if mode == "legacy" {
            // A session's jobs are its own: another session does not see them, and they end
            // when it does.
            assert!(
                !report["othersJobs"]["text"]
                    .as_str()
                    .unwrap()
                    .contains("job-1"),
                "{report}"
            );
            assert_eq!(report["jobGoneAfterSession"], true, "{report}");
        } else {
            // 2026-07-28 has no sessions: its jobs are the server's, and end with it.
            assert_eq!(report["jobGoneAfterSession"], false, "{report}");
            drop(server);
            let proc = PathBuf::from(format!("/proc/{pid}"));
            let deadline = Instant::now() + Duration::from_secs(30);
            while proc.exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            assert!(!proc.exists(), "the job {pid} outlived the server");
        }
    }
}

#[test]
fn a_dropped_stream_is_resumed_before_2026_and_is_the_calls_cancellation_after() {
    let Some(python) = python() else { return };
    for mode in MODES {
        let place = place();
        let server = serve(&place, &["--allow-changes", "--approve", "auto"]);
        let report = play(&python, &place, &server, "resume", mode);
        let process_runs = || {
            audit_lines(&place)
                .into_iter()
                .filter(|entry| entry["tool"] == "process.run")
                .collect::<Vec<_>>()
        };
        if mode == "legacy" {
            // The session's stream is picked up where it dropped, and the call, still
            // running, answers on it.
            assert_eq!(report["status"], 200, "{report}");
            let resumed = report["resumed"].as_array().unwrap();
            let answer = resumed.last().unwrap_or_else(|| panic!("{report}"));
            assert_eq!(answer["id"], 7, "{report}");
            assert!(
                answer["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap()
                    .contains("resumed-ok"),
                "{report}"
            );
            let runs = process_runs();
            assert_eq!(runs.len(), 1, "it ran once: {runs:?}");
            assert_eq!(runs[0]["outcome"], "ok");
        } else {
            // 2026-07-28: closing a request's stream is how a client cancels it.
            let deadline = Instant::now() + Duration::from_secs(30);
            while process_runs().is_empty() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let runs = process_runs();
            assert_eq!(runs.len(), 1, "{runs:?}");
            assert_eq!(runs[0]["code"], "cancelled", "{runs:?}");
        }
    }
}

#[test]
fn requests_without_the_secret_from_web_pages_or_for_other_hosts_are_refused() {
    let place = place();
    let server = serve(&place, &[]);
    let host = format!("Host: {}\r\n", server.address);
    let bearer = format!("Authorization: Bearer {}\r\n", server.secret);
    let refused = [
        (host.clone(), 401, "no secret"),
        (
            format!("{host}Authorization: Bearer {}0\r\n", server.secret),
            401,
            "a wrong secret",
        ),
        (
            format!("{host}Authorization: Basic {}\r\n", server.secret),
            401,
            "not a bearer token",
        ),
        (
            format!("{host}{bearer}Origin: https://evil.example\r\n"),
            403,
            "a web page",
        ),
        (
            format!(
                "Host: rebound.example:{}\r\n{bearer}",
                server.address.port()
            ),
            403,
            "DNS rebinding",
        ),
    ];
    for (headers, status, what) in refused {
        let (got, body) = exchange(server.address, &post("/mcp", &headers, INITIALIZE));
        assert_eq!(got, status, "{what}: {body}");
        assert!(
            !body.contains("jsonrpc"),
            "{what}: nothing else is said: {body}"
        );
    }
    // The secret in the path, for clients that take only a URL; another path is not served.
    let (got, body) = exchange(
        server.address,
        &post(&format!("/mcp/{}", server.secret), &host, INITIALIZE),
    );
    assert_eq!(got, 200, "{body}");
    assert!(body.contains("\"serverInfo\""), "{body}");
    let (got, _) = exchange(
        server.address,
        &post("/other", &format!("{host}{bearer}"), INITIALIZE),
    );
    assert_eq!(got, 404);
    // Nothing refused reached the audit log or ran.
    assert!(audit_lines(&place).is_empty());
}

#[test]
fn an_oversized_body_is_refused_declared_or_not() {
    let place = place();
    let server = serve(&place, &[]);
    let headers = format!(
        "Host: {}\r\nAuthorization: Bearer {}\r\n",
        server.address, server.secret
    );
    let declared = format!(
        "POST /mcp HTTP/1.1\r\n{headers}Content-Type: application/json\r\nContent-Length: 999999999\r\nConnection: close\r\n\r\n{{"
    );
    assert_eq!(exchange(server.address, &declared).0, 413);
    // Chunked, with no length said: counted as it arrives and stopped at the bound.
    let mut stream = TcpStream::connect(server.address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\n{headers}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let chunk = vec![b' '; 1 << 20];
    for _ in 0..20 {
        if write!(stream, "{:x}\r\n", chunk.len())
            .and_then(|()| stream.write_all(&chunk))
            .and_then(|()| stream.write_all(b"\r\n"))
            .is_err()
        {
            break; // The server stopped reading: refused.
        }
    }
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer:.200}");
}

#[test]
fn a_client_that_stalls_or_never_reads_holds_up_no_other_session() {
    let Some(python) = python() else { return };
    let place = place();
    std::fs::write(place.root.join("big.txt"), "line of text\n".repeat(400_000)).unwrap();
    let server = serve(&place, &["--allow-changes", "--approve", "auto"]);
    let headers = format!(
        "Host: {}\r\nAuthorization: Bearer {}\r\n",
        server.address, server.secret
    );
    // One connection sends half its headers and stops.
    let mut stalled = TcpStream::connect(server.address).unwrap();
    stalled
        .write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0")
        .unwrap();
    // Others open a session and ask for large reads they never read.
    let mut unread = Vec::new();
    for _ in 0..4 {
        let mut stream = TcpStream::connect(server.address).unwrap();
        stream
            .write_all(post("/mcp", &headers, INITIALIZE).as_bytes())
            .unwrap();
        unread.push(stream);
    }
    let big = place.root.join("big.txt");
    let read_many = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"fs_read","arguments":{{"path":"{}"}},"_meta":{{"progressToken":"x","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{{"name":"never-reads","version":"1"}},"io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#,
        big.display()
    );
    for _ in 0..8 {
        let mut stream = TcpStream::connect(server.address).unwrap();
        let modern = format!(
            "{headers}MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: fs_read\r\n"
        );
        stream
            .write_all(post("/mcp", &modern, &read_many).as_bytes())
            .unwrap();
        unread.push(stream);
    }
    // Meanwhile a client works as usual, in both eras.
    for mode in MODES {
        let report = play(&python, &place, &server, "tools", mode);
        for call in report["calls"].as_array().unwrap() {
            assert_eq!(call["isError"], false, "{mode}: {call}");
        }
    }
    // The stalled connection is closed for not finishing its headers.
    stalled
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut rest = Vec::new();
    let closed = stalled.read_to_end(&mut rest);
    assert!(closed.is_ok() || rest.is_empty(), "{closed:?}");
    drop(unread);
    // And the server still serves after they are gone.
    let (status, body) = exchange(server.address, &post("/mcp", &headers, INITIALIZE));
    assert_eq!(status, 200, "{body}");
}

#[test]
fn the_secret_is_kept_private_shown_by_a_command_and_rotated_at_once() {
    let place = place();
    let show = |flag: &str| -> String {
        let output = Command::new(env!("CARGO_BIN_EXE_flycode"))
            .args(["mcp", flag])
            .env("FLYCODE_STATE_DIR", &place.state)
            .env("XDG_CONFIG_HOME", &place.config)
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        let text = String::from_utf8(output.stdout).unwrap();
        let secret = text
            .lines()
            .find_map(|line| line.strip_prefix("secret: "))
            .unwrap()
            .to_owned();
        assert!(
            text.contains(&format!("header: Authorization: Bearer {secret}")),
            "{text}"
        );
        assert!(text.contains(&format!("/mcp/{secret}")), "{text}");
        secret
    };
    let first = show("--show-secret");
    assert_eq!(first.len(), 64);
    assert_eq!(show("--show-secret"), first, "shown again, not made again");
    let file = place.state.join("mcp-http.key");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );

    let server = serve(&place, &[]);
    assert_eq!(server.secret, first, "the server uses the kept secret");
    let with = |secret: &str| {
        format!(
            "Host: {}\r\nAuthorization: Bearer {secret}\r\n",
            server.address
        )
    };
    assert_eq!(
        exchange(server.address, &post("/mcp", &with(&first), INITIALIZE)).0,
        200
    );
    let second = show("--rotate-secret");
    assert_ne!(second, first);
    // The running server refuses the old secret from its next request on.
    assert_eq!(
        exchange(server.address, &post("/mcp", &with(&first), INITIALIZE)).0,
        401
    );
    assert_eq!(
        exchange(server.address, &post("/mcp", &with(&second), INITIALIZE)).0,
        200
    );
}
