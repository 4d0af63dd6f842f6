//! The orchestrator as an A2A agent: its skills are its workflows, so workflows compose with
//! other agents and any A2A client can run them, watching their progress as status updates.
//!
//! A message selects a workflow by a data part `{"workflow": NAME, "input": {…}}`, by
//! `metadata.skill`, or (with one workflow) implicitly, the text becoming `input.text`. With a
//! planner and no workflow named, the text is planned into a workflow first.

use std::collections::BTreeMap;
use std::sync::Arc;

use agentry_a2a::model::*;
use agentry_a2a::server::{AgentExecutor, EventSink, ExecutorError, RequestContext};
use serde_json::{Map, Value, json};

use crate::exec::{Engine, FlowEvent, RunStatus};
use crate::planner::Planner;
use crate::workflow::Workflow;

/// Runs workflows for A2A clients.
pub struct Orchestrator {
    engine: Arc<Engine>,
    workflows: BTreeMap<String, Workflow>,
    planner: Option<Arc<Planner>>,
    name: String,
}

impl Orchestrator {
    /// Serves `workflows` (each a skill) as the agent `name`, run by `engine`.
    pub fn new(name: &str, engine: Arc<Engine>, workflows: Vec<Workflow>) -> Self {
        Orchestrator {
            engine,
            workflows: workflows.into_iter().map(|w| (w.name.clone(), w)).collect(),
            planner: None,
            name: name.to_owned(),
        }
    }

    /// Plans a workflow from the text when a message names none.
    pub fn with_planner(mut self, p: Arc<Planner>) -> Self {
        self.planner = Some(p);
        self
    }

    /// A card whose skills are the workflows (and `plan`, with a planner).
    pub fn card(&self, url: &str) -> AgentCard {
        let mut card = AgentCard::new(&self.name, "Runs workflows over specialized agents.", url);
        card.capabilities.streaming = Some(true);
        card.capabilities.push_notifications = Some(true);
        card.default_input_modes = vec!["text/plain".into(), "application/json".into()];
        card.default_output_modes = vec!["text/plain".into(), "application/json".into()];
        for w in self.workflows.values() {
            card.skills.push(AgentSkill {
                id: w.name.clone(),
                name: w.name.clone(),
                description: if w.description.is_empty() {
                    format!("Runs the {} workflow ({} steps)", w.name, w.steps.len())
                } else {
                    w.description.clone()
                },
                tags: vec!["workflow".into()],
                examples: Vec::new(),
                input_modes: None,
                output_modes: None,
                security: Vec::new(),
            });
        }
        if self.planner.is_some() {
            card.skills.push(AgentSkill {
                id: "plan".into(),
                name: "Plan and run".into(),
                description:
                    "Plans a workflow for the task described in the message, then runs it.".into(),
                tags: vec!["planner".into()],
                examples: vec!["Create a presentation about Hamlet based on our documents".into()],
                input_modes: None,
                output_modes: None,
                security: Vec::new(),
            });
        }
        card
    }

    fn select(&self, msg: &Message) -> Result<Option<(Workflow, Value)>, String> {
        let text = msg.text_content();
        let data = msg.parts.iter().find_map(|p| match p {
            Part::Data(d) => Some(d.data.clone()),
            _ => None,
        });
        let named = data
            .as_ref()
            .and_then(|d| d.get("workflow").and_then(Value::as_str).map(str::to_owned))
            .or_else(|| {
                msg.metadata
                    .as_ref()
                    .and_then(|m| m.get("skill").and_then(Value::as_str).map(str::to_owned))
            })
            .filter(|n| n != "plan");
        let input = match data.as_ref().and_then(|d| d.get("input")) {
            Some(v) => v.clone(),
            None => json!({"text": text}),
        };
        match named {
            Some(n) => match self.workflows.get(&n) {
                Some(w) => Ok(Some((w.clone(), input))),
                None => Err(format!(
                    "no workflow `{n}`; this orchestrator runs: {}",
                    self.workflows
                        .keys()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            },
            None if self.workflows.len() == 1 && self.planner.is_none() => {
                Ok(self.workflows.values().next().map(|w| (w.clone(), input)))
            }
            None if self.planner.is_some() => Ok(None),
            None => Err(format!(
                "say which workflow to run (a data part {{\"workflow\": NAME, \"input\": {{…}}}}); \
                 workflows: {}",
                self.workflows
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
}

fn describe(e: &FlowEvent) -> String {
    match e {
        FlowEvent::StepStarted { step, agent, .. } => format!("step {step}: asking {agent}"),
        FlowEvent::StepFinished { step, output } => format!("step {step} done: {output}"),
        FlowEvent::StepFailed { step, error, .. } => format!("step {step} failed: {error}"),
        FlowEvent::StepSkipped { step, reason } => format!("step {step} skipped: {reason}"),
        FlowEvent::RunFinished { status, .. } => format!("run {status:?}"),
    }
}

impl AgentExecutor for Orchestrator {
    async fn execute(&self, ctx: RequestContext, ev: EventSink) -> Result<(), ExecutorError> {
        let (wf, input) = match self.select(&ctx.message) {
            Ok(Some(x)) => x,
            Ok(None) => {
                let planner = self
                    .planner
                    .as_ref()
                    .ok_or_else(|| ExecutorError::failed("no planner"))?;
                ev.working(Some(ev.agent_text("planning a workflow")))
                    .await?;
                let text = ctx.message.text_content();
                // Planned within the caller's scopes: steps they may not ask are not offered.
                let wf = planner
                    .plan_within(&text, &self.engine.agents, ctx.scopes.as_deref())
                    .await
                    .map_err(|e| ExecutorError::failed(e.to_string()))?;
                let plan = serde_json::to_value(&wf)
                    .ok()
                    .and_then(|v| v.as_object().cloned())
                    .unwrap_or_default();
                ev.working(Some(ev.agent_message(vec![
                    Part::text(format!("planned {} steps", wf.steps.len())),
                    Part::data(plan),
                ])))
                .await?;
                (wf, json!({"text": text}))
            }
            Err(why) => return Err(ExecutorError::Rejected(why)),
        };
        let mut state = self
            .engine
            .prepare(wf, input)
            .map_err(|e| ExecutorError::Rejected(e.to_string()))?;
        // Every step's call carries the user request's correlation id.
        state.correlation_id = ctx.envelope.as_ref().and_then(|e| e.correlation_id.clone());
        state.traceparent = ctx.envelope.as_ref().and_then(|e| e.traceparent.clone());
        // Steps act within the caller's scopes: an agent requiring others is not called.
        state.scopes = ctx.scopes.as_deref().map(<[String]>::to_vec);
        // ... and each call to a remote agent gets a token of its own made from the caller's.
        state.subject_token = ctx.subject_token.clone();
        let run_id = state.run_id.clone();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let run = self
            .engine
            .execute(state, Some(tx), Some(ctx.cancel_signal()));
        let forward = async {
            while let Some(e) = rx.recv().await {
                let data = serde_json::to_value(&e)
                    .ok()
                    .and_then(|v| v.as_object().cloned())
                    .unwrap_or_default();
                let _ = ev
                    .working(Some(
                        ev.agent_message(vec![Part::text(describe(&e)), Part::data(data)]),
                    ))
                    .await;
            }
        };
        let (state, ()) = tokio::join!(run, forward);
        match state.status {
            RunStatus::Completed => {
                for a in state.artifacts() {
                    ev.artifact(a, false, true).await?;
                }
                let out = state.final_output.clone().unwrap_or_default();
                let mut data = Map::new();
                data.insert("run_id".into(), json!(run_id));
                data.insert("workflow".into(), json!(state.workflow.name));
                data.insert(
                    "steps".into(),
                    state
                        .steps
                        .iter()
                        .map(|(k, r)| (k.clone(), json!(r.status)))
                        .collect::<Map<_, _>>()
                        .into(),
                );
                ev.artifact(
                    Artifact::new(
                        Some("result"),
                        vec![Part::text(out.clone()), Part::data(data)],
                    ),
                    false,
                    true,
                )
                .await?;
                ev.complete(Some(ev.agent_text(out))).await
            }
            RunStatus::Canceled => Ok(()),
            _ => Err(ExecutorError::failed(
                state.error.unwrap_or_else(|| "the workflow failed".into()),
            )),
        }
    }
}
