//! `flycode validate` output formats and command line: SARIF valid against the official schema,
//! GitHub annotations, JSON shape, directories, globs, exit codes, large files.

use std::io::Write;

use predicates::prelude::*;
use serde_json::Value;

use super::common::{flycode, repo_root};

fn fixture(name: &str) -> String {
    repo_root()
        .join("fixtures/transcripts")
        .join(name)
        .display()
        .to_string()
}

fn run(args: &[&str]) -> (i32, String) {
    let output = flycode().arg("validate").args(args).output().unwrap();
    (
        output.status.code().unwrap(),
        String::from_utf8(output.stdout).unwrap(),
    )
}

#[test]
fn sarif_output_is_valid_against_the_sarif_2_1_0_schema() {
    let text =
        std::fs::read_to_string(repo_root().join("tests/sarif/sarif-2.1.0-rtm.5.json")).unwrap();
    // The schema's run.language pattern ends in a lone `]`, a literal in ECMAScript regexes but an
    // error in Rust's: escape it, which keeps its meaning.
    let text = text.replace(r#"[a-zA-Z]{2}]?$"#, r#"[a-zA-Z]{2}\\]?$"#);
    let schema: Value = serde_json::from_str(&text).unwrap();
    let validator = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft4)
        .build(&schema)
        .unwrap();
    let dir = repo_root()
        .join("fixtures/transcripts")
        .display()
        .to_string();
    let (code, text) = run(&["--format", "sarif", &dir]);
    assert_eq!(code, 1);
    let sarif: Value = serde_json::from_str(&text).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&sarif)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    assert!(results.len() >= 25);
    let rules = sarif["runs"][0]["tool"]["driver"]["rules"]
        .as_array()
        .unwrap();
    for result in results {
        let index = result["ruleIndex"].as_u64().unwrap() as usize;
        assert_eq!(rules[index]["id"], result["ruleId"]);
        assert!(rules[index]["help"]["text"].as_str().unwrap().len() > 20);
    }
}

#[test]
fn github_output_is_one_annotation_per_finding() {
    let (code, text) = run(&[
        "--format",
        "github",
        &fixture("duplicate_id.jsonl"),
        &fixture("repeated_failed_call.jsonl"),
    ]);
    assert_eq!(code, 1);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("::error file="), "{text}");
    assert!(
        lines[0].contains(",line=4,title=duplicate_id::call id \"call-001\""),
        "{text}"
    );
    assert!(lines[1].starts_with("::warning file="), "{text}");
    assert!(lines[1].contains("title=repeated_failed_call::"), "{text}");
    assert_eq!(
        lines[2],
        "flycode validate: 2 transcripts, 11 messages, 1 error, 1 warning"
    );
}

#[test]
fn json_output_has_findings_and_summary() {
    let (code, text) = run(&[
        "--format",
        "json",
        &fixture("missing_result_before_next_reply.jsonl"),
    ]);
    assert_eq!(code, 1);
    let report: Value = serde_json::from_str(&text).unwrap();
    let finding = &report["findings"][0];
    for key in ["code", "severity", "file", "index", "line", "message"] {
        assert!(finding.get(key).is_some(), "no {key} in {finding}");
    }
    assert_eq!(finding["code"], "missing_result");
    assert_eq!(finding["index"], 1);
    assert_eq!(finding["line"], 2);
    assert_eq!(
        report["summary"],
        serde_json::json!({"transcripts": 1, "messages": 3, "errors": 1, "warnings": 0})
    );
}

#[test]
fn warnings_alone_pass_unless_strict() {
    let file = fixture("repeated_failed_call.jsonl");
    assert_eq!(run(&[&file]).0, 0);
    assert_eq!(run(&["--strict", &file]).0, 1);
}

#[test]
fn directories_and_quoted_globs_expand_in_order() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    for (name, source) in [
        ("b.jsonl", "clean_text_mode.jsonl"),
        ("sub/a.json", "clean_array_form.json"),
        ("notes.txt", "clean_text_mode.jsonl"),
    ] {
        std::fs::copy(fixture(source), dir.path().join(name)).unwrap();
    }
    let root = dir.path().display().to_string();
    let (code, text) = run(&[&root]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.ends_with("2 transcripts, 10 messages, 0 errors, 0 warnings\n"),
        "{text}"
    );
    let (code, text) = run(&[&format!("{root}/**/*.json")]);
    assert_eq!(code, 0);
    assert!(text.starts_with("1 transcript, 5 messages"), "{text}");
}

#[test]
fn missing_inputs_are_usage_errors() {
    flycode()
        .args(["validate", "/no/such/transcript.jsonl"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "/no/such/transcript.jsonl: no such file or directory",
        ));
    flycode().arg("validate").assert().code(2);
    flycode()
        .args(["validate", "--format", "xml", "x"])
        .assert()
        .code(2);
}

#[test]
fn standard_input_is_read_for_dash() {
    let transcript = std::fs::read(fixture("duplicate_id.jsonl")).unwrap();
    flycode()
        .args(["validate", "-"])
        .write_stdin(transcript)
        .assert()
        .code(1)
        .stdout(predicate::str::contains("-:4: error[duplicate_id]"));
}

#[test]
fn a_fifty_megabyte_line_is_unreadable_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.jsonl");
    let mut file = std::fs::File::create(&path).unwrap();
    writeln!(file, "{{\"role\":\"user\",\"content\":\"ok\"}}").unwrap();
    write!(
        file,
        "{{\"role\":\"user\",\"content\":\"{}",
        "x".repeat(50 * 1024 * 1024)
    )
    .unwrap();
    drop(file);
    let (code, text) = run(&[path.to_str().unwrap()]);
    assert_eq!(code, 1);
    let head = &text[..text.len().min(300)];
    assert!(
        text.contains(":2:52428826: error[unreadable_transcript] line 2 is not valid JSON"),
        "{head}"
    );
    assert!(text.contains("the file looks truncated"), "{head}");
}

/// A realistic JSON Lines transcript of about `megabytes` MB: calls, results with file contents,
/// prose.
pub(super) fn write_large_transcript(path: &std::path::Path, megabytes: usize) -> usize {
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let body = "    let value = compute(input, &options)?; // a line of source code\n".repeat(60);
    let mut written = 0;
    let mut messages = 0;
    let mut turn = 0;
    while written < megabytes * 1024 * 1024 {
        turn += 1;
        let call = format!(
            "```flycode-call\n{{\"id\":\"call-{turn}\",\"tool\":\"fs.read\",\"args\":{{\"path\":\"/root/work/app/src/f{turn}.rs\"}}}}\n```"
        );
        let result = format!(
            "```flycode-result\n[id] call-{turn}\n[command] /fs.read /root/work/app/src/f{turn}.rs\n[ok] true\n[data]\n{body}\n```"
        );
        for (role, content) in [
            ("assistant", call),
            ("user", result),
            (
                "assistant",
                "The function computes a value and propagates errors.".to_owned(),
            ),
        ] {
            let line = serde_json::json!({"role": role, "content": content}).to_string();
            written += line.len() + 1;
            messages += 1;
            writeln!(file, "{line}").unwrap();
        }
    }
    file.flush().unwrap();
    messages
}

#[test]
fn a_hundred_megabyte_transcript_streams_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.jsonl");
    let messages = write_large_transcript(&path, 100);
    // Peak RSS of the child, read by the kernel's rusage accounting (not a timing).
    let script = "import resource,subprocess,sys\nr=subprocess.run(sys.argv[1:],stdout=subprocess.PIPE)\nprint(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\nsys.stdout.write(r.stdout.decode()[-200:])";
    let output = std::process::Command::new("python3")
        .args(["-c", script, env!("CARGO_BIN_EXE_flycode"), "validate"])
        .arg(&path)
        .output()
        .unwrap();
    let text = String::from_utf8(output.stdout).unwrap();
    let mut words = text.split_whitespace();
    let code: i32 = words.next().unwrap().parse().unwrap();
    let peak_kib: u64 = words.next().unwrap().parse().unwrap();
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains(&format!(
            "1 transcript, {messages} messages, 0 errors, 0 warnings"
        )),
        "{text}"
    );
    assert!(
        peak_kib < 64 * 1024,
        "peak RSS {peak_kib} KiB for a 100 MB transcript"
    );
}
