//! Bearer tokens checked by the issuer (OAuth 2.0 token introspection, RFC 7662), for
//! issuers whose access tokens are opaque, or that must be asked whether a token was
//! revoked: `[server.introspection]`.
//!
//! The server asks before a request's token is checked ([`BearerVerifier::prepare`]) and
//! keeps the answer until the token expires or for `cache_seconds`, whichever comes first;
//! a token the issuer calls inactive stays refused as long. An endpoint that cannot be
//! reached refuses the request (fail closed) and is asked again on the next one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agentry_a2a::server::{BearerVerifier, PrepareFuture, VerifiedBearer};
use serde::Deserialize;

/// At most this many answers are kept (then all are dropped and asked again).
const MAX_CACHED: usize = 10_000;

/// The issuer's introspection endpoint as a bearer verifier, with a JWT verifier for tokens
/// that are JWTs from the issuers `[server.jwt]` trusts.
pub struct Introspection {
    url: String,
    client_id: String,
    client_secret: String,
    /// The `aud` an active token must name.
    audience: String,
    ttl: Duration,
    http: reqwest::Client,
    jwt: Option<Arc<dyn BearerVerifier>>,
    cache: Mutex<HashMap<[u8; 32], (Instant, Verdict)>>,
}

/// What the issuer said of a token.
type Verdict = Result<VerifiedBearer, String>;

impl std::fmt::Debug for Introspection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Introspection")
            .field("url", &self.url)
            .field("client_id", &self.client_id)
            .field("audience", &self.audience)
            .finish_non_exhaustive()
    }
}

/// An RFC 7662 answer (the members agentry reads).
#[derive(Deserialize)]
struct Answer {
    active: bool,
    #[serde(default)]
    sub: Option<String>,
    #[serde(default)]
    client_id: Option<String>,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    exp: Option<u64>,
    #[serde(default)]
    aud: Option<serde_json::Value>,
    #[serde(default)]
    act: Option<agentry_governance::token::Actor>,
}

fn digest(token: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(token.as_bytes()).into()
}

/// Three dot-separated parts: a JWT for `[server.jwt]`, not a question for the endpoint.
fn looks_like_jwt(token: &str) -> bool {
    token.split('.').count() == 3
}

impl Introspection {
    /// Asks `url` as `client_id` (HTTP Basic) for tokens meant for `audience`; answers kept
    /// at most `ttl`; JWTs go to `jwt` when given.
    pub fn new(
        url: String,
        client_id: String,
        client_secret: String,
        audience: String,
        ttl: Duration,
        jwt: Option<Arc<dyn BearerVerifier>>,
    ) -> Introspection {
        Introspection {
            url,
            client_id,
            client_secret,
            audience,
            ttl,
            http: reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(5))
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap_or_default(),
            jwt,
            cache: Mutex::new(HashMap::new()),
        }
    }

    fn cached(&self, key: &[u8; 32]) -> Option<Verdict> {
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache
            .get(key)
            .filter(|(until, _)| *until > Instant::now())
            .map(|(_, r)| r.clone())
    }

    /// The endpoint's verdict on `token`, and until when it holds (`None`: do not keep it).
    async fn ask(&self, token: &str) -> (Verdict, Option<Instant>) {
        let sent = self
            .http
            .post(&self.url)
            .basic_auth(&self.client_id, Some(&self.client_secret))
            .form(&[("token", token), ("token_type_hint", "access_token")])
            .send()
            .await;
        let answer = match sent {
            // An introspection answer is small; a body past 64 KiB is not one.
            Ok(r) if r.status().is_success() => agentry_a2a::client::read_limited(r, 64 << 10)
                .await
                .map_err(|e| e.to_string())
                .and_then(|b| serde_json::from_slice::<Answer>(&b).map_err(|e| e.to_string())),
            Ok(r) => {
                tracing::warn!(
                    "token introspection at {} answered {}",
                    self.url,
                    r.status()
                );
                return (Err("the token could not be checked".into()), None);
            }
            Err(e) => {
                tracing::warn!("token introspection at {} failed: {e}", self.url);
                return (Err("the token could not be checked".into()), None);
            }
        };
        let Ok(a) = answer else {
            return (Err("the token could not be checked".into()), None);
        };
        let now = Instant::now();
        let keep = now + self.ttl;
        if !a.active {
            return (Err("inactive token".into()), Some(keep));
        }
        let unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let until = match a.exp {
            Some(exp) if exp <= unix => return (Err("expired".into()), Some(keep)),
            Some(exp) => keep.min(now + Duration::from_secs(exp - unix)),
            None => keep,
        };
        let names: Vec<String> = match &a.aud {
            Some(serde_json::Value::String(s)) => vec![s.clone()],
            Some(serde_json::Value::Array(v)) => v
                .iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect(),
            _ => Vec::new(),
        };
        if !names.iter().any(|n| n == &self.audience) {
            return (Err("wrong audience".into()), Some(until));
        }
        let Some(subject) = a.sub.or(a.client_id) else {
            return (Err("the token names no subject".into()), Some(until));
        };
        let verified = VerifiedBearer {
            subject,
            scopes: a
                .scope
                .unwrap_or_default()
                .split_whitespace()
                .map(str::to_owned)
                .collect(),
            actors: a
                .act
                .as_ref()
                .map(|x| x.chain().into_iter().map(str::to_owned).collect())
                .unwrap_or_default(),
        };
        (Ok(verified), Some(until))
    }
}

impl BearerVerifier for Introspection {
    fn verify(&self, token: &str) -> Result<VerifiedBearer, String> {
        if let Some(j) = &self.jwt
            && looks_like_jwt(token)
        {
            return j.verify(token);
        }
        self.cached(&digest(token))
            .unwrap_or_else(|| Err("the token could not be checked".into()))
    }

    fn prepare<'a>(&'a self, token: &'a str) -> Option<PrepareFuture<'a>> {
        if self.jwt.is_some() && looks_like_jwt(token) {
            return None;
        }
        let key = digest(token);
        if self.cached(&key).is_some() {
            return None;
        }
        Some(Box::pin(async move {
            // An endpoint that could not be asked leaves nothing: `verify` refuses this
            // request, and the next one asks again.
            let (verdict, Some(until)) = self.ask(token).await else {
                return;
            };
            let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            if cache.len() >= MAX_CACHED {
                cache.clear();
            }
            cache.insert(key, (until, verdict));
        }))
    }
}
