//! The gRPC binding of A2A 1.0 (`lf.a2a.v1.A2AService`), served by the same router and on
//! the same port as JSON-RPC and HTTP+JSON (the listener speaks HTTP/2 beside HTTP/1.1).
//!
//! Each call's message is transcoded to the v1.0 params the JSON bindings carry
//! ([`crate::grpc`]) and goes through the same checks (version, credentials, extensions,
//! admission, authorization, audit) and the same dispatcher; service parameters and
//! credentials are gRPC metadata, which are HTTP/2 headers, so they are read as the other
//! bindings read them. Errors are statuses: trailers-only answers with `grpc-status`,
//! `grpc-message` and a `google.rpc.Status` carrying the A2A `ErrorInfo` in
//! `grpc-status-details-bin`.
//!
//! gRPC paths name no agent, so the binding serves the agent at the server's root.

use std::convert::Infallible;
use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::post;
use base64::Engine as _;
use futures_util::stream::{self, Stream, StreamExt};
use http::{HeaderMap, HeaderValue, StatusCode, header};
use hyper::body::Frame;
use tracing::Instrument;

use super::handlers::{self, AgentEndpoint};
use super::span::RequestSpan;
use crate::error::RpcError;
use crate::grpc::{self, status};
use crate::jsonrpc::Request;
use crate::v1::{self, method};
use crate::version::ProtocolVersion;

/// The service's routes: `POST /lf.a2a.v1.A2AService/{Method}`.
pub(super) fn routes() -> Router<Arc<AgentEndpoint>> {
    Router::new().route(&format!("/{}/{{method}}", grpc::SERVICE), post(call))
}

/// The v1.0 method a gRPC method name stands for (they are the same names).
fn operation(name: &str) -> Option<&'static str> {
    method::ALL.into_iter().find(|m| *m == name)
}

fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct == grpc::CONTENT_TYPE || ct.starts_with("application/grpc+proto"))
}

/// The headers every gRPC answer starts with.
fn grpc_head(status: StatusCode) -> http::response::Builder {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, grpc::CONTENT_TYPE)
}

/// A trailers-only answer: the status in the headers, no message.
fn status_only(code: i32, message: &str, details: Vec<u8>) -> Response {
    let mut r = grpc_head(StatusCode::OK)
        .body(Body::empty())
        .unwrap_or_default();
    let h = r.headers_mut();
    h.insert("grpc-status", HeaderValue::from(code));
    if let Ok(v) = HeaderValue::from_str(&grpc::encode_message(message)) {
        h.insert("grpc-message", v);
    }
    let b64 = base64::engine::general_purpose::STANDARD_NO_PAD.encode(details);
    if let Ok(v) = HeaderValue::from_str(&b64) {
        h.insert("grpc-status-details-bin", v);
    }
    r
}

/// An A2A error as its gRPC status, with the `ErrorInfo` the binding asks for.
pub(super) fn error(e: &RpcError) -> Response {
    status_only(grpc::status_of(e.code), &e.message, grpc::status_details(e))
}

fn refused(why: &handlers::Refusal) -> Response {
    let code = if why.forbidden {
        status::PERMISSION_DENIED
    } else {
        status::UNAUTHENTICATED
    };
    let mut r = status_only(
        code,
        &why.message,
        grpc::refusal_details(code, &why.message),
    );
    r.headers_mut()
        .insert(header::WWW_AUTHENTICATE, why.challenge.clone());
    r
}

fn ok_trailers() -> HeaderMap {
    let mut t = HeaderMap::new();
    t.insert("grpc-status", HeaderValue::from(status::OK));
    t
}

/// A unary answer: its message, then the OK status in the trailers.
fn unary_body(frame: Bytes) -> Response {
    let frames = [
        Ok::<_, Infallible>(Frame::data(frame)),
        Ok(Frame::trailers(ok_trailers())),
    ];
    grpc_head(StatusCode::OK)
        .body(Body::new(http_body_util::StreamBody::new(stream::iter(
            frames,
        ))))
        .unwrap_or_default()
}

/// A server stream: each item's message as it comes, then the OK status in the trailers.
pub(super) fn stream_body<S>(items: S) -> Response
where
    S: Stream<Item = Bytes> + Send + 'static,
{
    let frames = items
        .map(|b| Ok::<_, Infallible>(Frame::data(b)))
        .chain(stream::once(async { Ok(Frame::trailers(ok_trailers())) }));
    grpc_head(StatusCode::OK)
        .body(Body::new(http_body_util::StreamBody::new(frames)))
        .unwrap_or_default()
}

/// A stream item (a v1.0 `StreamResponse`) as its gRPC message.
pub(super) fn stream_item(ev: &crate::model::StreamEvent) -> Option<Bytes> {
    let json = serde_json::to_value(v1::stream_event(ev)).ok()?;
    match grpc::stream_frame(json) {
        Ok(b) => Some(b),
        Err(e) => {
            // The server's own event that the proto cannot hold: a bug here, not the
            // caller's; the client still gets the events around it and the final one.
            tracing::error!("a stream event was not sent over gRPC: {}", e.message);
            None
        }
    }
}

/// What the metrics and the span record for a gRPC answer: the HTTP status the same error
/// gets on the other bindings (gRPC answers are all HTTP 200).
fn outcome(r: &Response) -> StatusCode {
    let code = r
        .headers()
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i32>().ok());
    match code {
        None | Some(status::OK) => StatusCode::OK,
        Some(status::UNAUTHENTICATED) => StatusCode::UNAUTHORIZED,
        Some(status::PERMISSION_DENIED) => StatusCode::FORBIDDEN,
        Some(status::NOT_FOUND) => StatusCode::NOT_FOUND,
        Some(status::INTERNAL) => StatusCode::INTERNAL_SERVER_ERROR,
        Some(status::UNIMPLEMENTED) => StatusCode::NOT_IMPLEMENTED,
        Some(status::RESOURCE_EXHAUSTED) => StatusCode::PAYLOAD_TOO_LARGE,
        Some(_) => StatusCode::BAD_REQUEST,
    }
}

async fn call(
    State(s): State<Arc<AgentEndpoint>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let mut span = RequestSpan::new(&s.name, "grpc", handlers::Present::of(&headers));
    let r = match operation(&name) {
        None => error(&RpcError::method_not_found(&name)),
        Some(op) => {
            span.method(op, "1.0");
            call_in(&s, &headers, op, body, &mut span).await
        }
    };
    span.finish(&headers, outcome(&r), &s.metrics);
    r
}

async fn call_in(
    s: &AgentEndpoint,
    headers: &HeaderMap,
    op: &'static str,
    body: Result<Bytes, BytesRejection>,
    span: &mut RequestSpan,
) -> Response {
    if !is_grpc(headers) {
        let given = headers
            .get(header::CONTENT_TYPE)
            .map_or("none", |c| c.to_str().unwrap_or("?"));
        return error(&RpcError::content_type(given));
    }
    let body = match body {
        Ok(b) => b,
        Err(e) => {
            let code = if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                status::RESOURCE_EXHAUSTED
            } else {
                status::INVALID_ARGUMENT
            };
            let msg = e.body_text();
            return status_only(code, &msg, grpc::refusal_details(code, &msg));
        }
    };
    let present = span.present();
    // The service is A2A 1.0's: a client asking for another version over it is refused.
    match handlers::requested_version(headers, None) {
        Ok(None | Some(ProtocolVersion::V1_0)) => {}
        Ok(Some(v)) => {
            return error(&RpcError::version_not_supported(&format!(
                "{} (the gRPC binding serves lf.a2a.v1, A2A 1.0)",
                v.as_str()
            )));
        }
        Err(e) => return error(&e),
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
    let decoded = grpc::unframe(&body)
        .and_then(|msg| grpc::request_json(op, msg))
        .and_then(|params| v1::decode_value(op, params));
    let mut req = match decoded {
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
                handlers::streaming(s, super::stream::Frame::Grpc, req, caller, admitted).await
            }
            Request::GetExtendedCard => match &s.extended_card {
                None => error(&RpcError::extended_card_not_configured()),
                Some(card) if s.credentials.as_ref().is_some_and(|c| c.accepts(headers)) => {
                    answer(op, serde_json::to_value(v1::card(card)))
                }
                Some(_) => status_only(
                    status::UNAUTHENTICATED,
                    "the extended card needs credentials",
                    grpc::refusal_details(
                        status::UNAUTHENTICATED,
                        "the extended card needs credentials",
                    ),
                ),
            },
            other => match handlers::unary(s, other, caller, admitted).await {
                Ok(a) => answer(op, serde_json::to_value(a.body(ProtocolVersion::V1_0))),
                Err(e) => error(&e),
            },
        }
    };
    let mut r = dispatched.instrument(span.span.clone()).await;
    if let Some(a) = active {
        r.headers_mut().insert(crate::version::EXTENSIONS_HEADER, a);
    }
    r
}

/// A unary answer's v1.0 JSON as the method's message.
fn answer(op: &str, json: serde_json::Result<serde_json::Value>) -> Response {
    let framed = json
        .map_err(|e| RpcError::internal(e.to_string()))
        .and_then(|v| grpc::response_frame(op, v));
    match framed {
        Ok(f) => unary_body(f),
        Err(e) => error(&e),
    }
}
