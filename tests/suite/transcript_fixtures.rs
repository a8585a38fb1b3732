//! `fixtures/transcripts/NAME.{json,jsonl}` with `NAME.expected` beside each: the specification of
//! `flycode validate`. An expected file lists one finding per line as `severity code index`
//! (`-` for a finding about the whole file), after an optional `# args: --strict` line.

use std::path::{Path, PathBuf};

use flycode::validate::{ValidateOptions, validate_files};
use serde_json::Value;

use super::common::{flycode, repo_root};

struct Expected {
    args: Vec<String>,
    findings: Vec<String>,
}

fn fixtures() -> Vec<PathBuf> {
    let dir = repo_root().join("fixtures/transcripts");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json" || e == "jsonl"))
        .collect();
    files.sort();
    files
}

fn expected(path: &Path) -> Expected {
    let text = std::fs::read_to_string(path.with_extension("expected")).unwrap();
    let mut args = Vec::new();
    let mut findings = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        match line.strip_prefix("# args: ") {
            Some(rest) => args.extend(rest.split_whitespace().map(str::to_owned)),
            None => findings.push(line.to_owned()),
        }
    }
    Expected { args, findings }
}

fn options(args: &[String]) -> ValidateOptions {
    ValidateOptions {
        lenient: args.iter().any(|a| a == "--lenient"),
        strict: args.iter().any(|a| a == "--strict"),
        tools: if args.iter().any(|a| a == "--tools=extended") {
            flycode::protocol::ToolSet::Extended
        } else {
            flycode::protocol::ToolSet::Seed
        },
        dialect: None,
    }
}

#[test]
fn every_transcript_fixture_yields_its_expected_findings() {
    let files = fixtures();
    assert!(
        files.len() >= 25,
        "only {} transcript fixtures",
        files.len()
    );
    let mut problems = Vec::new();
    for path in &files {
        let expected = expected(path);
        let report =
            validate_files(std::slice::from_ref(path), options(&expected.args), 1).unwrap();
        let got: Vec<String> = report
            .findings()
            .map(|f| {
                let index = f.index.map_or("-".to_owned(), |i| i.to_string());
                format!("{} {} {index}", f.severity.as_str(), f.code.as_str())
            })
            .collect();
        if got != expected.findings {
            problems.push(format!(
                "{}: got {got:?}, expected {:?}",
                path.display(),
                expected.findings
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn fixtures_cover_every_finding_code_form_and_carrier() {
    let all: String = fixtures()
        .iter()
        .map(|p| std::fs::read_to_string(p.with_extension("expected")).unwrap())
        .collect();
    for code in [
        "duplicate_id",
        "missing_result",
        "result_id_mismatch",
        "malformed_result",
        "repeated_failed_call",
        "call_after_invalid_result",
        "unreadable_transcript",
        "text_outside_block",
        "normalized_whitespace",
        "mixed_dialects",
    ] {
        assert!(all.contains(code), "no fixture for {code}");
    }
    assert!(all.contains("--lenient") && all.contains("--strict"));
    let names: Vec<String> = fixtures().iter().map(|p| p.display().to_string()).collect();
    assert!(names.iter().any(|n| n.ends_with(".jsonl")));
    assert!(names.iter().any(|n| n.contains("array_form")));
    assert!(names.iter().any(|n| n.contains("messages_object_form")));
    assert!(names.iter().any(|n| n.contains("native")));
}

#[test]
fn the_binary_agrees_with_the_fixtures_and_sets_the_exit_code() {
    for path in fixtures() {
        let expected = expected(&path);
        let output = flycode()
            .arg("validate")
            .arg("--format")
            .arg("json")
            .args(&expected.args)
            .arg(&path)
            .output()
            .unwrap();
        let report: Value = serde_json::from_slice(&output.stdout).unwrap();
        let codes: Vec<&str> = report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["code"].as_str().unwrap())
            .collect();
        let expected_codes: Vec<&str> = expected
            .findings
            .iter()
            .map(|f| f.split(' ').nth(1).unwrap())
            .collect();
        assert_eq!(codes, expected_codes, "{}", path.display());
        let has_error = expected.findings.iter().any(|f| f.starts_with("error"));
        assert_eq!(
            output.status.code(),
            Some(i32::from(has_error)),
            "{}",
            path.display()
        );
        for finding in report["findings"].as_array().unwrap() {
            assert!(finding["line"].as_u64().unwrap() >= 1, "{}", path.display());
            assert_eq!(finding["file"].as_str(), Some(path.to_str().unwrap()));
        }
    }
}

#[test]
fn human_output_for_all_fixtures() {
    let mut out = String::new();
    for path in fixtures() {
        let expected = expected(&path);
        let report =
            validate_files(std::slice::from_ref(&path), options(&expected.args), 1).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text =
            flycode::validate::format::render(&report, flycode::validate::format::Format::Human);
        out.push_str(&format!("## {name} {}\n", expected.args.join(" ")));
        out.push_str(&text.replace(path.to_str().unwrap(), &name));
        out.push('\n');
    }
    insta::assert_snapshot!(out);
}

#[test]
fn parallel_checking_reports_in_input_order() {
    let files = fixtures();
    let one = validate_files(&files, ValidateOptions::default(), 1).unwrap();
    let many = validate_files(&files, ValidateOptions::default(), 8).unwrap();
    assert_eq!(one, many);
    let order: Vec<&str> = many.files.iter().map(|f| f.file.as_str()).collect();
    let given: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
    assert_eq!(order, given.iter().map(String::as_str).collect::<Vec<_>>());
}
