//! The approval question as a person sees it: `flycode exec` under a real pseudo-terminal (util-linux
//! `script`), so that `/dev/tty` is a terminal the test types into.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::json;

/// How long any one wait may last before the test fails instead of hanging.
const DEADLINE: Duration = Duration::from_secs(20);

/// Whether util-linux `script` can be used; without it the test is skipped, except in CI.
fn has_script() -> bool {
    let found = Command::new("script")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "util-linux `script` is needed to give flycode a terminal"
        );
        eprintln!("skipped: util-linux `script` is not installed");
    }
    found
}

/// A word for `sh -c`, in single quotes.
fn quoted(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', "'\\''"))
}

/// Output read so far from `receiver` appended to `seen`, waiting until `done` says so or the
/// deadline passes.
fn read_until(
    receiver: &mpsc::Receiver<Vec<u8>>,
    seen: &mut Vec<u8>,
    done: impl Fn(&str) -> bool,
) -> bool {
    let deadline = Instant::now() + DEADLINE;
    while !done(&String::from_utf8_lossy(seen)) {
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            return false;
        };
        match receiver.recv_timeout(left) {
            Ok(chunk) => seen.extend(chunk),
            Err(_) => return done(&String::from_utf8_lossy(seen)),
        }
    }
    true
}

#[test]
fn a_multi_line_script_is_asked_about_in_real_lines_and_a_no_leaves_it_unrun() {
    if !has_script() {
        return;
    }
    let temp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(temp.path()).unwrap();
    let root = base.join("root");
    let home = base.join("home");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let reply = base.join("reply.md");
    let call = json!({
        "id": "t1",
        "tool": "shell.exec",
        "args": {"command": "echo one\necho two\ntouch ran.txt"}
    });
    std::fs::write(&reply, format!("```flycode-call\n{call}\n```\n")).unwrap();
    let command = format!(
        "{} exec --root {} {}",
        quoted(Path::new(env!("CARGO_BIN_EXE_flycode"))),
        quoted(&root),
        quoted(&reply)
    );
    let mut child = Command::new("script")
        .args(["-qfec", &command, "/dev/null"])
        .current_dir(&root)
        .env("SHELL", "/bin/sh")
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("FLYCODE_STATE_DIR", base.join("state"))
        .env("TERM", "dumb")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let (sender, receiver) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut buffer = [0u8; 4096];
        while let Ok(read) = stdout.read(&mut buffer) {
            if read == 0 || sender.send(buffer[..read].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let asked = read_until(&receiver, &mut seen, |text| text.contains("Run it? [y/N]"));
    if !asked {
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "no question within {DEADLINE:?}:\n{}",
            String::from_utf8_lossy(&seen)
        );
    }
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"n\n").unwrap();
    stdin.flush().unwrap();
    let answered = read_until(&receiver, &mut seen, |text| {
        text.contains("denied_by_policy")
    });
    let deadline = Instant::now() + DEADLINE;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    drop(stdin);
    reader.join().unwrap();
    seen.extend(receiver.try_iter().flatten());
    let output = String::from_utf8_lossy(&seen).replace('\r', "");
    assert!(
        answered && status.is_some(),
        "flycode did not finish within {DEADLINE:?}:\n{output}"
    );

    let lines: Vec<&str> = output.lines().collect();
    let one = lines
        .iter()
        .position(|line| line.ends_with("│ echo one"))
        .unwrap_or_else(|| panic!("no `echo one` line:\n{output}"));
    assert!(
        lines[one + 1].ends_with("│ echo two") && lines[one + 2].ends_with("│ touch ran.txt"),
        "the script's lines are not the question's lines:\n{output}"
    );
    // The question, not the result block after it, whose [command] is the one-line slash form.
    let question = &output[..output.find("Run it? [y/N]").unwrap()];
    assert!(!question.contains("\\n"), "{question}");
    assert!(
        question.contains(if cfg!(target_os = "linux") {
            "sandbox: Landlock: it writes only inside the allowed roots, a private temporary directory and /dev/null"
        } else {
            "sandbox: none on this platform: the program runs with your user's rights"
        }),
        "{question}"
    );
    assert!(
        question.contains("cwd: the first allowed root"),
        "{question}"
    );
    assert!(output.contains("denied_by_policy"), "{output}");
    assert_eq!(status.and_then(|s| s.code()), Some(1), "{output}");
    assert!(
        !root.join("ran.txt").exists(),
        "the declined script ran:\n{output}"
    );
}
