//! The researcher against real MCP servers (npm `server-memory` and `server-filesystem`, and a
//! server on PyPI `mcp`), in direct mode, in A2A mode through a standalone researcher server,
//! and falling back to direct mode when that server is down. `scripts/test.sh` installs the
//! servers; without them the tests say SKIPPED (and fail when `AGENTRY_REQUIRE_INTEROP=1`).

use std::path::PathBuf;
use std::sync::Arc;

use agentry_a2a::client::{A2aClient, ClientConfig};
use agentry_a2a::model::*;
use agentry_a2a::server::{A2aServer, AgentService};
use agentry_a2a::store::MemoryStore;
use agentry_core::a2a::Served;
use agentry_core::a2a::{AgentHandle, Ask};
use agentry_mcp::{LaunchPolicy, McpServerSpec};
use agentry_specialists::research::{Mode, Researcher, ResearcherConfig, Source};
use futures_util::StreamExt;
use serde_json::json;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn peers() -> Option<(PathBuf, PathBuf, PathBuf)> {
    let npm = root().join("tests/mcp-peers/node_modules/@modelcontextprotocol");
    let mem = npm.join("server-memory/dist/index.js");
    let fs = npm.join("server-filesystem/dist/index.js");
    let py = root().join(".venv-mcp/bin/python");
    if mem.exists() && fs.exists() && py.exists() {
        return Some((mem, fs, py));
    }
    let msg =
        "MCP servers missing (npm server-memory/server-filesystem, PyPI mcp): run scripts/test.sh";
    agentry_testkit::missing::<()>(agentry_testkit::Peer::Interop, &msg);
    None
}

/// Three real sources: a knowledge graph, a folder, and an echo server; with the folder
/// they work in (removed when the test passes).
fn config(tag: &str) -> Option<(ResearcherConfig, agentry_testkit::Scratch)> {
    let (mem, fs, py) = peers()?;
    let dir = agentry_testkit::Scratch::new(&format!("research-{tag}"));
    std::fs::create_dir_all(dir.join("library")).unwrap();
    std::fs::write(
        dir.join("library/elsinore-notes.txt"),
        "Elsinore is a castle.",
    )
    .unwrap();
    let graph = dir.join("memory.jsonl");
    std::fs::write(
        &graph,
        "{\"type\":\"entity\",\"name\":\"Elsinore\",\"entityType\":\"castle\",\"observations\":[\"Hamlet's home in Denmark\"]}\n",
    )
    .unwrap();
    let mut memory = McpServerSpec::stdio("memory", "node", &[mem.to_str().unwrap()]);
    memory
        .env
        .insert("MEMORY_FILE_PATH".into(), graph.display().to_string());
    let files = McpServerSpec::stdio(
        "files",
        "node",
        &[fs.to_str().unwrap(), dir.join("library").to_str().unwrap()],
    );
    let echo = McpServerSpec::stdio(
        "echo",
        py.to_str().unwrap(),
        &[
            root()
                .join("tests/interop/mcp_py_server.py")
                .to_str()
                .unwrap(),
            "stdio",
        ],
    );
    let args = |v: serde_json::Value| v.as_object().cloned().unwrap();
    let config = ResearcherConfig {
        mode: Mode::Direct,
        a2a_url: None,
        timeout_secs: 30.0,
        sources: vec![
            Source {
                server: memory,
                tool: "search_nodes".into(),
                arguments: args(json!({"query": "{query}"})),
            },
            Source {
                server: files,
                tool: "search_files".into(),
                arguments: args(
                    json!({"path": dir.join("library").display().to_string(), "pattern": "**/*{query}*"}),
                ),
            },
            Source {
                server: echo,
                tool: "echo".into(),
                arguments: args(json!({"message": "asked: {query}"})),
            },
        ],
    };
    Some((config, dir))
}

fn researcher(cfg: ResearcherConfig) -> Researcher {
    Researcher::new(cfg).with_policy(LaunchPolicy::any())
}

async fn serve(r: Arc<Researcher>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let svc = AgentService::new(r.card(&url), Served(r), Arc::new(MemoryStore::default()));
    tokio::spawn(
        A2aServer::new()
            .agent("/", svc)
            .serve(listener, std::future::pending()),
    );
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_mode_asks_every_source_at_once() {
    let Some((cfg, _dir)) = config("direct") else {
        return;
    };
    let r = researcher(cfg);
    let reply = r.ask(Ask::text("elsinore")).await.unwrap();
    let d = &reply.data[0];
    assert_eq!(d["mode"], "direct");
    let findings = d["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 3, "{findings:?}");
    let text = |server: &str| {
        findings.iter().find(|f| f["server"] == server).unwrap()["text"]
            .as_str()
            .unwrap_or_else(|| panic!("{server} failed: {findings:?}"))
            .to_owned()
    };
    assert!(text("memory").contains("Hamlet's home in Denmark"));
    assert!(text("files").contains("elsinore-notes.txt"));
    assert_eq!(text("echo"), "asked: elsinore");
    assert!(
        reply
            .text
            .contains("across 3 sources in parallel (direct mode")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a2a_mode_delegates_and_falls_back_when_the_server_is_down() {
    let Some((cfg, _dir)) = config("a2a") else {
        return;
    };
    // The standalone researcher (direct mode) over A2A.
    let standalone = serve(Arc::new(researcher(cfg.clone()))).await;
    let client_cfg = ResearcherConfig {
        mode: Mode::A2a,
        a2a_url: Some(standalone),
        ..cfg.clone()
    };
    let reply = researcher(client_cfg)
        .ask(Ask::text("elsinore"))
        .await
        .unwrap();
    assert_eq!(reply.data[0]["mode"], "a2a");
    assert!(
        reply.text.contains("Hamlet's home in Denmark"),
        "{}",
        reply.text
    );

    // Down: a port nobody listens on. Served over A2A itself, the fallback shows in the task's
    // status as it happens, and the answer still comes.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let fallback = Arc::new(researcher(ResearcherConfig {
        mode: Mode::A2a,
        a2a_url: Some(dead),
        ..cfg
    }));
    let url = serve(fallback).await;
    let client = A2aClient::discover(&url, ClientConfig::default())
        .await
        .unwrap();
    let events: Vec<_> = client
        .stream_message(MessageSendParams::new(Message::text(
            Role::User,
            "elsinore",
        )))
        .collect()
        .await;
    let statuses: Vec<String> = events
        .iter()
        .filter_map(|e| match e.as_ref().unwrap() {
            StreamEvent::StatusUpdate(s) => s.status.message.as_ref().map(Message::text_content),
            _ => None,
        })
        .collect();
    assert!(
        statuses
            .iter()
            .any(|s| s.contains("unreachable") && s.contains("falling back to direct mode")),
        "{statuses:?}"
    );
    let answer: String = events
        .iter()
        .filter_map(|e| match e.as_ref().unwrap() {
            StreamEvent::ArtifactUpdate(a) => Some(join_text(&a.artifact.parts)),
            _ => None,
        })
        .collect();
    assert!(
        answer.contains("direct (fallback from A2A) mode") && answer.contains("Hamlet's home"),
        "{answer}"
    );
}

#[test]
fn the_environment_variable_sets_the_mode() {
    let direct = ResearcherConfig::default();
    let a2a = ResearcherConfig {
        mode: Mode::A2a,
        ..Default::default()
    };
    assert_eq!(direct.mode_given(Some("true")), Mode::A2a);
    assert_eq!(direct.mode_given(Some("1")), Mode::A2a);
    assert_eq!(a2a.mode_given(Some("0")), Mode::Direct);
    assert_eq!(a2a.mode_given(Some("FALSE")), Mode::Direct);
    assert_eq!(a2a.mode_given(None), Mode::A2a);
    assert_eq!(direct.mode_given(Some("maybe")), Mode::Direct);
}
