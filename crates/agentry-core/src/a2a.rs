//! Agents over A2A, both ways: any [`Agent`] served as an A2A executor, any remote A2A agent
//! used like a local one ([`RemoteAgent`]), and any agent, local or remote, as a tool of another
//! ([`AgentTool`]).

use std::sync::Arc;

use agentry_a2a::client::{A2aClient, ClientConfig};
use agentry_a2a::model::*;
use agentry_a2a::server::{self, AgentExecutor, EventSink, RequestContext};
use serde_json::{Value, json};

use crate::agent::{Agent, AgentError};
use crate::llm::{BoxFuture, ToolSpec};
use crate::react::{Outcome, ReactState, Step};
use crate::run::{Checkpoints, NoHooks, RunHooks};
use crate::tools::{DynTool, ToolError, ToolOutput};

/// An [`Agent`] as an A2A executor: steps stream as `working` updates (a text line and the
/// step as a data part), the answer is an `answer` artifact and the final message,
/// `ask_user` becomes `input-required`, a cancel stops the loop at the next step, and each
/// contextId has its own conversation memory. The loop is checkpointed under the task id after
/// every step; a turn that finds an unfinished checkpoint resumes it.
#[derive(Clone)]
pub struct ServedAgent(pub Arc<Agent>);

struct A2aHooks<'a> {
    events: &'a EventSink,
    checkpoints: &'a dyn Checkpoints,
    run_id: &'a str,
}

/// A file a tool returned (`{"kind", "mimeType", "data" | "blob" | "text" | "uri"}`) as an A2A
/// file part: inline bytes when the tool gave them, otherwise a URI.
fn file_part(f: &Value) -> Option<Part> {
    let mime = f.get("mimeType").and_then(Value::as_str).map(str::to_owned);
    let bytes = f
        .get("data")
        .or_else(|| f.get("blob"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let content = match (bytes, f.get("uri").and_then(Value::as_str)) {
        (Some(b), _) => FileContent::Bytes(b),
        (None, Some(u)) => {
            if let Some(t) = f.get("text").and_then(Value::as_str) {
                return Some(Part::text(t));
            }
            FileContent::Uri(u.to_owned())
        }
        (None, None) => return None,
    };
    let name = f
        .get("uri")
        .and_then(Value::as_str)
        .and_then(|u| u.rsplit('/').next())
        .map(str::to_owned);
    Some(Part::file(File {
        content,
        mime_type: mime,
        name,
    }))
}

/// One line for people.
pub fn describe_step(step: &Step) -> String {
    match step {
        Step::Thought { text } => format!("thought: {text}"),
        Step::ToolCall { call } => format!("calling {}({})", call.name, call.arguments),
        Step::Observation {
            tool,
            text,
            is_error,
            ..
        } => {
            let head: String = text.chars().take(200).collect();
            if *is_error {
                format!("{tool} failed: {head}")
            } else {
                format!("{tool} returned: {head}")
            }
        }
        Step::Answer { text } => format!("answer: {text}"),
    }
}

impl RunHooks for A2aHooks<'_> {
    fn on_steps<'a>(&'a self, steps: &'a [Step]) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            for step in steps {
                if matches!(step, Step::Answer { .. }) {
                    continue; // The answer comes as an artifact.
                }
                let data = serde_json::to_value(step)
                    .ok()
                    .and_then(|v| v.as_object().cloned())
                    .unwrap_or_default();
                let msg = self
                    .events
                    .agent_message(vec![Part::text(describe_step(step)), Part::data(data)]);
                let _ = self.events.working(Some(msg)).await;
                // Files a tool produced (MCP images, audio, embedded resources) become artifacts.
                if let Step::Observation {
                    tool,
                    data: Some(d),
                    ..
                } = step
                    && let Some(files) = d.get("files").and_then(Value::as_array)
                {
                    let parts: Vec<Part> = files.iter().filter_map(file_part).collect();
                    if !parts.is_empty() {
                        let _ = self
                            .events
                            .artifact(Artifact::new(Some(tool), parts), false, true)
                            .await;
                    }
                }
            }
        })
    }

    fn checkpoint<'a>(&'a self, state: &'a ReactState) -> BoxFuture<'a, ()> {
        self.checkpoints.save(self.run_id, state)
    }
}

impl AgentExecutor for ServedAgent {
    async fn execute(
        &self,
        ctx: RequestContext,
        events: EventSink,
    ) -> Result<(), server::AgentError> {
        let agent = &self.0;
        let query = ctx.message.text_content();
        events.working(None).await?;
        let checkpoints = agent.checkpoints.clone();
        agent.refresh_tools().await;
        let mut state = match checkpoints.load(&ctx.task_id).await {
            Some(s) if !s.is_done() => s,
            _ => agent.start(&query, Some(&ctx.context_id)),
        };
        let hooks = A2aHooks {
            events: &events,
            checkpoints: checkpoints.as_ref(),
            run_id: &ctx.task_id,
        };
        let result = agent
            .drive(
                &mut state,
                Some(&ctx.context_id),
                &hooks,
                Some(ctx.cancel_signal()),
            )
            .await;
        checkpoints.remove(&ctx.task_id).await;
        match result.outcome {
            Outcome::Answered { answer } => {
                let steps = serde_json::to_value(&result.steps).unwrap_or(Value::Null);
                let mut data = serde_json::Map::new();
                data.insert("steps".into(), steps);
                let mut parts = vec![Part::text(answer.clone())];
                // The type's structured result first: clients read the first data part.
                parts.extend(result.data.map(Part::data));
                parts.push(Part::data(data));
                let artifact = Artifact::new(Some("answer"), parts);
                events.artifact(artifact, false, true).await?;
                events.complete(Some(events.agent_text(answer))).await
            }
            Outcome::NeedsInput { question } => {
                events
                    .input_required(Some(events.agent_text(question)))
                    .await
            }
            Outcome::Canceled => Ok(()),
            Outcome::MaxIterations => Err(server::AgentError::failed(format!(
                "stopped after {} model calls without an answer (max_iterations)",
                state.iteration
            ))),
            Outcome::TokenBudget => Err(server::AgentError::failed(format!(
                "stopped after {} tokens without an answer (token_budget)",
                state.usage.total()
            ))),
            Outcome::Stopped => Err(server::AgentError::failed(
                "stopped by the agent's should_continue policy",
            )),
            Outcome::Failed { error } => Err(server::AgentError::failed(error)),
        }
    }
}

/// An agent's answer, local or remote.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reply {
    pub text: String,
    /// Structured results (data parts of the answer).
    pub data: Vec<serde_json::Map<String, Value>>,
    pub artifacts: Vec<Artifact>,
    /// The agent asked a question instead of answering.
    pub needs_input: bool,
    pub context_id: Option<String>,
}

/// What to ask an agent.
#[derive(Debug, Clone, Default)]
pub struct Ask {
    pub text: String,
    /// Structured input, sent as a data part.
    pub data: Option<serde_json::Map<String, Value>>,
    pub context_id: Option<String>,
    /// Turns `true` to cancel (a remote agent's task is canceled with `tasks/cancel`).
    pub cancel: Option<tokio::sync::watch::Receiver<bool>>,
}

impl Ask {
    pub fn text(text: impl Into<String>) -> Self {
        Ask {
            text: text.into(),
            ..Default::default()
        }
    }
}

/// The interface local and remote agents share.
pub trait AgentHandle: Send + Sync + 'static {
    fn name(&self) -> String;
    fn description(&self) -> String;
    /// Skill ids (from the card).
    fn skills(&self) -> Vec<String> {
        Vec::new()
    }
    fn ask(&self, ask: Ask) -> BoxFuture<'_, Result<Reply, AgentError>>;
}

impl AgentHandle for Agent {
    fn name(&self) -> String {
        self.config.name.clone()
    }
    fn description(&self) -> String {
        self.config.description.clone()
    }
    fn skills(&self) -> Vec<String> {
        self.card("").skills.into_iter().map(|s| s.id).collect()
    }
    fn ask(&self, ask: Ask) -> BoxFuture<'_, Result<Reply, AgentError>> {
        Box::pin(async move {
            let mut text = ask.text.clone();
            if let Some(d) = &ask.data {
                text.push_str(&format!("\n\nInput data: {}", Value::Object(d.clone())));
            }
            let r = self
                .run(
                    &text,
                    ask.context_id.as_deref(),
                    &NoHooks,
                    ask.cancel.clone(),
                )
                .await;
            let context_id = ask.context_id.clone();
            match r.outcome {
                Outcome::Answered { answer } => Ok(Reply {
                    text: answer,
                    data: r.data.into_iter().collect(),
                    context_id,
                    ..Default::default()
                }),
                Outcome::NeedsInput { question } => Ok(Reply {
                    text: question,
                    needs_input: true,
                    context_id,
                    ..Default::default()
                }),
                Outcome::Canceled => Err(AgentError::Other(format!(
                    "agent {} was canceled",
                    self.config.name
                ))),
                other => Err(AgentError::Other(format!(
                    "agent {} ended without an answer: {other:?}",
                    self.config.name
                ))),
            }
        })
    }
}

/// A remote A2A agent with the same interface as a local one.
pub struct RemoteAgent {
    client: A2aClient,
    name: String,
    description: String,
    skills: Vec<String>,
}

impl RemoteAgent {
    /// Discovers the agent at `url` from its card.
    pub async fn connect(url: &str, cfg: ClientConfig) -> Result<Self, AgentError> {
        let client = A2aClient::discover(url, cfg).await.map_err(remote_error)?;
        let card = client
            .card()
            .cloned()
            .ok_or_else(|| AgentError::Other("no card".into()))?;
        Ok(RemoteAgent {
            client,
            name: card.name,
            description: card.description,
            skills: card.skills.into_iter().map(|s| s.id).collect(),
        })
    }

    pub fn client(&self) -> &A2aClient {
        &self.client
    }
}

/// Transport failures (the agent may be down) are `Unreachable`; anything else is the agent's
/// own answer.
fn remote_error(e: agentry_a2a::A2aError) -> AgentError {
    use agentry_a2a::A2aError as E;
    match e {
        E::Connect { .. } | E::Timeout { .. } | E::CardNotFound { .. } => {
            AgentError::Unreachable(e.to_string())
        }
        E::Http { status, .. } if status >= 500 => AgentError::Unreachable(e.to_string()),
        other => AgentError::Other(other.to_string()),
    }
}

/// The text an answer carries: artifacts first, else the final status message.
pub fn task_text(task: &Task) -> String {
    let arts: Vec<String> = task
        .artifacts
        .iter()
        .map(|a| join_text(&a.parts))
        .filter(|t| !t.is_empty())
        .collect();
    if !arts.is_empty() {
        return arts.join("\n");
    }
    task.status
        .message
        .as_ref()
        .map(Message::text_content)
        .unwrap_or_default()
}

fn data_of(parts: &[Part]) -> Vec<serde_json::Map<String, Value>> {
    parts
        .iter()
        .filter_map(|p| match p {
            Part::Data(d) => Some(d.data.clone()),
            _ => None,
        })
        .collect()
}

fn reply_of_task(name: &str, t: Task) -> Result<Reply, AgentError> {
    let status_text = t
        .status
        .message
        .as_ref()
        .map(Message::text_content)
        .unwrap_or_default();
    match t.state() {
        TaskState::Completed => Ok(Reply {
            text: task_text(&t),
            data: t.artifacts.iter().flat_map(|a| data_of(&a.parts)).collect(),
            artifacts: t.artifacts.clone(),
            needs_input: false,
            context_id: Some(t.context_id),
        }),
        TaskState::InputRequired | TaskState::AuthRequired => Ok(Reply {
            text: status_text,
            needs_input: true,
            context_id: Some(t.context_id),
            ..Default::default()
        }),
        s => Err(AgentError::Other(format!(
            "remote agent {name} ended in {s}: {status_text}"
        ))),
    }
}

impl AgentHandle for RemoteAgent {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn description(&self) -> String {
        self.description.clone()
    }
    fn skills(&self) -> Vec<String> {
        self.skills.clone()
    }
    fn ask(&self, ask: Ask) -> BoxFuture<'_, Result<Reply, AgentError>> {
        Box::pin(async move {
            let mut parts = vec![Part::text(ask.text.clone())];
            if let Some(d) = &ask.data {
                parts.push(Part::data(d.clone()));
            }
            let mut m = Message::new(Role::User, parts);
            m.context_id = ask.context_id.clone();
            let err = |e: agentry_a2a::A2aError| {
                AgentError::Other(format!("remote agent {}: {e}", self.name))
            };
            let Some(mut cancel) = ask.cancel.clone() else {
                return match self
                    .client
                    .send_message(MessageSendParams::new(m))
                    .await
                    .map_err(err)?
                {
                    SendMessageResult::Message(m) => Ok(Reply {
                        text: m.text_content(),
                        data: data_of(&m.parts),
                        context_id: m.context_id,
                        ..Default::default()
                    }),
                    SendMessageResult::Task(t) => reply_of_task(&self.name, t),
                };
            };
            // Cancellable: start without blocking, then wait on the task's stream; a cancel
            // reaches the remote task through tasks/cancel.
            let mut p = MessageSendParams::new(m);
            p.configuration = Some(MessageSendConfiguration {
                blocking: Some(false),
                ..Default::default()
            });
            let task = match self.client.send_message(p).await.map_err(err)? {
                SendMessageResult::Message(m) => {
                    return Ok(Reply {
                        text: m.text_content(),
                        data: data_of(&m.parts),
                        context_id: m.context_id,
                        ..Default::default()
                    });
                }
                SendMessageResult::Task(t) => t,
            };
            let wait = async {
                let mut events = Box::pin(self.client.resubscribe(&task.id));
                use futures_util::StreamExt;
                while let Some(ev) = events.next().await {
                    if ev.map_err(err)?.is_final() {
                        break;
                    }
                }
                self.client.get_task(&task.id, Some(0)).await.map_err(err)
            };
            tokio::select! {
                t = wait => reply_of_task(&self.name, t?),
                _ = async { let _ = cancel.wait_for(|c| *c).await; } => {
                    let _ = self.client.cancel_task(&task.id).await;
                    Err(AgentError::Other(format!("remote agent {}: canceled", self.name)))
                }
            }
        })
    }
}

/// Any agent as a tool `ask_<name>(request)`, so one agent can delegate to another.
pub struct AgentTool {
    handle: Arc<dyn AgentHandle>,
}

impl AgentTool {
    pub fn new(handle: Arc<dyn AgentHandle>) -> Self {
        AgentTool { handle }
    }

    fn tool_name(&self) -> String {
        let n: String = self
            .handle
            .name()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        format!("ask_{n}")
    }
}

impl DynTool for AgentTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.tool_name(),
            description: format!(
                "Delegate to the {} agent: {}",
                self.handle.name(),
                self.handle.description()
            ),
            parameters: json!({"type": "object", "properties": {"request": {"type": "string", "description": "What to ask the agent"}}, "required": ["request"]}),
            examples: Vec::new(),
        }
    }

    fn call_json(&self, args: Value) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let request = args["request"].as_str().unwrap_or_default().to_owned();
            let r = self
                .handle
                .ask(Ask::text(request))
                .await
                .map_err(|e| ToolError::Failed {
                    tool: self.tool_name(),
                    reason: e.to_string(),
                })?;
            let text = if r.needs_input {
                format!("The agent asks: {}", r.text)
            } else {
                r.text
            };
            Ok(ToolOutput::text(text))
        })
    }
}
