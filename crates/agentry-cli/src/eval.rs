//! `agentry eval`: benchmark an A2A agent on a tau2 domain; `agentry eval view DIR` shows a
//! finished run.

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agentry::a2a::client::Binding;
use agentry::core::agent::ModelConfig;
use agentry::core::llm::{DynLlmProvider, OpenAiConfig};
use agentry::eval::domain::Domain;
use agentry::eval::metrics;
use agentry::eval::report;
use agentry::eval::results::{Results, Simulation};
use agentry::eval::run::agent::{A2aAgent, A2aAgentConfig, ToolExposure};
use agentry::eval::run::judge::LlmJudge;
use agentry::eval::run::sim::Limits;
use agentry::eval::run::user::{LlmUser, ScriptedUser, UserFactory};
use agentry::eval::run::{EvalConfig, run};
use agentry::eval::score::Judge;
use clap::{Args, Subcommand};

use crate::error::CliError;

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct EvalArgs {
    #[command(subcommand)]
    view: Option<EvalCommand>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand)]
enum EvalCommand {
    /// Show a finished (or interrupted) run: its figures and every task's outcome.
    View {
        /// The run's directory (its --save-to) or its results.json.
        dir: PathBuf,
    },
    /// Replay a recorded run offline (the recorded agent and user turns against a fresh
    /// environment, the judge's recorded verdicts) and check that every score comes out as
    /// recorded; fails otherwise.
    Replay {
        /// The run's directory or its results.json.
        dir: PathBuf,
        /// The domain, when the recording's (`mock`, `retail`) is not found by name.
        #[arg(long)]
        domain: Option<String>,
        /// The toolkit of a domain directory not named after one.
        #[arg(long)]
        toolkit: Option<String>,
    },
}

#[derive(Args)]
struct RunArgs {
    /// The agent under test: its base URL (its card is read from there).
    #[arg(long)]
    agent_a2a_endpoint: Option<String>,
    /// A bearer token for the agent.
    #[arg(long, env = "AGENTRY_EVAL_AGENT_TOKEN")]
    agent_a2a_auth_token: Option<String>,
    /// Seconds one agent turn may take.
    #[arg(long, default_value_t = 300)]
    agent_a2a_timeout: u64,
    /// Prefer HTTP+JSON when the card offers it (JSON-RPC otherwise).
    #[arg(long)]
    agent_a2a_rest: bool,
    /// How the agent gets the domain's tools: `text` (an <available_tools> section, calls
    /// written as JSON), `data` (the same, plus the schemas and results in data parts; calls
    /// may come back in a data part), or `mcp` (served by the harness over MCP, one endpoint
    /// per simulation; the agent's calls are observed there).
    #[arg(long, default_value = "text", value_parser = ["text", "data", "mcp"])]
    tools: String,
    /// Stream turns (message/stream) or not; by default, when the card says it can.
    #[arg(long)]
    agent_a2a_stream: Option<bool>,
    /// `mock` (built in), `retail` (from $TAU2_DATA_DIR), or a domain directory.
    #[arg(long, default_value = "mock")]
    domain: String,
    /// The toolkit of a domain directory not named after one (`mock`, `retail`).
    #[arg(long)]
    toolkit: Option<String>,
    /// These tasks only.
    #[arg(long, num_args = 1.., value_delimiter = ',')]
    task_ids: Vec<String>,
    /// The task split (default `base`).
    #[arg(long)]
    task_split: Option<String>,
    /// The first N tasks.
    #[arg(long)]
    num_tasks: Option<usize>,
    /// Trials per task (pass^k up to this k).
    #[arg(long, default_value_t = 1)]
    num_trials: usize,
    /// Simulations at once.
    #[arg(long, default_value_t = 4)]
    max_concurrency: usize,
    /// The simulated user: `scripted:FILE` (a JSON script per task), `local` (the embedded
    /// model), or a model name on an OpenAI-compatible server (--user-llm-base-url).
    #[arg(long, default_value = "local")]
    user_llm: String,
    /// The user model's server.
    #[arg(long, env = "AGENTRY_EVAL_USER_LLM_BASE_URL")]
    user_llm_base_url: Option<String>,
    /// The judge for natural-language assertions: `local` or a model name on an
    /// OpenAI-compatible server (--judge-llm-base-url). Without one they are reported
    /// unjudged (reward 0), never passed.
    #[arg(long)]
    judge_llm: Option<String>,
    /// The judge's server.
    #[arg(long, env = "AGENTRY_EVAL_JUDGE_LLM_BASE_URL")]
    judge_llm_base_url: Option<String>,
    /// Steps per simulation.
    #[arg(long, default_value_t = 200)]
    max_steps: usize,
    /// Tool errors per simulation.
    #[arg(long, default_value_t = 10)]
    max_errors: usize,
    /// Attempts of a simulation that fails for infrastructure reasons.
    #[arg(long, default_value_t = 3)]
    max_retries: u32,
    /// The run's seed.
    #[arg(long, default_value_t = 300)]
    seed: u64,
    /// Where results.json, events.jsonl and the reports go; a run there resumes.
    #[arg(long)]
    save_to: Option<PathBuf>,
    /// Serve the run's figures so far as Prometheus text at http://127.0.0.1:PORT/metrics
    /// while it runs.
    #[arg(long)]
    metrics_port: Option<u16>,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

fn failed(e: impl std::fmt::Display) -> CliError {
    CliError::Failed(e.to_string())
}

/// A chat model from a CLI spec: `local`, or a model name on an OpenAI-compatible server.
fn model(spec: &str, base_url: Option<&str>) -> Result<Arc<dyn DynLlmProvider>, CliError> {
    let cfg = if spec == "local" {
        ModelConfig::Local(serde_json::Map::new())
    } else {
        let base_url = base_url.ok_or_else(|| {
            CliError::Usage(format!(
                "model {spec:?} needs the URL of its OpenAI-compatible server (--user-llm-base-url / --judge-llm-base-url), or use `local`"
            ))
        })?;
        ModelConfig::Openai(OpenAiConfig {
            base_url: base_url.to_owned(),
            model: spec.to_owned(),
            ..OpenAiConfig::default()
        })
    };
    agentry::setup::factory().model(&cfg).map_err(failed)
}

pub(crate) async fn run_cmd(args: EvalArgs) -> Result<(), CliError> {
    match args.view {
        Some(EvalCommand::View { dir }) => return view(&dir),
        Some(EvalCommand::Replay {
            dir,
            domain,
            toolkit,
        }) => return replay(&dir, domain, toolkit).await,
        None => {}
    }
    let a = args.run;
    let endpoint = a.agent_a2a_endpoint.clone().ok_or_else(|| {
        CliError::Usage("--agent-a2a-endpoint URL is required (or `agentry eval view DIR`)".into())
    })?;
    let domain = Domain::resolve(&a.domain, a.toolkit.as_deref()).map_err(failed)?;
    let tasks = domain
        .select(&a.task_ids, a.task_split.as_deref(), a.num_tasks)
        .map_err(|e| CliError::Usage(e.to_string()))?;
    let users: Arc<dyn UserFactory> = match a.user_llm.strip_prefix("scripted:") {
        Some(file) => Arc::new(ScriptedUser::load(std::path::Path::new(file)).map_err(failed)?),
        None => Arc::new(LlmUser::new(
            model(&a.user_llm, a.user_llm_base_url.as_deref())?,
            a.user_llm.clone(),
        )),
    };
    let judge: Option<Arc<dyn Judge>> = match &a.judge_llm {
        Some(spec) => Some(Arc::new(LlmJudge::new(model(
            spec,
            a.judge_llm_base_url.as_deref(),
        )?))),
        None => None,
    };
    let agent = A2aAgent::connect(A2aAgentConfig {
        endpoint: endpoint.clone(),
        auth_token: a.agent_a2a_auth_token.clone(),
        timeout: Duration::from_secs(a.agent_a2a_timeout),
        stream: a.agent_a2a_stream,
        binding: if a.agent_a2a_rest {
            Binding::HttpJson
        } else {
            Binding::JsonRpc
        },
        retries: 3,
        protocol: None,
        tools: match a.tools.as_str() {
            "data" => ToolExposure::Data,
            #[cfg(feature = "mcp")]
            "mcp" => ToolExposure::Mcp,
            "text" => ToolExposure::Text,
            other => {
                return Err(CliError::Usage(format!(
                    "--tools {other} needs a build with the `mcp` feature"
                )));
            }
        },
    })
    .await
    .map_err(|e| CliError::Failed(format!("cannot reach the agent under test: {e}")))?;
    let quiet = a.quiet;
    if !quiet {
        eprintln!(
            "evaluating {endpoint} ({}) on {} task(s) of the {} domain, {} trial(s) each",
            agent.describe(),
            tasks.len(),
            domain.name,
            a.num_trials
        );
    }
    let cfg = EvalConfig {
        domain,
        tasks,
        trials: a.num_trials,
        concurrency: a.max_concurrency,
        limits: Limits {
            max_steps: a.max_steps,
            max_errors: a.max_errors,
            timeout: None,
        },
        max_retries: a.max_retries,
        seed: a.seed,
        save_to: a.save_to.clone(),
    };
    // The figures so far, for --metrics-port: what a resumed run already holds, then each
    // simulation as it finishes.
    let live: Arc<std::sync::Mutex<Vec<Simulation>>> = Arc::new(std::sync::Mutex::new(
        a.save_to
            .as_ref()
            .and_then(|d| Results::load(&d.join("results.json")).ok())
            .map(|r| r.simulations)
            .unwrap_or_default(),
    ));
    if let Some(port) = a.metrics_port {
        serve_metrics(port, live.clone(), cfg.domain.name.clone(), a.num_trials).await?;
    }
    let sink = live.clone();
    let results = run(cfg, Arc::new(agent), users, judge, move |p| {
        if let Some(s) = &p.simulation {
            let mut all = sink.lock().unwrap_or_else(|e| e.into_inner());
            all.retain(|x| !(x.task_id == s.task_id && x.trial == s.trial));
            all.push(s.clone());
        }
        if quiet {
            return;
        }
        let width = 30;
        let filled = (p.done * width).checked_div(p.total).unwrap_or(width);
        let last = p
            .last
            .as_ref()
            .map(|(t, trial, r, term)| format!("  {t} #{trial}: {r:.2} ({})", term.as_str()))
            .unwrap_or_default();
        eprint!(
            "\r[{}{}] {}/{}{last:<60}",
            "#".repeat(filled),
            ".".repeat(width - filled),
            p.done,
            p.total
        );
        let _ = std::io::stderr().flush();
    })
    .await
    .map_err(failed)?;
    if !quiet {
        eprintln!();
    }
    let m = metrics::compute(&results.simulations, a.num_trials);
    if let Some(dir) = &a.save_to {
        report::write_all(dir, &results, &m).map_err(failed)?;
    }
    print!("{}", report::summary(&results, &m));
    if let Some(dir) = &a.save_to {
        println!(
            "  written: {}/results.json (tau2 format), events.jsonl, metrics.json, junit.xml, metrics.prom, report.html",
            dir.display()
        );
    }
    Ok(())
}

/// `GET /metrics` on 127.0.0.1:`port`: Prometheus text of the simulations so far.
async fn serve_metrics(
    port: u16,
    live: Arc<std::sync::Mutex<Vec<Simulation>>>,
    domain: String,
    trials: usize,
) -> Result<(), CliError> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .map_err(|e| CliError::Failed(format!("--metrics-port {port}: {e}")))?;
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let sims = live.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let text = report::prometheus_text(&domain, &metrics::compute(&sims, trials));
            async move { ([("content-type", "text/plain; version=0.0.4")], text) }
        }),
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(())
}

fn results_at(dir: &std::path::Path) -> Result<Results, CliError> {
    let path = if dir.is_dir() {
        dir.join("results.json")
    } else {
        dir.to_owned()
    };
    Results::load(&path).map_err(failed)
}

async fn replay(
    dir: &std::path::Path,
    domain: Option<String>,
    toolkit: Option<String>,
) -> Result<(), CliError> {
    let recorded = results_at(dir)?;
    let name = domain.unwrap_or_else(|| {
        recorded.info["environment_info"]["domain_name"]
            .as_str()
            .unwrap_or("mock")
            .to_owned()
    });
    let domain = Domain::resolve(&name, toolkit.as_deref()).map_err(failed)?;
    let replayed = agentry::eval::run::replay::replay(&recorded, &domain)
        .await
        .map_err(failed)?;
    let diff = agentry::eval::run::replay::differences(&recorded, &replayed);
    let scored = recorded
        .simulations
        .iter()
        .filter(|s| s.termination_reason != agentry::eval::score::Termination::InfrastructureError)
        .count();
    if diff.is_empty() {
        println!("replayed {scored} simulations offline: every reward reproduced exactly");
        return Ok(());
    }
    for (task, trial, was, now) in &diff {
        println!("task {task} trial {trial}: recorded {was}, replayed {now}");
    }
    Err(CliError::Failed(format!(
        "{} of {scored} replayed rewards differ from the recording",
        diff.len()
    )))
}

fn view(dir: &std::path::Path) -> Result<(), CliError> {
    let results = results_at(dir)?;
    let trials = results.info["num_trials"].as_u64().unwrap_or(1) as usize;
    let m = metrics::compute(&results.simulations, trials);
    print!("{}", report::summary(&results, &m));
    Ok(())
}
