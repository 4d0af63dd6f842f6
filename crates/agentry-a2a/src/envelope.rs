//! The task envelope: agentry's A2A extension for what governance needs to know about a
//! request beyond its message. It is the same on both protocol generations: a client names
//! [`EXTENSION_URI`] in `A2A-Extensions` (`X-A2A-Extensions` on 0.3) and puts an [`Envelope`]
//! in the message's `metadata` under that URI; an agentry server declares the extension in
//! every card, records the envelope on the task ([`Task::envelope`](crate::model::Task::envelope),
//! shown in its `metadata` under the same key) and hands it to the agent.
//!
//! - **correlation id**: one per user request, carried across every hop (agentry's client
//!   forwards the caller's); joined to W3C trace context: without one, the `traceparent`'s
//!   trace id is used, and without either the server makes one.
//! - **idempotency key**: never the messageId (clients reuse those); scoped to the caller;
//!   also accepted as the `Idempotency-Key` header. The same key with the same request returns
//!   the first task (while it runs too: no second execution); with another request it is an
//!   error; keys expire after the server's window.
//! - **priority**, **response mode** (`sync`, `async`, or `callback` with a URL: a push
//!   config), **required scopes** (the caller's token must hold them), **trigger id**.
//!
//! ```
//! use agentry_a2a::envelope::{Envelope, ResponseMode};
//! use agentry_a2a::model::{Message, Part, Role};
//! let mut m = Message::new(Role::User, vec![Part::text("draft the weekly mail")]);
//! let mut env = Envelope::default();
//! env.correlation_id = Some("req-42".into());
//! env.idempotency_key = Some("mail-2026-11-24".into());
//! env.response_mode = Some(ResponseMode::Async);
//! env.attach(&mut m);
//! assert_eq!(Envelope::of(&m).unwrap(), Some(env));
//! ```

use serde::{Deserialize, Serialize};

use crate::error::RpcError;
use crate::model::{Message, Metadata};

/// The extension's URI: the key of the envelope in `metadata`, and what `A2A-Extensions`
/// names.
pub const EXTENSION_URI: &str = "urn:agentry:a2a:task-envelope:v1";

/// The HTTP header an idempotency key may come in instead of the envelope (IETF draft
/// `Idempotency-Key`, as A2A proposal #1893 suggests).
pub const IDEMPOTENCY_HEADER: &str = "Idempotency-Key";

/// The W3C trace-context header.
pub const TRACEPARENT_HEADER: &str = "traceparent";

// The two as the server looks them up (see `version::HEADER_NAME`).
#[cfg(feature = "server")]
pub(crate) static IDEMPOTENCY_HEADER_NAME: http::HeaderName =
    http::HeaderName::from_static("idempotency-key");
#[cfg(feature = "server")]
pub(crate) static TRACEPARENT_HEADER_NAME: http::HeaderName =
    http::HeaderName::from_static("traceparent");

/// Longest accepted key or id (characters).
const MAX_ID: usize = 255;

/// What a request says about itself beyond its message.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Envelope {
    /// One per user request, the same on every hop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    /// Retries of one request carry the same key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// How urgent (servers may order admission by it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<Priority>,
    /// Wait for the result, return at once, or call back when done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_mode: Option<ResponseMode>,
    /// Where `callback` mode delivers the task (as a push notification).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_url: Option<String>,
    /// Scopes the caller's credentials must hold for this request.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_scopes: Vec<String>,
    /// The trigger that started the request (a registry's id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger_id: Option<String>,
    /// The W3C `traceparent` of the request (from the header when not given here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// Which of the agent's skills (a card skill id) the request is for: the server refuses
    /// a skill the card does not list, and a caller without that skill's scopes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill: Option<String>,
}

/// How urgent a request is. Recorded on the task and handed to the agent; the server itself
/// runs every task at once (it has no queue to reorder).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    /// Background work.
    Low,
    /// The default.
    #[default]
    Normal,
    /// Ahead of the others.
    High,
}

/// How the caller wants the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResponseMode {
    /// Wait for the task to finish (a blocking send).
    Sync,
    /// Answer at once with the task; the caller polls or subscribes.
    Async,
    /// Answer at once; the finished task is pushed to `callbackUrl`.
    Callback,
}

impl Envelope {
    /// The envelope a message carries, checked; `None` when it carries none.
    pub fn of(message: &Message) -> Result<Option<Envelope>, RpcError> {
        Self::from_metadata(message.metadata.as_ref())
    }

    /// The envelope under [`EXTENSION_URI`] in `metadata`, checked.
    pub fn from_metadata(metadata: Option<&Metadata>) -> Result<Option<Envelope>, RpcError> {
        let Some(v) = metadata.and_then(|m| m.get(EXTENSION_URI)) else {
            return Ok(None);
        };
        let env: Envelope = serde_json::from_value(v.clone())
            .map_err(|e| RpcError::invalid_params(format!("metadata[\"{EXTENSION_URI}\"]: {e}")))?;
        env.check()?;
        Ok(Some(env))
    }

    /// Puts the envelope in `message` (its metadata and its list of extensions).
    pub fn attach(&self, message: &mut Message) {
        self.put(message.metadata.get_or_insert_with(Default::default));
        if !message.extensions.iter().any(|e| e == EXTENSION_URI) {
            message.extensions.push(EXTENSION_URI.to_owned());
        }
    }

    /// Puts the envelope in `metadata` under [`EXTENSION_URI`].
    pub fn put(&self, metadata: &mut Metadata) {
        if let Ok(v) = serde_json::to_value(self) {
            metadata.insert(EXTENSION_URI.to_owned(), v);
        }
    }

    /// The trace id of the `traceparent`, when it has a valid one.
    pub fn trace_id(&self) -> Option<&str> {
        self.traceparent.as_deref().and_then(trace_id)
    }

    /// Refuses what a server must not take: over-long or control-character ids, a
    /// malformed `traceparent`, callback mode without a URL.
    pub fn check(&self) -> Result<(), RpcError> {
        for (name, v) in [
            ("correlationId", &self.correlation_id),
            ("idempotencyKey", &self.idempotency_key),
            ("triggerId", &self.trigger_id),
            ("skill", &self.skill),
        ] {
            if let Some(v) = v {
                check_id(name, v)?;
            }
        }
        if let Some(t) = &self.traceparent
            && trace_id(t).is_none()
        {
            return Err(RpcError::invalid_params(
                "traceparent must be W3C trace context: 00-<32 hex>-<16 hex>-<2 hex>",
            ));
        }
        if self.response_mode == Some(ResponseMode::Callback) && self.callback_url.is_none() {
            return Err(RpcError::invalid_params(
                "responseMode \"callback\" needs a callbackUrl",
            ));
        }
        if self
            .required_scopes
            .iter()
            .any(|s| s.is_empty() || s.contains(' '))
        {
            return Err(RpcError::invalid_params(
                "requiredScopes are scope tokens: non-empty, without spaces",
            ));
        }
        Ok(())
    }
}

/// A key or id: 1 to 255 visible ASCII characters.
pub fn check_id(name: &str, v: &str) -> Result<(), RpcError> {
    if v.is_empty() || v.len() > MAX_ID || !v.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(RpcError::invalid_params(format!(
            "{name} must be 1 to {MAX_ID} visible ASCII characters"
        )));
    }
    Ok(())
}

/// The trace id of a valid `traceparent` (see [`crate::trace::parse`]), or `None`.
fn trace_id(t: &str) -> Option<&str> {
    crate::trace::parse(t).map(|(trace, _, _)| trace)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_envelopes_are_refused_with_invalid_params() {
        let cases = [
            serde_json::json!({"idempotencyKey": ""}),
            serde_json::json!({"idempotencyKey": "a b"}),
            serde_json::json!({"idempotencyKey": "x".repeat(256)}),
            serde_json::json!({"correlationId": "line\nbreak"}),
            serde_json::json!({"traceparent": "nope"}),
            serde_json::json!({"responseMode": "callback"}),
            serde_json::json!({"responseMode": "later"}),
            serde_json::json!({"priority": 3}),
            serde_json::json!({"requiredScopes": ["a b"]}),
            serde_json::json!("not an object"),
        ];
        for c in cases {
            let mut m = Metadata::new();
            m.insert(EXTENSION_URI.into(), c.clone());
            let e = Envelope::from_metadata(Some(&m)).expect_err(&c.to_string());
            assert_eq!(e.code, crate::error::code::INVALID_PARAMS, "{c}");
        }
    }
}
