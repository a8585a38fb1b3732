//! Tools through the sandbox: fs.read of a 1 MB and a 10 MB file and of parts of a 32 MiB one,
//! and fs.ls of a deep tree and of a flat folder of 10,000 files, with and without sizes.
#![allow(clippy::expect_used)] // a benchmark that cannot set up has nothing to measure
#![allow(clippy::disallowed_methods)] // a benchmark makes its fixtures directly

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use flycode::sandbox::mask::Secrets;
use flycode::sandbox::{Roots, Sandbox};
use flycode::tools::fs::{ls, read};
use serde_json::json;

fn tools(c: &mut Criterion) {
    let temp = tempfile::tempdir().expect("temp dir");
    let root = std::fs::canonicalize(temp.path()).expect("canonical");
    let line = "let value = compute(input, &options)?; // a line of source code\n";
    std::fs::write(root.join("big.rs"), line.repeat(1024 * 1024 / line.len())).expect("write");
    // 3 levels of 8 directories with 8 files each (584 directories, 4,672 files).
    let mut stack = vec![(root.join("tree"), 0)];
    while let Some((dir, depth)) = stack.pop() {
        std::fs::create_dir_all(&dir).expect("mkdir");
        for f in 0..8 {
            std::fs::write(dir.join(format!("file{f}.rs")), "fn f() {}\n").expect("write");
        }
        if depth < 3 {
            for d in 0..8 {
                stack.push((dir.join(format!("dir{d}")), depth + 1));
            }
        }
    }
    std::fs::create_dir_all(root.join("flat")).expect("mkdir");
    for f in 0..10_000 {
        std::fs::write(root.join("flat").join(format!("file{f:05}.txt")), "x\n").expect("write");
    }
    std::fs::write(
        root.join("ten.rs"),
        line.repeat(10 * 1024 * 1024 / line.len()),
    )
    .expect("write");
    let sandbox = Sandbox::open(&Roots::resolve(std::slice::from_ref(&root)).expect("roots"))
        .expect("sandbox");
    let big: read::ReadArgs =
        serde_json::from_value(json!({"path": root.join("big.rs")})).expect("fs.read args");
    let tree: ls::LsArgs = serde_json::from_value(json!({"path": root.join("tree"), "depth": 16}))
        .expect("fs.ls args");
    let ten: read::ReadArgs =
        serde_json::from_value(json!({"path": root.join("ten.rs")})).expect("fs.read args");
    let flat: ls::LsArgs =
        serde_json::from_value(json!({"path": root.join("flat")})).expect("fs.ls args");
    let flat_names: ls::LsArgs =
        serde_json::from_value(json!({"path": root.join("flat"), "sizes": false}))
            .expect("fs.ls args");
    let mut group = c.benchmark_group("tools");
    group.bench_function("fs.read_1MB", |b| {
        b.iter(|| read::run(black_box(&sandbox), &big, &Secrets::default()))
    });
    group.sample_size(20);
    group.bench_function("fs.read_10MB", |b| {
        b.iter(|| read::run(black_box(&sandbox), &ten, &Secrets::default()))
    });
    group.bench_function("fs.ls_deep_tree_4672_files", |b| {
        b.iter(|| ls::run(black_box(&sandbox), &tree))
    });
    group.bench_function("fs.ls_flat_10000_files", |b| {
        b.iter(|| ls::run(black_box(&sandbox), &flat))
    });
    group.bench_function("fs.ls_flat_10000_files_no_sizes", |b| {
        b.iter(|| ls::run(black_box(&sandbox), &flat_names))
    });
    group.finish();
}

/// fs.read of parts of a 32 MiB log (1,048,576 lines of 32 bytes): head and tail read a block
/// or less whatever the file's size, lines stream to the line asked for.
fn large_reads(c: &mut Criterion) {
    let temp = tempfile::tempdir().expect("temp dir");
    let root = std::fs::canonicalize(temp.path()).expect("canonical");
    let log = root.join("big.log");
    let text: String = (1..=1024 * 1024)
        .map(|n| format!("line {n:09} xxxxxxxxxxxxxxxx\n"))
        .collect();
    std::fs::write(&log, text).expect("write");
    let sandbox = Sandbox::open(&Roots::resolve(std::slice::from_ref(&root)).expect("roots"))
        .expect("sandbox");
    let args = |extra: serde_json::Value| -> read::ReadArgs {
        let mut args = extra;
        args["path"] = json!(log);
        serde_json::from_value(args).expect("fs.read args")
    };
    let mut group = c.benchmark_group("tools");
    for (name, call) in [
        ("fs.read_head_200_of_32MiB", args(json!({"head": 200}))),
        ("fs.read_tail_200_of_32MiB", args(json!({"tail": 200}))),
        (
            "fs.read_lines_1000000-1000010_of_32MiB",
            args(json!({"lines": "1000000-1000010"})),
        ),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| read::run(black_box(&sandbox), &call, &Secrets::default()).expect("fs.read"))
        });
    }
    group.finish();
}

criterion_group!(benches, tools, large_reads);
criterion_main!(benches);
