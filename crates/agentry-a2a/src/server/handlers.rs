//! HTTP handlers: agent card, JSON-RPC dispatch, credentials.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http::{HeaderMap, HeaderValue, StatusCode, header};
use serde_json::Value;

use super::hub::AgentTasks;
use super::push::PushSender;
use super::{AgentService, Credentials, ServerConfig, stream};
use crate::error::RpcError;
use crate::jsonrpc::{self, Request};
use crate::model::*;

/// Everything a request to one agent needs.
pub(super) struct AgentState {
    card_json: Bytes,
    card_etag: HeaderValue,
    extended_card: Option<AgentCard>,
    credentials: Option<Credentials>,
    push_supported: bool,
    push: PushSender,
    pub tasks: Arc<AgentTasks>,
    pub keep_alive: Duration,
}

pub(super) fn router(agents: Vec<(String, AgentService)>, config: ServerConfig) -> Router {
    let push = PushSender::start(config.push.clone());
    let mut app = Router::new();
    for (path, svc) in agents {
        let push_supported = svc.card.capabilities.push_notifications == Some(true);
        let card_json = Bytes::from(serde_json::to_vec(&svc.card).unwrap_or_default());
        let card_etag = HeaderValue::from_str(&format!("\"{:016x}\"", fnv1a(&card_json)))
            .unwrap_or(HeaderValue::from_static("\"0\""));
        let state = Arc::new(AgentState {
            card_json,
            card_etag,
            extended_card: svc.extended_card,
            credentials: svc.credentials,
            push_supported,
            push: push.clone(),
            tasks: AgentTasks::new(
                svc.store,
                svc.executor,
                push_supported.then(|| push.clone()),
                config.stream_buffer,
            ),
            keep_alive: config.keep_alive,
        });
        let mut r = Router::new()
            .route(&format!("{path}/"), post(rpc))
            .route(&format!("{path}/.well-known/agent-card.json"), get(card))
            .route(&format!("{path}/.well-known/agent.json"), get(card));
        if !path.is_empty() {
            r = r.route(&path, post(rpc));
        }
        app = app.merge(r.with_state(state));
    }
    app.layer(DefaultBodyLimit::max(config.body_limit))
}

fn fnv1a(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf29ce484222325, |h, &x| {
        (h ^ x as u64).wrapping_mul(0x100000001b3)
    })
}

async fn card(State(s): State<Arc<AgentState>>, headers: HeaderMap) -> Response {
    let cache = [
        (
            header::CACHE_CONTROL,
            HeaderValue::from_static("public, max-age=300"),
        ),
        (header::ETAG, s.card_etag.clone()),
    ];
    if headers.get(header::IF_NONE_MATCH) == Some(&s.card_etag) {
        return (StatusCode::NOT_MODIFIED, cache).into_response();
    }
    (
        cache,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        s.card_json.clone(),
    )
        .into_response()
}

pub(super) fn json_body(body: Vec<u8>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

fn rpc_error(id: &Value, e: &RpcError) -> Response {
    json_body(jsonrpc::encode_error(id, e))
}

fn unauthorized(id: &Value) -> Response {
    let mut r = rpc_error(
        id,
        &RpcError::invalid_request(
            "authentication required: send `Authorization: Bearer <token>` or the API key header",
        ),
    );
    *r.status_mut() = StatusCode::UNAUTHORIZED;
    r.headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    r
}

/// JSON, or a JSON structured suffix; charset parameters are fine.
fn is_json(ct: &HeaderValue) -> bool {
    let Ok(ct) = ct.to_str() else { return false };
    let mime = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json"))
}

async fn rpc(State(s): State<Arc<AgentState>>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(ct) = headers.get(header::CONTENT_TYPE)
        && !is_json(ct)
    {
        return rpc_error(
            &Value::Null,
            &RpcError::content_type(ct.to_str().unwrap_or("?")),
        );
    }
    let (id, req) = match jsonrpc::decode_request(&body) {
        Ok(x) => x,
        Err((id, e)) => return rpc_error(&id, &e),
    };
    if let Some(c) = &s.credentials
        && c.required_for_all
        && !c.accepts(&headers)
    {
        return unauthorized(&id);
    }
    match req {
        Request::StreamMessage(p) => {
            if let Err(e) = check_push(&s, &p) {
                return stream::error(id, e, s.keep_alive);
            }
            match s.tasks.start(p).await {
                Ok(turn) => stream::turn(id, turn, s.keep_alive),
                Err(e) => stream::error(id, e, s.keep_alive),
            }
        }
        Request::Resubscribe(p) => match s.tasks.subscribe(&p.id).await {
            Ok((lease, task, rx)) => stream::resubscribe(id, lease, task, rx, s.keep_alive),
            Err(e) => stream::error(id, e, s.keep_alive),
        },
        Request::GetExtendedCard => match &s.extended_card {
            None => rpc_error(&id, &RpcError::extended_card_not_configured()),
            Some(card) => {
                if s.credentials.as_ref().is_some_and(|c| c.accepts(&headers)) {
                    json_body(jsonrpc::encode_result(&id, card))
                } else {
                    unauthorized(&id)
                }
            }
        },
        other => match unary(&s, other).await {
            Ok(body) => json_body(jsonrpc::encode_result(&id, &body)),
            Err(e) => rpc_error(&id, &e),
        },
    }
}

fn check_push(s: &AgentState, p: &MessageSendParams) -> Result<(), RpcError> {
    if let Some(cfg) = p
        .configuration
        .as_ref()
        .and_then(|c| c.push_notification_config.as_ref())
    {
        if !s.push_supported {
            return Err(RpcError::push_not_supported());
        }
        s.push.check_url(&cfg.url)?;
    }
    Ok(())
}

fn history_limit(h: Option<i64>) -> Option<usize> {
    h.map(|n| n.max(0) as usize)
}

/// Methods answered with one JSON body.
async fn unary(s: &AgentState, req: Request) -> Result<Value, RpcError> {
    let to_value = |v: Result<Value, serde_json::Error>| {
        v.map_err(|e| RpcError::internal(format!("encoding failed: {e}")))
    };
    match req {
        Request::SendMessage(p) => {
            check_push(s, &p)?;
            let blocking = p
                .configuration
                .as_ref()
                .and_then(|c| c.blocking)
                .unwrap_or(true);
            let limit = history_limit(p.configuration.as_ref().and_then(|c| c.history_length));
            let result = stream::await_result(s.tasks.start(p).await?, blocking).await;
            to_value(match result {
                SendMessageResult::Task(mut t) => {
                    t.limit_history(limit);
                    serde_json::to_value(t)
                }
                m => serde_json::to_value(m),
            })
        }
        Request::GetTask(q) => {
            let task = s.tasks.snapshot(&q.id).await?;
            to_value(serde_json::to_value(
                task.with_history_limit(history_limit(q.history_length)),
            ))
        }
        Request::CancelTask(p) => to_value(serde_json::to_value(s.tasks.cancel(&p.id).await?)),
        Request::SetPushConfig(p) => {
            if !s.push_supported {
                return Err(RpcError::push_not_supported());
            }
            s.push.check_url(&p.push_notification_config.url)?;
            let cfg = s
                .tasks
                .set_push(&p.task_id, p.push_notification_config)
                .await?;
            to_value(serde_json::to_value(TaskPushNotificationConfig {
                task_id: p.task_id,
                push_notification_config: cfg,
            }))
        }
        Request::GetPushConfig(p) => {
            let configs = push_configs(s, &p.id).await?;
            let want = p.push_notification_config_id.as_deref().unwrap_or(&p.id);
            let cfg = configs
                .into_iter()
                .find(|c| c.id.as_deref() == Some(want))
                .ok_or_else(|| {
                    RpcError::invalid_params(format!(
                        "task {} has no push notification config {want:?}",
                        p.id
                    ))
                })?;
            to_value(serde_json::to_value(TaskPushNotificationConfig {
                task_id: p.id,
                push_notification_config: cfg,
            }))
        }
        Request::ListPushConfigs(p) => {
            let configs = push_configs(s, &p.id).await?;
            let list: Vec<_> = configs
                .into_iter()
                .map(|c| TaskPushNotificationConfig {
                    task_id: p.id.clone(),
                    push_notification_config: c,
                })
                .collect();
            to_value(serde_json::to_value(list))
        }
        Request::DeletePushConfig(p) => {
            if !s.push_supported {
                return Err(RpcError::push_not_supported());
            }
            s.tasks
                .delete_push(&p.id, &p.push_notification_config_id)
                .await?;
            Ok(Value::Null)
        }
        Request::StreamMessage(_) | Request::Resubscribe(_) | Request::GetExtendedCard => {
            Err(RpcError::internal("streaming method routed as unary"))
        }
    }
}

async fn push_configs(
    s: &AgentState,
    task_id: &str,
) -> Result<Vec<PushNotificationConfig>, RpcError> {
    if !s.push_supported {
        return Err(RpcError::push_not_supported());
    }
    s.tasks.snapshot(task_id).await?;
    s.tasks
        .store
        .list_push(task_id)
        .await
        .map_err(|e| RpcError::internal(e.to_string()))
}
