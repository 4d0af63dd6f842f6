//! Replicas on one PostgreSQL database (`store = "postgres://..."`): a task started through
//! one is read, listed and continued through another, and a restart loses nothing. Needs
//! PostgreSQL (127.0.0.1:5432, database `test`, or `$AGENTRY_TEST_POSTGRES`); the test
//! command requires it.

use agentry::a2a::client::{A2aClient, ClientConfig};
use agentry::a2a::model::{
    ListTasksParams, Message, MessageSendParams, Role, SendMessageResult, TaskState,
};
use agentry::config::Config;

fn url() -> String {
    std::env::var("AGENTRY_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// A config serving the echo agent (as tasks) at /echo under a name of this run, its tasks
/// in PostgreSQL.
fn config(name: &str) -> Config {
    toml::from_str(&format!(
        r#"
        [server]
        store = "{}"
        [[agents]]
        path = "/echo"
        builtin = {{ kind = "echo", mode = "task" }}
        db = "{name}"
        "#,
        url()
    ))
    .unwrap()
}

#[tokio::test]
async fn replicas_share_tasks_through_postgresql() {
    if let Err(e) = agentry::postgres::Database::connect(&url()).await {
        agentry_testkit::missing::<()>(
            agentry_testkit::Peer::Postgres,
            format!("no PostgreSQL at {} ({e})", url()),
        );
        return;
    }
    let name = format!("replicas-{}", agentry::a2a::new_id());
    let a = crate::serve(config(&name)).await;
    let b = crate::serve(config(&name)).await;
    let on = |base: &str| format!("{base}/echo");
    let ca = A2aClient::discover(&on(&a), ClientConfig::default())
        .await
        .unwrap();
    let cb = A2aClient::discover(&on(&b), ClientConfig::default())
        .await
        .unwrap();

    let sent = ca
        .send_message(MessageSendParams::new(Message::text(Role::User, "ping")))
        .await
        .unwrap();
    let SendMessageResult::Task(task) = sent else {
        panic!("the echo agent in task mode answers with a task: {sent:?}")
    };
    assert_eq!(task.state(), TaskState::Completed);
    let seen = cb.get_task(&task.id, None).await.unwrap();
    assert_eq!(seen.id, task.id);
    assert_eq!(seen.state(), TaskState::Completed);
    assert!(
        agentry::core::a2a::task_text(&seen).contains("ping"),
        "{seen:?}"
    );
    let listed = cb
        .list_tasks(ListTasksParams {
            context_id: Some(task.context_id.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        listed
            .tasks
            .iter()
            .map(|t| t.id.as_str())
            .collect::<Vec<_>>(),
        [task.id.as_str()]
    );

    // A third replica started later (a restart) finds it too.
    let c = crate::serve(config(&name)).await;
    let cc = A2aClient::discover(&on(&c), ClientConfig::default())
        .await
        .unwrap();
    assert_eq!(
        cc.get_task(&task.id, None).await.unwrap().state(),
        TaskState::Completed
    );
}

/// Pull workers through agentry.toml: a front replica (`workers = 0`) queues a task sent
/// without waiting, a worker replica (`workers = 2`) runs it; both answer for it. Needs NATS
/// with JetStream too.
#[cfg(feature = "nats")]
#[tokio::test]
async fn a_front_replica_queues_and_a_worker_replica_runs() {
    use agentry::a2a::model::MessageSendConfiguration;
    if let Err(e) = agentry::postgres::Database::connect(&url()).await {
        agentry_testkit::missing::<()>(
            agentry_testkit::Peer::Postgres,
            format!("no PostgreSQL at {} ({e})", url()),
        );
        return;
    }
    let nats =
        std::env::var("AGENTRY_TEST_NATS").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    if let Err(e) = agentry::nats::NatsEvents::connect(&nats).await {
        agentry_testkit::missing::<()>(
            agentry_testkit::Peer::Nats,
            format!("no NATS at {nats} ({e})"),
        );
        return;
    }
    let name = format!("queue-{}", agentry::a2a::new_id());
    let replica = |workers: usize| -> Config {
        let mut c = config(&name);
        c.server.bus = Some(nats.clone());
        c.server.queue = true;
        c.server.workers = workers;
        c
    };
    let front = crate::serve(replica(0)).await;
    let client = A2aClient::discover(&format!("{front}/echo"), ClientConfig::default())
        .await
        .unwrap();
    let mut p = MessageSendParams::new(Message::text(Role::User, "queued ping"));
    p.configuration = Some(MessageSendConfiguration {
        blocking: Some(false),
        ..Default::default()
    });
    let SendMessageResult::Task(task) = client.send_message(p).await.unwrap() else {
        panic!("expected a task")
    };
    assert_eq!(task.state(), TaskState::Submitted);
    // Nobody runs it until a worker comes.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(
        client.get_task(&task.id, None).await.unwrap().state(),
        TaskState::Submitted
    );
    let worker = crate::serve(replica(2)).await;
    let via_worker = A2aClient::discover(&format!("{worker}/echo"), ClientConfig::default())
        .await
        .unwrap();
    let mut done = None;
    for _ in 0..500 {
        let t = client.get_task(&task.id, None).await.unwrap();
        if t.state() == TaskState::Completed {
            done = Some(t);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let done = done.expect("the worker ran the queued task");
    assert!(
        agentry::core::a2a::task_text(&done).contains("queued ping"),
        "{done:?}"
    );
    assert_eq!(
        via_worker.get_task(&task.id, None).await.unwrap().state(),
        TaskState::Completed
    );
}

/// `audit = true` on a PostgreSQL store: the replicas' decisions go to one chain in the
/// database, which verifies whole; without a shared `audit_key` the server refuses to start
/// (a key file per machine would give each replica its own key).
#[tokio::test]
async fn replicas_audit_into_one_chain_in_postgresql() {
    let Ok(db) = agentry::postgres::Database::connect(&url()).await else {
        agentry_testkit::missing::<()>(
            agentry_testkit::Peer::Postgres,
            format!("no PostgreSQL at {}", url()),
        );
        return;
    };
    let name = format!("audited-{}", agentry::a2a::new_id());
    let key = "7e".repeat(32);
    let audited = |key: Option<&str>| {
        let mut c = config(&name);
        c.server.audit = true;
        c.server.audit_key = key.map(str::to_owned);
        c.server.audit_chain = Some(name.clone());
        c.server.state_dir = Some(std::env::temp_dir().join(&name));
        c
    };
    let refused = agentry::Service::build(audited(None)).await.err().unwrap();
    assert!(refused.to_string().contains("audit_key"), "{refused}");
    let (a, b) = (
        crate::serve(audited(Some(&key))).await,
        crate::serve(audited(Some(&key))).await,
    );
    for base in [&a, &b] {
        let c = A2aClient::discover(&format!("{base}/echo"), ClientConfig::default())
            .await
            .unwrap();
        c.send_message(MessageSendParams::new(Message::text(Role::User, "audited")))
            .await
            .unwrap();
    }
    let trail = agentry::postgres::PgAuditLog::open(
        &db,
        &name,
        &agentry::governance::audit::AuditKey::Hex(key),
    )
    .unwrap();
    let records = trail.records(1, 100).await.unwrap();
    let sends = records
        .iter()
        .filter(|r| r.event.kind == "authz" && r.event.decision.as_deref() == Some("allow"))
        .filter(|r| r.event.skill.as_deref().is_some_and(|s| s.contains("end")))
        .count();
    assert_eq!(sends, 2, "{records:?}");
    assert_eq!(trail.verify().await.unwrap().records, records.len() as u64);
    let _ = std::fs::remove_dir_all(std::env::temp_dir().join(&name));
}
