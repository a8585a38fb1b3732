//! The crates show the layers (ARCHITECTURE.md, "Layers"): `flycode-protocol` is pure (no file
//! system, no processes, no flycode crate beneath it), `flycode-sandbox` stands on the protocol
//! alone and is the only crate that touches the file system and starts programs,
//! `flycode-core` (call service, tools, settings) stands on both, `flycode-agent` (clients, the
//! loop, sub-agents) on the core, and the `flycode` package (the doors, the binary) on them all. Cargo refuses a circle
//! between crates; this test holds the direction and the purity.

use std::path::Path;

fn manifest(crate_dir: &str) -> toml::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(crate_dir)
        .join("Cargo.toml");
    toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn flycode_dependencies(manifest: &toml::Value) -> Vec<String> {
    let mut names: Vec<String> = manifest["dependencies"]
        .as_table()
        .unwrap()
        .keys()
        .filter(|name| name.starts_with("flycode"))
        .cloned()
        .collect();
    names.sort();
    names
}

#[test]
fn the_dependency_arrows_point_one_way() {
    assert!(flycode_dependencies(&manifest("crates/flycode-protocol")).is_empty());
    assert_eq!(
        flycode_dependencies(&manifest("crates/flycode-sandbox")),
        ["flycode-protocol"]
    );
    assert_eq!(
        flycode_dependencies(&manifest("crates/flycode-core")),
        ["flycode-protocol", "flycode-sandbox"]
    );
    assert_eq!(
        flycode_dependencies(&manifest("crates/flycode-agent")),
        ["flycode-core", "flycode-protocol", "flycode-sandbox"]
    );
    assert_eq!(
        flycode_dependencies(&manifest(".")),
        [
            "flycode-agent",
            "flycode-core",
            "flycode-protocol",
            "flycode-sandbox"
        ]
    );
}

/// The protocol crate reads and writes text only: no file access, no program, no clock of its
/// own beyond formatting a time it is given.
#[test]
fn the_protocol_crate_touches_no_file_and_starts_no_program() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/flycode-protocol/src");
    let mut found = Vec::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            // Tests may make fixtures; the crate's code may not.
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            for needle in [
                "std::fs",
                "std::process",
                "File::open",
                "Command::new",
                "std::net",
            ] {
                if code.contains(needle) {
                    found.push(format!(
                        "{}: {needle}",
                        path.strip_prefix(&src).unwrap().display()
                    ));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "the protocol crate does I/O:\n{}",
        found.join("\n")
    );
}
