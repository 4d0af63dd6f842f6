//! Tools over MCP: the harness serves the domain's tools on a Streamable HTTP endpoint of its
//! own for each simulation, tells the agent where, and records each call the agent makes
//! there (with its result) into the trajectory. The calls are observed, not parsed from text.

use std::sync::{Arc, Mutex};

use agentry_core::tools::{FnTool, ToolError, ToolOutput, ToolRegistry};
use serde_json::Value;

use crate::env::{SharedEnv, ToolSchema};
use crate::message::{Message, Requestor, Role, ToolCall};

/// One simulation's MCP endpoint; stopped when dropped.
pub(crate) struct McpBridge {
    /// Where the agent reaches the tools.
    pub(crate) url: String,
    log: Arc<Mutex<Vec<(Message, Message)>>>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for McpBridge {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl McpBridge {
    /// Serves `schemas` on 127.0.0.1 (an ephemeral port), each call answered by `env`.
    pub(crate) async fn start(
        env: SharedEnv,
        schemas: &[ToolSchema],
    ) -> std::io::Result<McpBridge> {
        let log: Arc<Mutex<Vec<(Message, Message)>>> = Arc::new(Mutex::new(Vec::new()));
        let counter = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let mut registry = ToolRegistry::new();
        for schema in schemas {
            let (env, log, counter, name) = (
                env.clone(),
                log.clone(),
                counter.clone(),
                schema.name.clone(),
            );
            registry.add(FnTool::new(
                &schema.name,
                &schema.description,
                schema.parameters.clone(),
                move |args: Value| {
                    let n = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                    let call = ToolCall {
                        id: format!("mcp_call_{n}"),
                        name: name.clone(),
                        arguments: args.as_object().cloned().unwrap_or_default(),
                        requestor: Requestor::Assistant,
                    };
                    let result = {
                        let mut env = env.lock().unwrap_or_else(|p| p.into_inner());
                        let mut r = env.respond(&call);
                        r.timestamp = Some(agentry_a2a::time::now_rfc3339());
                        r
                    };
                    let mut asked = Message::with_calls(Role::Assistant, None, vec![call]);
                    asked.timestamp = result.timestamp.clone();
                    log.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push((asked, result.clone()));
                    let tool = name.clone();
                    async move {
                        if result.error == Some(true) {
                            Err(ToolError::Failed {
                                tool,
                                reason: result.text().to_owned(),
                            })
                        } else {
                            Ok(ToolOutput::text(result.text()))
                        }
                    }
                },
            ));
        }
        let router =
            agentry_mcp::server::ToolServer::new("tau2-domain", registry).http_router(None);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/mcp", listener.local_addr()?);
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Ok(McpBridge { url, log, server })
    }

    /// The calls made since the last drain, each with its result, in order.
    pub(crate) fn drain(&self) -> Vec<(Message, Message)> {
        std::mem::take(&mut *self.log.lock().unwrap_or_else(|p| p.into_inner()))
    }
}
