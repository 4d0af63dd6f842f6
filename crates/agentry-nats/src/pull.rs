//! One member of a JetStream durable pull consumer: what the bus's shared subscriptions and
//! the work queue's workers both are.
//!
//! A member pulls one message at a time (when its stream is polled), so none waits in a
//! client's buffer while its time to be acknowledged runs, and keeps the message its own while
//! it is handled by telling the server every third of `ack_wait`. A member that dies stops
//! doing so: the message goes to another member after `ack_wait`.

use std::sync::Arc;
use std::time::Duration;

use agentry_a2a::server::Claimed;
use async_nats::jetstream::{self, AckKind, consumer, stream};
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use tokio::sync::oneshot;

/// A JetStream stream of agentry's: `AGENTRY_<KIND>` over `agentry.<kind>.>` (with a
/// namespace, `AGENTRY_<KIND>_<NS>` over `agentry.<ns>.<kind>.>`).
pub(crate) struct Opened {
    pub(crate) client: async_nats::Client,
    pub(crate) js: jetstream::Context,
    pub(crate) name: String,
    pub(crate) prefix: String,
    /// The server's address, for errors.
    pub(crate) target: String,
}

/// Connects to `url` and makes the stream of `kind` if it is not there.
pub(crate) async fn open(
    url: &str,
    kind: &str,
    namespace: Option<&str>,
    retention: stream::RetentionPolicy,
    max_age: Duration,
) -> Result<Opened, crate::Error> {
    let client = crate::client(url).await?;
    let js = jetstream::new(client.clone());
    let upper = kind.to_ascii_uppercase();
    let (name, prefix) = match namespace.map(crate::token) {
        Some(ns) => (
            format!("AGENTRY_{upper}_{ns}"),
            format!("agentry.{ns}.{kind}"),
        ),
        None => (format!("AGENTRY_{upper}"), format!("agentry.{kind}")),
    };
    let target = crate::target(url);
    js.get_or_create_stream(stream::Config {
        name: name.clone(),
        subjects: vec![format!("{prefix}.>")],
        retention,
        storage: stream::StorageType::File,
        max_age,
        ..Default::default()
    })
    .await
    .map_err(|e| crate::Error::JetStream {
        target: target.clone(),
        what: format!("make the stream {name}"),
        source: e.into(),
    })?;
    Ok(Opened {
        client,
        js,
        name,
        prefix,
        target,
    })
}

/// How a consumer hands out and takes back its messages.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// Silence after which a delivered message goes to another member.
    pub(crate) ack_wait: Duration,
    /// Deliveries of one message at most (then it is given up on).
    pub(crate) max_deliver: i64,
    /// How long a message handed back waits before it is delivered again.
    pub(crate) retry_delay: Duration,
    /// A new consumer starts with every message stored (a work queue: jobs queued before any
    /// worker came), not with those stored after it (a new subscription).
    pub(crate) from_start: bool,
    /// Failed pulls and settlements, for `/metrics` (shared by the members made with these
    /// settings).
    pub(crate) errors: Arc<std::sync::atomic::AtomicU64>,
}

/// One member pulling a durable consumer's messages.
pub(crate) struct Puller {
    js: jetstream::Context,
    stream: String,
    pub(crate) durable: String,
    filter: String,
    settings: Settings,
    consumer: Option<consumer::Consumer<consumer::pull::Config>>,
}

/// How long one pull waits for a message before asking again.
const PULL_WAIT: Duration = Duration::from_secs(5);

impl Puller {
    pub(crate) fn new(
        js: jetstream::Context,
        stream: String,
        durable: String,
        filter: String,
        settings: Settings,
    ) -> Puller {
        Puller {
            js,
            stream,
            durable,
            filter,
            settings,
            consumer: None,
        }
    }

    /// The consumer, made when it is not there (after a server lost its state too).
    pub(crate) async fn consumer(
        &mut self,
    ) -> Result<consumer::Consumer<consumer::pull::Config>, async_nats::Error> {
        if let Some(c) = &self.consumer {
            return Ok(c.clone());
        }
        let c = self
            .js
            .get_stream(&self.stream)
            .await?
            .get_or_create_consumer(
                &self.durable,
                consumer::pull::Config {
                    durable_name: Some(self.durable.clone()),
                    filter_subject: self.filter.clone(),
                    ack_policy: consumer::AckPolicy::Explicit,
                    ack_wait: self.settings.ack_wait,
                    max_deliver: self.settings.max_deliver,
                    deliver_policy: if self.settings.from_start {
                        consumer::DeliverPolicy::All
                    } else {
                        consumer::DeliverPolicy::New
                    },
                    ..Default::default()
                },
            )
            .await?;
        self.consumer = Some(c.clone());
        Ok(c)
    }

    /// The messages, one pulled each time the stream is polled; errors (a server away) are
    /// logged and the pull retried a second later.
    pub(crate) fn messages(self) -> BoxStream<'static, Claimed<bytes::Bytes>> {
        futures_util::stream::unfold(self, |mut p| async move {
            loop {
                match p.next().await {
                    Ok(Some(m)) => return Some((m, p)),
                    Ok(None) => {}
                    Err(e) => {
                        tracing::warn!(consumer = %p.durable, "cannot pull from NATS JetStream: {e}");
                        p.settings.errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        p.consumer = None;
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            }
        })
        .boxed()
    }

    /// The next message, or `None` when none came within [`PULL_WAIT`].
    async fn next(&mut self) -> Result<Option<Claimed<bytes::Bytes>>, async_nats::Error> {
        let consumer = self.consumer().await?;
        let mut batch = consumer
            .batch()
            .max_messages(1)
            .expires(PULL_WAIT)
            .messages()
            .await?;
        let Some(message) = batch.next().await else {
            return Ok(None);
        };
        let (message, acker) = message?.split();
        let acker = Arc::new(acker);
        // The message stays this member's while it is handled: the server is told every third
        // of ack_wait, until the claim is settled or dropped.
        let (handled, mut done) = oneshot::channel::<()>();
        let keeper = acker.clone();
        let every = self.settings.ack_wait / 3;
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = &mut done => break,
                    _ = tokio::time::sleep(every) => {
                        let _ = keeper.ack_with(AckKind::Progress).await;
                    }
                }
            }
        });
        let retry_delay = self.settings.retry_delay;
        let errors = self.settings.errors.clone();
        Ok(Some(Claimed::new(message.payload, move |ok| {
            Box::pin(async move {
                drop(handled);
                // Acknowledged and confirmed: an acknowledgement lost on the way would have
                // the message handled twice.
                let r = if ok {
                    acker.double_ack().await
                } else {
                    acker.ack_with(AckKind::Nak(Some(retry_delay))).await
                };
                if let Err(e) = r {
                    tracing::warn!("a message was not settled with NATS (it may come again): {e}");
                    errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            })
        })))
    }
}

/// FNV-1a: a short, stable name for a pattern.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}
