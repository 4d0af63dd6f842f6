//! The span of one request: named after its A2A method, a child of the caller's span (the
//! `traceparent` header, else the task envelope's), carrying the request's correlation id to
//! every span below it. See [`crate::trace`].

use http::{HeaderMap, StatusCode};
use tracing::Span;
use tracing::field::Empty;

use super::handlers::Present;
use crate::envelope::{Envelope, TRACEPARENT_HEADER_NAME};
use crate::trace;

/// A request's span, not entered until the request is admitted: its parent can be set until
/// then (the envelope that may name it is read first).
pub(super) struct RequestSpan {
    pub(super) span: Span,
    linked: bool,
    /// For the metrics: the method once decoded, the binding, when the request came.
    method: &'static str,
    binding: &'static str,
    started: std::time::Instant,
    /// Which trace headers the request carries.
    present: Present,
}

impl RequestSpan {
    /// `binding`: `jsonrpc` or `http+json`.
    pub(super) fn new(agent: &str, binding: &'static str, present: Present) -> RequestSpan {
        let span = tracing::info_span!(
            "a2a.request",
            otel.name = Empty,
            otel.kind = "server",
            otel.status_code = Empty,
            rpc.system = "a2a",
            rpc.method = Empty,
            a2a.binding = binding,
            a2a.agent = agent,
            a2a.protocol.version = Empty,
            agentry.correlation_id = Empty,
            http.response.status_code = Empty,
        );
        RequestSpan {
            span,
            linked: false,
            method: "unknown",
            binding,
            started: std::time::Instant::now(),
            present,
        }
    }

    /// Which optional headers the request carries (found once, when the span was made).
    pub(super) fn present(&self) -> Present {
        self.present
    }

    /// The method, once decoded.
    pub(super) fn method(&mut self, method: &'static str, version: &str) {
        self.method = method;
        self.span.record("otel.name", method);
        self.span.record("rpc.method", method);
        self.span.record("a2a.protocol.version", version);
    }

    /// Continues the caller's trace, with the envelope's correlation id for the spans below.
    pub(super) fn link(&mut self, headers: &HeaderMap, env: Option<&Envelope>) {
        if self.linked {
            return;
        }
        self.linked = true;
        let header = self
            .present
            .traceparent()
            .then(|| headers.get(&TRACEPARENT_HEADER_NAME))
            .flatten()
            .and_then(|v| v.to_str().ok())
            .filter(|t| trace::parse(t).is_some());
        let parent = header.or_else(|| env.and_then(|e| e.traceparent.as_deref()));
        // The envelope's, else the one the caller's trace carries (requests without one).
        let baggage = self
            .present
            .baggage()
            .then(|| trace::correlation_of(headers))
            .flatten();
        let correlation = env
            .and_then(|e| e.correlation_id.as_deref())
            .or(baggage.as_deref());
        trace::continue_trace(&self.span, parent, correlation);
    }

    /// The answer's status (signed: the OpenTelemetry bridge records unsigned integers as
    /// text); a server error marks the span failed. The request is counted in `metrics`
    /// (a stream when its response starts).
    pub(super) fn finish(
        mut self,
        headers: &HeaderMap,
        status: StatusCode,
        metrics: &super::ops::AgentMetrics,
    ) {
        metrics.observe(
            self.method,
            self.binding,
            status.as_u16(),
            self.started.elapsed(),
        );
        // A request refused before admission still joins its caller's trace.
        self.link(headers, None);
        self.span
            .record("http.response.status_code", i64::from(status.as_u16()));
        if status.is_server_error() {
            self.span.record("otel.status_code", "error");
        }
    }
}
