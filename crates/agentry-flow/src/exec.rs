//! Running workflows: dependency-graph scheduling, bounded parallelism, retries, failure
//! policies, conditions, cancellation, progress events, and durable checkpoints.
//!
//! A run's state ([`RunState`]) is checkpointed in the task store after every step that
//! finishes; [`Engine::resume`] continues a run from its checkpoint and never re-runs a step
//! that finished (steps that were running when the process died run again).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use agentry_a2a::envelope::Envelope;
use agentry_core::a2a::{Ask, Reply};
use agentry_core::agent::AgentError;
use agentry_core::runs::{RunStore, RunStoreError};
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use tokio::sync::{Semaphore, mpsc, watch};
use tracing::Instrument;

use crate::registry::AgentRegistry;
use crate::template::{condition_holds, render};
use crate::validate::{ValidationError, validate};
use crate::workflow::{OnFailure, Workflow, WorkflowStep};

/// Where a step stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// Not started yet.
    Pending,
    /// Its agent is working on it.
    Running,
    /// Answered.
    Done,
    /// Failed after its retries.
    Failed,
    /// Not run (its condition was false, or a dependency failed).
    Skipped,
}

/// What a step produced.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StepOutput {
    /// The answer's text.
    pub text: String,
    /// Structured output: the answer's data parts, and its text when that is a JSON object.
    pub data: Map<String, Value>,
    /// Files and other artifacts the answer carried.
    pub artifacts: Vec<agentry_a2a::model::Artifact>,
}

/// One step's record in a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// Where it stands.
    pub status: StepStatus,
    /// What it produced, once done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<StepOutput>,
    /// Why it failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Attempts made so far.
    pub attempts: u32,
    /// The agent that answered (the fallback, when one was used).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Steps are still running.
    Running,
    /// Every step that had to run ran.
    Completed,
    /// A step failed and the workflow gave up.
    Failed,
    /// Canceled before it finished.
    Canceled,
}

/// The whole state of a run: what is checkpointed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunState {
    /// The run's id (also its checkpoint key).
    pub run_id: String,
    /// The workflow being run.
    pub workflow: Workflow,
    /// The run's input.
    pub input: Value,
    /// Each step's record, by step id.
    pub steps: BTreeMap<String, StepRecord>,
    /// Where the run stands.
    pub status: RunStatus,
    /// The rendered final output, once completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_output: Option<String>,
    /// Why the run failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The correlation id of the user request the run serves (from the orchestrator's task
    /// envelope), sent on with every step's call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    /// The W3C `traceparent` of that request: steps' calls continue its trace when no
    /// OpenTelemetry layer gives them a span of their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// The scopes of the user the run acts for (`None`: not limited): a step whose agent's
    /// card requires others is refused before any call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<String>>,
    /// The user's token, exchanged for a delegated token per call to a remote agent. Never
    /// checkpointed: a run resumed after a restart has none, and its delegated calls are
    /// refused (fail closed) until the user asks again.
    #[serde(skip)]
    pub subject_token: Option<agentry_a2a::credential::BearerToken>,
}

impl RunState {
    /// The context templates read: input and every finished step's results.
    pub fn context(&self) -> Value {
        let steps: Map<String, Value> = self
            .steps
            .iter()
            .map(|(id, r)| (id.clone(), step_value(r)))
            .collect();
        json!({"input": self.input, "steps": steps})
    }

    /// Every artifact the steps produced, in step order.
    pub fn artifacts(&self) -> Vec<agentry_a2a::model::Artifact> {
        self.workflow
            .steps
            .iter()
            .filter_map(|s| self.steps.get(&s.id)?.output.as_ref())
            .flat_map(|o| o.artifacts.iter().cloned())
            .collect()
    }
}

/// One step's entry in the template context.
fn step_value(r: &StepRecord) -> Value {
    let mut v = json!({"status": r.status});
    if let Some(o) = &r.output {
        v["output"] = json!(o.text);
        v["data"] = Value::Object(o.data.clone());
        v["artifacts"] = o
            .artifacts
            .iter()
            .map(|a| json!({"name": a.name, "text": agentry_a2a::model::join_text(&a.parts)}))
            .collect();
    }
    v
}

/// Which steps can start: dependency counts kept up to date as steps settle, so scheduling
/// costs O(edges) over a run, not O(steps) per event.
struct Ready {
    index: std::collections::HashMap<String, usize>,
    waiting: Vec<usize>,
    dependents: Vec<Vec<usize>>,
    queue: std::collections::VecDeque<usize>,
}

fn settled(s: StepStatus) -> bool {
    matches!(
        s,
        StepStatus::Done | StepStatus::Failed | StepStatus::Skipped
    )
}

impl Ready {
    fn new(state: &RunState) -> Self {
        let steps = &state.workflow.steps;
        let index: std::collections::HashMap<String, usize> = steps
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id.clone(), i))
            .collect();
        let mut waiting = vec![0; steps.len()];
        let mut dependents = vec![Vec::new(); steps.len()];
        for (i, s) in steps.iter().enumerate() {
            for d in &s.depends_on {
                if let Some(&j) = index.get(d) {
                    dependents[j].push(i);
                    if !settled(state.steps[d].status) {
                        waiting[i] += 1;
                    }
                }
            }
        }
        let queue = (0..steps.len())
            .filter(|&i| waiting[i] == 0 && state.steps[&steps[i].id].status == StepStatus::Pending)
            .collect();
        Ready {
            index,
            waiting,
            dependents,
            queue,
        }
    }

    /// A step settled: its dependents may become ready.
    fn settle(&mut self, id: &str) {
        let Some(&i) = self.index.get(id) else { return };
        for &d in &self.dependents[i] {
            self.waiting[d] = self.waiting[d].saturating_sub(1);
            if self.waiting[d] == 0 {
                self.queue.push_back(d);
            }
        }
    }
}

/// Progress of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum FlowEvent {
    /// A step's agent was asked (again, when `attempt` > 1).
    StepStarted {
        /// The step's id.
        step: String,
        /// The agent asked.
        agent: String,
        /// 1 for the first attempt.
        attempt: u32,
    },
    /// A step answered.
    StepFinished {
        /// The step's id.
        step: String,
        /// Its answer's text.
        output: String,
    },
    /// A step's attempt failed.
    StepFailed {
        /// The step's id.
        step: String,
        /// Why.
        error: String,
        /// Whether another attempt follows.
        retrying: bool,
    },
    /// A step was not run.
    StepSkipped {
        /// The step's id.
        step: String,
        /// Why.
        reason: String,
    },
    /// The run ended.
    RunFinished {
        /// How.
        status: RunStatus,
        /// The final output, when completed.
        final_output: Option<String>,
    },
}

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FlowError {
    /// Every problem validation found, before anything ran.
    #[error("invalid workflow:\n{}", .0.iter().map(|e| format!("  - {e}")).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<ValidationError>),
    /// No checkpoint of this run (or no run store).
    #[error("no run {0} to resume")]
    UnknownRun(String),
    /// The run store failed.
    #[error(transparent)]
    Store(#[from] RunStoreError),
    /// The run's checkpoint is not a run state (written by an incompatible version?).
    #[error("the checkpoint of run {run} is unreadable")]
    Corrupt {
        /// The run.
        run: String,
        /// What did not parse.
        #[source]
        source: serde_json::Error,
    },
    /// The run's checkpoint parses but does not hold together (edited by hand, or damaged):
    /// resuming it would run steps with no record of what they did.
    #[error("the checkpoint of run {run} does not hold together: {reason}")]
    Inconsistent {
        /// The run.
        run: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// Runs workflows over an [`AgentRegistry`], checkpointing into a run store.
pub struct Engine {
    /// Where step agents are found (local handles and A2A URLs).
    pub agents: Arc<AgentRegistry>,
    store: Option<Arc<dyn RunStore>>,
    cancel_grace: Duration,
}

fn checkpoint_key(run_id: &str) -> String {
    format!("workflow:{run_id}")
}

/// Data of a reply: its data parts, plus the text itself when it is a JSON object.
fn output_of(reply: Reply) -> StepOutput {
    let mut data = Map::new();
    for d in reply.data {
        data.extend(d);
    }
    if let Ok(Value::Object(o)) = serde_json::from_str::<Value>(reply.text.trim()) {
        for (k, v) in o {
            data.entry(k).or_insert(v);
        }
    }
    StepOutput {
        text: reply.text,
        data,
        artifacts: reply.artifacts,
    }
}

fn preview(s: &str) -> String {
    let p: String = s.chars().take(120).collect();
    if p.len() < s.len() {
        format!("{p}…")
    } else {
        p
    }
}

impl Engine {
    /// An engine over `agents`, checkpointing in memory (see `with_store`).
    pub fn new(agents: Arc<AgentRegistry>) -> Self {
        Engine {
            agents,
            store: None,
            cancel_grace: Duration::from_secs(2),
        }
    }

    /// How long running steps get to stop (remote ones cancel their tasks) after a failure or
    /// a cancel, before they are abandoned.
    pub fn with_cancel_grace(mut self, d: Duration) -> Self {
        self.cancel_grace = d;
        self
    }

    /// Checkpoints runs in `store` (the embedded SQLite run store keeps them across restarts).
    pub fn with_store(mut self, store: Arc<dyn RunStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// Validates `wf` and makes a new run of it (nothing runs yet; see [`Engine::execute`]).
    pub fn prepare(&self, wf: Workflow, input: Value) -> Result<RunState, FlowError> {
        validate(&wf, &self.agents).map_err(FlowError::Invalid)?;
        let steps = wf
            .steps
            .iter()
            .map(|s| {
                (
                    s.id.clone(),
                    StepRecord {
                        status: StepStatus::Pending,
                        output: None,
                        error: None,
                        attempts: 0,
                        agent: None,
                    },
                )
            })
            .collect();
        Ok(RunState {
            run_id: agentry_a2a::new_id(),
            workflow: wf,
            input,
            steps,
            status: RunStatus::Running,
            final_output: None,
            error: None,
            correlation_id: None,
            traceparent: None,
            scopes: None,
            subject_token: None,
        })
    }

    /// Runs a prepared run to its end.
    pub async fn execute(
        &self,
        state: RunState,
        events: Option<mpsc::UnboundedSender<FlowEvent>>,
        cancel: Option<watch::Receiver<bool>>,
    ) -> RunState {
        self.drive(state, events, cancel).await
    }

    /// Validates, then runs `wf` with `input` to its end.
    pub async fn run(
        &self,
        wf: Workflow,
        input: Value,
        events: Option<mpsc::UnboundedSender<FlowEvent>>,
        cancel: Option<watch::Receiver<bool>>,
    ) -> Result<RunState, FlowError> {
        let state = self.prepare(wf, input)?;
        Ok(self.drive(state, events, cancel).await)
    }

    /// The checkpoint of a run.
    pub async fn load(&self, run_id: &str) -> Result<RunState, FlowError> {
        let store = self
            .store
            .as_ref()
            .ok_or_else(|| FlowError::UnknownRun(run_id.to_owned()))?;
        let body = store
            .get(&checkpoint_key(run_id))
            .await?
            .ok_or_else(|| FlowError::UnknownRun(run_id.to_owned()))?;
        let state: RunState = serde_json::from_str(&body).map_err(|source| FlowError::Corrupt {
            run: run_id.to_owned(),
            source,
        })?;
        // What the scheduler takes for granted, checked once here: a checkpoint is a file
        // on the user's disk, and a missing record must be an error, not a panic mid-run.
        let mut ids = std::collections::HashSet::new();
        for step in &state.workflow.steps {
            let reason = if !ids.insert(step.id.as_str()) {
                format!("step `{}` appears twice", step.id)
            } else if !state.steps.contains_key(&step.id) {
                format!("step `{}` has no record", step.id)
            } else {
                continue;
            };
            return Err(FlowError::Inconsistent {
                run: run_id.to_owned(),
                reason,
            });
        }
        // And what `prepare` checked: a dependency cycle written into the file would leave
        // its steps pending forever and the run "completed" without them.
        if let Err(errors) = crate::validate::validate_structure(&state.workflow) {
            let reasons: Vec<String> = errors.iter().map(ToString::to_string).collect();
            return Err(FlowError::Inconsistent {
                run: run_id.to_owned(),
                reason: reasons.join("; "),
            });
        }
        Ok(state)
    }

    /// Continues a run from its checkpoint; finished steps are kept, unfinished ones run.
    pub async fn resume(
        &self,
        run_id: &str,
        events: Option<mpsc::UnboundedSender<FlowEvent>>,
        cancel: Option<watch::Receiver<bool>>,
    ) -> Result<RunState, FlowError> {
        let mut state = self.load(run_id).await?;
        if state.status != RunStatus::Running {
            return Ok(state);
        }
        for r in state.steps.values_mut() {
            if r.status == StepStatus::Running {
                r.status = StepStatus::Pending;
            }
        }
        Ok(self.drive(state, events, cancel).await)
    }

    async fn checkpoint(&self, state: &RunState) {
        if let Some(store) = &self.store {
            match serde_json::to_string(state) {
                Ok(body) => {
                    if let Err(e) = store.put(&checkpoint_key(&state.run_id), &body).await {
                        tracing::warn!(run = %state.run_id, "checkpoint failed: {e}");
                    }
                }
                Err(e) => tracing::warn!(run = %state.run_id, "checkpoint not serializable: {e}"),
            }
        }
    }

    async fn drive(
        &self,
        mut state: RunState,
        events: Option<mpsc::UnboundedSender<FlowEvent>>,
        cancel: Option<watch::Receiver<bool>>,
    ) -> RunState {
        let emit = |e: FlowEvent| {
            if let Some(tx) = &events {
                let _ = tx.send(e);
            }
        };
        // Steps get a cancel signal of their own, raised by the run's cancel or a failure.
        let (stop_tx, stop_rx) = watch::channel(false);
        let stop_tx = Arc::new(stop_tx);
        if let Some(mut c) = cancel.clone() {
            let stop = stop_tx.clone();
            tokio::spawn(async move {
                if c.wait_for(|v| *v).await.is_ok() {
                    let _ = stop.send(true);
                }
            });
        }
        let limit = Arc::new(Semaphore::new(
            state.workflow.max_parallel.unwrap_or(8).max(1),
        ));
        // Steps run as futures of this task (no thread hop per step); dropping one stops it.
        let mut running: Running = FuturesUnordered::new();
        let mut ready = Ready::new(&state);
        // The template context, updated as steps finish rather than rebuilt.
        let mut ctx = state.context();
        self.checkpoint(&state).await;
        loop {
            let canceled = cancel.as_ref().is_some_and(|c| *c.borrow());
            if canceled && state.status == RunStatus::Running {
                state.status = RunStatus::Canceled;
                let _ = stop_tx.send(true);
            }
            if state.status == RunStatus::Running {
                self.schedule(
                    &mut state,
                    &mut ready,
                    &mut ctx,
                    &mut running,
                    &limit,
                    &stop_rx,
                    &emit,
                );
            }
            if running.is_empty() {
                break;
            }
            let joined = if state.status == RunStatus::Running {
                running.next().await
            } else {
                // Stopping: steps had the signal; those still running after the grace period
                // are abandoned (their futures dropped).
                match tokio::time::timeout(self.cancel_grace, running.next()).await {
                    Ok(j) => j,
                    Err(_) => {
                        running.clear();
                        break;
                    }
                }
            };
            let Some((id, result)) = joined else {
                break;
            };
            let policy = ready
                .index
                .get(&id)
                .map(|&i| state.workflow.steps[i].on_failure.clone())
                .unwrap_or_default();
            let rec = state
                .steps
                .get_mut(&id)
                .expect("scheduled steps have records");
            match result {
                Ok((output, agent, attempts)) => {
                    emit(FlowEvent::StepFinished {
                        step: id.clone(),
                        output: preview(&output.text),
                    });
                    rec.status = StepStatus::Done;
                    rec.output = Some(output);
                    rec.agent = Some(agent);
                    rec.attempts = attempts;
                }
                Err((error, attempts)) => {
                    rec.status = StepStatus::Failed;
                    rec.error = Some(error.clone());
                    rec.attempts = attempts;
                    emit(FlowEvent::StepFailed {
                        step: id.clone(),
                        error: error.clone(),
                        retrying: false,
                    });
                    if cancel.as_ref().is_some_and(|c| *c.borrow())
                        && state.status == RunStatus::Running
                    {
                        state.status = RunStatus::Canceled;
                        let _ = stop_tx.send(true);
                    } else if policy != OnFailure::Continue && state.status == RunStatus::Running {
                        state.status = RunStatus::Failed;
                        state.error = Some(format!("step `{id}` failed: {error}"));
                        let _ = stop_tx.send(true);
                    }
                }
            }
            ctx["steps"][&id] = step_value(&state.steps[&id]);
            ready.settle(&id);
            self.checkpoint(&state).await;
        }
        for r in state.steps.values_mut() {
            if r.status == StepStatus::Running {
                r.status = StepStatus::Failed;
                r.error = Some("canceled".into());
            }
        }
        if state.status == RunStatus::Running {
            state.status = RunStatus::Completed;
            state.final_output = Some(self.final_output(&state));
        }
        self.checkpoint(&state).await;
        emit(FlowEvent::RunFinished {
            status: state.status,
            final_output: state.final_output.clone(),
        });
        state
    }

    /// Starts the steps that became ready; skips those that cannot run.
    #[allow(clippy::too_many_arguments)]
    fn schedule(
        &self,
        state: &mut RunState,
        ready: &mut Ready,
        ctx: &mut Value,
        running: &mut Running,
        limit: &Arc<Semaphore>,
        stop: &watch::Receiver<bool>,
        emit: &impl Fn(FlowEvent),
    ) {
        while let Some(i) = ready.queue.pop_front() {
            let step = &state.workflow.steps[i];
            if state.steps[&step.id].status != StepStatus::Pending {
                continue;
            }
            let blocked = step.depends_on.iter().any(|d| {
                matches!(
                    state.steps[d].status,
                    StepStatus::Failed | StepStatus::Skipped
                )
            });
            let skip = if blocked {
                Some("a step it depends on failed or was skipped".to_owned())
            } else {
                match step.condition.as_deref().map(|c| condition_holds(c, ctx)) {
                    Some(Ok(false)) => Some(format!(
                        "condition `{}` is false",
                        step.condition.as_deref().unwrap_or("")
                    )),
                    Some(Err(e)) => Some(format!("condition cannot be evaluated: {e}")),
                    _ => None,
                }
            };
            let id = step.id.clone();
            if let Some(reason) = skip {
                let rec = state.steps.get_mut(&id).expect("every step has a record");
                rec.status = StepStatus::Skipped;
                emit(FlowEvent::StepSkipped {
                    step: id.clone(),
                    reason,
                });
                ctx["steps"][&id] = step_value(rec);
                ready.settle(&id);
                continue;
            }
            let input = match render(&step.input, ctx) {
                Ok(input) => input,
                Err(e) => {
                    let continue_on = step.on_failure == OnFailure::Continue;
                    let rec = state.steps.get_mut(&id).expect("every step has a record");
                    rec.status = StepStatus::Failed;
                    rec.error = Some(format!("input: {e}"));
                    emit(FlowEvent::StepFailed {
                        step: id.clone(),
                        error: format!("input: {e}"),
                        retrying: false,
                    });
                    ctx["steps"][&id] = step_value(rec);
                    if !continue_on {
                        state.status = RunStatus::Failed;
                        state.error = Some(format!("step `{id}`: input: {e}"));
                        return;
                    }
                    ready.settle(&id);
                    continue;
                }
            };
            emit(FlowEvent::StepStarted {
                step: id.clone(),
                agent: step.agent.clone(),
                attempt: 1,
            });
            let step = step.clone();
            state
                .steps
                .get_mut(&id)
                .expect("every step has a record")
                .status = StepStatus::Running;
            let agents = self.agents.clone();
            let limit = limit.clone();
            let stop = stop.clone();
            let context_id = state.run_id.clone();
            let on_behalf = OnBehalf {
                correlation: state.correlation_id.clone(),
                traceparent: state.traceparent.clone(),
                scopes: state.scopes.clone(),
                subject_token: state.subject_token.clone(),
            };
            let span = tracing::info_span!(
                "workflow.step",
                otel.name = format!("workflow step {}", step.id),
                otel.status_code = tracing::field::Empty,
                agentry.workflow.name = %state.workflow.name,
                agentry.workflow.step = %step.id,
                gen_ai.agent.name = %step.agent,
            );
            running.push(Box::pin(
                async move {
                    let _permit = limit.acquire_owned().await;
                    let r = run_step(&agents, &step, input, context_id, on_behalf, stop).await;
                    if r.is_err() {
                        tracing::Span::current().record("otel.status_code", "error");
                    }
                    (step.id.clone(), r)
                }
                .instrument(span),
            ));
        }
    }

    fn final_output(&self, state: &RunState) -> String {
        let ctx = state.context();
        if let Some(t) = &state.workflow.output {
            return render(t, &ctx).unwrap_or_else(|e| format!("(output template failed: {e})"));
        }
        // The outputs of the steps nothing depends on.
        let wf = &state.workflow;
        let depended: std::collections::HashSet<&str> = wf
            .steps
            .iter()
            .flat_map(|s| s.depends_on.iter().map(String::as_str))
            .collect();
        wf.steps
            .iter()
            .filter(|s| !depended.contains(s.id.as_str()))
            .filter_map(|s| {
                state
                    .steps
                    .get(&s.id)?
                    .output
                    .as_ref()
                    .map(|o| o.text.clone())
            })
            .collect::<Vec<_>>()
            .join("\n\n")
    }
}

/// The steps in flight.
type Running = FuturesUnordered<
    std::pin::Pin<Box<dyn std::future::Future<Output = (String, StepResult)> + Send>>,
>;

/// A step's end: its output, the agent that answered and the attempts; or the error and the
/// attempts.
type StepResult = Result<(StepOutput, String, u32), (String, u32)>;

/// Whom a run's steps act for: the user request's correlation id and the user's scopes.
struct OnBehalf {
    correlation: Option<String>,
    traceparent: Option<String>,
    scopes: Option<Vec<String>>,
    subject_token: Option<agentry_a2a::credential::BearerToken>,
}

/// The idempotency key of one attempt of a step: the run, the step, the agent (a fallback
/// may live on the same server) and the attempt, as visible ASCII of bounded length.
fn attempt_key(run: &str, step: &str, agent: &str, attempt: u32) -> String {
    let key = format!("{run}/{step}/{agent}/{attempt}");
    if key.len() <= 200 && key.bytes().all(|b| b.is_ascii_graphic()) {
        return key;
    }
    // FNV-1a: stable across processes and versions, which a resumed run needs.
    let h = key.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    format!(
        "{}/{h:016x}/{attempt}",
        run.chars()
            .filter(char::is_ascii_graphic)
            .take(64)
            .collect::<String>()
    )
}

/// One step: attempts with timeout and backoff, then the fallback agent if any.
async fn run_step(
    agents: &AgentRegistry,
    step: &WorkflowStep,
    input: String,
    context_id: String,
    on_behalf: OnBehalf,
    stop: watch::Receiver<bool>,
) -> StepResult {
    let mut candidates = vec![step.agent.clone()];
    if let OnFailure::Fallback(f) = &step.on_failure {
        candidates.push(f.clone());
    }
    let mut attempts = 0;
    let mut last = String::new();
    for agent in candidates {
        let mut delay = Duration::from_secs_f64(step.retry.backoff_secs.max(0.0));
        for attempt in 0..=step.retry.max {
            if *stop.borrow() {
                return Err(("canceled".into(), attempts));
            }
            attempts += 1;
            // One idempotency key per attempt: a remote agent runs an attempt once even when
            // the run is resumed after a crash mid-step (the resumed attempt repeats the key
            // and gets the first one's task), while a retry after a failure runs again.
            let mut envelope = Envelope::default();
            envelope.correlation_id = on_behalf.correlation.clone();
            // The request's own; a traced remote call puts its span's instead.
            envelope.traceparent = on_behalf.traceparent.clone();
            envelope.idempotency_key = Some(attempt_key(&context_id, &step.id, &agent, attempt));
            let ask = Ask {
                text: input.clone(),
                data: None,
                context_id: Some(context_id.clone()),
                cancel: Some(stop.clone()),
                envelope: Some(envelope),
                scopes: on_behalf.scopes.clone(),
                skill: step.skill.clone(),
                subject_token: on_behalf.subject_token.clone(),
                ..Default::default()
            };
            let call = agents.ask(&agent, ask);
            let result = match step.timeout_secs {
                Some(t) => match tokio::time::timeout(Duration::from_secs_f64(t), call).await {
                    Ok(r) => r,
                    Err(_) => Err(AgentError::failed(format!("timed out after {t} s"))),
                },
                None => call.await,
            };
            match result {
                Ok(reply) if reply.needs_input => {
                    last = format!("agent `{agent}` asked for input: {}", reply.text);
                }
                Ok(reply) => return Ok((output_of(reply), agent, attempts)),
                // Asking again changes nothing: on to the fallback, if any.
                Err(e @ (AgentError::Forbidden { .. } | AgentError::Delegation { .. })) => {
                    last = format!("agent `{agent}`: {e}");
                    break;
                }
                Err(e) => last = format!("agent `{agent}`: {e}"),
            }
            if attempt < step.retry.max {
                tracing::debug!(step = %step.id, attempt, "retrying: {last}");
                let mut s = stop.clone();
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = async { let _ = s.wait_for(|v| *v).await; } => return Err(("canceled".into(), attempts)),
                }
                delay *= 2;
            }
        }
    }
    Err((last, attempts))
}
