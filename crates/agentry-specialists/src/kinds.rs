//! The specialists as agent types of the core factory: `rag` and `ppt` (`data` is
//! `agentry_data::kind`). Each is the
//! same ReAct engine as every agent; the type only adds its tools, prompt and card skill, so a
//! config chooses the model, the limits and any MCP servers:
//!
//! ```toml
//! name = "plays"
//! agent_type = "rag"
//! options = { collection = "shakespeare" }
//! [model]
//! provider = "openai"
//! base_url = "http://127.0.0.1:8000/v1"
//! model = "qwen2.5-7b-instruct"
//! ```
//!
//! These are for models that drive the tools themselves. The specialists in [`crate::agents`]
//! run the same tools as fixed pipelines, which is what a small local model needs.
//!
//! The `rag` type does not trust the model to cite: its [`finalize`](AgentKind::finalize)
//! appends the sources of the passages the run retrieved (those given to `cite_sources`, when
//! the model called it) and returns them as a data part, with `grounded: false` when no search
//! found anything, and the key points of those passages for the request (extractive, each cited
//! to its sentence), so a PPT agent can take the answer as research.

use std::path::PathBuf;
use std::sync::Arc;

use agentry_a2a::model::AgentSkill;
use agentry_core::agent::{AgentConfig, AgentError, AgentFactory, AgentKind, Finalized, RunResult};
use agentry_core::llm::BoxFuture;
use agentry_core::react::Step;
use agentry_core::tools::ToolRegistry;
use serde_json::{Map, Value, json};

use crate::pptx::{Decks, ppt_tools};
use crate::rag::keypoints::key_points;
use crate::rag::{Citation, KnowledgeBase, rag_tools};

/// What the types need from the host: the knowledge base the `rag` type searches (opened by
/// the host, which knows the embedder; `None` makes a `rag` config fail with a clear error).
#[derive(Clone, Default)]
pub struct Resources {
    /// The knowledge base `rag` agents search.
    pub kb: Option<KnowledgeBase>,
}

/// Sources appended to an answer at most.
const MAX_SOURCES: usize = 8;
/// Key points extracted from the cited passages for the data part.
const KEY_POINTS: usize = 5;

const RAG_PROMPT: &str = "You answer questions from the document collection `{collection}`, \
     and only from it. First call rag_search with the key words of the question (search again \
     with other words if nothing fits). Then call cite_sources with the chunk_id of each passage \
     you use. Then call finish with a short answer that quotes or paraphrases those passages and \
     marks each claim with its citation number, like [1]. If the passages do not answer the \
     question, finish by saying that the documents hold no evidence for it. Never answer from \
     memory.";

const PPT_PROMPT: &str = "You build PowerPoint decks. Call create_presentation once (it returns \
     the presentation id), then add_slide for each slide with its title, bullets and speaker \
     notes, then save_presentation, and finish with the saved file's path. Keep bullets short \
     and put sources in the notes.";

fn skill(
    id: &str,
    name: &str,
    description: String,
    tags: &[&str],
    examples: &[String],
) -> AgentSkill {
    AgentSkill {
        id: id.into(),
        name: name.into(),
        description,
        tags: tags.iter().map(|t| (*t).to_owned()).collect(),
        examples: examples.to_vec(),
        input_modes: None,
        output_modes: None,
        security: Vec::new(),
    }
}

/// Registers `rag` and `ppt`.
///
/// Options: `rag`: `collection` (default `documents`); `ppt`: `output`, the folder decks are
/// written to (default `presentations`), `pictures`, the folders pictures may come from.
pub fn register(factory: &mut AgentFactory, resources: Resources) {
    let kb = resources.kb;
    factory.register_agent_type(
        "rag",
        Arc::new(move |cfg: &AgentConfig, _: &ToolRegistry| {
            let kb = kb.clone().ok_or_else(|| AgentError::Invalid {
                agent: cfg.name.clone(),
                reason: "the rag type needs a knowledge base, and none was opened here".into(),
            })?;
            let collection = cfg
                .option_str("collection")
                .unwrap_or("documents")
                .to_owned();
            Ok(AgentKind {
                system_prompt: cfg
                    .system_prompt
                    .clone()
                    .unwrap_or_else(|| RAG_PROMPT.replace("{collection}", &collection)),
                tools: rag_tools(&kb, &collection),
                skills: vec![skill(
                    "answer",
                    "Answer from the documents",
                    format!(
                        "Answers questions from the `{collection}` collection with citations \
                         (document, section, byte offsets); says so when the documents hold no \
                         evidence."
                    ),
                    &["rag", "search", "citations"],
                    &cfg.examples_or(&["Who is Hamlet?", "What does the ghost ask of Hamlet?"]),
                )],
                finalize: Some(Arc::new(
                    move |run: RunResult| -> BoxFuture<'static, Finalized> {
                        let (kb, collection) = (kb.clone(), collection.clone());
                        Box::pin(async move { cite(&kb, &collection, run).await })
                    },
                )),
                ..Default::default()
            })
        }),
    );
    factory.register_agent_type(
        "ppt",
        Arc::new(|cfg: &AgentConfig, _: &ToolRegistry| {
            let out = PathBuf::from(cfg.option_str("output").unwrap_or("presentations"));
            // `options.pictures`: folders pictures may come from (none by default).
            let mut decks = Decks::new(out);
            for f in cfg.option_strings("pictures")? {
                decks = decks
                    .with_picture_folder(&f)
                    .map_err(|e| AgentError::Invalid {
                        agent: cfg.name.clone(),
                        reason: format!("options.pictures: {f}: {e}"),
                    })?;
            }
            Ok(AgentKind {
                system_prompt: cfg
                    .system_prompt
                    .clone()
                    .unwrap_or_else(|| PPT_PROMPT.into()),
                tools: ppt_tools(&decks),
                skills: vec![skill(
                    "build_deck",
                    "Build a deck",
                    "Builds a .pptx with a title slide, bullet slides, speaker notes and pictures."
                        .into(),
                    &["pptx", "presentation"],
                    &cfg.examples_or(&["Make a 3-slide deck about the ghost in Hamlet"]),
                )],
                ..Default::default()
            })
        }),
    );
}

/// Chunk ids from a tool's structured output (`[{"chunk_id": …}, …]`).
fn chunk_ids(data: Option<&Value>) -> Vec<i64> {
    data.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|p| p.get("chunk_id").and_then(Value::as_i64))
                .collect()
        })
        .unwrap_or_default()
}

/// The `rag` type's finalize: the passages the model chose with `cite_sources` (its last
/// successful call), else those its searches returned, as numbered sources after the answer
/// and as citations in a data part, with the key points of those passages for the request
/// (extractive, cited to the sentence: what the PPT agent takes as research).
async fn cite(kb: &KnowledgeBase, collection: &str, run: RunResult) -> Finalized {
    let RunResult {
        query,
        answer,
        steps,
    } = run;
    let mut retrieved: Vec<i64> = Vec::new();
    let mut chosen: Option<Vec<i64>> = None;
    for s in &steps {
        if let Step::Observation {
            tool,
            is_error: false,
            data,
            ..
        } = s
        {
            match tool.as_str() {
                "rag_search" => retrieved.extend(chunk_ids(data.as_ref())),
                "cite_sources" => chosen = Some(chunk_ids(data.as_ref())),
                _ => {}
            }
        }
    }
    let mut ids = chosen.filter(|c| !c.is_empty()).unwrap_or(retrieved);
    let mut seen = std::collections::HashSet::new();
    ids.retain(|id| seen.insert(*id));
    ids.truncate(MAX_SOURCES);
    let hits = kb.chunks_by_id(&ids).unwrap_or_else(|e| {
        tracing::warn!("cannot cite chunks {ids:?}: {e}");
        Vec::new()
    });
    let key_points = key_points(&**kb.embedder(), &query, &hits, KEY_POINTS)
        .await
        .unwrap_or_else(|e| {
            tracing::warn!("no key points from chunks {ids:?}: {e}");
            Vec::new()
        });
    let citations: Vec<Citation> = hits
        .into_iter()
        .enumerate()
        .map(|(i, h)| Citation::of(i + 1, h))
        .collect();
    let mut text = answer.trim().to_owned();
    if !citations.is_empty() {
        text.push_str("\n\nSources:\n");
        for c in &citations {
            text.push_str(&format!("[{}] {}\n", c.n, c.label()));
        }
    }
    let data: Map<String, Value> = match json!({
        "collection": collection,
        "grounded": !citations.is_empty(),
        "citations": citations,
        "key_points": key_points,
        "method": "react",
    }) {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    Finalized {
        answer: text,
        data: Some(data),
    }
}
