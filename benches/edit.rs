//! fs.edit of a 1 MB file: one edit in the middle, written atomically (read, match, diff, hash,
//! temporary file, flush, rename), and the same as a dry run (no write).
#![allow(clippy::expect_used)] // a benchmark that cannot set up has nothing to measure
#![allow(clippy::disallowed_methods)] // a benchmark makes its fixtures directly

use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use flycode::sandbox::{Roots, Sandbox};
use flycode::tools::fs::edit::{self, EditArgs};
use flycode::tools::secrets::Secrets;
use serde_json::json;

fn edit_one_megabyte(c: &mut Criterion) {
    let temp = tempfile::tempdir().expect("temp dir");
    let root = std::fs::canonicalize(temp.path()).expect("canonical");
    let file = root.join("big.rs");
    // 16,384 lines of 64 bytes: 1 MiB.
    let content: String = (0..16_384)
        .map(|n| format!("let value_{n:05} = compute(input, &options)?; // source line\n"))
        .collect();
    std::fs::write(&file, &content).expect("write");
    let sandbox = Sandbox::open(&Roots::resolve(std::slice::from_ref(&root)).expect("roots"))
        .expect("sandbox");
    let args = |dry_run: bool| -> EditArgs {
        serde_json::from_value(json!({
            "path": file,
            "dryRun": dry_run,
            "edits": [{
                "oldText": "let value_08192 = compute(input, &options)?;",
                "newText": "let value_08192 = compute_faster(input, &options)?;"
            }]
        }))
        .expect("fs.edit args")
    };
    let (write, dry) = (args(false), args(true));
    let secrets = Secrets::from_values(Vec::new());
    let mut group = c.benchmark_group("tools");
    group.bench_function("fs.edit_1MB_one_edit_in_the_middle", |b| {
        b.iter_batched(
            || std::fs::write(&file, &content).expect("reset"),
            |()| edit::run(black_box(&sandbox), &write, &secrets).expect("fs.edit"),
            BatchSize::PerIteration,
        )
    });
    std::fs::write(&file, &content).expect("reset");
    group.bench_function("fs.edit_1MB_one_edit_dry_run", |b| {
        b.iter(|| edit::run(black_box(&sandbox), &dry, &secrets).expect("fs.edit"))
    });
    group.finish();
}

criterion_group!(benches, edit_one_megabyte);
criterion_main!(benches);
