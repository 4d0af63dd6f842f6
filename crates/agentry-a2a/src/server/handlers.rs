//! HTTP handlers: agent card, JSON-RPC dispatch, credentials.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, RawQuery, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http::{HeaderMap, HeaderValue, StatusCode, header};
use serde::Serialize;
use serde_json::Value;
use tracing::Instrument;

use super::admission::{Admission, Admit, Refused};
use super::hub::{AgentTasks, Events, Started, Subscription, Turn};
use super::push::PushSender;
use super::span::RequestSpan;
use super::{AgentService, Credentials, ServerConfig, stream};
use crate::credential::BearerToken;
use crate::envelope::{self, Envelope, ResponseMode};
use crate::error::RpcError;
use crate::jsonrpc::{self, Request};
use crate::model::*;
use crate::store::TaskQuery;
use crate::v1;
use crate::version::{self, ProtocolVersion};

/// Everything a request to one agent needs.
pub(super) struct AgentEndpoint {
    /// The card both generations read (see `v1::merged_card`), and the strict 1.0 one.
    pub(super) cards: Cards,
    pub(super) extended_card: Option<AgentCard>,
    /// Extensions the card declares, and those it marks required.
    extensions: Vec<String>,
    required_extensions: Vec<String>,
    pub(super) credentials: Option<Credentials>,
    audited: Option<super::access::Audited>,
    /// The agent's name (its card's), as the admission hook sees it.
    pub(super) name: String,
    /// Its card's skill ids: a request naming another skill is refused.
    skills: Vec<String>,
    admission: Option<Arc<dyn Admit>>,
    push_supported: bool,
    push: PushSender,
    pub tasks: Arc<AgentTasks>,
    pub keep_alive: Duration,
    /// Its request figures (`/metrics`).
    pub(super) metrics: Arc<super::ops::AgentMetrics>,
    /// The most bytes a JSON-RPC request body may have.
    body_limit: usize,
}

pub(super) fn router(
    agents: Vec<(String, AgentService)>,
    config: ServerConfig,
    draining: Arc<std::sync::atomic::AtomicBool>,
) -> Router {
    let mut ops = super::ops::Ops {
        agents: Vec::new(),
        draining,
    };
    let push = PushSender::start(config.push.clone());
    // Only where client certificates are credentials does the header carrying a verified
    // one need guarding (and cost a middleware).
    let client_certs = agents.iter().any(|(_, a)| {
        a.credentials
            .as_ref()
            .is_some_and(|c| c.client_certs.is_some())
    });
    let mut app = Router::new();
    for (path, svc) in agents {
        let push_supported = svc.card.capabilities.push_notifications == Some(true);
        // One card for both generations (see `v1::merged_card`), declaring the HTTP+JSON
        // binding this server also answers at the same URL.
        let public = with_grpc_interface(with_rest_interface(svc.card.clone()), &path);
        let cards = Cards::new(&with_envelope(public), config.card);
        let exts = &svc.card.capabilities.extensions;
        let extensions = exts
            .iter()
            .map(|e| e.uri.clone())
            .chain([envelope::EXTENSION_URI.to_owned()])
            .collect();
        let required_extensions = exts
            .iter()
            .filter(|e| e.required == Some(true))
            .map(|e| e.uri.clone())
            .collect();
        if push_supported {
            // Deliveries a previous process left pending (its outbox): sent before anything
            // new for the same task, since lanes keep arrival order.
            let (store, push) = (svc.store.clone(), push.clone());
            tokio::spawn(async move {
                match store.pending_pushes().await {
                    Ok(items) if !items.is_empty() => {
                        tracing::info!("resending {} pending push notification(s)", items.len());
                        push.queue(items, Some(&store));
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!("pending push notifications not read: {e}"),
                }
            });
        }
        let metrics = Arc::new(super::ops::AgentMetrics::default());
        ops.agents.push(super::ops::AgentOps {
            name: svc.card.name.clone(),
            metrics: metrics.clone(),
            store: svc.store.clone(),
            events: svc.events.clone(),
            queue: svc.queue.as_ref().map(|q| q.queue.clone()),
        });
        let state = Arc::new(AgentEndpoint {
            metrics: metrics.clone(),
            cards,
            extended_card: svc
                .extended_card
                .map(|c| with_envelope(with_grpc_interface(with_rest_interface(c), &path))),
            extensions,
            required_extensions,
            credentials: svc.credentials,
            name: svc.card.name.clone(),
            skills: svc.card.skills.iter().map(|k| k.id.clone()).collect(),
            admission: svc.admission,
            audited: svc.access_log.map(|log| super::access::Audited {
                log,
                agent: svc.card.name.clone(),
            }),
            push_supported,
            push: push.clone(),
            tasks: AgentTasks::new(
                svc.card.name.clone(),
                svc.store,
                svc.executor,
                push_supported.then(|| push.clone()),
                config.stream_buffer,
                config.idempotency_window,
                super::hub::Shared {
                    events: svc.events,
                    queue: svc.queue,
                    metrics: metrics.clone(),
                    body_limit: config.body_limit,
                },
            ),
            keep_alive: config.keep_alive,
            body_limit: config.body_limit,
        });
        let mut r = Router::new()
            .route(&format!("{path}/"), post(rpc))
            .route(&format!("{path}/.well-known/agent-card.json"), get(card))
            .route(&format!("{path}/.well-known/agent.json"), get(card));
        if !path.is_empty() {
            r = r.route(&path, post(rpc));
        }
        // The JSON-RPC handler reads its body under the limit itself (see `read_body`).
        let rest = super::rest::routes(&path).layer(DefaultBodyLimit::max(config.body_limit));
        #[cfg(feature = "grpc")]
        if path.is_empty() {
            let grpc = super::grpc::routes().layer(DefaultBodyLimit::max(config.body_limit));
            r = r.merge(grpc);
        }
        app = app.merge(r.merge(rest).with_state(state));
    }
    let ops = Arc::new(ops);
    if config.metrics {
        app = app.merge(super::ops::metrics_route(ops.clone()));
    }
    if client_certs {
        app = app.layer(axum::middleware::from_fn(verified_client));
    }
    let app = match config.allowed_hosts {
        None => app,
        Some(hosts) => super::listen::host_guard(app, &hosts),
    };
    // Probes come from load balancers by address, whatever Host the guard expects; they
    // say nothing about the agents.
    app.merge(super::ops::probe_routes(ops))
}

/// Sets the header that says which verified client certificate the connection presented
/// (see [`super::tls`]), after removing any a client sent.
async fn verified_client(
    mut req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    use super::tls::{ClientCert, VERIFIED_CLIENT_HEADER};
    req.headers_mut().remove(VERIFIED_CLIENT_HEADER);
    let name = req
        .extensions()
        .get::<ClientCert>()
        .and_then(|c| c.common_name.as_deref())
        .and_then(|cn| HeaderValue::from_str(cn).ok());
    if let Some(v) = name {
        req.headers_mut().insert(VERIFIED_CLIENT_HEADER, v);
    }
    next.run(req).await
}

/// Declares the task envelope extension, which every agentry server understands.
fn with_envelope(mut card: AgentCard) -> AgentCard {
    let exts = &mut card.capabilities.extensions;
    if !exts.iter().any(|e| e.uri == envelope::EXTENSION_URI) {
        exts.push(AgentExtension {
            uri: envelope::EXTENSION_URI.into(),
            description: Some(
                "Task envelope: correlation id, idempotency key (also the Idempotency-Key \
                 header), priority, response mode, required scopes, trigger id and skill in the \
                 message metadata under this URI."
                    .into(),
            ),
            required: Some(false),
            params: None,
        });
    }
    card
}

/// Declares the HTTP+JSON binding at the card's URL (unless the card names one already).
fn with_rest_interface(mut card: AgentCard) -> AgentCard {
    let has_rest = card
        .additional_interfaces
        .iter()
        .any(|i| i.transport.eq_ignore_ascii_case("HTTP+JSON"));
    if !has_rest && card.preferred_transport.eq_ignore_ascii_case("JSONRPC") {
        if card.additional_interfaces.is_empty() {
            // v0.3 asks that the main interface be listed here too when there are others.
            card.additional_interfaces.push(AgentInterface {
                url: card.url.clone(),
                transport: "JSONRPC".into(),
            });
        }
        // The REST base has no trailing slash: clients append `/message:send` and so on
        // (TCK 1.0 by plain concatenation, which made `//message:send` before).
        card.additional_interfaces.push(AgentInterface {
            url: card.url.trim_end_matches('/').to_owned(),
            transport: "HTTP+JSON".into(),
        });
    }
    card
}

/// Declares the gRPC binding (A2A 1.0) for the agent at the server's root, which it serves
/// (gRPC paths name no agent); its URL is the `host:port` gRPC clients dial.
fn with_grpc_interface(card: AgentCard, path: &str) -> AgentCard {
    #[cfg(feature = "grpc")]
    if path.is_empty() {
        let mut card = card;
        let target = v1::grpc_target(&card.url);
        v1::add_interface(&mut card, &target, "GRPC");
        return card;
    }
    let _ = path;
    card
}

fn fnv1a(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf29ce484222325, |h, &x| {
        (h ^ x as u64).wrapping_mul(0x100000001b3)
    })
}

/// One card as served: body, validator.
struct CardBody {
    json: Bytes,
    etag: HeaderValue,
}

impl CardBody {
    fn new(card: &Value) -> CardBody {
        let json = Bytes::from(serde_json::to_vec(card).unwrap_or_default());
        let etag = HeaderValue::from_str(&format!("\"{:016x}\"", fnv1a(&json)))
            .unwrap_or(HeaderValue::from_static("\"0\""));
        CardBody { json, etag }
    }
}

/// The cards of one agent, by protocol generation, and when they were made.
pub(super) struct Cards {
    both: CardBody,
    v1: CardBody,
    default: super::CardDefault,
    last_modified: HeaderValue,
}

impl Cards {
    fn new(card: &AgentCard, default: super::CardDefault) -> Cards {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        Cards {
            both: CardBody::new(&v1::merged_card(card)),
            v1: CardBody::new(&v1::card(card)),
            default,
            last_modified: HeaderValue::from_str(&crate::time::format_http_date(now))
                .unwrap_or(HeaderValue::from_static("Thu, 01 Jan 1970 00:00:00 GMT")),
        }
    }

    /// The card for a request that asked for `version` (`None`: no header).
    fn for_version(&self, version: Option<ProtocolVersion>) -> &CardBody {
        match (version, self.default) {
            (Some(ProtocolVersion::V1_0), _) | (None, super::CardDefault::V1_0) => &self.v1,
            _ => &self.both,
        }
    }

    /// The card JSON both generations read (the REST `/v1/card` of v0.3).
    pub(super) fn both_json(&self) -> Bytes {
        self.both.json.clone()
    }
}

/// The agent card: by the `A2A-Version` header (or query parameter) the generation asked
/// for, else the configured default; cacheable, revalidated by ETag.
async fn card(
    State(s): State<Arc<AgentEndpoint>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let asked = match requested_version(&headers, query.as_deref()) {
        Ok(v) => v,
        Err(e) => {
            let mut r = json_body(crate::jsonrpc::encode_error(&Value::Null, &v1::error(&e)));
            *r.status_mut() = StatusCode::BAD_REQUEST;
            return r;
        }
    };
    let body = s.cards.for_version(asked);
    let cache = [
        (
            header::CACHE_CONTROL,
            HeaderValue::from_static("public, max-age=300"),
        ),
        (header::ETAG, body.etag.clone()),
        (header::LAST_MODIFIED, s.cards.last_modified.clone()),
        // Caches keep one card per generation.
        (header::VARY, HeaderValue::from_static("A2A-Version")),
    ];
    if headers.get(header::IF_NONE_MATCH) == Some(&body.etag) {
        return (StatusCode::NOT_MODIFIED, cache).into_response();
    }
    (
        cache,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body.json.clone(),
    )
        .into_response()
}

pub(super) fn json_body(body: Vec<u8>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

fn rpc_error(id: &Value, e: &RpcError, v: ProtocolVersion) -> Response {
    let body = match v {
        ProtocolVersion::V0_3 => jsonrpc::encode_error(id, e),
        ProtocolVersion::V1_0 => jsonrpc::encode_error(id, &v1::error(e)),
    };
    let mut r = json_body(body);
    // Refused before dispatch: v1.0 maps the version error to HTTP 400.
    if e.code == crate::error::code::VERSION_NOT_SUPPORTED {
        *r.status_mut() = StatusCode::BAD_REQUEST;
    }
    r
}

fn unauthorized(id: &Value, v: ProtocolVersion) -> Response {
    refused(id, v, &Refusal::anonymous())
}

/// Why a request is refused before it is read, as both bindings answer it: 401 with a
/// `WWW-Authenticate` challenge (RFC 6750: `invalid_token` with a description) or 403
/// `insufficient_scope` naming the scopes required.
pub(super) struct Refusal {
    pub(super) forbidden: bool,
    /// The principal, when the credential was valid but not enough.
    pub(super) caller: Option<String>,
    /// For the client and the audit trail.
    pub(super) message: String,
    pub(super) challenge: HeaderValue,
}

impl Refusal {
    fn anonymous() -> Self {
        Refusal {
            forbidden: false,
            caller: None,
            message: "authentication required: send `Authorization: Bearer <token>` or the API \
                      key header"
                .into(),
            challenge: HeaderValue::from_static("Bearer"),
        }
    }

    pub(super) fn status(&self) -> StatusCode {
        if self.forbidden {
            StatusCode::FORBIDDEN
        } else {
            StatusCode::UNAUTHORIZED
        }
    }
}

/// A header parameter's value: printable ASCII without quotes or backslashes.
fn quotable(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_graphic() || *c == ' ')
        .filter(|c| !matches!(c, '"' | '\\'))
        .take(200)
        .collect()
}

/// Who a request with these headers is (`None`: anonymous), from one look at its
/// credentials (a token is verified once per request), or why it is refused: no credentials
/// where every call needs them, a credential that does not verify (always, where tokens are
/// verified: a client sending a bad token should learn it), or a token without the required
/// scopes.
pub(super) async fn authenticate(
    s: &AgentEndpoint,
    headers: &HeaderMap,
) -> Result<Caller, Refusal> {
    authenticate_with(s.credentials.as_ref(), headers).await
}

/// [`authenticate`] against `credentials` (`None`: an open route).
pub(super) async fn authenticate_with(
    credentials: Option<&super::Credentials>,
    headers: &HeaderMap,
) -> Result<Caller, Refusal> {
    use super::Verdict;
    let Some(c) = credentials else {
        return Ok(Caller::default());
    };
    // The header looked up once: read as a token here, kept as the caller's token below.
    let authorization = headers.get(http::header::AUTHORIZATION);
    let bearer = authorization.and_then(crate::credential::bearer_in);
    c.prepare_bearer(bearer).await;
    let refusal = match c.verdict_with(headers, bearer) {
        Verdict::Caller(p, scopes, actors) => {
            // Only a verified token (it has scopes) is kept: the operator's static tokens
            // are long-lived credentials and never leave this server.
            let token = scopes
                .as_ref()
                .and(bearer)
                .and(authorization)
                .map(BearerToken::authorization);
            return Ok(Caller {
                principal: Some(p),
                scopes,
                token,
                actors,
            });
        }
        Verdict::Anonymous => c.required_for_all.then(Refusal::anonymous),
        Verdict::Invalid(why) => (c.required_for_all || c.verifier.is_some()).then(|| {
            let why = quotable(&why);
            Refusal {
                forbidden: false,
                caller: None,
                message: format!("invalid token: {why}"),
                challenge: HeaderValue::from_str(&format!(
                    "Bearer error=\"invalid_token\", error_description=\"{why}\""
                ))
                .unwrap_or(HeaderValue::from_static("Bearer error=\"invalid_token\"")),
            }
        }),
        Verdict::Insufficient { caller, missing } => {
            let missing: Vec<&str> = missing.iter().map(String::as_str).collect();
            let message = format!(
                "the token lacks the scope(s) this agent requires: {}",
                quotable(&missing.join(" "))
            );
            Some(Refusal::insufficient(Some(caller), message, &missing))
        }
    };
    refusal.map_or(Ok(Caller::default()), Err)
}

/// Who a request authenticated as (`None`: anonymous) and the scopes its token grants
/// (`None`: not limited, as with the operator's static tokens and API keys, or an agent
/// open to everyone).
#[derive(Debug, Default)]
pub(super) struct Caller {
    pub(super) principal: Option<String>,
    scopes: Option<Arc<[String]>>,
    /// The verified JWT itself, for the agent to exchange when it delegates.
    token: Option<BearerToken>,
    /// The agents presenting it for the principal (its `act` chain).
    pub(super) actors: Arc<[String]>,
}

impl Caller {
    /// Refuses (403 `insufficient_scope`) a request whose envelope requires scopes the
    /// caller's token does not grant.
    pub(super) fn check_scopes(&self, env: Option<&Envelope>) -> Result<(), Refusal> {
        let (Some(env), Some(held)) = (env, &self.scopes) else {
            return Ok(());
        };
        let missing: Vec<&str> = env
            .required_scopes
            .iter()
            .filter(|s| !held.contains(s))
            .map(String::as_str)
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let message = format!(
            "the token lacks the scope(s) the request requires: {}",
            quotable(&missing.join(" "))
        );
        Err(Refusal::insufficient(
            self.principal.clone(),
            message,
            &missing,
        ))
    }
}

impl Refusal {
    /// 403 `insufficient_scope`, naming the scopes that are missing.
    fn insufficient(caller: Option<String>, message: String, missing: &[&str]) -> Refusal {
        let scopes = quotable(&missing.join(" "));
        Refusal {
            forbidden: true,
            caller,
            message,
            challenge: HeaderValue::from_str(&format!(
                "Bearer error=\"insufficient_scope\", scope=\"{scopes}\""
            ))
            .unwrap_or(HeaderValue::from_static(
                "Bearer error=\"insufficient_scope\"",
            )),
        }
    }
}

/// What a send was admitted with: its task envelope, and the instructions the server's
/// admission hook gave the agent for it.
#[derive(Debug, Default)]
pub(crate) struct Admitted {
    /// Shared by the task that records it and the agent's context.
    pub(crate) envelope: Option<Arc<Envelope>>,
    pub(crate) instructions: Option<String>,
    /// The scopes the caller's token grants (`None`: not limited).
    pub(crate) scopes: Option<Arc<[String]>>,
    /// The caller's verified JWT.
    pub(crate) subject_token: Option<BearerToken>,
}

/// Why a send was not admitted: a malformed or inapplicable envelope (-32602), or scopes
/// the caller lacks (403).
pub(super) enum NotAdmitted {
    Invalid(RpcError),
    Refused(Refusal),
}

/// [`authenticate`], with a refusal recorded in the audit trail before it is answered (a
/// record that could not be written is `Invalid`: the request is refused all the same).
pub(super) async fn authenticate_audited(
    s: &AgentEndpoint,
    headers: &HeaderMap,
) -> Result<Caller, NotAdmitted> {
    match authenticate(s, headers).await {
        Ok(who) => Ok(who),
        Err(why) => {
            let caller = why.caller.as_deref();
            audit(s, headers, None, None, caller, false, why.message.clone())
                .await
                .map_err(NotAdmitted::Invalid)?;
            Err(NotAdmitted::Refused(why))
        }
    }
}

/// Admission, the authorization decision and the audit record of each, in the order the
/// bindings run them: the admitted request, or why not (a record that could not be written
/// is `Invalid` too: nothing runs unrecorded).
pub(super) async fn gate(
    s: &AgentEndpoint,
    req: &mut Request,
    headers: &HeaderMap,
    present: Present,
    who: &Caller,
) -> Result<Admitted, NotAdmitted> {
    let admitted = match admit(s, req, headers, present, who) {
        Ok(a) => a,
        Err(refusal) => {
            let (no, env) = *refusal;
            audit_as(s, headers, Some(req), env.as_ref(), who, false, no.reason())
                .await
                .map_err(NotAdmitted::Invalid)?;
            return Err(no);
        }
    };
    let env = admitted.envelope.as_deref();
    let (allowed, reason) = decide(s, req, headers);
    audit_as(s, headers, Some(req), env, who, allowed, reason)
        .await
        .map_err(NotAdmitted::Invalid)?;
    Ok(admitted)
}

impl NotAdmitted {
    pub(super) fn reason(&self) -> String {
        match self {
            NotAdmitted::Invalid(e) => e.message.clone(),
            NotAdmitted::Refused(r) => r.message.clone(),
        }
    }
}

/// A request naming a skill: one the card lists (-32602 otherwise), whose scopes the caller's
/// token holds (403 otherwise).
fn check_skill(s: &AgentEndpoint, who: &Caller, env: Option<&Envelope>) -> Result<(), NotAdmitted> {
    let Some(skill) = env.and_then(|e| e.skill.as_deref()) else {
        return Ok(());
    };
    if !s.skills.iter().any(|k| k == skill) {
        return Err(NotAdmitted::Invalid(RpcError::invalid_params(format!(
            "no skill `{}` here; this agent's skills: {}",
            quotable(skill),
            s.skills.join(", ")
        ))));
    }
    let (Some(c), Some(held)) = (&s.credentials, &who.scopes) else {
        return Ok(());
    };
    let Some(needed) = c.skill_scopes.get(skill) else {
        return Ok(());
    };
    let missing: Vec<&str> = needed
        .iter()
        .filter(|n| !held.contains(n))
        .map(String::as_str)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let message = format!(
        "the token lacks the scope(s) the skill `{skill}` requires: {}",
        quotable(&missing.join(" "))
    );
    Err(NotAdmitted::Refused(Refusal::insufficient(
        who.principal.clone(),
        message,
        &missing,
    )))
}

/// Admits a send: its envelope read ([`envelope_of`]), the scopes it requires checked against
/// the caller's, the agent's admission hook asked (triggers), and the response mode applied
/// to the send's configuration. Other requests pass with nothing. A refusal comes with the
/// envelope when it was read (the audit trail records its correlation id).
pub(super) fn admit(
    s: &AgentEndpoint,
    req: &mut Request,
    headers: &HeaderMap,
    present: Present,
    who: &Caller,
) -> Result<Admitted, Box<(NotAdmitted, Option<Envelope>)>> {
    let mut env = envelope_of(req, headers, present)
        .map_err(|e| Box::new((NotAdmitted::Invalid(e), None)))?;
    if let Err(why) = who.check_scopes(env.as_ref()) {
        return Err(Box::new((NotAdmitted::Refused(why), env)));
    }
    if let Err(no) = check_skill(s, who, env.as_ref()) {
        return Err(Box::new((no, env)));
    }
    let mut instructions = None;
    if let (Some(gate), Some(e)) = (&s.admission, env.as_mut()) {
        let admitted = gate
            .admit(Admission::new(
                &s.name,
                who.principal.as_deref(),
                who.scopes.as_deref(),
                e,
            ))
            .map_err(|r| match r {
                Refused::Invalid(m) => NotAdmitted::Invalid(RpcError::invalid_params(m)),
                Refused::Forbidden { message, scopes } => {
                    let missing: Vec<&str> = scopes.iter().map(String::as_str).collect();
                    NotAdmitted::Refused(Refusal::insufficient(
                        who.principal.clone(),
                        message,
                        &missing,
                    ))
                }
            })
            // What the hook filled in is held to the same rules as what the client sent.
            .and_then(|i| e.check().map(|()| i).map_err(NotAdmitted::Invalid));
        match admitted {
            Ok(i) => instructions = i,
            Err(no) => return Err(Box::new((no, env))),
        }
    }
    if let (Request::SendMessage(p) | Request::StreamMessage(p), Some(e)) = (req, &env) {
        apply_mode(p, e);
    }
    Ok(Admitted {
        envelope: env.map(Arc::new),
        instructions,
        scopes: who.scopes.clone(),
        subject_token: who.token.clone(),
    })
}

/// The task envelope of a send: from the message's metadata (or the params'), the
/// `Idempotency-Key` and `traceparent` headers, with a correlation id made when the client
/// gave none (the trace id when there is one). `None` when the request is not a send or
/// uses no envelope.
fn envelope_of(
    req: &mut Request,
    headers: &HeaderMap,
    present: Present,
) -> Result<Option<Envelope>, RpcError> {
    let (Request::SendMessage(p) | Request::StreamMessage(p)) = req else {
        return Ok(None);
    };
    let mut env = match Envelope::of(&p.message)? {
        Some(e) => Some(e),
        None => Envelope::from_metadata(p.metadata.as_ref())?,
    };
    let header = |name: &http::HeaderName| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    if let Some(k) = present
        .idempotency_key()
        .then(|| header(&envelope::IDEMPOTENCY_HEADER_NAME))
        .flatten()
    {
        envelope::check_id("the Idempotency-Key header", k)?;
        let e = env.get_or_insert_with(Envelope::default);
        match &e.idempotency_key {
            Some(own) if own != k => {
                return Err(RpcError::invalid_params(
                    "the Idempotency-Key header and the envelope's idempotencyKey differ",
                ));
            }
            _ => e.idempotency_key = Some(k.to_owned()),
        }
    }
    let Some(mut e) = env else { return Ok(None) };
    if e.traceparent.is_none() && present.traceparent() {
        // An invalid header is ignored, as W3C trace context says.
        e.traceparent = header(&envelope::TRACEPARENT_HEADER_NAME).map(str::to_owned);
        if e.trace_id().is_none() {
            e.traceparent = None;
        }
    }
    if e.correlation_id.is_none() {
        e.correlation_id = Some(e.trace_id().map_or_else(crate::new_id, str::to_owned));
    }
    Ok(Some(e))
}

/// For the audit trail of a request without a task envelope (`tasks/get`, say, or one
/// refused before it was read): the correlation id its caller's W3C baggage carries, when a
/// valid one.
fn traced(headers: &HeaderMap) -> Option<Envelope> {
    Some(Envelope {
        correlation_id: Some(crate::trace::correlation_of(headers)?),
        ..Default::default()
    })
}

/// The envelope's response mode as the send's configuration, where the client did not set
/// it: `sync` blocks, `async` and `callback` do not, `callback` pushes to its URL.
fn apply_mode(p: &mut MessageSendParams, e: &Envelope) {
    if let Some(mode) = e.response_mode {
        let c = p.configuration.get_or_insert_with(Default::default);
        c.blocking.get_or_insert(mode == ResponseMode::Sync);
        if mode == ResponseMode::Callback
            && c.push_notification_config.is_none()
            && let Some(url) = &e.callback_url
        {
            c.push_notification_config = Some(PushNotificationConfig {
                id: None,
                url: url.clone(),
                token: None,
                authentication: None,
                body_version: None,
            });
        }
    }
}

fn refused(id: &Value, v: ProtocolVersion, why: &Refusal) -> Response {
    let mut r = rpc_error(id, &RpcError::invalid_request(why.message.clone()), v);
    *r.status_mut() = why.status();
    r.headers_mut()
        .insert(header::WWW_AUTHENTICATE, why.challenge.clone());
    r
}

/// Whether a decoded request is let through, and why: everything a caller got past the
/// credentials check with is, but the extended card, which needs accepted credentials.
pub(super) fn decide(
    s: &AgentEndpoint,
    req: &Request,
    headers: &HeaderMap,
) -> (bool, &'static str) {
    match req {
        Request::GetExtendedCard if s.extended_card.is_some() => {
            if s.credentials.as_ref().is_some_and(|c| c.accepts(headers)) {
                (true, "credentials accepted")
            } else {
                (false, "the extended card needs credentials")
            }
        }
        _ if s.credentials.as_ref().is_some_and(|c| c.required_for_all) => {
            (true, "credentials accepted")
        }
        _ => (true, "open to every caller"),
    }
}

/// Records a decision in the agent's access log, when it has one. The error is the answer
/// when the decision could not be kept: nothing is done that the trail does not show. A
/// request without an envelope is recorded under the correlation id its W3C baggage carries.
pub(super) async fn audit(
    s: &AgentEndpoint,
    headers: &HeaderMap,
    req: Option<&Request>,
    env: Option<&Envelope>,
    caller: Option<&str>,
    allowed: bool,
    reason: impl Into<String>,
) -> Result<(), RpcError> {
    record(s, headers, req, env, caller, &[], allowed, reason.into()).await
}

/// [`audit`] for an authenticated caller, with the agents acting for them.
pub(super) async fn audit_as(
    s: &AgentEndpoint,
    headers: &HeaderMap,
    req: Option<&Request>,
    env: Option<&Envelope>,
    who: &Caller,
    allowed: bool,
    reason: impl Into<String>,
) -> Result<(), RpcError> {
    let caller = who.principal.as_deref();
    record(
        s,
        headers,
        req,
        env,
        caller,
        &who.actors,
        allowed,
        reason.into(),
    )
    .await
}

#[allow(clippy::too_many_arguments)]
async fn record(
    s: &AgentEndpoint,
    headers: &HeaderMap,
    req: Option<&Request>,
    env: Option<&Envelope>,
    caller: Option<&str>,
    via: &[String],
    allowed: bool,
    reason: String,
) -> Result<(), RpcError> {
    let Some(a) = &s.audited else { return Ok(()) };
    let traced = if env.is_none() { traced(headers) } else { None };
    a.record(req, env.or(traced.as_ref()), caller, via, allowed, reason)
        .await
        .map_err(|e| {
            tracing::error!(agent = %a.agent, "access not recorded, request refused: {e}");
            RpcError::internal("the audit trail could not record this request; nothing was done")
        })
}

/// JSON, or a JSON structured suffix; charset parameters are fine.
pub(super) fn is_json(ct: &HeaderValue) -> bool {
    // What nearly every client sends, matched before anything is split or validated.
    if ct.as_bytes() == b"application/json" {
        return true;
    }
    let Ok(ct) = ct.to_str() else { return false };
    // Compared without a lowercased copy: `to_str` leaves visible ASCII only.
    let mime = ct.split(';').next().unwrap_or("").trim().as_bytes();
    let (prefix, suffix) = (b"application/", b"+json");
    mime.eq_ignore_ascii_case(b"application/json")
        || (mime.len() > prefix.len() + suffix.len()
            && mime[..prefix.len()].eq_ignore_ascii_case(prefix)
            && mime[mime.len() - suffix.len()..].eq_ignore_ascii_case(suffix))
}

/// The version a request asked for, from the header or else the query parameter.
pub(super) fn requested_version(
    headers: &HeaderMap,
    query: Option<&str>,
) -> Result<Option<ProtocolVersion>, RpcError> {
    if let Some(h) = headers.get(&version::HEADER_NAME) {
        return ProtocolVersion::from_header(Some(h.to_str().unwrap_or("?")));
    }
    let q = query.unwrap_or("").split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        k.eq_ignore_ascii_case(version::HEADER).then_some(v)
    });
    ProtocolVersion::from_header(q)
}

/// Which of the optional headers agentry reads a request carries, found in one pass over its
/// names: most requests carry none of them, and a lookup by name hashes the name and probes
/// the map (about 110 instructions; five per request, 1.2% of a message echo's work).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Present(u8);

impl Present {
    const EXTENSIONS: u8 = 1;
    const TRACEPARENT: u8 = 2;
    const BAGGAGE: u8 = 4;
    const IDEMPOTENCY: u8 = 8;

    pub(super) fn of(headers: &HeaderMap) -> Present {
        let mut bits = 0;
        for name in headers.keys() {
            // A `HeaderName` is lowercase.
            bits |= match name.as_str() {
                "a2a-extensions" | "x-a2a-extensions" => Self::EXTENSIONS,
                "traceparent" => Self::TRACEPARENT,
                "baggage" => Self::BAGGAGE,
                "idempotency-key" => Self::IDEMPOTENCY,
                _ => 0,
            };
        }
        Present(bits)
    }

    /// `A2A-Extensions` or `X-A2A-Extensions`.
    pub(super) fn extensions(self) -> bool {
        self.0 & Self::EXTENSIONS != 0
    }

    pub(super) fn traceparent(self) -> bool {
        self.0 & Self::TRACEPARENT != 0
    }

    pub(super) fn baggage(self) -> bool {
        self.0 & Self::BAGGAGE != 0
    }

    pub(super) fn idempotency_key(self) -> bool {
        self.0 & Self::IDEMPOTENCY != 0
    }
}

/// The extensions a request asks for (`A2A-Extensions`, or v0.3's `X-A2A-Extensions`).
fn requested_extensions(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(&version::EXTENSIONS_HEADER_NAME)
        .iter()
        .chain(
            headers
                .get_all(&version::LEGACY_EXTENSIONS_HEADER_NAME)
                .iter(),
        )
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|u| u.trim().to_owned())
        .filter(|u| !u.is_empty())
        .collect()
}

/// Refuses a request that leaves out an extension the agent requires (-32008); otherwise the
/// requested extensions this agent supports, to echo in `A2A-Extensions`.
pub(super) fn negotiate_extensions(
    s: &AgentEndpoint,
    headers: &HeaderMap,
    present: Present,
) -> Result<Option<HeaderValue>, RpcError> {
    if !present.extensions() && s.required_extensions.is_empty() {
        return Ok(None);
    }
    let asked = requested_extensions(headers);
    let missing: Vec<String> = s
        .required_extensions
        .iter()
        .filter(|r| !asked.contains(r))
        .cloned()
        .collect();
    if !missing.is_empty() {
        return Err(RpcError::extension_required(&missing));
    }
    let active: Vec<&str> = asked
        .iter()
        .filter(|u| s.extensions.contains(u))
        .map(String::as_str)
        .collect();
    Ok((!active.is_empty())
        .then(|| HeaderValue::from_str(&active.join(", ")).ok())
        .flatten())
}

async fn rpc(State(s): State<Arc<AgentEndpoint>>, req: axum::extract::Request) -> Response {
    // The headers taken, not copied: axum's `HeaderMap` extractor clones them (~500
    // instructions a request). The body is read by the same extractor as before, so the
    // body limit and its rejection are unchanged.
    let (mut parts, body) = req.into_parts();
    let headers = std::mem::take(&mut parts.headers);
    let query = parts.uri.query().map(str::to_owned);
    let body = read_body(body, s.body_limit).await;
    let mut span = RequestSpan::new(&s.name, "jsonrpc", Present::of(&headers));
    let r = rpc_in(&s, query, &headers, body, &mut span).await;
    span.finish(&headers, r.status(), &s.metrics);
    r
}

/// A request body that could not be read: the HTTP status to answer and why.
struct Unread {
    status: StatusCode,
    text: String,
}

/// The body, read whole up to `limit` bytes. Read here, not by axum's `Bytes` extractor under
/// a `DefaultBodyLimit` layer: the layer wraps the route in a second router service and
/// writes the limit into each request's extensions (~1,400 instructions of a message echo's
/// 53,000), for the same `http_body_util::Limited` underneath.
async fn read_body(body: axum::body::Body, limit: usize) -> Result<Bytes, Unread> {
    use http_body_util::BodyExt;
    match http_body_util::Limited::new(body, limit).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) => Err(Unread {
            status: if e.is::<http_body_util::LengthLimitError>() {
                StatusCode::PAYLOAD_TOO_LARGE
            } else {
                StatusCode::BAD_REQUEST
            },
            text: format!("Failed to buffer the request body: {e}"),
        }),
    }
}

async fn rpc_in(
    s: &AgentEndpoint,
    query: Option<String>,
    headers: &HeaderMap,
    body: Result<Bytes, Unread>,
    span: &mut RequestSpan,
) -> Response {
    let present = span.present();
    let asked = match requested_version(headers, query.as_deref()) {
        Ok(v) => v,
        Err(e) => return rpc_error(&Value::Null, &e, ProtocolVersion::V1_0),
    };
    let fallback = asked.unwrap_or(ProtocolVersion::V0_3);
    // Larger than the body limit (or unreadable): a JSON-RPC error with the HTTP status
    // (413), not axum's plain-text answer.
    let body = match body {
        Ok(b) => b,
        Err(e) => {
            let mut r = rpc_error(&Value::Null, &RpcError::invalid_request(e.text), fallback);
            *r.status_mut() = e.status;
            return r;
        }
    };
    // A JSON content type is required: a web page can POST text/plain (or no type) to a
    // loopback agent without a CORS preflight, but not application/json.
    match headers.get(header::CONTENT_TYPE) {
        Some(ct) if is_json(ct) => {}
        ct => {
            let given = ct.map_or("none", |c| c.to_str().unwrap_or("?"));
            return rpc_error(&Value::Null, &RpcError::content_type(given), fallback);
        }
    }
    // Credentials before the body is decoded: an anonymous caller gets no parser time.
    let who = match authenticate(s, headers).await {
        Ok(who) => who,
        Err(why) => {
            let caller = why.caller.as_deref();
            if let Err(e) = audit(s, headers, None, None, caller, false, why.message.clone()).await
            {
                return rpc_error(&Value::Null, &e, fallback);
            }
            return refused(&Value::Null, fallback, &why);
        }
    };
    let caller = who.principal.as_deref();
    let (id, mut req, v) = match jsonrpc::decode_request_as(&body, asked) {
        Ok(x) => x,
        Err((id, e, v)) => return rpc_error(&id, &e, v),
    };
    span.method(v1::method_in(&req, v), v.as_str());
    let active = match negotiate_extensions(s, headers, present) {
        Ok(a) => a,
        Err(e) => return rpc_error(&id, &e, v),
    };
    let admitted = match admit(s, &mut req, headers, present, &who) {
        Ok(a) => a,
        Err(refusal) => {
            let (no, env) = *refusal;
            let env = env.as_ref();
            if let Err(e) = audit_as(s, headers, Some(&req), env, &who, false, no.reason()).await {
                return rpc_error(&id, &e, v);
            }
            return match no {
                NotAdmitted::Invalid(e) => rpc_error(&id, &e, v),
                NotAdmitted::Refused(why) => refused(&id, v, &why),
            };
        }
    };
    let env = admitted.envelope.as_deref();
    let (allowed, reason) = decide(s, &req, headers);
    if let Err(e) = audit_as(s, headers, Some(&req), env, &who, allowed, reason).await {
        return rpc_error(&id, &e, v);
    }
    span.link(headers, env);
    let mut r = dispatch(s, headers, id, req, v, caller, admitted)
        .instrument(span.span.clone())
        .await;
    if let Some(a) = active {
        r.headers_mut().insert(version::EXTENSIONS_HEADER, a);
    }
    r
}

async fn dispatch(
    s: &AgentEndpoint,
    headers: &HeaderMap,
    id: Value,
    req: Request,
    v: ProtocolVersion,
    caller: Option<&str>,
    admitted: Admitted,
) -> Response {
    match req {
        Request::StreamMessage(_) | Request::Resubscribe(_) => {
            let frame = stream::Frame::JsonRpc { id, version: v };
            Box::pin(streaming(s, frame, req, caller, admitted)).await
        }
        Request::GetExtendedCard => match &s.extended_card {
            None => rpc_error(&id, &RpcError::extended_card_not_configured(), v),
            Some(card) => {
                if s.credentials.as_ref().is_some_and(|c| c.accepts(headers)) {
                    json_body(match v {
                        ProtocolVersion::V0_3 => {
                            jsonrpc::encode_result(&id, &v1::merged_card(card))
                        }
                        ProtocolVersion::V1_0 => jsonrpc::encode_result(&id, &v1::card(card)),
                    })
                } else {
                    unauthorized(&id, v)
                }
            }
        },
        other => match Box::pin(unary(s, other, caller, admitted)).await {
            Ok(answer) => json_body(jsonrpc::encode_result(&id, &answer.body(v))),
            Err(e) => rpc_error(&id, &e, v),
        },
    }
}

fn check_push(s: &AgentEndpoint, p: &MessageSendParams) -> Result<(), RpcError> {
    if let Some(cfg) = p
        .configuration
        .as_ref()
        .and_then(|c| c.push_notification_config.as_ref())
    {
        if !s.push_supported {
            return Err(RpcError::push_not_supported());
        }
        s.push.check_url(&cfg.url)?;
    }
    Ok(())
}

fn history_limit(h: Option<i64>) -> Option<usize> {
    h.map(|n| n.max(0) as usize)
}

/// Starts the SSE answer of `message/stream` or a resubscription.
pub(super) async fn streaming(
    s: &AgentEndpoint,
    frame: stream::Frame,
    req: Request,
    caller: Option<&str>,
    admitted: Admitted,
) -> Response {
    match req {
        Request::StreamMessage(p) => {
            if let Err(e) = check_push(s, &p) {
                return stream::error(frame, e);
            }
            match s.tasks.start(p, caller, admitted, None).await {
                Ok(Started::Turn(turn)) => {
                    stream::turn(frame, turn, s.keep_alive, s.metrics.stream_opened())
                }
                // A repeat: the first request's task, and its running turn's events if any.
                Ok(Started::Again(lease)) => match AgentTasks::follow(&lease).await {
                    (task, Some(rx)) => stream::resubscribe(
                        frame,
                        lease,
                        task,
                        rx,
                        s.keep_alive,
                        s.metrics.stream_opened(),
                    ),
                    (task, None) => stream::snapshot(frame, task, s.keep_alive),
                },
                Err(e) => stream::error(frame, e),
            }
        }
        Request::Resubscribe(p) => match s.tasks.subscribe(&p.id, caller).await {
            Ok(Subscription::Here(lease, task, rx)) => stream::resubscribe(
                frame,
                lease,
                task,
                rx,
                s.keep_alive,
                s.metrics.stream_opened(),
            ),
            Ok(Subscription::Elsewhere(task, follow)) => stream::elsewhere(
                frame,
                task,
                follow,
                s.tasks.clone(),
                s.keep_alive,
                s.metrics.stream_opened(),
            ),
            Err(e) => stream::error(frame, e),
        },
        _ => stream::error(frame, RpcError::internal("unary method routed as a stream")),
    }
}

/// The answer of a method answered with one JSON body, before a codec writes it.
pub(super) enum Answer {
    Send(SendMessageResult),
    Task(Task),
    Tasks(ListTasksResult),
    PushConfig(TaskPushNotificationConfig),
    PushConfigs(Vec<TaskPushNotificationConfig>),
    Deleted,
}

/// An answer's result in one version's wire form, serialized straight into the response.
#[derive(Serialize)]
#[serde(untagged)]
pub(super) enum AnswerBody<'a> {
    /// v0.3: the model's own serde form.
    Send03(&'a SendMessageResult),
    Task03(&'a Task),
    Tasks03(&'a ListTasksResult),
    Config03(TaskPushNotificationConfig),
    Configs03(Vec<TaskPushNotificationConfig>),
    /// v0.3's `null` (a deleted config).
    Null(()),
    Send(crate::wire::v1::SendMessageResponse<'a>),
    Task(crate::wire::v1::Task<'a>),
    Tasks(crate::wire::v1::ListTasksResponse<'a>),
    Config(crate::wire::v1::PushConfig<'a>),
    Configs(crate::wire::v1::ListPushConfigsResponse<'a>),
    /// v1.0's `{}` (a deleted config).
    Empty {},
}

impl Answer {
    /// The result in `v`'s wire form, borrowing from the answer.
    pub(super) fn body(&self, v: ProtocolVersion) -> AnswerBody<'_> {
        match (v, self) {
            (ProtocolVersion::V0_3, Answer::Send(r)) => AnswerBody::Send03(r),
            (ProtocolVersion::V0_3, Answer::Task(t)) => AnswerBody::Task03(t),
            (ProtocolVersion::V0_3, Answer::Tasks(l)) => AnswerBody::Tasks03(l),
            (ProtocolVersion::V0_3, Answer::PushConfig(c)) => {
                AnswerBody::Config03(wire_config(c.clone()))
            }
            (ProtocolVersion::V0_3, Answer::PushConfigs(l)) => {
                AnswerBody::Configs03(l.iter().cloned().map(wire_config).collect())
            }
            (ProtocolVersion::V0_3, Answer::Deleted) => AnswerBody::Null(()),
            (ProtocolVersion::V1_0, Answer::Send(r)) => AnswerBody::Send(v1::send_result(r)),
            (ProtocolVersion::V1_0, Answer::Task(t)) => AnswerBody::Task(v1::task(t)),
            (ProtocolVersion::V1_0, Answer::Tasks(l)) => AnswerBody::Tasks(v1::list_tasks(l)),
            (ProtocolVersion::V1_0, Answer::PushConfig(c)) => {
                AnswerBody::Config(v1::push_config(c))
            }
            (ProtocolVersion::V1_0, Answer::PushConfigs(l)) => {
                AnswerBody::Configs(v1::push_config_list(l))
            }
            (ProtocolVersion::V1_0, Answer::Deleted) => AnswerBody::Empty {},
        }
    }
}

/// A config as it is answered: the credentials the server presents to the webhook are
/// write-only (the caller set them; nobody needs them back).
fn write_only(mut c: PushNotificationConfig) -> PushNotificationConfig {
    if let Some(a) = c.authentication.as_mut() {
        a.credentials = None;
    }
    c
}

/// A stored config as v0.3 sends it (without agentry's own bookkeeping).
fn wire_config(mut c: TaskPushNotificationConfig) -> TaskPushNotificationConfig {
    c.push_notification_config.body_version = None;
    c
}

/// Methods answered with one JSON body.
pub(super) async fn unary(
    s: &AgentEndpoint,
    req: Request,
    caller: Option<&str>,
    admitted: Admitted,
) -> Result<Answer, RpcError> {
    match req {
        Request::SendMessage(p) => {
            check_push(s, &p)?;
            let blocking = p
                .configuration
                .as_ref()
                .and_then(|c| c.blocking)
                .unwrap_or(true);
            let limit = history_limit(p.configuration.as_ref().and_then(|c| c.history_length));
            // The methods' futures are boxed where they are awaited: a future is as large as
            // the largest it awaits inline, and this one is moved whole into its box per
            // request (measured: ~50 KB of copying per message before, half the gap to a
            // bare echo).
            let result = match Box::pin(s.tasks.start(p, caller, admitted, Some(blocking))).await? {
                Started::Turn(turn) => stream::await_result(turn, blocking).await,
                // A repeat: the first request's task, once its running turn ends if blocking.
                Started::Again(lease) => match AgentTasks::follow(&lease).await {
                    (_, Some(events)) if blocking => {
                        stream::await_result(
                            Turn {
                                lease,
                                events: Events::Stream(events),
                                run: None,
                            },
                            true,
                        )
                        .await
                    }
                    (task, _) => SendMessageResult::Task(task),
                },
            };
            Ok(Answer::Send(match result {
                SendMessageResult::Task(mut t) => {
                    t.limit_history(limit);
                    SendMessageResult::Task(t)
                }
                m => m,
            }))
        }
        Request::GetTask(q) => {
            let task = Box::pin(s.tasks.snapshot(&q.id, caller)).await?;
            Ok(Answer::Task(
                task.with_history_limit(history_limit(q.history_length)),
            ))
        }
        Request::ListTasks(l) => Box::pin(list_tasks(s, l, caller)).await.map(Answer::Tasks),
        Request::CancelTask(p) => Ok(Answer::Task(Box::pin(s.tasks.cancel(&p.id, caller)).await?)),
        Request::SetPushConfig(p) => {
            if !s.push_supported {
                return Err(RpcError::push_not_supported());
            }
            s.push.check_url(&p.push_notification_config.url)?;
            let cfg = Box::pin(
                s.tasks
                    .set_push(&p.task_id, p.push_notification_config, caller),
            )
            .await?;
            Ok(Answer::PushConfig(TaskPushNotificationConfig {
                task_id: p.task_id,
                push_notification_config: write_only(cfg),
            }))
        }
        Request::GetPushConfig(p) => {
            let configs = Box::pin(push_configs(s, &p.id, caller)).await?;
            // A config set without an id is named after its task (as the Python SDK does),
            // and also answers to "default" (what TCK 0.3 asks for after such a set).
            let want = p.push_notification_config_id.as_deref().unwrap_or(&p.id);
            let alias = (want == "default").then_some(p.id.as_str());
            let cfg = configs
                .iter()
                .find(|c| c.id.as_deref() == Some(want))
                .or_else(|| {
                    configs
                        .iter()
                        .find(|c| alias.is_some() && c.id.as_deref() == alias)
                })
                .cloned()
                .ok_or_else(|| {
                    RpcError::invalid_params(format!(
                        "task {} has no push notification config {want:?}",
                        p.id
                    ))
                })?;
            Ok(Answer::PushConfig(TaskPushNotificationConfig {
                task_id: p.id,
                push_notification_config: write_only(cfg),
            }))
        }
        Request::ListPushConfigs(p) => {
            let configs = Box::pin(push_configs(s, &p.id, caller)).await?;
            Ok(Answer::PushConfigs(
                configs
                    .into_iter()
                    .map(|c| TaskPushNotificationConfig {
                        task_id: p.id.clone(),
                        push_notification_config: write_only(c),
                    })
                    .collect(),
            ))
        }
        Request::DeletePushConfig(p) => {
            if !s.push_supported {
                return Err(RpcError::push_not_supported());
            }
            Box::pin(
                s.tasks
                    .delete_push(&p.id, &p.push_notification_config_id, caller),
            )
            .await?;
            Ok(Answer::Deleted)
        }
        Request::StreamMessage(_) | Request::Resubscribe(_) | Request::GetExtendedCard => {
            Err(RpcError::internal("streaming method routed as unary"))
        }
    }
}

/// One page of tasks; the page token is the offset of the page's first task.
async fn list_tasks(
    s: &AgentEndpoint,
    l: ListTasksParams,
    caller: Option<&str>,
) -> Result<ListTasksResult, RpcError> {
    let offset = match l.page_token.as_deref().filter(|t| !t.is_empty()) {
        None => 0,
        // An offset a store can take (SQLite's is an i64): a larger one is no token of ours.
        Some(t) => t
            .parse::<usize>()
            .ok()
            .filter(|&o| i64::try_from(o).is_ok())
            .ok_or_else(|| {
                RpcError::invalid_params(format!(
                    "params.pageToken {t:?} is not a token this server issued"
                ))
            })?,
    };
    let limit = match l.page_size {
        Some(n) if n > 0 => n as usize,
        _ => ListTasksParams::DEFAULT_PAGE_SIZE,
    }
    .min(ListTasksParams::MAX_PAGE_SIZE);
    let page = s
        .tasks
        .store
        .list(&TaskQuery {
            context_id: l.context_id.filter(|c| !c.is_empty()),
            state: l.status.filter(|st| *st != TaskState::Unknown),
            status_after: l.status_timestamp_after,
            owner: caller.map(str::to_owned),
            offset,
            limit,
        })
        .await
        .map_err(|e| RpcError::internal(e.to_string()))?;
    let next = offset.saturating_add(page.tasks.len());
    let keep_artifacts = l.include_artifacts == Some(true);
    let tasks = s
        .tasks
        .recovered(page.tasks, caller)
        .await?
        .into_iter()
        .map(|mut t| {
            t.limit_history(history_limit(l.history_length));
            if !keep_artifacts {
                t.artifacts.clear();
            }
            t
        })
        .collect();
    Ok(ListTasksResult {
        tasks,
        next_page_token: if next < page.total {
            next.to_string()
        } else {
            String::new()
        },
        page_size: limit as i64,
        total_size: page.total as i64,
    })
}

async fn push_configs(
    s: &AgentEndpoint,
    task_id: &str,
    caller: Option<&str>,
) -> Result<Vec<PushNotificationConfig>, RpcError> {
    if !s.push_supported {
        return Err(RpcError::push_not_supported());
    }
    s.tasks.snapshot(task_id, caller).await?;
    s.tasks
        .store
        .list_push(task_id)
        .await
        .map_err(|e| RpcError::internal(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_content_types() {
        for (ct, json) in [
            ("application/json", true),
            ("Application/JSON; charset=utf-8", true),
            (" application/json ;q=1", true),
            ("application/a2a+json", true),
            ("APPLICATION/VND.A2A+JSON", true),
            ("application/+json", false),
            ("application/jsonx", false),
            ("text/json", false),
            ("text/plain", false),
            ("application/x-www-form-urlencoded", false),
            ("", false),
        ] {
            assert_eq!(is_json(&HeaderValue::from_static(ct)), json, "{ct:?}");
        }
        assert!(!is_json(
            &HeaderValue::from_bytes(b"application/json\xff").unwrap()
        ));
    }

    /// The names looked up are the public header names, lowercased once.
    #[test]
    fn header_names_match_their_strings() {
        for (name, s) in [
            (&version::HEADER_NAME, version::HEADER),
            (&version::EXTENSIONS_HEADER_NAME, version::EXTENSIONS_HEADER),
            (&version::LEGACY_EXTENSIONS_HEADER_NAME, "X-A2A-Extensions"),
            (
                &envelope::IDEMPOTENCY_HEADER_NAME,
                envelope::IDEMPOTENCY_HEADER,
            ),
            (
                &envelope::TRACEPARENT_HEADER_NAME,
                envelope::TRACEPARENT_HEADER,
            ),
        ] {
            assert_eq!(name, &http::HeaderName::from_bytes(s.as_bytes()).unwrap());
        }
    }

    /// Each optional header is seen under the name clients send, in any case, and only it.
    #[test]
    fn present_sees_each_optional_header_by_its_name() {
        let seen = |name: &str| {
            let mut h = HeaderMap::new();
            h.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            h.insert(version::HEADER, HeaderValue::from_static("1.0"));
            h.insert(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_static("x"),
            );
            let p = Present::of(&h);
            [
                p.extensions(),
                p.traceparent(),
                p.baggage(),
                p.idempotency_key(),
            ]
        };
        assert_eq!(
            seen(version::EXTENSIONS_HEADER),
            [true, false, false, false]
        );
        assert_eq!(seen("X-A2A-Extensions"), [true, false, false, false]);
        assert_eq!(seen("TraceParent"), [false, true, false, false]);
        assert_eq!(
            seen(crate::trace::BAGGAGE_HEADER),
            [false, false, true, false]
        );
        assert_eq!(
            seen(envelope::IDEMPOTENCY_HEADER),
            [false, false, false, true]
        );
        assert_eq!(seen("x-other"), [false; 4]);
    }
}
