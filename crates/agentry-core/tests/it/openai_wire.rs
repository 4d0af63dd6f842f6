//! The OpenAI-compatible provider's wire format, streaming and retries, against a local HTTP
//! endpoint that answers as the Chat Completions API does (a unit test of our client code; the
//! end-to-end test against a real model server comes with the embedded-model server).

use std::sync::{Arc, Mutex};

use agentry_core::llm::*;
use axum::{Json, Router, extract::State, http::HeaderMap, response::IntoResponse, routing::post};
use futures_util::StreamExt;
use serde_json::{Value, json};

#[derive(Default)]
struct Seen {
    bodies: Vec<Value>,
    auth: Vec<String>,
    hits: usize,
}

type Shared = Arc<Mutex<Seen>>;

async fn completions(
    State(seen): State<Shared>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> axum::response::Response {
    let hit = {
        let mut s = seen.lock().unwrap();
        s.hits += 1;
        s.bodies.push(body.clone());
        s.auth.push(
            headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned(),
        );
        s.hits
    };
    let user = body["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    if user == "busy" && hit == 1 {
        return (axum::http::StatusCode::TOO_MANY_REQUESTS, "slow down").into_response();
    }
    if body["stream"] == json!(true) {
        let chunks = [
            json!({"choices": [{"delta": {"role": "assistant", "content": "Let me "}}]}),
            json!({"choices": [{"delta": {"content": "check."}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "call_9", "type": "function", "function": {"name": "lookup", "arguments": "{\"na"}}]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "me\": \"Hamlet\"}"}}]}, "finish_reason": "tool_calls"}]}),
            json!({"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 7}}),
        ];
        let mut s = String::new();
        for c in chunks {
            s.push_str(&format!("data: {c}\n\n"));
        }
        s.push_str("data: [DONE]\n\n");
        return ([("content-type", "text/event-stream")], s).into_response();
    }
    Json(json!({
        "id": "x", "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{\"name\": \"Hamlet\"}"}}]}}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 9, "total_tokens": 29}
    }))
    .into_response()
}

async fn server() -> (String, Shared) {
    let seen: Shared = Default::default();
    let app = Router::new()
        .route("/v1/chat/completions", post(completions))
        .with_state(seen.clone());
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    (base, seen)
}

fn request(user: &str) -> ChatRequest {
    ChatRequest {
        messages: vec![
            ChatMessage::system("be brief"),
            ChatMessage::user("earlier"),
            ChatMessage {
                role: ChatRole::Assistant,
                content: String::new(),
                tool_calls: vec![ToolCall {
                    id: "call_0".into(),
                    name: "lookup".into(),
                    arguments: json!({"name": "x"}),
                }],
                tool_call_id: None,
            },
            ChatMessage::tool("call_0", "x is nobody"),
            ChatMessage::user(user),
        ],
        tools: vec![ToolSpec {
            name: "lookup".into(),
            description: "Looks up".into(),
            parameters: json!({"type": "object", "properties": {"name": {"type": "string"}}}),
            examples: Vec::new(),
        }],
        max_tokens: Some(64),
        temperature: Some(0.0),
        ..Default::default()
    }
}

fn provider(base: &str) -> OpenAiProvider {
    OpenAiProvider::new(OpenAiConfig {
        base_url: base.into(),
        model: "test-model".into(),
        api_key: Some("sk-test".into()),
        backoff_ms: 10,
        ..Default::default()
    })
    .unwrap()
}

#[tokio::test]
async fn chat_sends_openai_wire_format_and_parses_tool_calls() {
    let (base, seen) = server().await;
    let p = provider(&base);
    let r = p.chat(request("Who is Hamlet?")).await.unwrap();
    assert_eq!(r.finish_reason, FinishReason::ToolCalls);
    assert_eq!(r.message.tool_calls[0].arguments, json!({"name": "Hamlet"}));
    assert_eq!(
        r.usage,
        Usage {
            prompt_tokens: 20,
            completion_tokens: 9
        }
    );
    let s = seen.lock().unwrap();
    let body = &s.bodies[0];
    assert_eq!(s.auth[0], "Bearer sk-test");
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tools"][0]["function"]["name"], "lookup");
    assert_eq!(
        body["messages"][2]["tool_calls"][0]["function"]["arguments"],
        "{\"name\":\"x\"}"
    );
    assert_eq!(body["messages"][3]["tool_call_id"], "call_0");
    assert_eq!(body["messages"][3]["role"], "tool");
    assert_eq!(body["max_tokens"], 64);
}

#[tokio::test]
async fn streaming_yields_text_and_tool_call_deltas_then_the_whole_answer() {
    let (base, _) = server().await;
    let p = provider(&base);
    let deltas: Vec<ChatDelta> = p
        .chat_stream(request("stream"))
        .map(Result::unwrap)
        .collect()
        .await;
    assert_eq!(deltas[0], ChatDelta::Text("Let me ".into()));
    assert!(
        deltas
            .iter()
            .any(|d| matches!(d, ChatDelta::ToolCall { name: Some(n), .. } if n == "lookup"))
    );
    let Some(ChatDelta::Done(r)) = deltas.last() else {
        panic!("{deltas:?}")
    };
    assert_eq!(r.message.content, "Let me check.");
    assert_eq!(r.message.tool_calls[0].id, "call_9");
    assert_eq!(r.message.tool_calls[0].arguments, json!({"name": "Hamlet"}));
    assert_eq!(r.usage.total(), 19);
}

#[tokio::test]
async fn retries_on_429_and_reports_clear_errors() {
    let (base, seen) = server().await;
    let p = provider(&base);
    assert!(p.chat(request("busy")).await.is_ok());
    assert_eq!(seen.lock().unwrap().hits, 2, "one retry after the 429");

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dead = OpenAiProvider::new(OpenAiConfig {
        base_url: format!("http://127.0.0.1:{port}/v1"),
        retries: 1,
        backoff_ms: 1,
        ..Default::default()
    })
    .unwrap();
    let e = dead.chat(request("x")).await.unwrap_err().to_string();
    assert!(e.contains("cannot reach the model"), "{e}");
}
