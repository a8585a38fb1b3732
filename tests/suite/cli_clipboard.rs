//! `flycode watch` on a real X11 clipboard: an Xvfb server of its own, xclip playing the browser.
//!
//! Needs `Xvfb` and `xclip` (`.ci/run` installs them). Without them the tests say so and pass
//! on a developer's machine, but fail under CI=true, where they must run.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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
        eprintln!(
            "skipping clipboard test: Xvfb or xclip is not installed (apt-get install xvfb xclip)"
        );
        return None;
    }
    let name = format!(":{}", 40 + number + std::process::id() % 200 * 3);
    let server = Command::new("Xvfb")
        .args([name.as_str(), "-nolisten", "tcp"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let display = Display { server, name };
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if copy(&display, "ready").is_ok() && paste(&display) == "ready" {
            return Some(display);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("Xvfb {} did not start", display.name);
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
    Command::new(env!("CARGO_BIN_EXE_flycode"))
        .args([
            "watch",
            "--yes",
            "--new-session",
            "--interval-ms",
            "20",
            "--root",
        ])
        .arg(root)
        .env("DISPLAY", &display.name)
        .env("FLYCODE_STATE_DIR", state)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn stop(child: Child) -> String {
    Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
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
    // Give the watcher its first look at the clipboard, then act as the browser.
    std::thread::sleep(Duration::from_millis(300));
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
    // A copied result is left alone, and so is prose.
    let foreign = "```flycode-result\n[id] z9\n[command] /fs.ls /\n[ok] true\n```\n";
    copy(&display, foreign).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(paste(&display), foreign);
    copy(&display, "just some prose").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(paste(&display), "just some prose");
    // An invalid reply earns its error result.
    copy(&display, "Let me check.\n```flycode-call\n{\"id\":\"c2\",\"tool\":\"fs.ls\",\"args\":{\"path\":\"/\"}}\n```").unwrap();
    let error = wait_clipboard(&display, |text| text.starts_with("```flycode-result"));
    assert!(error.contains("[code] text_outside_block"), "{error}");
    let log = stop(watch);
    assert_eq!(log.matches("● /fs.write").count(), 50, "{log}");
    assert_eq!(log.matches("replayed").count(), 49, "{log}");
}

#[test]
fn without_a_display_it_points_to_the_inbox() {
    let output = Command::new(env!("CARGO_BIN_EXE_flycode"))
        .arg("watch")
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("no clipboard is available") && stderr.contains("--inbox DIR"),
        "{stderr}"
    );
}
