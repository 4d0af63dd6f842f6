//! Interop with the A2A 1.0 generation of the official SDKs, both directions: PyPI `a2a-sdk`
//! 1.3.0 and npm `@a2a-js/sdk` 1.3.0, each as a client of our server and as a server for our
//! client (in v1.0, and in v0.3 through their compatibility layers).
//!
//! The peers come from `scripts/test.sh` (`.venv-a2a1`, `tests/a2a-peers/node_modules`); every
//! test records its cell of the interop matrix (see `common::MatrixCell`).

use crate::common;

use std::path::Path;
use std::sync::Arc;

use agentry_a2a::client::{A2aClient, Binding, ClientConfig};
use agentry_a2a::model::*;
use agentry_a2a::store::MemoryStore;
use agentry_a2a::version::ProtocolVersion;
use common::{MatrixCell, Peer};
use futures_util::StreamExt;

const PY: &str = "a2a-sdk 1.3.0 (PyPI)";
const JS: &str = "@a2a-js/sdk 1.3.0 (npm)";

/// Runs a client-checks script against our conformance server and asserts it passed all.
async fn run_checks(program: &Path, script: &Path, cwd: &Path, extra: &[&str]) {
    let server = common::conformance_server(Arc::new(MemoryStore::default())).await;
    let out = tokio::process::Command::new(program)
        .arg(script)
        .arg(&server.base)
        .args(extra)
        .current_dir(cwd)
        .output()
        .await
        .unwrap_or_else(|e| panic!("run {}: {e}", program.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "client checks failed:\n{stdout}");
    assert!(stdout.contains(" 0 failed"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk1_client_drives_our_server() {
    let Some(python) = common::interop1_python() else {
        return;
    };
    let root = common::repo_root();
    let script = root.join("tests/interop/sdk1_client_checks.py");
    let mut bindings = vec![("jsonrpc", "JSON-RPC 1.0"), ("rest", "HTTP+JSON 1.0")];
    // Their gRPC transport (grpcio) against the same server's port, over HTTP/2.
    if cfg!(feature = "grpc") {
        bindings.push(("grpc", "gRPC 1.0"));
    }
    for (binding, name) in bindings {
        let cell = MatrixCell::new(PY, "their client -> agentry server", name);
        let args = ["--token", common::TOKEN, "--binding", binding];
        run_checks(&python, &script, &root, &args).await;
        cell.pass();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn js_sdk1_client_drives_our_server() {
    let Some(dir) = common::js_peers() else {
        return;
    };
    let script = dir.join("js1_client_checks.mjs");
    for (binding, name) in [("JSONRPC", "JSON-RPC 1.0"), ("HTTP+JSON", "HTTP+JSON 1.0")] {
        let cell = MatrixCell::new(JS, "their client -> agentry server", name);
        run_checks(Path::new("node"), &script, &dir, &[common::TOKEN, binding]).await;
        cell.pass();
    }
}

/// A peer server (`A2A_MODE` = `mode`) on a free port.
async fn start_peer(mut cmd: tokio::process::Command, mode: &str) -> Peer {
    let port = common::free_port();
    cmd.env("A2A_PORT", port.to_string()).env("A2A_MODE", mode);
    Peer::start(cmd, format!("http://127.0.0.1:{port}/")).await
}

fn python_peer(python: &Path) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(python);
    c.arg(common::repo_root().join("tests/interop/a2a_sdk1_echo_server.py"));
    c
}

fn js_peer(dir: &Path) -> tokio::process::Command {
    let mut c = tokio::process::Command::new("node");
    c.arg(dir.join("a2a_js1_echo_server.mjs")).current_dir(dir);
    c
}

/// What our client speaks to each peer server: 1.0 over both bindings, 0.3 through the
/// peers' compatibility layers.
const CASES: [(ProtocolVersion, Binding); 3] = [
    (ProtocolVersion::V1_0, Binding::JsonRpc),
    (ProtocolVersion::V1_0, Binding::HttpJson),
    (ProtocolVersion::V0_3, Binding::JsonRpc),
];

fn cell_name(version: ProtocolVersion, binding: Binding) -> String {
    let b = match binding {
        Binding::JsonRpc => "JSON-RPC",
        Binding::HttpJson => "HTTP+JSON",
        Binding::Grpc => "gRPC",
    };
    format!("{b} {version}")
}

/// Discovers the peer preferring `binding`; discovery must pick v1.0 in that binding (both
/// peers' cards declare it). v0.3 is then forced on the card's JSON-RPC URL.
async fn client_for(peer: &Peer, version: ProtocolVersion, binding: Binding) -> A2aClient {
    let cfg = ClientConfig {
        binding,
        ..ClientConfig::default()
    };
    let found = A2aClient::discover(&peer.base, cfg).await.unwrap();
    if version == ProtocolVersion::V0_3 {
        assert_eq!(found.binding(), Binding::JsonRpc);
        return found.with_version(version);
    }
    assert_eq!((found.version(), found.binding()), (version, binding));
    found
}

/// The task-mode echo agent of either SDK, driven by our client in `version`.
async fn drive_task_echo(client: &A2aClient, version: ProtocolVersion) {
    assert_eq!(client.version(), version);
    let SendMessageResult::Task(task) = client
        .send_message(MessageSendParams::new(common::user("hi there")))
        .await
        .unwrap()
    else {
        panic!("expected a task")
    };
    assert_eq!(task.state(), TaskState::Completed);
    assert_eq!(join_text(&task.artifacts[0].parts), "hi there");
    assert_eq!(task.history[0].text_content(), "hi there");

    let got = client.get_task(&task.id, None).await.unwrap();
    assert_eq!(
        (got.id.as_str(), got.state()),
        (task.id.as_str(), TaskState::Completed)
    );
    assert_eq!(
        common::rpc_code(client.cancel_task(&task.id).await.unwrap_err()),
        -32002
    );
    assert_eq!(
        common::rpc_code(client.get_task("no-such-task", None).await.unwrap_err()),
        -32001
    );

    let events: Vec<StreamEvent> = client
        .stream_message(MessageSendParams::new(common::user("stream me")))
        .map(Result::unwrap)
        .collect()
        .await;
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| match e {
            StreamEvent::Task(_) => "task",
            StreamEvent::Message(_) => "message",
            StreamEvent::StatusUpdate(s) => s.status.state.as_str(),
            StreamEvent::ArtifactUpdate(_) => "artifact",
        })
        .collect();
    assert_eq!(
        kinds,
        ["task", "working", "artifact", "completed"],
        "{events:?}"
    );
    assert!(events.last().unwrap().is_final());

    if version == ProtocolVersion::V1_0 {
        let page = client
            .list_tasks(ListTasksParams {
                context_id: Some(task.context_id.clone()),
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(page.tasks.len(), 1, "{page:?}");
        assert_eq!(page.tasks[0].id, task.id);
    }
}

async fn drive_message_echo(client: &A2aClient) {
    let SendMessageResult::Message(m) = client
        .send_message(MessageSendParams::new(common::user("echo this")))
        .await
        .unwrap()
    else {
        panic!("expected a direct message")
    };
    assert_eq!(
        (m.role, m.text_content().as_str()),
        (Role::Agent, "echo this")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_drives_python_sdk1_server() {
    let Some(python) = common::interop1_python() else {
        return;
    };
    for (version, binding) in CASES {
        let cell = MatrixCell::new(
            PY,
            "agentry client -> their server",
            &cell_name(version, binding),
        );
        let peer = start_peer(python_peer(&python), "task").await;
        let client = client_for(&peer, version, binding).await;
        assert_eq!(client.card().unwrap().name, "Echo Agent");
        drive_task_echo(&client, version).await;
        drop(peer);
        let peer = start_peer(python_peer(&python), "message").await;
        drive_message_echo(&client_for(&peer, version, binding).await).await;
        cell.pass();
    }
}

/// Our client over gRPC against the SDK's own gRPC server (grpcio), on its own port as that
/// SDK serves it: the card's GRPC interface is picked when gRPC is preferred.
#[cfg(feature = "grpc")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_drives_python_sdk1_server_over_grpc() {
    let Some(python) = common::interop1_python() else {
        return;
    };
    let cell = MatrixCell::new(
        PY,
        "agentry client -> their server",
        &cell_name(ProtocolVersion::V1_0, Binding::Grpc),
    );
    for mode in ["task", "message"] {
        let mut cmd = python_peer(&python);
        cmd.env("A2A_GRPC_PORT", common::free_port().to_string());
        let peer = start_peer(cmd, mode).await;
        let client = client_for(&peer, ProtocolVersion::V1_0, Binding::Grpc).await;
        assert!(
            client.endpoint().starts_with("http://127.0.0.1:"),
            "{}",
            client.endpoint()
        );
        if mode == "task" {
            drive_task_echo(&client, ProtocolVersion::V1_0).await;
        } else {
            drive_message_echo(&client).await;
        }
    }
    cell.pass();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_drives_js_sdk1_server() {
    let Some(dir) = common::js_peers() else {
        return;
    };
    for (version, binding) in CASES {
        let cell = MatrixCell::new(
            JS,
            "agentry client -> their server",
            &cell_name(version, binding),
        );
        let peer = start_peer(js_peer(&dir), "task").await;
        let client = client_for(&peer, version, binding).await;
        drive_task_echo(&client, version).await;
        drop(peer);
        let peer = start_peer(js_peer(&dir), "message").await;
        drive_message_echo(&client_for(&peer, version, binding).await).await;
        cell.pass();
    }
}
