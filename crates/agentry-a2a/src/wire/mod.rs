//! Per-version wire types, with no I/O: what each protocol generation's JSON looks like, and
//! the conversions between it and the one internal [`model`](crate::model).
//!
//! - v0.3 JSON-RPC: the model's own serde form (`kind`-tagged parts, kebab-case states), so
//!   it needs no types of its own.
//! - v1.0 (JSON-RPC and HTTP+JSON alike): [`v1`], ProtoJSON of `a2a.proto` v1.0.
//! - v0.3 HTTP+JSON: [`v03`], ProtoJSON of the v0.3 proto (v1.0's enums, older field names).
//!
//! The codecs ([`crate::jsonrpc`], [`crate::v1`], [`crate::rest::v03`]) map method names and params onto these
//! types; nothing here knows a method, a binding or a server.

pub mod v03;
pub mod v1;
