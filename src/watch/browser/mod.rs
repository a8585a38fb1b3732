//! The browser as a reply source (`flycode watch --browser`, PROTOCOL.md §12, "The browser
//! companion's loopback API"): the flycode extension sends each finished reply of a chat page
//! to a small HTTP server on loopback, and gets the result to put in the page's message box.
//!
//! - [`access`]: which requests are read at all (Host, Origin, content type, token, size);
//! - [`server`]: the routes, pairing, and the hand-off of replies to the handler loop.
//!
//! Replies are answered one at a time by the watch's one [`Handler`], as clipboard copies are;
//! each conversation has its own replay store, so a call runs at most once per conversation
//! (keyed by the site, the conversation and the call's id), and the same id in another chat is
//! a call of its own.

pub(crate) mod access;
pub(crate) mod server;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::{Value, json};

use super::handler::{Handled, Handler};
use super::replay::ReplayStore;

/// How long the pairing link works after flycode printed it.
pub(crate) const PAIRING_VALID_FOR: Duration = Duration::from_secs(600);

/// The token's file in the state folder (32 random bytes, mode 0600): a paired extension stays
/// paired across restarts of flycode.
const TOKEN_FILE: &str = "browser.key";

/// One reply from a chat page, and where its answer goes.
pub(crate) struct BrowserReply {
    /// The chat site's host name.
    pub site: String,
    /// The conversation's id on that site.
    pub conversation: String,
    /// The reply's text.
    pub text: String,
    /// The answer, as the API returns it.
    pub respond: tokio::sync::oneshot::Sender<Value>,
}

/// What the extension learns from `GET /v1/status` besides the pairing: the person's
/// `[browser]` settings and the question that waits, if one does.
pub(crate) struct CompanionState {
    /// `[browser] auto_insert`.
    pub auto_insert: bool,
    /// `[browser] auto_submit`.
    pub auto_submit: bool,
    /// Raised while an approval question waits for the person at flycode's terminal.
    pub asking: Arc<AtomicBool>,
    /// The site and conversation of the reply being answered.
    pub handling: Mutex<Option<(String, String)>>,
}

impl CompanionState {
    /// The status's `settings` and `asking` members.
    pub(crate) fn status(&self) -> Value {
        let handling = self
            .handling
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let asking = match handling {
            Some((site, conversation)) if self.asking.load(Ordering::SeqCst) => {
                json!({"site": site, "conversation": conversation})
            }
            _ => Value::Null,
        };
        json!({
            "settings": {"autoInsert": self.auto_insert, "autoSubmit": self.auto_submit},
            "asking": asking,
        })
    }
}

/// The browser source: the server running on its own thread, and the replies it hands over.
pub(crate) struct BrowserSource {
    replies: mpsc::Receiver<BrowserReply>,
    address: SocketAddr,
    pairing_code: String,
    state: Arc<CompanionState>,
}

impl BrowserSource {
    /// Starts the server on loopback at `port` (0: any free port), with the token kept in
    /// `state`, the largest reply `max_reply_bytes`, and the person's `[browser]` settings.
    pub(crate) fn start(
        port: u16,
        state: &Path,
        max_reply_bytes: usize,
        (auto_insert, auto_submit): (bool, bool),
    ) -> anyhow::Result<BrowserSource> {
        let token = hex::encode(
            crate::sandbox::seal::private_key_file(state, TOKEN_FILE)
                .context("the browser companion's token")?,
        );
        let pairing_code = hex::encode(
            crate::sandbox::seal::random_bytes::<16>().context("drawing a pairing code")?,
        );
        let listener = std::net::TcpListener::bind(("127.0.0.1", port)).with_context(|| {
            format!("listening on 127.0.0.1:{port} for the browser extension (is another flycode watch --browser running? --browser PORT picks another port)")
        })?;
        listener.set_nonblocking(true)?;
        let address = listener.local_addr()?;
        let (replies_in, replies) = mpsc::channel();
        let companion = Arc::new(CompanionState {
            auto_insert,
            auto_submit,
            asking: Arc::new(AtomicBool::new(false)),
            handling: Mutex::new(None),
        });
        let shared = Arc::new(server::CompanionServer {
            state: Arc::clone(&companion),
            token,
            pairing: Mutex::new(Some((pairing_code.clone(), Instant::now()))),
            replies: replies_in,
            // The reply, its JSON escapes and the request's other members.
            max_body: (max_reply_bytes as u64).saturating_mul(2) + 64 * 1024,
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the browser companion's server")?;
        std::thread::Builder::new()
            .name("flycode-browser".to_owned())
            .spawn(move || {
                runtime.block_on(async move {
                    if let Ok(listener) = tokio::net::TcpListener::from_std(listener) {
                        server::serve(listener, shared).await;
                    }
                });
            })
            .context("starting the browser companion's server")?;
        Ok(BrowserSource {
            replies,
            address,
            pairing_code,
            state: companion,
        })
    }

    /// The flag the watch's approver raises while a question waits.
    pub(crate) fn asking(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.state.asking)
    }

    /// The address the server listens on.
    pub(crate) fn address(&self) -> SocketAddr {
        self.address
    }

    /// The link that pairs the extension when opened in its browser: the code is in the
    /// fragment, which the browser keeps to itself.
    pub(crate) fn pairing_link(&self) -> String {
        format!("http://{}/pair#{}", self.address, self.pairing_code)
    }

    /// Answers replies until `shutdown` is set; `report` hears of every answer and notice, with
    /// the site and conversation it came from; `state` keeps each conversation's replay store.
    pub(crate) fn run(
        &self,
        handler: &mut Handler<'_>,
        shutdown: &AtomicBool,
        state: &Path,
        report: &mut dyn FnMut(&Path, &Handled),
    ) {
        let mut conversations: HashMap<String, ConversationMemory> = HashMap::new();
        while !shutdown.load(Ordering::SeqCst) {
            let reply = match self.replies.recv_timeout(Duration::from_millis(100)) {
                Ok(reply) => reply,
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            };
            let key = conversation_key(&reply.site, &reply.conversation);
            let conversation = conversations.entry(key.clone()).or_insert_with(|| {
                let file = state
                    .join("watch")
                    .join("browser")
                    .join(format!("{key}.json"));
                let replay = ReplayStore::load_from(&file, false).unwrap_or_else(|error| {
                    eprintln!(
                        "flycode: {error}; this conversation's calls are remembered in memory only"
                    );
                    ReplayStore::in_memory()
                });
                ConversationMemory {
                    replay,
                    failed_last: Vec::new(),
                }
            });
            std::mem::swap(&mut handler.replay, &mut conversation.replay);
            std::mem::swap(&mut handler.failed_last, &mut conversation.failed_last);
            self.handling(Some((reply.site.clone(), reply.conversation.clone())));
            let handled = handler.handle(&reply.text);
            self.handling(None);
            std::mem::swap(&mut handler.replay, &mut conversation.replay);
            std::mem::swap(&mut handler.failed_last, &mut conversation.failed_last);
            let _ = reply.respond.send(answer_json(&handled));
            if handled != Handled::Ignored {
                report(&source_label(&reply.site, &reply.conversation), &handled);
            }
        }
    }
}

impl BrowserSource {
    fn handling(&self, now: Option<(String, String)>) {
        *self
            .state
            .handling
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = now;
    }
}

/// What one conversation keeps between its replies.
struct ConversationMemory {
    replay: ReplayStore,
    failed_last: Vec<(
        crate::protocol::ToolName,
        serde_json::Map<String, serde_json::Value>,
    )>,
}

/// A conversation's name in the state folder: its site and id hashed (an id is the page's
/// text, never a path).
fn conversation_key(site: &str, conversation: &str) -> String {
    // The site's length first: no two pairs of site and id read as the same text.
    let hash =
        crate::sandbox::sha256_hex(format!("{}:{site}\n{conversation}", site.len()).as_bytes());
    hash[..32].to_owned()
}

/// `chatgpt.com · 6789abcd…` for the terminal's lines.
fn source_label(site: &str, conversation: &str) -> PathBuf {
    let short: String = conversation
        .chars()
        .filter(|c| !c.is_control() && *c != '/')
        .take(24)
        .collect();
    let site: String = site
        .chars()
        .filter(|c| !c.is_control() && *c != '/')
        .take(64)
        .collect();
    PathBuf::from(format!("{site} · {short}"))
}

/// The API's answer to a reply (PROTOCOL.md §12, "The browser companion's loopback API").
fn answer_json(handled: &Handled) -> Value {
    match handled {
        Handled::Ignored => json!({"handled": "ignored"}),
        Handled::Noticed(notice) => {
            json!({"handled": "noticed", "seen": notice.seen, "advice": notice.advice})
        }
        Handled::Answered(answer) => json!({
            "handled": "answered",
            "ok": answer.ok,
            "id": answer.id,
            "code": answer.code,
            "command": answer.command,
            "replayed": answer.replayed,
            "change": answer.change,
            "firstLine": first_line(&answer.block, answer.ok),
            "result": answer.block,
        }),
    }
}

/// The line a card shows: the body's first line of a success, the `[error]` of a failure.
fn first_line(block: &str, ok: bool) -> String {
    let mut lines = block.lines();
    if ok {
        lines
            .by_ref()
            .find(|line| *line == "[data]")
            .and_then(|_| lines.next())
            .unwrap_or("")
            .to_owned()
    } else {
        lines
            .find_map(|line| line.strip_prefix("[error] "))
            .unwrap_or("")
            .to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cards_line_is_the_first_of_the_body_or_the_error() {
        let ok = "```flycode-result\n[id] a\n[command] /fs.read /x\n[ok] true\n[data]\nhello\nworld\n```\n";
        assert_eq!(first_line(ok, true), "hello");
        let failed = "```flycode-result\n[id] a\n[command] /fs.read /x\n[ok] false\n[code] not_found\n[error] /x does not exist\n```\n";
        assert_eq!(first_line(failed, false), "/x does not exist");
    }

    #[test]
    fn conversations_are_told_apart_by_site_and_id() {
        assert_ne!(
            conversation_key("chatgpt.com", "a"),
            conversation_key("claude.ai", "a")
        );
        assert_ne!(
            conversation_key("chatgpt.com", "a\nb"),
            conversation_key("chatgpt.com\na", "b")
        );
        assert_eq!(
            source_label("chatgpt.com", "c/../x\u{1b}"),
            PathBuf::from("chatgpt.com · c..x")
        );
    }
}
