//! What a program may do (PROTOCOL.md §9 (Tools: what programs may do)), run as a user runs it: `flycode exec` with a
//! `flycode-call`, real programs, the real kernel (Landlock on Linux).

#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::common::flycode;

struct Workspace {
    _temp: tempfile::TempDir,
    /// The allowed root.
    root: PathBuf,
    /// A directory outside the root.
    outside: PathBuf,
    /// flycode's state directory.
    state: PathBuf,
    /// The user's configuration directory (XDG_CONFIG_HOME).
    config: PathBuf,
}

fn workspace(settings: &str) -> Workspace {
    let temp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(temp.path()).unwrap();
    let (root, outside, state, config) = (
        base.join("root"),
        base.join("outside"),
        base.join("state"),
        base.join("config"),
    );
    for dir in [&root, &outside, &state, &config.join("flycode")] {
        std::fs::create_dir_all(dir).unwrap();
    }
    // The user's file, so that loosening settings (`process_sandbox = "off"`) apply; the same
    // text in the project too, which then loosens nothing and needs no trust.
    std::fs::write(config.join("flycode/flycode.toml"), settings).unwrap();
    std::fs::write(root.join("flycode.toml"), settings).unwrap();
    Workspace {
        _temp: temp,
        root,
        outside,
        state,
        config,
    }
}

impl Workspace {
    /// Runs one call with `--approve auto` and returns the `--json` report.
    fn call(&self, tool: &str, args: Value, env: &[(&str, &str)]) -> Value {
        let call = json!({"id": "c1", "tool": tool, "args": args});
        let output = flycode()
            .arg("exec")
            .arg("--json")
            .arg("--approve")
            .arg("auto")
            .arg("--root")
            .arg(&self.root)
            .env("FLYCODE_STATE_DIR", &self.state)
            .env("XDG_CONFIG_HOME", &self.config)
            .envs(env.iter().copied())
            .current_dir(&self.root)
            .write_stdin(format!("```flycode-call\n{call}\n```\n"))
            .output()
            .unwrap();
        serde_json::from_slice(&output.stdout).unwrap_or_else(|_| {
            panic!(
                "no JSON report: {}",
                String::from_utf8_lossy(&output.stderr)
            )
        })
    }

    fn shell(&self, command: &str) -> Value {
        self.call("shell.exec", json!({"command": command}), &[])
    }

    fn text(report: &Value) -> String {
        report["text"].as_str().unwrap_or_default().to_owned()
    }
}

fn ok(report: &Value) -> bool {
    report["ok"] == true
}

#[test]
fn a_program_cannot_write_outside_the_roots_through_a_shell_or_a_link() {
    let w = workspace("");
    std::os::unix::fs::symlink(&w.outside, w.root.join("out")).unwrap();
    let report = w.shell(&format!(
        "echo pwned > {o}/shell; echo pwned > out/link; mkdir {o}/dir; touch {o}/t; \
         echo inside > inside.txt",
        o = w.outside.display()
    ));
    let text = Workspace::text(&report);
    assert!(text.contains("Permission denied"), "{text}");
    let left: Vec<_> = std::fs::read_dir(&w.outside).unwrap().collect();
    assert!(left.is_empty(), "written outside the root: {left:?}");
    assert_eq!(
        std::fs::read_to_string(w.root.join("inside.txt")).unwrap(),
        "inside\n"
    );
}

#[test]
fn a_git_alias_cannot_write_outside_the_roots_either() {
    let w = workspace("[tools]\n\"shell.exec\" = \"deny\"\n");
    let alias = format!("alias.x=!echo pwned > {}/file", w.outside.display());
    let report = w.call(
        "process.run",
        json!({"command": "git", "args": ["-c", alias, "x"]}),
        &[],
    );
    assert!(!ok(&report), "{report}");
    assert!(!w.outside.join("file").exists(), "the alias wrote outside");
}

#[test]
fn git_and_a_compiler_work_inside_a_root() {
    let w = workspace("");
    std::fs::write(w.root.join("hello.py"), "print('hi')\n").unwrap();
    let report = w.shell(
        "git init -q . && git add hello.py && \
         git -c user.name=t -c user.email=t@example.com commit -q -m first && \
         git log --oneline | wc -l && python3 -m py_compile hello.py && echo compiled",
    );
    assert!(ok(&report), "{report}");
    let text = Workspace::text(&report);
    assert!(text.contains("compiled"), "{text}");
    assert!(w.root.join(".git/HEAD").exists());
    assert!(w.root.join("__pycache__").is_dir());
}

#[test]
fn read_only_stops_writes_inside_the_roots_too() {
    let w = workspace("process_sandbox = \"read-only\"\n");
    let report = w.shell("cat flycode.toml; echo no > inside.txt");
    assert!(!ok(&report), "{report}");
    let text = Workspace::text(&report);
    assert!(
        text.contains("read-only"),
        "the file could not be read: {text}"
    );
    assert!(!w.root.join("inside.txt").exists());
    // The private temporary directory and /dev/null still take writes.
    let report = w.shell("echo x > \"$TMPDIR/t\" && cat \"$TMPDIR/t\" && echo y > /dev/null");
    assert!(ok(&report), "{report}");
}

#[test]
fn without_network_a_loopback_connect_fails_and_with_it_succeeds() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let script = format!(
        "import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5); print('connected')"
    );
    let args = json!({"command": "python3", "args": ["-c", script]});
    let w = workspace("process_network = false\n");
    let report = w.call("process.run", args.clone(), &[]);
    assert!(!ok(&report), "{report}");
    let text = Workspace::text(&report);
    assert!(!text.contains("--- stdout ---\nconnected"), "{text}");
    assert!(text.contains("PermissionError"), "{text}");
    let w = workspace("");
    let report = w.call("process.run", args, &[]);
    assert!(ok(&report), "{report}");
    assert!(Workspace::text(&report).contains("--- stdout ---\nconnected"));
}

#[test]
fn flycodes_state_and_configuration_are_unreadable() {
    let w = workspace("");
    std::fs::write(w.state.join("secret.txt"), "state-secret").unwrap();
    // Valid TOML: the user's file is read as a layer under the project's.
    std::fs::write(w.config.join("flycode/flycode.toml"), "# config-secret\n").unwrap();
    let report = w.shell(&format!(
        "cat {}/secret.txt; cat {}/flycode/flycode.toml; cat {}/flycode.toml",
        w.state.display(),
        w.config.display(),
        w.root.display()
    ));
    let text = Workspace::text(&report);
    assert!(!text.contains("state-secret"), "{text}");
    assert!(!text.contains("config-secret"), "{text}");
    assert_eq!(text.matches("Permission denied").count(), 2, "{text}");
}

#[test]
fn the_private_temporary_directory_is_the_programs_alone_and_removed_after() {
    let w = workspace("");
    let report = w.shell("echo \"$TMPDIR\"; stat -c %a \"$TMPDIR\"; touch \"$TMPDIR/made\"");
    assert!(ok(&report), "{report}");
    let stdout = report["result"]["stdout"].as_str().unwrap().to_owned();
    let mut lines = stdout.lines();
    let dir = PathBuf::from(lines.next().unwrap());
    assert!(
        dir.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("flycode-run-"),
        "{stdout}"
    );
    assert_eq!(lines.next(), Some("700"));
    assert!(!dir.exists(), "{} was left behind", dir.display());
}

#[test]
fn a_grandchild_that_left_the_session_and_cleared_its_environment_is_gone_after_the_call() {
    let w = workspace("");
    let report = w.shell(
        "env -i setsid sh -c 'echo $$ > grandchild.pid; exec sleep 300' > /dev/null 2>&1 & \
         while [ ! -s grandchild.pid ]; do sleep 0.01; done",
    );
    assert!(ok(&report), "{report}");
    let pid = std::fs::read_to_string(w.root.join("grandchild.pid")).unwrap();
    let pid = pid.trim();
    assert!(!pid.is_empty());
    // flycode has exited, and reaped it before: no such process (or at most a zombie of init's).
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(')')
                .map(|(_, rest)| rest.split_whitespace().next().unwrap_or("").to_owned())
        });
    assert!(
        state.is_none() || state.as_deref() == Some("Z"),
        "pid {pid} still runs: {state:?}"
    );
}

/// A secret value and the places it must not reach.
fn assert_masked(report: &Value, state: &Path, secret: &str) {
    let shown = report.to_string();
    assert!(
        !shown.contains(secret),
        "the secret reached the result: {shown}"
    );
    assert!(shown.contains("***"), "{shown}");
    let audit = std::fs::read_to_string(state.join("audit.jsonl")).unwrap();
    assert!(
        !audit.contains(secret),
        "the secret reached the audit log: {audit}"
    );
}

#[test]
fn a_secret_a_program_prints_is_masked_in_the_result_and_the_audit_log() {
    let w = workspace("secret_env = [\"MY_TOKEN\"]\n");
    let key = "sk-test-0123456789abcdef";
    let token = "tok-9876543210";
    std::fs::write(w.root.join("leak.txt"), format!("{key}\n{token}\n")).unwrap();
    let report = w.call(
        "process.run",
        json!({"command": "cat", "args": ["leak.txt"]}),
        &[("FLYCODE_API_KEY", key), ("MY_TOKEN", token)],
    );
    assert!(ok(&report), "{report}");
    assert_masked(&report, &w.state, key);
    assert_masked(&report, &w.state, token);
    // The secret is masked in the call as shown and logged, too.
    let report = w.call(
        "shell.exec",
        json!({"command": format!("echo {key} >&2; exit 3")}),
        &[("FLYCODE_API_KEY", key)],
    );
    assert!(!ok(&report), "{report}");
    assert_masked(&report, &w.state, key);
}

/// Running as root (as in most containers), a program may still read flycode's
/// `/proc/<pid>/environ` on kernels whose Landlock does not cover it. That file holds the
/// environment flycode was started with, so flycode hands its secrets to a fresh image of itself
/// started without them: the raw bytes a program copies hold no key, and the hand-off file is
/// gone. Nor does the key reach the result.
#[test]
fn a_program_reading_flycodes_environment_gets_no_key() {
    let w = workspace("");
    let key = "sk-test-environ-0123456789";
    let report = w.call(
        "shell.exec",
        json!({"command": "cat /proc/$PPID/comm > comm.txt; cat /proc/$PPID/environ > environ.bin; \
                           tr '\\0' '\\n' < /proc/$PPID/environ | grep FLYCODE_API_KEY; \
                           env | grep FLYCODE_API_KEY; true"}),
        &[("FLYCODE_API_KEY", key)],
    );
    assert!(ok(&report), "{report}");
    let shown = report.to_string();
    assert!(!shown.contains(key), "{shown}");
    // The parent whose environment was copied is flycode itself.
    let comm = std::fs::read_to_string(w.root.join("comm.txt")).unwrap();
    assert_eq!(comm.trim(), "flycode");
    // Read directly, past any masking.
    let environ = std::fs::read(w.root.join("environ.bin")).unwrap();
    let text = String::from_utf8_lossy(&environ);
    assert!(!text.contains(key), "the key is in flycode's environ");
    assert!(!text.contains("FLYCODE_API_KEY="), "{text}");
    // Whether the program could read it at all depends on the kernel (root can, on some); what
    // keeps the key out either way is the hand-off, checked on whatever was read.
    if !environ.is_empty() {
        let handoff = text
            .split('\0')
            .find_map(|entry| entry.strip_prefix("FLYCODE_SECRET_HANDOFF="))
            .unwrap_or_else(|| panic!("no hand-off in flycode's environ: {text}"));
        assert!(handoff.starts_with(w.state.to_str().unwrap()), "{handoff}");
        assert!(
            !Path::new(handoff).exists(),
            "the hand-off file {handoff} is left behind"
        );
    }
    let left: Vec<_> = std::fs::read_dir(&w.state)
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .filter(|name| name.to_string_lossy().starts_with("secret-handoff-"))
        .collect();
    assert!(left.is_empty(), "hand-off files left: {left:?}");
}

/// Whether the test (and so the flycode it starts) runs as root.
fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// The `Name: value` lines of a program's output, by name.
fn field<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

/// The attack of issue 22: as root, a contained program made `/dev/kmsg` in a root and wrote
/// the kernel log, opened `/dev/loop-control` read-write and added an address to the loopback
/// interface. Now it holds no capability in any set, cannot make a device node, and each of
/// those fails with the kernel's own error; a FIFO may still be made.
#[test]
fn a_program_holds_no_capability_and_makes_no_device() {
    let w = workspace("");
    let report = w.shell(
        "grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs):' /proc/self/status; \
         mknod kmsg c 1 11; echo mknod=$?; \
         (exec 3<>/dev/loop-control); echo loop=$?; \
         if command -v ip >/dev/null; then ip addr add 10.254.254.254/32 dev lo; echo ip=$?; fi; \
         mkfifo fifo; echo fifo=$?",
    );
    assert!(ok(&report), "{report}");
    let text = Workspace::text(&report);
    for set in ["CapInh", "CapPrm", "CapEff", "CapAmb"] {
        assert_eq!(field(&text, set), Some("0000000000000000"), "{set}: {text}");
    }
    assert_eq!(field(&text, "NoNewPrivs"), Some("1"), "{text}");
    if is_root() {
        assert_eq!(field(&text, "CapBnd"), Some("0000000000000000"), "{text}");
    } else {
        eprintln!(
            "note: not root, the bounding set is not checked (nothing to drop without CAP_SETPCAP)"
        );
    }
    assert!(text.contains("mknod=1"), "{text}");
    assert!(!w.root.join("kmsg").exists(), "a device node was made");
    assert!(text.contains("mknod: kmsg: Permission denied"), "{text}");
    assert!(text.contains("loop=2"), "{text}");
    assert!(
        text.contains("/dev/loop-control: Permission denied"),
        "{text}"
    );
    if text.contains("ip=") {
        assert!(text.contains("ip=2"), "{text}");
        assert!(text.contains("Operation not permitted"), "{text}");
    }
    assert!(text.contains("fifo=0"), "{text}");
}

/// `process_sandbox = "off"` means the user's rights: flycode changes nothing, capabilities
/// included (documented in PROTOCOL.md §9 (What programs may do)).
#[test]
fn with_the_sandbox_off_a_program_keeps_the_users_capabilities() {
    if !is_root() {
        eprintln!("note: not root, skipped (a user has no capabilities to keep)");
        return;
    }
    let w = workspace("process_sandbox = \"off\"\n");
    let report = w.shell("grep -E '^CapEff:' /proc/self/status");
    assert!(ok(&report), "{report}");
    let text = Workspace::text(&report);
    assert_ne!(field(&text, "CapEff"), Some("0000000000000000"), "{text}");
}

/// A pid-hopper: each hop records its pid, starts the next (a forked subshell, or one time in
/// four a fresh `bash` in a new session) and exits, ignoring TERM and HUP. Every hop's command
/// line carries the script's name.
const HOPPER: &str = r#"trap '' TERM HUP
hop() {
  echo $BASHPID >> pids
  if (( RANDOM % 4 == 0 )); then
    setsid bash "$0" < /dev/null > /dev/null 2>&1 &
  else
    hop &
  fi
  exit 0
}
hop
"#;

/// The live (not zombie) processes whose command line holds `marker`.
fn alive_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let zombie = stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
        if !zombie && String::from_utf8_lossy(&cmdline).contains(marker) {
            found.push(stat);
        }
    }
    found
}

/// The attack of issue 22: a pid-hopper outlived `flycode exec` in 1 of 11 runs. Over 50 runs,
/// left behind by a shell that exits or killed by a timeout, no hop is alive once `flycode exec`
/// has returned.
#[test]
fn a_pid_hopper_never_outlives_the_call() {
    let w = workspace("");
    let marker = format!(
        "hopper-{}.sh",
        w.root
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
    );
    std::fs::write(w.root.join(&marker), HOPPER).unwrap();
    let pids = w.root.join("pids");
    // A loaded machine may kill a 150 ms call before its hopper first hops: such a run proves
    // nothing, so the test asks that most runs hopped, and that no hop of any run survived.
    let mut hopped = 0;
    for run in 0..50 {
        let (command, timeout) = if run % 2 == 0 {
            (
                format!("bash {marker} > /dev/null 2>&1 & sleep 0.1"),
                60_000,
            )
        } else {
            (format!("bash {marker} > /dev/null 2>&1 & sleep 60"), 150)
        };
        let report = w.call(
            "shell.exec",
            json!({"command": command, "timeoutMs": timeout}),
            &[],
        );
        assert_eq!(ok(&report), run % 2 == 0, "run {run}: {report}");
        let hops = std::fs::read_to_string(&pids).unwrap_or_default();
        hopped += usize::from(!hops.is_empty());
        let left = alive_with(&marker);
        assert!(
            left.is_empty(),
            "run {run}: hops outlived the call: {left:?}"
        );
        let _ = std::fs::remove_file(&pids);
    }
    assert!(
        hopped >= 40,
        "only {hopped} of 50 runs hopped: the test proved little"
    );
}
