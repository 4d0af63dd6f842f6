//! Scoring a simulation as tau2 does (`src/tau2/evaluator/evaluator.py`, evaluation type
//! `ALL`): the reward is the product of the components in the task's reward basis.
//!
//! - **DB**: the databases after replaying the trajectory's writes equal those after the
//!   task's expected actions (compared by tau2's hash).
//! - **ENV_ASSERTION**: functions of the final state return what the task says.
//! - **ACTION**: each expected call appears among the calls of either side.
//! - **COMMUNICATE**: each piece of information appears in an agent message.
//! - **NL_ASSERTION**: a judge model finds each statement met. With no judge, the run is
//!   reported *unjudged* with reward 0, never passed silently.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::domain::Domain;
use crate::env::{EnvError, ToolType};
use crate::message::{Message, Role, ToolCall};
use crate::task::{Action, EnvAssertion, RewardType, Task};

/// Why a simulation ended (tau2's `TerminationReason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Termination {
    /// The user said `###STOP###`, `###TRANSFER###` or `###OUT-OF-SCOPE###`.
    UserStop,
    /// The agent ended the conversation.
    AgentStop,
    /// The step limit.
    MaxSteps,
    /// The wall-clock limit.
    Timeout,
    /// Too many tool errors.
    TooManyErrors,
    /// The agent broke the protocol (an unreadable reply, a failed task).
    AgentError,
    /// The user simulator failed.
    UserError,
    /// The harness or the network failed; excluded from the metrics.
    InfrastructureError,
}

impl Termination {
    /// The name tau2 writes.
    pub fn as_str(self) -> &'static str {
        match self {
            Termination::UserStop => "user_stop",
            Termination::AgentStop => "agent_stop",
            Termination::MaxSteps => "max_steps",
            Termination::Timeout => "timeout",
            Termination::TooManyErrors => "too_many_errors",
            Termination::AgentError => "agent_error",
            Termination::UserError => "user_error",
            Termination::InfrastructureError => "infrastructure_error",
        }
    }
}

/// tau2's `DBCheck`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DbCheck {
    /// Both databases match.
    pub db_match: bool,
    /// 1 or 0.
    pub db_reward: f64,
}

/// tau2's `EnvAssertionCheck`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EnvAssertionCheck {
    /// The assertion.
    pub env_assertion: EnvAssertion,
    /// Whether it held.
    pub met: bool,
    /// 1 or 0.
    pub reward: f64,
}

/// tau2's `ActionCheck`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ActionCheck {
    /// The expected action.
    pub action: Action,
    /// Whether a call matched it.
    pub action_match: bool,
    /// 1 or 0.
    pub action_reward: f64,
    /// The tool's kind.
    pub tool_type: Option<ToolType>,
}

/// tau2's `NLAssertionCheck`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NlAssertionCheck {
    /// The statement.
    pub nl_assertion: String,
    /// The judge's verdict.
    pub met: bool,
    /// The judge's reasoning.
    pub justification: String,
}

/// tau2's `CommunicateCheck`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommunicateCheck {
    /// The information.
    pub info: String,
    /// Whether an agent message held it.
    pub met: bool,
    /// Where.
    pub justification: String,
}

/// tau2's `RewardInfo`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RewardInfo {
    /// The reward, 0 to 1.
    pub reward: f64,
    /// The database comparison.
    #[serde(default)]
    pub db_check: Option<DbCheck>,
    /// Each assertion.
    #[serde(default)]
    pub env_assertions: Option<Vec<EnvAssertionCheck>>,
    /// Each expected action.
    #[serde(default)]
    pub action_checks: Option<Vec<ActionCheck>>,
    /// Each judged statement.
    #[serde(default)]
    pub nl_assertions: Option<Vec<NlAssertionCheck>>,
    /// Each piece of information.
    #[serde(default)]
    pub communicate_checks: Option<Vec<CommunicateCheck>>,
    /// The components that make the reward.
    #[serde(default)]
    pub reward_basis: Option<Vec<RewardType>>,
    /// Each component's reward.
    #[serde(default)]
    pub reward_breakdown: Option<BTreeMap<RewardType, f64>>,
    /// Notes (`unjudged: true` when NL assertions were not judged).
    #[serde(default)]
    pub info: Option<Value>,
}

impl RewardInfo {
    /// Whether the reward counts as a success (tau2: within 1e-6 of 1).
    pub fn success(&self) -> bool {
        (self.reward - 1.0).abs() <= 1e-6
    }

    /// Whether natural-language assertions in the basis were left unjudged.
    pub fn unjudged(&self) -> bool {
        self.info
            .as_ref()
            .and_then(|i| i.get("unjudged"))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }
}

/// A judge for natural-language assertions (tau2's `NLAssertionsEvaluator`).
pub trait Judge: Send + Sync {
    /// Judges each statement against the conversation.
    fn judge<'a>(
        &'a self,
        trajectory: &'a [Message],
        assertions: &'a [String],
    ) -> Pin<Box<dyn Future<Output = Result<Vec<NlAssertionCheck>, JudgeError>> + Send + 'a>>;
}

/// The judge failed (unreachable, or an answer that is not tau2's JSON).
#[derive(Debug, thiserror::Error)]
#[error("NL-assertion judge: {0}")]
pub struct JudgeError(pub String);

/// Scoring could not finish.
#[derive(Debug, thiserror::Error)]
pub enum ScoreError {
    /// Replaying the trajectory or running an assertion failed (tau2 raises here too).
    #[error("environment: {0}")]
    Env(#[from] EnvError),
    /// The judge failed.
    #[error(transparent)]
    Judge(#[from] JudgeError),
}

/// tau2's `evaluate_simulation` with evaluation type `ALL`.
pub async fn score(
    domain: &Domain,
    task: &Task,
    messages: &[Message],
    termination: Termination,
    judge: Option<&dyn Judge>,
) -> Result<RewardInfo, ScoreError> {
    if !matches!(termination, Termination::AgentStop | Termination::UserStop) {
        return Ok(RewardInfo {
            reward: 0.0,
            info: Some(json!({"note": format!(
                "Simulation terminated prematurely. Termination reason: {}",
                termination.as_str()
            )})),
            ..Default::default()
        });
    }
    let Some(criteria) = &task.evaluation_criteria else {
        return Ok(RewardInfo {
            reward: 1.0,
            info: Some(json!({"note": "No evaluation criteria"})),
            ..Default::default()
        });
    };
    let basis = &criteria.reward_basis;
    let in_basis = |t: RewardType| basis.contains(&t);
    let mut breakdown = BTreeMap::new();
    let mut reward = 1.0;

    // Environment: DB and assertions.
    let (db_check, env_checks) = environment(domain, task, messages)?;
    if in_basis(RewardType::Db) {
        breakdown.insert(RewardType::Db, db_check.db_reward);
        reward *= db_check.db_reward;
    }
    if in_basis(RewardType::EnvAssertion) {
        let r: f64 = env_checks.iter().map(|c| c.reward).product();
        breakdown.insert(RewardType::EnvAssertion, r);
        reward *= r;
    }

    // Actions.
    let action_checks = actions(domain, criteria.actions.as_deref().unwrap_or(&[]), messages);
    if in_basis(RewardType::Action) {
        let r = if action_checks.iter().all(|c| c.action_match) {
            1.0
        } else {
            0.0
        };
        breakdown.insert(RewardType::Action, r);
        reward *= r;
    }

    // Communication.
    let communicate_checks = communicate(
        criteria.communicate_info.as_deref().unwrap_or(&[]),
        messages,
    );
    if in_basis(RewardType::Communicate) {
        let r = if communicate_checks.iter().all(|c| c.met) {
            1.0
        } else {
            0.0
        };
        breakdown.insert(RewardType::Communicate, r);
        reward *= r;
    }

    // Natural-language assertions.
    let mut nl_checks = None;
    let mut unjudged = false;
    if in_basis(RewardType::NlAssertion) {
        let statements = criteria.nl_assertions.as_deref().unwrap_or(&[]);
        let r = if statements.is_empty() {
            nl_checks = Some(Vec::new());
            1.0
        } else if let Some(judge) = judge {
            let checks = judge.judge(messages, statements).await?;
            let r = if checks.iter().all(|c| c.met) {
                1.0
            } else {
                0.0
            };
            nl_checks = Some(checks);
            r
        } else {
            unjudged = true;
            0.0
        };
        breakdown.insert(RewardType::NlAssertion, r);
        reward *= r;
    }

    let mut info = json!({});
    if unjudged {
        info = json!({"unjudged": true, "note": "NL assertions are in the reward basis and no judge model was configured: reward 0, reported as unjudged"});
    }
    Ok(RewardInfo {
        reward,
        db_check: Some(db_check),
        env_assertions: Some(env_checks),
        action_checks: Some(action_checks),
        nl_assertions: nl_checks,
        communicate_checks: Some(communicate_checks),
        reward_basis: Some(basis.clone()),
        reward_breakdown: Some(breakdown),
        info: Some(info),
    })
}

fn environment(
    domain: &Domain,
    task: &Task,
    messages: &[Message],
) -> Result<(DbCheck, Vec<EnvAssertionCheck>), EnvError> {
    let Some(criteria) = &task.evaluation_criteria else {
        return Ok((
            DbCheck {
                db_match: true,
                db_reward: 1.0,
            },
            Vec::new(),
        ));
    };
    if criteria.actions.is_none() && criteria.env_assertions.is_none() {
        return Ok((
            DbCheck {
                db_match: true,
                db_reward: 1.0,
            },
            Vec::new(),
        ));
    }
    let initial = task.initial_state.as_ref();
    let mut predicted = domain.environment();
    predicted.set_state(initial, messages)?;
    let mut gold = domain.environment();
    gold.set_state(initial, task.message_history())?;
    for action in criteria.actions.as_deref().unwrap_or(&[]) {
        // tau2 logs and ignores a failing expected action.
        let _ = gold.respond(&ToolCall {
            id: String::new(),
            name: action.name.clone(),
            arguments: action.arguments.clone(),
            requestor: action.requestor,
        });
    }
    let db_match =
        gold.db_hash() == predicted.db_hash() && gold.user_db_hash() == predicted.user_db_hash();
    let db = DbCheck {
        db_match,
        db_reward: if db_match { 1.0 } else { 0.0 },
    };
    let mut checks = Vec::new();
    for a in criteria.env_assertions.as_deref().unwrap_or(&[]) {
        let met = predicted.check(a)?;
        checks.push(EnvAssertionCheck {
            env_assertion: a.clone(),
            met,
            reward: if met { 1.0 } else { 0.0 },
        });
    }
    Ok((db, checks))
}

/// Every call of either side, in order.
fn calls(messages: &[Message]) -> impl Iterator<Item = &ToolCall> {
    messages
        .iter()
        .filter(|m| matches!(m.role, Role::Assistant | Role::User))
        .flat_map(|m| m.tool_calls.iter().flatten())
}

/// tau2's `Action.compare_with_tool_call`, asymmetry included: with no `compare_args`, the
/// keys compared are the call's own.
pub fn action_matches(action: &Action, call: &ToolCall) -> bool {
    if action.name != call.name {
        return false;
    }
    let keys: Vec<&str> = match &action.compare_args {
        Some(k) => k.iter().map(String::as_str).collect(),
        None => call.arguments.keys().map(String::as_str).collect(),
    };
    if keys.is_empty() {
        return true;
    }
    let pick = |m: &serde_json::Map<String, Value>| -> serde_json::Map<String, Value> {
        m.iter()
            .filter(|(k, _)| keys.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    crate::pyjson::py_eq(
        &Value::Object(pick(&call.arguments)),
        &Value::Object(pick(&action.arguments)),
    )
}

fn actions(domain: &Domain, expected: &[Action], messages: &[Message]) -> Vec<ActionCheck> {
    expected
        .iter()
        .map(|a| {
            let matched = calls(messages).any(|c| action_matches(a, c));
            ActionCheck {
                action: a.clone(),
                action_match: matched,
                action_reward: if matched { 1.0 } else { 0.0 },
                tool_type: domain.tools.tool_type(&a.name),
            }
        })
        .collect()
}

fn communicate(infos: &[String], messages: &[Message]) -> Vec<CommunicateCheck> {
    infos
        .iter()
        .map(|info| {
            let needle = info.to_lowercase();
            let found = messages.iter().find(|m| {
                m.role == Role::Assistant
                    && m.content.as_deref().is_some_and(|c| {
                        !c.is_empty() && c.to_lowercase().replace(',', "").contains(&needle)
                    })
            });
            match found {
                Some(m) => CommunicateCheck {
                    info: info.clone(),
                    met: true,
                    justification: format!(
                        "Information '{info}' communicated in the message:\n '{}'",
                        m.text()
                    ),
                },
                None => CommunicateCheck {
                    info: info.clone(),
                    met: false,
                    justification: format!("Information '{info}' not communicated."),
                },
            }
        })
        .collect()
}
