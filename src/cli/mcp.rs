//! `flycode mcp`: serve the tools to an MCP client over standard input and output, or over
//! streamable HTTP with `--http` (PROTOCOL.md §14 (The MCP server)). Over stdio, standard output
//! carries the protocol alone; this command's own words go to standard error.

use std::io::IsTerminal;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;

use anyhow::Context;

use super::{ApproveMode, McpArgs, Outcome, RunFlags, hand_off_secrets, open_sandbox};
use crate::mcp::remote::{Access, Secret};
use crate::mcp::{McpServer, McpSettings, SessionOpener, serve_http, serve_stdio};
use crate::protocol::ToolSet;
use crate::sandbox::Session;
use crate::tools::executor::{Door, DoorSession};
use crate::tools::policy::ApprovalMode;

/// Where `--http` listens when it names no address.
pub(crate) const DEFAULT_HTTP_ADDR: &str = "127.0.0.1:4680";

/// What a read-only HTTP server tells the person about a call it refused.
const READ_ONLY_ADVICE: &str = "flycode mcp --http serves read-only unless you allow changes: restart it with --allow-changes, or set allow_changes_over_http = true under [mcp] in your own flycode.toml";

/// The flycode.toml a user edits to allow a call: the trusted project file, else the user's
/// configuration file (an untrusted project file cannot allow a call: PROTOCOL.md §10).
fn settings_file(config: &crate::config::Config) -> std::path::PathBuf {
    config
        .settings_file()
        .unwrap_or_else(|| "flycode.toml".into())
}

/// Runs `flycode mcp` until the client closes the connection (stdio) or the process is stopped
/// (HTTP); `--show-secret` and `--rotate-secret` print the secret and end.
pub(crate) fn run(args: McpArgs) -> anyhow::Result<Outcome> {
    if args.show_secret || args.rotate_secret {
        return print_secret(&args);
    }
    // Before anything is read or started (PROTOCOL.md §11 (Security), "No program outlives
    // flycode").
    crate::sandbox::process::guard::guard_this_process();
    super::signals::install(super::signals::StopDoor::Mcp, None)?;
    let listen = args.http.as_deref().map(listen_address).transpose()?;
    let approve = args.approve;
    let flags = RunFlags {
        roots: args.roots,
        approve: args.approve,
        yes: false,
        lenient: false,
        tools: None,
        dialect: None,
    };
    let loaded = crate::config::Config::load(&super::config_flags(&flags));
    hand_off_secrets(loaded.as_ref().ok())?;
    let (mut config, sandbox) = open_sandbox(&flags, loaded)?;
    // flycode.toml's `tools` is the chat front ends' set; an MCP client gets the extended set.
    let tool_set = args.tools.map_or(ToolSet::Extended, Into::into);
    // A remote client reads only, until the person allows more (PROTOCOL.md §14, "Over HTTP").
    let read_only = listen.is_some() && !args.allow_changes && !config.mcp_http_allows_changes;
    if read_only {
        config.policy.approval = ApprovalMode::ReadOnly;
        config.policy.read_only_advice = Some(READ_ONLY_ADVICE.to_owned());
    }
    let limits = crate::tools::Limits {
        tool_set,
        ..config.limits()
    };
    // One stdio server is one session; over HTTP each session opens its own (PROTOCOL.md §14
    // (The MCP server)).
    let session = DoorSession::open(
        Door::Mcp,
        &config,
        limits.clone(),
        Some(Session::in_memory()),
    )?;
    let roots = sandbox
        .roots()
        .iter()
        .map(|root| root.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let settings = McpSettings {
        tool_set,
        protected: config.protected.clone(),
        config_file: settings_file(&config),
        configuration_note: crate::config::show::brief_notice(&config.layers),
        approve_flag: match approve {
            Some(ApproveMode::Ask) => Some("--approve ask".to_owned()),
            Some(ApproveMode::ReadOnly) => Some("--approve read-only".to_owned()),
            Some(ApproveMode::Auto) | None => None,
        },
        // Over HTTP the terminal is the person's, where they started the server at one.
        terminal: (listen.is_some() && std::io::stdin().is_terminal()).then(|| {
            Arc::new(super::approve::TerminalApprover::new(
                super::approve::Asking::Session,
            )) as Arc<dyn crate::tools::executor::Approver>
        }),
    };
    let Some(listen) = listen else {
        eprintln!(
            "flycode mcp: serving {} tools over stdio; allowed roots: {roots}",
            tool_set.as_str()
        );
        let server = McpServer::new(sandbox, session, settings);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let served = runtime.block_on(serve_stdio(server));
        // The client is gone: a call still under way ends with the connection (its program
        // killed with its tree), as the jobs did (PROTOCOL.md §11 (Security), "No program
        // outlives flycode").
        crate::sandbox::process::stop_all_programs();
        served?;
        return Ok(Outcome::Success);
    };
    let followed = Secret::followed()?;
    let secret = followed.current();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind(listen))
        .with_context(|| {
            format!("cannot listen on {listen}: choose another address or port with --http ADDR")
        })?;
    let bound = listener.local_addr()?;
    let access = Access::new(followed, bound, &args.allow_host, &args.allow_origin);
    let opener_config = config.clone();
    let opener: SessionOpener = Box::new(move || {
        Ok(DoorSession::open(
            Door::Mcp,
            &opener_config,
            limits.clone(),
            Some(Session::in_memory()),
        )?)
    });
    let server = McpServer::for_sessions(sandbox, session, settings, opener);
    announce_http(bound, &secret, tool_set, &roots, read_only);
    let served = runtime.block_on(serve_http(server, listener, access));
    crate::sandbox::process::stop_all_programs();
    served?;
    Ok(Outcome::Success)
}

/// What the person needs to connect a client, on standard error.
fn announce_http(
    bound: SocketAddr,
    secret: &Secret,
    tool_set: ToolSet,
    roots: &str,
    read_only: bool,
) {
    let base = endpoint_url(bound);
    eprintln!(
        "flycode mcp: serving {} tools over streamable HTTP at {base}; allowed roots: {roots}",
        tool_set.as_str()
    );
    eprintln!(
        "flycode mcp: clients send the header \"Authorization: Bearer {}\", or use the URL {base}/{}",
        secret.as_str(),
        secret.as_str()
    );
    if !bound.ip().is_loopback() {
        eprintln!(
            "flycode mcp: warning: listening on {bound}, reachable from other machines; every request still needs the secret, and a Host name other than loopback's must be allowed with --allow-host"
        );
    }
    if read_only {
        eprintln!(
            "flycode mcp: read-only: clients may read, list and search; start with --allow-changes to let them change files and run programs"
        );
    }
}

/// `http://HOST:PORT/mcp` for a server listening on `bound`.
fn endpoint_url(bound: SocketAddr) -> String {
    let host = match bound.ip() {
        ip if ip.is_unspecified() => "127.0.0.1".to_owned(),
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
        std::net::IpAddr::V4(ip) => ip.to_string(),
    };
    format!(
        "http://{host}:{}{}",
        bound.port(),
        crate::mcp::remote::access::ENDPOINT
    )
}

/// `--http ADDR`: a port alone listens on loopback; `HOST:PORT` where it says.
fn listen_address(text: &str) -> anyhow::Result<SocketAddr> {
    let text = text.trim();
    if let Ok(port) = text.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    text.to_socket_addrs()
        .ok()
        .and_then(|mut addresses| addresses.next())
        .with_context(|| {
            format!("--http {text}: not an address to listen on; give a port (4680) or HOST:PORT (127.0.0.1:4680)")
        })
}

/// `--show-secret`, `--rotate-secret`: the secret, the header and the URL that carry it.
fn print_secret(args: &McpArgs) -> anyhow::Result<Outcome> {
    let secret = if args.rotate_secret {
        Secret::rotate()?
    } else {
        Secret::load_or_make()?
    };
    let address = listen_address(args.http.as_deref().unwrap_or(DEFAULT_HTTP_ADDR))?;
    let base = endpoint_url(address);
    println!("secret: {}", secret.as_str());
    println!("header: Authorization: Bearer {}", secret.as_str());
    println!("url:    {base}/{}", secret.as_str());
    if args.rotate_secret {
        eprintln!(
            "flycode mcp: a new secret; a running flycode mcp --http refuses the old one once restarted"
        );
    }
    Ok(Outcome::Success)
}
