//! Agentry's specialist agents.
//!
//! - [`rag`]: documents in, cited answers out (SQLite knowledge base with hybrid search).
//! - [`pptx`]: real PowerPoint files from a small PresentationML writer, and the PPT tools.
//! - [`research`] (feature `mcp`): one question asked of several MCP servers at once, or of a remote researcher.
//! - [`mail`]: drafts emails; sends one only after a confirmation turn, to an outbox spool.
//! - [`job`]: the presentation job, RAG then PPT, planned and run as a workflow.
//! - [`agents`]: the specialists as agents, in-process or served over A2A.
//! - [`kinds`]: the specialists as agent types of the core factory, for models that drive the
//!   tools themselves (`agent_type = "rag"`).

#![warn(missing_docs)]

pub mod agents;
pub mod job;
pub mod kinds;
pub mod mail;
pub mod pptx;
pub mod rag;
#[cfg(feature = "mcp")]
pub mod research;

use std::path::PathBuf;

/// Where `scripts/fetch-data.sh` puts the demo data: `$AGENTRY_DATA`, else
/// `~/.cache/agentry/data`.
pub fn demo_data_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("AGENTRY_DATA") {
        return PathBuf::from(d);
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    home.join(".cache/agentry/data")
}
