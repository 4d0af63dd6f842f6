//! `agentry ingest` and the built-in team behind `agentry run`, with a progress bar and the
//! live step list.

use std::io::Write;
use std::path::{Path, PathBuf};

use agentry::specialists::rag::Progress;
use agentry::team::{TeamOptions, prepare};

use crate::error::CliError;

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

pub(crate) async fn ingest(
    paths: &[PathBuf],
    collection: &str,
    db: Option<&Path>,
    json: bool,
) -> Result<(), CliError> {
    let kb = agentry::knowledge::open(db).await?;
    for path in paths {
        eprintln!("agentry: ingesting {} into `{collection}`", path.display());
        let t = std::time::Instant::now();
        let r = kb
            .ingest(path, collection, &bar)
            .await
            .map_err(agentry::Error::from)?;
        eprintln!();
        if json {
            println!("{}", serde_json::to_string(&r).unwrap_or_default());
        }
        // Chunks whose text was stored already keep their vectors.
        let kept = match r.chunks.saturating_sub(r.embedded) {
            0 => String::new(),
            n => format!(", {n} kept as stored"),
        };
        eprintln!(
            "agentry: {} files: {} ingested ({} chunks{kept}, {:.1} s), {} unchanged, {} skipped",
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
    for c in kb.collections().map_err(agentry::Error::from)? {
        eprintln!(
            "  collection `{}`: {} documents, {} chunks ({}, {} dims)",
            c.name, c.documents, c.chunks, c.embedder, c.dimensions
        );
    }
    Ok(())
}

/// `agentry run TASK` with the built-in team: plan, show the plan, run it live, write the
/// cited summary beside the deck.
pub(crate) async fn run_team(task: &str, o: TeamOptions, json: bool) -> Result<(), CliError> {
    let run = prepare(task, o).await?;
    if run.read_by_model == Some(false) {
        eprintln!("agentry: the model's reading of the request was unusable; using rules");
    }
    eprintln!("agentry: planned `{}`:", run.workflow.name);
    for s in &run.workflow.steps {
        let url = run
            .urls
            .iter()
            .find(|(n, _)| *n == s.agent)
            .map(|(_, u)| format!(" over A2A at {u}"))
            .unwrap_or_else(|| " in-process".into());
        eprintln!("  - {} ({}{url})", s.id, s.agent);
    }
    let state =
        crate::flows::execute_on(&run.engine, run.workflow.clone(), run.input.clone(), json)
            .await?;
    if let Some(path) = run.deck(&state) {
        eprintln!("agentry: deck in {}", path.display());
    }
    if let Some(path) = run.write_summary(&state)? {
        eprintln!("agentry: cited summary in {}", path.display());
    }
    crate::flows::finish(state, json)
}
