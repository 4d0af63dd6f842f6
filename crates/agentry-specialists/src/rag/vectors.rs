//! A collection's vectors held in memory as one flat matrix, for exact nearest-neighbour
//! search by cosine distance.
//!
//! SQLite stays the store of record (sqlite-vec's vec0 table); this is a cache of it. A vec0
//! KNN query reads every vector of the partition from database pages on each query, which at
//! 100k chunks dominated query time; a contiguous `f32` matrix scans the same data several
//! times faster and gives the same ranking (exact search, same metric).

/// The vectors of one collection: ids, unit-normalised rows.
#[derive(Debug, Default)]
pub struct VectorIndex {
    ids: Vec<i64>,
    dims: usize,
    /// Row-major, each row scaled to unit length (a zero vector stays zero).
    rows: Vec<f32>,
}

impl VectorIndex {
    /// An empty index of vectors of length `dims`.
    pub fn new(dims: usize) -> Self {
        VectorIndex {
            ids: Vec::new(),
            dims,
            rows: Vec::new(),
        }
    }

    /// Adds one vector; a vector of another length is ignored (it cannot be compared).
    pub fn push(&mut self, id: i64, v: &[f32]) {
        if v.len() != self.dims {
            return;
        }
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        let scale = if n > 0.0 { 1.0 / n } else { 0.0 };
        self.ids.push(id);
        self.rows.extend(v.iter().map(|x| x * scale));
    }

    /// Vectors held.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The ids of the `k` rows nearest to `q` by cosine distance, nearest first (ties: lower
    /// id first, so results are deterministic).
    pub fn nearest(&self, q: &[f32], k: usize) -> Vec<i64> {
        if q.len() != self.dims || self.ids.is_empty() || k == 0 {
            return Vec::new();
        }
        let mut scores = vec![0f32; self.ids.len()];
        // The scan reads every vector (4 bytes x dims per row): past a few tens of thousands
        // of rows it is bound by memory bandwidth, which one core does not saturate, so two
        // halves are scanned side by side.
        if self.ids.len() >= PARALLEL_ROWS {
            let half = self.ids.len() / 2;
            let (a, b) = scores.split_at_mut(half);
            let (ra, rb) = self.rows.split_at(half * self.dims);
            std::thread::scope(|s| {
                s.spawn(|| score_rows(ra, q, a));
                score_rows(rb, q, b);
            });
        } else {
            score_rows(&self.rows, q, &mut scores);
        }
        let mut scored: Vec<(f32, i64)> =
            scores.into_iter().zip(self.ids.iter().copied()).collect();
        let by_score = |a: &(f32, i64), b: &(f32, i64)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
        let k = k.min(scored.len());
        if k < scored.len() {
            scored.select_nth_unstable_by(k - 1, by_score);
            scored.truncate(k);
        }
        scored.sort_unstable_by(by_score);
        scored.into_iter().map(|(_, id)| id).collect()
    }
}

/// Rows from which [`VectorIndex::nearest`] scans on two threads.
const PARALLEL_ROWS: usize = 32_768;

/// `out[i]` = the dot product of row `i` of `rows` with `q`: with AVX2 and FMA where the CPU
/// has them (checked once per call), else with what the build targets (SSE2 on x86-64).
fn score_rows(rows: &[f32], q: &[f32], out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        #[allow(unsafe_code)]
        // SAFETY: the CPU was just seen to have the features `score_rows_fma` is compiled for.
        unsafe {
            score_rows_fma(rows, q, out)
        };
        return;
    }
    for (row, o) in rows.chunks_exact(q.len()).zip(out) {
        *o = dot::<false>(row, q);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn score_rows_fma(rows: &[f32], q: &[f32], out: &mut [f32]) {
    for (row, o) in rows.chunks_exact(q.len()).zip(out) {
        *o = dot::<true>(row, q);
    }
}

/// A dot product the compiler vectorises: eight independent accumulators, fused
/// multiply-adds when `FMA` (only inside a function compiled with the `fma` feature: without
/// it `mul_add` is a slow library call).
#[inline(always)]
fn dot<const FMA: bool>(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for ((s, x), y) in acc.iter_mut().zip(x).zip(y) {
            *s = if FMA { x.mul_add(*y, *s) } else { *s + x * y };
        }
    }
    acc.iter().sum::<f32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_by_cosine_with_deterministic_ties() {
        let mut ix = VectorIndex::new(3);
        ix.push(10, &[1.0, 0.0, 0.0]);
        ix.push(11, &[0.0, 2.0, 0.0]); // length does not matter for cosine
        ix.push(12, &[0.0, 0.0, 1.0]);
        ix.push(13, &[0.7, 0.7, 0.0]);
        ix.push(14, &[1.0, 0.0]); // wrong length: ignored
        ix.push(15, &[0.0, 0.0, 0.0]);
        assert_eq!(ix.len(), 5);
        assert_eq!(ix.nearest(&[0.0, 1.0, 0.0], 2), [11, 13]);
        assert_eq!(ix.nearest(&[1.0, 0.1, 0.0], 1), [10]);
        assert_eq!(ix.nearest(&[1.0, 1.0, 0.0], 10), [13, 10, 11, 12, 15]);
        // Ties keep id order.
        let mut t = VectorIndex::new(2);
        for id in [5, 3, 4] {
            t.push(id, &[1.0, 0.0]);
        }
        assert_eq!(t.nearest(&[1.0, 0.0], 3), [3, 4, 5]);
        assert!(t.nearest(&[1.0], 3).is_empty());
    }

    #[test]
    fn dot_matches_the_plain_sum() {
        let a: Vec<f32> = (0..37).map(|i| i as f32 * 0.5).collect();
        let b: Vec<f32> = (0..37).map(|i| 1.0 - i as f32 * 0.01).collect();
        let plain: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((dot::<false>(&a, &b) - plain).abs() < 1e-3);
        let mut out = [0f32; 1];
        score_rows(&a, &b, &mut out);
        assert!((out[0] - plain).abs() < 1e-3);
    }

    /// The two-thread scan of a large index ranks as one scan of the same rows does.
    #[test]
    fn a_large_index_ranks_as_a_small_one() {
        let dims = 16;
        let mut big = VectorIndex::new(dims);
        let mut x = 7u32;
        let mut rows = Vec::new();
        for id in 0..PARALLEL_ROWS as i64 + 100 {
            let v: Vec<f32> = (0..dims)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    (x % 1000) as f32 / 1000.0 - 0.5
                })
                .collect();
            big.push(id, &v);
            rows.push(v);
        }
        let q = rows[PARALLEL_ROWS + 50].clone();
        let got = big.nearest(&q, 5);
        assert_eq!(got[0], PARALLEL_ROWS as i64 + 50);
        // The same ranking by a plain scan.
        let mut plain: Vec<(f32, i64)> = big
            .rows
            .chunks_exact(dims)
            .zip(&big.ids)
            .map(|(r, &id)| (r.iter().zip(&q).map(|(a, b)| a * b).sum::<f32>(), id))
            .collect();
        plain.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        assert_eq!(got, plain[..5].iter().map(|p| p.1).collect::<Vec<_>>());
    }
}
