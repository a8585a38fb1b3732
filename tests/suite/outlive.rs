//! Programs never outlive flycode, whatever ends it (PROTOCOL.md §11 (Security), "No program
//! outlives flycode"): the real binary at `exec`, `watch` and `mcp` runs a model's call whose
//! command leaves its process group and session (`setsid`) and double-forks, beside a background
//! job doing the same; then flycode, or its whole process group as a terminal or a script would,
//! gets SIGTERM, SIGHUP, SIGINT, SIGQUIT or SIGKILL. Every process the calls started must be gone
//! (pids checked in `/proc`), also when flycode runs as an ordinary user (no cgroups).

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long the programs may take to be gone, and flycode to end: generous, only a bound.
const DEADLINE: Duration = Duration::from_secs(20);

/// The uid and gid of the ordinary user the tests run flycode as when they run as root.
const NOBODY: u32 = 65534;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Door {
    Exec,
    /// `exec --dialect tags`.
    ExecTags,
    Watch,
    Mcp,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    /// `kill -SIG PID`: flycode's pid, as an MCP client or a person's `kill` does.
    Process,
    /// `kill -SIG -PGID`: flycode's whole process group, as a terminal (or `kill -9 -PGID`) does.
    Group,
}

const SIGNALS: [(&str, i32); 5] = [
    ("TERM", 15),
    ("HUP", 1),
    ("INT", 2),
    ("QUIT", 3),
    ("KILL", 9),
];

/// A folder with the allowed root, the state, config and home folders and an inbox.
struct Scene {
    _temp: tempfile::TempDir,
    base: PathBuf,
    root: PathBuf,
}

impl Scene {
    fn new(owner: Option<u32>) -> Scene {
        let temp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(temp.path()).unwrap();
        let root = base.join("root");
        for dir in ["root", "state", "config", "home", "inbox"] {
            std::fs::create_dir_all(base.join(dir)).unwrap();
        }
        if let Some(uid) = owner {
            // The ordinary user owns its folders, as a person's own would be.
            for dir in ["", "root", "state", "config", "home", "inbox"] {
                std::os::unix::fs::chown(base.join(dir), Some(uid), Some(uid)).unwrap();
            }
        }
        Scene {
            _temp: temp,
            base,
            root,
        }
    }

    fn pid_file(&self) -> PathBuf {
        self.root.join("pids")
    }

    /// The pids written so far.
    fn pids(&self) -> Vec<i32> {
        std::fs::read_to_string(self.pid_file())
            .unwrap_or_default()
            .lines()
            .filter_map(|line| line.trim().parse().ok())
            .collect()
    }

    /// The pids, once there are `count` of them.
    fn wait_for_pids(&self, count: usize, flycode: &mut Child) -> Vec<i32> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let pids = self.pids();
            if pids.len() >= count {
                return pids;
            }
            if let Some(status) = flycode.try_wait().unwrap() {
                panic!("flycode ended ({status}) before its programs started: {pids:?}");
            }
            assert!(
                Instant::now() < deadline,
                "the programs never started: {pids:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The foreground call's command: a descendant that leaves the group and the session, one that
/// is double-forked (its parent exits at once) and leaves them too, and the main program, each
/// writing its own pid.
fn foreground_script(pids: &Path) -> String {
    let pids = pids.display();
    format!(
        "setsid sh -c 'echo $$ >> {pids}; exec sleep 300' & \
         ( setsid sh -c 'echo $$ >> {pids}; exec sleep 300' & ) ; \
         echo $$ >> {pids}; exec sleep 300"
    )
}

/// A background job's command: a descendant that leaves the group and the session, and the job
/// itself.
fn job_script(pids: &Path) -> String {
    let pids = pids.display();
    format!("setsid sh -c 'echo $$ >> {pids}; exec sleep 300' & echo $$ >> {pids}; exec sleep 300")
}

fn call_block(id: &str, args: &Value) -> String {
    let call = json!({"id": id, "tool": "shell.exec", "args": args});
    format!("```flycode-call\n{call}\n```\n")
}

/// `flycode ARGS` in `scene`, in a process group of its own (its pid is the group's id), as
/// `user` when given (through `setpriv`).
fn flycode(scene: &Scene, user: Option<u32>, args: &[&str]) -> Command {
    let binary = env!("CARGO_BIN_EXE_flycode");
    let mut command = match user {
        Some(uid) => {
            let mut command = Command::new("setpriv");
            command
                .arg(format!("--reuid={uid}"))
                .arg(format!("--regid={uid}"))
                .arg("--clear-groups")
                .arg(binary);
            command
        }
        None => Command::new(binary),
    };
    for (name, _) in std::env::vars() {
        if name.starts_with("FLYCODE_") || name.starts_with("OPENAI_") {
            command.env_remove(name);
        }
    }
    command
        .args(args)
        .env("FLYCODE_STATE_DIR", scene.base.join("state"))
        .env("XDG_CONFIG_HOME", scene.base.join("config"))
        .env("HOME", scene.base.join("home"))
        .current_dir(&scene.root)
        .process_group(0);
    command
}

/// A flycode at work: its process, and what keeps its conversation open.
struct Running {
    child: Child,
    _stdin: Option<ChildStdin>,
    pids: Vec<i32>,
}

impl Drop for Running {
    fn drop(&mut self) {
        // Whatever a failed test left: not for the next test to meet.
        for pid in self.pids.iter().filter(|&&pid| alive(pid)) {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .stderr(Stdio::null())
                .status();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Drains `reader` on a thread, so flycode never blocks on a full pipe.
fn drain(mut reader: impl Read + Send + 'static) {
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = reader.read_to_end(&mut sink);
    });
}

/// Starts flycode at `door` with a foreground call running (and, at `watch` and `mcp`, a
/// background job), and waits until every program has written its pid.
fn start(door: Door, scene: &Scene, user: Option<u32>) -> Running {
    let root = scene.root.display().to_string();
    let foreground = json!({"command": foreground_script(&scene.pid_file())});
    let job = json!({"command": job_script(&scene.pid_file()), "background": true});
    match door {
        Door::Exec | Door::ExecTags => {
            let (args, reply) = if door == Door::Exec {
                (vec!["exec", "--yes"], call_block("c1", &foreground))
            } else {
                let script = foreground_script(&scene.pid_file());
                (
                    vec!["exec", "--yes", "--dialect", "tags"],
                    format!("<bash_call> {script} </bash_call>\n"),
                )
            };
            let mut child = flycode(scene, user, &[args.as_slice(), &["--root", &root]].concat())
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(reply.as_bytes()).unwrap();
            drop(stdin);
            let pids = scene.wait_for_pids(3, &mut child);
            Running {
                child,
                _stdin: None,
                pids,
            }
        }
        Door::Watch => {
            let inbox = scene.base.join("inbox");
            let args = [
                "watch",
                "--yes",
                "--tools",
                "extended",
                "--interval-ms",
                "20",
                "--quiet-ms",
                "100",
                "--inbox",
                inbox.to_str().unwrap(),
                "--root",
                &root,
            ];
            let mut child = flycode(scene, user, &args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let mut stderr = BufReader::new(child.stderr.take().unwrap());
            let mut seen = String::new();
            while !seen.contains("Ctrl-C stops.") {
                let mut line = String::new();
                let read = stderr.read_line(&mut line).unwrap();
                assert!(read > 0, "watch ended before it watched: {seen}");
                seen.push_str(&line);
            }
            drain(stderr);
            std::fs::write(inbox.join("one.md"), call_block("c1", &job)).unwrap();
            scene.wait_for_pids(2, &mut child);
            std::fs::write(inbox.join("two.md"), call_block("c2", &foreground)).unwrap();
            let pids = scene.wait_for_pids(5, &mut child);
            Running {
                child,
                _stdin: None,
                pids,
            }
        }
        Door::Mcp => {
            let mut child = flycode(scene, user, &["mcp", "--approve", "auto", "--root", &root])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let mut stdin = child.stdin.take().unwrap();
            let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
            let mut send = |message: Value| {
                writeln!(stdin, "{message}").unwrap();
                stdin.flush().unwrap();
            };
            send(
                json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}),
            );
            send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
            let call = |id: u64, arguments: &Value| {
                json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                       "params": {"name": "shell_exec", "arguments": arguments}})
            };
            send(call(2, &job));
            send(call(3, &foreground));
            std::thread::spawn(move || for _ in lines.by_ref() {});
            let pids = scene.wait_for_pids(5, &mut child);
            Running {
                child,
                _stdin: Some(stdin),
                pids,
            }
        }
    }
}

/// Whether `pid` is alive (not gone, not a zombie).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let (_, fields) = stat.rsplit_once(')')?;
            fields.split_whitespace().next().map(|state| state != "Z")
        })
        .unwrap_or(false)
}

/// Waits for flycode's end; `None` if it did not end within the deadline.
fn wait_end(child: &mut Child) -> Option<ExitStatus> {
    let deadline = Instant::now() + DEADLINE;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// The status flycode ends with on `signal`: killed by SIGKILL; otherwise 128 plus the signal,
/// but `watch`'s ordinary stop (SIGINT, SIGTERM) which exits 0 (PROTOCOL.md §12).
fn assert_status(door: Door, (name, number): (&str, i32), status: ExitStatus, context: &str) {
    if number == 9 {
        assert_eq!(status.signal(), Some(9), "{context}: {status}");
    } else if door == Door::Watch && (name == "INT" || name == "TERM") {
        assert_eq!(status.code(), Some(0), "{context}: {status}");
    } else {
        assert_eq!(status.code(), Some(128 + number), "{context}: {status}");
    }
}

/// Starts flycode at `door`, sends `signal` to `target`, and checks that flycode ends and that
/// every program it started is gone.
fn scenario(door: Door, target: Target, signal: (&str, i32), user: Option<u32>) {
    let scene = Scene::new(user);
    let mut running = start(door, &scene, user);
    let context = format!("{door:?}, SIG{} to the {target:?}, user {user:?}", signal.0);
    let pids = running.pids.clone();
    assert!(pids.iter().all(|&pid| alive(pid)), "{context}: {pids:?}");
    if let Some(uid) = user {
        // The programs (so flycode) really run as the ordinary user.
        for pid in &pids {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
            let line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
            assert_eq!(
                line.split_whitespace().nth(1),
                Some(uid.to_string().as_str()),
                "{context}"
            );
        }
    }
    let pid = running.child.id();
    let whom = match target {
        Target::Process => pid.to_string(),
        Target::Group => format!("-{pid}"),
    };
    let sent = Command::new("kill")
        .arg(format!("-{}", signal.0))
        .arg("--")
        .arg(&whom)
        .status()
        .unwrap();
    assert!(sent.success(), "{context}: kill failed");
    let status = wait_end(&mut running.child);
    let deadline = Instant::now() + DEADLINE;
    while pids.iter().any(|&pid| alive(pid)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let survivors: Vec<i32> = pids.iter().copied().filter(|&pid| alive(pid)).collect();
    assert!(
        survivors.is_empty(),
        "{context}: {survivors:?} of {pids:?} outlived flycode"
    );
    let status = status.unwrap_or_else(|| panic!("{context}: flycode did not end"));
    assert_status(door, signal, status, &context);
}

fn every_signal(door: Door, target: Target, user: Option<u32>) {
    for signal in SIGNALS {
        scenario(door, target, signal, user);
    }
}

#[test]
fn exec_signalled_leaves_no_program() {
    every_signal(Door::Exec, Target::Process, None);
}

#[test]
fn exec_process_group_signalled_leaves_no_program() {
    every_signal(Door::Exec, Target::Group, None);
}

#[test]
fn exec_in_the_tag_dialect_signalled_leaves_no_program() {
    every_signal(Door::ExecTags, Target::Process, None);
}

#[test]
fn watch_signalled_leaves_no_program_nor_job() {
    every_signal(Door::Watch, Target::Process, None);
}

#[test]
fn watch_process_group_signalled_leaves_no_program_nor_job() {
    every_signal(Door::Watch, Target::Group, None);
}

#[test]
fn mcp_signalled_leaves_no_program_nor_job() {
    every_signal(Door::Mcp, Target::Process, None);
}

#[test]
fn mcp_process_group_signalled_leaves_no_program_nor_job() {
    every_signal(Door::Mcp, Target::Group, None);
}

/// The same as an ordinary user (uid and gid 65534, no groups): no cgroup can be made, so what
/// holds is the guardian and the sweeps alone. Run as root, the tests drop to that user through
/// `setpriv`; run as an ordinary user, they already are one.
fn as_ordinary_user(door: Door) {
    let user = if rustix::process::geteuid().is_root() {
        let has_setpriv = Command::new("setpriv")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if !has_setpriv {
            eprintln!("skipped: running as root and `setpriv` is missing to drop to uid {NOBODY}");
            return;
        }
        Some(NOBODY)
    } else {
        None
    };
    for target in [Target::Process, Target::Group] {
        for signal in [("TERM", 15), ("KILL", 9)] {
            scenario(door, target, signal, user);
        }
    }
}

#[test]
fn exec_as_an_ordinary_user_leaves_no_program() {
    as_ordinary_user(Door::Exec);
}

#[test]
fn watch_as_an_ordinary_user_leaves_no_program_nor_job() {
    as_ordinary_user(Door::Watch);
}

#[test]
fn mcp_as_an_ordinary_user_leaves_no_program_nor_job() {
    as_ordinary_user(Door::Mcp);
}

#[test]
fn mcp_client_closing_the_connection_leaves_no_program_nor_job() {
    let scene = Scene::new(None);
    let mut running = start(Door::Mcp, &scene, None);
    let pids = running.pids.clone();
    drop(running._stdin.take());
    let status = wait_end(&mut running.child);
    let deadline = Instant::now() + DEADLINE;
    while pids.iter().any(|&pid| alive(pid)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let survivors: Vec<i32> = pids.iter().copied().filter(|&pid| alive(pid)).collect();
    assert!(
        survivors.is_empty(),
        "{survivors:?} of {pids:?} outlived flycode"
    );
    assert!(status.is_some(), "flycode mcp did not end");
}

/// The parent of `pid`.
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, fields) = stat.rsplit_once(')')?;
    fields.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn a_crash_of_flycode_leaves_no_program() {
    // The process that runs the call (flycode's worker) dies at once, without any clean-up of
    // its own, as in a crash or at the hands of the OOM killer: SIGKILL to it alone.
    let scene = Scene::new(None);
    let mut running = start(Door::Exec, &scene, None);
    let pids = running.pids.clone();
    let worker = pids
        .iter()
        .filter_map(|&pid| parent_of(pid))
        .find(|&parent| {
            std::fs::read(format!("/proc/{parent}/cmdline"))
                .is_ok_and(|cmdline| cmdline.split(|&b| b == 0).nth(1) == Some(b"exec"))
        })
        .expect("no program's parent is flycode exec");
    let sent = Command::new("kill")
        .args(["-KILL", &worker.to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let status = wait_end(&mut running.child);
    let deadline = Instant::now() + DEADLINE;
    while pids.iter().any(|&pid| alive(pid)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let survivors: Vec<i32> = pids.iter().copied().filter(|&pid| alive(pid)).collect();
    assert!(
        survivors.is_empty(),
        "{survivors:?} of {pids:?} outlived flycode"
    );
    let status = status.expect("flycode did not end");
    assert_eq!(status.code(), Some(128 + 9), "{status}");
}
