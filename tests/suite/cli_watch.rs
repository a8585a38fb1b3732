//! `flycode watch --inbox`: the real binary watching a real folder.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::common::{read_stderr_until, send_signal, wait_for_file};

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
    let mut child = Command::new(env!("CARGO_BIN_EXE_flycode"))
        .args([
            "watch",
            "--yes",
            "--interval-ms",
            "20",
            "--quiet-ms",
            "100",
            "--inbox",
        ])
        .arg(&inbox)
        .arg("--root")
        .arg(&root)
        .args(extra)
        .env("FLYCODE_STATE_DIR", base.join("state"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A file saved after this line is answered; one saved before it counts as present at start.
    read_stderr_until(&mut child, "Ctrl-C stops.");
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
