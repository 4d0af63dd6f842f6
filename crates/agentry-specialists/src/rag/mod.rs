//! The RAG specialist: documents in ([`store::KnowledgeBase::ingest`]), cited answers out
//! ([`RagAgent`]).
//!
//! The agent retrieves first (hybrid search), extracts quoted key points from the evidence
//! without an LLM ([`keypoints`]), and only then, when a capable model is configured, lets the
//! model write a summary that must cite the numbered evidence; an answer citing nothing it was
//! given is discarded for the extractive one. When nothing relevant is found it says so.

pub mod brief;
pub mod chunk;
pub mod keypoints;
pub mod keywords;
pub mod parse;
pub mod store;
mod tools;
pub mod vectors;
pub mod written;

use std::collections::HashMap;
use std::sync::Arc;

use agentry_core::embed::DynEmbedder;
use agentry_core::llm::{ChatMessage, ChatRequest, DynLlmProvider};
use serde::Serialize;

pub use keypoints::{Citation, KeyPoint};
pub use store::{Hit, IngestReport, KnowledgeBase, Progress};
pub use tools::rag_tools;

/// Why ingestion or retrieval failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RagError {
    #[error("{0}")]
    /// A document that cannot be read.
    Parse(String),
    #[error("knowledge base: {0}")]
    /// The knowledge base failed.
    Store(String),
    #[error("embedder: {0}")]
    /// The embedder failed.
    Embedder(String),
    #[error("{0}")]
    /// A request that cannot be answered as given.
    Input(String),
    #[error(
        "no collection `{name}` (collections: {known}); ingest documents with `agentry ingest PATH --collection {name}`"
    )]
    /// The collection does not exist.
    UnknownCollection {
        /// The collection asked for.
        name: String,
        /// Those there are.
        known: String,
    },
}

/// An answer with its evidence.
#[derive(Debug, Clone, Serialize)]
pub struct RagAnswer {
    /// The question asked.
    pub question: String,
    /// The collection searched.
    pub collection: String,
    /// The answer text, citing key points as `[n]`.
    pub answer: String,
    /// False when the collection held no relevant evidence.
    pub grounded: bool,
    /// The quoted evidence, numbered as the answer cites it.
    pub key_points: Vec<KeyPoint>,
    /// How the answer text was written: `extractive` or `model`.
    pub method: String,
}

/// A brief of one work: its facets, each a list of cited quotes (see [`brief`]).
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Brief {
    /// What was asked about.
    pub topic: String,
    /// The collection searched.
    pub collection: String,
    /// The work's file name.
    pub document: String,
    /// Its title.
    pub title: String,
    /// One per slide: who's who, the plot, themes, key passages (a play), or what it is about,
    /// main points, key terms, open questions (other documents). Citations are numbered
    /// across all of them.
    pub facets: Vec<brief::Facet>,
    /// The facets as cited text (Markdown), with the sources at the end.
    pub answer: String,
    /// How it was written: `extractive` (quotes only) or `model` (by the configured model: the
    /// facets planned and their bullets written from the quotes, each kept only when close to
    /// the quote it cites, and a summary kept only when it cites the facets' quotes and
    /// nothing else).
    pub method: String,
}

/// Words of a topic that do not name a work.
const NOT_A_TITLE: &[&str] = &[
    "the",
    "a",
    "an",
    "of",
    "play",
    "work",
    "book",
    "document",
    "documents",
    "our",
    "about",
    "tragedy",
    "story",
    "novel",
    "text",
];

/// The lower-case words of `s`, split at anything not alphanumeric.
fn title_words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The documents whose title or file name has every word of `wanted`.
fn named<'d>(
    docs: &'d [(String, String, String)],
    wanted: &[String],
) -> Vec<&'d (String, String, String)> {
    docs.iter()
        .filter(|(_, name, title)| {
            let mut have = title_words(title);
            have.extend(title_words(name));
            wanted.iter().all(|w| have.contains(w))
        })
        .collect()
}

/// Below this cosine similarity between the question and its best sentence the evidence is
/// treated as missing (MiniLM: unrelated English text scores about 0.0-0.25).
const MIN_SIMILARITY: f32 = 0.35;

/// The same for a line of the one the question asks about (who says or does what it asks):
/// the question has chosen its speaker already, so less of the rest must match ("What does
/// Jaques say about the world?": "All the world's a stage, And all the men and women merely
/// players;" at 0.32).
const MIN_SIMILARITY_THEIRS: f32 = 0.3;

/// Chunks searched for a question before keeping those of the plays it names characters of.
const WIDER: usize = 40;

/// Chunks of those plays added from the search for the question without its names.
const UNNAMED_EXTRA: usize = 10;

/// Chunks of those plays read for the answer: more than [`RagAgent::top_k`], since a play
/// names its characters on every page and the search ranks by names first (20 against 10:
/// 6 answers against 5 quoting the line expected, of 20 questions).
const IN_THE_PLAY: usize = 20;

/// Retrieval settings of a RAG agent.
#[derive(Clone)]
pub struct RagAgent {
    /// The knowledge base.
    pub kb: KnowledgeBase,
    /// The collection it searches.
    pub collection: String,
    /// Chunks retrieved per question.
    pub top_k: usize,
    /// Key points extracted.
    pub points: usize,
    /// A model that may write the summary from the key points; `None` keeps it extractive.
    pub writer: Option<Arc<dyn DynLlmProvider>>,
    /// Who tells the best-known among the set pieces a brief or a profile finds, and where
    /// in them to quote ([`brief::Reader`]: the embedded chat model); `None` takes the
    /// longest and quotes their openings.
    pub reader: Option<Arc<dyn brief::Reader>>,
    /// Each document's word counts by path, with a hash of the text they were counted from:
    /// a brief compares its work with up to 50 others, and counting one reads it whole.
    counts: Arc<std::sync::Mutex<CountsByPath>>,
    /// The reader's answers, kept between briefs ([`Remembering`]).
    read: Arc<std::sync::Mutex<HashMap<u64, Vec<f32>>>>,
}

/// A [`brief::Reader`] whose answers are kept: a play briefed again, or a character of it
/// profiled after its brief, costs the model only the passages it has not read (about 10 s
/// a play on two cores otherwise).
struct Remembering {
    reader: Arc<dyn brief::Reader>,
    seen: Arc<std::sync::Mutex<HashMap<u64, Vec<f32>>>>,
}

/// Passages whose reading [`Remembering`] keeps, at most (a few thousand plays' worth of
/// set pieces; forgotten all at once past that).
const REMEMBERED: usize = 50_000;

impl brief::Reader for Remembering {
    fn familiarity(&self, lead: &str, lines: &[&str]) -> Option<Vec<f32>> {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (lead, lines).hash(&mut h);
        let key = h.finish();
        let kept = self
            .seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .cloned();
        if kept.is_some() {
            return kept;
        }
        let read = self.reader.familiarity(lead, lines)?;
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.len() >= REMEMBERED {
            seen.clear();
        }
        seen.insert(key, read.clone());
        Some(read)
    }
}

/// What a question asks the play to tell of a character ([`RagAgent::told`]).
#[derive(Clone, Copy)]
enum Told {
    /// "Who is Hamlet?"
    Who,
    /// "How does Desdemona die?", "Who kills Polonius?"
    Death,
}

/// A document's word counts by its path, with the hash of the text they were counted from.
type CountsByPath = HashMap<String, (u64, Arc<brief::Counts>)>;

impl RagAgent {
    /// An agent over `collection` of `kb` with the default settings (12 chunks, 6 key points, extractive).
    pub fn new(kb: KnowledgeBase, collection: &str) -> Self {
        RagAgent {
            kb,
            collection: collection.to_owned(),
            top_k: 12,
            points: 6,
            writer: None,
            reader: None,
            counts: Arc::default(),
            read: Arc::default(),
        }
    }

    /// The reader, its answers kept between calls.
    fn remembering(&self) -> Option<Remembering> {
        self.reader.clone().map(|reader| Remembering {
            reader,
            seen: self.read.clone(),
        })
    }

    /// A brief of the work `topic` names (every word of it in a document's title or file
    /// name), with `slides` facets; `None` when the topic names no document, which is then a
    /// subject *inside* the documents, answered with cited key points by [`Self::answer`].
    pub async fn brief(&self, topic: &str, slides: usize) -> Result<Option<Brief>, RagError> {
        let wanted: Vec<String> = title_words(topic)
            .into_iter()
            .filter(|w| !NOT_A_TITLE.contains(&w.as_str()))
            .collect();
        if wanted.is_empty() {
            return Ok(None);
        }
        let docs = self.kb.documents(&self.collection)?;
        let named = named(&docs, &wanted);
        let path = match named.as_slice() {
            [] => return Ok(None),
            [one] => one.0.clone(),
            several => {
                // Several editions of one work: the one retrieval ranks first.
                let hits = self.kb.search(&self.collection, topic, 10).await?;
                let rank = |d: &&&(String, String, String)| {
                    hits.iter()
                        .position(|h| h.path == d.0)
                        .unwrap_or(usize::MAX)
                };
                several
                    .iter()
                    .min_by_key(rank)
                    .map_or_else(|| several[0].0.clone(), |d| d.0.clone())
            }
        };
        let kb = self.kb.clone();
        let collection = self.collection.clone();
        let topic = topic.to_owned();
        let coll = collection.clone();
        let doc_path = path.clone();
        let counts = self.counts.clone();
        let reader = self.remembering();
        // Reading whole documents and counting their words is CPU work: off the async workers.
        let built = tokio::task::spawn_blocking(move || -> Result<_, RagError> {
            let Some(work) = kb.work(&coll, &path)? else {
                return Ok(None);
            };
            // The other works, to tell what is particular to this one (at most 50 read).
            let mut background = brief::Counts::default();
            for (other, ..) in docs.iter().filter(|d| d.0 != path).take(50) {
                if let Some(w) = kb.work(&coll, other)? {
                    let hash = {
                        use std::hash::{Hash, Hasher};
                        let mut h = std::collections::hash_map::DefaultHasher::new();
                        w.text.hash(&mut h);
                        h.finish()
                    };
                    let kept = counts
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get(other)
                        .filter(|c| c.0 == hash)
                        .map(|c| c.1.clone());
                    let c = kept.unwrap_or_else(|| {
                        let c = Arc::new(brief::counts(&w));
                        counts
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .insert(other.clone(), (hash, c.clone()));
                        c
                    });
                    background.merge(&c);
                }
            }
            let mut facets = brief::facets(
                &work,
                &background,
                slides.max(1),
                reader.as_ref().map(|r| r as _),
            );
            let mut n = 0;
            for p in facets.iter_mut().flat_map(|f| f.points.iter_mut()) {
                n += 1;
                p.citation.n = n;
            }
            Ok(Some((work.document, work.title, facets)))
        })
        .await
        .map_err(|e| RagError::Store(format!("brief: {e}")))??;
        let Some((document, title, mut facets)) = built else {
            return Ok(None);
        };
        // A configured model plans the slides and writes their bullets, each checked against
        // the quote it cites (`written`); the extracted facets stay when it gives nothing.
        let mut written = false;
        if let Some(llm) = &self.writer
            && let Some(w) =
                written::facets(&**llm, &self.kb, &collection, &doc_path, &title, &facets).await
        {
            facets = w;
            written = true;
            for (n, p) in facets
                .iter_mut()
                .flat_map(|f| f.points.iter_mut())
                .enumerate()
            {
                p.citation.n = n + 1;
            }
        }
        let summary = match &self.writer {
            Some(llm) => {
                let points: Vec<KeyPoint> = facets.iter().flat_map(|f| f.points.clone()).collect();
                if points.is_empty() {
                    None
                } else {
                    written_summary(&**llm, &**self.kb.embedder(), &topic, &points).await
                }
            }
            None => None,
        };
        let mut answer = String::new();
        if let Some(s) = &summary {
            answer.push_str(s);
            answer.push_str("\n\n");
        }
        answer.push_str(&brief_text(&title, &document, &facets));
        Ok(Some(Brief {
            topic,
            collection,
            document,
            title,
            facets,
            answer,
            method: if summary.is_some() || written {
                "model"
            } else {
                "extractive"
            }
            .into(),
        }))
    }

    /// Answers `question` from the collection.
    pub async fn answer(&self, question: &str, points: usize) -> Result<RagAnswer, RagError> {
        let hits = self
            .kb
            .search(&self.collection, question, self.top_k.max(points * 2))
            .await?;
        // "Who is Hamlet?" about a character of a play the search found: the play tells who
        // they are (cast list, first words, set pieces, last words), not the lines that say
        // the name most.
        let profile = match (keypoints::who_is(question), keypoints::death_of(question)) {
            (Some(name), _) => self.told(Told::Who, &name, &hits, points).await?,
            // "How does Desdemona die?": the scene of the death, when the play shows it.
            (None, Some(names)) => self.told(Told::Death, &names, &hits, points).await?,
            (None, None) => None,
        };
        let from_profile = profile.is_some();
        let mut theirs: Vec<String> = Vec::new();
        let (kps, also) = match profile {
            Some((kps, also)) => (kps, also),
            None => {
                // Wider, then only the plays whose casts the question names (Ophelia's death
                // is in Hamlet, whatever Othello says of dying).
                let wider = self.kb.search(&self.collection, question, WIDER).await?;
                let casts = self.casts(&wider).await?;
                theirs = casts
                    .values()
                    .flat_map(|c| c.subject_of(question))
                    .map(str::to_owned)
                    .collect();
                let naming: HashMap<&str, usize> = casts
                    .iter()
                    .map(|(d, c)| (d.as_str(), c.named_in(question).len()))
                    .collect();
                let most = naming.values().copied().max().unwrap_or(0);
                let named_most = |document: &str| naming.get(document) == Some(&most);
                let ours = |h: &Hit| named_most(&h.document);
                let hits: Vec<Hit> = if most > 0 {
                    let mut ours_hits: Vec<Hit> =
                        wider.into_iter().filter(ours).take(IN_THE_PLAY).collect();
                    // What happens to them is often told without their names (Gertrude's
                    // willow speech says "your sister's drown'd, Laertes", never
                    // "Ophelia"): the question searched again without the names, that
                    // play's chunks added.
                    let named = casts.iter().filter(|(d, _)| named_most(d)).map(|(_, c)| c);
                    if let Some(unnamed) = brief::without_names(question, named) {
                        let more = self.kb.search(&self.collection, &unnamed, WIDER).await?;
                        let new: Vec<Hit> = more
                            .into_iter()
                            .filter(|h| {
                                ours(h) && !ours_hits.iter().any(|o| o.chunk_id == h.chunk_id)
                            })
                            .take(UNNAMED_EXTRA)
                            .collect();
                        ours_hits.extend(new);
                    }
                    ours_hits
                } else {
                    hits.clone()
                };
                let kps = keypoints::key_points_with(
                    &**self.kb.embedder(),
                    question,
                    &hits,
                    points,
                    &casts,
                )
                .await?;
                (kps, String::new())
            }
        };
        let best = kps.iter().map(|k| k.similarity).fold(f32::MIN, f32::max);
        tracing::debug!(best, from_profile, "best evidence similarity");
        let best_theirs = kps
            .iter()
            .filter(|k| k.speaker.as_ref().is_some_and(|s| theirs.contains(s)))
            .map(|k| k.similarity)
            .fold(f32::MIN, f32::max);
        let grounded =
            from_profile || best >= MIN_SIMILARITY || best_theirs >= MIN_SIMILARITY_THEIRS;
        if !grounded {
            return Ok(RagAnswer {
                question: question.to_owned(),
                collection: self.collection.clone(),
                answer: format!(
                    "The documents in `{}` hold no evidence that answers this ({}).",
                    self.collection,
                    if hits.is_empty() {
                        "nothing matched".to_owned()
                    } else {
                        format!("{} passages searched, none relevant", hits.len())
                    }
                ),
                grounded: false,
                key_points: Vec::new(),
                method: "extractive".into(),
            });
        }
        let extractive = extractive_answer(&kps);
        let (answer, method) = match &self.writer {
            Some(llm) => {
                match written_answer(&**llm, &**self.kb.embedder(), question, &kps).await {
                    Some(a) => (a, "model"),
                    None => (extractive, "extractive"),
                }
            }
            None => (extractive, "extractive"),
        };
        let answer = answer + &also;
        Ok(RagAnswer {
            question: question.to_owned(),
            collection: self.collection.clone(),
            answer,
            grounded: true,
            key_points: kps,
            method: method.into(),
        })
    }
}

impl RagAgent {
    /// The casts of the plays among `hits` ([`brief::Cast`]), by document name.
    async fn casts(&self, hits: &[Hit]) -> Result<HashMap<String, brief::Cast>, RagError> {
        let mut paths: Vec<(String, String)> = Vec::new();
        for h in hits {
            if !paths.iter().any(|p| p.0 == h.document) {
                paths.push((h.document.clone(), h.path.clone()));
            }
        }
        let kb = self.kb.clone();
        let collection = self.collection.clone();
        tokio::task::spawn_blocking(move || -> Result<_, RagError> {
            let mut casts = HashMap::new();
            for (document, path) in paths {
                if let Some(work) = kb.work(&collection, &path)? {
                    casts.insert(document, brief::Cast::of(&work));
                }
            }
            Ok(casts)
        })
        .await
        .map_err(|e| RagError::Store(format!("casts: {e}")))?
    }

    /// What the play tells of the character `name` ("Portia", or "Portia in the Merchant of
    /// Venice" to say which play): who they are ([`brief::profile`]) or how they die
    /// ([`brief::death`]), from the first play that tells it among those of `hits`, then of a
    /// search for the name alone (at most eight read), or among the plays the name after "in"
    /// names; with a line naming the other plays that have a character of that name.
    async fn told(
        &self,
        told: Told,
        name: &str,
        hits: &[Hit],
        n: usize,
    ) -> Result<Option<(Vec<KeyPoint>, String)>, RagError> {
        let (name, work) = match name.split_once(" in ") {
            Some((who, work)) => (who.trim().to_owned(), Some(work)),
            None => (name.to_owned(), None),
        };
        let mut paths: Vec<String> = Vec::new();
        match work {
            Some(work) => {
                let wanted: Vec<String> = title_words(work)
                    .into_iter()
                    .filter(|w| !NOT_A_TITLE.contains(&w.as_str()))
                    .collect();
                let docs = self.kb.documents(&self.collection)?;
                paths.extend(named(&docs, &wanted).iter().take(5).map(|d| d.0.clone()));
            }
            None => {
                // The plays the question's search found, then those a search for the name
                // alone finds: an edition may tag a character by rank (`Queen.`), so the
                // question's words may find other plays than hers ("How does Gertrude die?").
                let by_name = self.kb.search(&self.collection, &name, 10).await?;
                for h in hits.iter().chain(&by_name) {
                    if !paths.contains(&h.path) && paths.len() < 8 {
                        paths.push(h.path.clone());
                    }
                }
            }
        }
        let kb = self.kb.clone();
        let collection = self.collection.clone();
        let reader = self.remembering();
        tokio::task::spawn_blocking(move || -> Result<_, RagError> {
            let mut found: Option<Vec<KeyPoint>> = None;
            let mut others: Vec<String> = Vec::new();
            for path in paths {
                let Some(work) = kb.work(&collection, &path)? else {
                    continue;
                };
                let points = match told {
                    // Only the play told is worth the reader's time.
                    Told::Who => brief::profile(
                        &work,
                        &name,
                        n,
                        reader.as_ref().filter(|_| found.is_none()).map(|r| r as _),
                    ),
                    Told::Death => brief::death(&work, &name, n),
                };
                if let Some(points) = points {
                    if found.is_none() {
                        found = Some(points);
                    } else {
                        others.push(format!("{} ({})", work.title, work.document));
                    }
                }
            }
            let also = if others.is_empty() {
                String::new()
            } else {
                let ask = match told {
                    Told::Who => format!("Who is {name} in <play>?"),
                    Told::Death => format!("How does {name} die in <play>?"),
                };
                format!(
                    "\nA character of that name is also in: {}. Ask \"{ask}\" for one of them.\n",
                    others.join("; ")
                )
            };
            Ok(found.map(|f| (f, also)))
        })
        .await
        .map_err(|e| RagError::Store(format!("profile: {e}")))?
    }
}

/// A quote as shown: in quotes, `…` when abridged, its speaker after it.
pub fn quoted(k: &KeyPoint) -> String {
    let dots = if k.abridged { " …" } else { "" };
    let who = k
        .speaker
        .as_ref()
        .map(|s| format!(" ({s})"))
        .unwrap_or_default();
    format!("“{}{dots}”{who}", k.text)
}

/// A point as a bullet: `Act I: “…” (Hamlet) [3]`, or what a model wrote from the quote:
/// `Act I: Hamlet swears to avenge his father. [3]`.
pub fn bullet(k: &KeyPoint) -> String {
    let label = k
        .label
        .as_ref()
        .map(|l| format!("{l}: "))
        .unwrap_or_default();
    match &k.claim {
        Some(c) => format!("{label}{c} [{}]", k.citation.n),
        None => format!("{label}{} [{}]", quoted(k), k.citation.n),
    }
}

/// The facets as Markdown, with the sources at the end.
fn brief_text(title: &str, document: &str, facets: &[brief::Facet]) -> String {
    let mut s = if facets
        .iter()
        .flat_map(|f| &f.points)
        .any(|k| k.claim.is_some())
    {
        format!(
            "From {title} ({document}), written by the configured model, each line resting on \
             the quote listed under Sources:\n"
        )
    } else {
        format!("From {title} ({document}), every line quoted:\n")
    };
    for f in facets {
        s.push_str(&format!("\n## {}\n", f.title));
        for p in &f.points {
            s.push_str(&format!("- {}\n", bullet(p)));
        }
    }
    s.push_str("\nSources:\n");
    for p in facets.iter().flat_map(|f| &f.points) {
        s.push_str(&format!("[{}] {}\n", p.citation.n, source(p)));
    }
    s
}

/// A point's source as listed under a text or in a slide's notes; with the quote when the
/// bullet is a model's claim, so that a reader can check one against the other.
pub fn source(k: &KeyPoint) -> String {
    match k.claim {
        Some(_) => format!("{} {}", quoted(k), k.citation.label()),
        None => k.citation.label(),
    }
}

/// The key points as a cited list.
pub fn extractive_answer(kps: &[KeyPoint]) -> String {
    let mut s = String::from("From the documents:\n");
    for k in kps {
        let who = k
            .speaker
            .as_ref()
            .map(|sp| format!("{sp}: "))
            .unwrap_or_default();
        let dots = if k.abridged { " …" } else { "" };
        let label = k
            .label
            .as_ref()
            .map(|l| format!("{l}: "))
            .unwrap_or_default();
        s.push_str(&format!(
            "- {label}{who}\"{}{dots}\" [{}]\n",
            k.text, k.citation.n
        ));
    }
    s.push_str("\nSources:\n");
    for k in kps {
        s.push_str(&format!("[{}] {}\n", k.citation.n, k.citation.label()));
    }
    s
}

/// A model-written summary that cites the evidence, followed by the sources, or `None` when
/// the model cited nothing it was given (the caller falls back to the extractive answer).
async fn written_answer(
    llm: &dyn DynLlmProvider,
    embedder: &dyn DynEmbedder,
    question: &str,
    kps: &[KeyPoint],
) -> Option<String> {
    let mut s = written_summary(llm, embedder, question, kps).await?;
    s.push_str("\n\nSources:\n");
    for k in kps {
        s.push_str(&format!("[{}] {}\n", k.citation.n, k.citation.label()));
    }
    Some(s)
}

/// The model's summary of `kps` for `question`, kept only when it cites at least one of them
/// and nothing else, and cut to the sentences that say what the quotes they cite show
/// ([`written::supported`]).
async fn written_summary(
    llm: &dyn DynLlmProvider,
    embedder: &dyn DynEmbedder,
    question: &str,
    kps: &[KeyPoint],
) -> Option<String> {
    let evidence: String = kps
        .iter()
        .map(|k| format!("[{}] {}\n", k.citation.n, k.text))
        .collect();
    let req = ChatRequest {
        messages: vec![
            ChatMessage::system(
                "Answer the question in two to four sentences using only the numbered evidence. \
                 Cite evidence as [n] after each claim. If the evidence does not answer it, say so.",
            ),
            ChatMessage::user(format!("Evidence:\n{evidence}\nQuestion: {question}")),
        ],
        temperature: Some(0.0),
        max_tokens: Some(300),
        ..Default::default()
    };
    let text = llm.chat_dyn(req).await.ok()?.message.content;
    let given: std::collections::HashSet<usize> = kps.iter().map(|k| k.citation.n).collect();
    let cites_given = given.iter().any(|n| text.contains(&format!("[{n}]")));
    let cites_unknown = text
        .match_indices('[')
        .filter_map(|(i, _)| {
            let rest = &text[i + 1..];
            let end = rest.find(']')?;
            rest[..end].parse::<usize>().ok()
        })
        .any(|n| !given.contains(&n));
    if !cites_given || cites_unknown {
        tracing::info!("model summary discarded: it cites no given evidence");
        return None;
    }
    written::supported(embedder, text.trim(), kps).await
}
