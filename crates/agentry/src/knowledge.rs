//! The knowledge base a process uses: one SQLite file, embedded with the local MiniLM (feature
//! `local`) or with any OpenAI-compatible `/v1/embeddings` server named by `AGENTRY_EMBED_URL`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentry_specialists::rag::KnowledgeBase;

use crate::Error;

/// The knowledge base file: `db`, else `$AGENTRY_HOME/knowledge.db`.
pub fn path(db: Option<&Path>) -> PathBuf {
    db.map(Path::to_owned)
        .unwrap_or_else(|| crate::home_dir().join("knowledge.db"))
}

/// Opens (creating) the knowledge base at [`path`]. The embedder is the endpoint at
/// `AGENTRY_EMBED_URL` when set (model `AGENTRY_EMBED_API_MODEL`, key `OPENAI_API_KEY`),
/// else the embedded MiniLM.
pub async fn open(db: Option<&Path>) -> Result<KnowledgeBase, Error> {
    let file = path(db);
    if let Ok(url) = std::env::var("AGENTRY_EMBED_URL") {
        let model = std::env::var("AGENTRY_EMBED_API_MODEL").unwrap_or_else(|_| "default".into());
        let e = agentry_core::llm::OpenAiEmbedder::connect(agentry_core::llm::OpenAiConfig {
            base_url: url,
            model: model.clone(),
            ..Default::default()
        })
        .await?;
        return Ok(KnowledgeBase::open(
            &file,
            Arc::new(e),
            &format!("openai:{model}"),
        )?);
    }
    #[cfg(feature = "local")]
    {
        let embedder = agentry_local::provider::shared_embedder(None)?;
        let id = agentry_local::paths::embedder_path()
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "all-minilm-l6-v2".into());
        Ok(KnowledgeBase::open(
            &file,
            embedder as Arc<dyn agentry_core::embed::DynEmbedder>,
            &id,
        )?)
    }
    #[cfg(not(feature = "local"))]
    Err(Error::Disabled {
        what: "a knowledge base without AGENTRY_EMBED_URL (the embedded MiniLM)".into(),
        feature: "local",
    })
}

/// The embedded chat model as the RAG agent's [`Reader`](agentry_specialists::rag::brief::Reader):
/// which of the set pieces a brief finds are the ones people quote, and where in them to
/// quote. Loaded at its first reading, so an agent that never briefs a play never loads it;
/// `None` (with a warning) when its file is missing: briefs then take the longest speeches
/// and quote their openings.
#[cfg(feature = "local")]
pub fn reader() -> Option<Arc<dyn agentry_specialists::rag::brief::Reader>> {
    let path = agentry_local::paths::chat_model_path();
    if !path.exists() {
        tracing::warn!(
            "briefs without a reader: no chat model at {} (scripts/fetch-models.sh)",
            path.display()
        );
        return None;
    }
    Some(Arc::new(ModelReader(std::sync::OnceLock::new())))
}

/// No reader without the embedded models.
#[cfg(not(feature = "local"))]
pub fn reader() -> Option<Arc<dyn agentry_specialists::rag::brief::Reader>> {
    None
}

/// The chat model, loaded on first use (`None` when it would not load).
#[cfg(feature = "local")]
struct ModelReader(std::sync::OnceLock<Option<Arc<agentry_local::ChatModel>>>);

#[cfg(feature = "local")]
impl agentry_specialists::rag::brief::Reader for ModelReader {
    fn familiarity(&self, lead: &str, lines: &[&str]) -> Option<Vec<f32>> {
        let model = self.0.get_or_init(|| {
            agentry_local::provider::shared_chat_model(None)
                .inspect_err(|e| tracing::warn!("briefs without a reader: {e}"))
                .ok()
        });
        model
            .as_ref()?
            .line_familiarity(lead, lines)
            .inspect_err(|e| tracing::warn!("brief: the reader could not read a passage: {e}"))
            .ok()
    }
}
