//! Bad input from the network: clear protocol errors, no panics, nothing lost.

use crate::common;

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
        agentry::agents::Echo::card(&url),
        agentry::agents::Echo::default(),
        std::sync::Arc::new(agentry_a2a::store::MemoryStore::default()),
    );
    let config = ServerConfig {
        body_limit: 1024,
        ..Default::default()
    };
    let s = common::serve_on(listener, svc, config).await;
    let big = json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {
        "role": "user", "messageId": "m", "parts": [{"kind": "text", "text": "x".repeat(4096)}]}}});
    let (status, body) = post_raw(
        &s.base,
        Some("application/json"),
        big.to_string().into_bytes(),
    )
    .await;
    assert_eq!(status, 413);
    // A JSON-RPC error body, not plain text.
    assert_eq!(error_code(&body), -32600, "{body}");
    // The same over HTTP+JSON, as a google.rpc.Status.
    let (status, body) = post_raw(
        &format!("{}message:send", s.base),
        Some("application/json"),
        big["params"].to_string().into_bytes(),
    )
    .await;
    assert_eq!(status, 413);
    let v: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert_eq!(v["error"]["code"], 413, "{body}");
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
    let agent = agentry::agents::Conformance {
        resubscribe_window: Duration::from_secs(2),
    };
    let svc = agentry_a2a::server::AgentService::new(
        agentry::agents::Conformance::card(&url),
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
        )
        .route(
            "/denied/.well-known/agent-card.json",
            get(|| async { (axum::http::StatusCode::FORBIDDEN, "not you") }),
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
    // 403 is not 401: credentials were read and refused, so the advice differs.
    let e = A2aClient::discover(&format!("{base}/denied"), cfg.clone())
        .await
        .err()
        .unwrap();
    assert!(matches!(e, A2aError::Forbidden { .. }), "{e}");
    assert!(e.to_string().contains("403"), "{e}");
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

/// Each generation gets a card that validates for it: `A2A-Version: 1.0` the 1.0 card only
/// (the 1.0 JSON schema forbids the 0.3 fields), no header the configured default (both
/// generations' fields, or strictly 1.0); the HTTP+JSON base has no trailing slash; the card
/// carries `Last-Modified` and `Vary: A2A-Version`.
#[tokio::test]
async fn each_generation_gets_its_card() {
    const V03_ONLY: [&str; 4] = [
        "url",
        "protocolVersion",
        "preferredTransport",
        "additionalInterfaces",
    ];
    let http = reqwest::Client::new();
    let get = async |base: &str, version: Option<&str>| -> (Value, reqwest::header::HeaderMap) {
        let mut r = http.get(format!("{base}.well-known/agent-card.json"));
        if let Some(v) = version {
            r = r.header("A2A-Version", v);
        }
        let r = r.send().await.unwrap();
        let headers = r.headers().clone();
        (r.json().await.unwrap(), headers)
    };
    let s = common::echo_server().await;
    let (both, headers) = get(&s.base, None).await;
    for k in V03_ONLY {
        assert!(both.get(k).is_some(), "{k} missing: {both}");
    }
    assert!(both["supportedInterfaces"].is_array(), "{both}");
    assert!(headers.contains_key("last-modified"), "{headers:?}");
    assert_eq!(headers["vary"], "A2A-Version");
    let rest = both["supportedInterfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["protocolBinding"] == "HTTP+JSON")
        .unwrap();
    assert!(!rest["url"].as_str().unwrap().ends_with('/'), "{rest}");
    let (v1, v1_headers) = get(&s.base, Some("1.0")).await;
    for k in V03_ONLY {
        assert!(v1.get(k).is_none(), "{k} in the 1.0 card: {v1}");
    }
    assert!(
        v1["capabilities"].get("stateTransitionHistory").is_none(),
        "{v1}"
    );
    assert_eq!(v1["name"], both["name"]);
    assert_ne!(
        v1_headers["etag"], headers["etag"],
        "one validator per card"
    );
    let (v03, _) = get(&s.base, Some("0.3")).await;
    assert_eq!(v03, both);

    // Strictly 1.0 by default.
    let (listener, url) = common::bind().await;
    let config = ServerConfig {
        card: agentry_a2a::server::CardDefault::V1_0,
        ..Default::default()
    };
    let svc = agentry_a2a::server::AgentService::new(
        agentry::agents::Echo::card(&url),
        agentry::agents::Echo::default(),
        std::sync::Arc::new(agentry_a2a::store::MemoryStore::default()),
    );
    let strict = common::serve_on(listener, svc, config).await;
    let (default, _) = get(&strict.base, None).await;
    assert_eq!(default, v1_with_url(&v1, &s.base, &strict.base));
    let (asked, _) = get(&strict.base, Some("0.3")).await;
    assert!(asked.get("url").is_some(), "{asked}");
}

/// `card`, another server's 1.0 card, with its URLs moved to `to` (by their `host:port`,
/// which is also the gRPC interface's URL).
fn v1_with_url(card: &Value, from: &str, to: &str) -> Value {
    let authority = |u: &str| {
        u.trim_start_matches("http://")
            .trim_end_matches('/')
            .to_owned()
    };
    serde_json::from_str(&card.to_string().replace(&authority(from), &authority(to))).unwrap()
}

/// HTTP+JSON refusals carry the HTTP status the 1.0 binding maps them to: a body that is not
/// JSON 415, an unknown `A2A-Version` 400.
#[tokio::test]
async fn rest_refusals_use_their_http_status() {
    let s = common::echo_server().await;
    let http = reqwest::Client::new();
    let send = format!("{}message:send", s.base);
    let body = r#"{"message":{"role":"ROLE_USER","parts":[{"text":"x"}],"messageId":"m"}}"#;
    let r = http
        .post(&send)
        .header("Content-Type", "text/plain")
        .header("A2A-Version", "1.0")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 415);
    let r = http
        .post(&send)
        .header("Content-Type", "application/json")
        .header("A2A-Version", "99.0")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["status"], "FAILED_PRECONDITION", "{v}");
}

/// `A2A-Version`: absent or empty means 0.3, the query parameter works too, an unknown version
/// is -32009 with HTTP 400 and an `ErrorInfo`, and the answer follows the version asked.
#[tokio::test]
async fn version_negotiation() {
    let s = common::echo_server().await;
    let http = reqwest::Client::new();
    let send = |version: Option<&str>, url: &str, method: &str, params: Value| {
        let mut req = http.post(url).json(&json!({
            "jsonrpc": "2.0", "id": 7, "method": method, "params": params,
        }));
        if let Some(v) = version {
            req = req.header("A2A-Version", v);
        }
        async move {
            let r = req.send().await.unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    };
    let v03 = json!({"message": {"kind": "message", "role": "user", "messageId": "m1",
                                 "parts": [{"kind": "text", "text": "hi"}]}});
    let v10 =
        json!({"message": {"role": "ROLE_USER", "messageId": "m2", "parts": [{"text": "hi"}]}});

    for header in [None, Some(""), Some("0.3"), Some("0.3.0")] {
        let (status, body) = send(header, &s.base, "message/send", v03.clone()).await;
        assert_eq!(status, 200, "{header:?}: {body}");
        assert_eq!(
            body["result"]["status"]["state"], "completed",
            "{header:?}: {body}"
        );
    }
    for (header, url) in [
        (Some("1.0"), s.base.clone()),
        (Some("1.0.1"), s.base.clone()),
        (None, format!("{}?A2A-Version=1.0", s.base)),
        // No header and a v1.0 method name: the names say which codec.
        (None, s.base.clone()),
    ] {
        let (status, body) = send(header, &url, "SendMessage", v10.clone()).await;
        assert_eq!(status, 200, "{header:?} {url}: {body}");
        assert_eq!(
            body["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{body}"
        );
        assert!(body["result"]["task"].get("kind").is_none(), "{body}");
    }
    let (status, body) = send(Some("99.0"), &s.base, "SendMessage", v10.clone()).await;
    assert_eq!(
        (status, body["error"]["code"].as_i64()),
        (400, Some(-32009)),
        "{body}"
    );
    assert_eq!(body["error"]["data"][0]["reason"], "VERSION_NOT_SUPPORTED");
    assert_eq!(body["id"], Value::Null);
    // A version header that names the other generation's method: method not found.
    let (_, body) = send(Some("1.0"), &s.base, "message/send", v03).await;
    assert_eq!(body["error"]["code"], -32601, "{body}");
    assert_eq!(body["id"], 7);
    let (_, body) = send(Some("0.3"), &s.base, "SendMessage", v10).await;
    assert_eq!(body["error"]["code"], -32601, "{body}");
    // The REST binding answers the version error as a google.rpc.Status.
    let r = http
        .get(format!("{}tasks/x", s.base))
        .header("A2A-Version", "7")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["status"], "FAILED_PRECONDITION", "{body}");
}

/// `A2A-Extensions`: a required extension missing from the request is -32008; requested
/// extensions the agent supports are echoed; unknown ones are ignored.
#[tokio::test]
async fn extensions_are_required_and_echoed() {
    const REQUIRED: &str = "https://example.com/ext/required/v1";
    const OPTIONAL: &str = "https://example.com/ext/optional/v1";
    let s = common::agent_server(
        |url| {
            let mut card = agentry::agents::Echo::card(url);
            for (uri, required) in [(REQUIRED, true), (OPTIONAL, false)] {
                card.capabilities.extensions.push(AgentExtension {
                    uri: uri.into(),
                    description: None,
                    required: Some(required),
                    params: None,
                });
            }
            card
        },
        agentry::agents::Echo::default(),
    )
    .await;
    let http = reqwest::Client::new();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "none"}});
    let r = http
        .post(&s.base)
        .header("A2A-Version", "1.0")
        .json(&body)
        .send()
        .await
        .unwrap();
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], -32008, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains(REQUIRED),
        "{v}"
    );
    let r = http
        .post(&s.base)
        .header("A2A-Version", "1.0")
        .header(
            "A2A-Extensions",
            format!("{REQUIRED}, {OPTIONAL}, https://unknown.example/x"),
        )
        .json(&body)
        .send()
        .await
        .unwrap();
    let echoed = r.headers()["a2a-extensions"].to_str().unwrap().to_owned();
    assert_eq!(echoed, format!("{REQUIRED}, {OPTIONAL}"));
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], -32001, "past the extension check: {v}");
}

/// A raw HTTP server that answers `tasks/get` with a dropped connection, then a 503 asking to
/// retry after a second, then the task; and `message/send` with 503 every time. Returns its
/// URL and the log of (method, when) it saw.
async fn flaky_server() -> (
    String,
    std::sync::Arc<std::sync::Mutex<Vec<(String, std::time::Instant)>>>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/", l.local_addr().unwrap());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        let mut gets = 0;
        while let Ok((mut sock, _)) = l.accept().await {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            let (head_end, len) = loop {
                let n = sock.read(&mut chunk).await.unwrap_or(0);
                if n == 0 {
                    break (0, 0);
                }
                buf.extend_from_slice(&chunk[..n]);
                if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&buf[..i]).to_ascii_lowercase();
                    let len = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse::<usize>().ok())
                        .unwrap_or(0);
                    break (i + 4, len);
                }
            };
            while buf.len() < head_end + len {
                let n = sock.read(&mut chunk).await.unwrap_or(0);
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            let req: Value = serde_json::from_slice(&buf[head_end..]).unwrap_or(Value::Null);
            let method = req["method"].as_str().unwrap_or("").to_owned();
            log.lock()
                .unwrap()
                .push((method.clone(), std::time::Instant::now()));
            let unavailable = |after: u32| {
                format!(
                    "HTTP/1.1 503 Service Unavailable\r\nRetry-After: {after}\r\n\
                     Content-Length: 0\r\nConnection: close\r\n\r\n"
                )
            };
            let answer = match method.as_str() {
                "tasks/get" => {
                    gets += 1;
                    match gets {
                        1 => continue, // dropped: the socket closes unanswered
                        2 => unavailable(1),
                        _ => {
                            let body = json!({"jsonrpc": "2.0", "id": req["id"], "result":
                                {"kind": "task", "id": "t1", "contextId": "c1",
                                 "status": {"state": "completed"}}})
                            .to_string();
                            format!(
                                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                                body.len()
                            )
                        }
                    }
                }
                _ => unavailable(0),
            };
            let _ = sock.write_all(answer.as_bytes()).await;
        }
    });
    (base, seen)
}

/// Issue 19, item 5: what is safe to repeat is retried after a dropped connection and after a
/// 503, waiting at least the server's `Retry-After`; `message/send` is never repeated (the
/// agent could run twice).
#[tokio::test]
async fn the_client_retries_only_what_is_safe_to_repeat() {
    let (base, seen) = flaky_server().await;
    let cfg = ClientConfig {
        backoff: Duration::from_millis(10),
        ..Default::default()
    };
    let c = A2aClient::new(&base, cfg).unwrap();
    let task = c.get_task("t1", None).await.unwrap();
    assert_eq!(task.state(), TaskState::Completed);
    let log = seen.lock().unwrap().clone();
    assert_eq!(log.len(), 3, "dropped, 503, answered: {log:?}");
    let waited = log[2].1 - log[1].1;
    assert!(
        waited >= Duration::from_millis(900),
        "Retry-After: 1 was not honoured ({waited:?})"
    );
    seen.lock().unwrap().clear();
    let e = c
        .send_message(MessageSendParams::new(Message::text(Role::User, "once")))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("503"), "{e}");
    assert_eq!(seen.lock().unwrap().len(), 1, "message/send was repeated");
}

/// Asks for more on every turn: a task that takes messages until something refuses them.
struct AlwaysAsks;
impl agentry_a2a::server::AgentExecutor for AlwaysAsks {
    async fn execute(
        &self,
        _ctx: agentry_a2a::server::RequestContext,
        ev: agentry_a2a::server::EventSink,
    ) -> Result<(), agentry_a2a::server::ExecutorError> {
        ev.input_required(Some(ev.agent_text("more?"))).await
    }
}

async fn asks_server(body_limit: usize) -> common::TestServer {
    let (listener, url) = common::bind().await;
    let svc = agentry_a2a::server::AgentService::new(
        agentry::agents::Echo::card(&url),
        AlwaysAsks,
        std::sync::Arc::new(agentry_a2a::store::MemoryStore::default()),
    );
    let config = ServerConfig {
        body_limit,
        ..Default::default()
    };
    common::serve_on(listener, svc, config).await
}

/// A task is rewritten on every save, so it stops taking messages at `MAX_TASK_BYTES`,
/// whether it grew there turn by turn or (with a body limit above the default) in one
/// request; the error says so and the task stays as it was.
#[tokio::test]
async fn a_task_takes_no_messages_past_its_size_cap() {
    use agentry_a2a::server::MAX_TASK_BYTES;
    let piece = MAX_TASK_BYTES / 4 - (64 << 10);
    let s = asks_server(ServerConfig::default().body_limit).await;
    let c = A2aClient::discover(&s.base, ClientConfig::default())
        .await
        .unwrap();
    let ask = |m: Message| async {
        match c.send_message(MessageSendParams::new(m)).await {
            Ok(SendMessageResult::Task(t)) => Ok(t),
            Ok(other) => panic!("expected a task, got {other:?}"),
            Err(e) => Err(e),
        }
    };
    let t = ask(Message::text(Role::User, "x".repeat(piece)))
        .await
        .unwrap();
    assert_eq!(t.state(), TaskState::InputRequired);
    let more = || Message::text(Role::User, "x".repeat(piece)).in_task(&t.id, &t.context_id);
    for _ in 0..3 {
        assert_eq!(ask(more()).await.unwrap().state(), TaskState::InputRequired);
    }
    let e = ask(more()).await.unwrap_err();
    assert_eq!(common::rpc_code(e), -32602);
    let kept = c.get_task(&t.id, None).await.unwrap();
    assert_eq!(
        kept.history.iter().filter(|m| m.role == Role::User).count(),
        4
    );
    assert_eq!(kept.state(), TaskState::InputRequired);

    // A body limit that lets one request exceed the cap: the new task is measured too.
    let s = asks_server(MAX_TASK_BYTES * 2).await;
    let c = A2aClient::discover(&s.base, ClientConfig::default())
        .await
        .unwrap();
    let e = c
        .send_message(MessageSendParams::new(Message::text(
            Role::User,
            "x".repeat(MAX_TASK_BYTES + 1),
        )))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("too large"), "{e}");
    assert_eq!(common::rpc_code(e), -32602);
}

/// A hostile peer cannot make the client hold more than its limit: a card, an answer
/// streamed without a length, an event that never ends (the peer streams it forever) and an
/// error body are each refused or cut as they arrive, with an error that says so.
#[tokio::test]
async fn a_peer_cannot_make_the_client_hold_more_than_its_limit() {
    use agentry_a2a::A2aError;
    use axum::body::{Body, Bytes};
    use axum::http::{StatusCode, header};
    use axum::response::IntoResponse;
    use axum::routing::{get, post};
    use futures_util::stream;

    const LIMIT: usize = 4 << 10;
    let kib = || Ok::<_, std::io::Error>(Bytes::from(vec![b' '; 1024]));
    let app = axum::Router::new()
        .route(
            "/.well-known/agent-card.json",
            get(|| async {
                let mut card = json!({"name": "big", "description": "x".repeat(2 * LIMIT)});
                card["url"] = json!("http://127.0.0.1/");
                axum::Json(card)
            }),
        )
        // A JSON-RPC answer of 8 KiB in 1 KiB chunks, no Content-Length.
        .route(
            "/chunked",
            post(move || async move {
                let body = Body::from_stream(stream::iter((0..8).map(move |_| kib())));
                ([(header::CONTENT_TYPE, "application/json")], body)
            }),
        )
        // An event stream whose one event never ends.
        .route(
            "/endless",
            post(|| async {
                let first = stream::once(async { Ok(Bytes::from_static(b"data: {")) });
                let body = Body::from_stream(first.chain(stream::repeat_with(|| {
                    Ok::<_, std::io::Error>(Bytes::from(vec![b' '; 1024]))
                })));
                ([(header::CONTENT_TYPE, "text/event-stream")], body)
            }),
        )
        // An error with a 1 MiB text body.
        .route(
            "/error",
            post(|| async { (StatusCode::BAD_GATEWAY, "e".repeat(1 << 20)).into_response() }),
        );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, app).await });
    let cfg = ClientConfig {
        retries: 0,
        max_response_bytes: LIMIT,
        ..Default::default()
    };
    let too_large = |e: &A2aError| matches!(e, A2aError::TooLarge { limit, .. } if *limit == LIMIT);

    let e = A2aClient::discover(&base, cfg.clone()).await.err().unwrap();
    assert!(too_large(&e), "card: {e}");
    // A client that takes more reads it (and finds it is no card: only its size was tried).
    let roomy = ClientConfig {
        max_response_bytes: 4 * LIMIT,
        ..cfg.clone()
    };
    let e = A2aClient::discover(&base, roomy).await.err().unwrap();
    assert!(matches!(e, A2aError::InvalidCard { .. }), "{e}");

    let send = || MessageSendParams::new(Message::text(Role::User, "x"));
    let c = A2aClient::new(&format!("{base}/chunked"), cfg.clone()).unwrap();
    let e = c.send_message(send()).await.err().unwrap();
    assert!(too_large(&e), "chunked answer: {e}");

    let c = A2aClient::new(&format!("{base}/endless"), cfg.clone()).unwrap();
    let evs: Vec<_> =
        tokio::time::timeout(Duration::from_secs(30), c.stream_message(send()).collect())
            .await
            .expect("the stream ends");
    let last = evs.last().unwrap().as_ref().unwrap_err();
    assert!(too_large(last), "endless event: {last}");

    let c = A2aClient::new(&format!("{base}/error"), cfg).unwrap();
    match c.send_message(send()).await {
        Err(A2aError::Http { status, body, .. }) => {
            assert_eq!(status, 502);
            assert!(
                body.starts_with("eee") && body.len() <= 8 << 10,
                "{}",
                body.len()
            );
        }
        other => panic!("{other:?}"),
    }
}

/// A gRPC call to an address with no gRPC behind it (here a path no route serves) is an HTTP
/// error the client names, unary or streamed: its body is not read as gRPC frames.
#[cfg(feature = "grpc")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_to_no_grpc_service_is_an_http_error() {
    use agentry_a2a::client::Binding;
    use agentry_a2a::version::ProtocolVersion;
    let s = common::echo_server().await;
    let client = A2aClient::new(&format!("{}nowhere", s.base), ClientConfig::default())
        .unwrap()
        .with_version(ProtocolVersion::V1_0)
        .with_binding(Binding::Grpc);
    let e = client
        .send_message(MessageSendParams::new(common::user("hi")))
        .await
        .unwrap_err();
    assert!(
        matches!(e, agentry_a2a::A2aError::Http { status: 404, .. }),
        "{e:?}"
    );
    let mut stream =
        std::pin::pin!(client.stream_message(MessageSendParams::new(common::user("hi"))));
    let first = stream.next().await.expect("one item");
    assert!(
        matches!(first, Err(agentry_a2a::A2aError::Http { status: 404, .. })),
        "{first:?}"
    );
}
