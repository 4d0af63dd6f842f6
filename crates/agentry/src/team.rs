//! The built-in team behind `agentry run "Create a 5-slide presentation about Hamlet based on
//! our documents"`: the RAG specialist over a knowledge base, then the PPT specialist, served
//! to each other over A2A on loopback (or in-process) and run as a workflow.

use std::path::{Path, PathBuf};

use agentry_core::agent::ModelConfig;
use agentry_flow::{Engine, RunState, Workflow};
use agentry_specialists::agents::{PptSpecialist, RagSpecialist};
use agentry_specialists::job::{Team, plan, plan_request, understand_with};
use agentry_specialists::pptx::Decks;
use agentry_specialists::rag::RagAgent;
use serde_json::Value;

use crate::Error;
use crate::config::TeamSection;

/// How the team runs.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TeamOptions {
    /// The document collection to draw on.
    pub collection: String,
    /// Where the deck and `summary.md` go.
    pub output: PathBuf,
    /// The knowledge base file; default `$AGENTRY_HOME/knowledge.db`.
    pub db: Option<PathBuf>,
    /// Call the agents in-process instead of over A2A.
    pub in_process: bool,
    /// Reads the request and writes the cited summary; `None`: rules and extractive answers.
    pub model: Option<ModelConfig>,
}

impl Default for TeamOptions {
    fn default() -> Self {
        TeamOptions {
            collection: "documents".into(),
            output: ".".into(),
            db: None,
            in_process: false,
            model: None,
        }
    }
}

impl TeamOptions {
    /// The options a `[team]` section sets (the rest default).
    pub fn from_section(t: TeamSection) -> Self {
        let d = TeamOptions::default();
        TeamOptions {
            collection: t.collection.unwrap_or(d.collection),
            output: t.output.unwrap_or(d.output),
            db: t.db,
            model: t.model,
            ..d
        }
    }
}

/// A planned team run: the workflow, its input, and the agents serving it.
pub struct TeamRun {
    /// RAG then PPT, planned from the request.
    pub workflow: Workflow,
    /// The workflow's input (topic, slide count, the request).
    pub input: Value,
    /// Where each agent is served over A2A (`name`, URL); empty when in-process.
    pub urls: Vec<(String, String)>,
    /// `Some(false)` when a model was configured but its reading of the request was unusable
    /// (the rules read it instead).
    pub read_by_model: Option<bool>,
    /// The engine to execute `workflow` on.
    pub engine: Engine,
    output: PathBuf,
    task: String,
    _team: Team,
}

/// Opens the knowledge base, starts the agents and plans the run. Fails with what to do when
/// the collection holds no documents.
pub async fn prepare(task: &str, o: TeamOptions) -> Result<TeamRun, Error> {
    let kb = crate::knowledge::open(o.db.as_deref()).await?;
    let known = kb.collections()?;
    if !known.iter().any(|c| c.name == o.collection && c.chunks > 0) {
        return Err(Error::Invalid(format!(
            "the knowledge base {} has no documents in collection `{}`; add some with \
             `agentry ingest PATH --collection {}` (the demo corpus: bash scripts/fetch-data.sh)",
            crate::knowledge::path(o.db.as_deref()).display(),
            o.collection,
            o.collection
        )));
    }
    let llm = match &o.model {
        None => None,
        Some(m) => Some(crate::setup::factory().model(m)?),
    };
    let mut rag_agent = RagAgent::new(kb, &o.collection);
    rag_agent.writer = llm.clone();
    rag_agent.reader = crate::knowledge::reader();
    let rag = RagSpecialist::new(rag_agent);
    let ppt = PptSpecialist::new(&Decks::new(&o.output).replacing());
    let team = if o.in_process {
        Team::in_process(rag, ppt)
    } else {
        Team::over_a2a(rag, ppt)
            .await
            .map_err(|e| Error::io("cannot serve the team on loopback", e))?
    };
    let (workflow, input, read_by_model) = match &llm {
        None => {
            let (w, i) = plan(task);
            (w, i, None)
        }
        Some(llm) => {
            let (request, by_model) = understand_with(&**llm, task).await;
            let (w, i) = plan_request(task, request);
            (w, i, Some(by_model))
        }
    };
    Ok(TeamRun {
        workflow,
        input,
        urls: team.urls.clone(),
        read_by_model,
        engine: Engine::new(team.registry.clone()),
        output: o.output,
        task: task.to_owned(),
        _team: team,
    })
}

impl TeamRun {
    /// Writes the research step's cited answer as `summary.md` beside the deck; returns its
    /// path (`None` when the run produced no research).
    pub fn write_summary(&self, state: &RunState) -> Result<Option<PathBuf>, Error> {
        let Some(research) = state
            .steps
            .get("research")
            .or_else(|| state.steps.get("answer"))
            .and_then(|r| r.output.as_ref())
        else {
            return Ok(None);
        };
        let create = |e| Error::io(format!("cannot write to {}", self.output.display()), e);
        std::fs::create_dir_all(&self.output).map_err(create)?;
        let path = self.output.join("summary.md");
        let topic = state.input["topic"].as_str().unwrap_or(&self.task);
        std::fs::write(&path, format!("# {topic}\n\n{}\n", research.text)).map_err(create)?;
        Ok(Some(path))
    }

    /// Where the deck step saved the deck (`None` when the run built none).
    pub fn deck(&self, state: &RunState) -> Option<PathBuf> {
        let out = state.steps.get("deck")?.output.as_ref()?;
        let file = out.data.get("file")?.as_str()?;
        Some(self.output.join(file))
    }

    /// The folder the deck and summary go to.
    pub fn output(&self) -> &Path {
        &self.output
    }
}
