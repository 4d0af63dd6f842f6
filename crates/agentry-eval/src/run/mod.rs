//! Running an evaluation: every (task, trial) simulated with bounded concurrency, scored,
//! and saved after each one, so an interrupted run resumes where it stopped.
//!
//! A simulation that fails for the harness's or the network's sake is run again (tau2's
//! whole-simulation retry); after the last attempt it is recorded as tau2 records it
//! (`infrastructure_error`, no messages, no reward) and left out of the score. Failures of
//! the agent itself (a failed task, a protocol error, an unreadable reply) are scored.

pub mod agent;
pub mod judge;
#[cfg(feature = "mcp")]
mod mcp;
pub mod replay;
pub mod seeds;
pub mod sim;
pub mod user;

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::sync::Semaphore;

use crate::domain::Domain;
use crate::results::{Results, ResultsError, Simulation};
use crate::score::{Judge, RewardInfo, Termination, score};
use crate::task::Task;
use agent::AgentFactory;
use sim::Limits;
use user::UserFactory;

/// What to run.
#[derive(Debug, Clone)]
pub struct EvalConfig {
    /// The domain.
    pub domain: Domain,
    /// The tasks.
    pub tasks: Vec<Task>,
    /// Trials per task.
    pub trials: usize,
    /// Simulations at once.
    pub concurrency: usize,
    /// Per-simulation limits.
    pub limits: Limits,
    /// Attempts of a simulation that fails for infrastructure reasons, after the first.
    pub max_retries: u32,
    /// The run's seed (trial i gets the i-th seed tau2 would draw from it).
    pub seed: u64,
    /// Where results.json and the event log go (`None`: memory only).
    pub save_to: Option<PathBuf>,
}

/// A run could not start or save.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// results.json.
    #[error(transparent)]
    Results(#[from] ResultsError),
    /// The event log.
    #[error("{0}: {1}")]
    Io(String, #[source] std::io::Error),
    /// A results.json from another domain or task set is in the way.
    #[error("{0}")]
    Mismatch(String),
}

/// Progress, for a bar.
#[derive(Debug, Clone)]
pub struct Progress {
    /// Simulations finished (resumed ones included).
    pub done: usize,
    /// All of them.
    pub total: usize,
    /// The one that just finished.
    pub last: Option<(String, usize, f64, Termination)>,
    /// The simulation that just finished, whole (for live metrics).
    pub simulation: Option<Simulation>,
}

/// Runs the evaluation. `progress` is called after each simulation.
pub async fn run(
    cfg: EvalConfig,
    agents: Arc<dyn AgentFactory>,
    users: Arc<dyn UserFactory>,
    judge: Option<Arc<dyn Judge>>,
    progress: impl Fn(&Progress) + Send + Sync + 'static,
) -> Result<Results, EvalError> {
    let path = cfg.save_to.as_ref().map(|d| d.join("results.json"));
    if let Some(dir) = &cfg.save_to {
        std::fs::create_dir_all(dir).map_err(|e| EvalError::Io(dir.display().to_string(), e))?;
    }
    // Resume: keep what finished, retry what failed for infrastructure reasons.
    let previous = match &path {
        Some(p) if p.exists() => Some(Results::load(p)?),
        _ => None,
    };
    let mut results = Results {
        timestamp: agentry_a2a::time::now_rfc3339(),
        info: json!({
            "git_commit": "",
            "num_trials": cfg.trials,
            "max_steps": cfg.limits.max_steps,
            "max_errors": cfg.limits.max_errors,
            "seed": cfg.seed,
            "user_info": users.info(),
            "agent_info": agents.info(),
            "environment_info": {"domain_name": cfg.domain.name, "policy": cfg.domain.policy},
            "harness": {"name": "agentry eval", "version": env!("CARGO_PKG_VERSION")},
        }),
        tasks: cfg.tasks.iter().map(|t| t.raw.clone()).collect(),
        simulations: Vec::new(),
    };
    if let Some(prev) = previous {
        let prev_domain = prev.info["environment_info"]["domain_name"].as_str();
        if prev_domain != Some(cfg.domain.name.as_str()) {
            return Err(EvalError::Mismatch(format!(
                "the results.json already there is for domain {:?}, not {:?}: use another --save-to",
                prev_domain, cfg.domain.name
            )));
        }
        results.timestamp = prev.timestamp;
        results.simulations = prev
            .simulations
            .into_iter()
            .filter(|s| s.termination_reason != Termination::InfrastructureError)
            .collect();
    }
    let mut jobs = Vec::new();
    for trial in 0..cfg.trials {
        for task in &cfg.tasks {
            if !results.done(&task.id, trial) {
                jobs.push((task.clone(), trial));
            }
        }
    }
    let total = cfg.tasks.len() * cfg.trials;
    // (results, simulations done, when results.json was last written)
    let state = Arc::new(Mutex::new((results, total - jobs.len(), Instant::now())));
    let events = match &cfg.save_to {
        Some(dir) => {
            let p = dir.join("events.jsonl");
            Some(Arc::new(Mutex::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&p)
                    .map_err(|e| EvalError::Io(p.display().to_string(), e))?,
            )))
        }
        None => None,
    };
    progress(&Progress {
        done: total - jobs.len(),
        total,
        last: None,
        simulation: None,
    });
    let progress = Arc::new(progress);
    let gate = Arc::new(Semaphore::new(cfg.concurrency.max(1)));
    let cfg = Arc::new(cfg);
    let mut handles = Vec::new();
    for (task, trial) in jobs {
        let (gate, cfg, agents, users, judge, state, events, path, progress) = (
            gate.clone(),
            cfg.clone(),
            agents.clone(),
            users.clone(),
            judge.clone(),
            state.clone(),
            events.clone(),
            path.clone(),
            progress.clone(),
        );
        handles.push(tokio::spawn(async move {
            let _permit = gate.acquire().await;
            let sim = simulate_with_retries(
                &cfg,
                &task,
                trial,
                agents.as_ref(),
                users.as_ref(),
                judge.as_deref(),
            )
            .await;
            let reward = sim.reward_info.as_ref().map_or(0.0, |r| r.reward);
            let line = json!({
                "event": "simulation",
                "task_id": sim.task_id,
                "trial": sim.trial,
                "termination_reason": sim.termination_reason,
                "reward": reward,
                "duration": sim.duration,
                "time": sim.end_time,
            });
            let termination = sim.termination_reason;
            let (task_id, trial) = (sim.task_id.clone(), sim.trial);
            let finished = sim.clone();
            let mut guard = state.lock().unwrap_or_else(|p| p.into_inner());
            guard.0.simulations.push(sim);
            guard.1 += 1;
            // results.json is rewritten whole: at most every two seconds (and once at the
            // end), so a long run does not spend its time rewriting it; an interruption loses
            // at most the simulations of the last two seconds, which a resume runs again.
            let save = match &path {
                Some(p) if guard.2.elapsed() >= Duration::from_secs(2) => {
                    guard.2 = Instant::now();
                    Some(guard.0.save(p))
                }
                _ => None,
            };
            let done = guard.1;
            drop(guard);
            if let Some(ev) = &events {
                let mut f = ev.lock().unwrap_or_else(|p| p.into_inner());
                let _ = writeln!(f, "{line}");
            }
            progress(&Progress {
                done,
                total,
                last: Some((task_id, trial, reward, termination)),
                simulation: Some(finished),
            });
            save.transpose()
        }));
    }
    for h in handles {
        if let Ok(r) = h.await {
            r?;
        }
    }
    let (mut results, _, _) = Arc::try_unwrap(state)
        .map(|m| m.into_inner().unwrap_or_else(|p| p.into_inner()))
        .unwrap_or_else(|arc| {
            let g = arc.lock().unwrap_or_else(|p| p.into_inner());
            (g.0.clone(), g.1, g.2)
        });
    results
        .simulations
        .sort_by(|a, b| (a.trial, &a.task_id).cmp(&(b.trial, &b.task_id)));
    if let Some(p) = &path {
        results.save(p)?;
    }
    Ok(results)
}

async fn simulate_with_retries(
    cfg: &EvalConfig,
    task: &Task,
    trial: usize,
    agents: &dyn AgentFactory,
    users: &dyn UserFactory,
    judge: Option<&dyn Judge>,
) -> Simulation {
    let seed = seeds::trial_seeds(cfg.seed, trial + 1)[trial];
    let mut last_error = String::new();
    let mut attempts = 0;
    let start_time = agentry_a2a::time::now_rfc3339();
    let started = Instant::now();
    while attempts <= cfg.max_retries {
        attempts += 1;
        let sim_start = agentry_a2a::time::now_rfc3339();
        let t0 = Instant::now();
        let mut agent = agents.start(&cfg.domain, task, trial);
        let mut user = users.start(&cfg.domain, task, trial, seed);
        let outcome =
            match sim::simulate(&cfg.domain, task, agent.as_mut(), user.as_mut(), cfg.limits).await
            {
                Ok(o) => o,
                Err(e) => {
                    last_error = format!("environment: {e}");
                    break;
                }
            };
        if let Some(e) = outcome.infrastructure_error {
            last_error = e;
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        }
        let mut messages = outcome.messages;
        for (i, m) in messages.iter_mut().enumerate() {
            m.turn_idx = Some(i);
            if m.timestamp.is_none() {
                m.timestamp = Some(sim_start.clone());
            }
        }
        let reward = match score(&cfg.domain, task, &messages, outcome.termination, judge).await {
            Ok(r) => r,
            // The final state cannot be evaluated (an assertion on something the agent
            // never made raises in tau2 too): the agent's failure, scored 0 and said why.
            Err(e) => RewardInfo {
                reward: 0.0,
                info: Some(json!({"note": format!("evaluation failed: {e}")})),
                ..Default::default()
            },
        };
        let mut info = outcome.info;
        info["agentry"]["attempts"] = json!(attempts);
        return Simulation {
            id: uuid::Uuid::new_v4().to_string(),
            task_id: task.id.clone(),
            trial,
            start_time: sim_start,
            end_time: agentry_a2a::time::now_rfc3339(),
            duration: t0.elapsed().as_secs_f64(),
            termination_reason: outcome.termination,
            reward_info: Some(reward),
            messages,
            seed: Some(seed),
            mode: "half_duplex".into(),
            agent_cost: None,
            user_cost: None,
            info,
        };
    }
    Simulation {
        id: uuid::Uuid::new_v4().to_string(),
        task_id: task.id.clone(),
        trial,
        start_time,
        end_time: agentry_a2a::time::now_rfc3339(),
        duration: started.elapsed().as_secs_f64(),
        termination_reason: Termination::InfrastructureError,
        reward_info: None,
        messages: Vec::new(),
        seed: Some(seed),
        mode: "half_duplex".into(),
        agent_cost: None,
        user_cost: None,
        info: json!({
            "error": last_error,
            "error_type": "InfrastructureError",
            "failed_after_attempts": attempts,
        }),
    }
}
