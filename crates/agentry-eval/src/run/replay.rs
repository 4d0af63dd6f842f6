//! Replaying a recorded run offline: the agent's and the user's recorded messages are played
//! back through the orchestrator against a fresh environment, the judge's recorded verdicts
//! stand in for the judge, and the scores must come out exactly as recorded. CI can then
//! check a run (or a change to the scorer) without the agent, the user model or the network.

use std::collections::{BTreeMap, VecDeque};

use serde_json::{Value, json};

use super::agent::{AgentFactory, AgentFailure, AgentSession, AgentTurn, BoxFuture, TurnMeasure};
use super::user::{UserFactory, UserSession};
use crate::domain::Domain;
use crate::message::{Message, Role};
use crate::results::Results;
use crate::score::{Judge, JudgeError, NlAssertionCheck, Termination};
use crate::task::Task;

type Key = (String, usize);

fn recorded(results: &Results, role: Role) -> BTreeMap<Key, Vec<Message>> {
    results
        .simulations
        .iter()
        .filter(|s| s.termination_reason != Termination::InfrastructureError)
        .map(|s| {
            let history = results
                .tasks
                .iter()
                .find(|t| t["id"].as_str() == Some(s.task_id.as_str()))
                .and_then(|t| t["initial_state"]["message_history"].as_array())
                .map_or(0, Vec::len);
            // The task's own history and the greeting are not the participants' turns.
            let skip = if history == 0 { 1 } else { history };
            let msgs = s
                .messages
                .iter()
                .skip(skip)
                .filter(|m| m.role == role)
                .cloned()
                .collect();
            ((s.task_id.clone(), s.trial), msgs)
        })
        .collect()
}

/// Plays back each simulation's recorded agent messages.
pub struct ReplayAgent {
    turns: BTreeMap<Key, Vec<Message>>,
    info: Value,
}

impl ReplayAgent {
    /// The agent turns of `results`.
    pub fn new(results: &Results) -> Self {
        ReplayAgent {
            turns: recorded(results, Role::Assistant),
            info: json!({"implementation": "replay", "recorded": results.info["agent_info"]}),
        }
    }
}

struct ReplayAgentSession {
    turns: VecDeque<Message>,
}

impl AgentFactory for ReplayAgent {
    fn start(&self, _domain: &Domain, task: &Task, trial: usize) -> Box<dyn AgentSession> {
        Box::new(ReplayAgentSession {
            turns: self
                .turns
                .get(&(task.id.clone(), trial))
                .cloned()
                .unwrap_or_default()
                .into(),
        })
    }

    fn info(&self) -> Value {
        self.info.clone()
    }
}

impl AgentSession for ReplayAgentSession {
    fn turn<'a>(
        &'a mut self,
        _new: &'a [Message],
        _env: &'a crate::env::SharedEnv,
    ) -> BoxFuture<'a, Result<AgentTurn, AgentFailure>> {
        let next = self.turns.pop_front();
        Box::pin(async move {
            let message = next.ok_or_else(|| AgentFailure::Agent {
                code: "replay".into(),
                message: "the recording has no further agent turn".into(),
            })?;
            Ok(AgentTurn {
                message,
                observed: Vec::new(),
                measure: TurnMeasure::default(),
            })
        })
    }
}

/// Plays back each simulation's recorded user messages.
pub struct ReplayUser {
    turns: BTreeMap<Key, Vec<Message>>,
    info: Value,
}

impl ReplayUser {
    /// The user turns of `results`.
    pub fn new(results: &Results) -> Self {
        ReplayUser {
            turns: recorded(results, Role::User),
            info: json!({"implementation": "replay", "recorded": results.info["user_info"]}),
        }
    }
}

struct ReplayUserSession {
    turns: VecDeque<Message>,
}

impl UserFactory for ReplayUser {
    fn start(
        &self,
        _domain: &Domain,
        task: &Task,
        trial: usize,
        _seed: u64,
    ) -> Box<dyn UserSession> {
        Box::new(ReplayUserSession {
            turns: self
                .turns
                .get(&(task.id.clone(), trial))
                .cloned()
                .unwrap_or_default()
                .into(),
        })
    }

    fn info(&self) -> Value {
        self.info.clone()
    }
}

impl UserSession for ReplayUserSession {
    fn respond<'a>(&'a mut self, _view: &'a [Message]) -> BoxFuture<'a, Result<Message, String>> {
        let next = self.turns.pop_front();
        Box::pin(
            async move { next.ok_or_else(|| "the recording has no further user turn".to_owned()) },
        )
    }
}

/// The judge's recorded verdicts, looked up by statement.
pub struct RecordedJudge {
    verdicts: BTreeMap<String, NlAssertionCheck>,
}

impl RecordedJudge {
    /// The verdicts in `results` (statements judged alike in every simulation they appear
    /// in; a statement judged differently in two simulations keeps the last verdict).
    pub fn new(results: &Results) -> Self {
        let mut verdicts = BTreeMap::new();
        for s in &results.simulations {
            for c in s
                .reward_info
                .as_ref()
                .and_then(|r| r.nl_assertions.as_ref())
                .into_iter()
                .flatten()
            {
                verdicts.insert(c.nl_assertion.clone(), c.clone());
            }
        }
        RecordedJudge { verdicts }
    }

    /// Whether any verdict was recorded.
    pub fn is_empty(&self) -> bool {
        self.verdicts.is_empty()
    }
}

impl Judge for RecordedJudge {
    fn judge<'a>(
        &'a self,
        _trajectory: &'a [Message],
        assertions: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<NlAssertionCheck>, JudgeError>> {
        Box::pin(async move {
            assertions
                .iter()
                .map(|a| {
                    self.verdicts
                        .get(a)
                        .cloned()
                        .ok_or_else(|| JudgeError(format!("no recorded verdict for {a:?}")))
                })
                .collect()
        })
    }
}

/// Simulations whose replayed reward differs from the recorded one: (task, trial,
/// recorded, replayed).
pub fn differences(recorded: &Results, replayed: &Results) -> Vec<(String, usize, f64, f64)> {
    let reward = |s: &crate::results::Simulation| s.reward_info.as_ref().map_or(0.0, |r| r.reward);
    recorded
        .simulations
        .iter()
        .filter(|s| s.termination_reason != Termination::InfrastructureError)
        .filter_map(|s| {
            let r = replayed
                .simulations
                .iter()
                .find(|x| x.task_id == s.task_id && x.trial == s.trial)
                .map_or(f64::NAN, reward);
            (r != reward(s)).then(|| (s.task_id.clone(), s.trial, reward(s), r))
        })
        .collect()
}

/// Replays `recorded` on `domain` (concurrency 4, nothing saved) and returns the replayed
/// run; [`differences`] compares the two.
pub async fn replay(recorded: &Results, domain: &Domain) -> Result<Results, super::EvalError> {
    let tasks: Vec<Task> = recorded
        .tasks
        .iter()
        .filter_map(|t| Task::from_value(t.clone()).ok())
        .collect();
    let trials = recorded.info["num_trials"].as_u64().unwrap_or(1) as usize;
    let judge = RecordedJudge::new(recorded);
    let judge: Option<std::sync::Arc<dyn Judge>> =
        (!judge.is_empty()).then(|| std::sync::Arc::new(judge) as _);
    let cfg = super::EvalConfig {
        domain: domain.clone(),
        tasks,
        trials,
        concurrency: 4,
        limits: super::sim::Limits {
            max_steps: recorded.info["max_steps"].as_u64().unwrap_or(200) as usize,
            max_errors: recorded.info["max_errors"].as_u64().unwrap_or(10) as usize,
            timeout: None,
        },
        max_retries: 0,
        seed: recorded.info["seed"].as_u64().unwrap_or(300),
        save_to: None,
    };
    super::run(
        cfg,
        std::sync::Arc::new(ReplayAgent::new(recorded)),
        std::sync::Arc::new(ReplayUser::new(recorded)),
        judge,
        |_| {},
    )
    .await
}
