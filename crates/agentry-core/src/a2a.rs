//! Agents over A2A, both ways: any [`AgentHandle`] served as an A2A executor ([`Served`]),
//! any remote A2A agent used like a local one ([`RemoteAgent`]), and any agent, local or
//! remote, as a tool of another ([`AgentTool`]). Also the [`AgentHandle`] of the ReAct
//! [`Agent`]: its steps stream as updates.

use std::sync::Arc;

use agentry_a2a::client::{A2aClient, ClientConfig};
use agentry_a2a::model::*;
use agentry_a2a::server::{self, AgentExecutor, EventSink, RequestContext};
use futures_util::StreamExt;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use crate::agent::{Agent, AgentError};
use crate::handle::progress_stream;
pub use crate::handle::{AgentHandle, Ask, Reply, Update, UpdateStream};
use crate::llm::{BoxFuture, ToolSpec};
use crate::react::{Outcome, ReactState, Step};
use crate::run::RunHooks;
use crate::runs::Checkpoints;
use crate::tools::{DynTool, ToolError, ToolOutput};

/// Any [`AgentHandle`] as an A2A executor, the one adapter every agent is served through:
/// progress becomes `working` status updates (a text line and a data part), artifacts
/// artifact updates, the reply an `answer` artifact (text, data parts, the reply's artifacts,
/// then the steps reported) and the final message; a question back becomes `input-required`.
/// A cancel of the task reaches the agent through [`Ask::cancel`]; the task id is
/// [`Ask::task_id`], under which a ReAct agent checkpoints and resumes its run.
#[derive(Clone)]
pub struct Served(pub Arc<dyn AgentHandle>);

impl Served {
    /// Serves `agent`.
    pub fn new(agent: impl AgentHandle) -> Self {
        Served(Arc::new(agent))
    }
}

/// Sends a ReAct run's steps as updates and checkpoints it.
struct UpdateHooks<'a> {
    updates: mpsc::UnboundedSender<Update>,
    checkpoints: Option<(&'a Checkpoints, &'a str)>,
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

impl RunHooks for UpdateHooks<'_> {
    fn on_steps<'a>(&'a self, steps: &'a [Step]) -> BoxFuture<'a, ()> {
        for step in steps {
            if matches!(step, Step::Answer { .. }) {
                continue; // The answer comes as the reply.
            }
            let data = serde_json::to_value(step)
                .ok()
                .and_then(|v| v.as_object().cloned());
            let _ = self.updates.send(Update::Progress {
                text: describe_step(step),
                data,
            });
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
                        .updates
                        .send(Update::Artifact(Artifact::new(Some(tool), parts)));
                }
            }
        }
        Box::pin(async {})
    }

    fn checkpoint<'a>(&'a self, state: &'a ReactState) -> BoxFuture<'a, ()> {
        match self.checkpoints {
            Some((c, run_id)) => Box::pin(c.save(run_id, state)),
            None => Box::pin(async {}),
        }
    }
}

impl AgentExecutor for Served {
    async fn execute(
        &self,
        ctx: RequestContext,
        events: EventSink,
    ) -> Result<(), server::ExecutorError> {
        events.working(None).await?;
        let data = ctx.message.parts.iter().find_map(|p| match p {
            Part::Data(d) => Some(d.data.clone()),
            _ => None,
        });
        let cancel = ctx.cancel_signal();
        let mut updates = self.0.stream(Ask {
            text: ctx.message.text_content(),
            data,
            context_id: Some(ctx.context_id.clone()),
            task_id: Some(ctx.task_id.clone()),
            cancel: Some(cancel.clone()),
            envelope: ctx.envelope.as_deref().cloned(),
            instructions: ctx.instructions.clone(),
            scopes: ctx.scopes.as_deref().map(<[String]>::to_vec),
            subject_token: ctx.subject_token.clone(),
            caller: ctx.caller.clone(),
            rerun: ctx.rerun,
            ..Default::default()
        });
        let mut steps = Vec::new();
        while let Some(update) = updates.next().await {
            match update {
                Ok(Update::Progress { text, data }) => {
                    let mut parts = vec![Part::text(text)];
                    if let Some(d) = data {
                        steps.push(Value::Object(d.clone()));
                        parts.push(Part::data(d));
                    }
                    events.working(Some(events.agent_message(parts))).await?;
                }
                Ok(Update::Artifact(a)) => events.artifact(a, false, true).await?,
                Ok(Update::Reply(reply)) if reply.needs_input => {
                    return events
                        .input_required(Some(events.agent_text(reply.text)))
                        .await;
                }
                Ok(Update::Reply(reply)) => {
                    let mut parts = vec![Part::text(reply.text.clone())];
                    // The agent's structured results first: clients read the first data part.
                    parts.extend(reply.data.into_iter().map(Part::data));
                    for a in reply.artifacts {
                        parts.extend(a.parts);
                    }
                    if !steps.is_empty() {
                        let mut m = Map::new();
                        m.insert("steps".into(), Value::Array(steps));
                        parts.push(Part::data(m));
                    }
                    events
                        .artifact(Artifact::new(Some("answer"), parts), false, true)
                        .await?;
                    return events.complete(Some(events.agent_text(reply.text))).await;
                }
                Err(_) if *cancel.borrow() => return Ok(()),
                // A request the agent does not take: the task is rejected, not failed.
                Err(AgentError::BadRequest(why)) => {
                    return Err(server::ExecutorError::Rejected(why));
                }
                Err(e) => return Err(server::ExecutorError::failed(e.to_string())),
            }
        }
        Err(server::ExecutorError::failed(format!(
            "agent {} ended without a reply",
            self.0.name()
        )))
    }
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
    /// Each step of the loop as it happens. With a task id, the run is checkpointed under it
    /// after every step, and a turn that finds an unfinished checkpoint resumes it.
    fn stream(&self, ask: Ask) -> UpdateStream<'_> {
        let (tx, rx) = mpsc::unbounded_channel();
        progress_stream(rx, async move {
            let mut text = ask.text;
            if let Some(d) = ask.data {
                text.push_str(&format!("\n\nInput data: {}", Value::Object(d)));
            }
            let context = ask.context_id.as_deref();
            self.refresh_tools().await;
            if let Some(c) = context {
                self.recall(c).await;
            }
            let resumed = match &ask.task_id {
                Some(id) => self.checkpoints.load(id).await.filter(|s| !s.is_done()),
                None => None,
            };
            let mut state = match resumed {
                // The message that resumed the run is read too (it may say what changed),
                // unless it is the one the run began with, asked again.
                Some(mut s) => {
                    if !ask.rerun && !text.trim().is_empty() {
                        s.add_user(&text);
                    }
                    s
                }
                None => self.start_with(&text, context, ask.instructions.as_deref()),
            };
            let hooks = UpdateHooks {
                updates: tx,
                checkpoints: ask.task_id.as_deref().map(|id| (&self.checkpoints, id)),
            };
            let result = self.drive(&mut state, context, &hooks, ask.cancel).await;
            if let Some(c) = context {
                self.persist(c).await;
            }
            if let Some(id) = &ask.task_id {
                self.checkpoints.remove(id).await;
            }
            let name = &self.config.name;
            let ended = |why: String| {
                Err(AgentError::Stopped {
                    agent: name.clone(),
                    why,
                })
            };
            match result.outcome {
                Outcome::Answered { answer } => Ok(Reply {
                    text: answer,
                    data: result.data.into_iter().collect(),
                    context_id: ask.context_id,
                    ..Default::default()
                }),
                Outcome::NeedsInput { question } => Ok(Reply {
                    text: question,
                    needs_input: true,
                    context_id: ask.context_id,
                    ..Default::default()
                }),
                Outcome::Canceled => Err(AgentError::Canceled {
                    agent: name.clone(),
                }),
                Outcome::MaxIterations => ended(format!(
                    "stopped after {} model calls without an answer (max_iterations)",
                    state.iteration
                )),
                Outcome::TokenBudget => ended(format!(
                    "stopped after {} tokens without an answer (token_budget)",
                    state.usage.total()
                )),
                Outcome::Stopped => ended("was stopped by its should_continue policy".into()),
                Outcome::Failed { error } => ended(format!("failed: {error}")),
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
        let client = A2aClient::discover(url, cfg)
            .await
            .map_err(|e| remote_error(url, e))?;
        let card = client.card().cloned().ok_or_else(|| AgentError::Remote {
            agent: url.to_owned(),
            source: agentry_a2a::A2aError::InvalidCard {
                url: url.to_owned(),
                reason: "no card".into(),
            },
        })?;
        Ok(RemoteAgent {
            client,
            name: card.name,
            description: card.description,
            skills: card.skills.into_iter().map(|s| s.id).collect(),
        })
    }

    /// The A2A client the agent is called through (its card, its endpoint).
    pub fn client(&self) -> &A2aClient {
        &self.client
    }

    /// The agent as its card now says, asking with the card's ETag: `None` when unchanged
    /// (a 304, nothing re-read).
    pub async fn revalidate(&self) -> Result<Option<RemoteAgent>, AgentError> {
        let fresh = self
            .client
            .revalidate()
            .await
            .map_err(|e| remote_error(&self.name, e))?;
        Ok(fresh.and_then(|client| {
            let card = client.card().cloned()?;
            Some(RemoteAgent {
                client,
                name: card.name,
                description: card.description,
                skills: card.skills.into_iter().map(|s| s.id).collect(),
            })
        }))
    }

    /// The same agent called with `auth` instead of the configured credentials (a delegated
    /// token for one call).
    pub fn with_auth(&self, auth: agentry_a2a::client::Auth) -> RemoteAgent {
        RemoteAgent {
            client: self.client.with_auth(auth),
            name: self.name.clone(),
            description: self.description.clone(),
            skills: self.skills.clone(),
        }
    }

    /// The URL of the agent's card (`url`, or its first interface's): the audience a token
    /// for it names by default.
    pub fn url(&self) -> Option<String> {
        let card = self.client.card()?;
        Some(card.url.clone())
            .filter(|u| !u.is_empty())
            .or_else(|| card.supported_interfaces.first().map(|i| i.url.clone()))
    }

    /// Whether a caller holding `held` may be served `skill` (or any skill) by this agent, by
    /// its card: the skill's security requirements, else the card's; satisfied when one
    /// alternative's scopes are all held. `Err` names the scopes missing from the closest
    /// alternative. Cards without requirements allow everyone.
    pub fn allows(&self, skill: Option<&str>, held: &[String]) -> Result<(), Vec<String>> {
        self.requirement(skill, held).map(drop)
    }

    /// The scopes its card asks a token to hold for `skill` (or for the agent): the skill's
    /// own requirement, else the card's, the first alternative that names any scope; empty
    /// when it names none (or the card is not known).
    pub fn required_scopes(&self, skill: Option<&str>) -> Vec<String> {
        let Some(card) = self.client.card() else {
            return Vec::new();
        };
        let own = skill
            .and_then(|s| card.skills.iter().find(|k| k.id == s))
            .map(|k| &k.security)
            .filter(|s| !s.is_empty());
        own.unwrap_or(&card.security)
            .iter()
            .map(|alt| alt.values().flatten().cloned().collect::<Vec<String>>())
            .find(|scopes| !scopes.is_empty())
            .unwrap_or_default()
    }

    /// As [`allows`](Self::allows), returning the scopes of the first alternative `held`
    /// satisfies (`None`: the card requires nothing): what a delegated token for the call
    /// needs, and no more.
    pub fn requirement(
        &self,
        skill: Option<&str>,
        held: &[String],
    ) -> Result<Option<Vec<String>>, Vec<String>> {
        let Some(card) = self.client.card() else {
            return Ok(None);
        };
        let own = skill
            .and_then(|s| card.skills.iter().find(|k| k.id == s))
            .map(|k| &k.security)
            .filter(|s| !s.is_empty());
        let alternatives = own.unwrap_or(&card.security);
        if alternatives.is_empty() {
            return Ok(None);
        }
        let mut closest: Option<Vec<String>> = None;
        for alt in alternatives {
            let missing: Vec<String> = alt
                .values()
                .flatten()
                .filter(|s| !held.contains(s))
                .cloned()
                .collect();
            if missing.is_empty() {
                let mut needed: Vec<String> = alt.values().flatten().cloned().collect();
                needed.sort();
                needed.dedup();
                return Ok(Some(needed));
            }
            if closest.as_ref().is_none_or(|c| missing.len() < c.len()) {
                closest = Some(missing);
            }
        }
        Err(closest.unwrap_or_default())
    }
}

/// Transport failures (the agent may be down) are `Unreachable`, during discovery and during
/// a call alike, so a caller with a fallback takes it; anything else is the agent's own answer.
fn remote_error(agent: &str, e: agentry_a2a::A2aError) -> AgentError {
    use agentry_a2a::A2aError as E;
    match e {
        E::Connect { .. } | E::Timeout { .. } | E::CardNotFound { .. } => {
            AgentError::Unreachable(format!("{agent}: {e}"))
        }
        E::Http { status, .. } if status >= 500 => AgentError::Unreachable(format!("{agent}: {e}")),
        source => AgentError::Remote {
            agent: agent.to_owned(),
            source,
        },
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
        TaskState::Canceled => Err(AgentError::Canceled {
            agent: name.to_owned(),
        }),
        s => Err(AgentError::Stopped {
            agent: name.to_owned(),
            why: format!("ended in {s}: {status_text}"),
        }),
    }
}

impl RemoteAgent {
    /// One turn. With a progress sender and a streaming agent it is `message/stream`, its
    /// `working` messages forwarded as progress; otherwise, without a cancel signal, one
    /// blocking `message/send`; with one, a non-blocking send whose task is followed and
    /// canceled (`tasks/cancel`) when the signal turns.
    async fn turn(
        &self,
        ask: Ask,
        progress: Option<mpsc::UnboundedSender<Update>>,
    ) -> Result<Reply, AgentError> {
        let mut parts = vec![Part::text(ask.text.clone())];
        if let Some(d) = &ask.data {
            parts.push(Part::data(d.clone()));
        }
        let mut m = Message::new(Role::User, parts);
        m.context_id = ask.context_id.clone();
        // The caller's correlation id (and trace, trigger, priority, and the key its caller
        // chose for this call) travel on; its response mode and required scopes were the
        // caller's own request's, not this call's.
        // The skill asked for, when the card lists it: the agent holds the call to its scopes.
        let skill = ask.skill.clone().filter(|s| self.skills.contains(s));
        if ask.envelope.is_some() || skill.is_some() {
            let mut next = ask.envelope.clone().unwrap_or_default();
            // This call's own span, when traced; else the caller's trace goes on as it came.
            if let Some(tp) = agentry_a2a::trace::current_traceparent() {
                next.traceparent = Some(tp);
            }
            next.response_mode = None;
            next.callback_url = None;
            next.required_scopes.clear();
            next.skill = skill;
            next.attach(&mut m);
        }
        // Every call of this turn, the follow-ups without an envelope included, carries the
        // user request's correlation id.
        let correlated;
        let client = match ask
            .envelope
            .as_ref()
            .and_then(|e| e.correlation_id.as_deref())
        {
            Some(c) => {
                correlated = self.client.with_correlation(Some(c));
                &correlated
            }
            None => &self.client,
        };
        let err = |e: agentry_a2a::A2aError| remote_error(&self.name, e);
        let canceled_error = || AgentError::Canceled {
            agent: self.name.clone(),
        };
        let message_reply = |m: Message| Reply {
            text: m.text_content(),
            data: data_of(&m.parts),
            context_id: m.context_id,
            ..Default::default()
        };
        let canceled = async {
            match ask.cancel.clone() {
                Some(mut c) => {
                    let _ = c.wait_for(|c| *c).await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::pin!(canceled);
        let streams = client
            .card()
            .and_then(|c| c.capabilities.streaming)
            .unwrap_or(false);
        if let (Some(tx), true) = (&progress, streams) {
            // message/stream from the first event: every working message arrives.
            let mut events = Box::pin(client.stream_message(MessageSendParams::new(m)));
            let mut task_id = None;
            loop {
                tokio::select! {
                    ev = events.next() => match ev {
                        None => break,
                        Some(Err(e)) => return Err(err(e)),
                        Some(Ok(StreamEvent::Message(m))) => return Ok(message_reply(m)),
                        Some(Ok(ev)) => {
                            match &ev {
                                StreamEvent::Task(t) => task_id = Some(t.id.clone()),
                                StreamEvent::StatusUpdate(u) => {
                                    task_id = Some(u.task_id.clone());
                                    if u.status.state == TaskState::Working
                                        && let Some(msg) = &u.status.message
                                    {
                                        let _ = tx.send(Update::Progress {
                                            text: msg.text_content(),
                                            data: data_of(&msg.parts).into_iter().next(),
                                        });
                                    }
                                }
                                StreamEvent::ArtifactUpdate(a) => task_id = Some(a.task_id.clone()),
                                StreamEvent::Message(_) => {}
                            }
                            if ev.is_final() {
                                break;
                            }
                        }
                    },
                    _ = &mut canceled => {
                        if let Some(id) = &task_id {
                            let _ = client.cancel_task(id).await;
                        }
                        return Err(canceled_error());
                    }
                }
            }
            let id = task_id.ok_or_else(|| AgentError::Remote {
                agent: self.name.clone(),
                source: agentry_a2a::A2aError::InvalidResponse("the stream named no task".into()),
            })?;
            let t = client.get_task(&id, Some(0)).await.map_err(err)?;
            return reply_of_task(&self.name, t);
        }
        if ask.cancel.is_none() {
            return match client
                .send_message(MessageSendParams::new(m))
                .await
                .map_err(err)?
            {
                SendMessageResult::Message(m) => Ok(message_reply(m)),
                SendMessageResult::Task(t) => reply_of_task(&self.name, t),
            };
        }
        let mut p = MessageSendParams::new(m);
        p.configuration = Some(MessageSendConfiguration {
            blocking: Some(false),
            ..Default::default()
        });
        let task = match client.send_message(p).await.map_err(err)? {
            SendMessageResult::Message(m) => return Ok(message_reply(m)),
            // Already over (a repeated request whose task finished): nothing to follow.
            SendMessageResult::Task(t) if t.state().ends_turn() => {
                return reply_of_task(&self.name, t);
            }
            SendMessageResult::Task(t) => t,
        };
        let wait = async {
            let mut events = Box::pin(client.resubscribe(&task.id));
            while let Some(ev) = events.next().await {
                if ev.map_err(err)?.is_final() {
                    break;
                }
            }
            client.get_task(&task.id, Some(0)).await.map_err(err)
        };
        tokio::select! {
            t = wait => reply_of_task(&self.name, t?),
            _ = canceled => {
                let _ = client.cancel_task(&task.id).await;
                Err(canceled_error())
            }
        }
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
    /// The remote task's `working` messages as progress, then its reply.
    fn stream(&self, ask: Ask) -> UpdateStream<'_> {
        let (tx, rx) = mpsc::unbounded_channel();
        progress_stream(rx, self.turn(ask, Some(tx)))
    }
    fn ask(&self, ask: Ask) -> BoxFuture<'_, Result<Reply, AgentError>> {
        Box::pin(self.turn(ask, None))
    }
}

/// Any agent as a tool `ask_<name>(request)`, so one agent can delegate to another.
pub struct AgentTool {
    handle: Arc<dyn AgentHandle>,
}

impl AgentTool {
    /// Wraps `handle` as a tool named after it (`ask_<name>`).
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
