//! Trace context across agents: the W3C `traceparent` a request arrives with and the one each
//! call out carries, and the attribute every agentry span shares.
//!
//! Agentry's spans are plain `tracing` spans whose fields follow OpenTelemetry's semantic
//! conventions (`otel.name`, `otel.kind`, `rpc.*`, `gen_ai.*`, `mcp.*`): the application picks
//! what consumes them. With an OpenTelemetry layer in its subscriber (`agentry::telemetry`,
//! feature `otel`, does it from the standard `OTEL_*` variables) they are exported and linked
//! across processes: a request continues its caller's trace ([`continue_trace`]), and every
//! call to another agent or an MCP server carries the current span's `traceparent`
//! ([`current_traceparent`]), so one trace covers a multi-agent request. Without such a layer
//! this module does nothing but hand out empty answers, and a request's own `traceparent`
//! still travels on in its task envelope.
//!
//! The request's correlation id rides along as OpenTelemetry baggage ([`CORRELATION_ID`]),
//! which `agentry::telemetry` copies onto every span below the request, whatever crate made
//! it.

use opentelemetry::baggage::BaggageExt;
use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use opentelemetry::{Context, KeyValue};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The span attribute (and baggage key) holding the user request's correlation id.
pub const CORRELATION_ID: &str = "agentry.correlation_id";

/// The W3C Baggage header.
pub const BAGGAGE_HEADER: &str = "baggage";
/// [`BAGGAGE_HEADER`] as looked up (see `version::HEADER_NAME`).
static BAGGAGE_HEADER_NAME: http::HeaderName = http::HeaderName::from_static("baggage");

/// The parts of a valid `traceparent` (version `00` rules, later versions read the same way,
/// `ff` refused; all-zero ids refused): trace id, parent span id, flags.
pub fn parse(traceparent: &str) -> Option<(&str, &str, u8)> {
    let parts: Vec<&str> = traceparent.trim().split('-').collect();
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    match parts.as_slice() {
        [v, trace, span, flags, ..]
            if hex(v, 2)
                && *v != "ff"
                && (*v != "00" || parts.len() == 4)
                && hex(trace, 32)
                && hex(span, 16)
                && hex(flags, 2)
                && trace.bytes().any(|b| b != b'0')
                && span.bytes().any(|b| b != b'0') =>
        {
            Some((trace, span, u8::from_str_radix(flags, 16).ok()?))
        }
        _ => None,
    }
}

/// The remote span context of a valid `traceparent`.
fn remote(traceparent: &str) -> Option<SpanContext> {
    let (trace, span, flags) = parse(traceparent)?;
    Some(SpanContext::new(
        TraceId::from_hex(trace).ok()?,
        SpanId::from_hex(span).ok()?,
        TraceFlags::new(flags & 1),
        true,
        TraceState::default(),
    ))
}

/// Makes `span` a child of the caller's span named by `traceparent` (when valid), and hands
/// `correlation` to every span below it. Call it before the span is first entered: a started
/// span keeps its parent. Without an OpenTelemetry layer it does nothing.
pub fn continue_trace(span: &Span, traceparent: Option<&str>, correlation: Option<&str>) {
    // No subscriber wants the span: nothing to link, and no context or baggage to build on
    // every request.
    if span.is_disabled() {
        return;
    }
    let parent = traceparent.and_then(remote);
    if parent.is_none() && correlation.is_none() {
        return;
    }
    let mut cx = match parent {
        Some(sc) => Context::new().with_remote_span_context(sc),
        None => Context::current(),
    };
    if let Some(c) = correlation {
        let mut pairs: Vec<KeyValue> = cx
            .baggage()
            .iter()
            .filter(|(k, _)| k.as_str() != CORRELATION_ID)
            .map(|(k, (v, _))| KeyValue::new(k.clone(), v.clone()))
            .collect();
        pairs.push(KeyValue::new(CORRELATION_ID, c.to_owned()));
        cx = cx.with_baggage(pairs);
        span.record(CORRELATION_ID, c);
    }
    // An error means no OpenTelemetry layer, or a span already started: nothing to link.
    let _ = span.set_parent(cx);
}

/// The `traceparent` naming `span`, when an OpenTelemetry layer gave it a valid context.
pub fn traceparent(span: &Span) -> Option<String> {
    if span.is_disabled() {
        return None;
    }
    let cx = span.context();
    let s = cx.span();
    let sc = s.span_context();
    sc.is_valid().then(|| {
        format!(
            "00-{}-{}-{:02x}",
            sc.trace_id(),
            sc.span_id(),
            sc.trace_flags().to_u8()
        )
    })
}

/// The `traceparent` of the current span: what a call out sends so the callee continues the
/// trace. `None` without an OpenTelemetry layer.
pub fn current_traceparent() -> Option<String> {
    traceparent(&Span::current())
}

/// The W3C `baggage` header that hands the current request's correlation id to a callee, so
/// its spans carry it too, also for requests without a task envelope (`tasks/get`, say).
pub fn current_baggage() -> Option<String> {
    let span = Span::current();
    if span.is_disabled() {
        return None;
    }
    let cx = span.context();
    let v = cx.baggage().get(CORRELATION_ID)?;
    Some(baggage(v.as_str()))
}

/// The W3C `baggage` header value carrying `correlation`.
pub fn baggage(correlation: &str) -> String {
    format!("{CORRELATION_ID}={}", encode(correlation))
}

/// The correlation id a W3C `baggage` header carries, if any.
pub fn correlation_in_baggage(header: &str) -> Option<String> {
    header.split(',').find_map(|member| {
        let pair = member.split(';').next()?;
        let (k, v) = pair.split_once('=')?;
        (k.trim() == CORRELATION_ID)
            .then(|| decode(v.trim()))
            .flatten()
            .filter(|v| !v.is_empty())
    })
}

/// The correlation id a request's `baggage` header carries, when it is a valid one (what a
/// request without a task envelope is traced and audited under).
pub fn correlation_of(headers: &http::HeaderMap) -> Option<String> {
    let c = headers
        .get(&BAGGAGE_HEADER_NAME)?
        .to_str()
        .ok()
        .and_then(correlation_in_baggage)?;
    crate::envelope::check_id("the baggage's correlation id", &c).ok()?;
    Some(c)
}

/// Percent-encodes what a baggage value may not hold as is (and `%`).
fn encode(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for b in v.bytes() {
        match b {
            b'!' | b'#'..=b'$' | b'&'..=b'+' | b'-'..=b':' | b'<'..=b'[' | b']'..=b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

fn decode(v: &str) -> Option<String> {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_baggage_name_is_the_header_lowercased() {
        assert_eq!(
            BAGGAGE_HEADER_NAME,
            http::HeaderName::from_bytes(BAGGAGE_HEADER.as_bytes()).unwrap()
        );
    }

    #[test]
    fn traceparents_parse_as_w3c_says() {
        let ok = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(
            parse(ok),
            Some(("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", 1))
        );
        // A later version may append fields; version 00 may not.
        assert!(parse(&format!("01-{}-x", &ok[3..])).is_some());
        assert!(parse(&format!("{ok}-x")).is_none());
        for bad in [
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            "",
        ] {
            assert!(parse(bad).is_none(), "{bad}");
        }
        let sc = remote(ok).unwrap();
        assert!(sc.is_remote() && sc.is_sampled());
        assert_eq!(
            sc.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
    }

    #[test]
    fn correlation_ids_round_trip_through_baggage() {
        for id in ["corr-1", "a,b;c=d%e\"f", "ünïcode"] {
            let header = format!("other=1;p, {}", baggage(id));
            assert_eq!(
                correlation_in_baggage(&header).as_deref(),
                Some(id),
                "{header}"
            );
        }
        assert_eq!(correlation_in_baggage("other=1"), None);
        assert_eq!(
            correlation_in_baggage(&format!("{CORRELATION_ID}=%zz")),
            None
        );
        assert_eq!(correlation_in_baggage(&format!("{CORRELATION_ID}=")), None);
    }

    #[test]
    fn without_an_opentelemetry_layer_nothing_is_invented() {
        let span = tracing::info_span!("x");
        continue_trace(
            &span,
            Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
            Some("c-1"),
        );
        assert_eq!(traceparent(&span), None);
        assert_eq!(current_traceparent(), None);
        assert_eq!(current_baggage(), None);
    }
}
