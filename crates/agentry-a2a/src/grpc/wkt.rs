//! The protobuf well-known types that `a2a.proto` uses (`Struct`, `Value`, `ListValue`,
//! `Timestamp`, `Empty`) and `google.rpc.Status` holds (`Any`), with their ProtoJSON forms.
//!
//! Written here rather than taken from `pbjson-types`, whose build script runs prost-build
//! and pbjson-build (with prettyplease and four more crates) to generate the same few
//! types: about 20 s of compiling on every cold build of the gRPC feature. Timestamps keep
//! milliseconds, as everything else in agentry does.

use std::collections::HashMap;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// `google.protobuf.Struct`: a JSON object.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Struct {
    /// The object's members.
    #[prost(map = "string, message", tag = "1")]
    pub fields: HashMap<String, Value>,
}

/// `google.protobuf.Value`: any JSON value.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Value {
    /// Which kind of value, and the value.
    #[prost(oneof = "value::Kind", tags = "1, 2, 3, 4, 5, 6")]
    pub kind: Option<value::Kind>,
}

/// [`Value`]'s kinds.
pub mod value {
    /// One JSON value.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Kind {
        /// `null`.
        #[prost(enumeration = "super::NullValue", tag = "1")]
        NullValue(i32),
        /// A number (a double: protobuf has no other).
        #[prost(double, tag = "2")]
        NumberValue(f64),
        /// A string.
        #[prost(string, tag = "3")]
        StringValue(String),
        /// `true` or `false`.
        #[prost(bool, tag = "4")]
        BoolValue(bool),
        /// An object.
        #[prost(message, tag = "5")]
        StructValue(super::Struct),
        /// An array.
        #[prost(message, tag = "6")]
        ListValue(super::ListValue),
    }
}

/// `google.protobuf.ListValue`: a JSON array.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListValue {
    /// The array's items.
    #[prost(message, repeated, tag = "1")]
    pub values: Vec<Value>,
}

/// `google.protobuf.NullValue`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum NullValue {
    /// The one value: `null`.
    NullValue = 0,
}

/// `google.protobuf.Timestamp`: seconds and nanoseconds since the Unix epoch, UTC.
#[derive(Clone, Copy, PartialEq, Eq, Hash, prost::Message)]
pub struct Timestamp {
    /// Whole seconds.
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    /// The fraction, 0 to 999,999,999.
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

/// `google.protobuf.Empty`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, prost::Message)]
pub struct Empty {}

/// `google.protobuf.Any`: a message of the type its URL names (protobuf form only).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Any {
    /// `type.googleapis.com/<full message name>`.
    #[prost(string, tag = "1")]
    pub type_url: String,
    /// The message's bytes.
    #[prost(bytes = "vec", tag = "2")]
    pub value: Vec<u8>,
}

impl From<serde_json::Value> for Value {
    fn from(v: serde_json::Value) -> Self {
        use value::Kind;
        let kind = match v {
            serde_json::Value::Null => Kind::NullValue(0),
            serde_json::Value::Bool(b) => Kind::BoolValue(b),
            serde_json::Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(f64::NAN)),
            serde_json::Value::String(s) => Kind::StringValue(s),
            serde_json::Value::Array(a) => Kind::ListValue(ListValue {
                values: a.into_iter().map(Value::from).collect(),
            }),
            serde_json::Value::Object(o) => Kind::StructValue(Struct::from(o)),
        };
        Value { kind: Some(kind) }
    }
}

impl From<serde_json::Map<String, serde_json::Value>> for Struct {
    fn from(o: serde_json::Map<String, serde_json::Value>) -> Self {
        Struct {
            fields: o.into_iter().map(|(k, v)| (k, Value::from(v))).collect(),
        }
    }
}

impl TryFrom<&Value> for serde_json::Value {
    type Error = String;
    fn try_from(v: &Value) -> Result<Self, String> {
        use value::Kind;
        Ok(match &v.kind {
            None | Some(Kind::NullValue(_)) => serde_json::Value::Null,
            Some(Kind::BoolValue(b)) => serde_json::Value::Bool(*b),
            // JSON has no NaN or infinity: ProtoJSON refuses them.
            Some(Kind::NumberValue(n)) => serde_json::Number::from_f64(*n)
                .map(serde_json::Value::Number)
                .ok_or_else(|| format!("{n} is not a JSON number"))?,
            Some(Kind::StringValue(s)) => serde_json::Value::String(s.clone()),
            Some(Kind::ListValue(l)) => serde_json::Value::Array(
                l.values
                    .iter()
                    .map(serde_json::Value::try_from)
                    .collect::<Result<_, _>>()?,
            ),
            Some(Kind::StructValue(s)) => serde_json::Value::Object(struct_json(s)?),
        })
    }
}

fn struct_json(s: &Struct) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    s.fields
        .iter()
        .map(|(k, v)| Ok((k.clone(), serde_json::Value::try_from(v)?)))
        .collect()
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serde_json::Value::try_from(self)
            .map_err(serde::ser::Error::custom)?
            .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde_json::Value::deserialize(d).map(Value::from)
    }
}

impl Serialize for Struct {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct_json(self)
            .map_err(serde::ser::Error::custom)?
            .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Struct {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde_json::Map::deserialize(d).map(Struct::from)
    }
}

impl Serialize for ListValue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(&self.values)
    }
}

impl<'de> Deserialize<'de> for ListValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vec::<Value>::deserialize(d).map(|values| ListValue { values })
    }
}

impl Serialize for NullValue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_unit()
    }
}

impl<'de> Deserialize<'de> for NullValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Option::<()>::deserialize(d).map(|_| NullValue::NullValue)
    }
}

/// The earliest and latest instants ProtoJSON allows (years 0001 to 9999).
const MIN_SECONDS: i64 = -62_135_596_800;
const MAX_SECONDS: i64 = 253_402_300_799;

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if !(MIN_SECONDS..=MAX_SECONDS).contains(&self.seconds)
            || !(0..1_000_000_000).contains(&self.nanos)
        {
            return Err(serde::ser::Error::custom(format!(
                "timestamp out of range: {}s {}ns",
                self.seconds, self.nanos
            )));
        }
        let ms = self.seconds * 1000 + i64::from(self.nanos / 1_000_000);
        s.serialize_str(&crate::time::format_unix_millis(ms))
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = std::borrow::Cow::<str>::deserialize(d)?;
        let ms = crate::time::parse_rfc3339(&text)
            .filter(|ms| (MIN_SECONDS * 1000..=MAX_SECONDS * 1000 + 999).contains(ms))
            .ok_or_else(|| D::Error::custom(format!("not an RFC 3339 timestamp: {text:?}")))?;
        Ok(Timestamp {
            seconds: ms.div_euclid(1000),
            nanos: (ms.rem_euclid(1000) * 1_000_000) as i32,
        })
    }
}

impl Serialize for Empty {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(std::iter::empty::<((), ())>())
    }
}

impl<'de> Deserialize<'de> for Empty {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(d).map(|_| Empty {})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message as _;
    use serde_json::json;

    #[test]
    fn values_cross_json_and_protobuf() {
        let j = json!({"a": [1, "x", true, null, {"b": 2.5}], "c": {}});
        let v = Value::from(j.clone());
        let back = Value::decode(v.encode_to_vec().as_slice()).unwrap();
        assert_eq!(
            serde_json::to_value(&back).unwrap(),
            json!({"a": [1.0, "x", true, null, {"b": 2.5}], "c": {}})
        );
        let s: Struct = serde_json::from_value(json!({"k": [1]})).unwrap();
        assert_eq!(serde_json::to_value(&s).unwrap(), json!({"k": [1.0]}));
        let nan = Value {
            kind: Some(value::Kind::NumberValue(f64::NAN)),
        };
        assert!(serde_json::to_value(&nan).is_err(), "NaN is no JSON number");
        assert_eq!(serde_json::to_value(Value::default()).unwrap(), json!(null));
    }

    #[test]
    fn timestamps_are_rfc3339_in_utc() {
        let t: Timestamp = serde_json::from_value(json!("2026-12-01T10:00:00.123+01:00")).unwrap();
        assert_eq!(t.nanos, 123_000_000);
        assert_eq!(
            serde_json::to_value(t).unwrap(),
            json!("2026-12-01T09:00:00.123Z")
        );
        let epoch = Timestamp {
            seconds: 0,
            nanos: 0,
        };
        assert_eq!(
            serde_json::to_value(epoch).unwrap(),
            json!("1970-01-01T00:00:00.000Z")
        );
        let before: Timestamp = serde_json::from_value(json!("1969-12-31T23:59:59.500Z")).unwrap();
        assert_eq!((before.seconds, before.nanos), (-1, 500_000_000));
        assert!(serde_json::from_value::<Timestamp>(json!("yesterday")).is_err());
        let far = Timestamp {
            seconds: i64::MAX,
            nanos: 0,
        };
        assert!(serde_json::to_value(far).is_err());
        let bad_nanos = Timestamp {
            seconds: 0,
            nanos: -1,
        };
        assert!(serde_json::to_value(bad_nanos).is_err());
    }

    #[test]
    fn empty_is_an_object() {
        assert_eq!(serde_json::to_value(Empty {}).unwrap(), json!({}));
        assert!(serde_json::from_value::<Empty>(json!({"x": 1})).is_ok());
    }
}
