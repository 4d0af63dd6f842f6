//! MCP tools as agentry tools: namespaced into a [`ToolRegistry`], results mapped to
//! observations, and fan-out of calls across servers.

use std::sync::Arc;
use std::time::Duration;

use agentry_core::llm::{BoxFuture, ToolSpec};
use agentry_core::tools::{DynTool, ToolError, ToolFilter, ToolOutput, ToolRegistry};
use futures_util::future::join_all;
use rmcp::model::{CallToolResult, Tool};
use serde_json::{Map, Value, json};
use tokio::sync::Semaphore;

use crate::McpServerSpec;
use crate::client::{LaunchPolicy, McpClient, McpError};

/// One tool of one MCP server.
pub struct McpTool {
    client: Arc<McpClient>,
    tool: Tool,
}

/// Maps a `tools/call` result: text content becomes the observation; `structuredContent` the
/// data; images, audio and embedded resources are listed in the data (`files`) with their MIME
/// types and sizes; `isError` becomes a tool error the model can react to.
pub fn map_result(server: &str, tool: &str, r: CallToolResult) -> Result<ToolOutput, ToolError> {
    let mut texts = Vec::new();
    let mut files = Vec::new();
    for block in &r.content {
        let v = serde_json::to_value(block).unwrap_or(Value::Null);
        match v.get("type").and_then(Value::as_str) {
            Some("text") => texts.push(v["text"].as_str().unwrap_or_default().to_owned()),
            Some(kind @ ("image" | "audio")) => {
                let size = v["data"].as_str().map(|d| d.len() * 3 / 4).unwrap_or(0);
                texts.push(format!(
                    "[{kind} {} ~{size} bytes]",
                    v["mimeType"].as_str().unwrap_or("?")
                ));
                files.push(json!({"kind": kind, "mimeType": v["mimeType"], "data": v["data"]}));
            }
            Some("resource") => {
                let res = &v["resource"];
                if let Some(t) = res["text"].as_str() {
                    texts.push(t.to_owned());
                }
                files.push(
                    json!({"kind": "resource", "uri": res["uri"], "mimeType": res["mimeType"],
                    "text": res["text"], "blob": res["blob"]}),
                );
            }
            Some("resource_link") => {
                texts.push(format!("[resource {}]", v["uri"].as_str().unwrap_or("?")));
                files.push(
                    json!({"kind": "resource_link", "uri": v["uri"], "mimeType": v["mimeType"]}),
                );
            }
            _ => {}
        }
    }
    let text = texts.join("\n");
    if r.is_error == Some(true) {
        return Err(ToolError::Failed {
            tool: tool.to_owned(),
            reason: if text.is_empty() {
                format!("{server} reported an error")
            } else {
                text
            },
        });
    }
    let mut data = Map::new();
    if let Some(s) = r.structured_content {
        data.insert("structured".into(), s);
    }
    if !files.is_empty() {
        data.insert("files".into(), Value::Array(files));
    }
    let text = if text.is_empty() {
        data.get("structured")
            .map(Value::to_string)
            .unwrap_or_default()
    } else {
        text
    };
    Ok(ToolOutput {
        text,
        data: (!data.is_empty()).then_some(Value::Object(data)),
    })
}

impl DynTool for McpTool {
    fn spec(&self) -> ToolSpec {
        let mut params = Value::Object((*self.tool.input_schema).clone());
        if let Some(o) = params.as_object_mut() {
            o.entry("type").or_insert(json!("object"));
        }
        ToolSpec {
            name: self.tool.name.to_string(),
            description: self
                .tool
                .description
                .as_deref()
                .unwrap_or_default()
                .to_owned(),
            parameters: params,
            examples: Vec::new(),
        }
    }

    fn call_json(&self, args: Value) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let name = self.tool.name.to_string();
            let args = match args {
                Value::Object(m) => m,
                Value::Null => Map::new(),
                other => {
                    return Err(ToolError::InvalidArguments {
                        tool: name,
                        reason: format!("expected an object, got {other}"),
                    });
                }
            };
            let r = self
                .client
                .call(&name, args)
                .await
                .map_err(|e| ToolError::Failed {
                    tool: name.clone(),
                    reason: e.to_string(),
                })?;
            map_result(&self.client.spec.name, &name, r)
        })
    }
}

/// Connected servers and their tools.
pub struct McpTools {
    /// One client per configured server, in config order.
    pub clients: Vec<Arc<McpClient>>,
}

impl McpTools {
    /// Connects to every server (concurrently); a server that fails is an error naming it.
    pub async fn connect(specs: &[McpServerSpec], policy: &LaunchPolicy) -> Result<Self, McpError> {
        let conns = join_all(specs.iter().cloned().map(|s| McpClient::connect(s, policy))).await;
        let clients = conns.into_iter().collect::<Result<Vec<_>, _>>()?;
        Ok(McpTools { clients })
    }

    /// Every server's tools, each under its namespace (`server__tool`) and filtered.
    pub async fn registry(&self) -> Result<ToolRegistry, McpError> {
        let mut all = ToolRegistry::new();
        for c in &self.clients {
            let filter = ToolFilter {
                allow: c.spec.allow_tools.clone(),
                deny: c.spec.deny_tools.clone(),
            };
            for tool in c.list_tools().await? {
                if filter.permits(&tool.name) {
                    all.add_arc(
                        Some(c.spec.namespace()),
                        Arc::new(McpTool {
                            client: c.clone(),
                            tool,
                        }),
                        None,
                    );
                }
            }
        }
        Ok(all)
    }
}

/// One server's part of a fan-out.
#[derive(Debug, Clone)]
pub struct FanOutResult {
    /// The server's name.
    pub server: String,
    /// Its answer, or why there is none.
    pub result: Result<ToolOutput, String>,
}

/// Calls `tool` with `args` on several servers at once: at most `per_server` calls in flight
/// per server, each bounded by `timeout`, so one hung server stalls nothing; every server's
/// result or error comes back.
pub async fn fan_out(
    calls: Vec<(Arc<McpClient>, String, Map<String, Value>)>,
    per_server: usize,
    timeout: Duration,
) -> Vec<FanOutResult> {
    let mut limits: std::collections::HashMap<String, Arc<Semaphore>> = Default::default();
    let futs = calls.into_iter().map(|(client, tool, args)| {
        let sem = limits
            .entry(client.spec.name.clone())
            .or_insert_with(|| Arc::new(Semaphore::new(per_server.max(1))))
            .clone();
        async move {
            let server = client.spec.name.clone();
            let _permit = sem.acquire_owned().await;
            let result = match tokio::time::timeout(timeout, client.call(&tool, args)).await {
                Err(_) => Err(format!("timed out after {:.1} s", timeout.as_secs_f64())),
                Ok(Err(e)) => Err(e.to_string()),
                Ok(Ok(r)) => map_result(&server, &tool, r).map_err(|e| e.to_string()),
            };
            FanOutResult { server, result }
        }
    });
    join_all(futs).await
}
