//! A connection to one MCP server, over stdio or Streamable HTTP, that reconnects when needed.
//!
//! The protocol revision is negotiated by rmcp's `Auto` lifecycle (a `server/discover` probe,
//! falling back to `initialize` when the server answers that it is legacy); a server that says
//! nothing to the probe gets `initialize` on a fresh connection after `probe_timeout` instead of
//! rmcp's fixed 10 s. A stdio server that crashed is restarted on the next call; an HTTP session
//! the server forgot (404, or 400 as some servers answer) is re-established by the transport.

use crate::McpServerSpec;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, ProtocolVersion,
    RequestMetaObject, ServerResult, Tool,
};
use rmcp::service::{PeerRequestOptions, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientLifecycleMode, ClientServiceExt, RoleClient};

use serde_json::{Map, Value};
use tokio::sync::Mutex;
use tracing::Instrument;

/// Which programs configs may launch as stdio servers. Closed by default: [`default`] and
/// [`from_env`] with `AGENTRY_MCP_ALLOW` unset launch nothing.
///
/// Entries and commands are compared as the files they resolve to (a bare name is looked up
/// on `PATH`, symlinks followed), so allowing `python3` admits `/usr/bin/python3` but not a
/// `python3` in some other folder, and a server's own `env` cannot redirect the lookup: the
/// program is started by the absolute path found at the check.
///
/// [`default`]: LaunchPolicy::default
/// [`from_env`]: LaunchPolicy::from_env
#[derive(Debug, Clone, Default)]
pub struct LaunchPolicy {
    /// Program names or paths (`npx`, `node`, `/usr/bin/python3`).
    pub allowed: Vec<String>,
    /// Any command (tests, or a deliberate `AGENTRY_MCP_ALLOW=*`).
    pub allow_any: bool,
}

impl LaunchPolicy {
    /// Allows any command (for configs the user wrote themselves).
    pub fn any() -> Self {
        LaunchPolicy {
            allowed: Vec::new(),
            allow_any: true,
        }
    }

    /// Allows exactly `programs` (names looked up on `PATH`, or paths).
    pub fn allow<I: IntoIterator<Item = S>, S: Into<String>>(programs: I) -> Self {
        LaunchPolicy {
            allowed: programs.into_iter().map(Into::into).collect(),
            allow_any: false,
        }
    }

    /// From `AGENTRY_MCP_ALLOW`: comma-separated programs, `*` for any; unset or empty
    /// allows none.
    pub fn from_env() -> Self {
        match std::env::var("AGENTRY_MCP_ALLOW") {
            Ok(s) if s.trim() == "*" => Self::any(),
            Ok(s) => Self::allow(s.split(',').map(str::trim).filter(|p| !p.is_empty())),
            Err(_) => Self::default(),
        }
    }

    /// The absolute path to start `command` by, when the policy allows it; the error names
    /// the allow-list.
    pub fn check(&self, command: &str) -> Result<PathBuf, McpError> {
        let found = find_program(command);
        if self.allow_any {
            return Ok(found.unwrap_or_else(|| PathBuf::from(command)));
        }
        let refused = || McpError::NotAllowed(command.to_owned());
        let found = found.ok_or_else(refused)?;
        let file = std::fs::canonicalize(&found).map_err(|_| refused())?;
        let allowed = self.allowed.iter().any(|a| {
            find_program(a)
                .and_then(|p| std::fs::canonicalize(p).ok())
                .is_some_and(|p| p == file)
        });
        if allowed { Ok(found) } else { Err(refused()) }
    }
}

/// Where `command` is: a path (with a `/`) made absolute, a bare name looked up on `PATH`
/// (the first executable regular file). Not canonicalized: a virtualenv's `python` symlink
/// must start as itself.
fn find_program(command: &str) -> Option<PathBuf> {
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| {
            #[cfg(unix)]
            let runnable = std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0;
            #[cfg(not(unix))]
            let runnable = true;
            m.is_file() && runnable
        })
    };
    if command.is_empty() {
        return None;
    }
    if command.contains('/') {
        let p = std::path::absolute(command).ok()?;
        return executable(&p).then_some(p);
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(command))
        .find(|p| executable(p))
}

/// MCP failures.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// A server entry that cannot be used as written.
    #[error("invalid MCP config: {0}")]
    Config(String),
    /// A stdio command the launch policy refuses.
    #[error(
        "command `{0}` is not in the MCP launch allow-list: add it to AGENTRY_MCP_ALLOW \
         (comma-separated program names or paths; `*` allows any)"
    )]
    NotAllowed(String),
    /// Launching, connecting or negotiating failed.
    #[error("cannot connect to MCP server {server}: {reason}")]
    Connect {
        /// The server's name in the config.
        server: String,
        /// What went wrong.
        reason: String,
    },
    /// No answer (or progress) in time; the call was canceled.
    #[error("MCP server {server} did not answer within {secs} s")]
    Timeout {
        /// The server's name in the config.
        server: String,
        /// The timeout that passed.
        secs: f64,
    },
    /// The server answered the call with an error, or the session broke during it.
    #[error("MCP server {server}: {reason}")]
    Call {
        /// The server's name in the config.
        server: String,
        /// What went wrong.
        reason: String,
    },
}

impl McpError {
    /// The error's kind, as traces record it (`error.type`).
    pub fn kind(&self) -> &'static str {
        match self {
            McpError::Config(_) => "config",
            McpError::NotAllowed(_) => "not_allowed",
            McpError::Connect { .. } => "connect",
            McpError::Timeout { .. } => "timeout",
            McpError::Call { .. } => "call",
        }
    }
}

/// Receives server notifications: a changed tool list marks the client's tools stale.
#[derive(Clone, Default)]
pub struct Handler {
    tools_changed: Arc<std::sync::atomic::AtomicBool>,
}

impl rmcp::ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _context: rmcp::service::NotificationContext<RoleClient>) {
        tracing::debug!("MCP server's tool list changed");
        self.tools_changed
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

type Session = RunningService<RoleClient, Handler>;

/// Resolves once the session's transport has closed.
async fn wait_closed(s: &Session) {
    while !s.is_transport_closed() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One MCP server.
pub struct McpClient {
    /// How the server was configured.
    pub spec: McpServerSpec,
    /// The stdio server's program, as the launch policy resolved it.
    program: Option<PathBuf>,
    /// The server turned out to speak only the legacy HTTP+SSE transport.
    legacy_sse: std::sync::atomic::AtomicBool,
    handler: Handler,
    session: Mutex<Option<Arc<Session>>>,
    /// How long a silent server gets before the legacy handshake is tried.
    pub probe_timeout: Duration,
}

impl McpClient {
    /// Connects (checking the launch policy for stdio servers).
    pub async fn connect(
        spec: McpServerSpec,
        policy: &LaunchPolicy,
    ) -> Result<Arc<Self>, McpError> {
        let program = match spec.command.as_deref().filter(|c| !c.is_empty()) {
            Some(cmd) => Some(policy.check(cmd)?),
            None => None,
        };
        if program.is_none() && spec.url.is_none() {
            return Err(McpError::Config(format!(
                "MCP server {} needs `command` or `url`",
                spec.name
            )));
        }
        let c = Arc::new(McpClient {
            spec,
            program,
            legacy_sse: Default::default(),
            handler: Handler::default(),
            session: Mutex::new(None),
            probe_timeout: Duration::from_secs(3),
        });
        c.session().await?;
        Ok(c)
    }

    fn err(&self, reason: impl std::fmt::Display) -> McpError {
        McpError::Connect {
            server: self.spec.name.clone(),
            reason: reason.to_string(),
        }
    }

    async fn open(&self, lifecycle: ClientLifecycleMode) -> Result<Session, McpError> {
        if let Some(program) = &self.program {
            let cmd = program.display();
            let mut command = tokio::process::Command::new(program);
            command
                .args(&self.spec.args)
                .envs(&self.spec.env)
                .kill_on_drop(true);
            let (transport, _stderr) = TokioChildProcess::builder(command)
                .stderr(std::process::Stdio::null())
                .spawn()
                .map_err(|e| self.err(format!("cannot start `{cmd}`: {e}")))?;
            return self
                .handler
                .clone()
                .serve_with_lifecycle(transport, lifecycle)
                .await
                .map_err(|e| self.err(e));
        }
        let url = self.spec.url.clone().unwrap_or_default();
        let headers = self.header_map()?;
        let mode = self.spec.transport.as_deref();
        if mode == Some("sse") || self.legacy_sse.load(std::sync::atomic::Ordering::Relaxed) {
            return self.open_sse(&url, headers).await;
        }
        let http = reqwest13::Client::builder()
            .connect_timeout(Duration::from_secs_f64(self.spec.connect_timeout_secs))
            .pool_max_idle_per_host(0)
            .build()
            .map_err(|e| self.err(e))?;
        let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
        config.auth_header = self.spec.bearer_token.clone();
        config.custom_headers = headers
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .filter(|(k, _)| k != http::header::AUTHORIZATION)
            .collect();
        let transport = StreamableHttpClientTransport::with_client(SessionAware(http), config);
        match self
            .handler
            .clone()
            .serve_with_lifecycle(transport, lifecycle)
            .await
        {
            Ok(s) => Ok(s),
            Err(e) if mode.is_none() => {
                // Servers of the 2024-11-05 generation only speak HTTP+SSE.
                tracing::debug!(server = %self.spec.name, "Streamable HTTP failed ({e}); trying legacy SSE");
                let s = self
                    .open_sse(&url, headers)
                    .await
                    .map_err(|_| self.err(e))?;
                self.legacy_sse
                    .store(true, std::sync::atomic::Ordering::Relaxed);
                Ok(s)
            }
            Err(e) => Err(self.err(e)),
        }
    }

    fn header_map(&self) -> Result<reqwest13::header::HeaderMap, McpError> {
        let mut headers = reqwest13::header::HeaderMap::new();
        for (k, v) in &self.spec.headers {
            let name = http::HeaderName::try_from(k.as_str()).map_err(|e| self.err(e))?;
            let value = http::HeaderValue::try_from(v.as_str()).map_err(|e| self.err(e))?;
            headers.insert(name, value);
        }
        if let Some(t) = &self.spec.bearer_token {
            let v = http::HeaderValue::try_from(format!("Bearer {t}")).map_err(|e| self.err(e))?;
            headers.insert(http::header::AUTHORIZATION, v);
        }
        Ok(headers)
    }

    /// The legacy transport, with the `initialize` handshake (its servers predate discover).
    async fn open_sse(
        &self,
        url: &str,
        headers: reqwest13::header::HeaderMap,
    ) -> Result<Session, McpError> {
        let transport = crate::legacy_sse::LegacySseTransport::connect(
            url,
            headers,
            Duration::from_secs_f64(self.spec.connect_timeout_secs),
        )
        .await
        .map_err(|e| self.err(e))?;
        self.handler
            .clone()
            .serve_with_lifecycle(transport, ClientLifecycleMode::Initialize)
            .await
            .map_err(|e| self.err(e))
    }

    /// The live session, (re)connecting when there is none or it closed (a crashed server).
    pub async fn session(&self) -> Result<Arc<Session>, McpError> {
        let mut guard = self.session.lock().await;
        if let Some(s) = guard.as_ref()
            && !s.is_transport_closed()
        {
            return Ok(s.clone());
        }
        if guard.is_some() {
            tracing::info!(server = %self.spec.name, "MCP session closed; reconnecting");
        }
        let connect = Duration::from_secs_f64(self.spec.connect_timeout_secs);
        let auto = ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::V_2025_11_25),
        };
        let forced = match self.spec.protocol.as_deref() {
            Some("initialize") => Some(ClientLifecycleMode::Initialize),
            Some("discover") => Some(ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            }),
            _ => None,
        };
        if let Some(mode) = forced {
            let s = tokio::time::timeout(connect, self.open(mode))
                .await
                .map_err(|_| McpError::Timeout {
                    server: self.spec.name.clone(),
                    secs: connect.as_secs_f64(),
                })??;
            let s = Arc::new(s);
            *guard = Some(s.clone());
            return Ok(s);
        }
        let session = match tokio::time::timeout(self.probe_timeout.min(connect), self.open(auto))
            .await
        {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                tracing::debug!(server = %self.spec.name, "discover failed ({e}); trying initialize");
                self.open_legacy(connect).await?
            }
            Err(_) => {
                tracing::debug!(server = %self.spec.name, "server silent on discover; trying initialize");
                self.open_legacy(connect).await?
            }
        };
        let s = Arc::new(session);
        *guard = Some(s.clone());
        Ok(s)
    }

    async fn open_legacy(&self, connect: Duration) -> Result<Session, McpError> {
        tokio::time::timeout(connect, self.open(ClientLifecycleMode::Initialize))
            .await
            .map_err(|_| McpError::Timeout {
                server: self.spec.name.clone(),
                secs: connect.as_secs_f64(),
            })?
    }

    /// The protocol revision negotiated with the server (e.g. `2026-07-28`, `2025-11-25`).
    pub async fn protocol_version(&self) -> Result<String, McpError> {
        let s = self.session().await?;
        let info = s.peer_info().ok_or_else(|| self.err("no server info"))?;
        Ok(serde_json::to_value(&info.protocol_version)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default())
    }

    /// Whether the server said its tool list changed since the last call (and clears it).
    pub fn take_tools_changed(&self) -> bool {
        self.handler
            .tools_changed
            .swap(false, std::sync::atomic::Ordering::SeqCst)
    }

    /// The server's tools (all pages).
    pub async fn list_tools(&self) -> Result<Vec<Tool>, McpError> {
        let s = self.session().await?;
        s.peer().list_all_tools().await.map_err(|e| McpError::Call {
            server: self.spec.name.clone(),
            reason: e.to_string(),
        })
    }

    /// Calls a tool. The inactivity timeout is extended by progress notifications, the absolute
    /// cap is not; on timeout the request is canceled. A transport failure reconnects once.
    pub async fn call(
        &self,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<CallToolResult, McpError> {
        // OpenTelemetry's MCP conventions: `tools/call {tool}`, kind client, its trace context
        // in the request's `_meta` (SEP-414) so the server's spans join the caller's trace.
        let span = tracing::info_span!(
            "mcp.call",
            otel.name = format!("tools/call {name}"),
            otel.kind = "client",
            otel.status_code = tracing::field::Empty,
            mcp.method.name = "tools/call",
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = name,
            agentry.mcp.server = %self.spec.name,
            error.type = tracing::field::Empty,
        );
        let r = self.call_in(name, arguments).instrument(span.clone()).await;
        if let Err(e) = &r {
            span.record("otel.status_code", "error");
            span.record("error.type", e.kind());
        }
        r
    }

    async fn call_in(
        &self,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<CallToolResult, McpError> {
        let mut last = None;
        for attempt in 0..2 {
            let s = self.session().await?;
            let params =
                CallToolRequestParams::new(name.to_owned()).with_arguments(arguments.clone());
            let mut options =
                PeerRequestOptions::with_timeout(Duration::from_secs_f64(self.spec.timeout_secs))
                    .reset_timeout_on_progress()
                    .with_max_total_timeout(Duration::from_secs_f64(self.spec.max_timeout_secs));
            if let Some(tp) = agentry_a2a::trace::current_traceparent() {
                let mut meta = RequestMetaObject::new();
                meta.set_traceparent(tp);
                options.meta = Some(meta);
            }
            let req = ClientRequest::CallToolRequest(CallToolRequest::new(params));
            let result = match s.peer().send_request_with_option(req, options).await {
                // A transport that dies (a crashed server, an HTTP session the server forgot)
                // leaves the request unanswered: notice it instead of waiting for the timeout.
                Ok(handle) => tokio::select! {
                    r = handle.await_response() => r,
                    _ = wait_closed(&s) => Err(rmcp::ServiceError::TransportClosed),
                },
                Err(e) => Err(e),
            };
            match result {
                Ok(ServerResult::CallToolResult(r)) => return Ok(r),
                Ok(other) => {
                    return Err(McpError::Call {
                        server: self.spec.name.clone(),
                        reason: format!("unexpected answer to tools/call: {other:?}"),
                    });
                }
                Err(rmcp::ServiceError::Timeout { timeout }) => {
                    return Err(McpError::Timeout {
                        server: self.spec.name.clone(),
                        secs: timeout.as_secs_f64(),
                    });
                }
                Err(e) => {
                    let closed = s.is_transport_closed();
                    last = Some(McpError::Call {
                        server: self.spec.name.clone(),
                        reason: e.to_string(),
                    });
                    if !closed || attempt == 1 {
                        break;
                    }
                    tracing::info!(server = %self.spec.name, "transport closed during a call; reconnecting");
                }
            }
        }
        Err(last.unwrap_or_else(|| self.err("no answer")))
    }
}

/// The reqwest client, plus one tolerance: a server that forgot our session may answer 400
/// with a JSON-RPC error and a null id (server-everything does) instead of 404. Such an answer
/// can match no request, so it would leave the call waiting; it is reported as an expired
/// session instead, which makes the transport open a new one.
#[derive(Clone)]
pub(crate) struct SessionAware(pub reqwest13::Client);

use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};

type PostResult = Result<StreamableHttpPostResponse, StreamableHttpError<reqwest13::Error>>;

fn stale_session(had_session: bool, r: PostResult) -> PostResult {
    if let Ok(StreamableHttpPostResponse::Json(rmcp::model::ServerJsonRpcMessage::Error(e), _)) = &r
        && had_session
        && serde_json::to_value(e).is_ok_and(|v| v["id"].is_null())
    {
        tracing::debug!("HTTP session rejected by the server; starting a new one");
        return Err(StreamableHttpError::SessionExpired);
    }
    r
}

impl StreamableHttpClient for SessionAware {
    type Error = reqwest13::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: rmcp::model::ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: std::collections::HashMap<http::HeaderName, http::HeaderValue>,
    ) -> PostResult {
        let had = session_id.is_some();
        stale_session(
            had,
            self.0
                .post_message(uri, message, session_id, auth_header, custom_headers)
                .await,
        )
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: rmcp::model::ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: std::collections::HashMap<http::HeaderName, http::HeaderValue>,
        max_sse_event_size: usize,
    ) -> PostResult {
        let had = session_id.is_some();
        let r = self
            .0
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        stale_session(had, r)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: std::collections::HashMap<http::HeaderName, http::HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.0
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: std::collections::HashMap<http::HeaderName, http::HeaderValue>,
    ) -> Result<
        futures_util::stream::BoxStream<'static, Result<sse_stream::Sse, sse_stream::Error>>,
        StreamableHttpError<Self::Error>,
    > {
        self.0
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: std::collections::HashMap<http::HeaderName, http::HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<
        futures_util::stream::BoxStream<'static, Result<sse_stream::Sse, sse_stream::Error>>,
        StreamableHttpError<Self::Error>,
    > {
        self.0
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}
