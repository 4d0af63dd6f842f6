//! The tools an agent may use: built-ins, other agents, MCP servers, under namespaces, filtered,
//! each call bounded by a timeout, independent calls of one turn run in parallel.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tracing::Instrument;

use super::{DynTool, ToolError, ToolOutput, schema};
use crate::llm::{ToolCall, ToolSpec};

/// Allow and deny patterns over tool names (`*` matches any run of characters). An empty allow
/// list allows everything; deny wins over allow.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolFilter {
    #[serde(default)]
    /// Patterns of the tools allowed (empty: all).
    pub allow: Vec<String>,
    #[serde(default)]
    /// Patterns of the tools refused.
    pub deny: Vec<String>,
}

impl ToolFilter {
    /// Whether `name` passes.
    pub fn permits(&self, name: &str) -> bool {
        (self.allow.is_empty() || self.allow.iter().any(|p| glob(p, name)))
            && !self.deny.iter().any(|p| glob(p, name))
    }
}

/// `*`-only glob matching.
fn glob(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let mut rest = name;
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            let Some(r) = rest.strip_prefix(part) else {
                return false;
            };
            rest = r;
        } else if i == parts.len() - 1 {
            return rest.ends_with(part);
        } else {
            match rest.find(part) {
                Some(j) => rest = &rest[j + part.len()..],
                None => return false,
            }
        }
    }
    true
}

struct Entry {
    tool: Arc<dyn DynTool>,
    spec: ToolSpec,
    timeout: Option<Duration>,
}

/// The outcome of one call, ready to become an observation.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// The call it answers.
    pub call_id: String,
    /// The tool.
    pub name: String,
    /// What it returned.
    pub output: Result<ToolOutput, ToolError>,
}

/// Tools by name. Names from a namespace are `ns__name` (characters every provider accepts in a
/// function name), so two servers' `search` tools never collide.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<Entry>>,
    filter: ToolFilter,
    default_timeout: Option<Duration>,
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every call without its own timeout gets this one.
    pub fn with_default_timeout(mut self, t: Duration) -> Self {
        self.default_timeout = Some(t);
        self
    }

    /// Only the tools `filter` permits are offered and callable.
    pub fn with_filter(mut self, filter: ToolFilter) -> Self {
        self.filter = filter;
        self
    }

    /// Adds a tool under its own name (replacing one of the same name).
    pub fn add(&mut self, tool: impl DynTool) -> &mut Self {
        self.add_arc(None, Arc::new(tool), None)
    }

    /// Adds a tool as `namespace__name`, with an optional timeout of its own.
    pub fn add_arc(
        &mut self,
        namespace: Option<&str>,
        tool: Arc<dyn DynTool>,
        timeout: Option<Duration>,
    ) -> &mut Self {
        let mut spec = tool.spec();
        if let Some(ns) = namespace {
            spec.name = format!("{ns}__{}", spec.name);
        }
        self.tools.insert(
            spec.name.clone(),
            Arc::new(Entry {
                tool,
                spec,
                timeout,
            }),
        );
        self
    }

    /// Adds every tool of another registry (that its filter permits) under `namespace`,
    /// keeping the names they have there (`ns__name`, or `ns2__ns__name` when nested).
    pub fn merge(&mut self, namespace: Option<&str>, other: &ToolRegistry) -> &mut Self {
        for (name, e) in &other.tools {
            if !other.filter.permits(name) {
                continue;
            }
            let mut spec = e.spec.clone();
            if let Some(ns) = namespace {
                spec.name = format!("{ns}__{name}");
            }
            self.tools.insert(
                spec.name.clone(),
                Arc::new(Entry {
                    tool: e.tool.clone(),
                    spec,
                    timeout: e.timeout,
                }),
            );
        }
        self
    }

    /// A registry of only the tools the filter lets through (and no filter).
    pub fn filtered(&self) -> ToolRegistry {
        ToolRegistry {
            tools: self
                .tools
                .iter()
                .filter(|(n, _)| self.filter.permits(n))
                .map(|(n, e)| (n.clone(), e.clone()))
                .collect(),
            filter: ToolFilter::default(),
            default_timeout: self.default_timeout,
        }
    }

    /// The names the filter lets through.
    pub fn names(&self) -> Vec<&str> {
        self.tools
            .keys()
            .map(String::as_str)
            .filter(|n| self.filter.permits(n))
            .collect()
    }

    /// What the model is shown.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools
            .values()
            .filter(|e| self.filter.permits(&e.spec.name))
            .map(|e| e.spec.clone())
            .collect()
    }

    /// The spec of `name`, when it is offered.
    pub fn spec(&self, name: &str) -> Option<&ToolSpec> {
        self.tools
            .get(name)
            .filter(|_| self.filter.permits(name))
            .map(|e| &e.spec)
    }

    /// Whether no tool is offered.
    pub fn is_empty(&self) -> bool {
        self.names().is_empty()
    }

    /// Checks a call without running it: the tool exists and the arguments fit its schema.
    pub fn check(&self, name: &str, args: &Value) -> Result<(), ToolError> {
        let Some(spec) = self.spec(name) else {
            return Err(ToolError::Unknown {
                name: name.to_owned(),
                valid: self.names().join(", "),
            });
        };
        schema::validate(&spec.parameters, args).map_err(|reason| ToolError::InvalidArguments {
            tool: name.to_owned(),
            reason,
        })
    }

    /// Runs one call, bounded by its timeout.
    pub async fn call(&self, call: &ToolCall) -> ToolResult {
        let span = crate::spans::tool(&call.name, &call.id);
        let output = self.run(call).instrument(span.clone()).await;
        crate::spans::tool_done(&span, &output);
        ToolResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            output,
        }
    }

    async fn run(&self, call: &ToolCall) -> Result<ToolOutput, ToolError> {
        match self.check(&call.name, &call.arguments) {
            Err(e) => Err(e),
            Ok(()) => {
                let e = &self.tools[&call.name];
                let fut = e.tool.call_json(call.arguments.clone());
                match e.timeout.or(self.default_timeout) {
                    Some(t) => tokio::time::timeout(t, fut).await.unwrap_or_else(|_| {
                        Err(ToolError::Timeout {
                            tool: call.name.clone(),
                            ms: t.as_millis() as u64,
                        })
                    }),
                    None => fut.await,
                }
            }
        }
    }

    /// Runs the calls of one turn concurrently; results come back in call order.
    pub async fn call_all(&self, calls: &[ToolCall]) -> Vec<ToolResult> {
        join_all(calls.iter().map(|c| self.call(c))).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_and_filters() {
        assert!(glob("fs__*", "fs__read"));
        assert!(!glob("fs__*", "web__read"));
        assert!(glob("*read*", "fs__read_file"));
        assert!(glob("a*c", "abc") && !glob("a*c", "abd"));
        let f = ToolFilter {
            allow: vec!["fs__*".into()],
            deny: vec!["*write*".into()],
        };
        assert!(f.permits("fs__read"));
        assert!(!f.permits("fs__write"));
        assert!(!f.permits("web__get"));
        assert!(ToolFilter::default().permits("anything"));
    }
}
