//! A caller's bearer token held for delegation: an agent that acts for a user trades it for a
//! token for the next agent (RFC 8693) and never forwards it. Its `Debug` prints no secret, and
//! it is never serialized, so it cannot reach a log, a checkpoint or the task store by accident.

use std::sync::Arc;

/// A verified bearer token, kept only in memory.
#[derive(Clone, PartialEq, Eq)]
pub struct BearerToken(Arc<str>);

impl BearerToken {
    /// Holds `token`.
    pub fn new(token: impl Into<Arc<str>>) -> Self {
        BearerToken(token.into())
    }

    /// The token itself, for the one place that must send it (a token exchange).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

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
    }
}
