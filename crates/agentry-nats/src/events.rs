//! A turn's task events over core NATS (see the crate's documentation).

use agentry_a2a::server::TaskEvents;
use agentry_a2a::store::{BoxError, BoxFuture};
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::mpsc;

use crate::{Error, token};

/// Task events over NATS: one connection, events published in call order.
pub struct NatsEvents {
    client: async_nats::Client,
    outbox: mpsc::Sender<(String, bytes::Bytes)>,
    /// Messages not published (failed, or dropped with the outbox full).
    errors: Arc<AtomicU64>,
}

/// Events waiting to be published, at most: while NATS is unreachable they pile up here, and
/// past this many the newest are dropped (a follower then learns the turn's end from the task
/// store, which it re-reads every few seconds), so an outage cannot grow memory without end.
const OUTBOX: usize = 65_536;

impl std::fmt::Debug for NatsEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsEvents").finish_non_exhaustive()
    }
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
        let client = crate::client(url).await?;
        let (tx, mut rx) = mpsc::channel::<(String, bytes::Bytes)>(OUTBOX);
        let publisher = client.clone();
        let errors = Arc::new(AtomicU64::new(0));
        let failed = errors.clone();
        tokio::spawn(async move {
            while let Some((subject, payload)) = rx.recv().await {
                if let Err(e) = publisher.publish(subject, payload).await {
                    tracing::warn!("a task event was not published to NATS: {e}");
                    failed.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        Ok(NatsEvents {
            client,
            outbox: tx,
            errors,
        })
    }

    /// Queues a message for the publisher; dropped when [`OUTBOX`] are already waiting.
    fn send(&self, subject: String, payload: bytes::Bytes) {
        if let Err(mpsc::error::TrySendError::Full(_)) = self.outbox.try_send((subject, payload)) {
            tracing::warn!("NATS is not keeping up (or unreachable): a task event was dropped");
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl NatsEvents {
    /// Asks whichever replica runs a turn of `task_id` to do `what` (`agentry.<what>.<agent>`).
    fn ask(&self, what: &str, agent: &str, task_id: &str) {
        self.send(
            format!("agentry.{what}.{}", token(agent)),
            bytes::Bytes::copy_from_slice(task_id.as_bytes()),
        );
    }

    /// The task ids replicas ask this one to `what` about, from now on.
    async fn requests(
        &self,
        what: &str,
        agent: &str,
    ) -> Result<BoxStream<'static, String>, BoxError> {
        let subscriber = self
            .client
            .subscribe(format!("agentry.{what}.{}", token(agent)))
            .await?;
        synced(&self.client).await?;
        Ok(subscriber
            .filter_map(|m| async move { String::from_utf8(m.payload.to_vec()).ok() })
            .boxed())
    }
}

impl TaskEvents for NatsEvents {
    fn publish(&self, agent: &str, task_id: &str, event: Vec<u8>) {
        self.send(subject(agent, task_id), event.into());
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
            synced(&self.client).await?;
            Ok(subscriber.map(|m| m.payload.to_vec()).boxed())
        })
    }

    fn request_cancel(&self, agent: &str, task_id: &str) {
        self.ask("cancel", agent, task_id);
    }

    fn cancel_requests<'a>(
        &'a self,
        agent: &'a str,
    ) -> BoxFuture<'a, Result<BoxStream<'static, String>, BoxError>> {
        Box::pin(self.requests("cancel", agent))
    }

    fn request_push_reload(&self, agent: &str, task_id: &str) {
        self.ask("push", agent, task_id);
    }

    fn push_reloads<'a>(
        &'a self,
        agent: &'a str,
    ) -> BoxFuture<'a, Result<BoxStream<'static, String>, BoxError>> {
        Box::pin(self.requests("push", agent))
    }

    fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }
}

/// Waits until the server has processed everything this client sent so far (its
/// subscriptions included). `Client::flush` only writes the socket: a message another
/// connection publishes right after could reach the server before the subscription does
/// and be lost (seen under load). A message the client sends itself comes back only after
/// the server processed what was sent before it.
async fn synced(client: &async_nats::Client) -> Result<(), BoxError> {
    let inbox = client.new_inbox();
    let mut probe = client.subscribe(inbox.clone()).await?;
    client.publish(inbox, bytes::Bytes::new()).await?;
    client.flush().await?;
    match tokio::time::timeout(std::time::Duration::from_secs(10), probe.next()).await {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err("the NATS connection closed".into()),
        Err(_) => Err("NATS did not answer within 10 s".into()),
    }
}
