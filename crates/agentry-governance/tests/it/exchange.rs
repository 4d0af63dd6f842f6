//! Delegated credentials: what a token exchange grants along a path of agents (the user's
//! scopes ∩ asked ∩ the agent's ceiling, an `act` chain naming every agent, a lifetime no
//! longer than the subject's), and every way of asking for more refused with its OAuth code.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agentry_governance::token::{Actor, Audience, Claims};
use agentry_governance::{
    ExchangeError, ExchangeRequest, Grant, JwtPolicy, JwtVerifier, TokenError, TokenExchange,
    TokenIssuer,
};

const IDP: &str = "https://idp.test";
const SERVICE: &str = "https://agentry.tokens";

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

struct World {
    idp: TokenIssuer,
    service: TokenExchange,
    /// alice's token for the orchestrator: kb.read, mail.draft, mail.send.
    user_token: String,
}

fn world() -> World {
    let idp = TokenIssuer::generate(IDP).unwrap();
    let keys = serde_json::from_value(idp.jwks()).unwrap();
    let upstream = JwtVerifier::from_jwks(keys, JwtPolicy::any_audience(IDP));
    let ceilings = BTreeMap::from([
        ("knowledge".to_owned(), set(&["kb.read"])),
        ("archive".to_owned(), set(&["kb.read"])),
        ("mail".to_owned(), set(&["mail.draft"])),
    ]);
    let service = TokenExchange::new(
        TokenIssuer::generate(SERVICE).unwrap(),
        Some(upstream),
        ceilings,
    )
    .unwrap();
    let user_token = idp
        .issue(&Grant {
            subject: "alice".into(),
            audience: "orchestrator".into(),
            scopes: set(&["kb.read", "mail.draft", "mail.send"]),
            lifetime: Duration::from_secs(3600),
            act: None,
        })
        .unwrap();
    World {
        idp,
        service,
        user_token,
    }
}

fn ask(token: &str, actor: &str, audience: &str, scope: Option<&[&str]>) -> ExchangeRequest {
    ExchangeRequest {
        subject_token: token.into(),
        actor: actor.into(),
        audience: audience.into(),
        scope: scope.map(set),
    }
}

/// The agent at `audience` verifying a token the service issued.
fn verify_at(w: &World, audience: &str, token: &str) -> Result<Claims, TokenError> {
    let keys = serde_json::from_value(w.service.jwks()).unwrap();
    JwtVerifier::from_jwks(keys, JwtPolicy::new(SERVICE, audience)).verify(token)
}

#[test]
fn a_delegated_token_carries_the_least_privilege_and_the_whole_path() {
    let w = world();
    // The orchestrator, called with alice's token, asks for a token for the knowledge agent.
    let kb = w
        .service
        .exchange(&ask(&w.user_token, "orchestrator", "knowledge", None))
        .unwrap();
    assert_eq!(kb.scopes, set(&["kb.read"]), "alice's scopes ∩ the ceiling");
    assert_eq!(kb.chain, ["orchestrator"]);
    assert!(kb.expires_in <= 300 && kb.expires_in > 290);
    let c = verify_at(&w, "knowledge", &kb.token).unwrap();
    assert_eq!(c.sub, "alice");
    assert_eq!(c.aud, Audience::One("knowledge".into()));
    assert_eq!(c.act.as_ref().unwrap().chain(), ["orchestrator"]);
    // Replayed at another agent: refused there.
    assert!(matches!(
        verify_at(&w, "mail", &kb.token),
        Err(TokenError::Audience)
    ));

    // The knowledge agent passes the request on to the archive: a re-exchange of the token
    // it was called with; the chain grows, the scopes cannot.
    let archive = w
        .service
        .exchange(&ask(&kb.token, "knowledge", "archive", Some(&["kb.read"])))
        .unwrap();
    assert_eq!(archive.chain, ["knowledge", "orchestrator"]);
    let c = verify_at(&w, "archive", &archive.token).unwrap();
    assert_eq!(c.sub, "alice");
    assert_eq!(c.act.unwrap().chain(), ["knowledge", "orchestrator"]);

    // The mail agent gets drafting only: alice may send, the operator's ceiling says draft.
    let mail = w
        .service
        .exchange(&ask(
            &w.user_token,
            "orchestrator",
            "mail",
            Some(&["mail.draft"]),
        ))
        .unwrap();
    assert_eq!(mail.scopes, set(&["mail.draft"]));
}

/// Whether a refusal is the one a case expects.
type Expect = fn(&ExchangeError) -> bool;

#[test]
fn every_request_for_more_is_refused_with_its_oauth_code() {
    let mut w = world();
    let kb = w
        .service
        .exchange(&ask(&w.user_token, "orchestrator", "knowledge", None))
        .unwrap();
    let t = now();
    let expired = w
        .idp
        .sign(&Claims {
            sub: "alice".into(),
            iss: IDP.into(),
            aud: Audience::One("orchestrator".into()),
            exp: t - 600,
            nbf: Some(t - 1200),
            iat: Some(t - 1200),
            jti: None,
            scope: Some("kb.read".into()),
            scp: None,
            act: None,
            may_act: None,
            client_id: None,
        })
        .unwrap();
    let only_the_planner = w
        .idp
        .sign(&Claims {
            sub: "alice".into(),
            iss: IDP.into(),
            aud: Audience::One("orchestrator".into()),
            exp: t + 600,
            nbf: Some(t),
            iat: Some(t),
            jti: None,
            scope: Some("kb.read".into()),
            scp: None,
            act: None,
            may_act: Some(Actor {
                sub: "planner".into(),
                act: None,
            }),
            client_id: None,
        })
        .unwrap();
    let stranger = TokenIssuer::generate(IDP).unwrap();
    let forged_user = stranger
        .issue(&Grant {
            subject: "alice".into(),
            audience: "orchestrator".into(),
            scopes: set(&["kb.read", "admin"]),
            lifetime: Duration::from_secs(60),
            act: None,
        })
        .unwrap();
    let forged_own = TokenIssuer::generate(SERVICE)
        .unwrap()
        .issue(&Grant {
            subject: "alice".into(),
            audience: "knowledge".into(),
            scopes: set(&["kb.read"]),
            lifetime: Duration::from_secs(60),
            act: None,
        })
        .unwrap();
    let (garbage, widened_user, scope_the_user_lacks) =
        ("x.y.z", &["admin"][..], &["kb.write"][..]);
    let cases: Vec<(&str, ExchangeRequest, &str, Expect)> = vec![
        (
            "garbage subject token",
            ask(garbage, "orchestrator", "knowledge", None),
            "invalid_grant",
            |e| matches!(e, ExchangeError::SubjectToken(_)),
        ),
        (
            "expired subject token",
            ask(&expired, "orchestrator", "knowledge", None),
            "invalid_grant",
            |e| matches!(e, ExchangeError::SubjectToken(TokenError::Expired)),
        ),
        (
            "the IdP's name, another key",
            ask(&forged_user, "orchestrator", "knowledge", None),
            "invalid_grant",
            |e| matches!(e, ExchangeError::SubjectToken(_)),
        ),
        (
            "the service's name, another key",
            ask(&forged_own, "knowledge", "archive", None),
            "invalid_grant",
            |e| matches!(e, ExchangeError::SubjectToken(_)),
        ),
        (
            "presented by an agent it was not for",
            ask(&w.user_token, "knowledge", "archive", None),
            "invalid_grant",
            |e| matches!(e, ExchangeError::NotForActor { .. }),
        ),
        (
            "a delegated token presented by its issuer's caller",
            ask(&kb.token, "orchestrator", "archive", None),
            "invalid_grant",
            |e| matches!(e, ExchangeError::NotForActor { .. }),
        ),
        (
            "may_act names another actor",
            ask(&only_the_planner, "orchestrator", "knowledge", None),
            "invalid_grant",
            |e| matches!(e, ExchangeError::MayNotAct { .. }),
        ),
        (
            "an agent nobody registered",
            ask(&w.user_token, "orchestrator", "payments", None),
            "invalid_target",
            |e| matches!(e, ExchangeError::UnknownAudience(_)),
        ),
        (
            "a scope the user does not hold",
            ask(
                &w.user_token,
                "orchestrator",
                "knowledge",
                Some(widened_user),
            ),
            "invalid_scope",
            |e| matches!(e, ExchangeError::Widened(_)),
        ),
        (
            "a scope the delegated token does not hold",
            ask(
                &kb.token,
                "knowledge",
                "archive",
                Some(scope_the_user_lacks),
            ),
            "invalid_scope",
            |e| matches!(e, ExchangeError::Widened(_)),
        ),
        (
            "held, but above the agent's ceiling",
            ask(&w.user_token, "orchestrator", "mail", Some(&["mail.send"])),
            "invalid_scope",
            |e| matches!(e, ExchangeError::NoScope(_)),
        ),
        (
            "nothing the next agent may have",
            ask(&kb.token, "knowledge", "mail", None),
            "invalid_scope",
            |e| matches!(e, ExchangeError::NoScope(_)),
        ),
    ];
    let mut escapes = Vec::new();
    for (name, req, code, expected) in &cases {
        match w.service.exchange(req) {
            Ok(x) => escapes.push(format!("{name}: granted {:?}", x.scopes)),
            Err(e) if !expected(&e) || e.code() != *code => {
                escapes.push(format!("{name}: refused as {e:?} ({})", e.code()))
            }
            Err(_) => {}
        }
    }
    assert!(escapes.is_empty(), "{escapes:#?}");

    // Depth: with a cap of 2, a third hop is refused.
    w.service.max_depth = 2;
    let archive = w
        .service
        .exchange(&ask(&kb.token, "knowledge", "archive", None))
        .unwrap();
    let err = w
        .service
        .exchange(&ask(&archive.token, "archive", "knowledge", None))
        .unwrap_err();
    assert!(matches!(err, ExchangeError::TooDeep(2)), "{err:?}");
}

#[test]
fn a_delegated_token_never_outlives_its_subject() {
    let w = world();
    let short = w
        .idp
        .issue(&Grant {
            subject: "alice".into(),
            audience: "orchestrator".into(),
            scopes: set(&["kb.read"]),
            lifetime: Duration::from_secs(45),
            act: None,
        })
        .unwrap();
    let x = w
        .service
        .exchange(&ask(&short, "orchestrator", "knowledge", None))
        .unwrap();
    assert!(x.expires_in <= 45, "{}", x.expires_in);
    let c = verify_at(&w, "knowledge", &x.token).unwrap();
    assert!(c.exp <= now() + 45);
}
