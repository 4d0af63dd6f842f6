//! BERT encoder (sentence embeddings: all-MiniLM and friends), and MPNet (all-mpnet-base-v2),
//! which is BERT with no token types, positions counted from 2 and a relative position bias
//! added to every layer's attention scores. Inference only: no dropout, no heads.
//!
//! The forward pass is written against plain `f32` buffers and gemm, not candle's tensors,
//! because that is where an ingestion's time went (perf, 2026-11-28): every candle op is a
//! fresh tensor (page faults and clearing above glibc's mmap limit), splitting and merging the
//! attention heads are two copies per layer, the bias, residual, mask and softmax each another
//! pass, and a batch is padded to its longest text. Here the texts of a batch are packed with
//! no padding (each text's attention reads only its own rows, so there is no mask), the
//! attention reads the heads where the fused QKV product wrote them (gemm takes strides), the
//! bias and the residual are folded into the products, and four buffers are reused across
//! layers and batches. candle still reads the weights.

use super::ops::{PARALLEL_ROWS, SharedOut, attend_head, matmul, rows_mut, vectorized};
use candle_core::{DType, Result};
use candle_nn::VarBuilder;
use rayon::prelude::*;
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
    /// None in MPNet's config (it has no token types).
    #[serde(default)]
    pub(crate) type_vocab_size: usize,
    /// MPNet's relative position buckets.
    #[serde(default)]
    pub(crate) relative_attention_num_buckets: Option<usize>,
    pub(crate) layer_norm_eps: f64,
    #[serde(default)]
    pub(crate) model_type: Option<String>,
}

/// One text's tokens, as the tokenizer gives them (already truncated).
pub(crate) struct Tokens<'a> {
    pub(crate) ids: &'a [u32],
    pub(crate) type_ids: &'a [u32],
}

/// `y = x Wᵀ + b`; `w` is `(outputs, inputs)` row-major, as the checkpoint stores it.
struct Linear {
    w: Vec<f32>,
    b: Vec<f32>,
    inputs: usize,
    outputs: usize,
}

struct Norm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
}

struct Layer {
    /// Query, key and value stacked: one product writes all three per token. The query rows
    /// are scaled by 1/√head_size at load, so the scores come out scaled.
    qkv: Linear,
    attn_out: Linear,
    attn_norm: Norm,
    inter: Linear,
    out: Linear,
    out_norm: Norm,
}

/// The encoder: token ids in, one mean-pooled, L2-normalised vector per text out.
pub(crate) struct BertModel {
    word: Vec<f32>,
    position: Vec<f32>,
    token_type: Vec<f32>,
    norm: Norm,
    layers: Vec<Layer>,
    hidden: usize,
    heads: usize,
    inter: usize,
    vocab: usize,
    max_positions: usize,
    type_vocab: usize,
    eps: f32,
    act: HiddenAct,
    /// The first position's index in `position` (MPNet, like RoBERTa, counts from the
    /// padding id + 1).
    first_position: usize,
    /// MPNet: per head, the bias of every relative position `j - i` from `-(max - 1)` to
    /// `max - 1`, each head's row `2 * max - 1` long.
    relative: Option<Vec<f32>>,
}

fn flat(vb: &VarBuilder, shape: &[usize], name: &str) -> Result<Vec<f32>> {
    vb.get(shape, name)?
        .to_dtype(DType::F32)?
        .flatten_all()?
        .to_vec1()
}

fn linear(vb: VarBuilder, inputs: usize, outputs: usize) -> Result<Linear> {
    Ok(Linear {
        w: flat(&vb, &[outputs, inputs], "weight")?,
        b: flat(&vb, &[outputs], "bias")?,
        inputs,
        outputs,
    })
}

fn norm(vb: VarBuilder, size: usize) -> Result<Norm> {
    // Older checkpoints name them `gamma` / `beta`.
    let get = |new: &str, old: &str| flat(&vb, &[size], new).or_else(|_| flat(&vb, &[size], old));
    Ok(Norm {
        gamma: get("weight", "gamma")?,
        beta: get("bias", "beta")?,
    })
}

impl Layer {
    fn load(vb: VarBuilder, c: &Config, mpnet: bool) -> Result<Self> {
        let (h, a) = (c.hidden_size, vb.pp("attention"));
        // The same weights under MPNet's names (`attention.attn.q`, ..., `attention.LayerNorm`).
        let (s, [q, k, v], out, out_norm) = if mpnet {
            let s = a.pp("attn");
            (s.clone(), ["q", "k", "v"], s.pp("o"), a.pp("LayerNorm"))
        } else {
            let o = a.pp("output");
            let names = ["query", "key", "value"];
            (a.pp("self"), names, o.pp("dense"), o.pp("LayerNorm"))
        };
        let (mut q, k, v) = (
            linear(s.pp(q), h, h)?,
            linear(s.pp(k), h, h)?,
            linear(s.pp(v), h, h)?,
        );
        let (attn_out, attn_norm) = (linear(out, h, h)?, norm(out_norm, h)?);
        let scale = 1.0 / ((h / c.num_attention_heads) as f32).sqrt();
        q.w.iter_mut().chain(&mut q.b).for_each(|x| *x *= scale);
        let qkv = Linear {
            w: [q.w, k.w, v.w].concat(),
            b: [q.b, k.b, v.b].concat(),
            inputs: h,
            outputs: 3 * h,
        };
        Ok(Self {
            qkv,
            attn_out,
            attn_norm,
            inter: linear(vb.pp("intermediate").pp("dense"), h, c.intermediate_size)?,
            out: linear(vb.pp("output").pp("dense"), c.intermediate_size, h)?,
            out_norm: norm(vb.pp("output").pp("LayerNorm"), h)?,
        })
    }
}

/// The activations of one batch, kept across layers and batches (an embedding call allocates
/// them once).
#[derive(Default)]
pub(crate) struct Scratch {
    x: Vec<f32>,
    qkv: Vec<f32>,
    ctx: Vec<f32>,
    inter: Vec<f32>,
}

/// `y = x Wᵀ + b` into `y` (resized to `rows x outputs`).
fn dense(l: &Linear, x: &[f32], rows: usize, y: &mut Vec<f32>) {
    y.resize(rows * l.outputs, 0.0);
    rows_mut(y, l.outputs, |_, r| r.copy_from_slice(&l.b));
    matmul(y, x, &l.w, (rows, l.outputs, l.inputs), true);
}

/// `acc = norm(acc + x Wᵀ + b)`: the residual connection and the layer norm after it.
fn dense_residual_norm(l: &Linear, x: &[f32], rows: usize, acc: &mut [f32], n: &Norm, eps: f32) {
    rows_mut(acc, l.outputs, |_, r| {
        r.iter_mut().zip(&l.b).for_each(|(a, b)| *a += b)
    });
    matmul(acc, x, &l.w, (rows, l.outputs, l.inputs), true);
    rows_mut(acc, l.outputs, |_, r| layer_norm(r, n, eps));
}

fn layer_norm(r: &mut [f32], n: &Norm, eps: f32) {
    let len = r.len() as f32;
    let mean = r.iter().sum::<f32>() / len;
    let var = r.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / len;
    let inv = 1.0 / (var + eps).sqrt();
    for ((v, g), b) in r.iter_mut().zip(&n.gamma).zip(&n.beta) {
        *v = (*v - mean) * inv * g + b;
    }
}

impl BertModel {
    /// Loads the weights, with or without a `bert.` / `<model_type>.` prefix on their names.
    pub(crate) fn load(vb: VarBuilder, c: &Config) -> Result<Self> {
        if c.num_attention_heads == 0 || !c.hidden_size.is_multiple_of(c.num_attention_heads) {
            candle_core::bail!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                c.hidden_size,
                c.num_attention_heads
            );
        }
        // Hugging Face's MPNetConfig defaults to 32 buckets when config.json leaves them out.
        let buckets = match (c.model_type.as_deref(), c.relative_attention_num_buckets) {
            (_, Some(b)) => Some(b),
            (Some("mpnet"), None) => Some(32),
            _ => None,
        };
        let mpnet = buckets.is_some();
        // MPNet, like RoBERTa, counts positions from the padding id + 1: two fewer fit.
        let first_position = if mpnet { 2 } else { 0 };
        if let Some(b) = buckets
            && (b < 4 || c.max_position_embeddings < 3)
        {
            candle_core::bail!(
                "MPNet with {b} relative position buckets and {} positions",
                c.max_position_embeddings
            );
        }
        let load = |vb: VarBuilder| -> Result<Self> {
            let e = vb.pp("embeddings");
            let h = c.hidden_size;
            let relative = match buckets {
                Some(buckets) => Some(relative_table(
                    &flat(
                        &vb.pp("encoder.relative_attention_bias"),
                        &[buckets, c.num_attention_heads],
                        "weight",
                    )?,
                    buckets,
                    c.num_attention_heads,
                    c.max_position_embeddings - first_position,
                )),
                None => None,
            };
            Ok(Self {
                word: flat(&e.pp("word_embeddings"), &[c.vocab_size, h], "weight")?,
                position: flat(
                    &e.pp("position_embeddings"),
                    &[c.max_position_embeddings, h],
                    "weight",
                )?,
                token_type: if mpnet {
                    Vec::new()
                } else {
                    flat(
                        &e.pp("token_type_embeddings"),
                        &[c.type_vocab_size, h],
                        "weight",
                    )?
                },
                norm: norm(e.pp("LayerNorm"), h)?,
                layers: (0..c.num_hidden_layers)
                    .map(|i| Layer::load(vb.pp(format!("encoder.layer.{i}")), c, mpnet))
                    .collect::<Result<Vec<_>>>()?,
                hidden: h,
                heads: c.num_attention_heads,
                inter: c.intermediate_size,
                vocab: c.vocab_size,
                max_positions: c.max_position_embeddings - first_position,
                type_vocab: if mpnet { 1 } else { c.type_vocab_size },
                eps: c.layer_norm_eps as f32,
                act: c.hidden_act,
                first_position,
                relative,
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

    /// One mean-pooled, L2-normalised vector per text (as sentence-transformers computes
    /// them). Token ids outside the vocabulary or texts longer than [`Self::max_positions`]
    /// are an error, not a panic.
    pub(crate) fn embed(&self, texts: &[Tokens], s: &mut Scratch) -> Result<Vec<Vec<f32>>> {
        let h = self.hidden;
        for t in texts {
            if t.ids.len() > self.max_positions || t.type_ids.len() != t.ids.len() {
                candle_core::bail!(
                    "a text of {} tokens ({} type ids) for an encoder of {} positions",
                    t.ids.len(),
                    t.type_ids.len(),
                    self.max_positions
                );
            }
            if let Some(id) = t.ids.iter().find(|&&i| i as usize >= self.vocab) {
                candle_core::bail!("token id {id} is outside the vocabulary of {}", self.vocab);
            }
            if let Some(id) = t.type_ids.iter().find(|&&i| i as usize >= self.type_vocab) {
                candle_core::bail!("token type {id} is outside the {} types", self.type_vocab);
            }
        }
        let starts: Vec<usize> = texts
            .iter()
            .scan(0, |at, t| {
                let start = *at;
                *at += t.ids.len();
                Some(start)
            })
            .collect();
        let rows: usize = texts.iter().map(|t| t.ids.len()).sum();

        // Embeddings: word + position + token type, then the layer norm.
        s.x.clear();
        s.x.reserve(rows * h);
        for t in texts {
            for (p, (&id, &ty)) in t.ids.iter().zip(t.type_ids).enumerate() {
                let (id, ty) = (id as usize, ty as usize);
                let word = &self.word[id * h..(id + 1) * h];
                let p = p + self.first_position;
                let pos = &self.position[p * h..(p + 1) * h];
                if self.token_type.is_empty() {
                    s.x.extend(word.iter().zip(pos).map(|(w, p)| w + p));
                } else {
                    let typ = &self.token_type[ty * h..(ty + 1) * h];
                    s.x.extend(word.iter().zip(pos).zip(typ).map(|((w, p), t)| w + p + t));
                }
            }
        }
        rows_mut(&mut s.x, h, |_, r| layer_norm(r, &self.norm, self.eps));

        for layer in &self.layers {
            dense(&layer.qkv, &s.x, rows, &mut s.qkv);
            s.ctx.resize(rows * h, 0.0);
            self.attention(texts, &starts, &s.qkv, &mut s.ctx);
            dense_residual_norm(
                &layer.attn_out,
                &s.ctx,
                rows,
                &mut s.x,
                &layer.attn_norm,
                self.eps,
            );
            dense(&layer.inter, &s.x, rows, &mut s.inter);
            let act = self.act;
            rows_mut(&mut s.inter, self.inter, |_, r| activate(act, r));
            dense_residual_norm(
                &layer.out,
                &s.inter,
                rows,
                &mut s.x,
                &layer.out_norm,
                self.eps,
            );
        }

        // Mean over each text's tokens, then L2 normalisation.
        Ok(texts
            .iter()
            .zip(&starts)
            .map(|(t, &start)| {
                let mut v = vec![0f32; h];
                for r in s.x[start * h..(start + t.ids.len()) * h].chunks_exact(h) {
                    v.iter_mut().zip(r).for_each(|(a, b)| *a += b);
                }
                let n = t.ids.len().max(1) as f32;
                v.iter_mut().for_each(|a| *a /= n);
                let norm = v.iter().map(|a| a * a).sum::<f32>().sqrt().max(1e-12);
                v.iter_mut().for_each(|a| *a /= norm);
                v
            })
            .collect())
    }

    /// Self-attention of every text and head: `softmax(q kᵀ) v` (q already scaled), written
    /// into `ctx` at the head's columns. One job per (text, head) pair across the pool.
    #[allow(unsafe_code)]
    fn attention(&self, texts: &[Tokens], starts: &[usize], qkv: &[f32], ctx: &mut [f32]) {
        let (h, heads) = (self.hidden, self.heads);
        let d = h / heads;
        let stride = 3 * h;
        let out = SharedOut(ctx.as_mut_ptr());
        let span = (2 * self.max_positions).saturating_sub(1);
        let job = |scores: &mut Vec<f32>, (text, head): (usize, usize)| {
            let (len, start) = (texts[text].ids.len(), starts[text]);
            let rows = &qkv[start * stride..(start + len) * stride];
            // SAFETY: the block written (rows start..start+len, columns head*d..head*d+d of
            // `ctx`, which holds every row x h) belongs to this job alone.
            unsafe {
                attend_head(
                    scores,
                    (&rows[head * d..], stride),
                    (&rows[h + head * d..], stride),
                    (&rows[2 * h + head * d..], stride),
                    (out.at(start * h + head * d), h),
                    (len, len, d),
                    None,
                    self.relative
                        .as_ref()
                        .map(|r| (&r[head * span..(head + 1) * span], self.max_positions - 1)),
                );
            }
        };
        let jobs = (0..texts.len()).flat_map(|t| (0..heads).map(move |hd| (t, hd)));
        let rows: usize = texts.iter().map(|t| t.ids.len()).sum();
        if rows < PARALLEL_ROWS {
            let mut scores = Vec::new();
            jobs.for_each(|j| job(&mut scores, j));
        } else {
            jobs.collect::<Vec<_>>()
                .into_par_iter()
                .for_each_init(Vec::new, job);
        }
    }
}

/// MPNet's relative position bias as one row per head over `j - i` in `-(max - 1)..max`:
/// T5's buckets (half for each direction, exact up to a quarter of them, then logarithmic up
/// to 128 positions), `relative_position_bucket` of Hugging Face's MPNet.
fn relative_table(weights: &[f32], buckets: usize, heads: usize, max: usize) -> Vec<f32> {
    let half = buckets / 2;
    let exact = half / 2;
    let bucket = |rel: i64| -> usize {
        // Hugging Face's `n = -relative_position` with `relative_position = j - i`.
        let n = -rel;
        let mut b = if n < 0 { half } else { 0 };
        let n = n.unsigned_abs() as usize;
        b += if n < exact {
            n
        } else {
            let large = exact
                + ((n as f32 / exact as f32).ln() / (128.0 / exact as f32).ln()
                    * (half - exact) as f32) as usize;
            large.min(half - 1)
        };
        b
    };
    let span = 2 * max - 1;
    let mut table = vec![0f32; heads * span];
    for (k, rel) in (-(max as i64 - 1)..max as i64).enumerate() {
        let b = bucket(rel);
        for h in 0..heads {
            table[h * span + k] = weights[b * heads + h];
        }
    }
    table
}

vectorized! {
    /// The activation over a row, compiled for the CPU's vector unit.
    fn activate(act: HiddenAct, r: &mut [f32]) {
        match act {
            HiddenAct::Gelu => r
                .iter_mut()
                .for_each(|v| *v = 0.5 * *v * (1.0 + erf(*v * std::f32::consts::FRAC_1_SQRT_2))),
            HiddenAct::GeluApproximate => r.iter_mut().for_each(|v| {
                let x = *v;
                let inner = (2.0 / std::f32::consts::PI).sqrt() * (x + 0.044_715 * x * x * x);
                *v = 0.5 * x * (1.0 + inner.tanh());
            }),
            HiddenAct::Relu => r.iter_mut().for_each(|v| *v = v.max(0.0)),
        }
    }
}

/// erf(x) as an odd polynomial over an even one, on x clamped to [-4, 4] (beyond, erf is
/// ±1 in single precision). candle's `gelu_erf` calls libm's `erff` per element: a tenth of
/// the encoder's time (profiled 2026-11-26); this is Eigen's and XLA's single-precision erf,
/// which the compiler vectorises (within a few units in the last place of `erff`).
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

#[cfg(test)]
mod tests {
    #[test]
    fn relative_positions_fall_in_mpnets_buckets() {
        // A table whose bias for bucket b is b reads the buckets back (one head, 32 buckets).
        let weights: Vec<f32> = (0..32).map(|b| b as f32).collect();
        let max = 300;
        let table = super::relative_table(&weights, 32, 1, max);
        let bucket = |rel: i64| table[(max as i64 - 1 + rel) as usize] as usize;
        // Keys before the query (j < i) in 0..16, after it in 16..32; exact below 8, then
        // logarithmic up to 128 positions, the last bucket beyond.
        assert_eq!(
            [0, -1, -7, -8, -12, -127, -128, -299].map(bucket),
            [0, 1, 7, 8, 9, 15, 15, 15]
        );
        assert_eq!([1, 7, 8, 16, 299].map(bucket), [17, 23, 24, 26, 31]);
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
