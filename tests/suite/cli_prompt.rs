//! `flycode prompt` run as a user runs it.

use std::io::Read;
use std::process::{Command, Stdio};

use predicates::prelude::*;

use super::common::flycode;

#[test]
fn names_the_given_roots_resolved() {
    let dir = tempfile::tempdir().unwrap();
    let real = std::fs::canonicalize(dir.path()).unwrap();
    flycode()
        .args(["prompt", "--lang", "en", "--root"])
        .arg(dir.path().join("."))
        .assert()
        .code(0)
        .stdout(predicate::str::contains(format!("- `{}`", real.display())))
        .stdout(predicate::str::contains(format!(
            "\"path\":\"{}\",\"depth\":2",
            real.display()
        )));
}

#[test]
fn defaults_to_chinese_and_the_current_directory() {
    let dir = tempfile::tempdir().unwrap();
    let real = std::fs::canonicalize(dir.path()).unwrap();
    flycode()
        .arg("prompt")
        .current_dir(dir.path())
        .assert()
        .code(0)
        .stdout(predicate::str::contains("非协商硬规则"))
        .stdout(predicate::str::contains(real.display().to_string()));
}

#[test]
fn a_missing_root_is_a_usage_error() {
    flycode()
        .args(["prompt", "--root", "/no/such/root"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("\"/no/such/root\" cannot be used"));
}

#[test]
fn an_unknown_language_is_a_usage_error() {
    flycode()
        .args(["prompt", "--lang", "fr"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("possible values: zh, en"));
}

#[test]
fn a_closed_pipe_is_not_an_error() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_flycode"))
        .args(["prompt", "--root", "/"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(status.code(), Some(0), "stderr: {stderr}");
    assert!(stderr.is_empty(), "stderr: {stderr}");
}
