//! Agents from configs, served over A2A, called as remote agents and as tools.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentry_a2a::client::{A2aClient, ClientConfig};
use agentry_a2a::model::*;
use agentry_a2a::server::{A2aServer, AgentService};
use agentry_a2a::store::MemoryStore;
use agentry_core::a2a::{AgentHandle, AgentTool, RemoteAgent, Served};
use agentry_core::agent::{Agent, AgentConfig, AgentFactory, ModelConfig};
use agentry_core::llm::*;
use agentry_core::tools::{FnTool, ToolOutput};
use futures_util::StreamExt;
use serde_json::{Value, json};

/// Replays responses and keeps every request it saw.
struct Spy {
    inner: ScriptedProvider,
    seen: Mutex<Vec<ChatRequest>>,
}

impl LlmProvider for Spy {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            native_tools: true,
            ..Default::default()
        }
    }
    async fn chat(&self, req: ChatRequest) -> Result<ChatResponse, LlmError> {
        self.seen.lock().unwrap().push(req.clone());
        self.inner.chat(req).await
    }
}

fn spy(responses: Vec<ChatResponse>) -> Arc<Spy> {
    Arc::new(Spy {
        inner: ScriptedProvider::new(Transcript::of(
            Capabilities {
                native_tools: true,
                ..Default::default()
            },
            responses,
        )),
        seen: Mutex::new(Vec::new()),
    })
}

fn calls(calls: Vec<(&str, &str, Value)>) -> ChatResponse {
    ChatResponse::tool_calls(
        calls
            .into_iter()
            .map(|(id, n, a)| ToolCall {
                id: id.into(),
                name: n.into(),
                arguments: a,
            })
            .collect(),
    )
}

fn text(t: &str) -> ChatResponse {
    ChatResponse::text(t)
}

fn config(name: &str) -> AgentConfig {
    toml::from_str(&format!(
        r#"
        name = "{name}"
        description = "Knows the plays"
        system_prompt = "You answer questions about plays."
        examples = ["Who is Hamlet?"]
        [model]
        provider = "scripted"
        transcript = "unused.json"
        "#
    ))
    .unwrap()
}

fn factory() -> AgentFactory {
    let mut f = AgentFactory::new();
    f.register_tool(FnTool::new(
        "lookup",
        "Looks a character up.",
        json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
        |args| async move {
            Ok(ToolOutput::text(format!(
                "{} is the Prince of Denmark.",
                args["name"].as_str().unwrap_or("?")
            )))
        },
    ));
    f.register_tool(FnTool::new(
        "slow",
        "Takes long.",
        json!({"type": "object", "properties": {}}),
        |_| async {
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok(ToolOutput::text("late"))
        },
    ));
    f
}

async fn serve(agent: Agent) -> (String, tokio::sync::oneshot::Sender<()>) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", l.local_addr().unwrap());
    let card = agent.card(&url);
    let svc = AgentService::new(
        card,
        Served(Arc::new(agent)),
        Arc::new(MemoryStore::default()),
    );
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(A2aServer::new().agent("/", svc).serve(l, async {
        let _ = rx.await;
    }));
    (url, tx)
}

#[test]
fn configs_load_from_toml_and_yaml_and_bad_ones_are_clear() {
    let dir = agentry_testkit::Scratch::new("cfg");
    std::fs::write(dir.join("a.yaml"), "name: y\ndescription: d\ntools: [lookup]\nmodel:\n  provider: scripted\n  transcript: t.json\n").unwrap();
    let y = AgentConfig::from_file(dir.join("a.yaml")).unwrap();
    assert_eq!(y.tools, ["lookup"]);
    assert_eq!(
        y.model,
        ModelConfig::Scripted {
            transcript: dir.join("t.json")
        }
    );
    std::fs::write(dir.join("b.toml"), "name = 3\n").unwrap();
    let e = AgentConfig::from_file(dir.join("b.toml"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("b.toml") && e.contains("name"), "{e}");

    let f = factory();
    let mut c = config("x");
    c.agent_type = "nope".into();
    let e = f
        .create_agent_with_model(c, spy(vec![]))
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("unknown agent type `nope`") && e.contains("base"),
        "{e}"
    );
    let mut c = config("x");
    c.tools = vec!["missing_tool".into()];
    let e = f
        .create_agent_with_model(c, spy(vec![]))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("missing_tool"), "{e}");
}

#[test]
fn specializations_add_only_tools_prompt_and_card() {
    let mut f = factory();
    f.register_agent_type(
        "shakespeare",
        Arc::new(
            |cfg: &AgentConfig, catalog: &agentry_core::tools::ToolRegistry| {
                let mut tools = agentry_core::tools::ToolRegistry::new();
                tools.merge(None, catalog);
                Ok(agentry_core::agent::AgentKind {
                    system_prompt: format!("You are {}, a Shakespeare expert.", cfg.name),
                    tools,
                    skills: vec![AgentSkill {
                        id: "plays".into(),
                        name: "Plays".into(),
                        description: "Answers about the plays".into(),
                        tags: vec!["shakespeare".into()],
                        examples: vec!["Who is Hamlet?".into()],
                        input_modes: None,
                        output_modes: None,
                        security: Vec::new(),
                    }],
                    ..Default::default()
                })
            },
        ),
    );
    assert_eq!(f.available_types(), ["base", "shakespeare"]);
    let mut c = config("bard");
    c.agent_type = "shakespeare".into();
    c.tools = vec!["lookup".into()];
    let a = f.create_agent_with_model(c, spy(vec![])).unwrap();
    assert_eq!(
        a.tools().names(),
        ["lookup"],
        "the config's filter narrows the type's tools"
    );
    let card = a.card("http://x/");
    assert_eq!(card.skills[0].id, "plays");
    assert!(
        a.start("q", None).messages[0]
            .content
            .starts_with("You are bard")
    );
}

/// The handle is stream-first: in-process, each step arrives as progress before the reply;
/// over A2A, a remote agent's `working` messages arrive the same way.
#[tokio::test]
async fn an_agent_streams_its_steps_in_process_and_from_afar() {
    use agentry_core::handle::{Ask, Update};
    let script = || {
        vec![
            calls(vec![("c1", "lookup", json!({"name": "Hamlet"}))]),
            calls(vec![("c2", "finish", json!({"answer": "A prince."}))]),
        ]
    };
    let local = factory()
        .create_agent_with_model(config("bard"), spy(script()))
        .unwrap();
    let updates: Vec<Update> = local
        .stream(Ask::text("Who is Hamlet?"))
        .map(Result::unwrap)
        .collect()
        .await;
    let texts: Vec<String> = updates
        .iter()
        .map(|u| match u {
            Update::Progress { text, data } => {
                assert!(data.is_some(), "each step also comes as data: {text}");
                format!("progress: {text}")
            }
            Update::Reply(r) => format!("reply: {}", r.text),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        texts,
        [
            "progress: calling lookup({\"name\":\"Hamlet\"})",
            "progress: lookup returned: Hamlet is the Prince of Denmark.",
            "progress: calling finish({\"answer\":\"A prince.\"})",
            "reply: A prince.",
        ]
    );

    let served = factory()
        .create_agent_with_model(config("bard"), spy(script()))
        .unwrap();
    let (url, _stop) = serve(served).await;
    let remote = RemoteAgent::connect(&url, ClientConfig::default())
        .await
        .unwrap();
    let updates: Vec<Update> = remote
        .stream(Ask::text("Who is Hamlet?"))
        .map(Result::unwrap)
        .collect()
        .await;
    let progress: Vec<&str> = updates
        .iter()
        .filter_map(|u| match u {
            Update::Progress { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        progress.contains(&"lookup returned: Hamlet is the Prince of Denmark."),
        "{progress:?}"
    );
    match updates.last() {
        Some(Update::Reply(r)) => assert_eq!(r.text, "A prince."),
        other => panic!("the stream must end with the reply: {other:?}"),
    }
}

#[tokio::test]
async fn served_agent_streams_steps_and_answers_with_an_artifact() {
    let llm = spy(vec![
        calls(vec![("c1", "lookup", json!({"name": "Hamlet"}))]),
        calls(vec![(
            "c2",
            "finish",
            json!({"answer": "Hamlet is the Prince of Denmark."}),
        )]),
    ]);
    let agent = factory()
        .create_agent_with_model(config("kb"), llm)
        .unwrap();
    let (url, _stop) = serve(agent).await;
    let client = A2aClient::discover(&url, ClientConfig::default())
        .await
        .unwrap();
    assert_eq!(
        client.card().unwrap().skills[0].examples,
        ["Who is Hamlet?"]
    );
    let events: Vec<StreamEvent> = client
        .stream_message(MessageSendParams::new(Message::text(
            Role::User,
            "Who is Hamlet?",
        )))
        .map(Result::unwrap)
        .collect()
        .await;
    let working: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::StatusUpdate(s) if s.status.state == TaskState::Working => {
                s.status.message.as_ref().map(|m| {
                    assert!(
                        m.parts.iter().any(|p| matches!(p, Part::Data(_))),
                        "each step carries a data part"
                    );
                    m.text_content()
                })
            }
            _ => None,
        })
        .collect();
    assert_eq!(working[0], "calling lookup({\"name\":\"Hamlet\"})");
    assert!(
        working[1].starts_with("lookup returned: Hamlet is the Prince"),
        "{working:?}"
    );
    let art = events.iter().find_map(|e| match e {
        StreamEvent::ArtifactUpdate(a) => Some(a.artifact.clone()),
        _ => None,
    });
    assert_eq!(
        join_text(&art.unwrap().parts),
        "Hamlet is the Prince of Denmark."
    );
    assert!(
        matches!(events.last(), Some(StreamEvent::StatusUpdate(s)) if s.status.state == TaskState::Completed)
    );
}

/// A type's `finalize` sees the run's steps: here it appends what the tool returned, and its
/// data goes out as the answer artifact's first data part (served) and as `Reply::data`
/// (in-process).
#[tokio::test]
async fn a_types_finalize_shapes_the_answer_and_its_data_part() {
    let mut f = factory();
    f.register_agent_type(
        "checked",
        Arc::new(
            |_: &AgentConfig, catalog: &agentry_core::tools::ToolRegistry| {
                Ok(agentry_core::agent::AgentKind {
                    system_prompt: "Look things up.".into(),
                    tools: catalog.clone(),
                    finalize: Some(Arc::new(
                        |run: agentry_core::agent::RunResult| -> agentry_core::llm::BoxFuture<
                            'static,
                            agentry_core::agent::Finalized,
                        > {
                            let seen: Vec<String> = run
                                .steps
                                .iter()
                                .filter_map(|s| match s {
                                    agentry_core::react::Step::Observation {
                                        tool, text, ..
                                    } => Some(format!("{tool}: {text}")),
                                    _ => None,
                                })
                                .collect();
                            Box::pin(async move {
                                agentry_core::agent::Finalized {
                                    answer: format!("{}\nSeen: {}", run.answer, seen.join("; ")),
                                    data: json!({"query": run.query, "observations": seen.len()})
                                        .as_object()
                                        .cloned(),
                                }
                            })
                        },
                    )),
                    ..Default::default()
                })
            },
        ),
    );
    let script = || {
        vec![
            calls(vec![("c1", "lookup", json!({"name": "Hamlet"}))]),
            calls(vec![("c2", "finish", json!({"answer": "A prince."}))]),
        ]
    };
    let mut c = config("checker");
    c.agent_type = "checked".into();
    let local = f.create_agent_with_model(c.clone(), spy(script())).unwrap();
    let reply = local
        .ask(agentry_core::a2a::Ask {
            text: "Who is Hamlet?".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        reply.text,
        "A prince.\nSeen: lookup: Hamlet is the Prince of Denmark."
    );
    assert_eq!(reply.data[0]["query"], "Who is Hamlet?");
    assert_eq!(reply.data[0]["observations"], 1);

    let (url, _stop) = serve(f.create_agent_with_model(c, spy(script())).unwrap()).await;
    let client = A2aClient::discover(&url, ClientConfig::default())
        .await
        .unwrap();
    let task = match client
        .send_message(MessageSendParams::new(Message::text(
            Role::User,
            "Who is Hamlet?",
        )))
        .await
        .unwrap()
    {
        SendMessageResult::Task(t) => t,
        other => panic!("expected a task, got {other:?}"),
    };
    let parts = &task.artifacts[0].parts;
    assert!(join_text(parts).starts_with("A prince.\nSeen: lookup:"));
    let Some(Part::Data(d)) = parts.iter().find(|p| matches!(p, Part::Data(_))) else {
        panic!("no data part: {parts:?}");
    };
    assert_eq!(d.data["observations"], 1);
}

#[tokio::test]
async fn ask_user_becomes_input_required_and_memory_is_per_context() {
    let llm = spy(vec![
        calls(vec![("c1", "ask_user", json!({"question": "Which play?"}))]),
        text("Then Hamlet."),
        text("Hello, stranger."),
    ]);
    let agent = factory()
        .create_agent_with_model(config("kb"), llm.clone())
        .unwrap();
    let (url, _stop) = serve(agent).await;
    let client = A2aClient::discover(&url, ClientConfig::default())
        .await
        .unwrap();
    let SendMessageResult::Task(t) = client
        .send_message(MessageSendParams::new(Message::text(
            Role::User,
            "Tell me about a prince",
        )))
        .await
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(t.state(), TaskState::InputRequired);
    assert_eq!(
        t.status.message.as_ref().unwrap().text_content(),
        "Which play?"
    );
    let next = Message::text(Role::User, "The Danish one").in_task(&t.id, &t.context_id);
    let SendMessageResult::Task(t2) = client
        .send_message(MessageSendParams::new(next))
        .await
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(t2.state(), TaskState::Completed);
    // A new context does not see the first conversation.
    let SendMessageResult::Task(_) = client
        .send_message(MessageSendParams::new(Message::text(Role::User, "hi")))
        .await
        .unwrap()
    else {
        panic!()
    };
    let seen = llm.seen.lock().unwrap();
    let contents = |r: &ChatRequest| {
        r.messages
            .iter()
            .map(|m| m.content.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        &contents(&seen[1])[1..],
        ["Tell me about a prince", "Which play?", "The Danish one"]
    );
    assert_eq!(&contents(&seen[2])[1..], ["hi"], "contexts are isolated");
}

#[tokio::test]
async fn cancel_stops_the_loop() {
    let llm = spy(vec![calls(vec![("c1", "slow", json!({}))]), text("never")]);
    let agent = factory()
        .create_agent_with_model(config("kb"), llm.clone())
        .unwrap();
    let (url, _stop) = serve(agent).await;
    let client = A2aClient::discover(&url, ClientConfig::default())
        .await
        .unwrap();
    let mut p = MessageSendParams::new(Message::text(Role::User, "go slow"));
    p.configuration = Some(MessageSendConfiguration {
        blocking: Some(false),
        ..Default::default()
    });
    let SendMessageResult::Task(t) = client.send_message(p).await.unwrap() else {
        panic!()
    };
    // Canceled once the model has been asked (the slow tool is then running).
    while llm.seen.lock().unwrap().is_empty() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        client.cancel_task(&t.id).await.unwrap().state(),
        TaskState::Canceled
    );
    // A window in which a run that ignored the cancel would make its next model call.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        llm.seen.lock().unwrap().len(),
        1,
        "no model call after the cancel"
    );
    assert_eq!(
        client.get_task(&t.id, None).await.unwrap().state(),
        TaskState::Canceled
    );
}

#[tokio::test]
async fn a_remote_agent_is_used_like_a_local_one_and_as_a_tool() {
    let expert_llm = spy(vec![
        text("Hamlet is the Prince of Denmark."),
        text("Ophelia loves Hamlet."),
    ]);
    let expert = factory()
        .create_agent_with_model(config("expert"), expert_llm)
        .unwrap();
    let (url, _stop) = serve(expert).await;
    let remote = Arc::new(
        RemoteAgent::connect(&url, ClientConfig::default())
            .await
            .unwrap(),
    );
    assert_eq!(remote.name(), "expert");
    let r = remote
        .ask(agentry_core::a2a::Ask::text("Who is Hamlet?"))
        .await
        .unwrap();
    assert_eq!(r.text, "Hamlet is the Prince of Denmark.");

    // An orchestrating agent delegates to it through the agent-as-tool wrapper.
    let mut f = AgentFactory::new();
    f.register_tool(AgentTool::new(remote));
    let boss_llm = spy(vec![
        calls(vec![(
            "c1",
            "ask_expert",
            json!({"request": "Who is Ophelia?"}),
        )]),
        calls(vec![(
            "c2",
            "finish",
            json!({"answer": "The expert says: Ophelia loves Hamlet."}),
        )]),
    ]);
    let boss = f
        .create_agent_with_model(config("boss"), boss_llm.clone())
        .unwrap();
    let r = boss
        .ask(agentry_core::a2a::Ask::text("Ask the expert about Ophelia"))
        .await
        .unwrap();
    assert_eq!(r.text, "The expert says: Ophelia loves Hamlet.");
    let seen = boss_llm.seen.lock().unwrap();
    assert!(
        seen[1]
            .messages
            .iter()
            .any(|m| m.role == ChatRole::Tool && m.content == "Ophelia loves Hamlet.")
    );
}

/// Hangs on the chosen call, as a process would that died there.
struct HangOn {
    inner: Arc<Spy>,
    at: usize,
    n: std::sync::atomic::AtomicUsize,
}

impl LlmProvider for HangOn {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            native_tools: true,
            ..Default::default()
        }
    }
    async fn chat(&self, req: ChatRequest) -> Result<ChatResponse, LlmError> {
        if self.n.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 == self.at {
            std::future::pending::<()>().await;
        }
        self.inner.chat(req).await
    }
}

/// A factory with a `lookup` tool that counts its calls, the counter, and a script that
/// looks up, then answers "Done: found it.": the resume tests' run.
fn lookup_rig() -> (
    AgentFactory,
    Arc<std::sync::atomic::AtomicUsize>,
    Vec<ChatResponse>,
) {
    let lookups = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut f = AgentFactory::new();
    let n = lookups.clone();
    f.register_tool(FnTool::new(
        "lookup",
        "Looks up.",
        json!({"type": "object", "properties": {}}),
        move |_| {
            n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async { Ok(ToolOutput::text("found it")) }
        },
    ));
    let script = vec![
        calls(vec![("c1", "lookup", json!({}))]),
        text("Done: found it."),
    ];
    (f, lookups, script)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_run_resumes_from_its_sqlite_checkpoint_after_a_restart() {
    use agentry_a2a::store::{SqliteStore, TaskStore};
    use agentry_core::runs::{Checkpoints, RunStore, SqliteRunStore};
    let dir = agentry_testkit::Scratch::new("resume");
    let db = dir.join("agent.db");
    let (factory, lookups, script) = lookup_rig();

    // First server: the run looks up, then hangs on its second model call ("crashes").
    // The task store and the run store share the file, as agentry serves them.
    let store: Arc<dyn TaskStore> = Arc::new(SqliteStore::open(&db).unwrap());
    let runs = Arc::new(SqliteRunStore::open(&db).unwrap());
    let hang = HangOn {
        inner: spy(script.clone()),
        at: 2,
        n: Default::default(),
    };
    let agent = factory
        .create_agent_with_model(config("kb"), Arc::new(hang))
        .unwrap()
        .with_checkpoints(Checkpoints::new(runs.clone()));
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", l.local_addr().unwrap());
    let svc = AgentService::new(agent.card(&url), Served(Arc::new(agent)), store.clone());
    tokio::spawn(
        A2aServer::new()
            .agent("/", svc)
            .serve(l, std::future::pending()),
    );
    let client = A2aClient::discover(&url, ClientConfig::default())
        .await
        .unwrap();
    let mut p = MessageSendParams::new(Message::text(Role::User, "find it"));
    p.configuration = Some(MessageSendConfiguration {
        blocking: Some(false),
        ..Default::default()
    });
    let SendMessageResult::Task(t) = client.send_message(p).await.unwrap() else {
        panic!()
    };
    for _ in 0..100 {
        if runs
            .get(&t.id)
            .await
            .unwrap()
            .is_some_and(|c| c.contains("found it"))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(lookups.load(std::sync::atomic::Ordering::SeqCst), 1);

    // Second server on the same database: the next message to the task resumes the run from
    // its checkpoint (the lookup is not repeated; only the remaining model call is made).
    let store2: Arc<dyn TaskStore> = Arc::new(SqliteStore::open(&db).unwrap());
    let runs2 = Arc::new(SqliteRunStore::open(&db).unwrap());
    let llm2 = spy(script[1..].to_vec());
    let agent2 = factory
        .create_agent_with_model(config("kb"), llm2.clone())
        .unwrap()
        .with_checkpoints(Checkpoints::new(runs2.clone()));
    let l2 = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url2 = format!("http://{}/", l2.local_addr().unwrap());
    let svc2 = AgentService::new(agent2.card(&url2), Served(Arc::new(agent2)), store2.clone());
    tokio::spawn(
        A2aServer::new()
            .agent("/", svc2)
            .serve(l2, std::future::pending()),
    );
    let client2 = A2aClient::discover(&url2, ClientConfig::default())
        .await
        .unwrap();
    let again = Message::text(Role::User, "go on").in_task(&t.id, &t.context_id);
    let SendMessageResult::Task(done) = client2
        .send_message(MessageSendParams::new(again))
        .await
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(done.state(), TaskState::Completed);
    assert_eq!(agentry_core::a2a::task_text(&done), "Done: found it.");
    assert_eq!(
        lookups.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the finished step was not re-run"
    );
    assert_eq!(llm2.seen.lock().unwrap().len(), 1);
    // The message that resumed the run reached the model, after the finished step.
    let seen = llm2.seen.lock().unwrap()[0].messages.clone();
    let last = seen.last().unwrap();
    assert_eq!(last.content, "go on", "{seen:?}");
    assert!(
        seen.iter().any(|m| m.content.contains("found it")),
        "the lookup's result is still in the conversation: {seen:?}"
    );
    assert_eq!(
        runs2.get(&t.id).await.unwrap(),
        None,
        "a finished run leaves no checkpoint"
    );
}

#[tokio::test]
async fn files_from_tools_become_artifacts_and_data_reaches_the_stream() {
    let mut f = AgentFactory::new();
    f.register_tool(FnTool::new("chart", "Draws a chart.", json!({"type": "object", "properties": {}}), |_| async {
        Ok(ToolOutput {
            text: "[image image/png]".into(),
            data: Some(json!({"structured": {"bars": 3}, "files": [{"kind": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="}]})),
        })
    }));
    let llm = spy(vec![
        calls(vec![("c1", "chart", json!({}))]),
        text("Here is the chart."),
    ]);
    let agent = f.create_agent_with_model(config("artist"), llm).unwrap();
    let (url, _stop) = serve(agent).await;
    let client = A2aClient::discover(&url, ClientConfig::default())
        .await
        .unwrap();
    let events: Vec<StreamEvent> = client
        .stream_message(MessageSendParams::new(Message::text(
            Role::User,
            "chart it",
        )))
        .map(Result::unwrap)
        .collect()
        .await;
    let file = events.iter().find_map(|e| match e {
        StreamEvent::ArtifactUpdate(a) if a.artifact.name.as_deref() == Some("chart") => {
            a.artifact.parts.first().cloned()
        }
        _ => None,
    });
    let Some(Part::File(f)) = file else {
        panic!("no file artifact in {events:?}")
    };
    assert_eq!(f.file.mime_type.as_deref(), Some("image/png"));
    assert_eq!(f.file.content, FileContent::Bytes("iVBORw0KGgo=".into()));
    // The structured output travels in the step's data part.
    let has_structured = events.iter().any(|e| match e {
        StreamEvent::StatusUpdate(s) => s.status.message.as_ref().is_some_and(|m| {
            m.parts.iter().any(|p| matches!(p, Part::Data(d) if d.data.get("data").is_some_and(|x| x["structured"]["bars"] == 3)))
        }),
        _ => false,
    });
    assert!(has_structured);
}

/// A conversation outlives the process: an agent whose run store is a file remembers a
/// context after a restart (before, memory was a map that a restart emptied while the
/// context's tasks survived in SQLite).
#[tokio::test]
async fn a_conversation_survives_a_restart_with_its_run_store() {
    use agentry_core::runs::{Checkpoints, SqliteRunStore};
    let dir = agentry_testkit::Scratch::new("memory");
    let db = dir.join("agent.db");
    let in_context = |text: &str| agentry_core::a2a::Ask {
        text: text.into(),
        context_id: Some("ctx-1".into()),
        ..Default::default()
    };
    let first = factory()
        .create_agent_with_model(config("kb"), spy(vec![text("Hamlet, prince of Denmark.")]))
        .unwrap()
        .with_checkpoints(Checkpoints::new(Arc::new(
            SqliteRunStore::open(&db).unwrap(),
        )));
    first.ask(in_context("Who is the prince?")).await.unwrap();
    drop(first);

    // "Restarted": a new agent on the same file.
    let llm = spy(vec![text("He is Danish.")]);
    let second = factory()
        .create_agent_with_model(config("kb"), llm.clone())
        .unwrap()
        .with_checkpoints(Checkpoints::new(Arc::new(
            SqliteRunStore::open(&db).unwrap(),
        )));
    second.ask(in_context("Where is he from?")).await.unwrap();
    let seen = llm.seen.lock().unwrap()[0]
        .messages
        .iter()
        .map(|m| m.content.clone())
        .collect::<Vec<_>>();
    assert_eq!(
        &seen[1..],
        [
            "Who is the prince?",
            "Hamlet, prince of Denmark.",
            "Where is he from?"
        ]
    );
}

/// A trigger's instructions, given by the server's admission hook for a request that names
/// the trigger in its task envelope, reach the model after the agent's own system prompt;
/// the hook's refusal reaches the client, and nothing runs.
#[tokio::test]
async fn a_triggers_instructions_join_the_agents_prompt_over_a2a() {
    struct Gate;
    impl agentry_a2a::server::Admit for Gate {
        fn admit(
            &self,
            a: agentry_a2a::server::Admission<'_>,
        ) -> Result<Option<String>, agentry_a2a::server::Refused> {
            match a.envelope.trigger_id.as_deref() {
                Some("weekly") => Ok(Some("Write for managers: five bullets at most.".into())),
                Some(other) => Err(agentry_a2a::server::Refused::Invalid(format!(
                    "unknown trigger `{other}`"
                ))),
                None => Ok(None),
            }
        }
    }
    let llm = spy(vec![text("Five bullets.")]);
    let agent = factory()
        .create_agent_with_model(config("kb"), llm.clone())
        .unwrap();
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", l.local_addr().unwrap());
    let svc = AgentService::new(
        agent.card(&url),
        Served::new(agent),
        Arc::new(MemoryStore::default()),
    )
    .with_admission(Arc::new(Gate));
    tokio::spawn(
        A2aServer::new()
            .agent("/", svc)
            .serve(l, std::future::pending()),
    );
    let client = A2aClient::discover(&url, ClientConfig::default())
        .await
        .unwrap();
    let send = |trigger: &str| {
        let mut m = Message::text(Role::User, "Summarize the week");
        let mut env = agentry_a2a::envelope::Envelope::default();
        env.trigger_id = Some(trigger.into());
        env.attach(&mut m);
        client.send_message(MessageSendParams::new(m))
    };
    let refused = send("nightly").await.unwrap_err();
    assert!(
        refused.to_string().contains("unknown trigger `nightly`"),
        "{refused}"
    );
    assert!(
        llm.seen.lock().unwrap().is_empty(),
        "a refused request runs nothing"
    );
    let SendMessageResult::Task(t) = send("weekly").await.unwrap() else {
        panic!()
    };
    assert_eq!(t.state(), TaskState::Completed);
    let system = llm.seen.lock().unwrap()[0].messages[0].content.clone();
    assert!(
        system.starts_with("You answer questions about plays.")
            && system.ends_with("Write for managers: five bullets at most."),
        "{system}"
    );
}

/// A turn asked again after it was cut short (`Ask::rerun`; served, a queued turn that a new
/// worker takes over from one that died) resumes its checkpointed run without taking the
/// request in a second time: the finished tool call is not repeated and the model sees the
/// request once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rerun_resumes_its_checkpoint_without_taking_the_request_in_twice() {
    use agentry_core::handle::{Ask, Update};
    use agentry_core::runs::{Checkpoints, MemoryRunStore, RunStore};
    let (factory, lookups, script) = lookup_rig();
    let runs = Arc::new(MemoryRunStore::default());
    let ask = || Ask {
        task_id: Some("t1".into()),
        ..Ask::text("find it")
    };
    // The first run looks up, then hangs on its second model call: its worker dies there.
    let hang = HangOn {
        inner: spy(script.clone()),
        at: 2,
        n: Default::default(),
    };
    let agent = factory
        .create_agent_with_model(config("kb"), Arc::new(hang))
        .unwrap()
        .with_checkpoints(Checkpoints::new(runs.clone()));
    let first = tokio::spawn(async move { agent.stream(ask()).collect::<Vec<_>>().await });
    for _ in 0..250 {
        if runs
            .get("t1")
            .await
            .unwrap()
            .is_some_and(|c| c.contains("found it"))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    first.abort();
    assert_eq!(lookups.load(std::sync::atomic::Ordering::SeqCst), 1);

    // The same request again, as a rerun, on another agent over the same checkpoints.
    let llm2 = spy(script[1..].to_vec());
    let agent2 = factory
        .create_agent_with_model(config("kb"), llm2.clone())
        .unwrap()
        .with_checkpoints(Checkpoints::new(runs.clone()));
    let updates: Vec<_> = agent2
        .stream(Ask {
            rerun: true,
            ..ask()
        })
        .collect()
        .await;
    match updates.last() {
        Some(Ok(Update::Reply(r))) => assert_eq!(r.text, "Done: found it.", "{updates:?}"),
        other => panic!("no reply: {other:?}"),
    }
    assert_eq!(
        lookups.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the finished step was not re-run"
    );
    let seen = llm2.seen.lock().unwrap()[0].messages.clone();
    let asked = seen.iter().filter(|m| m.content == "find it").count();
    assert_eq!(asked, 1, "the request reached the model once: {seen:?}");
}
