//! Loop overhead per turn without the model: render the special messages (folder notes read
//! through the sandbox), place them in the request, serialize the request body and classify the
//! model's reply.
//!
//! Target: one turn's work under 1 ms with a history of 1000 messages.
#![allow(clippy::expect_used)] // a benchmark that cannot set up has nothing to measure
#![allow(clippy::disallowed_methods)] // a benchmark makes its fixtures directly

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use flycode::agent::Message;
use flycode::agent::context::{
    AgentMemory, SpecialMessages, TodoItem, TodoStatus, assemble_request, folder_notes,
};
use flycode::protocol::{ClassifyOptions, ResultBlock, ToolSet, classify_reply};
use flycode::sandbox::{Roots, Sandbox};
use serde::Serialize;

/// The request body as the client sends it.
#[derive(Serialize)]
struct RequestBody<'a> {
    model: &'a str,
    messages: &'a [Message],
    stream: bool,
}

/// A text-mode reply calling `fs.read`.
fn call_reply(n: usize) -> String {
    format!(
        "```flycode-call\n{{\"id\":\"call-{n:03}\",\"tool\":\"fs.read\",\"args\":{{\"path\":\"/root/work/app/src/module{n}.rs\",\"lines\":\"1-60\"}}}}\n```\n"
    )
}

/// A text-mode history of `len` messages: the task, then replies with a call block and ~2 KB
/// results.
fn history(len: usize) -> Vec<Message> {
    let source = "    let value = compute(input, &options).context(\"computing\")?;\n";
    let body = source.repeat(2048 / source.len());
    let mut messages = vec![Message::user(
        "Fix the failing test in /root/work/app and run the suite.",
    )];
    let mut n = 1;
    while messages.len() < len {
        messages.push(Message::assistant(call_reply(n), Vec::new()));
        let result = ResultBlock::success(
            Some(format!("call-{n:03}")),
            format!("/fs.read /root/work/app/src/module{n}.rs --lines 1-60"),
            Some(body.clone()),
        );
        messages.push(Message::user_result(result.render()));
        n += 1;
    }
    messages.truncate(len);
    messages
}

fn memory() -> AgentMemory {
    let todo = |content: &str, status| TodoItem {
        content: content.to_owned(),
        status,
    };
    AgentMemory {
        todos: vec![
            todo("Reproduce the failing test", TodoStatus::Done),
            todo("Find the cause in the parser", TodoStatus::InProgress),
            todo("Fix it and add a regression test", TodoStatus::Pending),
            todo("Run the whole suite", TodoStatus::Pending),
        ],
        notes: vec![
            "Tests run with `cargo test`; the parser lives in src/parse.rs.".to_owned(),
            "The failing test is parse::tests::crlf_is_normalized.".to_owned(),
            "CI also runs `cargo clippy --all-targets -- -D warnings`.".to_owned(),
        ],
        completion: None,
    }
}

fn turn(c: &mut Criterion) {
    let temp = tempfile::tempdir().expect("temp dir");
    let root = std::fs::canonicalize(temp.path()).expect("canonical");
    let conventions = "- Use `cargo fmt` before committing.\n- Errors are thiserror enums.\n";
    std::fs::write(root.join("AGENTS.md"), conventions.repeat(40)).expect("write");
    std::fs::write(root.join("FLYCODE.md"), conventions.repeat(10)).expect("write");
    let sandbox = Sandbox::open(&Roots::resolve(std::slice::from_ref(&root)).expect("roots"))
        .expect("sandbox");
    let memory = memory();
    let role = "You are flycode's agent: a capable software-engineering agent.";
    let system = "You are flycode's agent. (the built system prompt)";
    let reply = call_reply(999);
    let options = ClassifyOptions {
        tools: ToolSet::Agent,
        ..Default::default()
    };

    let mut group = c.benchmark_group("agent_turn");
    for len in [10, 100, 1000] {
        let history = history(len);
        group.throughput(Throughput::Elements(1));
        group.bench_with_input(BenchmarkId::from_parameter(len), &history, |b, history| {
            b.iter(|| {
                let notes = folder_notes(&sandbox);
                let specials = SpecialMessages::render(role, &memory, &notes);
                let request = assemble_request(Some(system), black_box(history), &specials);
                let body = serde_json::to_vec(&RequestBody {
                    model: "gpt-4.1",
                    messages: &request,
                    stream: true,
                })
                .expect("serialize");
                let verdict = classify_reply(black_box(&reply), options).verdict;
                (body.len(), verdict)
            })
        });
    }
    group.finish();

    // Where the time of the largest turn goes.
    let history = history(1000);
    let notes = folder_notes(&sandbox);
    let specials = SpecialMessages::render(role, &memory, &notes);
    let request = assemble_request(Some(system), &history, &specials);
    let mut group = c.benchmark_group("agent_turn_1000_parts");
    group.bench_function("folder_notes_and_render", |b| {
        b.iter(|| SpecialMessages::render(role, &memory, &folder_notes(black_box(&sandbox))))
    });
    group.bench_function("assemble_request", |b| {
        b.iter(|| assemble_request(Some(system), black_box(&history), &specials))
    });
    group.bench_function("serialize", |b| {
        b.iter(|| {
            serde_json::to_vec(&RequestBody {
                model: "gpt-4.1",
                messages: black_box(&request),
                stream: true,
            })
        })
    });
    group.bench_function("classify_reply", |b| {
        b.iter(|| classify_reply(black_box(&reply), options))
    });
    group.finish();
}

/// One turn of 8 read-only calls (fs.search over a generated tree, 8 directories of 300 source
/// files), run one after another and as the loop runs them: at once, 4 at a time (CONTRACT §11).
fn parallel_reads(c: &mut Criterion) {
    use flycode::agent::parallel::run_bounded;
    use flycode::protocol::{Call, ToolName};
    use flycode::tools::executor::{Approval, Executor, FixedApprover};
    use flycode::tools::policy::{Approval as Mode, Policy};
    use std::sync::atomic::AtomicBool;

    let temp = tempfile::tempdir().expect("temp dir");
    let root = std::fs::canonicalize(temp.path()).expect("canonical");
    let line = "    let value = compute(input, &options).context(\"computing\")?;\n";
    for dir in 0..8 {
        let dir = root.join(format!("module{dir}"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        for file in 0..300 {
            let text = format!("{}// marker {file}\n", line.repeat(60));
            std::fs::write(dir.join(format!("file{file}.rs")), text).expect("write");
        }
    }
    let sandbox = Sandbox::open(&Roots::resolve(std::slice::from_ref(&root)).expect("roots"))
        .expect("sandbox");
    let policy = Policy {
        approval: Mode::Auto,
        ..Policy::default()
    };
    let approver = FixedApprover(Approval::Yes);
    let executor = Executor::new(&sandbox, &policy, &approver);
    let calls: Vec<Call> = (0..8)
        .map(|n| Call {
            id: Some(format!("s{n}")),
            tool: ToolName::FsSearch,
            args: serde_json::json!({
                "path": root.join(format!("module{n}")),
                "query": "marker 299",
            })
            .as_object()
            .cloned()
            .expect("object"),
        })
        .collect();
    let never = AtomicBool::new(false);
    let mut group = c.benchmark_group("agent_turn_8_searches");
    group.sample_size(20);
    group.bench_function("sequential", |b| {
        b.iter(|| {
            calls
                .iter()
                .map(|call| executor.execute(black_box(call)).is_ok())
                .filter(|ok| *ok)
                .count()
        })
    });
    group.bench_function("parallel_4", |b| {
        b.iter(|| {
            run_bounded(
                black_box(&calls),
                4,
                &never,
                |call| executor.execute(call).is_ok(),
                |_| {},
            )
            .into_iter()
            .filter(|ok| *ok == Some(true))
            .count()
        })
    });
    group.finish();
}

criterion_group!(benches, turn, parallel_reads);
criterion_main!(benches);
