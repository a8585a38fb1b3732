//! A writer killed at any moment leaves every file wholly old or wholly new, and the next start of
//! flycode finishes or undoes what it was doing (PROTOCOL.md §11 (Security: after a crash)): a batch is then all old or all
//! new, and no temporary file, backup or journal record is left. The real binary is started on a
//! large fs.write or a 100-file fs.writeBatch and killed with SIGKILL after a varying delay, many
//! times. (The delays only vary where the kill lands; nothing here measures time.)

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

fn exec(root: &Path, state: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_flycode"));
    command
        .args(["exec", "--approve", "auto", "--root"])
        .arg(root)
        .env("FLYCODE_STATE_DIR", state);
    // Its own process group, killed whole: flycode is a front and a worker in it (PROTOCOL.md
    // §11 (Security), "No program outlives flycode"), and the kill must land in the worker.
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    command
}

/// Kills flycode's process group with SIGKILL (the front and the worker at once) and waits until
/// no process of it is left: the kill has landed wherever the work was.
fn kill_flycode(child: &mut std::process::Child) {
    let group = i32::try_from(child.id()).unwrap();
    if let Some(group) = rustix::process::Pid::from_raw(group) {
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
    }
    let _ = child.wait();
    let in_group = || {
        std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            let Some((_, fields)) = stat.rsplit_once(')') else {
                return false;
            };
            let fields: Vec<&str> = fields.split_whitespace().collect();
            // `state ppid pgrp`: a zombie has done its work.
            fields.get(2) == Some(&group.to_string().as_str()) && fields.first() != Some(&"Z")
        })
    };
    while in_group() {
        std::thread::yield_now();
    }
}

/// When the kill comes: after a delay from the start, from the moment the operation's journal
/// record appears, or from the moment it says the renames begin (so that many kills land while
/// temporary files are written and among the renames).
#[derive(Clone, Copy, Debug)]
enum Kill {
    Start(Duration),
    Record(Duration),
    Replacing(Duration),
}

/// Whether a journal record says the renames have begun.
fn replacing(state: &Path) -> bool {
    std::fs::read_dir(state.join("journal")).is_ok_and(|entries| {
        entries.filter_map(Result::ok).any(|entry| {
            std::fs::read_to_string(entry.path()).is_ok_and(|t| t.contains("\"replacing\""))
        })
    })
}

/// Starts the run and waits until `ready` (or the end); returns the child.
fn start_until(
    root: &Path,
    state: &Path,
    reply: &str,
    ready: impl Fn() -> bool,
) -> std::process::Child {
    let mut child = exec(root, state)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // The child may already be gone when the kill comes early: a broken pipe is fine.
    let _ = stdin.write_all(reply.as_bytes());
    drop(stdin);
    while !ready() && child.try_wait().unwrap().is_none() {
        std::thread::yield_now();
    }
    child
}

fn run_and_kill(root: &Path, state: &Path, reply: &str, kill: Kill) {
    let (mut child, delay) = match kill {
        Kill::Start(delay) => (start_until(root, state, reply, || true), delay),
        Kill::Record(delay) => (
            start_until(root, state, reply, || journal_records(state) > 0),
            delay,
        ),
        Kill::Replacing(delay) => (start_until(root, state, reply, || replacing(state)), delay),
    };
    std::thread::sleep(delay);
    // SIGKILL straight from this process: the renames of a batch take about a millisecond, less
    // than starting `kill` would.
    kill_flycode(&mut child);
}

/// How long the phases of a run take: the whole run, the journal record's life, and the renames.
struct Phases {
    run: Duration,
    record: Duration,
    renames: Duration,
}

/// Kills spread over each phase in turn (the renames, the shortest, twice as often), from a fixed
/// pseudo-random sequence.
fn kills(count: u32, phases: &Phases) -> Vec<Kill> {
    let spread = |i: u64, over: Duration| {
        let over = over.as_micros().max(1) as u64;
        Duration::from_micros((i * 7919 + 13) * 1009 % over)
    };
    (0..u64::from(count))
        .map(|i| match i % 4 {
            0 => Kill::Start(spread(i, phases.run)),
            1 => Kill::Record(spread(i, phases.record)),
            _ => Kill::Replacing(spread(i, phases.renames)),
        })
        .collect()
}

/// Runs the reply once to the end, timing its phases (with a margin); the renames end when
/// `renamed` says so (or the record is removed).
fn measure(root: &Path, state: &Path, reply: &str, renamed: impl Fn() -> bool) -> Phases {
    let started = Instant::now();
    let mut child = start_until(root, state, reply, || journal_records(state) > 0);
    let recorded = Instant::now();
    let (mut renaming, mut renames_done) = (None, None);
    while journal_records(state) > 0 && child.try_wait().unwrap().is_none() {
        if renaming.is_none() && replacing(state) {
            renaming = Some(Instant::now());
        }
        if renames_done.is_none() && renamed() {
            renames_done = Some(Instant::now());
        }
        std::thread::yield_now();
    }
    let ended = Instant::now();
    assert!(child.wait().unwrap().success());
    let margin = |d: Duration| d + d / 5;
    Phases {
        run: margin(started.elapsed()),
        record: margin(ended - recorded),
        renames: margin(renames_done.unwrap_or(ended) - renaming.unwrap_or(recorded)),
    }
}

/// Runs the whole reply and returns flycode's standard error.
fn run_to_the_end(root: &Path, state: &Path, reply: &str) -> String {
    let output = super::common::flycode()
        .args(["exec", "--approve", "auto", "--root"])
        .arg(root)
        .env("FLYCODE_STATE_DIR", state)
        .write_stdin(reply.to_owned())
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A harmless start of flycode in the same root and state directory: it recovers first. Returns
/// what it said on standard error.
fn next_start(root: &Path, state: &Path, readable: &Path) -> String {
    let call = json!({"id": "r", "tool": "fs.read", "args": {"path": readable}});
    run_to_the_end(root, state, &format!("```flycode-call\n{call}\n```\n"))
}

/// Every path below `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut all = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                stack.push(entry.path());
            }
            all.push(entry.path());
        }
    }
    all
}

fn leftovers(root: &Path) -> Vec<PathBuf> {
    walk(root)
        .into_iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(".flycode-tmp-"))
        })
        .collect()
}

/// Journal records (and the temporary files of records being written).
fn journal_records(state: &Path) -> usize {
    std::fs::read_dir(state.join("journal")).map_or(0, |entries| entries.count())
}

/// Complete journal records: what the next start reports on.
fn complete_records(state: &Path) -> usize {
    std::fs::read_dir(state.join("journal")).map_or(0, |entries| {
        entries
            .filter(|e| {
                !e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with('.')
            })
            .count()
    })
}

/// Asserts what the next start must leave: no temporary file or backup in the root, no record in
/// the state directory; and that it said so exactly when there was something to recover.
fn assert_recovered(root: &Path, state: &Path, readable: &Path) {
    let had_records = complete_records(state) > 0;
    let stderr = next_start(root, state, readable);
    assert_eq!(leftovers(root), Vec::<PathBuf>::new(), "{stderr}");
    assert_eq!(journal_records(state), 0, "{stderr}");
    assert_eq!(
        stderr.contains("an interrupted") && stderr.contains("from an earlier run"),
        had_records,
        "{stderr}"
    );
}

#[test]
fn a_killed_write_is_old_or_new_and_the_next_start_leaves_nothing() {
    let temp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(temp.path()).unwrap().join("root");
    let state = temp.path().join("state");
    std::fs::create_dir_all(&root).unwrap();
    let note = root.join("note.txt");
    std::fs::write(&note, "a small file to read\n").unwrap();
    let target = root.join("big.txt");
    let old = "o".repeat(2 * 1024 * 1024);
    let new = "n".repeat(4 * 1024 * 1024);
    let call = json!({"id": "w", "tool": "fs.write", "args": {"path": target, "mode": "overwrite", "content": new}});
    let reply = format!("```flycode-call\n{call}\n```\n");
    // One whole run shows how long a write takes here; the kills are spread over that span.
    std::fs::write(&target, &old).unwrap();
    let phases = measure(&root, &state, &reply, || false);
    let (mut olds, mut news, mut recovered) = (0, 0, 0);
    for kill in kills(30, &phases) {
        std::fs::write(&target, &old).unwrap();
        run_and_kill(&root, &state, &reply, kill);
        recovered += usize::from(complete_records(&state) > 0);
        let before = std::fs::read_to_string(&target).unwrap();
        assert!(
            before == old || before == new,
            "torn: {} bytes",
            before.len()
        );
        assert_recovered(&root, &state, &note);
        let after = std::fs::read_to_string(&target).unwrap();
        assert_eq!(after, before, "recovery changed a whole file");
        if after == new { news += 1 } else { olds += 1 }
    }
    eprintln!(
        "fs.write killed 30 times: {olds} old, {news} new, {recovered} recovered at the next start"
    );
}

#[test]
fn a_killed_batch_is_all_old_or_all_new_after_the_next_start() {
    let temp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(temp.path()).unwrap().join("root");
    let state = temp.path().join("state");
    // 90 files that exist, in a few directories, and 10 the batch creates in a new directory.
    let paths: Vec<PathBuf> = (0..100)
        .map(|i| match i {
            0..90 => root.join(format!("d{}/f{i}.txt", i % 3)),
            _ => root.join(format!("fresh/sub/f{i}.txt")),
        })
        .collect();
    let old = |i: usize| format!("old {i}\n").repeat(40);
    let new = |i: usize| format!("new {i}\n").repeat(60);
    let reset = || {
        let _ = std::fs::remove_dir_all(&root);
        for (i, path) in paths.iter().enumerate().take(90) {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, old(i)).unwrap();
        }
    };
    let files: Vec<_> = paths
        .iter()
        .enumerate()
        .map(|(i, p)| json!({"path": p, "content": new(i)}))
        .collect();
    let call = json!({"id": "b", "tool": "fs.writeBatch", "args": {"files": files}});
    let reply = format!("```flycode-call\n{call}\n```\n");
    reset();
    // The last file is a new one: it appears with the last rename.
    let phases = measure(&root, &state, &reply, || paths[99].exists());
    let mut outcomes = std::collections::BTreeMap::new();
    for kill in kills(36, &phases) {
        reset();
        run_and_kill(&root, &state, &reply, kill);
        let recorded = complete_records(&state) > 0;
        // Killed between two renames: some files new, some old, until the next start.
        let renamed = (0..100)
            .filter(|&i| std::fs::read_to_string(&paths[i]).is_ok_and(|t| t == new(i)))
            .count();
        let killed_at = match renamed {
            0 => "before the renames",
            100 => "after the renames",
            _ => "between two renames",
        };
        assert_recovered(&root, &state, &paths[0]);
        let states: Vec<bool> = paths
            .iter()
            .enumerate()
            .map(|(i, path)| match std::fs::read_to_string(path) {
                Ok(text) if text == new(i) => true,
                Ok(text) if i < 90 && text == old(i) => false,
                Ok(text) => panic!("{} is torn: {} bytes", path.display(), text.len()),
                Err(_) if i >= 90 => false,
                Err(error) => panic!("{}: {error}", path.display()),
            })
            .collect();
        let all_new = states.iter().all(|&s| s);
        assert!(
            all_new || states.iter().all(|&s| !s),
            "a mixed batch: {} of 100 new",
            states.iter().filter(|&&s| s).count()
        );
        if !all_new {
            // Undone completely: the directories the batch made are gone too.
            assert!(!root.join("fresh").exists());
        }
        let outcome = match (all_new, recorded) {
            (true, true) => "finished at the next start",
            (false, true) => "undone at the next start",
            (true, false) => "all new, nothing to recover",
            (false, false) => "all old, nothing to recover",
        };
        *outcomes.entry((killed_at, outcome)).or_insert(0) += 1;
    }
    eprintln!("fs.writeBatch killed 36 times: {outcomes:?}");
}

#[cfg(target_os = "linux")]
/// The start time of a process, as flycode's journal names record it.
#[cfg(target_os = "linux")]
fn start_time(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 1..];
    rest.split_whitespace().nth(19).unwrap().parse().unwrap()
}

#[test]
#[cfg(target_os = "linux")]
fn the_record_of_a_running_writer_is_left_alone() {
    let temp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(temp.path()).unwrap().join("root");
    let state = temp.path().join("state");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("a.txt"), "old").unwrap();
    let staged = root.join(".flycode-tmp-1-0-a.txt");
    std::fs::write(&staged, "half").unwrap();
    let mut writer = Command::new("sleep").arg("60").spawn().unwrap();
    let record = json!({
        "operation": "write",
        "phase": "staging",
        "roots": [root],
        "targets": [{"root": root, "dir": "", "name": "a.txt", "temp": ".flycode-tmp-1-0-a.txt",
                     "backup": null, "sha256": "0", "created": null}],
    });
    let name = format!("{}-{}-0.json", writer.id(), start_time(writer.id()));
    super::common::write_journal_record(&state, &name, &record);
    // The writer runs: its record and temporary file stay.
    let stderr = next_start(&root, &state, &root.join("a.txt"));
    assert!(staged.exists(), "{stderr}");
    assert_eq!(journal_records(&state), 1);
    writer.kill().unwrap();
    writer.wait().unwrap();
    // It is gone: the next start undoes its write.
    let stderr = next_start(&root, &state, &root.join("a.txt"));
    assert!(
        stderr.contains(&format!(
            "flycode: undid an interrupted write of {} from an earlier run",
            root.join("a.txt").display()
        )),
        "{stderr}"
    );
    assert!(!staged.exists());
    assert_eq!(journal_records(&state), 0);
    assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), "old");
}
