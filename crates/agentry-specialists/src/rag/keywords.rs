//! A collection's keyword index held in memory: BM25 over an inverted index whose postings
//! carry each chunk's precomputed term weight, so a query is a sum over the postings of its
//! words and a partial sort.
//!
//! SQLite's FTS5 table stays the store of record; this is a cache of it, built from the
//! table's own text. It answers the same query the same way: the same tokens (FTS5's
//! `porter unicode61` tokenizer, ported below and checked against SQLite's in the tests), an
//! OR of the query's words, and FTS5's `bm25()` with the same column weights (text 1.0,
//! heading 0.5). FTS5 ranks every row an OR of common words matches through its auxiliary
//! function interface, which at 100k chunks took most of a hybrid query; summing precomputed
//! weights is an order of magnitude cheaper.

use std::collections::HashMap;

/// BM25's term-frequency saturation (FTS5's value).
const K1: f64 = 1.2;
/// BM25's length normalisation (FTS5's value).
const B: f64 = 0.75;
/// FTS5's porter tokenizer leaves longer tokens as they are.
const PORTER_MAX_TOKEN: usize = 64;

/// The tokens FTS5's `porter unicode61` tokenizer makes of `text`: runs of letters and digits,
/// lower-cased, each stemmed by Porter's algorithm.
///
/// Unlike `unicode61`, diacritics are kept (`café` stays `café`): the index and its queries go
/// through this same function, so they agree with each other; only their agreement with
/// FTS5 on accented words is lost.
pub fn tokens(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut t = w.to_lowercase().into_bytes();
            porter(&mut t);
            String::from_utf8(t).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into())
        })
}

fn is_vowel(c: u8, y_is_vowel: bool) -> bool {
    matches!(c, b'a' | b'e' | b'i' | b'o' | b'u') || (y_is_vowel && c == b'y')
}

/// Where the first vowel-consonant sequence of `s` ends (0: none), `prev_cons` saying whether
/// the letter before `s` was a consonant (a `y` after a consonant is a vowel).
fn gobble_vc(s: &[u8], prev_cons: bool) -> usize {
    let mut cons = prev_cons;
    let mut i = 0;
    while i < s.len() {
        cons = !is_vowel(s[i], cons);
        if !cons {
            break;
        }
        i += 1;
    }
    i += 1;
    while i < s.len() {
        cons = !is_vowel(s[i], cons);
        if cons {
            return i + 1;
        }
        i += 1;
    }
    0
}

/// Porter's measure m > 0.
fn m_gt0(s: &[u8]) -> bool {
    gobble_vc(s, false) != 0
}

/// m > 1.
fn m_gt1(s: &[u8]) -> bool {
    let n = gobble_vc(s, false);
    n != 0 && gobble_vc(&s[n..], true) != 0
}

/// m = 1.
fn m_eq1(s: &[u8]) -> bool {
    let n = gobble_vc(s, false);
    n != 0 && gobble_vc(&s[n..], true) == 0
}

/// `*o`: ends consonant-vowel-consonant, the last not w, x or y.
fn ostar(s: &[u8]) -> bool {
    match s.last() {
        None | Some(b'w' | b'x' | b'y') => false,
        Some(_) => {
            let (mut mask, mut cons) = (0u32, false);
            for &c in s {
                cons = !is_vowel(c, cons);
                mask = (mask << 1) | cons as u32;
            }
            mask & 7 == 5
        }
    }
}

/// `*v*`: the stem holds a vowel.
fn has_vowel(s: &[u8]) -> bool {
    s.iter().enumerate().any(|(i, &c)| is_vowel(c, i > 0))
}

/// The conditions of the suffix rules.
#[derive(Clone, Copy)]
enum When {
    Always,
    MGt0,
    MGt1,
    /// m > 1 and the stem ends in s or t.
    MGt1ST,
    Vowel,
}

impl When {
    fn holds(self, stem: &[u8]) -> bool {
        match self {
            When::Always => true,
            When::MGt0 => m_gt0(stem),
            When::MGt1 => m_gt1(stem),
            When::MGt1ST => matches!(stem.last(), Some(b's' | b't')) && m_gt1(stem),
            When::Vowel => has_vowel(stem),
        }
    }
}

/// Applies the first rule whose suffix `w` ends with (longer than the suffix: a rule never
/// empties the word): when its condition holds of the stem, the suffix becomes the
/// replacement. Returns whether a rule's condition held (step 1b needs to know).
fn rule(w: &mut Vec<u8>, rules: &[(&str, &str, When)]) -> bool {
    for &(suffix, by, when) in rules {
        let s = suffix.as_bytes();
        if w.len() > s.len() && w.ends_with(s) {
            let stem = w.len() - s.len();
            if when.holds(&w[..stem]) {
                w.truncate(stem);
                w.extend_from_slice(by.as_bytes());
                return true;
            }
            return false;
        }
    }
    false
}

/// Stems a lower-case token in place the way SQLite's FTS5 porter tokenizer does (Porter's
/// 1980 algorithm as `fts5_porter.c` writes it; tokens under 3 or over 64 bytes unchanged).
pub fn porter(w: &mut Vec<u8>) {
    if w.len() < 3 || w.len() > PORTER_MAX_TOKEN {
        return;
    }
    // Step 1a.
    if w.ends_with(b"s") {
        let n = w.len();
        if w[n - 2] == b'e' {
            if (n > 4 && w[n - 4] == b's' && w[n - 3] == b's') || (n > 3 && w[n - 3] == b'i') {
                w.truncate(n - 2);
            } else {
                w.truncate(n - 1);
            }
        } else if w[n - 2] != b's' {
            w.truncate(n - 1);
        }
    }
    // Step 1b. SQLite picks the rule by the next-to-last letter: "eed" is tried before "ed"
    // and, once matched, stops the search whether or not its condition held.
    let removed = if w.ends_with(b"eed") && w.len() > 3 {
        let stem = w.len() - 3;
        if m_gt0(&w[..stem]) {
            w.truncate(stem + 2);
        }
        false
    } else {
        rule(w, &[("ed", "", When::Vowel), ("ing", "", When::Vowel)])
    };
    if removed
        && !rule(
            w,
            &[
                ("at", "ate", When::Always),
                ("bl", "ble", When::Always),
                ("iz", "ize", When::Always),
            ],
        )
    {
        let n = w.len();
        let c = w[n - 1];
        if !is_vowel(c, false) && !matches!(c, b'l' | b's' | b'z') && n >= 2 && c == w[n - 2] {
            w.truncate(n - 1);
        } else if m_eq1(w) && ostar(w) {
            w.push(b'e');
        }
    }
    // Step 1c.
    let n = w.len();
    if w[n - 1] == b'y' && has_vowel(&w[..n - 1]) {
        w[n - 1] = b'i';
    }
    use When::*;
    // Steps 2 to 4; within a step SQLite tries only the rules for the word's next-to-last
    // letter, in this order, and stops at the first whose suffix matches.
    let by_letter = |w: &Vec<u8>| (w.len() >= 2).then(|| w[w.len() - 2]);
    let step2: &[(&str, &str, When)] = match by_letter(w) {
        Some(b'a') => &[("ational", "ate", MGt0), ("tional", "tion", MGt0)],
        Some(b'c') => &[("enci", "ence", MGt0), ("anci", "ance", MGt0)],
        Some(b'e') => &[("izer", "ize", MGt0)],
        Some(b'g') => &[("logi", "log", MGt0)],
        Some(b'l') => &[
            ("bli", "ble", MGt0),
            ("alli", "al", MGt0),
            ("entli", "ent", MGt0),
            ("eli", "e", MGt0),
            ("ousli", "ous", MGt0),
        ],
        Some(b'o') => &[
            ("ization", "ize", MGt0),
            ("ation", "ate", MGt0),
            ("ator", "ate", MGt0),
        ],
        Some(b's') => &[
            ("alism", "al", MGt0),
            ("iveness", "ive", MGt0),
            ("fulness", "ful", MGt0),
            ("ousness", "ous", MGt0),
        ],
        Some(b't') => &[
            ("aliti", "al", MGt0),
            ("iviti", "ive", MGt0),
            ("biliti", "ble", MGt0),
        ],
        _ => &[],
    };
    rule(w, step2);
    let step3: &[(&str, &str, When)] = match by_letter(w) {
        Some(b'a') => &[("ical", "ic", MGt0)],
        Some(b's') => &[("ness", "", MGt0)],
        Some(b't') => &[("icate", "ic", MGt0), ("iciti", "ic", MGt0)],
        Some(b'u') => &[("ful", "", MGt0)],
        Some(b'v') => &[("ative", "", MGt0)],
        Some(b'z') => &[("alize", "al", MGt0)],
        _ => &[],
    };
    rule(w, step3);
    let step4: &[(&str, &str, When)] = match by_letter(w) {
        Some(b'a') => &[("al", "", MGt1)],
        Some(b'c') => &[("ance", "", MGt1), ("ence", "", MGt1)],
        Some(b'e') => &[("er", "", MGt1)],
        Some(b'i') => &[("ic", "", MGt1)],
        Some(b'l') => &[("able", "", MGt1), ("ible", "", MGt1)],
        Some(b'n') => &[
            ("ant", "", MGt1),
            ("ement", "", MGt1),
            ("ment", "", MGt1),
            ("ent", "", MGt1),
        ],
        Some(b'o') => &[("ion", "", MGt1ST), ("ou", "", MGt1)],
        Some(b's') => &[("ism", "", MGt1)],
        Some(b't') => &[("ate", "", MGt1), ("iti", "", MGt1)],
        Some(b'u') => &[("ous", "", MGt1)],
        Some(b'v') => &[("ive", "", MGt1)],
        Some(b'z') => &[("ize", "", MGt1)],
        _ => &[],
    };
    rule(w, step4);
    // Step 5a.
    let n = w.len();
    if w[n - 1] == b'e' {
        let stem = &w[..n - 1];
        if m_gt1(stem) || (m_eq1(stem) && !ostar(stem)) {
            w.truncate(n - 1);
        }
    }
    // Step 5b.
    let n = w.len();
    if n > 1 && w[n - 1] == b'l' && w[n - 2] == b'l' && m_gt1(&w[..n - 1]) {
        w.truncate(n - 1);
    }
}

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
    /// Lower-case words already stemmed, so each distinct word is stemmed once.
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
            for w in text
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
            {
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
        let lower;
        let word = if word
            .bytes()
            .any(|b| !b.is_ascii_lowercase() && !b.is_ascii_digit())
        {
            lower = word.to_lowercase();
            lower.as_str()
        } else {
            word
        };
        if let Some(&t) = self.words.get(word) {
            return t;
        }
        let mut stem = word.as_bytes().to_vec();
        porter(&mut stem);
        let stem = String::from_utf8(stem)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into());
        let next = self.terms.len() as u32;
        let t = *self.terms.entry(stem).or_insert(next);
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

    fn stem(w: &str) -> String {
        let mut b = w.as_bytes().to_vec();
        porter(&mut b);
        String::from_utf8(b).unwrap()
    }

    #[test]
    fn porter_stems_as_the_paper_lists() {
        // Examples from Porter (1980), section by section.
        for (w, s) in [
            ("caresses", "caress"),
            ("ponies", "poni"),
            ("ties", "ti"),
            ("caress", "caress"),
            ("cats", "cat"),
            ("feed", "feed"),
            ("agreed", "agre"),
            ("plastered", "plaster"),
            ("bled", "bled"),
            ("motoring", "motor"),
            ("sing", "sing"),
            ("conflated", "conflat"),
            ("troubled", "troubl"),
            ("sized", "size"),
            ("hopping", "hop"),
            ("tanned", "tan"),
            ("falling", "fall"),
            ("hissing", "hiss"),
            ("fizzed", "fizz"),
            ("failing", "fail"),
            ("filing", "file"),
            ("happy", "happi"),
            ("sky", "sky"),
            ("relational", "relat"),
            ("conditional", "condit"),
            ("valenci", "valenc"),
            ("digitizer", "digit"),
            ("triplicate", "triplic"),
            ("hopeful", "hope"),
            ("goodness", "good"),
            ("revival", "reviv"),
            ("allowance", "allow"),
            ("adoption", "adopt"),
            ("controll", "control"),
            ("roll", "roll"),
            ("generalizations", "gener"),
            ("oscillators", "oscil"),
        ] {
            assert_eq!(stem(w), s, "{w}");
        }
        // Short and long tokens pass through.
        assert_eq!(stem("is"), "is");
        assert_eq!(stem(&"s".repeat(70)), "s".repeat(70));
    }

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
