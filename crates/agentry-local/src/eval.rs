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
    /// The case's name in its source, when it has one (BFCL's `multi_turn_base_13_turn1`).
    #[serde(default)]
    pub id: Option<String>,
    /// What a user asks.
    pub request: String,
    /// The tool that should serve it.
    pub tool: String,
    /// The tools offered on this request, when it has its own set (as in BFCL, where each
    /// request comes with two to a few dozen functions); otherwise the suite's.
    #[serde(default)]
    pub tools: Option<Vec<ToolSpec>>,
}

/// Tools and cases (see `tests/data/tool_choice.json`).
#[derive(Debug, Clone, Deserialize)]
pub struct ToolSuite {
    /// The tools offered on every request that has none of its own.
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    /// The requests, each with its tool.
    pub cases: Vec<ToolCase>,
}

/// What one case gave.
#[derive(Debug, Clone)]
pub struct CaseResult {
    /// The request.
    pub request: String,
    /// The tool that should have been called.
    pub expected: String,
    /// The tool called, if any.
    pub called: Option<String>,
    /// The call's arguments, if any.
    pub arguments: Option<serde_json::Value>,
    /// Completion tokens the call took.
    pub tokens: u64,
    /// The call names a tool of the suite and its arguments match the tool's schema.
    pub valid: bool,
    /// The call's text arguments draw on the request (share a content word with it) rather than
    /// on the prompt's tool descriptions; true when the call has no text argument.
    pub grounded: bool,
}

impl ToolSuite {
    /// The tools offered on `case`: its own, or the suite's.
    pub fn tools_for<'a>(&'a self, case: &'a ToolCase) -> &'a [ToolSpec] {
        case.tools.as_deref().unwrap_or(&self.tools)
    }
}

/// Scores over a suite.
#[derive(Debug, Clone)]
pub struct ToolChoiceReport {
    /// Each case, in suite order.
    pub cases: Vec<CaseResult>,
    /// Wall time of the whole suite.
    pub elapsed: Duration,
}

impl ToolChoiceReport {
    /// Cases that called the expected tool.
    pub fn right(&self) -> usize {
        self.cases
            .iter()
            .filter(|c| c.called.as_deref() == Some(c.expected.as_str()))
            .count()
    }
    /// Cases whose call names a tool of the suite with arguments its schema accepts.
    pub fn valid(&self) -> usize {
        self.cases.iter().filter(|c| c.valid).count()
    }
    /// Right-tool calls whose text arguments draw on the request.
    pub fn grounded(&self) -> usize {
        self.cases
            .iter()
            .filter(|c| c.grounded && c.called.as_deref() == Some(c.expected.as_str()))
            .count()
    }
    /// The share of cases that called the expected tool.
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
            tools: suite.tools_for(case).to_vec(),
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
                .tools_for(case)
                .iter()
                .find(|t| &t.name == name)
                .is_some_and(|t| validate(&t.parameters, args).is_ok())
        });
        cases.push(CaseResult {
            request: case.request.clone(),
            expected: case.tool.clone(),
            arguments: call.as_ref().map(|c| c.1.clone()),
            called: call.as_ref().map(|c| c.0.clone()),
            tokens: resp.usage.completion_tokens,
            valid,
            grounded: call
                .as_ref()
                .is_none_or(|(_, args)| draws_on(args, &case.request)),
        });
    }
    Ok(ToolChoiceReport {
        cases,
        elapsed: started.elapsed(),
    })
}

/// Lower-cased words of three letters or more (and numbers), minus the commonest words.
fn content_words(text: &str) -> Vec<String> {
    const COMMON: &[&str] = &[
        "the", "and", "for", "with", "this", "that", "what", "from", "into", "about", "are", "you",
        "give", "get", "please", "can", "how", "which", "make", "new",
    ];
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() >= 3 || (!w.is_empty() && w.chars().all(|c| c.is_ascii_digit())))
        .map(str::to_lowercase)
        .filter(|w| !COMMON.contains(&w.as_str()))
        .collect()
}

/// Whether some text argument shares a content word with the request (true with no text
/// argument: nothing to draw on).
fn draws_on(args: &serde_json::Value, request: &str) -> bool {
    fn strings<'a>(v: &'a serde_json::Value, out: &mut Vec<&'a str>) {
        match v {
            serde_json::Value::String(s) if !s.trim().is_empty() => out.push(s),
            serde_json::Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
            serde_json::Value::Object(o) => o.values().for_each(|x| strings(x, out)),
            _ => {}
        }
    }
    let mut texts = Vec::new();
    strings(args, &mut texts);
    if texts.is_empty() {
        return true;
    }
    let asked = content_words(request);
    texts
        .iter()
        .any(|t| content_words(t).iter().any(|w| asked.contains(w)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arguments_draw_on_the_request_or_not() {
        let q = "Who is Hamlet?";
        assert!(draws_on(&json!({"query": "Hamlet"}), q));
        assert!(!draws_on(
            &json!({"query": "What to look for, in words."}),
            q
        ));
        assert!(draws_on(&json!({}), q));
        assert!(draws_on(
            &json!({"expression": "17 * 23"}),
            "What is 17 * 23?"
        ));
        assert!(draws_on(
            &json!({"bullets": ["x", "the agenda"]}),
            "Add the agenda items."
        ));
    }
}
