//! [`AgentHandle`]: the one interface of every agent, local or remote, ReAct or specialist.
//! An agent's work is a stream of [`Update`]s (steps, artifacts) that ends in one [`Reply`];
//! [`AgentHandle::ask`] waits for the reply alone. Agents that produce only a reply wrap their
//! future with [`single`]; agents that report progress send it through [`progress_stream`].
//!
//! ```
//! use agentry_core::handle::{AgentHandle, Ask, Reply, UpdateStream, single};
//!
//! struct Upper;
//! impl AgentHandle for Upper {
//!     fn name(&self) -> String { "upper".into() }
//!     fn description(&self) -> String { "Shouts.".into() }
//!     fn stream(&self, ask: Ask) -> UpdateStream<'_> {
//!         single(async move { Ok(Reply { text: ask.text.to_uppercase(), ..Default::default() }) })
//!     }
//! }
//! # tokio_test_block(async {
//! let reply = Upper.ask(Ask::text("hi")).await.unwrap();
//! assert_eq!(reply.text, "HI");
//! # });
//! # fn tokio_test_block(f: impl std::future::Future<Output = ()>) {
//! #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
//! # }
//! ```

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use agentry_a2a::model::Artifact;
use futures_util::{Stream, StreamExt};
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use crate::agent::AgentError;
use crate::llm::BoxFuture;

/// An agent's answer, local or remote.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reply {
    /// The answer (or, with `needs_input`, the question) for people.
    pub text: String,
    /// Structured results (data parts of the answer).
    pub data: Vec<Map<String, Value>>,
    /// Files and other results that belong to the answer.
    pub artifacts: Vec<Artifact>,
    /// The agent asked a question instead of answering.
    pub needs_input: bool,
    /// The conversation the answer belongs to.
    pub context_id: Option<String>,
}

/// What to ask an agent.
#[derive(Debug, Clone, Default)]
pub struct Ask {
    /// The request.
    pub text: String,
    /// Structured input, sent as a data part.
    pub data: Option<Map<String, Value>>,
    /// The conversation: an agent keeps its memory per context.
    pub context_id: Option<String>,
    /// The A2A task this turn belongs to, when served: a ReAct agent checkpoints its run under
    /// it and resumes an unfinished run of the same task.
    pub task_id: Option<String>,
    /// Turns `true` to cancel (a remote agent's task is canceled with `tasks/cancel`).
    pub cancel: Option<tokio::sync::watch::Receiver<bool>>,
    /// The request's task envelope (correlation id, idempotency key, ...): what a served
    /// agent was sent, and what a remote agent is sent, so one correlation id follows a user
    /// request across every hop.
    pub envelope: Option<agentry_a2a::envelope::Envelope>,
    /// Instructions for this turn on top of the agent's own system prompt (a trigger's).
    pub instructions: Option<String>,
    /// The scopes of whoever the turn acts for (`None`: not limited): a delegation to an
    /// agent whose card requires scopes outside them is refused before any call.
    pub scopes: Option<Vec<String>>,
    /// The skill asked for, when the caller names one (a workflow step's `skill`).
    pub skill: Option<String>,
    /// The token the turn's caller was verified with: exchanged, never forwarded, for a
    /// delegated token when the turn calls a remote agent (`None`: nothing to delegate).
    pub subject_token: Option<agentry_a2a::credential::BearerToken>,
    /// Who asked, as the server authenticated them (`None`: anonymous or not served): for
    /// the audit trail of what the agent did on their behalf.
    pub caller: Option<String>,
    /// This request already started the task's run, which was cut short (served: a queued
    /// turn taken over from a worker that died): a run checkpointed under
    /// [`task_id`](Self::task_id) resumes without the request being added to it again.
    pub rerun: bool,
}

impl Ask {
    /// A plain-text request.
    pub fn text(text: impl Into<String>) -> Self {
        Ask {
            text: text.into(),
            ..Default::default()
        }
    }
}

/// One thing an agent reports while it works.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Update {
    /// A step for people (`text`) and programs (`data`): a thought, a tool call, an
    /// observation, a note such as a fallback taken. Served over A2A: a `working` status.
    Progress {
        /// One line for people.
        text: String,
        /// The step as data (a ReAct [`crate::react::Step`], say).
        data: Option<Map<String, Value>>,
    },
    /// A result produced before the end (a file a tool made). Served: an artifact update.
    Artifact(Artifact),
    /// The end: the answer, or a question back (`needs_input`; served: `input-required`).
    Reply(Reply),
}

/// The updates of one turn; the last item is an [`Update::Reply`] or an error.
pub type UpdateStream<'a> = Pin<Box<dyn Stream<Item = Result<Update, AgentError>> + Send + 'a>>;

/// The interface local and remote agents share.
pub trait AgentHandle: Send + Sync + 'static {
    /// The name workflows and registries use.
    fn name(&self) -> String;
    /// What it does, for planners and cards.
    fn description(&self) -> String;
    /// Skill ids (from the card).
    fn skills(&self) -> Vec<String> {
        Vec::new()
    }
    /// The turn as it happens: progress and artifacts, then the reply.
    fn stream(&self, ask: Ask) -> UpdateStream<'_>;
    /// The reply alone (artifacts reported along the way are added to it).
    fn ask(&self, ask: Ask) -> BoxFuture<'_, Result<Reply, AgentError>> {
        Box::pin(final_reply(self.stream(ask)))
    }
}

/// Waits for a stream's reply, collecting the artifacts reported before it into the reply.
pub async fn final_reply(mut updates: UpdateStream<'_>) -> Result<Reply, AgentError> {
    let mut early = Vec::new();
    while let Some(u) = updates.next().await {
        match u? {
            Update::Reply(mut r) => {
                early.append(&mut r.artifacts);
                r.artifacts = early;
                return Ok(r);
            }
            Update::Artifact(a) => early.push(a),
            Update::Progress { .. } => {}
        }
    }
    Err(AgentError::failed("the agent ended without a reply"))
}

/// The stream of an agent that produces only a reply.
pub fn single<'a>(
    reply: impl Future<Output = Result<Reply, AgentError>> + Send + 'a,
) -> UpdateStream<'a> {
    Box::pin(futures_util::stream::once(async move {
        reply.await.map(Update::Reply)
    }))
}

/// The stream of an agent that reports progress: `work` sends updates through the sender
/// whose receiver is `progress` and resolves to the reply. Every update sent before the reply
/// is yielded before it.
pub fn progress_stream<'a>(
    progress: mpsc::UnboundedReceiver<Update>,
    work: impl Future<Output = Result<Reply, AgentError>> + Send + 'a,
) -> UpdateStream<'a> {
    Box::pin(Progress {
        progress,
        work: Some(Box::pin(work)),
        reply: None,
    })
}

struct Progress<'a> {
    progress: mpsc::UnboundedReceiver<Update>,
    work: Option<BoxFuture<'a, Result<Reply, AgentError>>>,
    reply: Option<Result<Reply, AgentError>>,
}

impl Stream for Progress<'_> {
    type Item = Result<Update, AgentError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            if let Poll::Ready(Some(u)) = self.progress.poll_recv(cx) {
                return Poll::Ready(Some(Ok(u)));
            }
            if let Some(work) = self.work.as_mut() {
                match work.as_mut().poll(cx) {
                    Poll::Ready(r) => {
                        // Dropping the work drops its sender: the channel ends once drained.
                        self.work = None;
                        self.reply = Some(r);
                        continue;
                    }
                    Poll::Pending => return Poll::Pending,
                }
            }
            return Poll::Ready(self.reply.take().map(|r| r.map(Update::Reply)));
        }
    }
}
