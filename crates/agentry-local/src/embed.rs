//! The local embedder: a BERT-family sentence-transformers model (all-MiniLM-L6-v2 by default)
//! on candle, with mean pooling over the attention mask and L2 normalization, as
//! `sentence-transformers` computes it.

use std::path::Path;
use std::sync::Arc;

use crate::models::bert::{BertModel, Config};
use agentry_core::embed::{EmbedError, Embedder};
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use crate::{LocalError, paths};

/// Texts per forward pass. 16 keeps the largest activation (16 x 256 tokens x 1,536 floats,
/// 25 MB) under glibc's 32 MB ceiling for serving allocations from the heap: at 32 each
/// feed-forward tensor was a fresh `mmap` whose pages the kernel faulted in and zeroed, about
/// a tenth of the time (profiled; 20 -> 24-26 chunks/s measured A/B on Macbeth, 2 threads).
const BATCH: usize = 16;
/// sentence-transformers' `max_seq_length` for MiniLM.
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
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..Default::default()
        }));
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
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

    /// Embeds texts on the calling thread (blocking), in batches of similar length (as
    /// sentence-transformers does): a batch is padded to its longest text, so mixing short
    /// and long texts would spend most of the work on padding.
    pub fn embed_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LocalError> {
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(texts[i].len()));
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        for idx in order.chunks(BATCH) {
            let batch: Vec<String> = idx.iter().map(|&i| texts[i].clone()).collect();
            for (&i, v) in idx.iter().zip(self.batch(batch)?) {
                out[i] = v;
            }
        }
        Ok(out)
    }

    fn batch(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, LocalError> {
        let inner = &*self.inner;
        let enc = inner.tokenizer.encode_batch(texts, true).map_err(err)?;
        let n = enc.len();
        let len = enc.first().map_or(0, |e| e.get_ids().len());
        let flat = |f: &dyn Fn(&tokenizers::Encoding) -> &[u32]| -> Vec<u32> {
            enc.iter().flat_map(|e| f(e).iter().copied()).collect()
        };
        let dev = &Device::Cpu;
        let ids = Tensor::from_vec(flat(&|e| e.get_ids()), (n, len), dev).map_err(err)?;
        let types = Tensor::from_vec(flat(&|e| e.get_type_ids()), (n, len), dev).map_err(err)?;
        let mask =
            Tensor::from_vec(flat(&|e| e.get_attention_mask()), (n, len), dev).map_err(err)?;
        let hidden = inner.model.forward(&ids, &types, &mask).map_err(err)?;
        // Mean over real tokens, then L2 normalization.
        let m = mask
            .to_dtype(DType::F32)
            .and_then(|m| m.unsqueeze(2))
            .map_err(err)?;
        let summed = hidden
            .broadcast_mul(&m)
            .and_then(|h| h.sum(1))
            .map_err(err)?;
        let counts = m.sum(1).map_err(err)?;
        let mean = summed.broadcast_div(&counts).map_err(err)?;
        let norm = mean
            .sqr()
            .and_then(|s| s.sum_keepdim(1))
            .and_then(|s| s.sqrt())
            .and_then(|s| s.clamp(1e-12, f32::MAX))
            .map_err(err)?;
        mean.broadcast_div(&norm)
            .and_then(|t| t.to_vec2::<f32>())
            .map_err(err)
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
