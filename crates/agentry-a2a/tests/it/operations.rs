//! Operations: the probes a load balancer reads (`/healthz`, `/readyz`, draining on
//! shutdown) and the Prometheus metrics (requests, latency, open streams, tasks by state).

use std::sync::Arc;
use std::time::Duration;

use agentry::agents::{Conformance, Echo, EchoMode};
use agentry_a2a::server::{A2aServer, AgentService, ServerConfig};
use agentry_a2a::store::{SqliteStore, TaskStore};
use serde_json::json;

use crate::common;

async fn get(url: &str, host: Option<&str>) -> (u16, String) {
    let mut r = reqwest::Client::new().get(url);
    if let Some(h) = host {
        r = r.header("Host", h);
    }
    let r = r.send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// The value of the sample whose name and labels are `selector`.
fn sample(metrics: &str, selector: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(selector)?.trim().parse().ok())
}

fn send_03(text: &str, message_id: &str) -> serde_json::Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {
        "role": "user", "messageId": message_id, "parts": [{"kind": "text", "text": text}]}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_and_metrics_count_requests_streams_and_tasks() {
    let dir = agentry_testkit::Scratch::new("ops");
    let db = dir.join("tasks.db");
    let store: Arc<dyn TaskStore> = Arc::new(SqliteStore::open(&db).unwrap());
    let (listener, url) = common::bind().await;
    let svc = AgentService::new(
        Conformance::card(&url),
        Conformance {
            resubscribe_window: Duration::from_secs(2),
        },
        store,
    );
    let config = ServerConfig {
        metrics: true,
        allowed_hosts: Some(vec!["agents.example".into()]),
        ..Default::default()
    };
    let s = common::serve_on(listener, svc, config).await;
    let host = Some("agents.example");
    let http = reqwest::Client::new();

    // Probes answer whatever the Host (a balancer checks by address); metrics are guarded.
    assert_eq!(
        get(&format!("{}healthz", s.base), None).await,
        (200, "ok\n".into())
    );
    assert_eq!(
        get(&format!("{}readyz", s.base), None).await,
        (200, "ready\n".into())
    );
    assert_eq!(get(&format!("{}metrics", s.base), None).await.0, 421);

    for i in 0..3 {
        let r = http
            .post(&s.base)
            .header("Host", "agents.example")
            .json(&send_03("hello", &format!("m-{i}")))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    let r = http
        .post(format!("{}message:send", s.base))
        .header("Host", "agents.example")
        .json(&json!({"message": {"role": "ROLE_USER", "messageId": "m-rest", "parts": [{"text": "hi"}]}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = http
        .post(&s.base)
        .header("Host", "agents.example")
        .json(&json!({"jsonrpc": "2.0", "id": 9, "method": "tasks/nope", "params": {}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "a JSON-RPC error is an HTTP 200");

    // A stream that stays open for two seconds.
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "message/stream", "params": {"message": {
        "role": "user", "messageId": "test-resubscribe-message-id-ops", "parts": [{"kind": "text", "text": "x"}]}}});
    let stream = http
        .post(&s.base)
        .header("Host", "agents.example")
        .json(&body)
        .send()
        .await
        .unwrap();
    let (status, m) = get(&format!("{}metrics", s.base), host).await;
    assert_eq!(status, 200);
    let agent = "agent=\"conformance\"";
    assert_eq!(
        sample(&m, &format!("a2a_streams_open{{{agent}}}")),
        Some(1.0),
        "{m}"
    );
    let req = |method: &str, binding: &str, code: u16| {
        format!(
            "a2a_requests_total{{{agent},method=\"{method}\",binding=\"{binding}\",code=\"{code}\"}}"
        )
    };
    assert_eq!(
        sample(&m, &req("message/send", "jsonrpc", 200)),
        Some(3.0),
        "{m}"
    );
    assert_eq!(
        sample(&m, &req("SendMessage", "http+json", 200)),
        Some(1.0),
        "{m}"
    );
    assert_eq!(
        sample(&m, &req("unknown", "jsonrpc", 200)),
        Some(1.0),
        "{m}"
    );
    assert_eq!(
        sample(&m, &req("message/stream", "jsonrpc", 200)),
        Some(1.0),
        "{m}"
    );
    let count = format!(
        "a2a_request_duration_seconds_count{{{agent},method=\"message/send\",binding=\"jsonrpc\"}}"
    );
    assert_eq!(sample(&m, &count), Some(3.0), "{m}");
    let inf = format!(
        "a2a_request_duration_seconds_bucket{{{agent},method=\"message/send\",binding=\"jsonrpc\",le=\"+Inf\"}}"
    );
    assert_eq!(sample(&m, &inf), Some(3.0), "{m}");
    assert_eq!(
        sample(&m, &format!("a2a_store_up{{{agent}}}")),
        Some(1.0),
        "{m}"
    );

    // The stream ends; it is no longer open, and its task is counted as completed.
    let text = stream.text().await.unwrap();
    assert!(text.contains("\"final\":true"), "{text}");
    let (_, m) = get(&format!("{}metrics", s.base), host).await;
    assert_eq!(
        sample(&m, &format!("a2a_streams_open{{{agent}}}")),
        Some(0.0),
        "{m}"
    );
    let total: f64 = agentry_a2a::model::TaskState::ALL
        .iter()
        .filter_map(|st| {
            sample(
                &m,
                &format!("a2a_tasks{{{agent},state=\"{}\"}}", st.as_str()),
            )
        })
        .sum();
    assert_eq!(total, 5.0, "every task the five sends made, by state: {m}");
    assert!(
        sample(&m, &format!("a2a_tasks{{{agent},state=\"completed\"}}")).unwrap_or(0.0) >= 1.0,
        "{m}"
    );
    // The SQLite store's writer: nothing failed; the queue is as long as what is waiting
    // (nothing, or a save still on its way), never the history of writes.
    assert_eq!(
        sample(&m, &format!("a2a_store_write_errors_total{{{agent}}}")),
        Some(0.0),
        "{m}"
    );
    let waiting = sample(&m, &format!("a2a_store_pending_writes{{{agent}}}"));
    assert!(waiting.is_some_and(|n| n <= 1.0), "{m}");
    // No bus here: no bus figures.
    assert!(!m.contains("a2a_bus_errors_total{"), "{m}");
}

#[tokio::test]
async fn metrics_are_off_unless_asked_for() {
    let (listener, url) = common::bind().await;
    let svc = AgentService::new(
        Echo::card(&url),
        Echo::default(),
        Arc::new(agentry_a2a::store::MemoryStore::default()),
    );
    let s = common::serve_on(listener, svc, ServerConfig::default()).await;
    assert_eq!(get(&format!("{}metrics", s.base), None).await.0, 404);
    assert_eq!(get(&format!("{}healthz", s.base), None).await.0, 200);
}

/// On shutdown a replica first says it is draining (503 on `/readyz`) while it still
/// answers, so the balancer takes it out before it stops accepting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_drains_readiness_first_and_still_answers() {
    let (listener, url) = common::bind().await;
    let svc = AgentService::new(
        Echo::card(&url),
        Echo {
            mode: EchoMode::Message,
        },
        Arc::new(agentry_a2a::store::MemoryStore::default()),
    );
    let config = ServerConfig {
        drain_delay: Duration::from_secs(2),
        ..Default::default()
    };
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(A2aServer::new().config(config).agent("/", svc).serve(
        listener,
        async {
            let _ = rx.await;
        },
    ));
    assert_eq!(get(&format!("{url}readyz"), None).await.0, 200);
    stop.send(()).unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        get(&format!("{url}readyz"), None).await,
        (503, "draining\n".into())
    );
    let r = reqwest::Client::new()
        .post(&url)
        .json(&send_03("still here", "m-drain"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains("still here"));
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("the server stops after the drain delay")
        .unwrap()
        .unwrap();
}
