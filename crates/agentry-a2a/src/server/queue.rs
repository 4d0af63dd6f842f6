//! Turns queued for an agent's workers: pull workers.
//!
//! With a [`WorkQueue`] ([`super::AgentService::with_queue`]), a new task sent without
//! waiting for its answer (`blocking: false`, or the envelope's `async` and `callback` response
//! modes) is stored `submitted` and queued instead of run where the request landed; the
//! answer is the stored task. Replicas with workers ([`Queueing::workers`] > 0) pull queued
//! turns one at a time and run them: the turn's events reach subscribers on any replica
//! through [`super::TaskEvents`], its state the shared store. A replica with no workers only
//! queues; one that no load balancer sends requests to only works (a pull worker).
//!
//! A queued turn is settled once its agent has returned. A worker that dies mid-turn stops
//! telling the queue it still works on it, so the queue hands the turn to another worker,
//! which runs it again from the task as stored once the dead worker's hold has lapsed (an
//! agent with checkpoints resumes at its last one). Meanwhile the task stays `working` and
//! streams on other replicas go on to the new worker's events: it is marked
//! [`Task::queued`](crate::model::Task::queued), which a shared store keeps, so no replica
//! recovers it (input-required, "the server stopped") for the store's grace; past it (every
//! worker busy, the job lost), it is recovered like any other task, and the queued turn, if it
//! still comes, runs it again. A turn already over (answered, canceled while queued) is
//! settled without running.
//! The caller's bearer token is held in memory only, never queued: a request that carries one
//! (an agent delegating on the caller's behalf needs it) runs where it landed.

use futures_util::stream::BoxStream;
use serde::{Deserialize, Serialize};

use crate::envelope::Envelope;
use crate::model::{MessageSendConfiguration, Metadata};
use crate::store::{BoxError, BoxFuture};

/// A queue of turns for the workers of an agent, shared by its replicas. Transports know
/// nothing of A2A: bytes under an agent's name (agentry-nats keeps them in JetStream).
pub trait WorkQueue: Send + Sync + 'static {
    /// Stores `job` for `agent`'s workers; resolves once it is stored (or failed to be).
    fn push<'a>(&'a self, agent: &'a str, job: Vec<u8>) -> BoxFuture<'a, Result<(), BoxError>>;

    /// `agent`'s jobs for this worker, one at a time: the next is taken from the queue when
    /// the stream is polled again. A job stays this worker's until settled
    /// ([`Claimed::ack`], [`Claimed::retry`]); dropped unsettled (the worker died), the queue
    /// gives it to another worker after a while.
    fn pull(&self, agent: &str) -> BoxStream<'static, Claimed<Vec<u8>>>;

    /// Failures to take or settle jobs since the start (each retried), for `/metrics`.
    fn errors(&self) -> u64 {
        0
    }
}

/// How a claim is settled: `true` done, `false` to be handed out again.
type Settle = Box<dyn FnOnce(bool) -> BoxFuture<'static, ()> + Send>;

/// Something taken from a queue that keeps it until it is settled: a queued turn, an event
/// of a durable bus.
pub struct Claimed<T> {
    /// What was taken.
    pub item: T,
    settle: Option<Settle>,
}

impl<T: std::fmt::Debug> std::fmt::Debug for Claimed<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Claimed")
            .field("item", &self.item)
            .finish_non_exhaustive()
    }
}

impl<T> Claimed<T> {
    /// A claim the queue settles with `settle` (`true`: done; `false`: hand it out again).
    pub fn new(
        item: T,
        settle: impl FnOnce(bool) -> BoxFuture<'static, ()> + Send + 'static,
    ) -> Self {
        Claimed {
            item,
            settle: Some(Box::new(settle)),
        }
    }

    /// A claim with nothing to settle (a queue that keeps nothing).
    pub fn unsettled(item: T) -> Self {
        Claimed { item, settle: None }
    }

    /// The same claim, over `f(item)`.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Claimed<U> {
        Claimed {
            item: f(self.item),
            settle: self.settle,
        }
    }

    /// Done with: not handed out again.
    pub async fn ack(mut self) {
        if let Some(settle) = self.settle.take() {
            settle(true).await;
        }
    }

    /// Not done: hand it out again later (to any worker).
    pub async fn retry(mut self) {
        if let Some(settle) = self.settle.take() {
            settle(false).await;
        }
    }
}

/// Queued turns of an agent: the queue, and how many turns this replica takes from it at
/// once.
#[derive(Clone)]
pub struct Queueing {
    /// Where new tasks sent without waiting go.
    pub queue: std::sync::Arc<dyn WorkQueue>,
    /// Turns this replica runs from the queue at once; 0: it only queues.
    pub workers: usize,
    /// The name the agent's turns are queued under (default: its card's name): replicas of
    /// one agent must agree on it, and agents of other deployments on the same queue must not
    /// share it.
    pub name: Option<String>,
}

impl Queueing {
    /// The name turns of `agent` are queued under.
    pub(crate) fn name_for<'a>(&'a self, agent: &'a str) -> &'a str {
        self.name.as_deref().unwrap_or(agent)
    }
}

impl std::fmt::Debug for Queueing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queueing")
            .field("workers", &self.workers)
            .finish_non_exhaustive()
    }
}

/// A queued turn: what the worker needs besides the stored task (whose history holds the
/// message).
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Job {
    pub task_id: String,
    pub message_id: String,
    pub owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<MessageSendConfiguration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub envelope: Option<Envelope>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<String>>,
}
