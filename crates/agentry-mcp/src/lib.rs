//! # agentry-mcp
//!
//! Tools from any MCP server, on the official Rust SDK (`rmcp`, re-exported so users never get
//! two versions).
//!
//! - [`client`]: one server over stdio or Streamable HTTP; protocol negotiation, reconnects,
//!   timeouts that progress extends, a launch allow-list.
//! - [`tools`]: MCP tools in an agent's `ToolRegistry` (namespaced, filtered), result mapping,
//!   fan-out across servers.

pub mod client;
pub mod tools;

pub use client::{LaunchPolicy, McpClient, McpError, McpServerSpec};
pub use rmcp;
pub use tools::{FanOutResult, McpTool, McpTools, fan_out, map_result};
