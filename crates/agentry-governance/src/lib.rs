//! # agentry-governance
//!
//! Who asked which agent for what, on whose behalf, and whether it was allowed, kept so that an
//! auditor can trust it.
//!
//! - [`audit`]: the audit trail, an append-only log whose records are chained by HMAC-SHA256
//!   under a key kept outside the log, so that an edited, deleted, reordered or truncated
//!   record is found by [`AuditLog::verify`].
//! - [`token`]: bearer JWTs verified against a JWKS (issuer, audience, expiry, algorithm
//!   allow-list, key rotation) and minted with an Ed25519 key whose JWKS is published.
//! - [`exchange`]: delegated credentials (RFC 8693 token exchange): a short-lived token for
//!   the next agent with the scopes the user has ∩ asked for ∩ the agent's ceiling, and the
//!   `act` chain of every agent on the path.
//! - [`triggers`]: the registry of triggers a request may name, each with the agent
//!   instructions, scopes, agents and defaults it brings.
//!
//! ```
//! # async fn run() -> Result<(), agentry_governance::AuditError> {
//! use agentry_governance::{AuditLog, Event};
//! let dir = std::env::temp_dir().join(format!("audit-doc-{}", std::process::id()));
//! let log = AuditLog::open(&dir.join("audit.db"))?;
//! let seq = log
//!     .append(Event::new("authz", "api-key:1f2e").agent("mail").decision("allow"))
//!     .await?;
//! assert_eq!(seq, 1);
//! assert_eq!(log.verify()?.records, 1);
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

pub mod audit;
pub mod exchange;
pub mod token;
pub mod triggers;

pub use audit::{AuditError, AuditLog, AuditSink, Event, Record, Tampered, Verified};
pub use exchange::{ExchangeError, ExchangeRequest, Exchanged, TokenExchange};
pub use token::{
    Claims, Grant, JwksFeed, JwtPolicy, JwtVerifier, TokenError, TokenIssuer, VerifiedToken,
};
