//! The OpenAI client against the scripted loopback server: streaming and whole replies, tool
//! calls, retries, errors, timeouts, cancellation and the API key.
//!
//! Whatever waits (back-off, `Retry-After`, timeouts, cancellation) runs on a runtime whose clock
//! starts paused ([`VirtualClock`]), with the server on the same clock: the tests assert the
//! waits the client asked for and the virtual time they took, never how long a machine took.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flycode::agent::client::{
    ApiKey, ChatRequest, ClientError, ClientEvent, ClientSettings, Completion, OpenAiProvider,
    Provider,
};
use flycode::agent::message::{Message, NativeToolCall};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::api_server::{RecordedRequest, Reply, ScriptedServer, VirtualClock};

/// The README's defaults: 500 ms first back-off, 4 retries, 10 s to connect, 120 s of silence.
fn settings(server: &ScriptedServer) -> ClientSettings {
    ClientSettings::new(server.base_url())
}

fn messages() -> Vec<Message> {
    vec![
        Message::system("You are terse."),
        Message::user("Say hello."),
    ]
}

/// Runs one completion on a runtime of the provider's own; returns it with the events seen.
fn complete(
    settings: ClientSettings,
    stream: bool,
) -> (Result<Completion, ClientError>, Vec<ClientEvent>) {
    let cancel = AtomicBool::new(false);
    complete_with(settings, stream, &[], &cancel)
}

fn complete_with(
    settings: ClientSettings,
    stream: bool,
    tools: &[Value],
    cancel: &AtomicBool,
) -> (Result<Completion, ClientError>, Vec<ClientEvent>) {
    let mut provider = OpenAiProvider::new(settings).unwrap();
    run(&mut provider, stream, tools, cancel, &mut |_| {})
}

/// Runs one completion on `provider`; `watch` sees every event as it comes (on the client's
/// runtime, so it may read the client's clock or set the cancel flag).
fn run(
    provider: &mut OpenAiProvider,
    stream: bool,
    tools: &[Value],
    cancel: &AtomicBool,
    watch: &mut dyn FnMut(&ClientEvent),
) -> (Result<Completion, ClientError>, Vec<ClientEvent>) {
    let messages = messages();
    let request = ChatRequest {
        model: "test-model",
        messages: &messages,
        tools,
        stream,
        max_tokens: 1024,
    };
    let mut events = Vec::new();
    let result = provider.complete(
        &request,
        &mut |event| {
            watch(&event);
            events.push(event);
        },
        cancel,
    );
    (result, events)
}

/// A scripted server and a client on one paused clock.
struct Paused {
    clock: VirtualClock,
    server: ScriptedServer,
    /// When each request reached the server, on the clock.
    arrivals: Arc<Mutex<Vec<Instant>>>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Paused {
    /// A server answering request `index` with `respond(request, index)`.
    fn start(respond: impl Fn(&RecordedRequest, usize) -> Reply + Send + Sync + 'static) -> Paused {
        let (runtime, clock) = VirtualClock::paused_runtime();
        let arrivals = Arc::new(Mutex::new(Vec::new()));
        let server = {
            let now = clock.clone();
            let arrivals = Arc::clone(&arrivals);
            ScriptedServer::on_clock(&clock, move |request, index| {
                arrivals.lock().unwrap().push(now.now());
                respond(request, index)
            })
        };
        Paused {
            clock,
            server,
            arrivals,
            runtime: Some(runtime),
        }
    }

    /// A server answering with `replies` in order, the last one repeated.
    fn sequence(replies: Vec<Reply>) -> Paused {
        Paused::start(move |_, index| replies[index.min(replies.len() - 1)].clone())
    }

    /// The README's defaults, but a day to connect and of silence: a request on the wire lets
    /// virtual time pass (the idle runtime jumps to its next timer), and that must not end it.
    fn settings(&self) -> ClientSettings {
        ClientSettings {
            connect_timeout: DAY,
            read_timeout: DAY,
            first_byte_timeout: DAY,
            ..settings(&self.server)
        }
    }

    /// The client, on the paused runtime (once).
    fn provider(&mut self, settings: ClientSettings) -> OpenAiProvider {
        OpenAiProvider::with_runtime(settings, self.runtime.take().unwrap()).unwrap()
    }

    fn arrivals(&self) -> Vec<Instant> {
        self.arrivals.lock().unwrap().clone()
    }
}

const DAY: Duration = Duration::from_secs(24 * 3600);

fn streamed_text(events: &[ClientEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            ClientEvent::TextDelta(text) => Some(text.as_str()),
            ClientEvent::Retrying { .. } | ClientEvent::Waiting { .. } => None,
        })
        .collect()
}

fn retries(events: &[ClientEvent]) -> Vec<(u32, Duration, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            ClientEvent::Retrying {
                attempt,
                delay,
                reason,
            } => Some((*attempt, *delay, reason.clone())),
            ClientEvent::TextDelta(_) | ClientEvent::Waiting { .. } => None,
        })
        .collect()
}

/// Runs one completion on `provider` with nothing watching.
fn complete_on(
    provider: &mut OpenAiProvider,
    stream: bool,
) -> (Result<Completion, ClientError>, Vec<ClientEvent>) {
    let cancel = AtomicBool::new(false);
    run(provider, stream, &[], &cancel, &mut |_| {})
}

/// Runs one completion on `paused`'s client, noting on the clock when each retry was
/// announced; returns the result, the events and those instants.
fn run_timing_retries(
    paused: &Paused,
    provider: &mut OpenAiProvider,
    stream: bool,
) -> (
    Result<Completion, ClientError>,
    Vec<ClientEvent>,
    Vec<Instant>,
) {
    let cancel = AtomicBool::new(false);
    let mut announced = Vec::new();
    let (result, events) = run(provider, stream, &[], &cancel, &mut |event| {
        if let ClientEvent::Retrying { .. } = event {
            announced.push(paused.clock.now());
        }
    });
    (result, events, announced)
}

/// Each retry reached the server no sooner than the wait announced before it.
fn assert_each_retry_waited(paused: &Paused, events: &[ClientEvent], announced: &[Instant]) {
    let arrivals = paused.arrivals();
    let delays: Vec<Duration> = retries(events).iter().map(|r| r.1).collect();
    assert_eq!(arrivals.len(), delays.len() + 1, "{arrivals:?}");
    for (retry, delay) in delays.iter().enumerate() {
        let waited = arrivals[retry + 1] - announced[retry];
        assert!(
            waited >= *delay,
            "retry {retry}: waited {waited:?} < {delay:?}"
        );
    }
}

const TEXT: &str = "Hello, w\u{f6}rld \u{1F600}! \u{65e5}\u{672c}\u{8a9e} done.";

#[test]
fn streams_text_split_at_odd_boundaries_inside_characters_and_crlf() {
    for split_every in [1, 2, 3, 5, 7, 13, 64] {
        let server = ScriptedServer::always(Reply::sse_text(TEXT, split_every));
        let (result, events) = complete(settings(&server), true);
        let completion = result.unwrap();
        assert_eq!(completion.content, TEXT, "split every {split_every}");
        assert_eq!(streamed_text(&events), TEXT);
        assert!(events.len() > 3, "text arrives in pieces");
        assert_eq!(completion.finish_reason.as_deref(), Some("stop"));
        assert!(completion.tool_calls.is_empty());
    }
}

#[test]
fn sends_a_streaming_chat_completions_request() {
    let server = ScriptedServer::always(Reply::sse_text("ok", 4));
    let tools = [json!({"type": "function", "function": {"name": "fs_read", "parameters": {}}})];
    let cancel = AtomicBool::new(false);
    complete_with(settings(&server), true, &tools, &cancel)
        .0
        .unwrap();
    let request = &server.requests()[0];
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(request.body["model"], "test-model");
    assert_eq!(request.body["stream"], true);
    assert_eq!(
        request.body["stream_options"],
        json!({"include_usage": true})
    );
    assert_eq!(request.body["tools"], json!(tools));
    assert_eq!(
        request.body["messages"],
        json!([{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say hello."}])
    );
}

#[test]
fn a_whole_request_omits_stream_options_and_empty_tools() {
    let server = ScriptedServer::always(Reply::completion_text("ok"));
    let mut settings = settings(&server);
    settings.base_url.push('/');
    complete(settings, false).0.unwrap();
    let request = &server.requests()[0];
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(request.body["stream"], false);
    assert!(request.body.get("stream_options").is_none());
    assert!(request.body.get("tools").is_none());
}

#[test]
fn reads_usage_from_the_final_chunk() {
    let server = ScriptedServer::always(Reply::sse_text(TEXT, 9));
    let usage = complete(settings(&server), true).0.unwrap().usage.unwrap();
    let chars = TEXT.chars().count() as u64;
    assert_eq!(
        (
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.total_tokens
        ),
        (7, chars, 7 + chars)
    );
}

#[test]
fn assembles_streamed_tool_calls_from_argument_pieces() {
    let calls = [
        (
            "call_a",
            "fs_read",
            r#"{"path":"/work/src/main.rs","lines":[1,40]}"#,
        ),
        ("call_b", "fs_ls", r#"{"path":"/work"}"#),
    ];
    let server = ScriptedServer::always(Reply::sse_tool_calls(&calls));
    let (result, events) = complete(settings(&server), true);
    let completion = result.unwrap();
    let expected: Vec<NativeToolCall> = calls
        .iter()
        .map(|(id, name, args)| NativeToolCall::function(*id, *name, *args))
        .collect();
    assert_eq!(completion.tool_calls, expected);
    assert_eq!(completion.content, "");
    assert_eq!(completion.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(completion.usage.unwrap().total_tokens, 16);
    assert!(streamed_text(&events).is_empty());
}

#[test]
fn reads_whole_text_and_tool_call_replies() {
    let server = ScriptedServer::always(Reply::completion_text(TEXT));
    let (result, events) = complete(settings(&server), false);
    let completion = result.unwrap();
    assert_eq!(completion.content, TEXT);
    assert_eq!(events, vec![ClientEvent::TextDelta(TEXT.to_owned())]);
    assert_eq!(completion.usage.unwrap().total_tokens, 13);

    let server = ScriptedServer::always(Reply::completion_tool_calls(&[(
        "c1",
        "fs_read",
        r#"{"path":"/w/a"}"#,
    )]));
    let completion = complete(settings(&server), false).0.unwrap();
    assert_eq!(completion.content, "");
    assert_eq!(
        completion.tool_calls,
        vec![NativeToolCall::function(
            "c1",
            "fs_read",
            r#"{"path":"/w/a"}"#
        )]
    );
    assert_eq!(completion.finish_reason.as_deref(), Some("tool_calls"));
}

#[test]
fn retries_429_after_the_servers_retry_after() {
    let mut paused = Paused::sequence(vec![
        Reply::error(429, "slow down").with_header("Retry-After", "1"),
        Reply::completion_text("ok"),
    ]);
    let mut provider = paused.provider(paused.settings());
    let (result, events, announced) = run_timing_retries(&paused, &mut provider, false);
    assert_eq!(result.unwrap().content, "ok");
    assert_eq!(paused.server.requests().len(), 2);
    let retries = retries(&events);
    assert_eq!(retries.len(), 1);
    let (attempt, delay, reason) = &retries[0];
    assert_eq!(*attempt, 1);
    assert_eq!(*delay, Duration::from_secs(1));
    assert!(
        reason.contains("429") && reason.contains("slow down"),
        "{reason}"
    );
    assert_each_retry_waited(&paused, &events, &announced);
}

#[test]
fn a_retry_after_date_is_waited_for_up_to_the_cap() {
    let mut paused = Paused::sequence(vec![
        Reply::error(429, "come back next century")
            .with_header("Retry-After", "Wed, 21 Oct 2099 07:28:00 GMT"),
        Reply::status(503).with_header("Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT"),
        Reply::completion_text("ok"),
    ]);
    let mut provider = paused.provider(paused.settings());
    let (result, events, announced) = run_timing_retries(&paused, &mut provider, false);
    assert_eq!(result.unwrap().content, "ok");
    let delays: Vec<Duration> = retries(&events).iter().map(|r| r.1).collect();
    assert_eq!(
        delays,
        [Duration::from_secs(120), Duration::ZERO],
        "a far date is capped at 120 s, a past one means no wait"
    );
    assert_each_retry_waited(&paused, &events, &announced);
}

#[test]
fn backs_off_with_full_jitter_then_gives_up_on_500_when_the_budget_is_spent() {
    let mut paused = Paused::start(|_, _| Reply::status(500));
    let mut settings = paused.settings();
    settings.max_retries = 3;
    let base = settings.retry_base;
    let mut provider = paused.provider(settings);
    let (result, events, announced) = run_timing_retries(&paused, &mut provider, true);
    assert_eq!(paused.server.requests().len(), 4);
    let retries = retries(&events);
    let attempts: Vec<u32> = retries.iter().map(|r| r.0).collect();
    assert_eq!(attempts, [1, 2, 3]);
    for (attempt, delay, _) in &retries {
        // Full jitter: anywhere below the doubled ceiling (500 ms, 1 s, 2 s).
        let ceiling = base * 2u32.pow(attempt - 1);
        assert!(
            *delay < ceiling,
            "retry {attempt}: {delay:?} >= {ceiling:?}"
        );
    }
    assert_each_retry_waited(&paused, &events, &announced);
    let error = result.unwrap_err();
    assert!(
        matches!(&error, ClientError::RetriesExhausted { attempts: 4, last }
            if matches!(**last, ClientError::Http { status: 500, .. })),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains("HTTP 500") && message.contains("4 attempts"),
        "{message}"
    );
}

#[test]
fn a_400_is_not_retried_and_carries_the_servers_message() {
    let server = ScriptedServer::always(Reply::error(400, "model 'x' does not exist"));
    let (result, events) = complete(settings(&server), true);
    assert_eq!(server.requests().len(), 1);
    assert!(retries(&events).is_empty());
    let error = result.unwrap_err();
    assert!(
        matches!(error, ClientError::Http { status: 400, .. }),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("model 'x' does not exist"),
        "{error}"
    );
}

#[test]
fn a_long_error_body_is_cut_to_an_excerpt() {
    let server = ScriptedServer::always(Reply::Status {
        status: 422,
        headers: Vec::new(),
        body: "x".repeat(10_000),
    });
    let error = complete(settings(&server), false).0.unwrap_err();
    let ClientError::Http { message, .. } = &error else {
        panic!("{error:?}")
    };
    assert!(message.len() <= 510, "{}", message.len());
}

#[test]
fn a_payload_that_is_not_json_is_a_malformed_stream() {
    let good = json!({"choices": [{"index": 0, "delta": {"content": "Hi"}}]});
    let mut body = format!("data: {good}\n\n").into_bytes();
    body.extend_from_slice(b"data: {\"choices\": [oops\n\n");
    let server = ScriptedServer::always(Reply::sse_bytes(&body, 5));
    let (result, events) = complete(settings(&server), true);
    assert_eq!(streamed_text(&events), "Hi");
    let error = result.unwrap_err();
    assert!(
        matches!(error, ClientError::MalformedStream { .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains("not JSON") && message.contains("oops"),
        "{message}"
    );
    assert_eq!(server.requests().len(), 1, "not retried");
}

#[test]
fn a_payload_of_the_wrong_shape_is_a_malformed_stream() {
    let server = ScriptedServer::always(Reply::sse_events(&[json!({"choices": "many"})], true, 8));
    let error = complete(settings(&server), true).0.unwrap_err();
    assert!(
        matches!(error, ClientError::MalformedStream { .. }),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("not a chat completion chunk"),
        "{error}"
    );
}

#[test]
fn an_error_object_in_the_stream_is_reported_with_its_message() {
    let events = [
        json!({"choices": [{"index": 0, "delta": {"content": "Hi"}}]}),
        json!({"error": {"message": "the model is overloaded", "type": "server_error"}}),
    ];
    let server = ScriptedServer::always(Reply::sse_events(&events, false, 11));
    let error = complete(settings(&server), true).0.unwrap_err();
    assert!(
        matches!(error, ClientError::ServerError { .. }),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("the model is overloaded"),
        "{error}"
    );
}

#[test]
fn a_stream_cut_before_done_and_finish_reason_is_an_error() {
    let events = [
        json!({"choices": [{"index": 0, "delta": {"content": "Hel"}}]}),
        json!({"choices": [{"index": 0, "delta": {"content": "lo"}}]}),
    ];
    let server = ScriptedServer::always(Reply::sse_events(&events, false, 6));
    let (result, events) = complete(settings(&server), true);
    assert_eq!(streamed_text(&events), "Hello");
    let error = result.unwrap_err();
    assert!(matches!(error, ClientError::Truncated { .. }), "{error:?}");
}

#[test]
fn a_stream_with_finish_reason_but_no_done_is_complete() {
    let events =
        [json!({"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": "stop"}]})];
    let server = ScriptedServer::always(Reply::sse_events(&events, false, 6));
    assert_eq!(complete(settings(&server), true).0.unwrap().content, "Hi");
}

#[test]
fn a_server_stalling_mid_stream_ends_in_a_timeout() {
    let events = [json!({"choices": [{"index": 0, "delta": {"content": "Hel"}}]})];
    let mut paused = Paused::sequence(vec![Reply::sse_then_stall(&events)]);
    let mut settings = paused.settings();
    settings.read_timeout = Duration::from_secs(30);
    let mut provider = paused.provider(settings);
    let cancel = AtomicBool::new(false);
    let mut text_at = None;
    let (result, events) = run(&mut provider, true, &[], &cancel, &mut |_| {
        text_at.get_or_insert(paused.clock.now());
    });
    let silence = paused.clock.now() - text_at.unwrap();
    assert_eq!(streamed_text(&events), "Hel");
    let error = result.unwrap_err();
    assert!(
        matches!(
            error,
            ClientError::Timeout {
                connecting: false,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(error.to_string().contains("30 s"), "{error}");
    assert!(silence >= Duration::from_secs(30), "{silence:?}");
    assert_eq!(
        paused.server.requests().len(),
        1,
        "not retried once text was shown"
    );
}

#[test]
fn a_stream_of_keep_alives_alone_times_out() {
    // Bytes every 10 s, none of them an event: each read is well within the 30 s allowed, but
    // the server says nothing for longer (if that went unnoticed, the stream would end after
    // the twelfth comment, cut short).
    let gap = Duration::from_secs(10);
    let mut paused = Paused::sequence(vec![Reply::Sse {
        chunks: vec![b": keep-alive\n\n".to_vec(); 12],
        delay_between: gap,
    }]);
    let mut settings = paused.settings();
    settings.read_timeout = gap / 2;
    // Before the first event, the first-byte timeout is the silence allowed (a local model
    // reading the prompt), and the caller hears every few seconds that the wait goes on.
    settings.first_byte_timeout = 3 * gap;
    let mut provider = paused.provider(settings);
    let started = paused.clock.now();
    let (result, events) = complete_on(&mut provider, true);
    let waited = paused.clock.now() - started;
    assert!(
        events
            .iter()
            .all(|e| matches!(e, ClientEvent::Waiting { .. })),
        "{events:?}"
    );
    assert!(!events.is_empty(), "the wait was reported");
    let error = result.unwrap_err();
    assert!(
        matches!(error, ClientError::FirstByteTimeout { .. }),
        "{error:?}"
    );
    assert!(waited >= 3 * gap, "{waited:?}");
    assert_eq!(
        paused.server.requests().len(),
        1,
        "a started stream is not retried"
    );
}

#[test]
fn a_server_that_never_answers_is_retried_then_times_out() {
    let mut paused = Paused::sequence(vec![Reply::Stall { after: Vec::new() }]);
    let mut settings = paused.settings();
    settings.connect_timeout = Duration::from_secs(10);
    settings.read_timeout = Duration::from_secs(30);
    // No response head at all: the first-byte timeout, retried.
    settings.first_byte_timeout = Duration::from_secs(30);
    settings.max_retries = 1;
    let mut provider = paused.provider(settings);
    let started = paused.clock.now();
    let error = complete_on(&mut provider, false).0.unwrap_err();
    let waited = paused.clock.now() - started;
    assert!(
        matches!(&error, ClientError::RetriesExhausted { attempts: 2, last }
            if matches!(**last, ClientError::FirstByteTimeout { .. })),
        "{error:?}"
    );
    assert!(waited >= 2 * Duration::from_secs(30), "{waited:?}");
}

#[test]
fn a_hang_up_without_answer_is_retried() {
    let mut paused = Paused::sequence(vec![Reply::Close, Reply::completion_text("ok")]);
    let mut provider = paused.provider(paused.settings());
    let (result, events, announced) = run_timing_retries(&paused, &mut provider, false);
    assert_eq!(result.unwrap().content, "ok");
    assert_eq!(retries(&events).len(), 1);
    assert_each_retry_waited(&paused, &events, &announced);
}

#[test]
fn a_refused_connection_is_a_connect_error() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let mut settings = ClientSettings::new(format!("http://127.0.0.1:{port}/v1"));
    settings.max_retries = 0;
    let error = complete(settings, true).0.unwrap_err();
    let ClientError::RetriesExhausted { last, .. } = &error else {
        panic!("{error:?}")
    };
    assert!(matches!(**last, ClientError::Connect { .. }), "{error:?}");
    assert!(error.to_string().contains("--base-url"), "{error}");
}

#[test]
fn cancellation_abandons_a_stalled_stream() {
    let events = [json!({"choices": [{"index": 0, "delta": {"content": "Let me"}}]})];
    let mut paused = Paused::sequence(vec![Reply::sse_then_stall(&events)]);
    // The default read timeout: were the flag not watched, the request would end in a timeout.
    let mut provider = paused.provider(settings(&paused.server));
    let cancel = AtomicBool::new(false);
    let (result, events) = run(&mut provider, true, &[], &cancel, &mut |event| {
        if let ClientEvent::TextDelta(_) = event {
            cancel.store(true, Ordering::SeqCst);
        }
    });
    assert_eq!(streamed_text(&events), "Let me");
    assert!(matches!(result, Err(ClientError::Cancelled)), "{result:?}");
    assert_eq!(paused.server.requests().len(), 1);
}

#[test]
fn cancellation_abandons_a_request_waiting_for_its_answer() {
    let cancel = Arc::new(AtomicBool::new(false));
    let mut paused = {
        let cancel = Arc::clone(&cancel);
        // Ctrl-C comes while the server sits on the request.
        Paused::start(move |_, _| {
            cancel.store(true, Ordering::SeqCst);
            Reply::Stall { after: Vec::new() }
        })
    };
    let mut provider = paused.provider(settings(&paused.server));
    let (result, events) = run(&mut provider, true, &[], &cancel, &mut |_| {});
    assert!(matches!(result, Err(ClientError::Cancelled)), "{result:?}");
    assert!(events.is_empty(), "{events:?}");
    assert_eq!(paused.server.requests().len(), 1);
}

#[test]
fn cancellation_interrupts_a_back_off_sleep() {
    let mut paused = Paused::sequence(vec![Reply::status(503).with_header("Retry-After", "100")]);
    let mut provider = paused.provider(paused.settings());
    let cancel = AtomicBool::new(false);
    let mut announced = None;
    let (result, events) = run(&mut provider, false, &[], &cancel, &mut |event| {
        if let ClientEvent::Retrying { .. } = event {
            announced = Some(paused.clock.now());
            cancel.store(true, Ordering::SeqCst);
        }
    });
    let waited = paused.clock.now() - announced.unwrap();
    assert!(matches!(result, Err(ClientError::Cancelled)), "{result:?}");
    assert_eq!(retries(&events)[0].1, Duration::from_secs(100));
    assert!(
        waited < Duration::from_secs(100),
        "the wait ran out: {waited:?}"
    );
    assert_eq!(paused.server.requests().len(), 1);
}

#[test]
fn sends_the_api_key_only_when_set() {
    let server = ScriptedServer::always(Reply::completion_text("ok"));
    complete(settings(&server), false).0.unwrap();
    let mut with_key = settings(&server);
    with_key.api_key = Some(ApiKey::new("sk-test-123"));
    complete(with_key, false).0.unwrap();
    let requests = server.requests();
    assert_eq!(requests[0].header("authorization"), None);
    assert_eq!(
        requests[1].header("authorization"),
        Some("Bearer sk-test-123")
    );
}

#[test]
fn the_api_key_never_appears_in_errors() {
    const KEY: &str = "sk-very-secret-key-42";
    let echo = format!("Incorrect API key provided: {KEY}.");
    let replies = [
        Reply::error(401, &echo),
        Reply::status(500),
        Reply::sse_bytes(format!("data: {{{KEY}\n\n").as_bytes(), 3),
        Reply::json(200, json!({"error": {"message": echo}})),
    ];
    for reply in replies {
        let mut paused = Paused::sequence(vec![reply]);
        let mut settings = paused.settings();
        settings.api_key = Some(ApiKey::new(KEY));
        settings.max_retries = 1;
        let debug_settings = format!("{settings:?}");
        assert!(!debug_settings.contains(KEY));
        let mut provider = paused.provider(settings);
        let error = complete_on(&mut provider, true).0.unwrap_err();
        assert!(!error.to_string().contains(KEY), "{error}");
        assert!(!format!("{error:?}").contains(KEY), "{error:?}");
        assert_eq!(
            paused.server.requests()[0].header("authorization"),
            Some(format!("Bearer {KEY}").as_str())
        );
    }
}

#[test]
fn a_bad_base_url_is_refused_up_front() {
    let error = OpenAiProvider::new(ClientSettings::new("not a url")).unwrap_err();
    assert!(
        matches!(error, ClientError::InvalidSettings { .. }),
        "{error:?}"
    );
    let error = OpenAiProvider::new(ClientSettings::new("ftp://127.0.0.1/v1")).unwrap_err();
    assert!(error.to_string().contains("http://"), "{error}");
}

#[test]
fn an_endless_answer_is_abandoned_at_the_size_limit() {
    // With a 64 KiB reply limit, the body may carry 4 x 64 KiB + 64 KiB around the reply.
    let limited = |server: &ScriptedServer| {
        let mut settings = settings(server);
        settings.max_reply_bytes = 64 * 1024;
        settings
    };
    let allowance = flycode::agent::client::framing_allowance(64 * 1024);
    let line = format!(": {}\n", "x".repeat(1 << 20));
    let body = line.repeat(allowance / (1 << 20) + 2);
    let server = ScriptedServer::always(Reply::sse_bytes(body.as_bytes(), 1 << 20));
    let (result, _) = complete(limited(&server), true);
    let error = result.unwrap_err();
    assert!(matches!(error, ClientError::TooLarge { .. }), "{error:?}");
    assert!(error.to_string().contains("65536 bytes"), "{error}");
    assert!(error.to_string().contains("max_reply_bytes"), "{error}");
    assert_eq!(server.requests().len(), 1, "not retried");

    let whole = format!("{{\"pad\": \"{}\"}}", "y".repeat(allowance + 1));
    let server = ScriptedServer::always(Reply::Status {
        status: 200,
        headers: vec![("Content-Type".into(), "application/json".into())],
        body: whole,
    });
    let (result, _) = complete(limited(&server), false);
    assert!(
        matches!(result, Err(ClientError::TooLarge { .. })),
        "{result:?}"
    );
    assert_eq!(server.requests().len(), 1, "not retried");
}

#[test]
fn a_stream_past_the_turn_time_limit_is_cut_and_its_text_kept() {
    let gap = Duration::from_secs(60);
    let chunks = (0..10)
        .map(|i| {
            let event =
                json!({"choices": [{"index": 0, "delta": {"content": format!("part {i}. ")}}]});
            format!("data: {event}\n\n").into_bytes()
        })
        .collect();
    let mut paused = Paused::sequence(vec![Reply::Sse {
        chunks,
        delay_between: gap,
    }]);
    let mut settings = paused.settings();
    settings.turn_timeout = Some(gap * 5 / 2);
    let mut provider = paused.provider(settings);
    let (result, _) = complete_on(&mut provider, true);
    let completion = result.unwrap();
    assert_eq!(
        completion.finish_reason.as_deref(),
        Some(flycode::agent::client::CUT_TIME_LIMIT)
    );
    assert!(completion.content.starts_with("part 0. "), "{completion:?}");
    assert!(!completion.content.contains("part 9."), "{completion:?}");
}
