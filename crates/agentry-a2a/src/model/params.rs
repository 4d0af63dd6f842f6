//! Method parameters and results.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use super::message::{Message, Metadata};
use super::task::{Task, TaskArtifactUpdateEvent, TaskStatusUpdateEvent};

/// Parameters of `message/send` and `message/stream`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageSendParams {
    /// The message.
    pub message: Message,
    /// How to answer: output modes, history, push notifications, blocking.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<MessageSendConfiguration>,
    /// Extension data for the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

impl MessageSendParams {
    /// A request for `message` with no configuration.
    pub fn new(message: Message) -> Self {
        MessageSendParams {
            message,
            configuration: None,
            metadata: None,
        }
    }
}

/// How the client wants a sent message answered.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageSendConfiguration {
    /// Media types the client accepts in the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_output_modes: Option<Vec<String>>,
    /// Signed on the wire so that a negative value is a clear -32602, not a type error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_length: Option<i64>,
    /// A webhook to notify of the task's changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_notification_config: Option<PushNotificationConfig>,
    /// Wait for the task to finish its turn (default `true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocking: Option<bool>,
}

/// A webhook that receives the task on every state change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PushNotificationConfig {
    /// Its id among the task's configs (the server picks one when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Where notifications are POSTed.
    pub url: String,
    /// Sent back with each notification, for the receiver to check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// How the server authenticates to the webhook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<PushNotificationAuthenticationInfo>,
    /// The protocol version whose notification body the webhook gets: `Some("1.0")` (a
    /// `StreamResponse`) for configs made over v1.0, v0.3's bare Task otherwise. Kept with the
    /// config in the store; not part of either version's wire form.
    #[serde(
        default,
        rename = "x-agentry-protocol",
        skip_serializing_if = "Option::is_none"
    )]
    pub body_version: Option<String>,
}

/// How the server authenticates to a webhook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PushNotificationAuthenticationInfo {
    /// The schemes (`Bearer`, ...).
    pub schemes: Vec<String>,
    /// The credentials to send.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<String>,
}

/// A push config together with the task it belongs to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskPushNotificationConfig {
    /// The task.
    pub task_id: String,
    /// The config.
    pub push_notification_config: PushNotificationConfig,
}

/// Parameters of `tasks/get`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskQueryParams {
    /// The task.
    pub id: String,
    /// At most this many history messages, most recent last (0: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_length: Option<i64>,
    /// Extension data for the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// Parameters of `tasks/cancel`, `tasks/resubscribe` and push-config listing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskIdParams {
    /// The task.
    pub id: String,
    /// Extension data for the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// Parameters of `tasks/pushNotificationConfig/get`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetTaskPushNotificationConfigParams {
    /// The task.
    pub id: String,
    /// The config (the task's only or first one when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_notification_config_id: Option<String>,
    /// Extension data for the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// Parameters of `tasks/pushNotificationConfig/delete`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteTaskPushNotificationConfigParams {
    /// The task.
    pub id: String,
    /// The config.
    pub push_notification_config_id: String,
    /// Extension data for the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// What `message/send` returns: a task, or a direct message with no task.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum SendMessageResult {
    /// The task the message started or continued.
    Task(Task),
    /// A direct answer, with no task.
    Message(Message),
}

/// One item of a stream (`message/stream`, `tasks/resubscribe`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum StreamEvent {
    /// The task as it stands (first event of a stream).
    Task(Task),
    /// A direct answer, with no task (the stream's only event).
    Message(Message),
    /// A change of the task's status.
    StatusUpdate(TaskStatusUpdateEvent),
    /// A new or extended artifact.
    ArtifactUpdate(TaskArtifactUpdateEvent),
}

impl StreamEvent {
    /// The final status update that `task`'s current status stands for: what ends a stream
    /// whose task is known (from a snapshot) to have ended its turn.
    pub fn final_status(task: &Task) -> Self {
        StreamEvent::StatusUpdate(TaskStatusUpdateEvent {
            task_id: task.id.clone(),
            context_id: task.context_id.clone(),
            status: task.status.clone(),
            is_final: true,
            metadata: None,
        })
    }

    /// This event ends the stream.
    pub fn is_final(&self) -> bool {
        match self {
            StreamEvent::Message(_) => true,
            StreamEvent::StatusUpdate(s) => s.is_final,
            StreamEvent::Task(t) => t.status.state.is_terminal(),
            StreamEvent::ArtifactUpdate(_) => false,
        }
    }
}

/// Reads the `kind` discriminator, then decodes the matching variant. Peers put `kind` anywhere
/// in the object, so an internally tagged derive (which needs it buffered anyway) gains nothing.
fn kind_of<E: serde::de::Error>(v: &Value) -> Result<String, E> {
    match v.get("kind") {
        Some(Value::String(k)) => Ok(k.clone()),
        Some(_) => Err(E::custom("`kind` must be a string")),
        None => Err(E::missing_field("kind")),
    }
}

impl<'de> Deserialize<'de> for SendMessageResult {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let v = Value::deserialize(d)?;
        match kind_of::<D::Error>(&v)?.as_str() {
            "task" => Task::deserialize(v)
                .map(Self::Task)
                .map_err(D::Error::custom),
            "message" => Message::deserialize(v)
                .map(Self::Message)
                .map_err(D::Error::custom),
            k => Err(D::Error::unknown_variant(k, &["task", "message"])),
        }
    }
}

impl<'de> Deserialize<'de> for StreamEvent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let v = Value::deserialize(d)?;
        match kind_of::<D::Error>(&v)?.as_str() {
            "task" => Task::deserialize(v)
                .map(Self::Task)
                .map_err(D::Error::custom),
            "message" => Message::deserialize(v)
                .map(Self::Message)
                .map_err(D::Error::custom),
            "status-update" => TaskStatusUpdateEvent::deserialize(v)
                .map(Self::StatusUpdate)
                .map_err(D::Error::custom),
            "artifact-update" => TaskArtifactUpdateEvent::deserialize(v)
                .map(Self::ArtifactUpdate)
                .map_err(D::Error::custom),
            k => Err(D::Error::unknown_variant(
                k,
                &["task", "message", "status-update", "artifact-update"],
            )),
        }
    }
}

/// Parameters of `ListTasks` (v1.0; v0.3 has no JSON-RPC listing). Tasks come newest first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksParams {
    /// Only tasks of this conversation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    /// Only tasks in this state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<super::task::TaskState>,
    /// 1 to 100; absent or 0 means 50.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_size: Option<i64>,
    /// The `nextPageToken` of the previous page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_token: Option<String>,
    /// At most this many history messages per task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_length: Option<i64>,
    /// Only tasks whose status changed after this RFC 3339 instant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_timestamp_after: Option<String>,
    /// Include each task's artifacts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_artifacts: Option<bool>,
}

impl ListTasksParams {
    /// The page size when the request gives none.
    pub const DEFAULT_PAGE_SIZE: usize = 50;
    /// The largest page size served.
    pub const MAX_PAGE_SIZE: usize = 100;
}

/// One page of `ListTasks`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksResult {
    /// This page's tasks, newest first.
    pub tasks: Vec<Task>,
    /// Empty on the last page.
    #[serde(default)]
    pub next_page_token: String,
    /// The page size used.
    #[serde(default)]
    pub page_size: i64,
    /// How many tasks match, over all pages.
    #[serde(default)]
    pub total_size: i64,
}
