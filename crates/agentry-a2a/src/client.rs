//! A client for any A2A agent, v1.0 or v0.3: discovery, every method, streaming with
//! resubscribe.
//!
//! [`A2aClient::discover`] reads the card and picks the newest protocol version both sides
//! speak (v1.0 where the card declares a v1.0 JSON-RPC interface, v0.3 otherwise); when a
//! v1.0 endpoint turns out not to speak it (-32009 or an unknown method) and the card also
//! declares a v0.3 interface, the client switches to that one for good and repeats the call.
//!
//! ```no_run
//! use agentry_a2a::client::{A2aClient, ClientConfig};
//! use agentry_a2a::model::{Message, MessageSendParams, Role};
//! # async fn run() -> Result<(), agentry_a2a::A2aError> {
//! let client = A2aClient::discover("http://127.0.0.1:8080", ClientConfig::default()).await?;
//! let reply = client
//!     .send_message(MessageSendParams::new(Message::text(Role::User, "hi")))
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! Retries (exponential backoff with jitter, at least the server's `Retry-After`) cover
//! connection errors for every method, and 429 and 5xx answers, timeouts and dropped
//! connections for the methods that are safe to repeat (everything but `message/send` and
//! `message/stream`, whose repeat could run an agent twice). A stream that closes cleanly while
//! its task still runs is resubscribed automatically.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::stream::{self, Stream, StreamExt};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::mpsc;
use tracing::Instrument;

use crate::error::{A2aError, RpcError};
use crate::jsonrpc::{self, Request, Response};
use crate::model::*;
use crate::sse::SseParser;
use crate::v1;
use crate::version::{self, ProtocolVersion};

/// How a client authenticates.
#[derive(Debug, Clone, Default)]
pub enum Auth {
    /// No credentials.
    #[default]
    None,
    /// `Authorization: Bearer <token>`.
    Bearer(String),
    /// Header name and key.
    ApiKey(String, String),
}

/// Client timeouts, retries and credentials.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// How long to wait for a connection.
    pub connect_timeout: Duration,
    /// How long to wait for an answer (a stream: for its first bytes).
    pub request_timeout: Duration,
    /// A stream with no bytes (not even a keep-alive) for this long is broken.
    pub stream_idle_timeout: Duration,
    /// Attempts after the first one.
    pub retries: u32,
    /// The first retry's wait; doubled after each.
    pub backoff: Duration,
    /// The credentials sent with every call.
    pub auth: Auth,
    /// Resubscribe when a stream closes cleanly before its final event.
    pub auto_resubscribe: bool,
    /// The binding to prefer when a card offers several for v1.0.
    pub binding: Binding,
    /// A private CA to trust and a client certificate to present (mTLS).
    pub tls: Option<ClientTls>,
    /// The most a peer's answer (a card, a body, one event of a stream) may take: a larger
    /// one is refused ([`A2aError::TooLarge`]) as it arrives, so a remote agent cannot make
    /// this process hold more than that. Default 32 MiB: twice the largest task an agentry
    /// server keeps.
    pub max_response_bytes: usize,
}

/// [`ClientConfig::max_response_bytes`]'s default.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 32 << 20;

/// How much of an error answer's body is kept to quote in an error ([`A2aError::Http`], and
/// the model providers' errors): enough for any message a server means for people, and the
/// rest is not read.
pub const MAX_ERROR_TEXT: usize = 8 << 10;

/// TLS for calls: a CA to trust besides the public roots (agents on a private PKI), and a
/// client certificate for agents that take them as credentials (mTLS).
#[derive(Clone, Default)]
pub struct ClientTls {
    /// PEM certificates to trust.
    pub ca_pem: Option<Vec<u8>>,
    /// The client certificate chain and its private key, PEM, in one buffer.
    pub identity_pem: Option<Vec<u8>>,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls")
            .field("ca", &self.ca_pem.is_some())
            .field(
                "identity",
                &self.identity_pem.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// How requests travel: JSON-RPC 2.0 envelopes, or the v1.0 HTTP+JSON (REST) resources.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Binding {
    /// JSON-RPC 2.0 over HTTP POST, streams as SSE.
    #[default]
    JsonRpc,
    /// The v1.0 REST binding (`POST /message:send`, `GET /tasks/{id}`, ...).
    HttpJson,
    /// v1.0's gRPC binding (`lf.a2a.v1.A2AService` over HTTP/2; feature `grpc`, else calls
    /// over it fail with [`A2aError::InvalidCard`]). Chosen from a card only where it offers
    /// no JSON binding, or when preferred.
    Grpc,
}

impl Binding {
    /// The name cards use (`protocolBinding`).
    pub fn as_str(self) -> &'static str {
        match self {
            Binding::JsonRpc => "JSONRPC",
            Binding::HttpJson => "HTTP+JSON",
            Binding::Grpc => "GRPC",
        }
    }
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(60),
            stream_idle_timeout: Duration::from_secs(90),
            retries: 3,
            backoff: Duration::from_millis(100),
            auth: Auth::None,
            auto_resubscribe: true,
            binding: Binding::JsonRpc,
            tls: None,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        }
    }
}

/// A connection to one agent's JSON-RPC endpoint.
#[derive(Clone)]
pub struct A2aClient {
    http: reqwest::Client,
    endpoint: String,
    version: ProtocolVersion,
    binding: Binding,
    /// The card's v0.3 endpoint, for when its v1.0 one does not answer in v1.0.
    fallback: Option<Arc<Fallback>>,
    card: Option<AgentCard>,
    /// Where the card was read and its ETag, to revalidate it.
    card_source: Option<(String, Option<String>)>,
    cfg: ClientConfig,
    /// The correlation id every request carries as W3C baggage (see [`Self::with_correlation`]).
    correlation: Option<String>,
    /// The HTTP/2 client of the gRPC binding, made at its first call.
    grpc: Arc<std::sync::OnceLock<reqwest::Client>>,
}

struct Fallback {
    endpoint: String,
    taken: AtomicBool,
}

/// The interface a client uses, chosen from a card.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// Where to send requests.
    pub url: String,
    /// The protocol version to speak there.
    pub version: ProtocolVersion,
    /// The binding to speak there.
    pub binding: Binding,
    /// A v0.3 JSON-RPC URL to fall back to when the chosen v1.0 one refuses v1.0.
    pub fallback: Option<String>,
}

/// Picks the newest version both sides speak, in the `prefer`red binding where the card offers
/// it for that version (v0.3 is spoken over JSON-RPC only).
pub fn choose_interface(card: &AgentCard, prefer: Binding) -> Interface {
    let find = |v: ProtocolVersion, b: Binding| {
        card.supported_interfaces
            .iter()
            .filter(|i| !i.url.is_empty())
            .find(|i| {
                i.protocol_binding.eq_ignore_ascii_case(b.as_str())
                    && ProtocolVersion::parse(&i.protocol_version) == Some(v)
            })
            .map(|i| i.url.clone())
    };
    let card_version =
        ProtocolVersion::parse(&card.protocol_version).unwrap_or(ProtocolVersion::V0_3);
    let legacy = find(ProtocolVersion::V0_3, Binding::JsonRpc).or_else(|| {
        (card_version == ProtocolVersion::V0_3 && !card.url.is_empty()).then(|| card.url.clone())
    });
    // The JSON bindings before gRPC, unless gRPC is asked for (and built in).
    let grpc = cfg!(feature = "grpc");
    let order: &[Binding] = match prefer {
        Binding::JsonRpc => &[Binding::JsonRpc, Binding::HttpJson, Binding::Grpc],
        Binding::HttpJson => &[Binding::HttpJson, Binding::JsonRpc, Binding::Grpc],
        Binding::Grpc => &[Binding::Grpc, Binding::JsonRpc, Binding::HttpJson],
    };
    for &binding in order.iter().filter(|b| grpc || **b != Binding::Grpc) {
        if let Some(url) = find(ProtocolVersion::V1_0, binding) {
            return Interface {
                url,
                version: ProtocolVersion::V1_0,
                binding,
                fallback: legacy,
            };
        }
    }
    // v0.3 cards name their bindings in `preferredTransport` and `additionalInterfaces`.
    if prefer == Binding::HttpJson && card_version == ProtocolVersion::V0_3 {
        let rest = std::iter::once((&card.url, &card.preferred_transport))
            .chain(
                card.additional_interfaces
                    .iter()
                    .map(|i| (&i.url, &i.transport)),
            )
            .find(|(u, t)| t.eq_ignore_ascii_case("HTTP+JSON") && !u.is_empty());
        if let Some((url, _)) = rest {
            return Interface {
                url: url.clone(),
                version: ProtocolVersion::V0_3,
                binding: Binding::HttpJson,
                fallback: None,
            };
        }
    }
    let (url, version) = match legacy {
        Some(url) => (url, ProtocolVersion::V0_3),
        None => (card.url.clone(), card_version),
    };
    Interface {
        url,
        version,
        binding: Binding::JsonRpc,
        fallback: None,
    }
}

fn build_http(cfg: &ClientConfig) -> Result<reqwest::Client, A2aError> {
    build_http_with(cfg, reqwest::Client::builder())
}

/// `b` with the config's timeouts and TLS (the gRPC binding's HTTP/2 client starts from its
/// own builder).
fn build_http_with(
    cfg: &ClientConfig,
    b: reqwest::ClientBuilder,
) -> Result<reqwest::Client, A2aError> {
    let failed = |e: reqwest::Error| A2aError::HttpClient(Box::new(e));
    let mut b = b.connect_timeout(cfg.connect_timeout);
    if let Some(tls) = &cfg.tls {
        if let Some(ca) = &tls.ca_pem {
            for c in reqwest::Certificate::from_pem_bundle(ca).map_err(failed)? {
                b = b.add_root_certificate(c);
            }
        }
        if let Some(id) = &tls.identity_pem {
            b = b.identity(reqwest::Identity::from_pem(id).map_err(failed)?);
        }
    }
    b.build().map_err(failed)
}

fn map_send_error(e: reqwest::Error, url: &str, after: Duration) -> A2aError {
    if e.is_timeout() {
        A2aError::Timeout {
            what: format!("request to {url}"),
            after_ms: after.as_millis() as u64,
        }
    } else if e.is_connect() {
        A2aError::Connect {
            url: url.to_owned(),
            reason: root_cause(&e),
        }
    } else {
        A2aError::Request {
            url: url.to_owned(),
            reason: root_cause(&e),
        }
    }
}

fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

/// Fetches an agent card from `base` (`/.well-known/agent-card.json`, then the legacy
/// `/.well-known/agent.json`). A URL that already names a `.json` file is fetched as is.
pub async fn fetch_card(base: &str, cfg: &ClientConfig) -> Result<AgentCard, A2aError> {
    match fetch_card_if_changed(base, cfg, None).await? {
        Some((card, _)) => Ok(card),
        None => Err(A2aError::InvalidCard {
            url: base.to_owned(),
            reason: "304 Not Modified to a request without a validator".into(),
        }),
    }
}

/// As [`fetch_card`], revalidating: with the `etag` of the card held, `None` when the server
/// answers 304 Not Modified (the card held is current); otherwise the card and its new ETag.
pub async fn fetch_card_if_changed(
    base: &str,
    cfg: &ClientConfig,
    etag: Option<&str>,
) -> Result<Option<(AgentCard, Option<String>)>, A2aError> {
    let http = build_http(cfg)?;
    let base = base.trim_end_matches('/');
    let candidates = if base.ends_with(".json") {
        vec![base.to_owned()]
    } else {
        vec![
            format!("{base}/.well-known/agent-card.json"),
            format!("{base}/.well-known/agent.json"),
        ]
    };
    let mut last = None;
    for url in candidates {
        let mut req = authorize(http.get(&url), &cfg.auth).timeout(cfg.request_timeout);
        if let Some(tag) = etag {
            req = req.header(reqwest::header::IF_NONE_MATCH, tag);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| map_send_error(e, &url, cfg.request_timeout))?;
        match resp.status().as_u16() {
            304 if etag.is_some() => return Ok(None),
            200..=299 => {
                let tag = resp
                    .headers()
                    .get(reqwest::header::ETAG)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                let body =
                    read_body(resp, cfg.max_response_bytes, &url, cfg.request_timeout).await?;
                let raw: Value =
                    serde_json::from_slice(&body).map_err(|e| A2aError::InvalidCard {
                        url: url.clone(),
                        reason: format!("not JSON: {e}"),
                    })?;
                // Cards of either generation read into the model.
                let card = serde_path_to_error::deserialize(v1::card_up(raw)).map_err(|e| {
                    A2aError::InvalidCard {
                        url: url.clone(),
                        reason: format!("at {}: {}", e.path(), e.inner()),
                    }
                })?;
                return Ok(Some((card, tag)));
            }
            401 | 403 => return Err(refused(resp.status().as_u16(), url)),
            404 => last = Some(A2aError::CardNotFound { url }),
            s => {
                return Err(A2aError::Http {
                    status: s,
                    body: error_text(resp).await,
                    url,
                });
            }
        }
    }
    Err(last.unwrap_or_else(|| A2aError::CardNotFound {
        url: base.to_owned(),
    }))
}

/// Why [`read_limited`] returned no body.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BodyError {
    /// The body is larger than the limit (as declared, or as it arrived).
    #[error("the answer is larger than {0} bytes")]
    TooLarge(usize),
    /// Reading it failed.
    #[error("reading the answer failed: {0}")]
    Read(#[source] reqwest::Error),
}

/// A response's body read whole, refused past `limit` bytes (its declared length first, then
/// what arrives): what a peer sends is held only up to that. For every body read from
/// elsewhere (an agent's answers, a JWKS, a token endpoint's answer).
pub async fn read_limited(
    mut resp: reqwest::Response,
    limit: usize,
) -> Result<bytes::Bytes, BodyError> {
    if resp.content_length().is_some_and(|n| n > limit as u64) {
        return Err(BodyError::TooLarge(limit));
    }
    // Most answers come in one chunk: kept as it is, copied only when a second one comes.
    let mut first: Option<bytes::Bytes> = None;
    let mut more: Vec<u8> = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(BodyError::Read)? {
        let held = first.as_ref().map_or(0, bytes::Bytes::len) + more.len();
        if held + chunk.len() > limit {
            return Err(BodyError::TooLarge(limit));
        }
        match &first {
            None => first = Some(chunk),
            Some(f) => {
                if more.is_empty() {
                    more.extend_from_slice(f);
                }
                more.extend_from_slice(&chunk);
            }
        }
    }
    Ok(if more.is_empty() {
        first.unwrap_or_default()
    } else {
        more.into()
    })
}

/// [`read_limited`] with the client's errors.
async fn read_body(
    resp: reqwest::Response,
    limit: usize,
    url: &str,
    after: Duration,
) -> Result<bytes::Bytes, A2aError> {
    read_limited(resp, limit).await.map_err(|e| match e {
        BodyError::TooLarge(limit) => A2aError::TooLarge {
            url: url.to_owned(),
            limit,
        },
        BodyError::Read(e) => map_send_error(e, url, after),
    })
}

/// The start of a body as text, at most `max` bytes of it read (the rest is not): what an
/// error message quotes of an error answer.
pub async fn read_prefix(mut resp: reqwest::Response, max: usize) -> String {
    let mut buf = Vec::new();
    while buf.len() < max {
        match resp.chunk().await {
            Ok(Some(c)) => buf.extend_from_slice(&c),
            _ => break,
        }
    }
    buf.truncate(max);
    String::from_utf8_lossy(&buf).into_owned()
}

/// The start of an error answer's body, for [`A2aError::Http`].
async fn error_text(resp: reqwest::Response) -> String {
    read_prefix(resp, MAX_ERROR_TEXT).await
}

fn authorize(req: reqwest::RequestBuilder, auth: &Auth) -> reqwest::RequestBuilder {
    match auth {
        Auth::None => req,
        Auth::Bearer(t) => req.bearer_auth(t),
        Auth::ApiKey(h, k) => req.header(h.as_str(), k.as_str()),
    }
}

/// A small xorshift for jitter; seeded from the clock, no dependency needed.
fn jitter(d: Duration) -> Duration {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|t| t.subsec_nanos() as u64)
        .unwrap_or(7)
        | 1;
    let mut x = seed;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    let f = 0.5 + (x % 1000) as f64 / 2000.0; // 0.5 ..= 1.0
    d.mul_f64(f)
}

/// A 401 (credentials missing or unknown) or 403 (read and not allowed this) from `url`.
fn refused(status: u16, url: String) -> A2aError {
    if status == 403 {
        A2aError::Forbidden { url }
    } else {
        A2aError::Unauthorized { url }
    }
}

/// The longest `Retry-After` honoured.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// A `Retry-After` in seconds (the HTTP-date form is rare from APIs and ignored).
fn retry_after(resp: &reqwest::Response) -> Option<Duration> {
    resp.headers()
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(Duration::from_secs)
}

fn safe_to_retry(req: &Request) -> bool {
    !matches!(req, Request::SendMessage(_) | Request::StreamMessage(_))
}

impl A2aClient {
    /// A client for a known JSON-RPC endpoint (no card fetched), speaking v0.3, which every
    /// server of both generations answers; see [`with_version`](Self::with_version).
    pub fn new(endpoint: &str, cfg: ClientConfig) -> Result<Self, A2aError> {
        Ok(A2aClient {
            http: build_http(&cfg)?,
            endpoint: endpoint.to_owned(),
            version: ProtocolVersion::V0_3,
            binding: Binding::JsonRpc,
            fallback: None,
            card: None,
            card_source: None,
            cfg,
            correlation: None,
            grpc: Arc::default(),
        })
    }

    /// Speaks `version` (no fallback).
    pub fn with_version(mut self, version: ProtocolVersion) -> Self {
        self.version = version;
        self.fallback = None;
        self
    }

    /// Uses `binding` at the endpoint (in the version set by [`with_version`](Self::with_version)).
    pub fn with_binding(mut self, binding: Binding) -> Self {
        self.binding = binding;
        self
    }

    /// Fetches the card at `base` and talks to the interface it names, in the newest version
    /// both sides speak.
    pub async fn discover(base: &str, cfg: ClientConfig) -> Result<Self, A2aError> {
        let Some((card, etag)) = fetch_card_if_changed(base, &cfg, None).await? else {
            return Err(A2aError::InvalidCard {
                url: base.to_owned(),
                reason: "304 Not Modified to a request without a validator".into(),
            });
        };
        Self::from_card(base, card, etag, cfg)
    }

    /// Reads the card again with its ETag: `None` when it has not changed (one 304, no body),
    /// else a client made from the new card. A client not made by discovery has no card to
    /// revalidate (`None`).
    pub async fn revalidate(&self) -> Result<Option<Self>, A2aError> {
        let Some((base, etag)) = &self.card_source else {
            return Ok(None);
        };
        match fetch_card_if_changed(base, &self.cfg, etag.as_deref()).await? {
            None => Ok(None),
            Some((card, etag)) => Self::from_card(base, card, etag, self.cfg.clone()).map(Some),
        }
    }

    fn from_card(
        base: &str,
        card: AgentCard,
        etag: Option<String>,
        cfg: ClientConfig,
    ) -> Result<Self, A2aError> {
        let chosen = choose_interface(&card, cfg.binding);
        if chosen.url.is_empty() {
            return Err(A2aError::InvalidCard {
                url: base.to_owned(),
                reason: "neither `url` nor a usable `supportedInterfaces` entry".into(),
            });
        }
        let url = match chosen.binding {
            Binding::Grpc => grpc_url(&chosen.url, base),
            _ => chosen.url.clone(),
        };
        let mut c = Self::new(&url, cfg)?
            .with_version(chosen.version)
            .with_binding(chosen.binding);
        c.fallback = chosen.fallback.map(|endpoint| {
            Arc::new(Fallback {
                endpoint,
                taken: AtomicBool::new(false),
            })
        });
        c.card = Some(card);
        c.card_source = Some((base.to_owned(), etag));
        Ok(c)
    }

    /// The protocol version the next call uses.
    pub fn version(&self) -> ProtocolVersion {
        self.route().1
    }

    /// The binding the next call uses.
    pub fn binding(&self) -> Binding {
        self.route().2
    }

    fn route(&self) -> (&str, ProtocolVersion, Binding) {
        match &self.fallback {
            Some(f) if f.taken.load(Ordering::Relaxed) => {
                (&f.endpoint, ProtocolVersion::V0_3, Binding::JsonRpc)
            }
            _ => (&self.endpoint, self.version, self.binding),
        }
    }

    /// Takes the v0.3 fallback after `e`, if `e` says the v1.0 endpoint does not speak v1.0.
    fn fall_back(&self, e: &A2aError) -> bool {
        let refused = matches!(e, A2aError::Rpc(r)
            if r.code == crate::error::code::VERSION_NOT_SUPPORTED
                || r.code == crate::error::code::METHOD_NOT_FOUND);
        match &self.fallback {
            Some(f) if refused && self.route().1 == ProtocolVersion::V1_0 => {
                tracing::info!(endpoint = %f.endpoint, "agent refused A2A 1.0; using 0.3");
                f.taken.store(true, Ordering::Relaxed);
                true
            }
            _ => false,
        }
    }

    /// The card the client was made from (`None` for [`A2aClient::new`]).
    pub fn card(&self) -> Option<&AgentCard> {
        self.card.as_ref()
    }

    /// The same connection presenting `auth` instead (a delegated token for some calls).
    pub fn with_auth(&self, auth: Auth) -> A2aClient {
        let mut c = self.clone();
        c.cfg.auth = auth;
        c
    }

    /// This client, every request of which carries `correlation` (a user request's
    /// correlation id) as W3C baggage, so the agent records even the calls that have no task
    /// envelope (`tasks/get`, `tasks/resubscribe`, `tasks/cancel`) under that request. An
    /// OpenTelemetry context's own baggage, when there is one, goes instead.
    pub fn with_correlation(&self, correlation: Option<&str>) -> A2aClient {
        let mut c = self.clone();
        c.correlation = correlation.map(str::to_owned);
        c
    }

    /// An answer's body, refused past [`ClientConfig::max_response_bytes`].
    async fn read_body(&self, resp: reqwest::Response) -> Result<bytes::Bytes, A2aError> {
        read_body(
            resp,
            self.cfg.max_response_bytes,
            self.endpoint(),
            self.cfg.request_timeout,
        )
        .await
    }

    /// The URL requests go to.
    pub fn endpoint(&self) -> &str {
        self.route().0
    }

    async fn post(&self, req: &Request, streaming: bool) -> Result<reqwest::Response, A2aError> {
        let (endpoint, version, binding) = self.route();
        let (method, url, body) = match binding {
            Binding::JsonRpc => {
                let id = Value::String(crate::new_id());
                let body = match version {
                    ProtocolVersion::V0_3 => jsonrpc::encode_request(&id, req),
                    ProtocolVersion::V1_0 => v1::encode_request(&id, req),
                };
                (http::Method::POST, endpoint.to_owned(), Some(body))
            }
            Binding::HttpJson => {
                let call = crate::rest::request_as(req, version);
                let url = format!("{}{}", endpoint.trim_end_matches('/'), call.path);
                let body = call
                    .body
                    .map(|b| serde_json::to_vec(&b).unwrap_or_default());
                (call.method, url, body)
            }
            Binding::Grpc => {
                let (url, body) = grpc_request(endpoint, req)?;
                (http::Method::POST, url, Some(body.to_vec()))
            }
        };
        let grpc = binding == Binding::Grpc;
        let http = if grpc {
            self.grpc_http()?
        } else {
            self.http.clone()
        };
        let mut attempt = 0;
        let mut delay = self.cfg.backoff;
        loop {
            let mut rb = authorize(http.request(method.clone(), &url), &self.cfg.auth)
                .header(version::HEADER, version.as_str());
            if let Some(b) = &body {
                let ct = if grpc {
                    GRPC_CONTENT_TYPE
                } else {
                    "application/json"
                };
                rb = rb.header(http::header::CONTENT_TYPE, ct).body(b.clone());
            }
            if grpc {
                rb = rb.header(http::header::TE, "trailers");
            }
            // The callee continues this call's trace (see `crate::trace`).
            if let Some(tp) = crate::trace::current_traceparent() {
                rb = rb.header(crate::envelope::TRACEPARENT_HEADER, tp);
            }
            let baggage = crate::trace::current_baggage()
                .or_else(|| self.correlation.as_deref().map(crate::trace::baggage));
            if let Some(b) = baggage {
                rb = rb.header(crate::trace::BAGGAGE_HEADER, b);
            }
            if streaming && !grpc {
                rb = rb.header(http::header::ACCEPT, "text/event-stream");
            } else if !streaming {
                rb = rb.timeout(self.cfg.request_timeout);
            }
            let mut wait = jitter(delay);
            let retryable = match rb.send().await {
                Ok(resp) => {
                    let s = resp.status().as_u16();
                    if (s == 429 || s >= 500) && safe_to_retry(req) && attempt < self.cfg.retries {
                        // The server says when: wait that long (at most a minute), never less
                        // than the backoff.
                        if let Some(after) = retry_after(&resp) {
                            wait = wait.max(after.min(MAX_RETRY_AFTER));
                        }
                        true
                    } else if s == 401 || s == 403 {
                        return Err(refused(s, endpoint.to_owned()));
                    } else if !(200..300).contains(&s) && !is_json(&resp) {
                        return Err(A2aError::Http {
                            status: s,
                            url: endpoint.to_owned(),
                            body: error_text(resp).await,
                        });
                    } else {
                        return Ok(resp);
                    }
                }
                // Not connected: nothing was sent, any method may go again.
                Err(e) if e.is_connect() && attempt < self.cfg.retries => true,
                // Sent, then timed out or dropped: only what is safe to repeat.
                Err(e)
                    if (e.is_timeout() || e.is_request() || e.is_body())
                        && safe_to_retry(req)
                        && attempt < self.cfg.retries =>
                {
                    true
                }
                Err(e) => return Err(map_send_error(e, endpoint, self.cfg.request_timeout)),
            };
            debug_assert!(retryable);
            tokio::time::sleep(wait).await;
            delay *= 2;
            attempt += 1;
        }
    }

    /// Sends `req` and returns its raw result, in the version that answered it.
    async fn call(&self, req: &Request) -> Result<(Option<Value>, ProtocolVersion), A2aError> {
        let span = self.span(req);
        let r = async {
            match self.call_once(req).await {
                Err(e) if self.fall_back(&e) => self.call_once(req).await,
                r => r,
            }
        }
        .instrument(span.clone())
        .await;
        if r.is_err() {
            span.record("otel.status_code", "error");
        }
        r
    }

    /// The span of one call (OpenTelemetry RPC conventions, kind client): its `traceparent`
    /// goes out with the request.
    fn span(&self, req: &Request) -> tracing::Span {
        let (endpoint, version, binding) = self.route();
        let method = v1::method_in(req, version);
        tracing::info_span!(
            "a2a.call",
            otel.name = method,
            otel.kind = "client",
            otel.status_code = tracing::field::Empty,
            rpc.system = "a2a",
            rpc.method = method,
            a2a.binding = binding.as_str(),
            a2a.protocol.version = version.as_str(),
            url.full = endpoint,
        )
    }

    async fn call_once(&self, req: &Request) -> Result<(Option<Value>, ProtocolVersion), A2aError> {
        let (_, version, binding) = self.route();
        let resp = self.post(req, false).await?;
        if binding == Binding::Grpc {
            return self.grpc_unary(req, resp).await;
        }
        let status = resp.status().as_u16();
        let body = self.read_body(resp).await?;
        if binding == Binding::HttpJson {
            if !(200..300).contains(&status) {
                return Err(crate::rest::error_from(status, &body).into());
            }
            if body.iter().all(u8::is_ascii_whitespace) {
                return Ok((None, ProtocolVersion::V1_0));
            }
            let v: Value = serde_json::from_slice(&body).map_err(|e| {
                A2aError::InvalidResponse(format!("{} answer: {e}", v1::method_of(req)))
            })?;
            // Answers are read in v1.0 form (v0.3's REST bodies are rewritten to it).
            let v = match version {
                ProtocolVersion::V1_0 => v,
                ProtocolVersion::V0_3 => crate::rest::answer_to_v1(req, v).map_err(|e| {
                    A2aError::InvalidResponse(format!("{} answer: {e}", req.method()))
                })?,
            };
            return Ok((Some(v), ProtocolVersion::V1_0));
        }
        let r: Response<Value> = serde_json::from_slice(&body)
            .map_err(|e| A2aError::InvalidResponse(format!("{} answer: {e}", req.method())))?;
        Ok((r.into_result()?, version))
    }

    /// Calls `req` and reads its result: as the model's serde form from v0.3, through `up`
    /// from v1.0.
    async fn call_typed<T: DeserializeOwned>(
        &self,
        req: Request,
        up: fn(Value) -> Result<T, String>,
    ) -> Result<T, A2aError> {
        let (raw, version) = self.call(&req).await?;
        let m = v1::method_in(&req, version);
        let raw =
            raw.ok_or_else(|| A2aError::InvalidResponse(format!("{m} answered without a result")))?;
        match version {
            ProtocolVersion::V0_3 => serde_path_to_error::deserialize(raw).map_err(|e| {
                A2aError::InvalidResponse(format!("{m} answer at {}: {}", e.path(), e.inner()))
            }),
            ProtocolVersion::V1_0 => {
                up(raw).map_err(|e| A2aError::InvalidResponse(format!("{m} answer: {e}")))
            }
        }
    }

    /// `message/send`.
    pub async fn send_message(
        &self,
        params: MessageSendParams,
    ) -> Result<SendMessageResult, A2aError> {
        self.call_typed(Request::SendMessage(params), v1::send_result_from)
            .await
    }

    /// `tasks/get`.
    pub async fn get_task(&self, id: &str, history_length: Option<i64>) -> Result<Task, A2aError> {
        self.call_typed(
            Request::GetTask(TaskQueryParams {
                id: id.to_owned(),
                history_length,
                metadata: None,
            }),
            v1::task_from,
        )
        .await
    }

    /// `tasks/cancel`.
    pub async fn cancel_task(&self, id: &str) -> Result<Task, A2aError> {
        self.call_typed(
            Request::CancelTask(TaskIdParams {
                id: id.to_owned(),
                metadata: None,
            }),
            v1::task_from,
        )
        .await
    }

    /// `tasks/pushNotificationConfig/set`.
    pub async fn set_push_config(
        &self,
        task_id: &str,
        config: PushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig, A2aError> {
        self.call_typed(
            Request::SetPushConfig(TaskPushNotificationConfig {
                task_id: task_id.to_owned(),
                push_notification_config: config,
            }),
            v1::push_config_from,
        )
        .await
    }

    /// `tasks/pushNotificationConfig/get`.
    pub async fn get_push_config(
        &self,
        task_id: &str,
        config_id: Option<&str>,
    ) -> Result<TaskPushNotificationConfig, A2aError> {
        // v1.0 names the config always; a config made without an id has the task's (the
        // SDKs' rule, and agentry's), so that is the one asked for.
        let config_id = match (config_id, self.version()) {
            (None, ProtocolVersion::V1_0) => Some(task_id),
            (id, _) => id,
        };
        self.call_typed(
            Request::GetPushConfig(GetTaskPushNotificationConfigParams {
                id: task_id.to_owned(),
                push_notification_config_id: config_id.map(str::to_owned),
                metadata: None,
            }),
            v1::push_config_from,
        )
        .await
    }

    /// `tasks/pushNotificationConfig/list`.
    pub async fn list_push_configs(
        &self,
        task_id: &str,
    ) -> Result<Vec<TaskPushNotificationConfig>, A2aError> {
        let req = Request::ListPushConfigs(TaskIdParams {
            id: task_id.to_owned(),
            metadata: None,
        });
        match self.call(&req).await? {
            (None, _) => Ok(Vec::new()),
            (Some(raw), ProtocolVersion::V0_3) => serde_json::from_value(raw)
                .map_err(|e| A2aError::InvalidResponse(format!("{}: {e}", req.method()))),
            (Some(raw), ProtocolVersion::V1_0) => v1::push_configs_from(raw)
                .map_err(|e| A2aError::InvalidResponse(format!("{}: {e}", v1::method_of(&req)))),
        }
    }

    /// `ListTasks` (v1.0 only: v0.3 has no JSON-RPC method for it).
    pub async fn list_tasks(&self, params: ListTasksParams) -> Result<ListTasksResult, A2aError> {
        if self.version() == ProtocolVersion::V0_3 {
            return Err(A2aError::Rpc(RpcError::unsupported(
                "listing tasks needs A2A 1.0; this agent is spoken to in 0.3",
            )));
        }
        self.call_typed(Request::ListTasks(params), v1::list_tasks_from)
            .await
    }

    /// `tasks/pushNotificationConfig/delete` (a missing `result` member is accepted: the
    /// Python SDK 0.3 omits it).
    pub async fn delete_push_config(&self, task_id: &str, config_id: &str) -> Result<(), A2aError> {
        self.call(&Request::DeletePushConfig(
            DeleteTaskPushNotificationConfigParams {
                id: task_id.to_owned(),
                push_notification_config_id: config_id.to_owned(),
                metadata: None,
            },
        ))
        .await
        .map(|_| ())
    }

    /// `agent/getAuthenticatedExtendedCard`.
    pub async fn extended_card(&self) -> Result<AgentCard, A2aError> {
        self.call_typed(Request::GetExtendedCard, |v| {
            serde_json::from_value(v1::card_up(v)).map_err(|e| e.to_string())
        })
        .await
    }

    /// `message/stream`: the task's events until the final one.
    pub fn stream_message(
        &self,
        params: MessageSendParams,
    ) -> impl Stream<Item = Result<StreamEvent, A2aError>> + Send + 'static {
        self.open_stream(Request::StreamMessage(params))
    }

    /// `tasks/resubscribe`: the task's snapshot, then its events until the final one.
    pub fn resubscribe(
        &self,
        task_id: &str,
    ) -> impl Stream<Item = Result<StreamEvent, A2aError>> + Send + 'static {
        self.open_stream(Request::Resubscribe(TaskIdParams {
            id: task_id.to_owned(),
            metadata: None,
        }))
    }

    fn open_stream(
        &self,
        req: Request,
    ) -> impl Stream<Item = Result<StreamEvent, A2aError>> + Send + 'static {
        let (tx, rx) = mpsc::channel(64);
        let client = self.clone();
        // Made here, in the caller's span, so the stream is a child of it.
        let span = self.span(&req);
        tokio::spawn(
            async move {
                if let Err(e) = client.pump(req, &tx).await {
                    tracing::Span::current().record("otel.status_code", "error");
                    let _ = tx.send(Err(e)).await;
                }
            }
            .instrument(span),
        );
        stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|x| (x, rx)) })
    }

    /// Reads streams into `tx`, resubscribing while the task is unfinished.
    async fn pump(
        &self,
        mut req: Request,
        tx: &mpsc::Sender<Result<StreamEvent, A2aError>>,
    ) -> Result<(), A2aError> {
        let mut resubscribes = 0;
        loop {
            let (_, version, binding) = self.route();
            let resp = self.post(&req, true).await?;
            if binding == Binding::Grpc {
                match self.grpc_stream(&req, resp, tx).await? {
                    GrpcStreamEnd::Done => return Ok(()),
                    GrpcStreamEnd::Refused(e) => return self.finished_meanwhile(&req, e, tx).await,
                    GrpcStreamEnd::Cut { task_id, delivered } => {
                        if delivered > 1 {
                            resubscribes = 0;
                        }
                        match self.after_cut(task_id, resubscribes, tx).await? {
                            Some(next) => {
                                resubscribes += 1;
                                req = next;
                                continue;
                            }
                            None => return Ok(()),
                        }
                    }
                }
            }
            if binding == Binding::HttpJson && !is_event_stream(&resp) {
                let status = resp.status().as_u16();
                let body = self.read_body(resp).await?;
                let e = crate::rest::error_from(status, &body);
                return self.finished_meanwhile(&req, e, tx).await;
            }
            if !is_event_stream(&resp) {
                // An error (or a non-streaming peer) answered with one JSON body.
                let body = self.read_body(resp).await?;
                let body = std::str::from_utf8(&body)
                    .map_err(|e| A2aError::InvalidResponse(format!("stream answer: {e}")))?;
                match stream_item(body, Binding::JsonRpc, version)? {
                    Err(e) if self.fall_back(&A2aError::Rpc(e.clone())) => continue,
                    Err(e) => return self.finished_meanwhile(&req, e, tx).await,
                    Ok(Some(ev)) => {
                        let _ = tx.send(Ok(ev)).await;
                    }
                    Ok(None) => {}
                }
                return Ok(());
            }
            let mut body = resp.bytes_stream();
            let mut parser = SseParser::with_max_event(self.cfg.max_response_bytes);
            let mut task_id: Option<String> = None;
            let mut fell_back = false;
            // Events this stream delivered: its first repeats where the task stood, so only
            // a second one is progress that earns the resubscriptions back (else a peer that
            // sends one event and drops would be resubscribed to forever).
            let mut delivered = 0usize;
            loop {
                if fell_back {
                    break;
                }
                let chunk = tokio::time::timeout(self.cfg.stream_idle_timeout, body.next()).await;
                let chunk = match chunk {
                    Err(_) => {
                        return Err(A2aError::Timeout {
                            what: "stream idle (no event or keep-alive)".into(),
                            after_ms: self.cfg.stream_idle_timeout.as_millis() as u64,
                        });
                    }
                    Ok(None) => break,
                    Ok(Some(Err(e))) => {
                        tracing::debug!("stream read failed: {e}");
                        break;
                    }
                    Ok(Some(Ok(c))) => c,
                };
                let events = parser.push(&chunk).map_err(|e| A2aError::TooLarge {
                    url: self.endpoint().to_owned(),
                    limit: e.limit,
                })?;
                for data in events {
                    let ev = match stream_item(&data, binding, version)? {
                        // Refused before the first event: try v0.3 if the card offers it.
                        Err(e)
                            if task_id.is_none() && self.fall_back(&A2aError::Rpc(e.clone())) =>
                        {
                            fell_back = true;
                            break;
                        }
                        Err(e) if task_id.is_none() => {
                            return self.finished_meanwhile(&req, e, tx).await;
                        }
                        r => r?,
                    };
                    let Some(ev) = ev else { continue };
                    task_id = task_id.or_else(|| event_task_id(&ev));
                    let is_final = ev.is_final();
                    if tx.send(Ok(ev)).await.is_err() {
                        return Ok(()); // The caller dropped the stream.
                    }
                    if is_final {
                        return Ok(());
                    }
                    delivered += 1;
                    if delivered > 1 {
                        resubscribes = 0;
                    }
                }
            }
            if fell_back {
                continue;
            }
            // The stream closed before its final event.
            match self.after_cut(task_id, resubscribes, tx).await? {
                Some(next) => {
                    resubscribes += 1;
                    req = next;
                }
                None => return Ok(()),
            }
        }
    }

    /// After a stream closed before its final event: the resubscription to send while the
    /// task still runs (and tries are left), or `None` when its final status was sent
    /// instead (the turn ended meanwhile).
    async fn after_cut(
        &self,
        task_id: Option<String>,
        resubscribes: u32,
        tx: &mpsc::Sender<Result<StreamEvent, A2aError>>,
    ) -> Result<Option<Request>, A2aError> {
        let Some(id) = task_id else {
            return Err(A2aError::InvalidResponse(
                "stream closed before any event".into(),
            ));
        };
        if !self.cfg.auto_resubscribe || resubscribes >= self.cfg.retries.max(1) {
            return Err(A2aError::InvalidResponse(format!(
                "stream closed before the final event of task {id}"
            )));
        }
        // Resubscribe only while the task still runs.
        let task = self.get_task(&id, Some(0)).await?;
        if task.state().ends_turn() {
            let _ = tx.send(Ok(StreamEvent::final_status(&task))).await;
            return Ok(None);
        }
        tracing::debug!(task = %id, "stream closed early; resubscribing");
        Ok(Some(Request::Resubscribe(TaskIdParams {
            id,
            metadata: None,
        })))
    }

    /// A resubscription refused because the task finished in the meantime (servers refuse
    /// to stream a finished task) ends the stream with the task's final status; any other
    /// refusal is the error.
    async fn finished_meanwhile(
        &self,
        req: &Request,
        e: RpcError,
        tx: &mpsc::Sender<Result<StreamEvent, A2aError>>,
    ) -> Result<(), A2aError> {
        if let Request::Resubscribe(p) = req
            && e.code == crate::error::code::UNSUPPORTED_OPERATION
            && let Ok(task) = self.get_task(&p.id, Some(0)).await
            && task.state().is_terminal()
        {
            let _ = tx.send(Ok(StreamEvent::final_status(&task))).await;
            return Ok(());
        }
        Err(e.into())
    }
}

/// The content type of gRPC calls.
const GRPC_CONTENT_TYPE: &str = "application/grpc";

/// Where a card's gRPC interface is dialled: its `host:port` (gRPC's target form) over TLS
/// when the card came over HTTPS, else over cleartext HTTP/2; a URL with a scheme as it is.
fn grpc_url(url: &str, base: &str) -> String {
    if url.contains("://") {
        return url.to_owned();
    }
    let scheme = if base.starts_with("https://") {
        "https"
    } else {
        "http"
    };
    format!("{scheme}://{}", url.trim_end_matches('/'))
}

/// How a gRPC server stream ended.
#[cfg_attr(not(feature = "grpc"), allow(dead_code))]
enum GrpcStreamEnd {
    /// With the task's final event (or the caller dropped the stream).
    Done,
    /// Refused before its first event.
    Refused(RpcError),
    /// Closed (or failed) before the final event.
    Cut {
        task_id: Option<String>,
        delivered: usize,
    },
}

/// A call's URL and framed message on the gRPC binding.
#[cfg(feature = "grpc")]
fn grpc_request(endpoint: &str, req: &Request) -> Result<(String, bytes::Bytes), A2aError> {
    let op = v1::method_of(req);
    let params = serde_json::to_value(v1::params(req))
        .map_err(|e| A2aError::InvalidResponse(format!("{op} request: {e}")))?;
    let body = crate::grpc::request_frame(op, params)?;
    let url = format!(
        "{}/{}/{op}",
        endpoint.trim_end_matches('/'),
        crate::grpc::SERVICE
    );
    Ok((url, body))
}

#[cfg(not(feature = "grpc"))]
fn grpc_request(endpoint: &str, _: &Request) -> Result<(String, bytes::Bytes), A2aError> {
    Err(A2aError::InvalidCard {
        url: endpoint.to_owned(),
        reason: "the gRPC binding needs agentry-a2a's `grpc` feature".into(),
    })
}

/// A gRPC answer's status, from its headers (a trailers-only answer) or its trailers.
#[cfg(feature = "grpc")]
fn grpc_status(h: &http::HeaderMap) -> Option<(i32, String, Option<Vec<u8>>)> {
    use base64::Engine as _;
    let code = h.get("grpc-status")?.to_str().ok()?.trim().parse().ok()?;
    let message = h
        .get("grpc-message")
        .and_then(|m| m.to_str().ok())
        .map(crate::grpc::decode_message)
        .unwrap_or_default();
    let details = h
        .get("grpc-status-details-bin")
        .and_then(|d| d.to_str().ok())
        .and_then(|d| {
            let d = d.trim_end_matches('=');
            base64::engine::general_purpose::STANDARD_NO_PAD
                .decode(d)
                .ok()
        });
    Some((code, message, details))
}

impl A2aClient {
    /// The HTTP/2 client of the gRPC binding (cleartext HTTP/2 without an upgrade, as gRPC
    /// clients connect; TLS negotiates it), made once.
    fn grpc_http(&self) -> Result<reqwest::Client, A2aError> {
        if let Some(c) = self.grpc.get() {
            return Ok(c.clone());
        }
        #[cfg(feature = "grpc")]
        let built = build_http_with(
            &self.cfg,
            reqwest::Client::builder().http2_prior_knowledge(),
        )?;
        #[cfg(not(feature = "grpc"))]
        let built: reqwest::Client = {
            grpc_request(self.endpoint(), &Request::GetExtendedCard)?;
            self.http.clone()
        };
        Ok(self.grpc.get_or_init(|| built).clone())
    }

    /// The error a gRPC status stands for (401/403 refusals as the other bindings give them).
    #[cfg(feature = "grpc")]
    fn grpc_error(&self, code: i32, message: &str, details: Option<&[u8]>) -> A2aError {
        use crate::grpc::status;
        match code {
            status::UNAUTHENTICATED => refused(401, self.endpoint().to_owned()),
            status::PERMISSION_DENIED => refused(403, self.endpoint().to_owned()),
            _ => crate::grpc::error_from(code, message, details).into(),
        }
    }

    /// Reads a unary gRPC answer into v1.0 JSON.
    #[cfg(feature = "grpc")]
    async fn grpc_unary(
        &self,
        req: &Request,
        resp: reqwest::Response,
    ) -> Result<(Option<Value>, ProtocolVersion), A2aError> {
        use http_body_util::BodyExt as _;
        let op = v1::method_of(req);
        let http_status = resp.status().as_u16();
        let resp: http::Response<reqwest::Body> = resp.into();
        if let Some((code, msg, details)) = grpc_status(resp.headers())
            && code != crate::grpc::status::OK
        {
            return Err(self.grpc_error(code, &msg, details.as_deref()));
        }
        if http_status != 200 {
            return Err(A2aError::Http {
                status: http_status,
                url: self.endpoint().to_owned(),
                body: "not a gRPC answer".into(),
            });
        }
        let mut body = resp.into_body();
        let mut reader = crate::grpc::FrameReader::new(self.cfg.max_response_bytes);
        let mut message = None;
        let read = async {
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(|e| A2aError::InvalidResponse(format!("{op}: {e}")))?;
                match frame.into_data() {
                    Ok(data) => {
                        for m in reader.push(&data)? {
                            message = Some(m);
                        }
                    }
                    Err(frame) => {
                        if let Some(t) = frame.trailers_ref()
                            && let Some((code, msg, details)) = grpc_status(t)
                            && code != crate::grpc::status::OK
                        {
                            return Err(self.grpc_error(code, &msg, details.as_deref()));
                        }
                    }
                }
            }
            Ok::<_, A2aError>(())
        };
        tokio::time::timeout(self.cfg.request_timeout, read)
            .await
            .map_err(|_| A2aError::Timeout {
                what: format!("{op} over gRPC"),
                after_ms: self.cfg.request_timeout.as_millis() as u64,
            })??;
        let msg = message
            .ok_or_else(|| A2aError::InvalidResponse(format!("{op} answered no message")))?;
        Ok((
            Some(crate::grpc::response_json(op, &msg)?),
            ProtocolVersion::V1_0,
        ))
    }

    #[cfg(not(feature = "grpc"))]
    async fn grpc_unary(
        &self,
        req: &Request,
        _: reqwest::Response,
    ) -> Result<(Option<Value>, ProtocolVersion), A2aError> {
        Err(grpc_request(self.endpoint(), req).unwrap_err())
    }

    /// Forwards a gRPC server stream's events into `tx`.
    #[cfg(feature = "grpc")]
    async fn grpc_stream(
        &self,
        req: &Request,
        resp: reqwest::Response,
        tx: &mpsc::Sender<Result<StreamEvent, A2aError>>,
    ) -> Result<GrpcStreamEnd, A2aError> {
        use http_body_util::BodyExt as _;
        let op = v1::method_of(req);
        let http_status = resp.status().as_u16();
        let resp: http::Response<reqwest::Body> = resp.into();
        if let Some((code, msg, details)) = grpc_status(resp.headers())
            && code != crate::grpc::status::OK
        {
            return match self.grpc_error(code, &msg, details.as_deref()) {
                A2aError::Rpc(e) => Ok(GrpcStreamEnd::Refused(e)),
                other => Err(other),
            };
        }
        // No gRPC at that address (a 404 of a server without the binding, a proxy's page).
        if http_status != 200 {
            return Err(A2aError::Http {
                status: http_status,
                url: self.endpoint().to_owned(),
                body: "not a gRPC answer".into(),
            });
        }
        let mut body = resp.into_body();
        let mut reader = crate::grpc::FrameReader::new(self.cfg.max_response_bytes);
        let (mut task_id, mut delivered) = (None, 0usize);
        loop {
            let next = tokio::time::timeout(self.cfg.stream_idle_timeout, body.frame()).await;
            let frame = match next {
                Err(_) => {
                    return Err(A2aError::Timeout {
                        what: "stream idle (no event)".into(),
                        after_ms: self.cfg.stream_idle_timeout.as_millis() as u64,
                    });
                }
                Ok(None) => break,
                Ok(Some(Err(e))) => {
                    tracing::debug!("gRPC stream read failed: {e}");
                    break;
                }
                Ok(Some(Ok(f))) => f,
            };
            let data = match frame.into_data() {
                Ok(d) => d,
                Err(frame) => {
                    if let Some(t) = frame.trailers_ref()
                        && let Some((code, msg, details)) = grpc_status(t)
                        && code != crate::grpc::status::OK
                    {
                        let e = self.grpc_error(code, &msg, details.as_deref());
                        return match e {
                            A2aError::Rpc(e) if task_id.is_none() => Ok(GrpcStreamEnd::Refused(e)),
                            other => Err(other),
                        };
                    }
                    continue;
                }
            };
            for msg in reader.push(&data)? {
                let json = crate::grpc::response_json(op, &msg)?;
                let ev = v1::stream_event_from(json)
                    .map_err(|e| A2aError::InvalidResponse(format!("{op} event: {e}")))?;
                task_id = task_id.or_else(|| event_task_id(&ev));
                let is_final = ev.is_final();
                if tx.send(Ok(ev)).await.is_err() || is_final {
                    return Ok(GrpcStreamEnd::Done);
                }
                delivered += 1;
            }
        }
        Ok(GrpcStreamEnd::Cut { task_id, delivered })
    }

    #[cfg(not(feature = "grpc"))]
    async fn grpc_stream(
        &self,
        req: &Request,
        _: reqwest::Response,
        _: &mpsc::Sender<Result<StreamEvent, A2aError>>,
    ) -> Result<GrpcStreamEnd, A2aError> {
        Err(grpc_request(self.endpoint(), req).unwrap_err())
    }
}

/// One stream item read straight into the model: an event, an error the peer sent in its
/// place, or nothing (a JSON-RPC response without a result). HTTP+JSON items are bare
/// `StreamResponse`s in their version's form, or a `google.rpc.Status` error.
#[allow(clippy::type_complexity)]
fn stream_item(
    data: &str,
    binding: Binding,
    version: ProtocolVersion,
) -> Result<Result<Option<StreamEvent>, RpcError>, A2aError> {
    let bad =
        |e: &dyn std::fmt::Display| A2aError::InvalidResponse(format!("stream event: {e}: {data}"));
    match (binding, version) {
        (Binding::JsonRpc, ProtocolVersion::V0_3) => {
            let r: Response<StreamEvent> = serde_json::from_str(data).map_err(|e| bad(&e))?;
            Ok(r.into_result())
        }
        (Binding::JsonRpc, ProtocolVersion::V1_0) => {
            let r: Response<crate::wire::v1::StreamResponse> =
                serde_json::from_str(data).map_err(|e| bad(&e))?;
            Ok(match r.into_result() {
                Ok(Some(w)) => Ok(Some(w.into_model().map_err(|e| bad(&e))?)),
                Ok(None) => Ok(None),
                Err(e) => Err(e),
            })
        }
        // gRPC streams are read by `grpc_stream`, not as SSE.
        (Binding::Grpc, _) => Err(A2aError::InvalidResponse(
            "a gRPC stream read as SSE".into(),
        )),
        (Binding::HttpJson, _) => {
            let ev = match version {
                ProtocolVersion::V1_0 => {
                    serde_json::from_str::<crate::wire::v1::StreamResponse>(data)
                        .map_err(|e| e.to_string())
                        .and_then(|w| w.into_model().map_err(|e| e.to_string()))
                }
                ProtocolVersion::V0_3 => {
                    serde_json::from_str::<crate::wire::v03::StreamResponse>(data)
                        .map_err(|e| e.to_string())
                        .and_then(|w| w.into_model().map_err(|e| e.to_string()))
                }
            };
            match ev {
                Ok(ev) => Ok(Ok(Some(ev))),
                Err(why) => match serde_json::from_str::<Value>(data) {
                    Ok(v) if v.get("error").is_some() => {
                        let status = v["error"]["code"].as_u64().unwrap_or(500) as u16;
                        Ok(Err(crate::rest::error_from(status, data.as_bytes())))
                    }
                    _ => Err(bad(&why)),
                },
            }
        }
    }
}

fn event_task_id(ev: &StreamEvent) -> Option<String> {
    match ev {
        StreamEvent::Task(t) => Some(t.id.clone()),
        StreamEvent::StatusUpdate(s) => Some(s.task_id.clone()),
        StreamEvent::ArtifactUpdate(a) => Some(a.task_id.clone()),
        StreamEvent::Message(m) => m.task_id.clone(),
    }
}

fn content_type(resp: &reqwest::Response) -> &str {
    resp.headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

fn is_json(resp: &reqwest::Response) -> bool {
    content_type(resp).contains("json")
}

fn is_event_stream(resp: &reqwest::Response) -> bool {
    content_type(resp).starts_with("text/event-stream")
}

/// Maps a JSON-RPC error code to a short name, for messages people read.
pub fn error_name(code: i64) -> &'static str {
    use crate::error::code::*;
    match code {
        PARSE_ERROR => "parse error",
        INVALID_REQUEST => "invalid request",
        METHOD_NOT_FOUND => "method not found",
        INVALID_PARAMS => "invalid params",
        INTERNAL_ERROR => "internal error",
        TASK_NOT_FOUND => "task not found",
        TASK_NOT_CANCELABLE => "task not cancelable",
        PUSH_NOTIFICATION_NOT_SUPPORTED => "push notifications not supported",
        UNSUPPORTED_OPERATION => "unsupported operation",
        CONTENT_TYPE_NOT_SUPPORTED => "content type not supported",
        INVALID_AGENT_RESPONSE => "invalid agent response",
        AUTHENTICATED_EXTENDED_CARD_NOT_CONFIGURED => "extended card not configured",
        EXTENSION_SUPPORT_REQUIRED => "extension support required",
        VERSION_NOT_SUPPORTED => "version not supported",
        _ => "error",
    }
}

impl RpcError {
    /// The code's name, e.g. "task not found".
    pub fn name(&self) -> &'static str {
        error_name(self.code)
    }
}
