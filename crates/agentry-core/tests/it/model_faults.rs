//! Fault injection for the model endpoint: the OpenAI-compatible provider against a real
//! HTTP server that answers 5xx, stalls, sends garbage or malformed tool calls. The caller
//! gets a clear error or a corrected run, never a hang.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentry_core::llm::*;
use agentry_core::llm::{OpenAiConfig, OpenAiProvider};
use axum::body::Body;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use futures_util::StreamExt;
use serde_json::{Value, json};

/// What the fake endpoint does with each request, in order; the last one repeats.
#[derive(Clone, Debug)]
enum Answer {
    Status(u16),
    /// Accepts the request and never answers.
    Stall,
    /// 200 with this body, as JSON.
    Raw(&'static str),
    Text(&'static str),
    /// Two tool calls: one to a tool that does not exist, one with arguments that are not JSON.
    BadCalls,
    /// SSE headers and one chunk, then silence.
    StreamThenStall,
    /// 200 with a body that never ends, as JSON or as one event of a stream.
    Endless {
        stream: bool,
    },
}

struct Endpoint {
    base: String,
    requests: Arc<Mutex<usize>>,
}

async fn endpoint(script: Vec<Answer>) -> Endpoint {
    type Shared = (Arc<Mutex<VecDeque<Answer>>>, Arc<Mutex<usize>>);
    async fn handle(State((script, n)): State<Shared>, _body: String) -> Response {
        *n.lock().unwrap() += 1;
        let answer = {
            let mut s = script.lock().unwrap();
            if s.len() > 1 {
                s.pop_front().unwrap()
            } else {
                s.front().cloned().unwrap()
            }
        };
        let json = |v: Value| {
            Response::builder()
                .header("content-type", "application/json")
                .body(Body::from(v.to_string()))
                .unwrap()
        };
        match answer {
            Answer::Status(code) => Response::builder()
                .status(StatusCode::from_u16(code).unwrap())
                .body(Body::from("{\"error\": \"busy\"}"))
                .unwrap(),
            Answer::Stall => {
                std::future::pending::<()>().await;
                unreachable!()
            }
            Answer::Raw(s) => Response::builder()
                .header("content-type", "application/json")
                .body(Body::from(s))
                .unwrap(),
            Answer::Text(t) => json(json!({"choices": [{"message": {"role": "assistant",
                "content": t}, "finish_reason": "stop"}]})),
            Answer::BadCalls => json(json!({"choices": [{"message": {"role": "assistant",
                "content": null, "tool_calls": [
                    {"id": "a", "type": "function",
                     "function": {"name": "no_such_tool", "arguments": "{}"}},
                    {"id": "b", "type": "function",
                     "function": {"name": "lookup", "arguments": "{name: Hamlet"}}]},
                "finish_reason": "tool_calls"}]})),
            Answer::Endless { stream } => {
                let (ct, start) = if stream {
                    ("text/event-stream", "data: {")
                } else {
                    ("application/json", "{")
                };
                let chunks = futures_util::stream::once(async move {
                    Ok::<_, std::io::Error>(bytes::Bytes::from(start))
                })
                .chain(futures_util::stream::repeat_with(|| {
                    Ok(bytes::Bytes::from(vec![b' '; 64 << 10]))
                }));
                Response::builder()
                    .header("content-type", ct)
                    .body(Body::from_stream(chunks))
                    .unwrap()
            }
            Answer::StreamThenStall => {
                let first = "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n";
                let chunks = futures_util::stream::once(async move {
                    Ok::<_, std::io::Error>(bytes::Bytes::from(first))
                })
                .chain(futures_util::stream::pending());
                Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(Body::from_stream(chunks))
                    .unwrap()
            }
        }
    }
    let n = Arc::new(Mutex::new(0));
    let shared: Shared = (Arc::new(Mutex::new(script.into())), n.clone());
    let app = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(handle))
        .with_state(shared);
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, app).await });
    Endpoint { base, requests: n }
}

fn provider(base: &str) -> OpenAiProvider {
    OpenAiProvider::new(OpenAiConfig {
        base_url: base.into(),
        request_timeout_ms: 300,
        retries: 2,
        backoff_ms: 10,
        ..OpenAiConfig::default()
    })
    .unwrap()
}

fn ask() -> ChatRequest {
    ChatRequest {
        messages: vec![ChatMessage::user("hello")],
        ..Default::default()
    }
}

#[tokio::test]
async fn server_errors_are_retried_then_reported_with_their_status() {
    let e = endpoint(vec![
        Answer::Status(503),
        Answer::Status(429),
        Answer::Text("hi"),
    ])
    .await;
    let r = provider(&e.base).chat(ask()).await.unwrap();
    assert_eq!(r.message.content, "hi");
    assert_eq!(*e.requests.lock().unwrap(), 3);

    let e = endpoint(vec![Answer::Status(500)]).await;
    let err = provider(&e.base).chat(ask()).await.unwrap_err();
    assert!(matches!(err, LlmError::Http { status: 500, .. }), "{err}");
    assert_eq!(
        *e.requests.lock().unwrap(),
        3,
        "the first try and two retries"
    );

    // A client error is not retried.
    let e = endpoint(vec![Answer::Status(400)]).await;
    let err = provider(&e.base).chat(ask()).await.unwrap_err();
    assert!(matches!(err, LlmError::Http { status: 400, .. }), "{err}");
    assert_eq!(*e.requests.lock().unwrap(), 1);
}

/// A model that stops answering ends the call at the request timeout, streamed or not
/// (before, a streamed request had no timeout at all: a stalled server hung it forever).
#[tokio::test]
async fn a_stalled_model_times_out_streamed_or_not() {
    let e = endpoint(vec![Answer::Stall]).await;
    let p = provider(&e.base);
    let err = tokio::time::timeout(Duration::from_secs(5), p.chat(ask()))
        .await
        .expect("the call hung")
        .unwrap_err();
    assert!(matches!(err, LlmError::Timeout(300)), "{err}");
    let first = tokio::time::timeout(Duration::from_secs(5), p.chat_stream(ask()).next())
        .await
        .expect("the stream hung");
    assert!(
        matches!(first, Some(Err(LlmError::Timeout(300)))),
        "{first:?}"
    );

    // Silent in the middle of a stream: the text so far, then the timeout.
    let e = endpoint(vec![Answer::StreamThenStall]).await;
    let p = provider(&e.base);
    let items: Vec<_> =
        tokio::time::timeout(Duration::from_secs(5), p.chat_stream(ask()).collect())
            .await
            .expect("the stream hung");
    assert!(
        matches!(items.first(), Some(Ok(ChatDelta::Text(t))) if t == "Hel"),
        "{items:?}"
    );
    assert!(
        matches!(items.last(), Some(Err(LlmError::Timeout(300)))),
        "{items:?}"
    );
}

#[tokio::test]
async fn garbage_from_the_model_is_a_clear_error() {
    for raw in [
        "not json at all",
        "{\"choices\": \"no\"}",
        "{\"choices\": []}",
    ] {
        let e = endpoint(vec![Answer::Raw(raw)]).await;
        let err = provider(&e.base).chat(ask()).await.unwrap_err();
        assert!(matches!(err, LlmError::InvalidResponse(_)), "{raw}: {err}");
    }
}

/// A model server that never stops answering is cut off at the provider's limit (64 MiB),
/// streamed or not, with a clear error: it cannot make the agent hold more.
#[tokio::test]
async fn an_answer_that_never_ends_is_cut_off() {
    let e = endpoint(vec![Answer::Endless { stream: false }]).await;
    let err = tokio::time::timeout(Duration::from_secs(60), provider(&e.base).chat(ask()))
        .await
        .expect("the call ends")
        .unwrap_err();
    assert!(
        matches!(&err, LlmError::InvalidResponse(m) if m.contains("larger than")),
        "{err}"
    );
    let e = endpoint(vec![Answer::Endless { stream: true }]).await;
    let p = provider(&e.base);
    let items: Vec<_> =
        tokio::time::timeout(Duration::from_secs(60), p.chat_stream(ask()).collect())
            .await
            .expect("the stream ends");
    assert!(
        matches!(items.last(), Some(Err(LlmError::InvalidResponse(m))) if m.contains("larger than")),
        "{items:?}"
    );
}

/// Malformed tool calls (a tool that does not exist, arguments that are not JSON) become
/// observations the model can correct; the run goes on to its answer.
#[tokio::test]
async fn malformed_tool_calls_are_corrected_in_the_loop() {
    use agentry_core::react::{Outcome, ReactConfig, ReactState, Step};
    use agentry_core::run::{NoHooks, drive};
    use agentry_core::tools::{FnTool, ToolOutput, ToolRegistry};
    let e = endpoint(vec![Answer::BadCalls, Answer::Text("Hamlet is a prince.")]).await;
    let p = provider(&e.base);
    let mut reg = ToolRegistry::new();
    reg.add(FnTool::new(
        "lookup",
        "Looks a character up.",
        json!({"type": "object", "properties": {"name": {"type": "string"}},
               "required": ["name"]}),
        |_| async { Ok(ToolOutput::text("a prince")) },
    ));
    let mut s = ReactState::new(
        ReactConfig::default(),
        "You answer questions about plays.",
        reg.specs(),
        Vec::new(),
        "Who is Hamlet?",
    );
    let out = drive(&mut s, &p, &reg, &NoHooks, None).await;
    assert_eq!(
        out,
        Outcome::Answered {
            answer: "Hamlet is a prince.".into()
        }
    );
    let said: Vec<(String, bool)> = s
        .steps
        .iter()
        .filter_map(|st| match st {
            Step::Observation { text, is_error, .. } => Some((text.clone(), *is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(said.len(), 2, "{said:?}");
    assert!(
        said[0].1 && said[0].0.contains("no tool named `no_such_tool`"),
        "{said:?}"
    );
    assert!(
        said[1].1,
        "arguments that are not JSON were taken: {said:?}"
    );
    assert_eq!(
        *e.requests.lock().unwrap(),
        2,
        "corrected in one more model call"
    );
}
