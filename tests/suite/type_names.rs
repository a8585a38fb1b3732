//! One meaning per type name: no two top-level `struct`, `enum`, `trait` or `type` definitions
//! in `src/` share a name, so a name read anywhere says which type it is (issue 23). Types inside
//! `mod tests` or a function body are local and not counted.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Names allowed to be defined twice (none: every type name has one meaning).
const PENDING: &[&str] = &[];

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

/// The name a top-level line defines, if it defines a type.
fn defined_type(line: &str) -> Option<&str> {
    let mut rest = line.strip_prefix("pub ").unwrap_or(line);
    if let Some(after) = line.strip_prefix("pub(") {
        rest = after.split_once(") ")?.1;
    }
    let rest = ["struct ", "enum ", "trait ", "type "]
        .iter()
        .find_map(|keyword| rest.strip_prefix(keyword))?;
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    Some(&rest[..end]).filter(|name| name.starts_with(|c: char| c.is_ascii_uppercase()))
}

#[test]
fn no_two_types_in_src_share_a_name() {
    // The package's `src/` and every crate's under `crates/`: one workspace, one namespace of
    // names as a reader meets them.
    let src = super::common::repo_root();
    let mut files = Vec::new();
    rust_files(&src.join("src"), &mut files);
    rust_files(&src.join("crates"), &mut files);
    let mut places: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (index, line) in text.lines().enumerate() {
            if let Some(name) = defined_type(line) {
                let shown = file.strip_prefix(&src).unwrap_or(file).display();
                places
                    .entry(name.to_owned())
                    .or_default()
                    .push(format!("{shown}:{}", index + 1));
            }
        }
    }
    assert!(places.len() > 100, "too few types found: {}", places.len());
    let shared: Vec<String> = places
        .iter()
        .filter(|(name, at)| at.len() > 1 && !PENDING.contains(&name.as_str()))
        .map(|(name, at)| format!("{name}: {}", at.join(", ")))
        .collect();
    assert!(
        shared.is_empty(),
        "type names defined more than once (give each a name that says what it is):\n{}",
        shared.join("\n")
    );
}
