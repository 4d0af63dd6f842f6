//! `results.json` in tau2's format (`Results` in `src/tau2/data_model/simulation.py`), so
//! `tau2 view` and `tau2 evaluate-trajs` read agentry's runs and give the same rewards.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::message::Message;
use crate::score::{RewardInfo, Termination};

/// One simulation: a task, a trial, its messages and its reward (tau2's `SimulationRun`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Simulation {
    /// Unique per simulation.
    pub id: String,
    /// The task.
    pub task_id: String,
    /// 0-based trial number.
    pub trial: usize,
    /// ISO 8601.
    pub start_time: String,
    /// ISO 8601.
    pub end_time: String,
    /// Seconds.
    pub duration: f64,
    /// Why it ended.
    pub termination_reason: Termination,
    /// The score (`None` for an infrastructure error, as tau2 writes it).
    pub reward_info: Option<RewardInfo>,
    /// The trajectory, the task's history and the greeting included.
    pub messages: Vec<Message>,
    /// The trial's seed.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Always `half_duplex`.
    #[serde(default = "half_duplex")]
    pub mode: String,
    /// What the agent cost, when it says (A2A agents do not).
    #[serde(default)]
    pub agent_cost: Option<f64>,
    /// What the user simulator cost.
    #[serde(default)]
    pub user_cost: Option<f64>,
    /// agentry's measurements (per-turn latency, time to first event, retries, protocol
    /// errors) and, for an infrastructure error, what failed.
    #[serde(default)]
    pub info: Value,
}

fn half_duplex() -> String {
    "half_duplex".into()
}

/// A whole run (tau2's `Results`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Results {
    /// When the run started.
    pub timestamp: String,
    /// The run's settings, in tau2's `info` shape.
    pub info: Value,
    /// The tasks, as read.
    pub tasks: Vec<Value>,
    /// Every simulation so far.
    pub simulations: Vec<Simulation>,
}

/// `results.json` could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    /// The file.
    #[error("{0}: {1}")]
    Io(String, #[source] std::io::Error),
    /// Not a results file.
    #[error("{0}: {1}")]
    Json(String, #[source] serde_json::Error),
}

impl Results {
    /// Reads a `results.json`.
    pub fn load(path: &Path) -> Result<Results, ResultsError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ResultsError::Io(path.display().to_string(), e))?;
        serde_json::from_str(&text).map_err(|e| ResultsError::Json(path.display().to_string(), e))
    }

    /// Writes it atomically (a temporary file renamed over the old one), so an interrupted
    /// run never leaves half a file.
    pub fn save(&self, path: &Path) -> Result<(), ResultsError> {
        let text = serde_json::to_string_pretty(self)
            .map_err(|e| ResultsError::Json(path.display().to_string(), e))?;
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, path))
            .map_err(|e| ResultsError::Io(path.display().to_string(), e))
    }

    /// Whether a (task, trial) already has a simulation that is not an infrastructure error
    /// (a resumed run skips those and retries the rest).
    pub fn done(&self, task_id: &str, trial: usize) -> bool {
        self.simulations.iter().any(|s| {
            s.task_id == task_id
                && s.trial == trial
                && s.termination_reason != Termination::InfrastructureError
        })
    }
}
