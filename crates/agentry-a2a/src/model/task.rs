//! Tasks, their lifecycle, and the events that change them.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::message::{Artifact, Message, Metadata};
use crate::envelope::{EXTENSION_URI, Envelope};

/// The lifecycle state of a task.
///
/// Valid moves are encoded in [`TaskState::can_transition_to`]; [`Task::transition`] is the one
/// way the server changes a task's state, so an invalid move is refused before it is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TaskState {
    /// Accepted, not started.
    Submitted,
    /// Being worked on.
    Working,
    /// Waiting for the client's next message.
    InputRequired,
    /// Done (final).
    Completed,
    /// Canceled by the client (final).
    Canceled,
    /// Ended in an error (final).
    Failed,
    /// Refused by the agent (final).
    Rejected,
    /// Waiting for the client to authenticate.
    AuthRequired,
    /// A state this version does not know.
    Unknown,
}

impl TaskState {
    /// Every state, in declaration order.
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

    /// The v0.3 wire name (`input-required`).
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
    /// The state the task was in.
    pub from: TaskState,
    /// The state asked for.
    pub to: TaskState,
}

/// The current state of a task, with an optional message from the agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskStatus {
    /// The state.
    pub state: TaskState,
    /// What the agent says with it (a question for `input-required`, a reason for `failed`).
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
///
/// Serialized with the [task envelope](crate::envelope) it carries written into `metadata`
/// under the extension's URI, and read back with it taken out again: on the wire and in
/// stores the task is what it was before the envelope had a field of its own.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(from = "TaskFields")]
pub struct Task {
    /// Unique per task, chosen by the server.
    pub id: String,
    /// The conversation it belongs to.
    pub context_id: String,
    /// Where it stands.
    pub status: TaskStatus,
    /// Its messages, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Message>,
    /// What it produced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Artifact>,
    /// Extension data. Shared, not copied: a task is copied for every save and event of a
    /// turn while its metadata is set once, when the task is made (measured: copying the
    /// envelope's map was a third of its cost per request). Change it with
    /// [`Task::metadata_mut`].
    pub metadata: Option<Arc<Metadata>>,
    /// The task envelope the task was asked under (who asked under which correlation id),
    /// shown in `metadata` under [`EXTENSION_URI`](crate::envelope::EXTENSION_URI) on the
    /// wire and in stores. A field of its own because building it as a JSON map and writing
    /// that map out was about a fifth of an idempotent send's extra cost.
    pub envelope: Option<Arc<Envelope>>,
    /// Who the task belongs to: the authenticated principal that created it, when the server
    /// takes credentials. Server-side only, never on the wire: stores keep it beside the task,
    /// and only that caller can see or touch the task.
    pub owner: Option<String>,
    /// The agent's last turn ended with the task left `working` on purpose (it waits for the
    /// next message unasked): no turn is running and none was cut short, so a restarted
    /// server leaves it as it is. Server-side only, kept by stores beside the task.
    pub parked: bool,
    /// The running turn was taken from the work queue (`server::queue`): if the replica
    /// running it dies, the queue hands the turn to another worker, so for a while no replica
    /// recovers the task (a client sees it `working` until the new worker's events come).
    /// Server-side only; stores shared by replicas keep it beside the task (a store that
    /// does not treats such a task like any other: recovered once its hold lapses, then run
    /// again by the worker the queue hands it to).
    pub queued: bool,
}

/// [`Task`] as stored and sent before its envelope had a field: what it is read from.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind", rename = "task")]
struct TaskFields {
    id: String,
    context_id: String,
    status: TaskStatus,
    #[serde(default)]
    history: Vec<Message>,
    #[serde(default)]
    artifacts: Vec<Artifact>,
    #[serde(default, deserialize_with = "shared_metadata::deserialize")]
    metadata: Option<Arc<Metadata>>,
    #[serde(skip)]
    owner: Option<String>,
    #[serde(skip)]
    parked: bool,
    #[serde(skip)]
    queued: bool,
}

impl From<TaskFields> for Task {
    fn from(f: TaskFields) -> Self {
        let (metadata, envelope) = take_envelope(f.metadata);
        Task {
            id: f.id,
            context_id: f.context_id,
            status: f.status,
            history: f.history,
            artifacts: f.artifacts,
            metadata,
            envelope,
            owner: f.owner,
            parked: f.parked,
            queued: f.queued,
        }
    }
}

/// The envelope out of a task's `metadata` as read from the wire or a store, into the
/// task's own field; one that does not read as an envelope stays where it is.
pub(crate) fn take_envelope(
    metadata: Option<Arc<Metadata>>,
) -> (Option<Arc<Metadata>>, Option<Arc<Envelope>>) {
    let Some(mut metadata) = metadata else {
        return (None, None);
    };
    let Some(v) = metadata.get(EXTENSION_URI) else {
        return (Some(metadata), None);
    };
    let Ok(env) = Envelope::deserialize(v) else {
        return (Some(metadata), None);
    };
    let map = Arc::make_mut(&mut metadata);
    map.remove(EXTENSION_URI);
    let metadata = (!map.is_empty()).then_some(metadata);
    (metadata, Some(Arc::new(env)))
}

impl Serialize for Task {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut t = s.serialize_struct("task", 7)?;
        t.serialize_field("kind", "task")?;
        t.serialize_field("id", &self.id)?;
        t.serialize_field("contextId", &self.context_id)?;
        t.serialize_field("status", &self.status)?;
        if !self.history.is_empty() {
            t.serialize_field("history", &self.history)?;
        }
        if !self.artifacts.is_empty() {
            t.serialize_field("artifacts", &self.artifacts)?;
        }
        let metadata = TaskMetadata::of(self.metadata.as_deref(), self.envelope.as_deref());
        if !metadata.is_none() {
            t.serialize_field("metadata", &metadata)?;
        }
        t.end()
    }
}

/// A task's `metadata` as written: its map with its envelope (when it has one) under the
/// extension's URI, in the map's key order.
#[derive(Clone, Copy)]
pub(crate) struct TaskMetadata<'a> {
    map: Option<&'a Metadata>,
    envelope: Option<&'a Envelope>,
}

impl<'a> TaskMetadata<'a> {
    pub(crate) fn of(map: Option<&'a Metadata>, envelope: Option<&'a Envelope>) -> Self {
        Self { map, envelope }
    }

    /// Nothing to write (no `metadata` field).
    pub(crate) fn is_none(&self) -> bool {
        self.map.is_none() && self.envelope.is_none()
    }
}

impl Serialize for TaskMetadata<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut out = s.serialize_map(None)?;
        let mut envelope = self.envelope;
        for (k, v) in self.map.into_iter().flatten() {
            if let Some(env) = envelope
                && k.as_str() >= EXTENSION_URI
            {
                out.serialize_entry(EXTENSION_URI, env)?;
                envelope = None;
            }
            // The field wins over an entry of the same key.
            if self.envelope.is_some() && k == EXTENSION_URI {
                continue;
            }
            out.serialize_entry(k, v)?;
        }
        if let Some(env) = envelope {
            out.serialize_entry(EXTENSION_URI, env)?;
        }
        out.end()
    }
}

impl Task {
    /// A new task in `submitted`.
    pub fn new(id: String, context_id: String) -> Self {
        let mut task = Task::unstamped(id, context_id);
        task.stamp();
        task
    }

    /// [`Task::new`] without the submitted status's timestamp, for a task that may never be
    /// seen (a turn answered with a direct message creates none): whoever first shows or
    /// stores it stamps it ([`Task::stamp`]). Reading the clock and formatting the time was
    /// ~1% of answering a message.
    pub(crate) fn unstamped(id: String, context_id: String) -> Self {
        Task {
            id,
            context_id,
            status: TaskStatus {
                state: TaskState::Submitted,
                message: None,
                timestamp: None,
            },
            history: Vec::new(),
            artifacts: Vec::new(),
            metadata: None,
            envelope: None,
            owner: None,
            parked: false,
            queued: false,
        }
    }

    /// Stamps an [`unstamped`](Self::unstamped) task's status with the current time.
    pub(crate) fn stamp(&mut self) {
        if self.status.timestamp.is_none() {
            self.status.timestamp = Some(crate::time::now_rfc3339());
        }
    }

    /// The task's metadata to change, made first when it has none (copied first when another
    /// copy of the task shares it).
    pub fn metadata_mut(&mut self) -> &mut Metadata {
        Arc::make_mut(self.metadata.get_or_insert_with(Default::default))
    }

    /// The current state.
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
    /// The task.
    pub task_id: String,
    /// Its conversation.
    pub context_id: String,
    /// The new status.
    pub status: TaskStatus,
    /// The last event of this stream.
    #[serde(rename = "final", default)]
    pub is_final: bool,
    /// Extension data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// An artifact was produced, or a chunk of one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind", rename = "artifact-update")]
pub struct TaskArtifactUpdateEvent {
    /// The task.
    pub task_id: String,
    /// Its conversation.
    pub context_id: String,
    /// The artifact, or the chunk of it this event adds.
    pub artifact: Artifact,
    /// Append to the artifact with the same id instead of replacing it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub append: Option<bool>,
    /// The artifact's last chunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_chunk: Option<bool>,
    /// Extension data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// `Option<Arc<Metadata>>` read as the plain map (serde's `rc` feature would do it for every
/// crate that shares the build's serde).
mod shared_metadata {
    use std::sync::Arc;

    use serde::{Deserialize, Deserializer};

    use super::Metadata;

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Arc<Metadata>>, D::Error> {
        Ok(Option::<Metadata>::deserialize(d)?.map(Arc::new))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_of_a_task_share_its_metadata_until_one_changes_it() {
        let mut task = Task::new("t".into(), "c".into());
        task.metadata_mut()
            .insert("urn:x".into(), serde_json::json!({"k": "v"}));
        let mut copy = task.clone();
        let (a, b) = (
            task.metadata.as_ref().unwrap(),
            copy.metadata.as_ref().unwrap(),
        );
        assert!(Arc::ptr_eq(a, b), "a copy shares the map");
        copy.metadata_mut().insert("urn:y".into(), 1.into());
        assert_eq!(
            task.metadata.as_deref().unwrap().len(),
            1,
            "the original is unchanged"
        );
        assert_eq!(copy.metadata.as_deref().unwrap().len(), 2);
    }

    #[test]
    fn shared_metadata_is_the_plain_map_on_the_wire() {
        let mut task = Task::new("t".into(), "c".into());
        task.status.timestamp = None;
        let json = serde_json::to_value(&task).unwrap();
        assert!(json.get("metadata").is_none(), "no metadata, no field");
        task.metadata_mut()
            .insert("urn:x".into(), serde_json::json!({"k": "v"}));
        let json = serde_json::to_value(&task).unwrap();
        assert_eq!(json["metadata"], serde_json::json!({"urn:x": {"k": "v"}}));
        let back: Task = serde_json::from_value(json).unwrap();
        assert_eq!(back, task);
        let none: Task = serde_json::from_value(serde_json::json!({
            "kind": "task", "id": "t", "contextId": "c", "status": {"state": "working"}
        }))
        .unwrap();
        assert_eq!(none.metadata, None);
    }

    /// The envelope's field is `metadata` under the extension's URI in the JSON (stores and
    /// the wire hold what they held before it had a field), in the map's key order, and is
    /// taken out again when read: a stored or sent task reads back equal.
    #[test]
    fn the_envelope_is_written_into_metadata_and_read_back_out() {
        use crate::envelope::EXTENSION_URI;
        let env = Envelope {
            correlation_id: Some("corr-1".into()),
            idempotency_key: Some("key-1".into()),
            ..Default::default()
        };
        let mut task = Task::new("t".into(), "c".into());
        task.envelope = Some(Arc::new(env.clone()));
        let json = serde_json::to_value(&task).unwrap();
        assert_eq!(
            json["metadata"],
            serde_json::json!({EXTENSION_URI: {"correlationId": "corr-1", "idempotencyKey": "key-1"}})
        );
        let back: Task = serde_json::from_value(json).unwrap();
        assert_eq!(back, task);
        assert_eq!(back.metadata, None, "the envelope left the map");
        // With other entries, before and after the URI in key order: the same text as a map
        // holding the envelope as a value (what earlier versions stored).
        task.metadata_mut().insert("a:first".into(), 1.into());
        task.metadata_mut().insert("zz:last".into(), 2.into());
        let text = serde_json::to_string(&task).unwrap();
        let mut plain = task.clone();
        plain.envelope = None;
        plain
            .metadata_mut()
            .insert(EXTENSION_URI.into(), serde_json::to_value(&env).unwrap());
        assert_eq!(text, serde_json::to_string(&plain).unwrap());
        let back: Task = serde_json::from_str(&text).unwrap();
        assert_eq!(back, task);
        // Read from such a map (a row stored before), the envelope moves to its field.
        let moved: Task = serde_json::from_str(&serde_json::to_string(&plain).unwrap()).unwrap();
        assert_eq!(moved, task);
        // The field wins over a stale entry of the same key; one entry is written.
        let mut both = task.clone();
        both.metadata_mut().insert(
            EXTENSION_URI.into(),
            serde_json::json!({"correlationId": "stale"}),
        );
        let text = serde_json::to_string(&both).unwrap();
        assert_eq!(text.matches(EXTENSION_URI).count(), 1);
        assert!(text.contains("corr-1") && !text.contains("stale"));
        // What does not read as an envelope stays in the map, untouched.
        let odd: Task = serde_json::from_value(serde_json::json!({
            "kind": "task", "id": "t", "contextId": "c", "status": {"state": "working"},
            "metadata": {EXTENSION_URI: {"priority": "urgent"}}
        }))
        .unwrap();
        assert_eq!(odd.envelope, None);
        assert_eq!(
            odd.metadata.as_deref().unwrap()[EXTENSION_URI],
            serde_json::json!({"priority": "urgent"})
        );
    }
}
