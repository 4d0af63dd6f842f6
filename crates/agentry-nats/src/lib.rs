//! Agentry on NATS: task events shared by the replicas of an agent.
//!
//! Replicas behind a load balancer share tasks through PostgreSQL (agentry-postgres), but a
//! turn's events live in the process running it. [`NatsEvents`] publishes each of them on
//! `agentry.tasks.<agent>.<task>` (core NATS), so a replica asked to stream a task running on
//! another follows it there ([`agentry_a2a::server::TaskEvents`]). Events are published in
//! order by one task per connection; a follower subscribes (and flushes, so the server has
//! the subscription) before it reads the task's snapshot, so nothing between the two is
//! lost. A cancel asked of a replica that does not run the turn goes on
//! `agentry.cancel.<agent>` to the one that does. Core NATS keeps nothing: an event published while nobody follows is gone, which is
//! what a live stream needs (the snapshot is in the task store).
//!
//! ```no_run
//! # async fn demo() -> Result<(), agentry_nats::Error> {
//! let events = agentry_nats::NatsEvents::connect("nats://127.0.0.1:4222").await?;
//! # let _ = events; Ok(()) }
//! ```
#![warn(missing_docs)]

use agentry_a2a::server::TaskEvents;
use agentry_a2a::store::{BoxError, BoxFuture};
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use tokio::sync::mpsc;

/// Connecting to NATS.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The server could not be reached, or refused the connection.
    #[error("cannot connect to NATS at {target}")]
    Connect {
        /// The server's address (without credentials).
        target: String,
        /// Why.
        #[source]
        source: async_nats::ConnectError,
    },
}

/// Task events over NATS: one connection, events published in call order.
pub struct NatsEvents {
    client: async_nats::Client,
    outbox: mpsc::UnboundedSender<(String, bytes::Bytes)>,
}

impl std::fmt::Debug for NatsEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsEvents").finish_non_exhaustive()
    }
}

/// `url` without a user or password, for messages.
fn target(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
            format!("{scheme}://{host}")
        }
        None => url.rsplit_once('@').map_or(url, |(_, h)| h).to_owned(),
    }
}

/// A subject token from a name: NATS tokens may not hold `.`, `*`, `>` or whitespace.
fn token(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The subject of a task's events.
fn subject(agent: &str, task_id: &str) -> String {
    format!("agentry.tasks.{}.{}", token(agent), token(task_id))
}

impl NatsEvents {
    /// Connects to the NATS server(s) at `url` (`nats://host:4222`, comma-separated for a
    /// cluster; credentials in the URL). Must be called within a Tokio runtime. The client
    /// reconnects by itself after a lost connection.
    pub async fn connect(url: &str) -> Result<NatsEvents, Error> {
        let client = async_nats::ConnectOptions::new()
            .name("agentry")
            .connect(url)
            .await
            .map_err(|source| Error::Connect {
                target: target(url),
                source,
            })?;
        let (tx, mut rx) = mpsc::unbounded_channel::<(String, bytes::Bytes)>();
        let publisher = client.clone();
        tokio::spawn(async move {
            while let Some((subject, payload)) = rx.recv().await {
                if let Err(e) = publisher.publish(subject, payload).await {
                    tracing::warn!("a task event was not published to NATS: {e}");
                }
            }
        });
        Ok(NatsEvents { client, outbox: tx })
    }
}

impl TaskEvents for NatsEvents {
    fn publish(&self, agent: &str, task_id: &str, event: Vec<u8>) {
        let _ = self.outbox.send((subject(agent, task_id), event.into()));
    }

    fn follow<'a>(
        &'a self,
        agent: &'a str,
        task_id: &'a str,
    ) -> BoxFuture<'a, Result<BoxStream<'static, Vec<u8>>, BoxError>> {
        Box::pin(async move {
            let subscriber = self.client.subscribe(subject(agent, task_id)).await?;
            // The server has the subscription once this returns: an event published after
            // reaches it.
            self.client.flush().await?;
            Ok(subscriber.map(|m| m.payload.to_vec()).boxed())
        })
    }

    fn request_cancel(&self, agent: &str, task_id: &str) {
        let _ = self.outbox.send((
            format!("agentry.cancel.{}", token(agent)),
            bytes::Bytes::copy_from_slice(task_id.as_bytes()),
        ));
    }

    fn cancel_requests<'a>(
        &'a self,
        agent: &'a str,
    ) -> BoxFuture<'a, Result<BoxStream<'static, String>, BoxError>> {
        Box::pin(async move {
            let subscriber = self
                .client
                .subscribe(format!("agentry.cancel.{}", token(agent)))
                .await?;
            self.client.flush().await?;
            Ok(subscriber
                .filter_map(|m| async move { String::from_utf8(m.payload.to_vec()).ok() })
                .boxed())
        })
    }
}
