//! The A2A v1.0 codec: v1.0 method names and ProtoJSON shapes, mapped onto the same model and
//! [`Request`] as v0.3.
//!
//! v1.0 JSON differs from v0.3 in form, not in meaning: no `kind` discriminators, enums in
//! ProtoJSON (`TASK_STATE_COMPLETED`, `ROLE_USER`), one Part object (`text` | `raw` | `url` |
//! `data`, with `mediaType` and `filename`), results and stream items wrapped in a field named
//! after their type (`{"task": …}`), no `final` flag, flat push configs. The types of that
//! form are [`crate::wire::v1`]; this module maps method names and params onto them: a
//! request is decoded straight from its bytes into wire types and moved into the model once,
//! an answer is a borrowed wire view of the model serialized straight to bytes. Cards, read
//! once per discovery and built once per server, are rewritten as JSON (see [`card`]).
//!
//! ```
//! use agentry_a2a::{jsonrpc::Request, v1};
//! let params = r#"{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]},
//!                  "configuration":{"returnImmediately":true}}"#;
//! let Request::SendMessage(p) = v1::decode_params("SendMessage", Some(params)).unwrap() else {
//!     panic!()
//! };
//! assert_eq!(p.message.text_content(), "hi");
//! assert_eq!(p.configuration.unwrap().blocking, Some(false));
//! ```

use std::borrow::Cow;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::error::{RpcError, code};
use crate::model::*;
use crate::request::{self, Request};
use crate::version::ProtocolVersion;
use crate::wire::{read, v1 as wire};

/// v1.0 method names.
pub mod method {
    /// Send a message.
    pub const SEND: &str = "SendMessage";
    /// Send a message, stream its events.
    pub const STREAM: &str = "SendStreamingMessage";
    /// Read a task.
    pub const GET: &str = "GetTask";
    /// List tasks.
    pub const LIST: &str = "ListTasks";
    /// Cancel a task.
    pub const CANCEL: &str = "CancelTask";
    /// Stream a task's events.
    pub const SUBSCRIBE: &str = "SubscribeToTask";
    /// Add a task's push config.
    pub const PUSH_CREATE: &str = "CreateTaskPushNotificationConfig";
    /// Read a task's push config.
    pub const PUSH_GET: &str = "GetTaskPushNotificationConfig";
    /// List a task's push configs.
    pub const PUSH_LIST: &str = "ListTaskPushNotificationConfigs";
    /// Delete a task's push config.
    pub const PUSH_DELETE: &str = "DeleteTaskPushNotificationConfig";
    /// Read the extended card.
    pub const EXTENDED_CARD: &str = "GetExtendedAgentCard";

    /// Every v1.0 method.
    pub const ALL: [&str; 11] = [
        SEND,
        STREAM,
        GET,
        LIST,
        CANCEL,
        SUBSCRIBE,
        PUSH_CREATE,
        PUSH_GET,
        PUSH_LIST,
        PUSH_DELETE,
        EXTENDED_CARD,
    ];
}

/// Whether `m` is a v1.0 method name.
pub fn is_method(m: &str) -> bool {
    method::ALL.contains(&m)
}

/// A request's method as `version` names it (`message/send` in v0.3, `SendMessage` in v1.0).
pub fn method_in(req: &Request, version: ProtocolVersion) -> &'static str {
    match version {
        ProtocolVersion::V0_3 => req.method(),
        ProtocolVersion::V1_0 => method_of(req),
    }
}

/// The v1.0 method name of a request.
pub fn method_of(req: &Request) -> &'static str {
    match req {
        Request::SendMessage(_) => method::SEND,
        Request::StreamMessage(_) => method::STREAM,
        Request::GetTask(_) => method::GET,
        Request::ListTasks(_) => method::LIST,
        Request::CancelTask(_) => method::CANCEL,
        Request::Resubscribe(_) => method::SUBSCRIBE,
        Request::SetPushConfig(_) => method::PUSH_CREATE,
        Request::GetPushConfig(_) => method::PUSH_GET,
        Request::ListPushConfigs(_) => method::PUSH_LIST,
        Request::DeletePushConfig(_) => method::PUSH_DELETE,
        Request::GetExtendedCard => method::EXTENDED_CARD,
    }
}

// ---------------------------------------------------------------------------------------------
// Requests: v1.0 params -> Request (servers), Request -> v1.0 params (clients).

/// Where a request's params come from: the JSON-RPC body's raw `params` (decoded straight
/// into the wire types), or a JSON object the REST binding assembled from the path, the
/// query and the body.
enum Params<'a> {
    Raw(Option<&'a str>),
    Value(Value),
}

impl Params<'_> {
    fn parse<T: DeserializeOwned>(self) -> Result<T, RpcError> {
        match self {
            Params::Raw(raw) => request::parse_str(raw.unwrap_or("{}")),
            Params::Value(v) => request::parse_value(v),
        }
    }
}

/// Maps a v1.0 method name and its params to a [`Request`].
pub fn decode_params(method: &str, params: Option<&str>) -> Result<Request, RpcError> {
    decode(method, Params::Raw(params))
}

/// [`decode_params`] on params already parsed (the REST binding assembles them from the path,
/// the query and the body).
pub fn decode_value(method: &str, v: Value) -> Result<Request, RpcError> {
    decode(method, Params::Value(v))
}

/// A send ([`method::SEND`] or [`method::STREAM`], which `method` must be) from its params.
pub(crate) fn send_request(
    method: &str,
    w: wire::SendMessageRequest<'_>,
) -> Result<Request, RpcError> {
    let mut params = request::validate_send(w.into_model().map_err(request::invalid_params)?)?;
    if let Some(cfg) = params
        .configuration
        .as_mut()
        .and_then(|c| c.push_notification_config.as_mut())
    {
        made_over_v1(cfg);
    }
    Ok(if method == method::SEND {
        Request::SendMessage(params)
    } else {
        Request::StreamMessage(params)
    })
}

fn decode(method: &str, p: Params<'_>) -> Result<Request, RpcError> {
    Ok(match method {
        method::SEND | method::STREAM => send_request(method, p.parse()?)?,
        method::GET => {
            let w: wire::GetTaskRequest = p.parse()?;
            request::check_history_length(w.history_length, "params.historyLength")?;
            Request::GetTask(TaskQueryParams {
                id: w.id.into_owned(),
                history_length: w.history_length,
                metadata: None,
            })
        }
        method::LIST => Request::ListTasks(list_params(p.parse()?)?),
        method::CANCEL | method::SUBSCRIBE => {
            let w: wire::TaskIdRequest = p.parse()?;
            let id = w.id.into_owned();
            if method == method::CANCEL {
                Request::CancelTask(TaskIdParams {
                    id,
                    metadata: w.metadata.map(Cow::into_owned),
                })
            } else {
                // SubscribeToTaskRequest has no metadata.
                Request::Resubscribe(TaskIdParams { id, metadata: None })
            }
        }
        method::PUSH_CREATE => {
            let w: wire::PushConfig = p.parse()?;
            let mut c = w.into_model();
            made_over_v1(&mut c.push_notification_config);
            Request::SetPushConfig(c)
        }
        method::PUSH_GET | method::PUSH_DELETE | method::PUSH_LIST => {
            let w: wire::PushConfigRequest = p.parse()?;
            if w.task_id.is_empty() {
                return Err(RpcError::invalid_params("params.taskId is required"));
            }
            let id = w.task_id.into_owned();
            let config = w.id.map(Cow::into_owned);
            match method {
                method::PUSH_GET => Request::GetPushConfig(GetTaskPushNotificationConfigParams {
                    id,
                    push_notification_config_id: config,
                    metadata: None,
                }),
                method::PUSH_DELETE => {
                    Request::DeletePushConfig(DeleteTaskPushNotificationConfigParams {
                        id,
                        push_notification_config_id: config
                            .ok_or_else(|| RpcError::invalid_params("params.id is required"))?,
                        metadata: None,
                    })
                }
                _ => Request::ListPushConfigs(TaskIdParams { id, metadata: None }),
            }
        }
        method::EXTENDED_CARD => Request::GetExtendedCard,
        other => return Err(RpcError::method_not_found(other)),
    })
}

/// A push config made over v1.0: its webhook gets v1.0 bodies.
fn made_over_v1(cfg: &mut PushNotificationConfig) {
    cfg.body_version = Some(ProtocolVersion::V1_0.as_str().into());
}

fn list_params(w: wire::ListTasksRequest<'_>) -> Result<ListTasksParams, RpcError> {
    request::check_history_length(w.history_length, "params.historyLength")?;
    if let Some(n) = w.page_size
        && !(0..=ListTasksParams::MAX_PAGE_SIZE as i64).contains(&n)
    {
        return Err(RpcError::invalid_params(format!(
            "params.pageSize must be between 1 and {} (got {n})",
            ListTasksParams::MAX_PAGE_SIZE
        )));
    }
    let status_timestamp_after = match w.status_timestamp_after {
        None => None,
        Some(ts) => {
            let ms = crate::time::parse_rfc3339(&ts).ok_or_else(|| {
                RpcError::invalid_params(format!(
                    "params.statusTimestampAfter must be an RFC 3339 timestamp (got {ts:?})"
                ))
            })?;
            Some(crate::time::format_unix_millis(ms))
        }
    };
    Ok(ListTasksParams {
        context_id: w.context_id.map(Cow::into_owned),
        status: w.status.map(|s| s.0),
        page_size: w.page_size,
        page_token: w.page_token.map(Cow::into_owned),
        history_length: w.history_length,
        status_timestamp_after,
        include_artifacts: w.include_artifacts,
    })
}

/// A request's params in v1.0's wire form, borrowing from the request.
// A short-lived view on the stack, made to be serialized: boxing the large variant would
// cost an allocation per send.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum RequestParams<'a> {
    /// `SendMessage`, `SendStreamingMessage`.
    Send(wire::SendMessageRequest<'a>),
    /// `GetTask`.
    Get(wire::GetTaskRequest<'a>),
    /// `ListTasks`.
    List(wire::ListTasksRequest<'a>),
    /// `CancelTask`, `SubscribeToTask`.
    Task(wire::TaskIdRequest<'a>),
    /// `CreateTaskPushNotificationConfig`.
    PushConfig(wire::PushConfig<'a>),
    /// `Get`/`Delete`/`ListTaskPushNotificationConfig(s)`.
    PushRef(wire::PushConfigRequest<'a>),
    /// `GetExtendedAgentCard`: `{}`.
    Empty {},
}

/// A request's params in v1.0's wire form.
pub fn params(req: &Request) -> RequestParams<'_> {
    fn b(s: &str) -> Cow<'_, str> {
        Cow::Borrowed(s)
    }
    match req {
        Request::SendMessage(p) | Request::StreamMessage(p) => RequestParams::Send(p.into()),
        Request::GetTask(q) => RequestParams::Get(wire::GetTaskRequest {
            id: b(&q.id),
            history_length: q.history_length,
        }),
        Request::ListTasks(l) => RequestParams::List(l.into()),
        Request::CancelTask(p) => RequestParams::Task(wire::TaskIdRequest {
            id: b(&p.id),
            metadata: p.metadata.as_ref().map(Cow::Borrowed),
        }),
        Request::Resubscribe(p) => RequestParams::Task(wire::TaskIdRequest {
            id: b(&p.id),
            metadata: None,
        }),
        Request::SetPushConfig(p) => RequestParams::PushConfig(p.into()),
        Request::GetPushConfig(p) => RequestParams::PushRef(wire::PushConfigRequest {
            task_id: b(&p.id),
            id: p.push_notification_config_id.as_deref().map(b),
        }),
        Request::ListPushConfigs(p) => RequestParams::PushRef(wire::PushConfigRequest {
            task_id: b(&p.id),
            id: None,
        }),
        Request::DeletePushConfig(p) => RequestParams::PushRef(wire::PushConfigRequest {
            task_id: b(&p.id),
            id: Some(b(&p.push_notification_config_id)),
        }),
        Request::GetExtendedCard => RequestParams::Empty {},
    }
}

/// A request's v1.0 params as JSON (the REST client spreads them over path, query and body).
pub fn encode_params(req: &Request) -> Value {
    serde_json::to_value(params(req)).unwrap_or(Value::Null)
}

#[derive(Serialize)]
struct RequestEnvelope<'a> {
    jsonrpc: &'static str,
    id: &'a Value,
    method: &'static str,
    params: RequestParams<'a>,
}

/// A JSON-RPC request body in v1.0 form.
pub fn encode_request(id: &Value, req: &Request) -> Vec<u8> {
    serde_json::to_vec(&RequestEnvelope {
        jsonrpc: "2.0",
        id,
        method: method_of(req),
        params: params(req),
    })
    .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// Results: model -> v1.0 wire form (servers). Each borrows from the model.

/// `SendMessage`'s result: `{"task": …}` or `{"message": …}`.
pub fn send_result(r: &SendMessageResult) -> wire::SendMessageResponse<'_> {
    r.into()
}

/// One stream item: `{"task"|"message"|"statusUpdate"|"artifactUpdate": …}`.
pub fn stream_event(e: &StreamEvent) -> wire::StreamResponse<'_> {
    e.into()
}

/// A task in v1.0's wire form.
pub fn task(t: &Task) -> wire::Task<'_> {
    t.into()
}

/// A message in v1.0's wire form.
pub fn message(m: &Message) -> wire::Message<'_> {
    m.into()
}

/// A push config in v1.0's flat form.
pub fn push_config(c: &TaskPushNotificationConfig) -> wire::PushConfig<'_> {
    c.into()
}

/// A task's push configs as `ListTaskPushNotificationConfigs` returns them.
pub fn push_config_list(list: &[TaskPushNotificationConfig]) -> wire::ListPushConfigsResponse<'_> {
    list.into()
}

/// A page of tasks as `ListTasks` returns it.
pub fn list_tasks(r: &ListTasksResult) -> wire::ListTasksResponse<'_> {
    r.into()
}

/// The stable reason a v1.0 `google.rpc.ErrorInfo` gives for an error code.
pub fn reason(code: i64) -> &'static str {
    use code::*;
    match code {
        TASK_NOT_FOUND => "TASK_NOT_FOUND",
        TASK_NOT_CANCELABLE => "TASK_NOT_CANCELABLE",
        PUSH_NOTIFICATION_NOT_SUPPORTED => "PUSH_NOTIFICATION_NOT_SUPPORTED",
        UNSUPPORTED_OPERATION => "UNSUPPORTED_OPERATION",
        CONTENT_TYPE_NOT_SUPPORTED => "CONTENT_TYPE_NOT_SUPPORTED",
        INVALID_AGENT_RESPONSE => "INVALID_AGENT_RESPONSE",
        AUTHENTICATED_EXTENDED_CARD_NOT_CONFIGURED => "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
        EXTENSION_SUPPORT_REQUIRED => "EXTENSION_SUPPORT_REQUIRED",
        VERSION_NOT_SUPPORTED => "VERSION_NOT_SUPPORTED",
        INVALID_PARAMS => "INVALID_PARAMS",
        INVALID_REQUEST => "INVALID_REQUEST",
        METHOD_NOT_FOUND => "METHOD_NOT_FOUND",
        PARSE_ERROR => "PARSE_ERROR",
        _ => "INTERNAL_ERROR",
    }
}

/// The HTTP status v1.0 maps an error code to (REST answers, and JSON-RPC answers to requests
/// refused before dispatch).
pub fn http_status(code: i64) -> u16 {
    use code::*;
    match code {
        TASK_NOT_FOUND | METHOD_NOT_FOUND => 404,
        TASK_NOT_CANCELABLE => 409,
        CONTENT_TYPE_NOT_SUPPORTED => 415,
        INVALID_AGENT_RESPONSE => 502,
        INTERNAL_ERROR => 500,
        _ => 400,
    }
}

/// The error as v1.0 sends it: its `data` is a list of details holding a
/// `google.rpc.ErrorInfo` with the error's reason.
pub fn error(e: &RpcError) -> RpcError {
    let mut out = e.clone();
    let mut metadata = Map::new();
    if let Some(d) = &e.data {
        metadata.insert("detail".into(), json!(d.to_string()));
    }
    out.data = Some(json!([{
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": reason(e.code),
        "domain": "a2a-protocol.org",
        "metadata": metadata,
    }]));
    out
}

// ---------------------------------------------------------------------------------------------
// Results: v1.0 JSON -> model (clients).

/// Reads `SendMessage`'s result.
pub fn send_result_from(v: Value) -> Result<SendMessageResult, String> {
    read::<wire::SendMessageResponse>(v)?
        .into_model()
        .map_err(|e| e.to_string())
}

/// Reads one stream item.
pub fn stream_event_from(v: Value) -> Result<StreamEvent, String> {
    read::<wire::StreamResponse>(v)?
        .into_model()
        .map_err(|e| e.to_string())
}

/// A task from v1.0's wire form.
pub fn task_from(v: Value) -> Result<Task, String> {
    read::<wire::Task>(v)?
        .into_model()
        .map_err(|e| e.to_string())
}

/// A push config from v1.0's wire form.
pub fn push_config_from(v: Value) -> Result<TaskPushNotificationConfig, String> {
    Ok(read::<wire::PushConfig>(v)?.into_model())
}

/// The push configs of a `ListTaskPushNotificationConfigs` answer.
pub fn push_configs_from(v: Value) -> Result<Vec<TaskPushNotificationConfig>, String> {
    let list: wire::ListPushConfigsResponse = read(v)?;
    Ok(list
        .configs
        .into_iter()
        .map(wire::PushConfig::into_model)
        .collect())
}

/// A page of tasks from a `ListTasks` answer.
pub fn list_tasks_from(v: Value) -> Result<ListTasksResult, String> {
    read::<wire::ListTasksResponse>(v)?
        .into_model()
        .map_err(|e| e.to_string())
}

/// `completed` -> `TASK_STATE_COMPLETED`.
pub fn state_down(s: TaskState) -> &'static str {
    wire::state_name(s)
}

fn to_value<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

// ---------------------------------------------------------------------------------------------
// Agent cards.

/// The card in pure v1.0 form (for `GetExtendedAgentCard` over v1.0).
pub fn card(c: &AgentCard) -> Value {
    let mut v = merged_card(c);
    if let Value::Object(o) = &mut v {
        for k in [
            "protocolVersion",
            "url",
            "preferredTransport",
            "additionalInterfaces",
            "supportsAuthenticatedExtendedCard",
            "security",
        ] {
            o.remove(k);
        }
        if let Some(Value::Object(caps)) = o.get_mut("capabilities") {
            caps.remove("stateTransitionHistory");
        }
        if let Some(Value::Array(skills)) = o.get_mut("skills") {
            for s in skills.iter_mut().filter_map(Value::as_object_mut) {
                s.remove("security");
            }
        }
        if let Some(Value::Object(schemes)) = o.get_mut("securitySchemes") {
            for s in schemes.values_mut() {
                *s = scheme_down(std::mem::take(s));
            }
        }
    }
    v
}

/// The card both generations read: the v0.3 card with v1.0's `supportedInterfaces`,
/// `capabilities.extendedAgentCard` and `securityRequirements` added. v0.3 clients ignore
/// the additions; v1.0 clients prefer them and map the v0.3 security schemes themselves.
pub fn merged_card(c: &AgentCard) -> Value {
    let mut c = c.clone();
    if c.supported_interfaces.is_empty() {
        c.supported_interfaces = interfaces_of(&c);
    }
    if c.supports_authenticated_extended_card == Some(true) {
        c.capabilities.extended_agent_card = Some(true);
    }
    let mut v = to_value(&c);
    if let Value::Object(o) = &mut v {
        if !c.security.is_empty() {
            o.insert(
                "securityRequirements".into(),
                requirements_down(&c.security),
            );
        }
        if let Some(Value::Array(skills)) = o.get_mut("skills") {
            for (s, skill) in skills.iter_mut().zip(&c.skills) {
                if !skill.security.is_empty() {
                    s["securityRequirements"] = requirements_down(&skill.security);
                }
            }
        }
    }
    v
}

/// Declares a v1.0-only interface (`GRPC`: v0.3's gRPC service is another) after those
/// the card implies, unless it declares that binding already.
pub fn add_interface(c: &mut AgentCard, url: &str, binding: &str) {
    if c.supported_interfaces.is_empty() {
        c.supported_interfaces = interfaces_of(c);
    }
    if c.supported_interfaces
        .iter()
        .any(|i| i.protocol_binding.eq_ignore_ascii_case(binding))
    {
        return;
    }
    c.supported_interfaces.push(SupportedInterface {
        url: url.to_owned(),
        protocol_binding: binding.to_owned(),
        protocol_version: crate::version::ProtocolVersion::V1_0.as_str().to_owned(),
        tenant: String::new(),
    });
}

/// The `host:port` a gRPC client dials for an agent at `url` (`http://h:p/...`; the
/// scheme's port when it names none).
pub fn grpc_target(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("http", url));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    let authority = authority.rsplit('@').next().unwrap_or(authority);
    let has_port = match authority.rfind(']') {
        Some(end) => authority[end..].contains(':'),
        None => authority.contains(':'),
    };
    if has_port {
        authority.to_owned()
    } else if scheme.eq_ignore_ascii_case("https") {
        format!("{authority}:443")
    } else {
        format!("{authority}:80")
    }
}

/// The interfaces a v0.3 card implies, v1.0 first: this crate's server answers both
/// versions at every interface it declares.
fn interfaces_of(c: &AgentCard) -> Vec<SupportedInterface> {
    let mut out = Vec::new();
    let mut add = |url: &str, binding: &str| {
        for v in crate::version::ProtocolVersion::SUPPORTED {
            out.push(SupportedInterface {
                url: url.to_owned(),
                protocol_binding: binding.to_owned(),
                protocol_version: v.as_str().to_owned(),
                tenant: String::new(),
            });
        }
    };
    add(&c.url, &c.preferred_transport);
    for i in &c.additional_interfaces {
        if i.url != c.url || i.transport != c.preferred_transport {
            add(&i.url, &i.transport);
        }
    }
    out
}

fn requirements_down(reqs: &[std::collections::BTreeMap<String, Vec<String>>]) -> Value {
    Value::Array(
        reqs.iter()
            .map(|r| {
                let schemes: Map<String, Value> = r
                    .iter()
                    .map(|(k, scopes)| (k.clone(), json!({ "list": scopes })))
                    .collect();
                json!({ "schemes": schemes })
            })
            .collect(),
    )
}

const SCHEME_NAMES: [(&str, &str); 5] = [
    ("apiKey", "apiKeySecurityScheme"),
    ("http", "httpAuthSecurityScheme"),
    ("oauth2", "oauth2SecurityScheme"),
    ("openIdConnect", "openIdConnectSecurityScheme"),
    ("mutualTLS", "mtlsSecurityScheme"),
];

fn scheme_down(v: Value) -> Value {
    let Value::Object(mut o) = v else { return v };
    let Some(Value::String(t)) = o.remove("type") else {
        return Value::Object(o);
    };
    if t == "apiKey"
        && let Some(loc) = o.remove("in")
    {
        o.insert("location".into(), loc);
    }
    match SCHEME_NAMES.iter().find(|(v03, _)| *v03 == t) {
        Some((_, v1)) => json!({ *v1: o }),
        None => Value::Object(o),
    }
}

fn scheme_up(v: Value) -> Value {
    let Value::Object(mut o) = v else { return v };
    if o.contains_key("type") {
        return Value::Object(o);
    }
    for (v03, v1) in SCHEME_NAMES {
        if let Some(Value::Object(mut inner)) = o.remove(v1) {
            if v03 == "apiKey"
                && let Some(loc) = inner.remove("location")
            {
                inner.insert("in".into(), loc);
            }
            inner.insert("type".into(), json!(v03));
            return Value::Object(inner);
        }
    }
    Value::Object(o)
}

fn requirements_up(v: &Value) -> Value {
    let Some(list) = v.as_array() else {
        return json!([]);
    };
    Value::Array(
        list.iter()
            .map(|r| {
                let m: Map<String, Value> = r["schemes"]
                    .as_object()
                    .map(|s| {
                        s.iter()
                            .map(|(k, v)| (k.clone(), v.get("list").cloned().unwrap_or(json!([]))))
                            .collect()
                    })
                    .unwrap_or_default();
                Value::Object(m)
            })
            .collect(),
    )
}

/// Rewrites a card of either generation into the model's form: a v1.0-only card gets `url`,
/// `preferredTransport` and `protocolVersion` from its first JSON-RPC interface, its security
/// in v0.3 form, and the lists ProtoJSON leaves out when empty (a missing required string
/// still fails, naming the field).
pub fn card_up(v: Value) -> Value {
    let Value::Object(mut o) = v else { return v };
    let url_missing = o
        .get("url")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty);
    if url_missing && let Some(Value::Array(ifaces)) = o.get("supportedInterfaces") {
        let pick = ifaces
            .iter()
            .find(|i| i["protocolBinding"] == "JSONRPC")
            .or_else(|| ifaces.first())
            .cloned();
        if let Some(i) = pick {
            o.insert("url".into(), i["url"].clone());
            o.insert("preferredTransport".into(), i["protocolBinding"].clone());
            if !o.contains_key("protocolVersion") {
                o.insert("protocolVersion".into(), i["protocolVersion"].clone());
            }
        }
    }
    if !o.contains_key("security")
        && let Some(r) = o.get("securityRequirements")
    {
        let s = requirements_up(r);
        o.insert("security".into(), s);
    }
    if let Some(Value::Object(schemes)) = o.get_mut("securitySchemes") {
        for s in schemes.values_mut() {
            *s = scheme_up(std::mem::take(s));
        }
    }
    if let Some(Value::Array(skills)) = o.get_mut("skills") {
        for s in skills.iter_mut().filter_map(Value::as_object_mut) {
            if !s.contains_key("security")
                && let Some(r) = s.get("securityRequirements")
            {
                let sec = requirements_up(r);
                s.insert("security".into(), sec);
            }
            s.entry("tags").or_insert_with(|| json!([]));
        }
    }
    let caps = o.entry("capabilities").or_insert_with(|| json!({}));
    let extended = caps.get("extendedAgentCard") == Some(&json!(true));
    if extended && !o.contains_key("supportsAuthenticatedExtendedCard") {
        o.insert("supportsAuthenticatedExtendedCard".into(), json!(true));
    }
    for k in ["skills", "defaultInputModes", "defaultOutputModes"] {
        o.entry(k).or_insert_with(|| json!([]));
    }
    Value::Object(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// TCK 1.0 sends proto field names (`task_id`); ProtoJSON takes both spellings. The
    /// caller's own keys (metadata, data parts) are left as they are.
    #[test]
    fn proto_field_names_are_accepted() {
        let req = decode_params(
            method::PUSH_CREATE,
            Some(r#"{"task_id":"t1","url":"https://example.com/hook","token":"x"}"#),
        )
        .unwrap();
        let Request::SetPushConfig(p) = req else {
            panic!("{req:?}")
        };
        assert_eq!(p.task_id, "t1");
        assert_eq!(p.push_notification_config.url, "https://example.com/hook");
        let req = decode_params(
            method::SEND,
            Some(
                r#"{"message":{"message_id":"m","role":"ROLE_USER","context_id":"c",
                "parts":[{"data":{"a_b":1}}],"metadata":{"x_y":2}},"configuration":{"history_length":3}}"#,
            ),
        )
        .unwrap();
        let Request::SendMessage(p) = req else {
            panic!("{req:?}")
        };
        assert_eq!(p.message.message_id, "m");
        assert_eq!(p.message.context_id.as_deref(), Some("c"));
        assert_eq!(p.configuration.unwrap().history_length, Some(3));
        assert_eq!(p.message.metadata.unwrap()["x_y"], 2);
        let Part::Data(d) = &p.message.parts[0] else {
            panic!("{:?}", p.message.parts)
        };
        assert_eq!(d.data["a_b"], 1);
    }

    fn sample_task() -> Task {
        let mut t = Task::new("t1".into(), "c1".into());
        t.history
            .push(Message::text(Role::User, "hi").in_task("t1", "c1"));
        t.apply_artifact(
            &Artifact::new(
                Some("out"),
                vec![
                    Part::text("echo"),
                    Part::file(File {
                        content: FileContent::Bytes("dGNr".into()),
                        mime_type: Some("text/plain".into()),
                        name: Some("output.txt".into()),
                    }),
                    Part::file(File {
                        content: FileContent::Uri("https://example.com/output.txt".into()),
                        mime_type: None,
                        name: None,
                    }),
                    Part::data(
                        json!({"key": "value", "count": 42})
                            .as_object()
                            .unwrap()
                            .clone(),
                    ),
                ],
            ),
            false,
        );
        t.transition(TaskStatus::now(
            TaskState::InputRequired,
            Some(Message::text(Role::Agent, "more?")),
        ))
        .unwrap();
        t
    }

    #[test]
    fn task_round_trips_through_v1_form() {
        let t = sample_task();
        let wire = to_value(&task(&t));
        let s = wire.to_string();
        assert!(!s.contains("\"kind\""), "{s}");
        assert_eq!(wire["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
        assert_eq!(wire["history"][0]["role"], "ROLE_USER");
        let parts = &wire["artifacts"][0]["parts"];
        assert_eq!(parts[0], json!({"text": "echo"}));
        assert_eq!(
            parts[1],
            json!({"raw": "dGNr", "mediaType": "text/plain", "filename": "output.txt"})
        );
        assert_eq!(parts[2], json!({"url": "https://example.com/output.txt"}));
        assert_eq!(parts[3], json!({"data": {"key": "value", "count": 42}}));
        assert_eq!(task_from(wire).unwrap(), t);
    }

    #[test]
    fn stream_items_are_wrapped_without_final() {
        let t = sample_task();
        let ev = StreamEvent::StatusUpdate(TaskStatusUpdateEvent {
            task_id: t.id.clone(),
            context_id: t.context_id.clone(),
            status: TaskStatus::now(TaskState::Completed, None),
            is_final: true,
            metadata: None,
        });
        let wire = to_value(&stream_event(&ev));
        assert!(wire["statusUpdate"].get("final").is_none(), "{wire}");
        assert_eq!(
            wire["statusUpdate"]["status"]["state"],
            "TASK_STATE_COMPLETED"
        );
        // The client infers `final` from the state.
        assert_eq!(stream_event_from(wire).unwrap(), ev);
        let wire = to_value(&stream_event(&StreamEvent::Task(t.clone())));
        assert_eq!(stream_event_from(wire).unwrap(), StreamEvent::Task(t));
    }

    #[test]
    fn send_params_map_both_ways() {
        let raw = r#"{"tenant":"acme","message":{"messageId":"m1","role":"ROLE_USER",
            "parts":[{"text":"hi"},{"data":[1,2]}]},
            "configuration":{"historyLength":2,"returnImmediately":true,
              "taskPushNotificationConfig":{"url":"https://h/x","token":"tok",
                "authentication":{"scheme":"Bearer","credentials":"c"}}}}"#;
        let Request::SendMessage(p) = decode_params(method::SEND, Some(raw)).unwrap() else {
            panic!("not a send")
        };
        let c = p.configuration.clone().unwrap();
        assert_eq!((c.blocking, c.history_length), (Some(false), Some(2)));
        let push = c.push_notification_config.unwrap();
        assert_eq!(
            (push.url.as_str(), push.token.as_deref()),
            ("https://h/x", Some("tok"))
        );
        assert_eq!(
            push.authentication.unwrap().schemes,
            vec!["Bearer".to_owned()]
        );
        assert_eq!(
            p.message.parts[1],
            Part::data(json!({"value": [1, 2]}).as_object().unwrap().clone())
        );
        // And back: what a client sends decodes to the same request.
        let again = decode_value(
            method::SEND,
            encode_params(&Request::SendMessage(p.clone())),
        );
        assert_eq!(again.unwrap(), Request::SendMessage(p));
    }

    #[test]
    fn bad_v1_params_name_the_field() {
        let cases = [
            (method::SEND, r#"{}"#, "params.message is required"),
            (
                method::SEND,
                r#"{"message":{"messageId":"m","parts":[{"text":"x"}]}}"#,
                "params.message.role is required",
            ),
            (
                method::SEND,
                r#"{"message":{"messageId":"m","role":"user","parts":[{}]}}"#,
                "params.message.parts[0] needs one of",
            ),
            (
                method::SEND,
                r#"{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"a","url":"b"}]}}"#,
                "exactly one",
            ),
            (
                method::SEND,
                r#"{"message":{"messageId":"m","role":"ROLE_USER","parts":[]}}"#,
                "must not be empty",
            ),
            (
                method::GET,
                r#"{"id":"t","historyLength":-1}"#,
                "must not be negative",
            ),
            (method::LIST, r#"{"pageSize":1000}"#, "pageSize"),
            (
                method::LIST,
                r#"{"status":"TASK_STATE_DONE"}"#,
                "unknown task state",
            ),
            (
                method::LIST,
                r#"{"statusTimestampAfter":"yesterday"}"#,
                "RFC 3339",
            ),
            (
                method::PUSH_GET,
                r#"{"id":"x"}"#,
                "params.taskId is required",
            ),
        ];
        for (m, params, want) in cases {
            let e = decode_params(m, Some(params)).unwrap_err();
            assert_eq!(e.code, code::INVALID_PARAMS, "{m} {params}");
            assert!(e.message.contains(want), "{m} {params}: {}", e.message);
        }
        assert_eq!(
            decode_params("message/send", Some("{}")).unwrap_err().code,
            code::METHOD_NOT_FOUND
        );
    }

    #[test]
    fn list_tasks_params_map_states_and_times() {
        let raw = r#"{"contextId":"c","status":"TASK_STATE_INPUT_REQUIRED","pageSize":10,
                      "statusTimestampAfter":"2026-11-22T01:00:00+01:00"}"#;
        let Request::ListTasks(l) = decode_params(method::LIST, Some(raw)).unwrap() else {
            panic!()
        };
        assert_eq!(l.status, Some(TaskState::InputRequired));
        assert_eq!(
            l.status_timestamp_after.as_deref(),
            Some("2026-11-22T00:00:00.000Z")
        );
        let back = encode_params(&Request::ListTasks(l));
        assert_eq!(back["status"], "TASK_STATE_INPUT_REQUIRED");
    }

    #[test]
    fn cards_serve_both_generations() {
        let mut c = AgentCard::new("a", "b", "http://h/");
        c.supports_authenticated_extended_card = Some(true);
        c.security_schemes.insert(
            "key".into(),
            SecurityScheme::ApiKey {
                location: "header".into(),
                name: "X-API-Key".into(),
                description: None,
            },
        );
        c.security
            .push([("key".to_owned(), vec![])].into_iter().collect());
        let merged = merged_card(&c);
        assert_eq!(merged["url"], "http://h/");
        assert_eq!(merged["capabilities"]["extendedAgentCard"], true);
        assert_eq!(merged["supportedInterfaces"][0]["protocolVersion"], "1.0");
        assert_eq!(merged["supportedInterfaces"][1]["protocolVersion"], "0.3");
        assert_eq!(
            merged["securityRequirements"][0]["schemes"]["key"]["list"],
            json!([])
        );
        let pure = card(&c);
        assert!(
            pure.get("url").is_none() && pure.get("security").is_none(),
            "{pure}"
        );
        assert_eq!(
            pure["securitySchemes"]["key"],
            json!({"apiKeySecurityScheme": {"location": "header", "name": "X-API-Key"}})
        );
        // A v1.0-only card reads back into the same model.
        let back: AgentCard = serde_json::from_value(card_up(pure)).unwrap();
        assert_eq!(back.url, "http://h/");
        assert_eq!(back.security_schemes, c.security_schemes);
        assert_eq!(back.security, c.security);
        assert_eq!(back.supports_authenticated_extended_card, Some(true));
    }

    #[test]
    fn errors_carry_error_info() {
        let e = error(&RpcError::task_not_found());
        assert_eq!(e.data.as_ref().unwrap()[0]["reason"], "TASK_NOT_FOUND");
        assert_eq!(http_status(e.code), 404);
        assert_eq!(
            state_down(TaskState::AuthRequired),
            "TASK_STATE_AUTH_REQUIRED"
        );
    }
}
