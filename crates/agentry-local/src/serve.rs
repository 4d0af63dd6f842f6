//! The local models behind an OpenAI-compatible HTTP API: `POST /v1/chat/completions` (tools,
//! JSON Schema response formats, streaming), `POST /v1/embeddings`, `GET /v1/models`.
//!
//! Tool calls follow the provider's rules: with tools and `tool_choice` `auto` or `required`
//! the answer is a constrained call of one of the request's tools (routed by the embedder);
//! after a tool result (`auto`) or with `none` it is text.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use agentry_core::embed::Embedder;
use agentry_core::llm::{
    ChatDelta, ChatMessage, ChatRequest, ChatResponse, ChatRole, LlmProvider, ToolCall, ToolSpec,
};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::embed::LocalEmbedder;
use crate::provider::LocalProvider;

/// What the server holds.
#[derive(Clone)]
pub struct ServeState {
    /// The chat model and its tool routing.
    pub chat: LocalProvider,
    /// The embedder `/v1/embeddings` uses, when one is loaded.
    pub embedder: Option<Arc<LocalEmbedder>>,
    /// The name `/v1/models` and the answers give the embedder.
    pub embedder_name: String,
}

/// The router; serve it with `axum::serve`.
pub fn router(state: ServeState) -> Router {
    Router::new()
        .route("/v1/models", get(models))
        .route("/v1/chat/completions", post(chat))
        .route("/v1/embeddings", post(embeddings))
        .with_state(state)
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// An OpenAI-style error body.
fn error(status: StatusCode, message: impl Into<String>, param: Option<&str>) -> Response {
    let kind = if status.is_client_error() {
        "invalid_request_error"
    } else {
        "server_error"
    };
    (
        status,
        Json(json!({"error": {"message": message.into(), "type": kind, "param": param, "code": null}})),
    )
        .into_response()
}

async fn models(State(s): State<ServeState>) -> Json<Value> {
    let mut data = vec![
        json!({"id": s.chat.model().name(), "object": "model", "created": 0, "owned_by": "agentry"}),
    ];
    if s.embedder.is_some() {
        data.push(
            json!({"id": s.embedder_name, "object": "model", "created": 0, "owned_by": "agentry"}),
        );
    }
    Json(json!({"object": "list", "data": data}))
}

#[derive(Deserialize)]
struct WireMessage {
    role: String,
    #[serde(default)]
    content: Value,
    #[serde(default)]
    tool_calls: Vec<WireToolCall>,
    #[serde(default)]
    tool_call_id: Option<String>,
}

#[derive(Deserialize)]
struct WireToolCall {
    #[serde(default)]
    id: String,
    function: WireFunctionCall,
}

#[derive(Deserialize)]
struct WireFunctionCall {
    name: String,
    #[serde(default)]
    arguments: String,
}

#[derive(Deserialize)]
struct WireTool {
    function: WireFunction,
}

#[derive(Deserialize)]
struct WireFunction {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    parameters: Option<Value>,
}

#[derive(Deserialize)]
struct ChatBody {
    messages: Vec<WireMessage>,
    #[serde(default)]
    tools: Vec<WireTool>,
    #[serde(default)]
    tool_choice: Option<Value>,
    #[serde(default)]
    max_tokens: Option<u32>,
    #[serde(default)]
    max_completion_tokens: Option<u32>,
    #[serde(default)]
    temperature: Option<f32>,
    #[serde(default)]
    stop: Option<Value>,
    #[serde(default)]
    stream: bool,
    #[serde(default)]
    response_format: Option<Value>,
}

/// Text of an OpenAI content field (a string or a list of parts).
fn content_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn to_request(body: ChatBody) -> Result<ChatRequest, String> {
    if body.messages.is_empty() {
        return Err("messages must not be empty".into());
    }
    let mut messages = Vec::new();
    for (i, m) in body.messages.into_iter().enumerate() {
        let role = match m.role.as_str() {
            "system" | "developer" => ChatRole::System,
            "user" => ChatRole::User,
            "assistant" => ChatRole::Assistant,
            "tool" => ChatRole::Tool,
            other => return Err(format!("messages[{i}].role: unknown role `{other}`")),
        };
        let tool_calls = m
            .tool_calls
            .into_iter()
            .map(|c| ToolCall {
                id: c.id,
                name: c.function.name,
                arguments: serde_json::from_str(&c.function.arguments)
                    .unwrap_or(Value::String(c.function.arguments)),
            })
            .collect();
        messages.push(ChatMessage {
            role,
            content: content_text(&m.content),
            tool_calls,
            tool_call_id: m.tool_call_id,
        });
    }
    let mut tools: Vec<ToolSpec> = body
        .tools
        .into_iter()
        .map(|t| ToolSpec {
            name: t.function.name,
            description: t.function.description,
            parameters: t
                .function
                .parameters
                .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
            examples: Vec::new(),
        })
        .collect();
    let after_tool = messages.last().is_some_and(|m| m.role == ChatRole::Tool);
    match &body.tool_choice {
        Some(Value::String(s)) if s == "none" => tools.clear(),
        Some(Value::String(s)) if s == "required" => {}
        Some(Value::Object(o)) => {
            let name = o
                .get("function")
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str)
                .ok_or(
                    "tool_choice: expected {\"type\": \"function\", \"function\": {\"name\": ...}}",
                )?;
            tools.retain(|t| t.name == name);
            if tools.is_empty() {
                return Err(format!("tool_choice names `{name}`, which is not in tools"));
            }
        }
        // `auto`: a call, unless a tool result just came (then the answer).
        _ if after_tool => tools.clear(),
        _ => {}
    }
    let stop = match body.stop {
        Some(Value::String(s)) => vec![s],
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|v| v.as_str().map(String::from))
            .collect(),
        _ => Vec::new(),
    };
    let json_schema = match &body.response_format {
        Some(f) if f.get("type").and_then(Value::as_str) == Some("json_schema") => Some(
            f.pointer("/json_schema/schema")
                .cloned()
                .ok_or("response_format.json_schema.schema is required")?,
        ),
        Some(f) if f.get("type").and_then(Value::as_str) == Some("json_object") => {
            Some(json!({"type": "object", "additionalProperties": true}))
        }
        _ => None,
    };
    Ok(ChatRequest {
        messages,
        tools,
        max_tokens: body.max_completion_tokens.or(body.max_tokens),
        temperature: body.temperature,
        json_schema,
        stop,
    })
}

fn wire_message(r: &ChatResponse) -> Value {
    let calls: Vec<Value> = r
        .message
        .tool_calls
        .iter()
        .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments.to_string()}}))
        .collect();
    let mut m = json!({"role": "assistant", "content": if calls.is_empty() { Value::String(r.message.content.clone()) } else { Value::Null }});
    if !calls.is_empty() {
        m["tool_calls"] = Value::Array(calls);
    }
    m
}

fn finish_reason(r: &ChatResponse) -> &'static str {
    if !r.message.tool_calls.is_empty() {
        "tool_calls"
    } else if r.finish_reason == agentry_core::llm::FinishReason::Length {
        "length"
    } else {
        "stop"
    }
}

async fn chat(
    State(s): State<ServeState>,
    body: Result<Json<ChatBody>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let body = match body {
        Ok(Json(b)) => b,
        Err(e) => return error(StatusCode::BAD_REQUEST, e.body_text(), None),
    };
    let stream = body.stream;
    let req = match to_request(body) {
        Ok(r) => r,
        Err(e) => return error(StatusCode::BAD_REQUEST, e, None),
    };
    let id = format!("chatcmpl-{}", uuid::Uuid::new_v4().simple());
    let model = s.chat.model().name().to_owned();
    let created = now();
    if !stream {
        return match s.chat.chat(req).await {
            Ok(r) => Json(json!({
                "id": id, "object": "chat.completion", "created": created, "model": model,
                "choices": [{"index": 0, "message": wire_message(&r), "finish_reason": finish_reason(&r)}],
                "usage": {"prompt_tokens": r.usage.prompt_tokens, "completion_tokens": r.usage.completion_tokens,
                          "total_tokens": r.usage.total()},
            }))
            .into_response(),
            Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string(), None),
        };
    }
    let chunk = move |delta: Value, finish: Option<&str>| {
        json!({"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let provider = s.chat.clone();
    let events = async_stream(move |tx| async move {
        let send = |v: Value| tx.send(Event::default().data(v.to_string())).is_ok();
        if !send(chunk(json!({"role": "assistant", "content": ""}), None)) {
            return;
        }
        let mut deltas = provider.chat_stream(req);
        while let Some(d) = deltas.next().await {
            match d {
                Ok(ChatDelta::Text(t)) => {
                    if !send(chunk(json!({"content": t}), None)) {
                        return;
                    }
                }
                Ok(ChatDelta::Done(r)) => {
                    let calls: Vec<Value> = r
                        .message
                        .tool_calls
                        .iter()
                        .enumerate()
                        .map(|(i, c)| {
                            json!({
                        "index": i, "id": c.id, "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments.to_string()}})
                        })
                        .collect();
                    if !calls.is_empty() {
                        send(chunk(json!({"tool_calls": calls}), None));
                    }
                    send(chunk(json!({}), Some(finish_reason(&r))));
                }
                Ok(_) => {}
                Err(e) => {
                    send(json!({"error": {"message": e.to_string(), "type": "server_error"}}));
                    break;
                }
            }
        }
        let _ = tx.send(Event::default().data("[DONE]"));
    });
    Sse::new(events.map(Ok::<_, Infallible>))
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// A stream fed by a task through a channel (a few lines instead of a macro crate).
fn async_stream<F, Fut>(f: F) -> impl futures_util::Stream<Item = Event> + Send
where
    F: FnOnce(tokio::sync::mpsc::UnboundedSender<Event>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(f(tx));
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

#[derive(Deserialize)]
struct EmbedBody {
    input: Value,
    #[serde(default)]
    encoding_format: Option<String>,
}

async fn embeddings(
    State(s): State<ServeState>,
    body: Result<Json<EmbedBody>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let body = match body {
        Ok(Json(b)) => b,
        Err(e) => return error(StatusCode::BAD_REQUEST, e.body_text(), None),
    };
    let Some(embedder) = &s.embedder else {
        return error(
            StatusCode::NOT_FOUND,
            "no embedding model is loaded",
            Some("model"),
        );
    };
    if body
        .encoding_format
        .as_deref()
        .is_some_and(|f| f != "float")
    {
        return error(
            StatusCode::BAD_REQUEST,
            "only encoding_format \"float\" is supported",
            Some("encoding_format"),
        );
    }
    let texts: Vec<String> = match body.input {
        Value::String(s) => vec![s],
        Value::Array(a) if a.iter().all(Value::is_string) && !a.is_empty() => a
            .into_iter()
            .filter_map(|v| v.as_str().map(String::from))
            .collect(),
        _ => {
            return error(
                StatusCode::BAD_REQUEST,
                "input must be a string or a non-empty array of strings",
                Some("input"),
            );
        }
    };
    let chars: usize = texts.iter().map(String::len).sum();
    match embedder.embed(texts).await {
        Ok(vecs) => Json(json!({
            "object": "list",
            "data": vecs.into_iter().enumerate().map(|(i, v)| json!({"object": "embedding", "index": i, "embedding": v})).collect::<Vec<_>>(),
            "model": s.embedder_name,
            "usage": {"prompt_tokens": chars / 4, "total_tokens": chars / 4},
        }))
        .into_response(),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string(), None),
    }
}
