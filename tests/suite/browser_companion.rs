//! The browser companion end to end (issue 38; PROTOCOL.md §12, "The browser companion's loopback
//! API"): Debian's chromium, headless, with the unpacked extension in `browser/extension`,
//! against local copies of the eight served sites' markup (`tests/browser/sites`) served over
//! HTTPS under the sites' own names, and a real `flycode watch --browser`. The checks are in
//! `tests/browser/run.mjs` (one line each); this test runs it and fails with its output.
//!
//! Needs `chromium`, `openssl` and `npm` (`.ci/run` installs them); the npm driver,
//! puppeteer-core (no browser download), is installed on first use from the lock file.

use std::path::Path;
use std::process::Command;

use super::common::repo_root;

fn chromium() -> String {
    let path =
        std::env::var("FLYCODE_TEST_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        Path::new(&path).exists(),
        "the browser companion's tests need Debian's chromium at {path}: apt-get install chromium (or set FLYCODE_TEST_CHROMIUM)"
    );
    path
}

fn driver(dir: &Path) {
    if dir
        .join("node_modules/puppeteer-core/package.json")
        .exists()
    {
        return;
    }
    let status = Command::new("npm")
        .args(["ci", "--silent", "--no-audit", "--no-fund"])
        .current_dir(dir)
        .status()
        .expect("npm, to install the test's browser driver (apt-get install npm)");
    assert!(status.success(), "npm ci in {} failed", dir.display());
}

#[test]
fn the_extension_runs_replies_once_puts_results_in_the_box_and_pairs_on_every_served_site() {
    let browser = chromium();
    let dir = repo_root().join("tests/browser");
    driver(&dir);
    let work = tempfile::tempdir().unwrap();
    let shots = repo_root().join("target/tmp/browser-shots");
    std::fs::create_dir_all(&shots).unwrap();
    let output = Command::new("node")
        .arg("run.mjs")
        .current_dir(&dir)
        .env("FLYCODE", env!("CARGO_BIN_EXE_flycode"))
        .env("WORK", work.path())
        .env("SHOTS", &shots)
        .env("CHROMIUM", browser)
        .output()
        .expect("node, to drive the browser");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let checks = stdout
        .lines()
        .filter(|line| line.starts_with("ok - "))
        .count();
    assert!(
        output.status.success() && !stdout.contains("FAILED"),
        "the browser run failed:\n{stdout}\n{stderr}"
    );
    // Every check ran: 10 for each of the eight sites, pairing, 4 of approvals, 2 of the fallback.
    assert!(
        checks >= 8 * 10 + 1 + 4 + 2,
        "only {checks} checks ran:\n{stdout}"
    );
}

#[test]
fn the_packaging_command_makes_a_zip_of_the_extension_alone() {
    let output = Command::new(repo_root().join("browser/package.sh"))
        .output()
        .expect("python3, to pack the extension");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let zip = repo_root().join(String::from_utf8_lossy(&output.stdout).trim());
    let listing = Command::new("python3")
        .args([
            "-c",
            "import sys, zipfile; print('\\n'.join(zipfile.ZipFile(sys.argv[1]).namelist()))",
        ])
        .arg(&zip)
        .output()
        .unwrap();
    let names = String::from_utf8_lossy(&listing.stdout);
    let names: Vec<&str> = names.lines().collect();
    assert!(names.contains(&"manifest.json"), "{names:?}");
    assert!(names.contains(&"content/engine.js"), "{names:?}");
    let extension = repo_root().join("browser/extension");
    for name in &names {
        assert!(
            extension.join(name).is_file(),
            "{name} is not a file of the extension"
        );
    }
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(extension.join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(manifest["manifest_version"], 3);
    // Every script the manifest names is in the zip.
    for script in manifest["content_scripts"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|entry| entry["js"].as_array().unwrap())
    {
        assert!(names.contains(&script.as_str().unwrap()), "{script}");
    }
}
