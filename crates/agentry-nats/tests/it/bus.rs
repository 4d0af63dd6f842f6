//! Publish-subscribe between agents on JetStream: each test in a namespace of its own (its own
//! stream), deleted at the end.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentry_core::a2a::{AgentHandle, Ask};
use agentry_core::agent::AgentError;
use agentry_core::handle::{Reply, UpdateStream, single};
use agentry_flow::bus::{BusError, EventBus, subscribe_agent};
use agentry_nats::{BusOptions, NatsBus};
use futures_util::StreamExt;
use serde_json::{Map, Value, json};

use crate::url;

/// A bus in a fresh namespace, deleted when dropped.
struct Ns {
    name: String,
}

impl Ns {
    fn new() -> Ns {
        Ns {
            name: format!("t{}", agentry_a2a::new_id().replace('-', "")),
        }
    }

    async fn bus(&self, options: BusOptions) -> Option<NatsBus> {
        match NatsBus::connect_with(&url(), options.namespace(&self.name)).await {
            Ok(b) => Some(b),
            Err(e) => agentry_testkit::missing(
                agentry_testkit::Peer::Nats,
                format!("no NATS with JetStream at {} ({e})", url()),
            ),
        }
    }

    /// Deletes the namespace's stream (and its consumers).
    async fn delete(self) {
        let client = async_nats::connect(url()).await.unwrap();
        let js = async_nats::jetstream::new(client);
        js.delete_stream(format!("AGENTRY_EVENTS_{}", self.name))
            .await
            .unwrap();
    }
}

/// An agent that records the `n` of each event it is asked, answering after `delay`; it fails
/// the first time it sees each `n` when `fail_first`.
struct Counter {
    name: &'static str,
    delay: Duration,
    fail_first: bool,
    seen: Mutex<Vec<u64>>,
}

impl Counter {
    fn new(name: &'static str) -> Arc<Counter> {
        Arc::new(Counter {
            name,
            delay: Duration::ZERO,
            fail_first: false,
            seen: Mutex::new(Vec::new()),
        })
    }

    fn seen(&self) -> Vec<u64> {
        self.seen.lock().unwrap().clone()
    }
}

impl AgentHandle for Counter {
    fn name(&self) -> String {
        self.name.into()
    }

    fn description(&self) -> String {
        "records the events it is asked".into()
    }

    fn stream(&self, ask: Ask) -> UpdateStream<'_> {
        single(async move {
            let n = ask.data.as_ref().and_then(|d| d["n"].as_u64()).unwrap();
            let first = {
                let mut seen = self.seen.lock().unwrap();
                let first = !seen.contains(&n);
                seen.push(n);
                first
            };
            tokio::time::sleep(self.delay).await;
            if self.fail_first && first {
                return Err(AgentError::failed("not this time"));
            }
            Ok(Reply {
                text: format!("handled {n} ({})", ask.text),
                ..Default::default()
            })
        })
    }
}

fn payload(n: u64) -> Map<String, Value> {
    let Value::Object(m) = json!({ "n": n }) else {
        unreachable!()
    };
    m
}

/// Waits (at most 20 s) until `done` holds.
async fn until(what: &str, done: impl Fn() -> bool) {
    for _ in 0..2000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting until {what}");
}

fn counts(seen: impl IntoIterator<Item = u64>) -> HashMap<u64, usize> {
    let mut out = HashMap::new();
    for n in seen {
        *out.entry(n).or_default() += 1;
    }
    out
}

/// Two replicas of a subscriber share its events: each is handled once, by one of them;
/// another subscriber gets every event its pattern matches; a topic nobody subscribed to is
/// stored and reaches no one; a topic that is not a subject is refused.
#[tokio::test]
async fn replicas_share_a_subscribers_events_and_each_subscriber_gets_them() {
    let ns = Ns::new();
    let Some(a) = ns.bus(BusOptions::default()).await else {
        return;
    };
    let b = ns.bus(BusOptions::default()).await.unwrap();
    // The subscriptions exist before anything is published.
    a.prepare("billing", "order.created").await.unwrap();
    a.prepare("audit", "order.*").await.unwrap();
    let (billing_a, billing_b, audit) = (
        Counter::new("billing"),
        Counter::new("billing"),
        Counter::new("audit"),
    );
    let handles = [
        subscribe_agent(&a, "order.created", billing_a.clone()),
        subscribe_agent(&b, "order.created", billing_b.clone()),
        subscribe_agent(&b, "order.*", audit.clone()),
    ];
    for n in 0..30 {
        let stored = a.publish("order.created", payload(n)).await.unwrap();
        assert_eq!(stored.reached, None, "kept for subscribers to come");
    }
    b.publish("order.paid", payload(100)).await.unwrap();
    b.publish("invoice.sent", payload(200)).await.unwrap();
    assert!(matches!(
        a.publish("order created", payload(300)).await,
        Err(BusError::Topic(_))
    ));
    assert!(matches!(
        a.publish("order.*", payload(301)).await,
        Err(BusError::Topic(_))
    ));
    until("every event is handled", || {
        billing_a.seen().len() + billing_b.seen().len() >= 30 && audit.seen().len() >= 31
    })
    .await;
    // A moment more: nothing is handled twice.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let billing = counts(billing_a.seen().into_iter().chain(billing_b.seen()));
    assert_eq!(billing.len(), 30, "{billing:?}");
    assert!(billing.values().all(|&c| c == 1), "{billing:?}");
    let audited = counts(audit.seen());
    assert_eq!(audited.len(), 31, "order.* matched order.paid too");
    assert!(audited.contains_key(&100) && !audited.contains_key(&200));
    assert!(audited.values().all(|&c| c == 1), "{audited:?}");
    for h in handles {
        h.abort();
    }
    ns.delete().await;
}

/// Events published while no replica of a subscriber runs wait for it; an event the agent
/// fails on is delivered again, and once handled, not again.
#[tokio::test]
async fn events_wait_for_their_subscriber_and_failed_ones_come_again() {
    let ns = Ns::new();
    let options = BusOptions::default().retry_delay(Duration::from_millis(100));
    let Some(publisher) = ns.bus(options.clone()).await else {
        return;
    };
    publisher.prepare("mailer", "mail.>").await.unwrap();
    // Nobody consumes yet.
    for n in 0..5 {
        publisher
            .publish("mail.queued.eu", payload(n))
            .await
            .unwrap();
    }
    let mailer = Arc::new(Counter {
        name: "mailer",
        delay: Duration::ZERO,
        fail_first: true,
        seen: Mutex::new(Vec::new()),
    });
    let later = ns.bus(options).await.unwrap();
    let h = subscribe_agent(&later, "mail.>", mailer.clone());
    until("every event is handled", || mailer.seen().len() >= 10).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let seen = counts(mailer.seen());
    assert_eq!(seen.len(), 5, "{seen:?}");
    assert!(
        seen.values().all(|&c| c == 2),
        "failed once, handled the second time, then settled: {seen:?}"
    );
    h.abort();
    ns.delete().await;
}

/// A member that dies holding an event (its delivery dropped unsettled) has it delivered
/// again to another; a member that works longer than `ack_wait` keeps its event (nobody else
/// gets it meanwhile).
#[tokio::test]
async fn an_event_held_by_a_dead_member_goes_to_another_and_a_slow_one_keeps_its_own() {
    let ns = Ns::new();
    let options = BusOptions::default().ack_wait(Duration::from_secs(1));
    let Some(a) = ns.bus(options.clone()).await else {
        return;
    };
    let b = ns.bus(options.clone()).await.unwrap();
    a.prepare("worker", "job.*").await.unwrap();
    a.publish("job.one", payload(1)).await.unwrap();
    let mut dying = a.consume("worker", "job.*");
    let held = dying.next().await.unwrap();
    assert_eq!(held.item.payload["n"], 1);
    drop(held);
    drop(dying);
    let mut other = b.consume("worker", "job.*");
    let again = tokio::time::timeout(Duration::from_secs(10), other.next())
        .await
        .expect("delivered again after ack_wait")
        .unwrap();
    assert_eq!(again.item.payload["n"], 1);
    again.ack().await;
    drop(other);

    // Slow: 2.5 s of work with a 1 s ack_wait, another member waiting for events.
    let slow = Arc::new(Counter {
        name: "worker",
        delay: Duration::from_millis(2500),
        fail_first: false,
        seen: Mutex::new(Vec::new()),
    });
    let idle = Counter::new("worker");
    let h1 = subscribe_agent(&a, "job.*", slow.clone());
    a.publish("job.two", payload(2)).await.unwrap();
    until("the slow member takes it", || !slow.seen().is_empty()).await;
    let h2 = subscribe_agent(&b, "job.*", idle.clone());
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert_eq!(slow.seen(), vec![2]);
    assert!(idle.seen().is_empty(), "kept by the member handling it");
    // Its acknowledgement was final: nothing comes again.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(slow.seen(), vec![2]);
    assert!(idle.seen().is_empty());
    for h in [h1, h2] {
        h.abort();
    }
    ns.delete().await;
}

/// `subscribe` (not shared, not kept): every subscription gets each event published while it
/// is there.
#[tokio::test]
async fn plain_subscriptions_each_get_every_event() {
    let ns = Ns::new();
    let Some(bus) = ns.bus(BusOptions::default()).await else {
        return;
    };
    let mut one = bus.subscribe("news.*");
    let mut two = bus.subscribe("news.>");
    // The subscriptions are made when first polled.
    let _ = tokio::time::timeout(Duration::from_millis(200), one.next()).await;
    let _ = tokio::time::timeout(Duration::from_millis(200), two.next()).await;
    bus.publish("news.eu", payload(7)).await.unwrap();
    for s in [&mut one, &mut two] {
        let ev = tokio::time::timeout(Duration::from_secs(5), s.next())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (ev.topic.as_str(), &ev.payload["n"]),
            ("news.eu", &json!(7))
        );
    }
    ns.delete().await;
}
