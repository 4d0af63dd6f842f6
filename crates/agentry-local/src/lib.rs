//! # agentry-local
//!
//! The embedded defaults: models that run in-process on a CPU, so agents work offline with no
//! API key.
//!
//! - [`chat`]: a llama-family GGUF chat model on candle (tokenizer and chat template from the
//!   file, KV cache, prefix cache, sampling, stop strings).
//! - [`constrain`]: token masks that force output to match a JSON Schema or a tool call over
//!   the agent's actual tools.
//! - [`embed`]: a sentence-transformers embedder (MiniLM) implementing
//!   [`agentry_core::embed::Embedder`].
//! - [`route`]: tool routing by embedding similarity, so a tiny model picks the right tool.
//! - [`provider`]: [`LocalProvider`], the [`agentry_core::llm::LlmProvider`] over all of this.
//! - [`serve`]: the local models behind an OpenAI-compatible HTTP endpoint.
//! - [`eval`]: tool-choice accuracy of a provider over a suite of requests.
//! - [`paths`]: where the model files are (`scripts/fetch-models.sh` fetches them).

#![warn(missing_docs)]

pub mod chat;
pub mod constrain;
pub mod embed;
pub mod eval;
mod models;
pub mod paths;
pub mod provider;
pub mod route;
pub mod serve;

pub use chat::{ChatModel, GenerateOptions, Generation};
pub use embed::LocalEmbedder;
pub use provider::{LocalConfig, LocalProvider};
pub use route::ToolRouter;

/// An embedded-model failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LocalError {
    /// A model file is not where it was looked for; the text says how to fetch it.
    #[error("{0}")]
    MissingModel(String),
    /// The model could not be loaded or run.
    #[error("local model: {0}")]
    Model(String),
    /// Prompt and completion do not fit the model's context.
    #[error("prompt and completion need {tokens} tokens; the model's context holds {max}")]
    ContextTooLong {
        /// Tokens needed.
        tokens: usize,
        /// Tokens the context holds.
        max: usize,
    },
    /// A `response_format` or tool schema constrained decoding cannot follow.
    #[error(transparent)]
    Schema(#[from] constrain::SchemaError),
}

/// Sets how many threads candle's CPU kernels use: `CANDLE_NUM_THREADS` (its pool for
/// element-wise work) and `RAYON_NUM_THREADS` (which candle reads for its matrix products'
/// threads and its rayon pool: with `CANDLE_NUM_THREADS` alone, the products still ran on
/// every core). Candle sizes both once per process, at the first use, so this only works
/// before any model runs.
///
/// # Safety
/// Writes an environment variable: call it before other threads start (at the top of `main`).
#[allow(unsafe_code)]
pub unsafe fn set_threads(n: usize) {
    let n = n.max(1).to_string();
    // SAFETY: the caller guarantees no other thread reads or writes the environment now.
    unsafe {
        std::env::set_var("CANDLE_NUM_THREADS", &n);
        std::env::set_var("RAYON_NUM_THREADS", &n);
    }
}
