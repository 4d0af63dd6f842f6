//! Bearer JWTs: verified against a JWKS with an issuer, an audience, expiry and an algorithm
//! allow-list ([`JwtVerifier`]), and minted with an Ed25519 key whose JWKS is published
//! ([`TokenIssuer`]).
//!
//! The checks a verifier makes, each a refusal with its reason: the algorithm is on the
//! allow-list (never `none`) and is the one the key is for (no HMAC token against a public
//! key), the key is known (by `kid`; an unknown `kid` re-reads the JWKS file once, so a
//! rotated key is picked up), the signature holds, `iss` and `aud` are the configured ones,
//! `exp` is in the future and `nbf` in the past (with a small leeway), and `sub` is present.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

/// Why a token was refused (the text goes into `WWW-Authenticate: Bearer
/// error="invalid_token", error_description=...`, so it names the check, never a secret).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// Not a JWT at all, or its header or claims are unreadable.
    #[error("malformed token: {0}")]
    Malformed(String),
    /// The header's algorithm is not on the allow-list, or not the key's.
    #[error("algorithm {0} not accepted")]
    Algorithm(String),
    /// No key with the token's `kid` (or several keys and no `kid`).
    #[error("no key {0}")]
    UnknownKey(String),
    /// The signature does not verify.
    #[error("bad signature")]
    Signature,
    /// `exp` has passed.
    #[error("expired")]
    Expired,
    /// `nbf` is still ahead.
    #[error("not valid yet")]
    NotYetValid,
    /// `iss` is not the configured issuer.
    #[error("wrong issuer")]
    Issuer,
    /// `aud` does not name this service.
    #[error("wrong audience")]
    Audience,
    /// A claim the policy requires is missing.
    #[error("missing claim {0}")]
    MissingClaim(String),
    /// The JWKS could not be read.
    #[error("JWKS {path}: {message}")]
    Jwks {
        /// Where it was read from.
        path: PathBuf,
        /// Why it could not be.
        message: String,
    },
    /// A key could not be made or used for signing.
    #[error("signing key: {0}")]
    Key(String),
}

fn map_err(e: jsonwebtoken::errors::Error) -> TokenError {
    use jsonwebtoken::errors::ErrorKind as K;
    match e.kind() {
        K::InvalidSignature => TokenError::Signature,
        K::ExpiredSignature => TokenError::Expired,
        K::ImmatureSignature => TokenError::NotYetValid,
        K::InvalidIssuer => TokenError::Issuer,
        K::InvalidAudience => TokenError::Audience,
        K::MissingRequiredClaim(c) => TokenError::MissingClaim(c.clone()),
        K::InvalidAlgorithm | K::InvalidAlgorithmName | K::MissingAlgorithm => {
            TokenError::Algorithm("for this key".into())
        }
        other => TokenError::Malformed(format!("{other:?}")),
    }
}

/// The delegation chain (RFC 8693 `act`): who acts for the subject, and who acted for them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    /// The acting party.
    pub sub: String,
    /// The actor before it in the chain, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub act: Option<Box<Actor>>,
}

impl Actor {
    /// The chain from the most recent actor back, as names.
    pub fn chain(&self) -> Vec<&str> {
        let mut out = vec![self.sub.as_str()];
        let mut next = self.act.as_deref();
        while let Some(a) = next {
            out.push(&a.sub);
            next = a.act.as_deref();
        }
        out
    }
}

/// The claims agentry reads from a token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Claims {
    /// Who the token is for (the user, or the service for client credentials).
    pub sub: String,
    /// Who issued it.
    pub iss: String,
    /// Whom it is for: one audience or several.
    pub aud: Audience,
    /// Expiry, seconds since the epoch.
    pub exp: u64,
    /// Not before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<u64>,
    /// Issued at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iat: Option<u64>,
    /// Token id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jti: Option<String>,
    /// Scopes, space-separated (RFC 8693 / RFC 9068 `scope`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// Scopes as an array (`scp`, as some issuers send them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scp: Option<Vec<String>>,
    /// The delegation chain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub act: Option<Actor>,
    /// Who may act for the subject (RFC 8693 `may_act`), when the subject restricts it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub may_act: Option<Actor>,
    /// The OAuth client the token was issued to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
}

impl Claims {
    /// Every scope the token carries (`scope` and `scp` together).
    pub fn scopes(&self) -> BTreeSet<String> {
        let mut out: BTreeSet<String> = self
            .scope
            .as_deref()
            .unwrap_or("")
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        out.extend(self.scp.iter().flatten().cloned());
        out
    }
}

/// `aud`: a string or an array of strings (RFC 7519 section 4.1.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Audience {
    /// One audience.
    One(String),
    /// Several.
    Many(Vec<String>),
}

impl Audience {
    /// Every audience named.
    pub fn names(&self) -> Vec<&str> {
        match self {
            Audience::One(a) => vec![a.as_str()],
            Audience::Many(v) => v.iter().map(String::as_str).collect(),
        }
    }
}

/// What a verifier accepts.
#[derive(Debug, Clone)]
pub struct JwtPolicy {
    /// The one issuer (`iss`) accepted.
    pub issuer: String,
    /// This service's audience: a token must name it in `aud`.
    pub audience: String,
    /// Algorithms accepted; default EdDSA, ES256, RS256 (never `none`, never HMAC unless
    /// listed, and an HMAC algorithm can never verify against a JWKS public key anyway).
    pub algorithms: Vec<Algorithm>,
    /// Clock skew allowed on `exp` and `nbf`.
    pub leeway: Duration,
    /// `aud` required but not compared (a token service compares it with the party
    /// asking; see [`JwtPolicy::any_audience`]).
    any_audience: bool,
}

impl JwtPolicy {
    /// `issuer` and `audience` with the default algorithms and a 30 s leeway.
    pub fn new(issuer: impl Into<String>, audience: impl Into<String>) -> Self {
        JwtPolicy {
            issuer: issuer.into(),
            audience: audience.into(),
            algorithms: vec![Algorithm::EdDSA, Algorithm::ES256, Algorithm::RS256],
            leeway: Duration::from_secs(30),
            any_audience: false,
        }
    }

    /// `issuer`'s tokens for any audience, for a token service: it checks a subject
    /// token's `aud` against the authenticated party presenting it, which no fixed audience
    /// can express. Never for an agent's own verifier.
    pub fn any_audience(issuer: impl Into<String>) -> Self {
        JwtPolicy {
            any_audience: true,
            ..JwtPolicy::new(issuer, String::new())
        }
    }
}

impl JwtPolicy {
    /// The allow-list by names (`EdDSA`, `ES256`, `RS256`, ...). Only asymmetric algorithms:
    /// an HMAC secret shared with every verifier would let each of them mint tokens.
    pub fn with_algorithms(mut self, names: &[String]) -> Result<Self, TokenError> {
        self.algorithms = names
            .iter()
            .map(|n| match n.as_str() {
                "EdDSA" | "ES256" | "ES384" | "RS256" | "RS384" | "RS512" | "PS256" | "PS384"
                | "PS512" => n.parse().map_err(|_| n.clone()),
                _ => Err(n.clone()),
            })
            .collect::<Result<_, _>>()
            .map_err(|n| {
                TokenError::Algorithm(format!(
                    "{n} (accepted: EdDSA, ES256, ES384, RS256, RS384, RS512, PS256, PS384, PS512)"
                ))
            })?;
        Ok(self)
    }
}

/// Where the verification keys come from.
#[derive(Debug, Clone)]
enum KeySource {
    /// A JWKS file, re-read when a token names a key it does not hold.
    File(PathBuf),
    /// Fixed keys.
    Fixed,
    /// Keys something else keeps current (a JWKS URL's fetcher), shared by verifiers.
    Feed(JwksFeed),
}

/// A JWKS that something else keeps current, such as the fetcher of a JWKS URL (which does
/// the I/O: this crate does none), shared by every verifier made with
/// [`JwtVerifier::from_feed`]. A token naming a key the feed lacks wakes
/// [`JwksFeed::wanted`], so the fetcher looks again before its next scheduled time.
#[derive(Clone)]
pub struct JwksFeed {
    inner: Arc<FeedInner>,
}

struct FeedInner {
    keys: RwLock<JwkSet>,
    /// Bumped on every replacement: verifiers forget the tokens they verified with old keys.
    version: AtomicU64,
    wanted: tokio::sync::Notify,
}

impl std::fmt::Debug for JwksFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwksFeed")
            .field("version", &self.version())
            .finish_non_exhaustive()
    }
}

impl JwksFeed {
    /// A feed holding `keys` until replaced.
    pub fn new(keys: JwkSet) -> Self {
        JwksFeed {
            inner: Arc::new(FeedInner {
                keys: RwLock::new(keys),
                version: AtomicU64::new(0),
                wanted: tokio::sync::Notify::new(),
            }),
        }
    }

    /// A feed from a JWKS document (`{"keys": [...]}`); `source` names it in errors.
    pub fn from_json(source: &str, json: &[u8]) -> Result<Self, TokenError> {
        Ok(Self::new(parse_jwks(source, json)?))
    }

    /// Replaces the keys with a JWKS document's; on an error the keys stay as they were.
    pub fn replace_json(&self, source: &str, json: &[u8]) -> Result<(), TokenError> {
        self.replace(parse_jwks(source, json)?);
        Ok(())
    }

    /// Replaces the keys (a key withdrawn stops verifying at once).
    pub fn replace(&self, keys: JwkSet) {
        if let Ok(mut k) = self.inner.keys.write() {
            *k = keys;
        }
        self.inner.version.fetch_add(1, Ordering::SeqCst);
    }

    /// How many times the keys were replaced.
    pub fn version(&self) -> u64 {
        self.inner.version.load(Ordering::SeqCst)
    }

    /// Resolves when a token named a key the feed does not hold.
    pub async fn wanted(&self) {
        self.inner.wanted.notified().await;
    }
}

/// How soon an unknown `kid` may trigger another re-read of the JWKS file.
const RELOAD_EVERY: Duration = Duration::from_secs(5);

/// Verifies bearer JWTs against a JWKS under a [`JwtPolicy`].
pub struct JwtVerifier {
    policy: JwtPolicy,
    source: KeySource,
    keys: RwLock<(JwkSet, Option<Instant>)>,
    /// The feed version the remembered tokens were verified under.
    seen_version: AtomicU64,
    /// Tokens that verified (a client sends the same token many times; a signature check
    /// costs more than serving an echo): their claims, whose `exp` and `nbf` are checked
    /// again at every use. Keyed by the whole token, compared in full (a map's hash, not a
    /// digest: a cryptographic hash of each request's token cost more than the lookup).
    /// Emptied when full and when the keys change.
    verified: RwLock<std::collections::HashMap<Box<str>, Arc<VerifiedToken>, TokenHash>>,
}

/// A verified token: its claims, and what a server reads from them on every request worked
/// out once per token (a client sends one token many times).
#[derive(Debug, Clone, PartialEq)]
pub struct VerifiedToken {
    /// The token's claims.
    pub claims: Claims,
    /// Every scope it grants ([`Claims::scopes`]: `scope` and `scp`), sorted, each once.
    pub scopes: Arc<[String]>,
    /// Who presents it for the subject ([`Actor::chain`] of `act`, most recent first);
    /// empty when the subject presents it.
    pub actors: Arc<[String]>,
}

impl VerifiedToken {
    fn new(claims: Claims) -> Self {
        let scopes = claims.scopes().into_iter().collect();
        let actors = claims
            .act
            .as_ref()
            .map(|a| a.chain().into_iter().map(str::to_owned).collect())
            .unwrap_or_default();
        VerifiedToken {
            claims,
            scopes,
            actors,
        }
    }
}

/// The verified-token cache's hash: foldhash, a fraction of SipHash's work on a 400-byte
/// token (measured: SipHash was 1,200 instructions of every request). It needs no random key
/// against collisions: only tokens whose signature verified are stored, which nobody can
/// choose to collide, and a lookup of any other token costs one probe and a comparison.
type TokenHash = foldhash::fast::FixedState;

impl std::fmt::Debug for JwtVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtVerifier")
            .field("policy", &self.policy)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

/// How many verified tokens are remembered.
const VERIFIED_CAP: usize = 10_000;

impl JwtVerifier {
    /// Keys from a JWKS file (`{"keys": [...]}`), re-read on an unknown `kid` (key
    /// rotation: publish the new key in the file, then sign with it).
    pub fn from_jwks_file(path: &Path, policy: JwtPolicy) -> Result<Self, TokenError> {
        let keys = read_jwks(path)?;
        Ok(JwtVerifier {
            policy,
            source: KeySource::File(path.to_owned()),
            keys: RwLock::new((keys, Some(Instant::now()))),
            seen_version: AtomicU64::new(0),
            verified: RwLock::default(),
        })
    }

    /// Keys from `feed`, kept current by whoever feeds it (see [`JwksFeed`]).
    pub fn from_feed(feed: &JwksFeed, policy: JwtPolicy) -> Self {
        JwtVerifier {
            policy,
            source: KeySource::Feed(feed.clone()),
            keys: RwLock::new((JwkSet { keys: Vec::new() }, None)),
            seen_version: AtomicU64::new(feed.version()),
            verified: RwLock::default(),
        }
    }

    /// Fixed keys.
    pub fn from_jwks(keys: JwkSet, policy: JwtPolicy) -> Self {
        JwtVerifier {
            policy,
            source: KeySource::Fixed,
            keys: RwLock::new((keys, None)),
            seen_version: AtomicU64::new(0),
            verified: RwLock::default(),
        }
    }

    /// The policy.
    pub fn policy(&self) -> &JwtPolicy {
        &self.policy
    }

    /// The token's claims if it passes every check; the first check it fails otherwise.
    pub fn verify(&self, token: &str) -> Result<Claims, TokenError> {
        self.verify_shared(token).map(|v| v.claims.clone())
    }

    /// [`verify`](Self::verify) without copying the claims of a token verified before (the
    /// request path: one token, many requests), with its scopes and actors as lists.
    pub fn verify_shared(&self, token: &str) -> Result<Arc<VerifiedToken>, TokenError> {
        if let KeySource::Feed(feed) = &self.source {
            // New keys: what the old ones verified is verified again.
            let now = feed.version();
            if self.seen_version.swap(now, Ordering::SeqCst) != now
                && let Ok(mut m) = self.verified.write()
            {
                m.clear();
            }
        }
        let remembered = self
            .verified
            .read()
            .ok()
            .and_then(|m| m.get(token).cloned());
        if let Some(verified) = remembered {
            // Signature, issuer and audience cannot have changed; time has.
            let claims = &verified.claims;
            let (now, leeway) = (now(), self.policy.leeway.as_secs());
            if claims.exp.saturating_add(leeway) <= now {
                return Err(TokenError::Expired);
            }
            if claims
                .nbf
                .is_some_and(|nbf| nbf > now.saturating_add(leeway))
            {
                return Err(TokenError::NotYetValid);
            }
            return Ok(verified);
        }
        let claims = Arc::new(VerifiedToken::new(self.verify_fully(token)?));
        if let Ok(mut m) = self.verified.write() {
            if m.len() >= VERIFIED_CAP {
                m.clear();
            }
            m.insert(token.into(), claims.clone());
        }
        Ok(claims)
    }

    fn verify_fully(&self, token: &str) -> Result<Claims, TokenError> {
        // A header that does not parse may still name an algorithm (`none`, which the
        // library has no name for): say so, it is the refusal that matters to an auditor.
        if token.split('.').count() != 3 {
            return Err(TokenError::Malformed(
                "not a JWT (three dot-separated parts)".into(),
            ));
        }
        let header = jsonwebtoken::decode_header(token).map_err(|_| match raw_alg(token) {
            Some(alg) => TokenError::Algorithm(alg),
            None => TokenError::Malformed("not a JWT".into()),
        })?;
        if !self.policy.algorithms.contains(&header.alg) {
            return Err(TokenError::Algorithm(format!("{:?}", header.alg)));
        }
        let key = match self.key_for(&header) {
            Some(k) => k,
            None if self.reload() => self
                .key_for(&header)
                .ok_or_else(|| TokenError::UnknownKey(kid_text(&header)))?,
            None => return Err(TokenError::UnknownKey(kid_text(&header))),
        };
        let mut v = Validation::new(header.alg);
        v.leeway = self.policy.leeway.as_secs();
        v.validate_nbf = true;
        v.set_issuer(&[&self.policy.issuer]);
        if self.policy.any_audience {
            v.validate_aud = false;
        } else {
            v.set_audience(&[&self.policy.audience]);
        }
        v.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let data = jsonwebtoken::decode::<Claims>(token, &key, &v).map_err(map_err)?;
        Ok(data.claims)
    }

    /// The key a token names: by `kid`, or the only key when it names none. The key's own
    /// `alg`, when it declares one, must be the token's.
    fn key_for(&self, header: &Header) -> Option<DecodingKey> {
        if let KeySource::Feed(feed) = &self.source {
            let set = feed.inner.keys.read().ok()?;
            return pick(&set, header);
        }
        let keys = self.keys.read().ok()?;
        pick(&keys.0, header)
    }

    /// Re-reads the JWKS file, at most once per [`RELOAD_EVERY`]; whether it did. A feed is
    /// asked to look again (its fetcher rate-limits), and this token is refused meanwhile.
    fn reload(&self) -> bool {
        let path = match &self.source {
            KeySource::File(path) => path,
            KeySource::Feed(feed) => {
                feed.inner.wanted.notify_one();
                return false;
            }
            KeySource::Fixed => return false,
        };
        let Ok(mut keys) = self.keys.write() else {
            return false;
        };
        if keys.1.is_some_and(|at| at.elapsed() < RELOAD_EVERY) {
            return false;
        }
        keys.1 = Some(Instant::now());
        match read_jwks(path) {
            Ok(set) => {
                keys.0 = set;
                // A key may have been withdrawn: what it verified is verified again.
                if let Ok(mut m) = self.verified.write() {
                    m.clear();
                }
                true
            }
            Err(_) => false,
        }
    }
}

/// The key of `set` a token names: by `kid`, or the only key when it names none. The key's
/// own `alg`, when it declares one, must be the token's.
fn pick(set: &JwkSet, header: &Header) -> Option<DecodingKey> {
    let jwk = match &header.kid {
        Some(kid) => set.find(kid)?,
        None if set.keys.len() == 1 => &set.keys[0],
        None => return None,
    };
    if let Some(alg) = jwk.common.key_algorithm
        && format!("{alg:?}") != format!("{:?}", header.alg)
    {
        return None;
    }
    DecodingKey::from_jwk(jwk).ok()
}

/// Part `index` of a token (0 header, 1 payload) as JSON, read without verifying anything.
fn unverified_part(token: &str, index: usize) -> Option<serde_json::Value> {
    use base64::Engine;
    let part = token.split('.').nth(index)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part.trim_end_matches('='))
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// A string claim of a token's payload, read without verifying anything (to route the token
/// to the verifier of its issuer, which then checks everything).
pub fn unverified_claim(token: &str, name: &str) -> Option<String> {
    Some(unverified_part(token, 1)?.get(name)?.as_str()?.to_owned())
}

/// The `alg` a token's header names, read without the library's list of known names.
fn raw_alg(token: &str) -> Option<String> {
    let header = unverified_part(token, 0)?;
    Some(header.get("alg")?.as_str()?.chars().take(16).collect())
}

fn kid_text(header: &Header) -> String {
    header
        .kid
        .as_deref()
        .map_or_else(|| "(no kid, several keys)".into(), |k| format!("kid {k}"))
}

fn parse_jwks(source: &str, json: &[u8]) -> Result<JwkSet, TokenError> {
    serde_json::from_slice(json).map_err(|e| TokenError::Jwks {
        path: PathBuf::from(source),
        message: e.to_string(),
    })
}

fn read_jwks(path: &Path) -> Result<JwkSet, TokenError> {
    let err = |message: String| TokenError::Jwks {
        path: path.to_owned(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    serde_json::from_str(&text).map_err(|e| err(e.to_string()))
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// What a minted token says.
#[derive(Debug, Clone)]
pub struct Grant {
    /// The subject.
    pub subject: String,
    /// The one audience (the agent the token is for).
    pub audience: String,
    /// The scopes granted.
    pub scopes: BTreeSet<String>,
    /// How long it lives.
    pub lifetime: Duration,
    /// The delegation chain.
    pub act: Option<Actor>,
}

/// Mints Ed25519-signed JWTs and publishes the public key as a JWKS.
pub struct TokenIssuer {
    issuer: String,
    kid: String,
    key: EncodingKey,
    public: Vec<u8>,
}

impl std::fmt::Debug for TokenIssuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenIssuer")
            .field("issuer", &self.issuer)
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

impl TokenIssuer {
    /// An issuer named `issuer` with a fresh key pair (kept in memory only).
    pub fn generate(issuer: impl Into<String>) -> Result<Self, TokenError> {
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = ring::signature::Ed25519KeyPair::generate_pkcs8(&rng)
            .map_err(|e| TokenError::Key(e.to_string()))?;
        Self::from_pkcs8(issuer, pkcs8.as_ref())
    }

    /// An issuer whose key is kept in `path` (PKCS#8 DER), created with mode 0600 when
    /// missing, so the tokens it minted stay verifiable across restarts.
    pub fn load_or_create(issuer: impl Into<String>, path: &Path) -> Result<Self, TokenError> {
        let err = |e: std::io::Error| TokenError::Key(format!("{}: {e}", path.display()));
        match std::fs::read(path) {
            Ok(der) => Self::from_pkcs8(issuer, &der),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let rng = ring::rand::SystemRandom::new();
                let pkcs8 = ring::signature::Ed25519KeyPair::generate_pkcs8(&rng)
                    .map_err(|e| TokenError::Key(e.to_string()))?;
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir).map_err(err)?;
                }
                let mut opts = std::fs::OpenOptions::new();
                opts.write(true).create_new(true);
                #[cfg(unix)]
                std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
                let mut f = opts.open(path).map_err(err)?;
                std::io::Write::write_all(&mut f, pkcs8.as_ref()).map_err(err)?;
                f.sync_all().map_err(err)?;
                Self::from_pkcs8(issuer, pkcs8.as_ref())
            }
            Err(e) => Err(err(e)),
        }
    }

    /// An issuer from an Ed25519 private key in PKCS#8 DER.
    pub fn from_pkcs8(issuer: impl Into<String>, pkcs8: &[u8]) -> Result<Self, TokenError> {
        use ring::signature::KeyPair;
        let pair = ring::signature::Ed25519KeyPair::from_pkcs8(pkcs8)
            .map_err(|e| TokenError::Key(e.to_string()))?;
        let public = pair.public_key().as_ref().to_vec();
        let kid = {
            use sha2::Digest;
            crate::audit::hex(&sha2::Sha256::digest(&public)[..8])
        };
        Ok(TokenIssuer {
            issuer: issuer.into(),
            kid,
            key: EncodingKey::from_ed_der(pkcs8),
            public,
        })
    }

    /// The issuer name (`iss`).
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The key id tokens carry.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The public key as a JWKS, to publish (`/.well-known/jwks.json`) or write to a file.
    pub fn jwks(&self) -> serde_json::Value {
        use base64::Engine;
        let x = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&self.public);
        serde_json::json!({"keys": [{
            "kty": "OKP", "crv": "Ed25519", "x": x, "kid": self.kid, "alg": "EdDSA", "use": "sig"
        }]})
    }

    /// A token for `grant`, valid from now for its lifetime.
    pub fn issue(&self, grant: &Grant) -> Result<String, TokenError> {
        let iat = now();
        let scope = grant.scopes.iter().cloned().collect::<Vec<_>>().join(" ");
        let claims = Claims {
            sub: grant.subject.clone(),
            iss: self.issuer.clone(),
            aud: Audience::One(grant.audience.clone()),
            exp: iat + grant.lifetime.as_secs().max(1),
            nbf: Some(iat),
            iat: Some(iat),
            jti: Some(uuid_like()),
            scope: (!scope.is_empty()).then_some(scope),
            scp: None,
            act: grant.act.clone(),
            may_act: None,
            client_id: None,
        };
        self.sign(&claims)
    }

    /// Signs `claims` as they are (its `iss` is not checked against this issuer's): for
    /// token services that build claims themselves, and for tests of refusals.
    pub fn sign(&self, claims: &Claims) -> Result<String, TokenError> {
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some(self.kid.clone());
        header.typ = Some("JWT".into());
        jsonwebtoken::encode(&header, claims, &self.key).map_err(|e| TokenError::Key(e.to_string()))
    }
}

/// 128 random bits in hex, for `jti`.
fn uuid_like() -> String {
    let mut b = [0u8; 16];
    let _ = getrandom::fill(&mut b);
    crate::audit::hex(&b)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::hash::BuildHasher;

    use super::TokenHash;

    #[test]
    fn the_token_cache_hash_tells_tokens_apart() {
        // Tokens alike but for one byte, their length, or a trailing zero byte; and the
        // buckets of 10,000 tokens that differ in a counter (what the map indexes by).
        let base = "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl";
        let mut seen = HashSet::new();
        for t in [
            base.to_owned(),
            format!("{base}x"),
            format!("{base}\0"),
            base[..base.len() - 1].to_owned(),
            base.replacen('J', "K", 1),
        ] {
            assert!(
                seen.insert(TokenHash::default().hash_one(t.as_str())),
                "{t:?} collides"
            );
        }
        let low: HashSet<u64> = (0..10_000)
            .map(|i| TokenHash::default().hash_one(format!("{base}.{i}").as_str()) & 0x3fff)
            .collect();
        // 10,000 keys in 16,384 buckets fill about 7,300 when spread at random.
        assert!(
            low.len() > 6_500,
            "low bits poorly spread: {} buckets",
            low.len()
        );
    }
}
