//! `flycode validate` throughput on one core over a realistic JSON Lines transcript: calls, results
//! carrying file contents, and prose. Target (PRODUCT.md): at least 200 MB/s.

use std::hint::black_box;
use std::io::BufReader;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use flycode::validate::ValidateOptions;
use flycode::validate::report::check_reader;
use serde_json::json;

/// About `bytes` of JSON Lines: each turn is a call, its result with a 4 KB file, and prose.
fn transcript(bytes: usize) -> Vec<u8> {
    let body = "    let value = compute(input, &options)?; // a line of source code\n".repeat(60);
    let prose = "The function computes a value from the input and propagates any error to its caller; nothing else changes.";
    let mut out = Vec::with_capacity(bytes + 8192);
    let mut turn = 0;
    while out.len() < bytes {
        turn += 1;
        let call = format!(
            "```flycode-call\n{{\"id\":\"call-{turn}\",\"tool\":\"fs.read\",\"args\":{{\"path\":\"/root/work/app/src/f{turn}.rs\"}}}}\n```"
        );
        let result = format!(
            "```flycode-result\n[id] call-{turn}\n[command] /fs.read /root/work/app/src/f{turn}.rs\n[ok] true\n[data]\n{body}\n```"
        );
        for (role, content) in [
            ("assistant", call),
            ("user", result),
            ("assistant", prose.to_owned()),
        ] {
            out.extend_from_slice(
                json!({"role": role, "content": content})
                    .to_string()
                    .as_bytes(),
            );
            out.push(b'\n');
        }
    }
    out
}

fn validate(c: &mut Criterion) {
    let data = transcript(16 * 1024 * 1024);
    let mut group = c.benchmark_group("validate");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(data.len() as u64));
    group.bench_function("jsonl_16MB_one_core", |b| {
        b.iter(|| {
            let report = check_reader(
                BufReader::new(black_box(&data[..])),
                "bench.jsonl".into(),
                ValidateOptions::default(),
            );
            assert!(report.findings.is_empty());
            report.messages
        })
    });
    group.finish();
}

criterion_group!(benches, validate);
criterion_main!(benches);
