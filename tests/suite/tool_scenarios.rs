//! Golden scenarios of `flycode exec` (`fixtures/tools/NNN_name/`): an input tree, a call, the
//! expected tree afterwards and a snapshot of the result block, run against the real binary.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::common::{flycode, repo_root};

/// Every file below `dir`, relative, with its bytes.
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
            } else {
                let bytes = std::fs::read(&path).unwrap_or_default();
                files.insert(path.strip_prefix(dir).unwrap().to_owned(), bytes);
            }
        }
    }
    files
}

fn copy_tree(from: &Path, to: &Path) {
    for (relative, bytes) in tree(from) {
        let target = to.join(relative);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::write(target, bytes).unwrap();
    }
}

#[test]
fn tool_scenarios() {
    let scenarios = repo_root().join("fixtures/tools");
    let mut names: Vec<PathBuf> = std::fs::read_dir(&scenarios)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    names.sort();
    assert!(names.len() >= 20, "only {} scenarios", names.len());
    let mut report = String::new();
    let mut problems = Vec::new();
    for scenario in names {
        let name = scenario.file_name().unwrap().to_string_lossy().into_owned();
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap().join("root");
        std::fs::create_dir_all(&root).unwrap();
        copy_tree(&scenario.join("input"), &root);
        let reply = std::fs::read_to_string(scenario.join("call.md"))
            .unwrap()
            .replace("{ROOT}", root.to_str().unwrap());
        let flags = std::fs::read_to_string(scenario.join("flags")).unwrap_or_default();
        let output = flycode()
            .arg("exec")
            .arg("--root")
            .arg(&root)
            .args(flags.split_whitespace())
            .env("FLYCODE_STATE_DIR", temp.path().join("state"))
            .env_remove("XDG_CONFIG_HOME")
            .current_dir(&root)
            .write_stdin(reply)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout)
            .replace(root.to_str().unwrap(), "[ROOT]")
            .lines()
            .map(|line| {
                // Durations vary from run to run.
                if line.starts_with("[durationMs] ") {
                    "[durationMs] [N]"
                } else {
                    line
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        report.push_str(&format!(
            "## {name} (exit {})\n{stdout}\n",
            output.status.code().unwrap_or(-1)
        ));
        let expected = tree(&scenario.join("expected"));
        let actual = tree(&root);
        if expected != actual {
            let show = |t: &BTreeMap<PathBuf, Vec<u8>>| {
                t.keys()
                    .map(|k| k.display().to_string())
                    .collect::<Vec<_>>()
            };
            problems.push(format!(
                "{name}: tree differs: expected {:?}, got {:?}",
                show(&expected),
                show(&actual)
            ));
            for (path, bytes) in &expected {
                if actual.get(path) != Some(bytes) {
                    problems.push(format!(
                        "  {}: {:?}",
                        path.display(),
                        actual
                            .get(path)
                            .map(|b| String::from_utf8_lossy(b).into_owned())
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    insta::assert_snapshot!(report);
}
