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
        let mut scored: Vec<(f32, i64)> = self
            .rows
            .chunks_exact(self.dims)
            .zip(&self.ids)
            .map(|(row, &id)| (dot(row, q), id))
            .collect();
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

/// A dot product the compiler vectorises: eight independent accumulators.
fn dot(a: &[f32], b: &[f32]) -> f32 {
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
            *s += x * y;
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
        assert!((dot(&a, &b) - plain).abs() < 1e-3);
    }
}
