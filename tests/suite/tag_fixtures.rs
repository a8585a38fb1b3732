//! Golden scenarios of seed 000's tag dialect (`fixtures/tags/NNN_name/`, PROTOCOL.md §15):
//! each reply's verdict through the real `flycode check --dialect tags --json`, then its results
//! through `flycode exec --dialect tags` against a fresh root, snapshotted, and the root's tree
//! afterwards compared file by file where `expected/` says what it must be.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::common::{flycode, repo_root};

/// Every file below `dir` but `.keep` placeholders, relative, with its bytes.
fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(current) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&current) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|n| n != ".keep") {
                let bytes = std::fs::read(&path).unwrap();
                files.insert(path.strip_prefix(dir).unwrap().to_owned(), bytes);
            }
        }
    }
    files
}

fn expectation(scenario: &Path) -> BTreeMap<String, String> {
    std::fs::read_to_string(scenario.join("expect"))
        .unwrap()
        .lines()
        .filter_map(|line| line.split_once(": "))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// Checks the verdict `check --json` gives; returns the problems.
fn check_verdict(name: &str, reply: &str, expected: &BTreeMap<String, String>) -> Vec<String> {
    let output = flycode()
        .args(["check", "--dialect", "tags", "--json"])
        .env(
            "FLYCODE_STATE_DIR",
            std::env::temp_dir().join("flycode-tag-fixtures-state"),
        )
        .env_remove("XDG_CONFIG_HOME")
        .write_stdin(reply.to_owned())
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|_| panic!("{name}: {}", String::from_utf8_lossy(&output.stderr)));
    let mut problems = Vec::new();
    if report["verdict"] != expected["verdict"].as_str() {
        problems.push(format!("{name}: verdict {}", report["verdict"]));
    }
    if let Some(code) = expected.get("code")
        && report["error"]["code"] != code.as_str()
    {
        problems.push(format!("{name}: code {}", report["error"]["code"]));
    }
    if let Some(code) = expected.get("calls") {
        let codes: Vec<&str> = report["calls"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|call| call["error"]["code"].as_str())
            .collect();
        if codes != code.split(", ").collect::<Vec<_>>() {
            problems.push(format!("{name}: call codes {codes:?}"));
        }
    }
    problems
}

#[test]
fn tag_scenarios() {
    let dir = repo_root().join("fixtures/tags");
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    names.sort();
    assert!(names.len() >= 20, "only {} scenarios", names.len());
    let duration = regex::Regex::new(r"duration_ms=\d+").unwrap();
    let mut report = String::new();
    let mut problems = Vec::new();
    for scenario in names {
        let name = scenario.file_name().unwrap().to_string_lossy().into_owned();
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap().join("root");
        std::fs::create_dir_all(&root).unwrap();
        for (relative, bytes) in tree(&scenario.join("input")) {
            let target = root.join(relative);
            std::fs::create_dir_all(target.parent().unwrap()).unwrap();
            std::fs::write(target, bytes).unwrap();
        }
        let reply = std::fs::read_to_string(scenario.join("reply.md"))
            .unwrap()
            .replace("{ROOT}", root.to_str().unwrap());
        let expected = expectation(&scenario);
        problems.extend(check_verdict(&name, &reply, &expected));
        let flags = std::fs::read_to_string(scenario.join("flags")).unwrap_or_default();
        let output = flycode()
            .args(["exec", "--dialect", "tags", "--yes", "--root"])
            .arg(&root)
            .args(flags.split_whitespace())
            .env("FLYCODE_STATE_DIR", temp.path().join("state"))
            .env_remove("XDG_CONFIG_HOME")
            .current_dir(&root)
            .write_stdin(reply)
            .output()
            .unwrap();
        let stdout =
            String::from_utf8_lossy(&output.stdout).replace(root.to_str().unwrap(), "[ROOT]");
        let stdout = duration.replace_all(&stdout, "duration_ms=[N]");
        report.push_str(&format!(
            "## {name} (exit {})\n{stdout}\n",
            output.status.code().unwrap_or(-1)
        ));
        if scenario.join("expected").is_dir() {
            let (want, got) = (tree(&scenario.join("expected")), tree(&root));
            if want != got {
                let show = |t: &BTreeMap<PathBuf, Vec<u8>>| {
                    t.iter()
                        .map(|(k, v)| format!("{}={:?}", k.display(), String::from_utf8_lossy(v)))
                        .collect::<Vec<_>>()
                };
                problems.push(format!(
                    "{name}: tree {:?}, expected {:?}",
                    show(&got),
                    show(&want)
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    insta::assert_snapshot!(report);
}
