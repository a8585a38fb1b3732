//! The MCP handler: `tools/list` and `tools/call` over flycode's registry and call service.
//!
//! The server is one door session ([`DoorSession`]: the policy, the audit log, the undo
//! recorder, the stale-read memory, the hints and the jobs of the connection), whose executors
//! are made one a call, in the sandbox narrowed to the client's roots.
//!
//! A call goes: name and arguments checked against the schema (a bad one is an `isError`
//! result, never run) and bound to its tool ([`Invocation`]); the client's roots narrow the
//! sandbox ([`super::roots`]); the call service decides it ([`Executor::decide`]); its question,
//! if any, is asked through elicitation ([`super::approval`]) and the answer given to that
//! decision, which makes the permit for that invocation; then the call waits for its turn at the
//! service's [`Gate`] (read-only calls run side by side, every other call alone) and the
//! service runs it with its permit on a blocking thread, which records it in the audit log like
//! every other call. A cancelled request (`notifications/cancelled`) sets the call's cancel flag, which kills
//! a running program and everything it started. While a program runs, a request that carries a
//! progress token gets a progress notification every second.

// The SDK marks roots deprecated (SEP-2577), yet clients still send them, and PROTOCOL.md §14 (The MCP server) has
// them narrow flycode's roots.
#![allow(deprecated)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ElicitRequest, ElicitResult,
    Implementation, InitializeRequestParams, InitializeResult, InputRequest, InputRequests,
    InputRequiredResult, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ProtocolVersion, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::model::{ListRootsRequest, ListRootsResult, Root};
use rmcp::service::{NotificationContext, RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler, ServiceExt};
use serde_json::{Map, Value};

use super::approval::{AllowAdvice, ClientWords, answer_of, elicitation, elicitation_message};
use super::result::{call_tool_result, execution_result};
use super::roots::{file_uri_path, narrow};
use crate::protocol::args::validate_args;
use crate::protocol::{Call, ErrorCode, ResultBlock, ToolName, ToolSet};
use crate::sandbox::{AuditClient, Protection, Roots, Sandbox};
use crate::tools::ToolError;
use crate::tools::executor::schedule::{CallClass, Gate};
use crate::tools::executor::{
    Approval, Approver, DoorSession, Execution, Executor, FixedApprover, Permit, Question, Ruling,
};
use crate::tools::registry::Invocation;
use sha2::{Digest, Sha256};

/// The key of the approval question in an `input_required` result.
const APPROVAL_KEY: &str = "flycode_approval";
/// The key of the roots request in an `input_required` result.
const ROOTS_KEY: &str = "flycode_roots";
/// How often a running program reports progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// What the server serves besides its sandbox and door session: the tool set, what its words
/// about the configuration say, and where a question goes that the client cannot show.
pub struct McpSettings {
    /// The tools served (`extended` unless `--tools seed`).
    pub tool_set: ToolSet,
    /// The configured protected-path globs, for sandboxes narrowed to the client's roots.
    pub protected: Vec<String>,
    /// The flycode.toml a setting that allows a call belongs in: the file read at start, else
    /// the user's (named in the refusal of a call the client cannot ask about).
    pub config_file: PathBuf,
    /// `--approve MODE` as the server was started with it (other than `auto`), which a setting
    /// in the file cannot override.
    pub approve_flag: Option<String>,
    /// What the server's instructions add about the configuration: the settings of an untrusted
    /// project file that were ignored (PROTOCOL.md §10 "Configuration").
    pub configuration_note: Option<String>,
    /// Who answers a question the client cannot show (it has no elicitation): flycode's
    /// terminal over HTTP, where the person started the server at one; nobody over stdio, whose
    /// client owns the terminal (PROTOCOL.md §14, "Over HTTP").
    pub terminal: Option<Arc<dyn Approver>>,
}

/// Opens a door session of its own for each HTTP session: its jobs, hints and stale-read
/// memory are that session's, and end with it.
pub type SessionOpener = Box<dyn Fn() -> anyhow::Result<DoorSession> + Send + Sync>;

/// The MCP server. Cheap to clone: every clone serves the same state.
#[derive(Clone)]
pub struct McpServer {
    shared: Arc<Shared>,
    /// The connection of this handler's HTTP session, opened by its `initialize`; until then
    /// (and for every request outside a session: stdio's client, 2026-07-28's requests over
    /// HTTP) the server's own, [`Shared::main`].
    own: Arc<OnceLock<Arc<Connection>>>,
}

/// What every connection of the server shares.
struct Shared {
    settings: McpSettings,
    /// The sandbox on flycode's roots, for calls the client's roots do not narrow.
    full: Arc<Sandbox>,
    tools: Vec<Tool>,
    /// What may run together, across every connection: reads side by side, every other call
    /// alone.
    gate: Gate,
    /// Makes `requestState` unguessable: an answer is bound to the call it was asked for.
    state_key: String,
    /// The server's own connection: stdio's one client; over HTTP, every request outside a
    /// session (2026-07-28 has none).
    main: Arc<Connection>,
    /// Opens each HTTP session's own door session; `None` over stdio (one client, one session).
    sessions: Option<SessionOpener>,
    /// One question on flycode's terminal at a time.
    terminal_turn: tokio::sync::Mutex<()>,
}

/// One client's connection: its door session (PROTOCOL.md §14 (The MCP server)) and its
/// roots. Its background jobs end when it does.
struct Connection {
    /// The connection's session: policy, limits, audit log, undo recorder, the stale-read
    /// memory, the hints the client's calls loaded (PROTOCOL.md §9 (hint.load)) and the
    /// background jobs (PROTOCOL.md §10 (Running calls: background jobs)). Kept across calls,
    /// whose executors are made one a call.
    session: DoorSession,
    client_roots: Mutex<ClientRoots>,
    /// Bumped when the client says its roots changed, so a list fetched before is not kept.
    roots_generation: AtomicU64,
}

impl Connection {
    fn new(session: DoorSession) -> Connection {
        Connection {
            session,
            client_roots: Mutex::new(ClientRoots::Unknown),
            roots_generation: AtomicU64::new(0),
        }
    }
}

impl Drop for Connection {
    /// A client gone (stdio closed, an HTTP session deleted or timed out) takes its background
    /// jobs with it (PROTOCOL.md §11 (Security), "No program outlives flycode").
    fn drop(&mut self) {
        if let Some(jobs) = self.session.jobs() {
            jobs.end_session();
        }
    }
}

/// What the client's roots leave.
#[derive(Clone)]
enum ClientRoots {
    /// Not asked yet, or changed since.
    Unknown,
    /// The sandbox on flycode's roots narrowed to the client's.
    Narrowed(Arc<Sandbox>),
    /// No client root shares anything with flycode's roots: every call is refused.
    Disjoint(Vec<PathBuf>),
}

impl McpServer {
    /// A server over `sandbox` (flycode's roots), in the door session `session`, with
    /// `settings`: one client (stdio).
    pub fn new(sandbox: Sandbox, session: DoorSession, settings: McpSettings) -> McpServer {
        McpServer::serving(sandbox, session, settings, None)
    }

    /// A server for many clients (HTTP): each session opened by `sessions`, every request
    /// outside a session served in `main`.
    pub fn for_sessions(
        sandbox: Sandbox,
        main: DoorSession,
        settings: McpSettings,
        sessions: SessionOpener,
    ) -> McpServer {
        McpServer::serving(sandbox, main, settings, Some(sessions))
    }

    fn serving(
        sandbox: Sandbox,
        main: DoorSession,
        settings: McpSettings,
        sessions: Option<SessionOpener>,
    ) -> McpServer {
        let full = Arc::new(sandbox);
        let tools = super::tools::tool_list(settings.tool_set);
        let state_key = random_key();
        McpServer {
            shared: Arc::new(Shared {
                settings,
                full,
                tools,
                gate: Gate::default(),
                state_key,
                main: Arc::new(Connection::new(main)),
                sessions,
                terminal_turn: tokio::sync::Mutex::new(()),
            }),
            own: Arc::new(OnceLock::new()),
        }
    }

    /// A handler for a new HTTP session or request: the same server, no connection of its own
    /// yet.
    pub(crate) fn fresh_handler(&self) -> McpServer {
        McpServer {
            shared: Arc::clone(&self.shared),
            own: Arc::new(OnceLock::new()),
        }
    }

    /// The background jobs of the server's own connection (stdio's client; over HTTP, the
    /// requests outside a session).
    pub(crate) fn main_jobs(&self) -> Option<&crate::tools::jobs::JobTable> {
        self.shared.main.session.jobs()
    }

    /// The connection this handler serves.
    fn connection(&self) -> Arc<Connection> {
        Arc::clone(self.own.get().unwrap_or(&self.shared.main))
    }
}

/// Serves `server` on standard input and output until the client closes them; then every
/// background job of the connection is killed.
pub async fn serve_stdio(server: McpServer) -> anyhow::Result<()> {
    let (reader, writer) = rmcp::transport::stdio_pipes();
    let shared = Arc::clone(&server.shared);
    let running = server
        .serve(super::transport::LineTransport::new(reader, writer))
        .await
        .map_err(|error| anyhow::anyhow!("the MCP client did not start a session: {error}"))?;
    if let Some(jobs) = shared.main.session.jobs() {
        announce_jobs_to(jobs, Some(running.peer().clone()));
    }
    let ended = running.waiting().await;
    if let Some(jobs) = shared.main.session.jobs() {
        jobs.end_session();
    }
    ended.map_err(|error| anyhow::anyhow!("the MCP session ended abnormally: {error}"))?;
    Ok(())
}

/// A job's end goes to the terminal (standard error) and, where there is one to tell, to the
/// client as a logging notification (`notifications/message`, logger `flycode.jobs`, level
/// `info`).
pub(crate) fn announce_jobs_to(
    jobs: &crate::tools::jobs::JobTable,
    peer: Option<rmcp::Peer<RoleServer>>,
) {
    let runtime = tokio::runtime::Handle::current();
    jobs.set_announce(Box::new(move |notice| {
        eprintln!("flycode mcp: [jobs] {notice}");
        let Some(peer) = peer.clone() else { return };
        let message = rmcp::model::LoggingMessageNotificationParam::new(
            rmcp::model::LoggingLevel::Info,
            Value::String(format!("[jobs] {notice}")),
        )
        .with_logger("flycode.jobs");
        runtime.spawn(async move {
            let _ = peer.notify_logging_message(message).await;
        });
    }));
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let roots = self
            .shared
            .full
            .roots()
            .iter()
            .map(|root| root.display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        InitializeResult::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_logging()
                .build(),
        )
            .with_server_info(Implementation::new("flycode", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "flycode's file and program tools, inside the allowed roots only: {roots}. Paths are absolute. Results are capped; a capped result says how to read on.{}",
                self.shared
                    .settings
                    .configuration_note
                    .as_deref()
                    .map(|note| format!("\n\n{note}"))
                    .unwrap_or_default()
            ))
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        context.peer.set_peer_info(request.clone());
        // An HTTP session gets a door session of its own, which ends with it.
        if let Some(open) = &self.shared.sessions
            && self.own.get().is_none()
        {
            let session = open().map_err(|error| {
                McpError::internal_error(format!("cannot open the session: {error}"), None)
            })?;
            if let Some(jobs) = session.jobs() {
                announce_jobs_to(jobs, Some(context.peer.clone()));
            }
            let _ = self.own.set(Arc::new(Connection::new(session)));
        }
        self.negotiate_initialize(&request)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.shared.tools.clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let handling = Handling {
            client: self.shared.sessions.is_some().then(|| client_of(&context)),
            shared: Arc::clone(&self.shared),
            connection: self.connection(),
        };
        Arc::new(handling).call(request, context).await
    }

    async fn on_roots_list_changed(&self, _context: NotificationContext<RoleServer>) {
        let connection = self.connection();
        connection.roots_generation.fetch_add(1, Ordering::SeqCst);
        *lock(&connection.client_roots) = ClientRoots::Unknown;
    }
}

/// Who sent a request over HTTP, for the audit log: the name and version it gave, and the
/// address it connected from.
fn client_of(context: &RequestContext<RoleServer>) -> AuditClient {
    let name = context
        .client_info()
        .map(|info| format!("{} {}", info.name, info.version));
    let address = context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<super::remote::ClientAddress>())
        .map(|address| address.0.to_string());
    AuditClient { name, address }
}

/// One call's view of the server: what every connection shares, the connection it came on,
/// and who sent it (over HTTP).
struct Handling {
    shared: Arc<Shared>,
    connection: Arc<Connection>,
    client: Option<AuditClient>,
}

/// How long a client (before 2026-07-28) is given to list its roots.
const ROOTS_WAIT: Duration = Duration::from_secs(10);

/// A decided call, waiting for its answer.
struct Ruled {
    /// The call bound to its tool: what was decided, and what runs.
    invocation: Invocation<'static>,
    /// What the call service ruled for it.
    ruling: Ruling,
    /// The form's message, where a form will be shown.
    message: String,
    class: CallClass,
    runs_program: bool,
}

impl Handling {
    /// A `tools/call`: read, narrowed to the client's roots, decided, answered where asked, run
    /// in its turn.
    async fn call(
        self: Arc<Self>,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let call = match self.read_call(&mut request, &context) {
            Ok(call) => call,
            Err(refused) => return Ok((*refused).into()),
        };
        // Arguments the schema let through but the tool cannot read (a schema bug): answered
        // with the tool's error, nothing decided or run.
        let invocation = match Invocation::owned(call) {
            Ok(invocation) => invocation,
            Err(unbound) => {
                let execution = self
                    .executor(&self.shared.full)
                    .unreadable(&unbound.call, unbound.error);
                return Ok(answer_of_execution(execution).into());
            }
        };
        let capabilities = context.client_capabilities();
        let can_ask = can_elicit(capabilities.as_ref());
        let modern = is_modern(&context);
        let mut pending = InputRequests::new();
        let sandbox = match self
            .call_sandbox(
                &request,
                &context,
                capabilities.as_ref(),
                modern,
                &mut pending,
            )
            .await
        {
            SandboxFor::Call(sandbox) => sandbox,
            SandboxFor::Pending => self.shared.full.clone(),
            SandboxFor::Refused(client) => {
                return Ok(self.refuse_disjoint(invocation.call(), &client).into());
            }
        };
        let mut ruled = self.decide(invocation, &sandbox, can_ask);
        // The token binding an answer to its call: needed only where something is asked (it
        // hashes the whole call, a 1 MB write's content included).
        let state = if ruled.ruling.question().is_some() || !pending.is_empty() {
            self.request_state(
                &request.name,
                &ruled.invocation.call().args,
                ruled.ruling.question(),
            )
        } else {
            String::new()
        };
        let asking = ClientAsking {
            request: &request,
            context: &context,
            modern,
            can_ask,
            state: &state,
            terminal: self
                .shared
                .settings
                .terminal
                .as_ref()
                .map(|approver| (approver, &self.shared.terminal_turn)),
        };
        let message = std::mem::take(&mut ruled.message);
        let Some(answer) = asking
            .answer(ruled.ruling.question(), message, &mut pending)
            .await
        else {
            return Ok(self
                .cancelled_before_running(ruled.invocation.call())
                .into());
        };
        if !pending.is_empty() {
            return Ok(InputRequiredResult::new(Some(pending), Some(state)).into());
        }
        let permit = self.permit(ruled.ruling, answer, can_ask);
        // Only a call that runs waits for its turn; a refusal is answered at once.
        let pass = if permit.runs() {
            tokio::select! {
                pass = self.shared.gate.enter(ruled.class) => Some(pass),
                () = context.ct.cancelled() => {
                    return Ok(self.cancelled_before_running(ruled.invocation.call()).into());
                }
            }
        } else {
            None
        };
        let execution = self
            .run(
                ruled.invocation,
                sandbox,
                permit,
                ruled.runs_program,
                &context,
            )
            .await?;
        drop(pass);
        Ok(answer_of_execution(execution).into())
    }

    /// The call the request names, its arguments checked against the schema; an unknown tool
    /// or arguments the schema refuses are answered here, never run.
    fn read_call(
        &self,
        request: &mut CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<Call, Box<rmcp::model::CallToolResult>> {
        let id = format!("mcp-{}", request_id_text(&context.id));
        let set = self.shared.settings.tool_set;
        let secrets = self.connection.session.limits().secrets();
        let Some(tool) = ToolName::from_mcp_name(&request.name, set) else {
            let names: Vec<String> = set.tools().iter().map(|t| t.mcp_name()).collect();
            let block = ResultBlock::failure(
                Some(id),
                request.name.to_string(),
                ErrorCode::UnknownTool,
                format!("{} is not one of flycode's tools", request.name),
                Some(format!("call one of: {}", names.join(", "))),
            );
            return Err(Box::new(call_tool_result(block, None, None, &secrets)));
        };
        // Taken, not copied: a 1 MB write's content is in them.
        let args = Value::Object(request.arguments.take().unwrap_or_default());
        match validate_args(tool, args) {
            Ok(args) => Ok(Call {
                id: Some(id),
                tool,
                args,
            }),
            Err(error) => {
                let block = ResultBlock::failure(
                    Some(id),
                    format!("/{tool}"),
                    error.code(),
                    error.to_string(),
                    Some(error.hint()),
                );
                Err(Box::new(call_tool_result(
                    block,
                    Some(tool),
                    None,
                    &secrets,
                )))
            }
        }
    }

    /// An executor of the session for a call in `sandbox`. It never asks anyone itself: the
    /// server asks through the client and gives the answer to the service's decision.
    fn executor<'s>(&'s self, sandbox: &'s Sandbox) -> Executor<'s> {
        static NOBODY: FixedApprover = FixedApprover(Approval::Unavailable);
        let executor = self.connection.session.executor(sandbox, &NOBODY);
        match &self.client {
            Some(client) => executor.audited_for(client.clone()),
            None => executor,
        }
    }

    /// The service's ruling on the invocation, the form's message (only where a form will be
    /// shown), and what the call is.
    fn decide(&self, invocation: Invocation<'static>, sandbox: &Sandbox, can_ask: bool) -> Ruled {
        let ruling = self.executor(sandbox).decide(&invocation);
        let message = ruling
            .question()
            .filter(|_| can_ask)
            .map(elicitation_message)
            .unwrap_or_default();
        // The form goes through the client, as every answer does: masked like them
        // (PROTOCOL.md §9 (Secrets and masking)).
        let message = self
            .connection
            .session
            .limits()
            .secrets()
            .mask(&message)
            .into_owned();
        let call = invocation.call();
        Ruled {
            class: CallClass::of(call.tool),
            runs_program: invocation.effects().program.is_some(),
            invocation,
            ruling,
            message,
        }
    }

    /// What the ruling comes to with `answer`; a question nobody answered is refused in MCP's
    /// words ([`ClientWords`]): the client cannot ask (and how to allow the call instead), or
    /// its form brought no answer.
    fn permit(&self, ruling: Ruling, answer: Approval, can_ask: bool) -> Permit {
        let words = ClientWords {
            can_ask,
            advice: AllowAdvice {
                config_file: &self.shared.settings.config_file,
                approve_flag: self.shared.settings.approve_flag.as_deref(),
            },
        };
        ruling.answered_in(answer, &words)
    }

    /// The sandbox a call runs in: flycode's, or narrowed to the client's roots (asked for once,
    /// again after they changed).
    async fn call_sandbox(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        capabilities: Option<&ClientCapabilities>,
        modern: bool,
        pending: &mut InputRequests,
    ) -> SandboxFor {
        if capabilities.is_none_or(|c| c.roots.is_none()) {
            return SandboxFor::Call(self.shared.full.clone());
        }
        let known = lock(&self.connection.client_roots).clone();
        let known = match known {
            ClientRoots::Unknown => {
                let generation = self.connection.roots_generation.load(Ordering::SeqCst);
                let listed = if modern {
                    let response = request
                        .input_responses
                        .as_ref()
                        .and_then(|responses| responses.get(ROOTS_KEY));
                    match response {
                        Some(response) => {
                            serde_json::from_value::<ListRootsResult>(response.clone())
                                .map_err(|e| e.to_string())
                        }
                        None => {
                            pending.insert(
                                ROOTS_KEY.to_owned(),
                                #[allow(deprecated)]
                                InputRequest::ListRoots(ListRootsRequest::default()),
                            );
                            return SandboxFor::Pending;
                        }
                    }
                } else {
                    // A client that never answers must not hold the call (or every later one).
                    #[allow(deprecated)]
                    let listed = tokio::time::timeout(ROOTS_WAIT, context.peer.list_roots()).await;
                    match listed {
                        Ok(listed) => listed.map_err(|e| e.to_string()),
                        Err(_) => Err(format!("no answer in {} s", ROOTS_WAIT.as_secs())),
                    }
                };
                match listed {
                    Ok(listed) => {
                        let adopted = self.adopt_roots(&listed.roots);
                        if self.connection.roots_generation.load(Ordering::SeqCst) == generation {
                            *lock(&self.connection.client_roots) = adopted.clone();
                        }
                        adopted
                    }
                    Err(error) => {
                        eprintln!(
                            "flycode mcp: the client declares roots but could not list them ({error}); using flycode's roots until it says they changed"
                        );
                        let full = ClientRoots::Narrowed(self.shared.full.clone());
                        if self.connection.roots_generation.load(Ordering::SeqCst) == generation {
                            *lock(&self.connection.client_roots) = full.clone();
                        }
                        full
                    }
                }
            }
            known => known,
        };
        match known {
            ClientRoots::Narrowed(sandbox) => SandboxFor::Call(sandbox),
            ClientRoots::Disjoint(client) => SandboxFor::Refused(client),
            ClientRoots::Unknown => SandboxFor::Call(self.shared.full.clone()),
        }
    }

    /// flycode's roots narrowed to `roots` (see [`super::roots`]); an empty list narrows
    /// nothing (the client named no boundary).
    #[allow(deprecated)]
    fn adopt_roots(&self, roots: &[Root]) -> ClientRoots {
        if roots.is_empty() {
            return ClientRoots::Narrowed(self.shared.full.clone());
        }
        let client: Vec<PathBuf> = roots
            .iter()
            .filter_map(|root| {
                let path = file_uri_path(&root.uri);
                if path.is_none() {
                    eprintln!(
                        "flycode mcp: ignoring the client root {} (not a local file:// URI)",
                        root.uri
                    );
                }
                path
            })
            .filter_map(|path| {
                // A root that does not exist (yet) holds nothing a call could reach.
                Roots::resolve(std::slice::from_ref(&path))
                    .ok()
                    .and_then(|resolved| resolved.paths().first().cloned())
            })
            .collect();
        let narrowed = narrow(self.shared.full.roots(), &client);
        if narrowed == self.shared.full.roots() {
            return ClientRoots::Narrowed(self.shared.full.clone());
        }
        if narrowed.is_empty() {
            return ClientRoots::Disjoint(client);
        }
        let opened = Roots::resolve(&narrowed)
            .map_err(|e| e.to_string())
            .and_then(|roots| Sandbox::open(&roots).map_err(|e| e.to_string()))
            .and_then(|sandbox| {
                let protection = Protection::default()
                    .with_patterns(&self.shared.settings.protected)
                    .map_err(|e| e.to_string())?;
                Ok(sandbox
                    .with_protection(protection)
                    .with_durability(self.shared.full.durability()))
            });
        match opened {
            Ok(sandbox) => ClientRoots::Narrowed(Arc::new(sandbox)),
            Err(error) => {
                eprintln!(
                    "flycode mcp: cannot narrow the roots to the client's ({error}); refusing calls until they change"
                );
                ClientRoots::Disjoint(client)
            }
        }
    }

    /// An opaque token binding an answer to the exact call it was asked for.
    fn request_state(
        &self,
        name: &str,
        args: &Map<String, Value>,
        question: Option<&Question>,
    ) -> String {
        let shown = question.map(|q| q.shown.as_str()).unwrap_or_default();
        let mut hasher = HashWriter(Sha256::new());
        hasher
            .0
            .update(format!("{}\n{name}\n", self.shared.state_key).as_bytes());
        // Streamed into the hash: the arguments are never copied or held as text.
        if serde_json::to_writer(&mut hasher, args).is_err() {
            hasher.0.update(b"(unserialisable)");
        }
        hasher.0.update(format!("\n{shown}").as_bytes());
        hex::encode(hasher.0.finalize())
    }

    /// Runs the decided call on a blocking thread; a cancelled request sets its cancel flag, and
    /// a program that runs long reports progress.
    async fn run(
        self: &Arc<Self>,
        invocation: Invocation<'static>,
        sandbox: Arc<Sandbox>,
        permit: Permit,
        runs_program: bool,
        context: &RequestContext<RoleServer>,
    ) -> Result<Execution, McpError> {
        let cancel = Arc::new(AtomicBool::new(false));
        let shared = Arc::clone(self);
        let flag = Arc::clone(&cancel);
        let mut handle = tokio::task::spawn_blocking(move || {
            shared
                .executor(&sandbox)
                .cancelled_by(flag)
                .run(&invocation, permit)
        });
        let progress_token = context.meta.get_progress_token().filter(|_| runs_program);
        let started = Instant::now();
        let mut ticks =
            tokio::time::interval_at(tokio::time::Instant::now() + PROGRESS_EVERY, PROGRESS_EVERY);
        let joined = loop {
            tokio::select! {
                joined = &mut handle => break joined,
                () = context.ct.cancelled(), if !cancel.load(Ordering::SeqCst) => {
                    // The runner sees the flag, kills the process tree and returns `cancelled`.
                    cancel.store(true, Ordering::SeqCst);
                }
                _ = ticks.tick(), if progress_token.is_some() => {
                    if let Some(token) = &progress_token {
                        let seconds = started.elapsed().as_secs();
                        let mut progress = ProgressNotificationParam::new(token.clone(), seconds as f64);
                        progress.message = Some(format!("running for {seconds} s"));
                        // A client that went away gets no progress; the call still ends.
                        let _ = context.peer.notify_progress(progress).await;
                    }
                }
            }
        };
        joined
            .map_err(|error| McpError::internal_error(format!("the call stopped: {error}"), None))?
            .map_err(|mismatch| McpError::internal_error(mismatch.to_string(), None))
    }

    /// A call refused because none of the client's roots lies inside flycode's: recorded in
    /// the audit log like every refusal, by the call service.
    fn refuse_disjoint(&self, call: &Call, client: &[PathBuf]) -> rmcp::model::CallToolResult {
        let listed = client
            .iter()
            .map(|path| path.display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        let ours = self
            .shared
            .full
            .roots()
            .iter()
            .map(|path| path.display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        self.refuse(
            call,
            ToolError::new(
                ErrorCode::OutsideRoots,
                format!(
                    "{} was not run: none of the client's roots ({}) lies inside flycode's allowed roots ({ours})",
                    call.tool,
                    if listed.is_empty() { "none usable" } else { &listed }
                ),
                Some(
                    "ask the user to open a folder inside flycode's roots in the client, or to add it with --root",
                ),
            ),
        )
    }

    /// A call whose request was cancelled before it started.
    fn cancelled_before_running(&self, call: &Call) -> rmcp::model::CallToolResult {
        self.refuse(
            call,
            ToolError::new(
                ErrorCode::Cancelled,
                format!("{} was cancelled before it started", call.tool),
                Some("send the call again if it is still wanted"),
            ),
        )
    }

    /// A refusal the server decided before the call could run, answered and logged by the
    /// call service like its own.
    fn refuse(&self, call: &Call, error: ToolError) -> rmcp::model::CallToolResult {
        let execution = self.executor(&self.shared.full).refuse(call, error);
        answer_of_execution(execution)
    }
}

/// What a request can carry of the person's answer.
struct ClientAsking<'r> {
    request: &'r CallToolRequestParams,
    context: &'r RequestContext<RoleServer>,
    /// The request speaks 2026-07-28 or later: the answer comes with the request sent again.
    modern: bool,
    /// The client can show the person a form.
    can_ask: bool,
    /// The token an answer must come back with.
    state: &'r str,
    /// Where a question goes that the client cannot show, and its turn.
    terminal: Option<(&'r Arc<dyn Approver>, &'r tokio::sync::Mutex<()>)>,
}

impl ClientAsking<'_> {
    /// The person's answer to `question`: none needed or none possible (`Unavailable`), given
    /// with this request, asked for through `pending` (an `input_required` result), or asked now
    /// through the client's form. `None` when the request was cancelled while the form was open.
    async fn answer(
        &self,
        question: Option<&Question>,
        message: String,
        pending: &mut InputRequests,
    ) -> Option<Approval> {
        let Some(question) = question else {
            return Some(Approval::Unavailable);
        };
        if !self.can_ask {
            return Some(self.ask_terminal(question).await);
        }
        if self.modern {
            let response = self
                .request
                .input_responses
                .as_ref()
                .and_then(|responses| responses.get(APPROVAL_KEY))
                .filter(|_| self.request.request_state.as_deref() == Some(self.state));
            return Some(match response {
                Some(response) => serde_json::from_value::<ElicitResult>(response.clone())
                    .map_or(Approval::No, |result| answer_of(&result)),
                None => {
                    pending.insert(
                        APPROVAL_KEY.to_owned(),
                        InputRequest::Elicitation(ElicitRequest::new(elicitation(message))),
                    );
                    Approval::Unavailable
                }
            });
        }
        let asked = self.context.peer.create_elicitation(elicitation(message));
        tokio::select! {
            result = asked => Some(match result {
                Ok(result) => answer_of(&result),
                Err(error) => {
                    eprintln!("flycode mcp: the client could not ask the user: {error}");
                    Approval::Unavailable
                }
            }),
            () = self.context.ct.cancelled() => None,
        }
    }

    /// The person's answer on flycode's terminal, where the server has one (over HTTP, started
    /// at a terminal), one question at a time; `Unavailable` where it has none. The answer is
    /// waited for even if the request is cancelled meanwhile: a question left open on the
    /// terminal would take the next one's answer.
    async fn ask_terminal(&self, question: &Question) -> Approval {
        let Some((approver, turn)) = self.terminal else {
            return Approval::Unavailable;
        };
        let _turn = turn.lock().await;
        let approver = Arc::clone(approver);
        let question = question.clone();
        tokio::task::spawn_blocking(move || approver.ask(&question))
            .await
            .unwrap_or(Approval::Unavailable)
    }
}

/// The answer to a call the service ran or refused: its block and data as the service made
/// and masked them.
fn answer_of_execution(mut execution: Execution) -> rmcp::model::CallToolResult {
    if let Some(warning) = &execution.audit_error {
        eprintln!("flycode mcp: warning: {warning}");
    }
    // A call the person's policy refused says what the person could change: an MCP client's
    // reader is the person (over HTTP, flycode's terminal may be nobody's).
    if let Some(advice) = execution.advice().map(str::to_owned)
        && execution.block.code.as_deref() == Some(ErrorCode::DeniedByPolicy.as_str())
    {
        execution.block.fields.push(("advice".to_owned(), advice));
    }
    // Moved, not copied: a 1 MB read's content is in the data, and every copy counts.
    let data = execution.output.take().map(|output| output.data);
    execution_result(execution.block, Some(execution.tool), data)
}

/// Where a call may run.
enum SandboxFor {
    /// In this sandbox.
    Call(Arc<Sandbox>),
    /// Nowhere yet: the client must send its roots first (an `input_required` result).
    Pending,
    /// Nowhere: the client's roots (listed) share nothing with flycode's.
    Refused(Vec<PathBuf>),
}

/// Whether the request speaks protocol 2026-07-28 or later, where the server may not send
/// requests of its own and asks through `input_required` results instead.
fn is_modern(context: &RequestContext<RoleServer>) -> bool {
    // ISO dates compare as strings in time order.
    context
        .protocol_version()
        .is_some_and(|version| version.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// Whether the client can show a form to the user (elicitation in form mode).
fn can_elicit(capabilities: Option<&ClientCapabilities>) -> bool {
    capabilities
        .and_then(|c| c.elicitation.as_ref())
        .is_some_and(|e| e.form.is_some() || e.url.is_none())
}

/// A JSON-RPC id as text: `7`, `"abc"` → `abc`.
fn request_id_text(id: &rmcp::model::RequestId) -> String {
    match serde_json::to_value(id) {
        Ok(Value::String(text)) => text,
        Ok(other) => other.to_string(),
        Err(_) => "?".to_owned(),
    }
}

/// The lock's data, also after a thread panicked while holding it.
/// 256 random bits, hex: from the operating system's generator, else from the standard library's
/// randomly seeded hashers (`RandomState` prints nothing of its keys, so only hashing with it
/// draws on them).
fn random_key() -> String {
    use std::hash::BuildHasher;
    use std::io::Read;
    let mut bytes = [0u8; 32];
    let from_os = crate::sandbox::host::open(std::path::Path::new("/dev/urandom"))
        .and_then(|mut f| f.read_exact(&mut bytes));
    if from_os.is_err() {
        let seeded = std::collections::hash_map::RandomState::new();
        for (n, chunk) in bytes.chunks_mut(8).enumerate() {
            chunk.copy_from_slice(&seeded.hash_one((n, SystemTime::now())).to_le_bytes());
        }
    }
    hex::encode(bytes)
}

/// Feeds what is written to it into a sha256.
struct HashWriter(Sha256);

impl std::io::Write for HashWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_key_is_256_fresh_random_bits() {
        let (one, two) = (random_key(), random_key());
        assert_eq!(one.len(), 64);
        assert!(one.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(one, two);
    }
}
