//! A caller's bearer token held for delegation: an agent that acts for a user trades it for a
//! token for the next agent (RFC 8693) and never forwards it. Its `Debug` prints no secret, and
//! it is never serialized, so it cannot reach a log, a checkpoint or the task store by accident.

use std::sync::Arc;

/// A verified bearer token, kept only in memory.
#[derive(Clone)]
pub struct BearerToken(Held);

#[derive(Clone)]
enum Held {
    Text(Arc<str>),
    /// The request's `Authorization` value as received: a counted reference to the read
    /// buffer, not a copy of a ~400-byte token on every request that may never delegate.
    Header(http::HeaderValue),
}

impl BearerToken {
    /// Holds `token`.
    pub fn new(token: impl Into<Arc<str>>) -> Self {
        BearerToken(Held::Text(token.into()))
    }

    /// The bearer token of an `Authorization` header value (`Bearer <token>`, the scheme
    /// in any case), held without copying it; `None` when the value carries none.
    pub fn from_authorization(value: &http::HeaderValue) -> Option<Self> {
        bearer_in(value)?;
        Some(Self::authorization(value))
    }

    /// [`from_authorization`](Self::from_authorization) for a value already read as one
    /// (checking a 400-byte token as a header value costs ~500 instructions).
    pub(crate) fn authorization(value: &http::HeaderValue) -> Self {
        BearerToken(Held::Header(value.clone()))
    }

    /// The token itself, for the one place that must send it (a token exchange).
    pub fn expose(&self) -> &str {
        match &self.0 {
            Held::Text(t) => t,
            Held::Header(v) => bearer_in(v).unwrap_or_default(),
        }
    }
}

/// The token of an `Authorization` value: the scheme is case-insensitive (RFC 9110 section
/// 11.1: `BEARER x` is `Bearer x`); a value that is not visible ASCII carries none.
pub(crate) fn bearer_in(value: &http::HeaderValue) -> Option<&str> {
    value
        .to_str()
        .ok()
        .and_then(|auth| auth.trim_start().split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
}

impl PartialEq for BearerToken {
    fn eq(&self, other: &Self) -> bool {
        self.expose() == other.expose()
    }
}

impl Eq for BearerToken {}

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BearerToken(..)")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn debug_shows_no_secret() {
        let t = super::BearerToken::new("eyJhbGciOi.secret.sig");
        assert_eq!(format!("{t:?}"), "BearerToken(..)");
        assert_eq!(t.expose(), "eyJhbGciOi.secret.sig");
        let h = http::HeaderValue::from_static("bEaReR  eyJhbGciOi.secret.sig ");
        let from_header = super::BearerToken::from_authorization(&h).unwrap();
        assert_eq!(from_header, t);
        assert_eq!(format!("{from_header:?}"), "BearerToken(..)");
    }

    /// The scheme in any case, spaces around the token; other schemes, no token, and values
    /// that are not ASCII carry none.
    #[test]
    fn the_bearer_token_of_an_authorization_value() {
        use http::HeaderValue;
        for (value, token) in [
            ("Bearer abc", Some("abc")),
            ("bearer abc", Some("abc")),
            ("  BEARER   abc  ", Some("abc")),
            ("Bearer\tabc", None),
            ("Basic abc", None),
            ("Bearer", None),
            ("abc", None),
        ] {
            let v = HeaderValue::from_str(value).unwrap();
            assert_eq!(super::bearer_in(&v), token, "{value:?}");
        }
        let v = HeaderValue::from_bytes("Bearer ab\u{e9}".as_bytes()).unwrap();
        assert_eq!(super::bearer_in(&v), None);
        assert!(super::BearerToken::from_authorization(&v).is_none());
    }
}
