//! `fs.search` in process: a literal and a regex query over a generated tree of Rust-like files
//! (about 32 MB in 2,000 files), or over `FLYCODE_SEARCH_CORPUS` when set. Every file is read
//! (no limit is reached), so this is the engine's full-scan throughput; the comparison with
//! ripgrep is `bench/search-vs-rg.sh`.

// A benchmark, like a test, fails loudly when its setup fails, and makes its fixtures directly.
#![allow(clippy::unwrap_used)]
#![allow(clippy::disallowed_methods)]

use std::hint::black_box;
use std::path::{Path, PathBuf};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use flycode::tools::fs::search::{SearchRequest, search};

/// Writes `files` files of about 16 KB each in 40 directories; a few lines mention `needle_17`.
fn generate(root: &Path, files: usize) -> u64 {
    let mut total = 0;
    for i in 0..files {
        let dir = root.join(format!("m{}", i % 40));
        std::fs::create_dir_all(&dir).unwrap();
        let mut text = String::new();
        for j in 0..200 {
            let name = if j == 100 && i % 10 == 0 {
                "needle_17"
            } else {
                "value"
            };
            text.push_str(&format!(
                "    let {name}_{j} = compute(input_{i}, &options)?; // line {j} of {i}\n"
            ));
        }
        total += text.len() as u64;
        std::fs::write(dir.join(format!("f{i}.rs")), text).unwrap();
    }
    total
}

fn bench(c: &mut Criterion) {
    let temp = tempfile::tempdir().unwrap();
    let (root, bytes): (PathBuf, Option<u64>) = match std::env::var_os("FLYCODE_SEARCH_CORPUS") {
        Some(dir) => (dir.into(), None),
        None => {
            let bytes = generate(temp.path(), 2000);
            (temp.path().to_path_buf(), Some(bytes))
        }
    };
    let mut group = c.benchmark_group("fs.search");
    group.sample_size(10);
    if let Some(bytes) = bytes {
        group.throughput(Throughput::Bytes(bytes));
    }
    let literal = SearchRequest {
        limit: usize::MAX,
        ..SearchRequest::new(&root, "needle_17")
    };
    let regex = SearchRequest {
        regex: true,
        ..literal.clone()
    };
    let regex = SearchRequest {
        query: r"needle_\d+ = compute\(input_\d+0,".into(),
        ..regex
    };
    group.bench_function("literal_full_scan", |b| {
        b.iter(|| search(black_box(&literal)).unwrap().lines.len())
    });
    group.bench_function("regex_full_scan", |b| {
        b.iter(|| search(black_box(&regex)).unwrap().lines.len())
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
