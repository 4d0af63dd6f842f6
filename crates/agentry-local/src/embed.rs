//! The local embedder: a BERT-family sentence-transformers model (all-MiniLM-L6-v2 by default,
//! all-mpnet-base-v2 for the tool router; weights read by candle, the forward pass in
//! `models::bert`), with mean pooling over each text's tokens and L2 normalization, as
//! `sentence-transformers` computes it.

use std::path::Path;
use std::sync::Arc;

use crate::models::bert::{BertModel, Config, Scratch, Tokens};
use agentry_core::embed::{EmbedError, Embedder};
use candle_core::{DType, Device};
use candle_nn::VarBuilder;
use tokenizers::{Tokenizer, TruncationParams};

use crate::{LocalError, paths};

/// Tokens per forward pass (texts are packed without padding): large enough that the matrix
/// products run near the CPU's peak, small enough that the activations (about 9 KB per
/// token for MiniLM: 37 MB at this size) stay a small part of memory. They are allocated once
/// per call and reused by every batch.
const BATCH_TOKENS: usize = 4096;
/// sentence-transformers' `max_seq_length` for MiniLM, used when the folder has no
/// `sentence_bert_config.json` to say a model's own (all-mpnet-base-v2: 384).
const MAX_TOKENS: usize = 256;

struct Inner {
    model: BertModel,
    tokenizer: Tokenizer,
    dims: usize,
}

/// A loaded embedder; clones share the model.
#[derive(Clone)]
pub struct LocalEmbedder {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("dims", &self.inner.dims)
            .finish()
    }
}

fn err(e: impl std::fmt::Display) -> LocalError {
    LocalError::Model(e.to_string())
}

impl LocalEmbedder {
    /// Loads the default embedder ([`paths::embedder_path`]).
    pub fn load_default() -> Result<Self, LocalError> {
        Self::load(&paths::embedder_path())
    }

    /// Loads `model.safetensors`, `config.json` and `tokenizer.json` from `dir`.
    pub fn load(dir: &Path) -> Result<Self, LocalError> {
        for f in ["model.safetensors", "config.json", "tokenizer.json"] {
            paths::require(&dir.join(f), "embedding model file")?;
        }
        let config: Config =
            serde_json::from_slice(&std::fs::read(dir.join("config.json")).map_err(err)?)
                .map_err(|e| err(format!("config.json: {e}")))?;
        let mut tokenizer = Tokenizer::from_file(dir.join("tokenizer.json")).map_err(err)?;
        #[derive(serde::Deserialize)]
        struct SentenceConfig {
            max_seq_length: usize,
        }
        let max_tokens = match std::fs::read(dir.join("sentence_bert_config.json")) {
            Ok(b) => {
                serde_json::from_slice::<SentenceConfig>(&b)
                    .map_err(|e| err(format!("sentence_bert_config.json: {e}")))?
                    .max_seq_length
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => MAX_TOKENS,
            Err(e) => return Err(err(format!("sentence_bert_config.json: {e}"))),
        };
        // The encoder packs a batch's texts itself: no padding (the file asks for 128).
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_tokens.min(config.max_position_embeddings),
                ..Default::default()
            }))
            .map_err(err)?;
        let weights = std::fs::read(dir.join("model.safetensors")).map_err(err)?;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu)
            .map_err(err)?;
        let model = BertModel::load(vb, &config).map_err(err)?;
        Ok(LocalEmbedder {
            inner: Arc::new(Inner {
                model,
                tokenizer,
                dims: config.hidden_size,
            }),
        })
    }

    /// Dimensions of each vector.
    pub fn dims(&self) -> usize {
        self.inner.dims
    }

    /// Embeds texts, blocking the calling thread (the products run on the rayon pool:
    /// `RAYON_NUM_THREADS`). Texts are packed into batches of up to 4,096 tokens with no
    /// padding; each vector is the same whatever batch its text lands in.
    pub fn embed_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LocalError> {
        let inner = &*self.inner;
        let mut out = Vec::with_capacity(texts.len());
        let mut scratch = Scratch::default();
        // Tokenize a slice of texts at a time, so that a large call holds the encodings of
        // one slice only.
        for slice in texts.chunks(256) {
            let enc = inner
                .tokenizer
                .encode_batch(slice.to_vec(), true)
                .map_err(err)?;
            let mut batch: Vec<Tokens> = Vec::new();
            let mut tokens = 0;
            for e in &enc {
                let len = e.get_ids().len();
                if !batch.is_empty() && tokens + len > BATCH_TOKENS {
                    out.extend(inner.model.embed(&batch, &mut scratch).map_err(err)?);
                    batch.clear();
                    tokens = 0;
                }
                batch.push(Tokens {
                    ids: e.get_ids(),
                    type_ids: e.get_type_ids(),
                });
                tokens += len;
            }
            if !batch.is_empty() {
                out.extend(inner.model.embed(&batch, &mut scratch).map_err(err)?);
            }
        }
        Ok(out)
    }
}

impl Embedder for LocalEmbedder {
    fn dimensions(&self) -> usize {
        self.inner.dims
    }

    async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, EmbedError> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.embed_blocking(&texts))
            .await
            .map_err(|e| EmbedError::Model(e.to_string()))?
            .map_err(|e| EmbedError::Model(e.to_string()))
    }
}
