//! The RAG specialist: documents in ([`store::KnowledgeBase::ingest`]), cited answers out
//! ([`RagAgent`]).
//!
//! The agent retrieves first (hybrid search), extracts quoted key points from the evidence
//! without an LLM ([`keypoints`]), and only then, when a capable model is configured, lets the
//! model write a summary that must cite the numbered evidence; an answer citing nothing it was
//! given is discarded for the extractive one. When nothing relevant is found it says so.

pub mod chunk;
pub mod keypoints;
pub mod parse;
pub mod store;
mod tools;
pub mod vectors;

use std::sync::Arc;

use agentry_core::llm::{ChatMessage, ChatRequest, DynLlmProvider};
use serde::Serialize;

pub use keypoints::{Citation, KeyPoint};
pub use store::{Hit, IngestReport, KnowledgeBase, Progress};
pub use tools::rag_tools;

/// Why ingestion or retrieval failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RagError {
    #[error("{0}")]
    /// A document that cannot be read.
    Parse(String),
    #[error("knowledge base: {0}")]
    /// The knowledge base failed.
    Store(String),
    #[error("embedder: {0}")]
    /// The embedder failed.
    Embedder(String),
    #[error("{0}")]
    /// A request that cannot be answered as given.
    Input(String),
    #[error(
        "no collection `{name}` (collections: {known}); ingest documents with `agentry ingest PATH --collection {name}`"
    )]
    /// The collection does not exist.
    UnknownCollection {
        /// The collection asked for.
        name: String,
        /// Those there are.
        known: String,
    },
}

/// An answer with its evidence.
#[derive(Debug, Clone, Serialize)]
pub struct RagAnswer {
    /// The question asked.
    pub question: String,
    /// The collection searched.
    pub collection: String,
    /// The answer text, citing key points as `[n]`.
    pub answer: String,
    /// False when the collection held no relevant evidence.
    pub grounded: bool,
    /// The quoted evidence, numbered as the answer cites it.
    pub key_points: Vec<KeyPoint>,
    /// How the answer text was written: `extractive` or `model`.
    pub method: String,
}

/// Below this cosine similarity between the question and its best sentence the evidence is
/// treated as missing (MiniLM: unrelated English text scores about 0.0-0.25).
const MIN_SIMILARITY: f32 = 0.35;

/// Retrieval settings of a RAG agent.
#[derive(Clone)]
pub struct RagAgent {
    /// The knowledge base.
    pub kb: KnowledgeBase,
    /// The collection it searches.
    pub collection: String,
    /// Chunks retrieved per question.
    pub top_k: usize,
    /// Key points extracted.
    pub points: usize,
    /// A model that may write the summary from the key points; `None` keeps it extractive.
    pub writer: Option<Arc<dyn DynLlmProvider>>,
}

impl RagAgent {
    /// An agent over `collection` of `kb` with the default settings (12 chunks, 6 key points, extractive).
    pub fn new(kb: KnowledgeBase, collection: &str) -> Self {
        RagAgent {
            kb,
            collection: collection.to_owned(),
            top_k: 12,
            points: 6,
            writer: None,
        }
    }

    /// Answers `question` from the collection.
    pub async fn answer(&self, question: &str, points: usize) -> Result<RagAnswer, RagError> {
        let hits = self
            .kb
            .search(&self.collection, question, self.top_k.max(points * 2))
            .await?;
        let kps = keypoints::key_points(&**self.kb.embedder(), question, &hits, points).await?;
        let best = kps.iter().map(|k| k.similarity).fold(f32::MIN, f32::max);
        tracing::debug!(best, "best evidence similarity");
        let grounded = best >= MIN_SIMILARITY;
        if !grounded {
            return Ok(RagAnswer {
                question: question.to_owned(),
                collection: self.collection.clone(),
                answer: format!(
                    "The documents in `{}` hold no evidence that answers this ({}).",
                    self.collection,
                    if hits.is_empty() {
                        "nothing matched".to_owned()
                    } else {
                        format!("{} passages searched, none relevant", hits.len())
                    }
                ),
                grounded: false,
                key_points: Vec::new(),
                method: "extractive".into(),
            });
        }
        let extractive = extractive_answer(&kps);
        let (answer, method) = match &self.writer {
            Some(llm) => match written_answer(&**llm, question, &kps).await {
                Some(a) => (a, "model"),
                None => (extractive, "extractive"),
            },
            None => (extractive, "extractive"),
        };
        Ok(RagAnswer {
            question: question.to_owned(),
            collection: self.collection.clone(),
            answer,
            grounded: true,
            key_points: kps,
            method: method.into(),
        })
    }
}

/// The key points as a cited list.
pub fn extractive_answer(kps: &[KeyPoint]) -> String {
    let mut s = String::from("From the documents:\n");
    for k in kps {
        let who = k
            .speaker
            .as_ref()
            .map(|sp| format!("{sp}: "))
            .unwrap_or_default();
        s.push_str(&format!("- {who}\"{}\" [{}]\n", k.text, k.citation.n));
    }
    s.push_str("\nSources:\n");
    for k in kps {
        s.push_str(&format!("[{}] {}\n", k.citation.n, k.citation.label()));
    }
    s
}

/// A model-written summary that cites the evidence, or `None` when the model cited nothing it
/// was given (the caller falls back to the extractive answer).
async fn written_answer(
    llm: &dyn DynLlmProvider,
    question: &str,
    kps: &[KeyPoint],
) -> Option<String> {
    let evidence: String = kps
        .iter()
        .map(|k| format!("[{}] {}\n", k.citation.n, k.text))
        .collect();
    let req = ChatRequest {
        messages: vec![
            ChatMessage::system(
                "Answer the question in two to four sentences using only the numbered evidence. \
                 Cite evidence as [n] after each claim. If the evidence does not answer it, say so.",
            ),
            ChatMessage::user(format!("Evidence:\n{evidence}\nQuestion: {question}")),
        ],
        temperature: Some(0.0),
        max_tokens: Some(300),
        ..Default::default()
    };
    let text = llm.chat_dyn(req).await.ok()?.message.content;
    let cites_given = (1..=kps.len()).any(|n| text.contains(&format!("[{n}]")));
    let cites_unknown = text
        .match_indices('[')
        .filter_map(|(i, _)| {
            let rest = &text[i + 1..];
            let end = rest.find(']')?;
            rest[..end].parse::<usize>().ok()
        })
        .any(|n| n == 0 || n > kps.len());
    if !cites_given || cites_unknown {
        tracing::info!("model summary discarded: it cites no given evidence");
        return None;
    }
    let mut s = text.trim().to_owned();
    s.push_str("\n\nSources:\n");
    for k in kps {
        s.push_str(&format!("[{}] {}\n", k.citation.n, k.citation.label()));
    }
    Some(s)
}
