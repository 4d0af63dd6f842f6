//! The agent under test, reached over A2A.
//!
//! What the agent is told follows the convention of tau2-bench's A2A pull request (#143),
//! without its defects: the first message carries the instructions, the policy, the tools
//! (`<available_tools>`) and any conversation the task starts with; later messages carry
//! only the user's words or the tool results; several calls in one reply all run; a
//! `working` or `input-required` task is followed to the end of its turn; an empty reply
//! stays empty and is scored; an unreadable one is the agent's error, not the harness's.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use agentry_a2a::client::{A2aClient, Auth, Binding, ClientConfig};
use agentry_a2a::envelope::Envelope;
use agentry_a2a::model::{
    Message as A2aMessage, MessageSendConfiguration, MessageSendParams, Part, Role as A2aRole,
    SendMessageResult, StreamEvent, Task as A2aTask, TaskState,
};
use agentry_a2a::{A2aError, version::ProtocolVersion};
use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::domain::Domain;
use crate::env::{SharedEnv, ToolSchema};
use crate::message::{Message, Requestor, Role, ToolCall, Usage};
use crate::task::Task;

/// What one agent turn produced, with its measurements.
#[derive(Debug, Clone)]
pub struct AgentTurn {
    /// The agent's message (text, tool calls, or both empty).
    pub message: Message,
    /// Calls the agent made during the turn through a channel the harness serves (MCP),
    /// each already answered: the call's message and its result, in order.
    pub observed: Vec<(Message, Message)>,
    /// How it went.
    pub measure: TurnMeasure,
}

/// Measurements of one turn.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct TurnMeasure {
    /// From sending to the end of the agent's turn.
    pub latency_s: f64,
    /// From sending to the first streamed event (streams only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_event_s: Option<f64>,
    /// Requests repeated after a transport error or a 5xx.
    pub retries: u32,
    /// Tokens in.
    pub prompt_tokens: u64,
    /// Tokens out.
    pub completion_tokens: u64,
    /// The agent reported no usage: 4 characters per token.
    pub tokens_estimated: bool,
}

/// Why a turn failed.
#[derive(Debug, Clone)]
pub enum AgentFailure {
    /// The network or the harness: the simulation is retried, then excluded from the score.
    Infrastructure(String),
    /// The agent broke the protocol or failed its task: scored as the agent's failure.
    Agent {
        /// An error code (`-32603`, `task failed`, `invalid response`).
        code: String,
        /// What happened.
        message: String,
    },
}

impl std::fmt::Display for AgentFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AgentFailure::Infrastructure(m) => write!(f, "infrastructure: {m}"),
            AgentFailure::Agent { code, message } => write!(f, "agent error {code}: {message}"),
        }
    }
}

/// A boxed future, for the object-safe traits of the harness.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One conversation with the agent under test.
pub trait AgentSession: Send {
    /// The agent's next message, given what is new since its last one: the user's text, or
    /// the results of its tool calls. `env` is the simulation's environment, for agents that
    /// reach the tools through the harness (MCP) rather than by writing calls.
    fn turn<'a>(
        &'a mut self,
        new: &'a [Message],
        env: &'a SharedEnv,
    ) -> BoxFuture<'a, Result<AgentTurn, AgentFailure>>;
}

/// Starts a conversation per simulation.
pub trait AgentFactory: Send + Sync {
    /// A new conversation for `task`, trial `trial` (fresh context: nothing carries over
    /// between simulations, retries included).
    fn start(&self, domain: &Domain, task: &Task, trial: usize) -> Box<dyn AgentSession>;
    /// What results.json says about the agent.
    fn info(&self) -> Value;
}

/// How the agent under test is reached.
#[derive(Debug, Clone)]
pub struct A2aAgentConfig {
    /// Its base URL (the card is read from there) or, with `no_card`, its endpoint.
    pub endpoint: String,
    /// A bearer token to send.
    pub auth_token: Option<String>,
    /// How long one turn may take.
    pub timeout: Duration,
    /// Stream turns (`message/stream`); `None`: when the card says the agent streams.
    pub stream: Option<bool>,
    /// The binding to prefer when the card offers several.
    pub binding: Binding,
    /// Requests repeated after a transport error or a 5xx before the turn fails.
    pub retries: u32,
    /// Speak this protocol generation; `None`: the newest both sides speak.
    pub protocol: Option<ProtocolVersion>,
    /// How the agent is given the domain's tools.
    pub tools: ToolExposure,
}

/// How the agent under test is given the domain's tools and their results.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ToolExposure {
    /// As text (`<available_tools>`), calls written as JSON in the reply (tau2-bench's A2A
    /// pull request's convention).
    #[default]
    Text,
    /// The text as well, plus the tools as OpenAI function schemas in a data part
    /// (`{"tools": [...]}`) and results in one (`{"tool_results": [...]}`); calls may come
    /// back as a data part (`{"tool_calls": [{"name", "arguments"}]}`) or as text.
    Data,
    /// Served over MCP (Streamable HTTP) by the harness, one endpoint per simulation whose
    /// URL the first message gives; calls are observed there, not parsed. Replies are the
    /// agent's words to the user.
    #[cfg(feature = "mcp")]
    Mcp,
}

impl Default for A2aAgentConfig {
    fn default() -> Self {
        A2aAgentConfig {
            endpoint: String::new(),
            auth_token: None,
            timeout: Duration::from_secs(300),
            stream: None,
            binding: Binding::JsonRpc,
            retries: 3,
            protocol: None,
            tools: ToolExposure::Text,
        }
    }
}

/// Any A2A agent, found through its card.
pub struct A2aAgent {
    client: A2aClient,
    stream: bool,
    cfg: A2aAgentConfig,
}

impl A2aAgent {
    /// Reads the agent's card and picks the interface and protocol version to use.
    pub async fn connect(cfg: A2aAgentConfig) -> Result<A2aAgent, A2aError> {
        let client_cfg = ClientConfig {
            request_timeout: cfg.timeout,
            stream_idle_timeout: cfg.timeout,
            // The harness retries itself, to count each retry.
            retries: 0,
            auth: cfg.auth_token.clone().map_or(Auth::None, Auth::Bearer),
            binding: cfg.binding,
            ..ClientConfig::default()
        };
        let mut client = A2aClient::discover(&cfg.endpoint, client_cfg).await?;
        if let Some(v) = cfg.protocol {
            client = client.with_version(v);
        }
        let card_streams = client
            .card()
            .and_then(|c| c.capabilities.streaming)
            .unwrap_or(false);
        Ok(A2aAgent {
            stream: cfg.stream.unwrap_or(card_streams),
            client,
            cfg,
        })
    }

    /// The protocol version and binding in use, and whether turns stream.
    pub fn describe(&self) -> String {
        let v = match self.client.version() {
            ProtocolVersion::V0_3 => "0.3",
            ProtocolVersion::V1_0 => "1.0",
        };
        format!(
            "A2A {v} over {}{}",
            self.client.binding().as_str(),
            if self.stream { ", streaming" } else { "" }
        )
    }
}

impl AgentFactory for A2aAgent {
    fn start(&self, domain: &Domain, task: &Task, trial: usize) -> Box<dyn AgentSession> {
        // One correlation id per simulation (agentry servers audit every turn under it), and
        // W3C baggage carrying it for any server that traces.
        let correlation = format!("eval:{}:{}:{trial}", uuid::Uuid::new_v4(), task.id);
        Box::new(A2aSession {
            client: self.client.with_correlation(Some(&correlation)),
            correlation,
            turns: 0,
            stream: self.stream,
            timeout: self.cfg.timeout,
            retries: self.cfg.retries,
            preamble: Some(preamble(
                &domain.policy,
                &domain.tools.schemas,
                task,
                self.cfg.tools,
            )),
            schemas: domain.tools.schemas.clone(),
            exposure: self.cfg.tools,
            #[cfg(feature = "mcp")]
            bridge: None,
            tool_data: (self.cfg.tools == ToolExposure::Data).then(|| {
                domain
                    .tools
                    .schemas
                    .iter()
                    .map(|t| json!({"type": "function", "function": t}))
                    .collect()
            }),
            context_id: None,
            task_id: None,
            calls: 0,
        })
    }

    fn info(&self) -> Value {
        json!({
            "implementation": "a2a_agent",
            "endpoint": self.cfg.endpoint,
            "protocol": self.describe(),
            "agent_card": self.client.card().map(|c| json!({"name": c.name, "version": c.version})),
        })
    }
}

/// The instructions of tau2's baseline agent, minus its sentence about JSON tool calls,
/// which the tool section says instead (as PR #143 does).
const INSTRUCTIONS: &str = "You are a customer service agent that helps the user according to the <policy> provided below.\n\
In each turn you can either:\n\
- Send a message to the user.\n\
- Make a tool call.\n\
You cannot do both at the same time.\n\n\
Try to be helpful and always follow the policy.";

const CALL_FORMAT: &str = "To use a tool, respond with JSON: {\"tool_call\": {\"name\": \"tool_name\", \"arguments\": {\"param1\": \"value\"}}}\n\
To make several calls at once: {\"tool_calls\": [{\"tool_call\": {...}}, ...]}";

#[cfg(feature = "mcp")]
const MCP_FORMAT: &str = "These tools are served over MCP (Streamable HTTP) at the URL in <mcp_server>: call them there, and reply to the user in plain text.";

/// The first message's head: instructions, policy, tools and the conversation so far.
fn preamble(policy: &str, tools: &[ToolSchema], task: &Task, exposure: ToolExposure) -> String {
    let how = match exposure {
        #[cfg(feature = "mcp")]
        ToolExposure::Mcp => MCP_FORMAT,
        _ => CALL_FORMAT,
    };
    let mut s = format!(
        "<instructions>\n{INSTRUCTIONS}\n</instructions>\n<policy>\n{policy}\n</policy>\n<available_tools>\n{}\n</available_tools>\n{how}\n",
        describe_tools(tools)
    );
    let history = task.message_history();
    if !history.is_empty() {
        s.push_str("\n<conversation_so_far>\n");
        for m in history {
            s.push_str(&render(m));
            s.push('\n');
        }
        s.push_str("</conversation_so_far>\n");
    }
    s
}

/// Each tool as `- name(p: type, ...)`, its description and its parameters, as PR #143
/// lists them.
pub fn describe_tools(tools: &[ToolSchema]) -> String {
    let mut out = Vec::new();
    for t in tools {
        let props = t.parameters["properties"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let required: Vec<&str> = t.parameters["required"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let ty = |p: &Value| -> String {
            match &p["type"] {
                Value::String(s) if s == "array" => {
                    format!("array[{}]", p["items"]["type"].as_str().unwrap_or("any"))
                }
                Value::String(s) => s.clone(),
                _ => "any".into(),
            }
        };
        let sig: Vec<String> = props
            .iter()
            .map(|(k, p)| format!("{k}: {}", ty(p)))
            .collect();
        let mut block = format!(
            "- {}({})\n  Description: {}",
            t.name,
            sig.join(", "),
            t.description
        );
        if !props.is_empty() {
            block.push_str("\n  Parameters:");
            for (k, p) in &props {
                let req = if required.contains(&k.as_str()) {
                    "required"
                } else {
                    "optional"
                };
                let mut line = format!("\n    - {k} ({}, {req})", ty(p));
                if let Some(d) = p["description"].as_str() {
                    line.push_str(&format!(": {d}"));
                }
                if let Some(e) = p["enum"].as_array() {
                    line.push_str(&format!(" (one of {})", Value::Array(e.clone())));
                }
                block.push_str(&line);
            }
        }
        out.push(block);
    }
    out.join("\n")
}

/// A message as the agent is told it.
fn render(m: &Message) -> String {
    match m.role {
        Role::Tool => {
            let id = m.id.as_deref().unwrap_or("");
            if m.error == Some(true) {
                format!("Tool result (id={id}) ERROR: {}", m.text())
            } else {
                format!("Tool result (id={id}): {}", m.text())
            }
        }
        Role::User => format!("user: {}", m.text()),
        Role::Assistant if m.is_tool_call() => {
            let calls: Vec<Value> = m
                .tool_calls
                .iter()
                .flatten()
                .map(|c| json!({"tool_call": {"id": c.id, "name": c.name, "arguments": c.arguments}}))
                .collect();
            format!("assistant: {}", Value::Array(calls))
        }
        _ => format!("{:?}: {}", m.role, m.text()).to_lowercase(),
    }
}

struct A2aSession {
    client: A2aClient,
    correlation: String,
    turns: u64,
    stream: bool,
    timeout: Duration,
    retries: u32,
    preamble: Option<String>,
    schemas: Vec<ToolSchema>,
    exposure: ToolExposure,
    #[cfg(feature = "mcp")]
    bridge: Option<super::mcp::McpBridge>,
    /// With [`ToolExposure::Data`]: the tools' schemas, sent once in a data part.
    tool_data: Option<Vec<Value>>,
    context_id: Option<String>,
    /// A task left `input-required`: the next message continues it.
    task_id: Option<String>,
    calls: u64,
}

impl AgentSession for A2aSession {
    fn turn<'a>(
        &'a mut self,
        new: &'a [Message],
        env: &'a SharedEnv,
    ) -> BoxFuture<'a, Result<AgentTurn, AgentFailure>> {
        Box::pin(self.turn_inner(new, env))
    }
}

/// What came back from one turn, before it becomes a tau2 message.
#[derive(Debug)]
struct Reply {
    text: String,
    data_calls: Vec<ToolCall>,
    usage: Option<Usage>,
    raw: Value,
}

impl A2aSession {
    async fn turn_inner(
        &mut self,
        new: &[Message],
        env: &SharedEnv,
    ) -> Result<AgentTurn, AgentFailure> {
        let mut text = String::new();
        let mut data = serde_json::Map::new();
        let data_mode = self.tool_data.is_some();
        #[cfg(feature = "mcp")]
        if self.exposure == ToolExposure::Mcp && self.bridge.is_none() {
            let bridge = super::mcp::McpBridge::start(env.clone(), &self.schemas)
                .await
                .map_err(|e| AgentFailure::Infrastructure(format!("the MCP endpoint: {e}")))?;
            text.push_str(&format!("<mcp_server>{}</mcp_server>\n", bridge.url));
            self.bridge = Some(bridge);
        }
        let _ = (env, &self.schemas, self.exposure);
        if let Some(p) = self.preamble.take() {
            text.push_str(&p);
            text.push('\n');
            if let Some(tools) = self.tool_data.clone() {
                data.insert("tools".into(), Value::Array(tools));
            }
        }
        if data_mode {
            let results: Vec<Value> = new
                .iter()
                .filter(|m| m.role == Role::Tool)
                .map(|m| json!({"id": m.id, "content": m.text(), "error": m.error == Some(true)}))
                .collect();
            if !results.is_empty() {
                data.insert("tool_results".into(), Value::Array(results));
            }
        }
        let body: Vec<String> = new
            .iter()
            .map(|m| match m.role {
                Role::User => m.text().to_owned(),
                _ => render(m),
            })
            .collect();
        text.push_str(&body.join("\n"));
        let mut parts = vec![Part::text(text.clone())];
        if !data.is_empty() {
            parts.push(Part::data(data));
        }
        let mut msg = A2aMessage::new(A2aRole::User, parts);
        msg.context_id = self.context_id.clone();
        msg.task_id = self.task_id.clone();
        // agentry's task envelope: the simulation's correlation id, and an idempotency key
        // per turn, so that a turn retried after a lost answer is not executed twice by a
        // server that honours it (others ignore the metadata).
        self.turns += 1;
        let mut envelope = Envelope::default();
        envelope.correlation_id = Some(self.correlation.clone());
        envelope.idempotency_key = Some(format!("{}:{}", self.correlation, self.turns));
        envelope.attach(&mut msg);

        let started = Instant::now();
        let mut measure = TurnMeasure::default();
        let reply = loop {
            let attempt = if self.stream {
                self.streamed(msg.clone(), started, &mut measure).await
            } else {
                self.sent(msg.clone()).await
            };
            match attempt {
                Ok(r) => break r,
                Err(e) if transient(&e) && measure.retries < self.retries => {
                    measure.retries += 1;
                    tokio::time::sleep(Duration::from_millis(200 * u64::from(measure.retries)))
                        .await;
                }
                Err(e) => return Err(classify(e)),
            }
        };
        let reply = reply?;
        measure.latency_s = started.elapsed().as_secs_f64();
        match reply.usage {
            Some(u) => {
                measure.prompt_tokens = u.prompt_tokens;
                measure.completion_tokens = u.completion_tokens;
            }
            None => {
                measure.tokens_estimated = true;
                measure.prompt_tokens = text.chars().count().div_ceil(4) as u64;
                measure.completion_tokens = reply.text.chars().count().div_ceil(4) as u64;
            }
        }
        let mut calls = reply.data_calls;
        let mut content = Some(reply.text.clone());
        if calls.is_empty() {
            let parsed = agentry_core::parse::parse_model_text(&reply.text);
            if !parsed.calls.is_empty() {
                calls = parsed
                    .calls
                    .into_iter()
                    .map(|c| ToolCall {
                        id: String::new(),
                        name: c.name,
                        arguments: c.arguments.as_object().cloned().unwrap_or_default(),
                        requestor: Requestor::Assistant,
                    })
                    .collect();
            }
        }
        #[allow(unused_mut)]
        let mut observed = Vec::new();
        #[cfg(feature = "mcp")]
        if let Some(b) = &self.bridge {
            // Over MCP the calls were made (and answered) during the turn; the reply is words.
            observed = b.drain();
            calls.clear();
        }
        if !calls.is_empty() {
            // The prose around a call is the agent's reasoning, not a message to the user.
            content = None;
            for c in &mut calls {
                self.calls += 1;
                if c.id.is_empty() {
                    c.id = format!("call_{}", self.calls);
                }
            }
        }
        let mut message = Message::with_calls(Role::Assistant, content, calls);
        message.usage = Some(Usage {
            prompt_tokens: measure.prompt_tokens,
            completion_tokens: measure.completion_tokens,
        });
        message.generation_time_seconds = Some(measure.latency_s);
        message.raw_data = Some(reply.raw);
        Ok(AgentTurn {
            message,
            observed,
            measure,
        })
    }

    fn params(&self, msg: A2aMessage) -> MessageSendParams {
        let mut p = MessageSendParams::new(msg);
        p.configuration = Some(MessageSendConfiguration {
            accepted_output_modes: Some(vec!["text/plain".into(), "application/json".into()]),
            blocking: Some(true),
            ..Default::default()
        });
        p
    }

    async fn sent(&mut self, msg: A2aMessage) -> Result<Result<Reply, AgentFailure>, A2aError> {
        let result = tokio::time::timeout(self.timeout, self.client.send_message(self.params(msg)))
            .await
            .map_err(|_| A2aError::Timeout {
                what: "message/send".into(),
                after_ms: self.timeout.as_millis() as u64,
            })??;
        match result {
            SendMessageResult::Message(m) => {
                self.context_id = m.context_id.clone().or(self.context_id.take());
                self.task_id = None;
                Ok(Ok(from_message(&m)))
            }
            SendMessageResult::Task(t) => {
                let t = self.follow(t, false).await?;
                Ok(self.read_task(t))
            }
        }
    }

    /// Follows a task to the end of its turn with `tasks/get` (backing off to once a second),
    /// within the turn's timeout. `refresh` reads it again first (a snapshot from a stream
    /// that broke may lack what came after).
    async fn follow(&self, mut t: A2aTask, refresh: bool) -> Result<A2aTask, A2aError> {
        let deadline = Instant::now() + self.timeout;
        let mut wait = Duration::from_millis(50);
        if refresh {
            t = self.client.get_task(&t.id, None).await?;
        }
        while matches!(t.status.state, TaskState::Submitted | TaskState::Working) {
            if Instant::now() >= deadline {
                return Err(A2aError::Timeout {
                    what: format!("task {} still {:?}", t.id, t.status.state),
                    after_ms: self.timeout.as_millis() as u64,
                });
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_secs(1));
            t = self.client.get_task(&t.id, None).await?;
        }
        Ok(t)
    }

    async fn streamed(
        &mut self,
        msg: A2aMessage,
        started: Instant,
        measure: &mut TurnMeasure,
    ) -> Result<Result<Reply, AgentFailure>, A2aError> {
        let stream = self.client.stream_message(self.params(msg));
        tokio::pin!(stream);
        let mut task: Option<A2aTask> = None;
        let mut streamed_text = String::new();
        let deadline = tokio::time::Instant::now() + self.timeout;
        loop {
            let next = tokio::time::timeout_at(deadline, stream.next())
                .await
                .map_err(|_| A2aError::Timeout {
                    what: "message/stream".into(),
                    after_ms: self.timeout.as_millis() as u64,
                })?;
            let Some(event) = next else { break };
            // A stream that breaks is resubscribed by the client while its task runs; what
            // still fails is retried as a whole turn (with the same idempotency key).
            let event = event?;
            if measure.first_event_s.is_none() {
                measure.first_event_s = Some(started.elapsed().as_secs_f64());
            }
            match event {
                StreamEvent::Message(m) => {
                    self.context_id = m.context_id.clone().or(self.context_id.take());
                    self.task_id = None;
                    return Ok(Ok(from_message(&m)));
                }
                StreamEvent::Task(t) => task = Some(t),
                StreamEvent::StatusUpdate(u) => {
                    let t = task.get_or_insert_with(|| {
                        A2aTask::new(u.task_id.clone(), u.context_id.clone())
                    });
                    t.status = u.status.clone();
                    if u.is_final {
                        break;
                    }
                }
                StreamEvent::ArtifactUpdate(a) => {
                    if let Some(t) = task.as_mut() {
                        match t
                            .artifacts
                            .iter_mut()
                            .find(|x| x.artifact_id == a.artifact.artifact_id)
                        {
                            Some(x) if a.append.unwrap_or(false) => {
                                x.parts.extend(a.artifact.parts.clone())
                            }
                            Some(x) => *x = a.artifact.clone(),
                            None => t.artifacts.push(a.artifact.clone()),
                        }
                    } else {
                        streamed_text.push_str(&parts_text(&a.artifact.parts));
                    }
                }
            }
        }
        match task {
            // The stream ended before the task did: follow it with tasks/get.
            Some(t) if matches!(t.status.state, TaskState::Submitted | TaskState::Working) => {
                let t = self.follow(t, true).await?;
                Ok(self.read_task(t))
            }
            Some(t) => Ok(self.read_task(t)),
            None if !streamed_text.is_empty() => Ok(Ok(Reply {
                text: streamed_text,
                data_calls: Vec::new(),
                usage: None,
                raw: Value::Null,
            })),
            None => Err(A2aError::Request {
                url: self.client.endpoint().to_owned(),
                reason: "the stream ended without a message or a task".into(),
            }),
        }
    }

    /// Keeps the task's context (and the task itself when it waits for input) for the next
    /// turn, and reads its reply.
    fn read_task(&mut self, t: A2aTask) -> Result<Reply, AgentFailure> {
        self.context_id = Some(t.context_id.clone());
        self.task_id = matches!(t.status.state, TaskState::InputRequired).then(|| t.id.clone());
        task_reply(&t)
    }
}

/// The reply a finished (or interrupted) task carries: its artifacts, else its status
/// message, else the agent's last message in its history. A failed, rejected or canceled
/// task, or one asking for authorization, is the agent's failure.
fn task_reply(t: &A2aTask) -> Result<Reply, AgentFailure> {
    match t.status.state {
        TaskState::Failed | TaskState::Rejected | TaskState::Canceled => {
            let why = t
                .status
                .message
                .as_ref()
                .map(|m| parts_text(&m.parts))
                .unwrap_or_default();
            return Err(AgentFailure::Agent {
                code: format!("task {}", format!("{:?}", t.status.state).to_lowercase()),
                message: why,
            });
        }
        TaskState::AuthRequired => {
            return Err(AgentFailure::Agent {
                code: "task auth-required".into(),
                message: "the agent asked for authorization mid-task".into(),
            });
        }
        _ => {}
    }
    let mut parts: Vec<Part> = t.artifacts.iter().flat_map(|a| a.parts.clone()).collect();
    if parts.is_empty()
        && let Some(m) = &t.status.message
    {
        parts = m.parts.clone();
    }
    if parts.is_empty()
        && let Some(m) = t.history.iter().rev().find(|m| m.role == A2aRole::Agent)
    {
        parts = m.parts.clone();
    }
    let usage = usage_of(t.metadata.as_deref()).or_else(|| {
        t.status
            .message
            .as_ref()
            .and_then(|m| usage_of(m.metadata.as_ref()))
    });
    Ok(Reply {
        text: parts_text(&parts),
        data_calls: data_calls(&parts),
        usage,
        raw: without_history(serde_json::to_value(t).unwrap_or(Value::Null)),
    })
}

/// A reply kept in the trajectory without the task's history: the conversation is already
/// there, and a history that grows each turn would make results.json grow quadratically.
fn without_history(mut raw: Value) -> Value {
    if let Some(o) = raw.as_object_mut() {
        o.remove("history");
    }
    raw
}

fn from_message(m: &A2aMessage) -> Reply {
    Reply {
        text: parts_text(&m.parts),
        data_calls: data_calls(&m.parts),
        usage: usage_of(m.metadata.as_ref()),
        raw: serde_json::to_value(m).unwrap_or(Value::Null),
    }
}

fn parts_text(parts: &[Part]) -> String {
    parts
        .iter()
        .filter_map(|p| match p {
            Part::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Tool calls sent as data parts: `{"tool_calls": [{"name", "arguments", "id"?}]}` or one
/// `{"tool_call": {...}}`.
fn data_calls(parts: &[Part]) -> Vec<ToolCall> {
    let mut out = Vec::new();
    for p in parts {
        let Part::Data(d) = p else { continue };
        let items: Vec<&Value> = match (d.data.get("tool_calls"), d.data.get("tool_call")) {
            (Some(Value::Array(a)), _) => a.iter().collect(),
            (_, Some(one)) => vec![one],
            _ => continue,
        };
        for item in items {
            let item = item.get("tool_call").unwrap_or(item);
            let Some(name) = item["name"].as_str() else {
                continue;
            };
            out.push(ToolCall {
                id: item["id"].as_str().unwrap_or_default().to_owned(),
                name: name.to_owned(),
                arguments: item["arguments"].as_object().cloned().unwrap_or_default(),
                requestor: Requestor::Assistant,
            });
        }
    }
    out
}

/// Token usage an agent reports in metadata: `usage` with OpenAI's or Anthropic's names.
fn usage_of(meta: Option<&serde_json::Map<String, Value>>) -> Option<Usage> {
    let u = meta?.get("usage")?;
    let get = |a: &str, b: &str| u.get(a).or_else(|| u.get(b)).and_then(Value::as_u64);
    Some(Usage {
        prompt_tokens: get("prompt_tokens", "input_tokens")?,
        completion_tokens: get("completion_tokens", "output_tokens")?,
    })
}

/// Errors worth another try: the connection, a timeout, a 5xx.
fn transient(e: &A2aError) -> bool {
    match e {
        A2aError::Connect { .. } | A2aError::Timeout { .. } | A2aError::Request { .. } => true,
        A2aError::Http { status, .. } => *status >= 500,
        _ => false,
    }
}

fn classify(e: A2aError) -> AgentFailure {
    match &e {
        A2aError::Rpc(rpc) => AgentFailure::Agent {
            code: rpc.code.to_string(),
            message: rpc.message.clone(),
        },
        A2aError::InvalidResponse(m) => AgentFailure::Agent {
            code: "invalid response".into(),
            message: m.clone(),
        },
        A2aError::Http { status, body, .. } if *status < 500 => AgentFailure::Agent {
            code: format!("http {status}"),
            message: body.chars().take(300).collect(),
        },
        _ => AgentFailure::Infrastructure(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentry_a2a::model::{Artifact, TaskStatus};

    fn task(state: TaskState) -> A2aTask {
        let mut t = A2aTask::new("t1".into(), "c1".into());
        t.status = TaskStatus::now(state, None);
        t
    }

    fn agent_says(text: &str) -> A2aMessage {
        A2aMessage::text(A2aRole::Agent, text)
    }

    #[test]
    fn every_reply_shape_is_read() {
        // Artifacts first.
        let mut t = task(TaskState::Completed);
        t.artifacts.push(Artifact::new(
            Some("a"),
            vec![Part::text("from the artifact")],
        ));
        t.status.message = Some(agent_says("from the status"));
        assert_eq!(task_reply(&t).unwrap().text, "from the artifact");
        // Then the status message.
        t.artifacts.clear();
        assert_eq!(task_reply(&t).unwrap().text, "from the status");
        // Then the agent's last message in the history.
        t.status.message = None;
        t.history = vec![
            A2aMessage::text(A2aRole::User, "hi"),
            agent_says("from the history"),
        ];
        assert_eq!(task_reply(&t).unwrap().text, "from the history");
        // An empty reply stays empty (and is scored as one).
        t.history.clear();
        assert_eq!(task_reply(&t).unwrap().text, "");
        // A direct message, with calls in a data part and usage in its metadata.
        let mut m = A2aMessage::new(
            A2aRole::Agent,
            vec![Part::data(
                json!({"tool_calls": [{"name": "get_users", "arguments": {}}]})
                    .as_object()
                    .unwrap()
                    .clone(),
            )],
        );
        m.metadata = Some(
            json!({"usage": {"input_tokens": 12, "output_tokens": 3}})
                .as_object()
                .unwrap()
                .clone(),
        );
        let r = from_message(&m);
        assert_eq!(r.data_calls[0].name, "get_users");
        assert_eq!(
            r.usage,
            Some(Usage {
                prompt_tokens: 12,
                completion_tokens: 3
            })
        );
    }

    #[test]
    fn a_failed_or_refused_task_is_the_agents_failure() {
        for (state, code) in [
            (TaskState::Failed, "task failed"),
            (TaskState::Rejected, "task rejected"),
            (TaskState::Canceled, "task canceled"),
            (TaskState::AuthRequired, "task auth-required"),
        ] {
            match task_reply(&task(state)) {
                Err(AgentFailure::Agent { code: c, .. }) => assert_eq!(c, code),
                other => panic!("{state:?}: {other:?}"),
            }
        }
        assert!(matches!(
            classify(A2aError::InvalidResponse("x".into())),
            AgentFailure::Agent { .. }
        ));
        assert!(matches!(
            classify(A2aError::Http {
                status: 503,
                url: String::new(),
                body: String::new()
            }),
            AgentFailure::Infrastructure(_)
        ));
    }
}
