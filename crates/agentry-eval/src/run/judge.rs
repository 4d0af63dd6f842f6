//! The natural-language assertion judge: any chat model, asked with tau2's prompt
//! (`src/tau2/evaluator/evaluator_nl_assertions.py`) at temperature 0.

use std::sync::Arc;

use agentry_core::llm::{ChatMessage, ChatRequest, DynLlmProvider};
use serde_json::Value;

use super::agent::BoxFuture;
use crate::message::Message;
use crate::score::{Judge, JudgeError, NlAssertionCheck};

const SYSTEM: &str = r#"
        TASK
        - You will be given a list of expected outcomes and a conversation that was collected during a test case run.
        - The conversation is between an agent and a customer.
        - Your job is to evaluate whether the agent satisfies each of the expected outcomes.
        - Grade each expected outcome individually.

        FORMAT
        - Your response should be a JSON object with the following fields:
        - `reasoning`: a short explanation for your classification
        - `metExpectation`: `true` if the agent satisfies the expected outcomes, `false` otherwise
        - `expectedOutcome`: repeat the expectation from the input that you are grading
        
        Example response structure:
        {
            "results": [
                {
                    "expectedOutcome": "<one of the expected outcomes from the input>",
                    "reasoning": "<reasoning trace>",
                    "metExpectation": <false or true>,
                }
            ]
        }
        "#;

/// Judges with a chat model.
pub struct LlmJudge {
    provider: Arc<dyn DynLlmProvider>,
}

impl LlmJudge {
    /// A judge asking `provider`.
    pub fn new(provider: Arc<dyn DynLlmProvider>) -> Self {
        LlmJudge { provider }
    }
}

/// The system and user prompts tau2 sends its judge.
pub fn prompts(trajectory: &[Message], assertions: &[String]) -> (String, String) {
    (SYSTEM.to_owned(), prompt(trajectory, assertions))
}

/// The user prompt: every message as `role: content` (`None` for a pure tool call, as
/// Python prints it), then the statements as a Python list.
fn prompt(trajectory: &[Message], assertions: &[String]) -> String {
    let convo: Vec<String> = trajectory
        .iter()
        .map(|m| {
            let role = serde_json::to_value(m.role)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            format!("{role}: {}", m.content.as_deref().unwrap_or("None"))
        })
        .collect();
    let list: Vec<String> = assertions.iter().map(|a| py_str(a)).collect();
    format!(
        "\n        conversation:\n        {}\n        \n        expectedOutcomes:\n        [{}]\n        ",
        convo.join("\n"),
        list.join(", ")
    )
}

/// Python's `repr` of a str: single quotes unless the text has one and no double quote.
fn py_str(s: &str) -> String {
    let q = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::from(q);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c == q => {
                out.push('\\');
                out.push(c)
            }
            c => out.push(c),
        }
    }
    out.push(q);
    out
}

impl Judge for LlmJudge {
    fn judge<'a>(
        &'a self,
        trajectory: &'a [Message],
        assertions: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<NlAssertionCheck>, JudgeError>> {
        Box::pin(async move {
            let req = ChatRequest {
                messages: vec![
                    ChatMessage::system(SYSTEM),
                    ChatMessage::user(prompt(trajectory, assertions)),
                ],
                temperature: Some(0.0),
                // tau2 asks without a JSON mode; the schema of the answer it expects is given
                // to servers that can constrain output to it (agentry's embedded model, most
                // OpenAI-compatible servers), so small models answer in the format too.
                json_schema: Some(serde_json::json!({
                    "type": "object",
                    "properties": {"results": {"type": "array", "items": {
                        "type": "object",
                        "properties": {
                            "expectedOutcome": {"type": "string"},
                            "reasoning": {"type": "string"},
                            "metExpectation": {"type": "boolean"}
                        },
                        "required": ["expectedOutcome", "reasoning", "metExpectation"]
                    }}},
                    "required": ["results"]
                })),
                ..Default::default()
            };
            let resp = self
                .provider
                .chat_dyn(req)
                .await
                .map_err(|e| JudgeError(e.to_string()))?;
            parse(&resp.message.content)
        })
    }
}

/// The judge's answer. tau2 reads it with a bare `json.loads`; a fenced block is accepted
/// here too (tau2 would fail the simulation on it).
pub fn parse(text: &str) -> Result<Vec<NlAssertionCheck>, JudgeError> {
    let t = text.trim();
    let t = t
        .strip_prefix("```json")
        .or_else(|| t.strip_prefix("```"))
        .map(|s| s.trim_end().trim_end_matches("```"))
        .unwrap_or(t);
    let v: Value = serde_json::from_str(t.trim())
        .map_err(|e| JudgeError(format!("the judge's answer is not JSON ({e}): {text}")))?;
    let results = v["results"].as_array().cloned().unwrap_or_default();
    results
        .iter()
        .map(|r| {
            Ok(NlAssertionCheck {
                nl_assertion: r["expectedOutcome"].as_str().unwrap_or_default().to_owned(),
                met: r["metExpectation"].as_bool().ok_or_else(|| {
                    JudgeError(format!(
                        "no boolean metExpectation in the judge's answer: {r}"
                    ))
                })?,
                justification: r["reasoning"].as_str().unwrap_or_default().to_owned(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn verdicts_are_read_bare_or_fenced_and_a_bad_answer_is_an_error() {
        let bare = r#"{"results": [{"expectedOutcome": "a", "reasoning": "r", "metExpectation": true},
                                    {"expectedOutcome": "b", "reasoning": "s", "metExpectation": false}]}"#;
        let v = parse(bare).unwrap();
        assert_eq!((v[0].met, v[1].met), (true, false));
        assert_eq!(v[1].nl_assertion, "b");
        let fenced = format!("```json\n{bare}\n```");
        assert_eq!(parse(&fenced).unwrap(), v);
        assert!(parse("It is met.").is_err());
        assert!(
            parse(r#"{"results": [{"expectedOutcome": "a", "metExpectation": "yes"}]}"#).is_err()
        );
    }
}
