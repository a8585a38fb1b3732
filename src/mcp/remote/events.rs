//! The recent events of `flycode mcp --http`'s streams, kept so that a client whose stream
//! dropped can pick it up where it left off (`Last-Event-ID`: PROTOCOL.md §14, "Over HTTP").
//!
//! rmcp stores every event it sends on a stream here ([`EventStore::store_event`]) and, when a
//! client comes back with the id of the last event it saw, asks for the rest
//! ([`EventStore::replay_events_after`]). The replay follows the stream as it goes on: the
//! events kept after that id, then each new one as it is stored, until the stream's answer
//! (the response that ends a request's stream) or until the client goes away. So a call keeps
//! running while its client reconnects, and its result reaches it.
//!
//! Bounded: at most [`MAX_EVENTS`] events and [`MAX_BYTES`] bytes of messages are kept, the
//! oldest forgotten first; a client that comes back after its events were forgotten gets an
//! empty stream (rmcp's answer to an unknown id) and sends its request again.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use rmcp::model::ServerJsonRpcMessage;
use rmcp::transport::streamable_http_server::session::{
    EventId, EventStore, EventStoreError, EventStream, ServerSseMessage,
};
use tokio::sync::{Notify, mpsc};

/// The most events kept.
pub(crate) const MAX_EVENTS: usize = 4096;
/// The most bytes of messages kept (as JSON).
pub(crate) const MAX_BYTES: usize = 64 * 1024 * 1024;
/// Events a replay holds ready for a slow reader; past this it waits for the reader.
const REPLAY_BUFFER: usize = 16;

/// The recent events of every stream, in the order they were stored. Cheap to clone: every
/// clone is the same store.
#[derive(Clone)]
pub(crate) struct RecentEvents {
    inner: Arc<Inner>,
}

struct Inner {
    kept: Mutex<Kept>,
    /// Woken at every stored event, for the replays that follow their stream.
    stored: Notify,
    /// Makes the ids of this process's events its own: an id from another run is unknown.
    run: String,
}

#[derive(Default)]
struct Kept {
    /// The number the next event gets.
    next: u64,
    events: VecDeque<Kept1>,
    bytes: usize,
}

/// One kept event.
struct Kept1 {
    number: u64,
    stream: Arc<str>,
    event: ServerSseMessage,
    bytes: usize,
    /// The event carries the answer that ends its stream.
    ends_stream: bool,
}

impl RecentEvents {
    /// An empty store; `run` goes into every id (something unique to this process).
    pub(crate) fn new(run: String) -> RecentEvents {
        RecentEvents {
            inner: Arc::new(Inner {
                kept: Mutex::new(Kept::default()),
                stored: Notify::new(),
                run,
            }),
        }
    }

    /// Keeps `event` of `stream`, forgetting the oldest past the bounds, and returns its id.
    fn keep(&self, stream: &str, event: &ServerSseMessage) -> EventId {
        let bytes = event.message.as_deref().map_or(0, message_bytes);
        let ends_stream = event.message.as_deref().is_some_and(|message| {
            matches!(
                message,
                ServerJsonRpcMessage::Response(_) | ServerJsonRpcMessage::Error(_)
            )
        });
        let id = {
            let mut kept = lock(&self.inner.kept);
            let number = kept.next;
            kept.next += 1;
            kept.bytes += bytes;
            kept.events.push_back(Kept1 {
                number,
                stream: Arc::from(stream),
                event: event.clone(),
                bytes,
                ends_stream,
            });
            while kept.events.len() > MAX_EVENTS || kept.bytes > MAX_BYTES {
                let Some(oldest) = kept.events.pop_front() else {
                    break;
                };
                kept.bytes -= oldest.bytes;
            }
            format!("{}-{number}", self.inner.run)
        };
        self.inner.stored.notify_waiters();
        id
    }

    /// The number of the event `id` names, if it is one of this run's.
    fn number_of(&self, id: &str) -> Option<u64> {
        id.strip_prefix(&self.inner.run)?
            .strip_prefix('-')?
            .parse()
            .ok()
    }

    /// The stream of the kept event numbered `number`, and whether that event ended it.
    fn stream_of(&self, number: u64) -> Option<(Arc<str>, bool)> {
        let kept = lock(&self.inner.kept);
        kept.events
            .iter()
            .find(|kept| kept.number == number)
            .map(|kept| (Arc::clone(&kept.stream), kept.ends_stream))
    }

    /// The first kept event of `stream` after `number`, with its id, and whether it ends the
    /// stream; `Err(Forgotten)` when events after `number` were forgotten before they were read.
    fn next_after(
        &self,
        stream: &str,
        number: u64,
    ) -> Result<Option<(u64, ServerSseMessage, bool)>, Forgotten> {
        let kept = lock(&self.inner.kept);
        if kept
            .events
            .front()
            .is_some_and(|first| first.number > number + 1)
        {
            return Err(Forgotten);
        }
        Ok(kept
            .events
            .iter()
            .find(|kept| kept.number > number && *kept.stream == *stream)
            .map(|kept| {
                let mut event = kept.event.clone();
                event.event_id = Some(format!("{}-{}", self.inner.run, kept.number));
                (kept.number, event, kept.ends_stream)
            }))
    }
}

/// Events a replay needed were forgotten before it read them.
struct Forgotten;

/// How many bytes `message` takes as JSON, counted without keeping the text.
fn message_bytes(message: &ServerJsonRpcMessage) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    let _ = serde_json::to_writer(&mut counter, message);
    counter.0
}

#[async_trait::async_trait]
impl EventStore for RecentEvents {
    async fn store_event(
        &self,
        stream_id: &str,
        event: &ServerSseMessage,
    ) -> Result<EventId, EventStoreError> {
        Ok(self.keep(stream_id, event))
    }

    async fn replay_events_after(
        &self,
        last_event_id: &str,
    ) -> Result<EventStream, EventStoreError> {
        let unknown = || -> EventStoreError {
            format!("no event {last_event_id} is kept (it is another run's, or was forgotten)")
                .into()
        };
        let number = self.number_of(last_event_id).ok_or_else(unknown)?;
        let (stream, ended) = self.stream_of(number).ok_or_else(unknown)?;
        let (sender, receiver) = mpsc::channel(REPLAY_BUFFER);
        if !ended {
            tokio::spawn(follow(self.clone(), stream, number, sender));
        }
        Ok(Box::pin(tokio_stream::wrappers::ReceiverStream::new(
            receiver,
        )))
    }
}

/// Sends the events of `stream` after `number` to `sender`, as they are kept, until the one
/// that ends the stream, until the reader goes away, or until the events it needs were
/// forgotten.
async fn follow(
    store: RecentEvents,
    stream: Arc<str>,
    mut number: u64,
    sender: mpsc::Sender<ServerSseMessage>,
) {
    loop {
        // Registered before looking, so an event kept in between still wakes it.
        let stored = store.inner.stored.notified();
        match store.next_after(&stream, number) {
            Err(Forgotten) => return,
            Ok(Some((next, event, ends_stream))) => {
                if sender.send(event).await.is_err() || ends_stream {
                    return;
                }
                number = next;
            }
            Ok(None) => {
                tokio::select! {
                    () = stored => {}
                    () = sender.closed() => return,
                }
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
