//! Publish-subscribe between agents on NATS JetStream (see the crate's documentation).
//!
//! One stream, `AGENTRY_EVENTS` (or `AGENTRY_EVENTS_<NAMESPACE>`), holds the subjects
//! `agentry.events.<topic>` (`agentry.<namespace>.events.<topic>`), with interest retention:
//! an event is kept until every consumer whose filter it matches has acknowledged it (and
//! at most [`BusOptions::max_age`]). [`EventBus::consume`] makes one durable pull consumer
//! per group and pattern, whose members pull one event at a time (see `pull.rs`): an event
//! held by a member that died goes to another after [`BusOptions::ack_wait`].

use std::time::Duration;

use agentry_flow::bus::{BusError, BusEvent, Delivery, EventBus, Published, check_topic};
use async_nats::jetstream::{self, stream};
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use serde_json::{Map, Value};

use crate::pull::{Puller, Settings, fnv1a};
use crate::{Error, token};

/// How a [`NatsBus`] keeps and redelivers events.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BusOptions {
    /// Keeps this bus's stream and subjects apart from others on the same server (tests,
    /// several deployments on one NATS). Default: none.
    pub namespace: Option<String>,
    /// How long a delivered event may go without a word from the member handling it before
    /// it is delivered again (a member handling it says so every third of this). Default 30 s.
    pub ack_wait: Duration,
    /// How many times an event is delivered to a group before it is given up on. Default 5.
    pub max_deliver: i64,
    /// How long an event an agent failed on waits before it is delivered again. Default 2 s.
    pub retry_delay: Duration,
    /// How long an event is kept at most, handled or not. Default 7 days.
    pub max_age: Duration,
}

impl Default for BusOptions {
    fn default() -> Self {
        BusOptions {
            namespace: None,
            ack_wait: Duration::from_secs(30),
            max_deliver: 5,
            retry_delay: Duration::from_secs(2),
            max_age: Duration::from_secs(7 * 24 * 3600),
        }
    }
}

impl BusOptions {
    /// With a namespace (see [`BusOptions::namespace`]).
    pub fn namespace(mut self, ns: impl Into<String>) -> Self {
        self.namespace = Some(ns.into());
        self
    }

    /// With [`BusOptions::ack_wait`] (at least a second).
    pub fn ack_wait(mut self, d: Duration) -> Self {
        self.ack_wait = d.max(Duration::from_secs(1));
        self
    }

    /// With [`BusOptions::max_deliver`] (at least once).
    pub fn max_deliver(mut self, n: i64) -> Self {
        self.max_deliver = n.max(1);
        self
    }

    /// With [`BusOptions::retry_delay`].
    pub fn retry_delay(mut self, d: Duration) -> Self {
        self.retry_delay = d;
        self
    }
}

/// Publish-subscribe between agents on NATS JetStream ([`EventBus`]).
#[derive(Clone)]
pub struct NatsBus {
    client: async_nats::Client,
    js: jetstream::Context,
    stream: String,
    prefix: String,
    options: BusOptions,
    /// The server's address, for errors.
    target: String,
}

impl std::fmt::Debug for NatsBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsBus")
            .field("stream", &self.stream)
            .finish_non_exhaustive()
    }
}

impl NatsBus {
    /// Connects to the NATS server(s) at `url` (JetStream enabled) and makes the stream if it
    /// is not there. Must be called within a Tokio runtime.
    pub async fn connect(url: &str) -> Result<NatsBus, Error> {
        Self::connect_with(url, BusOptions::default()).await
    }

    /// [`NatsBus::connect`] with options.
    pub async fn connect_with(url: &str, options: BusOptions) -> Result<NatsBus, Error> {
        let opened = crate::pull::open(
            url,
            "events",
            options.namespace.as_deref(),
            stream::RetentionPolicy::Interest,
            options.max_age,
        )
        .await?;
        Ok(NatsBus {
            client: opened.client,
            js: opened.js,
            stream: opened.name,
            prefix: opened.prefix,
            options,
            target: opened.target,
        })
    }

    /// Makes the consumer of `group`'s subscription to `pattern` now, so that every event
    /// published after this returns is kept for the group ([`EventBus::consume`] makes it
    /// when first polled, and a group's first consumer starts with the events published
    /// after it was made).
    pub async fn prepare(&self, group: &str, pattern: &str) -> Result<(), Error> {
        let mut puller = self
            .puller(group, pattern)
            .ok_or_else(|| Error::JetStream {
                target: self.target.clone(),
                what: format!("subscribe to {pattern:?}: not a topic pattern"),
                source: "a pattern is dot-separated names, `*` or a final `>`".into(),
            })?;
        puller.consumer().await.map_err(|source| Error::JetStream {
            target: self.target.clone(),
            what: format!("make the consumer {}", puller.durable),
            source,
        })?;
        Ok(())
    }

    /// The puller of `group`'s subscription to `pattern`; `None` for an invalid pattern.
    fn puller(&self, group: &str, pattern: &str) -> Option<Puller> {
        Some(Puller::new(
            self.js.clone(),
            self.stream.clone(),
            // One consumer per group and pattern: a group's subscriptions to two patterns
            // each get their events.
            format!("{}_{:016x}", token(group), fnv1a(pattern.as_bytes())),
            self.subject(pattern, true)?,
            Settings {
                ack_wait: self.options.ack_wait,
                max_deliver: self.options.max_deliver,
                retry_delay: self.options.retry_delay,
                from_start: false,
                errors: Default::default(),
            },
        ))
    }

    /// The subject of a topic or pattern: dot-separated names, without spaces; in a pattern
    /// `*` stands for one name and a final `>` or `#` for the rest.
    fn subject(&self, topic: &str, pattern: bool) -> Option<String> {
        let names: Vec<&str> = topic.split('.').collect();
        let last = names.len() - 1;
        let mut out = self.prefix.clone();
        for (i, name) in names.into_iter().enumerate() {
            let name = match name {
                "*" if pattern => "*",
                ">" | "#" if pattern && i == last => ">",
                n if !n.is_empty()
                    && !n
                        .chars()
                        .any(|c| c.is_whitespace() || matches!(c, '*' | '>')) =>
                {
                    n
                }
                _ => return None,
            };
            out.push('.');
            out.push_str(name);
        }
        Some(out)
    }
}

impl EventBus for NatsBus {
    /// Publishes and waits for the stream to have stored the event (every matching
    /// subscription will get it); an error when it could not be stored.
    fn publish(
        &self,
        topic: &str,
        payload: Map<String, Value>,
    ) -> agentry_a2a::store::BoxFuture<'_, Result<Published, BusError>> {
        let event = BusEvent::new(topic, payload);
        Box::pin(async move {
            check_topic(&event.topic, false)?;
            let subject = self
                .subject(&event.topic, false)
                .ok_or_else(|| BusError::Topic(format!("`{}` is not a topic", event.topic)))?;
            let body =
                serde_json::to_vec(&event).map_err(|e| BusError::Unavailable(e.to_string()))?;
            // The event's id: a publish retried within the stream's duplicate window is kept
            // once.
            let mut headers = async_nats::HeaderMap::new();
            headers.insert("Nats-Msg-Id", event.id.as_str());
            let stored = match self
                .js
                .publish_with_headers(subject, headers, body.into())
                .await
            {
                Ok(ack) => ack.await.map(drop).map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            match stored {
                Ok(()) => Ok(Published::durable(event.id)),
                Err(e) => {
                    tracing::warn!(topic = %event.topic, "event not stored by JetStream: {e}");
                    Err(BusError::Unavailable(format!(
                        "NATS JetStream at {}: {e}",
                        self.target
                    )))
                }
            }
        })
    }

    /// Every event matching `pattern` published from now on (core NATS: nothing kept for a
    /// subscriber that is not there).
    fn subscribe(&self, pattern: &str) -> BoxStream<'static, BusEvent> {
        let Some(subject) = self.subject(pattern, true) else {
            tracing::warn!(pattern, "not a topic pattern: nothing subscribed");
            return futures_util::stream::empty().boxed();
        };
        let client = self.client.clone();
        futures_util::stream::once(async move { client.subscribe(subject).await })
            .filter_map(|r| async move {
                r.map_err(|e| tracing::warn!("cannot subscribe on NATS: {e}"))
                    .ok()
            })
            .flatten()
            .filter_map(|m| async move { serde_json::from_slice::<BusEvent>(&m.payload).ok() })
            .boxed()
    }

    fn prepare(
        &self,
        group: &str,
        pattern: &str,
    ) -> agentry_a2a::store::BoxFuture<'_, Result<(), BusError>> {
        let (group, pattern) = (group.to_owned(), pattern.to_owned());
        Box::pin(async move {
            NatsBus::prepare(self, &group, &pattern)
                .await
                .map_err(|e| BusError::Unavailable(e.to_string()))
        })
    }

    fn consume(&self, group: &str, pattern: &str) -> BoxStream<'static, Delivery> {
        let Some(puller) = self.puller(group, pattern) else {
            tracing::warn!(pattern, "not a topic pattern: nothing consumed");
            return futures_util::stream::empty().boxed();
        };
        puller
            .messages()
            .filter_map(|m| async move {
                match serde_json::from_slice::<BusEvent>(&m.item) {
                    Ok(event) => Some(m.map(|_| event)),
                    Err(e) => {
                        // Not an agentry event (someone else published on the subjects): it
                        // would never be handled.
                        tracing::warn!("not an agentry event, dropped: {e}");
                        m.ack().await;
                        None
                    }
                }
            })
            .boxed()
    }
}
