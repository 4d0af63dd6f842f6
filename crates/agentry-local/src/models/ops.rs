//! The kernels the hand-written forward passes share (the BERT encoder's, and the llama
//! decoder's for a prompt's many tokens): matrix products on gemm, row-wise passes across the
//! rayon pool, one attention head as two strided products around a softmax.
//!
//! Why not candle's ops: each op there is a fresh tensor and a separate pass, and the heads
//! are split and merged by copies; these read and write the buffers in place (gemm takes row
//! strides), and fold the bias, residual and mask into the passes that exist anyway.

use gemm::{Parallelism, gemm};
use rayon::prelude::*;

/// Below this many multiply-adds a product runs on the calling thread: a search query's
/// products are done before a second thread would have started.
const PARALLEL_WORK: usize = 1 << 20;
/// Rows (tokens) from which the row-wise passes are split across the pool.
pub(crate) const PARALLEL_ROWS: usize = 64;

/// `dst = x · wᵀ` (or `dst += x · wᵀ` with `accumulate`), where `dst` is `m x n`, `x` is
/// `m x k` and `w` is `(n, k)`, all row-major: the layout checkpoints store weights in.
pub(crate) fn matmul(
    dst: &mut [f32],
    x: &[f32],
    w: &[f32],
    (m, n, k): (usize, usize, usize),
    accumulate: bool,
) {
    matmul_strided(dst, (x, k), w, (m, n, k), accumulate)
}

/// [`matmul`] with `x`'s rows `x_stride` apart (the first `k` of each are used).
#[allow(unsafe_code)]
fn matmul_strided(
    dst: &mut [f32],
    (x, x_stride): (&[f32], usize),
    w: &[f32],
    (m, n, k): (usize, usize, usize),
    accumulate: bool,
) {
    assert!(x_stride >= k && dst.len() >= m * n && w.len() >= n * k);
    assert!(m == 0 || x.len() >= (m - 1) * x_stride + k);
    let parallelism = if m * n * k < PARALLEL_WORK {
        Parallelism::None
    } else {
        Parallelism::Rayon(0)
    };
    // SAFETY: the three slices hold the m x n, m x k (at x_stride) and n x k elements the
    // strides reach (asserted above), and dst does not alias the inputs (a distinct &mut).
    unsafe {
        product(
            (m, n, k),
            (dst.as_mut_ptr(), n),
            (x.as_ptr(), x_stride),
            (w.as_ptr(), 1, k),
            accumulate,
            parallelism,
        );
    }
}

/// Rows of a weight expanded at a time by [`matmul_expanding`], at most: 128 rows of 1,536
/// inputs are 768 KB, inside one core's L2 on the machines measured (1-2 MB).
const EXPAND_ROWS: usize = 128;

thread_local! {
    /// Each pool thread's block of expanded weight rows, kept between products: a fresh
    /// buffer of this size would be mapped and faulted in on every product.
    static EXPANDED: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `dst[:, col..col + n] = x · wᵀ` (or `+=` with `accumulate`) for a weight `w` of `n` rows
/// of `k` inputs kept in another form (quantized), which `expand(rows, out)` writes out in
/// `f32`, row-major, a block of rows at a time. `dst` has `m` rows `dst_stride` apart, `x`
/// `m` rows of `k` at `x_stride`.
///
/// Why blocks: expanding the whole matrix first and multiplying after sends it through
/// memory twice (written, then read back by the product); a block is expanded by the pool
/// thread that multiplies by it, right before, and is read back from that core's cache. The
/// blocks split the rows evenly across the pool, each product on its thread alone.
#[allow(unsafe_code)]
pub(crate) fn matmul_expanding(
    (dst, dst_stride, col): (&mut [f32], usize, usize),
    (x, x_stride): (&[f32], usize),
    (m, n, k): (usize, usize, usize),
    accumulate: bool,
    expand: impl Fn(std::ops::Range<usize>, &mut [f32]) + Sync,
) {
    if m == 0 || n == 0 {
        return;
    }
    assert!(x_stride >= k && x.len() >= (m - 1) * x_stride + k);
    assert!(col + n <= dst_stride && dst.len() >= (m - 1) * dst_stride + col + n);
    let threads = rayon::current_num_threads().max(1);
    let jobs = threads * n.div_ceil(threads * EXPAND_ROWS);
    let rows = n.div_ceil(jobs).next_multiple_of(16).min(n);
    let out = SharedOut(dst.as_mut_ptr());
    let job = |j: usize| {
        let r = j * rows..((j + 1) * rows).min(n);
        EXPANDED.with_borrow_mut(|w| {
            w.resize(r.len() * k, 0.0);
            expand(r.clone(), w);
            // SAFETY: `x` holds m rows of k at x_stride and `w` r.len() rows of k (asserted
            // and sized above); the job writes columns col + r of dst's m rows (within dst:
            // asserted), which no other job writes.
            unsafe {
                product(
                    (m, r.len(), k),
                    (out.at(col + r.start), dst_stride),
                    (x.as_ptr(), x_stride),
                    (w.as_ptr(), 1, k),
                    accumulate,
                    Parallelism::None,
                );
            }
        });
    };
    let blocks = n.div_ceil(rows);
    if blocks == 1 || m * n * k < PARALLEL_WORK {
        (0..blocks).for_each(job);
    } else {
        (0..blocks).into_par_iter().for_each(job);
    }
}

/// `dst (m x n, rows dst_rs apart) = lhs (m x k, rows lhs_rs apart) · rhs` (or `+=` with
/// `accumulate`), where element `(i, j)` of `rhs` lies at `rhs + i * rhs_rs + j * rhs_cs`:
/// the one place gemm's nineteen arguments are spelled out.
///
/// # Safety
/// Each pointer must be valid for every element its strides reach, and `dst` must alias
/// neither input.
#[allow(unsafe_code)]
unsafe fn product(
    (m, n, k): (usize, usize, usize),
    (dst, dst_rs): (*mut f32, usize),
    (lhs, lhs_rs): (*const f32, usize),
    (rhs, rhs_rs, rhs_cs): (*const f32, usize, usize),
    accumulate: bool,
    parallelism: Parallelism,
) {
    // SAFETY: this function's contract.
    unsafe {
        gemm(
            m,
            n,
            k,
            dst,
            1,
            dst_rs as isize,
            accumulate,
            lhs,
            1,
            lhs_rs as isize,
            rhs,
            rhs_cs as isize,
            rhs_rs as isize,
            if accumulate { 1.0 } else { 0.0 },
            1.0,
            false,
            false,
            false,
            parallelism,
        );
    }
}

/// `f(index, row)` on each row of `width` elements of `buf`, across the pool when there are
/// many.
pub(crate) fn rows_mut(buf: &mut [f32], width: usize, f: impl Fn(usize, &mut [f32]) + Sync + Send) {
    if buf.len() < PARALLEL_ROWS * width {
        buf.chunks_exact_mut(width)
            .enumerate()
            .for_each(|(i, r)| f(i, r));
    } else {
        buf.par_chunks_mut(width)
            .with_min_len(16)
            .enumerate()
            .for_each(|(i, r)| f(i, r));
    }
}

/// A raw pointer attention jobs write through: each job owns a disjoint block (its rows, its
/// head's columns) of the output buffer.
#[derive(Clone, Copy)]
pub(crate) struct SharedOut(pub(crate) *mut f32);

impl SharedOut {
    /// The address `offset` elements in (a method, so closures capture the whole `SharedOut`
    /// and not its raw pointer field).
    pub(crate) fn at(self, offset: usize) -> *mut f32 {
        self.0.wrapping_add(offset)
    }
}

// SAFETY: see the type's doc: no two jobs write the same element, and the buffer outlives them.
#[allow(unsafe_code)]
unsafe impl Send for SharedOut {}
// SAFETY: as for Send.
#[allow(unsafe_code)]
unsafe impl Sync for SharedOut {}

/// One attention head: `out = softmax(q kᵀ) v` (q already scaled), where `q` holds `m` query
/// rows and `k`, `v` hold `n` key and value rows, each row `d` wide at its own stride (`.1`)
/// in its slice. With `causal = Some(first)`, query `i` sees keys `0..=first + i` only. With
/// `relative = Some((bias, zero))`, the score of query `i` for key `j` gains
/// `bias[zero + j - i]` (MPNet's relative position bias, one head's table).
/// `scores` is the caller's scratch, reused across calls.
///
/// # Safety
/// `out` must be valid for writing the `m` rows of `d` elements at stride `out_stride`, and
/// nothing else may read or write those elements during the call.
#[allow(unsafe_code, clippy::too_many_arguments)]
pub(crate) unsafe fn attend_head(
    scores: &mut Vec<f32>,
    (q, q_stride): (&[f32], usize),
    (k, k_stride): (&[f32], usize),
    (v, v_stride): (&[f32], usize),
    (out, out_stride): (*mut f32, usize),
    (m, n, d): (usize, usize, usize),
    causal: Option<usize>,
    relative: Option<(&[f32], usize)>,
) {
    if m == 0 || n == 0 {
        return;
    }
    let reach = |rows: usize, stride: usize| (rows - 1) * stride + d;
    assert!(q.len() >= reach(m, q_stride) && k.len() >= reach(n, k_stride));
    assert!(v.len() >= reach(n, v_stride));
    scores.resize(m * n, 0.0);
    // SAFETY: q, k and scores hold what the strides reach (asserted above); kᵀ's element
    // (c, j) is k's (j, c).
    unsafe {
        product(
            (m, n, d),
            (scores.as_mut_ptr(), n),
            (q.as_ptr(), q_stride),
            (k.as_ptr(), 1, k_stride),
            false,
            Parallelism::None,
        );
    }
    if let Some((bias, zero)) = relative {
        assert!(zero + 1 >= m && bias.len() >= zero + n);
        for (i, row) in scores.chunks_exact_mut(n).enumerate() {
            let b = &bias[zero - i..zero - i + n];
            row.iter_mut().zip(b).for_each(|(s, b)| *s += b);
        }
    }
    for (i, row) in scores.chunks_exact_mut(n).enumerate() {
        let seen = causal.map_or(n, |first| (first + i + 1).min(n));
        softmax(&mut row[..seen]);
        row[seen..].fill(0.0);
    }
    // SAFETY: scores holds m x n, v what its stride reaches (asserted above); out is the
    // caller's to write (this function's contract).
    unsafe {
        product(
            (m, d, n),
            (out, out_stride),
            (scores.as_ptr(), n),
            (v.as_ptr(), v_stride, 1),
            false,
            Parallelism::None,
        );
    }
}

/// Defines `fn name(args)` compiled three times, for AVX-512, for AVX2 and for plain
/// x86-64, and picked at run time by what the CPU has: for the element-wise passes, whose
/// loops the build's baseline (SSE2) runs four values an instruction; the attention's softmax
/// alone was a fifth of the encoder's time on an AVX-512 CPU (perf, 2026-12-02). A macro, not
/// a function taking a closure: a closure is not inlined into a `#[target_feature]` function
/// and stays compiled for the baseline (measured). No fused multiply-adds are formed in any
/// of the three (Rust does not contract), so every CPU gets the same values.
macro_rules! vectorized {
    ($(#[$m:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $body:block) => {
        $(#[$m])*
        #[allow(unsafe_code)]
        $vis fn $name($($arg: $ty),*) {
            #[inline(always)]
            fn lanes($($arg: $ty),*) $body
            #[cfg(target_arch = "x86_64")]
            {
                if std::arch::is_x86_feature_detected!("avx512f") {
                    #[target_feature(enable = "avx512f")]
                    fn avx512($($arg: $ty),*) {
                        lanes($($arg),*)
                    }
                    // SAFETY: the CPU has AVX-512F (checked just above).
                    return unsafe { avx512($($arg),*) };
                }
                if std::arch::is_x86_feature_detected!("avx2") {
                    #[target_feature(enable = "avx2")]
                    fn avx2($($arg: $ty),*) {
                        lanes($($arg),*)
                    }
                    // SAFETY: the CPU has AVX2 (checked just above).
                    return unsafe { avx2($($arg),*) };
                }
            }
            lanes($($arg),*)
        }
    };
}
pub(crate) use vectorized;

/// Lanes of the running maximum and sum: as wide as an AVX-512 register, so the compiler
/// keeps each in one.
const LANES: usize = 16;

vectorized! {
    /// A row of scores into probabilities in place (the maximum subtracted first).
    pub(crate) fn softmax(row: &mut [f32]) {
        // The maximum in lanes too: one running value waits on each comparison in turn, and its
        // loop does not vectorise.
        let mut top = [f32::MIN; LANES];
        let mut chunks = row.chunks_exact(LANES);
        for c in &mut chunks {
            for (t, &v) in top.iter_mut().zip(c) {
                *t = if v > *t { v } else { *t };
            }
        }
        let max = top
            .iter()
            .chain(chunks.remainder())
            .fold(f32::MIN, |m, &v| if v > m { v } else { m });
        for v in row.iter_mut() {
            *v = exp(*v - max);
        }
        let mut sums = [0f32; LANES];
        let mut chunks = row.chunks_exact(LANES);
        for c in &mut chunks {
            for (s, v) in sums.iter_mut().zip(c) {
                *s += v;
            }
        }
        let inv = 1.0 / (sums.iter().sum::<f32>() + chunks.remainder().iter().sum::<f32>());
        for v in row.iter_mut() {
            *v *= inv;
        }
    }
}

/// e^x in single precision, branch-free so the compiler vectorises it (Cephes' `expf`:
/// x = n ln 2 + r, e^r by a degree-7 polynomial, 2^n put in the exponent; within 2 units in
/// the last place of `f32::exp`); 0 below -87.
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
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
    // 2^n without a float-to-integer conversion (`as i32` saturates, which the compiler
    // does one value at a time): n + 127 lies in 1..=255, so adding 2^23 leaves it as the
    // low bits of the sum's mantissa, and shifting those into the exponent field is 2^n.
    let scale = f32::from_bits((n + (127.0 + 8_388_608.0)).to_bits() << 23);
    if x < -87.0 { 0.0 } else { e * scale }
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

    /// The product by blocks of expanded rows is the plain product, into columns of a wider
    /// destination, added or not, on one block and on many across the pool.
    #[test]
    fn a_product_by_expanded_blocks_is_the_product() {
        let value = |i: usize| ((i * 7919) % 1009) as f32 / 1009.0 - 0.5;
        for (m, n, k) in [(3, 5, 32), (40, 300, 64), (17, 1000, 96)] {
            let (stride, col) = (n + 9, 4);
            let x: Vec<f32> = (0..m * k).map(value).collect();
            let w: Vec<f32> = (0..n * k).map(|i| value(i + 13)).collect();
            let start: Vec<f32> = (0..m * stride).map(|i| value(i + 101)).collect();
            for accumulate in [false, true] {
                let mut dst = start.clone();
                super::matmul_expanding(
                    (&mut dst, stride, col),
                    (&x, k),
                    (m, n, k),
                    accumulate,
                    |rows, out| out.copy_from_slice(&w[rows.start * k..rows.end * k]),
                );
                for i in 0..m {
                    for j in 0..stride {
                        let before = start[i * stride + j];
                        let want = if (col..col + n).contains(&j) {
                            let dot: f32 =
                                (0..k).map(|c| x[i * k + c] * w[(j - col) * k + c]).sum();
                            if accumulate { before + dot } else { dot }
                        } else {
                            before
                        };
                        let got = dst[i * stride + j];
                        assert!(
                            (got - want).abs() < 1e-4,
                            "{m}x{n}x{k} ({i}, {j}): {got} vs {want}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn softmax_sums_to_one_and_keeps_the_order() {
        let mut row: Vec<f32> = (0..37).map(|i| (i as f32 * 0.37).sin() * 9.0).collect();
        let want: Vec<f64> = {
            let max = row.iter().cloned().fold(f32::MIN, f32::max) as f64;
            let e: Vec<f64> = row.iter().map(|&v| (v as f64 - max).exp()).collect();
            let sum: f64 = e.iter().sum();
            e.iter().map(|v| v / sum).collect()
        };
        super::softmax(&mut row);
        for (g, w) in row.iter().zip(&want) {
            assert!((*g as f64 - w).abs() < 1e-6, "{g} vs {w}");
        }
    }
}
