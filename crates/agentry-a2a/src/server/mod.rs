//! The A2A server: agent cards, the JSON-RPC endpoint, SSE streams, push notifications.
//!
//! ```no_run
//! use std::sync::Arc;
//! use agentry_a2a::{model::AgentCard, server::{A2aServer, AgentService}, store::MemoryStore};
//! # async fn run(agent: impl agentry_a2a::server::AgentExecutor) -> std::io::Result<()> {
//! let card = AgentCard::new("echo", "Echoes its input", "http://127.0.0.1:8080/");
//! let server = A2aServer::new()
//!     .agent("/", AgentService::new(card, agent, Arc::new(MemoryStore::default())));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! server.serve(listener, std::future::pending()).await
//! # }
//! ```
//!
//! Flow of a request: [`handlers`](self) check the content type and credentials, the JSON-RPC
//! codec ([`crate::jsonrpc`]) decodes it into a [`Request`](crate::jsonrpc::Request), and the
//! per-agent task registry (`hub`) starts a turn, cancels, or subscribes; the agent's events come
//! back through the registry's broadcast channel as a JSON body or an SSE stream.

mod access;
mod admission;
mod events;
mod executor;
#[cfg(feature = "grpc")]
mod grpc;
mod handlers;
mod hub;
pub mod listen;
mod ops;
mod push;
pub mod queue;
mod rest;
mod span;
mod stream;
pub mod tls;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

pub use access::{Access, AccessLog};
pub use admission::{Admission, Admit, Refused};
pub use events::TaskEvents;
pub use executor::{AgentExecutor, DynAgentExecutor, EventSink, ExecutorError, RequestContext};
pub use hub::{MAX_PUSH_CONFIGS, MAX_TASK_BYTES};
pub use push::{PublicResolver, PushSender, PushSettings, check_url_syntax, is_private};
pub use queue::{Claimed, Queueing, WorkQueue};

use crate::model::AgentCard;
use crate::store::TaskStore;

/// Credentials a server accepts. A request carries one of them as `Authorization: Bearer` or
/// in the API-key header.
#[derive(Debug, Clone, Default)]
pub struct Credentials {
    /// Accepted bearer tokens.
    pub bearer_tokens: Vec<String>,
    /// Header name and accepted values, e.g. `X-API-Key`.
    pub api_key_header: Option<String>,
    /// Accepted API keys (in `api_key_header`).
    pub api_keys: Vec<String>,
    /// Require credentials on every call, not only for the extended card.
    pub required_for_all: bool,
    /// Bearer tokens that are not in `bearer_tokens` go to this verifier (JWTs).
    pub verifier: Option<Arc<dyn BearerVerifier>>,
    /// Scopes a verified token must carry, all of them (a token without one gets 403).
    /// The operator's own `bearer_tokens` and `api_keys` carry every scope.
    pub required_scopes: Vec<String>,
    /// Scopes a verified token must also carry for a request naming one of these skills
    /// (the task envelope's `skill`); declared as each skill's `security` in the card.
    pub skill_scopes: std::collections::BTreeMap<String, Vec<String>>,
    /// Client certificates as credentials (mTLS): a request over a TLS connection whose
    /// client presented a certificate the listener's client CA signed is `mtls:` and the
    /// certificate's subject common name (see [`tls`]). Like the operator's static
    /// credentials, such a caller holds every scope.
    pub client_certs: Option<ClientCerts>,
}

/// Which verified client certificates are accepted (see [`Credentials::client_certs`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientCerts {
    /// The subject common names accepted; empty: any certificate the client CA signed.
    pub names: Vec<String>,
}

/// Checks bearer tokens a server does not list itself (signed tokens such as JWTs): whom a
/// token is for and which scopes it grants, or why it is refused.
pub trait BearerVerifier: std::fmt::Debug + Send + Sync + 'static {
    /// The token's subject and scopes; the error says which check failed (it reaches the
    /// client in `WWW-Authenticate`, so it must not hold a secret).
    fn verify(&self, token: &str) -> Result<VerifiedBearer, String>;

    /// Asked before [`verify`](Self::verify) for each request that presents a bearer token:
    /// where the check needs I/O (asking an OAuth introspection endpoint, RFC 7662), the
    /// work to await, after which `verify` reads its result. `None` (the default): nothing
    /// to do, and nothing allocated on the request's path.
    fn prepare<'a>(&'a self, _token: &'a str) -> Option<PrepareFuture<'a>> {
        None
    }
}

/// What [`BearerVerifier::prepare`] has a request await.
pub type PrepareFuture<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>>;

impl Credentials {
    /// Does what the verifier needs before a request's token is checked (see
    /// [`BearerVerifier::prepare`]); static tokens need nothing.
    pub async fn prepare(&self, headers: &http::HeaderMap) {
        self.prepare_bearer(bearer_of(headers)).await;
    }

    /// [`prepare`](Self::prepare) for the request's bearer token, already read.
    pub(crate) async fn prepare_bearer(&self, bearer: Option<&str>) {
        if let (Some(v), Some(token)) = (&self.verifier, bearer)
            && !self.bearer_tokens.iter().any(|t| ct_eq(t, token))
            && let Some(work) = v.prepare(token)
        {
            work.await;
        }
    }
}

/// A request to one of the operator's routes beside the agents' refused by [`authorize`].
#[derive(Debug)]
#[non_exhaustive]
pub struct Denied {
    /// Why, for the audit trail (never a secret).
    pub message: String,
    /// Who it was, when the credential was valid but its scopes not enough.
    pub caller: Option<String>,
    /// The answer to send: 401 or 403 with `WWW-Authenticate` and a `google.rpc.Status`
    /// body, as the HTTP+JSON binding answers.
    pub response: axum::response::Response,
}

/// Checks a request to one of the operator's routes beside the agents' (agentry's event
/// endpoint) as the agents' own routes are checked: the principal (`None`: anonymous, where
/// `credentials` are `None` or do not require one), or the refusal to send.
pub async fn authorize(
    credentials: Option<&Credentials>,
    headers: &http::HeaderMap,
) -> Result<Option<String>, Denied> {
    handlers::authenticate_with(credentials, headers)
        .await
        .map(|who| who.principal)
        .map_err(|why| Denied {
            response: rest::refused(&why),
            message: why.message,
            caller: why.caller,
        })
}

/// What a [`BearerVerifier`] learned from a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedBearer {
    /// Whom the token is for (`sub`).
    pub subject: String,
    /// The scopes it grants. Shared: a verifier that remembers tokens hands out the same
    /// list on every request instead of a copy.
    pub scopes: Arc<[String]>,
    /// Who presents it for the subject, most recent first (a delegated token's `act`
    /// chain); empty when the subject presents it.
    pub actors: Arc<[String]>,
}

/// What a request's credentials amount to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// It presents none.
    Anonymous,
    /// It presents an accepted credential: the principal, the scopes of a verified token
    /// (`None` for the operator's static tokens and API keys, which hold every scope), and
    /// the agents acting for the principal (a delegated token's chain).
    Caller(String, Option<Arc<[String]>>, Arc<[String]>),
    /// It presents a credential that is refused, and why.
    Invalid(String),
    /// A valid token (of this principal) that lacks these required scopes.
    Insufficient {
        caller: String,
        missing: Vec<String>,
    },
}

/// The bearer token of an `Authorization` header (see [`crate::credential::bearer_in`]).
pub(crate) fn bearer_of(headers: &http::HeaderMap) -> Option<&str> {
    headers
        .get(http::header::AUTHORIZATION)
        .and_then(crate::credential::bearer_in)
}

impl Credentials {
    fn accepts(&self, headers: &http::HeaderMap) -> bool {
        self.principal(headers).is_some()
    }

    /// Who a request authenticates as, when it presents a credential this server accepts:
    /// `bearer:` or `api-key:` and a digest of the credential (so the task stores and logs
    /// that keep principals never hold a secret), or `jwt:` and a verified token's subject.
    /// Tasks belong to the principal that made them.
    pub fn principal(&self, headers: &http::HeaderMap) -> Option<String> {
        match self.verdict(headers) {
            Verdict::Caller(p, _, _) => Some(p),
            _ => None,
        }
    }

    pub(crate) fn verdict(&self, headers: &http::HeaderMap) -> Verdict {
        self.verdict_with(headers, bearer_of(headers))
    }

    /// [`verdict`](Self::verdict) with the request's bearer token already read (a 400-byte
    /// JWT is checked byte by byte as a header value: once per request is enough).
    pub(crate) fn verdict_with(&self, headers: &http::HeaderMap, bearer: Option<&str>) -> Verdict {
        if let Some(token) = bearer {
            if let Some(t) = self.bearer_tokens.iter().find(|t| ct_eq(t, token)) {
                return Verdict::Caller(digest("bearer", t), None, Arc::default());
            }
            if let Some(v) = &self.verifier {
                return match v.verify(token) {
                    Ok(b) => {
                        let missing: Vec<String> = self
                            .required_scopes
                            .iter()
                            .filter(|s| !b.scopes.contains(s))
                            .cloned()
                            .collect();
                        let mut caller = String::with_capacity(4 + b.subject.len());
                        caller.push_str("jwt:");
                        caller.push_str(&b.subject);
                        if missing.is_empty() {
                            Verdict::Caller(caller, Some(b.scopes), b.actors)
                        } else {
                            Verdict::Insufficient { caller, missing }
                        }
                    }
                    Err(why) => Verdict::Invalid(why),
                };
            }
        }
        if let Some(h) = &self.api_key_header
            && let Some(v) = headers.get(h.as_str()).and_then(|v| v.to_str().ok())
            && let Some(k) = self.api_keys.iter().find(|k| ct_eq(k, v))
        {
            return Verdict::Caller(digest("api-key", k), None, Arc::default());
        }
        if bearer.is_none()
            && let Some(cc) = &self.client_certs
            && let Some(cn) = headers
                .get(tls::VERIFIED_CLIENT_HEADER)
                .and_then(|v| v.to_str().ok())
        {
            return if cc.names.is_empty() || cc.names.iter().any(|n| n == cn) {
                Verdict::Caller(format!("mtls:{cn}"), None, Arc::default())
            } else {
                Verdict::Invalid(format!("client certificate `{cn}` not accepted"))
            };
        }
        match bearer {
            Some(_) => Verdict::Invalid("token not accepted".into()),
            None => Verdict::Anonymous,
        }
    }
}

impl Credentials {
    /// Declares these credentials in `card` (`securitySchemes`, and `security` when every
    /// call needs them), so clients learn from the card how to authenticate: `bearer` (HTTP
    /// bearer) and `apiKey` (the header).
    pub fn declare(&self, card: &mut AgentCard) {
        use crate::model::SecurityScheme;
        let mut any = Vec::new();
        if self.verifier.is_some() {
            card.security_schemes.insert(
                "jwt".into(),
                SecurityScheme::Http {
                    scheme: "bearer".into(),
                    bearer_format: Some("JWT".into()),
                    description: Some(
                        "A JWT from the issuer the agent's operator trusts, for this agent's \
                         audience."
                            .into(),
                    ),
                },
            );
            any.push("jwt");
        }
        if !self.bearer_tokens.is_empty() {
            card.security_schemes.insert(
                "bearer".into(),
                SecurityScheme::Http {
                    scheme: "bearer".into(),
                    bearer_format: None,
                    description: Some("A token the agent's operator issued.".into()),
                },
            );
            any.push("bearer");
        }
        if let Some(header) = &self.api_key_header
            && !self.api_keys.is_empty()
        {
            card.security_schemes.insert(
                "apiKey".into(),
                SecurityScheme::ApiKey {
                    location: "header".into(),
                    name: header.clone(),
                    description: Some("A key the agent's operator issued.".into()),
                },
            );
            any.push("apiKey");
        }
        if self.client_certs.is_some() {
            card.security_schemes.insert(
                "mtls".into(),
                SecurityScheme::MutualTls {
                    description: Some(
                        "A client certificate signed by the CA the agent's operator trusts.".into(),
                    ),
                },
            );
            any.push("mtls");
        }
        // Alternatives: one of them is enough; a JWT needs the scopes, the operator's own
        // credentials hold them all.
        let alternatives =
            |extra: &[String]| -> Vec<std::collections::BTreeMap<String, Vec<String>>> {
                any.iter()
                    .map(|name| {
                        let scopes = if *name == "jwt" {
                            let mut s = self.required_scopes.clone();
                            s.extend(
                                extra
                                    .iter()
                                    .filter(|x| !s.contains(x))
                                    .cloned()
                                    .collect::<Vec<_>>(),
                            );
                            s
                        } else {
                            Vec::new()
                        };
                        std::iter::once(((*name).to_owned(), scopes)).collect()
                    })
                    .collect()
            };
        if self.required_for_all {
            card.security = alternatives(&[]);
        }
        if self.verifier.is_some() {
            for skill in &mut card.skills {
                if let Some(extra) = self.skill_scopes.get(&skill.id) {
                    skill.security = alternatives(extra);
                }
            }
        }
    }
}

/// `kind:` and the first 16 bytes of the credential's SHA-256, in hex.
fn digest(kind: &str, secret: &str) -> String {
    use sha2::Digest;
    let d = sha2::Sha256::digest(secret.as_bytes());
    format!("{kind}:{}", crate::hex(&d[..16]))
}

/// Constant-time comparison, so a token cannot be guessed byte by byte from timings.
fn ct_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// One agent as served: its card, its executor, its store.
pub struct AgentService {
    /// The public card.
    pub card: AgentCard,
    /// The card for authenticated callers.
    pub extended_card: Option<AgentCard>,
    /// The agent.
    pub executor: Arc<dyn DynAgentExecutor>,
    /// Where its tasks are kept.
    pub store: Arc<dyn TaskStore>,
    /// Credentials callers must present (`None`: open).
    pub credentials: Option<Credentials>,
    /// Where every authorization decision is recorded before the request is served.
    pub access_log: Option<Arc<dyn AccessLog>>,
    /// Asked before a send with a task envelope starts: may refuse it or add instructions
    /// (governance's triggers).
    pub admission: Option<Arc<dyn Admit>>,
    /// Task events shared with the other replicas of the agent (`None`: one process): a
    /// subscription to a task whose turn runs on another replica follows it through them.
    pub events: Option<Arc<dyn TaskEvents>>,
    /// Turns queued for the agent's workers (`None`: every turn runs where it was asked).
    pub queue: Option<Queueing>,
}

impl AgentService {
    /// Serves `executor` with `card`, its tasks in `store`, open to anyone.
    pub fn new(card: AgentCard, executor: impl AgentExecutor, store: Arc<dyn TaskStore>) -> Self {
        AgentService {
            card,
            extended_card: None,
            executor: Arc::new(executor),
            store,
            credentials: None,
            access_log: None,
            admission: None,
            events: None,
            queue: None,
        }
    }

    /// Asks `gate` before each send with a task envelope starts (see [`Admit`]).
    pub fn with_admission(mut self, gate: Arc<dyn Admit>) -> Self {
        self.admission = Some(gate);
        self
    }

    /// Records every authorization decision about this agent's requests in `log` (an audit
    /// trail) before serving them; a request whose decision cannot be recorded is refused.
    pub fn with_access_log(mut self, log: Arc<dyn AccessLog>) -> Self {
        self.access_log = Some(log);
        self
    }

    /// Serves `card` to authenticated callers of `agent/getAuthenticatedExtendedCard`, and
    /// advertises it in the public card.
    pub fn with_extended_card(mut self, card: AgentCard, credentials: Credentials) -> Self {
        self.card.supports_authenticated_extended_card = Some(true);
        self.extended_card = Some(card);
        self.credentials = Some(credentials);
        self
    }

    /// Requires `credentials` on every call.
    pub fn with_credentials(mut self, credentials: Credentials) -> Self {
        self.credentials = Some(credentials);
        self
    }

    /// Shares task events with the agent's other replicas through `events`.
    pub fn with_events(mut self, events: Arc<dyn TaskEvents>) -> Self {
        self.events = Some(events);
        self
    }

    /// Queues new tasks sent without waiting for the agent's workers, this replica running
    /// `workers` of them at once (0: it only queues); see [`queue`]. Needs a store and task
    /// events shared by the replicas.
    pub fn with_queue(mut self, queue: Arc<dyn WorkQueue>, workers: usize) -> Self {
        self.queue = Some(Queueing {
            queue,
            workers,
            name: None,
        });
        self
    }
}

/// Server-wide limits and settings.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Largest request body; larger ones get HTTP 413.
    pub body_limit: usize,
    /// Interval of SSE keep-alive comments.
    pub keep_alive: Duration,
    /// Events buffered per task for slow stream subscribers before they skip ahead.
    pub stream_buffer: usize,
    /// Push-notification delivery.
    pub push: PushSettings,
    /// Host names the server answers (the `Host` header without its port, compared
    /// case-insensitively; IPv6 in brackets); others get 421. `None` answers any. A loopback
    /// listener should set it: a DNS-rebound name then cannot reach the agent from a page.
    pub allowed_hosts: Option<Vec<String>>,
    /// Connection limits of [`A2aServer::serve`] (header-read timeout, connection cap).
    pub limits: listen::Limits,
    /// The card a request without `A2A-Version` gets (one with the header gets its
    /// generation's card).
    pub card: CardDefault,
    /// How long an idempotency key holds the task of its first request (default 24 hours):
    /// a retry within it gets that task, after it a new one.
    pub idempotency_window: Duration,
    /// Serve Prometheus metrics at `GET /metrics` (default off: they count the traffic of
    /// every agent, unauthenticated). `/healthz` and `/readyz` are always served.
    pub metrics: bool,
    /// On shutdown, how long `/readyz` says `draining` (503) while the server still takes
    /// new requests, before it stops accepting and lets open ones finish: long enough for a
    /// load balancer's health checks to take the replica out (default 0).
    pub drain_delay: Duration,
}

/// Which agent card a card request without an `A2A-Version` header gets. A 0.3 client sends
/// no header and needs the 0.3 fields (`url`, `protocolVersion`, ...), which the 1.0 JSON
/// schema forbids; a strict 1.0 validator (TCK 1.0) sends no header either. No one answer
/// satisfies both, so it is a setting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum CardDefault {
    /// The 0.3 card with the 1.0 fields added: every SDK of both generations reads it (the
    /// interop matrix), strict 1.0 schema validation does not.
    #[default]
    Both,
    /// The 1.0 card only, valid against the 1.0 JSON schema; 0.3-only clients cannot read it.
    V1_0,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            body_limit: 4 * 1024 * 1024,
            keep_alive: Duration::from_secs(15),
            stream_buffer: 64,
            push: PushSettings::default(),
            allowed_hosts: None,
            limits: listen::Limits::default(),
            card: CardDefault::default(),
            idempotency_window: Duration::from_secs(24 * 3600),
            metrics: false,
            drain_delay: Duration::ZERO,
        }
    }
}

/// Makes a server's `/readyz` say `draining` (503), so load balancers take the replica out
/// while it still answers; see [`ServerConfig::drain_delay`].
#[derive(Debug, Clone, Default)]
pub struct Drain {
    flag: Arc<std::sync::atomic::AtomicBool>,
    delay: Duration,
}

impl Drain {
    /// Marks the server draining, then waits the drain delay (requests are still answered
    /// meanwhile).
    pub async fn start(&self) {
        self.flag.store(true, std::sync::atomic::Ordering::Relaxed);
        tokio::time::sleep(self.delay).await;
    }

    /// `shutdown`, then the drain: what to hand the listener as its shutdown signal, so the
    /// listener closes only after the drain delay.
    pub async fn after(self, shutdown: impl Future<Output = ()> + Send + 'static) {
        shutdown.await;
        self.start().await;
    }
}

/// An HTTP server for one or more agents, each under its own path.
#[derive(Default)]
pub struct A2aServer {
    agents: Vec<(String, AgentService)>,
    config: ServerConfig,
}

impl A2aServer {
    /// A server with default settings and no agent yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Uses `config`.
    pub fn config(mut self, config: ServerConfig) -> Self {
        self.config = config;
        self
    }

    /// Serves `agent` at `path` (`/` or `/name`): JSON-RPC at the path, the card under
    /// `path/.well-known/`.
    pub fn agent(mut self, path: &str, agent: AgentService) -> Self {
        let p = path.trim_end_matches('/');
        self.agents.push((p.to_owned(), agent));
        self
    }

    /// The axum router, to embed in a larger application. Needs a Tokio runtime (the push
    /// sender starts a worker).
    pub fn router(self) -> axum::Router {
        self.router_and_drain().0
    }

    /// [`A2aServer::router`], with the handle that makes its `/readyz` say draining: for a
    /// program that runs the router itself and drains on its own shutdown signal
    /// ([`Drain::after`]).
    pub fn router_and_drain(self) -> (axum::Router, Drain) {
        let drain = Drain {
            flag: Default::default(),
            delay: self.config.drain_delay,
        };
        let router = handlers::router(self.agents, self.config, drain.flag.clone());
        (router, drain)
    }

    /// Serves until `shutdown` resolves, then drains: `/readyz` answers 503 for
    /// [`ServerConfig::drain_delay`], then the server stops accepting and lets open requests
    /// and streams finish.
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let limits = self.config.limits.clone();
        let (app, drain) = self.router_and_drain();
        listen::serve_router(listener, app, limits, drain.after(shutdown)).await
    }
}
