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
//! - `grpc` (feature `grpc`): the v1.0 gRPC binding's messages, frames and statuses.
//! - [`trace`]: W3C trace context in and out, so one trace covers a multi-agent request.
//! - [`credential`]: a caller's bearer token, held for delegation and never logged.
//! - [`store`]: task stores (in-memory, SQLite).
//! - [`server`] (feature `server`): serve agents; agents implement
//!   [`server::AgentExecutor`].
//! - [`client`] (feature `client`): discover and call any A2A agent.
//!
//! Features: `server`, `client`, `sqlite` (all on by default); `grpc` (the gRPC binding on
//! the server's port).
#![warn(missing_docs)]

pub mod credential;
pub mod envelope;
pub mod error;
#[doc(hidden)]
pub mod fuzzing;
#[cfg(feature = "grpc")]
pub mod grpc;
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

/// A fresh identifier: a UUID v7, time-ordered, with 62 random bits. Time order keeps the
/// store's index inserts at the right edge of its B-tree (a random v4 key dirties a different
/// page per task and multiplies the bytes each commit writes), and ids made in this process
/// are strictly increasing, within a millisecond too: listings order tasks of the same
/// millisecond by id (RFC 9562's method 1, a 12-bit counter in `rand_a`, advanced by one
/// lock-free compare-and-swap instead of `Uuid::now_v7`'s lock and second random draw). The
/// random bits come from the thread's CSPRNG: with no caller identity, a task id is what
/// keeps one client from reading another's task.
pub fn new_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    /// The last id's millisecond and counter, `ms << 12 | counter`.
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = (time::now_unix_millis().max(0) as u64) << 12;
    let mut last = LAST.load(Ordering::Relaxed);
    let stamp = loop {
        // A counter run out within its millisecond borrows the next one, as RFC 9562 allows.
        let next = if now > last { now } else { last + 1 };
        match LAST.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => break next,
            Err(seen) => last = seen,
        }
    };
    let mut b = *uuid::Uuid::new_v4().as_bytes();
    let ms = stamp >> 12;
    b[..6].copy_from_slice(&ms.to_be_bytes()[2..]);
    b[6] = 0x70 | ((stamp >> 8) & 0x0f) as u8;
    b[7] = stamp as u8;
    // The variant's two bits; the other 62 of bytes 8-15 stay random.
    b[8] = 0x80 | (b[8] & 0x3f);
    // Encoded into a buffer: `to_string` goes through the formatting machinery, and every
    // task, context and message gets an id.
    let mut buf = uuid::Uuid::encode_buffer();
    uuid::Uuid::from_bytes(b)
        .hyphenated()
        .encode_lower(&mut buf)
        .to_owned()
}

/// Lower-case hex of `bytes` (on governed paths: a table, not `write!` per byte,
/// which cost as much as the SHA-256 it formats).
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    // Into a byte buffer of the final length: `String::push` checks capacity and encodes
    // UTF-8 per character, which cost more than the SHA-256 whose digest it formats.
    let mut out = vec![0u8; bytes.len() * 2];
    for (pair, b) in out.chunks_exact_mut(2).zip(bytes) {
        pair[0] = DIGITS[usize::from(b >> 4)];
        pair[1] = DIGITS[usize::from(b & 15)];
    }
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    /// Ids are v7 UUIDs carrying the time they were made: distinct, and strictly increasing,
    /// within a millisecond too (listings order a millisecond's tasks by id).
    #[test]
    fn ids_are_distinct_time_ordered_v7_uuids() {
        let before = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let ids: Vec<String> = (0..1000).map(|_| super::new_id()).collect();
        let mut seen = std::collections::HashSet::new();
        let mut last = 0;
        for id in &ids {
            assert!(seen.insert(id.clone()), "{id} twice");
            let u = uuid::Uuid::parse_str(id).unwrap();
            assert_eq!(u.get_version_num(), 7, "{id}");
            assert_eq!(id, &u.hyphenated().to_string());
            let (secs, nanos) = u.get_timestamp().unwrap().to_unix();
            let ms = secs * 1000 + u64::from(nanos) / 1_000_000;
            assert_eq!(u.get_variant(), uuid::Variant::RFC4122, "{id}");
            assert!(ms >= before && ms >= last, "{id}: {ms} after {last}");
            last = ms;
        }
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "made in order, sorted in order"
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(super::new_id() > ids[ids.len() - 1]);
    }
}
