//! A2A v0.3's HTTP+JSON wire types: the ProtoJSON of the v0.3 proto, served under `/v1/…`.
//!
//! That form is v1.0's with older names: `Message.content` for `parts`,
//! `Part.file{fileWithUri|fileWithBytes, mimeType, name}` and `Part.data{data}`,
//! `configuration.blocking` and `.pushNotification`, push configs nested under a resource
//! `name`, a `final` flag on status updates, `TASK_STATE_CANCELLED`, and no
//! `referenceTaskIds`. v0.3 peers parse strictly (unknown fields fail), so what goes out
//! carries only v0.3 fields. Enums, tasks and artifacts are otherwise v1.0's, and share its
//! types where the JSON is the same.
//!
//! ```
//! use agentry_a2a::{model, wire::v03};
//! let m = model::Message::text(model::Role::User, "hi");
//! let json = serde_json::to_value(v03::Message::from(&m)).unwrap();
//! assert_eq!(json["content"], serde_json::json!([{"text": "hi"}]));
//! let back: v03::Message = serde_json::from_value(json).unwrap();
//! assert_eq!(back.into_model().unwrap(), m);
//! ```

use std::borrow::Cow;

use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};

use super::task::{Wire, WireState};
use super::v1::{Role, State};
use super::{
    Meta, Str, WireError, borrowed, each_into_model, meta, opt_str, owned_meta, owned_strs, strs,
};
use crate::model::{self, TaskState};

/// A task state as the v0.3 proto spells it (`TASK_STATE_CANCELLED`); read as v1.0's
/// [`State`] reads any spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(transparent)]
pub struct State03(pub State);

impl WireState for State03 {
    fn of(s: TaskState) -> Self {
        State03(State(s))
    }
    fn state(self) -> TaskState {
        self.0.0
    }
}

impl Serialize for State03 {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0.0 {
            TaskState::Canceled => s.serialize_str("TASK_STATE_CANCELLED"),
            _ => self.0.serialize(s),
        }
    }
}

/// `file` of a v0.3 Part.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FilePart<'a> {
    /// A file by URL.
    #[serde(
        default,
        alias = "file_with_uri",
        skip_serializing_if = "Option::is_none"
    )]
    pub file_with_uri: Option<Str<'a>>,
    /// File bytes, base64.
    #[serde(
        default,
        alias = "file_with_bytes",
        skip_serializing_if = "Option::is_none"
    )]
    pub file_with_bytes: Option<Str<'a>>,
    /// The media type.
    #[serde(default, alias = "mime_type", skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<Str<'a>>,
    /// The file's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<Str<'a>>,
}

/// `data` of a v0.3 Part: a Struct under `data` (`{"data": {"data": {…}}}`).
#[derive(Debug, Clone, PartialEq)]
pub enum DataPart<'a> {
    /// The content, written wrapped.
    Wrapped(Cow<'a, Map<String, Value>>),
    /// As read: wrapped in the proto form, bare in the JSON-RPC form (`kind: "data"`).
    Read(Value),
}

impl Serialize for DataPart<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Wrapped<'w> {
            data: &'w Map<String, Value>,
        }
        match self {
            DataPart::Wrapped(m) => Wrapped { data: m }.serialize(s),
            DataPart::Read(v) => v.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for DataPart<'_> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Value::deserialize(d).map(DataPart::Read)
    }
}

/// A v0.3 Part: one of `text`, `file`, `data`. Parts in the JSON-RPC form (`kind`-tagged,
/// `file{bytes|uri}`, bare `data`), which some peers send to this binding too, are read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Part<'a> {
    /// Text content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<Str<'a>>,
    /// A file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<FilePart<'a>>,
    /// Structured content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<DataPart<'a>>,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Meta<'a>,
    /// The JSON-RPC form's discriminator; read, never written.
    #[serde(default, skip_serializing)]
    pub kind: Option<String>,
}

impl<'a> From<&'a model::Part> for Part<'a> {
    fn from(p: &'a model::Part) -> Self {
        match p {
            model::Part::Text(t) => Part {
                text: Some(borrowed(&t.text)),
                metadata: meta(&t.metadata),
                ..Part::default()
            },
            model::Part::File(f) => {
                let (bytes, uri) = match &f.file.content {
                    model::FileContent::Bytes(b) => (Some(borrowed(b)), None),
                    model::FileContent::Uri(u) => (None, Some(borrowed(u))),
                };
                Part {
                    file: Some(FilePart {
                        file_with_uri: uri,
                        file_with_bytes: bytes,
                        mime_type: opt_str(&f.file.mime_type),
                        name: opt_str(&f.file.name),
                    }),
                    metadata: meta(&f.metadata),
                    ..Part::default()
                }
            }
            model::Part::Data(d) => Part {
                data: Some(DataPart::Wrapped(Cow::Borrowed(&d.data))),
                metadata: meta(&d.metadata),
                ..Part::default()
            },
        }
    }
}

impl Part<'_> {
    /// The model's part: exactly one content must be present.
    pub fn into_model(self) -> Result<model::Part, WireError> {
        let metadata = owned_meta(self.metadata);
        let bare = self.kind.as_deref() == Some("data");
        match (self.text, self.file, self.data) {
            (Some(text), None, None) => Ok(model::Part::Text(model::TextPart {
                text: text.into_owned(),
                metadata,
            })),
            (None, Some(f), None) => {
                let content = match (f.file_with_bytes, f.file_with_uri) {
                    (Some(b), None) => model::FileContent::Bytes(b.into_owned()),
                    (None, Some(u)) => model::FileContent::Uri(u.into_owned()),
                    _ => {
                        return Err(WireError {
                            path: "file".into(),
                            message: "needs one of fileWithUri or fileWithBytes".into(),
                        });
                    }
                };
                let nonempty =
                    |s: Option<Str<'_>>| s.filter(|s| !s.is_empty()).map(Cow::into_owned);
                Ok(model::Part::File(model::FilePart {
                    file: model::File {
                        content,
                        mime_type: nonempty(f.mime_type),
                        name: nonempty(f.name),
                    },
                    metadata,
                }))
            }
            (None, None, Some(d)) => {
                let data = match d {
                    DataPart::Wrapped(m) => m.into_owned(),
                    DataPart::Read(Value::Object(m)) if bare => m,
                    DataPart::Read(Value::Object(mut m)) => match m.remove("data") {
                        Some(Value::Object(inner)) => inner,
                        None => Map::new(),
                        Some(_) => {
                            return Err(WireError {
                                path: "data.data".into(),
                                message: "must be an object".into(),
                            });
                        }
                    },
                    DataPart::Read(_) => {
                        return Err(WireError {
                            path: "data".into(),
                            message: "must be an object".into(),
                        });
                    }
                };
                Ok(model::Part::Data(model::DataPart { data, metadata }))
            }
            _ => Err(WireError {
                path: String::new(),
                message: "needs exactly one of text, file or data".into(),
            }),
        }
    }
}

/// A v0.3 Message: its parts are `content`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message<'a> {
    /// The message's id.
    #[serde(alias = "message_id")]
    pub message_id: Str<'a>,
    /// The conversation.
    #[serde(default, alias = "context_id", skip_serializing_if = "Option::is_none")]
    pub context_id: Option<Str<'a>>,
    /// The task it belongs to.
    #[serde(default, alias = "task_id", skip_serializing_if = "Option::is_none")]
    pub task_id: Option<Str<'a>>,
    /// Who wrote it.
    pub role: Role,
    /// Its content (`parts` in the JSON-RPC form, read too).
    #[serde(default, alias = "parts")]
    pub content: Vec<Part<'a>>,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Meta<'a>,
    /// Extensions it uses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<Str<'a>>,
    /// Not in the v0.3 proto; read from peers that send the JSON-RPC form, never written.
    #[serde(default, alias = "reference_task_ids", skip_serializing)]
    pub reference_task_ids: Vec<String>,
}

impl<'a> From<&'a model::Message> for Message<'a> {
    fn from(m: &'a model::Message) -> Self {
        Message {
            message_id: borrowed(&m.message_id),
            context_id: opt_str(&m.context_id),
            task_id: opt_str(&m.task_id),
            role: m.role.into(),
            content: m.parts.iter().map(Part::from).collect(),
            metadata: meta(&m.metadata),
            extensions: strs(&m.extensions),
            reference_task_ids: Vec::new(),
        }
    }
}

impl Message<'_> {
    /// The model's message.
    pub fn into_model(self) -> Result<model::Message, WireError> {
        Ok(model::Message {
            role: self.role.into(),
            parts: each_into_model(self.content, "content", Part::into_model)?,
            message_id: self.message_id.into_owned(),
            task_id: self.task_id.map(Cow::into_owned),
            context_id: self.context_id.map(Cow::into_owned),
            reference_task_ids: self.reference_task_ids,
            extensions: owned_strs(self.extensions),
            metadata: owned_meta(self.metadata),
        })
    }
}

impl<'a> Wire<'a> for Part<'a> {
    type Model = model::Part;
    fn view(m: &'a model::Part) -> Self {
        m.into()
    }
    fn into_model(self) -> Result<model::Part, WireError> {
        Part::into_model(self)
    }
}

impl<'a> Wire<'a> for Message<'a> {
    type Model = model::Message;
    fn view(m: &'a model::Message) -> Self {
        m.into()
    }
    fn into_model(self) -> Result<model::Message, WireError> {
        Message::into_model(self)
    }
}

/// A v0.3 Artifact.
pub type Artifact<'a> = super::task::Artifact<'a, Part<'a>>;

/// A v0.3 TaskStatus (the v0.3 proto's `update` field is sent and read as `message`).
pub type TaskStatus<'a> = super::task::TaskStatus<'a, Message<'a>, State03>;

/// A v0.3 Task.
pub type Task<'a> = super::task::Task<'a, Message<'a>, Part<'a>, State03>;

/// A v0.3 TaskStatusUpdateEvent, with its `final` flag.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatusUpdateEvent<'a> {
    /// The task.
    #[serde(default, alias = "task_id")]
    pub task_id: Str<'a>,
    /// Its conversation.
    #[serde(default, alias = "context_id")]
    pub context_id: Str<'a>,
    /// The new status.
    pub status: TaskStatus<'a>,
    /// The last event of the turn.
    #[serde(default, rename = "final")]
    pub is_final: bool,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Meta<'a>,
}

/// A v0.3 TaskArtifactUpdateEvent.
pub type TaskArtifactUpdateEvent<'a> = super::task::TaskArtifactUpdateEvent<'a, Part<'a>>;

/// A v0.3 StreamResponse (and SendMessageResponse, its first two fields): one field named
/// after the payload's type. The proto names the message `msg`; peers send `message`, which
/// is what goes out, and both are read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StreamResponse<'a> {
    /// The task.
    Task(Task<'a>),
    /// A message (the whole answer).
    #[serde(alias = "msg")]
    Message(Message<'a>),
    /// A status change.
    #[serde(alias = "status_update")]
    StatusUpdate(TaskStatusUpdateEvent<'a>),
    /// An artifact or a chunk of one.
    #[serde(alias = "artifact_update")]
    ArtifactUpdate(TaskArtifactUpdateEvent<'a>),
}

impl<'a> From<&'a model::StreamEvent> for StreamResponse<'a> {
    fn from(e: &'a model::StreamEvent) -> Self {
        match e {
            model::StreamEvent::Task(t) => StreamResponse::Task(t.into()),
            model::StreamEvent::Message(m) => StreamResponse::Message(m.into()),
            model::StreamEvent::StatusUpdate(s) => {
                StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
                    task_id: borrowed(&s.task_id),
                    context_id: borrowed(&s.context_id),
                    status: (&s.status).into(),
                    is_final: s.is_final,
                    metadata: meta(&s.metadata),
                })
            }
            model::StreamEvent::ArtifactUpdate(a) => StreamResponse::ArtifactUpdate(a.into()),
        }
    }
}

impl<'a> From<&'a model::SendMessageResult> for StreamResponse<'a> {
    fn from(r: &'a model::SendMessageResult) -> Self {
        match r {
            model::SendMessageResult::Task(t) => StreamResponse::Task(t.into()),
            model::SendMessageResult::Message(m) => StreamResponse::Message(m.into()),
        }
    }
}

impl StreamResponse<'_> {
    /// The model's event.
    pub fn into_model(self) -> Result<model::StreamEvent, WireError> {
        Ok(match self {
            StreamResponse::Task(t) => {
                model::StreamEvent::Task(t.into_model().map_err(|e| e.at("task"))?)
            }
            StreamResponse::Message(m) => {
                model::StreamEvent::Message(m.into_model().map_err(|e| e.at("message"))?)
            }
            StreamResponse::StatusUpdate(s) => {
                model::StreamEvent::StatusUpdate(model::TaskStatusUpdateEvent {
                    task_id: s.task_id.into_owned(),
                    context_id: s.context_id.into_owned(),
                    status: s
                        .status
                        .into_model()
                        .map_err(|e| e.at("statusUpdate.status"))?,
                    is_final: s.is_final,
                    metadata: owned_meta(s.metadata),
                })
            }
            StreamResponse::ArtifactUpdate(a) => {
                model::StreamEvent::ArtifactUpdate(a.into_model()?)
            }
        })
    }

    /// The model's send result (a task or a message).
    pub fn into_send_result(self) -> Result<model::SendMessageResult, WireError> {
        match self.into_model()? {
            model::StreamEvent::Task(t) => Ok(model::SendMessageResult::Task(t)),
            model::StreamEvent::Message(m) => Ok(model::SendMessageResult::Message(m)),
            _ => Err(WireError {
                path: String::new(),
                message: "a send answers a task or a message".into(),
            }),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Push notification configs.

/// A v0.3 push config's credentials for the webhook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuthenticationInfo<'a> {
    /// HTTP auth schemes.
    #[serde(default)]
    pub schemes: Vec<Str<'a>>,
    /// The credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<Str<'a>>,
}

/// A v0.3 PushNotificationConfig.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PushNotificationConfig<'a> {
    /// The config's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<Str<'a>>,
    /// The webhook.
    pub url: Str<'a>,
    /// A token the webhook checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<Str<'a>>,
    /// Credentials for the webhook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<AuthenticationInfo<'a>>,
}

impl<'a> From<&'a model::PushNotificationConfig> for PushNotificationConfig<'a> {
    fn from(c: &'a model::PushNotificationConfig) -> Self {
        PushNotificationConfig {
            id: opt_str(&c.id),
            url: borrowed(&c.url),
            token: opt_str(&c.token),
            authentication: c.authentication.as_ref().map(|a| AuthenticationInfo {
                schemes: strs(&a.schemes),
                credentials: opt_str(&a.credentials),
            }),
        }
    }
}

impl PushNotificationConfig<'_> {
    /// The model's config (made over v0.3: its notifications go out in v0.3 form).
    pub fn into_model(self) -> model::PushNotificationConfig {
        model::PushNotificationConfig {
            id: self.id.filter(|i| !i.is_empty()).map(Cow::into_owned),
            url: self.url.into_owned(),
            token: self.token.map(Cow::into_owned),
            authentication: self.authentication.map(|a| {
                model::PushNotificationAuthenticationInfo {
                    schemes: if a.schemes.is_empty() {
                        vec!["Bearer".to_owned()]
                    } else {
                        owned_strs(a.schemes)
                    },
                    credentials: a.credentials.map(Cow::into_owned),
                }
            }),
            body_version: None,
        }
    }
}

/// A v0.3 TaskPushNotificationConfig: the config under a resource name
/// `tasks/{task}/pushNotificationConfigs/{config}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskPushNotificationConfig<'a> {
    /// The resource name.
    #[serde(default)]
    pub name: String,
    /// The config.
    #[serde(alias = "push_notification_config")]
    pub push_notification_config: PushNotificationConfig<'a>,
}

impl<'a> From<&'a model::TaskPushNotificationConfig> for TaskPushNotificationConfig<'a> {
    fn from(c: &'a model::TaskPushNotificationConfig) -> Self {
        let cfg = &c.push_notification_config;
        TaskPushNotificationConfig {
            name: format!(
                "tasks/{}/pushNotificationConfigs/{}",
                c.task_id,
                cfg.id.as_deref().unwrap_or_default()
            ),
            push_notification_config: cfg.into(),
        }
    }
}

impl TaskPushNotificationConfig<'_> {
    /// The model's config; the task is the one the name says.
    pub fn into_model(self) -> model::TaskPushNotificationConfig {
        let task_id = self
            .name
            .strip_prefix("tasks/")
            .and_then(|n| n.split('/').next())
            .unwrap_or_default()
            .to_owned();
        model::TaskPushNotificationConfig {
            task_id,
            push_notification_config: self.push_notification_config.into_model(),
        }
    }
}

/// The body of v0.3's `POST /v1/tasks/{id}/pushNotificationConfigs`:
/// `{parent, configId, config}`. Peers also send the `config` alone, or a bare
/// PushNotificationConfig; [`CreatePushRequest::into_model`]'s caller reads those.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreatePushRequest<'a> {
    /// `tasks/{id}`.
    #[serde(default)]
    pub parent: String,
    /// The config's id.
    #[serde(default, alias = "config_id")]
    pub config_id: String,
    /// The config.
    pub config: TaskPushNotificationConfig<'a>,
}

impl<'a> From<&'a model::TaskPushNotificationConfig> for CreatePushRequest<'a> {
    fn from(c: &'a model::TaskPushNotificationConfig) -> Self {
        CreatePushRequest {
            parent: format!("tasks/{}", c.task_id),
            config_id: c.push_notification_config.id.clone().unwrap_or_default(),
            config: c.into(),
        }
    }
}

/// The push-config create body in any of the forms peers send, read by shape.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum CreatePushBody<'a> {
    /// `{parent, configId, config}`.
    Request(CreatePushRequest<'a>),
    /// `{name, pushNotificationConfig}`.
    Config(TaskPushNotificationConfig<'a>),
    /// A bare PushNotificationConfig.
    Bare(PushNotificationConfig<'a>),
}

impl CreatePushBody<'_> {
    /// The model's config for `task_id` (the path's).
    pub fn into_model(self, task_id: &str) -> model::TaskPushNotificationConfig {
        let (config_id, cfg) = match self {
            CreatePushBody::Request(r) => (r.config_id, r.config.push_notification_config),
            CreatePushBody::Config(c) => (String::new(), c.push_notification_config),
            CreatePushBody::Bare(c) => (String::new(), c),
        };
        let mut cfg = cfg.into_model();
        if cfg.id.is_none() && !config_id.is_empty() {
            cfg.id = Some(config_id);
        }
        model::TaskPushNotificationConfig {
            task_id: task_id.to_owned(),
            push_notification_config: cfg,
        }
    }
}

/// ListTaskPushNotificationConfigResponse.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListPushConfigsResponse<'a> {
    /// The task's configs.
    #[serde(default)]
    pub configs: Vec<TaskPushNotificationConfig<'a>>,
    /// Where the next page starts (agentry answers in one page).
    #[serde(default, alias = "next_page_token")]
    pub next_page_token: String,
}

impl<'a> From<&'a [model::TaskPushNotificationConfig]> for ListPushConfigsResponse<'a> {
    fn from(list: &'a [model::TaskPushNotificationConfig]) -> Self {
        ListPushConfigsResponse {
            configs: list.iter().map(TaskPushNotificationConfig::from).collect(),
            next_page_token: String::new(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Sending.

/// A v0.3 SendMessageConfiguration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageConfiguration<'a> {
    /// Output media types the client accepts.
    #[serde(
        default,
        alias = "accepted_output_modes",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub accepted_output_modes: Vec<Str<'a>>,
    /// A webhook for the task's updates.
    #[serde(
        default,
        alias = "push_notification",
        skip_serializing_if = "Option::is_none"
    )]
    pub push_notification: Option<PushNotificationConfig<'a>>,
    /// How many messages of history the answer carries.
    #[serde(
        default,
        alias = "history_length",
        skip_serializing_if = "Option::is_none"
    )]
    pub history_length: Option<i64>,
    /// Wait for the turn to end. A plain proto3 bool: absent is `false` (the reference
    /// SDK's server reads it so, and its client leaves `false` out), so it always goes out.
    #[serde(default)]
    pub blocking: bool,
}

/// A v0.3 SendMessageRequest: the proto's `request`, which peers send as `message`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageRequest<'a> {
    /// The message.
    #[serde(alias = "request")]
    pub message: Message<'a>,
    /// How to answer.
    #[serde(default)]
    pub configuration: SendMessageConfiguration<'a>,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Meta<'a>,
}

impl<'a> From<&'a model::MessageSendParams> for SendMessageRequest<'a> {
    fn from(p: &'a model::MessageSendParams) -> Self {
        let c = p.configuration.as_ref();
        SendMessageRequest {
            message: (&p.message).into(),
            configuration: SendMessageConfiguration {
                accepted_output_modes: strs(
                    c.and_then(|c| c.accepted_output_modes.as_deref())
                        .unwrap_or_default(),
                ),
                push_notification: c
                    .and_then(|c| c.push_notification_config.as_ref())
                    .map(PushNotificationConfig::from),
                history_length: c.and_then(|c| c.history_length),
                blocking: c.and_then(|c| c.blocking) != Some(false),
            },
            metadata: meta(&p.metadata),
        }
    }
}

impl SendMessageRequest<'_> {
    /// The model's params.
    pub fn into_model(self) -> Result<model::MessageSendParams, WireError> {
        let c = self.configuration;
        Ok(model::MessageSendParams {
            message: self.message.into_model().map_err(|e| e.at("message"))?,
            configuration: Some(model::MessageSendConfiguration {
                accepted_output_modes: (!c.accepted_output_modes.is_empty())
                    .then(|| owned_strs(c.accepted_output_modes)),
                history_length: c.history_length,
                push_notification_config: c.push_notification.map(|p| p.into_model()),
                blocking: Some(c.blocking),
            }),
            metadata: owned_meta(self.metadata),
        })
    }
}
