//! OpenAI-compatible Chat Completions: one provider for vLLM, Ollama, llama.cpp server,
//! LM Studio and hosted APIs.

use std::time::Duration;

use agentry_a2a::client::{MAX_ERROR_TEXT, read_limited, read_prefix};
use agentry_a2a::sse::SseParser;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::*;

/// The most of a model's answer held (a whole answer, or one event of a stream): far past
/// any completion, and a server that never stops answering is cut off there.
const MAX_ANSWER: usize = 64 << 20;

/// Where and how to reach the server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct OpenAiConfig {
    /// e.g. `http://127.0.0.1:8000/v1`
    pub base_url: String,
    /// The model to ask for.
    pub model: String,
    /// The key itself; when absent it is read from the variable named by `api_key_env`.
    pub api_key: Option<String>,
    /// The environment variable holding the key (default `OPENAI_API_KEY`).
    pub api_key_env: String,
    /// How long to wait for a connection.
    pub connect_timeout_ms: u64,
    /// The longest wait for an answer; for a streamed one, for its first bytes and between
    /// two chunks (a model that goes silent mid-stream ends the call too).
    pub request_timeout_ms: u64,
    /// Attempts after the first, on connection errors, 429 and 5xx.
    pub retries: u32,
    /// The first retry's wait; doubled after each.
    pub backoff_ms: u64,
    /// The server supports native tool calls (most do; set false for plain completion servers).
    pub native_tools: bool,
    /// The server supports `response_format: json_schema`.
    pub json_schema: bool,
}

impl Default for OpenAiConfig {
    fn default() -> Self {
        OpenAiConfig {
            base_url: "http://127.0.0.1:8000/v1".into(),
            model: "default".into(),
            api_key: None,
            api_key_env: "OPENAI_API_KEY".into(),
            connect_timeout_ms: 5_000,
            request_timeout_ms: 120_000,
            retries: 3,
            backoff_ms: 500,
            native_tools: true,
            json_schema: true,
        }
    }
}

/// The OpenAI-compatible provider.
pub struct OpenAiProvider {
    cfg: OpenAiConfig,
    http: reqwest::Client,
    key: Option<String>,
}

impl OpenAiProvider {
    /// A provider for `cfg` (its HTTP client built once).
    pub fn new(cfg: OpenAiConfig) -> Result<Self, LlmError> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(cfg.connect_timeout_ms))
            .build()
            .map_err(LlmError::backend)?;
        let key = cfg
            .api_key
            .clone()
            .or_else(|| std::env::var(&cfg.api_key_env).ok())
            .filter(|k| !k.is_empty());
        Ok(OpenAiProvider { cfg, http, key })
    }

    fn url(&self) -> String {
        format!(
            "{}/chat/completions",
            self.cfg.base_url.trim_end_matches('/')
        )
    }

    fn body(&self, req: &ChatRequest, stream: bool) -> Value {
        let messages: Vec<Value> = req.messages.iter().map(wire_message).collect();
        let mut body = json!({"model": self.cfg.model, "messages": messages});
        if !req.tools.is_empty() && self.cfg.native_tools {
            body["tools"] = req
                .tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "function": {
                        "name": t.name, "description": t.description, "parameters": t.parameters}})
                })
                .collect();
        }
        if let Some(n) = req.max_tokens {
            body["max_tokens"] = json!(n);
        }
        if let Some(t) = req.temperature {
            body["temperature"] = json!(t);
        }
        if !req.stop.is_empty() {
            body["stop"] = json!(req.stop);
        }
        if let Some(schema) = &req.json_schema
            && self.cfg.json_schema
        {
            body["response_format"] = json!({"type": "json_schema",
                "json_schema": {"name": "output", "schema": schema}});
        }
        if stream {
            body["stream"] = json!(true);
            body["stream_options"] = json!({"include_usage": true});
        }
        body
    }

    /// POSTs with retries on connection errors, 429 and 5xx.
    async fn post(&self, body: &Value, stream: bool) -> Result<reqwest::Response, LlmError> {
        let url = self.url();
        let mut delay = Duration::from_millis(self.cfg.backoff_ms);
        let mut attempt = 0;
        loop {
            let mut rb = self.http.post(&url).json(body);
            if !stream {
                rb = rb.timeout(Duration::from_millis(self.cfg.request_timeout_ms));
            }
            if let Some(k) = &self.key {
                rb = rb.bearer_auth(k);
            }
            // A streamed request cannot have a whole-request timeout (it may rightly run
            // long): its headers get one here, its chunks one each in `async_stream`.
            let limit = Duration::from_millis(self.cfg.request_timeout_ms);
            let sent = match tokio::time::timeout(limit, rb.send()).await {
                Ok(sent) => sent,
                Err(_) => return Err(LlmError::Timeout(self.cfg.request_timeout_ms)),
            };
            let retry = match sent {
                Ok(r) if r.status().is_success() => return Ok(r),
                Ok(r) => {
                    let status = r.status().as_u16();
                    let body = read_prefix(r, MAX_ERROR_TEXT).await;
                    if (status == 429 || status >= 500) && attempt < self.cfg.retries {
                        tracing::debug!(status, attempt, "model API busy; retrying");
                        true
                    } else {
                        return Err(LlmError::Http { status, body });
                    }
                }
                Err(e) if e.is_connect() && attempt < self.cfg.retries => true,
                Err(e) if e.is_timeout() => {
                    return Err(LlmError::Timeout(self.cfg.request_timeout_ms));
                }
                Err(e) => {
                    return Err(LlmError::Connect {
                        url,
                        reason: e.to_string(),
                    });
                }
            };
            debug_assert!(retry);
            tokio::time::sleep(delay).await;
            delay *= 2;
            attempt += 1;
        }
    }
}

fn wire_message(m: &ChatMessage) -> Value {
    let role = match m.role {
        ChatRole::System => "system",
        ChatRole::User => "user",
        ChatRole::Assistant => "assistant",
        ChatRole::Tool => "tool",
    };
    let mut v = json!({"role": role, "content": m.content});
    if !m.tool_calls.is_empty() {
        v["tool_calls"] = m
            .tool_calls
            .iter()
            .map(|c| {
                let args = match &c.arguments {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": args}})
            })
            .collect();
    }
    if let Some(id) = &m.tool_call_id {
        v["tool_call_id"] = json!(id);
    }
    v
}

#[derive(Deserialize)]
struct WireResponse {
    choices: Vec<WireChoice>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct WireChoice {
    #[serde(default)]
    message: Option<WireMessage>,
    #[serde(default)]
    delta: Option<WireMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct WireMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Vec<WireToolCall>,
}

#[derive(Deserialize)]
struct WireToolCall {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: WireFunction,
}

#[derive(Deserialize, Default)]
struct WireFunction {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

fn finish(reason: Option<&str>, has_calls: bool) -> FinishReason {
    match reason {
        Some("stop") | None if !has_calls => FinishReason::Stop,
        Some("tool_calls") | Some("function_call") | None => FinishReason::ToolCalls,
        Some("stop") => FinishReason::ToolCalls,
        Some("length") => FinishReason::Length,
        Some("content_filter") => FinishReason::ContentFilter,
        Some(other) => FinishReason::Other(other.to_owned()),
    }
}

/// Arguments arrive as a JSON string; one that does not parse stays a string.
fn parse_args(s: &str) -> Value {
    if s.trim().is_empty() {
        return Value::Object(Default::default());
    }
    serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.to_owned()))
}

fn assistant(content: String, calls: Vec<ToolCall>) -> ChatMessage {
    ChatMessage {
        role: ChatRole::Assistant,
        content,
        tool_calls: calls,
        tool_call_id: None,
    }
}

impl LlmProvider for OpenAiProvider {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            native_tools: self.cfg.native_tools,
            json_schema: self.cfg.json_schema,
            streaming: true,
        }
    }

    fn provider_name(&self) -> &str {
        "openai"
    }

    fn model_name(&self) -> &str {
        &self.cfg.model
    }

    async fn chat(&self, req: ChatRequest) -> Result<ChatResponse, LlmError> {
        let resp = self.post(&self.body(&req, false), false).await?;
        // BodyError says which: "the answer is larger than N bytes", or why the read failed.
        let bytes = read_limited(resp, MAX_ANSWER)
            .await
            .map_err(|e| LlmError::InvalidResponse(e.to_string()))?;
        let w: WireResponse = serde_json::from_slice(&bytes).map_err(|e| {
            // The start of the body says what came back; all of it could be megabytes.
            let head = String::from_utf8_lossy(&bytes[..bytes.len().min(300)]).into_owned();
            LlmError::InvalidResponse(format!("{e}: {head}"))
        })?;
        let choice = w
            .choices
            .into_iter()
            .next()
            .ok_or_else(|| LlmError::InvalidResponse("no choices".into()))?;
        let m = choice.message.unwrap_or_default();
        let calls: Vec<ToolCall> = m
            .tool_calls
            .into_iter()
            .enumerate()
            .map(|(i, c)| ToolCall {
                id: c.id.unwrap_or_else(|| format!("call_{i}")),
                name: c.function.name.unwrap_or_default(),
                arguments: parse_args(c.function.arguments.as_deref().unwrap_or("")),
            })
            .collect();
        let reason = finish(choice.finish_reason.as_deref(), !calls.is_empty());
        Ok(ChatResponse {
            message: assistant(m.content.unwrap_or_default(), calls),
            usage: w.usage.unwrap_or_default(),
            finish_reason: reason,
        })
    }

    fn chat_stream(&self, req: ChatRequest) -> DeltaStream<'_> {
        let body = self.body(&req, true);
        Box::pin(async_stream(self, body))
    }
}

/// Reads the SSE stream of a completion into deltas, then one `Done` with the whole answer.
fn async_stream(
    p: &OpenAiProvider,
    body: Value,
) -> impl Stream<Item = Result<ChatDelta, LlmError>> + Send + '_ {
    struct St {
        parser: SseParser,
        bytes: Option<futures_util::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>>,
        queue: std::collections::VecDeque<ChatDelta>,
        text: String,
        calls: Vec<(String, String, String)>,
        usage: Usage,
        reason: Option<String>,
        done: bool,
    }
    let st = St {
        parser: SseParser::with_max_event(MAX_ANSWER),
        bytes: None,
        queue: Default::default(),
        text: String::new(),
        calls: Vec::new(),
        usage: Usage::default(),
        reason: None,
        done: false,
    };
    futures_util::stream::unfold((st, body), move |(mut st, body)| async move {
        loop {
            if let Some(d) = st.queue.pop_front() {
                return Some((Ok(d), (st, body)));
            }
            if st.done {
                return None;
            }
            if st.bytes.is_none() {
                match p.post(&body, true).await {
                    Ok(r) => st.bytes = Some(r.bytes_stream().boxed()),
                    Err(e) => {
                        st.done = true;
                        return Some((Err(e), (st, body)));
                    }
                }
            }
            let idle = Duration::from_millis(p.cfg.request_timeout_ms);
            let chunk = match st.bytes.as_mut() {
                Some(b) => match tokio::time::timeout(idle, b.next()).await {
                    Ok(chunk) => chunk,
                    Err(_) => {
                        st.done = true;
                        let e = LlmError::Timeout(p.cfg.request_timeout_ms);
                        return Some((Err(e), (st, body)));
                    }
                },
                None => None,
            };
            let finished = match chunk {
                Some(Ok(c)) => {
                    let mut end = false;
                    let events = match st.parser.push(&c) {
                        Ok(events) => events,
                        Err(e) => {
                            st.done = true;
                            let e = LlmError::InvalidResponse(e.to_string());
                            return Some((Err(e), (st, body)));
                        }
                    };
                    for data in events {
                        if data.trim() == "[DONE]" {
                            end = true;
                            break;
                        }
                        let Ok(w) = serde_json::from_str::<WireResponse>(&data) else {
                            continue;
                        };
                        if let Some(u) = w.usage {
                            st.usage = u;
                        }
                        for ch in w.choices {
                            if let Some(r) = ch.finish_reason {
                                st.reason = Some(r);
                            }
                            let d = ch.delta.unwrap_or_default();
                            if let Some(t) = d.content.filter(|t| !t.is_empty()) {
                                st.text.push_str(&t);
                                st.queue.push_back(ChatDelta::Text(t));
                            }
                            for tc in d.tool_calls {
                                let i = tc.index.unwrap_or(st.calls.len().saturating_sub(1));
                                while st.calls.len() <= i {
                                    st.calls.push(Default::default());
                                }
                                let slot = &mut st.calls[i];
                                if let Some(id) = &tc.id {
                                    slot.0 = id.clone();
                                }
                                if let Some(n) = &tc.function.name {
                                    slot.1.push_str(n);
                                }
                                let frag = tc.function.arguments.clone().unwrap_or_default();
                                slot.2.push_str(&frag);
                                st.queue.push_back(ChatDelta::ToolCall {
                                    index: i,
                                    id: tc.id,
                                    name: tc.function.name,
                                    arguments: frag,
                                });
                            }
                        }
                    }
                    end
                }
                Some(Err(e)) => {
                    st.done = true;
                    return Some((Err(LlmError::InvalidResponse(e.to_string())), (st, body)));
                }
                None => true,
            };
            if finished {
                st.done = true;
                let calls: Vec<ToolCall> = st
                    .calls
                    .drain(..)
                    .enumerate()
                    .map(|(i, (id, name, args))| ToolCall {
                        id: if id.is_empty() {
                            format!("call_{i}")
                        } else {
                            id
                        },
                        name,
                        arguments: parse_args(&args),
                    })
                    .collect();
                let reason = finish(st.reason.as_deref(), !calls.is_empty());
                let text = std::mem::take(&mut st.text);
                st.queue.push_back(ChatDelta::Done(ChatResponse {
                    message: assistant(text, calls),
                    usage: st.usage,
                    finish_reason: reason,
                }));
            }
        }
    })
}

/// Embeddings from any OpenAI-compatible `/v1/embeddings` endpoint (the [`OpenAiConfig`]'s
/// `base_url`, `model`, key and timeouts), L2-normalized so a dot product is the cosine.
pub struct OpenAiEmbedder {
    cfg: OpenAiConfig,
    http: reqwest::Client,
    key: Option<String>,
    dims: usize,
}

impl OpenAiEmbedder {
    /// Connects and learns the vector length from one probe request.
    pub async fn connect(cfg: OpenAiConfig) -> Result<Self, crate::embed::EmbedError> {
        let p =
            OpenAiProvider::new(cfg).map_err(|e| crate::embed::EmbedError::Model(e.to_string()))?;
        let mut e = OpenAiEmbedder {
            cfg: p.cfg,
            http: p.http,
            key: p.key,
            dims: 0,
        };
        e.dims = e.request(vec!["dimension probe".into()]).await?[0].len();
        Ok(e)
    }

    async fn request(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, crate::embed::EmbedError> {
        use crate::embed::EmbedError;
        let url = format!("{}/embeddings", self.cfg.base_url.trim_end_matches('/'));
        let mut req = self
            .http
            .post(&url)
            .timeout(Duration::from_millis(self.cfg.request_timeout_ms))
            .json(&json!({"model": self.cfg.model, "input": texts}));
        if let Some(k) = &self.key {
            req = req.bearer_auth(k);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| EmbedError::Model(format!("{url}: {e}")))?;
        let status = resp.status();
        let body: Value = resp
            .json()
            .await
            .map_err(|e| EmbedError::Model(format!("{url}: not JSON: {e}")))?;
        if !status.is_success() {
            return Err(EmbedError::Model(format!("{url}: HTTP {status}: {body}")));
        }
        let mut rows: Vec<(usize, Vec<f32>)> = body["data"]
            .as_array()
            .ok_or_else(|| EmbedError::Model(format!("{url}: no `data` array")))?
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let v: Vec<f32> = serde_json::from_value(d["embedding"].clone())
                    .map_err(|e| EmbedError::Model(format!("{url}: embedding {i}: {e}")))?;
                Ok((d["index"].as_u64().map_or(i, |x| x as usize), v))
            })
            .collect::<Result<_, EmbedError>>()?;
        if rows.len() != texts.len() {
            return Err(EmbedError::Model(format!(
                "{url}: {} embeddings for {} inputs",
                rows.len(),
                texts.len()
            )));
        }
        rows.sort_by_key(|r| r.0);
        Ok(rows
            .into_iter()
            .map(|(_, mut v)| {
                let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                if n > 0.0 {
                    v.iter_mut().for_each(|x| *x /= n);
                }
                v
            })
            .collect())
    }
}

impl crate::embed::Embedder for OpenAiEmbedder {
    fn dimensions(&self) -> usize {
        self.dims
    }
    async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, crate::embed::EmbedError> {
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(64) {
            out.extend(self.request(batch.to_vec()).await?);
        }
        Ok(out)
    }
}
