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

/// A publish-subscribe channel.
pub trait EventBus: Send + Sync + 'static {
    /// Publishes; returns how many subscribers were reached.
    fn publish(&self, topic: &str, payload: Map<String, Value>) -> BoxFuture<'_, usize>;
    /// Events whose topic matches `pattern` (`*` matches one dot-separated segment, a final `>`
    /// or `#` matches the rest), from now on.
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
        }
    }
}

impl EventBus for InProcessBus {
    fn publish(&self, topic: &str, payload: Map<String, Value>) -> BoxFuture<'_, usize> {
        let ev = Arc::new(BusEvent {
            id: agentry_a2a::new_id(),
            topic: topic.to_owned(),
            payload,
            time: agentry_a2a::time::now_rfc3339(),
        });
        let n = self.tx.send(ev).unwrap_or(0);
        Box::pin(async move { n })
    }

    fn subscribe(&self, pattern: &str) -> BoxStream<'static, BusEvent> {
        let pattern = pattern.to_owned();
        let rx = self.tx.subscribe();
        futures_util::stream::unfold(rx, move |mut rx| {
            let pattern = pattern.clone();
            async move {
                loop {
                    match rx.recv().await {
                        Ok(ev) if topic_matches(&pattern, &ev.topic) => {
                            return Some(((*ev).clone(), rx));
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
    let mut events = bus.consume(&agent.name(), pattern);
    tokio::spawn(async move {
        while let Some(delivery) = events.next().await {
            let ev = &delivery.item;
            let ask = Ask {
                text: format!("Event {}", ev.topic),
                data: Some(ev.payload.clone()),
                ..Default::default()
            };
            match agent.ask(ask).await {
                Ok(_) => delivery.ack().await,
                Err(e) => {
                    tracing::warn!(topic = %ev.topic, agent = %agent.name(), "subscriber failed: {e}");
                    delivery.retry().await;
                }
            }
        }
    })
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
}
