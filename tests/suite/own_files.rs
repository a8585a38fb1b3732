//! flycode's own files are not the model's (PROTOCOL.md §10 "Protected paths", §11 Security
//! "After a crash"): with the state and configuration directories inside the allowed root (as
//! when flycode runs in `$HOME` with root `.`), no file tool reads or changes them, and what is
//! written there behind flycode's back (a forged journal record, session or replay store) never
//! makes flycode act. The real binary, real files.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// A root holding flycode's state (`root/state`) and configuration (`root/cfg/flycode`), and a
/// folder outside it.
struct Home {
    _temp: tempfile::TempDir,
    root: PathBuf,
    state: PathBuf,
    config: PathBuf,
    outside: PathBuf,
}

impl Home {
    fn new() -> Home {
        Home::with_state("state")
    }

    /// The same, the state directory at `root/STATE`.
    fn with_state(state: &str) -> Home {
        let temp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(temp.path()).unwrap();
        let root = base.join("root");
        let outside = base.join("outside");
        let config = root.join("cfg");
        for dir in [&root, &outside, &config.join("flycode")] {
            std::fs::create_dir_all(dir).unwrap();
        }
        Home {
            _temp: temp,
            state: root.join(state),
            root,
            config,
            outside,
        }
    }

    fn exec(&self, call: &Value, flags: &[&str]) -> Output {
        super::common::flycode()
            .args([
                "exec",
                "--json",
                "--approve",
                "auto",
                "--tools",
                "extended",
                "--root",
            ])
            .arg(&self.root)
            .args(flags)
            .env("FLYCODE_STATE_DIR", &self.state)
            .env("XDG_CONFIG_HOME", &self.config)
            .current_dir(&self.root)
            .write_stdin(format!("```flycode-call\n{call}\n```\n"))
            .output()
            .unwrap()
    }

    fn call(&self, tool: &str, args: Value) -> Value {
        let output = self.exec(&json!({"id": "c1", "tool": tool, "args": args}), &[]);
        serde_json::from_slice(&output.stdout).unwrap_or_else(|_| {
            panic!(
                "not JSON: {}\n{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            )
        })
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Asserts that a report is a refusal naming the path as flycode's own.
fn assert_refused_as_own(report: &Value, why: &str) {
    assert_eq!(report["error"]["code"], "denied_by_policy", "{report}");
    let text = report.to_string();
    assert!(text.contains("flycode's own"), "{report}");
    assert!(text.contains(why), "{report}");
}

#[test]
fn no_file_tool_reads_or_lists_flycodes_own_files_inside_a_root() {
    let home = Home::new();
    std::fs::write(home.root.join("notes.txt"), "the word needle\n").unwrap();
    // A first call fills the state directory: the audit log records it.
    let first = home.call(
        "fs.write",
        json!({"path": home.root.join("a.txt"), "mode": "overwrite", "content": "needle in a.txt\n"}),
    );
    assert_eq!(first["ok"], true, "{first}");
    let audit = home.state.join("audit.jsonl");
    assert!(audit.exists());
    std::fs::write(home.config.join("flycode/flycode.toml"), "# needle\n").unwrap();
    std::fs::create_dir_all(home.state.join("journal")).unwrap();

    for (tool, args) in [
        ("fs.read", json!({"path": audit})),
        ("fs.read", json!({"path": home.state.join("seal.key")})),
        ("fs.ls", json!({"path": home.state.join("journal")})),
        ("fs.ls", json!({"path": home.state})),
        ("fs.search", json!({"path": home.state, "query": "needle"})),
        ("fs.diff", json!({"leftPath": audit, "rightContent": ""})),
        (
            "fs.edit",
            json!({"path": audit, "edits": [{"oldText": "fs.write", "newText": "x"}]}),
        ),
        (
            "fs.read",
            json!({"path": home.config.join("flycode/flycode.toml")}),
        ),
    ] {
        let report = home.call(tool, args.clone());
        let why = if args.to_string().contains("/cfg/") {
            "configuration directory"
        } else {
            "state directory"
        };
        assert_refused_as_own(&report, why);
    }
    // fs.readMany refuses a named one and leaves every one out of a pattern.
    let report = home.call(
        "fs.readMany",
        json!({"paths": [audit, format!("{}/**/*.jsonl", home.root.display()), home.root.join("notes.txt")]}),
    );
    let text = report.to_string();
    assert!(text.contains("flycode's own"), "{report}");
    assert!(
        !text.contains("durationMs"),
        "the audit log leaked: {report}"
    );
    assert!(text.contains("the word needle"), "{report}");
    // A search of the whole root finds the model's files, never flycode's.
    let report = home.call("fs.search", json!({"path": home.root, "query": "needle"}));
    let text = report.to_string();
    assert!(
        text.contains("notes.txt") && text.contains("a.txt"),
        "{report}"
    );
    assert!(
        !text.contains("audit.jsonl") && !text.contains("flycode.toml"),
        "{report}"
    );
    // A listing of the root shows the folders but never enters them.
    let report = home.call("fs.ls", json!({"path": home.root, "depth": 4}));
    let text = report.to_string();
    assert!(
        text.contains("notes.txt") && text.contains("state"),
        "{report}"
    );
    assert!(
        !text.contains("audit.jsonl") && !text.contains("journal"),
        "{report}"
    );
    // Nor may a tool write into the state directory, or remove a folder holding it.
    let report = home.call(
        "fs.write",
        json!({"path": home.state.join("journal/1-1-1.json"), "mode": "overwrite", "content": "{}"}),
    );
    assert_refused_as_own(&report, "state directory");
    let report = home.call(
        "fs.rm",
        json!({"path": home.root.join("cfg"), "recursive": true}),
    );
    assert_eq!(report["error"]["code"], "denied_by_policy", "{report}");
    assert!(home.config.join("flycode/flycode.toml").exists());
}

#[test]
fn the_default_inbox_stays_readable_but_not_writable() {
    let home = Home::new();
    let inbox = home.state.join("inbox");
    std::fs::create_dir_all(&inbox).unwrap();
    std::fs::write(inbox.join("r.result.md"), "a result for the user\n").unwrap();
    let report = home.call("fs.read", json!({"path": inbox.join("r.result.md")}));
    assert_eq!(report["ok"], true, "{report}");
    assert!(report.to_string().contains("a result for the user"));
    let report = home.call(
        "fs.write",
        json!({"path": inbox.join("planted.md"), "mode": "overwrite", "content": "x"}),
    );
    assert_eq!(report["error"]["code"], "denied_by_policy", "{report}");
    assert!(!inbox.join("planted.md").exists());
}

/// A pid that no process has any more.
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

/// The forged "batch" of the issue: a decoy target inside the root whose temporary file exists,
/// and a second target outside every root, naming the victim by its hash.
fn forged_batch(home: &Home, victim: &Path) -> Value {
    let decoy_temp = ".flycode-tmp-1-0-decoy.txt";
    std::fs::write(home.root.join(decoy_temp), "decoy").unwrap();
    let outside_dir = victim.parent().unwrap().strip_prefix("/").unwrap();
    json!({
        "operation": "writeBatch",
        "phase": "replacing",
        "targets": [
            {"root": home.root, "dir": "", "name": "decoy.txt", "temp": decoy_temp,
             "backup": null, "sha256": sha256_hex(b"decoy"), "created": null},
            {"root": "/", "dir": outside_dir, "name": "victim", "temp": ".flycode-tmp-1-1-victim",
             "backup": null, "sha256": sha256_hex(&std::fs::read(victim).unwrap()), "created": null},
        ],
    })
}

#[test]
fn a_forged_journal_record_deletes_nothing_and_is_set_aside() {
    let home = Home::new();
    let victim = home.outside.join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let record = forged_batch(&home, &victim);
    let name = format!("{}-1-0.json", dead_pid());

    // The model cannot write it: the journal is flycode's own.
    let report = home.call(
        "fs.write",
        json!({"path": home.state.join("journal").join(&name), "mode": "overwrite", "content": record.to_string()}),
    );
    assert_refused_as_own(&report, "state directory");
    assert!(!home.state.join("journal").join(&name).exists());

    // Put there behind flycode's back (another program of the user's), it is never acted on.
    std::fs::create_dir_all(home.state.join("journal")).unwrap();
    std::fs::write(home.state.join("journal").join(&name), record.to_string()).unwrap();
    let output = home.exec(
        &json!({"id": "r", "tool": "fs.read", "args": {"path": home.root.join(".flycode-tmp-1-0-decoy.txt")}}),
        &[],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "precious\n",
        "{stderr}"
    );
    assert!(home.root.join(".flycode-tmp-1-0-decoy.txt").exists());
    assert!(
        stderr.contains("set aside the journal record") && stderr.contains("seal does not verify"),
        "{stderr}"
    );
    let kept = home.state.join("journal/rejected").join(&name);
    assert_eq!(
        std::fs::read_to_string(&kept).unwrap(),
        record.to_string(),
        "{stderr}"
    );
    assert!(!home.state.join("journal").join(&name).exists());
    // Reported once: the next start has nothing more to say about it.
    let output = home.exec(
        &json!({"id": "r", "tool": "fs.ls", "args": {"path": home.root}}),
        &[],
    );
    assert!(
        !String::from_utf8_lossy(&output.stderr).contains("journal record"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(victim.exists() && kept.exists());
}

#[test]
fn a_sealed_record_never_acts_outside_its_roots() {
    // Even a record sealed with flycode's key (a key that leaked) does nothing outside the roots
    // it records, nor outside this run's.
    let home = Home::new();
    let victim = home.outside.join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let mut record = forged_batch(&home, &victim);
    record["roots"] = json!([home.root]);
    let name = format!("{}-1-0.json", dead_pid());
    super::common::write_journal_record(&home.state, &name, &record);
    let output = home.exec(
        &json!({"id": "r", "tool": "fs.ls", "args": {"path": home.root}}),
        &[],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("set aside the journal record"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert!(home.state.join("journal/rejected").join(&name).exists());
}

#[test]
fn a_forged_session_does_not_let_a_stale_write_through() {
    let home = Home::new();
    let notes = home.root.join("notes.txt");
    std::fs::write(&notes, "as the model read it\n").unwrap();
    let session = ["--session", "s1"];
    let read = json!({"id": "r1", "tool": "fs.read", "args": {"path": notes}});
    assert!(home.exec(&read, &session).status.success());
    std::fs::write(&notes, "changed by the user\n").unwrap();
    // The session file now says the model saw the user's version.
    let file = home.state.join("sessions/s1.json");
    let forged =
        json!({"reads": {notes.display().to_string(): sha256_hex(b"changed by the user\n")}});
    std::fs::write(&file, forged.to_string()).unwrap();
    let write = json!({"id": "w1", "tool": "fs.write", "args": {"path": notes, "mode": "overwrite", "content": "the model's\n"}});
    let output = home.exec(&write, &session);
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(report["error"]["code"], "stale_file", "{report}\n{stderr}");
    assert!(stderr.contains("seal does not verify"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(&notes).unwrap(),
        "changed by the user\n"
    );
    // Read again, it may be written: the guard still works.
    assert!(home.exec(&read, &session).status.success());
    let output = home.exec(&write, &session);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "the model's\n");
}

#[test]
#[cfg(target_os = "linux")]
fn a_program_can_neither_read_nor_write_flycodes_own_files_inside_a_root() {
    let home = Home::new();
    // A first write makes the key and the journal's folder.
    let first = home.call(
        "fs.write",
        json!({"path": home.root.join("a.txt"), "mode": "overwrite", "content": "x"}),
    );
    assert_eq!(first["ok"], true, "{first}");
    std::fs::create_dir_all(home.state.join("journal")).unwrap();
    std::fs::create_dir_all(home.root.join("src")).unwrap();
    let key = std::fs::read(home.state.join("seal.key")).unwrap();
    let script = format!(
        "od -An -tx1 {state}/seal.key; cat {state}/audit.jsonl; echo forged > {state}/journal/1-1-1.json; rm -f {state}/seal.key; echo made > {root}/src/work.txt; cat {root}/src/work.txt; rm {root}/a.txt",
        state = home.state.display(),
        root = home.root.display()
    );
    let report = home.call("shell.exec", json!({"command": script}));
    let text = report.to_string();
    if text.contains("Landlock") && report["ok"] == false {
        eprintln!("skipped: this kernel cannot contain programs ({text})");
        return;
    }
    // The rest of the root is the program's to write (all but creating or removing entries in
    // the folders on the way to the state directory: here the root itself).
    assert!(text.contains("made"), "{report}");
    assert!(home.root.join("a.txt").exists(), "{report}");
    assert!(
        !text.contains("\"outcome\""),
        "the audit log was read: {report}"
    );
    assert!(!text.contains(&hex::encode(&key)[..8]), "{report}");
    assert_eq!(
        std::fs::read(home.state.join("seal.key")).unwrap(),
        key,
        "{report}"
    );
    assert!(!home.state.join("journal/1-1-1.json").exists(), "{report}");
    assert_eq!(text.matches("Permission denied").count(), 5, "{report}");
}

#[test]
fn a_folder_of_the_models_cannot_become_the_state_directory() {
    // The state directory is not made yet: the model prepares a key and a record of its own and
    // moves them to where flycode would make it.
    let home = Home::with_state(".local/state/flycode");
    let planted = home.root.join("x/flycode");
    std::fs::create_dir_all(planted.join("journal")).unwrap();
    std::fs::write(planted.join("seal.key"), [7u8; 32]).unwrap();
    for target in [".local", ".local/state", ".local/state/flycode"] {
        std::fs::create_dir_all(home.root.join(target).parent().unwrap()).unwrap();
        let from = if target.ends_with("flycode") {
            planted.clone()
        } else {
            home.root.join("x")
        };
        let report = home.call(
            "fs.mv",
            json!({"fromPath": from, "toPath": home.root.join(target)}),
        );
        assert_eq!(
            report["error"]["code"], "denied_by_policy",
            "{target}: {report}"
        );
        assert!(report.to_string().contains("flycode's own"), "{report}");
    }
    assert!(planted.join("seal.key").exists());
    // flycode made its own key (the audit log's lines are sealed), not the planted one.
    assert_ne!(
        std::fs::read(home.state.join("seal.key")).unwrap(),
        [7u8; 32]
    );
}

#[test]
#[cfg(target_os = "linux")]
fn a_program_cannot_make_the_state_directory_before_flycode_does() {
    let home = Home::with_state(".local/state/flycode");
    std::fs::create_dir_all(home.root.join(".local/state")).unwrap();
    let script = format!(
        "mkdir -p {state}/journal; head -c 32 /dev/zero > {state}/seal.key",
        state = home.state.display()
    );
    let report = home.call("shell.exec", json!({"command": script}));
    let text = report.to_string();
    if text.contains("Landlock") && report["ok"] == false && !text.contains("Permission denied") {
        eprintln!("skipped: this kernel cannot contain programs ({text})");
        return;
    }
    assert!(text.contains("Permission denied"), "{report}");
    // Whatever exists now is flycode's own key, if any: never the program's.
    if let Ok(key) = std::fs::read(home.state.join("seal.key")) {
        assert_ne!(key, [0u8; 32], "{report}");
    }
    assert!(!home.state.join("journal").exists(), "{report}");
}

/// A FIFO planted where a journal record would be (a root inside the state directory makes that
/// possible) never holds up a start: it is not opened for blocking reads, nor acted on.
#[test]
fn a_fifo_among_the_journal_records_does_not_hold_up_a_start() {
    let home = Home::new();
    let journal = home.state.join("journal");
    std::fs::create_dir_all(&journal).unwrap();
    // A pid above any pid_max: its writer is gone, so the record is recovered at start.
    let fifo = journal.join("4999999-1-1.json");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let output = super::common::flycode()
        .args(["exec", "--json", "--root"])
        .arg(&home.root)
        .args(["--slash", &format!("/fs.ls {}", home.root.display())])
        .env("FLYCODE_STATE_DIR", &home.state)
        .env("XDG_CONFIG_HOME", &home.config)
        .current_dir(&home.root)
        .timeout(std::time::Duration::from_secs(30))
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["ok"], true, "{report}");
    assert!(
        fifo.exists(),
        "a file flycode did not write is never removed"
    );
}

/// `flycode run --transcript` inside the allowed root: the program the model starts can neither
/// read what the run records (other calls' content) nor change or remove it.
#[test]
#[cfg(target_os = "linux")]
fn a_program_can_neither_read_nor_change_a_transcript_written_into_the_root() {
    use super::api_server::{Reply, ScriptedServer};
    let (_temp, base, root) = super::common::temp_base_with_root("app");
    std::fs::create_dir_all(root.join("logs")).unwrap();
    std::fs::create_dir_all(root.join("out")).unwrap();
    let transcript = root.join("logs/run.jsonl");
    let script = format!(
        "cat {t} > {root}/out/leak.txt; echo forged >> {t}; rm -f {t}; echo done",
        t = transcript.display(),
        root = root.display()
    );
    let steps = [json!({"id": "c1", "tool": "shell.exec", "args": {"command": script}})];
    let server = ScriptedServer::start(move |_, index| match steps.get(index) {
        Some(call) => Reply::sse_text(&format!("```flycode-call\n{call}\n```"), 50),
        None => Reply::sse_text("All done.", 50),
    });
    let output = super::common::clean_run_command(&base, &root)
        .args(["run", "--base-url"])
        .arg(server.base_url())
        .args(["--model", "scripted-model", "--yes", "--root"])
        .arg(&root)
        .arg("--transcript")
        .arg(&transcript)
        .arg("Remember the word tangerine.")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let requests = server.requests();
    let result = requests
        .get(1)
        .map(|request| request.body.to_string())
        .unwrap_or_default();
    if result.contains("Landlock") && !result.contains("done") {
        eprintln!("skipped: this kernel cannot contain programs ({result})");
        return;
    }
    assert!(
        result.contains("done"),
        "the program did not run: {result} {stderr}"
    );
    let leaked = std::fs::read_to_string(root.join("out/leak.txt")).unwrap_or_default();
    assert!(
        !leaked.contains("tangerine"),
        "the program read the transcript: {leaked}"
    );
    let recorded = std::fs::read_to_string(&transcript).unwrap();
    assert!(recorded.contains("tangerine"), "{recorded}");
    assert!(!recorded.contains("forged\n"), "{recorded}");
    assert!(result.matches("Permission denied").count() >= 3, "{result}");
}
