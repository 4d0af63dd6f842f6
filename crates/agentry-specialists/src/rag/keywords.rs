//! A collection's keyword index held in memory: BM25 over an inverted index whose postings
//! carry each chunk's precomputed term weight, so a query is a sum over the postings of its
//! words and a partial sort.
//!
//! SQLite's FTS5 table stays the store of record; this is a cache of it, built from the
//! table's own text. It answers the same query the same way: the same tokens (FTS5's
//! `porter unicode61` tokenizer, ported in `agentry_core::text` and checked against SQLite's
//! in the tests), an
//! OR of the query's words, and FTS5's `bm25()` with the same column weights (text 1.0,
//! heading 0.5). FTS5 ranks every row an OR of common words matches through its auxiliary
//! function interface, which at 100k chunks took most of a hybrid query; summing precomputed
//! weights is an order of magnitude cheaper.

use std::collections::HashMap;

use agentry_core::text::{stem, tokens, words};

/// BM25's term-frequency saturation (FTS5's value).
const K1: f64 = 1.2;
/// BM25's length normalisation (FTS5's value).
const B: f64 = 0.75;

/// One chunk's weight for one term: BM25's term-frequency part, the same for every query.
#[derive(Debug, Clone, Copy)]
struct Posting {
    doc: u32,
    weight: f32,
}

/// The keyword index of one collection.
#[derive(Debug, Default)]
pub struct KeywordIndex {
    ids: Vec<i64>,
    terms: HashMap<String, u32>,
    /// Postings of term `t`: `postings[offsets[t]..offsets[t + 1]]`, by document.
    offsets: Vec<u32>,
    postings: Vec<Posting>,
}

/// Builds a [`KeywordIndex`] one chunk at a time.
#[derive(Debug, Default)]
pub struct KeywordIndexBuilder {
    ids: Vec<i64>,
    terms: HashMap<String, u32>,
    /// Words (as written) already stemmed, so each distinct word is stemmed once.
    words: HashMap<String, u32>,
    /// (term, document, weighted frequency), in document order.
    triples: Vec<(u32, u32, f32)>,
    lengths: Vec<u32>,
    total: u64,
    frequencies: HashMap<u32, f32>,
}

impl KeywordIndexBuilder {
    /// Adds a chunk: its columns' texts and each column's weight.
    pub fn add(&mut self, id: i64, columns: &[(&str, f32)]) {
        let doc = self.ids.len() as u32;
        self.ids.push(id);
        let mut length = 0u32;
        self.frequencies.clear();
        for &(text, weight) in columns {
            for w in words(text) {
                length += 1;
                let term = self.term_of(w);
                *self.frequencies.entry(term).or_default() += weight;
            }
        }
        self.lengths.push(length);
        self.total += u64::from(length);
        self.triples
            .extend(self.frequencies.iter().map(|(&t, &f)| (t, doc, f)));
    }

    fn term_of(&mut self, word: &str) -> u32 {
        if let Some(&t) = self.words.get(word) {
            return t;
        }
        let next = self.terms.len() as u32;
        let t = *self.terms.entry(stem(word)).or_insert(next);
        self.words.insert(word.to_owned(), t);
        t
    }

    /// The index, each posting weighted by BM25's term-frequency part as FTS5 computes it (the
    /// chunk's length is its tokens in all columns; the average is over the collection).
    pub fn build(self) -> KeywordIndex {
        let n = self.ids.len();
        let avg = if n == 0 {
            1.0
        } else {
            self.total as f64 / n as f64
        };
        let mut offsets = vec![0u32; self.terms.len() + 1];
        for &(t, _, _) in &self.triples {
            offsets[t as usize + 1] += 1;
        }
        for i in 1..offsets.len() {
            offsets[i] += offsets[i - 1];
        }
        let mut next = offsets.clone();
        let mut postings = vec![
            Posting {
                doc: 0,
                weight: 0.0
            };
            self.triples.len()
        ];
        // Triples come in document order, so each term's postings do too.
        for (t, doc, f) in self.triples {
            let f = f64::from(f);
            let d = f64::from(self.lengths[doc as usize]);
            let weight = f * (K1 + 1.0) / (f + K1 * (1.0 - B + B * d / avg));
            let slot = &mut next[t as usize];
            postings[*slot as usize] = Posting {
                doc,
                weight: weight as f32,
            };
            *slot += 1;
        }
        KeywordIndex {
            ids: self.ids,
            terms: self.terms,
            offsets,
            postings,
        }
    }
}

impl KeywordIndex {
    /// Chunks indexed.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The `k` chunks with the highest BM25 score for any of `words` (each word one OR'ed
    /// phrase, as in FTS5: a stem given twice counts twice), best first with their scores;
    /// ties by lower id. A chunk that has none of the words is not returned.
    pub fn search(&self, words: &[String], k: usize) -> Vec<(i64, f64)> {
        let n = self.ids.len();
        if n == 0 || k == 0 {
            return Vec::new();
        }
        let mut scores = vec![0f64; n];
        let mut any = false;
        for word in words {
            let Some(term) = tokens(word).next() else {
                continue;
            };
            let Some(&t) = self.terms.get(&term) else {
                continue;
            };
            let list = &self.postings
                [self.offsets[t as usize] as usize..self.offsets[t as usize + 1] as usize];
            // FTS5's idf, floored at a millionth so a word in most chunks still matches.
            let hits = list.len() as f64;
            let idf = ((n as f64 - hits + 0.5) / (hits + 0.5)).ln();
            let idf = if idf <= 0.0 { 1e-6 } else { idf };
            for p in list {
                scores[p.doc as usize] += idf * f64::from(p.weight);
            }
            any |= !list.is_empty();
        }
        if !any {
            return Vec::new();
        }
        let mut hits: Vec<(f64, u32)> = scores
            .iter()
            .enumerate()
            .filter(|(_, s)| **s > 0.0)
            .map(|(d, &s)| (s, d as u32))
            .collect();
        let ids = &self.ids;
        let order = |a: &(f64, u32), b: &(f64, u32)| {
            b.0.total_cmp(&a.0)
                .then(ids[a.1 as usize].cmp(&ids[b.1 as usize]))
        };
        let k = k.min(hits.len());
        if k < hits.len() {
            hits.select_nth_unstable_by(k - 1, order);
            hits.truncate(k);
        }
        hits.sort_unstable_by(order);
        hits.into_iter()
            .map(|(s, d)| (self.ids[d as usize], s))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bm25_ranks_rarer_words_and_shorter_chunks_higher() {
        let mut b = KeywordIndexBuilder::default();
        b.add(
            1,
            &[("the ghost walks the walls at night", 1.0), ("Act I", 0.5)],
        );
        b.add(2, &[("the king drinks", 1.0), ("Act I", 0.5)]);
        b.add(3, &[("the king and the ghost", 1.0), ("Act II", 0.5)]);
        b.add(
            4,
            &[
                ("nothing of note here at all, nothing", 1.0),
                ("Act III", 0.5),
            ],
        );
        let ix = b.build();
        assert_eq!(ix.len(), 4);
        let ids = |words: &[&str]| {
            ix.search(&words.iter().map(|w| w.to_string()).collect::<Vec<_>>(), 10)
                .into_iter()
                .map(|(id, _)| id)
                .collect::<Vec<_>>()
        };
        // Stemmed: "walking" finds "walks"; "ghosts" finds "ghost" in the shorter chunk first.
        assert_eq!(ids(&["walking"]), [1]);
        assert_eq!(ids(&["ghosts"]), [3, 1]);
        // OR of the words; a chunk with both ranks first.
        assert_eq!(ids(&["king", "ghost"])[0], 3);
        // The heading column counts, at half weight.
        assert_eq!(ids(&["ii"]), [3]);
        assert!(ids(&["absent"]).is_empty());
        assert!(ix.search(&[], 10).is_empty());
        assert_eq!(ix.search(&["king".into()], 1).len(), 1);
    }
}
