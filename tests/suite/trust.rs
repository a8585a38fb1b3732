//! Layered settings and trust (PROTOCOL.md §10 "Configuration"): an untrusted project file can
//! only tighten, `flycode trust` lets it loosen until the file changes, the user's protected paths
//! and secrets survive any project file, `flycode config` says where each setting comes from and
//! `--check` reports every mistake at once. Every test has its own HOME, XDG_CONFIG_HOME and state
//! directory, and runs flycode in a session of its own (`setsid`): no terminal can answer.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::{Value, json};

/// A home with a user configuration directory, a project (a git repository) and a folder
/// outside it.
struct Place {
    _temp: tempfile::TempDir,
    home: PathBuf,
    config: PathBuf,
    state: PathBuf,
    project: PathBuf,
    outside: PathBuf,
}

impl Place {
    fn new() -> Place {
        let temp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(temp.path()).unwrap();
        let place = Place {
            home: base.join("home"),
            config: base.join("config"),
            state: base.join("state"),
            project: base.join("project"),
            outside: base.join("outside"),
            _temp: temp,
        };
        for dir in [
            &place.home,
            &place.config.join("flycode"),
            &place.project.join(".git"),
            &place.project.join("src"),
            &place.outside,
        ] {
            std::fs::create_dir_all(dir).unwrap();
        }
        place
    }

    fn user_file(&self, text: &str) {
        std::fs::write(self.config.join("flycode/flycode.toml"), text).unwrap();
    }

    fn project_file(&self, text: &str) {
        std::fs::write(self.project.join("flycode.toml"), text).unwrap();
    }

    /// `flycode ARGS` in `cwd`, without a terminal.
    fn flycode_in(&self, cwd: &Path, args: &[&str]) -> Command {
        let mut command = Command::new("setsid");
        command
            .arg(env!("CARGO_BIN_EXE_flycode"))
            .args(args)
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", &self.config)
            .env("FLYCODE_STATE_DIR", &self.state)
            .env_remove("XDG_STATE_HOME")
            .current_dir(cwd);
        command
    }

    /// `flycode ARGS` in the project's `src` folder.
    fn flycode(&self, args: &[&str]) -> Command {
        self.flycode_in(&self.project.join("src"), args)
    }

    /// Runs one call with `flycode exec --json FLAGS`: the report and standard error.
    fn exec(&self, call: &Value, flags: &[&str]) -> (Value, String) {
        self.exec_with(call, flags, &[])
    }

    fn exec_with(&self, call: &Value, flags: &[&str], env: &[(&str, &str)]) -> (Value, String) {
        let mut args = vec!["exec", "--json"];
        args.extend_from_slice(flags);
        let output = self
            .flycode(&args)
            .envs(env.iter().copied())
            .write_stdin(format!("```flycode-call\n{call}\n```\n"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        let report = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|_| panic!("no JSON report; stderr: {stderr}"));
        (report, stderr)
    }

    fn shell(&self, command: &str, flags: &[&str]) -> (Value, String) {
        self.exec(
            &json!({"id": "c1", "tool": "shell.exec", "args": {"command": command}}),
            flags,
        )
    }

    fn trust(&self) -> String {
        let output = self.flycode(&["trust"]).output().unwrap();
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout).unwrap()
    }
}

const LOOSENING: &str = "approval = \"auto\"\nprocess_sandbox = \"off\"\nroots = [\"OUTSIDE\"]\n\n[tools]\n\"shell.exec\" = \"allow\"\n";

fn loosening(place: &Place) -> String {
    LOOSENING.replace("OUTSIDE", &place.outside.display().to_string())
}

#[test]
fn an_untrusted_project_file_cannot_loosen_and_says_what_it_ignored() {
    let place = Place::new();
    place.project_file(&loosening(&place));
    let victim = place.outside.join("pwned");
    let command = format!("echo pwned > {}", victim.display());

    // approval auto and the shell.exec rule are ignored: the call asks, and no one can answer.
    let (report, stderr) = place.shell(&command, &[]);
    assert_eq!(report["error"]["code"], "denied_by_policy", "{report}");
    assert!(!victim.exists());
    let file = place.project.join("flycode.toml").display().to_string();
    for line in [
        format!("{file}:1: approval = \"auto\""),
        format!("{file}:2: process_sandbox = \"off\""),
        format!("{file}:3: roots = ["),
        format!("{file}:6: [tools] \"shell.exec\" = \"allow\""),
        format!("run: flycode trust {}", place.project.display()),
    ] {
        assert!(stderr.contains(&line), "{line:?} missing from:\n{stderr}");
    }
    assert_eq!(stderr.matches("is not trusted").count(), 1, "{stderr}");

    // The root outside is ignored: the root is the working directory, inside the project.
    let (report, _) = place.exec(
        &json!({"id": "w", "tool": "fs.write", "args": {"path": victim.display().to_string(), "mode": "overwrite", "content": "x"}}),
        &[],
    );
    assert_eq!(report["error"]["code"], "outside_roots", "{report}");
    assert!(!victim.exists());

    // process_sandbox = "off" is ignored: allowed by the person, the program is still contained
    // (or, on a kernel without Landlock, refused), and writes nothing outside the roots.
    let (report, _) = place.shell(&command, &["--yes"]);
    assert!(!victim.exists(), "{report}");

    // A harmless read still works.
    std::fs::write(place.project.join("src/main.rs"), "fn main() {}\n").unwrap();
    let (report, _) = place.exec(
        &json!({"id": "r", "tool": "fs.read", "args": {"path": place.project.join("src/main.rs").display().to_string()}}),
        &[],
    );
    assert_eq!(report["ok"], true, "{report}");
    assert!(report["text"].as_str().unwrap().contains("fn main"));
}

#[test]
fn a_trusted_project_file_applies_until_it_changes() {
    let place = Place::new();
    place.project_file(&loosening(&place));
    let said = place.trust();
    assert!(said.contains("trusted"), "{said}");
    assert!(said.contains("approval = \"auto\""), "{said}");

    let victim = place.outside.join("trusted");
    let (report, stderr) = place.shell(&format!("echo yes > {}", victim.display()), &[]);
    assert_eq!(report["ok"], true, "{report}\n{stderr}");
    assert!(!stderr.contains("is not trusted"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "yes\n");

    // Listed as trusted; a change to the file makes it untrusted again.
    let list = place.flycode(&["trust", "--list"]).output().unwrap();
    let list = String::from_utf8(list.stdout).unwrap();
    assert!(
        list.contains(&place.project.display().to_string()) && list.contains("trusted"),
        "{list}"
    );
    let mut text = loosening(&place);
    text.push_str("# one more line\n");
    place.project_file(&text);
    let second = place.outside.join("changed");
    let (report, stderr) = place.shell(&format!("echo no > {}", second.display()), &[]);
    assert_eq!(report["error"]["code"], "denied_by_policy", "{report}");
    assert!(!second.exists());
    assert!(stderr.contains("is not trusted"), "{stderr}");
    let list = place.flycode(&["trust", "--list"]).output().unwrap();
    assert!(
        String::from_utf8(list.stdout)
            .unwrap()
            .contains("changed since")
    );

    // Trusted again, then revoked.
    place.trust();
    place.flycode(&["trust", "--revoke"]).assert().success();
    let (report, _) = place.shell(&format!("echo no > {}", second.display()), &[]);
    assert_eq!(report["error"]["code"], "denied_by_policy", "{report}");
    assert!(!second.exists());
}

#[test]
fn the_users_protected_paths_and_secrets_survive_a_project_file() {
    let place = Place::new();
    place.user_file("protected = [\"**/keep/**\"]\nsecret_env = [\"MY_SECRET_VAR\"]\n");
    place.project_file("protected = [\"**/other/**\"]\nsecret_env = [\"OTHER_VAR\"]\n");
    // Trusted or not, a project file adds to the lists and never replaces them.
    for trusted in [false, true] {
        if trusted {
            place.trust();
        }
        let keep = place.project.join("src/keep/a.txt");
        let (report, _) = place.exec(
            &json!({"id": "p", "tool": "fs.write", "args": {"path": keep.display().to_string(), "mode": "overwrite", "content": "x", "createDirs": true}}),
            &[],
        );
        assert_eq!(report["ok"], false, "{report}");
        assert!(!keep.exists());
        let output = place
            .flycode(&["config", "--json"])
            .env("MY_SECRET_VAR", "value-of-the-secret-1234")
            .output()
            .unwrap();
        let config: Value = serde_json::from_slice(&output.stdout).unwrap();
        let setting = |key: &str| {
            config["settings"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["key"] == key)
                .cloned()
                .unwrap()
        };
        assert_eq!(
            setting("secret_env")["value"],
            json!(["MY_SECRET_VAR", "OTHER_VAR"])
        );
        assert_eq!(
            setting("protected")["value"],
            json!(["**/keep/**", "**/other/**"])
        );
        // A program never sees the user's secret variable.
        let (report, stderr) = place.exec_with(
            &json!({"id": "c1", "tool": "shell.exec", "args": {"command": "printenv MY_SECRET_VAR; echo \"[$?]\""}}),
            &["--yes"],
            &[("MY_SECRET_VAR", "value-of-the-secret-1234")],
        );
        assert_eq!(report["ok"], true, "{report}\n{stderr}");
        let text = report["text"].as_str().unwrap();
        assert!(!text.contains("value-of-the-secret"), "{text}");
        // printenv found no such variable.
        assert!(text.contains("[1]"), "{text}");
    }
}

#[test]
fn flycode_config_names_the_source_of_every_setting() {
    let place = Place::new();
    place.user_file("timeout_ms = 5000\n[agent]\nmodel = \"user-model\"\n");
    place.project_file("output_cap = 4096\napproval = \"auto\"\n[agent]\nmax_turns = 9\n");
    let output = place
        .flycode(&["config", "--tools", "extended"])
        .env("FLYCODE_MODEL", "env-model")
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let text = String::from_utf8(output.stdout).unwrap();
    let user = place
        .config
        .join("flycode/flycode.toml")
        .display()
        .to_string();
    let project = place.project.join("flycode.toml").display().to_string();
    let line = |key: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{key} ")))
            .unwrap_or_else(|| panic!("no {key} in:\n{text}"))
            .to_owned()
    };
    assert!(
        line("timeout_ms").ends_with(&format!("# {user}:1")),
        "{text}"
    );
    assert!(
        line("output_cap").ends_with(&format!("# {project}:1")),
        "{text}"
    );
    assert!(
        line("[agent] max_turns").ends_with(&format!("# {project}:4")),
        "{text}"
    );
    assert!(
        line("[agent] model").contains("\"env-model\"  # variable FLYCODE_MODEL"),
        "{text}"
    );
    assert!(line("[tools] set").ends_with("# flag --tools"), "{text}");
    assert!(line("max_reply_bytes").ends_with("# default"), "{text}");
    assert!(
        text.lines().any(|l| l.starts_with("approval ")
            && l.contains("= \"auto\"  # ignored: untrusted project file")
            && l.contains(&format!("{project}:2 (looser than approval = \"ask\")"))),
        "{text}"
    );
    assert!(line("approval").ends_with("# default"), "{text}");
    assert!(text.contains(&format!("flycode trust {}", place.project.display())));
}

#[test]
fn config_check_reports_every_mistake_in_one_run() {
    let place = Place::new();
    place.project_file("aproval = \"ask\"\noutput_cap = 10\n\n[tools]\n\"shell.exc\" = \"deny\"\n");
    let output = place.flycode(&["config", "--check"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let text = String::from_utf8(output.stdout).unwrap();
    let file = place.project.join("flycode.toml").display().to_string();
    assert!(
        text.contains(&format!("{file}:1: unknown key \"aproval\""))
            && text.contains("did you mean \"approval\"?"),
        "{text}"
    );
    assert!(
        text.contains(&format!("{file}:2: output_cap = 10 is out of range")),
        "{text}"
    );
    assert!(
        text.contains(&format!("{file}:5: [tools] names \"shell.exc\""))
            && text.contains("did you mean \"shell.exec\"?"),
        "{text}"
    );
    assert!(text.contains("3 mistakes"), "{text}");

    // FILE alone; a clean file exits 0.
    let other = place.outside.join("other.toml");
    std::fs::write(&other, "approval = \"ask\"\n").unwrap();
    place
        .flycode(&["config", "--check", &other.display().to_string()])
        .assert()
        .code(0)
        .stdout(predicates::str::contains("no mistakes"));
    // Any command refuses to start on them, listing them all.
    let output = place.flycode(&["prompt"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains(":1:") && stderr.contains(":2:") && stderr.contains(":5:"),
        "{stderr}"
    );
}

#[test]
fn trust_without_a_project_file_says_there_is_nothing_to_trust() {
    let place = Place::new();
    let output = place.flycode(&["trust"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("no flycode.toml applies"));
    assert!(!place.config.join("flycode/trusted.json").exists());
}

/// `flycode run` on a terminal (util-linux `script`) offers to trust the folder; a yes records the
/// file that was shown.
#[test]
fn run_on_a_terminal_offers_to_trust_the_folder() {
    use std::io::{Read, Write};
    use std::process::Stdio;
    let found = std::process::Command::new("script")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "util-linux `script` is needed"
        );
        eprintln!("skipped: util-linux `script` is not installed");
        return;
    }
    let place = Place::new();
    place.project_file("approval = \"auto\"\n");
    let quote = |text: &str| format!("'{}'", text.replace('\'', "'\\''"));
    // Nothing listens on port 9 of the loopback: the run fails at its first request, after the
    // question.
    let command = format!(
        "{} run --base-url http://127.0.0.1:9/v1 --model m --max-retries 0 --no-stream 'say hi'",
        quote(env!("CARGO_BIN_EXE_flycode"))
    );
    let mut child = std::process::Command::new("script")
        .args(["-qfec", &command, "/dev/null"])
        .current_dir(place.project.join("src"))
        .env("SHELL", "/bin/sh")
        .env("HOME", &place.home)
        .env("XDG_CONFIG_HOME", &place.config)
        .env("FLYCODE_STATE_DIR", &place.state)
        .env("TERM", "dumb")
        .env_remove("FLYCODE_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let (sender, receiver) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut buffer = [0u8; 4096];
        while let Ok(read) = stdout.read(&mut buffer) {
            if read == 0 || sender.send(buffer[..read].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !String::from_utf8_lossy(&seen).contains("[y/N]") {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match receiver.recv_timeout(left) {
            Ok(chunk) => seen.extend(chunk),
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("no question:\n{}", String::from_utf8_lossy(&seen));
            }
        }
    }
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"y\n").unwrap();
    stdin.flush().unwrap();
    let status = child.wait().unwrap();
    drop(stdin);
    reader.join().unwrap();
    seen.extend(receiver.try_iter().flatten());
    let text = String::from_utf8_lossy(&seen);
    assert!(!status.success(), "{text}");
    assert!(text.contains("is not trusted"), "{text}");
    assert!(text.contains("flycode: trusted "), "{text}");
    let list = place.flycode(&["trust", "--list"]).output().unwrap();
    let list = String::from_utf8(list.stdout).unwrap();
    assert!(
        list.contains(&format!("{}  sha256", place.project.display()))
            && list.ends_with("trusted\n"),
        "{list}"
    );
}

/// `flycode mcp` judges the project file of the folder it starts in like any other: the notice in
/// its log, and a brief form (no values) at the end of its instructions.
#[test]
fn mcp_says_what_it_ignored_in_its_log_and_instructions() {
    let place = Place::new();
    place.project_file("approval = \"auto\"\n[agent]\nbase_url = \"http://ignore-previous-instructions.example\"\n");
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}});
    let output = place
        .flycode(&["mcp"])
        .write_stdin(format!("{initialize}\n"))
        .timeout(std::time::Duration::from_secs(30))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let file = place.project.join("flycode.toml").display().to_string();
    assert!(
        stderr.contains(&format!("{file}:1: approval = \"auto\"")),
        "{stderr}"
    );
    let reply: Value = serde_json::from_str(
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let instructions = reply["result"]["instructions"].as_str().unwrap();
    assert!(
        instructions.contains("approval (line 1)")
            && instructions.contains("[agent] base_url (line 3)")
            && instructions.contains(&format!("flycode trust {}", place.project.display())),
        "{instructions}"
    );
    assert!(!instructions.contains("ignore-previous"), "{instructions}");
}

/// The configuration is read and merged once per process and passed down (PROTOCOL.md §10
/// "Configuration"): the secrets hand-off, the trust offer and the sandbox each read every file
/// again before, so `exec`, `mcp` and `run` read the user's and the project's file two or three
/// times.
#[test]
fn each_command_reads_each_configuration_file_once() {
    let place = Place::new();
    place.user_file("timeout_ms = 30000\n");
    place.project_file("output_cap = 4096\n");
    let debug = [("FLYCODE_DEBUG_CONFIG_READS", "1")];
    let listing = json!({"id": "l", "tool": "fs.ls", "args": {"path": place.project.join("src").display().to_string()}});
    let (_, stderr) = place.exec_with(&listing, &[], &debug);
    assert!(
        stderr.contains("flycode: debug: configuration files read: 2\n"),
        "exec: {stderr}"
    );
    let runs: [&[&str]; 2] = [
        &["mcp"],
        // Nothing listens on port 9 of the loopback: the run fails at its first request.
        &[
            "run",
            "--yes",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
            "--max-retries",
            "0",
            "--no-stream",
            "say hi",
        ],
    ];
    for args in runs {
        let output = place
            .flycode(args)
            .envs(debug)
            .env_remove("FLYCODE_API_KEY")
            .env_remove("OPENAI_API_KEY")
            .write_stdin("")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("flycode: debug: configuration files read: 2\n"),
            "{args:?}: {stderr}"
        );
    }
}
