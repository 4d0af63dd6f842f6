//! Tools: a typed [`Tool`] trait, its object-safe twin [`DynTool`], and the [`ToolRegistry`]
//! that agents draw from.
//!
//! ```
//! use agentry_core::tools::{Tool, DynTool};
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct AddArgs { a: f64, b: f64 }
//!
//! struct Add;
//! impl Tool for Add {
//!     const NAME: &'static str = "add";
//!     type Args = AddArgs;
//!     type Output = f64;
//!     type Error = std::convert::Infallible;
//!     fn description(&self) -> String { "Adds two numbers".into() }
//!     async fn call(&self, args: AddArgs) -> Result<f64, Self::Error> { Ok(args.a + args.b) }
//! }
//! assert_eq!(Add.spec().parameters["required"], serde_json::json!(["a", "b"]));
//! ```

mod registry;
pub mod schema;

use std::future::Future;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::llm::{BoxFuture, ToolSpec};

pub use registry::{ToolFilter, ToolRegistry, ToolResult};

/// What a tool returns: text for the model, and optionally structured data.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolOutput {
    /// What the model reads.
    pub text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// Structured results passed on beside the text (not shown to the model).
    pub data: Option<Value>,
}

impl ToolOutput {
    /// Text alone.
    pub fn text(t: impl Into<String>) -> Self {
        ToolOutput {
            text: t.into(),
            data: None,
        }
    }

    /// Structured output; the text is its JSON (a string value is used as is).
    pub fn json(v: Value) -> Self {
        let text = match &v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        ToolOutput {
            text,
            data: Some(v),
        }
    }
}

/// Why a tool call failed; every variant becomes an observation the model can react to.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    #[error("unknown tool `{name}`; valid tools: {valid}")]
    /// The model called a tool that is not offered.
    Unknown {
        /// The name called.
        name: String,
        /// The tools there are.
        valid: String,
    },
    #[error("invalid arguments for `{tool}`: {reason}")]
    /// The arguments do not fit the tool's schema.
    InvalidArguments {
        /// The tool.
        tool: String,
        /// What does not fit its schema.
        reason: String,
    },
    #[error("`{tool}` timed out after {ms} ms")]
    /// The tool did not answer in time.
    Timeout {
        /// The tool.
        tool: String,
        /// The timeout.
        ms: u64,
    },
    #[error("`{tool}` failed: {reason}")]
    /// The tool ran and failed.
    Failed {
        /// The tool.
        tool: String,
        /// Why.
        reason: String,
    },
}

/// A typed tool: serde arguments with a JSON Schema derived from their type.
pub trait Tool: Send + Sync + 'static {
    /// The name models call it by.
    const NAME: &'static str;
    /// Its arguments (their JSON Schema is the tool's parameters).
    type Args: DeserializeOwned + JsonSchema + Send;
    /// What it returns (serialized as the model's observation).
    type Output: Serialize + Send;
    /// Why it failed.
    type Error: std::fmt::Display + Send;

    /// What it does, for the model.
    fn description(&self) -> String;
    /// Requests this tool serves (they help routers pick it; see `ToolSpec::examples`).
    fn examples(&self) -> Vec<String> {
        Vec::new()
    }

    /// Runs it.
    fn call(
        &self,
        args: Self::Args,
    ) -> impl Future<Output = Result<Self::Output, Self::Error>> + Send;
}

/// The object-safe twin of [`Tool`], for registries (MCP tools and agents-as-tools implement it
/// directly).
pub trait DynTool: Send + Sync + 'static {
    /// Name, description and parameters.
    fn spec(&self) -> ToolSpec;
    /// Runs it with JSON arguments.
    fn call_json(&self, args: Value) -> BoxFuture<'_, Result<ToolOutput, ToolError>>;
}

/// The JSON Schema of `T`, without the `$schema`/`title` noise models do not need.
pub fn schema_of<T: JsonSchema>() -> Value {
    let mut v = serde_json::to_value(schemars::schema_for!(T)).unwrap_or(Value::Null);
    if let Some(o) = v.as_object_mut() {
        o.remove("$schema");
        o.remove("title");
        o.entry("type").or_insert(Value::String("object".into()));
        o.entry("properties")
            .or_insert(Value::Object(Default::default()));
    }
    v
}

impl<T: Tool> DynTool for T {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: T::NAME.to_owned(),
            description: self.description(),
            parameters: schema_of::<T::Args>(),
            examples: self.examples(),
        }
    }

    fn call_json(&self, args: Value) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let args: T::Args = serde_path_to_error::deserialize(args).map_err(|e| {
                let path = e.path().to_string();
                let reason = if path == "." {
                    e.inner().to_string()
                } else {
                    format!("{path}: {}", e.inner())
                };
                ToolError::InvalidArguments {
                    tool: T::NAME.to_owned(),
                    reason,
                }
            })?;
            let out = self.call(args).await.map_err(|e| ToolError::Failed {
                tool: T::NAME.to_owned(),
                reason: e.to_string(),
            })?;
            let v = serde_json::to_value(out).map_err(|e| ToolError::Failed {
                tool: T::NAME.to_owned(),
                reason: format!("output not serializable: {e}"),
            })?;
            Ok(ToolOutput::json(v))
        })
    }
}

type ToolFnInner =
    dyn Fn(Value) -> BoxFuture<'static, Result<ToolOutput, ToolError>> + Send + Sync + 'static;

/// A tool from a name, description, schema and async closure: for tools known only at run time.
#[derive(Clone)]
pub struct FnTool {
    spec: ToolSpec,
    f: Arc<ToolFnInner>,
}

impl FnTool {
    /// A tool named `name` whose calls run `f`.
    pub fn new<F, Fut>(name: &str, description: &str, parameters: Value, f: F) -> Self
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ToolOutput, ToolError>> + Send + 'static,
    {
        FnTool {
            spec: ToolSpec {
                name: name.to_owned(),
                description: description.to_owned(),
                parameters,
                examples: Vec::new(),
            },
            f: Arc::new(move |v| Box::pin(f(v))),
        }
    }
}

impl DynTool for FnTool {
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    fn call_json(&self, args: Value) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
        (self.f)(args)
    }
}
