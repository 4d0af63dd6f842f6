//! Operations endpoints, for load balancers and monitoring:
//!
//! - `GET /healthz`: the process answers (200 `ok`).
//! - `GET /readyz`: every agent's task store answers a read and the server is not draining
//!   (200 `ready`, else 503 saying which).
//! - `GET /metrics` (when [`ServerConfig::metrics`](super::ServerConfig::metrics) is on):
//!   Prometheus text format: requests by agent, method, binding and HTTP status, their
//!   latency as histograms, open streams, tasks by state (from the store: the truth of every
//!   replica sharing it).
//!
//! Written by hand: a few counters and histograms do not need a metrics library. Recording a
//! request costs one uncontended lock of its agent's table.

use std::fmt::Write;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::{StatusCode, header};

use crate::model::TaskState;
use crate::store::TaskStore;

/// Latency histogram buckets, in seconds (0.5 ms to 10 s).
const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

#[derive(Default, Clone)]
struct Histogram {
    /// Per bucket (not cumulative); the last slot is `+Inf`.
    counts: [u64; BUCKETS.len() + 1],
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        let i = BUCKETS
            .iter()
            .position(|b| seconds <= *b)
            .unwrap_or(BUCKETS.len());
        self.counts[i] += 1;
        self.sum += seconds;
    }

    fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
}

#[derive(Default, Clone)]
struct PerMethod {
    latency: Histogram,
    /// Requests by HTTP status (a handful per method).
    statuses: Vec<(u16, u64)>,
}

/// (method, binding).
type MethodKey = (&'static str, &'static str);

/// One agent's request figures.
#[derive(Default)]
pub(crate) struct AgentMetrics {
    /// By (method, binding): a few dozen at most, so a list beats hashing on every request.
    by_method: Mutex<Vec<(MethodKey, PerMethod)>>,
    streams_open: AtomicI64,
    /// Tasks of a replica that stopped, taken over here (see the hub's sweep and workers).
    pub(crate) takeovers: AtomicU64,
    /// Turns queued here for the agent's workers.
    pub(crate) queued: AtomicU64,
    /// Queued turns run here.
    pub(crate) worked: AtomicU64,
}

impl AgentMetrics {
    /// Records one answered request. `method` is the A2A method (`unknown` when the request
    /// could not be decoded), `binding` `jsonrpc` or `http+json`.
    pub(crate) fn observe(
        &self,
        method: &'static str,
        binding: &'static str,
        status: u16,
        elapsed: Duration,
    ) {
        let mut list = self.by_method.lock().unwrap_or_else(|e| e.into_inner());
        let key = (method, binding);
        let i = match list.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                list.push((key, PerMethod::default()));
                list.len() - 1
            }
        };
        let m = &mut list[i].1;
        m.latency.observe(elapsed.as_secs_f64());
        match m.statuses.iter_mut().find(|(s, _)| *s == status) {
            Some((_, n)) => *n += 1,
            None => m.statuses.push((status, 1)),
        }
    }

    /// An SSE stream opened; the guard counts it closed when dropped.
    pub(crate) fn stream_opened(self: &Arc<Self>) -> StreamGuard {
        self.streams_open.fetch_add(1, Ordering::Relaxed);
        StreamGuard(self.clone())
    }
}

/// Counts an open stream until dropped.
pub(crate) struct StreamGuard(Arc<AgentMetrics>);

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.0.streams_open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What the operations endpoints read: every agent's metrics and store, and whether the
/// server is draining.
#[derive(Default)]
pub(crate) struct Ops {
    pub(crate) agents: Vec<AgentOps>,
    pub(crate) draining: Arc<AtomicBool>,
}

/// One agent as the operations endpoints see it.
pub(crate) struct AgentOps {
    pub(crate) name: String,
    pub(crate) metrics: Arc<AgentMetrics>,
    pub(crate) store: Arc<dyn TaskStore>,
    /// Its task events shared with replicas, and its work queue, when it has them.
    pub(crate) events: Option<Arc<dyn super::TaskEvents>>,
    pub(crate) queue: Option<Arc<dyn super::queue::WorkQueue>>,
}

/// `/healthz` and `/readyz`.
pub(crate) fn probe_routes(ops: Arc<Ops>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .with_state(ops)
}

/// `/metrics`.
pub(crate) fn metrics_route(ops: Arc<Ops>) -> Router {
    Router::new().route("/metrics", get(render)).with_state(ops)
}

async fn ready(State(ops): State<Arc<Ops>>) -> Response {
    if ops.draining.load(Ordering::Relaxed) {
        return (StatusCode::SERVICE_UNAVAILABLE, "draining\n").into_response();
    }
    for AgentOps {
        name: agent, store, ..
    } in &ops.agents
    {
        let ping = tokio::time::timeout(Duration::from_secs(2), store.ping()).await;
        let why = match ping {
            Ok(Ok(())) => continue,
            Ok(Err(e)) => format!("the task store of {agent} failed: {e}\n"),
            Err(_) => format!("the task store of {agent} did not answer within 2 s\n"),
        };
        return (StatusCode::SERVICE_UNAVAILABLE, why).into_response();
    }
    (StatusCode::OK, "ready\n").into_response()
}

/// Prometheus label value escaping: backslash, quote, newline.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

async fn render(State(ops): State<Arc<Ops>>) -> Response {
    let mut out = String::new();
    let _ = write_metrics(&ops, &mut out).await;
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        out,
    )
        .into_response()
}

/// A metric family's `# HELP` and `# TYPE` lines.
fn family(out: &mut String, name: &str, kind: &str, help: &str) -> std::fmt::Result {
    writeln!(out, "# HELP {name} {help}")?;
    writeln!(out, "# TYPE {name} {kind}")
}

/// A copy of an agent's figures in a stable order, so the lock requests take is held only
/// while copying.
fn snapshot(m: &AgentMetrics) -> Vec<(MethodKey, PerMethod)> {
    let mut list = m
        .by_method
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    list.sort_by_key(|(k, _)| *k);
    for (_, per) in &mut list {
        per.statuses.sort();
    }
    list
}

async fn write_metrics(ops: &Ops, out: &mut String) -> std::fmt::Result {
    let snapshots: Vec<_> = ops
        .agents
        .iter()
        .map(|a| (label(&a.name), snapshot(&a.metrics)))
        .collect();
    family(
        out,
        "a2a_requests_total",
        "counter",
        "A2A requests answered, by agent, method, binding and HTTP status.",
    )?;
    for (agent, list) in &snapshots {
        for ((method, binding), per) in list {
            for (status, n) in &per.statuses {
                writeln!(
                    out,
                    "a2a_requests_total{{agent=\"{agent}\",method=\"{method}\",binding=\"{binding}\",code=\"{status}\"}} {n}",
                )?;
            }
        }
    }
    family(
        out,
        "a2a_request_duration_seconds",
        "histogram",
        "Time to answer an A2A request (to the first byte of a stream).",
    )?;
    for (agent, list) in &snapshots {
        for ((method, binding), per) in list {
            let h = &per.latency;
            let labels = format!("agent=\"{agent}\",method=\"{method}\",binding=\"{binding}\"");
            let mut cumulative = 0;
            for (i, b) in BUCKETS.iter().enumerate() {
                cumulative += h.counts[i];
                writeln!(
                    out,
                    "a2a_request_duration_seconds_bucket{{{labels},le=\"{b}\"}} {cumulative}"
                )?;
            }
            writeln!(
                out,
                "a2a_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {}",
                h.count()
            )?;
            writeln!(
                out,
                "a2a_request_duration_seconds_sum{{{labels}}} {}",
                h.sum
            )?;
            writeln!(
                out,
                "a2a_request_duration_seconds_count{{{labels}}} {}",
                h.count()
            )?;
        }
    }
    family(out, "a2a_streams_open", "gauge", "SSE streams open now.")?;
    for AgentOps {
        name: agent,
        metrics: m,
        ..
    } in &ops.agents
    {
        writeln!(
            out,
            "a2a_streams_open{{agent=\"{}\"}} {}",
            label(agent),
            m.streams_open.load(Ordering::Relaxed)
        )?;
    }
    for (name, help, read) in [
        (
            "a2a_task_takeovers_total",
            "Tasks of a replica that stopped taken over here (recovered, or a queued turn run \
             again).",
            (|m: &AgentMetrics| m.takeovers.load(Ordering::Relaxed)) as fn(&AgentMetrics) -> u64,
        ),
        (
            "a2a_turns_queued_total",
            "Turns of new tasks queued here for the agent's workers.",
            |m: &AgentMetrics| m.queued.load(Ordering::Relaxed),
        ),
        (
            "a2a_turns_worked_total",
            "Queued turns run here.",
            |m: &AgentMetrics| m.worked.load(Ordering::Relaxed),
        ),
    ] {
        family(out, name, "counter", help)?;
        for AgentOps {
            name: agent,
            metrics: m,
            ..
        } in &ops.agents
        {
            writeln!(out, "{name}{{agent=\"{}\"}} {}", label(agent), read(m))?;
        }
    }
    family(
        out,
        "a2a_tasks",
        "gauge",
        "Tasks in the agent's task store, by state.",
    )?;
    let mut failed = Vec::new();
    for AgentOps {
        name: agent, store, ..
    } in &ops.agents
    {
        match store.count_by_state().await {
            Ok(Some(counts)) => {
                for s in TaskState::ALL {
                    let n = counts
                        .iter()
                        .find(|(st, _)| *st == s)
                        .map_or(0, |(_, n)| *n);
                    writeln!(
                        out,
                        "a2a_tasks{{agent=\"{}\",state=\"{}\"}} {n}",
                        label(agent),
                        s.as_str()
                    )?;
                }
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!("metrics: counting the tasks of {agent} failed: {e}");
                failed.push(agent);
            }
        }
    }
    // Figures only some agents have (a store that queues or counts, a bus): a line for
    // those that do.
    type Optional = fn(&AgentOps) -> Option<u64>;
    for (name, kind, help, read) in [
        (
            "a2a_store_pending_writes",
            "gauge",
            "Writes queued for the agent's task store and not yet applied (the agents sharing \
             a PostgreSQL database share its queue).",
            (|a: &AgentOps| a.store.pending_writes().map(|n| n as u64)) as Optional,
        ),
        (
            "a2a_store_write_errors_total",
            "counter",
            "Writes the agent's task store failed to apply (the agents sharing a PostgreSQL \
             database share its writer).",
            |a: &AgentOps| a.store.write_errors(),
        ),
        (
            "a2a_idempotency_keys_evicted_total",
            "counter",
            "Idempotency keys the agent's task store forgot before their window ended, to \
             stay under its cap (the memory store's 100,000): a retry under one runs again.",
            |a: &AgentOps| a.store.keys_evicted_early(),
        ),
        (
            "a2a_bus_errors_total",
            "counter",
            "Task events and queued turns the agent's bus (NATS) failed to send, take or \
             settle.",
            |a: &AgentOps| {
                (a.events.is_some() || a.queue.is_some()).then(|| {
                    a.events.as_ref().map_or(0, |e| e.errors())
                        + a.queue.as_ref().map_or(0, |q| q.errors())
                })
            },
        ),
    ] {
        family(out, name, kind, help)?;
        for a in &ops.agents {
            if let Some(n) = read(a) {
                writeln!(out, "{name}{{agent=\"{}\"}} {n}", label(&a.name))?;
            }
        }
    }
    family(
        out,
        "a2a_store_up",
        "gauge",
        "Whether the agent's task store answered this scrape.",
    )?;
    for AgentOps { name: agent, .. } in &ops.agents {
        let up = u8::from(!failed.contains(&agent));
        writeln!(out, "a2a_store_up{{agent=\"{}\"}} {up}", label(agent))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn histograms_are_cumulative_and_counts_exact() {
        let m = AgentMetrics::default();
        for ms in [0.2, 0.7, 3.0, 3.0, 20_000.0] {
            m.observe(
                "SendMessage",
                "jsonrpc",
                200,
                Duration::from_secs_f64(ms / 1000.0),
            );
        }
        m.observe("GetTask", "http+json", 404, Duration::from_millis(1));
        let ops = Ops {
            agents: vec![AgentOps {
                name: "a \"b\"".into(),
                metrics: Arc::new(m),
                store: Arc::new(crate::store::MemoryStore::default()),
                events: None,
                queue: None,
            }],
            draining: Default::default(),
        };
        let mut out = String::new();
        write_metrics(&ops, &mut out).await.unwrap();
        let line = |prefix: &str| {
            out.lines()
                .find(|l| l.starts_with(prefix))
                .unwrap_or_else(|| panic!("no {prefix} in\n{out}"))
                .rsplit(' ')
                .next()
                .unwrap()
                .to_owned()
        };
        let sel = r#"agent="a \"b\"",method="SendMessage",binding="jsonrpc""#;
        assert_eq!(
            line(&format!("a2a_requests_total{{{sel},code=\"200\"}}")),
            "5"
        );
        assert_eq!(
            line(&format!(
                "a2a_request_duration_seconds_bucket{{{sel},le=\"0.0005\"}}"
            )),
            "1"
        );
        assert_eq!(
            line(&format!(
                "a2a_request_duration_seconds_bucket{{{sel},le=\"0.005\"}}"
            )),
            "4"
        );
        assert_eq!(
            line(&format!(
                "a2a_request_duration_seconds_bucket{{{sel},le=\"10\"}}"
            )),
            "4"
        );
        assert_eq!(
            line(&format!(
                "a2a_request_duration_seconds_bucket{{{sel},le=\"+Inf\"}}"
            )),
            "5"
        );
        assert_eq!(
            line(
                r#"a2a_requests_total{agent="a \"b\"",method="GetTask",binding="http+json",code="404"}"#
            ),
            "1"
        );
        assert_eq!(line(r#"a2a_tasks{agent="a \"b\"",state="completed"}"#), "0");
        assert_eq!(line(r#"a2a_store_up{agent="a \"b\""}"#), "1");
        assert_eq!(
            line(r#"a2a_idempotency_keys_evicted_total{agent="a \"b\""}"#),
            "0"
        );
    }
}
