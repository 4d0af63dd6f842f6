//! BERT encoder (sentence embeddings: all-MiniLM and friends). Inference only: no dropout, no
//! heads, absolute position embeddings.

use candle_core::{CpuStorage, CustomOp1, Layout, Result, Shape, Tensor};
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

    /// `(batch * seq, hidden)` -> `(batch, heads, seq, head_size)`.
    fn split_heads(&self, x: &Tensor, b: usize, s: usize) -> Result<Tensor> {
        x.reshape((b, s, self.heads, self.head_size))?
            .transpose(1, 2)?
            .contiguous()
    }

    /// `x` is `(batch, seq, hidden)`. The linear layers see it as one `(batch * seq, hidden)`
    /// matrix: one large matrix product each instead of one per text of the batch (candle
    /// multiplies a 3-D input by the weight text by text).
    fn forward(&self, x: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let (b, s, h) = x.dims3()?;
        let x = x.reshape((b * s, h))?;
        // Scaling the queries (seq x head_size per head) costs less than scaling the scores
        // (seq x seq).
        let q = (self.query.forward(&x)? / (self.head_size as f64).sqrt())?;
        let q = self.split_heads(&q, b, s)?;
        let k = self.split_heads(&self.key.forward(&x)?, b, s)?;
        let v = self.split_heads(&self.value.forward(&x)?, b, s)?;
        let scores = q.matmul(&k.t()?)?;
        let probs = candle_nn::ops::softmax_last_dim(&scores.broadcast_add(mask)?)?;
        let ctx = probs
            .matmul(&v)?
            .transpose(1, 2)?
            .contiguous()?
            .reshape((b * s, h))?;
        let attn = self
            .attn_norm
            .forward(&(self.attn_out.forward(&ctx)? + &x)?)?;
        let inter = self.inter.forward(&attn)?;
        let inter = match self.act {
            HiddenAct::Gelu => inter.apply_op1_no_bwd(&GeluErf)?,
            HiddenAct::GeluApproximate => inter.gelu()?,
            HiddenAct::Relu => inter.relu()?,
        };
        self.out_norm
            .forward(&(self.out.forward(&inter)? + attn)?)?
            .reshape((b, s, h))
    }
}

/// GELU with the exact (erf) form, as BERT defines it, on two threads. candle's `gelu_erf`
/// calls libm's `erff` per element on one thread: a tenth of the encoder's time on the
/// feed-forward activations (profiled 2026-11-26). This one evaluates erf as a rational
/// function the compiler vectorises (Eigen's and XLA's single-precision erf: within a few
/// units in the last place of `erff`).
struct GeluErf;

/// Activations from which [`GeluErf`] uses two threads (about 40 tokens of MiniLM).
const PARALLEL_GELU: usize = 1 << 16;

impl CustomOp1 for GeluErf {
    fn name(&self) -> &'static str {
        "gelu-erf-fast"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let (CpuStorage::F32(all), Some((a, b))) = (storage, layout.contiguous_offsets()) else {
            candle_core::bail!("gelu-erf-fast: a contiguous f32 tensor is expected");
        };
        let x = &all[a..b];
        let mut out = vec![0f32; x.len()];
        // A short text (a search query) is done before a second thread would have started.
        if x.len() < PARALLEL_GELU {
            gelu_into(x, &mut out);
        } else {
            let half = x.len() / 2;
            let (o1, o2) = out.split_at_mut(half);
            let (x1, x2) = x.split_at(half);
            std::thread::scope(|s| {
                s.spawn(|| gelu_into(x1, o1));
                gelu_into(x2, o2);
            });
        }
        Ok((CpuStorage::F32(out), layout.shape().clone()))
    }
}

fn gelu_into(x: &[f32], out: &mut [f32]) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = 0.5 * v * (1.0 + erf(v * std::f32::consts::FRAC_1_SQRT_2));
    }
}

/// erf(x) as an odd polynomial over an even one, on x clamped to [-4, 4] (beyond, erf is
/// ±1 in single precision).
#[inline(always)]
fn erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = x2 * -2.726_142_3e-10 + 2.770_681_4e-8;
    p = x2 * p + -2.101_024e-6;
    p = x2 * p + -5.692_506_4e-5;
    p = x2 * p + -7.349_906_3e-4;
    p = x2 * p + -2.954_6e-3;
    p = x2 * p + -1.609_603_3e-2;
    let mut q = x2 * -1.456_607_2e-5 + -2.133_740_6e-4;
    q = x2 * q + -1.682_827e-3;
    q = x2 * q + -7.373_329e-3;
    q = x2 * q + -1.426_474e-2;
    x * p / q
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

#[cfg(test)]
mod tests {
    #[test]
    fn erf_is_within_a_millionth_of_libm() {
        let mut worst = 0f64;
        for i in -6000..=6000 {
            let x = i as f64 / 1000.0;
            let e = (f64::from(super::erf(x as f32)) - candle_core::cpu::erf::erf_f64(x)).abs();
            worst = worst.max(e);
        }
        assert!(worst < 1e-6, "max error {worst}");
    }
}
