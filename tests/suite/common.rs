//! Helpers shared by the integration tests.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

/// The repository's root directory.
pub(super) fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The real `flycode` binary, ready to run.
pub(super) fn flycode() -> Command {
    Command::new(env!("CARGO_BIN_EXE_flycode"))
}

/// Files with `extension` directly inside `dir`, sorted by name.
pub(super) fn files_in(dir: &Path, extension: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == extension))
        .collect();
    files.sort();
    files
}

/// Waits (up to 30 s) for the file at `path` to exist and returns its content.
pub(super) fn wait_for_file(path: &Path) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        if let Ok(text) = std::fs::read_to_string(path) {
            return text;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("{} never appeared", path.display());
}

/// Reads `child`'s standard error (piped) up to the first `marker` and returns what it read; the
/// rest stays in the pipe for whoever collects the output later. Panics if the child ends first.
pub(super) fn read_stderr_until(child: &mut std::process::Child, marker: &str) -> String {
    use std::io::Read;
    let mut stderr = child.stderr.take().expect("standard error is piped");
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    while !seen.ends_with(marker.as_bytes()) {
        match stderr.read(&mut byte) {
            Ok(1) => seen.push(byte[0]),
            _ => panic!(
                "the program ended before it printed {marker:?}: {}",
                String::from_utf8_lossy(&seen)
            ),
        }
    }
    child.stderr = Some(stderr);
    String::from_utf8_lossy(&seen).into_owned()
}

/// Sends `signal` (`TERM`, `INT`) to the process `pid`, as a person's `kill` or Ctrl-C would.
pub(super) fn send_signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success(), "kill -{signal} {pid} failed");
}

/// A temporary place to run `flycode exec` in: a canonicalized folder holding the allowed root
/// `root/` and, beside it, the state folder `state` (made by flycode when it needs it).
pub(super) struct Workspace {
    _temp: tempfile::TempDir,
    pub root: PathBuf,
    pub state: PathBuf,
}

impl Workspace {
    pub(super) fn new() -> Workspace {
        let temp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(temp.path()).unwrap();
        let root = base.join("root");
        std::fs::create_dir_all(&root).unwrap();
        Workspace {
            state: base.join("state"),
            root,
            _temp: temp,
        }
    }

    /// The absolute path of `name` inside the root, as text.
    pub(super) fn path(&self, name: &str) -> String {
        self.root.join(name).display().to_string()
    }

    /// `flycode exec --json --root ROOT FLAGS`, run in the root with this workspace's state
    /// folder and no `XDG_CONFIG_HOME`.
    pub(super) fn exec_command(&self, flags: &[&str]) -> Command {
        let mut command = flycode();
        command
            .args(["exec", "--json", "--root"])
            .arg(&self.root)
            .args(flags)
            .env("FLYCODE_STATE_DIR", &self.state)
            .env_remove("XDG_CONFIG_HOME")
            .current_dir(&self.root);
        command
    }

    /// Runs one call, sent as a `flycode-call` block on standard input, with
    /// [`exec_command`](Self::exec_command); what flycode printed.
    pub(super) fn exec_output(&self, call: &Value, flags: &[&str]) -> std::process::Output {
        let reply = format!("```flycode-call\n{call}\n```\n");
        self.exec_command(flags)
            .write_stdin(reply)
            .output()
            .unwrap()
    }

    /// The same; the exit code and the `--json` report (`null` if standard output is not JSON).
    pub(super) fn exec_json(&self, call: &Value, flags: &[&str]) -> (i32, Value) {
        let output = self.exec_output(call, flags);
        let report = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
        (output.status.code().unwrap(), report)
    }
}

/// Writes a journal record into `state/journal/NAME` as flycode itself would: sealed with the
/// state directory's key (made if there is none yet).
pub(super) fn write_journal_record(state: &std::path::Path, name: &str, record: &Value) {
    use flycode::sandbox::seal::{Purpose, SealKey};
    let key = SealKey::in_dir(state).unwrap();
    std::fs::create_dir_all(state.join("journal")).unwrap();
    let sealed = key.wrap(Purpose::Journal, name, &record.to_string());
    std::fs::write(state.join("journal").join(name), sealed).unwrap();
}

/// A fresh temporary folder (canonicalized, so paths compare with what flycode prints) and an
/// empty folder `root_name` inside it: the temp-dir guard, the base and the root.
pub(super) fn temp_base_with_root(root_name: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let temp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(temp.path()).unwrap();
    let root = base.join(root_name);
    std::fs::create_dir_all(&root).unwrap();
    (temp, base, root)
}

/// The real binary in a clean environment for `flycode run`: no inherited `FLYCODE_*`,
/// `OPENAI_*` or `LLM_*` variables, `base` as HOME, `base/state` as the state folder, no
/// `XDG_CONFIG_HOME`, no colour, run in `root`. The caller adds the arguments.
pub(super) fn clean_run_command(base: &Path, root: &Path) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_flycode"));
    for (name, _) in std::env::vars() {
        if name.starts_with("FLYCODE_") || name.starts_with("OPENAI_") || name.starts_with("LLM_") {
            command.env_remove(name);
        }
    }
    command
        .current_dir(root)
        .env("HOME", base)
        .env_remove("XDG_CONFIG_HOME")
        .env("FLYCODE_STATE_DIR", base.join("state"))
        .env("NO_COLOR", "1");
    command
}

/// Asserts that `flycode validate PATH` accepts the file (a transcript, a seed).
pub(super) fn assert_validates(path: &Path) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_flycode"))
        .arg("validate")
        .arg(path)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "flycode validate {}: {}{}",
        path.display(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Starts `flycode watch --yes --interval-ms 20 --quiet-ms 100 --inbox INBOX --root ROOT EXTRA`
/// with `state` as its state folder, no user configuration unless `env` sets one, and its
/// standard error piped; returns once it says it is watching ("Ctrl-C stops."): a file saved
/// after that is answered, one saved before counts as present at the start.
pub(super) fn spawn_watch(
    inbox: &Path,
    root: &Path,
    state: &Path,
    extra: &[&str],
    env: &[(&str, &Path)],
) -> std::process::Child {
    use std::process::Stdio;
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_flycode"));
    command
        .args(["watch", "--yes", "--interval-ms", "20", "--quiet-ms", "100"])
        .args(extra)
        .arg("--inbox")
        .arg(inbox)
        .arg("--root")
        .arg(root)
        .env("FLYCODE_STATE_DIR", state)
        .env_remove("XDG_CONFIG_HOME")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (name, value) in env {
        command.env(name, value);
    }
    let mut child = command.spawn().unwrap();
    read_stderr_until(&mut child, "Ctrl-C stops.");
    child
}

/// A raw HTTP/1.1 exchange on a fresh connection (the request should say `Connection: close`):
/// the status and the body.
pub(super) fn http_exchange(address: std::net::SocketAddr, request: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
    (status, body)
}
