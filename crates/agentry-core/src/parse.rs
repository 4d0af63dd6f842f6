//! Tool calls parsed from model text, for models without native tool calling.
//!
//! Tolerates what weak models write: markdown fences, prose around the JSON, `{"tool_call":…}`,
//! `{"tool_calls":[…]}`, bare `{"name":…,"arguments":…}` (or `parameters`/`args`/`input`),
//! OpenAI-style `{"function":{…}}`, LangChain's `{"action":…,"action_input":…}`, and the classic
//! `Action:` / `Action Input:` lines with `Final Answer:`. One parser serves agents and the
//! evaluation harness.
//!
//! ```
//! use agentry_core::parse::parse_model_text;
//! let p = parse_model_text("Sure!\n```json\n{\"tool_call\": {\"name\": \"search\", \"arguments\": {\"q\": \"rust\"}}}\n```");
//! assert_eq!(p.calls[0].name, "search");
//! assert_eq!(p.calls[0].arguments["q"], "rust");
//! ```

use serde_json::{Map, Value};

/// A call found in text.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedCall {
    /// The tool.
    pub name: String,
    /// Its arguments.
    pub arguments: Value,
}

/// What a model's text says: calls to make, or a final answer, plus the surrounding thought.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedText {
    /// The calls, in order.
    pub calls: Vec<ParsedCall>,
    /// The answer, when the text gives one instead of calls.
    pub final_answer: Option<String>,
    /// The text before the first call (the model's reasoning).
    pub thought: String,
}

/// Parses model output. With no call and no `Final Answer:` marker, `final_answer` is `None`
/// and the caller decides (usually: the whole text is the answer).
pub fn parse_model_text(text: &str) -> ParsedText {
    if let Some((calls, start)) = json_calls(text) {
        return ParsedText {
            calls,
            final_answer: None,
            thought: clean_thought(&text[..start]),
        };
    }
    if let Some(p) = react_format(text) {
        return p;
    }
    ParsedText {
        calls: Vec::new(),
        final_answer: None,
        thought: text.trim().to_owned(),
    }
}

fn clean_thought(s: &str) -> String {
    let s = s.trim();
    let s = s
        .strip_suffix("```json")
        .or_else(|| s.strip_suffix("```"))
        .unwrap_or(s);
    s.trim().trim_start_matches("Thought:").trim().to_owned()
}

/// Finds the first JSON object in `text` that describes tool calls.
fn json_calls(text: &str) -> Option<(Vec<ParsedCall>, usize)> {
    for (i, _) in text.match_indices('{') {
        let mut de = serde_json::Deserializer::from_str(&text[i..]).into_iter::<Value>();
        let Some(Ok(v)) = de.next() else { continue };
        if let Some(calls) = calls_from_value(&v) {
            return Some((calls, i));
        }
    }
    None
}

fn calls_from_value(v: &Value) -> Option<Vec<ParsedCall>> {
    let obj = v.as_object()?;
    if let Some(list) = obj.get("tool_calls").and_then(Value::as_array) {
        // Items are calls, or calls wrapped as `{"tool_call": {...}}` (tau2's A2A format).
        let calls: Vec<_> = list
            .iter()
            .filter_map(|item| single_call(item.get("tool_call").unwrap_or(item)))
            .collect();
        return (!calls.is_empty()).then_some(calls);
    }
    if let Some(one) = obj.get("tool_call") {
        return single_call(one).map(|c| vec![c]);
    }
    single_call(v).map(|c| vec![c])
}

fn single_call(v: &Value) -> Option<ParsedCall> {
    let obj = v.as_object()?;
    if let Some(f) = obj.get("function").and_then(Value::as_object) {
        return named(f);
    }
    if let (Some(Value::String(action)), Some(input)) = (obj.get("action"), obj.get("action_input"))
    {
        return Some(ParsedCall {
            name: action.clone(),
            arguments: arguments(input),
        });
    }
    named(obj)
}

fn named(obj: &Map<String, Value>) -> Option<ParsedCall> {
    let name = obj
        .get("name")
        .or_else(|| obj.get("tool"))
        .or_else(|| obj.get("tool_name"))?
        .as_str()?;
    let args = ["arguments", "parameters", "args", "input", "tool_input"]
        .iter()
        .find_map(|k| obj.get(*k))
        .map(arguments)
        .unwrap_or_else(|| Value::Object(Map::new()));
    Some(ParsedCall {
        name: name.to_owned(),
        arguments: args,
    })
}

/// Arguments written as a JSON string are decoded; anything else is kept.
fn arguments(v: &Value) -> Value {
    match v {
        Value::String(s) => serde_json::from_str::<Value>(s)
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| v.clone()),
        other => other.clone(),
    }
}

/// `Thought: … Action: tool Action Input: {…}` or `Final Answer: …`.
fn react_format(text: &str) -> Option<ParsedText> {
    let action_at = find_marker(text, "Action:");
    let final_at = find_marker(text, "Final Answer:");
    match (action_at, final_at) {
        (Some(a), f) if f.is_none_or(|f| a < f) => {
            let after = &text[a + "Action:".len()..];
            let (name_part, input) = match find_marker(after, "Action Input:") {
                Some(j) => (&after[..j], Some(&after[j + "Action Input:".len()..])),
                None => (after, None),
            };
            let name = name_part.lines().next().unwrap_or("").trim();
            let name = name
                .trim_matches(|c: char| c == '`' || c == '"' || c == '\'' || c == '[' || c == ']');
            if name.is_empty() {
                return None;
            }
            let arguments = input
                .map(react_input)
                .unwrap_or_else(|| Value::Object(Map::new()));
            Some(ParsedText {
                calls: vec![ParsedCall {
                    name: name.to_owned(),
                    arguments,
                }],
                final_answer: None,
                thought: clean_thought(&text[..a]),
            })
        }
        (_, Some(f)) => Some(ParsedText {
            calls: Vec::new(),
            final_answer: Some(text[f + "Final Answer:".len()..].trim().to_owned()),
            thought: clean_thought(&text[..f]),
        }),
        _ => None,
    }
}

/// Markers match at a line start, case-insensitively.
fn find_marker(text: &str, marker: &str) -> Option<usize> {
    let lower = text.to_ascii_lowercase();
    let m = marker.to_ascii_lowercase();
    let mut from = 0;
    while let Some(i) = lower[from..].find(&m) {
        let at = from + i;
        if at == 0
            || lower[..at].ends_with('\n')
            || lower[..at].trim_end_matches([' ', '\t']).ends_with('\n')
        {
            return Some(at);
        }
        from = at + m.len();
    }
    None
}

fn react_input(s: &str) -> Value {
    // The input ends where an Observation would begin.
    let s = match find_marker(s, "Observation:") {
        Some(i) => &s[..i],
        None => s,
    };
    let s = s
        .trim()
        .trim_start_matches("```json")
        .trim_start_matches("```")
        .trim_end_matches("```")
        .trim();
    if let Some(i) = s.find('{') {
        let mut de = serde_json::Deserializer::from_str(&s[i..]).into_iter::<Value>();
        if let Some(Ok(v @ Value::Object(_))) = de.next() {
            return v;
        }
    }
    // A bare string input: give it to the tool's first parameter (the loop maps it).
    Value::String(s.trim_matches('"').to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn one(text: &str) -> ParsedCall {
        let p = parse_model_text(text);
        assert_eq!(p.calls.len(), 1, "{text} -> {p:?}");
        p.calls.into_iter().next().unwrap()
    }

    #[test]
    fn json_shapes() {
        let c = one(r#"{"tool_call": {"name": "add", "arguments": {"a": 1, "b": 2}}}"#);
        assert_eq!(
            (c.name.as_str(), &c.arguments),
            ("add", &json!({"a": 1, "b": 2}))
        );
        let c = one(r#"I'll search. {"name": "search", "parameters": {"q": "x"}} done"#);
        assert_eq!(c.arguments, json!({"q": "x"}));
        let c = one(r#"{"function": {"name": "f", "arguments": "{\"k\": 3}"}}"#);
        assert_eq!(c.arguments, json!({"k": 3}));
        let c = one(r#"{"action": "lookup", "action_input": {"id": 7}}"#);
        assert_eq!(c.name, "lookup");
        let p = parse_model_text(
            "```json\n{\"tool_calls\": [{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", \"args\": {\"x\": 1}}]}\n```",
        );
        assert_eq!(p.calls.len(), 2);
        assert_eq!(p.calls[1].arguments, json!({"x": 1}));
        // tau2's A2A format wraps each item of the list.
        let p = parse_model_text(
            r#"{"tool_calls": [{"tool_call": {"name": "a", "arguments": {"k": 1}}}, {"tool_call": {"name": "b", "arguments": {}}}]}"#,
        );
        let names: Vec<&str> = p.calls.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(p.calls[0].arguments, json!({"k": 1}));
    }

    #[test]
    fn prose_and_fences_around_json() {
        let p = parse_model_text(
            "Thought: I need the weather.\n```json\n{\"name\": \"weather\", \"arguments\": {\"city\": \"Paris\"}}\n```\nThanks",
        );
        assert_eq!(p.calls[0].name, "weather");
        assert_eq!(p.thought, "I need the weather.");
        // JSON that is not a call is not mistaken for one.
        let p = parse_model_text("The result is {\"total\": 3}.");
        assert!(p.calls.is_empty());
    }

    #[test]
    fn react_format() {
        let p = parse_model_text(
            "Thought: look it up\nAction: search\nAction Input: {\"q\": \"hamlet\"}\nObservation:",
        );
        assert_eq!(
            p.calls[0],
            ParsedCall {
                name: "search".into(),
                arguments: json!({"q": "hamlet"})
            }
        );
        assert_eq!(p.thought, "look it up");
        let p = parse_model_text("Action: calculator\nAction Input: 2+2");
        assert_eq!(p.calls[0].arguments, json!("2+2"));
        let p = parse_model_text("Thought: I know it.\nFinal Answer: Hamlet is a prince.");
        assert_eq!(p.final_answer.as_deref(), Some("Hamlet is a prince."));
        assert!(p.calls.is_empty());
        let p = parse_model_text("just an answer");
        assert!(p.calls.is_empty() && p.final_answer.is_none());
    }

    #[test]
    fn never_panics_on_odd_text() {
        for t in [
            "{",
            "Action:",
            "Action:\nAction Input:",
            "{\"tool_calls\": 5}",
            "Final Answer:",
            "é{\"name\":1}",
            "",
        ] {
            let _ = parse_model_text(t);
        }
    }
}
