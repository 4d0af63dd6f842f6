//! The contract between the server and an agent: [`AgentExecutor`].
//!
//! An agent receives a [`RequestContext`] and an [`EventSink`], and emits what it does as it
//! does it: status changes, messages, artifacts (whole or in chunks). The server turns those into
//! task state, persistence, stream events and push notifications, so an agent never touches
//! protocol plumbing. Returning `Ok(())` without a final state completes the task; returning an
//! error fails it with the error's text.
//!
//! ```
//! use agentry_a2a::server::{AgentExecutor, EventSink, ExecutorError, RequestContext};
//!
//! struct Shout;
//! impl AgentExecutor for Shout {
//!     async fn execute(&self, ctx: RequestContext, events: EventSink) -> Result<(), ExecutorError> {
//!         let text = ctx.message.text_content().to_uppercase();
//!         events.complete(Some(events.agent_text(text))).await?;
//!         Ok(())
//!     }
//! }
//! ```

use std::future::Future;
use std::sync::Arc;

use tokio::sync::watch;

use super::hub::{AgentEvent, Hub};
use crate::model::*;
use crate::store::BoxFuture;

/// Why an agent's run failed, or why an event was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExecutorError {
    /// The task already reached a final state (e.g. it was canceled): stop working.
    #[error("task {0} is closed")]
    TaskClosed(String),
    /// A state change the task's state machine refuses.
    #[error(transparent)]
    InvalidTransition(#[from] InvalidTransition),
    /// The agent failed; the task fails with this text.
    #[error("{0}")]
    Failed(String),
    /// The agent refuses the task; it ends `rejected` with this text.
    #[error("rejected: {0}")]
    Rejected(String),
}

impl ExecutorError {
    /// A failure with this text.
    pub fn failed(msg: impl Into<String>) -> Self {
        ExecutorError::Failed(msg.into())
    }
}

/// What an agent is asked to do.
#[derive(Debug, Clone)]
pub struct RequestContext {
    /// The task this run belongs to.
    pub task_id: String,
    /// Its conversation.
    pub context_id: String,
    /// The incoming message (also the last entry of the task's history).
    pub message: Message,
    /// The task as it stood before this message (`None` for a new task).
    pub previous: Option<Task>,
    /// How the client wants the answer.
    pub configuration: Option<MessageSendConfiguration>,
    /// The request's extension data.
    pub metadata: Option<Metadata>,
    /// The request's task envelope ([`crate::envelope`]): correlation id, idempotency key,
    /// priority, response mode, trigger. `None` when the client sent none. Shared with the
    /// task, which records it (no copy per request).
    pub envelope: Option<std::sync::Arc<crate::envelope::Envelope>>,
    /// Instructions the server's admission hook gave for this request (a trigger's prompt),
    /// for the agent to add to its own.
    pub instructions: Option<String>,
    /// Who sent the message: the principal the server authenticated, `None` when anonymous.
    pub caller: Option<String>,
    /// The scopes the caller's token grants; `None`: not limited (the operator's static
    /// credentials, or an agent open to everyone). An agent that delegates acts within them.
    /// Shared with the verified token's entry in the verifier's cache (no copy per request).
    pub scopes: Option<std::sync::Arc<[String]>>,
    /// The bearer JWT the caller was verified with (never a static token or API key): what
    /// an agent that delegates exchanges for a token for the next agent. Held in memory only.
    pub subject_token: Option<crate::credential::BearerToken>,
    /// This message's turn already ran and was cut short (the worker running it died; the
    /// work queue handed the turn here): an agent that checkpointed that run resumes it
    /// without taking the message in again.
    pub rerun: bool,
    pub(crate) cancel: watch::Receiver<bool>,
}

impl RequestContext {
    /// The task was canceled by the client.
    pub fn is_canceled(&self) -> bool {
        *self.cancel.borrow()
    }

    /// A receiver that turns `true` when the task is canceled (to hand to other loops).
    pub fn cancel_signal(&self) -> watch::Receiver<bool> {
        self.cancel.clone()
    }

    /// Resolves when the task is canceled.
    pub async fn canceled(&self) {
        let mut rx = self.cancel.clone();
        let _ = rx.wait_for(|c| *c).await;
    }

    /// A builder for tests and embedded use outside a server.
    pub fn for_message(message: Message) -> (Self, watch::Sender<bool>) {
        let (tx, rx) = watch::channel(false);
        let envelope = crate::envelope::Envelope::of(&message)
            .ok()
            .flatten()
            .map(std::sync::Arc::new);
        let ctx = RequestContext {
            task_id: message.task_id.clone().unwrap_or_else(crate::new_id),
            context_id: message.context_id.clone().unwrap_or_else(crate::new_id),
            message,
            previous: None,
            configuration: None,
            metadata: None,
            envelope,
            instructions: None,
            caller: None,
            scopes: None,
            subject_token: None,
            rerun: false,
            cancel: rx,
        };
        (ctx, tx)
    }
}

/// Where an agent sends what it does. Each call resolves once the event is applied, stored and
/// published; slow stream subscribers never hold it up.
#[derive(Clone)]
pub struct EventSink {
    hub: Arc<Hub>,
}

impl EventSink {
    pub(crate) fn new(hub: Arc<Hub>) -> Self {
        EventSink { hub }
    }

    /// The task this run belongs to.
    pub fn task_id(&self) -> &str {
        &self.hub.task_id
    }

    /// Its conversation.
    pub fn context_id(&self) -> &str {
        &self.hub.context_id
    }

    /// An agent message with one text part, tied to this task.
    pub fn agent_text(&self, text: impl Into<String>) -> Message {
        self.agent_message(vec![Part::text(text)])
    }

    /// An agent message with the given parts, tied to this task.
    pub fn agent_message(&self, parts: Vec<Part>) -> Message {
        Message::new(Role::Agent, parts).in_task(self.task_id(), self.context_id())
    }

    /// Moves the task to `state`, with an optional message that joins the history.
    pub async fn status(
        &self,
        state: TaskState,
        message: Option<Message>,
    ) -> Result<(), ExecutorError> {
        self.hub
            .apply(AgentEvent::Status(TaskStatus::now(state, message)))
            .await
    }

    /// Marks the task `working`, with an optional progress message.
    pub async fn working(&self, message: Option<Message>) -> Result<(), ExecutorError> {
        self.status(TaskState::Working, message).await
    }

    /// Completes the task, with an optional final message.
    pub async fn complete(&self, message: Option<Message>) -> Result<(), ExecutorError> {
        self.status(TaskState::Completed, message).await
    }

    /// Ends the turn waiting for the client (a question in `message`).
    pub async fn input_required(&self, message: Option<Message>) -> Result<(), ExecutorError> {
        self.status(TaskState::InputRequired, message).await
    }

    /// Ends this turn with the task still `working`: the agent waits for the client's next
    /// message without asking for one (A2A's status update in state `working` with `final:
    /// true`, as the official SDKs leave a task whose agent returns while working). Use
    /// [`input_required`](Self::input_required) to ask. The next message starts a new turn;
    /// a cancel ends the task. The task is stored as parked ([`Task::parked`]), so a server
    /// restarted meanwhile leaves it waiting rather than recover it as interrupted.
    pub async fn end_turn_working(&self, message: Option<Message>) -> Result<(), ExecutorError> {
        self.hub
            .apply(AgentEvent::Park(TaskStatus::now(
                TaskState::Working,
                message,
            )))
            .await
    }

    /// Fails the task, saying why in `message`.
    pub async fn fail(&self, message: Option<Message>) -> Result<(), ExecutorError> {
        self.status(TaskState::Failed, message).await
    }

    /// Refuses the task, saying why in `message`.
    pub async fn reject(&self, message: Option<Message>) -> Result<(), ExecutorError> {
        self.status(TaskState::Rejected, message).await
    }

    /// Publishes an artifact, or a chunk of one: `append` adds the parts to an artifact with
    /// the same id, `last_chunk` says no more chunks follow.
    pub async fn artifact(
        &self,
        artifact: Artifact,
        append: bool,
        last_chunk: bool,
    ) -> Result<(), ExecutorError> {
        self.hub
            .apply(AgentEvent::Artifact {
                artifact,
                append,
                last_chunk,
            })
            .await
    }

    /// Answers with a message and no task. Only valid as the first event of a new task;
    /// afterwards the message joins the task's history and ends the stream.
    pub async fn message(&self, message: Message) -> Result<(), ExecutorError> {
        self.hub.apply(AgentEvent::Message(message)).await
    }
}

/// An agent, as the server runs it. See the module docs.
pub trait AgentExecutor: Send + Sync + 'static {
    /// Runs one turn of a task: reads `ctx.message`, reports through `events`.
    fn execute(
        &self,
        ctx: RequestContext,
        events: EventSink,
    ) -> impl Future<Output = Result<(), ExecutorError>> + Send;

    /// Called when a client cancels a running task, after the task is marked canceled and
    /// `ctx.canceled()` has fired. Release resources here.
    fn cancel(&self, _task_id: &str) -> impl Future<Output = ()> + Send {
        async {}
    }
}

/// The object-safe twin of [`AgentExecutor`], for registries and the server.
pub trait DynAgentExecutor: Send + Sync + 'static {
    /// [`AgentExecutor::execute`], boxed.
    fn execute_dyn(
        &self,
        ctx: RequestContext,
        events: EventSink,
    ) -> BoxFuture<'_, Result<(), ExecutorError>>;
    /// [`AgentExecutor::cancel`], boxed.
    fn cancel_dyn<'a>(&'a self, task_id: &'a str) -> BoxFuture<'a, ()>;
}

impl<T: AgentExecutor> DynAgentExecutor for T {
    fn execute_dyn(
        &self,
        ctx: RequestContext,
        events: EventSink,
    ) -> BoxFuture<'_, Result<(), ExecutorError>> {
        Box::pin(self.execute(ctx, events))
    }

    fn cancel_dyn<'a>(&'a self, task_id: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(self.cancel(task_id))
    }
}
