//! BERT encoder (sentence embeddings: all-MiniLM and friends). Inference only: no dropout, no
//! heads, absolute position embeddings.

use candle_core::{D, Result, Tensor};
use candle_nn::{Embedding, LayerNorm, Linear, Module, VarBuilder, embedding, layer_norm, linear};
use serde::Deserialize;

/// The activation between the feed-forward layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum HiddenAct {
    Gelu,
    GeluApproximate,
    Relu,
}

/// The fields of a Hugging Face `config.json` the encoder needs (others are ignored).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Config {
    pub(crate) vocab_size: usize,
    pub(crate) hidden_size: usize,
    pub(crate) num_hidden_layers: usize,
    pub(crate) num_attention_heads: usize,
    pub(crate) intermediate_size: usize,
    pub(crate) hidden_act: HiddenAct,
    pub(crate) max_position_embeddings: usize,
    pub(crate) type_vocab_size: usize,
    pub(crate) layer_norm_eps: f64,
    #[serde(default)]
    pub(crate) model_type: Option<String>,
}

struct Embeddings {
    word: Embedding,
    position: Embedding,
    token_type: Embedding,
    norm: LayerNorm,
}

impl Embeddings {
    fn load(vb: VarBuilder, c: &Config) -> Result<Self> {
        Ok(Self {
            word: embedding(c.vocab_size, c.hidden_size, vb.pp("word_embeddings"))?,
            position: embedding(
                c.max_position_embeddings,
                c.hidden_size,
                vb.pp("position_embeddings"),
            )?,
            token_type: embedding(
                c.type_vocab_size,
                c.hidden_size,
                vb.pp("token_type_embeddings"),
            )?,
            norm: layer_norm(c.hidden_size, c.layer_norm_eps, vb.pp("LayerNorm"))?,
        })
    }

    fn forward(&self, input_ids: &Tensor, token_type_ids: &Tensor) -> Result<Tensor> {
        let (_batch, seq_len) = input_ids.dims2()?;
        let x = (self.word.forward(input_ids)? + self.token_type.forward(token_type_ids)?)?;
        let positions = Tensor::arange(0u32, seq_len as u32, input_ids.device())?;
        let x = x.broadcast_add(&self.position.forward(&positions)?)?;
        self.norm.forward(&x)
    }
}

struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attn_out: Linear,
    attn_norm: LayerNorm,
    inter: Linear,
    act: HiddenAct,
    out: Linear,
    out_norm: LayerNorm,
    heads: usize,
    head_size: usize,
}

impl Layer {
    fn load(vb: VarBuilder, c: &Config) -> Result<Self> {
        let (h, a) = (c.hidden_size, vb.pp("attention"));
        let (s, o) = (a.pp("self"), a.pp("output"));
        Ok(Self {
            query: linear(h, h, s.pp("query"))?,
            key: linear(h, h, s.pp("key"))?,
            value: linear(h, h, s.pp("value"))?,
            attn_out: linear(h, h, o.pp("dense"))?,
            attn_norm: layer_norm(h, c.layer_norm_eps, o.pp("LayerNorm"))?,
            inter: linear(h, c.intermediate_size, vb.pp("intermediate").pp("dense"))?,
            act: c.hidden_act,
            out: linear(c.intermediate_size, h, vb.pp("output").pp("dense"))?,
            out_norm: layer_norm(h, c.layer_norm_eps, vb.pp("output").pp("LayerNorm"))?,
            heads: c.num_attention_heads,
            head_size: h / c.num_attention_heads,
        })
    }

    /// `(batch, seq, hidden)` -> `(batch, heads, seq, head_size)`.
    fn split_heads(&self, x: &Tensor) -> Result<Tensor> {
        let (b, s, _) = x.dims3()?;
        x.reshape((b, s, self.heads, self.head_size))?
            .transpose(1, 2)?
            .contiguous()
    }

    fn forward(&self, x: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let q = self.split_heads(&self.query.forward(x)?)?;
        let k = self.split_heads(&self.key.forward(x)?)?;
        let v = self.split_heads(&self.value.forward(x)?)?;
        let scores = (q.matmul(&k.t()?)? / (self.head_size as f64).sqrt())?;
        let probs = candle_nn::ops::softmax(&scores.broadcast_add(mask)?, D::Minus1)?;
        let ctx = probs
            .matmul(&v)?
            .transpose(1, 2)?
            .contiguous()?
            .flatten_from(D::Minus2)?;
        let attn = self
            .attn_norm
            .forward(&(self.attn_out.forward(&ctx)? + x)?)?;
        let inter = self.inter.forward(&attn)?;
        let inter = match self.act {
            HiddenAct::Gelu => inter.gelu_erf()?,
            HiddenAct::GeluApproximate => inter.gelu()?,
            HiddenAct::Relu => inter.relu()?,
        };
        self.out_norm.forward(&(self.out.forward(&inter)? + attn)?)
    }
}

/// The encoder: token ids in, one hidden state per token out.
pub(crate) struct BertModel {
    embeddings: Embeddings,
    layers: Vec<Layer>,
}

impl BertModel {
    /// Loads the weights, with or without a `bert.` / `<model_type>.` prefix on their names.
    pub(crate) fn load(vb: VarBuilder, c: &Config) -> Result<Self> {
        let load = |vb: VarBuilder| -> Result<Self> {
            let layers = (0..c.num_hidden_layers)
                .map(|i| Layer::load(vb.pp(format!("encoder.layer.{i}")), c))
                .collect::<Result<Vec<_>>>()?;
            Ok(Self {
                embeddings: Embeddings::load(vb.pp("embeddings"), c)?,
                layers,
            })
        };
        if vb.contains_tensor("bert.embeddings.word_embeddings.weight") {
            return load(vb.pp("bert"));
        }
        match load(vb.clone()) {
            Ok(model) => Ok(model),
            Err(e) => match &c.model_type {
                Some(prefix) => load(vb.pp(prefix)).map_err(|_| e),
                None => Err(e),
            },
        }
    }

    /// `attention_mask` is 1 for real tokens and 0 for padding, shape `(batch, seq)`.
    pub(crate) fn forward(
        &self,
        input_ids: &Tensor,
        token_type_ids: &Tensor,
        attention_mask: &Tensor,
    ) -> Result<Tensor> {
        let mut x = self.embeddings.forward(input_ids, token_type_ids)?;
        // Padding gets a large negative score before the softmax: (1 - mask) * f32::MIN.
        let mask = attention_mask
            .unsqueeze(1)?
            .unsqueeze(1)?
            .to_dtype(x.dtype())?;
        let min = Tensor::new(f32::MIN, x.device())?.to_dtype(x.dtype())?;
        let mask = (mask.ones_like()? - &mask)?.broadcast_mul(&min)?;
        for layer in &self.layers {
            x = layer.forward(&x, &mask)?;
        }
        Ok(x)
    }
}
