//! agentry's tools served over MCP (rmcp's server side), so any MCP client, and other agentry
//! agents, can use them: over stdio, or Streamable HTTP mounted in an axum router.

use std::sync::Arc;

use agentry_core::llm::ToolCall;
use agentry_core::tools::ToolRegistry;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;
use tracing::Instrument;

/// A [`ToolRegistry`] as an MCP server.
#[derive(Clone)]
pub struct ToolServer {
    name: String,
    tools: Arc<ToolRegistry>,
}

impl ToolServer {
    /// Serves `tools` under the server name `name`.
    pub fn new(name: &str, tools: ToolRegistry) -> Self {
        ToolServer {
            name: name.to_owned(),
            tools: Arc::new(tools),
        }
    }

    fn mcp_tools(&self) -> Vec<Tool> {
        self.tools
            .specs()
            .into_iter()
            .map(|s| {
                let schema = match s.parameters {
                    Value::Object(o) => o,
                    _ => Default::default(),
                };
                Tool::new(s.name, s.description, Arc::new(schema))
            })
            .collect()
    }

    /// Serves over stdin/stdout until the client disconnects.
    pub async fn serve_stdio(self) -> std::io::Result<()> {
        let running = self
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        running.waiting().await.map_err(std::io::Error::other)?;
        Ok(())
    }

    /// An axum router serving Streamable HTTP at `/mcp`. `allowed_hosts` guards against DNS
    /// rebinding (loopback names by default).
    pub fn http_router(self, allowed_hosts: Option<Vec<String>>) -> axum::Router {
        let mut config = StreamableHttpServerConfig::default();
        if let Some(h) = allowed_hosts {
            config = config.with_allowed_hosts(h);
        }
        let service = StreamableHttpService::new(
            move || Ok(self.clone()),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        axum::Router::new().nest_service("/mcp", service)
    }
}

impl ServerHandler for ToolServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_server_info(
            Implementation::new(self.name.clone(), env!("CARGO_PKG_VERSION")),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.mcp_tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // The caller's trace goes on here (its `traceparent` in `_meta`, SEP-414).
        let span = tracing::info_span!(
            "mcp.serve",
            otel.name = format!("tools/call {}", request.name),
            otel.kind = "server",
            mcp.method.name = "tools/call",
            gen_ai.tool.name = %request.name,
        );
        agentry_a2a::trace::continue_trace(&span, context.meta.get_traceparent(), None);
        let call = ToolCall {
            id: String::new(),
            name: request.name.to_string(),
            arguments: Value::Object(request.arguments.unwrap_or_default()),
        };
        let r = self.tools.call(&call).instrument(span).await;
        // Tool failures (unknown tool, bad arguments, errors) are results with isError, so the
        // calling model can react to them.
        let result = match r.output {
            Ok(out) => {
                let mut res = CallToolResult::success(vec![ContentBlock::text(out.text)]);
                // structuredContent is an object: other values are wrapped.
                res.structured_content = out.data.map(|d| match d {
                    Value::Object(_) => d,
                    other => serde_json::json!({ "result": other }),
                });
                res
            }
            Err(e) => CallToolResult::error(vec![ContentBlock::text(e.to_string())]),
        };
        Ok(CallToolResponse::Complete(result))
    }
}
