//! [`McpServerSpec`]: how to reach an MCP server and what to take from it, as written in an
//! agent config's `[[mcp_servers]]` (core keeps those entries as plain tables; this crate
//! reads them).

use std::collections::BTreeMap;

use agentry_core::agent::{AgentConfig, AgentError};
use serde::{Deserialize, Serialize};

/// An MCP server an agent draws tools from: how to reach it, its limits and tool filter.
/// An agent config's `[[mcp_servers]]` entries are these.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerSpec {
    /// Also the tool namespace (`name__tool`) unless `prefix` is given.
    pub name: String,
    /// A command to launch (stdio transport).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The command's arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Environment variables set for the command.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// An endpoint (Streamable HTTP transport, falling back to legacy HTTP+SSE).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// `http` (Streamable HTTP only), `sse` (legacy HTTP+SSE only); default: Streamable HTTP
    /// with a fallback to legacy SSE when the server only speaks that.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<String>,
    /// HTTP headers sent with every request (HTTP transports).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Sent as `Authorization: Bearer ...` (HTTP transports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_token: Option<String>,
    /// Seconds without an answer (or progress) before a call is canceled.
    #[serde(default = "default_timeout")]
    pub timeout_secs: f64,
    /// Absolute cap on a call, progress or not.
    #[serde(default = "default_max_timeout")]
    pub max_timeout_secs: f64,
    /// Seconds to connect and negotiate.
    #[serde(default = "default_connect")]
    pub connect_timeout_secs: f64,
    /// Tool name patterns to expose (`*` wildcards); empty: all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_tools: Vec<String>,
    /// Tool name patterns to hide, applied after `allow_tools`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny_tools: Vec<String>,
    /// Namespace for the tools; default: `name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// `auto` (default: `server/discover`, then `initialize`), `discover`, or `initialize`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
}

fn default_timeout() -> f64 {
    60.0
}
fn default_max_timeout() -> f64 {
    600.0
}
fn default_connect() -> f64 {
    15.0
}

impl McpServerSpec {
    /// A server launched as `command args...`, spoken to over stdio, default timeouts.
    pub fn stdio(name: &str, command: &str, args: &[&str]) -> Self {
        McpServerSpec {
            name: name.into(),
            command: Some(command.into()),
            args: args.iter().map(|s| s.to_string()).collect(),
            env: BTreeMap::new(),
            url: None,
            transport: None,
            headers: BTreeMap::new(),
            bearer_token: None,
            timeout_secs: default_timeout(),
            max_timeout_secs: default_max_timeout(),
            connect_timeout_secs: default_connect(),
            allow_tools: Vec::new(),
            deny_tools: Vec::new(),
            prefix: None,
            protocol: None,
        }
    }

    /// A server at `url` (Streamable HTTP, falling back to legacy SSE), default timeouts.
    pub fn http(name: &str, url: &str) -> Self {
        McpServerSpec {
            command: None,
            args: Vec::new(),
            url: Some(url.into()),
            ..Self::stdio(name, "", &[])
        }
    }

    /// The prefix of this server's tool names: `prefix`, else `name`.
    pub fn namespace(&self) -> &str {
        self.prefix.as_deref().unwrap_or(&self.name)
    }
}

/// The `[[mcp_servers]]` of an agent config, read and checked (unknown fields are errors).
pub fn specs_of(config: &AgentConfig) -> Result<Vec<McpServerSpec>, AgentError> {
    config
        .mcp_servers
        .iter()
        .enumerate()
        .map(|(i, entry)| {
            serde_json::from_value(serde_json::Value::Object(entry.clone())).map_err(|e| {
                AgentError::Invalid {
                    agent: config.name.clone(),
                    reason: format!("mcp_servers[{i}]: {e}"),
                }
            })
        })
        .collect()
}
