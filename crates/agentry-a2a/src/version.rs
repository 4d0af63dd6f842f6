//! Protocol versions and their negotiation.
//!
//! A request names its version in the `A2A-Version` header (or an `A2A-Version` query
//! parameter); no header means v0.3, as the v1.0 specification requires. The two generations'
//! JSON-RPC method names do not overlap, so a request without a header that uses a v1.0 name is
//! read as v1.0 (the official SDKs answer -32009 there; accepting it loses nothing).
//!
//! ```
//! use agentry_a2a::version::ProtocolVersion;
//! assert_eq!(ProtocolVersion::from_header(Some("1.0")).unwrap(), Some(ProtocolVersion::V1_0));
//! assert_eq!(ProtocolVersion::from_header(Some("")).unwrap(), None);
//! assert_eq!(ProtocolVersion::from_header(Some("99.0")).unwrap_err().code, -32009);
//! ```

use crate::error::RpcError;

/// The header (and query parameter) that carries the version.
pub const HEADER: &str = "A2A-Version";
/// The header that lists the extensions a request asks for, and a response activated.
pub const EXTENSIONS_HEADER: &str = "A2A-Extensions";

// The same names as the server looks them up: a lookup by `&str` parses and lowercases the
// name on every call (measured: 300-500 instructions a lookup, several per request).
#[cfg(feature = "server")]
pub(crate) static HEADER_NAME: http::HeaderName = http::HeaderName::from_static("a2a-version");
#[cfg(feature = "server")]
pub(crate) static EXTENSIONS_HEADER_NAME: http::HeaderName =
    http::HeaderName::from_static("a2a-extensions");
/// v0.3's name for [`EXTENSIONS_HEADER`].
#[cfg(feature = "server")]
pub(crate) static LEGACY_EXTENSIONS_HEADER_NAME: http::HeaderName =
    http::HeaderName::from_static("x-a2a-extensions");

/// A protocol generation this crate speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProtocolVersion {
    /// The 0.3 generation (`message/send`, kebab-case states).
    V0_3,
    /// The 1.0 generation (`SendMessage`, ProtoJSON shapes).
    V1_0,
}

impl ProtocolVersion {
    /// Newest first: the order a client tries them in.
    pub const SUPPORTED: [ProtocolVersion; 2] = [ProtocolVersion::V1_0, ProtocolVersion::V0_3];

    /// `Major.Minor`, as headers and cards write it.
    pub fn as_str(self) -> &'static str {
        match self {
            ProtocolVersion::V0_3 => "0.3",
            ProtocolVersion::V1_0 => "1.0",
        }
    }

    /// Reads a version string; patch levels do not matter (`1.0.1` is `1.0`).
    pub fn parse(v: &str) -> Option<Self> {
        // What nearly every request sends, before the general reading.
        match v {
            "1.0" => return Some(ProtocolVersion::V1_0),
            "0.3" => return Some(ProtocolVersion::V0_3),
            _ => {}
        }
        let mut it = v.trim().split('.');
        let major = it.next()?.parse::<u32>().ok()?;
        let minor = it.next().map_or(Some(0), |m| m.parse::<u32>().ok())?;
        match (major, minor) {
            (0, 3) => Some(ProtocolVersion::V0_3),
            (1, 0) => Some(ProtocolVersion::V1_0),
            _ => None,
        }
    }

    /// The version a request asked for: `None` when it named none (an absent or empty
    /// header), -32009 when it named one this server does not speak.
    pub fn from_header(value: Option<&str>) -> Result<Option<Self>, RpcError> {
        match value.map(str::trim) {
            None | Some("") => Ok(None),
            Some(v) => Self::parse(v)
                .map(Some)
                .ok_or_else(|| RpcError::version_not_supported(v)),
        }
    }
}

impl std::fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_with_or_without_patch() {
        for (s, v) in [
            ("0.3", ProtocolVersion::V0_3),
            ("0.3.0", ProtocolVersion::V0_3),
            ("1.0", ProtocolVersion::V1_0),
            ("1.0.1", ProtocolVersion::V1_0),
            ("1", ProtocolVersion::V1_0),
            (" 1.0 ", ProtocolVersion::V1_0),
        ] {
            assert_eq!(ProtocolVersion::parse(s), Some(v), "{s}");
        }
        for s in ["0.2", "2.0", "1.1", "x", "1.x", ""] {
            assert_eq!(ProtocolVersion::parse(s), None, "{s}");
        }
        assert_eq!(ProtocolVersion::from_header(None).unwrap(), None);
        let e = ProtocolVersion::from_header(Some("0.2.5")).unwrap_err();
        assert_eq!(e.code, crate::error::code::VERSION_NOT_SUPPORTED);
        assert!(
            e.message.contains("0.2.5") && e.message.contains("1.0"),
            "{}",
            e.message
        );
    }
}
