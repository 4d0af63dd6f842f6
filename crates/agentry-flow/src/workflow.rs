//! The workflow model: steps, dependencies, templates, retries, failure policies, conditions.
//!
//! ```
//! use agentry_flow::workflow::Workflow;
//! let wf: Workflow = serde_yaml::from_str(r#"
//! name: fulfil-order
//! steps:
//!   - id: inventory
//!     agent: inventory
//!     input: "Reserve ${input.order.items}"
//!   - id: payment
//!     agent: payment
//!     depends_on: [inventory]
//!     input: "Charge for reservation ${steps.inventory.output}"
//! "#).unwrap();
//! assert_eq!(wf.steps[1].depends_on, ["inventory"]);
//! ```

use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A workflow: steps forming a dependency graph.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Workflow {
    /// Identifier; also the orchestrator's skill id when served over A2A.
    pub name: String,
    /// What the workflow does (the skill's description when served).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Names of the top-level input fields (`${input.NAME...}`); empty means any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<String>,
    /// The steps, in any order (dependencies decide the order).
    pub steps: Vec<WorkflowStep>,
    /// The final output, a template (default: the outputs of the steps nothing depends on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// Steps running at once (default 8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_parallel: Option<usize>,
}

/// One step: ask an agent, with an input rendered from the run's context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WorkflowStep {
    /// Unique within the workflow: letters, digits, `_` and `-`.
    pub id: String,
    /// A registered agent name, or an A2A URL (`http://…`).
    pub agent: String,
    /// A skill of that agent (checked against its card).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill: Option<String>,
    /// What to send: a template with `${input.a.b}`, `${steps.ID.output}`,
    /// `${steps.ID.data.field}`, `${steps.ID.artifacts}`.
    #[serde(default)]
    pub input: String,
    /// Steps whose outputs this one needs; it starts when they are done.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
    /// Seconds per attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<f64>,
    /// Attempts and backoff on failure.
    #[serde(default, skip_serializing_if = "Retry::is_none")]
    pub retry: Retry,
    /// What a failure does to the run: fail it (default), skip, or fall back.
    #[serde(default, skip_serializing_if = "OnFailure::is_fail")]
    pub on_failure: OnFailure,
    /// Run only when this holds: a template that is truthy, or `A == B` / `A != B`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
}

/// Retries with exponential backoff.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Retry {
    /// Attempts after the first.
    #[serde(default)]
    pub max: u32,
    /// Seconds before the first retry; doubles each time.
    #[serde(default = "default_backoff")]
    pub backoff_secs: f64,
}

fn default_backoff() -> f64 {
    0.5
}

impl Default for Retry {
    fn default() -> Self {
        Retry {
            max: 0,
            backoff_secs: default_backoff(),
        }
    }
}

impl Retry {
    fn is_none(&self) -> bool {
        self.max == 0
    }
}

/// What a failed step does to the run. Written `fail`, `continue`, or `{fallback: AGENT}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(try_from = "OnFailureRepr", into = "OnFailureRepr")]
#[schemars(with = "OnFailureRepr")]
pub enum OnFailure {
    /// Stop the run (running steps are canceled).
    #[default]
    Fail,
    /// Go on; steps that depend on this one are skipped.
    Continue,
    /// Try this agent instead.
    Fallback(String),
}

/// The written form of [`OnFailure`].
#[derive(Clone, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
enum OnFailureRepr {
    /// `fail` or `continue`.
    Word(String),
    Fallback {
        fallback: String,
    },
}

impl TryFrom<OnFailureRepr> for OnFailure {
    type Error = String;
    fn try_from(r: OnFailureRepr) -> Result<Self, String> {
        match r {
            OnFailureRepr::Word(w) if w == "fail" => Ok(OnFailure::Fail),
            OnFailureRepr::Word(w) if w == "continue" => Ok(OnFailure::Continue),
            OnFailureRepr::Word(w) => Err(format!(
                "on_failure is `fail`, `continue` or {{fallback: AGENT}}, not `{w}`"
            )),
            OnFailureRepr::Fallback { fallback } => Ok(OnFailure::Fallback(fallback)),
        }
    }
}

impl From<OnFailure> for OnFailureRepr {
    fn from(o: OnFailure) -> Self {
        match o {
            OnFailure::Fail => OnFailureRepr::Word("fail".into()),
            OnFailure::Continue => OnFailureRepr::Word("continue".into()),
            OnFailure::Fallback(fallback) => OnFailureRepr::Fallback { fallback },
        }
    }
}

impl OnFailure {
    fn is_fail(&self) -> bool {
        *self == OnFailure::Fail
    }
}

/// A workflow file could not be read.
#[derive(Debug, thiserror::Error)]
#[error("workflow {path}: {reason}")]
pub struct LoadError {
    /// The file.
    pub path: String,
    /// What was wrong with it.
    pub reason: String,
}

impl Workflow {
    /// Reads YAML (`.yaml`/`.yml`), JSON (`.json`) or TOML.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, LoadError> {
        let p = path.as_ref();
        let err = |reason: String| LoadError {
            path: p.display().to_string(),
            reason,
        };
        let text = std::fs::read_to_string(p).map_err(|e| err(e.to_string()))?;
        Self::parse(
            &text,
            p.extension().and_then(|e| e.to_str()).unwrap_or("yaml"),
        )
        .map_err(err)
    }

    /// Parses text in the format an extension names.
    pub fn parse(text: &str, ext: &str) -> Result<Self, String> {
        match ext {
            "json" => serde_json::from_str(text).map_err(|e| e.to_string()),
            "toml" => toml::from_str(text).map_err(|e| e.to_string()),
            _ => serde_yaml::from_str(text).map_err(|e| e.to_string()),
        }
    }

    /// The JSON Schema of a workflow (what the planner asks the model for).
    pub fn json_schema() -> serde_json::Value {
        serde_json::to_value(schemars::schema_for!(Workflow)).unwrap_or_default()
    }

    /// The step with this id.
    pub fn step(&self, id: &str) -> Option<&WorkflowStep> {
        self.steps.iter().find(|s| s.id == id)
    }
}
