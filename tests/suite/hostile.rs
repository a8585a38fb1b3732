//! Hostile calls from SECURITY.md's categories, each run through the real `flycode exec`: every
//! one must fail with the stated code (or stay inside the root), and nothing outside the root may
//! change.

use std::collections::BTreeMap;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::common::flycode;

/// Every path below `dir` with its content (links as their target), to prove nothing changed.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(current) = stack.pop() {
        for entry in std::fs::read_dir(&current).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let shown = if meta.file_type().is_symlink() {
                format!("-> {}", std::fs::read_link(&path).unwrap().display())
            } else if meta.is_dir() {
                stack.push(path.clone());
                "<dir>".to_owned()
            } else {
                format!(
                    "{} {:o}",
                    String::from_utf8_lossy(&std::fs::read(&path).unwrap()),
                    meta.permissions().mode_bits()
                )
            };
            out.insert(path, shown);
        }
    }
    out
}

trait ModeBits {
    fn mode_bits(&self) -> u32;
}

impl ModeBits for std::fs::Permissions {
    fn mode_bits(&self) -> u32 {
        use std::os::unix::fs::PermissionsExt;
        self.mode() & 0o7777
    }
}

struct Arena {
    _temp: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
    state: PathBuf,
}

fn arena() -> Arena {
    let temp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(temp.path()).unwrap();
    let root = base.join("app");
    let outside = base.join("outside");
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::create_dir_all(base.join("app-evil")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(root.join("a.txt"), "inside").unwrap();
    std::fs::write(outside.join("secret.txt"), "SECRET").unwrap();
    std::fs::write(base.join("app-evil/x.txt"), "evil sibling").unwrap();
    symlink(outside.join("secret.txt"), root.join("abs-link")).unwrap();
    symlink("../outside/secret.txt", root.join("rel-link")).unwrap();
    symlink(root.join("abs-link"), root.join("chain-link")).unwrap();
    symlink(
        outside.join("created-by-attacker.txt"),
        root.join("dangling-out"),
    )
    .unwrap();
    symlink(&outside, root.join("dir-link")).unwrap();
    symlink("loop-b", root.join("loop-a")).unwrap();
    symlink("loop-a", root.join("loop-b")).unwrap();
    symlink("/proc/self/root/etc/hostname", root.join("proc-link")).unwrap();
    symlink("/dev/zero", root.join("zero")).unwrap();
    std::fs::hard_link(outside.join("secret.txt"), root.join("hard-link")).unwrap();
    std::fs::create_dir_all(root.join("tree/sub")).unwrap();
    symlink(&outside, root.join("tree/sub/out")).unwrap();
    assert!(
        std::process::Command::new("mkfifo")
            .arg(root.join("fifo"))
            .status()
            .unwrap()
            .success()
    );
    Arena {
        _temp: temp,
        state: base.join("state"),
        root,
        outside,
    }
}

fn exec(arena: &Arena, tool: &str, args: Value) -> Value {
    let reply = format!(
        "```flycode-call\n{}\n```\n",
        json!({"id": "h", "tool": tool, "args": args})
    );
    let output = flycode()
        .args(["exec", "--json", "--approve", "auto", "--yes", "--root"])
        .arg(&arena.root)
        .env("FLYCODE_STATE_DIR", &arena.state)
        .write_stdin(reply)
        .output()
        .unwrap();
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|_| json!({"unparsed": String::from_utf8_lossy(&output.stdout)}))
}

#[test]
fn hostile_calls_fail_and_nothing_outside_changes() {
    let arena = arena();
    let base = arena.root.parent().unwrap().to_owned();
    let before_outside = snapshot(&base.join("outside"));
    let before_sibling = snapshot(&base.join("app-evil"));
    let r = |rel: &str| format!("{}/{rel}", arena.root.display());
    let deep = format!(
        "{}/src/{}outside/secret.txt",
        arena.root.display(),
        "../".repeat(60)
    );
    let write = |path: String| {
        (
            "fs.write",
            json!({"path": path, "mode": "overwrite", "content": "pwned"}),
        )
    };
    let append = |path: String| {
        (
            "fs.write",
            json!({"path": path, "mode": "append", "content": "pwned"}),
        )
    };
    let read = |path: String| ("fs.read", json!({"path": path}));
    let cases: Vec<(&str, (&str, Value), &str)> = vec![
        // 1. Containment
        (
            "prefix sibling",
            read(format!("{}-evil/x.txt", arena.root.display())),
            "outside_roots",
        ),
        (
            "dot-dot out",
            read(r("../outside/secret.txt")),
            "outside_roots",
        ),
        ("deep dot-dot", read(deep), "outside_roots"),
        (
            "write via dot-dot",
            write(r("src/../../outside/new.txt")),
            "outside_roots",
        ),
        ("relative path", read("a.txt".into()), "relative_path"),
        ("tilde path", read("~/secret".into()), "relative_path"),
        ("nul byte", read(r("a\u{0}b")), "invalid_args"),
        ("over-long component", read(r(&"x".repeat(300))), "io_error"),
        // 2. Links
        ("absolute link out", read(r("abs-link")), "outside_roots"),
        ("relative link out", write(r("rel-link")), "outside_roots"),
        ("link chain out", append(r("chain-link")), "outside_roots"),
        (
            "dangling link out",
            write(r("dangling-out")),
            "outside_roots",
        ),
        (
            "directory link out",
            write(r("dir-link/new.txt")),
            "outside_roots",
        ),
        (
            "link then dot-dot",
            read(r("dir-link/../outside/secret.txt")),
            "outside_roots",
        ),
        ("link loop", read(r("loop-a")), "io_error"),
        ("proc self root", read(r("proc-link")), "outside_roots"),
        (
            "chmod through a link out",
            ("fs.chmod", json!({"path": r("abs-link"), "mode": "777"})),
            "outside_roots",
        ),
        (
            "mkdir through a link out",
            (
                "fs.mkdir",
                json!({"path": r("dir-link/x"), "parents": true}),
            ),
            "outside_roots",
        ),
        (
            "move onto a link out's target",
            (
                "fs.mv",
                json!({"fromPath": r("a.txt"), "toPath": r("dir-link/a.txt")}),
            ),
            "outside_roots",
        ),
        (
            "append to a hard link",
            append(r("hard-link")),
            "denied_by_policy",
        ),
        (
            "diff against a link out",
            (
                "fs.diff",
                json!({"leftPath": r("a.txt"), "rightPath": r("abs-link")}),
            ),
            "outside_roots",
        ),
        (
            "list a link out",
            ("fs.ls", json!({"path": r("dir-link")})),
            "outside_roots",
        ),
        // 3. Windows forms on a Unix host
        (
            "drive path",
            read("C:\\Windows\\win.ini".into()),
            "unsupported_path",
        ),
        (
            "drive path, forward slashes",
            read("C:/Windows/win.ini".into()),
            "unsupported_path",
        ),
        ("drive-relative", read("C:win.ini".into()), "relative_path"),
        (
            "rooted backslash",
            read("\\Windows\\win.ini".into()),
            "relative_path",
        ),
        ("verbatim", read("\\\\?\\C:\\x".into()), "unsupported_path"),
        ("device", read("\\\\.\\COM1".into()), "unsupported_path"),
        (
            "UNC",
            read("\\\\server\\share\\x".into()),
            "unsupported_path",
        ),
        // 4. Special files
        ("fifo read", read(r("fifo")), "special_file"),
        ("fifo append", append(r("fifo")), "special_file"),
        ("dev zero behind a link", read(r("zero")), "outside_roots"),
        // 5. Writes
        (
            "stale hash",
            (
                "fs.write",
                json!({"path": r("a.txt"), "mode": "overwrite", "content": "x", "expectedSha256": "0".repeat(64)}),
            ),
            "sha256_mismatch",
        ),
        (
            "batch alias",
            (
                "fs.writeBatch",
                json!({"files": [{"path": r("a.txt"), "content": "1"}, {"path": r("src/../a.txt"), "content": "2"}]}),
            ),
            "invalid_args",
        ),
        (
            "batch file and child",
            (
                "fs.writeBatch",
                json!({"files": [{"path": r("n"), "content": "1"}, {"path": r("n/child"), "content": "2"}]}),
            ),
            "invalid_args",
        ),
        (
            "batch with one path out",
            (
                "fs.writeBatch",
                json!({"files": [{"path": r("ok.txt"), "content": "1"}, {"path": r("abs-link"), "content": "2"}]}),
            ),
            "outside_roots",
        ),
        (
            "setuid",
            ("fs.chmod", json!({"path": r("a.txt"), "mode": "u+s"})),
            "denied_by_policy",
        ),
        (
            "remove the root",
            (
                "fs.rm",
                json!({"path": arena.root.display().to_string(), "recursive": true}),
            ),
            "denied_by_policy",
        ),
        (
            "overwrite a .git hook",
            write(r(".git/hooks/post-checkout")),
            "denied_by_policy",
        ),
    ];
    let mut problems = Vec::new();
    for (name, (tool, args), expected) in &cases {
        let report = exec(&arena, tool, args.clone());
        let code = report["error"]["code"].as_str().unwrap_or("(ok)");
        if code != *expected {
            problems.push(format!("{name}: got {code}, expected {expected}: {report}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(cases.len() >= 35);
    assert_eq!(
        snapshot(&base.join("outside")),
        before_outside,
        "something outside the root changed"
    );
    assert_eq!(snapshot(&base.join("app-evil")), before_sibling);
    assert!(!arena.outside.join("created-by-attacker.txt").exists());
}

#[test]
fn removing_a_tree_with_a_link_out_removes_only_the_link() {
    let arena = arena();
    let before = snapshot(&arena.outside);
    let report = exec(
        &arena,
        "fs.rm",
        json!({"path": format!("{}/tree", arena.root.display()), "recursive": true}),
    );
    assert_eq!(report["ok"], true, "{report}");
    assert!(!arena.root.join("tree").exists());
    assert_eq!(snapshot(&arena.outside), before);
}

#[test]
fn a_link_out_itself_may_be_renamed_and_removed() {
    let arena = arena();
    let before = snapshot(&arena.outside);
    let moved = exec(
        &arena,
        "fs.mv",
        json!({"fromPath": format!("{}/abs-link", arena.root.display()), "toPath": format!("{}/renamed-link", arena.root.display())}),
    );
    assert_eq!(moved["ok"], true, "{moved}");
    let removed = exec(
        &arena,
        "fs.rm",
        json!({"path": format!("{}/renamed-link", arena.root.display())}),
    );
    assert_eq!(removed["ok"], true, "{removed}");
    assert_eq!(snapshot(&arena.outside), before);
}

#[test]
fn hidden_characters_are_escaped_in_the_command_line() {
    let arena = arena();
    let report = exec(
        &arena,
        "fs.read",
        json!({"path": format!("{}/a\u{202E}txt.exe", arena.root.display())}),
    );
    let text = report["text"].as_str().unwrap();
    assert!(text.contains("a\\u{202E}txt.exe"), "{text}");
    assert!(!text.contains('\u{202E}'), "{text}");
}

#[test]
fn windows_special_names_are_ordinary_names_on_unix() {
    let arena = arena();
    let before = snapshot(&arena.outside);
    for name in [
        "CON",
        "nul.txt",
        "a.txt:stream",
        "PROGRA~1",
        "trailing. ",
        "..test",
        "%2e%2e",
    ] {
        let path = format!("{}/{name}", arena.root.display());
        let report = exec(
            &arena,
            "fs.write",
            json!({"path": path, "mode": "overwrite", "content": name}),
        );
        assert_eq!(report["ok"], true, "{name}: {report}");
        assert_eq!(
            std::fs::read_to_string(arena.root.join(name)).unwrap(),
            name
        );
    }
    assert_eq!(snapshot(&arena.outside), before);
}
