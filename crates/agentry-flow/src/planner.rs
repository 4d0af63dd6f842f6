//! The planner: a workflow for a task description, asked of an LLM as structured output and
//! bound to the agents that exist.
//!
//! The model sees the agents (names, descriptions, skills from their cards) and the workflow's
//! JSON Schema. Its answer is parsed and validated (schema, then agents, skills, dependencies,
//! templates); an invalid plan goes back to the model with the errors, up to `max_repairs` times.

use std::sync::Arc;

use agentry_core::llm::{ChatMessage, ChatRequest, DynLlmProvider};
use serde_json::Value;

use crate::registry::{AgentInfo, AgentRegistry};
use crate::validate::validate;
use crate::workflow::Workflow;

/// Why no plan came out.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// The model could not be asked.
    #[error("model call failed: {0}")]
    Model(String),
    /// Every attempt gave a workflow that does not validate.
    #[error("no valid plan after {attempts} attempts; last problems:\n{problems}")]
    Invalid {
        /// Plans asked for (the first and its repairs).
        attempts: u32,
        /// The last plan's problems, one per line.
        problems: String,
    },
}

/// Plans workflows with an LLM.
pub struct Planner {
    llm: Arc<dyn DynLlmProvider>,
    /// Re-prompts after the first answer.
    pub max_repairs: u32,
}

fn system_prompt(agents: &[AgentInfo]) -> String {
    let mut s = String::from(
        "You plan workflows for a team of specialized agents. Break the task into steps; each \
         step asks exactly one agent. Use only these agents (and their skills):\n",
    );
    for a in agents {
        s.push_str(&format!("- {}: {}", a.name, a.description));
        if !a.skills.is_empty() {
            s.push_str(&format!(" (skills: {})", a.skills.join(", ")));
        }
        s.push('\n');
    }
    s.push_str(
        "\nA step's `input` is the text sent to its agent; it may quote earlier results with \
         ${steps.STEP_ID.output} (list STEP_ID in `depends_on`) and the run's input with \
         ${input.FIELD}. Steps without a dependency between them run in parallel. \
         Reply with only a JSON object matching this JSON Schema:\n",
    );
    s.push_str(&Workflow::json_schema().to_string());
    s
}

/// The first JSON object in `text` (models wrap plans in prose or fences).
fn first_object(text: &str) -> Option<Value> {
    for (i, _) in text.match_indices('{') {
        let mut de = serde_json::Deserializer::from_str(&text[i..]).into_iter::<Value>();
        if let Some(Ok(v @ Value::Object(_))) = de.next() {
            return Some(v);
        }
    }
    None
}

impl Planner {
    /// A planner asking `llm`, repairing an invalid plan up to twice.
    pub fn new(llm: Arc<dyn DynLlmProvider>) -> Self {
        Planner {
            llm,
            max_repairs: 2,
        }
    }

    /// Plans `task`; the workflow returned has passed validation against `agents`.
    pub async fn plan(&self, task: &str, agents: &AgentRegistry) -> Result<Workflow, PlanError> {
        self.plan_within(task, agents, None).await
    }

    /// Plans `task` for a user holding `scopes`: the model is shown only the agents and skills
    /// the registry says that user may ask (`None`: every agent), so a plan does not lean on
    /// a step that would be refused.
    pub async fn plan_within(
        &self,
        task: &str,
        agents: &AgentRegistry,
        scopes: Option<&[String]>,
    ) -> Result<Workflow, PlanError> {
        let catalog = agents.catalog(scopes).await;
        let mut messages = vec![
            ChatMessage::system(system_prompt(&catalog)),
            ChatMessage::user(task),
        ];
        let mut problems = String::new();
        for attempt in 0..=self.max_repairs {
            let req = ChatRequest {
                messages: messages.clone(),
                json_schema: Some(Workflow::json_schema()),
                temperature: Some(0.0),
                ..Default::default()
            };
            let resp = self
                .llm
                .chat_dyn(req)
                .await
                .map_err(|e| PlanError::Model(e.to_string()))?;
            let text = resp.message.content.clone();
            messages.push(ChatMessage::assistant(text.clone()));
            let errors: Vec<String> = match first_object(&text) {
                None => vec!["the answer holds no JSON object".into()],
                Some(v) => match serde_path_to_error::deserialize::<_, Workflow>(v) {
                    Err(e) => vec![format!(
                        "does not match the schema at `{}`: {}",
                        e.path(),
                        e.inner()
                    )],
                    Ok(wf) => match validate(&wf, agents) {
                        Ok(()) => return Ok(wf),
                        Err(errs) => errs.iter().map(ToString::to_string).collect(),
                    },
                },
            };
            problems = errors
                .iter()
                .map(|e| format!("- {e}"))
                .collect::<Vec<_>>()
                .join("\n");
            tracing::info!(attempt, "plan rejected:\n{problems}");
            messages.push(ChatMessage::user(format!(
                "That plan is invalid:\n{problems}\nReply with a corrected workflow, as one JSON object."
            )));
        }
        Err(PlanError::Invalid {
            attempts: self.max_repairs + 1,
            problems,
        })
    }
}
