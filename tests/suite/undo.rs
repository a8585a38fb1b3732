//! `flycode history` and `flycode undo` (PROTOCOL.md §16 (Undo and history)): every file tool's
//! change, through every door, taken back to the byte, the mode and the existence; conflicts;
//! an undo undone; a whole run undone; retention; a flycode killed mid-change.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

use serde_json::{Value, json};

use super::common::{Workspace, flycode, send_signal};

/// Every entry under `dir`: kind, mode, and content or link target.
fn snapshot(dir: &Path) -> BTreeMap<String, String> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.strip_prefix(base).unwrap().display().to_string();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let mode = meta.permissions().mode() & 0o7777;
            let value = if meta.file_type().is_symlink() {
                format!("link {}", std::fs::read_link(&path).unwrap().display())
            } else if meta.is_dir() {
                walk(base, &path, out);
                format!("dir {mode:o}")
            } else {
                format!("file {mode:o} {}", hex(&std::fs::read(&path).unwrap()))
            };
            out.insert(name, value);
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Runs one call through `flycode exec --approve auto --yes`; its `--json` report.
fn exec(w: &Workspace, tool: &str, args: Value) -> Value {
    let (code, report) = w.exec_json(
        &json!({"id": format!("call-{tool}"), "tool": tool, "args": args}),
        &["--approve", "auto", "--yes", "--tools", "extended"],
    );
    assert_eq!(code, 0, "{report}");
    report
}

/// One call through `flycode exec` with the user's configuration folder `config`.
fn exec_with_config(w: &Workspace, call: &Value, config: &Path) -> (i32, Value) {
    let output = w
        .exec_command(&["--approve", "auto"])
        .env("XDG_CONFIG_HOME", config)
        .write_stdin(format!("```flycode-call\n{call}\n```\n"))
        .output()
        .unwrap();
    let report = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    (output.status.code().unwrap(), report)
}

/// A configuration folder beside the workspace whose `flycode/flycode.toml` is `toml` (the
/// person's own file, for `XDG_CONFIG_HOME`).
fn user_config(w: &Workspace, toml: &str) -> std::path::PathBuf {
    let config = w.state.parent().unwrap().join("config");
    std::fs::create_dir_all(config.join("flycode")).unwrap();
    std::fs::write(config.join("flycode/flycode.toml"), toml).unwrap();
    config
}

/// `flycode undo --root ROOT ARGS`: exit code, stdout, stderr.
fn undo(w: &Workspace, args: &[&str]) -> (i32, String, String) {
    let output = flycode()
        .arg("undo")
        .args(args)
        .arg("--root")
        .arg(&w.root)
        .env("FLYCODE_STATE_DIR", &w.state)
        .env_remove("XDG_CONFIG_HOME")
        .current_dir(&w.root)
        .output()
        .unwrap();
    (
        output.status.code().unwrap(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `flycode history --json ARGS`: the changes, newest first.
/// The ids of the changes `history` lists, newest first.
fn history_ids(w: &Workspace) -> Vec<Value> {
    history(w, &[]).iter().map(|c| c["id"].clone()).collect()
}

fn history(w: &Workspace, args: &[&str]) -> Vec<Value> {
    let output = flycode()
        .args(["history", "--json", "-n", "1000"])
        .args(args)
        .env("FLYCODE_STATE_DIR", &w.state)
        .env_remove("XDG_CONFIG_HOME")
        .current_dir(&w.root)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// Changes then undoes: the tree is as it was, byte for byte, mode for mode.
fn round_trip(w: &Workspace, tool: &str, args: Value) -> Value {
    let before = snapshot(&w.root);
    let report = exec(w, tool, args);
    assert_ne!(snapshot(&w.root), before, "{tool} changed nothing");
    let (code, out, err) = undo(w, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(snapshot(&w.root), before, "{tool}: {out}{err}");
    report
}

#[test]
fn a_write_is_undone_to_the_byte_and_mode_and_its_id_is_in_the_result() {
    let w = Workspace::new();
    let file = w.root.join("a.txt");
    std::fs::write(&file, "one\ntwo\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
    let report = round_trip(
        &w,
        "fs.write",
        json!({"path": w.path("a.txt"), "mode": "overwrite", "content": "one\nTWO\nthree\n"}),
    );
    assert!(
        report["text"].as_str().unwrap().contains("[change] c-1"),
        "{report}"
    );
    // A new file in new folders: undo removes what the write created.
    round_trip(
        &w,
        "fs.write",
        json!({"path": w.path("new/deep/b.txt"), "mode": "overwrite", "content": "b"}),
    );
    assert!(!w.root.join("new").exists());
    let changes = history(&w, &[]);
    let first = changes.iter().find(|c| c["id"] == "c-1").unwrap();
    assert_eq!(first["tool"], "fs.write");
    assert_eq!(first["door"], "exec");
    assert_eq!(first["call"], "call-fs.write");
    assert_eq!(
        (first["added"].as_u64(), first["removed"].as_u64()),
        (Some(2), Some(1))
    );
}

#[test]
fn an_edit_of_a_crlf_file_with_a_bom_is_undone_exactly() {
    let w = Workspace::new();
    std::fs::write(w.root.join("win.txt"), b"\xEF\xBB\xBFfirst\r\nsecond\r\n").unwrap();
    round_trip(
        &w,
        "fs.edit",
        json!({"path": w.path("win.txt"), "edits": [{"oldText": "second", "newText": "2nd"}]}),
    );
}

#[test]
fn a_batch_of_a_hundred_files_is_undone_whole() {
    let w = Workspace::new();
    for n in 0..50 {
        std::fs::write(w.root.join(format!("f{n}.txt")), format!("old {n}\n")).unwrap();
    }
    let files: Vec<Value> = (0..100)
        .map(|n| json!({"path": w.path(&format!("f{n}.txt")), "content": format!("new {n}\n")}))
        .collect();
    round_trip(&w, "fs.writeBatch", json!({"files": files}));
}

#[test]
fn mkdir_chmod_and_a_move_across_folders_are_undone() {
    let w = Workspace::new();
    round_trip(
        &w,
        "fs.mkdir",
        json!({"path": w.path("x/y/z"), "parents": true}),
    );
    std::fs::create_dir_all(w.root.join("from/sub")).unwrap();
    std::fs::create_dir_all(w.root.join("to")).unwrap();
    std::fs::write(w.root.join("from/sub/f.txt"), "f").unwrap();
    std::fs::write(w.root.join("from/run.sh"), "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(
        w.root.join("from/run.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    round_trip(
        &w,
        "fs.chmod",
        json!({"path": w.path("from/run.sh"), "mode": "600"}),
    );
    round_trip(
        &w,
        "fs.mv",
        json!({"fromPath": w.path("from/run.sh"), "toPath": w.path("to/run.sh")}),
    );
    round_trip(
        &w,
        "fs.mv",
        json!({"fromPath": w.path("from/sub"), "toPath": w.path("to/moved")}),
    );
}

#[test]
fn a_removed_tree_with_links_and_modes_comes_back_whole() {
    let w = Workspace::new();
    let tree = w.root.join("tree");
    std::fs::create_dir_all(tree.join("inner/deeper")).unwrap();
    std::fs::write(tree.join("inner/data.bin"), [0u8, 159, 146, 150, 255]).unwrap();
    std::fs::write(tree.join("script.sh"), "echo hi\n").unwrap();
    std::fs::set_permissions(
        tree.join("script.sh"),
        std::fs::Permissions::from_mode(0o750),
    )
    .unwrap();
    symlink("inner/data.bin", tree.join("relative-link")).unwrap();
    symlink("/etc/hostname", tree.join("absolute-link")).unwrap();
    symlink("missing", tree.join("dangling")).unwrap();
    std::fs::set_permissions(
        tree.join("inner/deeper"),
        std::fs::Permissions::from_mode(0o700),
    )
    .unwrap();
    round_trip(
        &w,
        "fs.rm",
        json!({"path": w.path("tree"), "recursive": true}),
    );
}

#[test]
fn a_conflict_stops_everything_and_force_goes_through() {
    let w = Workspace::new();
    std::fs::write(w.root.join("a.txt"), "original\n").unwrap();
    std::fs::write(w.root.join("b.txt"), "b original\n").unwrap();
    exec(
        &w,
        "fs.write",
        json!({"path": w.path("b.txt"), "mode": "overwrite", "content": "b by flycode\n"}),
    );
    exec(
        &w,
        "fs.write",
        json!({"path": w.path("a.txt"), "mode": "overwrite", "content": "by flycode\n"}),
    );
    std::fs::write(w.root.join("a.txt"), "edited by the person\n").unwrap();
    let (code, out, err) = undo(&w, &["--last", "2"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("conflict:") && err.contains("a.txt"), "{err}");
    assert!(
        err.contains("-edited by the person") && err.contains("+original"),
        "{err}"
    );
    // Nothing was touched: not the conflicting file, not the other one.
    assert_eq!(
        std::fs::read_to_string(w.root.join("a.txt")).unwrap(),
        "edited by the person\n"
    );
    assert_eq!(
        std::fs::read_to_string(w.root.join("b.txt")).unwrap(),
        "b by flycode\n"
    );
    // A dry run shows the diff and touches nothing either.
    let (code, out, _) = undo(&w, &["--last", "2", "--dry-run"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("would restore") && out.contains("+b original"),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(w.root.join("b.txt")).unwrap(),
        "b by flycode\n"
    );
    let (code, out, err) = undo(&w, &["--last", "2", "--force"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        std::fs::read_to_string(w.root.join("a.txt")).unwrap(),
        "original\n"
    );
    assert_eq!(
        std::fs::read_to_string(w.root.join("b.txt")).unwrap(),
        "b original\n"
    );
}

#[test]
fn an_undo_is_a_change_and_can_be_undone() {
    let w = Workspace::new();
    std::fs::write(w.root.join("a.txt"), "before\n").unwrap();
    exec(
        &w,
        "fs.write",
        json!({"path": w.path("a.txt"), "mode": "overwrite", "content": "after\n"}),
    );
    let (code, out, _) = undo(&w, &["c-1"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("this undo is c-2"), "{out}");
    assert_eq!(
        std::fs::read_to_string(w.root.join("a.txt")).unwrap(),
        "before\n"
    );
    let (code, out, _) = undo(&w, &["c-2"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        std::fs::read_to_string(w.root.join("a.txt")).unwrap(),
        "after\n"
    );
    let changes = history(&w, &[]);
    assert_eq!(changes[0]["undoes"], json!(["c-2"]));
    assert_eq!(changes[1]["undoes"], json!(["c-1"]));
    assert_eq!(changes[1]["tool"], "undo");
}

#[test]
fn undo_never_writes_outside_the_roots_it_runs_with() {
    let w = Workspace::new();
    std::fs::create_dir_all(w.root.join("sub")).unwrap();
    std::fs::write(w.root.join("sub/a.txt"), "before\n").unwrap();
    exec(
        &w,
        "fs.write",
        json!({"path": w.path("sub/a.txt"), "mode": "overwrite", "content": "after\n"}),
    );
    // A link planted where the folder was: the recorded path now leads elsewhere.
    let elsewhere = w.state.parent().unwrap().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("a.txt"), "after\n").unwrap();
    std::fs::rename(w.root.join("sub"), w.root.join("sub-moved")).unwrap();
    symlink(&elsewhere, w.root.join("sub")).unwrap();
    let (code, out, err) = undo(&w, &["--force"]);
    assert_ne!(code, 0, "{out}{err}");
    assert_eq!(
        std::fs::read_to_string(elsewhere.join("a.txt")).unwrap(),
        "after\n"
    );
}

#[test]
fn a_call_that_runs_a_program_is_listed_as_not_recorded() {
    let w = Workspace::new();
    exec(
        &w,
        "process.run",
        json!({"command": "sh", "args": ["-c", "echo x > made.txt"], "cwd": w.root}),
    );
    let changes = history(&w, &[]);
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(changes[0]["program"], true);
    let text = flycode()
        .arg("history")
        .env("FLYCODE_STATE_DIR", &w.state)
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("not recorded"), "{text}");
}

#[test]
fn history_filters_by_path() {
    let w = Workspace::new();
    for name in ["a.txt", "b.txt"] {
        exec(
            &w,
            "fs.write",
            json!({"path": w.path(name), "mode": "overwrite", "content": name}),
        );
    }
    let only_b = history(&w, &["--path", "b.txt"]);
    assert_eq!(only_b.len(), 1, "{only_b:?}");
    assert_eq!(only_b[0]["paths"], json!([w.path("b.txt")]));
}

#[test]
fn retention_prunes_the_oldest_changes_and_says_so() {
    let w = Workspace::new();
    let config = user_config(&w, "[undo]\nmax_bytes = 1048576\n");
    let big = |n: u8| String::from_utf8(vec![b'a' + n; 600_000]).unwrap();
    std::fs::write(w.root.join("big.txt"), big(0)).unwrap();
    for n in 1..=3 {
        let (code, report) = exec_with_config(
            &w,
            &json!({"id": "w", "tool": "fs.write", "args": {"path": w.path("big.txt"), "mode": "overwrite", "content": big(n)}}),
            &config,
        );
        assert_eq!(code, 0, "{report}");
    }
    let output = flycode()
        .arg("gc")
        .env("FLYCODE_STATE_DIR", &w.state)
        .env("XDG_CONFIG_HOME", &config)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{err}");
    assert!(
        err.contains("undo store: pruned 2 changes (c-1..c-2"),
        "{err}"
    );
    let left = history_ids(&w);
    assert_eq!(left, vec![json!("c-3")]);
    // The newest change can still be undone.
    let (code, out, err) = undo(&w, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        std::fs::read_to_string(w.root.join("big.txt")).unwrap(),
        big(2)
    );
}

#[test]
fn a_file_over_max_file_bytes_is_recorded_by_hash_and_undo_says_it_cannot() {
    let w = Workspace::new();
    let config = user_config(&w, "[undo]\nmax_file_bytes = 10\n");
    std::fs::write(w.root.join("large.txt"), "more than ten bytes\n").unwrap();
    let (code, report) = exec_with_config(
        &w,
        &json!({"id": "w", "tool": "fs.write", "args": {"path": w.path("large.txt"), "mode": "overwrite", "content": "x"}}),
        &config,
    );
    assert_eq!(code, 0, "{report}");
    let (code, out, err) = undo(&w, &[]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("cannot restore") && err.contains("max_file_bytes"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(w.root.join("large.txt")).unwrap(),
        "x"
    );
}

#[test]
fn a_flycode_killed_during_a_batch_leaves_history_consistent_with_the_files() {
    let w = Workspace::new();
    let count = 60;
    let old = |n: usize| format!("old {n} ").repeat(40_000);
    for n in 0..count {
        std::fs::write(w.root.join(format!("f{n}.txt")), old(n)).unwrap();
    }
    let files: Vec<Value> = (0..count)
        .map(|n| json!({"path": w.path(&format!("f{n}.txt")), "content": format!("new {n} ").repeat(40_000)}))
        .collect();
    let call = json!({"id": "batch", "tool": "fs.writeBatch", "args": {"files": files}});
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_flycode"))
        .args(["exec", "--approve", "auto", "--yes", "--root"])
        .arg(&w.root)
        .env("FLYCODE_STATE_DIR", &w.state)
        .env_remove("XDG_CONFIG_HOME")
        .current_dir(&w.root)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        write!(stdin, "```flycode-call\n{call}\n```\n").unwrap();
    }
    // Killed as soon as the change is under way (its marker exists), wherever it then is.
    let pending = w.state.join("undo/pending");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < deadline
        && std::fs::read_dir(&pending).map_or(true, |mut d| d.next().is_none())
        && child.try_wait().unwrap().is_none()
    {
        std::thread::yield_now();
    }
    let _ = send_signal_if_running(&mut child);
    let _ = child.wait();
    // The next start settles the record; then the history must agree with the files.
    let changes = history(&w, &[]);
    let news = (0..count)
        .filter(|n| std::fs::read_to_string(w.root.join(format!("f{n}.txt"))).unwrap() != old(*n))
        .count();
    assert!(
        news == 0 || news == count,
        "a batch is all or nothing: {news} of {count} new"
    );
    match changes.first() {
        None => assert_eq!(news, 0, "files changed, and no change was recorded"),
        Some(change) => {
            assert_eq!(change["tool"], "fs.writeBatch");
            assert_eq!(change["complete"], true, "{change}");
            let (code, out, err) = undo(&w, &[]);
            assert_eq!(code, 0, "{out}{err}");
        }
    }
    for n in 0..count {
        assert_eq!(
            std::fs::read_to_string(w.root.join(format!("f{n}.txt"))).unwrap(),
            old(n)
        );
    }
}

fn send_signal_if_running(child: &mut std::process::Child) -> bool {
    if child.try_wait().unwrap().is_none() {
        send_signal(child.id(), "KILL");
        return true;
    }
    false
}

#[test]
fn several_changes_to_one_tree_are_undone_newest_first() {
    let w = Workspace::new();
    std::fs::create_dir_all(w.root.join("a")).unwrap();
    std::fs::write(w.root.join("a/x.txt"), "x before\n").unwrap();
    let before = snapshot(&w.root);
    exec(
        &w,
        "fs.write",
        json!({"path": w.path("a/x.txt"), "mode": "overwrite", "content": "x after\n"}),
    );
    exec(
        &w,
        "fs.write",
        json!({"path": w.path("a/y.txt"), "mode": "overwrite", "content": "y\n"}),
    );
    exec(&w, "fs.rm", json!({"path": w.path("a"), "recursive": true}));
    // The removed tree comes back as the removal found it, then each write is taken back.
    let (code, out, err) = undo(&w, &["--last", "3"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(snapshot(&w.root), before, "{out}");
}

/// The blobs in the store: (file, number of names it has).
fn blobs(w: &Workspace) -> Vec<(std::path::PathBuf, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::read_dir(w.state.join("undo/blobs"))
        .unwrap()
        .map(|blob| {
            let path = blob.unwrap().path();
            let links = std::fs::metadata(&path).unwrap().nlink();
            (path, links)
        })
        .collect()
}

#[test]
fn a_replaced_file_is_kept_by_its_old_inode_and_nothing_shares_it_afterwards() {
    use std::os::unix::fs::MetadataExt;
    let w = Workspace::new();
    let file = w.root.join("a.txt");
    std::fs::write(&file, "old\n").unwrap();
    let old_inode = std::fs::metadata(&file).unwrap().ino();
    exec(
        &w,
        "fs.write",
        json!({"path": w.path("a.txt"), "mode": "overwrite", "content": "new\n"}),
    );
    // The old file itself is the blob (no copy), and the only name it has left.
    let blob = blobs(&w).remove(0).0;
    assert_eq!(std::fs::metadata(&blob).unwrap().ino(), old_inode);
    assert_eq!(std::fs::read(&blob).unwrap(), b"old\n");
    assert_eq!(blobs(&w).iter().map(|b| b.1).collect::<Vec<_>>(), [1]);
    assert_eq!(std::fs::metadata(&file).unwrap().nlink(), 1);
    // Appending to the new file (refused for a file with several names) goes through.
    exec(
        &w,
        "fs.write",
        json!({"path": w.path("a.txt"), "mode": "append", "content": "more\n"}),
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "new\nmore\n");
    let (code, out, err) = undo(&w, &["--last", "2"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "old\n");
}

#[test]
fn a_call_that_fails_leaves_its_file_with_one_name_and_the_store_a_copy() {
    use std::os::unix::fs::MetadataExt;
    let w = Workspace::new();
    let file = w.root.join("a.txt");
    std::fs::write(&file, "kept\n").unwrap();
    // The expectation fails after the pre-image is taken: nothing is written.
    let (code, report) = w.exec_json(
        &json!({"id": "c", "tool": "fs.write", "args": {"path": w.path("a.txt"), "mode": "overwrite", "content": "x", "expectedSha256": "0".repeat(64)}}),
        &["--approve", "auto", "--yes"],
    );
    assert_ne!(code, 0, "{report}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "kept\n");
    assert_eq!(std::fs::metadata(&file).unwrap().nlink(), 1);
    assert!(
        blobs(&w).iter().all(|(_, links)| *links == 1),
        "{:?}",
        blobs(&w)
    );
    // The file can be chmodded (refused for a file with several names).
    exec(
        &w,
        "fs.chmod",
        json!({"path": w.path("a.txt"), "mode": "600"}),
    );
}

#[test]
fn a_removed_file_with_another_name_comes_back_and_the_store_keeps_its_own_copy() {
    use std::os::unix::fs::MetadataExt;
    let w = Workspace::new();
    std::fs::write(w.root.join("a.txt"), "shared\n").unwrap();
    std::fs::hard_link(w.root.join("a.txt"), w.root.join("b.txt")).unwrap();
    exec(&w, "fs.rm", json!({"path": w.path("a.txt")}));
    // b.txt still names the old file: the store's blob is a copy, so writing to b.txt in
    // place cannot reach it.
    assert_eq!(std::fs::metadata(w.root.join("b.txt")).unwrap().nlink(), 1);
    assert!(
        blobs(&w).iter().all(|(_, links)| *links == 1),
        "{:?}",
        blobs(&w)
    );
    std::fs::write(w.root.join("b.txt"), "changed in place\n").unwrap();
    let (code, out, err) = undo(&w, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        std::fs::read_to_string(w.root.join("a.txt")).unwrap(),
        "shared\n"
    );
}

#[test]
fn a_kept_file_written_to_since_is_not_restored_and_nothing_is_touched() {
    let w = Workspace::new();
    std::fs::write(w.root.join("a.txt"), "a\n").unwrap();
    std::fs::write(w.root.join("b.txt"), "b\n").unwrap();
    exec(&w, "fs.rm", json!({"path": w.path("a.txt")}));
    exec(
        &w,
        "fs.write",
        json!({"path": w.path("b.txt"), "mode": "overwrite", "content": "B\n"}),
    );
    // A program that still had a.txt open writes to it: the kept file changes in the store.
    let kept = w.state.join("undo/blobs").join(sha256_hex(b"a\n"));
    std::fs::OpenOptions::new()
        .append(true)
        .open(&kept)
        .unwrap()
        .write_all(b"written later\n")
        .unwrap();
    let before = snapshot(&w.root);
    let (code, out, err) = undo(&w, &["--last", "2"]);
    assert_ne!(code, 0, "{out}{err}");
    assert!(err.contains("cannot restore"), "{err}");
    assert!(err.contains("a.txt"), "{err}");
    assert_eq!(snapshot(&w.root), before);
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex(&sha2::Sha256::digest(bytes))
}

#[test]
fn a_batch_refused_for_a_path_outside_leaves_no_second_name_and_the_store_is_private() {
    use std::os::unix::fs::MetadataExt;
    let w = Workspace::new();
    std::fs::write(w.root.join("inside.txt"), "inside\n").unwrap();
    let outside = w.root.parent().unwrap().join("outside.txt");
    let (code, report) = w.exec_json(
        &json!({"id": "b", "tool": "fs.writeBatch", "args": {"files": [
            {"path": w.path("inside.txt"), "content": "new\n"},
            {"path": outside.display().to_string(), "content": "x\n"},
        ]}}),
        &["--approve", "auto", "--yes"],
    );
    assert_ne!(code, 0, "{report}");
    assert_eq!(
        std::fs::read_to_string(w.root.join("inside.txt")).unwrap(),
        "inside\n"
    );
    assert_eq!(
        std::fs::metadata(w.root.join("inside.txt"))
            .unwrap()
            .nlink(),
        1
    );
    // A kept file keeps its mode: only its owner may look into the store.
    exec(
        &w,
        "fs.write",
        json!({"path": w.path("inside.txt"), "mode": "overwrite", "content": "new\n"}),
    );
    let mode = std::fs::metadata(w.state.join("undo"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0, "{mode:o}");
}

#[test]
fn an_unknown_change_or_a_last_of_zero_is_a_clear_error() {
    let w = Workspace::new();
    std::fs::write(w.root.join("a.txt"), "a\n").unwrap();
    exec(
        &w,
        "fs.write",
        json!({"path": w.path("a.txt"), "mode": "overwrite", "content": "b\n"}),
    );
    let (code, _, err) = undo(&w, &["c-999"]);
    assert_ne!(code, 0);
    assert!(
        err.contains("no change c-999") && err.contains("flycode history"),
        "{err}"
    );
    let (code, _, err) = undo(&w, &["--last", "0"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--last"), "{err}");
    let (code, _, err) = undo(&w, &["--call", "nope"]);
    assert_ne!(code, 0);
    assert!(err.contains("call nope"), "{err}");
    assert_eq!(
        std::fs::read_to_string(w.root.join("a.txt")).unwrap(),
        "b\n"
    );
}

/// The blobs in the store, by name (none when there is no store yet).
fn blob_names(w: &Workspace) -> Vec<String> {
    std::fs::read_dir(w.state.join("undo/blobs"))
        .map(|entries| {
            entries
                .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// A model's `fs.edit` whose old text is not in the file fails and changes nothing: the store
/// keeps no trace of it, no record and no copy of the file's content, however often it fails.
#[test]
fn a_failed_edit_leaves_no_pre_image_in_the_undo_store() {
    let w = Workspace::new();
    let secret_plan = "the plan the model never saw whole\n".repeat(50);
    std::fs::write(w.root.join("plan.md"), &secret_plan).unwrap();
    // An earlier change, so the store exists and holds one content of its own.
    exec(
        &w,
        "fs.write",
        json!({"path": w.path("other.txt"), "mode": "overwrite", "content": "a\n"}),
    );
    exec(
        &w,
        "fs.write",
        json!({"path": w.path("other.txt"), "mode": "overwrite", "content": "b\n"}),
    );
    let blobs_before = blob_names(&w);
    let history_before = history(&w, &[]);
    for attempt in 0..3 {
        let (code, report) = w.exec_json(
            &json!({"id": format!("e{attempt}"), "tool": "fs.edit", "args": {
                "path": w.path("plan.md"),
                "edits": [{"oldText": "text that is not there", "newText": "x"}]
            }}),
            &["--approve", "auto", "--yes", "--tools", "extended"],
        );
        assert_eq!(code, 1, "{report}");
        assert_eq!(report["error"]["code"], "no_match", "{report}");
        assert!(report.get("change").is_none_or(Value::is_null), "{report}");
    }
    assert_eq!(
        std::fs::read_to_string(w.root.join("plan.md")).unwrap(),
        secret_plan
    );
    assert_eq!(history(&w, &[]), history_before);
    assert_eq!(
        blob_names(&w),
        blobs_before,
        "a failed edit left a content behind"
    );
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        std::fs::metadata(w.root.join("plan.md")).unwrap().nlink(),
        1,
        "the file keeps one name"
    );
}

/// The bytes of content the undo store holds.
fn stored_bytes(w: &Workspace) -> u64 {
    std::fs::read_dir(w.state.join("undo/blobs"))
        .map(|entries| {
            entries
                .map(|blob| blob.unwrap().metadata().unwrap().len())
                .sum()
        })
        .unwrap_or(0)
}

#[test]
fn an_append_is_recorded_by_length_and_hash_and_undone_by_cutting_the_file_back() {
    let w = Workspace::new();
    // Over a mebibyte: past the size whose lines are counted, as a growing log is.
    let log: String = (0..150_000).map(|n| format!("line {n}\n")).collect();
    std::fs::write(w.root.join("log.txt"), &log).unwrap();
    for line in ["one more\n", "and another\n"] {
        exec(
            &w,
            "fs.write",
            json!({"path": w.path("log.txt"), "mode": "append", "content": line}),
        );
    }
    // Nothing of the log was copied: an append keeps its old length and hash only.
    assert_eq!(stored_bytes(&w), 0);
    assert_eq!(history(&w, &[]).len(), 2);
    let (code, out, err) = undo(&w, &["--last", "2"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        std::fs::read_to_string(w.root.join("log.txt")).unwrap(),
        log
    );
    // The undo is a change like any other: undoing it puts both lines back.
    let (code, out, err) = undo(&w, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        std::fs::read_to_string(w.root.join("log.txt")).unwrap(),
        format!("{log}one more\nand another\n")
    );
}

#[test]
fn a_small_append_counts_its_lines_and_an_append_to_a_new_file_removes_it() {
    let w = Workspace::new();
    std::fs::write(w.root.join("notes.md"), "# Notes\n").unwrap();
    round_trip(
        &w,
        "fs.write",
        json!({"path": w.path("notes.md"), "mode": "append", "content": "- a\n- b\n"}),
    );
    let appended = &history(&w, &[])[1];
    assert_eq!(appended["tool"], "fs.write");
    assert_eq!(
        (appended["added"].as_u64(), appended["removed"].as_u64()),
        (Some(2), Some(0)),
        "{appended}"
    );
    round_trip(
        &w,
        "fs.write",
        json!({"path": w.path("fresh.log"), "mode": "append", "content": "first\n"}),
    );
    assert!(!w.root.join("fresh.log").exists());
}

#[test]
fn an_appended_file_whose_start_changed_since_is_not_cut_back_even_by_force() {
    let w = Workspace::new();
    std::fs::write(w.root.join("log.txt"), "kept line\n").unwrap();
    exec(
        &w,
        "fs.write",
        json!({"path": w.path("log.txt"), "mode": "append", "content": "added\n"}),
    );
    // Someone rewrites the start: cutting back would not give the old content.
    std::fs::write(w.root.join("log.txt"), "KEPT LINE\nadded\n").unwrap();
    for flags in [&[][..], &["--force"][..]] {
        let (code, out, err) = undo(&w, flags);
        assert_eq!(code, 1, "{out}{err}");
        assert!(
            err.contains("cannot restore") && err.contains("append"),
            "{err}"
        );
        assert_eq!(
            std::fs::read_to_string(w.root.join("log.txt")).unwrap(),
            "KEPT LINE\nadded\n"
        );
    }
    // Appended to again since: the undo of the first append cuts back both (a conflict, so
    // only by force).
    std::fs::write(w.root.join("log.txt"), "kept line\nadded\nmore\n").unwrap();
    let (code, out, err) = undo(&w, &[]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("conflict"), "{err}");
    let (code, out, err) = undo(&w, &["--force"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        std::fs::read_to_string(w.root.join("log.txt")).unwrap(),
        "kept line\n"
    );
}

#[test]
fn max_bytes_holds_within_one_session() {
    let w = Workspace::new();
    let config = user_config(&w, "[undo]\nmax_bytes = 1048576\n");
    let content = |n: u8| String::from_utf8(vec![b'a' + n; 450_000]).unwrap();
    std::fs::write(w.root.join("big.txt"), content(0)).unwrap();
    // One MCP session overwrites the file five times: each change keeps 450 kB.
    let changes = overwrites_in_one_session(&w, &config, (1..=5).map(content));
    assert_eq!(
        changes,
        ["c-1", "c-2", "c-3", "c-4", "c-5"].map(Value::from)
    );
    // The store kept what fits, the newest changes, without waiting for `flycode gc`.
    assert!(stored_bytes(&w) <= 1_048_576, "{}", stored_bytes(&w));
    let left = history_ids(&w);
    assert_eq!(left, vec![json!("c-5"), json!("c-4")]);
    let (code, out, err) = undo(&w, &["--last", "2"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        std::fs::read_to_string(w.root.join("big.txt")).unwrap(),
        content(3)
    );
}

/// Within a session the store is pruned to nine tenths of `max_bytes` when a change takes it
/// over, so the next changes fit without another pruning (each reads every record).
#[test]
fn a_pruning_within_a_session_leaves_room_for_the_next_changes() {
    let w = Workspace::new();
    let config = user_config(&w, "[undo]\nmax_bytes = 1048576\n");
    let content = |n: u8| String::from_utf8(vec![b'a' + n; 200_000]).unwrap();
    std::fs::write(w.root.join("big.txt"), content(0)).unwrap();
    // Each change keeps 200 kB: the sixth takes the store to 1.2 MB, over the limit, and the
    // pruning leaves at most 943,718 bytes (four changes), not 1,048,576 (five).
    overwrites_in_one_session(&w, &config, (1..=6).map(content));
    assert!(stored_bytes(&w) <= 943_718, "{}", stored_bytes(&w));
    assert_eq!(
        history_ids(&w),
        ["c-6", "c-5", "c-4", "c-3"].map(Value::from)
    );
    // The seventh fits under the limit: nothing more is pruned.
    overwrites_in_one_session(&w, &config, [content(7)].into_iter());
    assert_eq!(
        history_ids(&w),
        ["c-7", "c-6", "c-5", "c-4", "c-3"].map(Value::from)
    );
}

/// Overwrites `big.txt` in `w`'s root with each of `contents`, in one MCP session under
/// `config`; the change each call reported.
fn overwrites_in_one_session(
    w: &Workspace,
    config: &std::path::Path,
    contents: impl Iterator<Item = String>,
) -> Vec<Value> {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_flycode"))
        .args(["mcp", "--root"])
        .arg(&w.root)
        .env("FLYCODE_STATE_DIR", &w.state)
        .env("XDG_CONFIG_HOME", config)
        .current_dir(&w.root)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let mut output = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
    let mut send = |message: Value| writeln!(input, "{message}").unwrap();
    send(
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}),
    );
    send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    let mut changes = Vec::new();
    for (n, content) in (1u64..).zip(contents) {
        send(json!({
            "jsonrpc": "2.0", "id": n, "method": "tools/call",
            "params": {"name": "fs_write", "arguments": {"path": w.path("big.txt"), "mode": "overwrite", "content": content}}
        }));
        let answer: Value = loop {
            let line = output.next().expect("the server closed early").unwrap();
            let value: Value = serde_json::from_str(&line).unwrap();
            if value["id"] == n {
                break value;
            }
        };
        changes.push(answer["result"]["structuredContent"]["change"].clone());
    }
    drop(input);
    assert!(child.wait().unwrap().success());
    changes
}

/// `flycode undo` in one project takes back that project's last change, never another's made
/// since; `--all` chooses among every project's.
#[test]
fn undo_takes_the_last_change_of_this_project_unless_all() {
    let w = Workspace::new();
    let other = w.root.parent().unwrap().join("other-project");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(w.root.join("a.txt"), "a before\n").unwrap();
    std::fs::write(other.join("b.txt"), "b before\n").unwrap();
    exec(
        &w,
        "fs.write",
        json!({"path": w.path("a.txt"), "mode": "overwrite", "content": "a after\n"}),
    );
    // The newest change is the other project's.
    let output = flycode()
        .args(["exec", "--json", "--approve", "auto", "--yes", "--root"])
        .arg(&other)
        .env("FLYCODE_STATE_DIR", &w.state)
        .env_remove("XDG_CONFIG_HOME")
        .write_stdin(format!(
            "```flycode-call\n{}\n```\n",
            json!({"id": "b", "tool": "fs.write", "args": {"path": other.join("b.txt"), "mode": "overwrite", "content": "b after\n"}})
        ))
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let (code, out, err) = undo(&w, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("undid c-1"), "{out}");
    assert_eq!(
        std::fs::read_to_string(w.root.join("a.txt")).unwrap(),
        "a before\n"
    );
    assert_eq!(
        std::fs::read_to_string(other.join("b.txt")).unwrap(),
        "b after\n"
    );
    // The last two changes: this project's two (the write and its undo), or with --all the
    // undo and the other project's write.
    let (code, out, err) = undo(&w, &["--last", "2", "--dry-run"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains("b.txt"), "{out}");
    let (code, out, err) = undo(&w, &["--all", "--last", "2", "--dry-run"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("b.txt") && out.contains("c-2"), "{out}");
}

/// `undo c-N` of a call that ran a program says nothing could be undone, exit 1, never
/// "undid".
#[test]
fn undoing_a_program_run_says_nothing_was_undone() {
    let w = Workspace::new();
    exec(
        &w,
        "process.run",
        json!({"command": "sh", "args": ["-c", "echo x > made.txt"], "cwd": w.root}),
    );
    let (code, out, err) = undo(&w, &["c-1"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(!out.contains("undid"), "{out}");
    assert!(err.contains("nothing was undone"), "{err}");
    assert!(w.root.join("made.txt").exists());
}

/// A dry run of an undo that a conflict would stop says so: it shows what --force would put
/// back, under a line saying that without it nothing would be touched.
#[test]
fn a_dry_run_says_when_the_real_undo_would_stop_on_a_conflict() {
    let w = Workspace::new();
    std::fs::write(w.root.join("a.txt"), "original\n").unwrap();
    exec(
        &w,
        "fs.write",
        json!({"path": w.path("a.txt"), "mode": "overwrite", "content": "by flycode\n"}),
    );
    std::fs::write(w.root.join("a.txt"), "edited by the person\n").unwrap();
    let (code, out, err) = undo(&w, &["--dry-run"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("would stop on the conflicts"), "{out}");
    assert!(
        err.contains("conflict:") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(w.root.join("a.txt")).unwrap(),
        "edited by the person\n"
    );
}
