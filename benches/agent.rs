//! Loop overhead per turn without the model: render the special messages (folder notes read
//! through the sandbox), place them in the request, serialize the request body and classify the
//! model's reply.
//!
//! Target: one turn's work under 1 ms with a history of 1000 messages.
//!
//! `subagent_turn`: a whole sub-agent task with a scripted in-process model, through
//! `TaskRunner::run_task` (per task, and per child turn by the slope from 2 to 10 turns).
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
/// files), run one after another and as the loop runs them: at once, 4 at a time (PROTOCOL.md §13 (The API loop: parallel calls)).
fn parallel_reads(c: &mut Criterion) {
    use flycode::agent::parallel::run_bounded;
    use flycode::protocol::{Call, ToolName};
    use flycode::tools::executor::{Approval, Executor, FixedApprover};
    use flycode::tools::policy::{ApprovalMode as Mode, Policy};
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

/// A model that needs no network: `reads` turns of one native `fs_read` call of `file`, then a
/// turn calling `agent_complete`. It serializes each request as the HTTP client would (the
/// body is flycode's work; the network and the model are not).
struct ScriptedModel {
    file: String,
    reads: usize,
    turn: usize,
}

/// The body the client sends: what a child's request costs to put on the wire.
#[derive(Serialize)]
struct NativeRequestBody<'a> {
    model: &'a str,
    messages: &'a [Message],
    tools: &'a [serde_json::Value],
    stream: bool,
}

impl flycode::agent::client::Provider for ScriptedModel {
    fn complete(
        &mut self,
        request: &flycode::agent::client::ChatRequest<'_>,
        _on_event: &mut dyn FnMut(flycode::agent::client::ClientEvent),
        _cancel: &std::sync::atomic::AtomicBool,
    ) -> Result<flycode::agent::client::Completion, flycode::agent::client::ClientError> {
        use flycode::agent::NativeToolCall;
        let body = serde_json::to_vec(&NativeRequestBody {
            model: request.model,
            messages: request.messages,
            tools: request.tools,
            stream: request.stream,
        })
        .expect("serialize");
        black_box(body.len());
        self.turn += 1;
        let call = if self.turn <= self.reads {
            let args = serde_json::json!({ "path": self.file }).to_string();
            NativeToolCall::function(format!("read-{}", self.turn), "fs_read", args)
        } else {
            let args = r#"{"result":"src/lib.rs declares the modules; the parser is in src/parse.rs, lines 1-60."}"#;
            NativeToolCall::function("done", "agent_complete", args)
        };
        Ok(flycode::agent::client::Completion {
            content: String::new(),
            tool_calls: vec![call],
            finish_reason: Some("tool_calls".to_owned()),
            usage: Some(flycode::agent::client::Usage {
                prompt_tokens: 1000,
                completion_tokens: 40,
                total_tokens: 1040,
                ..Default::default()
            }),
        })
    }
}

/// A whole sub-agent task without a model, through `TaskRunner::run_task` as the parent's
/// executor calls it: quota claim, the child's prompt, its read-only executor, its requests
/// (special messages, folder notes), its `fs.read` calls, `agent.complete`, the envelope, and
/// the relayed events. A task of 2 turns (one read, then complete) and one of 10 (nine reads)
/// give the cost of a child turn by their difference; with a transcript, each child message
/// also rewrites the child's JSON Lines file (atomically, synced), as a real run does.
fn subagent_turn(c: &mut Criterion) {
    use flycode::agent::client::{ClientError, ClientSettings, Provider};
    use flycode::agent::prompt::{CallingMode, PromptContext, PromptProfile};
    use flycode::agent::settings::{SettingFlags, resolve_settings};
    use flycode::agent::task::Tasks;
    use flycode::tools::agent::{SubagentType, TaskArgs, TaskRunner};
    use flycode::tools::executor::{Approval, Executor, FixedApprover};
    use flycode::tools::policy::Policy;
    use std::sync::Mutex;
    use std::sync::atomic::AtomicBool;

    let temp = tempfile::tempdir().expect("temp dir");
    let root = std::fs::canonicalize(temp.path()).expect("canonical");
    let conventions = "- Use `cargo fmt` before committing.\n- Errors are thiserror enums.\n";
    std::fs::write(root.join("AGENTS.md"), conventions.repeat(40)).expect("write");
    std::fs::create_dir_all(root.join("src")).expect("mkdir");
    let line = "    let value = compute(input, &options).context(\"computing\")?;\n";
    let file = root.join("src/lib.rs");
    std::fs::write(&file, line.repeat(2048 / line.len())).expect("write");
    let runs = tempfile::tempdir().expect("temp dir");
    let parent_transcript = runs.path().join("run.jsonl");

    let sandbox = Sandbox::open(&Roots::resolve(std::slice::from_ref(&root)).expect("roots"))
        .expect("sandbox");
    let policy = Policy::default();
    let approver = FixedApprover(Approval::Yes);
    let settings = resolve_settings(
        &SettingFlags {
            base_url: Some("http://127.0.0.1:9/v1".to_owned()),
            model: Some("bench".to_owned()),
            ..SettingFlags::default()
        },
        &flycode::config::AgentConfig::default(),
        &|_| None,
    )
    .expect("settings");
    let prompt_context = PromptContext {
        working_directory: root.display().to_string(),
        model_name: settings.model.clone(),
        os_info: format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
        current_date: "2026-01-01".to_owned(),
        roots: vec![root.display().to_string()],
        mode: CallingMode::Native,
        tools: ToolSet::Agent,
        profile: PromptProfile::Full,
        insight: false,
    };
    let cancel = AtomicBool::new(false);
    let task = TaskArgs {
        description: "find the parser".to_owned(),
        prompt: "Find where the parser lives and report its file and lines.".to_owned(),
        subagent_type: SubagentType::Explore,
        model: None,
        name: None,
    };

    let mut group = c.benchmark_group("subagent_turn");
    group.sample_size(20);
    group.measurement_time(std::time::Duration::from_secs(4));
    for transcripts in [Vec::new(), vec![parent_transcript.clone()]] {
        let name = if transcripts.is_empty() {
            "task"
        } else {
            "task_with_transcript"
        };
        for turns in [2usize, 10] {
            let path = file.display().to_string();
            let providers = move |_: &ClientSettings| -> Result<Box<dyn Provider>, ClientError> {
                Ok(Box::new(ScriptedModel {
                    file: path.clone(),
                    reads: turns - 1,
                    turn: 0,
                }))
            };
            let (relay, relayed) = std::sync::mpsc::channel();
            let tasks = Tasks {
                service: Executor::new(&sandbox, &policy, &approver),
                settings: &settings,
                prompt_context: prompt_context.clone(),
                transcripts: transcripts.clone(),
                cancel: &cancel,
                providers: &providers,
                relay,
                lenient: false,
                max_reply_bytes: flycode::config::reply_limit::DEFAULT_MAX_REPLY_BYTES,
                started: Mutex::new(0),
            };
            // The envelope says what the child did: a bench of failing tasks measures nothing.
            let output = tasks.run_task(&task, Some("call-1")).expect("task");
            assert_eq!(output.data["status"], "ok", "{}", output.data);
            assert_eq!(output.data["stats"]["turns"], turns, "{}", output.data);
            group.throughput(Throughput::Elements(turns as u64));
            group.bench_function(BenchmarkId::new(name, format!("{turns}_turns")), |b| {
                b.iter(|| {
                    // A fresh run's count: every iteration is task-1, within the quotas.
                    *tasks.started.lock().expect("count") = 0;
                    let output = tasks.run_task(black_box(&task), Some("call-1"));
                    (output.is_ok(), relayed.try_iter().count())
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, turn, parallel_reads, subagent_turn);
criterion_main!(benches);
