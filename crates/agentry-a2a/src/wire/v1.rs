//! A2A v1.0's wire types: the ProtoJSON form of `a2a.proto` v1.0, which both bindings carry
//! (JSON-RPC params and results, HTTP+JSON bodies, SSE items, push notification bodies).
//!
//! Encoding borrows: `From<&model::T>` makes a view of the model whose strings and metadata
//! are references, serialized straight to bytes. Decoding owns: a wire value is read once
//! and moved into the model by `into_model` (which names the failing field's path), so
//! nothing is copied twice and no JSON tree is rewritten on the way.
//!
//! Read leniently where peers differ: a field by its proto name as well as its JSON name
//! (`message_id`), v0.3 spellings of enums (`user`, `completed`, `TASK_STATE_CANCELLED`),
//! ts-proto's `UNRECOGNIZED`, lists and strings ProtoJSON leaves out when empty, a v0.3
//! `kind`-tagged part inside a v1.0 message.
//!
//! ```
//! use agentry_a2a::{model, wire::v1};
//! let m = model::Message::text(model::Role::User, "hi");
//! let json = serde_json::to_value(v1::Message::from(&m)).unwrap();
//! assert_eq!(json["role"], "ROLE_USER");
//! assert_eq!(json["parts"], serde_json::json!([{"text": "hi"}]));
//! let back: v1::Message = serde_json::from_value(json).unwrap();
//! assert_eq!(back.into_model().unwrap(), m);
//! ```

use std::borrow::Cow;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use super::task::{Wire, WireState};
use super::{
    Meta, Str, WireError, borrowed, each_into_model, is_empty, meta, opt_str, owned_meta,
    owned_strs, strs,
};
use crate::model::{self, Metadata, TaskState};

// ---------------------------------------------------------------------------------------------
// Enums.

/// `ROLE_USER` / `ROLE_AGENT` (v0.3's `user` / `agent` read too).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Role {
    /// The client's side.
    #[serde(rename = "ROLE_USER")]
    User,
    /// The agent's side.
    #[serde(rename = "ROLE_AGENT")]
    Agent,
}

/// Read from the string as it is in the body: the derived enum visitor took ~300
/// instructions for one role, every message.
impl<'de> Deserialize<'de> for Role {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Names;
        impl serde::de::Visitor<'_> for Names {
            type Value = Role;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a role (ROLE_USER or ROLE_AGENT)")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Role, E> {
                match s {
                    "ROLE_USER" | "user" => Ok(Role::User),
                    "ROLE_AGENT" | "agent" => Ok(Role::Agent),
                    other => Err(E::unknown_variant(other, &["ROLE_USER", "ROLE_AGENT"])),
                }
            }
        }
        d.deserialize_str(Names)
    }
}

impl From<model::Role> for Role {
    fn from(r: model::Role) -> Self {
        match r {
            model::Role::User => Role::User,
            model::Role::Agent => Role::Agent,
        }
    }
}

impl From<Role> for model::Role {
    fn from(r: Role) -> Self {
        match r {
            Role::User => model::Role::User,
            Role::Agent => model::Role::Agent,
        }
    }
}

/// A task state as ProtoJSON spells it (`TASK_STATE_COMPLETED`). Reads v0.3's kebab-case
/// names, the v0.3 proto's `TASK_STATE_CANCELLED` and ts-proto's `UNRECOGNIZED` too; a
/// missing or null state is `unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct State(pub TaskState);

impl Default for State {
    fn default() -> Self {
        State(TaskState::Unknown)
    }
}

/// ProtoJSON's name of a task state.
pub fn state_name(s: TaskState) -> &'static str {
    match s {
        TaskState::Submitted => "TASK_STATE_SUBMITTED",
        TaskState::Working => "TASK_STATE_WORKING",
        TaskState::InputRequired => "TASK_STATE_INPUT_REQUIRED",
        TaskState::Completed => "TASK_STATE_COMPLETED",
        TaskState::Canceled => "TASK_STATE_CANCELED",
        TaskState::Failed => "TASK_STATE_FAILED",
        TaskState::Rejected => "TASK_STATE_REJECTED",
        TaskState::AuthRequired => "TASK_STATE_AUTH_REQUIRED",
        TaskState::Unknown => "TASK_STATE_UNSPECIFIED",
    }
}

/// A task state from any spelling [`State`] reads.
pub fn parse_state(s: &str) -> Option<TaskState> {
    match s {
        "TASK_STATE_UNSPECIFIED" | "UNRECOGNIZED" => Some(TaskState::Unknown),
        "TASK_STATE_CANCELLED" => Some(TaskState::Canceled),
        _ => TaskState::ALL
            .into_iter()
            .find(|t| state_name(*t) == s || t.as_str() == s),
    }
}

impl Serialize for State {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(state_name(self.0))
    }
}

impl WireState for State {
    fn of(s: TaskState) -> Self {
        State(s)
    }
    fn state(self) -> TaskState {
        self.0
    }
}

impl<'de> Deserialize<'de> for State {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Option::<Cow<'de, str>>::deserialize(d)? {
            None => Ok(State::default()),
            Some(s) => parse_state(&s)
                .map(State)
                .ok_or_else(|| serde::de::Error::custom(format!("unknown task state {s:?}"))),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Parts, messages, artifacts.

/// A data part's content: any JSON value in v1.0 (the model's is an object; a bare value
/// travels into it as `{"value": …}`).
#[derive(Debug, Clone, PartialEq)]
pub enum Data<'a> {
    /// An object (every data part agentry sends).
    Object(Cow<'a, Map<String, Value>>),
    /// Any other JSON value.
    Other(Value),
}

impl Serialize for Data<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Data::Object(m) => m.serialize(s),
            Data::Other(v) => v.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Data<'_> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Value::deserialize(d)? {
            Value::Object(m) => Data::Object(Cow::Owned(m)),
            other => Data::Other(other),
        })
    }
}

/// One Part: exactly one of `text`, `raw` (base64 bytes), `url` or `data`, with optional
/// `mediaType`, `filename` and `metadata`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Part<'a> {
    /// Text content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<Str<'a>>,
    /// File bytes, base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<Str<'a>>,
    /// A file by URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<Str<'a>>,
    /// Structured content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Data<'a>>,
    /// The content's media type.
    #[serde(default, alias = "media_type", skip_serializing_if = "Option::is_none")]
    pub media_type: Option<Str<'a>>,
    /// A file's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<Str<'a>>,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Meta<'a>,
    /// v0.3's discriminator, from a lenient peer that sends v0.3 parts; read, never written.
    #[serde(default, skip_serializing)]
    pub kind: Option<String>,
    /// v0.3's file object (with `kind: "file"`); read, never written.
    #[serde(default, skip_serializing)]
    pub file: Option<model::File>,
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
                let (raw, url) = match &f.file.content {
                    model::FileContent::Bytes(b) => (Some(borrowed(b)), None),
                    model::FileContent::Uri(u) => (None, Some(borrowed(u))),
                };
                Part {
                    raw,
                    url,
                    media_type: opt_str(&f.file.mime_type),
                    filename: opt_str(&f.file.name),
                    metadata: meta(&f.metadata),
                    ..Part::default()
                }
            }
            model::Part::Data(d) => Part {
                data: Some(Data::Object(Cow::Borrowed(&d.data))),
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
        if let Some(kind) = self.kind {
            return v03_part(kind, self.text, self.file, self.data, metadata);
        }
        let present = [
            ("text", self.text.is_some()),
            ("raw", self.raw.is_some()),
            ("url", self.url.is_some()),
            ("data", self.data.is_some()),
        ];
        // Named only for the error: a part is read per request, most with one content.
        if present.iter().filter(|(_, is)| *is).count() > 1 {
            let names: Vec<&str> = present
                .iter()
                .filter_map(|(name, is)| is.then_some(*name))
                .collect();
            return Err(WireError::new(format!(
                "has {}: a part carries exactly one",
                names.join(" and ")
            )));
        }
        let nonempty = |s: Option<Str<'_>>| s.filter(|s| !s.is_empty()).map(Cow::into_owned);
        if let Some(text) = self.text {
            return Ok(model::Part::Text(model::TextPart {
                text: text.into_owned(),
                metadata,
            }));
        }
        if let Some(data) = self.data {
            let data = match data {
                Data::Object(m) => m.into_owned(),
                Data::Other(v) => Map::from_iter([("value".to_owned(), v)]),
            };
            return Ok(model::Part::Data(model::DataPart { data, metadata }));
        }
        let content = match (self.raw, self.url) {
            (Some(b), _) => model::FileContent::Bytes(b.into_owned()),
            (_, Some(u)) => model::FileContent::Uri(u.into_owned()),
            _ => return Err(WireError::new("needs one of text, raw, url or data")),
        };
        Ok(model::Part::File(model::FilePart {
            file: model::File {
                content,
                mime_type: nonempty(self.media_type),
                name: nonempty(self.filename),
            },
            metadata,
        }))
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

/// A part in v0.3's `kind`-tagged form, as a lenient v1.0 peer may send it.
fn v03_part(
    kind: String,
    text: Option<Str<'_>>,
    file: Option<model::File>,
    data: Option<Data<'_>>,
    metadata: Option<Metadata>,
) -> Result<model::Part, WireError> {
    match kind.as_str() {
        "text" => Ok(model::Part::Text(model::TextPart {
            text: text
                .ok_or_else(|| WireError::new("needs `text`"))?
                .into_owned(),
            metadata,
        })),
        "file" => Ok(model::Part::File(model::FilePart {
            file: file.ok_or_else(|| WireError::new("needs `file`"))?,
            metadata,
        })),
        "data" => match data {
            Some(Data::Object(m)) => Ok(model::Part::Data(model::DataPart {
                data: m.into_owned(),
                metadata,
            })),
            _ => Err(WireError::new("needs `data`, an object")),
        },
        other => Err(WireError::new(format!(
            "has an unknown kind {other:?} (text, file or data)"
        ))),
    }
}

/// A Message.
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
    /// Its content (ProtoJSON leaves an empty list out).
    #[serde(default)]
    pub parts: Vec<Part<'a>>,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Meta<'a>,
    /// Extensions it uses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<Str<'a>>,
    /// Tasks it refers to.
    #[serde(
        default,
        alias = "reference_task_ids",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub reference_task_ids: Vec<Str<'a>>,
}

impl<'a> From<&'a model::Message> for Message<'a> {
    fn from(m: &'a model::Message) -> Self {
        Message {
            message_id: borrowed(&m.message_id),
            context_id: opt_str(&m.context_id),
            task_id: opt_str(&m.task_id),
            role: m.role.into(),
            parts: m.parts.iter().map(Part::from).collect(),
            metadata: meta(&m.metadata),
            extensions: strs(&m.extensions),
            reference_task_ids: strs(&m.reference_task_ids),
        }
    }
}

impl Message<'_> {
    /// The model's message.
    pub fn into_model(self) -> Result<model::Message, WireError> {
        Ok(model::Message {
            role: self.role.into(),
            parts: each_into_model(self.parts, "parts", Part::into_model)?,
            message_id: self.message_id.into_owned(),
            task_id: self.task_id.map(Cow::into_owned),
            context_id: self.context_id.map(Cow::into_owned),
            reference_task_ids: owned_strs(self.reference_task_ids),
            extensions: owned_strs(self.extensions),
            metadata: owned_meta(self.metadata),
        })
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

/// An Artifact.
pub type Artifact<'a> = super::task::Artifact<'a, Part<'a>>;

// ---------------------------------------------------------------------------------------------
// Tasks and events.

/// A TaskStatus.
pub type TaskStatus<'a> = super::task::TaskStatus<'a, Message<'a>, State>;

/// A Task.
pub type Task<'a> = super::task::Task<'a, Message<'a>, Part<'a>, State>;

/// A TaskStatusUpdateEvent. v1.0 has no `final` flag: a state that ends the turn does.
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
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Meta<'a>,
}

/// A TaskArtifactUpdateEvent.
pub type TaskArtifactUpdateEvent<'a> = super::task::TaskArtifactUpdateEvent<'a, Part<'a>>;

/// A StreamResponse: one stream item (and a push notification's body), wrapped in a field
/// named after its type (`{"statusUpdate": …}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StreamResponse<'a> {
    /// The task.
    Task(Task<'a>),
    /// A message (the whole answer).
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
                    metadata: meta(&s.metadata),
                })
            }
            model::StreamEvent::ArtifactUpdate(a) => StreamResponse::ArtifactUpdate(a.into()),
        }
    }
}

impl StreamResponse<'_> {
    /// The model's event; a status update is final when its state ends the turn.
    pub fn into_model(self) -> Result<model::StreamEvent, WireError> {
        Ok(match self {
            StreamResponse::Task(t) => {
                model::StreamEvent::Task(t.into_model().map_err(|e| e.at("task"))?)
            }
            StreamResponse::Message(m) => {
                model::StreamEvent::Message(m.into_model().map_err(|e| e.at("message"))?)
            }
            StreamResponse::StatusUpdate(s) => {
                let status = s
                    .status
                    .into_model()
                    .map_err(|e| e.at("statusUpdate.status"))?;
                model::StreamEvent::StatusUpdate(model::TaskStatusUpdateEvent {
                    task_id: s.task_id.into_owned(),
                    context_id: s.context_id.into_owned(),
                    is_final: status.state.ends_turn(),
                    status,
                    metadata: owned_meta(s.metadata),
                })
            }
            StreamResponse::ArtifactUpdate(a) => {
                model::StreamEvent::ArtifactUpdate(a.into_model()?)
            }
        })
    }
}

/// A SendMessageResponse: `{"task": …}` or `{"message": …}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SendMessageResponse<'a> {
    /// The task the message started or continued.
    Task(Task<'a>),
    /// A direct answer.
    Message(Message<'a>),
}

impl<'a> From<&'a model::SendMessageResult> for SendMessageResponse<'a> {
    fn from(r: &'a model::SendMessageResult) -> Self {
        match r {
            model::SendMessageResult::Task(t) => SendMessageResponse::Task(t.into()),
            model::SendMessageResult::Message(m) => SendMessageResponse::Message(m.into()),
        }
    }
}

impl SendMessageResponse<'_> {
    /// The model's result.
    pub fn into_model(self) -> Result<model::SendMessageResult, WireError> {
        Ok(match self {
            SendMessageResponse::Task(t) => {
                model::SendMessageResult::Task(t.into_model().map_err(|e| e.at("task"))?)
            }
            SendMessageResponse::Message(m) => {
                model::SendMessageResult::Message(m.into_model().map_err(|e| e.at("message"))?)
            }
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Push notification configs.

/// A push config's credentials for the webhook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuthenticationInfo<'a> {
    /// The HTTP auth scheme (`Bearer` when left out).
    #[serde(default = "bearer")]
    pub scheme: Str<'a>,
    /// The credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<Str<'a>>,
}

fn bearer() -> Str<'static> {
    Cow::Borrowed("Bearer")
}

/// A TaskPushNotificationConfig, v1.0's flat form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushConfig<'a> {
    /// The config's id (empty or absent: the server picks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<Str<'a>>,
    /// The task (empty inside a send's configuration).
    #[serde(default, alias = "task_id", skip_serializing_if = "is_empty")]
    pub task_id: Str<'a>,
    /// The webhook.
    pub url: Str<'a>,
    /// A token the webhook checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<Str<'a>>,
    /// Credentials for the webhook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<AuthenticationInfo<'a>>,
}

impl<'a> From<&'a model::TaskPushNotificationConfig> for PushConfig<'a> {
    fn from(c: &'a model::TaskPushNotificationConfig) -> Self {
        let mut out = PushConfig::from(&c.push_notification_config);
        out.task_id = borrowed(&c.task_id);
        out
    }
}

impl<'a> From<&'a model::PushNotificationConfig> for PushConfig<'a> {
    fn from(cfg: &'a model::PushNotificationConfig) -> Self {
        PushConfig {
            id: opt_str(&cfg.id),
            task_id: Cow::Borrowed(""),
            url: borrowed(&cfg.url),
            token: opt_str(&cfg.token),
            authentication: cfg.authentication.as_ref().map(|a| AuthenticationInfo {
                scheme: a.schemes.first().map_or(Cow::Borrowed(""), |s| borrowed(s)),
                credentials: opt_str(&a.credentials),
            }),
        }
    }
}

impl PushConfig<'_> {
    /// The model's config. `body_version` is left unset: the side that stores it says in
    /// which version its notifications go out.
    pub fn into_model(self) -> model::TaskPushNotificationConfig {
        model::TaskPushNotificationConfig {
            task_id: self.task_id.into_owned(),
            push_notification_config: model::PushNotificationConfig {
                id: self.id.filter(|i| !i.is_empty()).map(Cow::into_owned),
                url: self.url.into_owned(),
                token: self.token.map(Cow::into_owned),
                authentication: self.authentication.map(|a| {
                    model::PushNotificationAuthenticationInfo {
                        schemes: vec![a.scheme.into_owned()],
                        credentials: a.credentials.map(Cow::into_owned),
                    }
                }),
                body_version: None,
            },
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Requests.

/// A SendMessageConfiguration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageConfiguration<'a> {
    /// Output media types the client accepts.
    #[serde(
        default,
        alias = "accepted_output_modes",
        skip_serializing_if = "Option::is_none"
    )]
    pub accepted_output_modes: Option<Vec<Str<'a>>>,
    /// How many messages of history the answer carries.
    #[serde(
        default,
        alias = "history_length",
        skip_serializing_if = "Option::is_none"
    )]
    pub history_length: Option<i64>,
    /// Answer at once, without waiting for the turn to end.
    #[serde(
        default,
        alias = "return_immediately",
        skip_serializing_if = "Option::is_none"
    )]
    pub return_immediately: Option<bool>,
    /// A webhook for the task's updates.
    #[serde(
        default,
        alias = "task_push_notification_config",
        skip_serializing_if = "Option::is_none"
    )]
    pub task_push_notification_config: Option<PushConfig<'a>>,
    /// v0.3's `blocking`, from a lenient peer; read, never written.
    #[serde(default, skip_serializing)]
    pub blocking: Option<bool>,
    /// v0.3's nested push config, from a lenient peer; read, never written.
    #[serde(default, skip_serializing)]
    pub push_notification_config: Option<model::PushNotificationConfig>,
}

/// A SendMessageRequest (the params of `SendMessage` and `SendStreamingMessage`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageRequest<'a> {
    /// The message.
    pub message: Message<'a>,
    /// How to answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<SendMessageConfiguration<'a>>,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Meta<'a>,
}

impl<'a> From<&'a model::MessageSendParams> for SendMessageRequest<'a> {
    fn from(p: &'a model::MessageSendParams) -> Self {
        SendMessageRequest {
            message: (&p.message).into(),
            configuration: p.configuration.as_ref().map(|c| SendMessageConfiguration {
                accepted_output_modes: c.accepted_output_modes.as_deref().map(strs),
                history_length: c.history_length,
                return_immediately: c.blocking.map(|b| !b),
                task_push_notification_config: c
                    .push_notification_config
                    .as_ref()
                    .map(PushConfig::from),
                blocking: None,
                push_notification_config: None,
            }),
            metadata: meta(&p.metadata),
        }
    }
}

impl SendMessageRequest<'_> {
    /// The model's params (a push config's `body_version` left unset, as
    /// [`PushConfig::into_model`] leaves it: the side that stores it decides).
    pub fn into_model(self) -> Result<model::MessageSendParams, WireError> {
        let configuration = self.configuration.map(|c| {
            let push = c
                .task_push_notification_config
                .map(|p| p.into_model().push_notification_config)
                .or(c.push_notification_config);
            model::MessageSendConfiguration {
                accepted_output_modes: c.accepted_output_modes.map(owned_strs),
                history_length: c.history_length,
                push_notification_config: push,
                blocking: c.return_immediately.map(|r| !r).or(c.blocking),
            }
        });
        Ok(model::MessageSendParams {
            message: self.message.into_model().map_err(|e| e.at("message"))?,
            configuration,
            metadata: owned_meta(self.metadata),
        })
    }
}

/// GetTaskRequest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetTaskRequest<'a> {
    /// The task.
    pub id: Str<'a>,
    /// How many messages of history to return.
    #[serde(
        default,
        alias = "history_length",
        skip_serializing_if = "Option::is_none"
    )]
    pub history_length: Option<i64>,
}

/// The params of the methods that name a task only (`CancelTask`, `SubscribeToTask`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskIdRequest<'a> {
    /// The task.
    pub id: Str<'a>,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Meta<'a>,
}

/// The params that name a task's push config (`Get`/`Delete`/`List…PushNotificationConfig…`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushConfigRequest<'a> {
    /// The task.
    #[serde(alias = "task_id")]
    pub task_id: Str<'a>,
    /// The config (not for listing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<Str<'a>>,
}

/// ListTasksRequest.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksRequest<'a> {
    /// Only this conversation's tasks.
    #[serde(default, alias = "context_id", skip_serializing_if = "Option::is_none")]
    pub context_id: Option<Str<'a>>,
    /// Only tasks in this state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<State>,
    /// At most this many.
    #[serde(default, alias = "page_size", skip_serializing_if = "Option::is_none")]
    pub page_size: Option<i64>,
    /// Where the previous page ended.
    #[serde(default, alias = "page_token", skip_serializing_if = "Option::is_none")]
    pub page_token: Option<Str<'a>>,
    /// How many messages of history each task carries.
    #[serde(
        default,
        alias = "history_length",
        skip_serializing_if = "Option::is_none"
    )]
    pub history_length: Option<i64>,
    /// Only tasks whose status changed after this time (RFC 3339).
    #[serde(
        default,
        alias = "status_timestamp_after",
        skip_serializing_if = "Option::is_none"
    )]
    pub status_timestamp_after: Option<Str<'a>>,
    /// Whether tasks carry their artifacts.
    #[serde(
        default,
        alias = "include_artifacts",
        skip_serializing_if = "Option::is_none"
    )]
    pub include_artifacts: Option<bool>,
}

impl<'a> From<&'a model::ListTasksParams> for ListTasksRequest<'a> {
    fn from(l: &'a model::ListTasksParams) -> Self {
        ListTasksRequest {
            context_id: opt_str(&l.context_id),
            status: l.status.map(State),
            page_size: l.page_size,
            page_token: opt_str(&l.page_token),
            history_length: l.history_length,
            status_timestamp_after: opt_str(&l.status_timestamp_after),
            include_artifacts: l.include_artifacts,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// List answers.

/// ProtoJSON may write integers as strings; these are 32-bit, but read both.
fn lenient_int<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    match Option::<Value>::deserialize(d)? {
        None => Ok(0),
        Some(v) => v
            .as_i64()
            .or_else(|| v.as_str()?.parse().ok())
            .ok_or_else(|| serde::de::Error::custom(format!("expected an integer, got {v}"))),
    }
}

/// ListTasksResponse.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksResponse<'a> {
    /// The page.
    #[serde(default)]
    pub tasks: Vec<Task<'a>>,
    /// Where the next page starts (empty on the last).
    #[serde(default, alias = "next_page_token")]
    pub next_page_token: Str<'a>,
    /// The page size used.
    #[serde(default, alias = "page_size", deserialize_with = "lenient_int")]
    pub page_size: i64,
    /// How many tasks match in all.
    #[serde(default, alias = "total_size", deserialize_with = "lenient_int")]
    pub total_size: i64,
}

impl<'a> From<&'a model::ListTasksResult> for ListTasksResponse<'a> {
    fn from(r: &'a model::ListTasksResult) -> Self {
        ListTasksResponse {
            tasks: r.tasks.iter().map(Task::from).collect(),
            next_page_token: borrowed(&r.next_page_token),
            page_size: r.page_size,
            total_size: r.total_size,
        }
    }
}

impl ListTasksResponse<'_> {
    /// The model's page.
    pub fn into_model(self) -> Result<model::ListTasksResult, WireError> {
        Ok(model::ListTasksResult {
            tasks: each_into_model(self.tasks, "tasks", Task::into_model)?,
            next_page_token: self.next_page_token.into_owned(),
            page_size: self.page_size,
            total_size: self.total_size,
        })
    }
}

/// ListTaskPushNotificationConfigsResponse.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListPushConfigsResponse<'a> {
    /// The task's configs.
    #[serde(default)]
    pub configs: Vec<PushConfig<'a>>,
    /// Where the next page starts (agentry answers in one page).
    #[serde(default, alias = "next_page_token")]
    pub next_page_token: Str<'a>,
}

impl<'a> From<&'a [model::TaskPushNotificationConfig]> for ListPushConfigsResponse<'a> {
    fn from(list: &'a [model::TaskPushNotificationConfig]) -> Self {
        ListPushConfigsResponse {
            configs: list.iter().map(PushConfig::from).collect(),
            next_page_token: Cow::Borrowed(""),
        }
    }
}
