//! The specialists as agents: [`RagSpecialist`] and [`PptSpecialist`] implement
//! [`AgentHandle`], so workflows use them in-process and `agentry_core::a2a::Served` serves
//! them over A2A like any other agent.

use agentry_a2a::model::*;
use agentry_core::agent::AgentError;
use agentry_core::handle::{AgentHandle, Ask, Reply, Update, UpdateStream, progress_stream};
use agentry_core::tools::ToolRegistry;
use serde_json::{Map, Value, json};

use crate::pptx::{Outline, OutlineSlide, build_outline};
use crate::rag::brief::{Facet, heading};
use crate::rag::{KeyPoint, RagAgent, bullet};

/// A request the agent cannot take: the task is rejected with this text.
fn bad_request(why: impl Into<String>) -> AgentError {
    AgentError::BadRequest(why.into())
}

/// A step for people, as a progress update (served: a `working` status with this text).
fn progress(text: String) -> Update {
    Update::Progress { text, data: None }
}

/// The input of an ask as JSON: its data part, else its text when that is a JSON object.
fn structured(ask: &Ask) -> Option<Map<String, Value>> {
    ask.data.clone().or_else(|| {
        serde_json::from_str::<Value>(ask.text.trim())
            .ok()
            .and_then(|v| match v {
                Value::Object(m) => Some(m),
                _ => None,
            })
    })
}

/// The RAG agent: a question in, a cited answer out (text, plus the key points and citations
/// as a data part). Input: text, or `{"question": "...", "points": N}`; with `"facets": N` it
/// answers with a brief of the work the question names (see [`crate::rag::brief`]) when it
/// names one.
pub struct RagSpecialist {
    /// Its retrieval settings and knowledge base.
    pub agent: RagAgent,
    /// Its name (`rag` by default).
    pub name: String,
}

impl RagSpecialist {
    /// A RAG agent named `rag`.
    pub fn new(agent: RagAgent) -> Self {
        RagSpecialist {
            agent,
            name: "rag".into(),
        }
    }

    /// `Shakespeare Knowledge Base` for the collection `shakespeare`.
    pub fn title(&self) -> String {
        let c = &self.agent.collection;
        let mut t: Vec<char> = c.replace(['_', '-'], " ").chars().collect();
        if let Some(f) = t.first_mut() {
            *f = f.to_ascii_uppercase();
        }
        format!("{} Knowledge Base", t.into_iter().collect::<String>())
    }

    /// Its card at `url`: the collection's title, its skill.
    pub fn card(&self, url: &str) -> AgentCard {
        let mut card = AgentCard::new(&self.title(), &self.description(), url);
        card.skills = vec![
            AgentSkill {
                id: "brief".into(),
                name: "Brief a work".into(),
                description: format!(
                    "For a work in the `{}` collection: its facets (for a play: who's who, the \
                     plot act by act, main themes, key passages; for other documents: what it \
                     is about, main points, key terms, open questions), each a list of short \
                     verbatim quotes with citations.",
                    self.agent.collection
                ),
                tags: vec!["rag".into(), "summary".into(), "citations".into()],
                examples: vec!["{\"question\": \"Hamlet\", \"facets\": 4}".into()],
                input_modes: Some(vec!["application/json".into()]),
                output_modes: Some(vec!["text/plain".into(), "application/json".into()]),
                security: Vec::new(),
            },
            AgentSkill {
                id: "answer".into(),
                name: "Answer from the documents".into(),
                description: format!(
                    "Answers questions from the `{}` collection with quoted key points and \
                 citations (document, section, byte offsets); says so when the documents hold \
                 no evidence.",
                    self.agent.collection
                ),
                tags: vec!["rag".into(), "search".into(), "citations".into()],
                examples: vec![
                    "Who is Hamlet?".into(),
                    "What does the ghost ask of Hamlet?".into(),
                ],
                input_modes: None,
                output_modes: Some(vec!["text/plain".into(), "application/json".into()]),
                security: Vec::new(),
            },
        ];
        card
    }
}

impl AgentHandle for RagSpecialist {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn description(&self) -> String {
        format!(
            "Finds and quotes evidence in the document collection `{}`, with citations.",
            self.agent.collection
        )
    }
    fn skills(&self) -> Vec<String> {
        vec!["answer".into(), "brief".into()]
    }
    fn stream(&self, ask: Ask) -> UpdateStream<'_> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        progress_stream(rx, async move {
            let input = structured(&ask);
            let question = input
                .as_ref()
                .and_then(|m| m.get("question"))
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| ask.text.clone());
            if question.trim().is_empty() {
                return Err(bad_request("the question is empty"));
            }
            let points = input
                .as_ref()
                .and_then(|m| m.get("points"))
                .and_then(Value::as_u64)
                .map_or(self.agent.points, |n| n.clamp(1, 40) as usize);
            let facets = input
                .as_ref()
                .and_then(|m| m.get("facets"))
                .and_then(Value::as_u64)
                .or_else(|| (ask.skill.as_deref() == Some("brief")).then_some(4));
            if let Some(facets) = facets {
                let _ = tx.send(progress(format!(
                    "Reading the work `{question}` names in the `{}` collection",
                    self.agent.collection
                )));
                let facets = facets.clamp(1, 29) as usize;
                if let Some(b) = self
                    .agent
                    .brief(&question, facets)
                    .await
                    .map_err(AgentError::failed)?
                {
                    let data = match serde_json::to_value(&b) {
                        Ok(Value::Object(m)) => m,
                        _ => Map::new(),
                    };
                    return Ok(Reply {
                        text: b.answer,
                        data: vec![data],
                        context_id: ask.context_id,
                        ..Default::default()
                    });
                }
                // No document is that work: a subject inside them, answered with key points.
            }
            let _ = tx.send(progress(format!(
                "Searching the `{}` collection for: {question}",
                self.agent.collection
            )));
            let a = self
                .agent
                .answer(&question, points)
                .await
                .map_err(AgentError::failed)?;
            let data = match serde_json::to_value(&a) {
                Ok(Value::Object(m)) => m,
                _ => Map::new(),
            };
            Ok(Reply {
                text: a.answer,
                data: vec![data],
                context_id: ask.context_id,
                ..Default::default()
            })
        })
    }
}

/// The media type of a .pptx deck.
pub const PPTX_MIME: &str =
    "application/vnd.openxmlformats-officedocument.presentationml.presentation";

/// The PPT agent: builds a deck with the PPT tools from an [`Outline`] (JSON), from research
/// (`{"title", "slides", "research": <RAG answer>}`), or from a Markdown outline. The reply
/// carries the deck itself (a file part with its bytes) and its name in the output folder,
/// never a server path: the caller may be on another machine.
pub struct PptSpecialist {
    /// The deck tools it builds with.
    pub tools: ToolRegistry,
    /// Its name (`ppt` by default).
    pub name: String,
    out_dir: std::path::PathBuf,
}

impl PptSpecialist {
    /// A PPT agent building decks with the tools over `decks` (saved in its output folder).
    pub fn new(decks: &crate::pptx::Decks) -> Self {
        PptSpecialist {
            tools: crate::pptx::ppt_tools(decks),
            name: "ppt".into(),
            out_dir: decks.out_dir().to_path_buf(),
        }
    }

    /// Its card at `url`.
    pub fn card(&self, url: &str) -> AgentCard {
        let mut card = AgentCard::new("PowerPoint Builder", &self.description(), url);
        card.default_output_modes = vec!["text/plain".into(), PPTX_MIME.into()];
        card.skills = vec![AgentSkill {
            id: "build_deck".into(),
            name: "Build a deck".into(),
            description: "Builds a .pptx (title slide, bullet slides, speaker notes, pictures) \
                          from an outline or from cited research."
                .into(),
            tags: vec!["pptx".into(), "presentation".into()],
            examples: vec!["# Hamlet\n## Plot\n- The ghost appears".into()],
            input_modes: Some(vec!["text/markdown".into(), "application/json".into()]),
            output_modes: None,
            security: Vec::new(),
        }];
        card
    }
}

/// A slide of cited points: the points as bullets, their full citations as the notes.
fn slide<'k>(title: String, points: impl Iterator<Item = &'k KeyPoint> + Clone) -> OutlineSlide {
    OutlineSlide {
        title,
        bullets: points.clone().map(bullet).collect(),
        notes: points
            .map(|k| format!("[{}] {}", k.citation.n, crate::rag::source(k)))
            .collect::<Vec<_>>()
            .join("\n"),
        pictures: Vec::new(),
    }
}

/// An outline from a brief's facets: a title slide, then one slide per facet, its bullets the
/// facet's quotes (label, quote, speaker, citation number), its notes the full citations.
pub fn outline_from_facets(title: &str, document: &str, facets: &[Facet]) -> Outline {
    let slides = facets
        .iter()
        .map(|f| slide(f.title.clone(), f.points.iter()))
        .collect();
    Outline {
        title: title.to_owned(),
        subtitle: if facets
            .iter()
            .flat_map(|f| &f.points)
            .any(|k| k.claim.is_some())
        {
            format!("Written from {document}: each line's quote and source in the notes")
        } else {
            format!("Every line quoted from {document}, with its source in the notes")
        },
        slides,
        file_name: None,
    }
}

/// An outline from cited key points (a subject inside the documents, not a whole work): one
/// title slide, then bullet slides in the documents' order, one per top-level section (act,
/// chapter) or run of sections when there are more sections than slides, titled by what they
/// cite; the bullets are the quotes with their citation numbers, the notes the full citations.
/// A quote that appears twice is shown once.
pub fn outline_from_research(title: &str, key_points: &[KeyPoint], slides: usize) -> Outline {
    let mut kps: Vec<&KeyPoint> = key_points.iter().collect();
    kps.sort_by(|a, b| {
        (&a.citation.document, a.citation.start).cmp(&(&b.citation.document, b.citation.start))
    });
    let mut seen = std::collections::HashSet::new();
    kps.retain(|k| seen.insert(k.text.clone()));
    // Where a point is: its document and top-level section.
    let place = |k: &KeyPoint| {
        let top = k.citation.section.split(" > ").next().unwrap_or("");
        let label = if top.is_empty() {
            k.citation.title.clone()
        } else {
            heading(top)
        };
        (k.citation.document.clone(), label)
    };
    let mut groups: Vec<((String, String), Vec<&KeyPoint>)> = Vec::new();
    for k in kps {
        let p = place(k);
        match groups.last_mut() {
            Some((q, g)) if *q == p => g.push(k),
            _ => groups.push((p, vec![k])),
        }
    }
    let content = slides.saturating_sub(1).max(1);
    let mut merged: Vec<(Vec<String>, Vec<&KeyPoint>)> = Vec::new();
    let per = groups.len().div_ceil(content).max(1);
    for run in groups.chunks(per) {
        let labels = run.iter().map(|((_, l), _)| l.clone()).collect::<Vec<_>>();
        merged.push((
            labels,
            run.iter().flat_map(|(_, g)| g.iter().copied()).collect(),
        ));
    }
    let out = merged
        .into_iter()
        .map(|(labels, group)| slide(crate::rag::brief::span(&labels), group.into_iter()))
        .collect();
    let mut docs: Vec<&str> = key_points
        .iter()
        .map(|k| k.citation.document.as_str())
        .collect();
    docs.sort();
    docs.dedup();
    Outline {
        title: title.to_owned(),
        subtitle: format!("Key points quoted from our documents: {}", docs.join(", ")),
        slides: out,
        file_name: None,
    }
}

impl AgentHandle for PptSpecialist {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn description(&self) -> String {
        "Builds PowerPoint decks (.pptx) from outlines or cited research, with speaker notes."
            .into()
    }
    fn skills(&self) -> Vec<String> {
        vec!["build_deck".into()]
    }
    fn stream(&self, ask: Ask) -> UpdateStream<'_> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        progress_stream(rx, async move {
            let outline = match structured(&ask) {
                Some(m) if m.get("research").is_some_and(|r| r.get("facets").is_some()) => {
                    let title = m
                        .get("title")
                        .and_then(Value::as_str)
                        .unwrap_or("Presentation");
                    let facets: Vec<Facet> =
                        serde_json::from_value(m["research"]["facets"].clone())
                            .map_err(|e| bad_request(format!("research.facets: {e}")))?;
                    if facets.iter().all(|f| f.points.is_empty()) {
                        return Err(bad_request(
                            "the research holds no cited points: there is nothing to put on slides",
                        ));
                    }
                    let document = m["research"]["document"]
                        .as_str()
                        .unwrap_or("the documents");
                    outline_from_facets(title, document, &facets)
                }
                Some(m) if m.contains_key("research") => {
                    let title = m
                        .get("title")
                        .and_then(Value::as_str)
                        .unwrap_or("Presentation");
                    let slides = m.get("slides").and_then(Value::as_u64).unwrap_or(5) as usize;
                    let kps: Vec<KeyPoint> = m["research"]
                        .get("key_points")
                        .cloned()
                        .map(serde_json::from_value)
                        .transpose()
                        .map_err(|e| bad_request(format!("research.key_points: {e}")))?
                        .unwrap_or_default();
                    if kps.is_empty() {
                        return Err(bad_request(
                            "the research holds no key points: there is nothing cited to put on \
                             slides",
                        ));
                    }
                    outline_from_research(title, &kps, slides.clamp(2, 30))
                }
                Some(m) => serde_json::from_value::<Outline>(Value::Object(m))
                    .map_err(|e| bad_request(format!("not an outline: {e}")))?,
                None => Outline::from_markdown(&ask.text).ok_or_else(|| {
                    bad_request(
                        "send an outline: JSON {\"title\", \"slides\": [{\"title\", \"bullets\", \
                         \"notes\"}]} or Markdown (# Title, ## Slide, - bullet, > notes)",
                    )
                })?,
            };
            let _ = tx.send(progress(format!(
                "Building \"{}\": {} slides",
                outline.title,
                outline.slides.len()
            )));
            let built = build_outline(&self.tools, &outline)
                .await
                .map_err(AgentError::failed)?;
            // The deck travels in the reply: a remote caller has no access to this folder.
            let saved = self.out_dir.join(&built.file);
            let deck = tokio::task::spawn_blocking(move || std::fs::read(saved))
                .await
                .map_err(AgentError::failed)?
                .map_err(|e| AgentError::failed(format!("cannot read back {}: {e}", built.file)))?;
            let file = Part::file(File {
                content: FileContent::Bytes(base64::engine::Engine::encode(
                    &base64::engine::general_purpose::STANDARD,
                    &deck,
                )),
                mime_type: Some(PPTX_MIME.into()),
                name: Some(built.file.clone()),
            });
            let data = json!({
                "file": built.file,
                "slides": built.slides,
                "bytes": built.bytes,
                "outline": outline,
                "tool_calls": built.calls.len(),
            });
            Ok(Reply {
                text: format!("Saved a {}-slide deck as {}", built.slides, built.file),
                data: vec![data.as_object().cloned().unwrap_or_default()],
                artifacts: vec![Artifact::new(Some("deck"), vec![file])],
                context_id: ask.context_id,
                ..Default::default()
            })
        })
    }
}
