//! Publish-subscribe from agentry.toml (`[events]`): an event posted to `POST /events/{topic}`
//! reaches the subscribed agent, whose `publish_event` tool starts the next one, whose answer
//! goes on as a reply event; the endpoint's refusals; configs that cannot work are refused
//! before anything is served. On NATS (`[server] bus`): replicas share a subscription's events,
//! each handled once.

use std::path::Path;
use std::time::Duration;

use agentry::Config;
use agentry::flow::bus::BusEvent;
use futures_util::StreamExt;
use serde_json::{Value, json};

/// A scripted model's transcript: each entry the text the request's last message must
/// contain and the answer (a plain text, or a call of `publish_event`).
fn transcript(dir: &Path, name: &str, entries: &[(&str, Value)]) -> String {
    let entries: Vec<Value> = entries
        .iter()
        .map(|(expect, answer)| {
            let response = match answer {
                Value::String(text) => json!({
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }),
                call => json!({
                    "message": {"role": "assistant", "content": "", "tool_calls": [
                        {"id": "call_1", "name": "publish_event", "arguments": call},
                    ]},
                    "finish_reason": "tool_calls",
                }),
            };
            json!({ "expect": expect, "response": response })
        })
        .collect();
    let path = dir.join(format!("{name}.json"));
    let body = json!({ "capabilities": {"native_tools": true}, "entries": entries });
    std::fs::write(&path, body.to_string()).unwrap();
    path.display().to_string()
}

/// An `[[agents]]` entry: `name` at `/name` on a scripted model replaying `transcript`;
/// `extra`, more lines of its `[agents.agent]` table.
fn scripted_agent(name: &str, transcript: &str, extra: &str) -> String {
    format!(
        "[[agents]]\npath = \"/{name}\"\n[agents.agent]\nname = \"{name}\"\n{extra}\n\
         [agents.agent.model]\nprovider = \"scripted\"\ntranscript = \"{transcript}\"\n"
    )
}

fn dir(name: &str) -> agentry_testkit::Scratch {
    agentry_testkit::Scratch::new(&format!("events-{name}"))
}

/// The chain of the governance example without a workflow: an order event reaches billing,
/// which publishes an invoice event with its tool; the mailer (which has no such tool: it
/// did not name it) drafts the mail, and its answer is published on `mail.drafted`.
#[tokio::test]
async fn an_event_runs_a_chain_of_subscribed_agents() {
    let d = dir("chain");
    let billing = transcript(
        &d,
        "billing",
        &[
            (
                "\"order\":42",
                json!({"topic": "invoice.drafted", "payload": {"order": 42, "total": 99.5}}),
            ),
            ("invoice.drafted", json!("Invoice for order 42 drafted.")),
        ],
    );
    let mailer = transcript(
        &d,
        "mailer",
        &[
            (
                "\"total\":99.5",
                json!({"topic": "mail.sent", "payload": {"order": 42}}),
            ),
            (
                "no tool named `publish_event`",
                json!("Drafted a mail about the invoice of order 42; not sent."),
            ),
        ],
    );
    let config: Config = toml::from_str(&format!(
        r#"
        [server]
        store = "memory"
        bearer_tokens = ["operator-token"]
        audit = true
        state_dir = "{state}"
        [events]
        agent_topics = ["invoice.*"]
        [[events.subscribe]]
        topic = "order.created"
        agent = "billing"
        [[events.subscribe]]
        topic = "invoice.*"
        agent = "mailer"
        reply_topic = "mail.drafted"
        trigger = "invoices"
        [[triggers]]
        id = "invoices"
        system_prompt = "Draft, never send."
        agents = ["mailer"]
        {billing}
        {mailer}
        "#,
        state = d.display(),
        billing = scripted_agent("billing", &billing, "tools = [\"publish_event\"]"),
        mailer = scripted_agent("mailer", &mailer, ""),
    ))
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let service = agentry::Service::build(config).await.unwrap();
    let bus = service.events.clone().expect("[events] makes a bus");
    let mut drafted = bus.subscribe("mail.>");
    tokio::spawn(async move { axum::serve(listener, service.router).await });
    let url = |topic: &str| format!("http://{addr}/events/{topic}");
    let http = reqwest::Client::new();
    let post = |topic: &str, token: Option<&str>, ct: &str, body: &str| {
        let mut r = http
            .post(url(topic))
            .header("content-type", ct)
            .body(body.to_owned());
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        r.send()
    };
    let order = r#"{"order": 42, "customer": "ACME"}"#;

    // Refused, and nothing published: no credentials, the wrong one, not JSON, not a topic,
    // not an object.
    let r = post("order.created", None, "application/json", order)
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert!(r.headers().contains_key("www-authenticate"));
    let r = post("order.created", Some("guess"), "application/json", order)
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let token = Some("operator-token");
    let r = post("order.created", token, "text/plain", order)
        .await
        .unwrap();
    assert_eq!(r.status(), 415);
    for (topic, body) in [
        ("order.*", order),
        ("order..x", order),
        ("order.created", "[1]"),
    ] {
        let r = post(topic, token, "application/json", body).await.unwrap();
        assert_eq!(r.status(), 400, "{topic} {body}");
        let err: Value = r.json().await.unwrap();
        assert_eq!(err["error"]["status"], "INVALID_ARGUMENT", "{err}");
    }

    let r = post("order.created", token, "application/json", order)
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let published: Value = r.json().await.unwrap();
    assert_eq!(published["topic"], "order.created");
    assert_eq!(
        published["reached"], 1,
        "billing's subscription: {published}"
    );
    let id = published["id"].as_str().unwrap().to_owned();

    let reply: BusEvent = tokio::time::timeout(Duration::from_secs(20), drafted.next())
        .await
        .expect("the mailer's answer is published")
        .unwrap();
    assert_eq!(reply.topic, "mail.drafted");
    assert_eq!(reply.payload["agent"], "mailer");
    assert_eq!(reply.payload["event"]["topic"], "invoice.drafted");
    assert_ne!(
        reply.payload["event"]["id"],
        id.as_str(),
        "billing's own event"
    );
    let text = reply.payload["text"].as_str().unwrap();
    assert!(text.starts_with("Drafted a mail"), "{text}");
    // Nothing else: the mailer's attempt to publish went nowhere.
    let more = tokio::time::timeout(Duration::from_millis(500), drafted.next()).await;
    assert!(more.is_err(), "one reply only: {more:?}");

    // The audit trail: the refused publishes, the accepted one, and each agent's handling
    // under its event's id.
    let log = agentry::governance::AuditLog::open(&d.join("audit.db")).unwrap();
    log.verify().unwrap();
    let records = log.records(1, 1000).unwrap();
    let of = |kind: &str, decision: &str| -> Vec<_> {
        records
            .iter()
            .filter(|r| r.event.kind == kind && r.event.decision.as_deref() == Some(decision))
            .map(|r| &r.event)
            .collect()
    };
    assert_eq!(of("publish", "deny").len(), 2, "{records:#?}");
    let accepted = of("publish", "ok");
    assert_eq!(accepted.len(), 1, "{records:#?}");
    assert_eq!(accepted[0].correlation_id.as_deref(), Some(id.as_str()));
    assert!(
        accepted[0].actor.starts_with("bearer:"),
        "{:?}",
        accepted[0]
    );
    let handled: Vec<(&str, &str)> = of("event", "ok")
        .iter()
        .map(|e| (e.agent.as_deref().unwrap_or_default(), e.actor.as_str()))
        .collect();
    assert_eq!(
        handled,
        [
            ("billing", "event:order.created"),
            ("mailer", "event:invoice.drafted")
        ],
        "{records:#?}"
    );
    // Billing's tool call is on record under the order event's id.
    let call = records
        .iter()
        .find(|r| r.event.kind == "tool" && r.event.skill.as_deref() == Some("publish_event"))
        .expect("the publish_event call is audited");
    assert_eq!(
        call.event.correlation_id.as_deref(),
        Some(id.as_str()),
        "{call:#?}"
    );
    drop(log);
}

/// What cannot work is refused when the config is read: a subscriber nobody serves, a loop
/// of replies, a trigger not for the agent, a topic that is not one, an agent where events
/// are posted, agent topics that are not patterns.
#[tokio::test]
async fn subscriptions_that_cannot_work_are_refused() {
    let d = dir("refused");
    let echo = transcript(&d, "echo", &[("", json!("ok"))]);
    let base = format!(
        r#"
        [server]
        store = "memory"
        [[triggers]]
        id = "billing-only"
        agents = ["billing"]
        {agent}
        "#,
        agent = scripted_agent("echo", &echo, ""),
    );
    let cases = [
        (
            "[[events.subscribe]]\ntopic = \"a.b\"\nagent = \"nobody\"",
            "no configured agent",
        ),
        (
            "[[events.subscribe]]\ntopic = \"a.*\"\nagent = \"echo\"\nreply_topic = \"a.again\"",
            "loop",
        ),
        (
            "[[events.subscribe]]\ntopic = \"a.b\"\nagent = \"echo\"\ntrigger = \"billing-only\"",
            "does not apply to agent `echo`",
        ),
        (
            "[[events.subscribe]]\ntopic = \"a b\"\nagent = \"echo\"",
            "not a topic pattern",
        ),
        ("agent_topics = [\"mail.>.x\"]", "agent_topics"),
        (
            "[[events.subscribe]]\ntopic = \"a.b\"\nagent = \"echo\"\n[[events.subscribe]]\ntopic = \"a.b\"\nagent = \"echo\"",
            "subscribed twice",
        ),
    ];
    for (events, expected) in cases {
        let config: Config = toml::from_str(&format!("{base}\n[events]\n{events}")).unwrap();
        let err = match agentry::Service::build(config).await {
            Ok(_) => panic!("served: {events}"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains(expected), "{events}: {err}");
    }
    let at_events = base.replace("path = \"/echo\"", "path = \"/events\"");
    let config: Config = toml::from_str(&format!("{at_events}\n[events]\n")).unwrap();
    let err = agentry::Service::build(config).await.err().unwrap();
    assert!(err.to_string().contains("/events"), "{err}");
}

/// Two replicas on NATS JetStream (and PostgreSQL, which `bus` needs) subscribe one agent to
/// one topic: every event published through either is handled once, by one of them, and
/// its answer published. Needs NATS and PostgreSQL; the test command requires them.
#[cfg(all(feature = "nats", feature = "postgres"))]
#[tokio::test]
async fn replicas_share_a_subscription_on_nats() {
    let nats =
        std::env::var("AGENTRY_TEST_NATS").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    let pg = std::env::var("AGENTRY_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    if let Err(e) = agentry::nats::NatsEvents::connect(&nats).await {
        agentry_testkit::missing::<()>(
            agentry_testkit::Peer::Nats,
            format!("no NATS at {nats} ({e})"),
        );
        return;
    }
    if let Err(e) = agentry::postgres::Database::connect(&pg).await {
        agentry_testkit::missing::<()>(
            agentry_testkit::Peer::Postgres,
            format!("no PostgreSQL at {pg} ({e})"),
        );
        return;
    }
    let d = dir("nats");
    let ns = format!("t{}", agentry::a2a::new_id().replace('-', ""));
    const EVENTS: usize = 12;
    let replica = |name: &str| {
        let handled: Vec<(&str, Value)> = (0..EVENTS)
            .map(|_| ("order.created", json!(format!("Handled by {name}."))))
            .collect();
        let t = transcript(&d, name, &handled);
        let config: Config = toml::from_str(&format!(
            r#"
            [server]
            store = "{pg}"
            bus = "{nats}"
            [events]
            namespace = "{ns}"
            [[events.subscribe]]
            topic = "order.*"
            agent = "billing"
            reply_topic = "billing.done"
            [[agents]]
            path = "/billing"
            db = "events-{ns}"
            [agents.agent]
            name = "billing"
            [agents.agent.model]
            provider = "scripted"
            transcript = "{t}"
            "#
        ))
        .unwrap();
        config
    };
    let a = agentry::Service::build(replica("a")).await.unwrap();
    let b = agentry::Service::build(replica("b")).await.unwrap();
    let (bus_a, bus_b) = (a.events.clone().unwrap(), b.events.clone().unwrap());
    // The answers, kept for the test's own durable subscriber from now on.
    bus_a.prepare("watcher", "billing.done").await.unwrap();
    let mut done = bus_a.consume("watcher", "billing.done");
    // The routers hold the subscriptions.
    let (_ra, _rb) = (a.router, b.router);
    // Each replica made its subscription's consumer before it was built: nothing published
    // from now on is missed.
    let mut ids = Vec::new();
    for n in 0..EVENTS {
        let bus = if n % 2 == 0 { &bus_a } else { &bus_b };
        let mut payload = serde_json::Map::new();
        payload.insert("n".into(), json!(n));
        let p = bus.publish("order.created", payload).await.unwrap();
        assert_eq!(p.reached, None, "JetStream keeps it for the subscribers");
        ids.push(p.id);
    }
    let mut answered = Vec::new();
    let mut by = std::collections::BTreeMap::<String, usize>::new();
    while answered.len() < EVENTS {
        let delivery = tokio::time::timeout(Duration::from_secs(30), done.next())
            .await
            .unwrap_or_else(|_| panic!("answers so far: {answered:?}"))
            .unwrap();
        let ev = delivery.item.clone();
        delivery.ack().await;
        answered.push(ev.payload["event"]["id"].as_str().unwrap().to_owned());
        *by.entry(ev.payload["text"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    let more = tokio::time::timeout(Duration::from_secs(2), done.next()).await;
    assert!(more.is_err(), "an event was handled twice: {more:?}");
    answered.sort();
    ids.sort();
    assert_eq!(answered, ids, "each event answered once");
    println!("handled: {by:?}");
}

/// With verified tokens, publishing takes a token for the endpoint (audience
/// `<public URL>/events`) holding `[events] publish_scopes`: a token for an agent is 401, one
/// without the scope 403 `insufficient_scope`.
#[tokio::test]
async fn publishing_with_tokens_needs_the_publish_scope() {
    use agentry::governance::{Grant, TokenIssuer};
    let d = dir("jwt");
    let echo = transcript(&d, "echo", &[("", json!("ok"))]);
    let idp = TokenIssuer::generate("https://idp.test").unwrap();
    std::fs::write(d.join("jwks.json"), idp.jwks().to_string()).unwrap();
    let config: Config = toml::from_str(&format!(
        r#"
        [server]
        store = "memory"
        [server.jwt]
        jwks_file = "{jwks}"
        issuer = "https://idp.test"
        [events]
        {agent}
        "#,
        jwks = d.join("jwks.json").display(),
        agent = scripted_agent("echo", &echo, ""),
    ))
    .unwrap();
    let base = crate::serve(config).await;
    let token = |aud: String, scopes: &[&str]| {
        idp.issue(&Grant {
            subject: "publisher".into(),
            audience: aud,
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
            lifetime: Duration::from_secs(60),
            act: None,
        })
        .unwrap()
    };
    let endpoint = format!("{base}/events");
    let cases = [
        (token(format!("{base}/echo"), &["events.publish"]), 401),
        (token(endpoint.clone(), &["echo.use"]), 403),
        (token(endpoint.clone(), &["events.publish"]), 202),
    ];
    let http = reqwest::Client::new();
    for (t, expected) in cases {
        let r = http
            .post(format!("{endpoint}/order.created"))
            .bearer_auth(t)
            .json(&json!({"order": 1}))
            .send()
            .await
            .unwrap();
        let challenge = r
            .headers()
            .get("www-authenticate")
            .map(|v| v.to_str().unwrap().to_owned());
        assert_eq!(r.status(), expected, "{challenge:?}");
        if expected == 403 {
            let c = challenge.unwrap();
            assert!(
                c.contains("insufficient_scope") && c.contains("events.publish"),
                "{c}"
            );
        }
    }
}

/// Answers after a while, counting how many requests it works on at once.
struct Slow {
    active: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    most: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl agentry::a2a::server::AgentExecutor for Slow {
    async fn execute(
        &self,
        ctx: agentry::a2a::server::RequestContext,
        events: agentry::a2a::server::EventSink,
    ) -> Result<(), agentry::a2a::server::ExecutorError> {
        use std::sync::atomic::Ordering;
        let now = self.active.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(400)).await;
        self.active.fetch_sub(1, Ordering::SeqCst);
        let said = format!("done: {}", ctx.message.text_content());
        events.complete(Some(events.agent_text(said))).await
    }
}

/// A subscription with `concurrency = 4` hands its agent (here a remote A2A agent, through
/// the registry) four events at once; `concurrency = 0` is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_hands_its_agent_several_events_at_once() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let (active, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let card = agentry::a2a::model::AgentCard::new("slow", "Answers after a while", &url);
    let svc = agentry::a2a::server::AgentService::new(
        card,
        Slow {
            active: active.clone(),
            most: most.clone(),
        },
        Arc::new(agentry::a2a::store::MemoryStore::default()),
    );
    tokio::spawn(async move {
        agentry::a2a::server::A2aServer::new()
            .agent("/", svc)
            .serve(listener, std::future::pending())
            .await
    });
    let config = |concurrency: usize| -> Config {
        toml::from_str(&format!(
            r#"
            [server]
            store = "memory"
            [[remotes]]
            name = "slow"
            url = "{url}"
            [events]
            [[events.subscribe]]
            topic = "job.*"
            agent = "slow"
            reply_topic = "done.job"
            concurrency = {concurrency}
            "#
        ))
        .unwrap()
    };
    let err = agentry::Service::build(config(0)).await.err().unwrap();
    assert!(err.to_string().contains("concurrency"), "{err}");
    let service = agentry::Service::build(config(4)).await.unwrap();
    let bus = service.events.clone().unwrap();
    let mut done = bus.subscribe("done.>");
    for n in 0..4 {
        let mut payload = serde_json::Map::new();
        payload.insert("n".into(), json!(n));
        bus.publish("job.new", payload).await.unwrap();
    }
    for _ in 0..4 {
        let ev = tokio::time::timeout(Duration::from_secs(20), done.next())
            .await
            .expect("every job answered")
            .unwrap();
        assert!(
            ev.payload["text"].as_str().unwrap().starts_with("done:"),
            "{ev:?}"
        );
    }
    assert_eq!(most.load(Ordering::SeqCst), 4, "four at once");
    drop(service);
}
