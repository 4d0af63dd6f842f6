//! # agentry-core
//!
//! Specialized agents from one extensible ReAct engine.
//!
//! - [`embed`]: the `Embedder` trait retrieval and tool routing use.
//! - [`llm`]: the provider trait; OpenAI-compatible, scripted and recording providers.
//! - [`parse`]: tool calls parsed from text, for models without native tool calling.
//! - [`tools`]: the typed `Tool` trait, its object-safe twin, the `ToolRegistry`.
//! - [`react`]: the ReAct loop as a serializable state machine that performs no I/O.
//! - [`run`]: the driver that performs the loop's I/O and checkpoints it.
//! - [`runs`]: the run store, where checkpoints of unfinished runs live (memory, SQLite).
//! - [`agent`]: `AgentConfig` (TOML/YAML), `AgentFactory`, `Agent`.
//! - [`handle`]: `AgentHandle`, the one interface of local and remote agents: a stream of
//!   updates ending in a reply.
//! - [`confine`]: which host files a tool may read (folders, symlinks resolved, capped reads).
//! - [`a2a`]: any agent served over A2A, remote A2A agents used as local ones, agents as tools.

#![warn(missing_docs)]

pub mod a2a;
pub mod agent;
pub mod builtin;
pub mod confine;
pub mod embed;
pub mod handle;
pub mod llm;
pub mod parse;
pub mod react;
pub mod run;
pub mod runs;
mod spans;
pub mod text;
pub mod tools;
