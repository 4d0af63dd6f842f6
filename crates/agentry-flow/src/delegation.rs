//! Delegated credentials for the calls a run makes: for each call to a remote agent the
//! orchestrator trades the token its own caller presented for a short-lived token for that
//! agent alone (RFC 8693 token exchange), asking for the scopes the agent's card requires for
//! the skill and no more. The caller's token and the orchestrator's own long-lived credentials
//! never leave the orchestrator; the token service adds the orchestrator to the token's `act`
//! chain and caps its scopes by what the caller holds and the operator allows that agent.
//!
//! [`TokenExchangeClient`] speaks to any RFC 8693 endpoint (agentry's `[token_service]`, or an
//! identity provider's); [`Delegation`] is the seam for another source of tokens.

use std::time::Duration;

use agentry_a2a::client::Auth;
use agentry_a2a::credential::BearerToken;
use agentry_a2a::store::BoxFuture;

/// Why no delegated token was had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DelegationError {
    /// The token service refused (its OAuth error code and description).
    #[error("the token service refused: {code}: {description}")]
    Refused {
        /// `invalid_grant`, `invalid_scope`, `invalid_target`, `invalid_client`, ...
        code: String,
        /// What it said.
        description: String,
    },
    /// The token service could not be reached or answered something that is not a token.
    #[error("token service: {0}")]
    Unavailable(String),
}

/// Where delegated tokens come from.
pub trait Delegation: Send + Sync + 'static {
    /// A token for one call to `audience` on behalf of `subject`, with `scopes` (`None`:
    /// whatever the subject may pass on to that audience), for the user request
    /// `correlation` (so the token service's records join the request's trail).
    fn credential<'a>(
        &'a self,
        subject: &'a BearerToken,
        audience: &'a str,
        scopes: Option<&'a [String]>,
        correlation: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Auth, DelegationError>>;
}

/// An RFC 8693 client: `POST token_url` with the orchestrator's client credentials (HTTP
/// Basic, RFC 6749 section 2.3.1), `subject_token` the caller's token, `audience` the agent.
pub struct TokenExchangeClient {
    http: reqwest::Client,
    token_url: String,
    client_id: String,
    client_secret: String,
}

impl std::fmt::Debug for TokenExchangeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenExchangeClient")
            .field("token_url", &self.token_url)
            .field("client_id", &self.client_id)
            .finish_non_exhaustive()
    }
}

impl TokenExchangeClient {
    /// A client of the token service at `token_url`, authenticating as `client_id`.
    pub fn new(
        token_url: impl Into<String>,
        client_id: impl Into<String>,
        client_secret: impl Into<String>,
    ) -> Self {
        TokenExchangeClient {
            http: reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(2))
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap_or_default(),
            token_url: token_url.into(),
            client_id: client_id.into(),
            client_secret: client_secret.into(),
        }
    }

    async fn exchange(
        &self,
        subject: &BearerToken,
        audience: &str,
        scopes: Option<&[String]>,
        correlation: Option<&str>,
    ) -> Result<Auth, DelegationError> {
        let mut body = format!(
            "grant_type={}&subject_token={}&subject_token_type={}&audience={}",
            form_encode("urn:ietf:params:oauth:grant-type:token-exchange"),
            form_encode(subject.expose()),
            form_encode("urn:ietf:params:oauth:token-type:jwt"),
            form_encode(audience),
        );
        if let Some(s) = scopes.filter(|s| !s.is_empty()) {
            body.push_str("&scope=");
            body.push_str(&form_encode(&s.join(" ")));
        }
        // An extension parameter (RFC 6749 section 3.2: unknown ones are ignored): agentry's
        // token service records the issue under the request's correlation id.
        if let Some(c) = correlation {
            body.push_str("&correlation_id=");
            body.push_str(&form_encode(c));
        }
        let resp = self
            .http
            .post(&self.token_url)
            .basic_auth(
                form_encode(&self.client_id),
                Some(form_encode(&self.client_secret)),
            )
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(body)
            .send()
            .await
            .map_err(|e| DelegationError::Unavailable(format!("{}: {e}", self.token_url)))?;
        let status = resp.status();
        // A token response is small; a body past 64 KiB is not one (refused as it arrives).
        let bytes = agentry_a2a::client::read_limited(resp, 64 * 1024)
            .await
            .map_err(|e| DelegationError::Unavailable(format!("{}: {e}", self.token_url)))?;
        let v: serde_json::Value = serde_json::from_slice(&bytes).map_err(|_| {
            DelegationError::Unavailable(format!("HTTP {status}: not a JSON token response"))
        })?;
        let field = |k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_owned);
        if !status.is_success() {
            return match field("error") {
                Some(code) if status.is_client_error() => Err(DelegationError::Refused {
                    code,
                    description: field("error_description").unwrap_or_default(),
                }),
                _ => Err(DelegationError::Unavailable(format!("HTTP {status}"))),
            };
        }
        match field("access_token") {
            Some(t) if !t.is_empty() => Ok(Auth::Bearer(t)),
            _ => Err(DelegationError::Unavailable(
                "the answer carries no access_token".into(),
            )),
        }
    }
}

impl Delegation for TokenExchangeClient {
    fn credential<'a>(
        &'a self,
        subject: &'a BearerToken,
        audience: &'a str,
        scopes: Option<&'a [String]>,
        correlation: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Auth, DelegationError>> {
        Box::pin(self.exchange(subject, audience, scopes, correlation))
    }
}

/// `application/x-www-form-urlencoded` (unreserved bytes kept, space as `+`).
fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn form_encoding_keeps_only_unreserved_bytes() {
        assert_eq!(
            super::form_encode("http://a:b/c d+é"),
            "http%3A%2F%2Fa%3Ab%2Fc+d%2B%C3%A9"
        );
    }
}
