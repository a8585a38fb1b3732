//! Output budgets of `process.run` and `shell.exec` (PROTOCOL.md §9 (Tools: process.run and shell.exec)), through the real binary and
//! real programs: each stream keeps its head and its tail, stderr is never crowded out by
//! stdout, and every truncation note gives the true total the program wrote.

use serde_json::{Value, json};

use super::common::Workspace;

/// The default output cap (64 KiB): the budget of a whole result body.
const CAP: usize = 64 * 1024;

/// What one run printed: the exit code of flycode, and the `--json` report.
struct Run {
    code: i32,
    report: Value,
}

impl Run {
    /// The rendered result block.
    fn block(&self) -> &str {
        self.report["text"].as_str().unwrap()
    }

    /// The block's body: everything after the `[data]` line, without the newline that the
    /// block adds before its closing fence.
    fn body(&self) -> &str {
        let block = self.block();
        let start = block.find("\n[data]\n").unwrap() + "\n[data]\n".len();
        let end = block.trim_end().rfind('\n').unwrap();
        &block[start..end]
    }

    /// The value of header `key`, if any.
    fn header(&self, key: &str) -> Option<&str> {
        let prefix = format!("[{key}] ");
        self.block()
            .lines()
            .take_while(|line| *line != "[data]")
            .find_map(|line| line.strip_prefix(prefix.as_str()))
    }
}

impl Workspace {
    /// Runs `script` through shell.exec with approval given, as `flycode exec --json` does.
    fn shell(&self, script: &str) -> Run {
        self.call(json!({"id": "p1", "tool": "shell.exec", "args": {"command": script}}))
    }

    fn call(&self, call: Value) -> Run {
        let output = self.exec_output(&call, &["--approve", "auto"]);
        let report = serde_json::from_slice(&output.stdout).unwrap_or_else(|_| {
            panic!(
                "not JSON: {}\n{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            )
        });
        Run {
            code: output.status.code().unwrap(),
            report,
        }
    }

    fn script(&self, name: &str, text: &str) -> String {
        let path = self.root.join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    }
}

/// The section of `body` between `label` and the next label (or the end).
fn section<'a>(body: &'a str, label: &str) -> &'a str {
    let start = body
        .find(label)
        .unwrap_or_else(|| panic!("no {label}:\n{body}"))
        + label.len();
    let rest = &body[start..];
    let end = rest.find("\n--- std").map_or(rest.len(), |at| at + 1);
    &rest[..end]
}

/// The `N` of the one `[… N bytes omitted …]` line in `text`.
fn omitted(text: &str) -> u64 {
    let lines: Vec<&str> = text
        .lines()
        .filter(|line| line.starts_with("[… ") && line.ends_with(" bytes omitted …]"))
        .collect();
    assert_eq!(lines.len(), 1, "{text}");
    lines[0]
        .trim_start_matches("[… ")
        .trim_end_matches(" bytes omitted …]")
        .parse()
        .unwrap()
}

#[test]
fn stderr_survives_a_stdout_past_the_cap() {
    let w = Workspace::new();
    let run = w.shell("head -c 100000 /dev/zero | tr '\\0' x; echo STDERR-MARKER-42 >&2; exit 1");
    assert_eq!(run.code, 1);
    assert_eq!(run.header("code"), Some("nonzero_exit"));
    assert_eq!(run.header("exitCode"), Some("1"));
    assert_eq!(run.header("truncated"), Some("true"));
    let stderr = section(run.body(), "--- stderr ---\n");
    assert_eq!(stderr, "STDERR-MARKER-42\n");
    assert!(run.body().len() <= CAP, "{}", run.body().len());
    // The process layout fitted the budget: the executor's generic cut did not apply.
    assert!(!run.block().contains("output truncated"), "{}", run.block());
    assert!(run.body().contains("of 100000 bytes"));
}

#[test]
fn truncation_note_gives_the_true_total() {
    let w = Workspace::new();
    let run = w.shell("head -c 300000 /dev/zero | tr '\\0' y");
    assert_eq!(run.code, 0);
    assert_eq!(run.header("truncated"), Some("true"));
    let stdout = section(run.body(), "--- stdout ---\n");
    assert!(
        stdout.contains("showed ") && stdout.contains(" of 300000 bytes"),
        "{stdout}"
    );
    assert!(!run.body().contains("65630"));
    // Shown plus omitted is the whole stream.
    let shown: u64 = stdout
        .lines()
        .filter(|line| line.bytes().all(|byte| byte == b'y'))
        .map(|line| line.len() as u64)
        .sum();
    assert_eq!(shown + omitted(stdout), 300_000);
    assert_eq!(run.report["result"]["stdoutBytes"], 300_000);
    assert_eq!(run.report["result"]["stdoutTruncated"], true);
}

#[test]
fn first_and_last_lines_of_a_large_stdout_are_both_shown() {
    let w = Workspace::new();
    // 1 MB and more of numbered lines: `line 000001` ... `line 083334`.
    let run = w.shell("seq -f 'line %06g' 1 83334");
    let total: u64 = 83_334 * 12;
    assert!(total >= 1_000_000);
    assert_eq!(run.code, 0);
    assert_eq!(run.header("exitCode"), Some("0"));
    let stdout = section(run.body(), "--- stdout ---\n");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "line 000001");
    let marker = lines
        .iter()
        .position(|line| line.starts_with("[… "))
        .unwrap();
    let last = lines
        .iter()
        .position(|line| *line == "line 083334")
        .unwrap();
    assert!(
        marker > 0 && marker < last,
        "head, marker, tail in that order"
    );
    // Cut on line boundaries: every shown line is whole.
    for line in &lines[..marker] {
        assert!(line.len() == 11 && line.starts_with("line "), "{line:?}");
    }
    for line in &lines[marker + 1..=last] {
        assert!(line.len() == 11 && line.starts_with("line "), "{line:?}");
    }
    // `marker` lines before the marker, `last - marker` after it, 12 bytes each.
    let shown = last as u64 * 12;
    assert_eq!(shown + omitted(stdout), total);
    assert!(stdout.contains(&format!("of {total} bytes")), "{stdout}");
    // The unused stderr half went to stdout: it shows more than half of the cap.
    assert!(shown as usize > CAP / 2, "{shown}");
    assert!(run.body().len() <= CAP);
}

#[test]
fn stderr_keeps_its_head_and_tail_too() {
    let w = Workspace::new();
    let script = "seq -f 'out %06g' 1 50000; seq -f 'err %06g' 1 50000 >&2; exit 2";
    let run = w.shell(script);
    assert_eq!(run.code, 1);
    assert_eq!(run.header("exitCode"), Some("2"));
    let body = run.body();
    assert!(body.len() <= CAP, "{}", body.len());
    assert!(!run.block().contains("output truncated"));
    for (label, name) in [("--- stdout ---\n", "out"), ("--- stderr ---\n", "err")] {
        let text = section(body, label);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], format!("{name} 000001"));
        assert!(lines.contains(&format!("{name} 050000").as_str()), "{text}");
        let total = 50_000 * 11;
        assert!(text.contains(&format!("of {total} bytes")), "{text}");
        assert!(omitted(text) > 0);
        // Each stream had half of the budget, give or take the labels and notes.
        assert!(text.len() < CAP / 2 + 200, "{}", text.len());
        assert!(text.len() > CAP / 2 - 600, "{}", text.len());
    }
}

#[test]
fn fifty_megabytes_of_stdout_complete_with_bounded_output() {
    let w = Workspace::new();
    let run = w.shell("head -c 52428800 /dev/zero | tr '\\0' z; echo done >&2");
    assert_eq!(run.code, 0);
    assert_eq!(run.header("exitCode"), Some("0"));
    assert!(run.body().len() <= CAP);
    assert!(run.body().contains("of 52428800 bytes"), "{}", run.body());
    assert_eq!(section(run.body(), "--- stderr ---\n"), "done\n");
    assert_eq!(run.report["result"]["stdoutBytes"], 52_428_800);
}

#[test]
fn small_output_is_shown_whole_without_notes() {
    let w = Workspace::new();
    let run = w.call(json!({"id": "p2", "tool": "process.run", "args": {"command": "printf", "args": ["a\\nb\\n"]}}));
    assert_eq!(run.code, 0);
    assert_eq!(run.body(), "--- stdout ---\na\nb\n--- stderr ---\n");
    assert_eq!(run.header("truncated"), None);
}

#[test]
fn utf8_output_is_cut_between_characters() {
    let w = Workspace::new();
    // One long line of multi-byte characters: no line boundary to cut at.
    let script = w.script(
        "wide.py",
        "import sys\nsys.stdout.write('é€😀' * 40000)\nsys.stderr.write('ü' * 70000)\n",
    );
    let run = w.call(json!({"id": "p3", "tool": "process.run", "args": {"command": "python3", "args": [script]}}));
    assert_eq!(run.code, 0);
    let body = run.body();
    assert!(!body.contains('\u{FFFD}'), "a character was split");
    assert!(body.len() <= CAP);
    let stdout = section(body, "--- stdout ---\n");
    assert!(
        stdout.contains(&format!("of {} bytes", 40_000 * 9)),
        "{stdout}"
    );
    let stderr = section(body, "--- stderr ---\n");
    assert!(
        stderr.contains(&format!("of {} bytes", 70_000 * 2)),
        "{stderr}"
    );
}

#[test]
fn timeout_keeps_head_tail_and_totals() {
    let w = Workspace::new();
    let run = w.call(json!({"id": "p4", "tool": "shell.exec", "args": {
        "command": "head -c 200000 /dev/zero | tr '\\0' t; echo; echo LAST; sleep 30",
        "timeoutMs": 2000
    }}));
    assert_eq!(run.code, 1);
    assert_eq!(run.header("code"), Some("timeout"));
    let stdout = section(run.body(), "--- stdout ---\n");
    assert!(stdout.contains("\nLAST\n"), "{stdout}");
    assert!(stdout.contains("of 200006 bytes"), "{stdout}");
}
