//! The v0.3 HTTP+JSON binding: the same resources under `/v1/…`, with bodies in the ProtoJSON
//! of the v0.3 proto ([`crate::wire::v03`]'s types). The server decodes v0.3 bodies straight
//! into those types and answers from borrowed views of the model; a client reading a v0.3
//! server gets its answers as the v1.0 JSON the client's decoders read (typed both ways: the
//! v0.3 answer into the model, the model into v1.0's wire form).

use serde_json::Value;

use crate::error::RpcError;
use crate::model::{MessageSendParams, TaskPushNotificationConfig};
use crate::request::{self, Request};
use crate::v1;
use crate::wire::{read, v03 as wire};

/// A v0.3 `SendMessageRequest` body as the model's params, checked as every send is.
pub fn decode_send(raw: &str) -> Result<MessageSendParams, RpcError> {
    let w: wire::SendMessageRequest = request::parse_str(raw)?;
    request::validate_send(w.into_model().map_err(request::invalid_params)?)
}

/// A v0.3 push config body (`{parent, configId, config: {name, pushNotificationConfig}}`, or
/// the `config` alone, or a bare `PushNotificationConfig`) for `task_id`.
pub fn decode_create_push(
    raw: &str,
    task_id: &str,
) -> Result<TaskPushNotificationConfig, RpcError> {
    let w: wire::CreatePushBody = request::parse_str(raw).map_err(|_| {
        RpcError::invalid_params(
            "params: expected {parent, configId, config}, {name, pushNotificationConfig} or a \
             push notification config with a url",
        )
    })?;
    Ok(w.into_model(task_id))
}

fn to_value<T: serde::Serialize>(v: T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// A v0.3 stream item or send answer (`{task|message|statusUpdate|artifactUpdate}`) as the
/// v1.0 one it stands for.
pub fn stream_item_to_v1(v: Value) -> Result<Value, String> {
    let ev = read::<wire::StreamResponse>(v)?
        .into_model()
        .map_err(|e| e.to_string())?;
    Ok(to_value(v1::stream_event(&ev)))
}

/// A v0.3 HTTP+JSON answer to `req` as the v1.0 answer the client's decoders read.
pub fn answer_to_v1(req: &Request, v: Value) -> Result<Value, String> {
    match req {
        Request::GetTask(_) | Request::CancelTask(_) => {
            let t = read::<wire::Task>(v)?
                .into_model()
                .map_err(|e| e.to_string())?;
            Ok(to_value(v1::task(&t)))
        }
        Request::SetPushConfig(_) | Request::GetPushConfig(_) => {
            let c = read::<wire::TaskPushNotificationConfig>(v)?.into_model();
            Ok(to_value(v1::push_config(&c)))
        }
        Request::ListPushConfigs(_) => {
            let list: Vec<_> = read::<wire::ListPushConfigsResponse>(v)?
                .configs
                .into_iter()
                .map(wire::TaskPushNotificationConfig::into_model)
                .collect();
            Ok(to_value(v1::push_config_list(&list)))
        }
        Request::GetExtendedCard | Request::DeletePushConfig(_) | Request::ListTasks(_) => Ok(v),
        Request::SendMessage(_) | Request::StreamMessage(_) | Request::Resubscribe(_) => {
            stream_item_to_v1(v)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::*;
    use serde_json::json;

    #[test]
    fn v03_bodies_decode_and_encode_back() {
        let body = json!({
            "message": {"messageId": "m", "role": "ROLE_USER", "content": [
                {"text": "hi"},
                {"file": {"fileWithBytes": "dGNr", "mimeType": "text/plain", "name": "a.txt"}},
                {"data": {"data": {"k": 1}}}
            ]},
            "configuration": {"blocking": false, "pushNotification": {"url": "https://h", "token": "t",
                "authentication": {"schemes": ["Bearer"]}}}
        });
        let p = decode_send(&body.to_string()).unwrap();
        assert_eq!(p.message.parts.len(), 3);
        assert_eq!(
            p.message.parts[1],
            Part::file(File {
                content: FileContent::Bytes("dGNr".into()),
                mime_type: Some("text/plain".into()),
                name: Some("a.txt".into()),
            })
        );
        let c = p.configuration.clone().unwrap();
        assert_eq!(c.blocking, Some(false));
        let push = c.push_notification_config.unwrap();
        assert_eq!(push.authentication.unwrap().schemes, ["Bearer"]);
        // v0.3 webhooks get v0.3 bodies.
        assert_eq!(push.body_version, None);
        // And back, as a client sends it.
        assert_eq!(to_value(wire::SendMessageRequest::from(&p)), body);
        // A missing `blocking` is `false` (a plain proto3 bool).
        let p = decode_send(
            r#"{"request":{"messageId":"m","role":"ROLE_USER","content":[{"text":"x"}]}}"#,
        )
        .unwrap();
        assert_eq!(p.configuration.unwrap().blocking, Some(false));
        let e = decode_send(r#"{"message":{"messageId":"m","role":"ROLE_USER","content":[{}]}}"#)
            .unwrap_err();
        assert!(
            e.message.contains("params.message.content[0]"),
            "{}",
            e.message
        );
    }

    #[test]
    fn answers_carry_only_v03_fields_and_final() {
        let mut m = Message::text(Role::Agent, "ok");
        m.reference_task_ids.push("x".into());
        let ev = StreamEvent::StatusUpdate(TaskStatusUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            status: TaskStatus {
                state: TaskState::Canceled,
                message: Some(m),
                timestamp: None,
            },
            is_final: true,
            metadata: None,
        });
        let old = to_value(wire::StreamResponse::from(&ev));
        let s = &old["statusUpdate"];
        assert_eq!(s["final"], true);
        assert_eq!(s["status"]["state"], "TASK_STATE_CANCELLED");
        assert_eq!(s["status"]["message"]["content"], json!([{"text": "ok"}]));
        assert!(s["status"]["message"].get("referenceTaskIds").is_none());
        let back = stream_item_to_v1(old).unwrap();
        assert_eq!(
            back["statusUpdate"]["status"]["state"],
            "TASK_STATE_CANCELED"
        );
        assert_eq!(
            back["statusUpdate"]["status"]["message"]["parts"],
            json!([{"text": "ok"}])
        );
        let cfg = TaskPushNotificationConfig {
            task_id: "t".into(),
            push_notification_config: PushNotificationConfig {
                id: Some("c".into()),
                url: "https://h".into(),
                token: None,
                authentication: Some(PushNotificationAuthenticationInfo {
                    schemes: vec!["Bearer".into()],
                    credentials: None,
                }),
                body_version: None,
            },
        };
        let old = to_value(wire::TaskPushNotificationConfig::from(&cfg));
        assert_eq!(old["name"], "tasks/t/pushNotificationConfigs/c");
        let v1 = answer_to_v1(
            &Request::GetPushConfig(GetTaskPushNotificationConfigParams {
                id: "t".into(),
                push_notification_config_id: None,
                metadata: None,
            }),
            old,
        )
        .unwrap();
        assert_eq!(
            v1,
            json!({"taskId": "t", "id": "c", "url": "https://h", "authentication": {"scheme": "Bearer"}})
        );
        // The create body in each form peers send.
        for body in [
            json!({"parent": "tasks/t", "configId": "c", "config": {"name": "", "pushNotificationConfig": {"url": "https://h"}}}),
            json!({"name": "tasks/t/pushNotificationConfigs/c", "pushNotificationConfig": {"id": "c", "url": "https://h"}}),
            json!({"id": "c", "url": "https://h"}),
        ] {
            let c = decode_create_push(&body.to_string(), "t").unwrap();
            assert_eq!(c.task_id, "t");
            assert_eq!(
                c.push_notification_config.id.as_deref(),
                Some("c"),
                "{body}"
            );
            assert_eq!(c.push_notification_config.url, "https://h");
        }
        assert_eq!(
            decode_create_push(r#"{"token":"x"}"#, "t")
                .unwrap_err()
                .code,
            crate::error::code::INVALID_PARAMS
        );
    }
}
