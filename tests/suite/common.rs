//! Helpers shared by the integration tests.

use std::path::{Path, PathBuf};

use assert_cmd::Command;

/// The repository's root directory.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The real `flycode` binary, ready to run.
pub fn flycode() -> Command {
    Command::new(env!("CARGO_BIN_EXE_flycode"))
}

/// Files with `extension` directly inside `dir`, sorted by name.
pub fn files_in(dir: &Path, extension: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == extension))
        .collect();
    files.sort();
    files
}

/// Waits (up to 30 s) for the file at `path` to exist and returns its content.
pub fn wait_for_file(path: &Path) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        if let Ok(text) = std::fs::read_to_string(path) {
            return text;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("{} never appeared", path.display());
}

/// Reads `child`'s standard error (piped) up to the first `marker` and returns what it read; the
/// rest stays in the pipe for whoever collects the output later. Panics if the child ends first.
pub fn read_stderr_until(child: &mut std::process::Child, marker: &str) -> String {
    use std::io::Read;
    let mut stderr = child.stderr.take().expect("standard error is piped");
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    while !seen.ends_with(marker.as_bytes()) {
        match stderr.read(&mut byte) {
            Ok(1) => seen.push(byte[0]),
            _ => panic!(
                "the program ended before it printed {marker:?}: {}",
                String::from_utf8_lossy(&seen)
            ),
        }
    }
    child.stderr = Some(stderr);
    String::from_utf8_lossy(&seen).into_owned()
}

/// Sends `signal` (`TERM`, `INT`) to the process `pid`, as a person's `kill` or Ctrl-C would.
pub fn send_signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success(), "kill -{signal} {pid} failed");
}
