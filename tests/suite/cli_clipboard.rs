//! `flycode watch` on a real X11 clipboard: an Xvfb server of its own, xclip playing the browser.
//!
//! Needs `Xvfb` and `xclip` (`.ci/run` installs them). Without them the tests say so and pass
//! on a developer's machine, but fail under CI=true, where they must run.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::common::{read_stderr_until, send_signal};

struct Display {
    server: Child,
    name: String,
}

impl Drop for Display {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

fn has(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// An Xvfb display for this test, or `None` (with a note) where the tools are missing.
fn display(number: u32) -> Option<Display> {
    if !has("Xvfb") || !has("xclip") {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must provide Xvfb and xclip (.ci/run installs them)"
        );
        // Once, and past the test harness's capture (it takes only `eprintln!`'s output), so a
        // passing `cargo test` still says that these tests did not run.
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "\nNOTE: the clipboard tests were SKIPPED: Xvfb or xclip is not installed (apt-get install xvfb xclip, or run .ci/run)\n"
            );
        });
        return None;
    }
    // A display number taken already (another test run's, or a lock file a killed run left
    // naming a pid that now belongs to another process) makes Xvfb exit at once: the next
    // number is tried.
    let first = 40 + number + std::process::id() % 200 * 3;
    for name in (0..5).map(|attempt| format!(":{}", first + attempt * 601)) {
        let server = Command::new("Xvfb")
            .args([name.as_str(), "-nolisten", "tcp"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut display = Display { server, name };
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            // Ours exited: the display is another's, never to be used.
            if display
                .server
                .try_wait()
                .is_ok_and(|status| status.is_some())
            {
                break;
            }
            if copy(&display, "ready").is_ok() && paste(&display) == "ready" {
                return Some(display);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    panic!("Xvfb did not start on any of five displays from :{first}");
}

fn copy(display: &Display, text: &str) -> std::io::Result<()> {
    let mut xclip = Command::new("xclip")
        .args(["-selection", "clipboard", "-i"])
        .env("DISPLAY", &display.name)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    xclip.stdin.take().unwrap().write_all(text.as_bytes())?;
    xclip.wait()?;
    Ok(())
}

/// Copies `text` with an xclip that serves `reads` requests for it and then exits, and waits (up
/// to 20 s) for it to exit: the watcher, the only reader, has then read `text` (or replaced it,
/// which would be an answer in its log).
fn copy_until_read(display: &Display, text: &str, reads: u32) {
    let mut xclip = Command::new("xclip")
        .args(["-selection", "clipboard", "-i", "-quiet", "-loops"])
        .arg(reads.to_string())
        .env("DISPLAY", &display.name)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    xclip
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while xclip.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = xclip.kill();
            let _ = xclip.wait();
            panic!("the watcher did not read the clipboard {reads} times: {text:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn paste(display: &Display) -> String {
    Command::new("xclip")
        .args(["-selection", "clipboard", "-o"])
        .env("DISPLAY", &display.name)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

/// Waits (up to 20 s) for the clipboard to satisfy `done`.
fn wait_clipboard(display: &Display, done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = paste(display);
        if done(&text) || Instant::now() > deadline {
            return text;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn start_watch(display: &Display, root: &Path, state: &Path) -> Child {
    start_watch_with(display, root, state, &["--yes", "--new-session"])
}

/// `flycode watch` on `display` with `extra` flags, in a session of its own (no terminal can
/// answer an approval question), once it has seen what the clipboard held at start: a copy made
/// after this returns is answered.
fn start_watch_with(display: &Display, root: &Path, state: &Path, extra: &[&str]) -> Child {
    let mut child = Command::new("setsid")
        .arg(env!("CARGO_BIN_EXE_flycode"))
        .args(["watch", "--interval-ms", "20"])
        .args(extra)
        .arg("--root")
        .arg(root)
        .env("DISPLAY", &display.name)
        .env("FLYCODE_STATE_DIR", state)
        .env("HOME", state)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    read_stderr_until(&mut child, "watching the clipboard");
    child
}

/// Copies `reply` the way the browser does and returns the result flycode put on the clipboard.
/// Prose goes first and is waited for, so the result is this reply's, not an earlier one's.
fn exchange(display: &Display, reply: &str) -> String {
    let separator = format!("prose before {}", reply.len());
    copy(display, &separator).unwrap();
    wait_clipboard(display, |text| text == separator);
    copy(display, reply).unwrap();
    wait_clipboard(display, |text| text.starts_with("```flycode-result"))
}

fn stop(child: Child) -> String {
    send_signal(child.id(), "TERM");
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn workspace() -> (tempfile::TempDir, PathBuf) {
    let temp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(temp.path()).unwrap().join("root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("log.txt"), "").unwrap();
    (temp, root)
}

#[test]
fn a_copied_call_is_answered_on_the_clipboard_and_never_runs_twice() {
    let Some(display) = display(0) else { return };
    let (temp, root) = workspace();
    copy(&display, "something copied before flycode started").unwrap();
    let watch = start_watch(&display, &root, &temp.path().join("state"));
    let reply = format!(
        "```flycode-call\n{{\"id\":\"c1\",\"tool\":\"fs.write\",\"args\":{{\"path\":\"{}/log.txt\",\"mode\":\"append\",\"content\":\"ran;\"}}}}\n```\n",
        root.display()
    );
    for round in 0..50 {
        // Prose in between, seen on the clipboard before the next copy: the previous result is
        // gone, so the result waited for below is this round's (xclip may return before it
        // owns the clipboard).
        let separator = format!("prose between copies, round {round}");
        copy(&display, &separator).unwrap();
        wait_clipboard(&display, |text| text == separator);
        copy(&display, &reply).unwrap();
        let result = wait_clipboard(&display, |text| text.starts_with("```flycode-result"));
        assert!(
            result.starts_with("```flycode-result\n[id] c1\n"),
            "round {round}: {result}"
        );
        assert_eq!(
            result.contains("[replayed] true"),
            round > 0,
            "round {round}: {result}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(root.join("log.txt")).unwrap(),
        "ran;"
    );
    // A copied result is left alone, and so is prose: the watcher reads them (three reads each,
    // so at least one whole one) and answers neither (counted in its log below).
    let foreign = "```flycode-result\n[id] z9\n[command] /fs.ls /\n[ok] true\n```\n";
    copy_until_read(&display, foreign, 3);
    copy_until_read(&display, "just some prose", 3);
    // An invalid reply earns its error result.
    copy(&display, "Let me check.\n```flycode-call\n{\"id\":\"c2\",\"tool\":\"fs.ls\",\"args\":{\"path\":\"/\"}}\n```").unwrap();
    let error = wait_clipboard(&display, |text| text.starts_with("```flycode-result"));
    assert!(error.contains("[code] text_outside_block"), "{error}");
    let log = stop(watch);
    // The call that ran shows its start line; the 49 replays their command.
    assert_eq!(log.matches("● fs.write (log.txt)").count(), 1, "{log}");
    assert_eq!(log.matches("● /fs.write").count(), 49, "{log}");
    assert_eq!(log.matches("replayed").count(), 49, "{log}");
    assert_eq!(
        log.matches("● ").count(),
        51,
        "the fifty writes and the invalid reply, nothing for the result or the prose: {log}"
    );
}

#[test]
fn a_new_conversation_and_a_denial_without_a_terminal_survive_restarts() {
    let Some(display) = display(1) else { return };
    let (temp, root) = workspace();
    let state = temp.path().join("state");
    let append = |id: &str, text: &str| {
        format!(
            "```flycode-call\n{{\"id\":\"{id}\",\"tool\":\"fs.write\",\"args\":{{\"path\":\"{}/log.txt\",\"mode\":\"append\",\"content\":\"{text}\"}}}}\n```\n",
            root.display()
        )
    };
    let touch = format!(
        "```flycode-call\n{{\"id\":\"call-002\",\"tool\":\"process.run\",\"args\":{{\"command\":\"touch\",\"args\":[\"{}/ran.txt\"]}}}}\n```\n",
        root.display()
    );
    // The first conversation, with no one at a terminal to allow a program.
    let watch = start_watch_with(&display, &root, &state, &[]);
    let first = exchange(&display, &append("call-001", "first;"));
    assert!(first.contains("[ok] true"), "{first}");
    let denied = exchange(&display, &touch);
    assert!(denied.contains("[code] denied_by_policy"), "{denied}");
    assert!(!denied.contains("--yes"), "{denied}");
    let log = stop(watch);
    assert!(log.contains("--yes"), "{log}");

    // Restarted with --yes: the same copy runs; a new conversation's call-001 runs too.
    let watch = start_watch_with(&display, &root, &state, &["--yes"]);
    let ran = exchange(&display, &touch);
    assert!(
        ran.contains("[ok] true") && !ran.contains("[replayed]"),
        "{ran}"
    );
    assert!(root.join("ran.txt").exists());
    let second = exchange(&display, &append("call-001", "second;"));
    assert!(
        second.starts_with("```flycode-result\n[id] call-001\n"),
        "{second}"
    );
    assert!(
        second.contains("[ok] true") && !second.contains("[replayed]"),
        "{second}"
    );
    // The same call copied twice is answered from memory.
    let again = exchange(&display, &append("call-001", "second;"));
    assert!(again.contains("[replayed] true"), "{again}");
    let log = stop(watch);
    assert!(log.contains("used before for another call"), "{log}");
    assert_eq!(
        std::fs::read_to_string(root.join("log.txt")).unwrap(),
        "first;second;"
    );
}

#[test]
fn the_copied_prompt_stays_on_the_clipboard_and_is_not_answered() {
    let Some(display) = display(2) else { return };
    let (temp, root) = workspace();
    let state = temp.path().join("state");
    let watch = start_watch_with(&display, &root, &state, &["--yes", "--new-session"]);
    let prompt_command = || {
        let mut command = Command::new(env!("CARGO_BIN_EXE_flycode"));
        command
            .args(["prompt", "--lang", "en", "--root"])
            .arg(&root)
            .env("DISPLAY", &display.name)
            .env("FLYCODE_STATE_DIR", &state);
        command
    };
    let printed = prompt_command().output().unwrap();
    let prompt = String::from_utf8(printed.stdout).unwrap();
    let copied = prompt_command().arg("--copy").output().unwrap();
    let stderr = String::from_utf8_lossy(&copied.stderr);
    assert_eq!(copied.status.code(), Some(0), "{stderr}");
    assert!(copied.stdout.is_empty());
    assert!(stderr.contains("on the clipboard"), "{stderr}");
    // flycode prompt has exited; the prompt is still there to paste.
    assert_eq!(paste(&display), prompt);
    // The watcher reads it (offered again, the same text, by an xclip that counts its readers)
    // and leaves it: nothing is answered before the reply below.
    copy_until_read(&display, &prompt, 3);
    // A real reply after it is answered: the watcher was looking all along.
    let reply = format!(
        "```flycode-call\n{{\"id\":\"call-001\",\"tool\":\"fs.read\",\"args\":{{\"path\":\"{}/log.txt\"}}}}\n```\n",
        root.display()
    );
    copy(&display, &reply).unwrap();
    let result = wait_clipboard(&display, |text| text.starts_with("```flycode-result"));
    assert!(result.contains("[ok] true"), "{result}");
    let log = stop(watch);
    assert_eq!(
        log.matches("● ").count(),
        1,
        "only the reply is answered: {log}"
    );
}

/// Stops the watcher with Ctrl-C's signal and returns what it printed.
fn interrupt(child: Child) -> String {
    send_signal(child.id(), "INT");
    let output = child.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(0), "{log}");
    log
}

#[test]
fn the_last_result_stays_on_the_clipboard_after_watch_stops() {
    let Some(display) = display(3) else { return };
    let (temp, root) = workspace();
    let watch = start_watch(&display, &root, &temp.path().join("state"));
    let reply = format!(
        "```flycode-call\n{{\"id\":\"c1\",\"tool\":\"fs.read\",\"args\":{{\"path\":\"{}/log.txt\"}}}}\n```\n",
        root.display()
    );
    let result = exchange(&display, &reply);
    assert!(result.contains("[ok] true"), "{result}");
    let log = interrupt(watch);
    assert!(
        log.contains("the last result stays on the clipboard"),
        "{log}"
    );
    // flycode watch has exited; its result is still there to paste.
    assert_eq!(paste(&display), result);
    // Whoever copies next takes the clipboard over, as from any program.
    copy(&display, "the next copy").unwrap();
    assert_eq!(
        wait_clipboard(&display, |text| text == "the next copy"),
        "the next copy"
    );
}

#[test]
fn a_copy_without_the_fence_is_answered_on_the_clipboard_and_a_later_copy_is_left_alone() {
    let Some(display) = display(4) else { return };
    let (temp, root) = workspace();
    let watch = start_watch(&display, &root, &temp.path().join("state"));
    // What selecting a rendered chat block gives: its label line, then the JSON.
    let rendered = format!(
        "flycode-call\n{{\"id\":\"c1\",\"tool\":\"fs.write\",\"args\":{{\"path\":\"{}/log.txt\",\"mode\":\"append\",\"content\":\"ran;\"}}}}\n",
        root.display()
    );
    let answer = exchange(&display, &rendered);
    assert!(
        answer.starts_with("```flycode-result\n[id] c1\n"),
        "{answer}"
    );
    assert!(answer.contains("[code] text_outside_block"), "{answer}");
    // Copied code that holds JSON is left alone: read three times, never replaced.
    copy_until_read(
        &display,
        "```json\n{\"tool\": \"hammer\", \"args\": {}}\n```\n",
        3,
    );
    let log = stop(watch);
    assert_eq!(std::fs::read_to_string(root.join("log.txt")).unwrap(), "");
    assert!(
        log.contains("saw a call without its ```flycode-call fence (copied as rendered text?)"),
        "{log}"
    );
    assert_eq!(log.matches("● ").count(), 1, "{log}");
}
