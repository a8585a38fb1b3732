//! Real processes against the runner: capture, caps, environment, errors, and that nothing a run
//! started is left alive. No timing thresholds: outcomes and `/proc` only.

#![cfg(unix)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::*;

/// A spec with generous limits: 60 s, 1 MiB per stream.
fn spec(program: &str, args: &[&str], cwd: &Path) -> ProcessSpec {
    ProcessSpec {
        program: program.to_owned(),
        args: args.iter().map(|arg| (*arg).to_owned()).collect(),
        cwd: cwd.to_path_buf(),
        env_set: Vec::new(),
        env_remove: Vec::new(),
        timeout: Duration::from_secs(60),
        output_cap: 1024 * 1024,
        cancel: None,
        containment: None,
    }
}

/// `sh -c script sh DIR`: the script finds the temporary directory in `$1`.
fn sh(script: &str, dir: &Path) -> ProcessSpec {
    let dir = dir.to_str().unwrap();
    spec("sh", &["-c", script, "sh", dir], Path::new("/"))
}

/// The pid a script wrote into `dir/name`.
fn pid_in(dir: &Path, name: &str) -> i32 {
    let text = fs::read_to_string(dir.join(name)).unwrap();
    text.trim()
        .parse()
        .unwrap_or_else(|_| panic!("{name}: {text:?}"))
}

/// The state letter of `pid`, or `None` once it is gone (reaped).
#[cfg(target_os = "linux")]
fn state_of(pid: i32) -> Option<String> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, fields) = stat.rsplit_once(')')?;
    fields.split_whitespace().next().map(str::to_owned)
}

/// Asserts that every process named by a pid file in `dir` is gone: killed and reaped (a zombie
/// would still have a `/proc` entry).
#[cfg(target_os = "linux")]
fn assert_gone(dir: &Path, names: &[&str]) {
    for name in names {
        let pid = pid_in(dir, name);
        assert_eq!(state_of(pid), None, "{name} (pid {pid}) is still there");
    }
}

/// Waits (without a threshold: a liveness bound only) until `path` exists.
#[cfg(target_os = "linux")]
fn wait_for_file(path: &Path) {
    let give_up = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(
            Instant::now() < give_up,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn captures_stdout_and_stderr_separately_with_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let outcome = run_process(&sh("printf out; printf err >&2; exit 3", dir.path())).unwrap();
    assert_eq!(outcome.stdout.text(), "out");
    assert_eq!(outcome.stderr.text(), "err");
    assert_eq!((outcome.exit_code, outcome.signal), (Some(3), None));
    assert_eq!((outcome.stdout.total, outcome.stderr.total), (3, 3));
    assert!(!outcome.timed_out && outcome.stdout.is_complete() && outcome.stderr.is_complete());
}

#[test]
fn reports_the_signal_that_ended_the_child() {
    let dir = tempfile::tempdir().unwrap();
    let outcome = run_process(&sh("kill -KILL $$", dir.path())).unwrap();
    assert_eq!((outcome.exit_code, outcome.signal), (None, Some(9)));
    assert!(!outcome.timed_out);
}

#[test]
fn arguments_reach_the_program_without_a_shell() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["%s|", "$HOME", "*", "a b", "`id`;"];
    let outcome = run_process(&spec("printf", &args, dir.path())).unwrap();
    assert_eq!(outcome.stdout.text(), "$HOME|*|a b|`id`;|");
}

#[test]
fn runs_in_the_given_working_directory() {
    let dir = tempfile::tempdir().unwrap();
    let outcome = run_process(&spec("pwd", &[], dir.path())).unwrap();
    let expected = dir.path().canonicalize().unwrap();
    assert_eq!(PathBuf::from(outcome.stdout.text().trim_end()), expected);
}

#[test]
fn stdin_is_closed() {
    let dir = tempfile::tempdir().unwrap();
    let script = "if read line; then echo got; else echo eof; fi";
    let outcome = run_process(&sh(script, dir.path())).unwrap();
    assert_eq!(outcome.stdout.text(), "eof\n");
    #[cfg(target_os = "linux")]
    {
        let outcome = run_process(&spec("readlink", &["/proc/self/fd/0"], dir.path())).unwrap();
        assert_eq!(outcome.stdout.text(), "/dev/null\n");
    }
}

#[cfg(target_os = "linux")]
#[test]
fn child_leads_its_own_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"read -r _ _ _ _ group _ < /proc/$$/stat; echo "$$ $group""#;
    let outcome = run_process(&sh(script, dir.path())).unwrap();
    let ids: Vec<i32> = outcome
        .stdout
        .text()
        .split_whitespace()
        .map(|id| id.parse().unwrap())
        .collect();
    assert_eq!(ids.len(), 2, "{:?}", outcome.stdout);
    assert_eq!(ids[0], ids[1], "the child's group is its own pid");
    let ours = rustix::process::getpgrp().as_raw_nonzero().get();
    assert_ne!(ids[1], ours);
}

#[test]
fn environment_is_inherited_minus_removed_plus_set() {
    let dir = tempfile::tempdir().unwrap();
    let inherited: Vec<String> = std::env::vars().map(|(name, _)| name).collect();
    let secret = inherited
        .iter()
        .find(|name| name.as_str() != "PATH")
        .expect("the test process has a variable besides PATH")
        .clone();
    let mut spec = spec("env", &[], dir.path());
    spec.env_remove = vec![secret.clone(), "FLYCODE_SET_ME".to_owned()];
    spec.env_set = vec![(
        "FLYCODE_SET_ME".to_owned(),
        "a value; with spaces".to_owned(),
    )];
    let outcome = run_process(&spec).unwrap();
    let stdout = outcome.stdout.text();
    let names: Vec<&str> = stdout
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(name, _)| name)
        .collect();
    assert!(
        !names.contains(&secret.as_str()),
        "{secret} was not removed"
    );
    assert!(names.contains(&"PATH"));
    assert!(
        stdout
            .lines()
            .any(|line| line == "FLYCODE_SET_ME=a value; with spaces")
    );
    assert!(names.contains(&"FLYCODE_RUN"), "runs are tagged");
}

#[test]
fn missing_program_is_command_not_found() {
    let dir = tempfile::tempdir().unwrap();
    for program in ["flycode-no-such-program", "/nonexistent/flycode/program"] {
        let error = run_process(&spec(program, &[], dir.path())).unwrap_err();
        assert!(
            matches!(error, ProcessError::CommandNotFound { .. }),
            "{error:?}"
        );
        assert_eq!(error.code(), ErrorCode::CommandNotFound);
        assert!(error.to_string().contains(program));
    }
}

#[test]
fn non_executable_file_is_permission_denied() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.sh");
    fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o644)).unwrap();
    let error = run_process(&spec(script.to_str().unwrap(), &[], dir.path())).unwrap_err();
    assert!(
        matches!(error, ProcessError::PermissionDenied { .. }),
        "{error:?}"
    );
    assert_eq!(error.code(), ErrorCode::PermissionDenied);
}

#[test]
fn vanished_working_directory_is_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let error = run_process(&spec("true", &[], &dir.path().join("gone"))).unwrap_err();
    assert!(
        matches!(error, ProcessError::CwdNotFound { .. }),
        "{error:?}"
    );
    assert_eq!(error.code(), ErrorCode::NotFound);
}

#[test]
fn endless_output_is_capped_and_drained_until_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = spec("yes", &[], dir.path());
    spec.timeout = Duration::from_millis(300);
    spec.output_cap = 1000;
    let outcome = run_process(&spec).unwrap();
    assert!(outcome.timed_out);
    assert_eq!(outcome.signal, Some(9));
    // The first 500 bytes and the last 500: whole lines of `y`, the tail maybe shifted by one.
    assert_eq!(outcome.stdout.head, "y\n".repeat(250).as_bytes());
    assert_eq!(outcome.stdout.tail.len(), 500);
    assert!(outcome.stdout.tail.iter().all(|&b| b == b'y' || b == b'\n'));
    assert!(!outcome.stdout.is_complete());
    assert!(outcome.stdout.total > 1000);
}

#[test]
fn large_output_on_both_streams_is_drained_to_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let script = "head -c 50M /dev/zero; head -c 300000 /dev/zero >&2; echo end >&2";
    let mut spec = sh(script, dir.path());
    spec.output_cap = 4096;
    let outcome = run_process(&spec).unwrap();
    assert!(!outcome.timed_out);
    assert_eq!(outcome.exit_code, Some(0));
    assert_eq!(outcome.stdout.total, 50 * 1024 * 1024);
    assert_eq!(outcome.stderr.total, 300_004);
    assert_eq!(
        (outcome.stdout.head.len(), outcome.stdout.tail.len()),
        (2048, 2048)
    );
    assert_eq!(
        (outcome.stderr.head.len(), outcome.stderr.tail.len()),
        (2048, 2048)
    );
    assert!(
        outcome.stderr.tail.ends_with(b"\0end\n"),
        "the tail is the stream's end"
    );
    assert!(!outcome.stdout.is_complete() && !outcome.stderr.is_complete());
}

#[test]
fn binary_output_is_decoded_lossily() {
    let dir = tempfile::tempdir().unwrap();
    let outcome = run_process(&spec("printf", &[r"\377\376ok\n"], dir.path())).unwrap();
    assert_eq!(outcome.stdout.text(), "\u{FFFD}\u{FFFD}ok\n");
    assert_eq!(outcome.stdout.total, 5);
}

#[test]
fn shell_spec_runs_through_sh() {
    let dir = tempfile::tempdir().unwrap();
    let spec = ProcessSpec::shell(
        "echo $((6 * 7))",
        dir.path().to_path_buf(),
        Duration::from_secs(60),
        100,
    );
    assert_eq!(run_process(&spec).unwrap().stdout.text(), "42\n");
}

/// The script behind the timeout test: a background child and the main shell ignore SIGTERM,
/// one child starts its own session, one grandchild is orphaned in its own session.
#[cfg(target_os = "linux")]
const STUBBORN_TREE: &str = r#"
trap '' TERM
sleep 1000 &
echo $! > "$1/background.pid"
setsid sh -c 'trap "" TERM; echo $$ > "$1/session.pid"; exec sleep 1000' sh "$1" &
setsid sh -c 'sleep 1000 & echo $! > "$1/orphan.pid"' sh "$1" &
echo $$ > "$1/main.pid"
while [ ! -s "$1/session.pid" ] || [ ! -s "$1/orphan.pid" ]; do sleep 0.01; done
echo ready
wait
"#;

#[cfg(target_os = "linux")]
#[test]
fn timeout_kills_descendants_that_ignore_term_or_leave_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = sh(STUBBORN_TREE, dir.path());
    spec.timeout = Duration::from_secs(3);
    let outcome = run_process(&spec).unwrap();
    assert!(outcome.timed_out);
    assert_eq!(
        outcome.stdout.text(),
        "ready\n",
        "the tree was not fully started before the timeout"
    );
    assert_eq!(outcome.signal, Some(9));
    assert_gone(
        dir.path(),
        &["main.pid", "background.pid", "session.pid", "orphan.pid"],
    );
}

#[cfg(target_os = "linux")]
#[test]
fn background_child_holding_the_pipe_does_not_hold_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"
sleep 1000 & echo $! > "$1/background.pid"
setsid sleep 1000 & echo $! > "$1/session.pid"
echo done"#;
    let outcome = run_process(&sh(script, dir.path())).unwrap();
    assert!(!outcome.timed_out);
    assert_eq!(outcome.exit_code, Some(0));
    assert_eq!(outcome.stdout.text(), "done\n");
    assert_gone(dir.path(), &["background.pid", "session.pid"]);
}

#[cfg(target_os = "linux")]
#[test]
fn detached_leftovers_are_killed_when_the_command_exits() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"
sleep 1000 >/dev/null 2>&1 & echo $! > "$1/background.pid"
setsid sleep 1000 >/dev/null 2>&1 & echo $! > "$1/session.pid"
setsid sh -c 'sleep 1000 >/dev/null 2>&1 & echo $! > "$1/orphan.pid"' sh "$1" >/dev/null 2>&1
echo done"#;
    let outcome = run_process(&sh(script, dir.path())).unwrap();
    assert_eq!(
        (outcome.exit_code, outcome.stdout.text().as_str()),
        (Some(0), "done\n")
    );
    assert_gone(dir.path(), &["background.pid", "session.pid", "orphan.pid"]);
}

#[cfg(target_os = "linux")]
#[test]
fn concurrent_runs_do_not_kill_each_others_orphans() {
    let dir = tempfile::tempdir().unwrap();
    // Run B orphans a sleeper in its own session, then waits for the go-ahead.
    let script = r#"
setsid sh -c 'sleep 1000 >/dev/null 2>&1 & echo $! > "$1/b.tmp"; mv "$1/b.tmp" "$1/b.pid"' sh "$1"
while [ ! -e "$1/go" ]; do sleep 0.01; done"#;
    let run_b = sh(script, dir.path());
    let b = std::thread::spawn(move || run_process(&run_b).unwrap());
    wait_for_file(&dir.path().join("b.pid"));
    let orphan = pid_in(dir.path(), "b.pid");

    // Run A times out, and another leaves a detached process: both clean-ups sweep the orphans.
    let mut a = spec("sleep", &["1000"], dir.path());
    a.timeout = Duration::from_millis(300);
    assert!(run_process(&a).unwrap().timed_out);
    let leftover = "setsid sleep 1000 >/dev/null 2>&1 &";
    assert_eq!(
        run_process(&sh(leftover, dir.path())).unwrap().exit_code,
        Some(0)
    );
    assert_eq!(
        state_of(orphan).as_deref(),
        Some("S"),
        "B's orphan was killed by A"
    );

    fs::write(dir.path().join("go"), "").unwrap();
    let outcome = b.join().unwrap();
    assert_eq!(outcome.exit_code, Some(0));
    assert_gone(dir.path(), &["b.pid"]);
}

#[cfg(target_os = "linux")]
#[test]
fn cancelling_kills_the_whole_tree_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = sh(STUBBORN_TREE, dir.path());
    let cancel = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    spec.cancel = Some(std::sync::Arc::clone(&cancel));
    let ready = dir.path().join("orphan.pid");
    let setter = std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !ready.exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(300));
        cancel.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    let outcome = run_process(&spec).unwrap();
    setter.join().unwrap();
    assert!(outcome.cancelled && !outcome.timed_out, "{outcome:?}");
    assert!(
        outcome.duration < Duration::from_secs(30),
        "it returned long before its 60 s timeout"
    );
    assert_gone(
        dir.path(),
        &["main.pid", "background.pid", "session.pid", "orphan.pid"],
    );
}
