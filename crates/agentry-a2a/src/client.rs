//! A client for any A2A v0.3 agent: discovery, every method, streaming with resubscribe.
//!
//! ```no_run
//! use agentry_a2a::client::{A2aClient, ClientConfig};
//! use agentry_a2a::model::{Message, MessageSendParams, Role};
//! # async fn run() -> Result<(), agentry_a2a::A2aError> {
//! let client = A2aClient::discover("http://127.0.0.1:8080", ClientConfig::default()).await?;
//! let reply = client
//!     .send_message(MessageSendParams::new(Message::text(Role::User, "hi")))
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! Retries (exponential backoff with jitter) cover connection errors for every method, and 429
//! and 5xx answers for the methods that are safe to repeat (everything but `message/send` and
//! `message/stream`, whose repeat could run an agent twice). A stream that closes cleanly while
//! its task still runs is resubscribed automatically.

use std::time::Duration;

use futures_util::stream::{self, Stream, StreamExt};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::error::{A2aError, RpcError};
use crate::jsonrpc::{self, Request, Response};
use crate::model::*;
use crate::sse::SseParser;

/// How a client authenticates.
#[derive(Debug, Clone, Default)]
pub enum Auth {
    #[default]
    None,
    Bearer(String),
    /// Header name and key.
    ApiKey(String, String),
}

/// Client timeouts, retries and credentials.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    /// A stream with no bytes (not even a keep-alive) for this long is broken.
    pub stream_idle_timeout: Duration,
    /// Attempts after the first one.
    pub retries: u32,
    pub backoff: Duration,
    pub auth: Auth,
    /// Resubscribe when a stream closes cleanly before its final event.
    pub auto_resubscribe: bool,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(60),
            stream_idle_timeout: Duration::from_secs(90),
            retries: 3,
            backoff: Duration::from_millis(100),
            auth: Auth::None,
            auto_resubscribe: true,
        }
    }
}

/// A connection to one agent's JSON-RPC endpoint.
#[derive(Clone)]
pub struct A2aClient {
    http: reqwest::Client,
    endpoint: String,
    card: Option<AgentCard>,
    cfg: ClientConfig,
}

fn build_http(cfg: &ClientConfig) -> Result<reqwest::Client, A2aError> {
    reqwest::Client::builder()
        .connect_timeout(cfg.connect_timeout)
        .build()
        .map_err(|e| A2aError::Other(format!("cannot build HTTP client: {e}")))
}

fn map_send_error(e: reqwest::Error, url: &str, after: Duration) -> A2aError {
    if e.is_timeout() {
        A2aError::Timeout {
            what: format!("request to {url}"),
            after_ms: after.as_millis() as u64,
        }
    } else if e.is_connect() {
        A2aError::Connect {
            url: url.to_owned(),
            reason: root_cause(&e),
        }
    } else {
        A2aError::Other(format!("request to {url} failed: {}", root_cause(&e)))
    }
}

fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

/// Fetches an agent card from `base` (`/.well-known/agent-card.json`, then the legacy
/// `/.well-known/agent.json`). A URL that already names a `.json` file is fetched as is.
pub async fn fetch_card(base: &str, cfg: &ClientConfig) -> Result<AgentCard, A2aError> {
    let http = build_http(cfg)?;
    let base = base.trim_end_matches('/');
    let candidates = if base.ends_with(".json") {
        vec![base.to_owned()]
    } else {
        vec![
            format!("{base}/.well-known/agent-card.json"),
            format!("{base}/.well-known/agent.json"),
        ]
    };
    let mut last = None;
    for url in candidates {
        let req = with_auth(http.get(&url), &cfg.auth).timeout(cfg.request_timeout);
        let resp = req
            .send()
            .await
            .map_err(|e| map_send_error(e, &url, cfg.request_timeout))?;
        match resp.status().as_u16() {
            200..=299 => {
                let body = resp
                    .bytes()
                    .await
                    .map_err(|e| map_send_error(e, &url, cfg.request_timeout))?;
                let de = &mut serde_json::Deserializer::from_slice(&body);
                return serde_path_to_error::deserialize(de).map_err(|e| A2aError::InvalidCard {
                    url: url.clone(),
                    reason: format!("at {}: {}", e.path(), e.inner()),
                });
            }
            401 | 403 => return Err(A2aError::Unauthorized { url }),
            404 => last = Some(A2aError::CardNotFound { url }),
            s => {
                return Err(A2aError::Http {
                    status: s,
                    body: resp.text().await.unwrap_or_default(),
                    url,
                });
            }
        }
    }
    Err(last.unwrap_or_else(|| A2aError::Other("no card URL".into())))
}

fn with_auth(req: reqwest::RequestBuilder, auth: &Auth) -> reqwest::RequestBuilder {
    match auth {
        Auth::None => req,
        Auth::Bearer(t) => req.bearer_auth(t),
        Auth::ApiKey(h, k) => req.header(h.as_str(), k.as_str()),
    }
}

/// A small xorshift for jitter; seeded from the clock, no dependency needed.
fn jitter(d: Duration) -> Duration {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|t| t.subsec_nanos() as u64)
        .unwrap_or(7)
        | 1;
    let mut x = seed;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    let f = 0.5 + (x % 1000) as f64 / 2000.0; // 0.5 ..= 1.0
    d.mul_f64(f)
}

fn safe_to_retry(req: &Request) -> bool {
    !matches!(req, Request::SendMessage(_) | Request::StreamMessage(_))
}

impl A2aClient {
    /// A client for a known JSON-RPC endpoint (no card fetched).
    pub fn new(endpoint: &str, cfg: ClientConfig) -> Result<Self, A2aError> {
        Ok(A2aClient {
            http: build_http(&cfg)?,
            endpoint: endpoint.to_owned(),
            card: None,
            cfg,
        })
    }

    /// Fetches the card at `base` and talks to the endpoint it names.
    pub async fn discover(base: &str, cfg: ClientConfig) -> Result<Self, A2aError> {
        let card = fetch_card(base, &cfg).await?;
        if card.url.is_empty() {
            return Err(A2aError::InvalidCard {
                url: base.to_owned(),
                reason: "`url` is empty".into(),
            });
        }
        let mut c = Self::new(&card.url, cfg)?;
        c.card = Some(card);
        Ok(c)
    }

    pub fn card(&self) -> Option<&AgentCard> {
        self.card.as_ref()
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    async fn post(&self, req: &Request, streaming: bool) -> Result<reqwest::Response, A2aError> {
        let body = jsonrpc::encode_request(&Value::String(crate::new_id()), req);
        let mut attempt = 0;
        let mut delay = self.cfg.backoff;
        loop {
            let mut rb = with_auth(self.http.post(&self.endpoint), &self.cfg.auth)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(body.clone());
            if streaming {
                rb = rb.header(http::header::ACCEPT, "text/event-stream");
            } else {
                rb = rb.timeout(self.cfg.request_timeout);
            }
            let retryable = match rb.send().await {
                Ok(resp) => {
                    let s = resp.status().as_u16();
                    if (s == 429 || s >= 500) && safe_to_retry(req) && attempt < self.cfg.retries {
                        true
                    } else if s == 401 || s == 403 {
                        return Err(A2aError::Unauthorized {
                            url: self.endpoint.clone(),
                        });
                    } else if !(200..300).contains(&s) && !is_json(&resp) {
                        return Err(A2aError::Http {
                            status: s,
                            url: self.endpoint.clone(),
                            body: resp.text().await.unwrap_or_default(),
                        });
                    } else {
                        return Ok(resp);
                    }
                }
                Err(e) if e.is_connect() && attempt < self.cfg.retries => true,
                Err(e) if e.is_timeout() && safe_to_retry(req) && attempt < self.cfg.retries => {
                    true
                }
                Err(e) => return Err(map_send_error(e, &self.endpoint, self.cfg.request_timeout)),
            };
            debug_assert!(retryable);
            tokio::time::sleep(jitter(delay)).await;
            delay *= 2;
            attempt += 1;
        }
    }

    async fn call<T: DeserializeOwned>(&self, req: Request) -> Result<Option<T>, A2aError> {
        let resp = self.post(&req, false).await?;
        let body = resp
            .bytes()
            .await
            .map_err(|e| map_send_error(e, &self.endpoint, self.cfg.request_timeout))?;
        let de = &mut serde_json::Deserializer::from_slice(&body);
        let r: Response<T> = serde_path_to_error::deserialize(de).map_err(|e| {
            A2aError::InvalidResponse(format!(
                "{} answer at {}: {}",
                req.method(),
                e.path(),
                e.inner()
            ))
        })?;
        Ok(r.into_result()?)
    }

    async fn call_required<T: DeserializeOwned>(&self, req: Request) -> Result<T, A2aError> {
        let m = req.method();
        self.call(req)
            .await?
            .ok_or_else(|| A2aError::InvalidResponse(format!("{m} answered without a result")))
    }

    /// `message/send`.
    pub async fn send_message(
        &self,
        params: MessageSendParams,
    ) -> Result<SendMessageResult, A2aError> {
        self.call_required(Request::SendMessage(params)).await
    }

    /// `tasks/get`.
    pub async fn get_task(&self, id: &str, history_length: Option<i64>) -> Result<Task, A2aError> {
        self.call_required(Request::GetTask(TaskQueryParams {
            id: id.to_owned(),
            history_length,
            metadata: None,
        }))
        .await
    }

    /// `tasks/cancel`.
    pub async fn cancel_task(&self, id: &str) -> Result<Task, A2aError> {
        self.call_required(Request::CancelTask(TaskIdParams {
            id: id.to_owned(),
            metadata: None,
        }))
        .await
    }

    /// `tasks/pushNotificationConfig/set`.
    pub async fn set_push_config(
        &self,
        task_id: &str,
        config: PushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig, A2aError> {
        self.call_required(Request::SetPushConfig(TaskPushNotificationConfig {
            task_id: task_id.to_owned(),
            push_notification_config: config,
        }))
        .await
    }

    /// `tasks/pushNotificationConfig/get`.
    pub async fn get_push_config(
        &self,
        task_id: &str,
        config_id: Option<&str>,
    ) -> Result<TaskPushNotificationConfig, A2aError> {
        self.call_required(Request::GetPushConfig(
            GetTaskPushNotificationConfigParams {
                id: task_id.to_owned(),
                push_notification_config_id: config_id.map(str::to_owned),
                metadata: None,
            },
        ))
        .await
    }

    /// `tasks/pushNotificationConfig/list`.
    pub async fn list_push_configs(
        &self,
        task_id: &str,
    ) -> Result<Vec<TaskPushNotificationConfig>, A2aError> {
        Ok(self
            .call(Request::ListPushConfigs(TaskIdParams {
                id: task_id.to_owned(),
                metadata: None,
            }))
            .await?
            .unwrap_or_default())
    }

    /// `tasks/pushNotificationConfig/delete` (a missing `result` member is accepted: the
    /// Python SDK 0.3 omits it).
    pub async fn delete_push_config(&self, task_id: &str, config_id: &str) -> Result<(), A2aError> {
        self.call::<Value>(Request::DeletePushConfig(
            DeleteTaskPushNotificationConfigParams {
                id: task_id.to_owned(),
                push_notification_config_id: config_id.to_owned(),
                metadata: None,
            },
        ))
        .await
        .map(|_| ())
    }

    /// `agent/getAuthenticatedExtendedCard`.
    pub async fn extended_card(&self) -> Result<AgentCard, A2aError> {
        self.call_required(Request::GetExtendedCard).await
    }

    /// `message/stream`: the task's events until the final one.
    pub fn stream_message(
        &self,
        params: MessageSendParams,
    ) -> impl Stream<Item = Result<StreamEvent, A2aError>> + Send + 'static {
        self.open_stream(Request::StreamMessage(params))
    }

    /// `tasks/resubscribe`: the task's snapshot, then its events until the final one.
    pub fn resubscribe(
        &self,
        task_id: &str,
    ) -> impl Stream<Item = Result<StreamEvent, A2aError>> + Send + 'static {
        self.open_stream(Request::Resubscribe(TaskIdParams {
            id: task_id.to_owned(),
            metadata: None,
        }))
    }

    fn open_stream(
        &self,
        req: Request,
    ) -> impl Stream<Item = Result<StreamEvent, A2aError>> + Send + 'static {
        let (tx, rx) = mpsc::channel(64);
        let client = self.clone();
        tokio::spawn(async move {
            if let Err(e) = client.pump(req, &tx).await {
                let _ = tx.send(Err(e)).await;
            }
        });
        stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|x| (x, rx)) })
    }

    /// Reads streams into `tx`, resubscribing while the task is unfinished.
    async fn pump(
        &self,
        mut req: Request,
        tx: &mpsc::Sender<Result<StreamEvent, A2aError>>,
    ) -> Result<(), A2aError> {
        let mut resubscribes = 0;
        loop {
            let resp = self.post(&req, true).await?;
            if !is_event_stream(&resp) {
                // An error (or a non-streaming peer) answered with one JSON body.
                let body = resp
                    .bytes()
                    .await
                    .map_err(|e| map_send_error(e, &self.endpoint, self.cfg.request_timeout))?;
                let r: Response<StreamEvent> = serde_json::from_slice(&body)
                    .map_err(|e| A2aError::InvalidResponse(format!("stream answer: {e}")))?;
                if let Some(ev) = r.into_result()? {
                    let _ = tx.send(Ok(ev)).await;
                }
                return Ok(());
            }
            let mut body = resp.bytes_stream();
            let mut parser = SseParser::new();
            let mut task_id: Option<String> = None;
            loop {
                let chunk = tokio::time::timeout(self.cfg.stream_idle_timeout, body.next()).await;
                let chunk = match chunk {
                    Err(_) => {
                        return Err(A2aError::Timeout {
                            what: "stream idle (no event or keep-alive)".into(),
                            after_ms: self.cfg.stream_idle_timeout.as_millis() as u64,
                        });
                    }
                    Ok(None) => break,
                    Ok(Some(Err(e))) => {
                        tracing::debug!("stream read failed: {e}");
                        break;
                    }
                    Ok(Some(Ok(c))) => c,
                };
                for data in parser.push(&chunk) {
                    let r: Response<StreamEvent> = serde_json::from_str(&data).map_err(|e| {
                        A2aError::InvalidResponse(format!("stream event: {e}: {data}"))
                    })?;
                    let Some(ev) = r.into_result()? else { continue };
                    task_id = task_id.or_else(|| event_task_id(&ev));
                    let is_final = ev.is_final();
                    if tx.send(Ok(ev)).await.is_err() {
                        return Ok(()); // The caller dropped the stream.
                    }
                    if is_final {
                        return Ok(());
                    }
                    resubscribes = 0;
                }
            }
            // The stream closed before its final event.
            let Some(id) = task_id else {
                return Err(A2aError::InvalidResponse(
                    "stream closed before any event".into(),
                ));
            };
            if !self.cfg.auto_resubscribe || resubscribes >= self.cfg.retries.max(1) {
                return Err(A2aError::InvalidResponse(format!(
                    "stream closed before the final event of task {id}"
                )));
            }
            // Resubscribe only while the task still runs.
            let task = self.get_task(&id, Some(0)).await?;
            if task.state().ends_turn() {
                let _ = tx
                    .send(Ok(StreamEvent::StatusUpdate(TaskStatusUpdateEvent {
                        task_id: task.id.clone(),
                        context_id: task.context_id.clone(),
                        status: task.status.clone(),
                        is_final: true,
                        metadata: None,
                    })))
                    .await;
                return Ok(());
            }
            tracing::debug!(task = %id, "stream closed early; resubscribing");
            resubscribes += 1;
            req = Request::Resubscribe(TaskIdParams { id, metadata: None });
        }
    }
}

fn event_task_id(ev: &StreamEvent) -> Option<String> {
    match ev {
        StreamEvent::Task(t) => Some(t.id.clone()),
        StreamEvent::StatusUpdate(s) => Some(s.task_id.clone()),
        StreamEvent::ArtifactUpdate(a) => Some(a.task_id.clone()),
        StreamEvent::Message(m) => m.task_id.clone(),
    }
}

fn content_type(resp: &reqwest::Response) -> &str {
    resp.headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

fn is_json(resp: &reqwest::Response) -> bool {
    content_type(resp).contains("json")
}

fn is_event_stream(resp: &reqwest::Response) -> bool {
    content_type(resp).starts_with("text/event-stream")
}

/// Maps a JSON-RPC error code to a short name, for messages people read.
pub fn error_name(code: i64) -> &'static str {
    use crate::error::code::*;
    match code {
        PARSE_ERROR => "parse error",
        INVALID_REQUEST => "invalid request",
        METHOD_NOT_FOUND => "method not found",
        INVALID_PARAMS => "invalid params",
        INTERNAL_ERROR => "internal error",
        TASK_NOT_FOUND => "task not found",
        TASK_NOT_CANCELABLE => "task not cancelable",
        PUSH_NOTIFICATION_NOT_SUPPORTED => "push notifications not supported",
        UNSUPPORTED_OPERATION => "unsupported operation",
        CONTENT_TYPE_NOT_SUPPORTED => "content type not supported",
        INVALID_AGENT_RESPONSE => "invalid agent response",
        AUTHENTICATED_EXTENDED_CARD_NOT_CONFIGURED => "extended card not configured",
        _ => "error",
    }
}

impl RpcError {
    /// The code's name, e.g. "task not found".
    pub fn name(&self) -> &'static str {
        error_name(self.code)
    }
}
