//! The driver: performs the I/O the ReAct state machine asks for, reports each new step, and
//! checkpoints the state after every step, so an interrupted run resumes where it stopped.

use tokio::sync::watch;
use tracing::Instrument;

use crate::llm::{BoxFuture, DynLlmProvider};
use crate::react::{Next, Outcome, ReactState, Step};
use crate::runs::Checkpoints;
use crate::spans;
use crate::tools::ToolRegistry;

/// What a driver calls around the loop. Every method has a default, so hooks only override
/// what they need.
pub trait RunHooks: Send + Sync {
    /// Asked before each model call; `false` ends the run with [`Outcome::Stopped`].
    fn should_continue(&self, _state: &ReactState) -> bool {
        true
    }

    /// New steps, as they happen (for streaming).
    fn on_steps<'a>(&'a self, _steps: &'a [Step]) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }

    /// The state after a step; persist it to resume after a crash.
    fn checkpoint<'a>(&'a self, _state: &'a ReactState) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }
}

/// Hooks that do nothing.
pub struct NoHooks;
impl RunHooks for NoHooks {}

/// Runs (or resumes) `state` to its end. A cancel signal is checked before each step and
/// interrupts a model or tool call in flight.
pub async fn drive(
    state: &mut ReactState,
    llm: &dyn DynLlmProvider,
    tools: &ToolRegistry,
    hooks: &dyn RunHooks,
    cancel: Option<watch::Receiver<bool>>,
) -> Outcome {
    let canceled = || cancel.as_ref().is_some_and(|c| *c.borrow());
    let until_canceled = || {
        let mut c = cancel.clone();
        async move {
            match c.as_mut() {
                Some(c) => {
                    let _ = c.wait_for(|v| *v).await;
                }
                None => std::future::pending::<()>().await,
            }
        }
    };
    // The current ReAct step: one model call and the tool calls it asked for.
    let mut step = tracing::Span::none();
    loop {
        if canceled() && !state.is_done() {
            state.finish(Outcome::Canceled);
        }
        let seen = state.steps.len();
        match state.next_action() {
            Next::Finish(outcome) => {
                hooks.checkpoint(state).await;
                return outcome;
            }
            Next::CallModel(req) => {
                if !hooks.should_continue(state) {
                    state.finish(Outcome::Stopped);
                    continue;
                }
                step = spans::step(state.iteration);
                let span = spans::chat(&step, llm, &req);
                let result = tokio::select! {
                    r = llm.chat_dyn(req).instrument(span.clone()) => Some(r),
                    _ = until_canceled() => None,
                };
                spans::chat_done(&span, result.as_ref());
                match result {
                    None => state.finish(Outcome::Canceled),
                    Some(Ok(resp)) => state.on_model(resp),
                    Some(Err(e)) => state.finish(Outcome::Failed {
                        error: format!("model call failed: {e}"),
                    }),
                }
            }
            Next::CallTools(calls) => {
                let results = tokio::select! {
                    r = tools.call_all(&calls).instrument(step.clone()) => Some(r),
                    _ = until_canceled() => None,
                };
                match results {
                    None => state.finish(Outcome::Canceled),
                    Some(r) => state.on_tools(r),
                }
            }
        }
        if state.steps.len() > seen {
            hooks.on_steps(&state.steps[seen..]).await;
        }
        hooks.checkpoint(state).await;
    }
}

/// Hooks that checkpoint into a [`Checkpoints`] store under `run_id`.
pub struct CheckpointHooks<'a> {
    /// Where.
    pub store: &'a Checkpoints,
    /// Under which key.
    pub run_id: &'a str,
}

impl RunHooks for CheckpointHooks<'_> {
    fn checkpoint<'a>(&'a self, state: &'a ReactState) -> BoxFuture<'a, ()> {
        Box::pin(self.store.save(self.run_id, state))
    }
}
