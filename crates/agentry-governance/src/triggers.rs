//! Triggers: the named reasons a request may start work (a schedule, a webhook, a button),
//! each with its own instructions for the agent, the scopes a caller needs to fire it, the
//! agents it may start, and the operational defaults its requests get.
//!
//! A request names its trigger in the task envelope (`triggerId`); [`Triggers::admit`]
//! refuses an unknown trigger, one the caller's scopes do not cover and one aimed at an agent
//! it does not apply to, and returns what the agent adds to its own system prompt.
//!
//! ```
//! use agentry_governance::triggers::{Trigger, Triggers};
//! let weekly: Trigger = serde_json::from_value(serde_json::json!({
//!     "id": "weekly-report",
//!     "name": "Weekly report",
//!     "system_prompt": "Write for managers: five bullets at most.",
//!     "required_scopes": ["reports.write"],
//!     "agents": ["writer"],
//! })).unwrap();
//! let triggers = Triggers::new(vec![weekly]).unwrap();
//! let granted = vec!["reports.write".to_string()];
//! let ok = triggers.admit("weekly-report", "writer", Some(&granted)).unwrap();
//! assert_eq!(ok.system_prompt, "Write for managers: five bullets at most.");
//! assert!(triggers.admit("weekly-report", "writer", Some(&[])).is_err());
//! assert!(triggers.admit("weekly-report", "mailer", Some(&granted)).is_err());
//! assert!(triggers.admit("nightly", "writer", Some(&granted)).is_err());
//! ```

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// One trigger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Trigger {
    /// What requests name in their envelope's `triggerId`.
    pub id: String,
    /// For people (audit trails, dashboards).
    #[serde(default)]
    pub name: String,
    /// Instructions the agent adds to its own system prompt for requests of this trigger.
    #[serde(default)]
    pub system_prompt: String,
    /// Scopes the caller's token must grant to fire it (the operator's static credentials
    /// grant every scope).
    #[serde(default)]
    pub required_scopes: Vec<String>,
    /// The agents (by name) it may start; empty: any.
    #[serde(default)]
    pub agents: Vec<String>,
    /// Response mode its requests get when they name none.
    #[serde(default)]
    pub run_mode: Option<RunMode>,
    /// Priority its requests get when they name none.
    #[serde(default)]
    pub priority: Option<Priority>,
}

/// How a trigger's requests want their answer (the task envelope's response mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunMode {
    /// Wait for the task to finish.
    Sync,
    /// Answer at once with the task.
    Async,
    /// Answer at once; the finished task is pushed to the request's callback URL.
    Callback,
}

/// How urgent a trigger's requests are (the task envelope's priority).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    /// Can wait.
    Low,
    /// The default.
    Normal,
    /// Before the others.
    High,
}

/// Why a trigger was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TriggerError {
    /// No trigger has this id.
    #[error("unknown trigger `{0}`")]
    Unknown(String),
    /// The trigger does not start this agent.
    #[error("trigger `{trigger}` does not apply to agent `{agent}`")]
    NotForAgent {
        /// The trigger.
        trigger: String,
        /// The agent asked.
        agent: String,
    },
    /// The caller's scopes do not cover the trigger's.
    #[error("firing trigger `{trigger}` needs the scope(s) {}", missing.join(" "))]
    Forbidden {
        /// The trigger.
        trigger: String,
        /// The scopes the caller lacks.
        missing: Vec<String>,
    },
    /// The registry itself is not valid (two triggers with one id, an empty id).
    #[error("invalid triggers: {0}")]
    Invalid(String),
}

/// The triggers an operator configured.
#[derive(Debug, Clone, Default)]
pub struct Triggers {
    by_id: HashMap<String, Trigger>,
}

impl Triggers {
    /// A registry of `triggers`, checked: ids unique and non-empty (modes and priorities
    /// are checked when a trigger is read).
    pub fn new(triggers: Vec<Trigger>) -> Result<Self, TriggerError> {
        let mut by_id = HashMap::new();
        for t in triggers {
            if t.id.is_empty() || !t.id.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(TriggerError::Invalid(format!(
                    "trigger id `{}` must be visible ASCII without spaces",
                    t.id
                )));
            }
            let id = t.id.clone();
            if by_id.insert(id.clone(), t).is_some() {
                return Err(TriggerError::Invalid(format!(
                    "trigger `{id}` is defined twice"
                )));
            }
        }
        Ok(Triggers { by_id })
    }

    /// The trigger with this id.
    pub fn get(&self, id: &str) -> Option<&Trigger> {
        self.by_id.get(id)
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Whether a request of a caller holding `scopes` (`None`: every scope) may fire trigger
    /// `id` at agent `agent`; the trigger when it may.
    pub fn admit(
        &self,
        id: &str,
        agent: &str,
        scopes: Option<&[String]>,
    ) -> Result<&Trigger, TriggerError> {
        let t = self
            .by_id
            .get(id)
            .ok_or_else(|| TriggerError::Unknown(id.to_owned()))?;
        if !t.agents.is_empty() && !t.agents.iter().any(|a| a == agent) {
            return Err(TriggerError::NotForAgent {
                trigger: id.to_owned(),
                agent: agent.to_owned(),
            });
        }
        if let Some(held) = scopes {
            let missing: Vec<String> = t
                .required_scopes
                .iter()
                .filter(|s| !held.contains(s))
                .cloned()
                .collect();
            if !missing.is_empty() {
                return Err(TriggerError::Forbidden {
                    trigger: id.to_owned(),
                    missing,
                });
            }
        }
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(id: &str) -> Trigger {
        Trigger {
            id: id.into(),
            name: String::new(),
            system_prompt: String::new(),
            required_scopes: Vec::new(),
            agents: Vec::new(),
            run_mode: None,
            priority: None,
        }
    }

    #[test]
    fn bad_registries_are_refused() {
        assert!(Triggers::new(vec![t("a"), t("a")]).is_err());
        assert!(Triggers::new(vec![t("")]).is_err());
        assert!(Triggers::new(vec![t("a b")]).is_err());
        let read = |v: serde_json::Value| serde_json::from_value::<Trigger>(v);
        assert!(read(serde_json::json!({"id": "m", "run_mode": "later"})).is_err());
        assert!(read(serde_json::json!({"id": "p", "priority": "urgent"})).is_err());
        let unknown_field =
            serde_json::from_value::<Trigger>(serde_json::json!({"id": "x", "prompt": "y"}));
        assert!(
            unknown_field.is_err(),
            "a misspelt field is an error, not ignored"
        );
    }

    #[test]
    fn any_agent_and_unlimited_callers_by_default() {
        let r = Triggers::new(vec![t("open")]).unwrap();
        assert!(r.admit("open", "anyone", None).is_ok());
        assert!(r.admit("open", "anyone", Some(&[])).is_ok());
        let mut scoped = t("scoped");
        scoped.required_scopes = vec!["a".into(), "b".into()];
        let r = Triggers::new(vec![scoped]).unwrap();
        assert!(
            r.admit("scoped", "x", None).is_ok(),
            "static credentials hold every scope"
        );
        assert_eq!(
            r.admit("scoped", "x", Some(&["a".into()])).unwrap_err(),
            TriggerError::Forbidden {
                trigger: "scoped".into(),
                missing: vec!["b".into()]
            }
        );
    }
}
