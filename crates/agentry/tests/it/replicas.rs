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
