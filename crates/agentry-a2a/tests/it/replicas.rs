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

/// A replica dies mid-turn (its database handle dropped: nothing renews its hold); the other
/// replica, which nobody asks about the task, takes it over once the hold lapses and recovers
/// it (input-required, saying why), so a client waiting for a push notification hears of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_replicas_task_is_taken_over_without_anyone_asking() {
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
    agentry_a2a::store::TaskStore::save(&dead.task_store(&ns), &task)
        .await
        .unwrap();
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
    let mut last = None;
    while let Some(ev) = sub.next().await {
        last = Some(ev.unwrap());
    }
    match last {
        Some(StreamEvent::StatusUpdate(s)) => {
            assert!(s.is_final);
            assert_eq!(s.status.state, TaskState::Canceled);
        }
        other => panic!("the stream ended without the final event: {other:?}"),
    }
}
