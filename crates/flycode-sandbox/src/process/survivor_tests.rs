//! No survivors (Linux): the call's cgroup, and the sweeps that stand in where there is none,
//! against pid-hoppers (a loop of fork and parent exit, `setsid`, TERM and HUP ignored). Real
//! processes; what is checked is `/proc` after each run.

#![cfg(target_os = "linux")]

use std::fs;
use std::path::Path;
use std::time::Duration;

use super::cgroup::SWEEPS_ONLY;
use super::*;

/// A pid-hopper: each hop records its pid, starts the next (a forked subshell, or one time in
/// four a fresh `bash` in a new session) and exits. Its file name is the marker that every hop's
/// command line carries.
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

/// Writes the hopper into `dir` under a name unique to this test process and returns the name.
fn write_hopper(dir: &Path, label: &str) -> String {
    let name = format!("hopper-{label}-{}.sh", std::process::id());
    fs::write(dir.join(&name), HOPPER).unwrap();
    name
}

/// `bash -c script` in `dir`.
fn bash(script: &str, dir: &Path, timeout: Duration) -> ProcessSpec {
    ProcessSpec {
        program: "bash".to_owned(),
        args: vec!["-c".to_owned(), script.to_owned()],
        cwd: dir.to_path_buf(),
        env_set: Vec::new(),
        env_remove: Vec::new(),
        timeout,
        output_cap: 64 * 1024,
        cancel: None,
        containment: None,
    }
}

/// The live (not zombie) processes whose command line holds `marker`.
fn alive_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let stat = fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let zombie = stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
        if !zombie && String::from_utf8_lossy(&cmdline).contains(marker) {
            found.push(format!("{:?}: {stat}", entry.file_name()));
        }
    }
    found
}

/// Held by each test here for its whole length: flycode's own calls run one program at a time
/// per process where sweeps stand in for a cgroup (process calls are never run side by side), and
/// a sweep takes every stray child of the process. Hoppers of two tests of this file forking at
/// once under one subreaper would make each test's sweeps chase the other's hops.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Runs the hopper `runs` times, alternately left behind by a main shell that exits and
/// killed by a timeout, and asserts after each run that no hop is alive.
fn hop_and_check(label: &str, runs: usize) {
    let dir = tempfile::tempdir().unwrap();
    let hopper = write_hopper(dir.path(), label);
    for run in 0..runs {
        let (script, timeout) = if run % 2 == 0 {
            (
                format!("bash {hopper} > /dev/null 2>&1 & sleep 0.2"),
                Duration::from_secs(60),
            )
        } else {
            (
                format!("bash {hopper} > /dev/null 2>&1 & sleep 60"),
                Duration::from_millis(200),
            )
        };
        let outcome = run_process(&bash(&script, dir.path(), timeout)).unwrap();
        assert_eq!(outcome.timed_out, run % 2 == 1, "run {run}: {outcome:?}");
        let hops = fs::read_to_string(dir.path().join("pids")).unwrap_or_default();
        assert!(!hops.is_empty(), "run {run}: the hopper never hopped");
        let left = alive_with(&hopper);
        assert!(left.is_empty(), "run {run}: hops survived: {left:?}");
        fs::remove_file(dir.path().join("pids")).unwrap();
    }
}

/// Whether this process could put a call in a cgroup: root, and its cgroup v2 directory
/// writable. Says why not when it cannot.
fn cgroups_usable() -> bool {
    let usable = rustix::process::geteuid().is_root()
        && super::cgroup::home_dir()
            .is_some_and(|home| rustix::fs::access(home, rustix::fs::Access::WRITE_OK).is_ok());
    if !usable {
        eprintln!("note: not root or no writable cgroup v2 here; the cgroup path is not tested");
    }
    usable
}

#[test]
fn a_run_is_born_in_a_cgroup_of_its_own_that_is_gone_after_the_call() {
    let _alone = one_at_a_time();
    if !cgroups_usable() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let outcome = run_process(&bash(
        "cat /proc/self/cgroup",
        dir.path(),
        Duration::from_secs(60),
    ))
    .unwrap();
    let text = outcome.stdout.text();
    let path = text
        .lines()
        .find_map(|line| line.strip_prefix("0::"))
        .unwrap_or_else(|| panic!("no cgroup v2 line: {text}"));
    let name = Path::new(path).file_name().unwrap().to_str().unwrap();
    assert!(
        name.starts_with(&format!("flycode-{}-", std::process::id())),
        "{path}"
    );
    let home = super::cgroup::home_dir().unwrap();
    assert!(!home.join(name).exists(), "{name} was left behind");
}

#[test]
fn pid_hoppers_do_not_outlive_the_call_with_a_cgroup() {
    let _alone = one_at_a_time();
    if !cgroups_usable() {
        return;
    }
    hop_and_check("cgroup", 12);
}

#[test]
fn pid_hoppers_do_not_outlive_the_call_with_sweeps_only() {
    let _alone = one_at_a_time();
    SWEEPS_ONLY.with(|only| only.set(true));
    hop_and_check("sweeps", 12);
}

#[test]
fn the_cgroups_of_a_flycode_killed_before_its_clean_up_are_killed_and_removed() {
    let _alone = one_at_a_time();
    if !cgroups_usable() {
        return;
    }
    let home = super::cgroup::home_dir().unwrap();
    // A pid above any pid_max: that flycode is gone.
    let stale = home.join("flycode-4999999-1");
    fs::create_dir(&stale).unwrap();
    let mut sleeper = std::process::Command::new("sleep")
        .arg("1000")
        .spawn()
        .unwrap();
    fs::write(stale.join("cgroup.procs"), sleeper.id().to_string()).unwrap();
    super::cgroup::remove_stale(home);
    assert!(!stale.exists(), "{} is still there", stale.display());
    // Killed: a zombie, or already reaped (a concurrent test's sweep takes any stray child).
    let stat = fs::read_to_string(format!("/proc/{}/stat", sleeper.id())).unwrap_or_default();
    let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
    assert!(
        state.is_none_or(|rest| rest.starts_with('Z')),
        "the sleeper still runs: {stat}"
    );
    let _ = sleeper.wait();
}
