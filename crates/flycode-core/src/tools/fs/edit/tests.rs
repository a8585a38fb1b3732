use std::path::{Path, PathBuf};

use super::*;
use crate::sandbox::{Protection, Roots};

fn setup() -> (tempfile::TempDir, PathBuf, Sandbox) {
    let temp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(temp.path()).unwrap();
    let sandbox = Sandbox::open(&Roots::resolve(std::slice::from_ref(&root)).unwrap())
        .unwrap()
        .with_protection(Protection::default());
    (temp, root, sandbox)
}

fn edit(sandbox: &Sandbox, args: Value) -> Result<ToolOutput, ToolError> {
    run(
        sandbox,
        &crate::tools::parse_args("fs.edit", args.as_object().unwrap())?,
        &Secrets::from_values(Vec::new()),
    )
}

fn path_of(file: &Path) -> String {
    file.display().to_string()
}

#[test]
fn one_edit_shows_the_unified_diff_and_the_new_hash() {
    let (_t, root, sandbox) = setup();
    let file = root.join("a.rs");
    std::fs::write(&file, "fn main() {\n    run();\n}\n").unwrap();
    let path = path_of(&file);
    let output = edit(
        &sandbox,
        json!({"path": path, "edits": [{"oldText": "run();", "newText": "go();\n    stop();"}]}),
    )
    .unwrap();
    let expected = "fn main() {\n    go();\n    stop();\n}\n";
    assert_eq!(std::fs::read_to_string(&file).unwrap(), expected);
    assert_eq!(
        output.body.as_deref().unwrap(),
        format!(
            "--- {path}\n+++ {path}\n@@ -1,3 +1,4 @@\n fn main() {{\n-    run();\n+    go();\n+    stop();\n }}\n"
        )
    );
    assert_eq!(output.data["sha256"], sha256_hex(expected.as_bytes()));
    assert_eq!(output.data["replacements"], 1);
    assert_eq!(FsEdit.summary(&output), "Edited 1 place (+2 −1 lines)");
}

#[test]
fn crlf_and_bom_are_kept() {
    let (_t, root, sandbox) = setup();
    let file = root.join("win.txt");
    std::fs::write(&file, "\u{feff}one\r\ntwo\r\nthree\r\n").unwrap();
    let output = edit(
        &sandbox,
        json!({"path": path_of(&file), "edits": [{"oldText": "one\ntwo\n", "newText": "1\n2\n2.5\n"}]}),
    )
    .unwrap();
    assert_eq!(
        std::fs::read(&file).unwrap(),
        "\u{feff}1\r\n2\r\n2.5\r\nthree\r\n".as_bytes()
    );
    assert_eq!(output.data["lineEndings"], "crlf");
    assert_eq!(output.data["bom"], true);
    assert!(!output.body.unwrap().contains('\r'));
}

#[test]
fn a_failing_edit_changes_nothing() {
    let (_t, root, sandbox) = setup();
    let file = root.join("a.txt");
    std::fs::write(&file, "alpha\nbeta\nbeta\n").unwrap();
    let path = path_of(&file);
    let missing = edit(
        &sandbox,
        json!({"path": path, "edits": [
            {"oldText": "alpha", "newText": "ALPHA"},
            {"oldText": "gamma", "newText": "x"}
        ]}),
    )
    .unwrap_err();
    assert_eq!(missing.code, ErrorCode::NoMatch);
    assert!(
        missing.message.contains("edits[1].oldText"),
        "{}",
        missing.message
    );
    let ambiguous = edit(
        &sandbox,
        json!({"path": path, "edits": [{"oldText": "beta", "newText": "x"}]}),
    )
    .unwrap_err();
    assert_eq!(ambiguous.code, ErrorCode::AmbiguousMatch);
    assert!(
        ambiguous.message.contains("2 times") && ambiguous.message.contains("lines 2, 3"),
        "{}",
        ambiguous.message
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "alpha\nbeta\nbeta\n"
    );
}

#[test]
fn no_match_shows_the_closest_lines_in_the_body() {
    let (_t, root, sandbox) = setup();
    let file = root.join("a.py");
    std::fs::write(&file, "def f():\n    return 1\n\ndef g():\n    return 2\n").unwrap();
    let error = edit(
        &sandbox,
        json!({"path": path_of(&file), "edits": [{"oldText": "def g():\n  return 2", "newText": "x"}]}),
    )
    .unwrap_err();
    assert_eq!(error.code, ErrorCode::NoMatch);
    assert!(error.message.contains("lines are 4-5"), "{}", error.message);
    assert!(
        error.message.contains("only in whitespace"),
        "{}",
        error.message
    );
    assert_eq!(
        error.output.unwrap().body.unwrap(),
        "4 | def g():\n5 |     return 2\n"
    );
}

#[test]
fn dry_run_and_unchanged_edits_write_nothing() {
    let (_t, root, sandbox) = setup();
    let file = root.join("a.txt");
    std::fs::write(&file, "same\n").unwrap();
    let dry = edit(
        &sandbox,
        json!({"path": path_of(&file), "dryRun": true, "edits": [{"oldText": "same", "newText": "new"}]}),
    )
    .unwrap();
    assert!(dry.body.as_deref().unwrap().contains("+new"));
    assert_eq!(dry.data["sha256"], sha256_hex(b"new\n"));
    assert_eq!(FsEdit.summary(&dry), "Would edit 1 place (+1 −1 lines)");
    assert!(
        FsEdit
            .session_changes(&parse(&path_of(&file), true), &dry)
            .is_empty()
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "same\n");
    let same = edit(
        &sandbox,
        json!({"path": path_of(&file), "edits": [{"oldText": "same", "newText": "same"}]}),
    )
    .unwrap();
    assert_eq!(same.data["changed"], false);
    assert!(same.body.as_deref().unwrap().starts_with("no changes"));
    assert_eq!(FsEdit.summary(&same), "No change (1 place matched)");
}

fn parse(path: &str, dry_run: bool) -> EditArgs {
    crate::tools::parse_args(
        "fs.edit",
        json!({"path": path, "dryRun": dry_run, "edits": [{"oldText": "a", "newText": "b"}]})
            .as_object()
            .unwrap(),
    )
    .unwrap()
}

#[test]
fn a_dry_run_is_a_read_and_is_not_guarded() {
    let dry = parse("/w/a.txt", true);
    assert!(!FsEdit.effects(&dry).is_mutating());
    assert!(FsEdit.guarded_paths(&dry).is_empty());
    let real = parse("/w/a.txt", false);
    assert_eq!(FsEdit.effects(&real).writes, vec!["/w/a.txt"]);
    assert_eq!(FsEdit.guarded_paths(&real), vec!["/w/a.txt"]);
}

#[test]
fn files_that_cannot_be_edited_say_why() {
    let (_t, root, sandbox) = setup();
    std::fs::write(root.join("bin"), [b'a', 0xff, b'\n']).unwrap();
    std::fs::create_dir(root.join("dir")).unwrap();
    std::fs::create_dir(root.join(".git")).unwrap();
    std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
    let code = |name: &str| {
        edit(
            &sandbox,
            json!({"path": path_of(&root.join(name)), "edits": [{"oldText": "a", "newText": "b"}]}),
        )
        .unwrap_err()
    };
    let missing = code("missing.txt");
    assert_eq!(missing.code, ErrorCode::NotFound);
    assert!(missing.hint.unwrap().contains("fs.write"));
    assert!(!root.join("missing.txt").exists());
    assert_eq!(code("bin").code, ErrorCode::BinaryContent);
    assert_eq!(code("dir").code, ErrorCode::IsDirectory);
    assert_eq!(code(".git/config").code, ErrorCode::DeniedByPolicy);
    assert_eq!(
        std::fs::read_to_string(root.join(".git/config")).unwrap(),
        "[core]\n"
    );
}

#[cfg(unix)]
#[test]
fn special_files_are_refused() {
    let (_t, root, sandbox) = setup();
    let fifo = root.join("pipe");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let error = edit(
        &sandbox,
        json!({"path": path_of(&fifo), "edits": [{"oldText": "a", "newText": "b"}]}),
    )
    .unwrap_err();
    assert_eq!(error.code, ErrorCode::SpecialFile);
}

#[test]
fn an_expected_hash_must_match() {
    let (_t, root, sandbox) = setup();
    let file = root.join("a.txt");
    std::fs::write(&file, "a\n").unwrap();
    let error = edit(
        &sandbox,
        json!({"path": path_of(&file), "expectedSha256": sha256_hex(b"other"), "edits": [{"oldText": "a", "newText": "b"}]}),
    )
    .unwrap_err();
    assert_eq!(error.code, ErrorCode::Sha256Mismatch);
    assert!(error.message.contains(&sha256_hex(b"a\n")));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "a\n");
    edit(
        &sandbox,
        json!({"path": path_of(&file), "expectedSha256": sha256_hex(b"a\n"), "edits": [{"oldText": "a", "newText": "b"}]}),
    )
    .unwrap();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "b\n");
}

#[test]
fn a_change_between_read_and_write_is_stale() {
    let (_t, root, sandbox) = setup();
    let file = root.join("a.txt");
    std::fs::write(&file, "changed by someone\n").unwrap();
    let error = write(
        &sandbox,
        &path_of(&file),
        b"mine\n",
        &sha256_hex(b"as read\n"),
    )
    .unwrap_err();
    assert_eq!(error.code, ErrorCode::StaleFile);
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "changed by someone\n"
    );
}

#[test]
fn an_abbreviating_edit_is_refused() {
    let (_t, root, sandbox) = setup();
    let file = root.join("long.py");
    let body: String = (1..=30).map(|n| format!("x{n} = {n}\n")).collect();
    std::fs::write(&file, &body).unwrap();
    let old: String = (2..=30).map(|n| format!("x{n} = {n}\n")).collect();
    let error = edit(
        &sandbox,
        json!({"path": path_of(&file), "edits": [{"oldText": old, "newText": "# ... rest of the code unchanged ...\n"}]}),
    )
    .unwrap_err();
    assert_eq!(error.code, ErrorCode::OmissionPlaceholder);
    assert!(
        error.message.contains("edits[0].newText"),
        "{}",
        error.message
    );
    assert!(error.hint.unwrap().contains("copy the real text"));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), body);
    // Deleting the same lines without a placeholder is an ordinary edit.
    edit(
        &sandbox,
        json!({"path": path_of(&file), "edits": [{"oldText": old, "newText": ""}]}),
    )
    .unwrap();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x1 = 1\n");
}

#[cfg(unix)]
#[test]
fn permissions_are_kept() {
    use std::os::unix::fs::PermissionsExt;
    let (_t, root, sandbox) = setup();
    let file = root.join("run.sh");
    std::fs::write(&file, "#!/bin/sh\necho old\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
    edit(
        &sandbox,
        json!({"path": path_of(&file), "edits": [{"oldText": "old", "newText": "new"}]}),
    )
    .unwrap();
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o755
    );
}

#[test]
fn an_edit_flushes_the_file_and_its_folder_once_each_and_nothing_under_process() {
    use crate::sandbox::Durability;
    use crate::sandbox::durability::count;
    let (_t, root, sandbox) = setup();
    let file = root.join("a.txt");
    std::fs::write(&file, "one\n").unwrap();
    let args = |old: &str, new: &str| json!({"path": path_of(&file), "edits": [{"oldText": old, "newText": new}]});
    let syncs = count::during(|| {
        edit(&sandbox, args("one", "two")).unwrap();
    });
    assert_eq!(
        syncs, 2,
        "one fdatasync of the file, one fsync of its folder"
    );
    let sandbox = sandbox.with_durability(Durability::Process);
    let syncs = count::during(|| {
        edit(&sandbox, args("two", "three")).unwrap();
    });
    assert_eq!(syncs, 0);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "three\n");
}
