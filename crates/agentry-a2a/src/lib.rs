//! # agentry-a2a
//!
//! The A2A protocol (Agent-to-Agent, JSON-RPC 2.0 over HTTP with SSE) for agentry.
//!
//! - [`model`]: the protocol's data model, shaped after v0.3.0; no I/O.
//! - [`request`]: a request independent of version and binding, what every codec decodes into.
//! - [`wire`]: per-version wire types (v1.0's ProtoJSON) and their conversions to the model.
//! - [`jsonrpc`]: the JSON-RPC binding: envelopes, the v0.3 codec, decoding with precise errors.
//! - [`v1`]: the v1.0 codec (PascalCase methods onto [`wire::v1`]'s types).
//! - [`version`]: the `A2A-Version` negotiation between the two.
//! - [`rest`]: the v1.0 HTTP+JSON binding's wire rules (resources, `google.rpc.Status` errors).
//! - [`trace`]: W3C trace context in and out, so one trace covers a multi-agent request.
//! - [`credential`]: a caller's bearer token, held for delegation and never logged.
//! - [`store`]: task stores (in-memory, SQLite).
//! - [`server`] (feature `server`): serve agents; agents implement
//!   [`server::AgentExecutor`].
//! - [`client`] (feature `client`): discover and call any A2A agent.
//!
//! Features: `server`, `client`, `sqlite` (all on by default).
#![warn(missing_docs)]

pub mod credential;
pub mod envelope;
pub mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod jsonrpc;
pub mod model;
pub mod request;
pub mod rest;
pub mod store;
pub mod time;
pub mod trace;
pub mod v1;
pub mod version;
pub mod wire;

#[cfg(feature = "server")]
#[cfg(feature = "client")]
pub mod client;
#[cfg(feature = "server")]
pub mod server;
#[cfg(feature = "client")]
pub mod sse;

pub use error::{A2aError, RpcError};

/// A fresh identifier: a UUID v7, time-ordered with 74 random bits. Time order keeps the
/// store's index inserts at the right edge of its B-tree (a random v4 key dirties a different
/// page per task and multiplies the bytes each commit writes).
pub fn new_id() -> String {
    // Encoded into a buffer: `to_string` goes through the formatting machinery, and every
    // task, context and message gets an id.
    let mut buf = uuid::Uuid::encode_buffer();
    uuid::Uuid::now_v7()
        .hyphenated()
        .encode_lower(&mut buf)
        .to_owned()
}
