//! Two replicas of one agent on one PostgreSQL database (agentry-postgres): a task whose turn
//! runs on one is read through the other as it is (not taken for an orphan of a dead
//! process), and what needs the running turn (a message, cancel, a subscription) is refused
//! there with a clear error until the turn ends. Needs PostgreSQL (127.0.0.1:5432, database
//! `test`, or `$AGENTRY_TEST_POSTGRES`); the test command requires it.

use std::sync::Arc;

use agentry_a2a::A2aError;
use agentry_a2a::client::{A2aClient, ClientConfig};
use agentry_a2a::model::*;

use crate::common;

fn url() -> String {
    std::env::var("AGENTRY_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

fn refused_as_elsewhere<T: std::fmt::Debug>(r: Result<T, A2aError>) {
    match r {
        Err(A2aError::Rpc(e)) => assert!(e.message.contains("another replica"), "{e:?}"),
        other => panic!("expected the other-replica error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_running_on_one_replica_is_respected_by_the_other() {
    let url = url();
    let (a, b) = match tokio::join!(
        agentry_postgres::Database::connect(&url),
        agentry_postgres::Database::connect(&url)
    ) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            agentry_testkit::missing::<()>(
                agentry_testkit::Peer::Postgres,
                format!("no PostgreSQL at {url} ({e})"),
            );
            return;
        }
    };
    let ns = format!("conformance-{}", agentry_a2a::new_id());
    let sa = common::conformance_server(Arc::new(a.task_store(&ns))).await;
    let sb = common::conformance_server(Arc::new(b.task_store(&ns))).await;
    let ca = A2aClient::discover(&sa.base, ClientConfig::default())
        .await
        .unwrap();
    let cb = A2aClient::discover(&sb.base, ClientConfig::default())
        .await
        .unwrap();

    // A long turn (10 s of progress) on replica A, not waited for.
    let mut m = Message::text(Role::User, "work for a while");
    m.message_id = format!("test-resubscribe-message-id-{}", agentry_a2a::new_id());
    let mut p = MessageSendParams::new(m);
    p.configuration = Some(MessageSendConfiguration {
        blocking: Some(false),
        ..Default::default()
    });
    let SendMessageResult::Task(long) = ca.send_message(p).await.unwrap() else {
        panic!("expected a task")
    };
    // The first save of a turn is queued, not awaited: wait until B can read it.
    let mut seen = None;
    for _ in 0..100 {
        if let Ok(t) = cb.get_task(&long.id, None).await {
            seen = Some(t);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let seen = seen.expect("replica B reads the task");
    // Running (submitted or working, as far as A has saved it), not recovered as an orphan.
    let running = |s: TaskState| matches!(s, TaskState::Submitted | TaskState::Working);
    assert!(running(seen.state()), "{seen:?}");
    let listed = cb
        .list_tasks(ListTasksParams {
            context_id: Some(long.context_id.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(listed.tasks.len(), 1);
    assert!(running(listed.tasks[0].state()), "{listed:?}");

    // What needs the running turn is refused on B, and changes nothing.
    let next = Message::text(Role::User, "and more").in_task(&long.id, &long.context_id);
    refused_as_elsewhere(cb.send_message(MessageSendParams::new(next)).await);
    refused_as_elsewhere(cb.cancel_task(&long.id).await);
    assert!(running(ca.get_task(&long.id, None).await.unwrap().state()));

    // A cancels its own turn; B then sees the task canceled, and released.
    assert_eq!(
        ca.cancel_task(&long.id).await.unwrap().state(),
        TaskState::Canceled
    );
    assert_eq!(
        cb.get_task(&long.id, None).await.unwrap().state(),
        TaskState::Canceled
    );
}

/// A replica dies mid-turn (its database handle dropped: nothing renews its hold) with a
/// push notification of the task not yet delivered; the other replica, which nobody asks
/// about the task, sends that notification, then takes the task over once the hold lapses
/// and recovers it (input-required, saying why), so the client's webhook hears both, in that
/// order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_replicas_task_is_taken_over_without_anyone_asking() {
    let (hook_url, seen) = common::webhook().await;
    let url = url();
    let options = agentry_postgres::Options::default().lease(std::time::Duration::from_millis(600));
    let dead = match agentry_postgres::Database::connect_with(&url, options.clone()).await {
        Ok(db) => db,
        Err(e) => {
            agentry_testkit::missing::<()>(
                agentry_testkit::Peer::Postgres,
                format!("no PostgreSQL at {url} ({e})"),
            );
            return;
        }
    };
    let ns = format!("conformance-{}", agentry_a2a::new_id());
    let mut task = Task::new(agentry_a2a::new_id(), agentry_a2a::new_id());
    task.history
        .push(Message::text(Role::User, "long job").in_task(&task.id, &task.context_id));
    task.transition(TaskStatus::now(TaskState::Working, None))
        .unwrap();
    let config = PushNotificationConfig {
        id: Some("hook".into()),
        url: hook_url,
        token: None,
        authentication: None,
        body_version: None,
    };
    let left = agentry_a2a::store::OutgoingPush {
        id: agentry_a2a::new_id(),
        task_id: task.id.clone(),
        config: config.clone(),
        body: br#"{"left": "by the replica that died"}"#.to_vec(),
    };
    {
        use agentry_a2a::store::TaskStore;
        let dead_store = dead.task_store(&ns);
        dead_store.set_push(&task.id, &config).await.unwrap();
        dead_store
            .save_with_pushes(&task, std::slice::from_ref(&left))
            .await
            .unwrap();
    }
    drop(dead);

    let live = agentry_postgres::Database::connect_with(&url, options)
        .await
        .unwrap();
    let store = Arc::new(live.task_store(&ns));
    let _server = common::conformance_server(store.clone()).await;
    // Read from the store itself, not through the server (a request would recover it).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let recovered = loop {
        let t = agentry_a2a::store::TaskStore::get(&*store, &task.id)
            .await
            .unwrap()
            .unwrap();
        if t.state() == TaskState::InputRequired {
            break t;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not taken over: {t:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    let said = recovered.status.message.unwrap().text_content();
    assert!(said.contains("server stopped"), "{said}");
    assert!(
        !agentry_a2a::store::TaskStore::running_elsewhere(&*store, &task.id)
            .await
            .unwrap()
    );
    // The webhook: what the dead replica owed it, then the recovery.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while seen.lock().await.len() < 2 && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let seen: Vec<serde_json::Value> = seen.lock().await.iter().map(|(_, b)| b.clone()).collect();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0]["left"], "by the replica that died", "{seen:?}");
    assert!(seen[1].to_string().contains("input-required"), "{seen:?}");
    // Delivered, then acknowledged (the acknowledgement is written behind).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !agentry_a2a::store::TaskStore::pending_pushes(&*store)
        .await
        .unwrap()
        .is_empty()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "a delivered notification is still pending"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// With task events over NATS (agentry-nats), a subscription that reaches the replica not
/// running the turn follows it there (the snapshot, the progress the other replica makes, the
/// final event), and a cancel sent to it cancels the turn where it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_or_a_cancel_on_either_replica_reaches_the_turn_over_nats() {
    use futures_util::StreamExt;
    let url = url();
    let nats =
        std::env::var("AGENTRY_TEST_NATS").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    let (a, b) = match tokio::join!(
        agentry_postgres::Database::connect(&url),
        agentry_postgres::Database::connect(&url)
    ) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            agentry_testkit::missing::<()>(
                agentry_testkit::Peer::Postgres,
                format!("no PostgreSQL at {url} ({e})"),
            );
            return;
        }
    };
    let (ea, eb) = match tokio::join!(
        agentry_nats::NatsEvents::connect(&nats),
        agentry_nats::NatsEvents::connect(&nats)
    ) {
        (Ok(a), Ok(b)) => (Arc::new(a), Arc::new(b)),
        (Err(e), _) | (_, Err(e)) => {
            agentry_testkit::missing::<()>(
                agentry_testkit::Peer::Nats,
                format!("no NATS at {nats} ({e})"),
            );
            return;
        }
    };
    let ns = format!("conformance-{}", agentry_a2a::new_id());
    let sa = common::conformance_server_with_events(Arc::new(a.task_store(&ns)), ea).await;
    let sb = common::conformance_server_with_events(Arc::new(b.task_store(&ns)), eb).await;
    let ca = A2aClient::discover(&sa.base, ClientConfig::default())
        .await
        .unwrap();
    let cb = A2aClient::discover(&sb.base, ClientConfig::default())
        .await
        .unwrap();
    let mut m = Message::text(Role::User, "work for a while");
    m.message_id = format!("test-resubscribe-message-id-{}", agentry_a2a::new_id());
    let mut p = MessageSendParams::new(m);
    p.configuration = Some(MessageSendConfiguration {
        blocking: Some(false),
        ..Default::default()
    });
    let SendMessageResult::Task(long) = ca.send_message(p).await.unwrap() else {
        panic!("expected a task")
    };
    // B subscribes (once it can read the task: A's first save is queued, not awaited).
    let mut sub = None;
    for _ in 0..100 {
        if cb.get_task(&long.id, None).await.is_ok() {
            sub = Some(Box::pin(cb.resubscribe(&long.id)));
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let mut sub = sub.expect("replica B reads the task");
    let first = sub.next().await.unwrap().unwrap();
    assert!(matches!(first, StreamEvent::Task(_)), "{first:?}");
    // Progress made on A reaches B's subscriber.
    let mut ticks = 0;
    while ticks < 2 {
        match sub.next().await.unwrap().unwrap() {
            StreamEvent::ArtifactUpdate(u) => {
                assert_eq!(u.task_id, long.id);
                ticks += 1;
            }
            StreamEvent::StatusUpdate(s) => assert!(!s.is_final, "{s:?}"),
            other => panic!("{other:?}"),
        }
    }
    // Canceled through B, which does not run it: A's turn ends, B's stream with it.
    let canceled = cb.cancel_task(&long.id).await.unwrap();
    assert_eq!(canceled.state(), TaskState::Canceled);
    assert_eq!(
        ca.get_task(&long.id, None).await.unwrap().state(),
        TaskState::Canceled
    );
    ends_with_final(&mut sub, TaskState::Canceled).await;
}

/// Reads a subscription to its end, which must be the final status update in `state`.
async fn ends_with_final(
    sub: &mut (impl futures_util::Stream<Item = Result<StreamEvent, A2aError>> + Unpin),
    state: TaskState,
) {
    use futures_util::StreamExt;
    let mut last = None;
    while let Some(ev) = sub.next().await {
        last = Some(ev.unwrap());
    }
    match last {
        Some(StreamEvent::StatusUpdate(s)) => {
            assert!(s.is_final);
            assert_eq!(s.status.state, state);
        }
        other => panic!("the stream ended without the final event: {other:?}"),
    }
}

/// A PostgreSQL database and a NATS connection per replica, or `None` (a skip recorded)
/// when either is missing.
async fn shared_services(
    n: usize,
) -> Option<Vec<(agentry_postgres::Database, Arc<agentry_nats::NatsEvents>)>> {
    let url = url();
    let nats = nats_url();
    let mut out = Vec::new();
    for _ in 0..n {
        let db = match agentry_postgres::Database::connect(&url).await {
            Ok(db) => db,
            Err(e) => {
                return agentry_testkit::missing(
                    agentry_testkit::Peer::Postgres,
                    format!("no PostgreSQL at {url} ({e})"),
                );
            }
        };
        let events = match agentry_nats::NatsEvents::connect(&nats).await {
            Ok(ev) => Arc::new(ev),
            Err(e) => {
                return agentry_testkit::missing(
                    agentry_testkit::Peer::Nats,
                    format!("no NATS at {nats} ({e})"),
                );
            }
        };
        out.push((db, events));
    }
    Some(out)
}

fn nats_url() -> String {
    std::env::var("AGENTRY_TEST_NATS").unwrap_or_else(|_| "nats://127.0.0.1:4222".into())
}

/// Answers with the replica it runs on after `delay` (or at a cancel); counts its turns.
struct Labeled {
    label: &'static str,
    turns: Arc<std::sync::atomic::AtomicUsize>,
    delay: std::time::Duration,
}

impl agentry_a2a::server::AgentExecutor for Labeled {
    async fn execute(
        &self,
        ctx: agentry_a2a::server::RequestContext,
        events: agentry_a2a::server::EventSink,
    ) -> Result<(), agentry_a2a::server::ExecutorError> {
        self.turns.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        events.working(None).await?;
        tokio::select! {
            _ = tokio::time::sleep(self.delay) => {}
            _ = ctx.canceled() => return Ok(()),
        }
        let said = format!("{} ran on {}", ctx.message.text_content(), self.label);
        events.complete(Some(events.agent_text(said))).await
    }
}

/// One replica serving [`Labeled`] on the shared store and events, with a queue of turns in
/// the NATS namespace `ns` and `workers` workers.
async fn queued_replica(
    (db, events): &(agentry_postgres::Database, Arc<agentry_nats::NatsEvents>),
    ns: &str,
    label: &'static str,
    workers: usize,
    delay: std::time::Duration,
) -> (common::TestServer, Arc<std::sync::atomic::AtomicUsize>) {
    let queue =
        agentry_nats::NatsQueue::connect(&nats_url(), Some(ns), std::time::Duration::from_secs(2))
            .await
            .unwrap();
    let turns = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (listener, base) = common::bind().await;
    let svc = agentry_a2a::server::AgentService::new(
        agentry::agents::Echo::card(&base),
        Labeled {
            label,
            turns: turns.clone(),
            delay,
        },
        Arc::new(db.task_store(ns)),
    )
    .with_events(events.clone())
    .with_queue(Arc::new(queue), workers);
    let mut config = common::loopback_push();
    config.metrics = true;
    (common::serve_on(listener, svc, config).await, turns)
}

/// A worker replica (one worker, turns that never end by themselves) in a runtime of its own
/// with a 1 s hold, to be killed with its runtime (`shutdown_background`): its connections
/// drop, nothing renews its hold or tells the queue it still works.
fn dying_worker(
    ns: &str,
) -> (
    tokio::runtime::Runtime,
    common::TestServer,
    Arc<std::sync::atomic::AtomicUsize>,
) {
    let (ns, url) = (ns.to_owned(), url());
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let (server, turns) = rt.block_on(async {
            let options =
                agentry_postgres::Options::default().lease(std::time::Duration::from_secs(1));
            let db = agentry_postgres::Database::connect_with(&url, options)
                .await
                .unwrap();
            let events = Arc::new(
                agentry_nats::NatsEvents::connect(&nats_url())
                    .await
                    .unwrap(),
            );
            let forever = std::time::Duration::from_secs(3600);
            queued_replica(&(db, events), &ns, "dying", 1, forever).await
        });
        (rt, server, turns)
    })
    .join()
    .unwrap()
}

/// A counter of the agent's on a replica's `/metrics`.
async fn counter(server: &common::TestServer, name: &str) -> u64 {
    let text = reqwest::get(format!("{}metrics", server.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find(|l| l.starts_with(&format!("{name}{{")))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

fn not_waiting(text: &str) -> MessageSendParams {
    let mut p = MessageSendParams::new(Message::text(Role::User, text));
    p.configuration = Some(MessageSendConfiguration {
        blocking: Some(false),
        ..Default::default()
    });
    p
}

async fn answered(client: &A2aClient, id: &str) -> Task {
    for _ in 0..500 {
        let t = client.get_task(id, None).await.unwrap();
        if t.state().is_terminal() {
            return t;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("task {id} was not answered");
}

/// How long [`Labeled`] works on a quick turn.
const QUICK: std::time::Duration = std::time::Duration::from_millis(50);

/// Two replicas' services, a fresh namespace, and a front replica (no workers) in it with
/// its turn counter and a client; `None` when PostgreSQL or NATS is missing.
async fn queue_front() -> Option<(
    Vec<(agentry_postgres::Database, Arc<agentry_nats::NatsEvents>)>,
    String,
    common::TestServer,
    Arc<std::sync::atomic::AtomicUsize>,
    A2aClient,
)> {
    let services = shared_services(2).await?;
    let ns = format!("queue-{}", agentry_a2a::new_id());
    let (front, turns) = queued_replica(&services[0], &ns, "front", 0, QUICK).await;
    let client = A2aClient::discover(&front.base, ClientConfig::default())
        .await
        .unwrap();
    Some((services, ns, front, turns, client))
}

/// Pull workers: a replica with no workers queues new tasks sent without waiting, and a
/// worker replica runs them (the answer says where); a blocking send runs where it lands; a
/// stream opened on the front follows the worker's turn; a task canceled while queued is
/// settled by the worker without running, and a message for a queued task is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_queued_by_a_front_replica_run_on_a_worker() {
    use futures_util::StreamExt;
    let Some((services, ns, front, front_turns, client)) = queue_front().await else {
        return;
    };

    // Queued while no worker exists: submitted, and canceled there.
    let SendMessageResult::Task(early) = client.send_message(not_waiting("early")).await.unwrap()
    else {
        panic!("expected a task")
    };
    assert_eq!(early.state(), TaskState::Submitted);
    let next = Message::text(Role::User, "more").in_task(&early.id, &early.context_id);
    match client.send_message(MessageSendParams::new(next)).await {
        Err(A2aError::Rpc(e)) => assert!(e.message.contains("queued"), "{e:?}"),
        other => panic!("a message for a queued task is refused: {other:?}"),
    }
    assert_eq!(
        client.cancel_task(&early.id).await.unwrap().state(),
        TaskState::Canceled
    );
    let SendMessageResult::Task(queued) = client.send_message(not_waiting("one")).await.unwrap()
    else {
        panic!("expected a task")
    };
    assert_eq!(queued.state(), TaskState::Submitted);
    // A stream on the front follows the queued task from its snapshot to its end.
    let mut sub = Box::pin(client.resubscribe(&queued.id));
    let first = sub.next().await.unwrap().unwrap();
    assert!(matches!(first, StreamEvent::Task(_)), "{first:?}");

    // The worker comes: it runs the queued turn, settles the canceled one without running it.
    let (worker, worker_turns) = queued_replica(&services[1], &ns, "worker", 2, QUICK).await;
    let done = answered(&client, &queued.id).await;
    assert_eq!(done.state(), TaskState::Completed);
    let said = done.status.message.as_ref().unwrap().text_content();
    assert_eq!(said, "one ran on worker");
    ends_with_final(&mut sub, TaskState::Completed).await;
    assert_eq!(
        client.get_task(&early.id, None).await.unwrap().state(),
        TaskState::Canceled
    );

    // Several at once; and a blocking send runs on the front.
    let mut ids = Vec::new();
    for i in 0..6 {
        let SendMessageResult::Task(t) = client
            .send_message(not_waiting(&format!("job {i}")))
            .await
            .unwrap()
        else {
            panic!("expected a task")
        };
        ids.push(t.id);
    }
    let SendMessageResult::Task(here) = client
        .send_message(MessageSendParams::new(Message::text(Role::User, "now")))
        .await
        .unwrap()
    else {
        panic!("expected a task")
    };
    assert_eq!(
        here.status.message.unwrap().text_content(),
        "now ran on front"
    );
    for (i, id) in ids.iter().enumerate() {
        let t = answered(&client, id).await;
        assert_eq!(
            t.status.message.unwrap().text_content(),
            format!("job {i} ran on worker")
        );
    }
    // Give a canceled or repeated job time to run (it must not).
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(
        worker_turns.load(std::sync::atomic::Ordering::SeqCst),
        7,
        "each queued turn ran once; the canceled one never"
    );
    assert_eq!(front_turns.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(counter(&front, "a2a_turns_queued_total").await, 8);
    assert_eq!(counter(&worker, "a2a_turns_worked_total").await, 7);
    assert_eq!(counter(&worker, "a2a_task_takeovers_total").await, 0);
}

/// A worker that dies mid-turn (its runtime shut down: connections dropped, nothing renews
/// its hold or tells the queue it still works) loses the turn to another worker, which runs it
/// again from the task as stored: the task completes there, its message once in its history,
/// and a stream following it on another replica sees it through to that end (the task is
/// never recovered to input-required meanwhile).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_turn_whose_worker_dies_runs_on_another() {
    let Some((services, ns, _front, _, client)) = queue_front().await else {
        return;
    };
    // The dying worker, in a runtime of its own, with a short hold.
    let (rt, dying, dying_turns) = dying_worker(&ns);
    let SendMessageResult::Task(t) = client.send_message(not_waiting("survive")).await.unwrap()
    else {
        panic!("expected a task")
    };
    for _ in 0..500 {
        if client.get_task(&t.id, None).await.unwrap().state() == TaskState::Working {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(dying_turns.load(std::sync::atomic::Ordering::SeqCst), 1);
    // A stream on the front, following the turn.
    let mut sub = Box::pin(client.resubscribe(&t.id));
    rt.shutdown_background();
    drop(dying);
    let (worker, turns) = queued_replica(&services[1], &ns, "worker", 1, QUICK).await;
    // The stream goes on through the takeover: the task is left to the queue, not
    // recovered (input-required) once the dead worker's hold lapsed.
    ends_with_final(&mut sub, TaskState::Completed).await;
    let done = answered(&client, &t.id).await;
    assert_eq!(done.state(), TaskState::Completed, "{done:?}");
    assert!(!format!("{done:?}").contains("server stopped"), "{done:?}");
    assert_eq!(
        done.status.message.as_ref().unwrap().text_content(),
        "survive ran on worker"
    );
    assert_eq!(turns.load(std::sync::atomic::Ordering::SeqCst), 1);
    let asked = done.history.iter().filter(|m| m.role == Role::User).count();
    assert_eq!(asked, 1, "{:?}", done.history);
    assert!(counter(&worker, "a2a_task_takeovers_total").await >= 1);
}

/// A cancel of a queued turn whose worker died, sent before the queue hands the turn to
/// another worker (its hold lapsed, nobody runs it), is confirmed by the replica it reaches
/// (before, it waited for the dead worker and failed after 10 s); the worker that later gets
/// the turn settles it without running it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_turn_whose_worker_died_is_canceled_before_another_takes_it() {
    let Some((services, ns, _front, _, client)) = queue_front().await else {
        return;
    };
    let (rt, dying, dying_turns) = dying_worker(&ns);
    let SendMessageResult::Task(t) = client
        .send_message(not_waiting("never mind"))
        .await
        .unwrap()
    else {
        panic!("expected a task")
    };
    for _ in 0..500 {
        if client.get_task(&t.id, None).await.unwrap().state() == TaskState::Working {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(dying_turns.load(std::sync::atomic::Ordering::SeqCst), 1);
    rt.shutdown_background();
    drop(dying);
    // Its hold (1 s) lapses; the queue keeps the turn for 2 s before handing it out again.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let started = std::time::Instant::now();
    let canceled = client.cancel_task(&t.id).await.unwrap();
    assert_eq!(canceled.state(), TaskState::Canceled, "{canceled:?}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "confirmed without waiting for the dead worker: {:?}",
        started.elapsed()
    );

    // A worker comes; the turn handed to it is over, so it does not run; a new task does.
    let (_worker, turns) = queued_replica(&services[1], &ns, "worker", 1, QUICK).await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let SendMessageResult::Task(after) = client.send_message(not_waiting("after")).await.unwrap()
    else {
        panic!("expected a task")
    };
    assert_eq!(
        answered(&client, &after.id).await.state(),
        TaskState::Completed
    );
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(
        turns.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the canceled turn never ran again"
    );
    let kept = client.get_task(&t.id, None).await.unwrap();
    assert_eq!(kept.state(), TaskState::Canceled, "{kept:?}");
}

/// With task events over NATS, a push config set through the replica not running the turn
/// is stored and the running replica told: the turn's notifications reach the new webhook
/// (before, the request was refused, naming the other replica); deleting it there stops them
/// for the next turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_config_set_through_either_replica_reaches_the_running_turn() {
    let Some(services) = shared_services(2).await else {
        return;
    };
    let ns = format!("push-{}", agentry_a2a::new_id());
    let slow = std::time::Duration::from_millis(1500);
    let replica =
        async |(db, events): &(agentry_postgres::Database, Arc<agentry_nats::NatsEvents>),
               label: &'static str| {
            let (listener, base) = common::bind().await;
            let svc = agentry_a2a::server::AgentService::new(
                agentry::agents::Echo::card(&base),
                Labeled {
                    label,
                    turns: Default::default(),
                    delay: slow,
                },
                Arc::new(db.task_store(&ns)),
            )
            .with_events(events.clone());
            common::serve_on(listener, svc, common::loopback_push()).await
        };
    let (a, b) = (
        replica(&services[0], "a").await,
        replica(&services[1], "b").await,
    );
    let ca = A2aClient::discover(&a.base, ClientConfig::default())
        .await
        .unwrap();
    let cb = A2aClient::discover(&b.base, ClientConfig::default())
        .await
        .unwrap();
    let (hook, seen) = common::webhook().await;
    let SendMessageResult::Task(t) = ca.send_message(not_waiting("slow job")).await.unwrap() else {
        panic!("expected a task")
    };
    let config = PushNotificationConfig {
        id: Some("through-b".into()),
        url: hook,
        token: Some("tok".into()),
        authentication: None,
        body_version: None,
    };
    // Through B once it can read the task (A's first save is written behind).
    let mut set = None;
    for _ in 0..100 {
        match cb.set_push_config(&t.id, config.clone()).await {
            Ok(c) => {
                set = Some(c);
                break;
            }
            Err(e) => {
                assert!(!format!("{e:?}").contains("another replica"), "{e:?}");
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        }
    }
    let set = set.expect("B stores the config");
    assert_eq!(
        set.push_notification_config.id.as_deref(),
        Some("through-b")
    );
    let listed = ca.list_push_configs(&t.id).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    // A's turn ends; its final notification goes to the webhook set through B.
    let done = answered(&ca, &t.id).await;
    assert_eq!(done.state(), TaskState::Completed);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let bodies: Vec<String> = seen
            .lock()
            .await
            .iter()
            .map(|(_, b)| b.to_string())
            .collect();
        if bodies
            .iter()
            .any(|b| b.contains("completed") || b.contains("COMPLETED"))
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the webhook set through B heard nothing of the end: {bodies:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    // Set and deleted through B while A runs a second task: A sends it nothing.
    let SendMessageResult::Task(t2) = ca.send_message(not_waiting("second")).await.unwrap() else {
        panic!("expected a task")
    };
    let mut stored = false;
    for _ in 0..100 {
        if cb.set_push_config(&t2.id, config.clone()).await.is_ok() {
            stored = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(stored);
    cb.delete_push_config(&t2.id, "through-b").await.unwrap();
    assert!(ca.list_push_configs(&t2.id).await.unwrap().is_empty());
    assert_eq!(answered(&ca, &t2.id).await.state(), TaskState::Completed);
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let heard = seen
        .lock()
        .await
        .iter()
        .filter(|(_, b)| b.to_string().contains(&t2.id))
        .count();
    assert_eq!(heard, 0, "a deleted config still got notifications");
}
