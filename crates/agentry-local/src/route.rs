//! Tool routing: rank an agent's tools by embedding similarity between the request and each
//! tool's name and description (in a large tool set, less what its tools' texts share), plus
//! a keyword match (BM25 over the tools' names, descriptions and parameters). A 135M model
//! picks tools at chance; the embedder picks them well, and the model is then constrained to
//! the best ones and fills in the arguments.
//!
//! Tools of one server often differ by a word of intent (`read_text_file` / `get_file_info`,
//! `tail` / `cat`), which one sentence embedding does not separate. With the chat model given
//! ([`ToolRouter::with_reader`]), the few best-ranked tools that are close are also scored by
//! how likely the model finds the request after each tool's description (`log P(request |
//! tool)`, the "query likelihood" of unsupervised passage re-ranking): the model never has to
//! follow an instruction, only to read, which even a 135M model does usefully.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agentry_core::embed::{DynEmbedder, EmbedError, dot};
use agentry_core::llm::ToolSpec;
use agentry_core::text::tokens;

use crate::LocalError;
use crate::chat::ChatModel;

/// What a full keyword match adds to a tool's embedding similarity (a cosine): the tool whose
/// name and description best share the request's words gains this much, others in proportion
/// to their BM25 score. Chosen on the project's first three tool-choice suites
/// (`docs/BENCHMARKS.md`: 0.15 and 0.2 did best there, 0.3 worse than none).
pub const KEYWORD_WEIGHT: f32 = 0.15;

/// From this many tools on, a tool's text is compared to the request less what the set's
/// texts share (their mean embedding): tools of one API all say "file" or "order", and
/// that shared part of each cosine says nothing about which tool is meant ("all-but-the-top",
/// Mu and Viswanath, 2018, with the set's own mean). A smaller set's mean is mostly its tools
/// themselves, and tools of different APIs share little. Chosen on BFCL's suites (router top
/// 1: multi-turn 336 -> 349 of 507, live unchanged at 965; centering all sets of 3 and more
/// cost live 9; the mean taken from the request too cost multi-turn 42); the project's
/// suites were printed beside, not chosen on (`docs/BENCHMARKS.md`).
pub const CENTER_MIN_TOOLS: usize = 10;

/// How many of the best-ranked tools the reader scores, at most...
const READ_TOP: usize = 4;
/// ...of those within this much of the best score (the others cannot catch up in practice),
/// and what a nat of the request's log-likelihood after a tool adds to its score. All three
/// chosen on 120 requests of BFCL's multi-turn suite, the development set; the project's own
/// suites were scored only with the values fixed (`docs/BENCHMARKS.md`, tool choice).
const READ_WITHIN: f32 = 0.1;
const READ_WEIGHT: f32 = 0.02;
/// Tokens of a tool's text the reader sees (a long description is cut in its middle part).
const READ_MAX_TOKENS: usize = 400;

/// Ranks tools for a request; tool embeddings are cached by their text.
#[derive(Clone)]
pub struct ToolRouter {
    embedder: Arc<dyn DynEmbedder>,
    cache: Arc<Mutex<HashMap<String, Vec<f32>>>>,
    reader: Option<Arc<ChatModel>>,
}

impl std::fmt::Debug for ToolRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRouter").finish_non_exhaustive()
    }
}

/// The text a tool is known by: its name in words, then its description.
pub fn tool_text(t: &ToolSpec) -> String {
    let name = t
        .name
        .rsplit("__")
        .next()
        .unwrap_or(&t.name)
        .replace(['_', '-'], " ");
    format!("{name}: {}", t.description)
}

impl ToolRouter {
    /// A router that ranks tools with `embedder`.
    pub fn new(embedder: Arc<dyn DynEmbedder>) -> Self {
        ToolRouter {
            embedder,
            cache: Arc::new(Mutex::new(HashMap::new())),
            reader: None,
        }
    }

    /// Also scores the close best tools by the chat model's likelihood of the request after
    /// each tool's description (see the module's documentation), when the embedding does not
    /// settle the choice alone. Costs a forward pass over the request per tool read, and over
    /// the tool's text the first time it is read (its KV cache is kept): 0.1-0.5 s a request
    /// on two cores with the project's suites.
    pub fn with_reader(mut self, model: Arc<ChatModel>) -> Self {
        self.reader = Some(model);
        self
    }

    /// `(index into tools, score)`, best first. A tool's score is the cosine similarity of the
    /// request to its name and description (in a set of 10 tools or more, less
    /// the set's mean), averaged with that to its closest example when it has examples, plus
    /// the keyword score.
    pub async fn rank(
        &self,
        query: &str,
        tools: &[ToolSpec],
    ) -> Result<Vec<(usize, f32)>, EmbedError> {
        let per_tool: Vec<Vec<String>> = tools
            .iter()
            .map(|t| {
                std::iter::once(tool_text(t))
                    .chain(t.examples.iter().cloned())
                    .collect()
            })
            .collect();
        let texts: Vec<String> = per_tool.iter().flatten().cloned().collect();
        let missing: Vec<String> = {
            let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            let mut m: Vec<String> = texts
                .iter()
                .filter(|t| !cache.contains_key(*t))
                .cloned()
                .collect();
            m.sort();
            m.dedup();
            m
        };
        let mut inputs = missing.clone();
        inputs.push(query.to_owned());
        let mut vecs = self.embedder.embed_dyn(inputs).await?;
        let q = vecs
            .pop()
            .ok_or_else(|| EmbedError::Model("no embedding returned".into()))?;
        // The cache's lock ends with this block, before any await.
        let mut ranked: Vec<(usize, f32)> = {
            let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            for (t, v) in missing.into_iter().zip(vecs) {
                cache.insert(t, v);
            }
            let score = |t: &String| cache.get(t).map_or(-1.0, |v| dot(&q, v));
            let mean = (per_tool.len() >= CENTER_MIN_TOOLS).then(|| {
                let mut mean = vec![0f32; q.len()];
                for v in per_tool.iter().filter_map(|ts| cache.get(&ts[0])) {
                    for (m, x) in mean.iter_mut().zip(v) {
                        *m += x / per_tool.len() as f32;
                    }
                }
                (dot(&q, &mean), dot(&mean, &mean), mean)
            });
            // The cosine of the request to a tool's text less the set's mean text:
            // (q.t - q.m) / |t - m|, the norm expanded so nothing is allocated per tool.
            let described = |t: &String| match (&mean, cache.get(t)) {
                (_, None) => -1.0,
                (None, Some(v)) => dot(&q, v),
                (Some((qm, mm, m)), Some(v)) => {
                    let norm = (dot(v, v) - 2.0 * dot(v, m) + mm).max(1e-12).sqrt();
                    (dot(&q, v) - qm) / norm
                }
            };
            per_tool
                .iter()
                .enumerate()
                .map(|(i, ts)| {
                    let desc = described(&ts[0]);
                    let ex = ts[1..].iter().map(score).fold(f32::MIN, f32::max);
                    (
                        i,
                        if ts.len() > 1 {
                            (desc + ex) / 2.0
                        } else {
                            desc
                        },
                    )
                })
                .collect()
        };
        let keywords = keyword_scores(query, tools);
        let top = keywords.iter().copied().fold(0f32, f32::max);
        if top > 0.0 {
            for (r, k) in ranked.iter_mut().zip(&keywords) {
                r.1 += KEYWORD_WEIGHT * k / top;
            }
        }
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
        if let Some(model) = &self.reader
            && let Err(e) = self.read(model, query, tools, &mut ranked).await
        {
            // A refinement only: the embedder's ranking stands (e.g. a request longer than
            // the model's context).
            tracing::warn!(error = %e, "tool reader skipped");
        }
        Ok(ranked)
    }

    /// Adds the reader's score to the close best tools of `ranked` and sorts them again (the
    /// others, beyond `READ_WITHIN` of the best, stay after them).
    async fn read(
        &self,
        model: &Arc<ChatModel>,
        query: &str,
        tools: &[ToolSpec],
        ranked: &mut [(usize, f32)],
    ) -> Result<(), LocalError> {
        let Some(&(_, best)) = ranked.first() else {
            return Ok(());
        };
        let close = ranked
            .iter()
            .take(READ_TOP)
            .take_while(|(_, s)| best - s <= READ_WITHIN)
            .count();
        if close < 2 || query.trim().is_empty() {
            return Ok(());
        }
        let texts: Vec<String> = ranked[..close]
            .iter()
            .map(|&(i, _)| reader_prompt(&tools[i]))
            .collect();
        let (model, query) = (model.clone(), format!(" {}", query.trim()));
        let scores = tokio::task::spawn_blocking(move || -> Result<Vec<f32>, LocalError> {
            let request = model.encode(&query)?;
            texts
                .iter()
                .map(|t| {
                    let mut prefix = model.encode(t)?;
                    if prefix.len() > READ_MAX_TOKENS {
                        // Keep the name and the end ("Request:"), drop from the middle.
                        let tail = prefix.split_off(prefix.len() - 8);
                        prefix.truncate(READ_MAX_TOKENS - 8);
                        prefix.extend(tail);
                    }
                    model.continuation_logprob(&prefix, &request)
                })
                .collect()
        })
        .await
        .map_err(|e| LocalError::Model(format!("the tool reader stopped: {e}")))??;
        let top = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        for (r, lp) in ranked.iter_mut().zip(&scores) {
            if lp.is_finite() {
                r.1 += READ_WEIGHT * (lp - top);
            }
        }
        ranked[..close].sort_by(|a, b| b.1.total_cmp(&a.1));
        Ok(())
    }
}

/// What the reader reads before the request: a tool's name and description.
fn reader_prompt(t: &ToolSpec) -> String {
    format!(
        "Here is a tool, and a request a user made for it.\nTool: {}\nRequest:",
        tool_text(t)
    )
}

/// Appends the stemmed words of `t`'s top-level parameters, their names (`sortBy`,
/// `file_name`: split into words) and descriptions, to `doc`. Tools of one API often differ
/// more in what they take than in how they are described (`tail`'s "number of lines", an
/// address tool's street and zip code). Chosen on BFCL's suites (router top 1: multi-turn
/// 312 -> 336 of 507, live 944 -> 965 of 1,053) before the project's were run with it; a
/// separate parameter score beside the description's did less (`docs/BENCHMARKS.md`).
fn parameter_words(t: &ToolSpec, doc: &mut Vec<String>) {
    let Some(props) = t.parameters.get("properties").and_then(|p| p.as_object()) else {
        return;
    };
    for (name, schema) in props {
        let mut spaced = String::with_capacity(name.len() + 4);
        let mut after_lower = false;
        for c in name.chars() {
            if c.is_uppercase() && after_lower {
                spaced.push(' ');
            }
            after_lower = c.is_lowercase() || c.is_ascii_digit();
            spaced.push(c);
        }
        doc.extend(tokens(&spaced));
        if let Some(d) = schema.get("description").and_then(|d| d.as_str()) {
            doc.extend(tokens(d));
        }
    }
}

/// English function words, as the stemmer leaves them.
const STOP_WORDS: &[&str] = &[
    "a", "an", "the", "of", "to", "in", "on", "for", "and", "or", "is", "ar", "be", "it", "thi",
    "that", "these", "those", "with", "as", "by", "from", "at", "what", "which", "who", "how",
    "when", "where", "do", "doe", "can", "could", "would", "should", "will", "i", "me", "my",
    "you", "your", "we", "our", "pleas", "there", "here", "so", "than", "then", "if", "not", "no",
    "all", "ani", "some", "have", "ha",
];

/// BM25 of `query` against each tool's name (counted twice: it is the tool's own summary),
/// description and parameters, with the statistics of this tool set: a word most tools mention
/// ("file" among file tools) weighs little, one only the right tool mentions ("permissions",
/// "tree") a lot. Public for the `tool_choice` example's `dump` mode, which hands the router's
/// inputs to `bench/local/router_lab.py`.
pub fn keyword_scores(query: &str, tools: &[ToolSpec]) -> Vec<f32> {
    let docs: Vec<Vec<String>> = tools
        .iter()
        .map(|t| {
            let name = t.name.rsplit("__").next().unwrap_or(&t.name);
            let mut doc: Vec<String> = tokens(name)
                .chain(tokens(name))
                .chain(tokens(&t.description))
                .collect();
            parameter_words(t, &mut doc);
            doc
        })
        .collect();
    let n = docs.len() as f32;
    let avg = docs.iter().map(Vec::len).sum::<usize>() as f32 / n.max(1.0);
    // Function words say nothing about which tool is meant, yet in a small tool set one that
    // only one description happens to use ("the") would look distinctive.
    let mut words: Vec<String> = tokens(query)
        .filter(|w| !STOP_WORDS.contains(&w.as_str()))
        .collect();
    words.sort();
    words.dedup();
    let (k1, b) = (1.2f32, 0.75f32);
    let mut scores = vec![0f32; docs.len()];
    for w in &words {
        let hits = docs.iter().filter(|d| d.contains(w)).count() as f32;
        if hits == 0.0 {
            continue;
        }
        let idf = (1.0 + (n - hits + 0.5) / (hits + 0.5)).ln();
        for (s, d) in scores.iter_mut().zip(&docs) {
            let f = d.iter().filter(|x| *x == w).count() as f32;
            if f > 0.0 {
                *s += idf * f * (k1 + 1.0) / (f + k1 * (1.0 - b + b * d.len() as f32 / avg));
            }
        }
    }
    scores
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, description: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: description.into(),
            parameters: serde_json::json!({"type": "object"}),
            examples: Vec::new(),
        }
    }

    #[test]
    fn a_word_only_one_tool_has_outweighs_words_all_have() {
        let tools = [
            tool("read_file", "Read the contents of a file."),
            tool("get_file_info", "Get a file's size, times and permissions."),
            tool("srv__move_file", "Move or rename a file."),
        ];
        let s = keyword_scores("What are the permissions of this file?", &tools);
        assert!(s[1] > s[0] && s[0] > 0.0, "{s:?}");
        // Stems meet ("moving" / "move"), and a server prefix is not part of the name.
        let s = keyword_scores("Moving files around", &tools);
        assert!(s[2] > s[0] && s[2] > s[1], "{s:?}");
        assert_eq!(keyword_scores("nothing shared", &tools), [0.0; 3]);
    }

    #[test]
    fn what_a_tool_takes_counts_as_its_words() {
        let mut cat = tool("cat", "Display the contents of a file.");
        cat.parameters = serde_json::json!({"type": "object", "properties": {
            "file_name": {"type": "string", "description": "The file to display."}}});
        let mut tail = tool("tail", "Display the end of a file.");
        tail.parameters = serde_json::json!({"type": "object", "properties": {
            "file_name": {"type": "string", "description": "The file to display."},
            "lines": {"type": "integer", "description": "How many lines to show."}}});
        let mut list = tool("list_directory", "List a folder.");
        list.parameters = serde_json::json!({"type": "object", "properties": {
            "sortBy": {"type": "string", "enum": ["name", "size"]}}});
        let tools = [cat, tail, list];
        // A parameter's description ("lines"), and a camel-cased name as its words.
        let s = keyword_scores("Show me the last 20 lines of notes.txt", &tools);
        assert!(s[1] > 0.0 && s[0] == 0.0, "{s:?}");
        let s = keyword_scores("What is here, sorted by size?", &tools);
        assert!(s[2] > s[0] && s[2] > s[1], "{s:?}");
    }
}
