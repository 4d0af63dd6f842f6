//! Tasks, their lifecycle, and the events that change them.

use serde::{Deserialize, Serialize};

use super::message::{Artifact, Message, Metadata};

/// The lifecycle state of a task.
///
/// Valid moves are encoded in [`TaskState::can_transition_to`]; [`Task::transition`] is the one
/// way the server changes a task's state, so an invalid move is refused before it is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TaskState {
    Submitted,
    Working,
    InputRequired,
    Completed,
    Canceled,
    Failed,
    Rejected,
    AuthRequired,
    Unknown,
}

impl TaskState {
    pub const ALL: [TaskState; 9] = [
        TaskState::Submitted,
        TaskState::Working,
        TaskState::InputRequired,
        TaskState::Completed,
        TaskState::Canceled,
        TaskState::Failed,
        TaskState::Rejected,
        TaskState::AuthRequired,
        TaskState::Unknown,
    ];

    /// No further change is possible.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Canceled | TaskState::Failed | TaskState::Rejected
        )
    }

    /// The task waits for the client: a turn is over, the task is not.
    pub fn is_interrupted(self) -> bool {
        matches!(self, TaskState::InputRequired | TaskState::AuthRequired)
    }

    /// The state ends a stream (terminal or interrupted).
    pub fn ends_turn(self) -> bool {
        self.is_terminal() || self.is_interrupted()
    }

    /// Whether `self -> next` is a legal move.
    ///
    /// Terminal states are final; nothing moves back to `submitted` except a new turn on an
    /// interrupted task; `unknown` is only ever reported by peers, never entered.
    pub fn can_transition_to(self, next: TaskState) -> bool {
        use TaskState::*;
        if self.is_terminal() || next == Unknown {
            return false;
        }
        match self {
            Submitted | Working => next != Submitted,
            InputRequired | AuthRequired => true,
            Unknown => true,
            Completed | Canceled | Failed | Rejected => false,
        }
    }

    pub fn as_str(self) -> &'static str {
        use TaskState::*;
        match self {
            Submitted => "submitted",
            Working => "working",
            InputRequired => "input-required",
            Completed => "completed",
            Canceled => "canceled",
            Failed => "failed",
            Rejected => "rejected",
            AuthRequired => "auth-required",
            Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for TaskState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A refused state change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("invalid task state transition {from} -> {to}")]
pub struct InvalidTransition {
    pub from: TaskState,
    pub to: TaskState,
}

/// The current state of a task, with an optional message from the agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskStatus {
    pub state: TaskState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    /// RFC 3339 UTC timestamp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

impl TaskStatus {
    /// A status stamped with the current time.
    pub fn now(state: TaskState, message: Option<Message>) -> Self {
        TaskStatus {
            state,
            message,
            timestamp: Some(crate::time::now_rfc3339()),
        }
    }
}

/// A unit of work an agent performs for a client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind", rename = "task")]
pub struct Task {
    pub id: String,
    pub context_id: String,
    pub status: TaskStatus,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Message>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Artifact>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    /// Who the task belongs to: the authenticated principal that created it, when the server
    /// takes credentials. Server-side only, never on the wire: stores keep it beside the task,
    /// and only that caller can see or touch the task.
    #[serde(skip)]
    pub owner: Option<String>,
    /// The agent's last turn ended with the task left `working` on purpose (it waits for the
    /// next message unasked): no turn is running and none was cut short, so a restarted
    /// server leaves it as it is. Server-side only, kept by stores beside the task.
    #[serde(skip)]
    pub parked: bool,
}

impl Task {
    /// A new task in `submitted`.
    pub fn new(id: String, context_id: String) -> Self {
        Task {
            id,
            context_id,
            status: TaskStatus::now(TaskState::Submitted, None),
            history: Vec::new(),
            artifacts: Vec::new(),
            metadata: None,
            owner: None,
            parked: false,
        }
    }

    pub fn state(&self) -> TaskState {
        self.status.state
    }

    /// Moves the task to `status`, refusing an illegal move. A status message joins the history.
    pub fn transition(&mut self, status: TaskStatus) -> Result<(), InvalidTransition> {
        let from = self.status.state;
        if !from.can_transition_to(status.state) {
            return Err(InvalidTransition {
                from,
                to: status.state,
            });
        }
        if let Some(m) = &status.message {
            self.history.push(m.clone());
        }
        self.status = status;
        Ok(())
    }

    /// Applies an artifact update: a new artifact, a replacement, or a chunk appended to one.
    pub fn apply_artifact(&mut self, artifact: &Artifact, append: bool) {
        match self
            .artifacts
            .iter_mut()
            .find(|a| a.artifact_id == artifact.artifact_id)
        {
            Some(existing) if append => existing.parts.extend(artifact.parts.iter().cloned()),
            Some(existing) => *existing = artifact.clone(),
            None => self.artifacts.push(artifact.clone()),
        }
    }

    /// A copy with at most the last `n` history messages (`None` keeps all).
    pub fn with_history_limit(&self, n: Option<usize>) -> Task {
        let mut t = self.clone();
        t.limit_history(n);
        t
    }

    /// Keeps at most the last `n` history messages.
    pub fn limit_history(&mut self, n: Option<usize>) {
        if let Some(n) = n
            && self.history.len() > n
        {
            let cut = self.history.len() - n;
            self.history.drain(..cut);
        }
    }
}

/// A task's status changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind", rename = "status-update")]
pub struct TaskStatusUpdateEvent {
    pub task_id: String,
    pub context_id: String,
    pub status: TaskStatus,
    /// The last event of this stream.
    #[serde(rename = "final", default)]
    pub is_final: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// An artifact was produced, or a chunk of one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind", rename = "artifact-update")]
pub struct TaskArtifactUpdateEvent {
    pub task_id: String,
    pub context_id: String,
    pub artifact: Artifact,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub append: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_chunk: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}
