//! fs.readMany of 50 files against 50 fs.read calls of the same files (about 4 KB each), both
//! through the tools' own `run` functions and the same sandbox.
#![allow(clippy::expect_used)] // a benchmark that cannot set up has nothing to measure
#![allow(clippy::disallowed_methods)] // a benchmark makes its fixtures directly

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use flycode::sandbox::mask::Secrets;
use flycode::sandbox::{Roots, Sandbox};
use flycode::tools::Limits;
use flycode::tools::fs::{read, read_many};
use serde_json::json;

/// Files read, and the size of each.
const FILES: usize = 50;
const FILE_BYTES: usize = 4096;

fn read_many_vs_reads(c: &mut Criterion) {
    let temp = tempfile::tempdir().expect("temp dir");
    let root = std::fs::canonicalize(temp.path()).expect("canonical");
    let line = "let value = compute(input, &options)?; // a line of source code\n";
    let content = line.repeat(FILE_BYTES / line.len());
    let paths: Vec<String> = (0..FILES)
        .map(|i| {
            let path = root.join(format!("src/file{i:02}.rs"));
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(&path, &content).expect("write");
            path.display().to_string()
        })
        .collect();
    let sandbox = Sandbox::open(&Roots::resolve(std::slice::from_ref(&root)).expect("roots"))
        .expect("sandbox");
    // A cap that holds all 50 files, so both sides return the same bytes.
    let limits = Limits {
        output_cap: 1024 * 1024,
        ..Limits::default()
    };
    let many: read_many::ReadManyArgs =
        serde_json::from_value(json!({"paths": paths})).expect("fs.readMany args");
    let glob: read_many::ReadManyArgs =
        serde_json::from_value(json!({"paths": [format!("{}/src/*.rs", root.display())]}))
            .expect("fs.readMany args");
    let single: Vec<read::ReadArgs> = paths
        .iter()
        .map(|path| serde_json::from_value(json!({"path": path})).expect("fs.read args"))
        .collect();
    let mut group = c.benchmark_group("tools");
    group.bench_function("fs.readMany_50_files_of_4KB", |b| {
        b.iter(|| read_many::run(black_box(&sandbox), &limits, &many).expect("fs.readMany"))
    });
    group.bench_function("fs.readMany_glob_of_50_files_of_4KB", |b| {
        b.iter(|| read_many::run(black_box(&sandbox), &limits, &glob).expect("fs.readMany"))
    });
    group.bench_function("fs.read_50_calls_of_4KB", |b| {
        b.iter(|| {
            for args in &single {
                black_box(
                    read::run(black_box(&sandbox), args, &Secrets::default()).expect("fs.read"),
                );
            }
        })
    });
    group.finish();
}

criterion_group!(benches, read_many_vs_reads);
criterion_main!(benches);
