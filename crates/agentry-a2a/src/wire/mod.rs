//! Per-version wire types, with no I/O: what each protocol generation's JSON looks like, and
//! the conversions between it and the one internal [`model`](crate::model).
//!
//! - v0.3 JSON-RPC: the model's own serde form (`kind`-tagged parts, kebab-case states), so
//!   it needs no types of its own.
//! - v1.0 (JSON-RPC and HTTP+JSON alike): [`v1`], ProtoJSON of `a2a.proto` v1.0.
//! - v0.3 HTTP+JSON: [`v03`], ProtoJSON of the v0.3 proto (v1.0's enums, older field names).
//! - [`task`]: the task-shaped types both share (artifact, status, task, artifact update),
//!   generic over each form's parts, messages and state spelling.
//!
//! The codecs ([`crate::jsonrpc`], [`crate::v1`], [`crate::rest::v03`]) map method names and params onto these
//! types; nothing here knows a method, a binding or a server.

pub mod task;
pub mod v03;
pub mod v1;

use std::borrow::Cow;
use std::fmt;

use crate::model::Metadata;

pub(crate) type Str<'a> = Cow<'a, str>;
pub(crate) type Meta<'a> = Option<Cow<'a, Metadata>>;

pub(crate) fn borrowed(s: &str) -> Str<'_> {
    Cow::Borrowed(s)
}

pub(crate) fn opt_str(s: &Option<String>) -> Option<Str<'_>> {
    s.as_deref().map(Cow::Borrowed)
}

pub(crate) fn meta(m: &Option<Metadata>) -> Meta<'_> {
    m.as_ref().map(Cow::Borrowed)
}

pub(crate) fn owned_meta(m: Meta<'_>) -> Option<Metadata> {
    m.map(Cow::into_owned)
}

pub(crate) fn strs<'a>(v: &'a [String]) -> Vec<Str<'a>> {
    v.iter().map(|s| borrowed(s)).collect()
}

pub(crate) fn owned_strs(v: Vec<Str<'_>>) -> Vec<String> {
    v.into_iter().map(Cow::into_owned).collect()
}

pub(crate) fn is_empty(s: &Str<'_>) -> bool {
    s.is_empty()
}

/// Each of `items` into the model by `f`; a failing one is named `field[i]`.
pub(crate) fn each_into_model<W, M>(
    items: Vec<W>,
    field: &str,
    f: impl Fn(W) -> Result<M, WireError>,
) -> Result<Vec<M>, WireError> {
    items
        .into_iter()
        .enumerate()
        .map(|(i, x)| f(x).map_err(|e| e.at(&format!("{field}[{i}]"))))
        .collect()
}

/// An answer read as `T`, the error naming the failing field's path (clients).
pub(crate) fn read<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> Result<T, String> {
    serde_path_to_error::deserialize(v).map_err(|e| format!("at {}: {}", e.path(), e.inner()))
}

/// A wire value that decoded but does not make sense (a part with two contents, an unknown
/// part kind). `path` says where, relative to what was decoded (`parts[1]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError {
    /// Where, as a field path (`message.parts[0]`); empty for the value itself.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl WireError {
    fn new(message: impl Into<String>) -> Self {
        WireError {
            path: String::new(),
            message: message.into(),
        }
    }

    /// The same error seen from the enclosing value: `segment` is the field (or `field[i]`)
    /// that holds the failing one.
    pub fn at(mut self, segment: &str) -> Self {
        self.path = if self.path.is_empty() {
            segment.to_owned()
        } else {
            format!("{segment}.{}", self.path)
        };
        self
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{} {}", self.path, self.message)
        }
    }
}

impl std::error::Error for WireError {}
