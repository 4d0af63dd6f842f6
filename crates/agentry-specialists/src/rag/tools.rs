//! The RAG agent's tools, for models that drive retrieval themselves (and for MCP):
//! `rag_search`, `summarize`, `cite_sources`.

use agentry_core::tools::{Tool, ToolRegistry};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::keypoints::{Citation, KeyPoint, key_points};
use super::store::Hit;
use super::{KnowledgeBase, RagError};

/// The three tools over one knowledge base; `collection` is the default collection.
pub fn rag_tools(kb: &KnowledgeBase, collection: &str) -> ToolRegistry {
    let mut r = ToolRegistry::new();
    let kb = kb.clone();
    r.add(RagSearch {
        kb: kb.clone(),
        collection: collection.to_owned(),
    });
    r.add(Summarize { kb: kb.clone() });
    r.add(CiteSources { kb });
    r
}

struct RagSearch {
    kb: KnowledgeBase,
    collection: String,
}

#[derive(Deserialize, JsonSchema)]
struct SearchArgs {
    /// What to look for, in words.
    query: String,
    /// Collection to search (default: the agent's).
    #[serde(default)]
    collection: Option<String>,
    /// Passages to return (1-20, default 5).
    #[serde(default)]
    k: Option<usize>,
}

#[derive(Serialize)]
struct Passage {
    chunk_id: i64,
    source: String,
    text: String,
}

impl Tool for RagSearch {
    const NAME: &'static str = "rag_search";
    type Args = SearchArgs;
    type Output = Vec<Passage>;
    type Error = RagError;

    fn description(&self) -> String {
        "Searches the document collection (keywords and meaning) and returns the best passages \
         with their chunk ids and sources."
            .into()
    }

    fn examples(&self) -> Vec<String> {
        vec![
            "Who is Hamlet?".into(),
            "What do our documents say about the ghost?".into(),
            "Find passages about revenge".into(),
        ]
    }

    async fn call(&self, a: SearchArgs) -> Result<Vec<Passage>, RagError> {
        let c = a.collection.unwrap_or_else(|| self.collection.clone());
        let hits = self
            .kb
            .search(&c, &a.query, a.k.unwrap_or(5).clamp(1, 20))
            .await?;
        Ok(hits
            .into_iter()
            .map(|h| Passage {
                chunk_id: h.chunk_id,
                source: format!("{}, {}", h.document, h.section),
                text: h.text.chars().take(600).collect(),
            })
            .collect())
    }
}

struct Summarize {
    kb: KnowledgeBase,
}

#[derive(Deserialize, JsonSchema)]
struct SummarizeArgs {
    /// The text to summarize.
    text: String,
    /// What the summary should focus on (default: the text's own gist).
    #[serde(default)]
    focus: Option<String>,
    /// Key points to keep (1-10, default 4).
    #[serde(default)]
    points: Option<usize>,
}

impl Tool for Summarize {
    const NAME: &'static str = "summarize";
    type Args = SummarizeArgs;
    type Output = Vec<String>;
    type Error = RagError;

    fn description(&self) -> String {
        "Summarizes a text as its most relevant sentences (quoted, not paraphrased).".into()
    }

    async fn call(&self, a: SummarizeArgs) -> Result<Vec<String>, RagError> {
        let hit = Hit {
            chunk_id: 0,
            document: String::new(),
            title: String::new(),
            path: String::new(),
            section: String::new(),
            page: None,
            start: 0,
            end: a.text.len(),
            text: a.text.clone(),
            score: 0.0,
            vector_rank: None,
            keyword_rank: None,
        };
        let focus = a
            .focus
            .unwrap_or_else(|| a.text.chars().take(300).collect());
        let kps: Vec<KeyPoint> = key_points(
            &**self.kb.embedder(),
            &focus,
            &[hit],
            a.points.unwrap_or(4).clamp(1, 10),
        )
        .await?;
        Ok(kps.into_iter().map(|k| k.text).collect())
    }
}

struct CiteSources {
    kb: KnowledgeBase,
}

#[derive(Deserialize, JsonSchema)]
struct CiteArgs {
    /// Chunk ids returned by rag_search.
    chunk_ids: Vec<i64>,
}

impl Tool for CiteSources {
    const NAME: &'static str = "cite_sources";
    type Args = CiteArgs;
    type Output = Vec<Citation>;
    type Error = RagError;

    fn description(&self) -> String {
        "Turns chunk ids from rag_search into numbered citations: document, section, page and \
         byte offsets."
            .into()
    }

    async fn call(&self, a: CiteArgs) -> Result<Vec<Citation>, RagError> {
        let hits = self.kb.chunks_by_id(&a.chunk_ids)?;
        Ok(hits
            .into_iter()
            .enumerate()
            .map(|(i, h)| Citation::of(i + 1, h))
            .collect())
    }
}
