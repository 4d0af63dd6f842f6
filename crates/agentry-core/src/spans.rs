//! The spans of an agent's run, after OpenTelemetry's GenAI semantic conventions: a step per
//! model call (`chat {model}`, with tokens and finish reason) and per tool call
//! (`execute_tool {tool}`), under the ReAct step that asked for them. They cost a span handle
//! each; what exports them is the application's choice (see `agentry_a2a::trace`).

use tracing::Span;
use tracing::field::Empty;

use crate::llm::{ChatRequest, ChatResponse, DynLlmProvider, FinishReason, LlmError};
use crate::tools::{ToolError, ToolOutput};

/// One ReAct step: a model call and the tool calls it asked for.
pub(crate) fn step(iteration: u32) -> Span {
    tracing::info_span!(
        "react.step",
        otel.name = format!("react step {}", iteration + 1),
        agentry.react.iteration = i64::from(iteration) + 1,
    )
}

/// A model call (`gen_ai.operation.name = chat`), a child of `step`.
pub(crate) fn chat(step: &Span, llm: &dyn DynLlmProvider, req: &ChatRequest) -> Span {
    let model = llm.model_name();
    tracing::info_span!(
        parent: step,
        "chat",
        otel.name = format!("chat {model}").trim_end(),
        otel.kind = "client",
        otel.status_code = Empty,
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = llm.provider_name(),
        gen_ai.request.model = model,
        gen_ai.request.max_tokens = req.max_tokens.map(i64::from),
        gen_ai.request.temperature = req.temperature.map(f64::from),
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.response.finish_reasons = Empty,
        error.type = Empty,
    )
}

/// Integers as OpenTelemetry has them (signed: the bridge records unsigned ones as text).
fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// What the model answered (`None`: canceled).
pub(crate) fn chat_done(span: &Span, result: Option<&Result<ChatResponse, LlmError>>) {
    match result {
        Some(Ok(r)) => {
            span.record("gen_ai.usage.input_tokens", int(r.usage.prompt_tokens));
            span.record("gen_ai.usage.output_tokens", int(r.usage.completion_tokens));
            let reason = match &r.finish_reason {
                FinishReason::Stop => "stop",
                FinishReason::ToolCalls => "tool_calls",
                FinishReason::Length => "length",
                FinishReason::ContentFilter => "content_filter",
                FinishReason::Other(o) => o.as_str(),
            };
            span.record("gen_ai.response.finish_reasons", reason);
        }
        Some(Err(e)) => {
            span.record("otel.status_code", "error");
            span.record("error.type", error_type(e));
        }
        None => {
            span.record("otel.status_code", "error");
            span.record("error.type", "canceled");
        }
    }
}

/// The error's kind (`error.type`), never its text: bodies may quote the prompt.
fn error_type(e: &LlmError) -> &'static str {
    match e {
        LlmError::Connect { .. } => "connect",
        LlmError::Timeout(_) => "timeout",
        LlmError::Http { .. } => "http",
        LlmError::InvalidResponse(_) => "invalid_response",
        LlmError::Transcript(_) => "transcript",
        LlmError::Settings(_) => "settings",
        LlmError::Backend(_) => "backend",
    }
}

/// A tool call (`gen_ai.operation.name = execute_tool`), a child of the current span.
pub(crate) fn tool(name: &str, call_id: &str) -> Span {
    tracing::info_span!(
        "execute_tool",
        otel.name = format!("execute_tool {name}"),
        otel.kind = "internal",
        otel.status_code = Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = name,
        gen_ai.tool.call.id = call_id,
        gen_ai.tool.type = "function",
        error.type = Empty,
    )
}

/// How the tool call ended.
pub(crate) fn tool_done(span: &Span, output: &Result<ToolOutput, ToolError>) {
    if let Err(e) = output {
        span.record("otel.status_code", "error");
        span.record("error.type", tool_error_type(e));
    }
}

fn tool_error_type(e: &ToolError) -> &'static str {
    match e {
        ToolError::Unknown { .. } => "unknown_tool",
        ToolError::InvalidArguments { .. } => "invalid_arguments",
        ToolError::Timeout { .. } => "timeout",
        ToolError::Failed { .. } => "failed",
    }
}
