//! Delegated credentials (RFC 8693 token exchange): an agent that acts for a user trades
//! the token it was called with for a short-lived token for the next agent, with no more
//! privilege than the user has, the next agent needs, and the operator allows it.
//!
//! The rules [`TokenExchange::exchange`] applies, each a refusal when it fails:
//! - the subject token verifies (the user's token from the identity provider, or a token this
//!   service issued earlier: a re-exchange further down the path), and was meant for the
//!   party asking (its `aud` is the actor or this service);
//! - a subject token's `may_act` names the actor, when it has one;
//! - the target audience is a known agent; the scopes granted are the subject's ∩ the ones
//!   asked for (asking for one the subject lacks is refused, not silently dropped) ∩ the
//!   agent's ceiling, and not empty;
//! - the new token's `act` nests the actor over the subject's chain (so a re-exchange cannot
//!   drop an actor), at most `max_depth` deep;
//! - it lives `lifetime` (default 300 s), never past the subject token's expiry.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::token::{Actor, Grant, JwtVerifier, TokenError, TokenIssuer};

/// Why an exchange was refused (RFC 8693 section 2.2.2 error codes in [`code`](Self::code)).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExchangeError {
    /// The subject token did not verify.
    #[error("subject token: {0}")]
    SubjectToken(#[source] TokenError),
    /// The subject token was not meant for the party asking.
    #[error("the subject token is for {aud}, not for {actor}")]
    NotForActor {
        /// The token's audience(s).
        aud: String,
        /// Who asked.
        actor: String,
    },
    /// The subject token's `may_act` does not name the actor.
    #[error("{actor} may not act for this subject")]
    MayNotAct {
        /// Who asked.
        actor: String,
    },
    /// No such agent in the registry.
    #[error("unknown audience {0}")]
    UnknownAudience(String),
    /// Scopes asked for that the subject does not hold.
    #[error("scope(s) not held by the subject: {0}")]
    Widened(String),
    /// Nothing would be left after the intersections.
    #[error("no scope left for {0}")]
    NoScope(String),
    /// The delegation chain would be deeper than allowed.
    #[error("delegation chain deeper than {0}")]
    TooDeep(usize),
    /// The new token could not be signed.
    #[error("signing: {0}")]
    Signing(#[source] TokenError),
}

impl ExchangeError {
    /// The OAuth error code: `invalid_grant` (subject token), `invalid_target` (audience),
    /// `invalid_scope`, or `invalid_request`.
    pub fn code(&self) -> &'static str {
        match self {
            ExchangeError::SubjectToken(_)
            | ExchangeError::NotForActor { .. }
            | ExchangeError::MayNotAct { .. }
            | ExchangeError::TooDeep(_) => "invalid_grant",
            ExchangeError::UnknownAudience(_) => "invalid_target",
            ExchangeError::Widened(_) | ExchangeError::NoScope(_) => "invalid_scope",
            ExchangeError::Signing(_) => "server_error",
        }
    }
}

/// One exchange: who asks (authenticated by the caller of [`TokenExchange::exchange`]),
/// with which token, for which agent and scopes.
#[derive(Debug, Clone)]
pub struct ExchangeRequest {
    /// The token the actor was called with (or the user's own).
    pub subject_token: String,
    /// The authenticated party asking: the agent that will call the next one.
    pub actor: String,
    /// The agent the new token is for.
    pub audience: String,
    /// The scopes asked for; `None`: all the subject may pass on.
    pub scope: Option<BTreeSet<String>>,
}

/// What an exchange issued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exchanged {
    /// The new token.
    pub token: String,
    /// Its scopes.
    pub scopes: BTreeSet<String>,
    /// Its lifetime in seconds.
    pub expires_in: u64,
    /// Its delegation chain, most recent actor first.
    pub chain: Vec<String>,
    /// The user it acts for (`sub`).
    pub subject: String,
}

/// The token service: verifies subject tokens from the identity provider and from itself,
/// mints delegated tokens with its own key.
#[derive(Debug)]
pub struct TokenExchange {
    issuer: TokenIssuer,
    /// The identity provider's tokens (audience: this service, or an agent).
    upstream: Option<JwtVerifier>,
    /// This service's own tokens, re-presented further down the path.
    own: JwtVerifier,
    /// Each known agent's audience and the most it may be given.
    ceilings: BTreeMap<String, BTreeSet<String>>,
    /// Default 300 s.
    pub lifetime: Duration,
    /// The longest `act` chain issued; default 4.
    pub max_depth: usize,
}

impl TokenExchange {
    /// A service issuing with `issuer`, accepting the identity provider's tokens through
    /// `upstream` and its own; `ceilings` lists each agent's audience and its scope ceiling.
    ///
    /// Build `upstream` with [`JwtPolicy::any_audience`](crate::token::JwtPolicy::any_audience):
    /// a subject token's `aud` is checked here, against the party asking.
    pub fn new(
        issuer: TokenIssuer,
        upstream: Option<JwtVerifier>,
        ceilings: BTreeMap<String, BTreeSet<String>>,
    ) -> Result<Self, TokenError> {
        let keys =
            serde_json::from_value(issuer.jwks()).map_err(|e| TokenError::Key(e.to_string()))?;
        let own =
            JwtVerifier::from_jwks(keys, crate::token::JwtPolicy::any_audience(issuer.issuer()));
        Ok(TokenExchange {
            issuer,
            upstream,
            own,
            ceilings,
            lifetime: Duration::from_secs(300),
            max_depth: 4,
        })
    }

    /// The public keys of the tokens it issues (to serve at `/.well-known/jwks.json`).
    pub fn jwks(&self) -> serde_json::Value {
        self.issuer.jwks()
    }

    /// The issuer name its tokens carry.
    pub fn issuer(&self) -> &str {
        self.issuer.issuer()
    }

    /// Applies the rules of the module's documentation; the new token, or why not.
    pub fn exchange(&self, req: &ExchangeRequest) -> Result<Exchanged, ExchangeError> {
        // Routed by the issuer it claims; the verifier of that issuer checks everything.
        let iss = crate::token::unverified_claim(&req.subject_token, "iss");
        let verifier = match &self.upstream {
            Some(up) if iss.as_deref() != Some(self.issuer.issuer()) => up,
            _ => &self.own,
        };
        let claims = verifier
            .verify(&req.subject_token)
            .map_err(ExchangeError::SubjectToken)?;
        let auds = claims.aud.names();
        if !auds
            .iter()
            .any(|a| *a == req.actor || *a == self.issuer.issuer())
        {
            return Err(ExchangeError::NotForActor {
                aud: auds.join(" "),
                actor: req.actor.clone(),
            });
        }
        if let Some(may) = &claims.may_act
            && may.sub != req.actor
        {
            return Err(ExchangeError::MayNotAct {
                actor: req.actor.clone(),
            });
        }
        let ceiling = self
            .ceilings
            .get(&req.audience)
            .ok_or_else(|| ExchangeError::UnknownAudience(req.audience.clone()))?;
        let held = claims.scopes();
        let asked = match &req.scope {
            Some(s) => {
                let widened: Vec<&str> = s
                    .iter()
                    .filter(|x| !held.contains(*x))
                    .map(String::as_str)
                    .collect();
                if !widened.is_empty() {
                    return Err(ExchangeError::Widened(widened.join(" ")));
                }
                s.clone()
            }
            None => held,
        };
        let scopes: BTreeSet<String> = asked.intersection(ceiling).cloned().collect();
        if scopes.is_empty() {
            return Err(ExchangeError::NoScope(req.audience.clone()));
        }
        let act = Actor {
            sub: req.actor.clone(),
            act: claims.act.clone().map(Box::new),
        };
        let chain: Vec<String> = act.chain().into_iter().map(str::to_owned).collect();
        if chain.len() > self.max_depth {
            return Err(ExchangeError::TooDeep(self.max_depth));
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let left = claims.exp.saturating_sub(now);
        let lifetime = self.lifetime.as_secs().min(left).max(1);
        let token = self
            .issuer
            .issue(&Grant {
                subject: claims.sub.clone(),
                audience: req.audience.clone(),
                scopes: scopes.clone(),
                lifetime: Duration::from_secs(lifetime),
                act: Some(act),
            })
            .map_err(ExchangeError::Signing)?;
        Ok(Exchanged {
            token,
            scopes,
            expires_in: lifetime,
            chain,
            subject: claims.sub,
        })
    }
}
