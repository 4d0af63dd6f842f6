//! BERT encoder (sentence embeddings: all-MiniLM and friends). Inference only: no dropout, no
//! heads, absolute position embeddings.

use candle_core::{CpuStorage, CustomOp1, CustomOp2, DType, Layout, Result, Shape, Tensor};
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
        let probs = if scores.dtype() == DType::F32 && scores.device().is_cpu() {
            scores.apply_op2_no_bwd(mask, &MaskedSoftmax)?
        } else {
            candle_nn::ops::softmax_last_dim(&scores.broadcast_add(mask)?)?
        };
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

/// Elements from which [`GeluErf`] and [`MaskedSoftmax`] use two threads (GELU: about 40
/// tokens of MiniLM).
const PARALLEL: usize = 1 << 16;

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
        on_two_threads(x, &mut out, 1, |x, out, _| gelu_into(x, out));
        Ok((CpuStorage::F32(out), layout.shape().clone()))
    }
}

/// `f(x, out, first)` over whole pieces of `unit` elements (`first`: the index of the first
/// piece given): half the pieces on a second thread from [`PARALLEL`] elements on. A short
/// input (a search query) is done before a second thread would have started.
fn on_two_threads(
    x: &[f32],
    out: &mut [f32],
    unit: usize,
    f: impl Fn(&[f32], &mut [f32], usize) + Sync,
) {
    if x.len() < PARALLEL {
        return f(x, out, 0);
    }
    let half = x.len() / unit / 2;
    let (o1, o2) = out.split_at_mut(half * unit);
    let (x1, x2) = x.split_at(half * unit);
    std::thread::scope(|s| {
        s.spawn(|| f(x1, o1, 0));
        f(x2, o2, half);
    });
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

/// The attention's softmax with the padding mask added, in one pass over the scores
/// `(batch, heads, seq, seq)`, on two threads, with an exp the compiler vectorises. candle's
/// broadcast add (a fresh tensor the size of the scores) and its softmax (libm's `expf` per
/// element) were ~15% of an ingestion's time on an AVX-512 machine (perf, 2026-11-28).
/// `mask` is `(batch, 1, 1, seq)`: 0 for tokens, `f32::MIN` for padding.
struct MaskedSoftmax;

impl CustomOp2 for MaskedSoftmax {
    fn name(&self) -> &'static str {
        "masked-softmax"
    }

    fn cpu_fwd(
        &self,
        scores: &CpuStorage,
        scores_layout: &Layout,
        mask: &CpuStorage,
        mask_layout: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (CpuStorage::F32(scores), Some((a, b)), CpuStorage::F32(mask), Some((ma, mb))) = (
            scores,
            scores_layout.contiguous_offsets(),
            mask,
            mask_layout.contiguous_offsets(),
        ) else {
            candle_core::bail!("masked-softmax: contiguous f32 tensors are expected");
        };
        let (batch, heads, rows, seq) = scores_layout.shape().dims4()?;
        if mb - ma != batch * seq || seq == 0 {
            candle_core::bail!("masked-softmax: a mask of {batch} x {seq} is expected");
        }
        let (x, mask) = (&scores[a..b], &mask[ma..mb]);
        let rows_per_text = heads * rows;
        let mut out = vec![0f32; x.len()];
        on_two_threads(x, &mut out, seq, |x, out, first_row| {
            for (i, (xr, or)) in x
                .chunks_exact(seq)
                .zip(out.chunks_exact_mut(seq))
                .enumerate()
            {
                let text = (first_row + i) / rows_per_text;
                softmax_row(xr, &mask[text * seq..(text + 1) * seq], or);
            }
        });
        Ok((CpuStorage::F32(out), scores_layout.shape().clone()))
    }
}

/// `out = softmax(x + mask)`, as candle computes it (the maximum subtracted first).
fn softmax_row(x: &[f32], mask: &[f32], out: &mut [f32]) {
    let mut max = f32::MIN;
    for ((o, &v), &m) in out.iter_mut().zip(x).zip(mask) {
        *o = v + m;
        max = if *o > max { *o } else { max };
    }
    for o in out.iter_mut() {
        *o = exp(*o - max);
    }
    // Eight running sums: one would wait on each addition in turn.
    let mut sums = [0f32; 8];
    let mut chunks = out.chunks_exact(8);
    for c in &mut chunks {
        for (s, v) in sums.iter_mut().zip(c) {
            *s += v;
        }
    }
    let sum = sums.iter().sum::<f32>() + chunks.remainder().iter().sum::<f32>();
    let inv = 1.0 / sum;
    for o in out.iter_mut() {
        *o *= inv;
    }
}

/// e^x in single precision, branch-free so the compiler vectorises it (Cephes' `expf`:
/// x = n ln 2 + r, e^r by a degree-7 polynomial, 2^n put in the exponent; within 2 units in
/// the last place of `f32::exp`); 0 below -87 (the padding's scores).
#[inline(always)]
fn exp(x: f32) -> f32 {
    let c = x.clamp(-87.0, 88.0);
    // n = round(c / ln 2): adding and taking away 1.5 * 2^23 rounds to the nearest integer
    // without a call to `roundf` (plain x86-64 has no vector rounding instruction).
    let n = (c * std::f32::consts::LOG2_E + 12_582_912.0) - 12_582_912.0;
    let r = c - n * 0.693_359_4 + n * 2.121_944_4e-4;
    let mut p = 1.987_569_1e-4;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5;
    let e = p * r * r + r + 1.0;
    let scale = f32::from_bits(((n as i32 + 127) as u32) << 23);
    if x < -87.0 { 0.0 } else { e * scale }
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
    fn exp_is_within_two_ulps_of_std() {
        let mut worst = 0f32;
        for i in -870_000..=880_000 {
            let x = i as f32 / 10_000.0;
            let (got, want) = (super::exp(x), x.exp());
            worst = worst.max((got - want).abs() / want);
        }
        assert!(worst < 2.5e-7, "worst relative error {worst}");
        assert_eq!(super::exp(-88.0), 0.0);
        assert_eq!(super::exp(f32::MIN), 0.0);
        assert_eq!(super::exp(0.0), 1.0);
    }

    #[test]
    fn masked_softmax_is_candles() -> candle_core::Result<()> {
        use candle_core::{Device, Tensor};
        // Over PARALLEL elements: the two-thread path.
        let (b, h, s) = (3, 4, 80);
        let dev = Device::Cpu;
        let scores = Tensor::randn(0f32, 3.0, (b, h, s, s), &dev)?;
        // Text 0 all tokens, text 1 five of padding, text 2 sixty.
        let mut m = vec![0f32; b * s];
        for t in 0..b {
            for j in s - [0, 5, 60][t]..s {
                m[t * s + j] = f32::MIN;
            }
        }
        let mask = Tensor::from_vec(m, (b, 1, 1, s), &dev)?;
        let want = candle_nn::ops::softmax_last_dim(&scores.broadcast_add(&mask)?)?;
        let got = scores.apply_op2_no_bwd(&mask, &super::MaskedSoftmax)?;
        let diff = (&got - &want)?
            .abs()?
            .flatten_all()?
            .max(0)?
            .to_scalar::<f32>()?;
        assert!(diff < 1e-6, "largest difference {diff}");
        // Padding gets nothing.
        let p = got.flatten_all()?.to_vec1::<f32>()?;
        assert_eq!(p[(2 * h * s + 7) * s + s - 1], 0.0);
        Ok(())
    }

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
