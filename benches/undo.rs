//! What recording a change for undo costs (PROTOCOL.md §16 (Undo and history)): fs.write of
//! 1 MB over an existing file, and fs.writeBatch of 100 files over existing ones, through the
//! call service with the undo recorder and without it. Every write brings new content, so every
//! iteration stores a new pre-image (no deduplication flatters the figure); the store's contents
//! and records are removed, and the file system synced, outside the timed part. Its folders and
//! its own small files (`lock`, `next`, `size`) are kept, as in a store in use: they exist from
//! its first change on (removed, every call would make them again).
#![allow(clippy::expect_used)] // a benchmark that cannot set up has nothing to measure
#![allow(clippy::disallowed_methods)] // a benchmark makes its fixtures directly

use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use flycode::protocol::{Call, ToolName};
use flycode::sandbox::undo::{Recorder, UndoLimits, UndoStore};
use flycode::sandbox::{Durability, Roots, Sandbox};
use flycode::tools::executor::{Approval, Executor, FixedApprover};
use flycode::tools::policy::{ApprovalMode, Policy};
use serde_json::{Value, json};

fn call(tool: ToolName, args: Value) -> Call {
    Call {
        id: Some("bench".into()),
        tool,
        args: args.as_object().cloned().expect("an object"),
    }
}

/// Times `iterations` calls made by `make(n)`: to their answers, and to their records on the
/// disk (a recorded call puts its completed record there after it has answered, PROTOCOL.md §16
/// (Undo and history), "Order, and a crash"). The store's contents and records are removed
/// between the calls (not timed).
fn timed(
    executor: &Executor<'_>,
    store: &Path,
    iterations: u64,
    make: &dyn Fn(u64) -> Call,
) -> (Duration, Duration) {
    let (mut answered, mut on_disk) = (Duration::ZERO, Duration::ZERO);
    for n in 0..iterations {
        let call = make(n);
        let started = Instant::now();
        let execution = executor.execute(&call);
        answered += started.elapsed();
        flycode::sandbox::undo::wait_for_completions();
        on_disk += started.elapsed();
        assert!(execution.is_ok(), "{:?}", execution.block);
        empty(store);
        // What removing the store's files leaves for the file system's journal is committed
        // here, outside the timed part, not by the next call's first flush: with recording,
        // that would be the old files the call kept in the store, which a real store keeps
        // until retention prunes them.
        if let Ok(dir) = std::fs::File::open(store.parent().unwrap_or(store)) {
            let _ = rustix::fs::syncfs(&dir);
        }
    }
    (answered, on_disk)
}

/// About `bytes` of many-line source, the same for a seed.
fn source(bytes: usize, seed: u64) -> String {
    let mut text = String::with_capacity(bytes + 128);
    let mut line = 0u64;
    while text.len() < bytes {
        let value = (line.wrapping_mul(2_654_435_761).wrapping_add(seed)) % 100_000;
        text.push_str(&format!(
            "    let value_{line} = compute({value}, \"{}\"); // step {line}\n",
            "abcdefghij".repeat(usize::try_from(value % 5).unwrap_or(0))
        ));
        line += 1;
    }
    text
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// Removes every file in the folders of the store `dir` (its contents and records), keeping the
/// folders and the store's own files beside them.
fn empty(dir: &Path) {
    fn remove_files(dir: &Path) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                remove_files(&path);
            } else {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            remove_files(&entry.path());
        }
    }
}

fn undo(c: &mut Criterion) {
    let temp = tempfile::tempdir().expect("temp dir");
    let base = std::fs::canonicalize(temp.path()).expect("canonical");
    let root = base.join("root");
    std::fs::create_dir_all(&root).expect("root");
    let store_dir = base.join("state/undo");
    let big = root.join("big.txt");
    std::fs::write(&big, source(1 << 20, 0)).expect("write");
    for f in 0..100 {
        std::fs::write(root.join(format!("f{f}.rs")), "fn f() {}\n".repeat(20)).expect("write");
    }
    let sandbox = Sandbox::open(&Roots::resolve(std::slice::from_ref(&root)).expect("roots"))
        .expect("sandbox");
    let policy = Policy {
        approval: ApprovalMode::Auto,
        ..Policy::default()
    };
    let approver = FixedApprover(Approval::Yes);
    let plain = Executor::new(&sandbox, &policy, &approver);
    let recorder = Recorder::new(
        UndoStore::at(&store_dir, Durability::Full),
        "bench",
        UndoLimits::default(),
    );
    let recording = Executor::builder(&sandbox, &policy, &approver)
        .undo(Some(recorder))
        .build();
    // Many-line source, as a model rewrites it: a different first line each time.
    let body = source(1 << 20, 1);
    let write = |n: u64| {
        let content = format!("// revision {n}\n{body}");
        call(
            ToolName::FsWrite,
            json!({"path": big, "mode": "overwrite", "content": content}),
        )
    };
    let batch = |n: u64| {
        let files: Vec<Value> = (0..100)
            .map(|f| json!({"path": root.join(format!("f{f}.rs")), "content": format!("// {n}\n{}", "fn g() {}\n".repeat(20))}))
            .collect();
        call(ToolName::FsWriteBatch, json!({"files": files}))
    };
    // Side by side as well: the machine's fsync time drifts between criterion's runs of one
    // function and the next, so each recorded call is paired with an unrecorded one made just
    // before it, and the ratio is of the medians.
    {
        for (name, make, pairs) in [
            ("fs.write_1MB", &write as &dyn Fn(u64) -> Call, 300),
            ("fs.writeBatch_100_files", &batch, 40),
        ] {
            let (mut off, mut on, mut on_disk) = (Vec::new(), Vec::new(), Vec::new());
            for n in 0..pairs {
                off.push(timed(&plain, &store_dir, 1, &|_| make(2 * n)).0);
                let (answered, settled) = timed(&recording, &store_dir, 1, &|_| make(2 * n + 1));
                on.push(answered);
                on_disk.push(settled);
            }
            let (off, on, on_disk) = (median(&mut off), median(&mut on), median(&mut on_disk));
            let ms = |d: Duration| d.as_secs_f64() * 1e3;
            println!(
                "undo/paired/{name}: off {:.2} ms, recording {:.2} ms to the answer (ratio {:.2}), {:.2} ms to the record on the disk (ratio {:.2}) ({pairs} pairs)",
                ms(off),
                ms(on),
                on.as_secs_f64() / off.as_secs_f64(),
                ms(on_disk),
                on_disk.as_secs_f64() / off.as_secs_f64()
            );
        }
    }
    let mut group = c.benchmark_group("undo");
    group.sample_size(20);
    for (name, executor) in [("off", &plain), ("recording", &recording)] {
        group.bench_function(format!("fs.write_1MB_{name}"), |b| {
            b.iter_custom(|iterations| timed(executor, &store_dir, iterations, &write).0)
        });
        if name == "recording" {
            group.bench_function("fs.write_1MB_recording_to_disk", |b| {
                b.iter_custom(|iterations| timed(executor, &store_dir, iterations, &write).1)
            });
        }
        group.bench_function(format!("fs.writeBatch_100_files_{name}"), |b| {
            b.iter_custom(|iterations| timed(executor, &store_dir, iterations, &batch).0)
        });
    }
    group.finish();
}

criterion_group!(benches, undo);
criterion_main!(benches);
