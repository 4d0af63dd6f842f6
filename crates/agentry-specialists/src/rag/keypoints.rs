//! Key points without an LLM: sentences of the retrieved chunks ranked by embedding similarity
//! to the question, then picked for diversity (maximal marginal relevance). Every key point is a
//! quotation with its citation, so even a tiny local model (or none) gives a grounded result.

use agentry_core::embed::{DynEmbedder, dot};
use serde::{Deserialize, Serialize};

use std::collections::HashMap;

use super::RagError;
use super::brief::Cast;
use super::store::Hit;

/// Where a piece of evidence comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Citation {
    /// Number shown in the text, `[1]`.
    pub n: usize,
    /// File name of the document.
    pub document: String,
    /// Its title.
    pub title: String,
    /// The section the text is in.
    pub section: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// The page, for paged documents.
    pub page: Option<u32>,
    /// Byte offsets of the cited text in the document.
    pub start: usize,
    /// End of the byte range.
    pub end: usize,
    /// The chunk it was found in.
    pub chunk_id: i64,
}

impl Citation {
    /// Citation number `n` for a retrieved chunk.
    pub fn of(n: usize, h: Hit) -> Self {
        Citation {
            n,
            document: h.document,
            title: h.title,
            section: h.section,
            page: h.page,
            start: h.start,
            end: h.end,
            chunk_id: h.chunk_id,
        }
    }

    /// `hamlet_gut.txt, ACT III > Scene I, bytes 81234-81301`.
    pub fn label(&self) -> String {
        let mut s = self.document.clone();
        if !self.section.is_empty() {
            s.push_str(", ");
            s.push_str(&self.section);
        }
        if let Some(p) = self.page {
            s.push_str(&format!(", p. {p}"));
        }
        s.push_str(&format!(", bytes {}-{}", self.start, self.end));
        s
    }
}

/// A quoted key point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyPoint {
    /// The sentence, verbatim.
    pub text: String,
    /// The speaker or lead-in the sentence belongs to, when the source marks one (plays).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speaker: Option<String>,
    /// What the point is about on a slide (`Act I`, `Revenge`), when it is one of a facet's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The quote is the start of a longer sentence (shown with `…`); the citation covers
    /// exactly the words shown.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub abridged: bool,
    /// What a configured model wrote from the quote, when it did: the slide shows it, the
    /// notes the quote. Kept only when close to the quote ([`super::written::SUPPORT`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<String>,
    /// Where it is.
    pub citation: Citation,
    /// Ranking score: similarity plus a bonus for naming the question's key words.
    pub relevance: f32,
    /// Cosine similarity of the sentence to the question.
    pub similarity: f32,
}

struct Candidate {
    text: String,
    abridged: bool,
    speaker: Option<String>,
    hit: usize,
    start: usize,
    end: usize,
}

/// Splits a chunk into sentence candidates with their byte offsets in the document. Lines of
/// verse are joined; a short line ending in `.` alone in its paragraph start (`Ham.`) is a
/// speaker tag, kept as the speaker of what follows.
fn candidates(hit_index: usize, hit: &Hit, out: &mut Vec<Candidate>) {
    let text = &hit.text;
    let mut para_start = 0;
    for para in text.split_inclusive("\n\n") {
        let base = para_start;
        para_start += para.len();
        let mut body = para;
        let mut body_off = 0;
        let mut speaker = None;
        if let Some(nl) = para.find('\n') {
            let first = para[..nl].trim();
            if first.len() <= 24 && first.ends_with('.') && !first.contains(' ')
                || first.len() <= 24 && first.ends_with('.') && first.split(' ').count() <= 3
            {
                speaker = Some(first.trim_end_matches('.').to_owned());
                body = &para[nl + 1..];
                body_off = nl + 1;
            }
        }
        let at = base + body_off;
        for (s, e) in spans(body, speaker.is_some()) {
            let raw = &body[s..e];
            let lead = raw.len() - raw.trim_start().len();
            let words = raw.split_whitespace().count();
            if (6..=60).contains(&words) && !raw[lead..].starts_with('[') {
                // Long sentences are shown (and cited) up to a clause end, marked abridged.
                let ((a, z), abridged) =
                    super::brief::abridge(text, (at + s + lead, at + e), super::brief::MAX_WORDS);
                out.push(Candidate {
                    text: super::brief::normalized(&text[a..z]),
                    abridged,
                    speaker: speaker.clone(),
                    hit: hit_index,
                    start: hit.start + a,
                    end: hit.start + z,
                });
            }
        }
    }
}

/// The sentences of `body` as byte ranges: they end at `.`, `!` or `?` before whitespace or
/// the end; in `verse` (a speech of a play), a lower-case word after `!` or `?` goes on with
/// the sentence, as in the decks' sentences (`A horse! a horse! my kingdom for a horse!`,
/// `Out, damned spot! out, I say!`: three and two sentences too short to quote before).
/// One of more than 60 words, too long to be a candidate, is this edition's run of
/// sentences joined by `--` (Orsino's "If music be the food of love, play on, ... The
/// appetite may sicken and so die.--That strain again;--..." runs on for ten lines): it is
/// split after each `.--`, `!--` or `?--`, the dashes left to neither part, so its first
/// sentence is not lost. Shorter sentences are not split there: as one they often keep the
/// words that say what they are about (`Confess,--handkerchief!--O devil!--`).
fn spans(body: &str, verse: bool) -> Vec<(usize, usize)> {
    let bytes = body.as_bytes();
    let ends = |i: usize, dashes: bool| {
        let c = bytes[i];
        let rest = &body[i + 1..];
        matches!(c, b'.' | b'!' | b'?')
            && (rest.is_empty()
                || bytes[i + 1].is_ascii_whitespace()
                || dashes && rest.starts_with("--"))
            && !(verse
                && c != b'.'
                && rest
                    .trim_start_matches(|c: char| c.is_whitespace() || c == '-')
                    .starts_with(|c: char| c.is_lowercase()))
    };
    let mut out = Vec::new();
    let mut s = 0;
    for i in 0..bytes.len() {
        if ends(i, false) || i + 1 == bytes.len() {
            let e = i + 1;
            if body[s..e].split_whitespace().count() > 60 {
                let mut from = s;
                for j in s..e {
                    if ends(j, true) || j + 1 == e {
                        let to = j + 1;
                        // Past the dashes of the sentence before.
                        let dashes =
                            body[from..to].len() - body[from..to].trim_start_matches('-').len();
                        out.push((from + dashes, to));
                        from = to;
                    }
                }
            } else {
                out.push((s, e));
            }
            s = e;
        }
    }
    out
}

/// What being said by the one a question asks about adds to a sentence's relevance (cosine
/// similarities of MiniLM run 0.1-0.7): the Ghost's lines for "What does the ghost ask
/// Hamlet to do?", over Claudius's that say "Hamlet". Chosen on 20 questions about four
/// tragedies (0.15 / 0.3 / 0.4: 4 / 6 / 4 answers quoting a line a teacher would) and checked
/// on 15 about four other plays (3 / 3 / 3: their answers are the asked one's lines, though
/// rarely the line expected).
const SUBJECT_BONUS: f32 = 0.3;

/// Up to `n` key points for `question` from `hits`, most relevant first, each at most one per
/// near-duplicate (MMR with λ = 0.7).
pub async fn key_points(
    embedder: &dyn DynEmbedder,
    question: &str,
    hits: &[Hit],
    n: usize,
) -> Result<Vec<KeyPoint>, RagError> {
    key_points_with(embedder, question, hits, n, &HashMap::new()).await
}

/// [`key_points`] knowing the casts of the plays among `hits`, by document name: each quote's
/// speaker is named as the cast list names them, a character's name is no key word (most
/// lines that say "Hamlet" are said to him, not about what is asked), and the lines of the
/// one the question asks about as acting or speaking ([`Cast::subject_of`]) come first.
pub async fn key_points_with(
    embedder: &dyn DynEmbedder,
    question: &str,
    hits: &[Hit],
    n: usize,
    casts: &HashMap<String, Cast>,
) -> Result<Vec<KeyPoint>, RagError> {
    let mut cands = Vec::new();
    for (i, h) in hits.iter().enumerate() {
        candidates(i, h, &mut cands);
    }
    if cands.is_empty() || n == 0 {
        return Ok(Vec::new());
    }
    let cast_of = |c: &Candidate| casts.get(&hits[c.hit].document);
    // A cast list is no answer to a question about what happens (`Gertrude, Queen of
    // Denmark, and Mother of Hamlet.` for "Who kills Polonius?"); "Who is ...?" it answers.
    if who_is(question).is_none() {
        cands.retain(|c| cast_of(c).is_none_or(|cast| !cast.in_front(c.start)));
    }
    cands.truncate(400);
    for c in &mut cands {
        if let Some(who) = cast_of(c).and_then(|cast| cast.speaker_at(c.start)) {
            c.speaker = Some(who.to_owned());
        }
    }
    let mut subject: Vec<&str> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    let asked_words = super::brief::question_words(question);
    for cast in casts.values() {
        for who in cast.subject_of(question) {
            if !subject.contains(&who) {
                subject.push(who);
            }
        }
        for (_, (a, b)) in cast.named_in(question) {
            names.extend(asked_words[a..b].iter().cloned());
        }
    }
    let mut texts: Vec<String> = vec![question.to_owned()];
    texts.extend(cands.iter().map(|c| c.text.clone()));
    let vecs = embedder
        .embed_dyn(texts)
        .await
        .map_err(|e| RagError::Embedder(e.to_string()))?;
    let (q, vs) = vecs
        .split_first()
        .ok_or_else(|| RagError::Embedder("no vectors".into()))?;
    let words: Vec<String> = super::store::keyword_words(question)
        .into_iter()
        .filter(|w| !names.contains(w))
        .collect();
    // "Who is X?" is answered first by a line that introduces X (`Hamlet, Son to ...`, the
    // way cast lists, glossaries and indexes do).
    let asked = who_is(question).map(|n| n.split(" in ").next().unwrap_or("").to_owned());
    // Relevance: similarity to the question, a bonus for naming its key words and for being
    // said by the one it asks about, and a small prior for the better-ranked chunks.
    let rel: Vec<f32> = cands
        .iter()
        .zip(vs)
        .map(|(c, v)| {
            let lower = c.text.to_lowercase();
            let named = words.iter().filter(|w| lower.contains(w.as_str())).count() as f32;
            let introduces = asked.as_ref().is_some_and(|x| {
                lower
                    .strip_prefix(x.as_str())
                    .is_some_and(|rest| rest.starts_with([',', ' ', ':', '—']) && lower.len() < 160)
            });
            let theirs = c
                .speaker
                .as_deref()
                .is_some_and(|who| subject.contains(&who));
            dot(q, v) + 0.1 * named.min(2.0) - 0.002 * c.hit as f32
                + if introduces { 1.0 } else { 0.0 }
                + if theirs { SUBJECT_BONUS } else { 0.0 }
        })
        .collect();
    let mut chosen: Vec<usize> = Vec::new();
    while chosen.len() < n.min(cands.len()) {
        let best = (0..cands.len())
            .filter(|i| !chosen.contains(i))
            .map(|i| {
                let redundancy = chosen
                    .iter()
                    .map(|&j| dot(&vs[i], &vs[j]))
                    .fold(0.0f32, f32::max);
                (i, 0.7 * rel[i] - 0.3 * redundancy)
            })
            .max_by(|a, b| a.1.total_cmp(&b.1));
        match best {
            Some((i, _)) => chosen.push(i),
            None => break,
        }
    }
    Ok(chosen
        .into_iter()
        .enumerate()
        .map(|(k, i)| {
            let c = &cands[i];
            let h = &hits[c.hit];
            KeyPoint {
                text: c.text.clone(),
                speaker: c.speaker.clone(),
                label: None,
                abridged: c.abridged,
                claim: None,
                relevance: rel[i],
                similarity: dot(q, &vs[i]),
                citation: Citation {
                    n: k + 1,
                    document: h.document.clone(),
                    title: h.title.clone(),
                    section: h.section.clone(),
                    page: h.page,
                    start: c.start,
                    end: c.end,
                    chunk_id: h.chunk_id,
                },
            }
        })
        .collect())
}

/// The name in "Who is X?" / "Who was X?", lower case.
pub(crate) fn who_is(question: &str) -> Option<String> {
    let q = question.trim().trim_end_matches('?').trim().to_lowercase();
    let rest = ["who is ", "who was ", "who's "]
        .iter()
        .find_map(|p| q.strip_prefix(p))?;
    let name = rest.trim_start_matches("the ").trim();
    // "Who is Portia in the Merchant of Venice?": a name of up to four words, then the work.
    let who = name.split(" in ").next().unwrap_or(name);
    (!name.is_empty() && who.split_whitespace().count() <= 4).then(|| name.to_owned())
}

/// The names in a question about how someone dies, lower case, possibly with the work after
/// ` in `: "How does Ophelia die?", "How is Macbeth killed?", "Who kills Polonius?", "What
/// does Othello say before he kills himself?", "What are Hamlet's last words?", "How do
/// Romeo and Juliet die?" (`romeo and juliet`).
pub(crate) fn death_of(question: &str) -> Option<String> {
    let q = question.trim().trim_end_matches('?').trim().to_lowercase();
    let mut words: Vec<&str> = q.split_whitespace().collect();
    // "How does Antony die in Julius Caesar?": the work after the question's verb.
    let ends = [
        "die", "killed", "murdered", "slain", "words", "himself", "herself",
    ];
    let work = words
        .iter()
        .position(|w| *w == "in")
        .filter(|&i| i > 0 && ends.contains(&words[i - 1]))
        .map(|i| {
            let work = words[i + 1..].join(" ");
            words.truncate(i);
            work
        });
    let name = |ws: &[&str]| {
        let name = ws.join(" ");
        let name = name.strip_suffix("'s").unwrap_or(&name).trim().to_owned();
        let who = name.split(" in ").next().unwrap_or("");
        (!who.is_empty() && who.split_whitespace().count() <= 6).then(|| match &work {
            Some(w) => format!("{name} in {w}"),
            None => name,
        })
    };
    const KILLS: &[&str] = &[
        "kills", "killed", "murders", "murdered", "slays", "slew", "poisons", "poisoned", "stabs",
        "stabbed",
    ];
    match words.as_slice() {
        ["how", "does" | "did" | "do", who @ .., "die"] => name(who),
        [
            "how",
            "is" | "was" | "are" | "were",
            who @ ..,
            "killed" | "murdered" | "slain",
        ] => name(who),
        ["who", kills, who @ ..] if KILLS.contains(kills) => name(who),
        ["what", "are" | "were", who @ .., "last", "words"] => name(who),
        ["what", "does" | "did", rest @ ..] => {
            let say = rest.iter().position(|w| *w == "say")?;
            let dies = matches!(
                &rest[say + 1..],
                [
                    "before" | "as" | "when",
                    "he" | "she" | "they",
                    "dies" | "die" | "kills" | "kill",
                    ..
                ]
            );
            if dies { name(&rest[..say]) } else { None }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(text: &str, start: usize) -> Hit {
        Hit {
            chunk_id: 1,
            document: "d.txt".into(),
            title: "D".into(),
            path: "/d.txt".into(),
            section: "ACT I".into(),
            page: None,
            start,
            end: start + text.len(),
            text: text.into(),
            score: 1.0,
            vector_rank: Some(1),
            keyword_rank: None,
        }
    }

    #[test]
    fn death_questions_name_who_dies() {
        for (q, who) in [
            ("How does Ophelia die?", Some("ophelia")),
            ("how did King Lear die", Some("king lear")),
            ("How is Macbeth killed?", Some("macbeth")),
            ("How does Macduff's son die?", Some("macduff's son")),
            ("Who kills Polonius?", Some("polonius")),
            (
                "Who murdered the princes in the Tower?",
                Some("the princes in the tower"),
            ),
            (
                "What does Othello say before he kills himself?",
                Some("othello"),
            ),
            ("What are Hamlet's last words?", Some("hamlet")),
            ("How do Romeo and Juliet die?", Some("romeo and juliet")),
            (
                "How does Antony die in Julius Caesar?",
                Some("antony in julius caesar"),
            ),
            ("What does Hamlet say about death?", None),
            ("Why does Romeo kill Tybalt?", None),
            ("How does the play end?", None),
        ] {
            assert_eq!(death_of(q).as_deref(), who, "{q}");
        }
    }

    #[test]
    fn who_is_questions_name_someone() {
        assert_eq!(who_is("Who is Hamlet?").as_deref(), Some("hamlet"));
        assert_eq!(
            who_is("who was the Lady Macbeth").as_deref(),
            Some("lady macbeth")
        );
        assert_eq!(who_is("What is revenge?"), None);
        // The play may be said: the name is what comes before it.
        assert_eq!(
            who_is("Who is Portia in The Merchant of Venice?").as_deref(),
            Some("portia in the merchant of venice")
        );
        assert_eq!(
            who_is("Who is the man who sold the world to the king?"),
            None
        );
    }

    #[test]
    fn sentences_keep_speakers_and_offsets() {
        let doc = "xxxxHam.\nTo be, or not to be, that is the question:\nWhether 'tis nobler in the mind to suffer.\n\n[Exit.]\n\nOph.\nGood my lord, how does your honour for this many a day?\n";
        let h = hit(&doc[4..], 4);
        let mut out = Vec::new();
        candidates(0, &h, &mut out);
        assert_eq!(
            out.len(),
            2,
            "{:?}",
            out.iter().map(|c| &c.text).collect::<Vec<_>>()
        );
        assert_eq!(out[0].speaker.as_deref(), Some("Ham"));
        assert!(out[0].text.starts_with("To be, or not to be"));
        assert_eq!(&doc[out[0].start..out[0].start + 5], "To be");
        assert!(doc[out[0].start..out[0].end].ends_with("to suffer."));
        assert_eq!(out[1].speaker.as_deref(), Some("Oph"));
        assert!(doc[out[1].start..out[1].end].ends_with("many a day?"));
    }

    #[test]
    fn in_a_speech_a_lower_case_word_after_an_exclamation_goes_on() {
        let doc = "KING RICHARD.\nA horse! a horse! my kingdom for a horse!\n\n\
                   Out, damned spot! out, I say! No more of that.\n";
        let mut out = Vec::new();
        candidates(0, &hit(doc, 0), &mut out);
        let said: Vec<&str> = out.iter().map(|c| &doc[c.start..c.end]).collect();
        assert_eq!(said, ["A horse! a horse! my kingdom for a horse!"]);
        // Outside a speech (no speaker) each `!` ends a sentence, too short to quote.
        assert!(
            out.iter()
                .all(|c| c.speaker.as_deref() == Some("KING RICHARD"))
        );
    }

    #[test]
    fn a_run_of_sentences_joined_by_dashes_is_split_at_them() {
        // 62 words to `before.`: too long for one candidate, it was lost whole.
        let doc = "DUKE.
If music be the food of love, play on,
Give me excess of it; that, surfeiting,
The appetite may sicken and so die.--
That strain again;--it had a dying fall;
O, it came o'er my ear like the sweet south,
That breathes upon a bank of violets,
Stealing and giving odour.--Enough; no more;
'Tis not so sweet now as it was before.
O spirit of love, how quick and fresh art thou!

CURIO.
Confess,--handkerchief!--O devil, will you go hunt, my lord?
";
        let mut out = Vec::new();
        candidates(0, &hit(doc, 0), &mut out);
        let said: Vec<&str> = out.iter().map(|c| &doc[c.start..c.end]).collect();
        assert_eq!(
            said,
            [
                // Long, so shown abridged at a clause end, never past `die.`.
                "If music be the food of love, play on,\nGive me excess of it;",
                "That strain again;--it had a dying fall;",
                "Enough; no more;\n'Tis not so sweet now as it was before.",
                "O spirit of love, how quick and fresh art thou!",
                // A shorter sentence keeps its dashes.
                "Confess,--handkerchief!--O devil, will you go hunt, my lord?",
            ]
        );
        assert_eq!(out[0].speaker.as_deref(), Some("DUKE"));
        assert!(out[0].abridged && out[1].abridged && !out[2].abridged);
    }
}
