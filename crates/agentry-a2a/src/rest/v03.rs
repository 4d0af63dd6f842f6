//! The v0.3 HTTP+JSON binding: the same resources under `/v1/…`, with bodies in the ProtoJSON
//! of the v0.3 proto. That form is v1.0's with older names: `Message.content` for `parts`,
//! `Part.file{fileWithUri|fileWithBytes, mimeType, name}` and `Part.data{data}`,
//! `configuration.blocking` and `.pushNotification`, push configs nested under a resource
//! `name`, a `final` flag on status updates, and no `referenceTaskIds`. So these functions
//! rewrite between the two and the v1.0 codec does the rest.
//!
//! v0.3 peers parse strictly (unknown fields fail), so what goes out carries only v0.3 fields.

use serde_json::{Map, Value, json};

/// A v0.3 `SendMessageRequest` body as v1.0 params. `blocking` is a plain proto3 bool here,
/// so an absent one is `false` (the reference SDK's server reads it so, and its client leaves
/// `false` out).
pub fn send_request_to_v1(mut p: Map<String, Value>) -> Map<String, Value> {
    if let Some(m) = p.remove("message").or_else(|| p.remove("request")) {
        p.insert("message".into(), message_to_v1(m));
    }
    let c = p
        .entry("configuration")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(c) = c {
        let blocking = c.remove("blocking") == Some(Value::Bool(true));
        c.insert("returnImmediately".into(), json!(!blocking));
        if let Some(Value::Object(push)) = c.remove("pushNotification") {
            c.insert(
                "taskPushNotificationConfig".into(),
                Value::Object(push_config_to_v1(push)),
            );
        }
    }
    p
}

/// A v0.3 push config body (`{parent, configId, config: {name, pushNotificationConfig}}`, or
/// the `config` alone, or a bare `PushNotificationConfig`) as v1.0 params for `task_id`.
pub fn create_push_to_v1(mut p: Map<String, Value>, task_id: &str) -> Map<String, Value> {
    let config_id = p.remove("configId");
    let mut cfg = match p.remove("config") {
        Some(Value::Object(c)) => c,
        _ => p,
    };
    let mut inner = match cfg.remove("pushNotificationConfig") {
        Some(Value::Object(i)) => i,
        _ => cfg,
    };
    if let Some(id) = config_id.filter(|i| i.as_str().is_some_and(|s| !s.is_empty())) {
        inner.entry("id").or_insert(id);
    }
    let mut out = push_config_to_v1(inner);
    out.insert("taskId".into(), json!(task_id));
    out
}

/// A v0.3 `PushNotificationConfig` as v1.0's flat form (without the task id).
fn push_config_to_v1(mut c: Map<String, Value>) -> Map<String, Value> {
    if let Some(Value::Object(mut a)) = c.remove("authentication") {
        let scheme = match a.remove("schemes") {
            Some(Value::Array(s)) => s.into_iter().next().unwrap_or(json!("Bearer")),
            _ => json!("Bearer"),
        };
        a.insert("scheme".into(), scheme);
        c.insert("authentication".into(), Value::Object(a));
    }
    c
}

fn message_to_v1(m: Value) -> Value {
    on_object(m, |o| map_list(o, "content", "parts", part_to_v1))
}

fn artifact_to_v1(a: Value) -> Value {
    on_object(a, |o| map_list(o, "parts", "parts", part_to_v1))
}

fn part_to_v1(p: Value) -> Value {
    let Value::Object(mut o) = p else { return p };
    if let Some(Value::Object(mut f)) = o.remove("file") {
        if let Some(u) = f.remove("fileWithUri") {
            o.insert("url".into(), u);
        }
        if let Some(b) = f.remove("fileWithBytes") {
            o.insert("raw".into(), b);
        }
        if let Some(m) = f.remove("mimeType") {
            o.insert("mediaType".into(), m);
        }
        if let Some(n) = f.remove("name") {
            o.insert("filename".into(), n);
        }
    } else if let Some(Value::Object(mut d)) = o.remove("data") {
        o.insert("data".into(), d.remove("data").unwrap_or(json!({})));
    }
    Value::Object(o)
}

// ---------------------------------------------------------------------------------------------
// v1.0 answers -> v0.3 ProtoJSON.

/// `SendMessageResponse` / `StreamResponse` / `Task` / push config answers: rewrites every
/// message, part, status update and push config inside `v` (a v1.0 answer) to v0.3 form.
/// `final_flag` is the `final` of a status update (v1.0 has none).
pub fn answer_from_v1(v: Value, final_flag: bool) -> Value {
    on_object(v, |o| {
        map_field(o, "task", task_from_v1);
        map_field(o, "message", message_from_v1);
        map_field(o, "statusUpdate", |s| {
            on_object(s, |s| {
                map_field(s, "status", status_from_v1);
                s.insert("final".into(), json!(final_flag));
            })
        });
        map_field(o, "artifactUpdate", |a| {
            on_object(a, |a| map_field(a, "artifact", artifact_from_v1))
        });
    })
}

/// A v1.0 task in v0.3's shape.
pub fn task_from_v1(t: Value) -> Value {
    on_object(t, |o| {
        map_field(o, "status", status_from_v1);
        map_list(o, "history", "history", message_from_v1);
        map_list(o, "artifacts", "artifacts", artifact_from_v1);
    })
}

/// The state spellings that differ: the v0.3 proto spells it the British way.
const CANCELED: (&str, &str) = ("TASK_STATE_CANCELED", "TASK_STATE_CANCELLED");

fn status_from_v1(s: Value) -> Value {
    on_object(s, |o| {
        map_field(o, "message", message_from_v1);
        if o.get("state").and_then(Value::as_str) == Some(CANCELED.0) {
            o.insert("state".into(), json!(CANCELED.1));
        }
    })
}

fn status_to_v1(s: Value) -> Value {
    on_object(s, |o| {
        map_field(o, "message", message_to_v1);
        if o.get("state").and_then(Value::as_str) == Some(CANCELED.1) {
            o.insert("state".into(), json!(CANCELED.0));
        }
    })
}

fn message_from_v1(m: Value) -> Value {
    on_object(m, |o| {
        o.remove("referenceTaskIds");
        map_list(o, "parts", "content", part_from_v1);
    })
}

fn artifact_from_v1(a: Value) -> Value {
    on_object(a, |o| map_list(o, "parts", "parts", part_from_v1))
}

fn part_from_v1(p: Value) -> Value {
    let Value::Object(mut o) = p else { return p };
    let mut out = Map::new();
    if let Some(t) = o.remove("text") {
        out.insert("text".into(), t);
    } else if o.contains_key("raw") || o.contains_key("url") {
        let mut f = Map::new();
        if let Some(u) = o.remove("url") {
            f.insert("fileWithUri".into(), u);
        }
        if let Some(b) = o.remove("raw") {
            f.insert("fileWithBytes".into(), b);
        }
        if let Some(m) = o.remove("mediaType") {
            f.insert("mimeType".into(), m);
        }
        if let Some(n) = o.remove("filename") {
            f.insert("name".into(), n);
        }
        out.insert("file".into(), Value::Object(f));
    } else if let Some(d) = o.remove("data") {
        out.insert("data".into(), json!({ "data": d }));
    }
    if let Some(m) = o.remove("metadata") {
        out.insert("metadata".into(), m);
    }
    Value::Object(out)
}

/// A v1.0 flat push config as v0.3's `TaskPushNotificationConfig`.
pub fn push_config_from_v1(c: Value) -> Value {
    let Value::Object(mut o) = c else { return c };
    let task_id = o
        .remove("taskId")
        .and_then(|t| t.as_str().map(str::to_owned))
        .unwrap_or_default();
    o.remove("tenant");
    let id = o
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    if let Some(Value::Object(mut a)) = o.remove("authentication") {
        let scheme = a.remove("scheme").unwrap_or(json!("Bearer"));
        a.insert("schemes".into(), json!([scheme]));
        o.insert("authentication".into(), Value::Object(a));
    }
    json!({
        "name": format!("tasks/{task_id}/pushNotificationConfigs/{id}"),
        "pushNotificationConfig": o,
    })
}

/// v1.0's `{configs}` list as v0.3's.
pub fn push_list_from_v1(v: Value) -> Value {
    on_object(v, |o| {
        map_list(o, "configs", "configs", push_config_from_v1)
    })
}

/// v0.3's `{configs}` list as v1.0's.
pub fn push_list_to_v1(v: Value) -> Value {
    on_object(v, |o| {
        map_list(o, "configs", "configs", push_config_to_v1_answer)
    })
}

/// A v0.3 answer (ProtoJSON) as the v1.0 one it stands for, for a client reading a v0.3
/// HTTP+JSON server: the inverse of [`answer_from_v1`].
pub fn answer_to_v1(v: Value) -> Value {
    on_object(v, |o| {
        map_field(o, "task", task_to_v1);
        map_field(o, "message", message_to_v1);
        map_field(o, "statusUpdate", |s| {
            on_object(s, |s| {
                s.remove("final");
                map_field(s, "status", status_to_v1);
            })
        });
        map_field(o, "artifactUpdate", |a| {
            on_object(a, |a| map_field(a, "artifact", artifact_to_v1))
        });
    })
}

/// A v0.3 `Task` as v1.0's.
pub fn task_to_v1(t: Value) -> Value {
    on_object(t, |o| {
        map_field(o, "status", status_to_v1);
        map_list(o, "history", "history", message_to_v1);
        map_list(o, "artifacts", "artifacts", artifact_to_v1);
    })
}

/// A v0.3 `TaskPushNotificationConfig` as v1.0's flat one.
pub fn push_config_to_v1_answer(v: Value) -> Value {
    let Value::Object(mut o) = v else { return v };
    let task_id = o
        .get("name")
        .and_then(Value::as_str)
        .and_then(|n| n.strip_prefix("tasks/"))
        .and_then(|n| n.split('/').next())
        .unwrap_or_default()
        .to_owned();
    let inner = match o.remove("pushNotificationConfig") {
        Some(Value::Object(i)) => i,
        _ => o,
    };
    let mut flat = push_config_to_v1(inner);
    flat.insert("taskId".into(), json!(task_id));
    Value::Object(flat)
}

/// A v0.3 `SendMessageRequest` body from v1.0 params (for a client).
pub fn send_request_from_v1(v: Value) -> Value {
    let Value::Object(mut p) = v else { return v };
    map_field(&mut p, "message", message_from_v1);
    // Always explicit: a v0.3 REST server reads a missing `blocking` as `false`.
    let c = p
        .entry("configuration")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(c) = c {
        let ret = c.remove("returnImmediately");
        c.insert("blocking".into(), json!(ret != Some(Value::Bool(true))));
        if let Some(push) = c.remove("taskPushNotificationConfig") {
            let nested = push_config_from_v1(push);
            c.insert(
                "pushNotification".into(),
                nested["pushNotificationConfig"].clone(),
            );
        }
    }
    Value::Object(p)
}

// ---------------------------------------------------------------------------------------------
// Small tools for rewriting JSON objects in place.

/// Replaces `o[key]` by `f` of it, when present.
fn map_field(o: &mut Map<String, Value>, key: &str, f: impl FnOnce(Value) -> Value) {
    if let Some(v) = o.remove(key) {
        o.insert(key.into(), f(v));
    }
}

/// Moves the list `o[from]` to `o[to]`, each element through `f` (a non-list stays as it is).
fn map_list(o: &mut Map<String, Value>, from: &str, to: &str, f: fn(Value) -> Value) {
    if !matches!(o.get(from), Some(Value::Array(_))) {
        return;
    }
    if let Some(Value::Array(items)) = o.remove(from) {
        o.insert(to.into(), Value::Array(items.into_iter().map(f).collect()));
    }
}

/// Applies `f` to an object (anything else passes through).
fn on_object(v: Value, f: impl FnOnce(&mut Map<String, Value>)) -> Value {
    let Value::Object(mut o) = v else { return v };
    f(&mut o);
    Value::Object(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v03_bodies_map_to_v1_and_back() {
        let body = json!({
            "message": {"messageId": "m", "role": "ROLE_USER", "content": [
                {"text": "hi"},
                {"file": {"fileWithBytes": "dGNr", "mimeType": "text/plain", "name": "a.txt"}},
                {"data": {"data": {"k": 1}}}
            ]},
            "configuration": {"blocking": false, "pushNotification": {"url": "https://h", "token": "t",
                "authentication": {"schemes": ["Bearer"]}}}
        });
        let v1 = Value::Object(send_request_to_v1(body.as_object().unwrap().clone()));
        assert_eq!(
            v1["message"]["parts"],
            json!([{"text": "hi"},
                   {"raw": "dGNr", "mediaType": "text/plain", "filename": "a.txt"},
                   {"data": {"k": 1}}])
        );
        assert_eq!(v1["configuration"]["returnImmediately"], true);
        assert_eq!(
            v1["configuration"]["taskPushNotificationConfig"]["authentication"]["scheme"],
            "Bearer"
        );
        // And back, as a client sends it.
        assert_eq!(send_request_from_v1(v1), body);
    }

    #[test]
    fn answers_drop_v1_only_fields_and_add_final() {
        let v1 = json!({"statusUpdate": {"taskId": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_COMPLETED",
                       "message": {"messageId": "m", "role": "ROLE_AGENT",
                                   "referenceTaskIds": ["x"], "parts": [{"text": "ok"}]}}}});
        let old = answer_from_v1(v1.clone(), true);
        let m = &old["statusUpdate"]["status"]["message"];
        assert_eq!(m["content"], json!([{"text": "ok"}]));
        assert!(m.get("referenceTaskIds").is_none() && m.get("parts").is_none());
        assert_eq!(old["statusUpdate"]["final"], true);
        let back = answer_to_v1(old);
        assert_eq!(
            back["statusUpdate"]["status"]["message"]["parts"],
            json!([{"text": "ok"}])
        );
        let cfg = json!({"taskId": "t", "id": "c", "url": "https://h",
                         "authentication": {"scheme": "Bearer"}});
        let old = push_config_from_v1(cfg.clone());
        assert_eq!(old["name"], "tasks/t/pushNotificationConfigs/c");
        assert_eq!(push_config_to_v1_answer(old), cfg);
    }
}
