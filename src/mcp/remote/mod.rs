//! `flycode mcp --http` (PROTOCOL.md §14, "Over HTTP"): the same server over MCP's streamable
//! HTTP transport, for clients that reach flycode over a network: chat sites' connectors
//! through a tunnel, editors, other machines the person names.
//!
//! rmcp's [`StreamableHttpService`] speaks the transport (POST for messages, SSE for answers
//! and the server's own requests, `Mcp-Session-Id` sessions before 2026-07-28, stateless
//! requests from 2026-07-28 on, `DELETE` to end a session); hyper serves it on HTTP/1.1.
//! Around it, flycode adds:
//!
//! - [`access`]: every request's `Host`, `Origin` and secret checked before rmcp sees it.
//! - resumption, as the two eras define it: before 2026-07-28 a session's stream that dropped
//!   is picked up again with `Last-Event-ID` while its call goes on (rmcp keeps each stream's
//!   recent events, and a finished one's for a minute); from 2026-07-28 on, closing a
//!   request's stream *is* its cancellation (the client's only way to cancel), so the call
//!   stops and its program is killed, as a cancelled call over stdio is.
//! - bounds: at most [`MAX_CONNECTIONS`] connections; a connection that does not send its
//!   request's headers within [`HEADER_TIMEOUT`] is closed; bodies are bounded
//!   ([`access::MAX_BODY`]); each stream holds a few messages for a slow reader and then waits
//!   for it, alone: every session and request runs in tasks of its own, so a client that never
//!   reads holds up nobody else.
//!
//! Each session (`initialize`) gets a door session of its own (its jobs, hints and stale-read
//! memory, ended with it: [`super::server`]); the scheduler of calls, the audit log and the
//! undo store are the process's.

pub(crate) mod access;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::transport::StreamableHttpServerConfig;
use rmcp::transport::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

pub(crate) use access::{Access, ClientAddress, Secret};

use super::McpServer;

/// Connections served at once; past this, new ones wait to be accepted.
pub(crate) const MAX_CONNECTIONS: usize = 256;

/// How long a connection has to send a request's headers.
pub(crate) const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// A response's body, as rmcp makes them.
type Body = BoxBody<Bytes, Infallible>;

/// Serves `server` on `listener` to the clients `access` lets in, until the process is stopped.
pub(crate) async fn serve_http(
    server: McpServer,
    listener: tokio::net::TcpListener,
    access: Access,
) -> anyhow::Result<()> {
    let sessions = LocalSessionManager::default();
    let config = StreamableHttpServerConfig::default()
        // rmcp checks the Host header too, against the same names.
        .with_allowed_hosts(access.hosts().to_vec())
        .with_max_request_body_bytes(access::MAX_BODY);
    if let Some(jobs) = server.main_jobs() {
        // Requests outside a session have nobody to tell but the terminal.
        super::server::announce_jobs_to(jobs, None);
    }
    let service = StreamableHttpService::new(
        move || Ok(server.fresh_handler()),
        Arc::new(sessions),
        config,
    );
    let access = Arc::new(access);
    let connections = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let permit = Arc::clone(&connections).acquire_owned().await?;
        let (stream, address) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of descriptors, a connection reset before it was accepted: the server
                // goes on.
                eprintln!("flycode mcp: accepting a connection failed: {error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        // An answer goes out in several small writes (headers, then each event): without this,
        // Nagle's algorithm holds the last of them for the client's delayed ACK, 40 ms a call.
        let _ = stream.set_nodelay(true);
        let service = service.clone();
        let access = Arc::clone(&access);
        tokio::spawn(async move {
            let _permit = permit;
            let handle = hyper::service::service_fn(move |request| {
                let service = service.clone();
                let access = Arc::clone(&access);
                async move { Ok::<_, Infallible>(answer(&service, &access, address, request).await) }
            });
            // A connection that breaks ends here; the server goes on.
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), handle)
                .await;
        });
    }
}

/// The answer to one request: refused by [`Access::check`], or rmcp's.
async fn answer(
    service: &StreamableHttpService<McpServer, LocalSessionManager>,
    access: &Access,
    address: SocketAddr,
    mut request: http::Request<Incoming>,
) -> http::Response<Body> {
    match access.check(request.uri(), request.headers()) {
        Err(refusal) => {
            let mut response = http::Response::new(
                Full::new(Bytes::from_static(refusal.words.as_bytes())).boxed(),
            );
            *response.status_mut() = refusal.status;
            let headers = response.headers_mut();
            headers.insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            if refusal.status == http::StatusCode::UNAUTHORIZED {
                headers.insert(
                    http::header::WWW_AUTHENTICATE,
                    http::HeaderValue::from_static("Bearer realm=\"flycode\""),
                );
            }
            response
        }
        Ok(uri) => {
            *request.uri_mut() = uri;
            request.extensions_mut().insert(ClientAddress(address));
            let ending = request.method() == http::Method::DELETE;
            let mut response = service.handle(request).await;
            // rmcp accepts a session's end with 202; clients (the Python SDK among them)
            // expect 200 or 204 and warn otherwise. The session has ended either way.
            if ending && response.status() == http::StatusCode::ACCEPTED {
                *response.status_mut() = http::StatusCode::OK;
            }
            response
        }
    }
}
