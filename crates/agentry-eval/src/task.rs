//! Tasks in tau2's format (`src/tau2/data_model/tasks.py`): a user scenario, the state the
//! environment starts in and the criteria a run is scored on.
//!
//! The task's JSON is kept as it was read ([`Task::raw`]), so `results.json` carries the task
//! exactly as tau2 would (tau2's viewer and re-scorer read the tasks from there).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::message::{Message, Requestor};

/// One task.
#[derive(Debug, Clone)]
pub struct Task {
    /// Its id (`"create_task_1"`, `"0"`).
    pub id: String,
    /// The simulated user's scenario: a persona and instructions.
    pub user_scenario: UserScenario,
    /// Where the environment starts.
    pub initial_state: Option<InitialState>,
    /// What the run is scored on; `None` scores 1.
    pub evaluation_criteria: Option<EvaluationCriteria>,
    /// The user tools the simulated user gets (`None`: all the domain has; `[]`: none).
    pub user_tools: Option<Vec<String>>,
    /// The task as read.
    pub raw: Value,
}

/// Who the simulated user is and what they want.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct UserScenario {
    /// How they speak.
    #[serde(default)]
    pub persona: Option<String>,
    /// What they want: plain text (mock) or structured (retail).
    pub instructions: Value,
}

impl UserScenario {
    /// `str(user_scenario)` as tau2 renders it into the user simulator's prompt.
    pub fn render(&self) -> String {
        let mut lines = Vec::new();
        if let Some(p) = &self.persona {
            lines.push("Persona:".to_owned());
            lines.push(indent(p));
        }
        let instructions = match &self.instructions {
            Value::String(s) => s.clone(),
            Value::Object(o) => {
                let get = |k: &str| o.get(k).and_then(Value::as_str);
                let mut parts = vec![format!("Domain: {}", get("domain").unwrap_or("None"))];
                for (key, title, optional) in [
                    ("reason_for_call", "Reason for call", false),
                    ("known_info", "Known info", true),
                    ("unknown_info", "Unknown info", true),
                    ("task_instructions", "Task instructions", false),
                ] {
                    match get(key) {
                        Some(v) => parts.push(format!("{title}:\n{}", indent(v))),
                        None if !optional => parts.push(format!("{title}:\nNone")),
                        None => {}
                    }
                }
                parts.join("\n")
            }
            other => other.to_string(),
        };
        lines.push("Instructions:".to_owned());
        lines.push(indent(&instructions));
        lines.join("\n")
    }
}

/// `textwrap.indent(s, "\t")`: a tab before every line that is not only whitespace.
fn indent(s: &str) -> String {
    s.split_inclusive('\n')
        .map(|l| {
            if l.trim().is_empty() {
                l.to_owned()
            } else {
                format!("\t{l}")
            }
        })
        .collect()
}

/// The state a task starts in.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct InitialState {
    /// Merged into the databases before anything else.
    #[serde(default)]
    pub initialization_data: Option<InitializationData>,
    /// Functions run on the environment after that.
    #[serde(default)]
    pub initialization_actions: Option<Vec<EnvFunctionCall>>,
    /// A conversation that already happened; the run continues it.
    #[serde(default)]
    pub message_history: Option<Vec<Message>>,
}

/// Data deep-merged into the databases.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct InitializationData {
    /// Into the agent's database.
    #[serde(default)]
    pub agent_data: Option<Value>,
    /// Into the user's database.
    #[serde(default)]
    pub user_data: Option<Value>,
}

/// A function of the environment (a tool, an assertion or a set-up helper).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EnvFunctionCall {
    /// Whose toolkit.
    pub env_type: EnvType,
    /// The function.
    pub func_name: String,
    /// Its arguments.
    #[serde(default)]
    pub arguments: Map<String, Value>,
}

/// An assertion on the final state.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EnvAssertion {
    /// Whose toolkit.
    pub env_type: EnvType,
    /// The function.
    pub func_name: String,
    /// Its arguments.
    #[serde(default)]
    pub arguments: Map<String, Value>,
    /// What it must return.
    #[serde(default = "yes")]
    pub assert_value: Value,
    /// Why, for people.
    #[serde(default)]
    pub message: Option<String>,
}

fn yes() -> Value {
    Value::Bool(true)
}

/// The agent's or the user's side of the environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EnvType {
    /// The agent's toolkit and database.
    Assistant,
    /// The user's.
    User,
}

/// A call the agent is expected to make.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Action {
    /// Its id in the task.
    #[serde(default)]
    pub action_id: String,
    /// Who should make it.
    #[serde(default)]
    pub requestor: Requestor,
    /// The tool.
    pub name: String,
    /// The expected arguments.
    #[serde(default)]
    pub arguments: Map<String, Value>,
    /// Why, for people.
    #[serde(default)]
    pub info: Option<String>,
    /// The arguments compared; `None`: those the actual call has.
    #[serde(default)]
    pub compare_args: Option<Vec<String>>,
}

/// One component of the reward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RewardType {
    /// The final databases equal those the expected actions produce.
    #[serde(rename = "DB")]
    Db,
    /// Assertions on the final state hold.
    EnvAssertion,
    /// A judge finds each natural-language assertion met.
    NlAssertion,
    /// Every expected action was called.
    Action,
    /// The agent said each piece of required information.
    Communicate,
}

/// What a run is scored on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EvaluationCriteria {
    /// Expected calls; `None` and `[]` differ (see the scorer).
    #[serde(default)]
    pub actions: Option<Vec<Action>>,
    /// Assertions on the final state.
    #[serde(default)]
    pub env_assertions: Option<Vec<EnvAssertion>>,
    /// Information the agent must say.
    #[serde(default)]
    pub communicate_info: Option<Vec<String>>,
    /// Statements a judge checks against the conversation.
    #[serde(default)]
    pub nl_assertions: Option<Vec<String>>,
    /// Which components make the reward.
    #[serde(default = "default_basis")]
    pub reward_basis: Vec<RewardType>,
}

fn default_basis() -> Vec<RewardType> {
    vec![RewardType::Db, RewardType::Communicate]
}

/// A task file could not be read.
#[derive(Debug, thiserror::Error)]
#[error("task {id}: {source}")]
pub struct TaskError {
    /// The task's id, or its index when it has none.
    pub id: String,
    /// What was wrong.
    #[source]
    pub source: serde_json::Error,
}

impl Task {
    /// Reads one task from its JSON.
    pub fn from_value(raw: Value) -> Result<Task, TaskError> {
        #[derive(Deserialize)]
        struct Wire {
            id: Value,
            user_scenario: UserScenario,
            #[serde(default)]
            initial_state: Option<InitialState>,
            #[serde(default)]
            evaluation_criteria: Option<EvaluationCriteria>,
            #[serde(default)]
            user_tools: Option<Vec<String>>,
        }
        let id_of = |raw: &Value| match raw.get("id") {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => "?".into(),
        };
        let wire: Wire = serde_json::from_value(raw.clone()).map_err(|source| TaskError {
            id: id_of(&raw),
            source,
        })?;
        Ok(Task {
            id: match wire.id {
                Value::String(s) => s,
                other => other.to_string(),
            },
            user_scenario: wire.user_scenario,
            initial_state: wire.initial_state,
            evaluation_criteria: wire.evaluation_criteria,
            user_tools: wire.user_tools,
            raw,
        })
    }

    /// The conversation the task starts with (empty for most).
    pub fn message_history(&self) -> &[Message] {
        self.initial_state
            .as_ref()
            .and_then(|s| s.message_history.as_deref())
            .unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn structured_instructions_render_as_tau2_does() {
        let s: UserScenario = serde_json::from_value(json!({
            "persona": null,
            "instructions": {"domain": "retail", "reason_for_call": "a\nb", "known_info": "k",
                             "unknown_info": null, "task_instructions": "t"}
        }))
        .unwrap();
        assert_eq!(
            s.render(),
            "Instructions:\n\tDomain: retail\n\tReason for call:\n\t\ta\n\t\tb\n\tKnown info:\n\t\tk\n\tTask instructions:\n\t\tt"
        );
    }

    #[test]
    fn the_default_basis_is_db_and_communicate() {
        let t = Task::from_value(json!({"id": "x", "user_scenario": {"instructions": "hi"},
                                         "evaluation_criteria": {"actions": []}}))
        .unwrap();
        assert_eq!(
            t.evaluation_criteria.unwrap().reward_basis,
            vec![RewardType::Db, RewardType::Communicate]
        );
    }
}
