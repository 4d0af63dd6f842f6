//! Words of a text for keyword matching: the tokens SQLite's FTS5 `porter unicode61`
//! tokenizer makes (runs of letters and digits, lower-cased, stemmed by Porter's algorithm),
//! so an in-memory keyword index ranks as the FTS5 table it caches, and a tool router matches
//! "files" to "file" and "observations" to "observation".

/// FTS5's porter tokenizer leaves longer tokens as they are.
const PORTER_MAX_TOKEN: usize = 64;

/// The tokens FTS5's `porter unicode61` tokenizer makes of `text`: runs of letters and digits,
/// lower-cased, each stemmed by Porter's algorithm.
///
/// Unlike `unicode61`, diacritics are kept (`café` stays `café`): the index and its queries go
/// through this same function, so they agree with each other; only their agreement with
/// FTS5 on accented words is lost.
pub fn tokens(text: &str) -> impl Iterator<Item = String> + '_ {
    words(text).map(stem)
}

/// The runs of letters and digits of `text`, as they are written.
pub fn words(text: &str) -> impl Iterator<Item = &str> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
}

/// One word as [`tokens`] gives it: lower-cased, stemmed.
pub fn stem(word: &str) -> String {
    let mut t = word.to_lowercase().into_bytes();
    porter(&mut t);
    String::from_utf8(t).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into())
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

use When::{MGt0, MGt1, MGt1ST};

/// Porter's step 2, in `fts5_porter.c`'s order.
const STEP2: &[(&str, &str, When)] = &[
    ("ational", "ate", MGt0),
    ("tional", "tion", MGt0),
    ("enci", "ence", MGt0),
    ("anci", "ance", MGt0),
    ("izer", "ize", MGt0),
    ("logi", "log", MGt0),
    ("bli", "ble", MGt0),
    ("alli", "al", MGt0),
    ("entli", "ent", MGt0),
    ("eli", "e", MGt0),
    ("ousli", "ous", MGt0),
    ("ization", "ize", MGt0),
    ("ation", "ate", MGt0),
    ("ator", "ate", MGt0),
    ("alism", "al", MGt0),
    ("iveness", "ive", MGt0),
    ("fulness", "ful", MGt0),
    ("ousness", "ous", MGt0),
    ("aliti", "al", MGt0),
    ("iviti", "ive", MGt0),
    ("biliti", "ble", MGt0),
];

/// Step 3.
const STEP3: &[(&str, &str, When)] = &[
    ("ical", "ic", MGt0),
    ("ness", "", MGt0),
    ("icate", "ic", MGt0),
    ("iciti", "ic", MGt0),
    ("ful", "", MGt0),
    ("ative", "", MGt0),
    ("alize", "al", MGt0),
];

/// Step 4.
const STEP4: &[(&str, &str, When)] = &[
    ("al", "", MGt1),
    ("ance", "", MGt1),
    ("ence", "", MGt1),
    ("er", "", MGt1),
    ("ic", "", MGt1),
    ("able", "", MGt1),
    ("ible", "", MGt1),
    ("ant", "", MGt1),
    ("ement", "", MGt1),
    ("ment", "", MGt1),
    ("ent", "", MGt1),
    ("ion", "", MGt1ST),
    ("ou", "", MGt1),
    ("ism", "", MGt1),
    ("ate", "", MGt1),
    ("iti", "", MGt1),
    ("ous", "", MGt1),
    ("ive", "", MGt1),
    ("ize", "", MGt1),
];

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
    // Steps 2 to 4. SQLite tries only the rules for the word's next-to-last letter and stops
    // at the first whose suffix matches; every suffix is two letters or more, so a suffix that
    // matches has that letter, and one list per step in SQLite's order chooses the same rule.
    rule(w, STEP2);
    rule(w, STEP3);
    rule(w, STEP4);
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
}
