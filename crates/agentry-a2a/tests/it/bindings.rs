//! One scenario, every way our client and server can speak: A2A 1.0 and 0.3, each over JSON-RPC
//! and HTTP+JSON. The transcripts (states, texts, parts, error codes, stream shapes) must be
//! identical, so no codec or binding changes what a caller sees.

use crate::common;

use std::sync::Arc;

use agentry_a2a::A2aError;
use agentry_a2a::client::{A2aClient, Binding, ClientConfig};
use agentry_a2a::model::*;
use agentry_a2a::store::MemoryStore;
use agentry_a2a::version::ProtocolVersion;
use futures_util::StreamExt;

fn msg(text: &str, id: &str) -> Message {
    let mut m = Message::text(Role::User, text);
    m.message_id = format!("{id}-{}", agentry_a2a::new_id());
    m
}

fn code(e: A2aError) -> String {
    match e {
        A2aError::Rpc(r) => format!("error {}", r.code),
        other => format!("other error: {other}"),
    }
}

fn parts(ps: &[Part]) -> String {
    ps.iter()
        .map(|p| match p {
            Part::Text(t) => format!("text:{}", t.text),
            Part::File(f) => format!(
                "file:{:?}:{:?}:{:?}",
                f.file.content, f.file.name, f.file.mime_type
            ),
            Part::Data(d) => format!("data:{}", serde_json::Value::Object(d.data.clone())),
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn result(r: SendMessageResult) -> (String, Option<Task>) {
    match r {
        SendMessageResult::Task(t) => (
            format!(
                "task {} status={:?} artifacts=[{}] history={}",
                t.state(),
                t.status.message.as_ref().map(Message::text_content),
                t.artifacts
                    .iter()
                    .map(|a| parts(&a.parts))
                    .collect::<Vec<_>>()
                    .join(";"),
                t.history.len()
            ),
            Some(t),
        ),
        SendMessageResult::Message(m) => {
            (format!("message {:?} {}", m.role, parts(&m.parts)), None)
        }
    }
}

fn event(e: &StreamEvent) -> String {
    match e {
        StreamEvent::Task(t) => format!("task:{}", t.state()),
        StreamEvent::Message(_) => "message".into(),
        StreamEvent::StatusUpdate(s) => format!("status:{}:{}", s.status.state, s.is_final),
        StreamEvent::ArtifactUpdate(a) => format!(
            "artifact:{}:{:?}:{:?}",
            parts(&a.artifact.parts),
            a.append,
            a.last_chunk
        ),
    }
}

async fn scenario(c: &A2aClient) -> Vec<String> {
    let mut out = Vec::new();
    let send = |m: Message| c.send_message(MessageSendParams::new(m));

    let (line, task) = result(send(msg("hello", "plain")).await.unwrap());
    out.push(line);
    let task = task.unwrap();
    let follow = msg("again", "plain").in_task(&task.id, &task.context_id);
    out.push(result(send(follow).await.unwrap()).0);
    let got = c.get_task(&task.id, Some(1)).await.unwrap();
    out.push(format!(
        "get: {} {}",
        got.history.len(),
        got.history[0].text_content()
    ));

    let (line, done) = result(send(msg("x", "tck-complete-task")).await.unwrap());
    out.push(line);
    let done = done.unwrap();
    let more = msg("more", "plain").in_task(&done.id, &done.context_id);
    out.push(format!(
        "send to completed: {}",
        code(send(more).await.unwrap_err())
    ));
    out.push(format!(
        "cancel completed: {}",
        code(c.cancel_task(&done.id).await.unwrap_err())
    ));
    out.push(format!(
        "get unknown: {}",
        code(c.get_task("no-such", None).await.unwrap_err())
    ));

    for id in [
        "tck-artifact-file",
        "tck-artifact-file-url",
        "tck-artifact-data",
        "tck-message-response",
    ] {
        out.push(result(send(msg("x", id)).await.unwrap()).0);
    }

    let events: Vec<String> = c
        .stream_message(MessageSendParams::new(msg(
            "s",
            "tck-stream-artifact-chunked",
        )))
        .map(|e| event(&e.unwrap()))
        .collect()
        .await;
    out.push(format!("stream: {events:?}"));

    let mut p = MessageSendParams::new(msg("long", "test-resubscribe-message-id"));
    p.configuration = Some(MessageSendConfiguration {
        blocking: Some(false),
        ..Default::default()
    });
    let SendMessageResult::Task(long) = c.send_message(p).await.unwrap() else {
        panic!("expected a task")
    };
    out.push(format!("non-blocking: {}", long.state()));
    let mut sub = Box::pin(c.resubscribe(&long.id));
    let first = event(&sub.next().await.unwrap().unwrap());
    let canceled = c.cancel_task(&long.id).await.unwrap();
    let mut last = String::new();
    while let Some(e) = sub.next().await {
        last = event(&e.unwrap());
    }
    out.push(format!(
        "resubscribe: {first} .. {last}; cancel -> {}",
        canceled.state()
    ));

    let hook = "http://127.0.0.1:9/hook";
    for id in ["a", "b"] {
        let cfg = PushNotificationConfig {
            id: Some(id.into()),
            url: hook.into(),
            token: Some(format!("tok-{id}")),
            authentication: None,
            body_version: None,
        };
        let set = c.set_push_config(&task.id, cfg).await.unwrap();
        out.push(format!(
            "push set: {} {:?}",
            set.task_id, set.push_notification_config.token
        ));
    }
    let one = c.get_push_config(&task.id, Some("b")).await.unwrap();
    out.push(format!(
        "push get: {:?}",
        one.push_notification_config.token
    ));
    out.push(format!(
        "push list: {}",
        c.list_push_configs(&task.id).await.unwrap().len()
    ));
    c.delete_push_config(&task.id, "a").await.unwrap();
    out.push(format!(
        "push list: {}",
        c.list_push_configs(&task.id).await.unwrap().len()
    ));
    // Transcripts name the first task by position, not by its id.
    out.iter().map(|l| l.replace(&task.id, "TASK")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_version_and_binding_gives_the_same_transcript() {
    let server = common::conformance_server(Arc::new(MemoryStore::default())).await;
    let mut transcripts = Vec::new();
    let mut kinds = vec![
        (ProtocolVersion::V1_0, Binding::JsonRpc),
        (ProtocolVersion::V1_0, Binding::HttpJson),
        (ProtocolVersion::V0_3, Binding::JsonRpc),
        (ProtocolVersion::V0_3, Binding::HttpJson),
    ];
    // gRPC is 1.0's only (0.3's gRPC service is another package).
    if cfg!(feature = "grpc") {
        kinds.push((ProtocolVersion::V1_0, Binding::Grpc));
    }
    for (version, binding) in kinds {
        let cfg = ClientConfig {
            binding,
            ..ClientConfig::default()
        };
        let found = A2aClient::discover(&server.base, cfg).await.unwrap();
        // Discovery picks 1.0 in the preferred binding (the card offers all four).
        assert_eq!(
            (found.version(), found.binding()),
            (ProtocolVersion::V1_0, binding)
        );
        let client = found.with_version(version).with_binding(binding);
        let t = scenario(&client).await;
        transcripts.push(((version, binding), t));
    }
    let (first_kind, first) = &transcripts[0];
    // One line per step of the scenario, each as the specification has it (the codes are
    // A2A's TaskNotFoundError -32001 and TaskNotCancelableError -32002), before comparing
    // the bindings with each other.
    let has = |line: &str| first.iter().any(|l| l == line);
    assert_eq!(first.len(), 19, "a line per step: {first:#?}");
    assert!(first[0].starts_with("task working"), "{first:#?}");
    assert!(
        first[2].starts_with("get: 1 "),
        "historyLength=1 gives one message: {first:#?}"
    );
    assert!(has("cancel completed: error -32002"), "{first:#?}");
    assert!(has("get unknown: error -32001"), "{first:#?}");
    assert!(
        first
            .iter()
            .any(|l| l.starts_with("resubscribe: ") && l.ends_with("cancel -> canceled")),
        "{first:#?}"
    );
    assert!(has("push get: Some(\"tok-b\")"), "{first:#?}");
    let lists: Vec<&String> = first
        .iter()
        .filter(|l| l.starts_with("push list: "))
        .collect();
    assert_eq!(
        lists,
        ["push list: 2", "push list: 1"],
        "two configs set, one deleted"
    );
    for (kind, t) in &transcripts[1..] {
        assert_eq!(t, first, "{kind:?} differs from {first_kind:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_tasks_is_v1_only_and_pages() {
    let server = common::conformance_server(Arc::new(MemoryStore::default())).await;
    for binding in [Binding::JsonRpc, Binding::HttpJson] {
        let cfg = ClientConfig {
            binding,
            ..ClientConfig::default()
        };
        let c = A2aClient::discover(&server.base, cfg).await.unwrap();
        let ctx = agentry_a2a::new_id();
        let mut ids = Vec::new();
        for i in 0..5 {
            let mut m = Message::text(Role::User, format!("n{i}"));
            m.context_id = Some(ctx.clone());
            let SendMessageResult::Task(t) =
                c.send_message(MessageSendParams::new(m)).await.unwrap()
            else {
                panic!("expected a task")
            };
            ids.push(t.id);
        }
        ids.reverse();
        let mut seen = Vec::new();
        let mut token = None;
        loop {
            let page = c
                .list_tasks(ListTasksParams {
                    context_id: Some(ctx.clone()),
                    page_size: Some(2),
                    page_token: token.clone(),
                    history_length: Some(0),
                    ..Default::default()
                })
                .await
                .unwrap();
            assert_eq!(page.total_size, 5);
            assert!(
                page.tasks
                    .iter()
                    .all(|t| t.history.is_empty() && t.artifacts.is_empty())
            );
            seen.extend(page.tasks.into_iter().map(|t| t.id));
            if page.next_page_token.is_empty() {
                break;
            }
            token = Some(page.next_page_token);
        }
        assert_eq!(seen, ids, "{binding:?}: newest first, every task once");
        let bad = c
            .list_tasks(ListTasksParams {
                page_token: Some("not-a-token".into()),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(code(bad), "error -32602");
        let old = c.with_version(ProtocolVersion::V0_3);
        assert!(old.list_tasks(ListTasksParams::default()).await.is_err());
    }
}
