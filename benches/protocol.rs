//! Protocol hot paths: judging a reply (parse + validate) and rendering a result block, and
//! judging the pathological 15 MB replies that once cost a CommonMark parser ~50x their size.
//!
//! Targets (PRODUCT.md): a typical 4 KB reply classified and validated in under 20 µs.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use flycode::protocol::{ClassifyOptions, ResultBlock, classify_reply};
use serde_json::json;

/// A realistic fs.write call whose whole reply is about `size` bytes.
fn write_reply(size: usize) -> String {
    let line = "    let value = compute(input, &options).context(\"computing\")?;\n";
    let content: String = line.repeat(size / line.len() + 1)[..size.saturating_sub(160)].to_owned();
    let call = json!({"id": "call-042", "tool": "fs.write", "args": {"path": "/root/work/app/src/lib.rs", "mode": "overwrite", "content": content}});
    format!("```flycode-call\n{call}\n```\n")
}

fn classify(c: &mut Criterion) {
    let mut group = c.benchmark_group("classify_reply");
    for (name, size) in [("4KB_fs.write", 4 * 1024), ("1MB_fs.write", 1024 * 1024)] {
        let reply = write_reply(size);
        group.throughput(Throughput::Bytes(reply.len() as u64));
        group.bench_function(name, |b| {
            b.iter(|| classify_reply(black_box(&reply), ClassifyOptions::default()))
        });
    }
    let small = "```flycode-call\n{\"id\":\"call-002\",\"tool\":\"fs.read\",\"args\":{\"path\":\"/root/work/flycode/README.md\",\"head\":1200}}\n```\n";
    group.bench_function("small_fs.read", |b| {
        b.iter(|| classify_reply(black_box(small), ClassifyOptions::default()))
    });
    let prose = "这个目录包含三个子目录：src、docs 和 tests。\n\n".repeat(60);
    group.bench_function("4KB_prose", |b| {
        b.iter(|| classify_reply(black_box(&prose), ClassifyOptions::default()))
    });
    group.finish();
}

/// A call block after about 15 MB of one pathological shape: a reply just under the default
/// 16 MiB `max_reply_bytes`, built to make a CommonMark parser allocate per byte (inline
/// brackets, emphasis, links) or per container (block quotes). Peak memory: bench/parse-memory.sh.
fn pathological(shape: &str) -> String {
    let size = 15_000_000;
    let unit = match shape {
        "brackets" => "[",
        "emphasis" => "*a",
        "links" => "[a](",
        _ => "> ",
    };
    let mut reply = unit.repeat(size / unit.len());
    reply.push_str("\n\n```flycode-call\n{\"id\":\"c1\",\"tool\":\"fs.read\",\"args\":{\"path\":\"/tmp/a\"}}\n```\n");
    reply
}

fn classify_pathological(c: &mut Criterion) {
    let mut group = c.benchmark_group("classify_pathological_15MB");
    group.sample_size(10);
    for shape in ["brackets", "emphasis", "links", "quotes"] {
        let reply = pathological(shape);
        group.throughput(Throughput::Bytes(reply.len() as u64));
        group.bench_function(shape, |b| {
            b.iter(|| classify_reply(black_box(&reply), ClassifyOptions::default()))
        });
    }
    group.finish();
}

fn render(c: &mut Criterion) {
    let body = "fn main() { println!(\"hello ``` world\"); }\n".repeat(2000);
    let block = ResultBlock::success(
        Some("call-007".into()),
        "/fs.read /root/work/app/src/main.rs".into(),
        Some(body[..64 * 1024].to_owned()),
    );
    let mut group = c.benchmark_group("render_result");
    group.throughput(Throughput::Bytes(64 * 1024));
    group.bench_function("64KiB_body", |b| b.iter(|| black_box(&block).render()));
    let oversized = ResultBlock::success(
        Some("call-008".into()),
        "/shell.exec 'cat big.log'".into(),
        Some(body.repeat(16)),
    );
    group.bench_function("1MiB_body_capped_to_64KiB", |b| {
        b.iter(|| {
            black_box(oversized.clone())
                .capped(64 * 1024, None)
                .render()
        })
    });
    group.finish();
}

criterion_group!(benches, classify, classify_pathological, render);
criterion_main!(benches);
