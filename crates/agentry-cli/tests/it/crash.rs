//! Crash safety against real processes (issue 20): what a server killed with SIGKILL leaves
//! behind, as the next process on the same state finds it.

use serde_json::{Value, json};

use crate::support::{data_dir, models_present, post_json, run, serve_in, stdout};

/// A JSON-RPC call over plain HTTP (the CLI's `a2a send` picks its own message ids).
fn rpc(url: &str, body: &Value) -> Value {
    let port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
    let out = post_json(port, "/", &body.to_string());
    let json = out.split("\r\n\r\n").nth(1).unwrap_or("");
    serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// A task running when its server is killed is, after a restart on the same state folder,
/// input-required with a message saying what happened (it was `working` forever before), and
/// takes the message again.
#[test]
fn a_task_running_when_the_server_is_killed_can_be_continued_after_a_restart() {
    let home = agentry_testkit::Scratch::new("crash");
    let task_id = {
        let (server, url) = serve_in(&home, "conformance", &[]);
        // Works for 10 s: still running when the process dies.
        let sent = rpc(
            &url,
            &json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {
                "configuration": {"blocking": false},
                "message": {"role": "user", "messageId": "test-resubscribe-message-id-crash",
                            "parts": [{"kind": "text", "text": "long job"}]}}}),
        );
        let id = sent["result"]["id"].as_str().expect("a task").to_owned();
        // Working (and so saved as working, the first save of a turn goes out at once), then
        // SIGKILL (Server's drop) with 10 s of work left.
        let working = (0..100).any(|_| {
            let got = rpc(
                &url,
                &json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": id}}),
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
            got["result"]["status"]["state"] == "working"
        });
        assert!(working, "the task never ran");
        std::thread::sleep(std::time::Duration::from_millis(300));
        drop(server);
        id
    };
    let (_server, url) = serve_in(&home, "conformance", &[]);
    let o = run(&["a2a", "get", &url, &task_id, "--json"]);
    let task: Value = serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("{e}: {o:?}"));
    assert_eq!(task["status"]["state"], "input-required", "{task}");
    let said = task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or("");
    assert!(said.contains("server stopped"), "{task}");
    let again = rpc(
        &url,
        &json!({"jsonrpc": "2.0", "id": 3, "method": "message/send", "params": {
            "message": {"role": "user", "messageId": "again", "taskId": task_id,
                        "parts": [{"kind": "text", "text": "long job"}]}}}),
    );
    assert_eq!(again["result"]["id"], task_id, "{again}");
    // The conformance agent's plain turn leaves the task working, waiting for more.
    assert_eq!(again["result"]["status"]["state"], "working", "{again}");
}

/// Counts that must agree in a consistent knowledge base: documents, documents without
/// chunks, chunks, their full-text rows and their vectors (sqlite-vec's rowid shadow table,
/// readable without the extension); and SQLite's own integrity check.
fn kb_counts(db: &std::path::Path) -> (i64, i64, i64, i64, i64) {
    let c = rusqlite::Connection::open(db).unwrap();
    let ok: String = c
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
    let n = |sql: &str| -> i64 { c.query_row(sql, [], |r| r.get(0)).unwrap() };
    (
        n("SELECT count(*) FROM documents"),
        n("SELECT count(*) FROM documents d WHERE NOT EXISTS \
           (SELECT 1 FROM chunks c WHERE c.document_id = d.id)"),
        n("SELECT count(*) FROM chunks"),
        n("SELECT count(*) FROM chunks_fts"),
        n("SELECT count(*) FROM chunk_vectors_384_rowids"),
    )
}

/// `agentry ingest` killed (SIGKILL) while it works through a folder: the knowledge base
/// holds whole documents only (each is one transaction), and the next ingest adds the rest
/// without redoing any document that was finished.
#[test]
fn an_ingest_killed_midway_leaves_a_consistent_knowledge_base() {
    let plays = data_dir().join("shakespeare");
    if !plays.exists() || !models_present() {
        agentry_testkit::missing::<()>(
            agentry_testkit::Peer::Models,
            "corpus or embedder missing: run scripts/fetch-data.sh and scripts/fetch-models.sh",
        );
        return;
    }
    let dir = agentry_testkit::Scratch::new("crash-ingest");
    let docs = dir.join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    // Six 40 KB slices of plays: each takes a second or more to embed.
    let mut names: Vec<_> = std::fs::read_dir(&plays)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    names.sort();
    for p in names.iter().take(6) {
        let bytes = std::fs::read(p).unwrap();
        let text = String::from_utf8_lossy(&bytes[..bytes.len().min(40_000)]).into_owned();
        std::fs::write(docs.join(p.file_name().unwrap()), text).unwrap();
    }
    let db = dir.join("kb.db");
    let ingest = || {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_agentry"));
        c.args(["ingest", docs.to_str().unwrap(), "--collection", "plays"])
            .args(["--db", db.to_str().unwrap(), "--json"])
            .env("AGENTRY_HOME", &dir);
        c
    };
    let mut child = ingest()
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Killed once two documents are in, while it embeds the third.
    let mut stored = 0;
    for _ in 0..2400 {
        if db.exists() {
            stored = rusqlite::Connection::open(&db)
                .and_then(|c| c.query_row("SELECT count(*) FROM documents", [], |r| r.get(0)))
                .unwrap_or(0);
        }
        if stored >= 2 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        child.try_wait().unwrap().is_none(),
        "the ingest finished before it could be killed"
    );
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    let (documents, empty, chunks, fts, vectors) = kb_counts(&db);
    assert!((2..6).contains(&documents), "{documents} documents");
    assert_eq!(empty, 0, "a document without its chunks");
    assert_eq!(
        (fts, vectors),
        (chunks, chunks),
        "chunks, text rows and vectors disagree"
    );

    let out = ingest().output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let count = |k: &str| report[k].as_array().map_or(0, Vec::len) as i64;
    assert_eq!(count("unchanged"), documents, "{report}");
    assert_eq!(count("ingested"), 6 - documents, "{report}");
    let (documents, empty, chunks, fts, vectors) = kb_counts(&db);
    assert_eq!((documents, empty), (6, 0));
    assert_eq!((fts, vectors), (chunks, chunks));
}

/// A webhook on 127.0.0.1: holds each request unanswered (and unrecorded) until `answer` is
/// set; then records each body and answers 200.
struct Webhook {
    url: String,
    answer: std::sync::Arc<std::sync::atomic::AtomicBool>,
    held: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    seen: std::sync::Arc<std::sync::Mutex<Vec<Value>>>,
}

fn webhook() -> Webhook {
    use std::io::{Read, Write};
    use std::sync::atomic::Ordering::SeqCst;
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", l.local_addr().unwrap());
    let hook = Webhook {
        url,
        answer: Default::default(),
        held: Default::default(),
        seen: Default::default(),
    };
    let (answer, held, seen) = (hook.answer.clone(), hook.held.clone(), hook.seen.clone());
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            let (answer, held, seen) = (answer.clone(), held.clone(), seen.clone());
            std::thread::spawn(move || {
                let mut req = Vec::new();
                let mut buf = [0u8; 4096];
                let body = loop {
                    let Ok(n) = s.read(&mut buf) else { return };
                    if n == 0 {
                        return;
                    }
                    req.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&req).into_owned();
                    let Some(end) = text.find("\r\n\r\n") else {
                        continue;
                    };
                    let len: usize = text[..end]
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse().ok())?
                        })
                        .unwrap_or(0);
                    if req.len() >= end + 4 + len {
                        break req[end + 4..end + 4 + len].to_vec();
                    }
                };
                if !answer.load(SeqCst) {
                    held.fetch_add(1, SeqCst);
                    while !answer.load(SeqCst) {
                        std::thread::sleep(std::time::Duration::from_millis(20));
                    }
                    return; // dropped unanswered: its sender is gone by now
                }
                seen.lock()
                    .unwrap()
                    .push(serde_json::from_slice(&body).unwrap_or(Value::Null));
                let _ = s.write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                );
            });
        }
    });
    hook
}

/// A server killed while its push deliveries wait on a slow webhook sends them when it
/// starts again (they were kept in the task store's outbox): none lost, in order. Before,
/// queued notifications lived in memory only and died with the process.
#[test]
fn push_notifications_pending_at_a_kill_are_sent_after_the_restart() {
    use std::sync::atomic::Ordering::SeqCst;
    let home = agentry_testkit::Scratch::new("crash-push");
    let hook = webhook();
    let task_id = {
        let (server, url) = serve_in(&home, "conformance", &["--allow-private-push"]);
        let sent = rpc(
            &url,
            &json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {
                "configuration": {"pushNotificationConfig": {"url": hook.url, "token": "tok"}},
                "message": {"role": "user", "messageId": "m-push",
                            "parts": [{"kind": "text", "text": "notify me"}]}}}),
        );
        let id = sent["result"]["id"].as_str().expect("a task").to_owned();
        // The first delivery reached the webhook and hangs there; the rest queue behind it.
        for _ in 0..200 {
            if hook.held.load(SeqCst) > 0 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(hook.held.load(SeqCst) > 0, "no delivery was attempted");
        drop(server); // SIGKILL
        id
    };
    hook.answer.store(true, SeqCst);
    let (_server, _url) = serve_in(&home, "conformance", &["--allow-private-push"]);
    let mut states = Vec::new();
    for _ in 0..500 {
        states = hook
            .seen
            .lock()
            .unwrap()
            .iter()
            .map(|b| {
                assert_eq!(b["id"], task_id, "{b}");
                b["status"]["state"].as_str().unwrap_or("?").to_owned()
            })
            .collect::<Vec<_>>();
        if states.len() >= 3 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // The task as announced, working, then its turn's end (parked, working): in that order.
    assert_eq!(states, ["submitted", "working", "working"]);
}

/// A client streaming a task when its server is killed gets an end, not a hang: it
/// resubscribes, and the restarted server (same address, same state) says the task was
/// interrupted (input-required, with why), which ends the stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_open_when_the_server_is_killed_ends_after_the_restart() {
    use agentry::a2a::client::{A2aClient, ClientConfig};
    use agentry::a2a::model::{Message, MessageSendParams, Role, StreamEvent, TaskState};
    use futures_util::StreamExt;
    let home = agentry_testkit::Scratch::new("crash-stream");
    let port = crate::support::free_port();
    let (server, url) = crate::support::serve_on(port, &home, "conformance", &[]);
    let cfg = ClientConfig {
        retries: 8,
        backoff: std::time::Duration::from_millis(100),
        ..ClientConfig::default()
    };
    let client = A2aClient::discover(&url, cfg).await.unwrap();
    // Works for 10 s, sending a progress artifact every half second.
    let mut m = Message::text(Role::User, "long job");
    m.message_id = "test-resubscribe-message-id-stream".into();
    let mut events = Box::pin(client.stream_message(MessageSendParams::new(m)));
    // The task, working, and a first progress tick half a second later (by then the
    // working state is on disk): then the process dies.
    for _ in 0..3 {
        events.next().await.unwrap().unwrap();
    }
    let home2 = home.to_path_buf();
    let restart = tokio::task::spawn_blocking(move || {
        drop(server); // SIGKILL
        crate::support::serve_on(port, &home2, "conformance", &[])
    });
    let rest: Vec<_> = tokio::time::timeout(std::time::Duration::from_secs(30), events.collect())
        .await
        .expect("the stream hung after the kill");
    let _server = restart.await.unwrap();
    let last = rest.last().expect("no end").as_ref().unwrap();
    let StreamEvent::StatusUpdate(s) = last else {
        panic!("{rest:?}")
    };
    assert!(s.is_final, "{rest:?}");
    assert_eq!(s.status.state, TaskState::InputRequired, "{rest:?}");
    let said = s
        .status
        .message
        .as_ref()
        .map(|m| m.text_content())
        .unwrap_or_default();
    assert!(said.contains("server stopped"), "{said}");
}

/// A remote A2A agent for the workflow crash test: records every message it is sent, answers at
/// once, except a message containing "slow", which it answers once `hold` is cleared.
struct Counter {
    seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    hold: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl agentry::a2a::server::AgentExecutor for Counter {
    async fn execute(
        &self,
        ctx: agentry::a2a::server::RequestContext,
        events: agentry::a2a::server::EventSink,
    ) -> Result<(), agentry::a2a::server::ExecutorError> {
        let text = ctx.message.text_content();
        self.seen.lock().unwrap().push(text.clone());
        while text.contains("slow") && self.hold.load(std::sync::atomic::Ordering::SeqCst) {
            if ctx.is_canceled() {
                return Ok(());
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        events
            .complete(Some(events.agent_text(format!("done: {text}"))))
            .await?;
        Ok(())
    }
}

/// A workflow process killed while its second step runs, resumed by a new process: the
/// finished first step is not sent again (its side effect happens once), the interrupted one
/// is picked up where it runs, not run again, and the run finishes with both outputs.
#[test]
fn a_workflow_killed_mid_step_resumes_without_rerunning_finished_steps() {
    use std::io::BufRead;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let hold = Arc::new(AtomicBool::new(true));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let card = agentry::a2a::model::AgentCard::new("counter", "Counts what it is sent", &url);
    let agent = Counter {
        seen: seen.clone(),
        hold: hold.clone(),
    };
    let store = Arc::new(agentry::a2a::store::MemoryStore::default());
    let server = agentry::a2a::server::A2aServer::new().agent(
        "/",
        agentry::a2a::server::AgentService::new(card, agent, store),
    );
    rt.spawn(server.serve(listener, std::future::pending()));

    let home = agentry_testkit::Scratch::new("crash-flow");
    let cfg = home.join("agentry.toml");
    std::fs::write(
        &cfg,
        format!("[[remotes]]\nname = \"counter\"\nurl = \"{url}\"\n"),
    )
    .unwrap();
    let flow = home.join("flow.yaml");
    std::fs::write(
        &flow,
        "name: two-steps\nsteps:\n  - id: first\n    agent: counter\n    input: \"book the room\"\n  \
         - id: second\n    agent: counter\n    depends_on: [first]\n    input: \"slow: ${steps.first.output}\"\n\
         output: \"${steps.second.output}\"\n",
    )
    .unwrap();
    let (cfg, flow) = (cfg.to_str().unwrap(), flow.to_str().unwrap());

    let mut child = std::process::Command::new(crate::support::BIN)
        .args(["workflow", "run", flow, "--config", cfg])
        .env("AGENTRY_HOME", &home)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let run_id = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| {
            Some(
                l.split("agentry workflow resume ")
                    .nth(1)?
                    .trim()
                    .to_owned(),
            )
        })
        .expect("no run id on stderr");
    // Killed once the second step reached the agent (the first is finished and checkpointed
    // before the second starts).
    let reached = (0..600).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(50));
        seen.lock().unwrap().len() == 2
    });
    assert!(reached, "the second step never started: {:?}", seen.lock());
    child.kill().unwrap();
    child.wait().unwrap();

    hold.store(false, Ordering::SeqCst);
    let out = std::process::Command::new(crate::support::BIN)
        .args(["workflow", "resume", &run_id, "--config", cfg])
        .env("AGENTRY_HOME", &home)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout(&out).trim(),
        "done: slow: done: book the room",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Each step reached the agent once: the finished one is not sent again, and the
    // interrupted one is not run a second time either (the resumed attempt repeats its
    // idempotency key and gets the first attempt's task, which went on at the agent).
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        ["book the room", "slow: done: book the room"],
        "a step was executed twice"
    );
}
