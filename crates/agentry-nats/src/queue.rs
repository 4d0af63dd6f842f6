//! Queued turns for pull workers on JetStream ([`WorkQueue`]; see the crate's documentation).
//!
//! One stream, `AGENTRY_WORK` (`AGENTRY_WORK_<NAMESPACE>`), with work-queue retention holds
//! `agentry.work.<agent>` (`agentry.<namespace>.work.<agent>`): a job is kept until a worker
//! of its agent has acknowledged it. Each agent's workers, on any replica, are members of one
//! durable consumer, `work_<agent>` (see `pull.rs`).

use std::time::Duration;

use agentry_a2a::server::{Claimed, WorkQueue};
use agentry_a2a::store::{BoxError, BoxFuture};
use async_nats::jetstream::{self, stream};
use futures_util::StreamExt;
use futures_util::stream::BoxStream;

use crate::pull::{Puller, Settings};
use crate::{Error, token};

/// Turns queued for an agent's workers on NATS JetStream.
#[derive(Clone)]
pub struct NatsQueue {
    js: jetstream::Context,
    stream: String,
    prefix: String,
    settings: Settings,
}

impl std::fmt::Debug for NatsQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsQueue")
            .field("stream", &self.stream)
            .finish_non_exhaustive()
    }
}

impl NatsQueue {
    /// Connects to the NATS server(s) at `url` (JetStream enabled) and makes the stream if it
    /// is not there. A worker silent for `ack_wait` (it died) loses its turn to another;
    /// take the store's lease (`lease_seconds`), after which the task it ran may be taken
    /// over. Must be called within a Tokio runtime.
    pub async fn connect(
        url: &str,
        namespace: Option<&str>,
        ack_wait: Duration,
    ) -> Result<NatsQueue, Error> {
        let opened = crate::pull::open(
            url,
            "work",
            namespace,
            stream::RetentionPolicy::WorkQueue,
            Duration::ZERO,
        )
        .await?;
        Ok(NatsQueue {
            js: opened.js,
            stream: opened.name,
            prefix: opened.prefix,
            settings: Settings {
                ack_wait: ack_wait.max(Duration::from_secs(1)),
                // Handed back while another replica still holds the task (its worker died and
                // its hold has not lapsed yet): tried again a few seconds later, for about a
                // lease or two.
                max_deliver: 20,
                retry_delay: (ack_wait / 5).max(Duration::from_millis(200)),
                from_start: true,
                errors: Default::default(),
            },
        })
    }
}

impl WorkQueue for NatsQueue {
    fn push<'a>(&'a self, agent: &'a str, job: Vec<u8>) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            let subject = format!("{}.{}", self.prefix, token(agent));
            self.js.publish(subject, job.into()).await?.await?;
            Ok(())
        })
    }

    fn pull(&self, agent: &str) -> BoxStream<'static, Claimed<Vec<u8>>> {
        Puller::new(
            self.js.clone(),
            self.stream.clone(),
            format!("work_{}", token(agent)),
            format!("{}.{}", self.prefix, token(agent)),
            self.settings.clone(),
        )
        .messages()
        .map(|m| m.map(|b| b.to_vec()))
        .boxed()
    }

    fn errors(&self) -> u64 {
        self.settings
            .errors
            .load(std::sync::atomic::Ordering::Relaxed)
    }
}
