//! Interop with the official Python SDK (`a2a-sdk` 0.3.26), both directions.
//!
//! The SDK runs from the virtualenv that `scripts/test.sh` creates; see `common::interop_python`.

use crate::common;

use std::sync::Arc;

use agentry_a2a::client::{A2aClient, Binding, ClientConfig};
use agentry_a2a::model::*;
use agentry_a2a::store::SqliteStore;
use agentry_a2a::version::ProtocolVersion;
use futures_util::StreamExt;

const PEER: &str = "a2a-sdk 0.3.26 (PyPI)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_client_drives_our_server() {
    let Some(python) = common::interop_python() else {
        return;
    };
    for (binding, name) in [("jsonrpc", "JSON-RPC 0.3"), ("rest", "HTTP+JSON 0.3")] {
        let cell = common::MatrixCell::new(PEER, "their client -> agentry server", name);
        let dir = agentry_testkit::Scratch::new("interop");
        let db = dir.join("tasks.db");
        let server = common::conformance_server(Arc::new(SqliteStore::open(&db).unwrap())).await;
        let script = common::repo_root().join("tests/interop/sdk03_client_checks.py");
        let out = tokio::process::Command::new(&python)
            .arg(script)
            .arg(&server.base)
            .args(["--token", common::TOKEN, "--binding", binding])
            .output()
            .await
            .expect("run the Python SDK client");
        let stdout = String::from_utf8_lossy(&out.stdout);
        println!("{stdout}");
        eprintln!("{}", String::from_utf8_lossy(&out.stderr));
        assert!(
            out.status.success(),
            "Python SDK client checks failed:\n{stdout}"
        );
        assert!(stdout.contains(" 0 failed"), "{stdout}");
        cell.pass();
    }
}

/// Starts the reference server built on the Python SDK (JSON-RPC, and REST on a second port).
async fn python_server() -> Option<common::Peer> {
    let python = common::interop_python()?;
    let (port, rest_port) = (common::free_port(), common::free_port());
    let mut cmd = tokio::process::Command::new(python);
    cmd.arg(common::repo_root().join("tests/interop/a2a_sdk03_echo_server.py"))
        .args(["--port", &port.to_string()])
        .args(["--rest-port", &rest_port.to_string()])
        .env("TCK_STREAMING_TIMEOUT", "2.0");
    Some(common::Peer::start(cmd, format!("http://127.0.0.1:{port}/")).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_drives_python_sdk_server() {
    for (binding, name) in [
        (Binding::JsonRpc, "JSON-RPC 0.3"),
        (Binding::HttpJson, "HTTP+JSON 0.3"),
    ] {
        let Some(py) = python_server().await else {
            return;
        };
        let cell = common::MatrixCell::new(PEER, "agentry client -> their server", name);
        let cfg = ClientConfig {
            binding,
            ..ClientConfig::default()
        };
        let client = A2aClient::discover(&py.base, cfg).await.unwrap();
        assert_eq!(
            (client.version(), client.binding()),
            (ProtocolVersion::V0_3, binding)
        );
        drive_python_sdk_server(&client).await;
        cell.pass();
    }
}

async fn drive_python_sdk_server(client: &A2aClient) {
    assert_eq!(client.card().unwrap().name, "Python SDK Echo Agent");

    // Blocking send: the reference agent ends each turn in input-required.
    let SendMessageResult::Task(task) = client
        .send_message(MessageSendParams::new(common::user("hi")))
        .await
        .unwrap()
    else {
        panic!("expected a task")
    };
    assert_eq!(task.state(), TaskState::InputRequired);
    assert_eq!(join_text(&task.artifacts[0].parts), "echo: hi");

    // Follow-up on the same task, then historyLength.
    let follow = common::user("again").in_task(&task.id, &task.context_id);
    let SendMessageResult::Task(t2) = client
        .send_message(MessageSendParams::new(follow))
        .await
        .unwrap()
    else {
        panic!("expected a task")
    };
    assert_eq!(t2.id, task.id);
    let got = client.get_task(&task.id, Some(1)).await.unwrap();
    assert_eq!(got.history.len(), 1);

    // Streaming: task, working, artifact, final status.
    let events: Vec<_> = client
        .stream_message(MessageSendParams::new(common::user("stream me")))
        .collect()
        .await;
    let events: Vec<StreamEvent> = events.into_iter().map(Result::unwrap).collect();
    assert!(
        matches!(events.first(), Some(StreamEvent::Task(_))),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, StreamEvent::ArtifactUpdate(_)))
    );
    assert!(events.last().unwrap().is_final());

    // Push configs: set, get, list, delete (the SDK omits `result` on delete; tolerated).
    let hook = "http://127.0.0.1:9/hook";
    for id in ["a", "b"] {
        client
            .set_push_config(
                &task.id,
                PushNotificationConfig {
                    id: Some(id.into()),
                    url: hook.into(),
                    token: Some("t".into()),
                    authentication: None,
                    body_version: None,
                },
            )
            .await
            .unwrap();
    }
    let one = client.get_push_config(&task.id, Some("a")).await.unwrap();
    assert_eq!(one.push_notification_config.url, hook);
    // The SDK's REST server does not implement listing or deleting configs (HTTP 500).
    if client.binding() == Binding::JsonRpc {
        assert_eq!(client.list_push_configs(&task.id).await.unwrap().len(), 2);
        client.delete_push_config(&task.id, "b").await.unwrap();
        assert_eq!(client.list_push_configs(&task.id).await.unwrap().len(), 1);
    }

    // Cancel, then cancel again.
    let canceled = client.cancel_task(&task.id).await.unwrap();
    assert_eq!(canceled.state(), TaskState::Canceled);
    assert_eq!(
        common::rpc_code(client.cancel_task(&task.id).await.unwrap_err()),
        -32002
    );
    assert_eq!(
        common::rpc_code(client.get_task("nope", None).await.unwrap_err()),
        -32001
    );

    // Resubscribe to a long-running task started without blocking.
    let mut m = common::user("long");
    m.message_id = format!("test-resubscribe-message-id-{}", agentry_a2a::new_id());
    let mut params = MessageSendParams::new(m);
    params.configuration = Some(MessageSendConfiguration {
        blocking: Some(false),
        ..Default::default()
    });
    let SendMessageResult::Task(long) = client.send_message(params).await.unwrap() else {
        panic!("expected a task")
    };
    let mut stream = Box::pin(client.resubscribe(&long.id));
    let mut seen = Vec::new();
    while let Some(ev) = stream.next().await {
        let ev = ev.unwrap();
        seen.push(ev);
        if seen.len() == 3 {
            client.cancel_task(&long.id).await.unwrap();
        }
    }
    assert!(seen.len() >= 3, "{seen:?}");
    match seen.last().unwrap() {
        StreamEvent::StatusUpdate(s) => assert_eq!(s.status.state, TaskState::Canceled),
        other => panic!("last event {other:?}"),
    }
}

/// A card that claims 1.0 for an endpoint that speaks only 0.3 (the 0.3.26 SDK's server): the
/// client's first 1.0 call is refused (-32601), it switches to the card's 0.3 interface for
/// good, and the caller sees only the answers — for a plain call and for a stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_falls_back_to_0_3_when_a_card_overclaims_1_0() {
    let Some(py) = python_server().await else {
        return;
    };
    let mut card = agentry_a2a::client::fetch_card(&py.base, &ClientConfig::default())
        .await
        .unwrap();
    card.supported_interfaces = ["1.0", "0.3"]
        .into_iter()
        .map(|v| SupportedInterface {
            url: py.base.clone(),
            protocol_binding: "JSONRPC".into(),
            protocol_version: v.into(),
            tenant: String::new(),
        })
        .collect();
    let (listener, base) = common::bind().await;
    let app = axum::Router::new().route(
        "/.well-known/agent-card.json",
        axum::routing::get(move || {
            let card = card.clone();
            async move { axum::Json(card) }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    for streaming in [false, true] {
        let client = A2aClient::discover(&base, ClientConfig::default())
            .await
            .unwrap();
        assert_eq!(client.version(), ProtocolVersion::V1_0);
        let params = MessageSendParams::new(common::user("fall back"));
        let task_id = if streaming {
            let events: Vec<StreamEvent> = client
                .stream_message(params)
                .map(Result::unwrap)
                .collect()
                .await;
            assert!(events.last().unwrap().is_final(), "{events:?}");
            match &events[0] {
                StreamEvent::Task(t) => t.id.clone(),
                other => panic!("first event {other:?}"),
            }
        } else {
            let SendMessageResult::Task(t) = client.send_message(params).await.unwrap() else {
                panic!("expected a task")
            };
            assert_eq!(join_text(&t.artifacts[0].parts), "echo: fall back");
            t.id
        };
        assert_eq!(client.version(), ProtocolVersion::V0_3, "switched for good");
        assert_eq!(client.get_task(&task_id, None).await.unwrap().id, task_id);
    }
}
