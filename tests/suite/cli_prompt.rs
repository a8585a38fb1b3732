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
fn follows_a_chinese_locale_and_defaults_to_the_current_directory() {
    let dir = tempfile::tempdir().unwrap();
    let real = std::fs::canonicalize(dir.path()).unwrap();
    flycode()
        .arg("prompt")
        .env_remove("LC_ALL")
        .env_remove("LC_MESSAGES")
        .env("LANG", "zh_CN.UTF-8")
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
        .args(["prompt", "--root", "/", "--allow-filesystem-root"])
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

#[test]
fn the_whole_file_system_is_refused_as_every_command_refuses_it() {
    for command in [&["prompt"][..], &["exec", "--slash", "/fs.ls /"][..]] {
        flycode()
            .args(command)
            .args(["--root", "/"])
            .assert()
            .code(2)
            .stderr(predicate::str::contains("is the whole file system"))
            .stderr(predicate::str::contains("--allow-filesystem-root"));
    }
}

#[test]
fn prompt_and_exec_agree_on_the_roots_of_flycode_toml() {
    let dir = tempfile::tempdir().unwrap();
    let project = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir_all(project.join("app")).unwrap();
    std::fs::create_dir_all(project.join("other")).unwrap();
    std::fs::write(project.join("app/a.txt"), "inside").unwrap();
    std::fs::write(project.join("other/b.txt"), "outside").unwrap();
    std::fs::write(project.join("flycode.toml"), "roots = [\"app\"]\n").unwrap();
    let app = project.join("app");
    let prompt = flycode()
        .args(["prompt", "--lang", "en"])
        .current_dir(&project)
        .env("HOME", &project)
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    let prompt = String::from_utf8(prompt).unwrap();
    assert!(
        prompt.contains(&format!("- `{}`", app.display())),
        "{prompt}"
    );
    assert!(
        !prompt.contains(&format!("- `{}`", project.display())),
        "{prompt}"
    );
    // The root the model is told is the one exec allows, and nothing beside it.
    flycode()
        .args(["exec", "--slash"])
        .arg(format!("/fs.read {}/a.txt", app.display()))
        .current_dir(&project)
        .env("HOME", &project)
        .env("FLYCODE_STATE_DIR", project.join("state"))
        .assert()
        .code(0)
        .stdout(predicate::str::contains("inside"));
    flycode()
        .args(["exec", "--slash"])
        .arg(format!("/fs.read {}/other/b.txt", project.display()))
        .current_dir(&project)
        .env("HOME", &project)
        .env("FLYCODE_STATE_DIR", project.join("state"))
        .assert()
        .code(1)
        .stdout(predicate::str::contains("[code] outside_roots"));
}
