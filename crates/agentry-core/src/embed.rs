//! Text embeddings: the [`Embedder`] trait that retrieval and tool routing use, and its
//! object-safe twin. `agentry-local` implements it in-process (MiniLM); any OpenAI-compatible
//! `/v1/embeddings` server can stand behind it too.

use std::future::Future;

use crate::llm::BoxFuture;

/// An embedding failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmbedError {
    #[error("embedding model: {0}")]
    /// The model failed or could not be loaded.
    Model(String),
    #[error("embedding input: {0}")]
    /// An input it cannot embed.
    Input(String),
}

/// Turns texts into vectors. Implementations return one L2-normalized vector per input, so a
/// dot product is the cosine similarity.
pub trait Embedder: Send + Sync + 'static {
    /// Length of every vector.
    fn dimensions(&self) -> usize;
    /// One vector per text, in order.
    fn embed(
        &self,
        texts: Vec<String>,
    ) -> impl Future<Output = Result<Vec<Vec<f32>>, EmbedError>> + Send;
}

/// The object-safe twin of [`Embedder`].
pub trait DynEmbedder: Send + Sync + 'static {
    /// Length of every vector.
    fn dimensions(&self) -> usize;
    /// [`Embedder::embed`], boxed.
    fn embed_dyn(&self, texts: Vec<String>) -> BoxFuture<'_, Result<Vec<Vec<f32>>, EmbedError>>;
}

impl<T: Embedder> DynEmbedder for T {
    fn dimensions(&self) -> usize {
        Embedder::dimensions(self)
    }
    fn embed_dyn(&self, texts: Vec<String>) -> BoxFuture<'_, Result<Vec<Vec<f32>>, EmbedError>> {
        Box::pin(self.embed(texts))
    }
}

/// Dot product (the cosine similarity of normalized vectors).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}
