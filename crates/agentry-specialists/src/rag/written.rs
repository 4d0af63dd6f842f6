//! A brief written by a configured model: it plans the facets, and writes each slide's bullets
//! from numbered quotes; every bullet is then checked against the quote it cites.
//!
//! The model may only say what a quote shows. A bullet is kept when it cites exactly one quote
//! of its facet's evidence (`… [2]`), the embedder finds the claim close to that quote (cosine
//! at least [`SUPPORT`], the level below which unrelated English scores with MiniLM), and the
//! claim adds at most [`MAX_NOVEL`] words of its own to the quote's (MiniLM puts "Polonius
//! plays tennis with Horatio every morning" at 0.46 from "Polonius, Lord Chamberlain.": a
//! shared name carries a made-up claim past any cosine threshold that keeps true ones).
//! Anything else is dropped; an extracted facet left with nothing keeps its quotes, a slide of
//! the model's own with nothing is not kept, and the extracted facets the plan left out fill
//! the deck to the slides asked for. The check fails
//! closed: a faithful paraphrase in other words is dropped too, and the quote stays. A planned facet
//! that is none of the extracted ones gets its evidence by a search of the work. Without a
//! usable plan the extracted facets are kept, so a weak or broken model costs nothing but
//! its calls.

use std::collections::HashSet;

use agentry_core::embed::{DynEmbedder, dot};
use agentry_core::llm::{ChatMessage, ChatRequest, DynLlmProvider};

use super::brief::{Facet, key, tokens};
use super::{KeyPoint, KnowledgeBase, keypoints};

/// How close a claim must be to the quote it cites (cosine of their embeddings).
pub const SUPPORT: f32 = 0.35;

/// Content words a claim may use that its quote (and speaker) do not: "Hamlet wishes his too
/// too solid flesh would melt" adds one to "O that this too too solid flesh would melt".
pub const MAX_NOVEL: usize = 3;

/// Bullets a written slide may have.
const MAX_BULLETS: usize = 5;

/// The facets rewritten by `llm` for the work `title` (`path` in `collection`), from the
/// extracted `facets`; `None` when the model gave no usable plan or wrote nothing that held.
pub async fn facets(
    llm: &dyn DynLlmProvider,
    kb: &KnowledgeBase,
    collection: &str,
    path: &str,
    title: &str,
    facets: &[Facet],
) -> Option<Vec<Facet>> {
    let Some(planned) = plan(llm, title, facets).await else {
        tracing::info!(
            title,
            "the model gave no usable plan of slides; the extracted ones stand"
        );
        return None;
    };
    let embedder = &**kb.embedder();
    let mut out = Vec::new();
    let mut used: HashSet<(usize, usize)> = HashSet::new();
    let mut wrote = false;
    for name in planned {
        let extracted = facets.iter().find(|f| f.title.eq_ignore_ascii_case(&name));
        let evidence = match extracted {
            Some(f) => f.points.clone(),
            None => search(kb, collection, path, title, &name).await,
        };
        let evidence: Vec<KeyPoint> = evidence
            .into_iter()
            .filter(|k| !used.contains(&(k.citation.start, k.citation.end)))
            .collect();
        if evidence.is_empty() {
            continue;
        }
        let bullets = write(llm, title, &name, &evidence).await;
        let mut points = checked(embedder, &bullets, &evidence).await;
        if points.is_empty() {
            // A slide of the model's own with nothing it wrote holding is not kept: its title
            // may be anything, and what a search found for it is no slide by itself.
            if extracted.is_none() {
                continue;
            }
            points = evidence.into_iter().take(MAX_BULLETS).collect();
        } else {
            wrote = true;
        }
        used.extend(points.iter().map(|k| (k.citation.start, k.citation.end)));
        out.push(Facet {
            title: name,
            points,
        });
    }
    // As many slides as were asked for: the extracted facets the plan left out fill the rest.
    for f in facets {
        if out.len() >= facets.len() {
            break;
        }
        if out.iter().any(|o| o.title.eq_ignore_ascii_case(&f.title)) {
            continue;
        }
        let points: Vec<KeyPoint> = f
            .points
            .iter()
            .filter(|k| !used.contains(&(k.citation.start, k.citation.end)))
            .cloned()
            .collect();
        if !points.is_empty() {
            used.extend(points.iter().map(|k| (k.citation.start, k.citation.end)));
            out.push(Facet {
                title: f.title.clone(),
                points,
            });
        }
    }
    wrote.then_some(out)
}

/// The slide titles the model proposes, in order (at most as many as the extracted facets);
/// `None` when its answer holds none.
async fn plan(llm: &dyn DynLlmProvider, title: &str, facets: &[Facet]) -> Option<Vec<String>> {
    let suggested: Vec<&str> = facets.iter().map(|f| f.title.as_str()).collect();
    let req = ChatRequest {
        messages: vec![
            ChatMessage::system(
                "You plan presentations about a work from a library. Answer with JSON only: \
                 {\"facets\": [\"slide title\", ...]}.",
            ),
            ChatMessage::user(format!(
                "Plan {} content slides about {title}: the facets a reader would want, in \
                 order. Slides that can be filled from the text: {}.",
                facets.len(),
                suggested.join("; ")
            )),
        ],
        temperature: Some(0.0),
        max_tokens: Some(200),
        ..Default::default()
    };
    let text = llm.chat_dyn(req).await.ok()?.message.content;
    let (open, close) = (text.find('{')?, text.rfind('}')?);
    let json = text.get(open..=close)?;
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    let mut seen = HashSet::new();
    let titles: Vec<String> = v
        .get("facets")?
        .as_array()?
        .iter()
        .filter_map(|t| t.as_str())
        .map(|t| t.trim().to_owned())
        .filter(|t| (1..=60).contains(&t.chars().count()) && seen.insert(t.to_lowercase()))
        .take(facets.len().max(1))
        .collect();
    (!titles.is_empty()).then_some(titles)
}

/// Quotes for a facet no extractor made, from a search of the work.
async fn search(
    kb: &KnowledgeBase,
    collection: &str,
    path: &str,
    title: &str,
    facet: &str,
) -> Vec<KeyPoint> {
    let query = format!("{title}: {facet}");
    let Ok(hits) = kb.search(collection, &query, 24).await else {
        return Vec::new();
    };
    let hits: Vec<_> = hits.into_iter().filter(|h| h.path == path).collect();
    keypoints::key_points(&**kb.embedder(), &query, &hits, 8)
        .await
        .unwrap_or_default()
}

/// The model's bullets for one slide: `(claim, quote number)`, numbers as given (from 1).
async fn write(
    llm: &dyn DynLlmProvider,
    title: &str,
    facet: &str,
    evidence: &[KeyPoint],
) -> Vec<(String, usize)> {
    let numbered: String = evidence
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let who = k
                .speaker
                .as_deref()
                .map(|s| format!(" ({s})"))
                .unwrap_or_default();
            format!("[{}] {}{who}\n", i + 1, k.text)
        })
        .collect();
    let req = ChatRequest {
        messages: vec![
            ChatMessage::system(
                "You write presentation slides from quotes. Use only what the quotes show. \
                 Write one bullet per line: a short sentence (at most 20 words) followed by the \
                 number of the one quote it rests on, like [2].",
            ),
            ChatMessage::user(format!(
                "Slide \"{facet}\" of a presentation about {title}. Write 2 to {MAX_BULLETS} \
                 bullets from these quotes:\n{numbered}"
            )),
        ],
        temperature: Some(0.0),
        max_tokens: Some(400),
        ..Default::default()
    };
    let Ok(r) = llm.chat_dyn(req).await else {
        return Vec::new();
    };
    r.message.content.lines().filter_map(bullet).collect()
}

/// `- Hamlet mourns his father [2]` → `("Hamlet mourns his father", 2)`: one citation, at the
/// end, after a claim of 3 to 25 words.
fn bullet(line: &str) -> Option<(String, usize)> {
    let line = line
        .trim()
        .trim_start_matches(|c: char| matches!(c, '-' | '*' | '•') || c.is_ascii_digit())
        .trim_start_matches(['.', ')'])
        .trim();
    let open = line.rfind('[')?;
    let rest = line[open + 1..].trim_end().strip_suffix(']')?;
    let n: usize = rest.trim().parse().ok()?;
    let claim = line[..open].trim().trim_end_matches(['.', ',', ';']).trim();
    let words = claim.split_whitespace().count();
    // A second citation inside the claim means it rests on two quotes: not checkable as one.
    if !(3..=25).contains(&words) || claim.contains('[') {
        return None;
    }
    Some((format!("{claim}."), n))
}

/// The bullets that cite a quote of `evidence` which the embedder finds them close to, each
/// as that quote's point with the claim set; a quote is cited by one bullet at most.
async fn checked(
    embedder: &dyn DynEmbedder,
    bullets: &[(String, usize)],
    evidence: &[KeyPoint],
) -> Vec<KeyPoint> {
    let cited: Vec<&(String, usize)> = bullets
        .iter()
        .filter(|(_, n)| (1..=evidence.len()).contains(n))
        .collect();
    if cited.is_empty() {
        return Vec::new();
    }
    let mut texts: Vec<String> = cited.iter().map(|(c, _)| c.clone()).collect();
    texts.extend(cited.iter().map(|(_, n)| evidence[n - 1].text.clone()));
    let Ok(v) = embedder.embed_dyn(texts).await else {
        return Vec::new();
    };
    let (claims, quotes) = v.split_at(cited.len());
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (i, (claim, n)) in cited.iter().enumerate() {
        let support = dot(&claims[i], &quotes[i]);
        let quote = &evidence[n - 1];
        let novel = novel(claim, &[quote]);
        if support < SUPPORT || novel > MAX_NOVEL || !seen.insert(*n) || out.len() == MAX_BULLETS {
            tracing::info!(
                claim,
                support,
                "written bullet dropped: not what its quote shows"
            );
            continue;
        }
        let mut k = evidence[n - 1].clone();
        k.claim = Some(claim.clone());
        k.similarity = support;
        out.push(k);
    }
    out
}

/// The content words of `claim` (stems) that none of `quotes` has, in its text or speaker.
fn novel(claim: &str, quotes: &[&KeyPoint]) -> usize {
    let known: HashSet<String> = quotes
        .iter()
        .flat_map(|q| tokens(&q.text).chain(q.speaker.as_deref().into_iter().flat_map(tokens)))
        .map(key)
        .collect();
    tokens(claim)
        .map(key)
        .collect::<HashSet<_>>()
        .into_iter()
        .filter(|k| !known.contains(k))
        .count()
}

/// A model's summary cut to the sentences that cite quotes of `kps` and say what they show
/// (close to one of them, at most [`MAX_NOVEL`] words of their own beyond them); `None` when
/// none does.
pub(crate) async fn supported(
    embedder: &dyn DynEmbedder,
    text: &str,
    kps: &[KeyPoint],
) -> Option<String> {
    let mut sentences: Vec<(&str, String, Vec<&KeyPoint>)> = Vec::new();
    let mut from = 0;
    let bytes = text.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        let end = i + 1 == bytes.len() || matches!(b, b'.' | b'!' | b'?') && bytes[i + 1] == b' ';
        if !end {
            continue;
        }
        let s = text[from..=i].trim();
        from = i + 1;
        // Its citations, and the claim without them.
        let mut cited = Vec::new();
        let mut claim = String::new();
        let mut rest = s;
        while let Some(open) = rest.find('[') {
            claim.push_str(&rest[..open]);
            let Some(close) = rest[open..].find(']') else {
                break;
            };
            if let Ok(n) = rest[open + 1..open + close].trim().parse::<usize>()
                && let Some(k) = kps.iter().find(|k| k.citation.n == n)
            {
                cited.push(k);
            }
            rest = &rest[open + close + 1..];
        }
        claim.push_str(rest);
        if !cited.is_empty() {
            sentences.push((s, claim, cited));
        }
    }
    let mut texts = Vec::new();
    for (_, claim, cited) in &sentences {
        texts.push(claim.clone());
        texts.extend(cited.iter().map(|k| k.text.clone()));
    }
    let v = embedder.embed_dyn(texts).await.ok()?;
    let mut at = 0;
    let mut kept = Vec::new();
    for (s, claim, cited) in &sentences {
        let c = &v[at];
        let support = v[at + 1..at + 1 + cited.len()]
            .iter()
            .map(|q| dot(c, q))
            .fold(f32::MIN, f32::max);
        at += 1 + cited.len();
        if support >= SUPPORT && novel(claim, cited) <= MAX_NOVEL {
            kept.push(*s);
        } else {
            tracing::info!(
                sentence = s,
                support,
                "summary sentence dropped: not what it cites"
            );
        }
    }
    (!kept.is_empty()).then(|| kept.join(" "))
}

#[cfg(test)]
mod tests {
    use super::{bullet, novel};
    use crate::rag::{Citation, KeyPoint};

    fn point(text: &str, speaker: Option<&str>) -> KeyPoint {
        KeyPoint {
            text: text.into(),
            speaker: speaker.map(Into::into),
            label: None,
            abridged: false,
            claim: None,
            citation: Citation {
                n: 1,
                document: "t.txt".into(),
                title: "T".into(),
                section: String::new(),
                page: None,
                start: 0,
                end: text.len(),
                chunk_id: 0,
            },
            relevance: 0.0,
            similarity: 0.0,
        }
    }

    #[tokio::test]
    async fn a_plan_is_json_titles_or_nothing() {
        use agentry_core::llm::{Capabilities, ChatResponse, ScriptedProvider, Transcript};
        let facets = vec![
            super::Facet {
                title: "Who's who".into(),
                points: Vec::new(),
            };
            3
        ];
        let answers = [
            "} no plan {",
            "Sure! {\"facets\": [\"Who's who\", \"who's who\", \"The ghost\", 7]} Enjoy.",
            "{\"slides\": [\"Who's who\"]}",
        ];
        let llm = ScriptedProvider::new(Transcript::of(
            Capabilities::default(),
            answers.iter().map(|a| ChatResponse::text(*a)).collect(),
        ));
        assert_eq!(super::plan(&llm, "Hamlet", &facets).await, None);
        assert_eq!(
            super::plan(&llm, "Hamlet", &facets).await,
            Some(vec!["Who's who".to_owned(), "The ghost".to_owned()])
        );
        assert_eq!(super::plan(&llm, "Hamlet", &facets).await, None);
    }

    #[test]
    fn a_claim_may_add_few_words_of_its_own_to_its_quote() {
        let flesh = point(
            "O that this too too solid flesh would melt, Thaw, and resolve itself into a dew!",
            Some("Hamlet"),
        );
        assert!(
            novel(
                "Hamlet wishes his too too solid flesh would melt.",
                &[&flesh]
            ) <= 1
        );
        let cast = point("Polonius, Lord Chamberlain.", None);
        assert_eq!(novel("Polonius is the Lord Chamberlain.", &[&cast]), 0);
        assert!(
            novel(
                "Polonius plays tennis with Horatio every morning.",
                &[&cast]
            ) > super::MAX_NOVEL
        );
    }

    #[test]
    fn a_bullet_is_a_claim_with_one_citation_at_its_end() {
        assert_eq!(
            bullet("- Hamlet mourns his father. [2]"),
            Some(("Hamlet mourns his father.".into(), 2))
        );
        assert_eq!(
            bullet("3. Claudius rules Denmark [10]"),
            Some(("Claudius rules Denmark.".into(), 10))
        );
        assert_eq!(bullet("Hamlet mourns [1] and rages [2]"), None);
        assert_eq!(bullet("Too short [1]"), None);
        assert_eq!(bullet("No citation at all here"), None);
        assert_eq!(bullet("A claim that cites nothing real [x]"), None);
    }
}
