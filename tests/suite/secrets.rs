//! Secrets, whatever the shape (issue 22, item 1), against the real binary with the key in its
//! environment: a key in a file read as base64 or hex, in two ranges split anywhere, through
//! head, tail and lines, found by fs.search, printed encoded by a program, or written into a
//! call's id never comes back whole or in pieces: not in the block, not in `--json`, not in the
//! audit log (PROTOCOL.md §9, "Secrets and masking").

use std::path::PathBuf;

use base64::Engine;
use serde_json::{Value, json};

use super::common::flycode;

const KEY: &str = "sk-proj-Zq8vK2mN4pR7tW1xY5bC9dF3gH6jL0aE";
const FILE: &str = "OPENAI_API_KEY=sk-proj-Zq8vK2mN4pR7tW1xY5bC9dF3gH6jL0aE\nnext line\n";

struct Workspace {
    _temp: tempfile::TempDir,
    root: PathBuf,
    state: PathBuf,
    config: PathBuf,
}

fn workspace() -> Workspace {
    let temp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(temp.path()).unwrap();
    let (root, state, config) = (base.join("root"), base.join("state"), base.join("config"));
    for dir in [&root, &state, &config] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(root.join("key.env"), FILE).unwrap();
    Workspace {
        _temp: temp,
        root,
        state,
        config,
    }
}

impl Workspace {
    /// Runs one call with the key in flycode's environment and returns the `--json` report.
    fn call_with_id(&self, id: &str, tool: &str, args: Value) -> Value {
        let call = json!({"id": id, "tool": tool, "args": args});
        let output = flycode()
            .args(["exec", "--json", "--approve", "auto", "--root"])
            .arg(&self.root)
            .env("FLYCODE_STATE_DIR", &self.state)
            .env("XDG_CONFIG_HOME", &self.config)
            .env("OPENAI_API_KEY", KEY)
            .current_dir(&self.root)
            .write_stdin(format!("```flycode-call\n{call}\n```\n"))
            .output()
            .unwrap();
        let shown = String::from_utf8_lossy(&output.stdout);
        assert!(!shown.contains(KEY), "the key reached the output: {shown}");
        serde_json::from_slice(&output.stdout).unwrap_or_else(|_| {
            panic!(
                "no JSON report: {}",
                String::from_utf8_lossy(&output.stderr)
            )
        })
    }

    fn call(&self, tool: &str, args: Value) -> Value {
        self.call_with_id("c1", tool, args)
    }

    fn path(&self, name: &str) -> String {
        self.root.join(name).display().to_string()
    }

    /// The content of an fs.read, decoded.
    fn read(&self, args: Value) -> String {
        let mut args = args.as_object().unwrap().clone();
        args.insert("path".into(), json!(self.path("key.env")));
        let encoding = args
            .get("encoding")
            .and_then(Value::as_str)
            .unwrap_or("utf-8")
            .to_owned();
        let report = self.call("fs.read", Value::Object(args));
        assert_eq!(report["ok"], true, "{report}");
        let content = report["result"]["content"].as_str().unwrap();
        let bytes = match encoding.as_str() {
            "base64" => base64::engine::general_purpose::STANDARD
                .decode(content)
                .unwrap(),
            "hex" => hex::decode(content).unwrap(),
            _ => content.as_bytes().to_vec(),
        };
        String::from_utf8(bytes).unwrap()
    }

    fn audit(&self) -> String {
        std::fs::read_to_string(self.state.join("audit.jsonl")).unwrap()
    }
}

/// The file as every read must show it: the key's bytes as `*`, nothing else changed.
fn masked() -> String {
    FILE.replace(KEY, &"*".repeat(KEY.len()))
}

#[test]
fn base64_and_hex_reads_return_no_decodable_key() {
    let w = workspace();
    for encoding in ["base64", "hex"] {
        assert_eq!(
            w.read(json!({"encoding": encoding})),
            masked(),
            "{encoding}"
        );
    }
}

#[test]
fn two_ranges_split_anywhere_in_the_key_never_show_both_halves() {
    let w = workspace();
    let key_at = FILE.find(KEY).unwrap();
    for split in key_at..=key_at + KEY.len() {
        for encoding in ["utf-8", "base64"] {
            let first = w.read(json!({"encoding": encoding, "range": format!("0-{split}")}));
            let second = w.read(json!({"encoding": encoding, "range": format!("{split}-")}));
            assert_eq!(first, masked()[..split], "{encoding} split {split}");
            assert_eq!(second, masked()[split..], "{encoding} split {split}");
        }
    }
}

#[test]
fn head_tail_and_lines_windows_mask_what_they_show_of_the_key() {
    let w = workspace();
    let masked = masked();
    let key_at = FILE.find(KEY).unwrap();
    for n in [key_at + 1, key_at + 10, key_at + KEY.len() - 1] {
        assert_eq!(w.read(json!({"head": n})), masked[..n], "head {n}");
        let tail = FILE.len() - n;
        assert_eq!(w.read(json!({"tail": tail})), masked[n..], "tail {tail}");
    }
    assert_eq!(
        w.read(json!({"line": 1})),
        masked.lines().next().unwrap().to_owned() + "\n"
    );
    assert_eq!(w.read(json!({"lines": "1-2", "encoding": "hex"})), masked);
}

/// A file over the size read whole is streamed: the margins around the part are read from the
/// file, and a part cut inside the key still shows none of it.
#[test]
fn a_streamed_part_of_a_large_file_masks_the_key_at_its_edges() {
    let w = workspace();
    let filler = "x".repeat(2 * 1024 * 1024);
    let content = format!("{filler}{FILE}");
    std::fs::write(w.root.join("key.env"), &content).unwrap();
    let key_at = content.find(KEY).unwrap();
    for split in [key_at + 1, key_at + KEY.len() / 2, key_at + KEY.len() - 1] {
        let first = w.read(json!({"range": format!("{}-{split}", key_at - 5)}));
        let second = w.read(json!({"range": format!("{split}-{}", key_at + KEY.len() + 5)}));
        let clear = |text: &str| text.trim_matches(|c| c == '*').to_owned();
        assert!(
            !first.contains("sk-") && !second.contains("sk-"),
            "{first} {second}"
        );
        assert_eq!(clear(&first), "_KEY=", "{first}");
        assert_eq!(clear(&second), "\nnext", "{second}");
    }
}

#[test]
fn a_key_in_the_call_id_is_masked_in_the_block_the_json_and_the_audit_log() {
    let w = workspace();
    let id = format!("leak-{KEY}");
    let report = w.call_with_id(&id, "fs.ls", json!({"path": w.path(".")}));
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["id"], "leak-***");
    let text = report["text"].as_str().unwrap();
    assert!(text.contains("[id] leak-***"), "{text}");
    // A failed call: the id and the error both.
    let report = w.call_with_id(&id, "fs.read", json!({"path": w.path(KEY)}));
    assert_eq!(report["ok"], false, "{report}");
    let audit = w.audit();
    assert!(!audit.contains(KEY), "{audit}");
    assert!(audit.contains(r#""id":"leak-***""#), "{audit}");
}

#[test]
fn fs_search_shows_the_line_masked_and_cannot_find_a_piece_of_the_key() {
    let w = workspace();
    let report = w.call(
        "fs.search",
        json!({"path": w.path("."), "query": "OPENAI_API_KEY", "contextLines": 1}),
    );
    let text = report["text"].as_str().unwrap();
    assert!(
        text.contains(&format!("OPENAI_API_KEY={}", "*".repeat(KEY.len()))),
        "{text}"
    );
    for guess in ["sk-proj-Z", "Zq8vK2mN", "jL0aE"] {
        let report = w.call("fs.search", json!({"path": w.path("."), "query": guess}));
        assert_eq!(report["ok"], true, "{report}");
        let text = report["text"].as_str().unwrap();
        assert!(!text.contains("key.env:1"), "{guess} found: {text}");
    }
    assert!(!w.audit().contains(KEY));
}

#[test]
fn a_program_printing_the_key_in_base64_or_hex_shows_it_masked() {
    let w = workspace();
    let report = w.call(
        "shell.exec",
        json!({"command": "base64 -w0 key.env; echo; od -An -tx1 -v key.env | tr -d ' \\n'; echo"}),
    );
    assert_eq!(report["ok"], true, "{report}");
    let stdout = report["result"]["stdout"].as_str().unwrap();
    assert!(stdout.contains("***"), "{stdout}");
    // Each masked byte stands for one character of the encoding: put a valid one back in its
    // place, so the line decodes, and look for any piece of the key in what it says.
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(lines[0].replace('*', "A"))
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&decoded).contains("Zq8v"),
        "{}",
        lines[0]
    );
    let decoded = hex::decode(lines[1].replace('*', "0")).unwrap();
    assert!(
        !String::from_utf8_lossy(&decoded).contains("Zq8v"),
        "{}",
        lines[1]
    );
}

/// `flycode mcp`: a request id holding the key and a base64 read of the key file: no answer line
/// (text or structured content) and no audit line holds the key, decoded or not.
#[test]
fn an_mcp_answer_and_its_audit_line_hold_no_key() {
    use std::io::{BufRead, BufReader, Write};
    let w = workspace();
    let mut child = flycode_std()
        .args(["mcp", "--root"])
        .arg(&w.root)
        .env("FLYCODE_STATE_DIR", &w.state)
        .env("XDG_CONFIG_HOME", &w.config)
        .env("OPENAI_API_KEY", KEY)
        .current_dir(&w.root)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let read = json!({
        "jsonrpc": "2.0", "id": format!("id-{KEY}"), "method": "tools/call",
        "params": {"name": "fs_read", "arguments": {"path": w.path("key.env"), "encoding": "base64"}}
    });
    let missing = json!({
        "jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "fs_read", "arguments": {"path": w.path(KEY)}}
    });
    for line in [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned(),
        read.to_string(),
        missing.to_string(),
    ] {
        writeln!(stdin, "{line}").unwrap();
    }
    stdin.flush().unwrap();
    let mut output = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut answers = Vec::new();
    while answers.len() < 3 {
        let line = output.next().expect("the server closed early").unwrap();
        answers.push(line);
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let encoded = base64::engine::general_purpose::STANDARD.encode(FILE);
    let masked = base64::engine::general_purpose::STANDARD.encode(masked());
    let read_answer = answers
        .iter()
        .find(|a| a.contains(&masked))
        .expect("the read's answer");
    for answer in &answers {
        // The JSON-RPC id is the client's own and goes back as sent; the result holds no key.
        let value: Value = serde_json::from_str(answer).unwrap();
        let result = value["result"].to_string();
        assert!(
            !result.contains(KEY) && !result.contains(&encoded),
            "{answer}"
        );
    }
    assert!(read_answer.contains("mcp-id-***"), "{read_answer}");
    let audit = w.audit();
    assert!(!audit.contains(KEY), "{audit}");
    assert!(audit.contains("mcp-id-***"), "{audit}");
}

fn flycode_std() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_flycode"))
}

/// Every key variable flycode reads is a secret at every door, not only where `flycode run`
/// picked it: `LLM_API_KEY` (read by `run` when `FLYCODE_API_KEY` is unset) and the variable a
/// user's `[agent] api_key_env` names. A program the model starts through `flycode exec`
/// prints its environment and the key file in the root: no key reaches the answer.
#[test]
fn every_key_variable_is_kept_from_programs_and_masked_at_exec() {
    let w = workspace();
    let llm_key = "llm-Hq4zR8sT2uV6wX0yA3bC5dE7fG9hJ1kL";
    let mine = "mine-Pp3oO9iI8uU7yY6tT5rR4eE2wW1qQ0zZ";
    std::fs::create_dir_all(w.config.join("flycode")).unwrap();
    std::fs::write(
        w.config.join("flycode/flycode.toml"),
        "[agent]\napi_key_env = \"MY_PROVIDER_KEY\"\n",
    )
    .unwrap();
    std::fs::write(
        w.root.join("keys.txt"),
        format!("LLM_API_KEY={llm_key}\nMY_PROVIDER_KEY={mine}\n"),
    )
    .unwrap();
    let call = json!({"id": "c1", "tool": "shell.exec", "args": {
        "command": "echo \"env: [$LLM_API_KEY] [$MY_PROVIDER_KEY]\"; cat keys.txt"
    }});
    let output = flycode()
        .args(["exec", "--json", "--approve", "auto", "--root"])
        .arg(&w.root)
        .env("FLYCODE_STATE_DIR", &w.state)
        .env("XDG_CONFIG_HOME", &w.config)
        .env("LLM_API_KEY", llm_key)
        .env("MY_PROVIDER_KEY", mine)
        .current_dir(&w.root)
        .write_stdin(format!("```flycode-call\n{call}\n```\n"))
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&output.stdout);
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    if shown.contains("Landlock") && report["ok"] == false {
        eprintln!("skipped: this kernel cannot contain programs ({shown})");
        return;
    }
    assert!(
        shown.contains("env: [] []"),
        "the keys reached the program: {shown}"
    );
    for key in [llm_key, mine] {
        assert!(!shown.contains(key), "a key reached the answer: {shown}");
        assert!(!shown.contains(&key[..12]), "{shown}");
    }
    assert!(shown.contains("LLM_API_KEY=****"), "{shown}");
    assert!(!w.audit().contains(llm_key));
}

/// The same at `flycode mcp`, the door an MCP client starts with the person's environment.
#[test]
fn llm_api_key_is_kept_from_programs_and_masked_at_mcp() {
    let w = workspace();
    let llm_key = "llm-Hq4zR8sT2uV6wX0yA3bC5dE7fG9hJ1kL";
    std::fs::write(w.root.join("keys.txt"), format!("{llm_key}\n")).unwrap();
    let mut server = McpServer::start(&w, ("LLM_API_KEY", llm_key));
    server.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "shell_exec", "arguments": {"command": "echo \"env: [$LLM_API_KEY]\"; cat keys.txt"}}}));
    let answer = server.answer(2);
    assert!(server.finish());
    if answer.contains("Landlock") && answer.contains("\"isError\":true") {
        eprintln!("skipped: this kernel cannot contain programs ({answer})");
        return;
    }
    assert!(
        answer.contains("env: []"),
        "the key reached the program: {answer}"
    );
    assert!(!answer.contains(&llm_key[..12]), "{answer}");
}

/// `flycode mcp --approve auto` on the workspace's root with one key variable set, initialized,
/// driven line by line.
struct McpServer {
    child: std::process::Child,
    input: Option<std::process::ChildStdin>,
    output: std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
}

impl McpServer {
    fn start(w: &Workspace, (variable, key): (&str, &str)) -> McpServer {
        use std::io::BufRead;
        let mut child = flycode_std()
            .args(["mcp", "--approve", "auto", "--root"])
            .arg(&w.root)
            .env("FLYCODE_STATE_DIR", &w.state)
            .env("XDG_CONFIG_HOME", &w.config)
            .env(variable, key)
            .current_dir(&w.root)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let input = child.stdin.take();
        let output = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let mut server = McpServer {
            child,
            input,
            output,
        };
        server.send(json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}));
        server.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        server
    }

    fn send(&mut self, message: Value) {
        use std::io::Write;
        let input = self.input.as_mut().unwrap();
        writeln!(input, "{message}").unwrap();
        input.flush().unwrap();
    }

    /// The answer to request `id`, the lines before it passed over.
    fn answer(&mut self, id: u64) -> String {
        let marker = format!("\"id\":{id}");
        loop {
            let line = self
                .output
                .next()
                .expect("the server closed early")
                .unwrap();
            if line.contains(&marker) {
                return line;
            }
        }
    }

    /// Closes the server's input, reads what is left and says whether it exited cleanly.
    fn finish(mut self) -> bool {
        drop(self.input.take());
        for _ in self.output.by_ref() {}
        self.child.wait().unwrap().success()
    }
}

impl Drop for McpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A background job's output is cut into lines of 16 KiB; a program that places the key right
/// across the cut (16374 bytes, then the key read from a file in the root) must not get the
/// two halves past the masking, each too short to be recognised on its own.
#[test]
fn a_key_cut_by_a_job_logs_line_split_is_masked_on_both_sides() {
    let w = workspace();
    std::fs::write(w.root.join("key.only"), KEY).unwrap();
    let mut server = McpServer::start(&w, ("OPENAI_API_KEY", KEY));
    let script = "head -c 16374 /dev/zero | tr '\\0' x; cat key.only; echo ' tail'";
    server.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "shell_exec", "arguments": {"command": script, "background": true}}}));
    let started = server.answer(2);
    if started.contains("Landlock") && started.contains("\"isError\":true") {
        eprintln!("skipped: this kernel cannot contain programs ({started})");
        return;
    }
    server.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "job_log", "arguments": {"jobId": "job-1", "startLine": 3, "waitMs": 60000}}}));
    server.answer(3);
    server.send(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "job_log", "arguments": {"jobId": "job-1"}}}));
    let log = server.answer(4);
    assert!(server.finish());
    assert!(log.contains("[lines] 2"), "{log}");
    assert!(log.contains(" tail"), "{log}");
    for half in [&KEY[..10], &KEY[10..], &KEY[..8], &KEY[KEY.len() - 8..]] {
        assert!(
            !log.contains(half),
            "a piece of the key, {half}, is shown: {log}"
        );
    }
}
