//! `fs.ls` through the real binary: `.git` and what the ignore files ignore are hidden and
//! counted, `all: true` shows everything (PROTOCOL.md §9 (fs.ls)).

use serde_json::{Value, json};

use super::common::Workspace;

/// A git repository with ignore files at two levels, a `.ignore`, a dotfile and ignored files.
fn repository() -> Workspace {
    let w = Workspace::new();
    let write = |name: &str, text: &str| {
        let path = w.root.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(".git/HEAD", "ref: refs/heads/main\n");
    write(".gitignore", "target/\n*.log\n");
    write(".ignore", "notes.md\n");
    write(".env", "A=1\n");
    write("notes.md", "mine\n");
    write("app.log", "log\n");
    write("target/debug/app", "binary\n");
    write("src/main.rs", "fn main() {}\n");
    write("src/debug.log", "log\n");
    write("sub/.gitignore", "local.txt\n");
    write("sub/local.txt", "local\n");
    write("sub/kept.txt", "kept\n");
    w
}

fn ls(w: &Workspace, args: Value) -> (String, Value) {
    let (code, report) = w.exec_json(&json!({"id": "l1", "tool": "fs.ls", "args": args}), &[]);
    assert_eq!(code, 0, "{report}");
    let text = report["text"].as_str().unwrap().to_owned();
    (text, report["result"].clone())
}

fn listed(data: &Value) -> Vec<String> {
    data["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn ls_hides_git_and_ignored_entries_and_says_how_many() {
    let w = repository();
    let (text, data) = ls(&w, json!({"path": w.path(""), "depth": 3}));
    let paths = listed(&data);
    for shown in [
        ".env",
        ".gitignore",
        ".ignore",
        "src",
        "src/main.rs",
        "sub",
        "sub/kept.txt",
    ] {
        assert!(paths.contains(&shown.to_owned()), "{shown} missing: {text}");
    }
    for hidden in [
        ".git",
        "app.log",
        "notes.md",
        "target",
        "src/debug.log",
        "sub/local.txt",
    ] {
        assert!(
            !paths.contains(&hidden.to_owned()),
            "{hidden} shown: {text}"
        );
    }
    assert!(
        !paths
            .iter()
            .any(|p| p.starts_with(".git/") || p.starts_with("target/"))
    );
    assert_eq!(data["hidden"], 6, "{data}");
    assert!(
        text.contains("\n6 entries hidden by .git and ignore files; pass all: true to show them\n"),
        "{text}"
    );
}

#[test]
fn ls_all_shows_everything_without_a_note() {
    let w = repository();
    let (text, data) = ls(&w, json!({"path": w.path(""), "depth": 3, "all": true}));
    let paths = listed(&data);
    for shown in [
        ".git",
        ".git/HEAD",
        "app.log",
        "notes.md",
        "target/debug",
        "src/debug.log",
        "sub/local.txt",
    ] {
        assert!(paths.contains(&shown.to_owned()), "{shown} missing: {text}");
    }
    assert_eq!(data.get("hidden"), None, "{data}");
    assert!(!text.contains("hidden"), "{text}");
}

#[test]
fn ls_of_a_subdirectory_honours_the_ignore_files_above_it() {
    let w = repository();
    let (text, data) = ls(&w, json!({"path": w.path("src")}));
    assert_eq!(listed(&data), ["main.rs"], "{text}");
    assert!(
        text.contains("1 entry hidden by .git and ignore files"),
        "{text}"
    );
}

#[test]
fn ls_outside_a_git_repository_ignores_gitignore_but_not_ignore() {
    let w = repository();
    std::fs::remove_dir_all(w.root.join(".git")).unwrap();
    let (text, data) = ls(&w, json!({"path": w.path("")}));
    let paths = listed(&data);
    assert!(paths.contains(&"app.log".to_owned()), "{text}");
    assert!(paths.contains(&"target".to_owned()), "{text}");
    assert!(!paths.contains(&"notes.md".to_owned()), "{text}");
    assert_eq!(data["hidden"], 1, "{data}");
}
