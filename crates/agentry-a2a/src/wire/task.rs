//! The task-shaped wire types both forms share: an artifact, a status, a task and an artifact
//! update have the same fields in v1.0 and in v0.3's HTTP+JSON form, and differ only in the
//! parts, messages and state spelling inside. So they are written once, generic over those
//! ([`Wire`], [`WireState`]), and each form names its own (`wire::v1::Task` is
//! `Task<'a, v1::Message, v1::Part, v1::State>`).

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use super::{
    Meta, Str, WireError, borrowed, each_into_model, meta, opt_str, owned_meta, owned_strs, strs,
};
use crate::envelope::Envelope;
use crate::model::{self, TaskState};
use crate::model::{TaskMetadata, take_envelope};

/// A form's part or message: a borrowed view of the model's value, and the way back.
pub trait Wire<'a>: Sized {
    /// The model's type.
    type Model: 'a;
    /// A view of `m` (its strings borrowed).
    fn view(m: &'a Self::Model) -> Self;
    /// The model's value; the error names the failing field relative to this value.
    fn into_model(self) -> Result<Self::Model, WireError>;
}

/// A form's spelling of a task state.
pub trait WireState: Copy + Default {
    /// The spelling of `s`.
    fn of(s: TaskState) -> Self;
    /// The state it spells.
    fn state(self) -> TaskState;
}

/// An Artifact, with parts `P`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", bound(deserialize = "P: Deserialize<'de>"))]
pub struct Artifact<'a, P> {
    /// Its id.
    #[serde(default, alias = "artifact_id")]
    pub artifact_id: Str<'a>,
    /// Its name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<Str<'a>>,
    /// What it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<Str<'a>>,
    /// Its content.
    #[serde(default)]
    pub parts: Vec<P>,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Meta<'a>,
    /// Extensions it uses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<Str<'a>>,
}

impl<'a, P: Wire<'a, Model = model::Part>> From<&'a model::Artifact> for Artifact<'a, P> {
    fn from(a: &'a model::Artifact) -> Self {
        Artifact {
            artifact_id: borrowed(&a.artifact_id),
            name: opt_str(&a.name),
            description: opt_str(&a.description),
            parts: a.parts.iter().map(P::view).collect(),
            metadata: meta(&a.metadata),
            extensions: strs(&a.extensions),
        }
    }
}

impl<'a, P: Wire<'a, Model = model::Part>> Artifact<'a, P> {
    /// The model's artifact.
    pub fn into_model(self) -> Result<model::Artifact, WireError> {
        Ok(model::Artifact {
            artifact_id: self.artifact_id.into_owned(),
            name: self.name.map(Cow::into_owned),
            description: self.description.map(Cow::into_owned),
            parts: each_into_model(self.parts, "parts", P::into_model)?,
            extensions: owned_strs(self.extensions),
            metadata: owned_meta(self.metadata),
        })
    }
}

/// A TaskStatus, with the agent's message `M` and the state spelled `S`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(bound(deserialize = "M: Deserialize<'de>, S: Deserialize<'de> + Default"))]
pub struct TaskStatus<'a, M, S> {
    /// The state (a missing or null one is `unknown`).
    #[serde(default)]
    pub state: S,
    /// The agent's message with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<M>,
    /// When, RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<Str<'a>>,
}

impl<M, S: Default> Default for TaskStatus<'_, M, S> {
    fn default() -> Self {
        TaskStatus {
            state: S::default(),
            message: None,
            timestamp: None,
        }
    }
}

impl<'a, M: Wire<'a, Model = model::Message>, S: WireState> From<&'a model::TaskStatus>
    for TaskStatus<'a, M, S>
{
    fn from(s: &'a model::TaskStatus) -> Self {
        TaskStatus {
            state: S::of(s.state),
            message: s.message.as_ref().map(M::view),
            timestamp: opt_str(&s.timestamp),
        }
    }
}

impl<'a, M: Wire<'a, Model = model::Message>, S: WireState> TaskStatus<'a, M, S> {
    /// The model's status.
    pub fn into_model(self) -> Result<model::TaskStatus, WireError> {
        Ok(model::TaskStatus {
            state: self.state.state(),
            message: match self.message {
                Some(m) => Some(m.into_model().map_err(|e| e.at("message"))?),
                None => None,
            },
            timestamp: self.timestamp.map(Cow::into_owned),
        })
    }
}

/// A Task, with messages `M`, artifact parts `P` and the state spelled `S`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    rename_all = "camelCase",
    bound(deserialize = "M: Deserialize<'de>, P: Deserialize<'de>, S: Deserialize<'de> + Default")
)]
pub struct Task<'a, M, P, S> {
    /// Its id.
    #[serde(default)]
    pub id: Str<'a>,
    /// Its conversation.
    #[serde(default, alias = "context_id")]
    pub context_id: Str<'a>,
    /// Where it stands.
    #[serde(default)]
    pub status: TaskStatus<'a, M, S>,
    /// What it produced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Artifact<'a, P>>,
    /// Its messages, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<M>,
    /// Free-form metadata, and the task envelope in it.
    #[serde(default, skip_serializing_if = "TaskMeta::is_none")]
    pub metadata: TaskMeta<'a>,
}

/// A task's metadata on the wire: its map with the task's envelope written in under the
/// extension's URI (see [`model::Task::envelope`]). Read, it is the map alone (the model
/// takes the envelope out).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TaskMeta<'a> {
    /// The map.
    pub map: Meta<'a>,
    /// The envelope written into it.
    pub envelope: Option<&'a Envelope>,
}

impl TaskMeta<'_> {
    /// Nothing to write.
    pub fn is_none(&self) -> bool {
        self.map.is_none() && self.envelope.is_none()
    }
}

impl Serialize for TaskMeta<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        TaskMetadata::of(self.map.as_deref(), self.envelope).serialize(s)
    }
}

impl<'de> Deserialize<'de> for TaskMeta<'_> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(TaskMeta {
            map: Option::<model::Metadata>::deserialize(d)?.map(Cow::Owned),
            envelope: None,
        })
    }
}

impl<'a, M, P, S> From<&'a model::Task> for Task<'a, M, P, S>
where
    M: Wire<'a, Model = model::Message>,
    P: Wire<'a, Model = model::Part>,
    S: WireState,
{
    fn from(t: &'a model::Task) -> Self {
        Task {
            id: borrowed(&t.id),
            context_id: borrowed(&t.context_id),
            status: (&t.status).into(),
            artifacts: t.artifacts.iter().map(Artifact::from).collect(),
            history: t.history.iter().map(M::view).collect(),
            metadata: TaskMeta {
                map: t.metadata.as_deref().map(Cow::Borrowed),
                envelope: t.envelope.as_deref(),
            },
        }
    }
}

impl<'a, M, P, S> Task<'a, M, P, S>
where
    M: Wire<'a, Model = model::Message>,
    P: Wire<'a, Model = model::Part>,
    S: WireState,
{
    /// The model's task.
    pub fn into_model(self) -> Result<model::Task, WireError> {
        let mut t = model::Task::new(self.id.into_owned(), self.context_id.into_owned());
        t.status = self.status.into_model().map_err(|e| e.at("status"))?;
        t.history = each_into_model(self.history, "history", M::into_model)?;
        t.artifacts = each_into_model(self.artifacts, "artifacts", Artifact::into_model)?;
        (t.metadata, t.envelope) =
            take_envelope(owned_meta(self.metadata.map).map(std::sync::Arc::new));
        Ok(t)
    }
}

/// A TaskArtifactUpdateEvent, with artifact parts `P`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", bound(deserialize = "P: Deserialize<'de>"))]
pub struct TaskArtifactUpdateEvent<'a, P> {
    /// The task.
    #[serde(default, alias = "task_id")]
    pub task_id: Str<'a>,
    /// Its conversation.
    #[serde(default, alias = "context_id")]
    pub context_id: Str<'a>,
    /// The artifact, or the chunk of it.
    pub artifact: Artifact<'a, P>,
    /// Appends to an artifact of the same id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub append: Option<bool>,
    /// The last chunk of the artifact.
    #[serde(default, alias = "last_chunk", skip_serializing_if = "Option::is_none")]
    pub last_chunk: Option<bool>,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Meta<'a>,
}

impl<'a, P: Wire<'a, Model = model::Part>> From<&'a model::TaskArtifactUpdateEvent>
    for TaskArtifactUpdateEvent<'a, P>
{
    fn from(a: &'a model::TaskArtifactUpdateEvent) -> Self {
        TaskArtifactUpdateEvent {
            task_id: borrowed(&a.task_id),
            context_id: borrowed(&a.context_id),
            artifact: (&a.artifact).into(),
            append: a.append,
            last_chunk: a.last_chunk,
            metadata: meta(&a.metadata),
        }
    }
}

impl<'a, P: Wire<'a, Model = model::Part>> TaskArtifactUpdateEvent<'a, P> {
    /// The model's event.
    pub fn into_model(self) -> Result<model::TaskArtifactUpdateEvent, WireError> {
        Ok(model::TaskArtifactUpdateEvent {
            task_id: self.task_id.into_owned(),
            context_id: self.context_id.into_owned(),
            artifact: self
                .artifact
                .into_model()
                .map_err(|e| e.at("artifactUpdate.artifact"))?,
            append: self.append,
            last_chunk: self.last_chunk,
            metadata: owned_meta(self.metadata),
        })
    }
}
