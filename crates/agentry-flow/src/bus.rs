//! Publish-subscribe between agents: agents subscribe to event types (`order.created`,
//! `order.*`) and are asked to handle each event published. [`InProcessBus`] runs in one
//! process; `agentry_nats::NatsBus` implements [`EventBus`] on NATS JetStream for agents on
//! several machines: a subscriber's replicas share its events ([`EventBus::consume`]), each
//! event is kept until one of them has handled it, and one that fails is delivered again.

use std::sync::Arc;

use agentry_a2a::server::Claimed;
use agentry_core::a2a::{AgentHandle, Ask};
use futures_util::stream::{BoxStream, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::sync::broadcast;

use agentry_core::llm::BoxFuture;

/// One published event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BusEvent {
    /// Unique per event.
    pub id: String,
    /// The topic it was published on.
    pub topic: String,
    /// What was published.
    pub payload: Map<String, Value>,
    /// When (RFC 3339).
    pub time: String,
}

impl BusEvent {
    /// A new event (a fresh id, the time now).
    pub fn new(topic: &str, payload: Map<String, Value>) -> BusEvent {
        BusEvent {
            id: agentry_a2a::new_id(),
            topic: topic.to_owned(),
            payload,
            time: agentry_a2a::time::now_rfc3339(),
        }
    }
}

/// What a publish did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Published {
    /// The event's id.
    pub id: String,
    /// The subscriptions it reached, where the bus knows at once (in one process); `None`
    /// on a durable bus, which keeps it for its subscribers, present or to come.
    pub reached: Option<usize>,
}

impl Published {
    /// An event a durable bus has stored (see [`Published::reached`]).
    pub fn durable(id: String) -> Published {
        Published { id, reached: None }
    }
}

/// Why an event was not published.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BusError {
    /// The topic is not one (see [`check_topic`]).
    #[error("{0}")]
    Topic(String),
    /// The bus did not take the event (its server unreachable, its stream full): nothing
    /// was published, and the publisher may try again.
    #[error("the event bus did not take the event: {0}")]
    Unavailable(String),
}

/// The longest topic, in bytes.
pub const MAX_TOPIC_LEN: usize = 200;

/// A topic is dot-separated names, each of letters, digits, `-` and `_` (`order.created`);
/// at most [`MAX_TOPIC_LEN`] bytes. Patterns (subscriptions) may also use `*` for one name and
/// a final `>` (or `#`) for the rest.
pub fn check_topic(topic: &str, pattern: bool) -> Result<(), BusError> {
    let what = if pattern { "topic pattern" } else { "topic" };
    if topic.is_empty() || topic.len() > MAX_TOPIC_LEN {
        return Err(BusError::Topic(format!(
            "a {what} is 1 to {MAX_TOPIC_LEN} bytes"
        )));
    }
    let names: Vec<&str> = topic.split('.').collect();
    let last = names.len() - 1;
    for (i, name) in names.iter().enumerate() {
        let ok = match *name {
            "*" => pattern,
            ">" | "#" => pattern && i == last,
            n => {
                !n.is_empty()
                    && n.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            }
        };
        if !ok {
            return Err(BusError::Topic(format!(
                "`{}` is not a {what}: dot-separated names of letters, digits, `-` and `_`{}",
                topic.chars().take(MAX_TOPIC_LEN).collect::<String>(),
                if pattern {
                    ", `*` for one name, a final `>` for the rest"
                } else {
                    " (no wildcards)"
                }
            )));
        }
    }
    Ok(())
}

/// A publish-subscribe channel.
pub trait EventBus: Send + Sync + 'static {
    /// Publishes an event on `topic` (checked with [`check_topic`]); once this resolves `Ok`
    /// the bus has it (a durable bus has stored it).
    fn publish(
        &self,
        topic: &str,
        payload: Map<String, Value>,
    ) -> BoxFuture<'_, Result<Published, BusError>>;
    /// Events whose topic matches `pattern` (`*` matches one dot-separated segment, a final `>`
    /// or `#` matches the rest), from now on (on a bus over the network, from when the stream
    /// is first polled; [`EventBus::prepare`] and [`EventBus::consume`] keep every event).
    fn subscribe(&self, pattern: &str) -> BoxStream<'static, BusEvent>;

    /// Events matching `pattern` for a subscriber named `group` whose replicas share them:
    /// each event goes to one member, which settles it ([`Claimed::ack`] once handled,
    /// [`Claimed::retry`] to have it delivered again). A durable bus keeps the events a group
    /// has not settled, across its restarts, and delivers an unsettled one again after a
    /// while. The default is [`EventBus::subscribe`] (one process: every event to every
    /// subscription, nothing kept).
    fn consume(&self, group: &str, pattern: &str) -> BoxStream<'static, Delivery> {
        let _ = group;
        self.subscribe(pattern).map(Claimed::unsettled).boxed()
    }

    /// Makes `group`'s subscription to `pattern` now, so that every event published after
    /// this resolves is kept for the group even before [`EventBus::consume`] is first
    /// polled (a subscriber's server is serving before it has pulled anything). The default
    /// does nothing (a bus that keeps nothing).
    fn prepare(&self, group: &str, pattern: &str) -> BoxFuture<'_, Result<(), BusError>> {
        let _ = (group, pattern);
        Box::pin(async { Ok(()) })
    }
}

/// An event taken from a shared subscription ([`EventBus::consume`]), to be settled once
/// handled ([`Claimed::ack`]) or not ([`Claimed::retry`]). Dropped unsettled, a durable bus
/// delivers it again once its time to settle has passed.
pub type Delivery = Claimed<BusEvent>;

/// Topic matching: `order.*` matches `order.created`; `order.>` matches `order.a.b`.
pub fn topic_matches(pattern: &str, topic: &str) -> bool {
    let p: Vec<&str> = pattern.split('.').collect();
    let t: Vec<&str> = topic.split('.').collect();
    for (i, seg) in p.iter().enumerate() {
        match *seg {
            ">" | "#" => return i < t.len(),
            "*" if i < t.len() => {}
            s if t.get(i) == Some(&s) => {}
            _ => return false,
        }
    }
    p.len() == t.len()
}

/// An in-process bus on a broadcast channel (slow subscribers skip what they missed).
pub struct InProcessBus {
    tx: broadcast::Sender<Arc<BusEvent>>,
    /// The patterns of the live subscriptions, so a publish says how many it reached.
    patterns: Arc<std::sync::Mutex<Vec<(u64, String)>>>,
    next: std::sync::atomic::AtomicU64,
}

impl Default for InProcessBus {
    fn default() -> Self {
        Self::new(1024)
    }
}

impl InProcessBus {
    /// A bus keeping up to `capacity` events per subscriber before the slowest skips ahead.
    pub fn new(capacity: usize) -> Self {
        InProcessBus {
            tx: broadcast::channel(capacity.max(1)).0,
            patterns: Default::default(),
            next: Default::default(),
        }
    }
}

/// A subscription's pattern, listed while its stream lives.
struct Listed {
    id: u64,
    patterns: Arc<std::sync::Mutex<Vec<(u64, String)>>>,
}

impl Drop for Listed {
    fn drop(&mut self) {
        let mut p = self.patterns.lock().unwrap_or_else(|e| e.into_inner());
        p.retain(|(id, _)| *id != self.id);
    }
}

impl EventBus for InProcessBus {
    fn publish(
        &self,
        topic: &str,
        payload: Map<String, Value>,
    ) -> BoxFuture<'_, Result<Published, BusError>> {
        let published = check_topic(topic, false).map(|()| {
            let ev = Arc::new(BusEvent::new(topic, payload));
            let id = ev.id.clone();
            let reached = {
                let p = self.patterns.lock().unwrap_or_else(|e| e.into_inner());
                p.iter().filter(|(_, p)| topic_matches(p, topic)).count()
            };
            let _ = self.tx.send(ev);
            Published {
                id,
                reached: Some(reached),
            }
        });
        Box::pin(async move { published })
    }

    fn subscribe(&self, pattern: &str) -> BoxStream<'static, BusEvent> {
        let pattern = pattern.to_owned();
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.patterns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((id, pattern.clone()));
        let listed = Listed {
            id,
            patterns: self.patterns.clone(),
        };
        let rx = self.tx.subscribe();
        futures_util::stream::unfold((rx, listed), move |(mut rx, listed)| {
            let pattern = pattern.clone();
            async move {
                loop {
                    match rx.recv().await {
                        Ok(ev) if topic_matches(&pattern, &ev.topic) => {
                            return Some(((*ev).clone(), (rx, listed)));
                        }
                        Ok(_) => {}
                        Err(broadcast::error::RecvError::Lagged(n)) => {
                            tracing::warn!(skipped = n, "bus subscriber fell behind");
                        }
                        Err(broadcast::error::RecvError::Closed) => return None,
                    }
                }
            }
        })
        .boxed()
    }
}

/// Subscribes `agent` to `pattern`: each matching event is sent to it (the topic as text, the
/// payload as a data part), one at a time. The agent's replicas (processes subscribing an
/// agent of the same name to the same pattern) share the events on a bus that can
/// ([`EventBus::consume`]); an event the agent fails on is delivered again. Runs until the bus
/// closes or the returned handle is aborted.
pub fn subscribe_agent(
    bus: &dyn EventBus,
    pattern: &str,
    agent: Arc<dyn AgentHandle>,
) -> tokio::task::JoinHandle<()> {
    let name = agent.name();
    handle_events(bus, &name, pattern, 1, move |ev| {
        let agent = agent.clone();
        Box::pin(async move {
            let ask = Ask {
                text: format!("Event {}", ev.topic),
                data: Some(ev.payload),
                ..Default::default()
            };
            agent.ask(ask).await.map(drop).map_err(|e| e.to_string())
        })
    })
}

/// Runs `handler` on each event matching `pattern` for the subscriber `group`
/// ([`EventBus::consume`]), up to `concurrency` at once (at least one): an event it handles
/// (`Ok`) is acknowledged, one it fails on (`Err`, logged) is delivered again where the bus
/// can. Runs until the bus closes or the returned handle is aborted.
pub fn handle_events<F>(
    bus: &dyn EventBus,
    group: &str,
    pattern: &str,
    concurrency: usize,
    handler: F,
) -> tokio::task::JoinHandle<()>
where
    F: Fn(BusEvent) -> BoxFuture<'static, Result<(), String>> + Send + Sync + 'static,
{
    let events = bus.consume(group, pattern);
    let group = group.to_owned();
    tokio::spawn(async move {
        // The next event is taken from the bus only when a slot is free: a durable bus keeps
        // the rest for the subscriber's other replicas.
        events
            .for_each_concurrent(concurrency.max(1), |delivery| {
                let (handler, group) = (&handler, &group);
                async move {
                    let topic = delivery.item.topic.clone();
                    match handler(delivery.item.clone()).await {
                        Ok(()) => delivery.ack().await,
                        Err(e) => {
                            tracing::warn!(%topic, subscriber = %group, "subscriber failed: {e}");
                            delivery.retry().await;
                        }
                    }
                }
            })
            .await;
    })
}

#[derive(Deserialize, schemars::JsonSchema)]
// No doc comment: schemars would send it to models as the schema's description.
#[allow(missing_docs)]
pub struct PublishArgs {
    /// The event's topic: dot-separated names, e.g. "invoice.drafted".
    pub topic: String,
    /// What the event says, as a JSON object.
    #[serde(default)]
    pub payload: Map<String, Value>,
}

/// The `publish_event` tool: an agent publishes an event for the agents subscribed to its
/// topic, on the topics its operator allows (patterns, as subscriptions write them) and no
/// others, so a model cannot start whatever subscriber it likes.
pub struct PublishEvent {
    bus: Arc<dyn EventBus>,
    topics: Vec<String>,
}

impl PublishEvent {
    /// Publishes on `bus`, on topics matching one of `topics`.
    pub fn new(bus: Arc<dyn EventBus>, topics: Vec<String>) -> PublishEvent {
        PublishEvent { bus, topics }
    }
}

impl agentry_core::tools::Tool for PublishEvent {
    const NAME: &'static str = "publish_event";
    type Args = PublishArgs;
    type Output = Value;
    type Error = String;

    fn description(&self) -> String {
        format!(
            "Publishes an event (a topic and a JSON payload) for the agents subscribed to its \
             topic to handle. Allowed topics: {}.",
            self.topics.join(", ")
        )
    }

    async fn call(&self, args: PublishArgs) -> Result<Value, String> {
        if !self.topics.iter().any(|p| topic_matches(p, &args.topic)) {
            return Err(format!(
                "`{}` is not a topic this agent may publish on ({})",
                args.topic,
                self.topics.join(", ")
            ));
        }
        let p = self
            .bus
            .publish(&args.topic, args.payload)
            .await
            .map_err(|e| e.to_string())?;
        Ok(serde_json::json!({ "published": p.id, "topic": args.topic }))
    }
}

#[cfg(test)]
mod tests {
    use super::topic_matches;

    #[test]
    fn topics() {
        assert!(topic_matches("order.created", "order.created"));
        assert!(topic_matches("order.*", "order.created"));
        assert!(!topic_matches("order.*", "order.created.eu"));
        assert!(topic_matches("order.>", "order.created.eu"));
        assert!(!topic_matches("order.>", "order"));
        assert!(!topic_matches("order.created", "order.paid"));
        assert!(topic_matches("*.paid", "order.paid"));
    }

    #[test]
    fn topic_syntax() {
        use super::check_topic;
        assert!(check_topic("order.created", false).is_ok());
        assert!(check_topic("order-eu.created_2", false).is_ok());
        for bad in [
            "",
            "order..paid",
            "order created",
            "order.*",
            "order.>",
            ".x",
            "é",
            "a/b",
        ] {
            assert!(check_topic(bad, false).is_err(), "{bad:?}");
        }
        assert!(check_topic(&"a".repeat(201), false).is_err());
        assert!(check_topic("order.*", true).is_ok());
        assert!(check_topic("order.>", true).is_ok());
        assert!(check_topic("*.paid", true).is_ok());
        assert!(check_topic("order.>.x", true).is_err());
        assert!(check_topic("order.*x", true).is_err());
    }
}
