//! OpenTelemetry export (feature `otel`): agentry's spans over OTLP/HTTP, configured the
//! standard way.
//!
//! Every agentry crate makes `tracing` spans after OpenTelemetry's semantic conventions: the
//! request an agent serves (`SendMessage`, kind server, a child of the caller's span), the
//! agent's run (`invoke_agent {agent}`), each ReAct step, model call (`chat {model}` with its
//! tokens) and tool call (`execute_tool {tool}`), workflow steps, and calls to other agents
//! (`a2a.call`, kind client) and MCP servers (`tools/call {tool}`), whose `traceparent` goes
//! with them (the A2A header, the MCP request's `_meta`). [`Telemetry`] is the layer that
//! exports them, with the request's correlation id on every span
//! (`agentry.correlation_id`).
//!
//! It reads the standard variables: `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) turns it on, `OTEL_SERVICE_NAME` names the process,
//! `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` turn it off, `OTEL_BSP_*` tune
//! the batches. Only OTLP over HTTP with protobuf bodies is built in (what every collector,
//! Jaeger and Tempo accept on port 4318).
//!
//! ```no_run
//! use tracing_subscriber::layer::SubscriberExt;
//! use tracing_subscriber::util::SubscriberInitExt;
//!
//! let telemetry = agentry::telemetry::Telemetry::from_env("my-agents").unwrap();
//! tracing_subscriber::registry()
//!     .with(telemetry.as_ref().map(|t| t.layer()))
//!     .init();
//! // ... serve; dropping `telemetry` at the end flushes what is left.
//! ```

use std::time::Duration;

use opentelemetry::baggage::BaggageExt;
use opentelemetry::trace::{Span as _, TracerProvider as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, Span, SpanData, SpanProcessor};
use tracing::Subscriber;
use tracing_subscriber::Layer;
use tracing_subscriber::registry::LookupSpan;

use crate::a2a::trace::CORRELATION_ID;

/// Why export could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TelemetryError {
    /// The OTLP exporter could not be built (a malformed endpoint, say).
    #[error("OpenTelemetry: cannot build the OTLP exporter")]
    Exporter(#[source] opentelemetry_otlp::ExporterBuildError),
}

/// The tracer provider behind the layer. Dropping it (or [`Telemetry::shutdown`]) flushes
/// the spans not yet sent.
pub struct Telemetry {
    provider: SdkTracerProvider,
}

impl Telemetry {
    /// Export as the `OTEL_*` variables say; `None` when they name no OTLP endpoint or turn
    /// the SDK off. `service` names the process unless `OTEL_SERVICE_NAME` does.
    pub fn from_env(service: &str) -> Result<Option<Telemetry>, TelemetryError> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let off = var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
            || var("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"));
        let endpoint = var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .or_else(|| var("OTEL_EXPORTER_OTLP_ENDPOINT"));
        if off || endpoint.is_none() {
            return Ok(None);
        }
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .build()
            .map_err(TelemetryError::Exporter)?;
        let mut resource = Resource::builder();
        if var("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name(service.to_owned());
        }
        let provider = SdkTracerProvider::builder()
            .with_span_processor(Correlation)
            .with_batch_exporter(exporter)
            .with_resource(resource.build())
            .build();
        Ok(Some(Telemetry { provider }))
    }

    /// The `tracing` layer that turns spans into OpenTelemetry spans for this provider.
    pub fn layer<S>(&self) -> impl Layer<S> + use<S>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        tracing_opentelemetry::layer().with_tracer(self.provider.tracer("agentry"))
    }

    /// Sends what is left and stops (within about five seconds).
    pub fn shutdown(self) {
        drop(self);
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        // A collector that is gone must not hold the process up: the error is the answer.
        let _ = self.provider.shutdown_with_timeout(Duration::from_secs(5));
    }
}

/// Copies the request's correlation id (baggage set where the request came in, see
/// `agentry_a2a::trace::continue_trace`) onto every span below it, whatever crate made it.
#[derive(Debug)]
struct Correlation;

impl SpanProcessor for Correlation {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        if let Some(v) = cx.baggage().get(CORRELATION_ID) {
            span.set_attribute(KeyValue::new(CORRELATION_ID, v.clone()));
        }
    }

    fn on_end(&self, _span: SpanData) {}

    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }
}
