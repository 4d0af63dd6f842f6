//! Bearer JWTs: a verifier refuses every token that is not exactly what its policy accepts
//! (each case names the check that must catch it), picks up a rotated key, and the tokens
//! agentry mints verify.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agentry_governance::token::Actor;
use agentry_governance::{Grant, JwtPolicy, JwtVerifier, TokenError, TokenIssuer};
use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

const ISS: &str = "https://idp.test";
const AUD: &str = "mail-agent";

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// An Ed25519 key pair: the PKCS#8 private key and its issuer.
fn key_pair(issuer: &str) -> (Vec<u8>, TokenIssuer) {
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = ring::signature::Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
    let issuer = TokenIssuer::from_pkcs8(issuer, pkcs8.as_ref()).unwrap();
    (pkcs8.as_ref().to_vec(), issuer)
}

fn claims() -> Value {
    let t = now();
    json!({"sub": "alice", "iss": ISS, "aud": AUD, "exp": t + 300, "nbf": t, "iat": t,
           "scope": "mail.draft mail.read"})
}

fn sign(pkcs8: &[u8], kid: &str, claims: &Value) -> String {
    let mut h = Header::new(Algorithm::EdDSA);
    h.kid = Some(kid.into());
    jsonwebtoken::encode(&h, claims, &EncodingKey::from_ed_der(pkcs8)).unwrap()
}

fn b64(v: &Value) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
}

fn temp_jwks(name: &str, jwks: &Value) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("agentry-jwks-{name}-{}.json", std::process::id()));
    std::fs::write(&p, jwks.to_string()).unwrap();
    p
}

/// Whether a refusal is the one a case expects.
type Expect = fn(&TokenError) -> bool;

#[test]
fn every_token_that_is_not_exactly_right_is_refused_with_its_reason() {
    let (pkcs8, trusted) = key_pair(ISS);
    let (other_pkcs8, _) = key_pair(ISS);
    let kid = trusted.kid().to_owned();
    let jwks_path = temp_jwks("matrix", &trusted.jwks());
    let verifier = JwtVerifier::from_jwks_file(&jwks_path, JwtPolicy::new(ISS, AUD)).unwrap();

    let good = sign(&pkcs8, &kid, &claims());
    let ok = verifier.verify(&good).unwrap();
    assert_eq!(ok.sub, "alice");
    assert!(ok.scopes().contains("mail.draft"));

    let with = |f: &dyn Fn(&mut Value)| {
        let mut c = claims();
        f(&mut c);
        sign(&pkcs8, &kid, &c)
    };
    let (header, payload) = {
        let mut it = good.split('.');
        (it.next().unwrap().to_owned(), it.next().unwrap().to_owned())
    };
    let signature = good.rsplit('.').next().unwrap().to_owned();
    let public_key = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(trusted.jwks()["keys"][0]["x"].as_str().unwrap())
        .unwrap();
    let hmac_with_public_key = {
        let mut h = Header::new(Algorithm::HS256);
        h.kid = Some(kid.clone());
        jsonwebtoken::encode(&h, &claims(), &EncodingKey::from_secret(&public_key)).unwrap()
    };
    let widened = {
        let mut c = claims();
        c["scope"] = json!("mail.draft mail.read mail.send admin");
        format!("{header}.{}.{signature}", b64(&c))
    };
    let t = now();
    let cases: Vec<(&str, String, Expect)> = vec![
        ("empty", String::new(), |e| {
            matches!(e, TokenError::Malformed(_))
        }),
        ("garbage", "not-a-jwt".into(), |e| {
            matches!(e, TokenError::Malformed(_))
        }),
        ("two parts", format!("{header}.{payload}"), |e| {
            matches!(e, TokenError::Malformed(_) | TokenError::Signature)
        }),
        (
            "alg none",
            format!("{}.{payload}.", b64(&json!({"alg": "none", "typ": "JWT"}))),
            |e| matches!(e, TokenError::Algorithm(_)),
        ),
        (
            "alg none, signature kept",
            format!(
                "{}.{payload}.{signature}",
                b64(&json!({"alg": "none", "kid": kid}))
            ),
            |e| matches!(e, TokenError::Algorithm(_)),
        ),
        (
            "HMAC with the public key as secret",
            hmac_with_public_key.clone(),
            |e| matches!(e, TokenError::Algorithm(_)),
        ),
        (
            "ES256 header over an Ed25519 signature",
            format!(
                "{}.{payload}.{signature}",
                b64(&json!({"alg": "ES256", "kid": kid}))
            ),
            |e| matches!(e, TokenError::UnknownKey(_) | TokenError::Algorithm(_)),
        ),
        ("widened scope, signature kept", widened, |e| {
            matches!(e, TokenError::Signature)
        }),
        (
            "signed by another key under the trusted kid",
            sign(&other_pkcs8, &kid, &claims()),
            |e| matches!(e, TokenError::Signature),
        ),
        (
            "unknown kid",
            sign(&other_pkcs8, "someone-else", &claims()),
            |e| matches!(e, TokenError::UnknownKey(_)),
        ),
        ("expired", with(&|c| c["exp"] = json!(t - 3600)), |e| {
            matches!(e, TokenError::Expired)
        }),
        (
            "expired just past the leeway",
            with(&|c| c["exp"] = json!(t - 31)),
            |e| matches!(e, TokenError::Expired),
        ),
        (
            "not yet valid",
            with(&|c| c["nbf"] = json!(t + 3600)),
            |e| matches!(e, TokenError::NotYetValid),
        ),
        (
            "wrong issuer",
            with(&|c| c["iss"] = json!("https://evil.test")),
            |e| matches!(e, TokenError::Issuer),
        ),
        (
            "issuer differing in case",
            with(&|c| c["iss"] = json!("https://IDP.test")),
            |e| matches!(e, TokenError::Issuer),
        ),
        (
            "minted for another agent",
            with(&|c| c["aud"] = json!("knowledge-agent")),
            |e| matches!(e, TokenError::Audience),
        ),
        (
            "audience list without this agent",
            with(&|c| c["aud"] = json!(["a", "b"])),
            |e| matches!(e, TokenError::Audience),
        ),
        (
            "no audience",
            with(&|c| {
                c.as_object_mut().unwrap().remove("aud");
            }),
            |e| matches!(e, TokenError::MissingClaim(_) | TokenError::Malformed(_)),
        ),
        (
            "no expiry",
            with(&|c| {
                c.as_object_mut().unwrap().remove("exp");
            }),
            |e| matches!(e, TokenError::MissingClaim(_) | TokenError::Malformed(_)),
        ),
        (
            "no subject",
            with(&|c| {
                c.as_object_mut().unwrap().remove("sub");
            }),
            |e| matches!(e, TokenError::MissingClaim(_) | TokenError::Malformed(_)),
        ),
        (
            "expiry as a string",
            with(&|c| c["exp"] = json!("tomorrow")),
            |e| matches!(e, TokenError::Malformed(_)),
        ),
    ];
    let mut escapes = Vec::new();
    for (name, token, expected) in &cases {
        match verifier.verify(token) {
            Ok(c) => escapes.push(format!("{name}: accepted as {}", c.sub)),
            Err(e) if !expected(&e) => escapes.push(format!("{name}: refused, but as {e:?}")),
            Err(_) => {}
        }
    }
    assert!(escapes.is_empty(), "{escapes:#?}");
    assert!(cases.len() >= 20);

    // An allow-list that names HS256 still cannot verify an HMAC token against a public key.
    let mut lax = JwtPolicy::new(ISS, AUD);
    lax.algorithms.push(Algorithm::HS256);
    let lax = JwtVerifier::from_jwks_file(&jwks_path, lax).unwrap();
    assert!(lax.verify(&hmac_with_public_key).is_err());
    // An allow-list without EdDSA refuses a good EdDSA token.
    let mut strict = JwtPolicy::new(ISS, AUD);
    strict.algorithms = vec![Algorithm::RS256];
    let strict = JwtVerifier::from_jwks_file(&jwks_path, strict).unwrap();
    assert!(matches!(
        strict.verify(&good),
        Err(TokenError::Algorithm(_))
    ));
    let _ = std::fs::remove_file(jwks_path);
}

#[test]
fn a_rotated_key_published_in_the_jwks_file_is_picked_up() {
    let (_, old) = key_pair(ISS);
    let (new_pkcs8, new) = key_pair(ISS);
    let path = temp_jwks("rotation", &old.jwks());
    let verifier = JwtVerifier::from_jwks_file(&path, JwtPolicy::new(ISS, AUD)).unwrap();
    let token = sign(&new_pkcs8, new.kid(), &claims());
    // The JWKS file was read just now: an unknown kid does not re-read it at once.
    assert!(matches!(
        verifier.verify(&token),
        Err(TokenError::UnknownKey(_))
    ));
    let mut both = old.jwks();
    both["keys"]
        .as_array_mut()
        .unwrap()
        .push(new.jwks()["keys"][0].clone());
    std::fs::write(&path, both.to_string()).unwrap();
    std::thread::sleep(Duration::from_millis(5100));
    assert_eq!(verifier.verify(&token).unwrap().sub, "alice");
    let _ = std::fs::remove_file(path);
}

#[test]
fn minted_tokens_verify_and_carry_the_delegation_chain() {
    let issuer = TokenIssuer::generate("agentry-orchestrator").unwrap();
    let keys: jsonwebtoken::jwk::JwkSet = serde_json::from_value(issuer.jwks()).unwrap();
    let verifier = JwtVerifier::from_jwks(keys, JwtPolicy::new("agentry-orchestrator", AUD));
    let grant = Grant {
        subject: "alice".into(),
        audience: AUD.into(),
        scopes: BTreeSet::from(["mail.draft".to_owned()]),
        lifetime: Duration::from_secs(300),
        act: Some(Actor {
            sub: "orchestrator".into(),
            act: Some(Box::new(Actor {
                sub: "planner".into(),
                act: None,
            })),
        }),
    };
    let token = issuer.issue(&grant).unwrap();
    let c = verifier.verify(&token).unwrap();
    assert_eq!(c.sub, "alice");
    assert_eq!(c.scopes(), grant.scopes);
    assert_eq!(c.act.unwrap().chain(), ["orchestrator", "planner"]);
    assert!(c.exp <= now() + 300 && c.exp > now() + 290);
    // What a server reads on every request, worked out once and shared by each use.
    let shared = verifier.verify_shared(&token).unwrap();
    assert_eq!(&shared.scopes[..], ["mail.draft"]);
    assert_eq!(&shared.actors[..], ["orchestrator", "planner"]);
    let again = verifier.verify_shared(&token).unwrap();
    assert!(std::sync::Arc::ptr_eq(&shared.scopes, &again.scopes));
    // Minted for the mail agent, refused by the knowledge agent.
    let keys: jsonwebtoken::jwk::JwkSet = serde_json::from_value(issuer.jwks()).unwrap();
    let other = JwtVerifier::from_jwks(keys, JwtPolicy::new("agentry-orchestrator", "knowledge"));
    assert!(matches!(other.verify(&token), Err(TokenError::Audience)));
}

/// The tokens agentry mints are standard: PyJWT (PyPI, with `cryptography`), another
/// ecosystem's JWT library, verifies one from the published JWKS, with issuer, audience and
/// expiry checked, and reads the scope and the delegation chain.
#[test]
fn an_independent_jwt_library_verifies_minted_tokens() {
    let python = std::env::var_os("AGENTRY_INTEROP_PYTHON")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../.venv-interop/bin/python")
        });
    let Some(python) = agentry_testkit::require_path(
        agentry_testkit::Peer::Interop,
        python,
        "run scripts/test.sh (it installs PyJWT)",
    ) else {
        return;
    };
    let issuer = TokenIssuer::generate("https://agentry.test").unwrap();
    let token = issuer
        .issue(&Grant {
            subject: "alice".into(),
            audience: AUD.into(),
            scopes: BTreeSet::from(["mail.draft".to_owned(), "mail.read".to_owned()]),
            lifetime: Duration::from_secs(120),
            act: Some(Actor {
                sub: "orchestrator".into(),
                act: None,
            }),
        })
        .unwrap();
    let check = r#"
import json, sys, jwt
jwks, token, aud = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
key = jwt.PyJWK(jwks["keys"][0])
header = jwt.get_unverified_header(token)
assert header["kid"] == jwks["keys"][0]["kid"], header
claims = jwt.decode(token, key=key, algorithms=["EdDSA"], audience=aud,
                    issuer="https://agentry.test", options={"require": ["exp", "iat", "nbf", "sub"]})
print(json.dumps(claims))
try:
    jwt.decode(token, key=key, algorithms=["EdDSA"], audience="someone-else",
               issuer="https://agentry.test")
    print("WRONG AUDIENCE ACCEPTED")
except jwt.InvalidAudienceError:
    pass
"#;
    let out = std::process::Command::new(python)
        .args(["-c", check, &issuer.jwks().to_string(), &token, AUD])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("ACCEPTED"), "{text}");
    let claims: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(claims["sub"], "alice");
    assert_eq!(claims["scope"], "mail.draft mail.read");
    assert_eq!(claims["act"]["sub"], "orchestrator");
}

/// A token verified once is remembered, not trusted forever: once it expires it is refused.
#[test]
fn a_remembered_token_is_refused_once_it_expires() {
    let (pkcs8, issuer) = key_pair(ISS);
    let keys = serde_json::from_value(issuer.jwks()).unwrap();
    let mut policy = JwtPolicy::new(ISS, AUD);
    policy.leeway = Duration::ZERO;
    let verifier = JwtVerifier::from_jwks(keys, policy);
    let mut c = claims();
    c["exp"] = json!(now() + 2);
    let token = sign(&pkcs8, issuer.kid(), &c);
    verifier.verify(&token).unwrap();
    verifier.verify(&token).unwrap();
    std::thread::sleep(Duration::from_millis(3100));
    assert!(matches!(verifier.verify(&token), Err(TokenError::Expired)));
}

/// Keys from a feed (what a JWKS URL's fetcher keeps current): a token naming a key the feed
/// lacks is refused and asks the fetcher to look again; once the key is published it
/// verifies; a key withdrawn stops verifying at once, even for a token verified before.
#[tokio::test]
async fn a_feed_rotates_keys_and_withdraws_them() {
    use agentry_governance::JwksFeed;
    let set = |issuers: &[&TokenIssuer]| {
        let keys: Vec<Value> = issuers
            .iter()
            .flat_map(|i| i.jwks()["keys"].as_array().unwrap().clone())
            .collect();
        serde_json::from_value::<jsonwebtoken::jwk::JwkSet>(json!({ "keys": keys })).unwrap()
    };
    let old = TokenIssuer::generate(ISS).unwrap();
    let new = TokenIssuer::generate(ISS).unwrap();
    let feed = JwksFeed::new(set(&[&old]));
    let v = JwtVerifier::from_feed(&feed, JwtPolicy::new(ISS, AUD));
    let grant = Grant {
        subject: "alice".into(),
        audience: AUD.into(),
        scopes: BTreeSet::from(["mail.draft".to_string()]),
        lifetime: Duration::from_secs(60),
        act: None,
    };
    let by_old = old.issue(&grant).unwrap();
    let by_new = new.issue(&grant).unwrap();
    assert!(v.verify(&by_old).is_ok());
    let wanted = feed.clone();
    let asked = tokio::spawn(async move { wanted.wanted().await });
    tokio::task::yield_now().await;
    assert!(matches!(v.verify(&by_new), Err(TokenError::UnknownKey(_))));
    tokio::time::timeout(Duration::from_secs(2), asked)
        .await
        .expect("the fetcher was asked to look again")
        .unwrap();
    feed.replace(set(&[&old, &new]));
    assert!(v.verify(&by_new).is_ok());
    // The old key withdrawn: its token, verified (and remembered) before, is refused now.
    feed.replace(set(&[&new]));
    assert!(matches!(v.verify(&by_old), Err(TokenError::UnknownKey(_))));
    assert!(v.verify(&by_new).is_ok());
}
