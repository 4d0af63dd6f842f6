//! Publish-subscribe from `[events]`: the bus (NATS JetStream with `[server] bus`, else the
//! process's own), the agents' `publish_event` tool, the subscriptions that ask agents to
//! handle events, and `POST /events/{topic}` for publishers outside the agents.
//!
//! An event reaches an agent as a request: the topic and id as text, the payload as data,
//! the subscription's trigger's instructions on top of the agent's prompt, and the event's
//! id as the correlation id of everything the agent does for it (its audit records, its
//! calls to other agents). Its answer can go on as the next event (`reply_topic`), which is
//! how a chain of agents is built without a workflow: a loop of replies is refused when the
//! config is read.

use std::sync::Arc;
use std::time::Instant;

use agentry_a2a::envelope::Envelope;
use agentry_core::a2a::Ask;
use agentry_flow::AgentRegistry;
use agentry_flow::bus::{BusError, BusEvent, EventBus, check_topic, handle_events, topic_matches};
use agentry_governance::AuditSink;
use agentry_governance::audit::Event as AuditEvent;
use agentry_governance::triggers::LiveTriggers;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use crate::Error;
use crate::config::{Config, EventsSection, Subscription};

/// The path publishers post to: `/events/{topic}`.
pub const PATH: &str = "/events";

/// The bus of a config's `[events]`: JetStream on `[server] bus`, else in the process;
/// `None` without `[events]`.
pub(crate) async fn open_bus(config: &Config) -> Result<Option<Arc<dyn EventBus>>, Error> {
    let Some(events) = &config.events else {
        return Ok(None);
    };
    for p in &events.agent_topics {
        check_topic(p, true).map_err(|e| Error::Invalid(format!("[events] agent_topics: {e}")))?;
    }
    let Some(spec) = &config.server.bus else {
        return Ok(Some(Arc::new(agentry_flow::bus::InProcessBus::default())));
    };
    #[cfg(feature = "nats")]
    {
        let mut options = agentry_nats::BusOptions::default();
        if let Some(ns) = &events.namespace {
            options = options.namespace(ns.clone());
        }
        let bus =
            agentry_nats::NatsBus::connect_with(&crate::serve::secret(spec)?, options).await?;
        Ok(Some(Arc::new(bus)))
    }
    #[cfg(not(feature = "nats"))]
    {
        let _ = spec;
        Err(Error::Disabled {
            what: "[events] on the [server] bus (NATS JetStream)".into(),
            feature: "nats",
        })
    }
}

/// The most events one subscription hands its agent at once, per replica.
const MAX_CONCURRENCY: usize = 64;

/// The `publish_event` tool's name: an agent has the tool only when its config names it.
pub(crate) const TOOL: &str = "publish_event";

/// Aborts the subscriptions when the service that started them is dropped.
#[derive(Default)]
pub(crate) struct Running(Vec<tokio::task::JoinHandle<()>>);

impl Drop for Running {
    fn drop(&mut self) {
        for h in &self.0 {
            h.abort();
        }
    }
}

/// Checks `[[events.subscribe]]` against what the config serves: topics that are topics,
/// agents that exist, triggers that apply to them, one subscription per agent and topic, and
/// no loop of replies (an agent's answer reaching, through replies, a subscription that
/// leads back to it would run forever).
pub(crate) fn check(
    events: &EventsSection,
    registry: &AgentRegistry,
    triggers: &LiveTriggers,
) -> Result<(), Error> {
    let subs = &events.subscribe;
    let invalid = |s: &Subscription, why: String| {
        Error::Invalid(format!(
            "[[events.subscribe]] {} on `{}`: {why}",
            s.agent, s.topic
        ))
    };
    for (i, s) in subs.iter().enumerate() {
        check_topic(&s.topic, true).map_err(|e| invalid(s, e.to_string()))?;
        if let Some(r) = &s.reply_topic {
            check_topic(r, false).map_err(|e| invalid(s, format!("reply_topic: {e}")))?;
        }
        if !registry.knows(&s.agent) {
            let known: Vec<String> = registry.describe().into_iter().map(|a| a.name).collect();
            return Err(invalid(
                s,
                format!(
                    "no configured agent or [[remotes]] entry has this name (known: {})",
                    known.join(", ")
                ),
            ));
        }
        if let Some(t) = &s.trigger {
            triggers
                .current()
                .admit(t, &s.agent, None)
                .map_err(|e| invalid(s, e.to_string()))?;
        }
        if subs[..i]
            .iter()
            .any(|o| o.agent == s.agent && o.topic == s.topic)
        {
            return Err(invalid(s, "subscribed twice".into()));
        }
        if !(1..=MAX_CONCURRENCY).contains(&s.concurrency) {
            return Err(invalid(s, format!("concurrency is 1 to {MAX_CONCURRENCY}")));
        }
    }
    if let Some(cycle) = reply_loop(subs) {
        let path: Vec<String> = cycle
            .iter()
            .map(|&i| {
                format!(
                    "{} ({} -> {})",
                    subs[i].agent,
                    subs[i].topic,
                    subs[i].reply_topic.as_deref().unwrap_or("")
                )
            })
            .collect();
        return Err(Error::Invalid(format!(
            "[[events.subscribe]]: the replies go round in a loop: {}",
            path.join(", then ")
        )));
    }
    Ok(())
}

/// A loop of subscriptions, each one's `reply_topic` matching the next one's topic; `None`
/// when there is none.
fn reply_loop(subs: &[Subscription]) -> Option<Vec<usize>> {
    let next = |i: usize| -> Vec<usize> {
        let Some(r) = &subs[i].reply_topic else {
            return Vec::new();
        };
        (0..subs.len())
            .filter(|&j| topic_matches(&subs[j].topic, r))
            .collect()
    };
    // Depth-first, marking each subscription on the current path (1) or done (2).
    fn visit(
        i: usize,
        next: &dyn Fn(usize) -> Vec<usize>,
        mark: &mut [u8],
        path: &mut Vec<usize>,
    ) -> Option<Vec<usize>> {
        mark[i] = 1;
        path.push(i);
        for j in next(i) {
            if mark[j] == 1 {
                let from = path.iter().position(|&p| p == j).unwrap_or(0);
                return Some(path[from..].to_vec());
            }
            if mark[j] == 0
                && let Some(c) = visit(j, next, mark, path)
            {
                return Some(c);
            }
        }
        path.pop();
        mark[i] = 2;
        None
    }
    let mut mark = vec![0u8; subs.len()];
    for i in 0..subs.len() {
        if mark[i] == 0
            && let Some(c) = visit(i, &next, &mut mark, &mut Vec::new())
        {
            return Some(c);
        }
    }
    None
}

/// Starts the subscriptions (checked with [`check`]): each asks its agent, through the
/// registry (local or remote alike), to handle its events, one at a time. Each is made on
/// the bus before this returns, so nothing published once the server serves is missed.
pub(crate) async fn subscribe(
    events: &EventsSection,
    bus: &Arc<dyn EventBus>,
    registry: &Arc<AgentRegistry>,
    triggers: &Arc<LiveTriggers>,
    audit: Option<&Arc<dyn AuditSink>>,
) -> Result<Running, Error> {
    let mut running = Running::default();
    for s in &events.subscribe {
        bus.prepare(&s.agent, &s.topic).await.map_err(|e| {
            Error::Invalid(format!(
                "[[events.subscribe]] {} on `{}`: {e}",
                s.agent, s.topic
            ))
        })?;
        let handler = Handler {
            sub: Arc::new(s.clone()),
            bus: bus.clone(),
            registry: registry.clone(),
            triggers: triggers.clone(),
            audit: audit.cloned(),
        };
        running.0.push(handle_events(
            bus.as_ref(),
            &s.agent,
            &s.topic,
            s.concurrency,
            move |ev| {
                let h = handler.clone();
                Box::pin(async move { h.handle(ev).await })
            },
        ));
        tracing::info!(agent = %s.agent, topic = %s.topic, "subscribed");
    }
    Ok(running)
}

/// One subscription's handling of an event.
#[derive(Clone)]
struct Handler {
    sub: Arc<Subscription>,
    bus: Arc<dyn EventBus>,
    registry: Arc<AgentRegistry>,
    triggers: Arc<LiveTriggers>,
    audit: Option<Arc<dyn AuditSink>>,
}

impl Handler {
    async fn handle(&self, ev: BusEvent) -> Result<(), String> {
        let started = Instant::now();
        let outcome = self.run(&ev).await;
        if let Some(log) = &self.audit {
            let mut rec = AuditEvent::new("event", format!("event:{}", ev.topic));
            rec.agent = Some(self.sub.agent.clone());
            rec.correlation_id = Some(ev.id.clone());
            rec.decision = Some(if outcome.is_ok() { "ok" } else { "error" }.into());
            rec.latency_us = Some(started.elapsed().as_micros() as u64);
            rec.detail = json!({
                "topic": ev.topic,
                "subscription": self.sub.topic,
                "error": outcome.as_ref().err(),
            });
            if let Err(e) = log.enqueue(rec).await {
                tracing::error!("audit trail: {e}");
            }
        }
        outcome
    }

    async fn run(&self, ev: &BusEvent) -> Result<(), String> {
        let sub = &self.sub;
        // The trigger as it is now (a triggers database can change it while serving).
        let instructions = match &sub.trigger {
            Some(t) => {
                let current = self.triggers.current();
                let trigger = current
                    .admit(t, &sub.agent, None)
                    .map_err(|e| e.to_string())?;
                Some(trigger.system_prompt.clone()).filter(|p| !p.trim().is_empty())
            }
            None => None,
        };
        let mut envelope = Envelope::default();
        envelope.correlation_id = Some(ev.id.clone());
        envelope.trigger_id = sub.trigger.clone();
        let ask = Ask {
            text: format!(
                "Event `{}` (id {}, published {}).",
                ev.topic, ev.id, ev.time
            ),
            data: Some(ev.payload.clone()),
            instructions,
            envelope: Some(envelope),
            caller: Some(format!("event:{}", ev.topic)),
            ..Default::default()
        };
        let reply = self
            .registry
            .ask(&sub.agent, ask)
            .await
            .map_err(|e| e.to_string())?;
        if reply.needs_input {
            tracing::warn!(agent = %sub.agent, topic = %ev.topic, "the agent asked a question about an event; nobody will answer it");
        }
        let Some(topic) = &sub.reply_topic else {
            return Ok(());
        };
        let mut payload = Map::new();
        payload.insert("agent".into(), Value::String(sub.agent.clone()));
        payload.insert("event".into(), json!({ "id": ev.id, "topic": ev.topic }));
        payload.insert("text".into(), Value::String(reply.text));
        if !reply.data.is_empty() {
            payload.insert(
                "data".into(),
                Value::Array(reply.data.into_iter().map(Value::Object).collect()),
            );
        }
        if reply.needs_input {
            payload.insert("needs_input".into(), Value::Bool(true));
        }
        // Not published: the event is handled again (at least once), its answer with it.
        self.bus
            .publish(topic, payload)
            .await
            .map(drop)
            .map_err(|e| format!("the answer could not be published on {topic}: {e}"))
    }
}

/// `POST /events/{topic}`: a JSON object published on `topic` for its subscribers, by a caller
/// holding the `[server]` credentials (and, with verified tokens, `[events] publish_scopes`).
/// 202 with the event's id once the bus has it; 400 for a topic or body that is not one, 415
/// for a body that is not JSON, 401/403 as the agents answer, 503 when the bus does not take
/// it (nothing published: try again).
pub(crate) fn routes(
    bus: Arc<dyn EventBus>,
    credentials: Option<agentry_a2a::server::Credentials>,
    audit: Option<Arc<dyn AuditSink>>,
    body_limit: usize,
) -> axum::Router {
    let state = Arc::new(Endpoint {
        bus,
        credentials,
        audit,
    });
    axum::Router::new()
        .route(&format!("{PATH}/{{topic}}"), axum::routing::post(publish))
        .layer(axum::extract::DefaultBodyLimit::max(body_limit))
        .with_state(state)
}

struct Endpoint {
    bus: Arc<dyn EventBus>,
    credentials: Option<agentry_a2a::server::Credentials>,
    audit: Option<Arc<dyn AuditSink>>,
}

async fn publish(
    axum::extract::State(ep): axum::extract::State<Arc<Endpoint>>,
    axum::extract::Path(topic): axum::extract::Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let principal = match agentry_a2a::server::authorize(ep.credentials.as_ref(), &headers).await {
        Ok(p) => p,
        Err(denied) => {
            let actor = denied.caller.clone().unwrap_or_else(|| "anonymous".into());
            ep.record(actor, "deny", &topic, None, Some(&denied.message))
                .await;
            return denied.response;
        }
    };
    let actor = principal.unwrap_or_else(|| "anonymous".into());
    let json_body = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"));
    if !json_body {
        return status(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "an event is a JSON object: send it as application/json",
        );
    }
    let payload = match serde_json::from_slice::<Map<String, Value>>(&body) {
        Ok(p) => p,
        Err(e) => {
            return status(
                StatusCode::BAD_REQUEST,
                &format!("an event is a JSON object: {e}"),
            );
        }
    };
    match ep.bus.publish(&topic, payload).await {
        Ok(p) => {
            ep.record(actor, "ok", &topic, Some(&p.id), None).await;
            (
                StatusCode::ACCEPTED,
                axum::Json(json!({ "id": p.id, "topic": topic, "reached": p.reached })),
            )
                .into_response()
        }
        Err(e @ BusError::Topic(_)) => status(StatusCode::BAD_REQUEST, &e.to_string()),
        Err(e) => {
            ep.record(actor, "error", &topic, None, Some(&e.to_string()))
                .await;
            status(StatusCode::SERVICE_UNAVAILABLE, &e.to_string())
        }
    }
}

impl Endpoint {
    /// A publish (or a refused one) in the audit trail, when there is one.
    async fn record(
        &self,
        actor: String,
        decision: &str,
        topic: &str,
        id: Option<&str>,
        why: Option<&str>,
    ) {
        let Some(log) = &self.audit else { return };
        let mut rec = AuditEvent::new("publish", actor);
        rec.correlation_id = id.map(str::to_owned);
        rec.decision = Some(decision.into());
        rec.detail = json!({ "topic": topic, "reason": why });
        // An accepted event is on record before its publisher hears so.
        let written = if decision == "ok" {
            log.append(rec).await.map(drop)
        } else {
            log.enqueue(rec).await
        };
        if let Err(e) = written {
            tracing::error!("audit trail: {e}");
        }
    }
}

/// An error as a `google.rpc.Status`, as the HTTP+JSON binding answers.
fn status(code: StatusCode, message: &str) -> Response {
    let name = match code {
        StatusCode::BAD_REQUEST => "INVALID_ARGUMENT",
        StatusCode::SERVICE_UNAVAILABLE => "UNAVAILABLE",
        _ => "FAILED_PRECONDITION",
    };
    (
        code,
        axum::Json(json!({"error": {
            "code": code.as_u16(), "status": name, "message": message, "details": [],
        }})),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(agent: &str, topic: &str, reply: Option<&str>) -> Subscription {
        toml::from_str(&format!(
            "agent = \"{agent}\"\ntopic = \"{topic}\"\n{}",
            reply
                .map(|r| format!("reply_topic = \"{r}\""))
                .unwrap_or_default()
        ))
        .unwrap()
    }

    #[test]
    fn reply_loops_are_found() {
        let chain = [
            sub("billing", "order.created", Some("invoice.drafted")),
            sub("mailer", "invoice.*", Some("mail.drafted")),
            sub("archive", "mail.>", None),
        ];
        assert_eq!(reply_loop(&chain), None);
        let looped = [
            sub("billing", "order.created", Some("invoice.drafted")),
            sub("mailer", "invoice.*", Some("order.created")),
            sub("archive", "mail.>", None),
        ];
        assert_eq!(reply_loop(&looped), Some(vec![0, 1]));
        let own = [sub("echo", "ping.*", Some("ping.again"))];
        assert_eq!(reply_loop(&own), Some(vec![0]));
    }
}
