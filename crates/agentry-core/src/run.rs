//! The driver: performs the I/O the ReAct state machine asks for, reports each new step, and
//! checkpoints the state after every step, so an interrupted run resumes where it stopped.

use std::collections::HashMap;
use std::sync::Mutex;

use futures_util::FutureExt;
use tokio::sync::watch;

use crate::llm::{BoxFuture, DynLlmProvider};
use crate::react::{Next, Outcome, ReactState, Step};
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
                let result = tokio::select! {
                    r = llm.chat_dyn(req) => Some(r),
                    _ = until_canceled() => None,
                };
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
                    r = tools.call_all(&calls) => Some(r),
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

/// Where checkpoints live; keyed by run (for agents served over A2A: the task id).
pub trait Checkpoints: Send + Sync {
    fn save<'a>(&'a self, run_id: &'a str, state: &'a ReactState) -> BoxFuture<'a, ()>;
    fn load<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Option<ReactState>>;
    fn remove<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, ()>;
}

/// Checkpoints in memory (tests, ephemeral agents).
#[derive(Default)]
pub struct MemoryCheckpoints {
    runs: Mutex<HashMap<String, String>>,
}

impl Checkpoints for MemoryCheckpoints {
    fn save<'a>(&'a self, run_id: &'a str, state: &'a ReactState) -> BoxFuture<'a, ()> {
        if let Ok(json) = serde_json::to_string(state) {
            self.runs
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(run_id.to_owned(), json);
        }
        Box::pin(async {})
    }

    fn load<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Option<ReactState>> {
        let s = self
            .runs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(run_id)
            .and_then(|j| serde_json::from_str(j).ok());
        Box::pin(async move { s })
    }

    fn remove<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, ()> {
        self.runs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(run_id);
        Box::pin(async {})
    }
}

/// Hooks that checkpoint into a [`Checkpoints`] store under `run_id`.
pub struct CheckpointHooks<'a> {
    pub store: &'a dyn Checkpoints,
    pub run_id: &'a str,
}

impl RunHooks for CheckpointHooks<'_> {
    fn checkpoint<'a>(&'a self, state: &'a ReactState) -> BoxFuture<'a, ()> {
        self.store.save(self.run_id, state).boxed()
    }
}

/// Checkpoints in an A2A task store (the embedded SQLite store keeps them across restarts,
/// beside the tasks they belong to).
pub struct StoreCheckpoints(pub std::sync::Arc<dyn agentry_a2a::store::TaskStore>);

impl Checkpoints for StoreCheckpoints {
    fn save<'a>(&'a self, run_id: &'a str, state: &'a ReactState) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            match serde_json::to_string(state) {
                Ok(json) => {
                    if let Err(e) = self.0.put_checkpoint(run_id, &json).await {
                        tracing::warn!(run = run_id, "checkpoint not saved: {e}");
                    }
                }
                Err(e) => tracing::warn!(run = run_id, "checkpoint not serializable: {e}"),
            }
        })
    }

    fn load<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Option<ReactState>> {
        Box::pin(async move {
            let body = self.0.get_checkpoint(run_id).await.ok().flatten()?;
            serde_json::from_str(&body)
                .inspect_err(|e| tracing::warn!(run = run_id, "checkpoint unreadable: {e}"))
                .ok()
        })
    }

    fn remove<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let _ = self.0.delete_checkpoint(run_id).await;
        })
    }
}
