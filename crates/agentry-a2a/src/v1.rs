//! The A2A v1.0 codec: v1.0 method names and ProtoJSON shapes, mapped onto the same model and
//! [`Request`] as v0.3.
//!
//! v1.0 JSON differs from v0.3 in form, not in meaning: no `kind` discriminators, enums in
//! ProtoJSON (`TASK_STATE_COMPLETED`, `ROLE_USER`), one Part object (`text` | `raw` | `url` |
//! `data`, with `mediaType` and `filename`), results and stream items wrapped in a field named
//! after their type (`{"task": …}`), no `final` flag, flat push configs. So this codec rewrites
//! JSON between the two forms and leaves the typing to the model's serde, which is the v0.3
//! form: a field both generations share keeps one definition.
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

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::error::{RpcError, code};
use crate::jsonrpc::{self, Request};
use crate::model::*;

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
pub fn method_in(req: &Request, version: crate::version::ProtocolVersion) -> &'static str {
    match version {
        crate::version::ProtocolVersion::V0_3 => req.method(),
        crate::version::ProtocolVersion::V1_0 => method_of(req),
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

/// Maps a v1.0 method name and its params to a [`Request`].
pub fn decode_params(method: &str, params: Option<&str>) -> Result<Request, RpcError> {
    let v: Value = match params {
        None => Value::Object(Map::new()),
        Some(raw) => serde_json::from_str(raw)
            .map_err(|e| RpcError::invalid_params(format!("invalid params: {e}")))?,
    };
    decode_value(method, v)
}

/// ProtoJSON parsers accept a field by its proto name (`task_id`) as well as its JSON name
/// (`taskId`); TCK 1.0 sends the former. Renames proto names to JSON names, leaving the
/// free-form values alone (`metadata` and a data part's `data` are `Struct`s: their keys
/// are the caller's).
fn camel_case_keys(v: &mut Value) {
    match v {
        Value::Object(map) => {
            if map.keys().any(|k| k.contains('_')) {
                let old = std::mem::take(map);
                for (k, v) in old {
                    let k = if k.contains('_') {
                        let camel = lower_camel(&k);
                        if camel != k && !map.contains_key(&camel) {
                            camel
                        } else {
                            k
                        }
                    } else {
                        k
                    };
                    map.insert(k, v);
                }
            }
            for (k, v) in map.iter_mut() {
                if k != "metadata" && k != "data" {
                    camel_case_keys(v);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(camel_case_keys),
        _ => {}
    }
}

/// `push_notification_config` -> `pushNotificationConfig`.
fn lower_camel(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for c in name.chars() {
        if c == '_' {
            upper = !out.is_empty();
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// [`decode_params`] on params already parsed (the REST binding assembles them from the path,
/// the query and the body).
pub fn decode_value(method: &str, mut v: Value) -> Result<Request, RpcError> {
    camel_case_keys(&mut v);
    let Value::Object(mut p) = v else {
        return Err(RpcError::invalid_params("params must be an object"));
    };
    p.remove("tenant");
    Ok(match method {
        method::SEND | method::STREAM => {
            let up = send_params_up(p).map_err(RpcError::invalid_params)?;
            let params = jsonrpc::validate_send(jsonrpc::parse_value(up)?)?;
            if method == method::SEND {
                Request::SendMessage(params)
            } else {
                Request::StreamMessage(params)
            }
        }
        method::GET => {
            let q: TaskQueryParams = jsonrpc::parse_value(Value::Object(p))?;
            jsonrpc::check_history_length(q.history_length, "params.historyLength")?;
            Request::GetTask(q)
        }
        method::LIST => {
            if let Some(s) = p.get_mut("status") {
                *s = state_up(s)
                    .map_err(|e| RpcError::invalid_params(format!("params.status: {e}")))?;
            }
            if let Some(Value::String(ts)) = p.get_mut("statusTimestampAfter") {
                let ms = crate::time::parse_rfc3339(ts).ok_or_else(|| {
                    RpcError::invalid_params(format!(
                        "params.statusTimestampAfter must be an RFC 3339 timestamp (got {ts:?})"
                    ))
                })?;
                *ts = crate::time::format_unix_millis(ms);
            }
            let l: ListTasksParams = jsonrpc::parse_value(Value::Object(p))?;
            jsonrpc::check_history_length(l.history_length, "params.historyLength")?;
            if let Some(n) = l.page_size
                && !(0..=ListTasksParams::MAX_PAGE_SIZE as i64).contains(&n)
            {
                return Err(RpcError::invalid_params(format!(
                    "params.pageSize must be between 1 and {} (got {n})",
                    ListTasksParams::MAX_PAGE_SIZE
                )));
            }
            Request::ListTasks(l)
        }
        method::CANCEL => Request::CancelTask(jsonrpc::parse_value(Value::Object(p))?),
        method::SUBSCRIBE => Request::Resubscribe(jsonrpc::parse_value(Value::Object(p))?),
        method::PUSH_CREATE => {
            let cfg = push_config_up(p).map_err(RpcError::invalid_params)?;
            Request::SetPushConfig(jsonrpc::parse_value(cfg)?)
        }
        method::PUSH_GET | method::PUSH_DELETE => {
            let task_id = required_str(&p, "taskId")?;
            let id = p.get("id").and_then(Value::as_str).map(str::to_owned);
            if method == method::PUSH_GET {
                Request::GetPushConfig(GetTaskPushNotificationConfigParams {
                    id: task_id,
                    push_notification_config_id: id,
                    metadata: None,
                })
            } else {
                Request::DeletePushConfig(DeleteTaskPushNotificationConfigParams {
                    id: task_id,
                    push_notification_config_id: id
                        .ok_or_else(|| RpcError::invalid_params("params.id is required"))?,
                    metadata: None,
                })
            }
        }
        method::PUSH_LIST => Request::ListPushConfigs(TaskIdParams {
            id: required_str(&p, "taskId")?,
            metadata: None,
        }),
        method::EXTENDED_CARD => Request::GetExtendedCard,
        other => return Err(RpcError::method_not_found(other)),
    })
}

fn required_str(p: &Map<String, Value>, field: &str) -> Result<String, RpcError> {
    match p.get(field) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        Some(Value::String(_)) | None => Err(RpcError::invalid_params(format!(
            "params.{field} is required"
        ))),
        Some(_) => Err(RpcError::invalid_params(format!(
            "params.{field} must be a string"
        ))),
    }
}

/// A request's v1.0 params, for a client to send.
pub fn encode_params(req: &Request) -> Value {
    match req {
        Request::SendMessage(p) | Request::StreamMessage(p) => send_params_down(p),
        Request::GetTask(q) => {
            let mut o = Map::new();
            o.insert("id".into(), json!(q.id));
            if let Some(h) = q.history_length {
                o.insert("historyLength".into(), json!(h));
            }
            Value::Object(o)
        }
        Request::ListTasks(l) => {
            let mut v = to_value(l);
            if let Some(s) = l.status {
                v["status"] = json!(state_down(s));
            }
            v
        }
        Request::CancelTask(p) => to_value(p),
        Request::Resubscribe(p) => json!({ "id": p.id }),
        Request::SetPushConfig(p) => push_config(p),
        Request::GetPushConfig(p) => json!({
            "taskId": p.id,
            "id": p.push_notification_config_id.as_deref().unwrap_or(&p.id),
        }),
        Request::ListPushConfigs(p) => json!({ "taskId": p.id }),
        Request::DeletePushConfig(p) => {
            json!({ "taskId": p.id, "id": p.push_notification_config_id })
        }
        Request::GetExtendedCard => json!({}),
    }
}

/// A JSON-RPC request body in v1.0 form.
pub fn encode_request(id: &Value, req: &Request) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": method_of(req),
        "params": encode_params(req),
    }))
    .unwrap_or_default()
}

fn send_params_up(mut p: Map<String, Value>) -> Result<Value, String> {
    let Some(m) = p.remove("message") else {
        return Err("params.message is required".into());
    };
    p.insert("message".into(), message_up(m, "params.message")?);
    if let Some(Value::Object(c)) = p.get_mut("configuration") {
        if let Some(r) = c.remove("returnImmediately") {
            c.insert("blocking".into(), json!(r != Value::Bool(true)));
        }
        if let Some(Value::Object(cfg)) = c.remove("taskPushNotificationConfig") {
            let up = push_config_up(cfg)?;
            c.insert(
                "pushNotificationConfig".into(),
                up["pushNotificationConfig"].clone(),
            );
        }
    }
    Ok(Value::Object(p))
}

fn send_params_down(p: &MessageSendParams) -> Value {
    let mut o = Map::new();
    o.insert("message".into(), message_down(to_value(&p.message)));
    if let Some(c) = &p.configuration {
        let mut cfg = Map::new();
        if let Some(m) = &c.accepted_output_modes {
            cfg.insert("acceptedOutputModes".into(), json!(m));
        }
        if let Some(h) = c.history_length {
            cfg.insert("historyLength".into(), json!(h));
        }
        if c.blocking == Some(false) {
            cfg.insert("returnImmediately".into(), json!(true));
        }
        if let Some(push) = &c.push_notification_config {
            cfg.insert(
                "taskPushNotificationConfig".into(),
                push_config(&TaskPushNotificationConfig {
                    task_id: String::new(),
                    push_notification_config: push.clone(),
                }),
            );
        }
        o.insert("configuration".into(), Value::Object(cfg));
    }
    if let Some(m) = &p.metadata {
        o.insert("metadata".into(), json!(m));
    }
    Value::Object(o)
}

// ---------------------------------------------------------------------------------------------
// Results: model -> v1.0 JSON (servers).

fn to_value<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// `SendMessage`'s result: `{"task": …}` or `{"message": …}`.
pub fn send_result(r: &SendMessageResult) -> Value {
    match r {
        SendMessageResult::Task(t) => json!({ "task": task(t) }),
        SendMessageResult::Message(m) => json!({ "message": message(m) }),
    }
}

/// One stream item: `{"task"|"message"|"statusUpdate"|"artifactUpdate": …}`.
pub fn stream_event(e: &StreamEvent) -> Value {
    match e {
        StreamEvent::Task(t) => json!({ "task": task(t) }),
        StreamEvent::Message(m) => json!({ "message": message(m) }),
        StreamEvent::StatusUpdate(s) => {
            let mut v = to_value(s);
            if let Value::Object(o) = &mut v {
                o.remove("kind");
                o.remove("final");
                if let Some(st) = o.remove("status") {
                    o.insert("status".into(), status_down(st));
                }
            }
            json!({ "statusUpdate": v })
        }
        StreamEvent::ArtifactUpdate(a) => {
            let mut v = to_value(a);
            if let Value::Object(o) = &mut v {
                o.remove("kind");
                if let Some(art) = o.remove("artifact") {
                    o.insert("artifact".into(), artifact_down(art));
                }
            }
            json!({ "artifactUpdate": v })
        }
    }
}

/// A task in v1.0's wire form.
pub fn task(t: &Task) -> Value {
    task_down(to_value(t))
}

/// A message in v1.0's wire form.
pub fn message(m: &Message) -> Value {
    message_down(to_value(m))
}

/// A push config in v1.0's flat form.
pub fn push_config(c: &TaskPushNotificationConfig) -> Value {
    let cfg = &c.push_notification_config;
    let mut o = Map::new();
    if let Some(id) = &cfg.id {
        o.insert("id".into(), json!(id));
    }
    if !c.task_id.is_empty() {
        o.insert("taskId".into(), json!(c.task_id));
    }
    o.insert("url".into(), json!(cfg.url));
    if let Some(t) = &cfg.token {
        o.insert("token".into(), json!(t));
    }
    if let Some(a) = &cfg.authentication {
        let mut auth = Map::new();
        auth.insert(
            "scheme".into(),
            json!(a.schemes.first().cloned().unwrap_or_default()),
        );
        if let Some(c) = &a.credentials {
            auth.insert("credentials".into(), json!(c));
        }
        o.insert("authentication".into(), Value::Object(auth));
    }
    Value::Object(o)
}

/// A task's push configs as `ListTaskPushNotificationConfigs` returns them.
pub fn push_config_list(list: &[TaskPushNotificationConfig]) -> Value {
    json!({ "configs": list.iter().map(push_config).collect::<Vec<_>>(), "nextPageToken": "" })
}

/// A page of tasks as `ListTasks` returns it.
pub fn list_tasks(r: &ListTasksResult) -> Value {
    json!({
        "tasks": r.tasks.iter().map(task).collect::<Vec<_>>(),
        "nextPageToken": r.next_page_token,
        "pageSize": r.page_size,
        "totalSize": r.total_size,
    })
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
    match unwrap_oneof(v, &["task", "message"])? {
        ("task", t) => Ok(SendMessageResult::Task(task_from(t)?)),
        (_, m) => Ok(SendMessageResult::Message(from_up(message_up(
            m, "message",
        )?)?)),
    }
}

/// Reads one stream item.
pub fn stream_event_from(v: Value) -> Result<StreamEvent, String> {
    Ok(
        match unwrap_oneof(v, &["task", "message", "statusUpdate", "artifactUpdate"])? {
            ("task", t) => StreamEvent::Task(task_from(t)?),
            ("message", m) => StreamEvent::Message(from_up(message_up(m, "message")?)?),
            ("statusUpdate", s) => {
                let mut o = into_object(s, "statusUpdate")?;
                let status = status_up(o.remove("status").unwrap_or(Value::Null))?;
                let ends = status["state"]
                    .as_str()
                    .and_then(|s| serde_json::from_value::<TaskState>(json!(s)).ok())
                    .is_some_and(TaskState::ends_turn);
                o.insert("status".into(), status);
                o.insert("final".into(), json!(ends));
                o.insert("kind".into(), json!("status-update"));
                default_str(&mut o, &["taskId", "contextId"]);
                StreamEvent::StatusUpdate(from_up(Value::Object(o))?)
            }
            (_, a) => {
                let mut o = into_object(a, "artifactUpdate")?;
                let art = artifact_up(o.remove("artifact").unwrap_or(Value::Null))?;
                o.insert("artifact".into(), art);
                o.insert("kind".into(), json!("artifact-update"));
                default_str(&mut o, &["taskId", "contextId"]);
                StreamEvent::ArtifactUpdate(from_up(Value::Object(o))?)
            }
        },
    )
}

/// A task from v1.0's wire form.
pub fn task_from(v: Value) -> Result<Task, String> {
    from_up(task_up(v)?)
}

/// A push config from v1.0's wire form.
pub fn push_config_from(v: Value) -> Result<TaskPushNotificationConfig, String> {
    let mut c: TaskPushNotificationConfig = from_up(push_config_up(into_object(v, "config")?)?)?;
    // Bookkeeping of the side that stores configs, not something an answer carries.
    c.push_notification_config.body_version = None;
    Ok(c)
}

/// The push configs of a `ListTaskPushNotificationConfigs` answer.
pub fn push_configs_from(v: Value) -> Result<Vec<TaskPushNotificationConfig>, String> {
    let mut o = into_object(v, "result")?;
    match o.remove("configs") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => a.into_iter().map(push_config_from).collect(),
        Some(_) => Err("`configs` must be a list".into()),
    }
}

/// A page of tasks from a `ListTasks` answer.
pub fn list_tasks_from(v: Value) -> Result<ListTasksResult, String> {
    let mut o = into_object(v, "result")?;
    let tasks = match o.remove("tasks") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a.into_iter().map(task_from).collect::<Result<_, _>>()?,
        Some(_) => return Err("`tasks` must be a list".into()),
    };
    let int = |o: &Map<String, Value>, k: &str| {
        // ProtoJSON may write 64-bit integers as strings; these are 32-bit, but be lenient.
        o.get(k)
            .and_then(|v| v.as_i64().or_else(|| v.as_str()?.parse().ok()))
            .unwrap_or(0)
    };
    Ok(ListTasksResult {
        tasks,
        next_page_token: o
            .get("nextPageToken")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        page_size: int(&o, "pageSize"),
        total_size: int(&o, "totalSize"),
    })
}

fn from_up<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, String> {
    serde_path_to_error::deserialize(v).map_err(|e| format!("at {}: {}", e.path(), e.inner()))
}

fn unwrap_oneof(v: Value, names: &[&'static str]) -> Result<(&'static str, Value), String> {
    let Value::Object(mut o) = v else {
        return Err("expected an object".into());
    };
    for n in names {
        if let Some(inner) = o.remove(*n) {
            return Ok((n, inner));
        }
    }
    Err(format!("expected one of the fields {}", names.join(", ")))
}

fn into_object(v: Value, what: &str) -> Result<Map<String, Value>, String> {
    match v {
        Value::Object(o) => Ok(o),
        _ => Err(format!("`{what}` must be an object")),
    }
}

/// ProtoJSON leaves empty strings out; the model wants some of them present.
fn default_str(o: &mut Map<String, Value>, keys: &[&str]) {
    for k in keys {
        o.entry(*k).or_insert_with(|| json!(""));
    }
}

// ---------------------------------------------------------------------------------------------
// Small tools for rewriting JSON objects in place (shared with `rest::v03`).

/// Replaces `o[key]` by `f` of it, when present.
pub(crate) fn map_field(o: &mut Map<String, Value>, key: &str, f: impl FnOnce(Value) -> Value) {
    if let Some(v) = o.remove(key) {
        o.insert(key.into(), f(v));
    }
}

/// Moves the list `o[from]` to `o[to]`, each element through `f` (a non-list stays as it is).
pub(crate) fn map_list(o: &mut Map<String, Value>, from: &str, to: &str, f: fn(Value) -> Value) {
    if !matches!(o.get(from), Some(Value::Array(_))) {
        return;
    }
    if let Some(Value::Array(items)) = o.remove(from) {
        o.insert(to.into(), Value::Array(items.into_iter().map(f).collect()));
    }
}

/// Applies `f` to an object (anything else passes through).
pub(crate) fn on_object(v: Value, f: impl FnOnce(&mut Map<String, Value>)) -> Value {
    let Value::Object(mut o) = v else { return v };
    f(&mut o);
    Value::Object(o)
}

// ---------------------------------------------------------------------------------------------
// The value rewrites, one per object kind. `_down`: model (v0.3) form -> v1.0; `_up`: v1.0 ->
// model form, with the failing path in errors.

/// `completed` -> `TASK_STATE_COMPLETED`.
pub fn state_down(s: TaskState) -> String {
    match s {
        TaskState::Unknown => "TASK_STATE_UNSPECIFIED".into(),
        s => format!(
            "TASK_STATE_{}",
            s.as_str().to_ascii_uppercase().replace('-', "_")
        ),
    }
}

fn state_up(v: &Value) -> Result<Value, String> {
    let Some(s) = v.as_str() else {
        return Err("a task state must be a string".into());
    };
    // ts-proto (the JS SDK) writes an unset enum as "UNRECOGNIZED".
    let kebab = if s == "TASK_STATE_UNSPECIFIED" || s == "UNRECOGNIZED" {
        "unknown".to_owned()
    } else if let Some(rest) = s.strip_prefix("TASK_STATE_") {
        rest.to_ascii_lowercase().replace('_', "-")
    } else {
        s.to_owned()
    };
    serde_json::from_value::<TaskState>(json!(kebab))
        .map(|st| json!(st))
        .map_err(|_| format!("unknown task state {s:?}"))
}

fn status_down(v: Value) -> Value {
    let Value::Object(mut o) = v else { return v };
    if let Some(s) = o.get("state").cloned()
        && let Ok(st) = serde_json::from_value::<TaskState>(s)
    {
        o.insert("state".into(), json!(state_down(st)));
    }
    if let Some(m) = o.remove("message") {
        o.insert("message".into(), message_down(m));
    }
    Value::Object(o)
}

fn status_up(v: Value) -> Result<Value, String> {
    let mut o = into_object(v, "status")?;
    let state = o.get("state").unwrap_or(&Value::Null);
    let state = if state.is_null() {
        json!("unknown")
    } else {
        state_up(state)?
    };
    o.insert("state".into(), state);
    if let Some(m) = o.remove("message") {
        o.insert("message".into(), message_up(m, "status.message")?);
    }
    Ok(Value::Object(o))
}

fn message_down(v: Value) -> Value {
    let Value::Object(mut o) = v else { return v };
    o.remove("kind");
    if let Some(r) = o.get("role").and_then(Value::as_str) {
        let role = if r == "agent" {
            "ROLE_AGENT"
        } else {
            "ROLE_USER"
        };
        o.insert("role".into(), json!(role));
    }
    map_parts(&mut o);
    Value::Object(o)
}

fn message_up(v: Value, path: &str) -> Result<Value, String> {
    let Value::Object(mut o) = v else {
        return Err(format!("{path} must be an object"));
    };
    let role = match o.get("role").and_then(Value::as_str) {
        Some("ROLE_USER" | "user") => "user",
        Some("ROLE_AGENT" | "agent") => "agent",
        Some(other) => {
            return Err(format!(
                "{path}.role must be ROLE_USER or ROLE_AGENT (got {other:?})"
            ));
        }
        None => return Err(format!("{path}.role is required")),
    };
    o.insert("role".into(), json!(role));
    parts_up(&mut o, path)?;
    o.insert("kind".into(), json!("message"));
    Ok(Value::Object(o))
}

fn map_parts(o: &mut Map<String, Value>) {
    map_list(o, "parts", "parts", part_down);
}

fn parts_up(o: &mut Map<String, Value>, path: &str) -> Result<(), String> {
    match o.get_mut("parts") {
        Some(Value::Array(parts)) => {
            for (i, p) in parts.iter_mut().enumerate() {
                *p = part_up(std::mem::take(p), &format!("{path}.parts[{i}]"))?;
            }
        }
        // ProtoJSON leaves an empty list out.
        None | Some(Value::Null) => {
            o.insert("parts".into(), json!([]));
        }
        Some(_) => return Err(format!("{path}.parts must be a list")),
    }
    Ok(())
}

fn part_down(v: Value) -> Value {
    let Value::Object(mut o) = v else { return v };
    let mut out = Map::new();
    match o.remove("kind").as_ref().and_then(Value::as_str) {
        Some("text") => {
            out.insert("text".into(), o.remove("text").unwrap_or(json!("")));
        }
        Some("file") => {
            if let Some(Value::Object(mut f)) = o.remove("file") {
                if let Some(b) = f.remove("bytes") {
                    out.insert("raw".into(), b);
                }
                if let Some(u) = f.remove("uri") {
                    out.insert("url".into(), u);
                }
                if let Some(m) = f.remove("mimeType") {
                    out.insert("mediaType".into(), m);
                }
                if let Some(n) = f.remove("name") {
                    out.insert("filename".into(), n);
                }
            }
        }
        _ => {
            out.insert("data".into(), o.remove("data").unwrap_or(json!({})));
        }
    }
    if let Some(m) = o.remove("metadata") {
        out.insert("metadata".into(), m);
    }
    Value::Object(out)
}

fn part_up(v: Value, path: &str) -> Result<Value, String> {
    let Value::Object(mut o) = v else {
        return Err(format!("{path} must be an object"));
    };
    if o.contains_key("kind") {
        // Already in the v0.3 form (a lenient peer); the model reads it as is.
        return Ok(Value::Object(o));
    }
    let present: Vec<&str> = ["text", "raw", "url", "data"]
        .into_iter()
        .filter(|k| o.get(*k).is_some_and(|v| !v.is_null()))
        .collect();
    let which = match present.as_slice() {
        [one] => *one,
        [] => return Err(format!("{path} needs one of text, raw, url or data")),
        _ => {
            return Err(format!(
                "{path} has {}: a part carries exactly one",
                present.join(" and ")
            ));
        }
    };
    let mut out = Map::new();
    let media_type = o.remove("mediaType");
    let filename = o.remove("filename");
    match which {
        "text" => {
            out.insert("kind".into(), json!("text"));
            out.insert("text".into(), o.remove("text").unwrap_or_default());
        }
        "raw" | "url" => {
            let mut f = Map::new();
            let key = if which == "raw" { "bytes" } else { "uri" };
            f.insert(key.into(), o.remove(which).unwrap_or_default());
            if let Some(m) = media_type.filter(|m| m.as_str().is_some_and(|s| !s.is_empty())) {
                f.insert("mimeType".into(), m);
            }
            if let Some(n) = filename.filter(|n| n.as_str().is_some_and(|s| !s.is_empty())) {
                f.insert("name".into(), n);
            }
            out.insert("kind".into(), json!("file"));
            out.insert("file".into(), Value::Object(f));
        }
        _ => {
            // v1.0 data is any JSON value; the model's is an object, so a bare value is
            // carried as {"value": …}.
            let data = match o.remove("data").unwrap_or_default() {
                Value::Object(d) => Value::Object(d),
                other => json!({ "value": other }),
            };
            out.insert("kind".into(), json!("data"));
            out.insert("data".into(), data);
        }
    }
    if let Some(m) = o.remove("metadata") {
        out.insert("metadata".into(), m);
    }
    Ok(Value::Object(out))
}

fn artifact_down(v: Value) -> Value {
    on_object(v, map_parts)
}

fn artifact_up(v: Value) -> Result<Value, String> {
    let mut o = into_object(v, "artifact")?;
    parts_up(&mut o, "artifact")?;
    default_str(&mut o, &["artifactId"]);
    Ok(Value::Object(o))
}

fn task_down(v: Value) -> Value {
    on_object(v, |o| {
        o.remove("kind");
        map_field(o, "status", status_down);
        map_list(o, "history", "history", message_down);
        map_list(o, "artifacts", "artifacts", artifact_down);
    })
}

fn task_up(v: Value) -> Result<Value, String> {
    let mut o = into_object(v, "task")?;
    let status = status_up(o.remove("status").unwrap_or_else(|| json!({})))?;
    o.insert("status".into(), status);
    if let Some(Value::Array(h)) = o.get_mut("history") {
        for (i, m) in h.iter_mut().enumerate() {
            *m = message_up(std::mem::take(m), &format!("task.history[{i}]"))?;
        }
    }
    if let Some(Value::Array(a)) = o.get_mut("artifacts") {
        for x in a.iter_mut() {
            *x = artifact_up(std::mem::take(x))?;
        }
    }
    default_str(&mut o, &["id", "contextId"]);
    o.insert("kind".into(), json!("task"));
    Ok(Value::Object(o))
}

/// v1.0 flat config `{taskId, id, url, token, authentication{scheme, credentials}}` -> the
/// model's `{taskId, pushNotificationConfig{…}}`.
fn push_config_up(mut o: Map<String, Value>) -> Result<Value, String> {
    o.remove("tenant");
    let task_id = o.remove("taskId").unwrap_or(json!(""));
    if !o.contains_key("url") {
        return Err("params.url is required".into());
    }
    if let Some(Value::Object(mut a)) = o.remove("authentication") {
        let scheme = a.remove("scheme").unwrap_or(json!("Bearer"));
        a.insert("schemes".into(), json!([scheme]));
        o.insert("authentication".into(), Value::Object(a));
    }
    if o.get("id").is_some_and(|i| i.as_str() == Some("")) {
        o.remove("id");
    }
    // Made over v1.0: its webhook gets v1.0 bodies.
    o.insert("x-agentry-protocol".into(), json!("1.0"));
    Ok(json!({ "taskId": task_id, "pushNotificationConfig": o }))
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
        assert_eq!(
            lower_camel("push_notification_config"),
            "pushNotificationConfig"
        );
        assert_eq!(lower_camel("_x"), "x");
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
        let wire = task(&t);
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
        let wire = stream_event(&ev);
        assert!(wire["statusUpdate"].get("final").is_none(), "{wire}");
        assert_eq!(
            wire["statusUpdate"]["status"]["state"],
            "TASK_STATE_COMPLETED"
        );
        // The client infers `final` from the state.
        assert_eq!(stream_event_from(wire).unwrap(), ev);
        let wire = stream_event(&StreamEvent::Task(t.clone()));
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
        let e = error(&RpcError::task_not_found("x"));
        assert_eq!(e.data.as_ref().unwrap()[0]["reason"], "TASK_NOT_FOUND");
        assert_eq!(http_status(e.code), 404);
        assert_eq!(
            state_down(TaskState::AuthRequired),
            "TASK_STATE_AUTH_REQUIRED"
        );
    }
}
