//! `agentry ingest` and the built-in team behind `agentry run`: the RAG and PPT specialists over
//! the knowledge base in `$AGENTRY_HOME/knowledge.db`, on the embedded embedder.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentry_a2a::A2aError;
use agentry_core::embed::DynEmbedder;
use agentry_flow::Engine;
use agentry_specialists::agents::{PptSpecialist, RagSpecialist};
use agentry_specialists::job::{Team, plan, plan_request, understand_with};
use agentry_specialists::pptx::{Decks, ppt_tools};
use agentry_specialists::rag::{KnowledgeBase, Progress, RagAgent};

fn other(e: impl std::fmt::Display) -> A2aError {
    A2aError::Other(e.to_string())
}

/// The knowledge base file.
pub fn kb_path(db: Option<&Path>) -> PathBuf {
    db.map(Path::to_owned)
        .unwrap_or_else(|| crate::data_dir().join("knowledge.db"))
}

/// Opens the knowledge base with the embedded embedder (MiniLM), or with an OpenAI-compatible
/// embeddings endpoint when `AGENTRY_EMBED_URL` is set (model `AGENTRY_EMBED_API_MODEL`, key
/// `OPENAI_API_KEY`).
pub async fn open_kb(db: Option<&Path>) -> Result<KnowledgeBase, A2aError> {
    if let Ok(url) = std::env::var("AGENTRY_EMBED_URL") {
        let model = std::env::var("AGENTRY_EMBED_API_MODEL").unwrap_or_else(|_| "default".into());
        let e = agentry_core::llm::OpenAiEmbedder::connect(agentry_core::llm::OpenAiConfig {
            base_url: url.clone(),
            model: model.clone(),
            ..Default::default()
        })
        .await
        .map_err(other)?;
        return KnowledgeBase::open(&kb_path(db), Arc::new(e), &format!("openai:{model}"))
            .map_err(other);
    }
    let embedder = agentry_local::provider::shared_embedder(None).map_err(other)?;
    let id = agentry_local::paths::embedder_path()
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "all-minilm-l6-v2".into());
    KnowledgeBase::open(&kb_path(db), embedder as Arc<dyn DynEmbedder>, &id).map_err(other)
}

fn bar(p: &Progress) {
    const W: usize = 24;
    let file_share = 1.0 / p.files.max(1) as f64;
    let within = if p.chunks_total == 0 {
        1.0
    } else {
        p.chunks_done as f64 / p.chunks_total as f64
    };
    let done = (p.file_index as f64 + within) * file_share;
    let filled = ((done * W as f64) as usize).min(W);
    let name = Path::new(&p.file)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    eprint!(
        "\r  [{}{}] {:>3}%  file {}/{}  {}/{} chunks  {:<32.32}",
        "#".repeat(filled),
        ".".repeat(W - filled),
        (done * 100.0) as u32,
        p.file_index + 1,
        p.files,
        p.chunks_done,
        p.chunks_total,
        name
    );
    let _ = std::io::stderr().flush();
}

pub async fn ingest(
    paths: &[PathBuf],
    collection: &str,
    db: Option<&Path>,
    json: bool,
) -> Result<(), A2aError> {
    let kb = open_kb(db).await?;
    for path in paths {
        eprintln!("agentry: ingesting {} into `{collection}`", path.display());
        let t = std::time::Instant::now();
        let r = kb.ingest(path, collection, &bar).await.map_err(other)?;
        eprintln!();
        if json {
            println!("{}", serde_json::to_string(&r).unwrap_or_default());
        }
        eprintln!(
            "agentry: {} files: {} ingested ({} chunks, {:.1} s), {} unchanged, {} skipped",
            r.files_seen,
            r.ingested.len(),
            r.chunks,
            t.elapsed().as_secs_f32(),
            r.unchanged.len(),
            r.skipped.len()
        );
        for (f, why) in &r.skipped {
            eprintln!("  skipped {f}: {why}");
        }
    }
    for c in kb.collections().map_err(other)? {
        eprintln!(
            "  collection `{}`: {} documents, {} chunks ({}, {} dims)",
            c.name, c.documents, c.chunks, c.embedder, c.dimensions
        );
    }
    Ok(())
}

/// Options of the built-in team.
pub struct RunOpts {
    pub collection: String,
    pub output: PathBuf,
    pub db: Option<PathBuf>,
    pub in_process: bool,
    pub json: bool,
    /// Reads the request and writes the cited summary; `None`: rules and extractive answers.
    pub model: Option<agentry_core::agent::ModelConfig>,
}

/// `agentry run TASK` without a config file: plan with the built-in planner, run RAG → PPT.
pub async fn run_builtin(task: &str, o: RunOpts) -> Result<(), A2aError> {
    let kb = open_kb(o.db.as_deref()).await?;
    let known = kb.collections().map_err(other)?;
    if !known.iter().any(|c| c.name == o.collection && c.chunks > 0) {
        return Err(other(format!(
            "the knowledge base {} has no documents in collection `{}`; add some with \
             `agentry ingest PATH --collection {}` (the demo corpus: bash scripts/fetch-data.sh)",
            kb_path(o.db.as_deref()).display(),
            o.collection,
            o.collection
        )));
    }
    let llm = match &o.model {
        None => None,
        Some(m) => Some(crate::configured::factory().model(m).map_err(other)?),
    };
    let mut rag_agent = RagAgent::new(kb, &o.collection);
    rag_agent.writer = llm.clone();
    let rag = RagSpecialist::new(rag_agent);
    let ppt = PptSpecialist::new(ppt_tools(&Decks::new(&o.output)));
    let team = if o.in_process {
        Team::in_process(rag, ppt)
    } else {
        Team::over_a2a(rag, ppt).await.map_err(other)?
    };
    let (wf, input) = match &llm {
        None => plan(task),
        Some(llm) => {
            let (request, by_model) = understand_with(&**llm, task).await;
            if !by_model {
                eprintln!("agentry: the model's reading of the request was unusable; using rules");
            }
            plan_request(task, request)
        }
    };
    eprintln!("agentry: planned `{}`:", wf.name);
    for s in &wf.steps {
        let url = team
            .urls
            .iter()
            .find(|(n, _)| *n == s.agent)
            .map(|(_, u)| format!(" over A2A at {u}"))
            .unwrap_or_else(|| " in-process".into());
        eprintln!("  - {} ({}{url})", s.id, s.agent);
    }
    let engine = Engine::new(team.registry.clone());
    let state = crate::flows::execute_on(&engine, wf, input, o.json).await?;
    // The cited summary beside the deck.
    if let Some(research) = state
        .steps
        .get("research")
        .or_else(|| state.steps.get("answer"))
        .and_then(|r| r.output.as_ref())
    {
        std::fs::create_dir_all(&o.output).map_err(other)?;
        let path = o.output.join("summary.md");
        let topic = state.input["topic"].as_str().unwrap_or(task);
        std::fs::write(&path, format!("# {topic}\n\n{}\n", research.text)).map_err(other)?;
        eprintln!("agentry: cited summary in {}", path.display());
    }
    crate::flows::finish(state, o.json)
}

/// The built-in specialists, for `agentry serve --agent rag|ppt`.
pub async fn rag_agent(collection: &str, db: Option<&Path>) -> Result<RagSpecialist, A2aError> {
    Ok(RagSpecialist::new(RagAgent::new(
        open_kb(db).await?,
        collection,
    )))
}

pub fn ppt_agent(output: &Path) -> PptSpecialist {
    PptSpecialist::new(ppt_tools(&Decks::new(output)))
}

/// A researcher from its configuration file.
pub fn researcher(path: &Path) -> Result<agentry_specialists::research::Researcher, A2aError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| other(format!("cannot read {}: {e}", path.display())))?;
    let cfg = agentry_core::agent::parse_config(path, &text).map_err(other)?;
    Ok(agentry_specialists::research::Researcher::new(cfg))
}
