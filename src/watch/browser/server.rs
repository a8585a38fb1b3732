//! The loopback HTTP server of `flycode watch --browser` (PROTOCOL.md §12, "The browser
//! companion's loopback API"): it checks every request ([`super::access`]), pairs the
//! extension, and hands each reply to the watch's one handler loop, waiting for its answer.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use serde::Deserialize;
use serde_json::{Value, json};

use super::access::{self, BrowserRefusal};
use super::{BrowserReply, PAIRING_VALID_FOR};

/// Connections served at once; more wait to be accepted.
const MAX_CONNECTIONS: usize = 64;

/// A connection that has not sent its request's headers in this long is closed.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// What the server shares with every request.
pub(crate) struct CompanionServer {
    /// The settings and the waiting question `GET /v1/status` reports.
    pub state: Arc<super::CompanionState>,
    /// The token a paired extension presents.
    pub token: String,
    /// The one-time pairing code, until it is used or expires.
    pub pairing: Mutex<Option<(String, Instant)>>,
    /// Where replies go to be answered.
    pub replies: mpsc::Sender<BrowserReply>,
    /// The largest request body read.
    pub max_body: u64,
}

/// Serves `listener` until the process ends.
pub(crate) async fn serve(listener: tokio::net::TcpListener, shared: Arc<CompanionServer>) {
    let connections = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(permit) = Arc::clone(&connections).acquire_owned().await else {
            return;
        };
        let (stream, _address): (_, SocketAddr) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            let _permit = permit;
            let handle = hyper::service::service_fn(move |request| {
                let shared = Arc::clone(&shared);
                async move { Ok::<_, Infallible>(answer(&shared, request).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), handle)
                .await;
        });
    }
}

type Response = http::Response<Full<Bytes>>;

async fn answer(shared: &CompanionServer, request: http::Request<Incoming>) -> Response {
    if let Err(refusal) =
        access::check_request(request.method(), request.headers(), shared.max_body)
    {
        return refused(&refusal);
    }
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    match (method, path.as_str()) {
        (http::Method::GET, "/pair") => page(PAIRING_PAGE),
        (http::Method::POST, "/v1/pair") => match body::<PairRequest>(request, shared).await {
            Ok(pair) => pair_with(shared, &pair.code),
            Err(response) => response,
        },
        (http::Method::GET, "/v1/status") => {
            if !access::has_token(request.headers(), &shared.token) {
                return refused(&access::UNPAIRED);
            }
            let mut status = shared.state.status();
            status["flycode"] = json!(env!("CARGO_PKG_VERSION"));
            status["paired"] = json!(true);
            json_response(http::StatusCode::OK, &status)
        }
        (http::Method::POST, "/v1/replies") => {
            if !access::has_token(request.headers(), &shared.token) {
                return refused(&access::UNPAIRED);
            }
            match body::<ReplyRequest>(request, shared).await {
                Ok(reply) => answer_reply(shared, reply).await,
                Err(response) => response,
            }
        }
        _ => refused(&access::NOT_FOUND),
    }
}

/// `POST /v1/pair`'s body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PairRequest {
    code: String,
}

/// `POST /v1/replies`'s body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplyRequest {
    /// The chat site's host name (`chatgpt.com`).
    site: String,
    /// The conversation's id on that site.
    conversation: String,
    /// The model's reply, as the page shows it.
    text: String,
}

/// The token, for the right code while it is valid; the code then works no more.
fn pair_with(shared: &CompanionServer, code: &str) -> Response {
    let mut pairing = shared
        .pairing
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let valid = pairing.as_ref().is_some_and(|(expected, made)| {
        made.elapsed() < PAIRING_VALID_FOR && crate::http_checks::is_secret(code, expected)
    });
    if !valid {
        return json_response(
            http::StatusCode::FORBIDDEN,
            &json!({"error": "this pairing code is wrong, used or expired: restart flycode watch --browser for a new link"}),
        );
    }
    *pairing = None;
    eprintln!("flycode: the browser extension is paired");
    json_response(http::StatusCode::OK, &json!({"token": shared.token}))
}

/// Hands the reply to the handler loop and waits for its answer.
async fn answer_reply(shared: &CompanionServer, reply: ReplyRequest) -> Response {
    let (respond, answered) = tokio::sync::oneshot::channel();
    let sent = shared.replies.send(BrowserReply {
        site: reply.site,
        conversation: reply.conversation,
        text: reply.text,
        respond,
    });
    if sent.is_err() {
        return json_response(
            http::StatusCode::SERVICE_UNAVAILABLE,
            &json!({"error": "flycode watch is stopping"}),
        );
    }
    match answered.await {
        Ok(value) => json_response(http::StatusCode::OK, &value),
        Err(_) => json_response(
            http::StatusCode::SERVICE_UNAVAILABLE,
            &json!({"error": "flycode watch stopped before answering"}),
        ),
    }
}

/// The request's JSON body, read up to the limit.
async fn body<T: serde::de::DeserializeOwned>(
    request: http::Request<Incoming>,
    shared: &CompanionServer,
) -> Result<T, Response> {
    let limit = usize::try_from(shared.max_body).unwrap_or(usize::MAX);
    let bytes = match Limited::new(request.into_body(), limit).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => return Err(refused(&access::TOO_LARGE)),
    };
    serde_json::from_slice(&bytes).map_err(|error| {
        json_response(
            http::StatusCode::BAD_REQUEST,
            &json!({"error": format!("the request's JSON: {error}")}),
        )
    })
}

fn refused(refusal: &BrowserRefusal) -> Response {
    let mut response = http::Response::new(Full::new(Bytes::from_static(refusal.words.as_bytes())));
    *response.status_mut() = refusal.status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    if refusal.status == http::StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            http::header::WWW_AUTHENTICATE,
            http::HeaderValue::from_static("Bearer realm=\"flycode\""),
        );
    }
    response
}

fn json_response(status: http::StatusCode, value: &Value) -> Response {
    let mut response = http::Response::new(Full::new(Bytes::from(value.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

fn page(html: &'static str) -> Response {
    let mut response = http::Response::new(Full::new(Bytes::from_static(html.as_bytes())));
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/html; charset=utf-8"),
    );
    // The page runs no script of its own and may not be framed by another page.
    headers.insert(
        http::header::CONTENT_SECURITY_POLICY,
        http::HeaderValue::from_static("default-src 'none'; frame-ancestors 'none'"),
    );
    response
}

/// The page the pairing link opens. It holds no secret (the code is in the link's fragment,
/// which the browser never sends): the flycode extension's script on this page reads the code
/// from the address and completes the pairing with `POST /v1/pair`.
const PAIRING_PAGE: &str = "<!doctype html>
<html><head><meta charset=\"utf-8\"><title>flycode: pair the browser extension</title></head>
<body><h1>flycode</h1>
<p id=\"state\">If the flycode extension is installed in this browser, it pairs itself now and says so here.
Without it, install it (browser/extension in flycode's repository) and open the link again.</p>
</body></html>
";
