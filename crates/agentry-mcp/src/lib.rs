//! # agentry-mcp
//!
//! Tools from any MCP server, on the official Rust SDK (`rmcp`, re-exported so users never get
//! two versions).
//!
//! - [`client`]: one server over stdio or Streamable HTTP; protocol negotiation, reconnects,
//!   timeouts that progress extends, a launch allow-list.
//! - [`tools`]: MCP tools in an agent's `ToolRegistry` (namespaced, filtered), result mapping,
//!   fan-out across servers.
//! - [`legacy_sse`]: the 2024-11-05 HTTP+SSE transport, as a custom rmcp transport.
//! - [`server`]: agentry's tools served over MCP (stdio, Streamable HTTP).
//! - [`spec`]: an agent config's `[[mcp_servers]]` entries, read and checked.

#![warn(missing_docs)]

pub mod client;
pub mod legacy_sse;
pub mod server;
pub mod spec;
pub mod tools;

pub use client::{LaunchPolicy, McpClient, McpError};
pub use rmcp;
pub use server::ToolServer;
pub use spec::{McpServerSpec, specs_of};
pub use tools::{FanOutResult, McpTool, McpTools, fan_out, map_result};

use std::sync::Arc;

use agentry_core::agent::{Agent, AgentConfig, AgentError, AgentFactory};

/// Creates an agent from `config`, connecting its MCP servers (concurrently) and adding their
/// tools, namespaced by server, to the agent's registry.
pub async fn create_agent(
    factory: &AgentFactory,
    config: AgentConfig,
    policy: &LaunchPolicy,
) -> Result<Agent, AgentError> {
    let llm = factory.model(&config.model)?;
    create_agent_with_model(factory, config, llm, policy).await
}

/// As [`create_agent`], with a model made elsewhere.
pub async fn create_agent_with_model(
    factory: &AgentFactory,
    config: AgentConfig,
    llm: Arc<dyn agentry_core::llm::DynLlmProvider>,
    policy: &LaunchPolicy,
) -> Result<Agent, AgentError> {
    if config.mcp_servers.is_empty() {
        return factory.create_agent_with_model(config, llm);
    }
    let specs = specs_of(&config)?;
    let tools = McpTools::connect(&specs, policy)
        .await
        .map_err(|e| AgentError::Invalid {
            agent: config.name.clone(),
            reason: e.to_string(),
        })?;
    let registry = tools.registry().await.map_err(|e| AgentError::Invalid {
        agent: config.name.clone(),
        reason: e.to_string(),
    })?;
    let agent = factory.create_agent_with_tools(config, llm, Some(registry))?;
    Ok(agent.with_tool_source(Arc::new(tools)))
}

impl agentry_core::agent::ToolSource for McpTools {
    fn changed(
        &self,
    ) -> agentry_core::llm::BoxFuture<'_, Option<agentry_core::tools::ToolRegistry>> {
        Box::pin(async move {
            // Every flag is taken (cleared) even when an earlier one was set.
            let flags: Vec<bool> = self
                .clients
                .iter()
                .map(|c| c.take_tools_changed())
                .collect();
            if !flags.contains(&true) {
                return None;
            }
            match self.registry().await {
                Ok(r) => Some(r),
                Err(e) => {
                    tracing::warn!("refreshing MCP tools failed: {e}");
                    None
                }
            }
        })
    }
}
