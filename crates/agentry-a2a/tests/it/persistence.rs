//! Tasks served from SQLite survive a server restart; graceful shutdown finishes open streams.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use agentry::agents::Conformance;
use agentry_a2a::client::{A2aClient, ClientConfig};
use agentry_a2a::model::*;
use agentry_a2a::server::{A2aServer, AgentService};
use agentry_a2a::store::SqliteStore;
use futures_util::StreamExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_survive_a_restart() {
    let dir = agentry_testkit::Scratch::new("restart");
    let db = dir.join("tasks.db");
    let (task, hook_id) = {
        let s = common::conformance_server(Arc::new(SqliteStore::open(&db).unwrap())).await;
        let c = A2aClient::discover(&s.base, ClientConfig::default())
            .await
            .unwrap();
        let SendMessageResult::Task(t) = c
            .send_message(MessageSendParams::new(Message::text(
                Role::User,
                "remember me",
            )))
            .await
            .unwrap()
        else {
            panic!()
        };
        let cfg = PushNotificationConfig {
            id: Some("h".into()),
            url: "http://127.0.0.1:9/h".into(),
            token: None,
            authentication: None,
            body_version: None,
        };
        c.set_push_config(&t.id, cfg).await.unwrap();
        (t, "h")
    }; // The server stops here.
    let s = common::conformance_server(Arc::new(SqliteStore::open(&db).unwrap())).await;
    let c = A2aClient::discover(&s.base, ClientConfig::default())
        .await
        .unwrap();
    let again = c.get_task(&task.id, None).await.unwrap();
    assert_eq!(again, task);
    assert_eq!(
        c.get_push_config(&task.id, Some(hook_id))
            .await
            .unwrap()
            .push_notification_config
            .url,
        "http://127.0.0.1:9/h"
    );
    // The interrupted task continues after the restart.
    let next = Message::text(Role::User, "still there?").in_task(&task.id, &task.context_id);
    let SendMessageResult::Task(t2) = c.send_message(MessageSendParams::new(next)).await.unwrap()
    else {
        panic!()
    };
    assert_eq!(t2.history.len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_finishes_open_streams() {
    let (listener, url) = common::bind().await;
    let agent = Conformance {
        resubscribe_window: Duration::from_secs(1),
    };
    let svc = AgentService::new(
        Conformance::card(&url),
        agent,
        Arc::new(agentry_a2a::store::MemoryStore::default()),
    );
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(A2aServer::new().agent("/", svc).serve(listener, async {
        let _ = rx.await;
    }));
    let c = A2aClient::discover(&url, ClientConfig::default())
        .await
        .unwrap();
    let mut m = Message::text(Role::User, "x");
    m.message_id = "test-resubscribe-message-id-shutdown".into();
    let mut stream = Box::pin(c.stream_message(MessageSendParams::new(m)));
    assert!(matches!(
        stream.next().await,
        Some(Ok(StreamEvent::Task(_)))
    ));
    stop.send(()).unwrap();
    let mut last = None;
    while let Some(ev) = stream.next().await {
        last = Some(ev.expect("the stream ends cleanly"));
    }
    assert!(
        matches!(last, Some(StreamEvent::StatusUpdate(s)) if s.is_final && s.status.state == TaskState::Completed)
    );
    server.await.unwrap().unwrap();
}

/// Issue 20: a task that a killed process left `working` (or `submitted`) is not `working`
/// forever. In one process a running turn always holds its task, so a stored task in those
/// states with nothing running it here was orphaned; the first look at it (get, list, a message,
/// a subscription) moves it to input-required with a message saying what happened, and a
/// message sent again runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_orphaned_by_a_dead_process_are_not_working_forever() {
    let dir = agentry_testkit::Scratch::new("orphan");
    let db = dir.join("tasks.db");
    // What a process killed mid-turn leaves behind: tasks stored as working and submitted.
    let mut ids = Vec::new();
    {
        let store = SqliteStore::open(&db).unwrap();
        for state in [TaskState::Working, TaskState::Submitted] {
            let mut t = Task::new(agentry_a2a::new_id(), agentry_a2a::new_id());
            t.history
                .push(Message::text(Role::User, "long job").in_task(&t.id, &t.context_id));
            if state == TaskState::Working {
                t.transition(TaskStatus::now(TaskState::Working, None))
                    .unwrap();
            }
            agentry_a2a::store::TaskStore::save(&store, &t)
                .await
                .unwrap();
            ids.push(t.id);
        }
    }
    let s = common::conformance_server(Arc::new(SqliteStore::open(&db).unwrap())).await;
    let c = A2aClient::discover(&s.base, ClientConfig::default())
        .await
        .unwrap();
    // Listed: already recovered.
    let listed = c.list_tasks(ListTasksParams::default()).await.unwrap();
    assert_eq!(listed.tasks.len(), 2);
    for t in &listed.tasks {
        assert_eq!(t.state(), TaskState::InputRequired, "{t:?}");
    }
    let t = c.get_task(&ids[0], None).await.unwrap();
    assert_eq!(t.state(), TaskState::InputRequired);
    let said = t.status.message.as_ref().unwrap().text_content();
    assert!(said.contains("server stopped"), "{said}");
    assert_eq!(
        t.history.len(),
        2,
        "the request and the explanation, once: {:?}",
        t.history
    );
    // Sent again, it runs (the conformance agent echoes and waits for more, working).
    let mut again = Message::text(Role::User, "long job");
    again.task_id = Some(ids[1].clone());
    let SendMessageResult::Task(t) = c.send_message(MessageSendParams::new(again)).await.unwrap()
    else {
        panic!("a task")
    };
    assert_eq!(t.id, ids[1]);
    assert_eq!(t.state(), TaskState::Working);
    assert!(
        t.status
            .message
            .as_ref()
            .unwrap()
            .text_content()
            .contains("echo: long job"),
        "{t:?}"
    );
}
