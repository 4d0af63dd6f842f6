//! Llama-family decoder over GGUF weights (SmolLM2, Qwen2 and the like), quantized matmuls,
//! a KV cache per layer. Dense models only: a GGUF with experts is refused when loading.

use std::collections::HashMap;
use std::io::{Read, Seek};
use std::sync::Arc;

use candle_core::quantized::{GgmlDType, QMatMul, QTensor, gguf_file};
use candle_core::{DType, Device, IndexOp, Module, Result, Tensor};
use candle_nn::Embedding;
use rayon::prelude::*;

use super::ops::{SharedOut, attend_head, exp, matmul_expanding, rows_mut};

/// Longest context the rotary tables are built for.
pub(crate) const MAX_SEQ_LEN: usize = 4096;

#[derive(Debug, Clone)]
struct RmsNorm {
    weight: Tensor,
    /// The same weights for the prompt path's row passes.
    values: Arc<Vec<f32>>,
    eps: f32,
}

impl RmsNorm {
    fn new(weight: QTensor, eps: f64) -> Result<Self> {
        let weight = weight.dequantize(&weight.device())?;
        Ok(Self {
            values: Arc::new(weight.to_dtype(DType::F32)?.flatten_all()?.to_vec1()?),
            weight,
            eps: eps as f32,
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        candle_nn::ops::rms_norm(x, &self.weight, self.eps)
    }

    /// One row in place, as candle's `rms_norm` computes it.
    fn row(&self, r: &mut [f32]) {
        let mean = r.iter().map(|v| v * v).sum::<f32>() / r.len() as f32;
        let inv = 1.0 / (mean + self.eps).sqrt();
        for (v, w) in r.iter_mut().zip(self.values.iter()) {
            *v = *v * inv * w;
        }
    }
}

/// Positions from which a forward pass takes the prompt path ([`ModelWeights::prefill`]):
/// weights dequantized to `f32` and hand-written passes instead of candle's quantized ones.
const DENSE_FROM_ROWS: usize = 16;

/// A quantized weight matrix. One token at a time (generation), the product with the quantized
/// matrix reads a quarter of the bytes and memory bandwidth decides. A prompt's many tokens at
/// once are bound by arithmetic instead, where candle's quantized kernel (int8 dot products,
/// activations quantized too) does 2.5-3x less per second than its `f32` matrix product: the
/// matrix is then dequantized for that one product, a block of rows at a time by the thread
/// that multiplies by it ([`product`]; nothing more stays in memory). Measured on
/// SmolLM2-135M, 217-token prompt, 2 threads: 201 -> 524-562 tokens/s with the whole matrix
/// dequantized first, 467-480 -> 595-654 on another CPU by blocks, generation as before
/// (docs/BENCHMARKS.md, "Embedded models").
#[derive(Debug, Clone)]
struct Weight(QMatMul);

impl Weight {
    fn new(q: QTensor) -> Result<Self> {
        QMatMul::from_qtensor(q).map(Self)
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        // Already dense (`CANDLE_DEQUANTIZE_ALL`), or a few rows: candle's own product.
        let (QMatMul::QTensor(q), Some((&k, lead))) = (&self.0, x.dims().split_last()) else {
            return self.0.forward(x);
        };
        let rows: usize = lead.iter().product();
        if rows < DENSE_FROM_ROWS {
            return self.0.forward(x);
        }
        let w = q.dequantize(x.device())?;
        let out: Vec<usize> = lead.iter().copied().chain([w.dim(0)?]).collect();
        x.reshape((rows, k))?.matmul(&w.t()?)?.reshape(out)
    }

    /// `(outputs, inputs)`.
    fn dims(&self) -> Result<(usize, usize)> {
        match &self.0 {
            QMatMul::QTensor(q) => q.shape().dims2(),
            QMatMul::Tensor(t) | QMatMul::TensorF16(t) => t.dims2(),
        }
    }

    /// Where a prompt's product reads the matrix from: Q8_0 (what the embedded model is
    /// re-quantized to) as it is stored, expanded a block of rows at a time by the product;
    /// other types dequantized whole through candle first.
    fn source(&self) -> Result<Source<'_>> {
        let (n, k) = self.dims()?;
        let t = match &self.0 {
            QMatMul::QTensor(q) if q.dtype() == GgmlDType::Q8_0 => {
                let data = q.data()?;
                if !k.is_multiple_of(32) || data.len() != n * k / 32 * Q8_0_BLOCK {
                    candle_core::bail!("Q8_0 data of {} bytes for {n} x {k}", data.len());
                }
                return Ok(Source::Q8(data));
            }
            QMatMul::QTensor(q) => q.dequantize(&Device::Cpu)?,
            QMatMul::Tensor(t) | QMatMul::TensorF16(t) => t.to_dtype(DType::F32)?,
        };
        let v = t.flatten_all()?.to_vec1::<f32>()?;
        if v.len() != n * k {
            candle_core::bail!("a weight of {} values, {} expected", v.len(), n * k);
        }
        Ok(Source::Dense(v))
    }
}

/// A weight matrix as a prompt's product reads it (see [`Weight::source`]).
enum Source<'a> {
    Q8(std::borrow::Cow<'a, [u8]>),
    Dense(Vec<f32>),
}

/// `dst[:, col..] = x · wᵀ` (`+=` with `accumulate`), where `w` is `weights` stacked one
/// under the other (query, key and value; gate and up: one product each), `x` has `m` rows
/// at `x_stride`, `dst` rows are `dst_stride` apart.
fn product(
    (dst, dst_stride, col): (&mut [f32], usize, usize),
    x: (&[f32], usize),
    m: usize,
    weights: &[&Weight],
    accumulate: bool,
) -> Result<()> {
    let (mut parts, mut n, mut k) = (Vec::with_capacity(weights.len()), 0, None);
    for w in weights {
        let (rows, inputs) = w.dims()?;
        if k.replace(inputs).is_some_and(|k| k != inputs) {
            candle_core::bail!("stacked weights of different widths");
        }
        parts.push((n, rows, w.source()?));
        n += rows;
    }
    let Some(k) = k else { return Ok(()) };
    // Checked here, not asserted below: the shapes come from the model file.
    if x.0.len() < m.saturating_sub(1) * x.1 + k || x.1 < k {
        candle_core::bail!("{m} rows of {k} inputs expected");
    }
    if col + n > dst_stride || dst.len() < m.saturating_sub(1) * dst_stride + col + n {
        candle_core::bail!("weights of {n} outputs for rows of {dst_stride}");
    }
    matmul_expanding(
        (dst, dst_stride, col),
        x,
        (m, n, k),
        accumulate,
        |r, out| {
            for (start, rows, src) in &parts {
                let (lo, hi) = (r.start.max(*start), r.end.min(start + rows));
                if lo >= hi {
                    continue;
                }
                let out = &mut out[(lo - r.start) * k..(hi - r.start) * k];
                let (lo, hi) = (lo - start, hi - start);
                match src {
                    Source::Q8(d) => {
                        expand_q8_0(&d[lo * k / 32 * Q8_0_BLOCK..hi * k / 32 * Q8_0_BLOCK], out)
                    }
                    Source::Dense(v) => out.copy_from_slice(&v[lo * k..hi * k]),
                }
            }
        },
    );
    Ok(())
}

/// Bytes of one GGUF Q8_0 block: a little-endian f16 scale, then 32 signed bytes.
const Q8_0_BLOCK: usize = 34;

/// Q8_0 blocks into `f32` values (byte x scale, as candle's `to_float`); `out` holds 32 per
/// block.
fn expand_q8_0(data: &[u8], out: &mut [f32]) {
    for (o, b) in out.chunks_exact_mut(32).zip(data.chunks_exact(Q8_0_BLOCK)) {
        let scale = half::f16::from_le_bytes([b[0], b[1]]).to_f32();
        for (y, &q) in o.iter_mut().zip(&b[2..]) {
            *y = f32::from(q as i8) * scale;
        }
    }
}

/// Rotates one head's vector by the angles of its position: pairs `(i, i + d/2)` (NEOX) or
/// `(2i, 2i + 1)`, as candle's `rope` / `rope_i`.
fn rotate(x: &mut [f32], cos: &[f32], sin: &[f32], neox: bool) {
    let half = x.len() / 2;
    for i in 0..half {
        let (a, b) = if neox {
            (i, i + half)
        } else {
            (2 * i, 2 * i + 1)
        };
        let (x0, x1) = (x[a], x[b]);
        x[a] = x0 * cos[i] - x1 * sin[i];
        x[b] = x0 * sin[i] + x1 * cos[i];
    }
}

#[derive(Debug, Clone)]
struct Layer {
    wq: Weight,
    wk: Weight,
    wv: Weight,
    wo: Weight,
    attn_norm: RmsNorm,
    gate: Weight,
    down: Weight,
    up: Weight,
    ffn_norm: RmsNorm,
    n_head: usize,
    n_kv_head: usize,
    head_dim: usize,
    /// NEOX rotary (pairs i, i+d/2: Qwen, Phi, ...) or the interleaved Llama one (2i, 2i+1);
    /// the wrong one silently degrades the output.
    rope_is_neox: bool,
    cos: Tensor,
    sin: Tensor,
    neg_inf: Tensor,
    kv_cache: Option<(Tensor, Tensor)>,
}

impl Layer {
    fn rotary(&self, x: &Tensor, index_pos: usize) -> Result<Tensor> {
        let (_b, _h, seq_len, _d) = x.dims4()?;
        let cos = self.cos.narrow(0, index_pos, seq_len)?;
        let sin = self.sin.narrow(0, index_pos, seq_len)?;
        let x = x.contiguous()?;
        if self.rope_is_neox {
            candle_nn::rotary_emb::rope(&x, &cos, &sin)
        } else {
            candle_nn::rotary_emb::rope_i(&x, &cos, &sin)
        }
    }

    fn attention(&mut self, x: &Tensor, mask: Option<&Tensor>, index_pos: usize) -> Result<Tensor> {
        let (b, seq_len, n_embd) = x.dims3()?;
        let heads = |w: &Weight, n: usize| -> Result<Tensor> {
            w.forward(x)?
                .reshape((b, seq_len, n, self.head_dim))?
                .transpose(1, 2)
        };
        let q = self.rotary(&heads(&self.wq, self.n_head)?, index_pos)?;
        let k = self.rotary(&heads(&self.wk, self.n_kv_head)?, index_pos)?;
        let v = heads(&self.wv, self.n_kv_head)?.contiguous()?;
        let (k, v) = match &self.kv_cache {
            Some((kc, vc)) if index_pos > 0 => {
                (Tensor::cat(&[kc, &k], 2)?, Tensor::cat(&[vc, &v], 2)?)
            }
            _ => (k, v),
        };
        self.kv_cache = Some((k.clone(), v.clone()));
        // Grouped-query attention: each key/value head serves n_head / n_kv_head query heads.
        let k = repeat_kv(k, self.n_head / self.n_kv_head)?;
        let v = repeat_kv(v, self.n_head / self.n_kv_head)?;
        let att = (q.matmul(&k.t()?)? / (self.head_dim as f64).sqrt())?;
        let att = match mask {
            None => att,
            Some(mask) => {
                let mask = mask.broadcast_as(att.shape())?;
                mask.where_cond(&self.neg_inf.broadcast_as(att.shape().dims())?, &att)?
            }
        };
        let att = candle_nn::ops::softmax_last_dim(&att)?;
        let y = att.matmul(&v.contiguous()?)?;
        let y = y.transpose(1, 2)?.reshape(&[b, seq_len, n_embd])?;
        self.wo.forward(&y)
    }

    fn mlp(&self, x: &Tensor) -> Result<Tensor> {
        let gate = candle_nn::ops::silu(&self.gate.forward(x)?)?;
        self.down.forward(&(gate * self.up.forward(x)?)?)
    }
}

fn repeat_kv(x: Tensor, n_rep: usize) -> Result<Tensor> {
    if n_rep == 1 {
        return Ok(x);
    }
    let (b, n_kv_head, seq_len, head_dim) = x.dims4()?;
    // `cat` then reshape avoids a strided copy (candle PR #2043).
    Tensor::cat(&vec![&x; n_rep], 2)?.reshape((b, n_kv_head * n_rep, seq_len, head_dim))
}

/// The weights, the KV caches and a cache of causal masks; `Clone` is cheap for the weights
/// (shared) and copies the caches, which is how a prompt prefix is reused.
#[derive(Debug, Clone)]
pub(crate) struct ModelWeights {
    tok_embeddings: Embedding,
    layers: Vec<Layer>,
    norm: RmsNorm,
    /// The vocabulary's scores: a [`Weight`], so that scoring every position of a text is
    /// one dense product, not candle's quantized one row by row.
    output: Weight,
    masks: HashMap<(usize, usize), Tensor>,
    /// The rotary tables as `(cos, sin)`, `MAX_SEQ_LEN x head_dim / 2`, for the prompt path;
    /// `None` where it does not apply (rotary dimensions other than the head's).
    rope: Option<Arc<(Vec<f32>, Vec<f32>)>>,
}

fn rotary_tables(head_dim: usize, freq_base: f32, device: &Device) -> Result<(Tensor, Tensor)> {
    let theta: Vec<_> = (0..head_dim)
        .step_by(2)
        .map(|i| 1f32 / freq_base.powf(i as f32 / head_dim as f32))
        .collect();
    let theta = Tensor::new(theta.as_slice(), device)?;
    let angles = Tensor::arange(0, MAX_SEQ_LEN as u32, device)?
        .to_dtype(DType::F32)?
        .reshape((MAX_SEQ_LEN, 1))?
        .matmul(&theta.reshape((1, theta.elem_count()))?)?;
    Ok((angles.cos()?, angles.sin()?))
}

/// Architectures whose GGUF uses the NEOX rotary layout (llama.cpp's `llama_model_rope_type`).
const NEOX_ARCHITECTURES: &[&str] = &[
    "qwen",
    "qwen2",
    "qwen2moe",
    "qwen3",
    "qwen3moe",
    "falcon",
    "grok",
    "dbrx",
    "phi2",
    "phi3",
    "phimoe",
    "stablelm",
    "starcoder2",
    "olmo2",
    "olmoe",
    "codeshell",
    "plamo",
];

impl ModelWeights {
    /// Reads a GGUF file's tensors (`ct` is its already-read header).
    pub(crate) fn from_gguf<R: Seek + Read>(
        ct: gguf_file::Content,
        reader: &mut R,
        device: &Device,
    ) -> Result<Self> {
        let md = |key: &str| match ct.metadata.get(key) {
            Some(v) => Ok(v),
            None => candle_core::bail!("cannot find {key} in the GGUF metadata"),
        };
        let n_expert = md("llama.expert_count")
            .and_then(|v| v.to_u32())
            .unwrap_or(0);
        if n_expert > 1 {
            candle_core::bail!("mixture-of-experts models are not supported ({n_expert} experts)");
        }
        let n_head = md("llama.attention.head_count")?.to_u32()? as usize;
        let n_kv_head = md("llama.attention.head_count_kv")?.to_u32()? as usize;
        let block_count = md("llama.block_count")?.to_u32()? as usize;
        let embedding_length = md("llama.embedding_length")?.to_u32()? as usize;
        let rope_dim = md("llama.rope.dimension_count")?.to_u32()? as usize;
        let eps = md("llama.attention.layer_norm_rms_epsilon")?.to_f32()? as f64;
        let freq_base = md("llama.rope.freq_base")
            .and_then(|m| m.to_f32())
            .unwrap_or(10000.);
        if n_head == 0 || n_kv_head == 0 || !n_head.is_multiple_of(n_kv_head) {
            candle_core::bail!("bad head counts in the GGUF metadata: {n_head} / {n_kv_head}");
        }
        let arch = ct
            .metadata
            .get("general.architecture")
            .and_then(|v| v.to_string().ok())
            .cloned()
            .unwrap_or_default();
        let rope_is_neox = NEOX_ARCHITECTURES.contains(&arch.as_str());
        let (cos, sin) = rotary_tables(rope_dim, freq_base, device)?;
        let neg_inf = Tensor::new(f32::NEG_INFINITY, device)?;
        let rope = (n_head * rope_dim == embedding_length && device.is_cpu())
            .then(|| -> Result<_> {
                let flat = |t: &Tensor| t.flatten_all()?.to_vec1::<f32>();
                Ok(Arc::new((flat(&cos)?, flat(&sin)?)))
            })
            .transpose()?;

        let mut tensor = |name: &str| ct.tensor(reader, name, device);
        let tok_embeddings_q = tensor("token_embd.weight")?;
        let tok_embeddings = tok_embeddings_q.dequantize(device)?;
        let norm = RmsNorm::new(tensor("output_norm.weight")?, eps)?;
        // Models with tied embeddings have no output matrix.
        let output = tensor("output.weight").unwrap_or(tok_embeddings_q);
        let mut layers = Vec::with_capacity(block_count);
        for i in 0..block_count {
            let mut q = |suffix: &str| -> Result<Weight> {
                Weight::new(tensor(&format!("blk.{i}.{suffix}.weight"))?)
            };
            let (wq, wk, wv, wo) = (q("attn_q")?, q("attn_k")?, q("attn_v")?, q("attn_output")?);
            let (gate, down, up) = (q("ffn_gate")?, q("ffn_down")?, q("ffn_up")?);
            layers.push(Layer {
                wq,
                wk,
                wv,
                wo,
                gate,
                down,
                up,
                attn_norm: RmsNorm::new(tensor(&format!("blk.{i}.attn_norm.weight"))?, eps)?,
                ffn_norm: RmsNorm::new(tensor(&format!("blk.{i}.ffn_norm.weight"))?, eps)?,
                n_head,
                n_kv_head,
                head_dim: embedding_length / n_head,
                rope_is_neox,
                cos: cos.clone(),
                sin: sin.clone(),
                neg_inf: neg_inf.clone(),
                kv_cache: None,
            });
        }
        Ok(Self {
            tok_embeddings: Embedding::new(tok_embeddings, embedding_length),
            layers,
            norm,
            output: Weight::new(output)?,
            masks: HashMap::new(),
            rope,
        })
    }

    /// A `(seq_len, index_pos + seq_len)` mask, 1 where a query must not see a key: the cached
    /// prefix is visible to every query, the new tokens form the causal triangle.
    fn mask(&mut self, seq_len: usize, index_pos: usize, device: &Device) -> Result<Tensor> {
        let kv_len = index_pos + seq_len;
        if let Some(mask) = self.masks.get(&(seq_len, kv_len)) {
            return Ok(mask.clone());
        }
        let mask: Vec<u8> = (0..seq_len)
            .flat_map(|i| (0..kv_len).map(move |j| u8::from(j > index_pos + i)))
            .collect();
        let mask = Tensor::from_slice(&mask, (seq_len, kv_len), device)?;
        self.masks.insert((seq_len, kv_len), mask.clone());
        Ok(mask)
    }

    /// Forgets the KV caches (the next `forward` starts at position 0).
    pub(crate) fn clear_kv_cache(&mut self) {
        for layer in &mut self.layers {
            layer.kv_cache = None;
        }
    }

    /// Feeds `x` (`(1, seq_len)` token ids) at position `index_pos`; returns the logits of the
    /// last position.
    pub(crate) fn forward(&mut self, x: &Tensor, index_pos: usize) -> Result<Tensor> {
        let (_b, seq_len) = x.dims2()?;
        if index_pos + seq_len > MAX_SEQ_LEN {
            candle_core::bail!(
                "{} tokens exceed the context of {MAX_SEQ_LEN}",
                index_pos + seq_len
            );
        }
        if seq_len >= DENSE_FROM_ROWS && self.rope.is_some() {
            return self.prefill_logits(x, index_pos, 1);
        }
        self.forward_candle(x, index_pos)
    }

    /// The prompt path's logits of the last `rows` positions of `x` (`(rows, vocab)`); the
    /// caller has checked that `x` fits the context.
    fn prefill_logits(&mut self, x: &Tensor, index_pos: usize, rows: usize) -> Result<Tensor> {
        let (_b, seq_len) = x.dims2()?;
        let rows = rows.clamp(1, seq_len);
        let mut h = self.prefill(&x.flatten_all()?.to_vec1::<u32>()?, index_pos)?;
        let d = h.len() / seq_len;
        let h = h.split_off((seq_len - rows) * d);
        let h = Tensor::from_vec(h, (rows, d), &Device::Cpu)?;
        self.output.forward(&self.norm.forward(&h)?)
    }

    /// The forward pass on candle's ops: generation (one token), and short prompts.
    pub(crate) fn forward_candle(&mut self, x: &Tensor, index_pos: usize) -> Result<Tensor> {
        let (_b, seq_len) = x.dims2()?;
        let h = self.hidden(x, index_pos)?;
        let last = self.norm.forward(&h)?.i((.., seq_len - 1, ..))?;
        self.output.forward(&last)
    }

    /// Feeds `x` (`(1, seq_len)` token ids) at position `index_pos` on candle's ops; returns
    /// the logits of every position (`(seq_len, vocab)`), for scoring a given continuation.
    pub(crate) fn forward_all(&mut self, x: &Tensor, index_pos: usize) -> Result<Tensor> {
        let (_b, seq_len) = x.dims2()?;
        if seq_len >= DENSE_FROM_ROWS && self.rope.is_some() && index_pos + seq_len <= MAX_SEQ_LEN {
            return self.prefill_logits(x, index_pos, seq_len);
        }
        let h = self.hidden(x, index_pos)?;
        self.output.forward(&self.norm.forward(&h)?.squeeze(0)?)
    }

    /// The layers on candle's ops: the last hidden states of every position, before the
    /// final norm (`(1, seq_len, dim)`); the KV caches are extended.
    fn hidden(&mut self, x: &Tensor, index_pos: usize) -> Result<Tensor> {
        let (_b, seq_len) = x.dims2()?;
        if index_pos + seq_len > MAX_SEQ_LEN {
            candle_core::bail!(
                "{} tokens exceed the context of {MAX_SEQ_LEN}",
                index_pos + seq_len
            );
        }
        let mask = if seq_len == 1 {
            None
        } else {
            Some(self.mask(seq_len, index_pos, x.device())?)
        };
        let mut h = self.tok_embeddings.forward(x)?;
        for layer in &mut self.layers {
            let attn = layer.attention(&layer.attn_norm.forward(&h)?, mask.as_ref(), index_pos)?;
            let h1 = (attn + &h)?;
            h = (layer.mlp(&layer.ffn_norm.forward(&h1)?)? + h1)?;
        }
        Ok(h)
    }

    /// The prompt path: many positions at once, bound by arithmetic, not memory. Each weight
    /// matrix is dequantized to `f32` for its product (into one reused buffer; nothing more
    /// stays in memory) and multiplied by gemm; query, key and value come from one product,
    /// the rotary and the causal mask are applied in place, each query head reads its key and
    /// value head where it lies (no repeated copies for grouped-query attention), and the
    /// gate's activation is folded into the up projection's output. candle's ops made each
    /// of these a fresh tensor and a pass of its own (profiled 2026-11-28: half the time
    /// outside the matrix products). Writes the KV caches as `forward_candle` does; returns
    /// every position's last hidden state (`seq x dim`, before the final norm).
    fn prefill(&mut self, ids: &[u32], pos: usize) -> Result<Vec<f32>> {
        let dev = Device::Cpu;
        let Some(rope) = self.rope.clone() else {
            candle_core::bail!("the prompt path needs the rotary tables");
        };
        let (cos, sin) = (&rope.0, &rope.1);
        let Some(first) = self.layers.first() else {
            candle_core::bail!("a model without layers");
        };
        let (n_head, n_kv, hd) = (first.n_head, first.n_kv_head, first.head_dim);
        let (seq, d, kvd, half) = (ids.len(), n_head * hd, n_kv * hd, hd / 2);
        let total = pos + seq;
        let qkv_n = d + 2 * kvd;
        let inter = first.gate.dims()?.0;
        let group = n_head / n_kv;
        let scale = 1.0 / (hd as f32).sqrt();

        let mut x = self
            .tok_embeddings
            .forward(&Tensor::new(ids, &dev)?)?
            .flatten_all()?
            .to_vec1::<f32>()?;
        if x.len() != seq * d {
            candle_core::bail!("embeddings of {} values for {seq} x {d}", x.len());
        }
        let mut xn = vec![0f32; seq * d];
        let mut qkv = vec![0f32; seq * qkv_n];
        let mut ctx = vec![0f32; seq * d];
        let mut gate_up = vec![0f32; seq * 2 * inter];
        for layer in &mut self.layers {
            if layer.wq.dims()? != (d, d) || layer.gate.dims()? != (inter, d) {
                candle_core::bail!("layers of different shapes");
            }
            // Attention.
            xn.copy_from_slice(&x);
            rows_mut(&mut xn, d, |_, r| layer.attn_norm.row(r));
            let qkv_weights = [&layer.wq, &layer.wk, &layer.wv];
            product((&mut qkv, qkv_n, 0), (&xn, d), seq, &qkv_weights, false)?;
            let neox = layer.rope_is_neox;
            rows_mut(&mut qkv, qkv_n, |i, r| {
                let p = pos + i;
                let (c, s) = (
                    &cos[p * half..(p + 1) * half],
                    &sin[p * half..(p + 1) * half],
                );
                for h in r[..d + kvd].chunks_exact_mut(hd) {
                    rotate(h, c, s, neox);
                }
                r[..d].iter_mut().for_each(|v| *v *= scale);
            });
            // Keys and values: the cached prefix, then this prompt's, per head.
            let prefix = match &layer.kv_cache {
                Some((k, v)) if pos > 0 => {
                    if k.dims4()? != (1, n_kv, pos, hd) || v.dims() != k.dims() {
                        candle_core::bail!("a KV cache of {:?} at position {pos}", k.dims());
                    }
                    Some((
                        k.flatten_all()?.to_vec1::<f32>()?,
                        v.flatten_all()?.to_vec1::<f32>()?,
                    ))
                }
                None if pos > 0 => {
                    candle_core::bail!("no KV cache for the {pos} positions before this prompt")
                }
                _ => None,
            };
            let mut keys = vec![0f32; n_kv * total * hd];
            let mut values = vec![0f32; n_kv * total * hd];
            for h in 0..n_kv {
                let at = h * total * hd;
                if let Some((pk, pv)) = &prefix {
                    let from = h * pos * hd..(h + 1) * pos * hd;
                    keys[at..at + pos * hd].copy_from_slice(&pk[from.clone()]);
                    values[at..at + pos * hd].copy_from_slice(&pv[from]);
                }
                for (i, r) in qkv.chunks_exact(qkv_n).enumerate() {
                    let row = at + (pos + i) * hd;
                    keys[row..row + hd].copy_from_slice(&r[d + h * hd..d + (h + 1) * hd]);
                    values[row..row + hd]
                        .copy_from_slice(&r[d + kvd + h * hd..d + kvd + (h + 1) * hd]);
                }
            }
            let out = SharedOut(ctx.as_mut_ptr());
            let (keys_ref, values_ref, qkv_ref) = (&keys, &values, &qkv);
            (0..n_head)
                .into_par_iter()
                .for_each_init(Vec::new, |scores, h| {
                    let kv = (h / group) * total * hd..(h / group + 1) * total * hd;
                    // SAFETY: columns h*hd..(h+1)*hd of every row of `ctx` (seq x d) are
                    // this job's alone.
                    #[allow(unsafe_code)]
                    unsafe {
                        attend_head(
                            scores,
                            (&qkv_ref[h * hd..], qkv_n),
                            (&keys_ref[kv.clone()], hd),
                            (&values_ref[kv], hd),
                            (out.at(h * hd), d),
                            (seq, total, hd),
                            Some(pos),
                            None,
                        );
                    }
                });
            layer.kv_cache = Some((
                Tensor::from_vec(keys, (1, n_kv, total, hd), &dev)?,
                Tensor::from_vec(values, (1, n_kv, total, hd), &dev)?,
            ));
            product((&mut x, d, 0), (&ctx, d), seq, &[&layer.wo], true)?;
            // Feed-forward: down(silu(gate) * up), the product of the two written over the
            // gate's half of each row.
            xn.copy_from_slice(&x);
            rows_mut(&mut xn, d, |_, r| layer.ffn_norm.row(r));
            let gate_up_weights = [&layer.gate, &layer.up];
            product(
                (&mut gate_up, 2 * inter, 0),
                (&xn, d),
                seq,
                &gate_up_weights,
                false,
            )?;
            rows_mut(&mut gate_up, 2 * inter, |_, r| {
                let (g, u) = r.split_at_mut(inter);
                for (g, u) in g.iter_mut().zip(u.iter()) {
                    *g = *g / (1.0 + exp(-*g)) * u;
                }
            });
            product(
                (&mut x, d, 0),
                (&gate_up, 2 * inter),
                seq,
                &[&layer.down],
                true,
            )?;
        }
        Ok(x)
    }
}
