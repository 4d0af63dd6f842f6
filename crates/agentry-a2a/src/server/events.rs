//! Task events across replicas: what lets a subscription reach a task whose turn runs in
//! another process (a replica behind the same load balancer, sharing the task store).
//!
//! The server encodes each event of a turn (its A2A 1.0 wire form, JSON) and hands it to
//! [`TaskEvents::publish`]; a replica asked to stream a task that runs elsewhere follows it
//! with [`TaskEvents::follow`]. The transport knows nothing of A2A: bytes under an agent and
//! a task id (agentry-nats carries them over NATS).

use futures_util::stream::BoxStream;

use crate::model::StreamEvent;
use crate::store::{BoxError, BoxFuture};

/// A channel for task events between the processes serving one agent.
pub trait TaskEvents: Send + Sync + 'static {
    /// Sends one event of task `task_id` of agent `agent` to whoever follows the task, in call
    /// order per task. Called for every event of every turn: it must not wait (queue it).
    fn publish(&self, agent: &str, task_id: &str, event: Vec<u8>);

    /// The events of task `task_id` of agent `agent` published from now on, by any process.
    /// Resolves once the subscription is in place (an event published after that is seen).
    fn follow<'a>(
        &'a self,
        agent: &'a str,
        task_id: &'a str,
    ) -> BoxFuture<'a, Result<BoxStream<'static, Vec<u8>>, BoxError>>;

    /// Asks whichever process runs a turn of task `task_id` of agent `agent` to cancel it.
    fn request_cancel(&self, agent: &str, task_id: &str);

    /// The ids of tasks of agent `agent` whose cancellation another process asked for (each
    /// process acts on those it runs), from now on.
    fn cancel_requests<'a>(
        &'a self,
        agent: &'a str,
    ) -> BoxFuture<'a, Result<BoxStream<'static, String>, BoxError>>;

    /// Asks whichever process runs a turn of task `task_id` of agent `agent` to read the
    /// task's push notification configs from the shared store again: another process
    /// changed them there (a config set or deleted through a replica not running the turn).
    fn request_push_reload(&self, agent: &str, task_id: &str);

    /// The ids of tasks of agent `agent` whose push configs another process changed (each
    /// process acts on those it runs), from now on.
    fn push_reloads<'a>(
        &'a self,
        agent: &'a str,
    ) -> BoxFuture<'a, Result<BoxStream<'static, String>, BoxError>>;

    /// Events and cancel requests that could not be sent (the bus unreachable or not keeping
    /// up) since the start, for `/metrics`.
    fn errors(&self) -> u64 {
        0
    }
}

/// An event as [`TaskEvents`] carries it.
pub(crate) fn encode(ev: &StreamEvent) -> Vec<u8> {
    serde_json::to_vec(&crate::v1::stream_event(ev)).unwrap_or_default()
}

/// An event carried by [`TaskEvents`]; `None` for bytes that are not one (logged).
pub(crate) fn decode(bytes: &[u8]) -> Option<StreamEvent> {
    let parsed = serde_json::from_slice(bytes)
        .map_err(|e| e.to_string())
        .and_then(crate::v1::stream_event_from);
    match parsed {
        Ok(ev) => Some(ev),
        Err(e) => {
            tracing::warn!("a task event from another replica does not decode: {e}");
            None
        }
    }
}
