//! `fs.readMany` (PROTOCOL.md §9 (Tools)) through the real binary and the shared executor: the slash form
//! (flags after the paths), `exclude`, duplicates, `.gitignore` inside a repository, the list of
//! what the output cap left out, CRLF kept byte for byte, and the stale-read guard's memory.
#![allow(clippy::disallowed_methods)] // fixtures are made directly, outside the sandbox

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use flycode::protocol::{Call, ToolName, ToolSet, parse_slash_in, render_command};
use flycode::sandbox::{Roots, Sandbox, Session};
use flycode::tools::approval::{Approval, FixedApprover};
use flycode::tools::executor::Executor;
use flycode::tools::policy::Policy;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::common::flycode;

/// A temporary root holding `files`.
struct Root {
    _temp: tempfile::TempDir,
    path: PathBuf,
}

fn root_with(files: &[(&str, &[u8])]) -> Root {
    let temp = tempfile::tempdir().unwrap();
    let path = std::fs::canonicalize(temp.path()).unwrap().join("root");
    for (name, content) in files {
        let file = path.join(name);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, content).unwrap();
    }
    std::fs::create_dir_all(&path).unwrap();
    Root { _temp: temp, path }
}

impl Root {
    fn at(&self, relative: &str) -> String {
        format!("{}/{relative}", self.path.display())
    }

    /// `flycode exec --tools extended` of a slash command or a reply; stdout with the root as `R`,
    /// and the exit code.
    fn exec(&self, how: &[&str], reply: Option<&str>, extra: &[&str]) -> (i32, String) {
        let mut command = flycode();
        command
            .arg("exec")
            .arg("--root")
            .arg(&self.path)
            .args(["--tools", "extended"])
            .args(extra)
            .args(how)
            .current_dir(&self.path)
            .env_remove("XDG_CONFIG_HOME")
            .env(
                "FLYCODE_STATE_DIR",
                self.path.parent().unwrap().join("state"),
            );
        if let Some(reply) = reply {
            command.write_stdin(reply.to_owned());
        }
        let output = command.output().unwrap();
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stdout).replace(self.path.to_str().unwrap(), "R"),
        )
    }

    fn slash(&self, line: &str) -> (i32, String) {
        self.exec(&["--slash", line], None, &[])
    }
}

#[test]
fn the_slash_form_reads_flags_after_the_paths() {
    let root = root_with(&[
        ("src/a.rs", b"fn a() {}\n"),
        ("src/tests/t.rs", b"fn t() {}\n"),
        ("b.rs", b"fn b() {}\n"),
    ]);
    let line = format!(
        "/fs.readMany {} '{}' --exclude '**/tests/**'",
        root.at("b.rs"),
        root.at("src/**/*.rs")
    );
    let (code, out) = root.slash(&line);
    assert_eq!(code, 0, "{out}");
    // `[command]` reads back to the same call, wherever it puts the flags.
    let command = out
        .lines()
        .find_map(|l| l.strip_prefix("[command] "))
        .unwrap()
        .replace('R', root.path.to_str().unwrap());
    assert_eq!(
        Value::Object(parse_slash_in(&command, ToolSet::Extended).unwrap().args),
        json!({"paths": [root.at("b.rs"), root.at("src/**/*.rs")], "exclude": ["**/tests/**"]}),
        "{out}"
    );
    assert!(
        out.contains(
            "=== File: R/b.rs (10 B, 1 line) ===\nfn b() {}\n\n=== File: R/src/a.rs (10 B, 1 line) ===\nfn a() {}\n\n--- Summary ---\nTotal: 2 files, 20 B\nErrors: 0\n"
        ),
        "{out}"
    );
    assert!(!out.contains("fn t()"), "excluded: {out}");
}

#[test]
fn slash_flags_may_come_first_between_or_last() {
    let call = |line: &str| parse_slash_in(line, ToolSet::Extended).unwrap().args;
    let expected =
        json!({"paths": ["/w/a", "/w/b/**"], "exclude": ["**/x/**"], "maxBytesPerFile": 10});
    for line in [
        "/fs.readMany /w/a '/w/b/**' --exclude '**/x/**' --maxBytesPerFile 10",
        "/fs.readMany --exclude '**/x/**' --maxBytesPerFile 10 /w/a '/w/b/**'",
        "/fs.readMany /w/a --maxBytesPerFile=10 '/w/b/**' --exclude '**/x/**'",
    ] {
        assert_eq!(Value::Object(call(line)), expected, "{line}");
    }
    // process.run keeps its rule: after the program, every word is the program's.
    let run = parse_slash_in("/process.run git log --oneline --cwd /w", ToolSet::Extended).unwrap();
    assert_eq!(
        Value::Object(run.args),
        json!({"command": "git", "args": ["log", "--oneline", "--cwd", "/w"]})
    );
}

fn absolute_path() -> impl Strategy<Value = String> {
    // Names with spaces, quotes, glob characters, leading dashes and non-ASCII letters.
    prop::collection::vec("[a-zA-Z0-9 _.*?{}\\[\\],'\"$é-]{1,8}", 1..4)
        .prop_map(|names| format!("/{}", names.join("/")))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn the_command_of_a_read_many_call_parses_back_to_the_same_call(
        paths in prop::collection::vec(absolute_path(), 1..5),
        exclude in prop::option::of(prop::collection::vec("[a-z*/{},-]{1,10}", 1..3)),
        max in prop::option::of(1..16_777_216_i64),
    ) {
        let mut args = json!({"paths": paths});
        if let Some(exclude) = exclude {
            args["exclude"] = json!(exclude);
        }
        if let Some(max) = max {
            args["maxBytesPerFile"] = json!(max);
        }
        let line = render_command(ToolName::FsReadMany, args.as_object().unwrap());
        let call = parse_slash_in(&line, ToolSet::Extended).unwrap();
        prop_assert_eq!(Value::Object(call.args), args);
    }
}

#[test]
fn duplicates_are_read_once() {
    let root = root_with(&[("src/a.rs", b"a\n"), ("src/b.rs", b"b\n")]);
    let line = format!(
        "/fs.readMany {a} '{glob}' {a} '{star}'",
        a = root.at("src/a.rs"),
        glob = root.at("src/**/*.rs"),
        star = root.at("src/*.rs")
    );
    let (code, out) = root.slash(&line);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out.matches("=== File: ").count(), 2, "{out}");
    assert!(
        out.contains("=== File: R/src/a.rs (2 B, 1 line) ===\na\n\n=== File: R/src/b.rs"),
        "{out}"
    );
    assert!(out.contains("Total: 2 files, 4 B\nErrors: 0\n"), "{out}");
}

#[test]
fn gitignore_counts_inside_a_git_repository() {
    let root = root_with(&[
        (".gitignore", b"target/\n*.log\n"),
        ("src/main.rs", b"fn main() {}\n"),
        ("target/debug/build.rs", b"// built\n"),
        ("run.log", b"log\n"),
        ("notes.md", b"notes\n"),
    ]);
    let pattern = root.at("**");
    // Outside a repository .gitignore does not count, as with fs.search (ripgrep's rule).
    let (_, before) = root.slash(&format!("/fs.readMany '{pattern}'"));
    assert!(before.contains("R/run.log"), "{before}");
    std::fs::create_dir_all(root.path.join(".git")).unwrap();
    let (code, out) = root.slash(&format!("/fs.readMany '{pattern}'"));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("=== File: R/notes.md"), "{out}");
    assert!(out.contains("=== File: R/src/main.rs"), "{out}");
    assert!(!out.contains("run.log"), "{out}");
    assert!(!out.contains("target/"), "{out}");
    assert!(
        !out.contains("R/.gitignore"),
        "hidden files are skipped: {out}"
    );
    // Named on its own, an ignored file is read.
    let (_, named) = root.slash(&format!("/fs.readMany {}", root.at("run.log")));
    assert!(
        named.contains("=== File: R/run.log (4 B, 1 line) ===\nlog\n"),
        "{named}"
    );
}

#[test]
fn what_the_output_cap_leaves_out_is_listed_with_truncated_true() {
    let files: Vec<(String, Vec<u8>)> = (0..20)
        .map(|i| {
            (
                format!("f{i:02}.txt"),
                format!("line {i}\n").repeat(40).into_bytes(),
            )
        })
        .collect();
    let borrowed: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(n, c)| (n.as_str(), c.as_slice()))
        .collect();
    let root = root_with(&borrowed);
    std::fs::write(root.path.join("flycode.toml"), "output_cap = 1024\n").unwrap();
    let (code, out) = root.slash(&format!("/fs.readMany '{}'", root.at("*.txt")));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("[truncated] true\n"), "{out}");
    assert!(out.contains("=== Not read (output cap) ===\n"), "{out}");
    let body = out.split("[data]\n").nth(1).unwrap();
    let body = body.strip_suffix("\n```\n").unwrap();
    assert!(
        body.len() <= 1024 + 200,
        "the root's path is shorter as R: {}",
        body.len()
    );
    let shown = body.matches("=== File: ").count();
    let listed = body.lines().filter(|l| l.starts_with("- R/f")).count();
    let more: usize = body
        .lines()
        .find_map(|l| {
            l.strip_prefix("- … and ")?
                .strip_suffix(" more")?
                .parse()
                .ok()
        })
        .unwrap_or(0);
    assert_eq!(
        shown + listed + more,
        20,
        "every file is shown or accounted for: {body}"
    );
    assert!(
        body.contains(&format!("Not read: {} files (output cap)", 20 - shown)),
        "{body}"
    );
}

#[test]
fn crlf_files_come_back_byte_for_byte() {
    let root = root_with(&[("win.txt", b"\xef\xbb\xbfone\r\ntwo\r\n")]);
    let (code, out) = root.slash(&format!("/fs.readMany {}", root.at("win.txt")));
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("=== File: R/win.txt (13 B, 2 lines) ===\n\u{feff}one\r\ntwo\r\n\n"),
        "{out:?}"
    );
}

#[test]
fn a_json_call_and_every_entry_failing() {
    let root = root_with(&[("a.txt", b"a\n")]);
    let reply = format!(
        "```flycode-call\n{}\n```\n",
        json!({"id": "call-001", "tool": "fs.readMany", "args": {"paths": [root.at("missing.txt"), "/etc/hostname"]}})
    );
    let (code, out) = root.exec(&[], Some(&reply), &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("[ok] false\n[code] not_found\n"), "{out}");
    assert!(
        out.contains("[error] fs.readMany read no file: R/missing.txt: does not exist; /etc/hostname: is outside the allowed roots"),
        "{out}"
    );
    assert!(
        out.contains("=== Errors ===\n- R/missing.txt: does not exist (not_found)\n"),
        "{out}"
    );
}

#[test]
fn the_seed_set_does_not_know_it() {
    let root = root_with(&[("a.txt", b"a\n")]);
    let output = flycode()
        .arg("exec")
        .arg("--root")
        .arg(&root.path)
        .args(["--slash", &format!("/fs.readMany {}", root.at("a.txt"))])
        .env(
            "FLYCODE_STATE_DIR",
            root.path.parent().unwrap().join("state"),
        )
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{out}");
    assert!(out.contains("unknown_tool"), "{out}");
}

fn executor_call(paths: &[String]) -> Call {
    Call {
        id: Some("c".into()),
        tool: ToolName::FsReadMany,
        args: json!({"paths": paths}).as_object().cloned().unwrap(),
    }
}

#[test]
fn files_shown_whole_are_remembered_for_the_stale_read_guard() {
    let root = root_with(&[("a.txt", b"one\n"), ("big.txt", &b"x".repeat(5000))]);
    let sandbox =
        Sandbox::open(&Roots::resolve(std::slice::from_ref(&root.path)).unwrap()).unwrap();
    let policy = Policy::default();
    let approver = FixedApprover(Approval::Yes);
    let session = Mutex::new(Session::in_memory());
    let executor = Executor::builder(&sandbox, &policy, &approver)
        .session(Some(&session))
        .build();
    let call = Call {
        args: json!({"paths": [root.at("*.txt")], "maxBytesPerFile": 100})
            .as_object()
            .cloned()
            .unwrap(),
        ..executor_call(&[])
    };
    let done = executor.execute(&call);
    assert!(done.is_ok(), "{:?}", done.block);
    assert_eq!(done.summary, "Read 2 files (104 B)");
    let remembered = |p: &Path| session.lock().unwrap().remembered(p).map(str::to_owned);
    assert_eq!(
        remembered(&root.path.join("a.txt")),
        Some(flycode::sandbox::sha256_hex(b"one\n"))
    );
    assert_eq!(
        remembered(&root.path.join("big.txt")),
        None,
        "shown in part"
    );
    // A file changed behind the model's back is now guarded.
    std::fs::write(root.path.join("a.txt"), "changed\n").unwrap();
    let write = Call {
        id: Some("w".into()),
        tool: ToolName::FsWrite,
        args: json!({"path": root.at("a.txt"), "mode": "overwrite", "content": "two\n"})
            .as_object()
            .cloned()
            .unwrap(),
    };
    assert_eq!(
        executor.execute(&write).block.code.as_deref(),
        Some("stale_file")
    );
    // The summary with errors, in seed 001's words.
    let with_errors = executor.execute(&executor_call(&[
        root.at("a.txt"),
        root.at("nope"),
        root.at("gone"),
    ]));
    assert_eq!(with_errors.summary, "Read 1 file (8 B), 2 errors");
}
