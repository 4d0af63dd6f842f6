//! The token service over HTTP (`[token_service]`): RFC 8693 token exchange at `POST /token`
//! and the keys of the tokens it mints at `GET /.well-known/jwks.json`, so agentry's agents
//! (and other gateways) can use it as their token service.
//!
//! A request authenticates the acting agent with HTTP Basic (client id and secret, RFC 6749
//! section 2.3.1) and sends, form-encoded: `grant_type` =
//! `urn:ietf:params:oauth:grant-type:token-exchange`, `subject_token` (the token the agent was
//! called with), `subject_token_type` (`...:token-type:jwt` or `...:access_token`),
//! `audience` (the next agent) and optionally `scope`. The rules are
//! [`agentry_governance::exchange`]'s; every issue and refusal goes to the audit trail when
//! the server keeps one.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentry_governance::{
    AuditSink, Event, ExchangeRequest, JwtPolicy, JwtVerifier, TokenExchange, TokenIssuer,
};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::Error;
use crate::config::TokenServiceSection;

const GRANT: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const JWT_TYPE: &str = "urn:ietf:params:oauth:token-type:jwt";
const ACCESS_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

/// The exchange, the clients allowed to ask, and where issues are recorded.
pub struct TokenService {
    exchange: TokenExchange,
    clients: Vec<(String, String)>,
    audit: Option<Arc<dyn AuditSink>>,
    /// The service's own tokens, for introspection (RFC 7662).
    own: JwtVerifier,
}

impl TokenService {
    /// From `[token_service]`; the key lives in `key_file` (default
    /// `<state_dir>/token-service.key`).
    pub fn from_config(
        t: &TokenServiceSection,
        state_dir: &Path,
        audit: Option<Arc<dyn AuditSink>>,
    ) -> Result<Self, Error> {
        let invalid = |e: &dyn std::fmt::Display| Error::Invalid(format!("[token_service]: {e}"));
        let key = t
            .key_file
            .clone()
            .unwrap_or_else(|| state_dir.join("token-service.key"));
        let issuer =
            TokenIssuer::load_or_create(t.issuer.clone(), &key).map_err(|e| invalid(&e))?;
        let upstream = match &t.upstream {
            Some(u) => Some(
                JwtVerifier::from_jwks_file(
                    &u.jwks_file,
                    JwtPolicy::any_audience(u.issuer.clone()),
                )
                .map_err(|e| invalid(&e))?,
            ),
            None => None,
        };
        let ceilings: BTreeMap<String, BTreeSet<String>> = t
            .ceilings
            .iter()
            .map(|(aud, scopes)| (aud.clone(), scopes.iter().cloned().collect()))
            .collect();
        let mut exchange =
            TokenExchange::new(issuer, upstream, ceilings).map_err(|e| invalid(&e))?;
        if let Some(s) = t.lifetime_seconds {
            exchange.lifetime = Duration::from_secs(s);
        }
        if let Some(d) = t.max_depth {
            exchange.max_depth = d;
        }
        let clients = t
            .clients
            .iter()
            .map(|(id, spec)| Ok((id.clone(), crate::serve::secret(spec)?)))
            .collect::<Result<_, Error>>()?;
        let keys = serde_json::from_value(exchange.jwks()).map_err(|e| invalid(&e))?;
        let own = JwtVerifier::from_jwks(keys, JwtPolicy::any_audience(t.issuer.clone()));
        Ok(TokenService {
            exchange,
            clients,
            audit,
            own,
        })
    }

    /// The client a request authenticates as (HTTP Basic), compared in constant time.
    fn client(&self, headers: &HeaderMap) -> Option<String> {
        use base64::Engine;
        let auth = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
        let (scheme, value) = auth.trim().split_once(' ')?;
        if !scheme.eq_ignore_ascii_case("basic") {
            return None;
        }
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(value.trim())
            .ok()?;
        let text = String::from_utf8(decoded).ok()?;
        let (id, secret) = text.split_once(':')?;
        let (id, secret) = (form_decode(id), form_decode(secret));
        self.clients
            .iter()
            .find(|(cid, csecret)| *cid == id && ct_eq(csecret, &secret))
            .map(|(cid, _)| cid.clone())
    }

    async fn record(&self, e: Event) {
        if let Some(log) = &self.audit
            && let Err(err) = log.append(e).await
        {
            tracing::error!("token service: not audited: {err}");
        }
    }
}

/// `POST /token`, `POST /introspect` and `GET /.well-known/jwks.json`.
pub fn routes(service: Arc<TokenService>) -> Router {
    Router::new()
        .route("/token", axum::routing::post(token))
        .route("/introspect", axum::routing::post(introspect))
        .route("/.well-known/jwks.json", axum::routing::get(jwks))
        .with_state(service)
}

async fn jwks(State(s): State<Arc<TokenService>>) -> Response {
    axum::Json(s.exchange.jwks()).into_response()
}

/// An OAuth error body (RFC 6749 section 5.2).
fn oauth_error(status: StatusCode, code: &str, description: &str) -> Response {
    let mut r = (
        status,
        axum::Json(serde_json::json!({"error": code, "error_description": description})),
    )
        .into_response();
    r.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    if status == StatusCode::UNAUTHORIZED {
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Basic realm=\"agentry token service\""),
        );
    }
    r
}

async fn token(State(s): State<Arc<TokenService>>, headers: HeaderMap, body: Bytes) -> Response {
    let started = Instant::now();
    let Some(actor) = s.client(&headers) else {
        s.record(
            Event::new("token", "anonymous")
                .decision("deny")
                .detail(serde_json::json!({"reason": "client authentication failed"})),
        )
        .await;
        return oauth_error(
            StatusCode::UNAUTHORIZED,
            "invalid_client",
            "client authentication failed",
        );
    };
    let form = form_pairs(&body);
    let get = |k: &str| form.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    // agentry's extension: the user request the exchange serves, for the trail.
    let correlation = get("correlation_id")
        .filter(|c| agentry_a2a::envelope::check_id("correlation_id", c).is_ok())
        .map(str::to_owned);
    let with_correlation = |e: Event| match &correlation {
        Some(c) => e.correlation(c.clone()),
        None => e,
    };
    if get("grant_type") != Some(GRANT) {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            "only token exchange",
        );
    }
    let (Some(subject), Some(audience)) = (get("subject_token"), get("audience")) else {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "subject_token and audience are required",
        );
    };
    if !matches!(get("subject_token_type"), Some(JWT_TYPE | ACCESS_TYPE)) {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "subject_token_type must be a JWT or an access token",
        );
    }
    let scope = get("scope").map(|s| s.split_whitespace().map(str::to_owned).collect());
    let req = ExchangeRequest {
        subject_token: subject.to_owned(),
        actor: actor.clone(),
        audience: audience.to_owned(),
        scope,
    };
    match s.exchange.exchange(&req) {
        Ok(x) => {
            let scope = x.scopes.iter().cloned().collect::<Vec<_>>().join(" ");
            s.record(
                with_correlation(Event::new("token", actor))
                    .on_behalf_of(format!("jwt:{}", x.subject))
                    .agent(audience)
                    .decision("issued")
                    .latency(started.elapsed())
                    .detail(serde_json::json!({"scope": scope, "chain": x.chain, "expires_in": x.expires_in})),
            )
            .await;
            let mut r = axum::Json(serde_json::json!({
                "access_token": x.token,
                "issued_token_type": JWT_TYPE,
                "token_type": "Bearer",
                "expires_in": x.expires_in,
                "scope": scope,
            }))
            .into_response();
            r.headers_mut().insert(
                header::CACHE_CONTROL,
                header::HeaderValue::from_static("no-store"),
            );
            r
        }
        Err(e) => {
            s.record(
                with_correlation(Event::new("token", actor))
                    .agent(audience)
                    .decision("deny")
                    .latency(started.elapsed())
                    .detail(serde_json::json!({"reason": e.to_string(), "error": e.code()})),
            )
            .await;
            let status = if e.code() == "server_error" {
                StatusCode::INTERNAL_SERVER_ERROR
            } else {
                StatusCode::BAD_REQUEST
            };
            oauth_error(status, e.code(), &e.to_string())
        }
    }
}

/// RFC 7662 introspection of the service's own tokens, for its clients: `active` and the
/// token's claims, or `{"active": false}` for anything it did not issue, expired or altered.
async fn introspect(
    State(s): State<Arc<TokenService>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if s.client(&headers).is_none() {
        return oauth_error(
            StatusCode::UNAUTHORIZED,
            "invalid_client",
            "client authentication failed",
        );
    }
    let form = form_pairs(&body);
    let Some(token) = form.iter().find(|(k, _)| k == "token").map(|(_, v)| v) else {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "token is required",
        );
    };
    let answer = match s.own.verify(token) {
        Ok(c) => serde_json::json!({
            "active": true,
            "sub": c.sub,
            "iss": c.iss,
            "aud": c.aud,
            "exp": c.exp,
            "iat": c.iat,
            "scope": c.scopes().into_iter().collect::<Vec<_>>().join(" "),
            "client_id": c.client_id,
            "act": c.act,
            "token_type": "Bearer",
        }),
        Err(_) => serde_json::json!({"active": false}),
    };
    let mut r = axum::Json(answer).into_response();
    r.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    r
}

/// `application/x-www-form-urlencoded` pairs, decoded.
fn form_pairs(body: &[u8]) -> Vec<(String, String)> {
    String::from_utf8_lossy(body)
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (form_decode(k), form_decode(v))
        })
        .collect()
}

/// `+` as space and `%XX` escapes; an invalid escape is kept as it is.
fn form_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                match std::str::from_utf8(&bytes[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn ct_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
