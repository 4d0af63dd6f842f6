//! # agentry
//!
//! Specialized AI agents that cooperate over the A2A protocol and reach tools over MCP. This
//! is the crate to depend on: it re-exports the layers and owns what joins them.
//!
//! ```no_run
//! #[tokio::main]
//! async fn main() -> Result<(), agentry::Error> {
//!     // Every agent of the file at its path, with its card, task store and `GET /agents`,
//!     // until Ctrl-C.
//!     agentry::serve_config("agentry.toml").await
//! }
//! ```
//!
//! Or build the config in code and embed the router in a larger axum application:
//!
//! ```no_run
//! # async fn run() -> Result<(), agentry::Error> {
//! use agentry::config::{BuiltinAgent, Config, EchoMode, ServerSection};
//! let config = Config::builtin(BuiltinAgent::Echo { mode: EchoMode::Task }, ServerSection::default());
//! let service = agentry::Service::build(config).await?;
//! let app: axum::Router = service.router;
//! # let _ = app; Ok(()) }
//! ```
//!
//! ## What it owns
//! - [`config`]: the `agentry.toml` schema (server, agents, built-in agents, remotes, planner,
//!   orchestrator, team).
//! - [`setup`]: the factory with every agent type and model provider of this build, agents
//!   with their MCP tools, [`Setup`] (the registry, engine and planner workflows run on).
//! - [`serve`]: the one serve path, for configured and built-in agents alike.
//! - [`agents`]: the protocol's reference agents, echo and conformance.
//! - [`builtin`]: the agents agentry ships (echo, conformance, rag, ppt, data, researcher).
//! - [`knowledge`], [`team`] (feature `specialists`): the knowledge base a process uses, and
//!   the RAG → PPT team behind `agentry run`.
//! - [`toolsets`]: agentry's tools by name, for `agentry mcp serve`.
//! - [`events`]: publish-subscribe from `[events]`: subscriptions, the agents'
//!   `publish_event` tool, `POST /events/{topic}`.
//! - [`governed`]: the audit trail and JWT verification joined to the A2A server.
//! - [`introspect`]: bearer tokens checked by their issuer (RFC 7662 introspection).
//! - [`tokens`]: the token service (`[token_service]`): RFC 8693 token exchange over HTTP.
//! - `telemetry` (feature `otel`): agentry's spans exported over OTLP, one trace per
//!   multi-agent request.
//! - `alloc` (feature `mimalloc`): the global allocator `agentry serve` runs on.
//!
//! ## The layers, re-exported
//! - [`a2a`]: the A2A protocol (both generations, both bindings), server, client, task stores.
//! - [`core`]: LLM providers, tools, the ReAct loop, agent configs and the factory.
//! - [`flow`]: workflows, the engine, the planner, the orchestrator, publish-subscribe.
//! - [`governance`]: the tamper-evident audit trail.
//! - [`mcp`] (feature `mcp`), [`local`] (feature `local`), [`specialists`] (feature
//!   `specialists`), [`data`] (feature `data`), [`postgres`] (feature `postgres`): the task
//!   and run stores on PostgreSQL that replicas share.
//!
//! ## Features
//! | feature | adds | default |
//! |---|---|---|
//! | `specialists` | RAG over a SQLite knowledge base, PowerPoint decks, the team | yes |
//! | `mcp` | tools from MCP servers, agentry's tools served over MCP, the researcher | yes |
//! | `local` | the embedded chat model and MiniLM embedder on candle | no |
//! | `data` | the data agent: SQL over files and databases (DataFusion), charts | no |
//! | `pdf` | PDF ingestion | no |
//! | `otel` | OpenTelemetry export of the spans over OTLP/HTTP (`OTEL_*` variables) | no |
//! | `eval` | benchmarking A2A agents on tau2-bench domains | no |
//! | `postgres` | `store = "postgres://..."`: tasks, push configs, idempotency keys and run checkpoints in one PostgreSQL database several replicas share | no |
//! | `nats` | `bus = "nats://..."`: task events shared by replicas, so a stream reaches a task whose turn runs on another; `queue = true`: turns queued for pull workers (JetStream); publish-subscribe between agents (`nats::NatsBus`) | no |
//! | `mimalloc` | `alloc::MiMalloc`, the global allocator of `agentry serve` | no |
//! | `full` | all of the above | no |
//!
//! With `default-features = false` the crate is A2A, the agent core and workflows: the part
//! that builds in a few minutes.

#![warn(missing_docs)]

pub mod agents;
#[cfg(feature = "mimalloc")]
pub mod alloc;
pub mod builtin;
pub mod config;
mod error;
pub mod events;
pub mod governed;
pub mod introspect;
pub mod jwks;
pub mod serve;
pub mod setup;
#[cfg(feature = "otel")]
pub mod telemetry;
pub mod tokens;
pub mod toolsets;

#[cfg(feature = "specialists")]
pub mod knowledge;
#[cfg(feature = "specialists")]
pub mod team;

pub use config::Config;
pub use error::Error;
pub use serve::{Service, serve, serve_config, shutdown_signal};
pub use setup::{Setup, agent_from_file, create_agent};

pub use agentry_a2a as a2a;
pub use agentry_core as core;
#[cfg(feature = "data")]
pub use agentry_data as data;
#[cfg(feature = "eval")]
pub use agentry_eval as eval;
pub use agentry_flow as flow;
pub use agentry_governance as governance;
#[cfg(feature = "local")]
pub use agentry_local as local;
#[cfg(feature = "mcp")]
pub use agentry_mcp as mcp;
#[cfg(feature = "nats")]
pub use agentry_nats as nats;
#[cfg(feature = "postgres")]
pub use agentry_postgres as postgres;
#[cfg(feature = "specialists")]
pub use agentry_specialists as specialists;

use std::path::PathBuf;

/// Where agentry keeps its state (task stores, workflow runs, the knowledge base):
/// `$AGENTRY_HOME`, else `$XDG_DATA_HOME/agentry`, else `~/.local/share/agentry`.
pub fn home_dir() -> PathBuf {
    if let Some(h) = std::env::var_os("AGENTRY_HOME") {
        return PathBuf::from(h);
    }
    let base = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .unwrap_or_else(|| PathBuf::from("."));
    base.join("agentry")
}
