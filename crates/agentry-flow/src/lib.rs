//! # agentry-flow
//!
//! Orchestration: workflows written as data (or planned by an LLM) run over local and remote
//! agents.
//!
//! - [`workflow`]: the model (steps, `depends_on`, templates, retries, `on_failure`, conditions).
//! - [`template`]: `${input.…}` / `${steps.ID.output…}` rendering and conditions.
//! - [`validate`]: every problem of a workflow before anything runs, naming its step.
//! - [`registry`]: agents by name, local or remote, fallback and circuit breaker.
//! - [`delegation`]: a short-lived token per call to a remote agent (RFC 8693 exchange).
//! - [`exec`]: the engine: dependency-graph scheduling, parallelism, durable checkpoints.
//! - [`planner`]: workflows planned by an LLM, validated against the agents, repaired.
//! - [`a2a`]: the orchestrator as an A2A agent whose skills are its workflows.
//! - [`bus`]: publish-subscribe between agents (in-process now, a broker later).

#![warn(missing_docs)]

pub mod a2a;
pub mod bus;
pub mod delegation;
pub mod exec;
pub mod planner;
pub mod registry;
pub mod template;
pub mod validate;
pub mod workflow;

pub use delegation::{Delegation, DelegationError, TokenExchangeClient};
pub use exec::{Engine, FlowError, FlowEvent, RunState, RunStatus, StepStatus};
pub use planner::{PlanError, Planner};
pub use registry::{AgentRegistry, Mode, RemoteAccess};
pub use workflow::{OnFailure, Retry, Workflow, WorkflowStep};
