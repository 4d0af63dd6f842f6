//! Benchmark any A2A agent on tau2-bench's domains, scored as tau2 scores them.
//!
//! The harness plays tau2's half-duplex conversation between a simulated user and the agent
//! under test, reached over A2A like any other client would: the agent gets the domain's
//! policy and tools, its tool calls run against the domain's database here, and the run is
//! scored on the final database state, assertions, expected actions, communicated
//! information and judged statements. Results are written in tau2's `results.json` format,
//! so tau2's own viewer and re-scorer read them.
//!
//! ```
//! use agentry_eval::{domain::Domain, message::{Requestor, ToolCall}};
//! let mock = Domain::builtin("mock").unwrap();
//! let mut env = mock.environment();
//! let reply = env.respond(&ToolCall {
//!     id: "c1".into(),
//!     name: "create_task".into(),
//!     arguments: serde_json::json!({"user_id": "user_1", "title": "Write report"})
//!         .as_object().unwrap().clone(),
//!     requestor: Requestor::Assistant,
//! });
//! assert!(reply.text().contains("task_2"));
//! ```
#![warn(missing_docs)]

pub mod domain;
pub mod env;
pub mod message;
pub mod metrics;
pub mod pyjson;
pub mod report;
pub mod results;
pub mod run;
pub mod score;
pub mod task;
