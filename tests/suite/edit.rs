//! `fs.edit` and the omission guard through the real binary: permissions, the stale-read guard
//! of a session, a 1 MB file, protected files, dry runs under `read-only`, and `fs.writeBatch`'s
//! overwrite entries judged like `fs.write`'s.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::common::{Workspace, flycode};

impl Workspace {
    /// Runs one call with the extended tool set; the exit code and the `--json` report.
    fn exec(&self, call: Value, flags: &[&str]) -> (i32, Value) {
        let flags = [&["--tools", "extended"], flags].concat();
        self.exec_json(&call, &flags)
    }

    fn edit(&self, id: &str, args: Value, flags: &[&str]) -> (i32, Value) {
        self.exec(json!({"id": id, "tool": "fs.edit", "args": args}), flags)
    }

    fn file(&self, name: &str, content: &str) -> (PathBuf, String) {
        let path = self.root.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        let shown = path.display().to_string();
        (path, shown)
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

#[cfg(unix)]
#[test]
fn an_executable_script_stays_executable() {
    use std::os::unix::fs::PermissionsExt;
    let w = Workspace::new();
    let (path, shown) = w.file("build.sh", "#!/bin/sh\necho building\n");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (code, report) = w.edit(
        "e1",
        json!({"path": shown, "edits": [{"oldText": "building", "newText": "built"}]}),
        &[],
    );
    assert_eq!(code, 0, "{report}");
    assert_eq!(read(&path), "#!/bin/sh\necho built\n");
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777,
        0o755
    );
}

#[test]
fn a_file_changed_since_it_was_read_is_stale_in_a_session() {
    let w = Workspace::new();
    let (path, shown) = w.file("notes.txt", "first\nsecond\n");
    let session = ["--session", "edits"];
    let (code, _) = w.exec(
        json!({"id": "r1", "tool": "fs.read", "args": {"path": shown}}),
        &session,
    );
    assert_eq!(code, 0);
    std::fs::write(&path, "first\nsecond\nthird by someone else\n").unwrap();
    let change = json!({"path": shown, "edits": [{"oldText": "second", "newText": "2nd"}]});
    let (code, report) = w.edit("e1", change.clone(), &session);
    assert_eq!(code, 1);
    assert_eq!(report["error"]["code"], "stale_file");
    assert_eq!(read(&path), "first\nsecond\nthird by someone else\n");
    // A dry run changes nothing, so it is not refused: it shows the diff against what is there.
    let mut dry = change.clone();
    dry["dryRun"] = json!(true);
    let (code, report) = w.edit("e2", dry, &session);
    assert_eq!(code, 0, "{report}");
    assert!(report["result"]["diff"].as_str().unwrap().contains("+2nd"));
    // With the current hash it goes through, and flycode's own edit updates the session.
    let mut explicit = change;
    explicit["expectedSha256"] = json!(flycode::sandbox::sha256_hex(
        b"first\nsecond\nthird by someone else\n"
    ));
    assert_eq!(w.edit("e3", explicit, &session).0, 0);
    let (code, report) = w.edit(
        "e4",
        json!({"path": shown, "edits": [{"oldText": "2nd", "newText": "second"}]}),
        &session,
    );
    assert_eq!(code, 0, "{report}");
    assert_eq!(read(&path), "first\nsecond\nthird by someone else\n");
}

#[test]
fn a_one_megabyte_file_is_edited_in_the_middle() {
    let w = Workspace::new();
    let content: String = (0..20_000)
        .map(|n| format!("{n:08} the quick brown fox jumps over the lazy dog\n"))
        .collect();
    assert!(content.len() > 1_000_000);
    let (path, shown) = w.file("big.txt", &content);
    let (code, report) = w.edit(
        "e1",
        json!({"path": shown, "edits": [{"oldText": "00010000 the quick", "newText": "00010000 the slow"}]}),
        &[],
    );
    assert_eq!(code, 0, "{report}");
    let expected = content.replace("00010000 the quick", "00010000 the slow");
    assert_eq!(read(&path), expected);
    let result = &report["result"];
    assert_eq!(result["linesAdded"], 1);
    assert_eq!(result["linesRemoved"], 1);
    assert_eq!(
        result["sha256"],
        flycode::sandbox::sha256_hex(expected.as_bytes())
    );
    let diff = result["diff"].as_str().unwrap();
    assert!(diff.contains("@@ -9998,7 +9998,7 @@"), "{diff}");
    let removed = report["text"]
        .as_str()
        .unwrap()
        .lines()
        .filter(|l| l.starts_with('-') && !l.starts_with("---"))
        .count();
    assert_eq!(removed, 1);
}

#[test]
fn a_git_config_is_never_edited() {
    let w = Workspace::new();
    let (path, shown) = w.file(".git/config", "[core]\n\tbare = false\n");
    let (code, report) = w.edit(
        "e1",
        json!({"path": shown, "edits": [{"oldText": "[core]", "newText": "[core]\n\thooksPath = /tmp/x"}]}),
        &["--approve", "auto"],
    );
    assert_eq!(code, 1);
    assert_eq!(report["error"]["code"], "denied_by_policy");
    assert_eq!(read(&path), "[core]\n\tbare = false\n");
}

#[test]
fn read_only_allows_a_dry_run_and_refuses_the_edit() {
    let w = Workspace::new();
    let (path, shown) = w.file("a.txt", "old\n");
    let edit = json!({"path": shown, "edits": [{"oldText": "old", "newText": "new"}]});
    let (code, report) = w.edit("e1", edit.clone(), &["--approve", "read-only"]);
    assert_eq!(code, 1);
    assert_eq!(report["error"]["code"], "denied_by_policy");
    let mut dry = edit;
    dry["dryRun"] = json!(true);
    let (code, report) = w.edit("e2", dry, &["--approve", "read-only"]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["result"]["dryRun"], true);
    assert_eq!(read(&path), "old\n");
}

#[test]
fn a_batch_that_abbreviates_a_file_writes_no_file() {
    let w = Workspace::new();
    let long: String = (1..=25).map(|n| format!("const A{n} = {n};\n")).collect();
    let (long_path, long_shown) = w.file("consts.js", &long);
    let (other_path, other_shown) = w.file("other.txt", "old\n");
    let (code, report) = w.exec(
        json!({"id": "b1", "tool": "fs.writeBatch", "args": {"files": [
            {"path": other_shown, "content": "new\n"},
            {"path": long_shown, "content": "const A1 = 1;\n// ... existing code ...\n"}
        ]}}),
        &[],
    );
    assert_eq!(code, 1);
    assert_eq!(report["error"]["code"], "omission_placeholder");
    assert!(
        report["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("files[1] "),
        "{report}"
    );
    assert_eq!(read(&long_path), long);
    assert_eq!(read(&other_path), "old\n");
    // Appending a placeholder-like line is no rewrite, and a new file replaces nothing.
    let (code, _) = w.exec(
        json!({"id": "b2", "tool": "fs.writeBatch", "args": {"files": [
            {"path": long_shown, "mode": "append", "content": "// ... existing code ...\n"},
            {"path": w.root.join("new.js").display().to_string(), "content": "// ... existing code ...\n"}
        ]}}),
        &[],
    );
    assert_eq!(code, 0);
}

#[test]
fn replace_all_shows_every_replacement_in_the_block() {
    let w = Workspace::new();
    let (_path, shown) = w.file("a.txt", "one\ntwo\none\n");
    let output = flycode()
        .args(["exec", "--tools", "extended", "--root"])
        .arg(&w.root)
        .env("FLYCODE_STATE_DIR", &w.state)
        .env_remove("XDG_CONFIG_HOME")
        .current_dir(&w.root)
        .write_stdin(format!(
            "```flycode-call\n{}\n```\n",
            json!({"id": "e1", "tool": "fs.edit", "args": {"path": shown, "edits": [{"oldText": "one", "newText": "1\n1", "replaceAll": true}]}})
        ))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("[replacements] 2\n"), "{stdout}");
    assert!(
        stdout.contains("-one\n+1\n+1\n two\n-one\n+1\n+1\n"),
        "{stdout}"
    );
}
