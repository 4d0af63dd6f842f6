//! The HTTP+JSON (REST) binding of A2A 1.0: resources instead of JSON-RPC methods, the same
//! v1.0 JSON bodies, `google.rpc.Status` error bodies with the HTTP status the specification
//! maps each error to, and SSE streams of bare `StreamResponse` objects.
//!
//! | method and path                                   | operation                   |
//! |---------------------------------------------------|-----------------------------|
//! | `POST /message:send`, `POST /message:stream`      | send, send streaming        |
//! | `GET /tasks`, `GET /tasks/{id}`                   | list, get (`?historyLength`)|
//! | `POST /tasks/{id}:cancel`, `GET /tasks/{id}:subscribe` | cancel, subscribe      |
//! | `POST`/`GET /tasks/{id}/pushNotificationConfigs[/{configId}]`, `DELETE …/{configId}` | push configs |
//! | `GET /extendedAgentCard`                          | authenticated extended card |
//!
//! The v0.3 form of the binding is served too, under `/v1/…` (and `GET /v1/card`), its bodies
//! rewritten by [`crate::rest::v03`].
//!
//! Each route builds the operation's v1.0 params from the path, the query and the body and
//! hands them to the same decoder and dispatcher as JSON-RPC, so both bindings answer alike.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, RawQuery, State};
use axum::response::Response;
use axum::routing::{get, post};
use http::{HeaderMap, HeaderValue, StatusCode, header};
use serde_json::{Map, Value, json};
use tracing::Instrument;

use super::handlers::{self, AgentEndpoint};
use super::span::RequestSpan;
use super::stream::Frame;
use crate::error::RpcError;
use crate::jsonrpc::Request;
use crate::rest::v03;
use crate::v1::{self, method};
use crate::version::{self, ProtocolVersion};

/// The binding's routes under an agent's path (`""` for the root), v1.0 and v0.3 (`/v1/…`).
pub(super) fn routes(path: &str) -> Router<Arc<AgentEndpoint>> {
    fn add<const V03: bool>(
        r: Router<Arc<AgentEndpoint>>,
        base: &str,
    ) -> Router<Arc<AgentEndpoint>> {
        r.route(&format!("{base}/message:send"), post(send::<V03>))
            .route(
                &format!("{base}/message:stream"),
                post(send_streaming::<V03>),
            )
            .route(
                &format!("{base}/tasks/{{id}}"),
                get(task_get::<V03>).post(task_post::<V03>),
            )
            .route(
                &format!("{base}/tasks/{{id}}/pushNotificationConfigs"),
                get(push_list::<V03>).post(push_create::<V03>),
            )
            .route(
                &format!("{base}/tasks/{{id}}/pushNotificationConfigs/{{config}}"),
                get(push_one::<V03, false>).delete(push_one::<V03, true>),
            )
    }
    let r = add::<false>(Router::new(), path)
        .route(&format!("{path}/tasks"), get(list))
        .route(&format!("{path}/extendedAgentCard"), get(extended_card));
    add::<true>(r, &format!("{path}/v1")).route(&format!("{path}/v1/card"), get(legacy_card))
}

/// An error as a `google.rpc.Status` body with its HTTP status.
pub(super) fn error(e: &RpcError) -> Response {
    let (status, body) = crate::rest::error_body(e);
    let mut r = handlers::json_body(serde_json::to_vec(&body).unwrap_or_default());
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
    r
}

/// A body that could not be read (larger than the server's body limit: HTTP 413) as a
/// `google.rpc.Status`, not axum's plain-text answer.
fn rejected(e: BytesRejection) -> Response {
    let status = e.status();
    let body = json!({"error": {
        "code": status.as_u16(),
        "status": if status == StatusCode::PAYLOAD_TOO_LARGE { "RESOURCE_EXHAUSTED" } else { "INVALID_ARGUMENT" },
        "message": e.body_text(),
        "details": [],
    }});
    let mut r = handlers::json_body(serde_json::to_vec(&body).unwrap_or_default());
    *r.status_mut() = status;
    r
}

fn unauthorized() -> Response {
    let body = json!({"error": {
        "code": 401,
        "status": "UNAUTHENTICATED",
        "message": "authentication required: send `Authorization: Bearer <token>` or the API key header",
        "details": [],
    }});
    let mut r = handlers::json_body(serde_json::to_vec(&body).unwrap_or_default());
    *r.status_mut() = StatusCode::UNAUTHORIZED;
    r.headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    r
}

/// A refusal as a `google.rpc.Status` (UNAUTHENTICATED or PERMISSION_DENIED).
pub(super) fn refused(why: &handlers::Refusal) -> Response {
    let status = why.status();
    let body = json!({"error": {
        "code": status.as_u16(),
        "status": if why.forbidden { "PERMISSION_DENIED" } else { "UNAUTHENTICATED" },
        "message": why.message,
        "details": [],
    }});
    let mut r = handlers::json_body(serde_json::to_vec(&body).unwrap_or_default());
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::WWW_AUTHENTICATE, why.challenge.clone());
    r
}

/// Query parameters as v1.0 params: numbers and booleans where the operation has them.
fn query_params(query: Option<&str>) -> Map<String, Value> {
    let mut out = Map::new();
    for (k, v) in url_pairs(query.unwrap_or("")) {
        let value = match k.as_str() {
            "historyLength" | "pageSize" => v
                .parse::<i64>()
                .map(Value::from)
                .unwrap_or(Value::String(v)),
            "includeArtifacts" => match v.as_str() {
                "true" | "1" => Value::Bool(true),
                "false" | "0" => Value::Bool(false),
                _ => Value::String(v),
            },
            _ => Value::String(v),
        };
        if !k.eq_ignore_ascii_case(version::HEADER) {
            out.insert(k, value);
        }
    }
    out
}

/// `application/x-www-form-urlencoded` pairs, percent-decoded.
fn url_pairs(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(x) => {
                        out.push(x);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A body must say it is JSON.
fn check_json(headers: &HeaderMap) -> Result<(), RpcError> {
    match headers.get(header::CONTENT_TYPE) {
        Some(ct) if handlers::is_json(ct) => Ok(()),
        ct => {
            let given = ct.map_or("none", |c| c.to_str().unwrap_or("?"));
            Err(RpcError::content_type(given))
        }
    }
}

/// A JSON body as params; an empty body is `{}`.
fn body_params(headers: &HeaderMap, body: &Bytes) -> Result<Map<String, Value>, RpcError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    check_json(headers)?;
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(o)) => Ok(o),
        Ok(_) => Err(RpcError::invalid_request("the body must be a JSON object")),
        Err(e) => Err(RpcError::parse(e)),
    }
}

/// An operation's params before decoding: a body decoded straight into its version's wire
/// types, or JSON the route assembled from the path, the query and the body. Push configs
/// made over v0.3 keep no `body_version` (their webhooks get v0.3 bodies), those made over
/// v1.0 are marked by the v1.0 codec.
enum Params {
    /// A v1.0 body (a send).
    Body(Bytes),
    /// A v0.3 send body.
    Send03(Bytes),
    /// A v0.3 push config body, for the task the path names.
    CreatePush03(Bytes, String),
    Json(Result<Map<String, Value>, RpcError>),
}

impl Params {
    fn decode(self, headers: &HeaderMap, op: &str) -> Result<Request, RpcError> {
        match self {
            Params::Json(p) => p.and_then(|p| v1::decode_value(op, Value::Object(p))),
            Params::Body(body) => v1::decode_params(op, json_object(headers, &body)?),
            Params::Send03(body) => {
                let p = v03::decode_send(json_object(headers, &body)?.unwrap_or("{}"))?;
                Ok(if op == method::STREAM {
                    Request::StreamMessage(p)
                } else {
                    Request::SendMessage(p)
                })
            }
            Params::CreatePush03(body, task) => {
                let raw = json_object(headers, &body)?.unwrap_or("{}");
                v03::decode_create_push(raw, &task).map(Request::SetPushConfig)
            }
        }
    }
}

/// A body's JSON object, unparsed (`None` for an empty body). Checked as JSON first, so a
/// syntax error is a parse error (-32700), not a field's: the body is then decoded once,
/// into the wire types.
fn json_object<'b>(headers: &HeaderMap, body: &'b Bytes) -> Result<Option<&'b str>, RpcError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    check_json(headers)?;
    let raw: &serde_json::value::RawValue =
        serde_json::from_slice(body).map_err(RpcError::parse)?;
    if !raw.get().starts_with('{') {
        return Err(RpcError::invalid_request("the body must be a JSON object"));
    }
    Ok(Some(raw.get()))
}

/// Checks version, credentials and extensions, decodes `params` as the v1.0 operation
/// `op`, and answers.
async fn call(
    s: &AgentEndpoint,
    headers: &HeaderMap,
    query: Option<&str>,
    op: &'static str,
    params: Params,
    legacy: bool,
) -> Response {
    let mut span = RequestSpan::new(&s.name, "http+json", handlers::Present::of(headers));
    let version = if legacy { "0.3" } else { "1.0" };
    span.method(op, version);
    let r = call_in(s, headers, query, op, params, legacy, &mut span).await;
    span.finish(headers, r.status(), &s.metrics);
    r
}

async fn call_in(
    s: &AgentEndpoint,
    headers: &HeaderMap,
    query: Option<&str>,
    op: &str,
    params: Params,
    legacy: bool,
    span: &mut RequestSpan,
) -> Response {
    let present = span.present();
    if let Err(e) = handlers::requested_version(headers, query) {
        return error(&e);
    }
    let who = match handlers::authenticate_audited(s, headers).await {
        Ok(who) => who,
        Err(handlers::NotAdmitted::Invalid(e)) => return error(&e),
        Err(handlers::NotAdmitted::Refused(why)) => return refused(&why),
    };
    let caller = who.principal.as_deref();
    let active = match handlers::negotiate_extensions(s, headers, present) {
        Ok(a) => a,
        Err(e) => return error(&e),
    };
    let mut req = match params.decode(headers, op) {
        Ok(r) => r,
        Err(e) => return error(&e),
    };
    let admitted = match handlers::gate(s, &mut req, headers, present, &who).await {
        Ok(a) => a,
        Err(handlers::NotAdmitted::Invalid(e)) => return error(&e),
        Err(handlers::NotAdmitted::Refused(why)) => return refused(&why),
    };
    let env = admitted.envelope.as_deref();
    span.link(headers, env);
    let dispatched = async move {
        match req {
            Request::StreamMessage(_) | Request::Resubscribe(_) => {
                let version = if legacy {
                    ProtocolVersion::V0_3
                } else {
                    ProtocolVersion::V1_0
                };
                handlers::streaming(s, Frame::Rest(version), req, caller, admitted).await
            }
            Request::GetExtendedCard => match &s.extended_card {
                None => error(&RpcError::extended_card_not_configured()),
                Some(card) if s.credentials.as_ref().is_some_and(|c| c.accepts(headers)) => {
                    handlers::json_body(serde_json::to_vec(&v1::card(card)).unwrap_or_default())
                }
                Some(_) => unauthorized(),
            },
            other => match handlers::unary(s, other, caller, admitted).await {
                Ok(answer) => {
                    let mut r = handlers::json_body(if legacy {
                        legacy_body(&answer)
                    } else {
                        serde_json::to_vec(&answer.body(ProtocolVersion::V1_0)).unwrap_or_default()
                    });
                    if op == method::PUSH_CREATE && !legacy {
                        *r.status_mut() = StatusCode::CREATED;
                    }
                    r
                }
                Err(e) => error(&e),
            },
        }
    };
    let mut r = dispatched.instrument(span.span.clone()).await;
    if let Some(a) = active {
        r.headers_mut().insert(version::EXTENSIONS_HEADER, a);
    }
    r
}

/// An answer in v0.3's HTTP+JSON form (v0.3 has no task listing: that stays v1.0's).
fn legacy_body(answer: &handlers::Answer) -> Vec<u8> {
    use crate::wire::v03;
    use handlers::Answer;
    let json = match answer {
        Answer::Send(r) => serde_json::to_vec(&v03::StreamResponse::from(r)),
        Answer::Task(t) => serde_json::to_vec(&v03::Task::from(t)),
        Answer::PushConfig(c) => serde_json::to_vec(&v03::TaskPushNotificationConfig::from(c)),
        Answer::PushConfigs(l) => {
            serde_json::to_vec(&v03::ListPushConfigsResponse::from(l.as_slice()))
        }
        Answer::Tasks(_) | Answer::Deleted => {
            serde_json::to_vec(&answer.body(ProtocolVersion::V1_0))
        }
    };
    json.unwrap_or_default()
}

/// A send body's params, in its version's form.
fn send_params(body: Bytes, legacy: bool) -> Params {
    if legacy {
        Params::Send03(body)
    } else {
        Params::Body(body)
    }
}

async fn send<const V03: bool>(
    State(s): State<Arc<AgentEndpoint>>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(b) => b,
        Err(e) => return rejected(e),
    };
    let p = send_params(body, V03);
    call(&s, &headers, q.as_deref(), method::SEND, p, V03).await
}

async fn send_streaming<const V03: bool>(
    State(s): State<Arc<AgentEndpoint>>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(b) => b,
        Err(e) => return rejected(e),
    };
    let p = send_params(body, V03);
    call(&s, &headers, q.as_deref(), method::STREAM, p, V03).await
}

async fn list(
    State(s): State<Arc<AgentEndpoint>>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
) -> Response {
    let p = Params::Json(Ok(query_params(q.as_deref())));
    call(&s, &headers, q.as_deref(), method::LIST, p, false).await
}

fn with_id(mut p: Map<String, Value>, key: &str, id: &str) -> Map<String, Value> {
    p.insert(key.into(), Value::String(id.to_owned()));
    p
}

/// `GET /tasks/{id}` and `GET /tasks/{id}:subscribe`.
async fn task_get<const V03: bool>(
    State(s): State<Arc<AgentEndpoint>>,
    Path(id): Path<String>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
) -> Response {
    let (id, op) = match id.strip_suffix(":subscribe") {
        Some(id) => (id, method::SUBSCRIBE),
        None => (id.as_str(), method::GET),
    };
    let p = Params::Json(Ok(with_id(query_params(q.as_deref()), "id", id)));
    call(&s, &headers, q.as_deref(), op, p, V03).await
}

/// `POST /tasks/{id}:cancel` and `POST /tasks/{id}:subscribe`.
async fn task_post<const V03: bool>(
    State(s): State<Arc<AgentEndpoint>>,
    Path(id): Path<String>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(b) => b,
        Err(e) => return rejected(e),
    };
    let (id, op) = if let Some(id) = id.strip_suffix(":cancel") {
        (id, method::CANCEL)
    } else if let Some(id) = id.strip_suffix(":subscribe") {
        (id, method::SUBSCRIBE)
    } else {
        return error(&RpcError::method_not_found(&format!(
            "POST /tasks/{id} (use /tasks/{{id}}:cancel or :subscribe)"
        )));
    };
    // v0.3 sends `{"name": "tasks/{id}"}`: the path says it already.
    let p = Params::Json(body_params(&headers, &body).map(|mut b| {
        b.remove("name");
        with_id(b, "id", id)
    }));
    call(&s, &headers, q.as_deref(), op, p, V03).await
}

async fn push_list<const V03: bool>(
    State(s): State<Arc<AgentEndpoint>>,
    Path(id): Path<String>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
) -> Response {
    let p = Params::Json(Ok(with_id(query_params(q.as_deref()), "taskId", &id)));
    call(&s, &headers, q.as_deref(), method::PUSH_LIST, p, V03).await
}

async fn push_create<const V03: bool>(
    State(s): State<Arc<AgentEndpoint>>,
    Path(id): Path<String>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(b) => b,
        Err(e) => return rejected(e),
    };
    let p = if V03 {
        Params::CreatePush03(body, id)
    } else {
        Params::Json(body_params(&headers, &body).map(|b| with_id(b, "taskId", &id)))
    };
    call(&s, &headers, q.as_deref(), method::PUSH_CREATE, p, V03).await
}

/// `GET` (`DELETE = false`) or `DELETE` of `/tasks/{id}/pushNotificationConfigs/{config}`.
async fn push_one<const V03: bool, const DELETE: bool>(
    State(s): State<Arc<AgentEndpoint>>,
    Path((id, config)): Path<(String, String)>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
) -> Response {
    let op = if DELETE {
        method::PUSH_DELETE
    } else {
        method::PUSH_GET
    };
    let p = Params::Json(Ok(with_id(
        with_id(Map::new(), "taskId", &id),
        "id",
        &config,
    )));
    call(&s, &headers, q.as_deref(), op, p, V03).await
}

async fn extended_card(
    State(s): State<Arc<AgentEndpoint>>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
) -> Response {
    call(
        &s,
        &headers,
        q.as_deref(),
        method::EXTENDED_CARD,
        Params::Json(Ok(Map::new())),
        false,
    )
    .await
}

/// `GET /v1/card` (v0.3): the authenticated extended card, or the public one when the agent
/// has none; both in the v0.3 card form.
async fn legacy_card(State(s): State<Arc<AgentEndpoint>>, headers: HeaderMap) -> Response {
    if let Some(c) = &s.credentials {
        c.prepare(&headers).await;
    }
    let req = Request::GetExtendedCard;
    let (allowed, reason) = handlers::decide(&s, &req, &headers);
    let caller = s.credentials.as_ref().and_then(|c| c.principal(&headers));
    if s.extended_card.is_some()
        && let Err(e) = handlers::audit(
            &s,
            &headers,
            Some(&req),
            None,
            caller.as_deref(),
            allowed,
            reason,
        )
        .await
    {
        return error(&e);
    }
    match &s.extended_card {
        Some(card) if s.credentials.as_ref().is_some_and(|c| c.accepts(&headers)) => {
            handlers::json_body(serde_json::to_vec(&v1::merged_card(card)).unwrap_or_default())
        }
        Some(_) => unauthorized(),
        None => handlers::json_body(s.cards.both_json().to_vec()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_strings_decode_and_type() {
        let p = query_params(Some(
            "contextId=a%20b+c&pageSize=2&includeArtifacts=true&historyLength=x&A2A-Version=1.0&bad=%zz%4",
        ));
        assert_eq!(p["contextId"], "a b c");
        assert_eq!(p["pageSize"], 2);
        assert_eq!(p["includeArtifacts"], true);
        // Left as a string, so the decoder names the field in its -32602.
        assert_eq!(p["historyLength"], "x");
        assert!(!p.contains_key("A2A-Version"));
        assert_eq!(p["bad"], "%zz%4");
    }

    #[test]
    fn errors_map_to_http_and_grpc_status() {
        use crate::rest::status_name;
        for (e, http, status) in [
            (RpcError::task_not_found(), 404, "NOT_FOUND"),
            (
                RpcError::task_not_cancelable("t", crate::model::TaskState::Completed),
                409,
                "FAILED_PRECONDITION",
            ),
            (
                RpcError::content_type("text/plain"),
                415,
                "INVALID_ARGUMENT",
            ),
            (RpcError::invalid_params("x"), 400, "INVALID_ARGUMENT"),
        ] {
            let r = error(&e);
            assert_eq!(r.status().as_u16(), http);
            assert_eq!(status_name(e.code), status);
        }
    }
}
