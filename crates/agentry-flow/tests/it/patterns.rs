//! The communication patterns of the product description, each over real A2A where it applies:
//! request-response, fire-and-forget, publish-subscribe, request with callback, and workflow
//! coordination (the order-fulfilment example run by the orchestrator agent).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentry_a2a::client::{A2aClient, ClientConfig};
use agentry_a2a::model::*;
use agentry_a2a::server::{A2aServer, AgentService, ServerConfig};
use agentry_a2a::store::MemoryStore;
use agentry_core::handle::{AgentHandle, Ask, Reply, UpdateStream, single};
use agentry_flow::a2a::Orchestrator;
use agentry_flow::bus::{EventBus, InProcessBus, subscribe_agent};
use agentry_flow::*;
use futures_util::StreamExt;
use serde_json::{Value, json};

/// What a service was asked: the text and the data part.
type Asked = (String, Option<serde_json::Map<String, Value>>);

/// An agent that answers with a fixed JSON object and records what it was asked.
struct Service {
    name: &'static str,
    answer: Value,
    asked: Mutex<Vec<Asked>>,
}

impl AgentHandle for Service {
    fn name(&self) -> String {
        self.name.into()
    }
    fn description(&self) -> String {
        format!("{} service", self.name)
    }
    fn stream(&self, ask: Ask) -> UpdateStream<'_> {
        self.asked
            .lock()
            .unwrap()
            .push((ask.text.clone(), ask.data.clone()));
        let text = self.answer.to_string();
        single(async move {
            Ok(Reply {
                text,
                ..Default::default()
            })
        })
    }
}

fn service(name: &'static str, answer: Value) -> Arc<Service> {
    Arc::new(Service {
        name,
        answer,
        asked: Mutex::new(Vec::new()),
    })
}

const ORDER_FLOW: &str = r#"
name: fulfil-order
description: Reserve stock, take payment, ship.
inputs: [order]
steps:
  - id: inventory
    agent: inventory
    input: "Reserve ${input.order.items}"
  - id: payment
    agent: payment
    depends_on: [inventory]
    input: "Charge ${input.order.amount} for reservation ${steps.inventory.output.reservation}"
  - id: shipping
    agent: shipping
    depends_on: [payment]
    input: "Ship reservation ${steps.inventory.output.reservation}, receipt ${steps.payment.output.receipt}"
output: "${steps.shipping.output.tracking}"
"#;

struct Setup {
    url: String,
    shipping: Arc<Service>,
}

async fn orchestrator(config: ServerConfig) -> Setup {
    let inventory = service("inventory", json!({"reservation": "R-1"}));
    let payment = service("payment", json!({"receipt": "P-2"}));
    let shipping = service("shipping", json!({"tracking": "T-3"}));
    let mut reg = AgentRegistry::new(Mode::Direct);
    reg.add_local(inventory)
        .add_local(payment)
        .add_local(shipping.clone());
    let engine = Arc::new(Engine::new(Arc::new(reg)));
    let wf: Workflow = serde_yaml::from_str(ORDER_FLOW).unwrap();
    let orch = Orchestrator::new("orchestrator", engine, vec![wf]);
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", l.local_addr().unwrap());
    let svc = AgentService::new(orch.card(&url), orch, Arc::new(MemoryStore::default()));
    tokio::spawn(
        A2aServer::new()
            .config(config)
            .agent("/", svc)
            .serve(l, std::future::pending()),
    );
    Setup { url, shipping }
}

fn order_message() -> Message {
    let mut data = serde_json::Map::new();
    data.insert("workflow".into(), json!("fulfil-order"));
    data.insert(
        "input".into(),
        json!({"order": {"items": ["book"], "amount": 12}}),
    );
    Message::new(
        Role::User,
        vec![Part::text("fulfil this order"), Part::data(data)],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_response_and_workflow_coordination() {
    let s = orchestrator(ServerConfig::default()).await;
    let client = A2aClient::discover(&s.url, ClientConfig::default())
        .await
        .unwrap();
    assert_eq!(
        client.card().unwrap().skills[0].id,
        "fulfil-order",
        "the card's skills are the workflows"
    );
    // Request-response: a blocking send returns the finished workflow.
    let SendMessageResult::Task(t) = client
        .send_message(MessageSendParams::new(order_message()))
        .await
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(t.state(), TaskState::Completed);
    assert_eq!(t.status.message.as_ref().unwrap().text_content(), "T-3");
    let asked = s.shipping.asked.lock().unwrap()[0].0.clone();
    assert_eq!(asked, "Ship reservation R-1, receipt P-2");
    // Workflow coordination seen by a streaming client: each step as a status update.
    let events: Vec<StreamEvent> = client
        .stream_message(MessageSendParams::new(order_message()))
        .map(Result::unwrap)
        .collect()
        .await;
    let progress: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::StatusUpdate(u) if u.status.state == TaskState::Working => {
                u.status.message.as_ref().map(Message::text_content)
            }
            _ => None,
        })
        .filter(|t| t.contains("done"))
        .collect();
    assert_eq!(progress.len(), 3, "{progress:?}");
    assert!(progress[0].starts_with("step inventory done"));
    assert!(progress[2].starts_with("step shipping done"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fire_and_forget_then_request_with_callback() {
    // A webhook receiver for the callback.
    let got: Arc<Mutex<Vec<Value>>> = Default::default();
    let g = got.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |axum::Json(v): axum::Json<Value>| {
            let g = g.clone();
            async move {
                g.lock().unwrap().push(v);
                "ok"
            }
        }),
    );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!("http://{}/hook", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });

    let mut config = ServerConfig::default();
    config.push.allow_private = true;
    let s = orchestrator(config).await;
    let client = A2aClient::discover(&s.url, ClientConfig::default())
        .await
        .unwrap();
    let mut p = MessageSendParams::new(order_message());
    p.configuration = Some(MessageSendConfiguration {
        blocking: Some(false),
        push_notification_config: Some(PushNotificationConfig {
            id: None,
            url: hook,
            token: Some("cb".into()),
            authentication: None,
            body_version: None,
        }),
        ..Default::default()
    });
    // Fire and forget: the send returns before the workflow ends.
    let SendMessageResult::Task(t) = client.send_message(p).await.unwrap() else {
        panic!()
    };
    assert!(!t.state().is_terminal());
    // The callback arrives when it does; the client spoke A2A 1.0, so the body is a 1.0
    // StreamResponse.
    assert_eq!(
        client.version(),
        agentry_a2a::version::ProtocolVersion::V1_0
    );
    let mut done = false;
    for _ in 0..200 {
        if got.lock().unwrap().iter().any(|v| {
            v["task"]["status"]["state"] == "TASK_STATE_COMPLETED" && v["task"]["id"] == json!(t.id)
        }) {
            done = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(done, "the webhook got the completed task");
    assert_eq!(
        client.get_task(&t.id, None).await.unwrap().state(),
        TaskState::Completed
    );
}

#[tokio::test]
async fn publish_subscribe_reaches_every_subscribed_agent() {
    let bus = InProcessBus::default();
    let billing = service("billing", json!({"ok": true}));
    let audit = service("audit", json!({"ok": true}));
    let shipping = service("shipping", json!({"ok": true}));
    let h1 = subscribe_agent(&bus, "order.created", billing.clone());
    let h2 = subscribe_agent(&bus, "order.*", audit.clone());
    let h3 = subscribe_agent(&bus, "order.paid", shipping.clone());
    tokio::task::yield_now().await;
    let mut payload = serde_json::Map::new();
    payload.insert("order_id".into(), json!("O-9"));
    assert_eq!(
        bus.publish("order.created", payload).await.unwrap().reached,
        Some(2),
        "the two subscriptions whose patterns match (not order.paid's)"
    );
    for _ in 0..100 {
        if !billing.asked.lock().unwrap().is_empty() && !audit.asked.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (text, data) = billing.asked.lock().unwrap()[0].clone();
    assert_eq!(text, "Event order.created");
    assert_eq!(data.unwrap()["order_id"], "O-9");
    assert_eq!(audit.asked.lock().unwrap().len(), 1);
    assert!(
        shipping.asked.lock().unwrap().is_empty(),
        "order.paid subscribers are not asked"
    );
    for h in [h1, h2, h3] {
        h.abort();
    }
}
