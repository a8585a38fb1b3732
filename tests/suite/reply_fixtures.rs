//! `fixtures/replies/{call,none,invalid}/NAME.md`, each with `NAME.expect` beside it, are the
//! specification of reply classification: the folder is the expected verdict, and the expect file
//! lists `code:`, `warnings:`, `lenient:`, `tools:`, `tool:` and `id:` as needed.

use std::collections::BTreeMap;
use std::path::Path;

use flycode::protocol::verdict::violation_result;
use flycode::protocol::{
    ClassifyOptions, ErrorCode, ResultBlock, ToolSet, Verdict, classify_reply,
};

use super::common::{files_in, repo_root};

struct Expectation {
    code: Option<String>,
    warnings: Vec<String>,
    lenient: bool,
    /// The tool set the reply is judged with (`tools: extended`; the seed set otherwise).
    tools: ToolSet,
    tool: Option<String>,
    id: Option<String>,
}

fn read_expectation(path: &Path) -> Expectation {
    let text = std::fs::read_to_string(path.with_extension("expect"))
        .unwrap_or_else(|_| panic!("{} has no .expect file", path.display()));
    let mut fields = BTreeMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (key, value) = line
            .split_once(": ")
            .unwrap_or_else(|| panic!("bad line {line:?}"));
        fields.insert(key.to_owned(), value.to_owned());
    }
    Expectation {
        code: fields.remove("code"),
        warnings: fields
            .remove("warnings")
            .map(|w| w.split(", ").map(str::to_owned).collect())
            .unwrap_or_default(),
        lenient: fields.remove("lenient").is_some_and(|v| v == "true"),
        tools: fields
            .remove("tools")
            .map(|set| ToolSet::from_name(&set).unwrap_or_else(|| panic!("bad tools: {set}")))
            .unwrap_or_default(),
        tool: fields.remove("tool"),
        id: fields.remove("id"),
    }
}

/// Checks one fixture; returns a description of every mismatch.
fn check_fixture(verdict_dir: &str, path: &Path) -> Vec<String> {
    let reply = std::fs::read_to_string(path).unwrap();
    let expected = read_expectation(path);
    let classification = classify_reply(
        &reply,
        ClassifyOptions {
            lenient: expected.lenient,
            tools: expected.tools,
        },
    );
    let mut problems = Vec::new();
    let name = path.file_name().unwrap().to_string_lossy();
    if classification.verdict.name() != verdict_dir {
        problems.push(format!(
            "{name}: verdict {} ({:?})",
            classification.verdict.name(),
            classification.verdict
        ));
    }
    let warnings: Vec<&str> = classification
        .warnings
        .iter()
        .map(|w| w.code.as_str())
        .collect();
    if warnings != expected.warnings {
        problems.push(format!(
            "{name}: warnings {warnings:?}, expected {:?}",
            expected.warnings
        ));
    }
    match &classification.verdict {
        Verdict::Invalid { error, attempt } => {
            if Some(error.code().as_str()) != expected.code.as_deref() {
                problems.push(format!(
                    "{name}: code {}, expected {:?}",
                    error.code(),
                    expected.code
                ));
            }
            // The answer to a violation is itself a well-formed failed result.
            let rendered = violation_result(error, attempt).render();
            let parsed = ResultBlock::parse_rendered(&rendered).unwrap();
            if parsed.ok
                || parsed.code.as_deref() != Some(error.code().as_str())
                || parsed.hint.is_none()
            {
                problems.push(format!("{name}: bad violation result {rendered}"));
            }
        }
        Verdict::Call(call) => {
            if let Some(tool) = &expected.tool
                && call.tool.as_str() != tool
            {
                problems.push(format!("{name}: tool {}, expected {tool}", call.tool));
            }
            if let Some(id) = &expected.id
                && call.id.as_deref() != Some(id.as_str())
            {
                problems.push(format!("{name}: id {:?}, expected {id}", call.id));
            }
        }
        Verdict::None => {}
    }
    problems
}

#[test]
fn every_reply_fixture_gets_its_expected_verdict() {
    let mut problems = Vec::new();
    let mut count = 0;
    for verdict in ["call", "none", "invalid"] {
        for path in files_in(&repo_root().join("fixtures/replies").join(verdict), "md") {
            count += 1;
            problems.extend(check_fixture(verdict, &path));
        }
    }
    assert!(count >= 80, "only {count} reply fixtures");
    assert!(
        problems.is_empty(),
        "{} fixture(s) disagree:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn fixtures_cover_every_reply_code_and_warning_at_least_twice() {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for verdict in ["call", "none", "invalid"] {
        for path in files_in(&repo_root().join("fixtures/replies").join(verdict), "md") {
            let expected = read_expectation(&path);
            for code in expected.code.into_iter().chain(expected.warnings) {
                *seen.entry(code).or_default() += 1;
            }
        }
    }
    let reply_codes = ErrorCode::ALL
        .iter()
        .take_while(|c| **c != ErrorCode::OutsideRoots);
    for code in reply_codes
        .map(|c| c.as_str())
        .chain(["normalized_whitespace", "unset_argument"])
    {
        let count = seen.get(code).copied().unwrap_or(0);
        assert!(count >= 2, "{code} is covered by {count} fixture(s)");
    }
}
