//! The harness against agents that fail: 5xx answers are retried and counted, a turn that
//! never succeeds makes the simulation an infrastructure error (retried, then listed apart
//! and left out of the score), a slow agent times out the same way, a failed task is the
//! agent's own failure (scored 0), and a resumed run redoes only what did not finish.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use agentry_eval::domain::Domain;
use agentry_eval::metrics;
use agentry_eval::results::Results;
use agentry_eval::run::agent::{A2aAgent, A2aAgentConfig};
use agentry_eval::run::sim::Limits;
use agentry_eval::run::{EvalConfig, run};
use agentry_eval::score::Termination;
use agentry_eval::task::Task;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::sync::oneshot;

use crate::e2e::{Oracle, Served, by_task, script, serve, tempdir};

/// A front that forwards to the real agent, except: every `every`th POST gets a 503, and
/// every POST whose body names `poisoned` gets a 503 while `poisoned_on` holds.
struct Front {
    backend: String,
    base: String,
    http: reqwest::Client,
    posts: AtomicUsize,
    every: usize,
    poisoned: Option<String>,
    poisoned_on: AtomicBool,
    /// The first POST of each conversation (the one naming its task) reaches the agent, but
    /// its answer is replaced by a 502.
    lose: bool,
    lost: std::sync::Mutex<std::collections::HashSet<String>>,
    /// The stream of each conversation's first turn is cut after its first event.
    cut: bool,
    cuts: AtomicUsize,
}

/// Sends the request on to the agent, with its headers (but the front's host and length).
async fn forward(
    http: &reqwest::Client,
    method: axum::http::Method,
    url: &str,
    headers: &HeaderMap,
    body: Bytes,
) -> reqwest::Response {
    let mut req = http.request(method, url).body(body);
    for (k, v) in headers {
        if k != "host" && k != "content-length" {
            req = req.header(k, v);
        }
    }
    req.send().await.unwrap()
}

async fn handle(
    State(f): State<Arc<Front>>,
    method: axum::http::Method,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let url = format!("{}{}", f.backend.trim_end_matches('/'), uri);
    if method == axum::http::Method::POST {
        let n = f.posts.fetch_add(1, Ordering::SeqCst) + 1;
        let poisoned = f.poisoned_on.load(Ordering::SeqCst)
            && f.poisoned
                .as_ref()
                .is_some_and(|p| String::from_utf8_lossy(&body).contains(p.as_str()));
        if poisoned || (f.every > 0 && n % f.every == 0) {
            return (StatusCode::SERVICE_UNAVAILABLE, "try again").into_response();
        }
        let marker = String::from_utf8_lossy(&body)
            .split("[task:")
            .nth(1)
            .map(|rest| rest.split(']').next().unwrap_or_default().to_owned());
        let first = marker.is_some_and(|m| f.lost.lock().unwrap().insert(m));
        let text = String::from_utf8_lossy(&body);
        let streaming = text.contains(r#""method":"message/stream""#)
            || text.contains(r#""method":"SendStreamingMessage""#);
        if f.cut && first && streaming {
            let resp = forward(&f.http, axum::http::Method::POST, &url, &headers, body).await;
            let ctype = resp.headers().get("content-type").cloned();
            let mut stream = resp.bytes_stream();
            let mut got = Vec::new();
            use futures_util::StreamExt;
            while let Some(Ok(chunk)) = stream.next().await {
                got.extend_from_slice(&chunk);
                if let Some(end) = got.windows(2).position(|w| w == b"\n\n") {
                    got.truncate(end + 2);
                    break;
                }
            }
            f.cuts.fetch_add(1, Ordering::SeqCst);
            // The first event, then the connection breaks (not a clean end of the stream).
            let body = futures_util::stream::iter(vec![
                Ok::<_, std::io::Error>(Bytes::from(got)),
                Err(std::io::Error::other("connection reset")),
            ]);
            let mut r = (StatusCode::OK, axum::body::Body::from_stream(body)).into_response();
            if let Some(c) = ctype {
                r.headers_mut().insert("content-type", c);
            }
            return r;
        }
        if f.lose && first {
            let _ = forward(&f.http, axum::http::Method::POST, &url, &headers, body)
                .await
                .bytes()
                .await;
            return (StatusCode::BAD_GATEWAY, "the answer was lost").into_response();
        }
    }
    let resp = forward(&f.http, method, &url, &headers, body).await;
    let status = resp.status();
    let ctype = resp.headers().get("content-type").cloned();
    // The card names the backend's URL: point it at the front.
    let text = resp
        .text()
        .await
        .unwrap()
        .replace(&f.backend, &f.base)
        .replace(
            f.backend.trim_end_matches('/'),
            f.base.trim_end_matches('/'),
        );
    let mut r = (status, text).into_response();
    if let Some(c) = ctype {
        r.headers_mut().insert("content-type", c);
    }
    r
}

async fn front(
    backend: &Served,
    every: usize,
    poisoned: Option<&str>,
) -> (Arc<Front>, oneshot::Sender<()>) {
    front_with(backend, every, poisoned, false, false).await
}

async fn front_with(
    backend: &Served,
    every: usize,
    poisoned: Option<&str>,
    lose: bool,
    cut: bool,
) -> (Arc<Front>, oneshot::Sender<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/", listener.local_addr().unwrap());
    let f = Arc::new(Front {
        backend: backend.base.clone(),
        base,
        http: reqwest::Client::new(),
        posts: AtomicUsize::new(0),
        every,
        poisoned: poisoned.map(|p| format!("[task:{p}]")),
        poisoned_on: AtomicBool::new(true),
        lose,
        lost: Default::default(),
        cut,
        cuts: AtomicUsize::new(0),
    });
    let app = axum::Router::new().fallback(handle).with_state(f.clone());
    let (stop, rx) = oneshot::channel::<()>();
    tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = rx.await;
            })
            .await
            .unwrap();
    });
    (f, stop)
}

fn config(domain: &Domain, tasks: Vec<Task>, dir: &std::path::Path) -> EvalConfig {
    EvalConfig {
        domain: domain.clone(),
        tasks,
        trials: 1,
        concurrency: 2,
        limits: Limits::default(),
        max_retries: 1,
        seed: 300,
        save_to: Some(dir.to_owned()),
    }
}

async fn agent(base: &str, timeout: Duration) -> A2aAgent {
    A2aAgent::connect(A2aAgentConfig {
        endpoint: base.to_owned(),
        timeout,
        stream: Some(false),
        retries: 2,
        ..Default::default()
    })
    .await
    .unwrap()
}

const TASKS: [&str; 3] = ["create_task_1", "update_task_1", "impossible_task_1"];

fn tasks(domain: &Domain) -> Vec<Task> {
    let ids: Vec<String> = TASKS.iter().map(|s| s.to_string()).collect();
    domain.select(&ids, None, None).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn answers_of_503_are_retried_counted_and_change_no_score() {
    let domain = Domain::builtin("mock").unwrap();
    let backend = serve(Oracle::new(&domain, None)).await;
    let (f, _stop) = front(&backend, 3, None).await;
    let dir = tempdir("flaky");
    let tasks = tasks(&domain);
    let results = run(
        config(&domain, tasks.clone(), &dir),
        Arc::new(agent(&f.base, Duration::from_secs(10)).await),
        Arc::new(script(&tasks)),
        None,
        |_| {},
    )
    .await
    .unwrap();
    let m = metrics::compute(&results.simulations, 1);
    assert_eq!(m.infrastructure_errors, 0);
    assert!(m.retries > 0, "every third request failed once: {m:?}");
    for (task, rewards) in by_task(&results) {
        assert_eq!(rewards, vec![1.0], "task {task}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_turn_that_never_succeeds_is_an_infrastructure_error_and_a_resume_redoes_only_it() {
    let domain = Domain::builtin("mock").unwrap();
    let backend = serve(Oracle::new(&domain, None)).await;
    let (f, _stop) = front(&backend, 0, Some("update_task_1")).await;
    let dir = tempdir("poisoned");
    let tasks = tasks(&domain);
    let first = run(
        config(&domain, tasks.clone(), &dir),
        Arc::new(agent(&f.base, Duration::from_secs(10)).await),
        Arc::new(script(&tasks)),
        None,
        |_| {},
    )
    .await
    .unwrap();
    let infra: Vec<_> = first
        .simulations
        .iter()
        .filter(|s| s.termination_reason == Termination::InfrastructureError)
        .collect();
    assert_eq!(infra.len(), 1);
    assert_eq!(infra[0].task_id, "update_task_1");
    assert!(
        infra[0].reward_info.is_none() && infra[0].messages.is_empty(),
        "tau2's placeholder"
    );
    assert_eq!(infra[0].info["failed_after_attempts"], 2);
    assert!(infra[0].info["error"].as_str().unwrap().contains("503"));
    let m = metrics::compute(&first.simulations, 1);
    assert_eq!(m.infrastructure_errors, 1);
    assert_eq!(
        m.pass_hat_k[0].value, 1.0,
        "the failed simulation is not in the score"
    );
    // tau2 reads the placeholder as its own and leaves it out of its metrics too.
    crate::e2e::assert_tau2_agrees(&dir, &first);

    // The agent recovers; the resumed run redoes the failed simulation only.
    f.poisoned_on.store(false, Ordering::SeqCst);
    let done: Vec<String> = first
        .simulations
        .iter()
        .filter(|s| s.termination_reason != Termination::InfrastructureError)
        .map(|s| s.id.clone())
        .collect();
    let second = run(
        config(&domain, tasks.clone(), &dir),
        Arc::new(agent(&f.base, Duration::from_secs(10)).await),
        Arc::new(script(&tasks)),
        None,
        |_| {},
    )
    .await
    .unwrap();
    assert_eq!(second.simulations.len(), 3);
    for id in &done {
        assert!(
            second.simulations.iter().any(|s| &s.id == id),
            "{id} kept as it was"
        );
    }
    assert!(
        second
            .simulations
            .iter()
            .all(|s| s.reward_info.as_ref().is_some_and(|r| r.reward == 1.0))
    );
    assert_eq!(
        Results::load(&dir.join("results.json"))
            .unwrap()
            .simulations
            .len(),
        3
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slow_agent_times_out_and_a_failed_task_is_the_agents_failure() {
    let domain = Domain::builtin("mock").unwrap();
    let mut oracle = Oracle::new(&domain, None);
    oracle.slow = Some(("create_task_1".into(), Duration::from_secs(3)));
    oracle.fail = Some("impossible_task_1".into());
    let backend = serve(oracle).await;
    let dir = tempdir("slow");
    let tasks = tasks(&domain);
    let mut cfg = config(&domain, tasks.clone(), &dir);
    cfg.max_retries = 0;
    let results = run(
        cfg,
        Arc::new(agent(&backend.base, Duration::from_millis(700)).await),
        Arc::new(script(&tasks)),
        None,
        |_| {},
    )
    .await
    .unwrap();
    let get = |id: &str| {
        results
            .simulations
            .iter()
            .find(|s| s.task_id == id)
            .unwrap()
    };
    let slow = get("create_task_1");
    assert_eq!(slow.termination_reason, Termination::InfrastructureError);
    assert!(
        slow.info["error"].as_str().unwrap().contains("timed out"),
        "{}",
        slow.info
    );
    let failed = get("impossible_task_1");
    assert_eq!(failed.termination_reason, Termination::AgentError);
    assert_eq!(failed.reward_info.as_ref().unwrap().reward, 0.0);
    assert_eq!(
        failed.info["agentry"]["protocol_errors"][0]["code"],
        "task failed"
    );
    assert_eq!(
        get("update_task_1").reward_info.as_ref().unwrap().reward,
        1.0
    );
    let m = metrics::compute(&results.simulations, 1);
    assert_eq!(
        (m.infrastructure_errors, m.protocol_errors["task failed"]),
        (1, 1)
    );
    assert!(
        (m.avg_reward - 0.5).abs() < 1e-9,
        "the failed task counts, the timed-out one does not"
    );
}

/// A turn whose answer is lost after the agent ran it is sent again with the same idempotency
/// key (agentry's task envelope): an agentry server answers with the first run's task instead
/// of running the turn twice. The oracle counts its turns, so a second run of its first turn
/// would skip the tool calls and fail every task.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_retried_turn_is_not_run_twice_by_a_server_that_honours_idempotency_keys() {
    let domain = Domain::builtin("mock").unwrap();
    let mut oracle = Oracle::new(&domain, None);
    oracle.once = true;
    let backend = serve(oracle).await;
    let (f, _stop) = front_with(&backend, 0, None, true, false).await;
    let dir = tempdir("lost");
    let tasks = tasks(&domain);
    let results = run(
        config(&domain, tasks.clone(), &dir),
        Arc::new(agent(&f.base, Duration::from_secs(10)).await),
        Arc::new(script(&tasks)),
        None,
        |_| {},
    )
    .await
    .unwrap();
    let m = metrics::compute(&results.simulations, 1);
    assert_eq!(
        m.retries, 3,
        "each conversation's first answer was lost once"
    );
    assert_eq!(m.infrastructure_errors, 0);
    for (task, rewards) in by_task(&results) {
        assert_eq!(rewards, vec![1.0], "task {task}: a turn ran twice");
    }
}

/// A stream whose connection breaks after its first event (the agent's task named, its answer
/// not yet sent) is not the agent's failure: the turn is sent again with the same idempotency
/// key, and the agent (which does each task's work once) is not made to run it twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dropped_stream_is_followed_to_the_end_of_the_turn() {
    let domain = Domain::builtin("mock").unwrap();
    let mut oracle = Oracle::new(&domain, None);
    oracle.once = true;
    let backend = serve(oracle).await;
    let (f, _stop) = front_with(&backend, 0, None, false, true).await;
    let dir = tempdir("cut");
    let tasks = tasks(&domain);
    let agent = A2aAgent::connect(A2aAgentConfig {
        endpoint: f.base.clone(),
        timeout: Duration::from_secs(10),
        stream: Some(true),
        ..Default::default()
    })
    .await
    .unwrap();
    let results = run(
        config(&domain, tasks.clone(), &dir),
        Arc::new(agent),
        Arc::new(script(&tasks)),
        None,
        |_| {},
    )
    .await
    .unwrap();
    assert_eq!(
        f.cuts.load(Ordering::SeqCst),
        3,
        "each conversation's first stream was cut"
    );
    let m = metrics::compute(&results.simulations, 1);
    assert_eq!(m.infrastructure_errors, 0);
    assert_eq!(m.retries, 3, "each broken turn was sent once more");
    for (task, rewards) in by_task(&results) {
        assert_eq!(rewards, vec![1.0], "task {task}");
    }
}
