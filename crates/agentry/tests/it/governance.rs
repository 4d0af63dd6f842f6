//! `[server.jwt]` end to end: an agent served from config refuses every token that is not
//! exactly right with 401 (`invalid_token` and why) or 403 (`insufficient_scope`), on
//! JSON-RPC and HTTP+JSON alike; its cards declare the JWT scheme with the scopes; every
//! decision is in the audit trail.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agentry::config::Config;
use agentry::governance::token::{Audience, Claims};
use agentry::governance::{AuditLog, Grant, TokenIssuer};
use agentry_testkit::Scratch;
use serde_json::{Value, json};

const ISS: &str = "https://idp.test";

/// One HTTP request; status line, headers and body as text.
async fn http(
    base: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = base.trim_start_matches("http://").trim_end_matches('/');
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, head.to_owned(), body.to_owned())
}

use crate::serve;

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwt_agents_refuse_every_wrong_token_on_both_bindings_and_audit_each_decision() {
    let dir = Scratch::new("jwt");
    let idp = TokenIssuer::generate(ISS).unwrap();
    let stranger = TokenIssuer::generate(ISS).unwrap();
    std::fs::write(dir.join("jwks.json"), idp.jwks().to_string()).unwrap();
    let toml = format!(
        r#"
        [server]
        store = "memory"
        state_dir = "{dir}"
        audit = true
        [server.jwt]
        jwks_file = "{dir}/jwks.json"
        issuer = "{ISS}"
        required_scopes = ["echo.use"]
        [[agents]]
        path = "/"
        builtin = {{ kind = "echo" }}
        "#,
        dir = dir.display()
    );
    let config: Config = toml::from_str(&toml).unwrap();
    let base = serve(config).await;
    let agent_url = format!("{base}/");

    // The cards say how to authenticate, with the scopes (both generations).
    for version in ["0.3", "1.0"] {
        let (_, _, card) = http(
            &base,
            "GET",
            "/.well-known/agent-card.json",
            &[("A2A-Version", version)],
            "",
        )
        .await;
        let card: Value = serde_json::from_str(&card).unwrap();
        let scheme = &card["securitySchemes"]["jwt"];
        let text = scheme.to_string();
        assert!(
            text.contains("JWT") && text.contains("bearer"),
            "{version}: {card}"
        );
        assert!(card.to_string().contains("echo.use"), "{version}: {card}");
    }

    let grant = |aud: &str, scopes: &[&str]| Grant {
        subject: "alice".into(),
        audience: aud.into(),
        scopes: scopes
            .iter()
            .map(|s| s.to_string())
            .collect::<BTreeSet<_>>(),
        lifetime: Duration::from_secs(120),
        act: None,
    };
    let claims = |exp: u64, nbf: u64| Claims {
        sub: "alice".into(),
        iss: ISS.into(),
        aud: Audience::One(agent_url.clone()),
        exp,
        nbf: Some(nbf),
        iat: Some(nbf),
        jti: None,
        scope: Some("echo.use".into()),
        scp: None,
        act: None,
        may_act: None,
        client_id: None,
    };
    let t = now();
    let good = idp.issue(&grant(&agent_url, &["echo.use"])).unwrap();
    let alg_none = {
        use base64::Engine;
        let e = |v: Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
        format!(
            "{}.{}.",
            e(json!({"alg": "none"})),
            e(serde_json::to_value(claims(t + 60, t)).unwrap())
        )
    };
    // (case, token, status, what the challenge must say)
    let cases: Vec<(&str, Option<String>, u16, &str)> = vec![
        ("no token", None, 401, "Bearer"),
        ("garbage", Some("x.y.z".into()), 401, "invalid_token"),
        ("alg none", Some(alg_none), 401, "invalid_token"),
        (
            "expired",
            Some(idp.sign(&claims(t - 3600, t - 7200)).unwrap()),
            401,
            "expired",
        ),
        (
            "not yet valid",
            Some(idp.sign(&claims(t + 7200, t + 3600)).unwrap()),
            401,
            "not valid yet",
        ),
        (
            "another agent's audience",
            Some(
                idp.issue(&grant("http://127.0.0.1:1/mail", &["echo.use"]))
                    .unwrap(),
            ),
            401,
            "wrong audience",
        ),
        (
            "a key the issuer never published",
            Some(stranger.issue(&grant(&agent_url, &["echo.use"])).unwrap()),
            401,
            "invalid_token",
        ),
        (
            "without the required scope",
            Some(idp.issue(&grant(&agent_url, &["mail.draft"])).unwrap()),
            403,
            "scope=\"echo.use\"",
        ),
        ("a valid token", Some(good.clone()), 200, ""),
    ];
    let send_rpc = json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {
        "message": {"role": "user", "messageId": "m-1", "parts": [{"kind": "text", "text": "hi"}]}}})
    .to_string();
    let send_rest =
        json!({"message": {"role": "ROLE_USER", "messageId": "m-2", "parts": [{"text": "hi"}]}})
            .to_string();
    let mut wrong = Vec::new();
    for (name, token, status, challenge) in &cases {
        let auth = token.as_ref().map(|t| format!("Bearer {t}"));
        let mut headers = vec![];
        if let Some(a) = &auth {
            headers.push(("Authorization", a.as_str()));
        }
        let (got, head, body) = http(&base, "POST", "/", &headers, &send_rpc).await;
        headers.push(("A2A-Version", "1.0"));
        let (got_rest, head_rest, body_rest) =
            http(&base, "POST", "/message:send", &headers, &send_rest).await;
        for (binding, got, head, body) in [
            ("JSON-RPC", got, &head, &body),
            ("HTTP+JSON", got_rest, &head_rest, &body_rest),
        ] {
            let challenged = head
                .lines()
                .find(|l| l.to_ascii_lowercase().starts_with("www-authenticate:"))
                .unwrap_or("");
            if got != *status || (*status != 200 && !challenged.contains(challenge)) {
                wrong.push(format!(
                    "{name} over {binding}: {got} {challenged:?} {body}"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");

    // Every decision was recorded before the request was served.
    let log = AuditLog::open(&dir.join("audit.db")).unwrap();
    log.verify().unwrap();
    let records = log.records(1, 1000).unwrap();
    let denied = records
        .iter()
        .filter(|r| r.event.decision.as_deref() == Some("deny"))
        .count();
    let allowed: Vec<_> = records
        .iter()
        .filter(|r| r.event.decision.as_deref() == Some("allow"))
        .collect();
    assert_eq!(denied, 2 * (cases.len() - 1), "{records:#?}");
    assert_eq!(allowed.len(), 2, "{records:#?}");
    assert!(
        allowed.iter().all(|r| r.event.actor == "jwt:alice"),
        "{allowed:#?}"
    );
    let scope_refusal = records
        .iter()
        .find(|r| r.event.detail.to_string().contains("lacks the scope"))
        .expect("the 403 is recorded with its reason");
    assert_eq!(scope_refusal.event.actor, "jwt:alice");
    drop(log);
}

/// A request's headers.
type Headers<'a> = Vec<(&'a str, &'a str)>;

/// The token service end to end: the orchestrator trades alice's token (from her identity
/// provider, for the orchestrator) for a short-lived token for the mail agent with only the
/// scope the operator allows there, and the mail agent, which trusts only the token service,
/// accepts that and refuses alice's own token; bad clients and requests for more get the
/// OAuth errors; issues and refusals are audited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_service_mints_least_privilege_tokens_the_next_agent_accepts() {
    use base64::Engine;
    let dir = Scratch::new("token-service");
    let idp = TokenIssuer::generate(ISS).unwrap();
    std::fs::write(dir.join("idp.json"), idp.jwks().to_string()).unwrap();
    // The service's key made ahead, so the agents can be given its JWKS as a file.
    let service_key = dir.join("service.key");
    let service = TokenIssuer::load_or_create("https://agentry.tokens", &service_key).unwrap();
    std::fs::write(dir.join("service.json"), service.jwks().to_string()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let base = format!("http://{addr}");
    let mail = format!("{base}/mail");
    let toml = format!(
        r#"
        [server]
        store = "memory"
        state_dir = "{dir}"
        audit = true
        public_url = "{base}"
        [server.jwt]
        jwks_file = "{dir}/service.json"
        issuer = "https://agentry.tokens"
        [[agents]]
        path = "/mail"
        builtin = {{ kind = "echo" }}
        required_scopes = ["mail.draft"]
        [token_service]
        issuer = "https://agentry.tokens"
        key_file = "{dir}/service.key"
        [token_service.upstream]
        jwks_file = "{dir}/idp.json"
        issuer = "{ISS}"
        [token_service.clients]
        orchestrator = "orchestrator-secret"
        [token_service.ceilings]
        "{mail}" = ["mail.draft"]
        "#,
        dir = dir.display()
    );
    let config: Config = toml::from_str(&toml).unwrap();
    let svc = agentry::Service::build(config).await.unwrap();
    tokio::spawn(async move { axum::serve(listener, svc.router).await });

    let alice = idp
        .issue(&Grant {
            subject: "alice".into(),
            audience: "orchestrator".into(),
            scopes: ["mail.draft", "mail.send"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            lifetime: Duration::from_secs(600),
            act: None,
        })
        .unwrap();
    let basic = |id: &str, secret: &str| {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{id}:{secret}"))
        )
    };
    let form = |audience: &str, scope: &str| {
        format!(
            "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Atoken-exchange\
             &subject_token={alice}&subject_token_type=urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Ajwt\
             &audience={}&scope={}",
            audience.replace(':', "%3A").replace('/', "%2F"),
            scope.replace(' ', "+")
        )
    };
    let orchestrator = basic("orchestrator", "orchestrator-secret");
    let (status, _, body) = http(
        &base,
        "POST",
        "/token",
        &[("Authorization", &orchestrator)],
        &form(&mail, "mail.draft"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let issued: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(issued["token_type"], "Bearer");
    assert_eq!(issued["scope"], "mail.draft");
    assert!(issued["expires_in"].as_u64().unwrap() <= 300);
    let delegated = issued["access_token"].as_str().unwrap().to_owned();

    let send = json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {
        "message": {"role": "user", "messageId": "m-1", "parts": [{"kind": "text", "text": "draft it"}]}}})
    .to_string();
    let with_delegated = format!("Bearer {delegated}");
    let (status, _, body) = http(
        &base,
        "POST",
        "/mail/",
        &[("Authorization", &with_delegated)],
        &send,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"completed\""), "{body}");
    // alice's own long-lived token never works downstream: the agent trusts the service.
    let with_alice = format!("Bearer {alice}");
    let (status, head, _) = http(
        &base,
        "POST",
        "/mail/",
        &[("Authorization", &with_alice)],
        &send,
    )
    .await;
    assert_eq!(status, 401, "{head}");

    // Refusals, each with its OAuth error.
    let wrong_secret = basic("orchestrator", "guess");
    let cases: Vec<(&str, Headers, String, u16, &str)> = vec![
        (
            "no client credentials",
            vec![],
            form(&mail, "mail.draft"),
            401,
            "invalid_client",
        ),
        (
            "a wrong secret",
            vec![("Authorization", wrong_secret.as_str())],
            form(&mail, "mail.draft"),
            401,
            "invalid_client",
        ),
        (
            "a scope alice lacks",
            vec![("Authorization", orchestrator.as_str())],
            form(&mail, "mail.draft admin"),
            400,
            "invalid_scope",
        ),
        (
            "held but above the ceiling",
            vec![("Authorization", orchestrator.as_str())],
            form(&mail, "mail.send"),
            400,
            "invalid_scope",
        ),
        (
            "an unregistered agent",
            vec![("Authorization", orchestrator.as_str())],
            form("http://elsewhere/x", "mail.draft"),
            400,
            "invalid_target",
        ),
        (
            "another grant",
            vec![("Authorization", orchestrator.as_str())],
            "grant_type=client_credentials".into(),
            400,
            "unsupported_grant_type",
        ),
    ];
    for (name, headers, body, status, code) in &cases {
        let (got, head, text) = http(&base, "POST", "/token", headers, body).await;
        assert_eq!(got, *status, "{name}: {text}");
        assert!(text.contains(code), "{name}: {text}");
        if *status == 401 {
            assert!(
                head.to_ascii_lowercase()
                    .contains("www-authenticate: basic"),
                "{name}: {head}"
            );
        }
    }

    let (_, _, keys) = http(&base, "GET", "/.well-known/jwks.json", &[], "").await;
    let keys: Value = serde_json::from_str(&keys).unwrap();
    assert_eq!(keys["keys"][0]["kid"], service.kid());

    let log = AuditLog::open(&dir.join("audit.db")).unwrap();
    let records = log.records(1, 1000).unwrap();
    let tokens: Vec<_> = records.iter().filter(|r| r.event.kind == "token").collect();
    assert_eq!(
        tokens
            .iter()
            .filter(|r| r.event.decision.as_deref() == Some("issued"))
            .count(),
        1,
        "{tokens:#?}"
    );
    assert_eq!(
        tokens
            .iter()
            .filter(|r| r.event.decision.as_deref() == Some("deny"))
            .count(),
        5,
        "{tokens:#?}"
    );
    drop(log);
}

/// `[[triggers]]`: a request naming an unknown trigger, or one for another agent, is refused
/// (-32602); one whose scopes the caller's token lacks gets 403 `insufficient_scope`; a known
/// one runs with the trigger's defaults recorded on the task. Every decision is audited with
/// the request's correlation id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn triggers_are_refused_unless_known_meant_for_the_agent_and_allowed() {
    let dir = Scratch::new("triggers");
    let idp = TokenIssuer::generate(ISS).unwrap();
    std::fs::write(dir.join("jwks.json"), idp.jwks().to_string()).unwrap();
    let toml = format!(
        r#"
        [server]
        store = "memory"
        state_dir = "{dir}"
        audit = true
        [server.jwt]
        jwks_file = "{dir}/jwks.json"
        issuer = "{ISS}"
        [[agents]]
        path = "/"
        builtin = {{ kind = "echo" }}
        [[triggers]]
        id = "weekly-report"
        name = "Weekly report"
        system_prompt = "Write for managers."
        required_scopes = ["reports.run"]
        agents = ["echo"]
        priority = "high"
        [[triggers]]
        id = "mail-only"
        agents = ["mailer"]
        "#,
        dir = dir.display()
    );
    let config: Config = toml::from_str(&toml).unwrap();
    let base = serve(config).await;
    let token = |scopes: &[&str]| {
        idp.issue(&Grant {
            subject: "alice".into(),
            audience: format!("{base}/"),
            scopes: scopes
                .iter()
                .map(|s| s.to_string())
                .collect::<BTreeSet<_>>(),
            lifetime: Duration::from_secs(120),
            act: None,
        })
        .unwrap()
    };
    let send = |trigger: &str, corr: &str| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {
            "role": "user", "messageId": corr, "parts": [{"kind": "text", "text": "hello"}],
            "metadata": {"urn:agentry:a2a:task-envelope:v1": {"triggerId": trigger, "correlationId": corr}}}}})
        .to_string()
    };
    let call = |auth: String, body: String| {
        let base = base.clone();
        async move {
            http(
                &base,
                "POST",
                "/",
                &[("Authorization", auth.as_str())],
                &body,
            )
            .await
        }
    };
    let with = |t: &str| format!("Bearer {t}");
    // (case, trigger, token scopes, status, what the answer says)
    let cases: [(&str, &str, &[&str], u16, &str); 4] = [
        (
            "unknown",
            "nightly",
            &["reports.run"],
            200,
            "unknown trigger `nightly`",
        ),
        (
            "another agent's",
            "mail-only",
            &["reports.run"],
            200,
            "does not apply to agent `echo`",
        ),
        (
            "without its scope",
            "weekly-report",
            &["other"],
            403,
            "reports.run",
        ),
        (
            "allowed",
            "weekly-report",
            &["reports.run"],
            200,
            "\"completed\"",
        ),
    ];
    for (case, trigger, scopes, status, says) in cases {
        let corr = case.replace(' ', "-");
        let (got, head, body) = call(with(&token(scopes)), send(trigger, &corr)).await;
        assert_eq!(got, status, "{case}: {head} {body}");
        assert!(body.contains(says), "{case}: {body}");
        if status == 403 {
            assert!(head.contains("insufficient_scope"), "{case}: {head}");
        }
        if case == "allowed" {
            let v: Value = serde_json::from_str(&body).unwrap();
            let env = &v["result"]["metadata"]["urn:agentry:a2a:task-envelope:v1"];
            assert_eq!(
                (env["triggerId"].as_str(), env["priority"].as_str()),
                (Some("weekly-report"), Some("high")),
                "{v}"
            );
        } else {
            assert!(body.contains("\"error\""), "{case}: {body}");
        }
    }
    // Each decision is in the audit trail under the request's correlation id.
    let log = AuditLog::open(&dir.join("audit.db")).unwrap();
    for (case, ..) in cases {
        let records = log.by_correlation(&case.replace(' ', "-")).unwrap();
        let allowed = case == "allowed";
        assert!(
            records.iter().any(
                |r| r.event.decision.as_deref() == Some(if allowed { "allow" } else { "deny" })
            ),
            "{case}: {records:?}"
        );
    }
}

/// `[server.jwt] jwks_url`: the keys come from the issuer's URL; a token signed with a key
/// published after the start is refused until the set is fetched again, which the unknown
/// key itself prompts (no restart, no waiting for the scheduled refresh); an issuer that
/// cannot be reached at start stops the start with a clear error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_from_a_jwks_url_rotate_without_a_restart() {
    use std::sync::{Arc, Mutex};
    let old = TokenIssuer::generate(ISS).unwrap();
    let new = TokenIssuer::generate(ISS).unwrap();
    let set = |issuers: &[&TokenIssuer]| {
        let keys: Vec<Value> = issuers
            .iter()
            .flat_map(|i| i.jwks()["keys"].as_array().unwrap().clone())
            .collect();
        json!({ "keys": keys }).to_string()
    };
    // The issuer's JWKS endpoint: (document, version, full answers, 304 answers).
    let published = Arc::new(Mutex::new((set(&[&old]), 1u32, 0u32, 0u32)));
    let jwks = {
        let published = published.clone();
        axum::Router::new().route(
            "/jwks",
            axum::routing::get(move |headers: axum::http::HeaderMap| {
                let published = published.clone();
                async move {
                    let mut p = published.lock().unwrap();
                    let tag = format!("\"v{}\"", p.1);
                    if headers.get("if-none-match").and_then(|v| v.to_str().ok()) == Some(&tag) {
                        p.3 += 1;
                        return (
                            axum::http::StatusCode::NOT_MODIFIED,
                            [("etag", tag)],
                            String::new(),
                        );
                    }
                    p.2 += 1;
                    (axum::http::StatusCode::OK, [("etag", tag)], p.0.clone())
                }
            }),
        )
    };
    let jl = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let jwks_url = format!("http://{}/jwks", jl.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(jl, jwks).await });

    let config_for = |url: &str| {
        let toml = format!(
            r#"
            [server]
            store = "memory"
            [server.jwt]
            jwks_url = "{url}"
            issuer = "{ISS}"
            [[agents]]
            path = "/"
            builtin = {{ kind = "echo" }}
            "#
        );
        toml::from_str::<Config>(&toml).unwrap()
    };
    // Unreachable at start: no server.
    let dead = format!("http://127.0.0.1:{}/jwks", agentry_testkit::free_port());
    let err = agentry::Service::build(config_for(&dead))
        .await
        .err()
        .expect("refused");
    assert!(err.to_string().contains("jwks_url"), "{err}");

    let base = serve(config_for(&jwks_url)).await;
    let grant = Grant {
        subject: "alice".into(),
        audience: format!("{base}/"),
        scopes: BTreeSet::new(),
        lifetime: Duration::from_secs(120),
        act: None,
    };
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {
        "role": "user", "messageId": "m1", "parts": [{"kind": "text", "text": "hi"}]}}})
    .to_string();
    let status = |token: String| {
        let (base, body) = (base.clone(), body.clone());
        async move {
            http(
                &base,
                "POST",
                "/",
                &[("Authorization", &format!("Bearer {token}"))],
                &body,
            )
            .await
            .0
        }
    };
    assert_eq!(status(old.issue(&grant).unwrap()).await, 200);
    assert_eq!(
        status(new.issue(&grant).unwrap()).await,
        401,
        "not published yet"
    );
    // The issuer publishes the new key: it verifies within moments, prompted by the token.
    {
        let mut p = published.lock().unwrap();
        p.0 = set(&[&old, &new]);
        p.1 = 2;
    }
    let started = std::time::Instant::now();
    let mut accepted = false;
    while started.elapsed() < Duration::from_secs(15) {
        if status(new.issue(&grant).unwrap()).await == 200 {
            accepted = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(accepted, "the new key was never fetched");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "waited for the 300 s refresh?"
    );
    let (_, _, full, _) = *published.lock().unwrap();
    assert_eq!(
        full, 2,
        "fetched at the start and once after the unknown key"
    );
}

/// Item 3 end to end: an orchestrator that verifies its users' JWTs calls each remote agent
/// of a workflow with a token minted for that call alone: `aud` the agent, the scopes its card
/// requires (not all the user holds), `act` naming the orchestrator. The user's token never
/// leaves the orchestrator; a user without a step's scopes is refused before the call; a
/// request made with a credential that cannot be delegated (the operator's static token) is
/// refused rather than sent on with other credentials.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_orchestrator_calls_each_agent_with_a_token_minted_for_that_call() {
    let dir = Scratch::new("delegation");
    let idp = TokenIssuer::generate(ISS).unwrap();
    std::fs::write(dir.join("idp.json"), idp.jwks().to_string()).unwrap();
    let service =
        TokenIssuer::load_or_create("https://agentry.tokens", &dir.join("svc.key")).unwrap();
    std::fs::write(dir.join("service.json"), service.jwks().to_string()).unwrap();

    // The agents' server: the token service and two agents that accept only its tokens.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let agents = format!("http://{}", listener.local_addr().unwrap());
    let toml = format!(
        r#"
        [server]
        store = "memory"
        state_dir = "{dir}/agents"
        audit = true
        public_url = "{agents}"
        [server.jwt]
        jwks_file = "{dir}/service.json"
        issuer = "https://agentry.tokens"
        [[agents]]
        path = "/knowledge"
        builtin = {{ kind = "echo" }}
        required_scopes = ["kb.read"]
        [[agents]]
        path = "/mail"
        builtin = {{ kind = "echo" }}
        required_scopes = ["mail.draft"]
        [token_service]
        issuer = "https://agentry.tokens"
        key_file = "{dir}/svc.key"
        [token_service.upstream]
        jwks_file = "{dir}/idp.json"
        issuer = "{ISS}"
        [token_service.clients]
        orchestrator = "orchestrator-secret"
        [token_service.ceilings]
        "{agents}/knowledge" = ["kb.read"]
        "{agents}/mail" = ["mail.draft", "mail.send"]
        "#,
        dir = dir.display()
    );
    let svc = agentry::Service::build(toml::from_str(&toml).unwrap())
        .await
        .unwrap();
    tokio::spawn(async move { axum::serve(listener, svc.router).await });

    // The orchestrator: its users' tokens come from the identity provider.
    std::fs::write(
        dir.join("brief.yaml"),
        "name: brief\nsteps:\n  - id: find\n    agent: knowledge\n    input: \"find ${input.text}\"\n  \
         - id: draft\n    agent: mail\n    depends_on: [find]\n    input: \"draft: ${steps.find.output}\"\n",
    )
    .unwrap();
    let toml = format!(
        r#"
        [server]
        store = "memory"
        state_dir = "{dir}/orchestrator"
        bearer_tokens = ["operator-token"]
        [server.jwt]
        jwks_file = "{dir}/idp.json"
        issuer = "{ISS}"
        audience = "orchestrator"
        [delegation]
        token_url = "{agents}/token"
        client_id = "orchestrator"
        client_secret = "orchestrator-secret"
        [[remotes]]
        name = "knowledge"
        url = "{agents}/knowledge"
        delegate = true
        [[remotes]]
        name = "mail"
        url = "{agents}/mail"
        delegate = true
        [orchestrator]
        workflows = ["{dir}/brief.yaml"]
        "#,
        dir = dir.display()
    );
    let orchestrator = serve(toml::from_str(&toml).unwrap()).await;

    let user = |name: &str, scopes: &[&str]| {
        idp.issue(&Grant {
            subject: name.into(),
            audience: "orchestrator".into(),
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
            lifetime: Duration::from_secs(600),
            act: None,
        })
        .unwrap()
    };
    let ask = |token: String, n: u32| {
        let orchestrator = orchestrator.clone();
        async move {
            let send = json!({"jsonrpc": "2.0", "id": n, "method": "message/send", "params": {
                "message": {"role": "user", "messageId": format!("m-{n}"),
                    "parts": [{"kind": "text", "text": "the Q3 numbers"}]}}})
            .to_string();
            let auth = format!("Bearer {token}");
            let (status, _, body) = http(
                &orchestrator,
                "POST",
                "/orchestrator/",
                &[("Authorization", &auth)],
                &send,
            )
            .await;
            assert_eq!(status, 200, "{body}");
            serde_json::from_str::<Value>(&body).unwrap()["result"].clone()
        }
    };

    // alice holds more than the agents need; each token carries only what its agent requires.
    let alice = user("alice", &["kb.read", "mail.draft", "mail.send", "hr.admin"]);
    let task = ask(alice.clone(), 1).await;
    assert_eq!(task["status"]["state"], "completed", "{task:#}");
    assert!(
        task.to_string().contains("draft: find the Q3 numbers"),
        "{task:#}"
    );

    // bob may read but not draft: the mail agent is never called for him.
    let bob = user("bob", &["kb.read"]);
    let task = ask(bob, 2).await;
    assert_eq!(task["status"]["state"], "failed", "{task:#}");
    assert!(
        task.to_string().contains("mail.draft"),
        "the refusal names the missing scope: {task:#}"
    );

    // The operator's static token is not delegable: refused before any call downstream.
    let task = ask("operator-token".into(), 3).await;
    assert_eq!(task["status"]["state"], "failed", "{task:#}");
    assert!(
        task.to_string().contains("no delegated credential"),
        "{task:#}"
    );

    // alice's own token is refused by the agents (another issuer, another audience).
    let (status, _, _) = http(
        &agents,
        "POST",
        "/mail/",
        &[("Authorization", &format!("Bearer {alice}"))],
        &json!({"jsonrpc": "2.0", "id": 9, "method": "message/send", "params": {
            "message": {"role": "user", "messageId": "m-9", "parts": [{"kind": "text", "text": "x"}]}}})
        .to_string(),
    )
    .await;
    assert_eq!(status, 401);

    // The agents' audit trail: exactly the tokens the calls needed, and who used them.
    let log = AuditLog::open(&dir.join("agents/audit.db")).unwrap();
    let records = log.records(1, 1000).unwrap();
    let issued: Vec<(String, String, Value)> = records
        .iter()
        .filter(|r| r.event.kind == "token" && r.event.decision.as_deref() == Some("issued"))
        .map(|r| {
            (
                r.event.actor.clone(),
                r.event.agent.clone().unwrap_or_default(),
                r.event.detail.clone(),
            )
        })
        .collect();
    let knowledge = format!("{agents}/knowledge");
    let mail = format!("{agents}/mail");
    // alice: knowledge then mail; bob: knowledge only; the operator: none.
    assert_eq!(issued.len(), 3, "{issued:#?}");
    for (actor, _, detail) in &issued {
        assert_eq!(actor, "orchestrator");
        assert_eq!(detail["chain"], json!(["orchestrator"]), "{detail}");
    }
    let scopes_for = |aud: &str| -> Vec<String> {
        issued
            .iter()
            .filter(|(_, a, _)| a == aud)
            .map(|(_, _, d)| d["scope"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    assert_eq!(scopes_for(&knowledge), ["kb.read", "kb.read"]);
    assert_eq!(
        scopes_for(&mail),
        ["mail.draft"],
        "least privilege: not mail.send"
    );
    let allowed: Vec<(String, String)> = records
        .iter()
        .filter(|r| r.event.kind == "authz" && r.event.decision.as_deref() == Some("allow"))
        .filter(|r| r.event.skill.as_deref() == Some("message/send"))
        .map(|r| {
            // The orchestrator presented each token, on behalf of its user.
            assert_eq!(r.event.actor, "orchestrator", "{r:?}");
            (
                r.event.on_behalf_of.clone().unwrap_or_default(),
                r.event.task_id.clone().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        allowed.iter().filter(|(a, _)| a == "jwt:alice").count(),
        2,
        "{allowed:#?}"
    );
    assert_eq!(
        allowed.iter().filter(|(a, _)| a == "jwt:bob").count(),
        1,
        "bob reached the knowledge agent only: {allowed:#?}"
    );
    assert!(
        !allowed.iter().any(|(a, _)| a.starts_with("bearer:")),
        "the operator's token never left the orchestrator: {allowed:#?}"
    );
    drop(log);
}

/// Item 6: the tool calls an agent makes are in the audit trail beside the authorization
/// decision of the request that caused them, found by its correlation id: the tool, its
/// arguments, the outcome, on whose behalf.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tool_call_is_audited_with_the_request_it_served() {
    let dir = Scratch::new("tool-audit");
    let calculator = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/agents/calculator.toml");
    let toml = format!(
        r#"
        [server]
        store = "memory"
        state_dir = "{dir}"
        audit = true
        bearer_tokens = ["calc-token"]
        [[agents]]
        path = "/calc"
        config = "{calculator}"
        "#,
        dir = dir.display(),
        calculator = calculator.display(),
    );
    let base = serve(toml::from_str(&toml).unwrap()).await;
    let send = json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {
        "message": {"role": "user", "messageId": "m-1",
            "parts": [{"kind": "text", "text": "What is (2 + 3) * 4?"}],
            "metadata": {"urn:agentry:a2a:task-envelope:v1": {
                "correlationId": "corr-tools-1", "idempotencyKey": "key-tools-1"}}}}})
    .to_string();
    let (status, _, body) = http(
        &base,
        "POST",
        "/calc/",
        &[("Authorization", "Bearer calc-token")],
        &send,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let task: Value = serde_json::from_str::<Value>(&body).unwrap()["result"].clone();
    assert_eq!(task["status"]["state"], "completed", "{task:#}");

    let log = AuditLog::open(&dir.join("audit.db")).unwrap();
    let path = log.by_correlation("corr-tools-1").unwrap();
    let kinds: Vec<&str> = path.iter().map(|r| r.event.kind.as_str()).collect();
    assert!(kinds.contains(&"authz"), "{path:#?}");
    let tools: Vec<_> = path
        .iter()
        .filter(|r| r.event.kind == "tool" && r.event.skill.as_deref() == Some("calculate"))
        .collect();
    assert_eq!(tools.len(), 1, "{path:#?}");
    assert_eq!(
        path.iter().filter(|r| r.event.kind == "tool").count(),
        1,
        "`finish` ends the run, it is not a tool call: {path:#?}"
    );
    let t = &tools[0].event;
    assert_eq!(t.decision.as_deref(), Some("ok"));
    assert_eq!(t.actor, "calculator");
    assert!(
        t.on_behalf_of
            .as_deref()
            .is_some_and(|c| c.starts_with("bearer:")),
        "{t:?}"
    );
    assert_eq!(t.idempotency_key.as_deref(), Some("key-tools-1"));
    assert_eq!(t.task_id.as_deref(), task["id"].as_str());
    assert_eq!(t.detail["arguments"]["expression"], "(2 + 3) * 4");
    assert!(t.latency_us.is_some());
    // The record of the call comes after the decision that let the request in.
    let authz = path.iter().position(|r| r.event.kind == "authz").unwrap();
    let call = path.iter().position(|r| r.event.kind == "tool").unwrap();
    assert!(authz < call, "{path:#?}");
    assert_eq!(
        log.verify().unwrap().records as usize,
        log.records(1, 1000).unwrap().len()
    );
    drop(log);
}

/// The authorization matrix of issue 21 in one table: every way in that must be refused, at an
/// agent (over JSON-RPC and HTTP+JSON) and at the token service, with 0 escapes; and the two
/// ways that must work (a right token; a re-exchange, which keeps every actor on the chain).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_authorization_matrix_has_no_escapes() {
    use base64::Engine;
    const TS: &str = "https://agentry.tokens";
    let dir = Scratch::new("authz-matrix");
    let idp = TokenIssuer::generate(ISS).unwrap();
    std::fs::write(dir.join("idp.json"), idp.jwks().to_string()).unwrap();
    let service = TokenIssuer::load_or_create(TS, &dir.join("svc.key")).unwrap();
    std::fs::write(dir.join("service.json"), service.jwks().to_string()).unwrap();
    let impostor = TokenIssuer::generate(TS).unwrap();

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let agent = format!("{base}/echo");
    let other = format!("{base}/other");
    let toml = format!(
        r#"
        [server]
        store = "memory"
        state_dir = "{dir}"
        public_url = "{base}"
        [server.jwt]
        jwks_file = "{dir}/service.json"
        issuer = "{TS}"
        required_scopes = ["echo.use"]
        [[agents]]
        path = "/echo"
        builtin = {{ kind = "echo" }}
        skill_scopes = {{ echo = ["echo.admin"] }}
        [[agents]]
        path = "/other"
        builtin = {{ kind = "echo" }}
        [token_service]
        issuer = "{TS}"
        key_file = "{dir}/svc.key"
        max_depth = 2
        [token_service.upstream]
        jwks_file = "{dir}/idp.json"
        issuer = "{ISS}"
        [token_service.clients]
        orchestrator = "s1"
        knowledge = "s2"
        mail = "s3"
        [token_service.ceilings]
        "{agent}" = ["echo.use", "echo.admin"]
        "{other}" = ["echo.use"]
        "#,
        dir = dir.display()
    );
    let svc = agentry::Service::build(toml::from_str(&toml).unwrap())
        .await
        .unwrap();
    tokio::spawn(async move { axum::serve(listener, svc.router).await });

    // The card declares the skill's own requirement beside the agent's (both generations).
    for version in ["0.3", "1.0"] {
        let (_, _, card) = http(
            &base,
            "GET",
            "/echo/.well-known/agent-card.json",
            &[("A2A-Version", version)],
            "",
        )
        .await;
        let card: Value = serde_json::from_str(&card).unwrap();
        let skill = &card["skills"][0];
        let skill = format!("{}{}", skill["security"], skill["securityRequirements"]);
        assert!(
            skill.contains("echo.admin") && skill.contains("echo.use"),
            "{version}: {card}"
        );
    }
    // A skill_scopes entry naming a skill the agent lacks is refused when loaded.
    let wrong = toml.replace("skill_scopes = { echo =", "skill_scopes = { send =");
    let e = agentry::Service::build(toml::from_str(&wrong).unwrap())
        .await
        .err()
        .expect("an unknown skill is refused")
        .to_string();
    assert!(e.contains("`send`") && e.contains("echo"), "{e}");

    let t = now();
    let scopes = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<BTreeSet<_>>();
    let grant = |aud: &str, s: &[&str]| Grant {
        subject: "alice".into(),
        audience: aud.into(),
        scopes: scopes(s),
        lifetime: Duration::from_secs(300),
        act: None,
    };
    let claims = |iss: &str, aud: &str, scope: &str, exp: u64, nbf: u64| Claims {
        sub: "alice".into(),
        iss: iss.into(),
        aud: Audience::One(aud.into()),
        exp,
        nbf: Some(nbf),
        iat: Some(nbf),
        jti: None,
        scope: Some(scope.into()),
        scp: None,
        act: None,
        may_act: None,
        client_id: None,
    };
    let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let good = service.issue(&grant(&agent, &["echo.use"])).unwrap();
    let admin = service
        .issue(&grant(&agent, &["echo.use", "echo.admin"]))
        .unwrap();
    // A payload edited after signing: the scope widened, or the actor chain forged.
    let edited = |token: &str, f: &dyn Fn(&mut Value)| {
        let mut parts = token.split('.');
        let (h, p, s) = (
            parts.next().unwrap(),
            parts.next().unwrap(),
            parts.next().unwrap(),
        );
        let mut payload: Value = serde_json::from_slice(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(p)
                .unwrap(),
        )
        .unwrap();
        f(&mut payload);
        format!("{h}.{}.{s}", b64(&payload))
    };
    let unsigned = |alg: &str| {
        format!(
            "{}.{}.{}",
            b64(&json!({"alg": alg, "typ": "JWT", "kid": service.kid()})),
            b64(&serde_json::to_value(claims(TS, &agent, "echo.use", t + 300, t)).unwrap()),
            if alg == "none" { "" } else { "c2lnbmF0dXJl" }
        )
    };
    let envelope = |e: Value| json!({"urn:agentry:a2a:task-envelope:v1": e});

    // (case, Authorization header, envelope, expected: 401 / 403 / 400 for -32602)
    type Case = (&'static str, Option<String>, Option<Value>, u16);
    let bearer = |t: &str| Some(format!("Bearer {t}"));
    let agent_cases: Vec<Case> = vec![
        ("no token", None, None, 401),
        ("an empty bearer", Some("Bearer ".into()), None, 401),
        ("another scheme", Some(format!("Basic {good}")), None, 401),
        ("garbage", bearer("x.y.z"), None, 401),
        ("alg none", bearer(&unsigned("none")), None, 401),
        (
            "an HMAC token where a key pair is configured",
            bearer(&unsigned("HS256")),
            None,
            401,
        ),
        (
            "an RS256 header on an Ed25519 key",
            bearer(&unsigned("RS256")),
            None,
            401,
        ),
        (
            "expired",
            bearer(
                &service
                    .sign(&claims(TS, &agent, "echo.use", t - 3600, t - 7200))
                    .unwrap(),
            ),
            None,
            401,
        ),
        (
            "not yet valid",
            bearer(
                &service
                    .sign(&claims(TS, &agent, "echo.use", t + 7200, t + 3600))
                    .unwrap(),
            ),
            None,
            401,
        ),
        (
            "the identity provider's own token (wrong issuer)",
            bearer(&idp.issue(&grant(&agent, &["echo.use"])).unwrap()),
            None,
            401,
        ),
        (
            "the right issuer's name on an unpublished key",
            bearer(&impostor.issue(&grant(&agent, &["echo.use"])).unwrap()),
            None,
            401,
        ),
        (
            "a wrong audience",
            bearer(
                &service
                    .issue(&grant("http://elsewhere/", &["echo.use"]))
                    .unwrap(),
            ),
            None,
            401,
        ),
        (
            "a token minted for another agent",
            bearer(&service.issue(&grant(&other, &["echo.use"])).unwrap()),
            None,
            401,
        ),
        (
            "a widened scope (payload edited)",
            bearer(&edited(&good, &|p| {
                p["scope"] = json!("echo.use echo.admin")
            })),
            None,
            401,
        ),
        (
            "a forged act chain (payload edited)",
            bearer(&edited(&good, &|p| {
                p["act"] = json!({"sub": "orchestrator"})
            })),
            None,
            401,
        ),
        (
            "a longer lifetime (payload edited)",
            bearer(&edited(&good, &|p| p["exp"] = json!(t + 86_400))),
            None,
            401,
        ),
        (
            "without the agent's scope",
            bearer(&service.issue(&grant(&agent, &["echo.admin"])).unwrap()),
            None,
            403,
        ),
        (
            "replayed against a skill it lacks the scopes of",
            bearer(&good),
            Some(envelope(json!({"skill": "echo"}))),
            403,
        ),
        (
            "a skill the agent does not have",
            bearer(&admin),
            Some(envelope(json!({"skill": "send"}))),
            400,
        ),
        (
            "an envelope requiring scopes the token lacks",
            bearer(&good),
            Some(envelope(json!({"requiredScopes": ["mail.send"]}))),
            403,
        ),
        (
            "an unknown trigger",
            bearer(&good),
            Some(envelope(json!({"triggerId": "nope"}))),
            400,
        ),
    ];
    let allowed: Vec<Case> = vec![
        ("a right token", bearer(&good), None, 200),
        (
            "a right token for the skill",
            bearer(&admin),
            Some(envelope(json!({"skill": "echo"}))),
            200,
        ),
    ];
    let mut escapes = Vec::new();
    let mut refused = 0;
    for (i, (name, auth, meta, expected)) in agent_cases.iter().chain(&allowed).enumerate() {
        let mut rpc_msg = json!({"role": "user", "messageId": format!("m-{i}"), "parts": [{"kind": "text", "text": "hi"}]});
        let mut rest_msg =
            json!({"role": "ROLE_USER", "messageId": format!("r-{i}"), "parts": [{"text": "hi"}]});
        if let Some(m) = meta {
            rpc_msg["metadata"] = m.clone();
            rest_msg["metadata"] = m.clone();
        }
        let rpc = json!({"jsonrpc": "2.0", "id": i, "method": "message/send", "params": {"message": rpc_msg}}).to_string();
        let rest = json!({"message": rest_msg}).to_string();
        let mut headers = vec![];
        if let Some(a) = auth {
            headers.push(("Authorization", a.as_str()));
        }
        let (rpc_status, _, rpc_body) = http(&base, "POST", "/echo/", &headers, &rpc).await;
        headers.push(("A2A-Version", "1.0"));
        let (rest_status, _, rest_body) =
            http(&base, "POST", "/echo/message:send", &headers, &rest).await;
        // JSON-RPC answers -32602 inside a 200; HTTP+JSON with 400.
        let rpc_got = if rpc_status == 200 && rpc_body.contains("-32602") {
            400
        } else {
            rpc_status
        };
        for (binding, got, body) in [
            ("JSON-RPC", rpc_got, &rpc_body),
            ("HTTP+JSON", rest_status, &rest_body),
        ] {
            let served = got == 200 && (body.contains("completed") || body.contains("COMPLETED"));
            if got != *expected || (*expected != 200 && served) || (*expected == 200 && !served) {
                escapes.push(format!("{name} over {binding}: {got} {body}"));
            } else if *expected != 200 {
                refused += 1;
            }
        }
    }

    // The token service: (case, client, subject token, audience, scope, status, OAuth error).
    let deep = service
        .issue(&Grant {
            act: Some(agentry::governance::token::Actor {
                sub: "knowledge".into(),
                act: Some(Box::new(agentry::governance::token::Actor {
                    sub: "orchestrator".into(),
                    act: None,
                })),
            }),
            ..grant(TS, &["echo.use"])
        })
        .unwrap();
    let for_orchestrator = idp
        .issue(&grant("orchestrator", &["echo.use", "echo.admin"]))
        .unwrap();
    let mut may_act = claims(ISS, "orchestrator", "echo.use", t + 300, t);
    may_act.may_act = Some(agentry::governance::token::Actor {
        sub: "knowledge".into(),
        act: None,
    });
    let may_act = idp.sign(&may_act).unwrap();
    let basic = |id: &str, secret: &str| {
        Some(format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{id}:{secret}"))
        ))
    };
    let orch = basic("orchestrator", "s1");
    type Exchange = (
        &'static str,
        Option<String>,
        String,
        String,
        &'static str,
        u16,
        &'static str,
    );
    let exchange_cases: Vec<Exchange> = vec![
        (
            "no client credentials",
            None,
            for_orchestrator.clone(),
            agent.clone(),
            "echo.use",
            401,
            "invalid_client",
        ),
        (
            "a wrong client secret",
            basic("orchestrator", "s2"),
            for_orchestrator.clone(),
            agent.clone(),
            "echo.use",
            401,
            "invalid_client",
        ),
        (
            "an expired subject token",
            orch.clone(),
            idp.sign(&claims(ISS, "orchestrator", "echo.use", t - 3600, t - 7200))
                .unwrap(),
            agent.clone(),
            "echo.use",
            400,
            "invalid_grant",
        ),
        (
            "a subject token for another actor",
            basic("mail", "s3"),
            for_orchestrator.clone(),
            agent.clone(),
            "echo.use",
            400,
            "invalid_grant",
        ),
        (
            "may_act naming someone else",
            orch.clone(),
            may_act,
            agent.clone(),
            "echo.use",
            400,
            "invalid_grant",
        ),
        (
            "an unsigned subject token",
            orch.clone(),
            unsigned("none"),
            agent.clone(),
            "echo.use",
            400,
            "invalid_grant",
        ),
        (
            "a subject token from an unpublished key",
            orch.clone(),
            impostor.issue(&grant(TS, &["echo.use"])).unwrap(),
            agent.clone(),
            "echo.use",
            400,
            "invalid_grant",
        ),
        (
            "a subject token with its actor dropped (payload edited)",
            basic("mail", "s3"),
            edited(&deep, &|p| {
                p.as_object_mut().unwrap().remove("act");
            }),
            agent.clone(),
            "echo.use",
            400,
            "invalid_grant",
        ),
        (
            "a chain deeper than allowed",
            basic("mail", "s3"),
            deep.clone(),
            agent.clone(),
            "echo.use",
            400,
            "invalid_grant",
        ),
        (
            "a widened scope",
            orch.clone(),
            for_orchestrator.clone(),
            agent.clone(),
            "echo.use hr.admin",
            400,
            "invalid_scope",
        ),
        (
            "above the agent's ceiling",
            orch.clone(),
            for_orchestrator.clone(),
            other.clone(),
            "echo.admin",
            400,
            "invalid_scope",
        ),
        (
            "an unknown audience",
            orch.clone(),
            for_orchestrator.clone(),
            "http://elsewhere/".into(),
            "echo.use",
            400,
            "invalid_target",
        ),
    ];
    let form = |subject: &str, audience: &str, scope: &str| {
        format!(
            "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Atoken-exchange\
             &subject_token={subject}&subject_token_type=urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Ajwt\
             &audience={}&scope={}",
            audience.replace(':', "%3A").replace('/', "%2F"),
            scope.replace(' ', "+")
        )
    };
    for (name, client, subject, audience, scope, status, code) in &exchange_cases {
        let mut headers = vec![("Content-Type", "application/x-www-form-urlencoded")];
        if let Some(c) = client {
            headers.push(("Authorization", c.as_str()));
        }
        let (got, _, body) = http(
            &base,
            "POST",
            "/token",
            &headers,
            &form(subject, audience, scope),
        )
        .await;
        if got != *status || !body.contains(code) || body.contains("access_token") {
            escapes.push(format!("token service, {name}: {got} {body}"));
        } else {
            refused += 1;
        }
    }

    // A re-exchange further down the path keeps every actor: knowledge over orchestrator.
    let (status, _, body) = http(
        &base,
        "POST",
        "/token",
        &[("Authorization", orch.as_deref().unwrap())],
        &form(&for_orchestrator, TS, "echo.use"),
    )
    .await;
    assert_eq!(
        status, 400,
        "a token for the service itself is no agent's: {body}"
    );
    let (status, _, body) = http(
        &base,
        "POST",
        "/token",
        &[("Authorization", orch.as_deref().unwrap())],
        &form(&for_orchestrator, &agent, "echo.use"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let first: Value = serde_json::from_str(&body).unwrap();
    let hop = service
        .issue(&Grant {
            act: Some(agentry::governance::token::Actor {
                sub: "orchestrator".into(),
                act: None,
            }),
            ..grant(TS, &["echo.use"])
        })
        .unwrap();
    let (status, _, body) = http(
        &base,
        "POST",
        "/token",
        &[(
            "Authorization",
            basic("knowledge", "s2").as_deref().unwrap(),
        )],
        &form(&hop, &agent, "echo.use"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let second: Value = serde_json::from_str(&body).unwrap();
    let act_of = |token: &str| -> Value {
        let p = token.split('.').nth(1).unwrap();
        let v: Value = serde_json::from_slice(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(p)
                .unwrap(),
        )
        .unwrap();
        v["act"].clone()
    };
    assert_eq!(
        act_of(first["access_token"].as_str().unwrap()),
        json!({"sub": "orchestrator"})
    );
    assert_eq!(
        act_of(second["access_token"].as_str().unwrap()),
        json!({"sub": "knowledge", "act": {"sub": "orchestrator"}})
    );

    assert!(
        escapes.is_empty(),
        "{} escape(s): {escapes:#?}",
        escapes.len()
    );
    let cases = agent_cases.len() + exchange_cases.len();
    eprintln!("authorization matrix: {cases} cases, {refused} refusals checked, 0 escapes");
    assert!(cases >= 30, "{cases} cases");
    assert_eq!(refused, 2 * agent_cases.len() + exchange_cases.len());
}

/// The mail agent never sends without a confirmation turn, nor for a caller without the
/// send scopes (named skill: the server refuses; unnamed: the agent does); "no" keeps the
/// draft; a draft is sent once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mail_agent_sends_only_what_an_allowed_caller_confirmed() {
    let dir = Scratch::new("mail");
    let idp = TokenIssuer::generate(ISS).unwrap();
    std::fs::write(dir.join("idp.json"), idp.jwks().to_string()).unwrap();
    let toml = format!(
        r#"
        [server]
        store = "memory"
        state_dir = "{dir}"
        [server.jwt]
        jwks_file = "{dir}/idp.json"
        issuer = "{ISS}"
        audience = "mail"
        required_scopes = ["mail.draft"]
        [[agents]]
        path = "/mail"
        builtin = {{ kind = "mail", outbox = "{dir}/outbox", from = "bot@example.com" }}
        skill_scopes = {{ send = ["mail.send"] }}
        "#,
        dir = dir.display()
    );
    let base = serve(toml::from_str(&toml).unwrap()).await;
    let token = |scopes: &[&str]| {
        format!(
            "Bearer {}",
            idp.issue(&Grant {
                subject: "alice".into(),
                audience: "mail".into(),
                scopes: scopes.iter().map(|s| s.to_string()).collect(),
                lifetime: Duration::from_secs(300),
                act: None,
            })
            .unwrap()
        )
    };
    let drafter = token(&["mail.draft"]);
    let sender = token(&["mail.draft", "mail.send"]);
    let send = |auth: String, text: &str, task: Option<&str>, skill: Option<&str>, n: u32| {
        let base = base.clone();
        let mut message = json!({"role": "user", "messageId": format!("m-{n}"),
            "parts": [{"kind": "text", "text": text}]});
        if let Some(t) = task {
            message["taskId"] = json!(t);
        }
        if let Some(s) = skill {
            message["metadata"] = json!({"urn:agentry:a2a:task-envelope:v1": {"skill": s}});
        }
        async move {
            let body = json!({"jsonrpc": "2.0", "id": n, "method": "message/send",
                "params": {"message": message}})
            .to_string();
            let (status, _, body) =
                http(&base, "POST", "/mail/", &[("Authorization", &auth)], &body).await;
            (
                status,
                serde_json::from_str::<Value>(&body).unwrap_or_default(),
            )
        }
    };
    let drafted = |v: &Value| -> String {
        let text = v.to_string();
        let i = text.find("\"draft\":\"d-").expect("a draft id") + 9;
        text[i..i + 14].to_owned()
    };
    let state = |v: &Value| {
        v["result"]["status"]["state"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    };
    let sent = || std::fs::read_dir(dir.join("outbox/sent")).unwrap().count();

    let (_, v) = send(
        drafter.clone(),
        "To: a@example.com\nSubject: Hi\n\nHello.",
        None,
        None,
        1,
    )
    .await;
    assert_eq!(state(&v), "completed", "{v}");
    let id = drafted(&v);
    assert!(dir.join(format!("outbox/drafts/{id}.eml")).exists());
    let (_, v) = send(drafter.clone(), "no recipient", None, None, 2).await;
    assert_eq!(state(&v), "rejected", "{v}");

    // A drafter cannot send: refused by the server (skill named) or the agent (not named).
    let (status, _) = send(
        drafter.clone(),
        &format!("send {id}"),
        None,
        Some("send"),
        3,
    )
    .await;
    assert_eq!(status, 403);
    let (_, v) = send(drafter.clone(), &format!("send {id}"), None, None, 4).await;
    assert_eq!(state(&v), "rejected", "{v}");
    assert!(v.to_string().contains("mail.send"), "{v}");

    // A sender is asked first; "no" keeps the draft.
    let (_, v) = send(sender.clone(), &format!("send {id}"), None, Some("send"), 5).await;
    assert_eq!(state(&v), "input-required", "{v}");
    let task = v["result"]["id"].as_str().unwrap().to_owned();
    assert_eq!(sent(), 0, "nothing sent before the confirmation");
    let (_, v) = send(sender.clone(), "no", Some(&task), None, 6).await;
    assert_eq!(state(&v), "completed", "{v}");
    assert_eq!(sent(), 0);

    // Asked again and confirmed: sent once; a second confirmation finds no draft.
    let (_, v) = send(sender.clone(), &format!("send {id}"), None, Some("send"), 7).await;
    let task = v["result"]["id"].as_str().unwrap().to_owned();
    let (_, v) = send(sender.clone(), "yes", Some(&task), None, 8).await;
    assert_eq!(state(&v), "completed", "{v}");
    assert_eq!(sent(), 1);
    let (_, v) = send(sender.clone(), &format!("send {id}"), None, Some("send"), 9).await;
    assert_eq!(state(&v), "rejected", "the draft is gone: {v}");
    // A path in place of a draft id is no draft.
    let (_, v) = send(sender, "send ../../etc/passwd", None, Some("send"), 10).await;
    assert_eq!(state(&v), "rejected", "{v}");
}

/// A workflow's calls to a remote agent are all in that agent's trail under the user
/// request's correlation id: the send, which carries the task envelope, and the calls that
/// follow its task (`tasks/resubscribe`, `tasks/get`), which carry the id as W3C baggage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_agent_records_every_call_of_a_request_under_its_correlation_id() {
    let dir = Scratch::new("follow");
    let remote: Config = toml::from_str(&format!(
        r#"
        [server]
        store = "memory"
        state_dir = "{dir}/remote"
        audit = true
        [[agents]]
        path = "/echo"
        builtin = {{ kind = "echo" }}
        "#,
        dir = dir.display()
    ))
    .unwrap();
    let remote = serve(remote).await;
    std::fs::write(
        dir.join("wf.yaml"),
        "name: relay\ndescription: Asks the echo agent.\nsteps:\n  - {id: ask, agent: echo, input: hello}\n",
    )
    .unwrap();
    let orchestrator: Config = toml::from_str(&format!(
        r#"
        [server]
        store = "memory"
        state_dir = "{dir}/orchestrator"
        [[remotes]]
        name = "echo"
        url = "{remote}/echo"
        [orchestrator]
        workflows = ["{dir}/wf.yaml"]
        "#,
        dir = dir.display()
    ))
    .unwrap();
    let orchestrator = serve(orchestrator).await;
    let send = json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {
        "message": {"role": "user", "messageId": "m-follow", "parts": [{"kind": "text", "text": "go"}],
            "metadata": {"urn:agentry:a2a:task-envelope:v1": {"correlationId": "corr-follow-1"}}}}})
    .to_string();
    let (status, _, body) = http(&orchestrator, "POST", "/orchestrator/", &[], &send).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"completed\""), "{body}");

    let log = AuditLog::open(&dir.join("remote/audit.db")).unwrap();
    let path = log.by_correlation("corr-follow-1").unwrap();
    let methods: Vec<&str> = path
        .iter()
        .filter_map(|r| r.event.skill.as_deref())
        .collect();
    assert!(methods.contains(&"message/send"), "{methods:?}");
    assert!(
        methods.iter().any(|m| *m != "message/send"),
        "the calls following the task are under the request too: {methods:?}"
    );
    // Every call the remote saw is under the request: none was recorded without it.
    let all = log.records(1, 1000).unwrap();
    assert_eq!(all.len(), path.len(), "{all:#?}");
    drop(log);
}

/// `[server.introspection]` (RFC 7662): an agent that does not verify tokens itself asks the
/// issuer's endpoint (here agentry's token service, `POST /introspect`), and refuses what the
/// issuer calls inactive, a token for another audience, one without the scopes (403), and
/// everything when the endpoint cannot be asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_the_issuer_vouches_for_are_accepted_and_nothing_else() {
    use base64::Engine;
    let dir = Scratch::new("introspect");
    let idp = TokenIssuer::generate(ISS).unwrap();
    std::fs::write(dir.join("idp.json"), idp.jwks().to_string()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let mail = format!("{base}/mail");
    let toml = format!(
        r#"
        [server]
        store = "memory"
        state_dir = "{dir}"
        public_url = "{base}"
        [server.introspection]
        url = "{base}/introspect"
        client_id = "agents"
        client_secret = "agents-secret"
        audience = "{mail}"
        required_scopes = ["mail.draft"]
        [[agents]]
        path = "/mail"
        builtin = {{ kind = "echo" }}
        [[agents]]
        path = "/admin"
        builtin = {{ kind = "echo" }}
        required_scopes = ["mail.admin"]
        [token_service]
        issuer = "https://agentry.tokens"
        [token_service.upstream]
        jwks_file = "{dir}/idp.json"
        issuer = "{ISS}"
        [token_service.clients]
        orchestrator = "orchestrator-secret"
        agents = "agents-secret"
        [token_service.ceilings]
        "{mail}" = ["mail.draft"]
        "{base}/other" = ["mail.draft"]
        "#,
        dir = dir.display()
    );
    let svc = agentry::Service::build(toml::from_str(&toml).unwrap())
        .await
        .unwrap();
    tokio::spawn(async move { axum::serve(listener, svc.router).await });

    let alice = idp
        .issue(&Grant {
            subject: "alice".into(),
            audience: "orchestrator".into(),
            scopes: ["mail.draft"].iter().map(|s| s.to_string()).collect(),
            lifetime: Duration::from_secs(600),
            act: None,
        })
        .unwrap();
    let orchestrator = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("orchestrator:orchestrator-secret")
    );
    let mint = |audience: String| {
        let (base, alice, orchestrator) = (base.clone(), alice.clone(), orchestrator.clone());
        async move {
            let form = format!(
                "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Atoken-exchange\
                 &subject_token={alice}&subject_token_type=urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Ajwt\
                 &audience={}&scope=mail.draft",
                audience.replace(':', "%3A").replace('/', "%2F"),
            );
            let (status, _, body) = http(
                &base,
                "POST",
                "/token",
                &[("Authorization", &orchestrator)],
                &form,
            )
            .await;
            assert_eq!(status, 200, "{body}");
            serde_json::from_str::<Value>(&body).unwrap()["access_token"]
                .as_str()
                .unwrap()
                .to_owned()
        }
    };
    let send = |path: &str, token: &str| {
        let (base, path, auth) = (base.clone(), path.to_owned(), format!("Bearer {token}"));
        async move {
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {
                "message": {"role": "user", "messageId": "m-1",
                    "parts": [{"kind": "text", "text": "hello"}]}}})
            .to_string();
            http(&base, "POST", &path, &[("Authorization", &auth)], &body).await
        }
    };

    // The endpoint answers its clients only.
    let (status, _, _) = http(&base, "POST", "/introspect", &[], "token=x").await;
    assert_eq!(status, 401);

    let for_mail = mint(mail.clone()).await;
    let (status, _, body) = send("/mail/", &for_mail).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"completed\""), "{body}");
    // Twice: the second answer comes from the cache, the same.
    assert_eq!(send("/mail/", &for_mail).await.0, 200);

    let (status, head, _) = send("/mail/", "an-opaque-string-nobody-issued").await;
    assert_eq!(status, 401);
    assert!(head.contains("inactive token"), "{head}");
    let for_other = mint(format!("{base}/other")).await;
    let (status, head, _) = send("/mail/", &for_other).await;
    assert_eq!(status, 401);
    assert!(head.contains("wrong audience"), "{head}");
    let (status, head, _) = send("/admin/", &for_mail).await;
    assert_eq!(status, 403, "{head}");
    assert!(head.contains("insufficient_scope"), "{head}");

    // An agent whose endpoint cannot be reached refuses every token (fail closed).
    let dead = agentry_testkit::free_port();
    let toml = format!(
        r#"
        [server]
        store = "memory"
        [server.introspection]
        url = "http://127.0.0.1:{dead}/introspect"
        client_id = "agents"
        client_secret = "agents-secret"
        audience = "{mail}"
        [[agents]]
        path = "/mail"
        builtin = {{ kind = "echo" }}
        "#
    );
    let lonely = serve(toml::from_str(&toml).unwrap()).await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {
        "message": {"role": "user", "messageId": "m-1", "parts": [{"kind": "text", "text": "hi"}]}}})
    .to_string();
    let (status, head, _) = http(
        &lonely,
        "POST",
        "/mail/",
        &[("Authorization", &format!("Bearer {for_mail}"))],
        &body,
    )
    .await;
    assert_eq!(status, 401, "{head}");
}
