//! `agentry workflow run|resume`, `agentry plan`, `agentry run`: workflows over the agents of a
//! config file, with a live step list.

use std::path::Path;

use agentry::Setup;
use agentry::flow::{FlowEvent, RunState, RunStatus, Workflow};
use serde_json::Value;
use tokio::sync::{mpsc, watch};

use crate::error::CliError;

/// Prints each event as a line: the live view.
async fn show(mut rx: mpsc::UnboundedReceiver<FlowEvent>, json: bool) {
    while let Some(e) = rx.recv().await {
        if json {
            println!("{}", serde_json::to_string(&e).unwrap_or_default());
            continue;
        }
        match e {
            FlowEvent::StepStarted { step, agent, .. } => eprintln!("  ▶ {step} ({agent})"),
            FlowEvent::StepFinished { step, output } => eprintln!("  ✓ {step}: {output}"),
            FlowEvent::StepFailed { step, error, .. } => eprintln!("  ✗ {step}: {error}"),
            FlowEvent::StepSkipped { step, reason } => eprintln!("  ↷ {step} skipped: {reason}"),
            FlowEvent::RunFinished { .. } => {}
        }
    }
}

pub(crate) fn finish(state: RunState, json: bool) -> Result<(), CliError> {
    if json {
        println!("{}", serde_json::to_string(&state).unwrap_or_default());
    }
    match state.status {
        RunStatus::Completed => {
            if !json {
                println!("{}", state.final_output.unwrap_or_default());
            }
            Ok(())
        }
        RunStatus::Canceled => Err(CliError::Failed(format!(
            "run {} canceled; resume with `agentry workflow resume {}`",
            state.run_id, state.run_id
        ))),
        _ => Err(CliError::Failed(format!(
            "run {} failed: {}",
            state.run_id,
            state.error.unwrap_or_default()
        ))),
    }
}

/// Ctrl-C cancels the run (its steps, remote ones through tasks/cancel).
fn cancel_on_ctrl_c() -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("agentry: canceling the run");
            let _ = tx.send(true);
        }
    });
    rx
}

async fn execute(setup: &Setup, wf: Workflow, input: Value, json: bool) -> Result<(), CliError> {
    let state = execute_on(&setup.engine()?, wf, input, json).await?;
    finish(state, json)
}

/// Runs `wf` on `engine` with the live step view; Ctrl-C cancels.
pub(crate) async fn execute_on(
    engine: &agentry::flow::Engine,
    wf: Workflow,
    input: Value,
    json: bool,
) -> Result<RunState, CliError> {
    let state = engine.prepare(wf, input).map_err(agentry::Error::from)?;
    eprintln!(
        "agentry: run {} of `{}` ({} steps); after a crash: agentry workflow resume {}",
        state.run_id,
        state.workflow.name,
        state.workflow.steps.len(),
        state.run_id
    );
    let (tx, rx) = mpsc::unbounded_channel();
    let view = tokio::spawn(show(rx, json));
    let state = engine
        .execute(state, Some(tx), Some(cancel_on_ctrl_c()))
        .await;
    let _ = view.await;
    Ok(state)
}

fn parse_input(input: Option<&str>) -> Result<Value, CliError> {
    match input {
        None => Ok(Value::Object(Default::default())),
        Some(s) => serde_json::from_str(s)
            .map_err(|e| CliError::Usage(format!("--input is not JSON: {e}"))),
    }
}

pub(crate) async fn run_file(
    file: &Path,
    config: &Path,
    input: Option<&str>,
    json: bool,
) -> Result<(), CliError> {
    let setup = Setup::load(config).await?;
    let wf = Workflow::from_file(file).map_err(agentry::Error::from)?;
    execute(&setup, wf, parse_input(input)?, json).await
}

pub(crate) async fn resume(run_id: &str, config: &Path, json: bool) -> Result<(), CliError> {
    let setup = Setup::load(config).await?;
    let engine = setup.engine()?;
    let (tx, rx) = mpsc::unbounded_channel();
    let view = tokio::spawn(show(rx, json));
    let state = engine
        .resume(run_id, Some(tx), Some(cancel_on_ctrl_c()))
        .await
        .map_err(agentry::Error::from)?;
    let _ = view.await;
    finish(state, json)
}

pub(crate) async fn plan(task: &str, config: &Path) -> Result<Workflow, CliError> {
    let setup = Setup::load(config).await?;
    Ok(setup
        .planner()?
        .plan(task, &setup.registry)
        .await
        .map_err(agentry::Error::from)?)
}

/// `agentry agents`: the registry's catalog, as a table or JSON.
pub(crate) async fn show_agents(
    config: &Path,
    scopes: Option<&str>,
    json: bool,
) -> Result<(), CliError> {
    let setup = Setup::load(config).await?;
    let held: Option<Vec<String>> =
        scopes.map(|s| s.split_whitespace().map(str::to_owned).collect());
    let catalog = setup.registry.catalog(held.as_deref()).await;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&catalog).unwrap_or_default()
        );
        return Ok(());
    }
    for a in &catalog {
        println!("{}: {}", a.name, a.description);
        if !a.scopes.is_empty() {
            println!("  requires: {}", a.scopes.join(" "));
        }
        for s in &a.skills {
            match a.skill_scopes.get(s) {
                Some(own) if !own.is_empty() => {
                    println!("  skill {s} (requires {})", own.join(" "))
                }
                _ => println!("  skill {s}"),
            }
        }
    }
    if catalog.is_empty() {
        eprintln!(
            "agentry: no agent{}",
            if held.is_some() {
                " these scopes may ask"
            } else {
                ""
            }
        );
    }
    Ok(())
}

pub(crate) async fn plan_and_show(task: &str, config: &Path, json: bool) -> Result<(), CliError> {
    let wf = plan(task, config).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&wf).unwrap_or_default());
    } else {
        print!("{}", serde_yaml::to_string(&wf).unwrap_or_default());
    }
    Ok(())
}

pub(crate) async fn plan_and_run(
    task: &str,
    config: &Path,
    input: Option<&str>,
    json: bool,
) -> Result<(), CliError> {
    let setup = Setup::load(config).await?;
    let wf = setup
        .planner()?
        .plan(task, &setup.registry)
        .await
        .map_err(agentry::Error::from)?;
    eprintln!("agentry: planned `{}`:", wf.name);
    for s in &wf.steps {
        let deps = if s.depends_on.is_empty() {
            String::new()
        } else {
            format!(" after {}", s.depends_on.join(", "))
        };
        eprintln!("  - {} ({}){deps}", s.id, s.agent);
    }
    let mut input = parse_input(input)?;
    if let Value::Object(m) = &mut input {
        m.entry("text").or_insert(Value::String(task.to_owned()));
    }
    execute(&setup, wf, input, json).await
}
