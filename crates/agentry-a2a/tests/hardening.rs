//! Bad input from the network: clear protocol errors, no panics, nothing lost.

mod common;

use std::time::Duration;

use agentry_a2a::client::{A2aClient, ClientConfig};
use agentry_a2a::model::*;
use agentry_a2a::server::ServerConfig;
use futures_util::StreamExt;
use serde_json::{Value, json};

async fn post_raw(url: &str, ct: Option<&str>, body: Vec<u8>) -> (u16, String) {
    let mut req = reqwest::Client::new().post(url).body(body);
    if let Some(ct) = ct {
        req = req.header("content-type", ct);
    }
    let r = req.send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

fn error_code(body: &str) -> i64 {
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    v["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("no error in {body}"))
}

#[tokio::test]
async fn malformed_requests_get_jsonrpc_errors() {
    let s = common::echo_server().await;
    let json = Some("application/json");
    for (body, code) in [
        (&b"{"[..], -32700),
        (b"\xff\xfe", -32700),
        (b"", -32700),
        (b"[1,2]", -32600),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tasks/list\",\"params\":{}}",
            -32601,
        ),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tasks/get\",\"params\":{\"id\":[]}}",
            -32602,
        ),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tasks/get\",\"params\":{\"id\":\"nope\"}}",
            -32001,
        ),
    ] {
        let (status, text) = post_raw(&s.base, json, body.to_vec()).await;
        assert_eq!(status, 200, "{text}");
        assert_eq!(error_code(&text), code, "{}", String::from_utf8_lossy(body));
    }
    let (_, text) = post_raw(&s.base, Some("text/plain"), b"{}".to_vec()).await;
    assert_eq!(error_code(&text), -32005);
    // Charset parameters are fine.
    let (_, text) = post_raw(
        &s.base,
        Some("application/json; charset=utf-8"),
        br#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}"#.to_vec(),
    )
    .await;
    assert_eq!(error_code(&text), -32001);
}

#[tokio::test]
async fn oversize_bodies_get_413_and_the_server_goes_on() {
    let (listener, url) = common::bind().await;
    let svc = agentry_a2a::server::AgentService::new(
        agentry_a2a::agents::Echo::card(&url),
        agentry_a2a::agents::Echo::default(),
        std::sync::Arc::new(agentry_a2a::store::MemoryStore::default()),
    );
    let config = ServerConfig {
        body_limit: 1024,
        ..Default::default()
    };
    let s = common::serve_on(listener, svc, config).await;
    let big = json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {
        "role": "user", "messageId": "m", "parts": [{"kind": "text", "text": "x".repeat(4096)}]}}});
    let (status, _) = post_raw(
        &s.base,
        Some("application/json"),
        big.to_string().into_bytes(),
    )
    .await;
    assert_eq!(status, 413);
    let c = A2aClient::discover(&s.base, ClientConfig::default())
        .await
        .unwrap();
    assert!(
        c.send_message(MessageSendParams::new(Message::text(Role::User, "small")))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn streams_send_keep_alive_comments() {
    let (listener, url) = common::bind().await;
    let agent = agentry_a2a::agents::Conformance {
        resubscribe_window: Duration::from_secs(2),
    };
    let svc = agentry_a2a::server::AgentService::new(
        agentry_a2a::agents::Conformance::card(&url),
        agent,
        std::sync::Arc::new(agentry_a2a::store::MemoryStore::default()),
    );
    let config = ServerConfig {
        keep_alive: Duration::from_millis(100),
        ..Default::default()
    };
    let s = common::serve_on(listener, svc, config).await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "message/stream", "params": {"message": {
        "role": "user", "messageId": "test-resubscribe-message-id-1", "parts": [{"kind": "text", "text": "x"}]}}});
    let resp = reqwest::Client::new()
        .post(&s.base)
        .json(&body)
        .send()
        .await
        .unwrap();
    let text = resp.text().await.unwrap();
    assert!(
        text.contains(": keep-alive"),
        "no keep-alive comment in {text}"
    );
    assert!(text.contains("\"final\":true"));
}

/// A fake agent whose stream stops mid-event, then (on resubscribe) finishes properly.
async fn truncating_server() -> String {
    use axum::{Router, body::Bytes, routing::post};
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/", l.local_addr().unwrap());
    async fn handle(body: Bytes) -> axum::response::Response {
        let req: Value = serde_json::from_slice(&body).unwrap();
        let id = &req["id"];
        let method = req["method"].as_str().unwrap();
        let task =
            json!({"kind": "task", "id": "t1", "contextId": "c1", "status": {"state": "working"}});
        let ev = |result: Value| {
            format!(
                "data: {}\n\n",
                json!({"jsonrpc": "2.0", "id": id, "result": result})
            )
        };
        let body = match method {
            // A task event, then half an event and the connection closes.
            "message/stream" => format!("{}data: {{\"jsonrpc\":", ev(task)),
            "tasks/get" => {
                return axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": task}))
                    .into_response();
            }
            "tasks/resubscribe" => format!(
                "{}{}",
                ev(task.clone()),
                ev(
                    json!({"kind": "status-update", "taskId": "t1", "contextId": "c1",
                          "status": {"state": "completed"}, "final": true})
                )
            ),
            _ => String::new(),
        };
        ([("content-type", "text/event-stream")], body).into_response()
    }
    use axum::response::IntoResponse;
    tokio::spawn(async move {
        axum::serve(l, Router::new().route("/", post(handle)))
            .await
            .unwrap()
    });
    base
}

#[tokio::test]
async fn truncated_streams_are_resubscribed_while_the_task_runs() {
    let base = truncating_server().await;
    let c = A2aClient::new(&base, ClientConfig::default()).unwrap();
    let evs: Vec<_> = c
        .stream_message(MessageSendParams::new(Message::text(Role::User, "x")))
        .collect()
        .await;
    let evs: Vec<StreamEvent> = evs.into_iter().map(|e| e.expect("no error")).collect();
    assert!(
        matches!(evs.last(), Some(StreamEvent::StatusUpdate(s)) if s.is_final && s.status.state == TaskState::Completed),
        "{evs:?}"
    );

    // Without auto-resubscribe the truncation is a clear error, not a hang or a panic.
    let c = A2aClient::new(
        &base,
        ClientConfig {
            auto_resubscribe: false,
            ..Default::default()
        },
    )
    .unwrap();
    let evs: Vec<_> = c
        .stream_message(MessageSendParams::new(Message::text(Role::User, "x")))
        .collect()
        .await;
    let err = evs.last().unwrap().as_ref().unwrap_err().to_string();
    assert!(err.contains("closed before the final event"), "{err}");
}

#[tokio::test]
async fn client_errors_are_distinct() {
    use agentry_a2a::A2aError;
    // Nothing listening.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cfg = ClientConfig {
        retries: 0,
        ..Default::default()
    };
    let e = A2aClient::discover(&format!("http://127.0.0.1:{port}"), cfg.clone())
        .await
        .err()
        .unwrap();
    assert!(matches!(e, A2aError::Connect { .. }), "{e}");
    // 404 on both card paths.
    let s = common::echo_server().await;
    let e = A2aClient::discover(&format!("{}nowhere", s.base), cfg.clone())
        .await
        .err()
        .unwrap();
    assert!(matches!(e, A2aError::CardNotFound { .. }), "{e}");
    // An invalid card names the field.
    use axum::{Router, routing::get};
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", l.local_addr().unwrap());
    let app = Router::new()
        .route(
            "/.well-known/agent-card.json",
            get(|| async { axum::Json(json!({"name": "x"})) }),
        )
        .route(
            "/slow/.well-known/agent-card.json",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                "{}"
            }),
        )
        .route(
            "/locked/.well-known/agent-card.json",
            get(|| async { (axum::http::StatusCode::UNAUTHORIZED, "no") }),
        );
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    let e = A2aClient::discover(&base, cfg.clone()).await.err().unwrap();
    assert!(
        matches!(&e, A2aError::InvalidCard { reason, .. } if reason.contains("description")),
        "{e}"
    );
    let e = A2aClient::discover(&format!("{base}/locked"), cfg.clone())
        .await
        .err()
        .unwrap();
    assert!(matches!(e, A2aError::Unauthorized { .. }), "{e}");
    let quick = ClientConfig {
        request_timeout: Duration::from_millis(200),
        ..cfg
    };
    let e = A2aClient::discover(&format!("{base}/slow"), quick)
        .await
        .err()
        .unwrap();
    assert!(matches!(e, A2aError::Timeout { .. }), "{e}");
}

#[tokio::test]
async fn card_has_cache_headers_and_legacy_path() {
    let s = common::echo_server().await;
    let http = reqwest::Client::new();
    let r = http
        .get(format!("{}.well-known/agent-card.json", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["content-type"], "application/json");
    assert!(
        r.headers()["cache-control"]
            .to_str()
            .unwrap()
            .contains("max-age")
    );
    let etag = r.headers()["etag"].clone();
    let r = http
        .get(format!("{}.well-known/agent-card.json", s.base))
        .header("if-none-match", etag)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 304);
    let legacy: AgentCard = http
        .get(format!("{}.well-known/agent.json", s.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(legacy.name, "echo");
}
