//! Tool routing: rank an agent's tools by embedding similarity between the request and each
//! tool's name and description. A 135M model picks tools at chance; the embedder picks them
//! well, and the model is then constrained to the best ones and fills in the arguments.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agentry_core::embed::{DynEmbedder, EmbedError, dot};
use agentry_core::llm::ToolSpec;

/// Ranks tools for a request; tool embeddings are cached by their text.
#[derive(Clone)]
pub struct ToolRouter {
    embedder: Arc<dyn DynEmbedder>,
    cache: Arc<Mutex<HashMap<String, Vec<f32>>>>,
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
        }
    }

    /// `(index into tools, score)`, best first. A tool's score is the cosine similarity of the
    /// request to its name and description, averaged with that to its closest example when it
    /// has examples.
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
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        for (t, v) in missing.into_iter().zip(vecs) {
            cache.insert(t, v);
        }
        let score = |t: &String| cache.get(t).map_or(-1.0, |v| dot(&q, v));
        let mut ranked: Vec<(usize, f32)> = per_tool
            .iter()
            .enumerate()
            .map(|(i, ts)| {
                let desc = score(&ts[0]);
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
            .collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
        Ok(ranked)
    }
}
