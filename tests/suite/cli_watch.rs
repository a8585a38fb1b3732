//! `flycode watch --inbox`: the real binary watching a real folder.

use super::common::spawn_watch;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

use super::common::{send_signal, wait_for_file};

struct Watching {
    _temp: tempfile::TempDir,
    inbox: PathBuf,
    root: PathBuf,
    child: Child,
}

fn start(existing_files: &[(&str, &str)], extra: &[&str]) -> Watching {
    let temp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(temp.path()).unwrap();
    let (inbox, root) = (base.join("inbox"), base.join("root"));
    std::fs::create_dir_all(&inbox).unwrap();
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("log.txt"), "").unwrap();
    for (name, text) in existing_files {
        std::fs::write(inbox.join(name), text).unwrap();
    }
    let child = spawn_watch(&inbox, &root, &base.join("state"), extra, &[]);
    Watching {
        _temp: temp,
        inbox,
        root,
        child,
    }
}

fn append_call(root: &Path, id: &str) -> String {
    format!(
        "```flycode-call\n{{\"id\":\"{id}\",\"tool\":\"fs.write\",\"args\":{{\"path\":\"{}/log.txt\",\"mode\":\"append\",\"content\":\"{id};\"}}}}\n```\n",
        root.display()
    )
}

fn stop(watching: Watching) -> String {
    send_signal(watching.child.id(), "TERM");
    let output = watching.child.wait_with_output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let leftovers: Vec<_> = std::fs::read_dir(&watching.inbox)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn replies_are_answered_once_with_results_beside_them() {
    let w = start(&[("old.md", "```flycode-call\n{}\n```\n")], &[]);
    // Written in place, slowly: taken only once complete.
    let reply = append_call(&w.root, "c1");
    let mut file = std::fs::File::create(w.inbox.join("one.md")).unwrap();
    file.write_all(&reply.as_bytes()[..20]).unwrap();
    file.flush().unwrap();
    std::thread::sleep(Duration::from_millis(30));
    file.write_all(&reply.as_bytes()[20..]).unwrap();
    drop(file);
    let first = wait_for_file(&w.inbox.join("one.result.md"));
    assert!(first.starts_with("```flycode-result\n[id] c1\n"), "{first}");
    assert!(first.contains("[ok] true"), "{first}");
    // Written elsewhere and renamed into place; the same call again is replayed, not re-run.
    std::fs::write(w.root.join("staged.tmp"), &reply).unwrap();
    std::fs::rename(w.root.join("staged.tmp"), w.inbox.join("two.txt")).unwrap();
    let second = wait_for_file(&w.inbox.join("two.result.md"));
    assert!(second.contains("[replayed] true"), "{second}");
    // Many at once.
    for n in 0..5 {
        std::fs::write(
            w.inbox.join(format!("many{n}.md")),
            append_call(&w.root, &format!("m{n}")),
        )
        .unwrap();
    }
    for n in 0..5 {
        wait_for_file(&w.inbox.join(format!("many{n}.result.md")));
    }
    assert_eq!(
        std::fs::read_to_string(w.root.join("log.txt")).unwrap(),
        "c1;m0;m1;m2;m3;m4;"
    );
    // Prose, result files and the file present at start get no answer.
    std::fs::write(w.inbox.join("prose.md"), "Just thinking aloud.").unwrap();
    // A later reply being answered proves the prose was looked at (files go in name order).
    std::fs::write(w.inbox.join("zz-last.md"), append_call(&w.root, "z")).unwrap();
    wait_for_file(&w.inbox.join("zz-last.result.md"));
    assert!(!w.inbox.join("prose.result.md").exists());
    assert!(!w.inbox.join("old.result.md").exists());
    assert!(!w.inbox.join("one.result.result.md").exists());
    let log = stop(w);
    assert!(
        log.contains("● /fs.write") && log.contains("└ ok") && log.contains("replayed"),
        "{log}"
    );
}

#[test]
fn existing_files_are_answered_when_asked_and_invalid_replies_get_errors() {
    let w = start(
        &[(
            "old.md",
            "Sure:\n```flycode-call\n{\"id\":\"x\",\"tool\":\"fs.raed\",\"args\":{}}\n```\n",
        )],
        &["--existing"],
    );
    let answer = wait_for_file(&w.inbox.join("old.result.md"));
    assert!(
        answer.contains("[ok] false\n[code] text_outside_block"),
        "{answer}"
    );
    stop(w);
}

/// Waits until `name`'s answer is written, after `name` is saved with `text`.
fn answer(w: &Watching, name: &str, text: &str) -> String {
    std::fs::write(w.inbox.join(name), text).unwrap();
    let stem = name.trim_end_matches(".md");
    wait_for_file(&w.inbox.join(format!("{stem}.result.md")))
}

/// Saves `text` as `name`, then a reply that is answered after it (files go in name order):
/// once that answer is there, `name` was looked at.
fn looked_at(w: &Watching, name: &str, text: &str) {
    std::fs::write(w.inbox.join(name), text).unwrap();
    let later = format!("{name}-later.md");
    answer(w, &later, "```flycode-call\n{}\n```\n");
}

#[test]
fn a_call_without_its_fence_is_answered_never_run_and_ordinary_json_is_left_alone() {
    let w = start(&[], &[]);
    let json = |id: &str| {
        format!(
            "{{\"id\":\"{id}\",\"tool\":\"fs.write\",\"args\":{{\"path\":\"{}/log.txt\",\"mode\":\"append\",\"content\":\"{id};\"}}}}",
            w.root.display()
        )
    };
    // A model's ```json block, a rendered copy (the chat's label line, then the JSON), and the
    // bare object: each answered text_outside_block under its id, telling the model what to do.
    let fenced = answer(
        &w,
        "a-json.md",
        &format!("I'll log it.\n```json\n{}\n```\n", json("c1")),
    );
    let rendered = answer(
        &w,
        "b-rendered.md",
        &format!("flycode-call\n{}\n", json("c2")),
    );
    let bare = answer(&w, "c-bare.md", &format!("{}\n", json("c3")));
    for (text, id) in [(&fenced, "c1"), (&rendered, "c2"), (&bare, "c3")] {
        assert!(
            text.starts_with(&format!("```flycode-result\n[id] {id}\n")),
            "{text}"
        );
        assert!(text.contains("[code] text_outside_block"), "{text}");
        assert!(text.contains("it was not run"), "{text}");
        assert!(text.contains("three backticks and flycode-call"), "{text}");
    }
    assert_eq!(std::fs::read_to_string(w.root.join("log.txt")).unwrap(), "");
    // JSON that is no clear call (an unknown tool, another key) earns nothing, not even a line.
    looked_at(
        &w,
        "d-code.md",
        "```json\n{\"tool\":\"hammer\",\"args\":{}}\n```\n{\"name\":\"x\",\"tool\":\"fs.read\",\"args\":{}}\n",
    );
    assert!(!w.inbox.join("d-code.result.md").exists());
    // The fenced call that follows runs: the answer to its near miss was not remembered.
    let ran = answer(&w, "e-fenced.md", &append_call(&w.root, "c1"));
    assert!(
        ran.contains("[ok] true") && !ran.contains("[replayed]"),
        "{ran}"
    );
    assert_eq!(
        std::fs::read_to_string(w.root.join("log.txt")).unwrap(),
        "c1;"
    );
    // Its unfenced copy now is not answered again ("not run" would be false), only noticed.
    let unfenced_again = format!(
        "```json\n{}\n```\n",
        append_call(&w.root, "c1")
            .trim_start_matches("```flycode-call\n")
            .trim_end_matches("```\n")
            .trim()
    );
    looked_at(&w, "f-again.md", &unfenced_again);
    assert!(!w.inbox.join("f-again.result.md").exists());
    // The label and part of a call (a partial selection): a word on the terminal only.
    looked_at(
        &w,
        "g-partial.md",
        "flycode-call\n{\"id\":\"c9\",\"tool\":\"fs.wr",
    );
    assert!(!w.inbox.join("g-partial.result.md").exists());
    let log = stop(w);
    assert!(
        log.contains("saw a call in a ```json block, not ```flycode-call"),
        "{log}"
    );
    assert_eq!(
        log.matches("saw a call without its ```flycode-call fence (copied as rendered text?)")
            .count(),
        2,
        "{log}"
    );
    assert!(log.contains("use the chat's copy button"), "{log}");
    assert!(log.contains("call c1 was answered before"), "{log}");
    assert!(
        log.contains("saw the label flycode-call and part of a call"),
        "{log}"
    );
    assert!(
        !log.contains("d-code.md)"),
        "ordinary JSON made noise: {log}"
    );
}

#[test]
fn a_call_shows_its_start_line_before_it_runs_and_no_spinner_off_a_terminal() {
    let w = start(&[], &[]);
    let run = format!(
        "```flycode-call\n{{\"id\":\"p1\",\"tool\":\"process.run\",\"args\":{{\"command\":\"sh\",\"args\":[\"-c\",\"echo started >&2; sleep 0.3\"],\"cwd\":\"{}\"}}}}\n```\n",
        w.root.display()
    );
    let result = answer(&w, "run.md", &run);
    assert!(result.contains("[ok] true"), "{result}");
    answer(&w, "write.md", &append_call(&w.root, "w1"));
    let log = stop(w);
    let lines: Vec<&str> = log.lines().collect();
    let start = lines
        .iter()
        .position(|line| line.starts_with("● process.run (sh"))
        .unwrap_or_else(|| panic!("no start line: {log}"));
    assert!(lines[start + 1].starts_with("└ ok"), "{log}");
    assert!(lines[start + 1].contains("run.md"), "{log}");
    assert!(log.contains("● fs.write (log.txt)\n└ ok"), "{log}");
    // Standard error is a pipe here: no spinner frames, no carriage returns.
    assert!(!log.contains('\r') && !log.contains('⠋'), "{log:?}");
}

#[test]
fn the_id_of_a_broken_block_is_named_on_the_terminal() {
    let w = start(&[], &[]);
    let result = answer(
        &w,
        "broken.md",
        "```flycode-call\n{\"id\":\"c7\",\"tool\":\"fs.read\",\"args\":{\"path\":\"/a\",}}\n```\n",
    );
    assert!(result.contains("[id] flycode-invalid-call"), "{result}");
    assert!(result.contains("[code] invalid_json"), "{result}");
    let unknown = answer(
        &w,
        "unknown.md",
        "```flycode-call\n{\"id\":\"c8\",\"tool\":\"fs.raed\",\"args\":{}}\n```\n",
    );
    assert!(unknown.contains("[id] c8"), "{unknown}");
    let log = stop(w);
    assert!(
        log.contains("● (none) · call c7 (as written in its broken block)"),
        "{log}"
    );
    assert!(log.contains("● /fs.raed · call c8"), "{log}");
}

/// The CPU time (user and system, in clock ticks) of `pid` and every process below it.
fn tree_cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let own: u64 = stat
        .rsplit_once(')')
        .map(|(_, fields)| {
            // utime and stime: fields 14 and 15, the 12th and 13th after the name.
            fields
                .split_whitespace()
                .skip(11)
                .take(2)
                .filter_map(|n| n.parse::<u64>().ok())
                .sum()
        })
        .unwrap_or(0);
    let children: u64 = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|n| n.parse::<u32>().ok())
                .collect::<Vec<_>>()
        })
        .map(tree_cpu_ticks)
        .sum();
    own + children
}

/// An idle `watch --inbox` sleeps: its own look at the folder never wakes it again (it used to
/// take a whole core, forever, doing nothing). The bound is generous: a guard against the loop
/// coming back, not a timing claim (the README's figure comes from the bench).
#[test]
fn an_idle_inbox_watch_sleeps() {
    let w = start(&[], &[]);
    // One reply first: the folder has been read, written to and answered.
    std::fs::write(w.inbox.join("one.md"), append_call(&w.root, "one")).unwrap();
    wait_for_file(&w.inbox.join("one.result.md"));
    std::thread::sleep(Duration::from_millis(500));
    let before = tree_cpu_ticks(w.child.id());
    std::thread::sleep(Duration::from_secs(3));
    let used = tree_cpu_ticks(w.child.id()) - before;
    // 300 ticks is the whole 3 s of a core; the loop took all of them.
    assert!(used < 60, "an idle watch used {used} ticks of CPU in 3 s");
    // Still awake to a new reply.
    std::fs::write(w.inbox.join("two.md"), append_call(&w.root, "two")).unwrap();
    wait_for_file(&w.inbox.join("two.result.md"));
    stop(w);
}

/// A read copied again runs again and gives what the file holds now: the model is never handed
/// old data as new. A change copied again is replayed, and says when it first ran.
#[test]
fn a_read_saved_again_runs_again_and_a_replayed_change_says_when_it_ran() {
    let w = start(&[], &[]);
    std::fs::write(w.root.join("notes.txt"), "first version\n").unwrap();
    let read = format!(
        "```flycode-call\n{{\"id\":\"call-001\",\"tool\":\"fs.read\",\"args\":{{\"path\":\"{}/notes.txt\"}}}}\n```\n",
        w.root.display()
    );
    std::fs::write(w.inbox.join("a.md"), &read).unwrap();
    let first = wait_for_file(&w.inbox.join("a.result.md"));
    assert!(first.contains("first version"), "{first}");
    std::fs::write(w.root.join("notes.txt"), "second version\n").unwrap();
    std::fs::write(w.inbox.join("b.md"), &read).unwrap();
    let second = wait_for_file(&w.inbox.join("b.result.md"));
    assert!(second.contains("second version"), "{second}");
    assert!(!second.contains("[replayed]"), "{second}");
    // A change is replayed, never run twice, and says when it ran.
    std::fs::write(w.inbox.join("c.md"), append_call(&w.root, "once")).unwrap();
    wait_for_file(&w.inbox.join("c.result.md"));
    std::fs::write(w.inbox.join("d.md"), append_call(&w.root, "once")).unwrap();
    let again = wait_for_file(&w.inbox.join("d.result.md"));
    assert!(again.contains("[replayed] true"), "{again}");
    assert!(again.contains("[firstRan] 20"), "{again}");
    assert_eq!(
        std::fs::read_to_string(w.root.join("log.txt")).unwrap(),
        "once;"
    );
    stop(w);
}

/// A second watcher of the same inbox refuses to start and names the first: two would both
/// answer each reply and run its side effects twice. Another inbox is free.
#[test]
fn a_second_watch_of_one_inbox_refuses_to_start_and_names_the_first() {
    let w = start(&[], &[]);
    let state = w.inbox.parent().unwrap().join("state");
    let second = std::process::Command::new(env!("CARGO_BIN_EXE_flycode"))
        .args(["watch", "--yes", "--inbox"])
        .arg(&w.inbox)
        .arg("--root")
        .arg(&w.root)
        .env("FLYCODE_STATE_DIR", &state)
        .env_remove("XDG_CONFIG_HOME")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(2), "{err}");
    assert!(
        err.contains("already watching") && err.contains("pid "),
        "{err}"
    );
    // The first still answers, once.
    std::fs::write(w.inbox.join("one.md"), append_call(&w.root, "one")).unwrap();
    wait_for_file(&w.inbox.join("one.result.md"));
    assert_eq!(
        std::fs::read_to_string(w.root.join("log.txt")).unwrap(),
        "one;"
    );
    // Another folder is another source.
    let other = w.inbox.parent().unwrap().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let third = spawn_watch(&other, &w.root, &state, &[], &[]);
    send_signal(third.id(), "TERM");
    assert_eq!(third.wait_with_output().unwrap().status.code(), Some(0));
    stop(w);
}

/// A reply selected by hand from a rendered chat takes the code block's header along: the label
/// `flycode-call`, then the page's `Copy code`, then the JSON. It is a near miss like the others:
/// not run, answered `text_outside_block`.
#[test]
fn a_selection_with_the_copy_code_label_is_answered_as_a_near_miss() {
    let w = start(&[], &[]);
    let text = format!(
        "flycode-call\nCopy code\n{{\"id\":\"sel-1\",\"tool\":\"fs.write\",\"args\":{{\"path\":\"{}/log.txt\",\"mode\":\"append\",\"content\":\"no\"}}}}\n",
        w.root.display()
    );
    std::fs::write(w.inbox.join("selected.md"), text).unwrap();
    let answer = wait_for_file(&w.inbox.join("selected.result.md"));
    assert!(answer.contains("[code] text_outside_block"), "{answer}");
    assert!(answer.contains("[id] sel-1"), "{answer}");
    assert_eq!(std::fs::read_to_string(w.root.join("log.txt")).unwrap(), "");
    let log = stop(w);
    assert!(log.contains("copied as rendered text"), "{log}");
}
