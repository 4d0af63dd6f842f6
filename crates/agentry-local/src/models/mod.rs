//! The two network architectures the embedded models need, adapted from `candle-transformers`
//! 0.11.1 (MIT OR Apache-2.0, <https://github.com/huggingface/candle>).
//!
//! Why not depend on `candle-transformers`: it compiles ~125 model families at `opt-level = 3`
//! (its kernels must be optimized even in dev builds), minutes of every cold build for two
//! files; and owning the forward passes is where the embedding and prompt-processing speed work
//! of the specialists happens.

pub(crate) mod bert;
pub(crate) mod llama;
pub(crate) mod ops;
