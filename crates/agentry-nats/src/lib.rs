//! Agentry on NATS: what the replicas of an agent, and agents on several machines, share.
//!
//! - [`NatsEvents`] (core NATS): a turn's task events. Replicas behind a load balancer share
//!   tasks through PostgreSQL (agentry-postgres), but a turn's events live in the process
//!   running it; they are published on `agentry.tasks.<agent>.<task>`, so a replica asked to
//!   stream a task running on another follows it there
//!   ([`agentry_a2a::server::TaskEvents`]). A cancel asked of a replica that does not run the
//!   turn goes on `agentry.cancel.<agent>` to the one that does. Core NATS keeps nothing:
//!   an event published while nobody follows is gone, which is what a live stream needs (the
//!   snapshot is in the task store).
//! - [`NatsBus`] (JetStream): publish-subscribe between agents
//!   ([`agentry_flow::bus::EventBus`]). Events are stored in a JetStream stream until every
//!   subscribing agent has handled them; an agent's replicas share its events (one durable
//!   consumer per agent and pattern, pulled one event at a time), and an event an agent
//!   failed on, or whose replica died handling it, is delivered again.
//! - [`NatsQueue`] (JetStream): turns queued for an agent's pull workers
//!   ([`agentry_a2a::server::WorkQueue`]): a new task sent without waiting is stored and its
//!   turn queued on `agentry.work.<agent>`; a worker of the agent, on any replica, takes it,
//!   and a turn whose worker died goes to another.
//!
//! ```no_run
//! # async fn demo() -> Result<(), agentry_nats::Error> {
//! let events = agentry_nats::NatsEvents::connect("nats://127.0.0.1:4222").await?;
//! let bus = agentry_nats::NatsBus::connect("nats://127.0.0.1:4222").await?;
//! # let _ = (events, bus); Ok(()) }
//! ```
#![warn(missing_docs)]

mod bus;
mod events;
mod pull;
mod queue;

pub use bus::{BusOptions, NatsBus};
pub use events::NatsEvents;
pub use queue::NatsQueue;

use agentry_a2a::store::BoxError;

/// Connecting to NATS, and setting up JetStream.
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
    /// A JetStream stream or consumer could not be made or found (JetStream off on the
    /// server, a stream of that name with other subjects, no permission).
    #[error("NATS JetStream at {target}: cannot {what}")]
    JetStream {
        /// The server's address (without credentials).
        target: String,
        /// What was being done.
        what: String,
        /// Why.
        #[source]
        source: BoxError,
    },
}

/// A client for the NATS server(s) at `url`, named `agentry` (the client reconnects by itself
/// after a lost connection).
async fn client(url: &str) -> Result<async_nats::Client, Error> {
    async_nats::ConnectOptions::new()
        .name("agentry")
        .connect(url)
        .await
        .map_err(|source| Error::Connect {
            target: target(url),
            source,
        })
}

/// `url` without a user or password, for messages.
pub(crate) fn target(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
            format!("{scheme}://{host}")
        }
        None => url.rsplit_once('@').map_or(url, |(_, h)| h).to_owned(),
    }
}

/// A subject token from a name: NATS tokens may not hold `.`, `*`, `>` or whitespace.
pub(crate) fn token(s: &str) -> String {
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
