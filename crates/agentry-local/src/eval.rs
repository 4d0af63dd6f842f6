//! Tool-choice evaluation: run a suite of requests through a provider and score the tool it
//! calls. The same harness measures the prompted, constrained and routed modes, so their
//! accuracies are comparable.

use std::time::{Duration, Instant};

use agentry_core::llm::{ChatMessage, ChatRequest, LlmProvider, ToolSpec};
use agentry_core::parse::parse_model_text;
use agentry_core::tools::schema::validate;
use serde::Deserialize;

/// One request and the tool that should serve it.
#[derive(Debug, Clone, Deserialize)]
pub struct ToolCase {
    pub request: String,
    pub tool: String,
}

/// Tools and cases (see `tests/data/tool_choice.json`).
#[derive(Debug, Clone, Deserialize)]
pub struct ToolSuite {
    pub tools: Vec<ToolSpec>,
    pub cases: Vec<ToolCase>,
}

/// What one case gave.
#[derive(Debug, Clone)]
pub struct CaseResult {
    pub request: String,
    pub expected: String,
    /// The tool called, if any.
    pub called: Option<String>,
    pub arguments: Option<serde_json::Value>,
    /// Completion tokens the call took.
    pub tokens: u64,
    /// The call names a tool of the suite and its arguments match the tool's schema.
    pub valid: bool,
}

/// Scores over a suite.
#[derive(Debug, Clone)]
pub struct ToolChoiceReport {
    pub cases: Vec<CaseResult>,
    pub elapsed: Duration,
}

impl ToolChoiceReport {
    pub fn right(&self) -> usize {
        self.cases
            .iter()
            .filter(|c| c.called.as_deref() == Some(c.expected.as_str()))
            .count()
    }
    pub fn valid(&self) -> usize {
        self.cases.iter().filter(|c| c.valid).count()
    }
    pub fn accuracy(&self) -> f64 {
        self.right() as f64 / self.cases.len().max(1) as f64
    }
}

const SYSTEM: &str =
    "You are a helpful assistant. Pick the one tool that serves the user's request.";

/// Runs every case (one model call each) and scores the first tool call.
pub async fn run_tool_choice(
    provider: &impl LlmProvider,
    suite: &ToolSuite,
) -> Result<ToolChoiceReport, agentry_core::llm::LlmError> {
    let started = Instant::now();
    let mut cases = Vec::new();
    for case in &suite.cases {
        let req = ChatRequest {
            messages: vec![
                ChatMessage::system(SYSTEM),
                ChatMessage::user(&case.request),
            ],
            tools: suite.tools.clone(),
            max_tokens: Some(96),
            ..Default::default()
        };
        let resp = provider.chat(req).await?;
        let call = match resp.message.tool_calls.first() {
            Some(c) => Some((c.name.clone(), c.arguments.clone())),
            None => parse_model_text(&resp.message.content)
                .calls
                .into_iter()
                .next()
                .map(|c| (c.name, c.arguments)),
        };
        let valid = call.as_ref().is_some_and(|(name, args)| {
            suite
                .tools
                .iter()
                .find(|t| &t.name == name)
                .is_some_and(|t| validate(&t.parameters, args).is_ok())
        });
        cases.push(CaseResult {
            request: case.request.clone(),
            expected: case.tool.clone(),
            arguments: call.as_ref().map(|c| c.1.clone()),
            called: call.map(|c| c.0),
            tokens: resp.usage.completion_tokens,
            valid,
        });
    }
    Ok(ToolChoiceReport {
        cases,
        elapsed: started.elapsed(),
    })
}
