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

/// Runs `git` in `repo` as the person setting up the attack would (no guards, no fsmonitor of
/// the person's own); panics when git fails.
fn git(repo: &std::path::Path, args: &[&str]) {
    let status = Command::new("git")
        .args(["-c", "user.email=a@b.c", "-c", "user.name=a"])
        .args(args)
        .current_dir(repo)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", repo)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
}

/// A repository whose `.git/config` names an fsmonitor (a program git runs) that lies: it says
/// nothing changed, and leaves a mark. Building the tag dialect's prompt reads the root's git
/// status; it must not run that program, so the changed file is reported.
#[test]
fn building_a_prompt_never_runs_the_repositorys_fsmonitor() {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let repo = base.join("repo");
    std::fs::create_dir(&repo).unwrap();
    let marker = base.join("monitor-ran");
    let monitor = base.join("monitor.sh");
    std::fs::write(
        &monitor,
        format!(
            "#!/bin/sh\ntouch '{}' 2>/dev/null\nprintf 'token\\0'\n",
            marker.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&monitor, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(repo.join("a.txt"), "one\n").unwrap();
    git(&repo, &["init", "-q", "."]);
    git(&repo, &["add", "a.txt"]);
    git(&repo, &["commit", "-qm", "init"]);
    git(
        &repo,
        &["config", "core.fsmonitor", &monitor.display().to_string()],
    );
    // The index learns to trust the monitor, then the file changes behind its back.
    git(&repo, &["status"]);
    assert!(marker.exists(), "the monitor did not run when set up");
    std::fs::remove_file(&marker).unwrap();
    std::fs::write(repo.join("a.txt"), "one\ntwo, changed\n").unwrap();
    let output = flycode()
        .args(["prompt", "--lang", "en", "--dialect", "tags", "--root"])
        .arg(&repo)
        .env("FLYCODE_STATE_DIR", base.join("state"))
        .env("HOME", &base)
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .unwrap();
    let prompt = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{prompt}");
    assert!(prompt.contains("[git branch: "), "{prompt}");
    if !prompt.contains("[working tree clean]") && !prompt.contains("[uncommitted changes") {
        eprintln!("skipped: git could not run contained here, so the status was not read");
        return;
    }
    assert!(!marker.exists(), "the repository's fsmonitor ran");
    assert!(
        prompt.contains("[uncommitted changes: 1]") && prompt.contains(" M a.txt"),
        "the monitor's word was taken over the file's: {prompt}"
    );
}
