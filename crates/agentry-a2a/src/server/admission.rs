//! Admission: a hook that sees a send's task envelope and its caller before anything starts,
//! to refuse the request or to give the agent instructions for it. Governance plugs its
//! triggers registry in here (an unknown or unauthorized trigger is refused, a known one adds
//! its prompt and its defaults); the protocol crate knows no triggers.

use crate::envelope::Envelope;

/// What the hook sees of a send.
#[non_exhaustive]
pub struct Admission<'a> {
    /// The agent asked (its card's name).
    pub agent: &'a str,
    /// Who asks (the principal), `None` when anonymous.
    pub caller: Option<&'a str>,
    /// The scopes the caller's token grants; `None`: not limited (the operator's static
    /// credentials, or an agent open to everyone).
    pub scopes: Option<&'a [String]>,
    /// The request's envelope: the hook may fill in defaults (priority, response mode).
    pub envelope: &'a mut Envelope,
}

impl<'a> Admission<'a> {
    pub(crate) fn new(
        agent: &'a str,
        caller: Option<&'a str>,
        scopes: Option<&'a [String]>,
        envelope: &'a mut Envelope,
    ) -> Self {
        Admission {
            agent,
            caller,
            scopes,
            envelope,
        }
    }
}

/// Why a send is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refused {
    /// The request names something that does not exist or does not apply (-32602).
    #[error("{0}")]
    Invalid(String),
    /// The caller's scopes do not cover what the request needs (HTTP 403,
    /// `insufficient_scope` with these scopes).
    #[error("{message}")]
    Forbidden {
        /// For the client and the audit trail.
        message: String,
        /// The scopes that are missing.
        scopes: Vec<String>,
    },
}

/// Decides, for each send with an envelope, whether it may start.
pub trait Admit: Send + Sync + 'static {
    /// Instructions the agent adds to its own for this request (`None`: none), or why the
    /// request is refused.
    fn admit(&self, request: Admission<'_>) -> Result<Option<String>, Refused>;
}
