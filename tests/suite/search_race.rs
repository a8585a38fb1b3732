//! `fs.search` while a directory inside the root is swapped for a link to an outside directory and
//! back, as fast as renames go: the walk opens every directory through the handle of its parent,
//! never following a link, so no round may find what lies outside.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use flycode::sandbox::{Roots, Sandbox};
use flycode::tools::fs::search::{SearchArgs, run};
use serde_json::json;

/// Rounds of searching, unless the time bound below ends them first.
const ROUNDS: usize = 300;

/// The most time the rounds may take together.
const TIME_BOUND: Duration = Duration::from_secs(60);

/// Swaps `root/dir` for a link to `outside` and back until `stop`: the link is made as `dir.tmp`
/// and renamed over, the real directory waits as `held` and is renamed back.
fn swap_until(root: &Path, outside: &Path, stop: &AtomicBool) {
    let (dir, held, staged) = (root.join("dir"), root.join("held"), root.join("dir.tmp"));
    symlink(outside, &staged).unwrap();
    while !stop.load(Ordering::Relaxed) {
        std::fs::rename(&dir, &held).unwrap();
        std::fs::rename(&staged, &dir).unwrap();
        std::thread::yield_now();
        std::fs::rename(&dir, &staged).unwrap();
        std::fs::rename(&held, &dir).unwrap();
        std::thread::yield_now();
    }
}

#[test]
fn a_directory_swapped_for_a_link_out_mid_search_yields_nothing_outside() {
    let temp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(temp.path()).unwrap();
    let root = base.join("root");
    let outside = base.join("outside");
    std::fs::create_dir_all(root.join("dir")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(root.join("dir/inner.txt"), "INSIDE\n").unwrap();
    for i in 0..50 {
        std::fs::write(outside.join(format!("secret{i:02}.txt")), "SECRET\n").unwrap();
    }
    let sandbox = Sandbox::open(&Roots::resolve(std::slice::from_ref(&root)).unwrap()).unwrap();
    let args: SearchArgs = serde_json::from_value(json!({
        "path": root.display().to_string(),
        "query": "INSIDE|SECRET",
        "regex": true,
        "limit": 1000,
    }))
    .unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (root, outside, stop): (PathBuf, PathBuf, _) =
            (root.clone(), outside.clone(), stop.clone());
        std::thread::spawn(move || swap_until(&root, &outside, &stop))
    };
    let started = Instant::now();
    let (mut rounds, mut leaks, mut inside) = (0, Vec::new(), 0);
    while rounds < ROUNDS && started.elapsed() < TIME_BOUND {
        rounds += 1;
        // A failed call leaks nothing; only what a search returns matters here.
        let Ok(output) = run(&sandbox, &args) else {
            continue;
        };
        // The query is echoed when nothing matches: look at the lines found, not the body.
        let lines = output.data["lines"].as_array().cloned().unwrap_or_default();
        let texts: Vec<&str> = lines.iter().filter_map(|l| l["text"].as_str()).collect();
        if texts.iter().any(|t| t.contains("SECRET")) {
            leaks.push(output.body.unwrap_or_default());
        } else if texts.contains(&"INSIDE") {
            inside += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    assert!(
        leaks.is_empty(),
        "{} of {rounds} searches returned outside content, e.g.:\n{}",
        leaks.len(),
        leaks[0]
    );
    // The swap did not starve the search: the real directory was searched in some rounds.
    assert!(inside > 0, "no round found INSIDE in {rounds} rounds");
}
