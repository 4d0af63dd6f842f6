//! The ReAct loop as a serializable state machine that performs no I/O.
//!
//! [`ReactState::next_action`] says what to do (call the model, call tools, or finish); the driver
//! ([`crate::run`]) does it and feeds the result back with [`ReactState::on_model`] or
//! [`ReactState::on_tools`]. The state is plain data (serde), so a driver can checkpoint it after
//! every step and resume after a crash, and the same loop runs in tests, streaming and servers.
//!
//! Assistant turns are kept verbatim (text and tool calls in the provider's order). Unknown
//! tools and arguments that fail a tool's JSON Schema never end a run: the model gets a
//! corrective observation naming the valid tools or the schema error, within the iteration
//! budget. Two built-in tools end a run: `finish` (the answer) and `ask_user` (a question for the
//! user, which an A2A server turns into `input-required`).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::llm::*;
use crate::parse::parse_model_text;
use crate::tools::{ToolResult, schema};

/// Name of the built-in tool that ends a run with an answer.
pub const FINISH: &str = "finish";
/// Name of the built-in tool that ends a run with a question for the user.
pub const ASK_USER: &str = "ask_user";

/// Limits and modes of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ReactConfig {
    /// Model calls allowed in one run.
    pub max_iterations: u32,
    /// Total tokens allowed in one run.
    pub token_budget: Option<u64>,
    /// Longer observations are cut, keeping the head.
    pub max_observation_chars: usize,
    /// The provider takes tool definitions and returns structured calls; otherwise tools are
    /// described in the prompt and calls parsed from text.
    pub native_tools: bool,
    /// Offer the `ask_user` tool.
    pub ask_user: bool,
    /// Passed to every model call.
    pub max_tokens: Option<u32>,
    /// Passed to every model call.
    pub temperature: Option<f32>,
}

impl Default for ReactConfig {
    fn default() -> Self {
        ReactConfig {
            max_iterations: 10,
            token_budget: None,
            max_observation_chars: 4000,
            native_tools: true,
            ask_user: true,
            max_tokens: None,
            temperature: None,
        }
    }
}

/// One thing that happened in a run, for people and for streaming.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Step {
    /// The model's reasoning before its calls.
    Thought {
        /// Its text.
        text: String,
    },
    /// A tool call the model made.
    ToolCall {
        /// The call.
        call: ToolCall,
    },
    /// A tool's result, as the model saw it.
    Observation {
        /// The call it answers.
        call_id: String,
        /// The tool.
        tool: String,
        /// Its text (truncated to `max_observation_chars`).
        text: String,
        /// Whether the call failed.
        is_error: bool,
        /// The tool's structured output (MCP `structuredContent`, files), kept out of the
        /// model's context but passed on (e.g. as A2A data and file parts).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        data: Option<serde_json::Value>,
    },
    /// The final answer.
    Answer {
        /// Its text.
        text: String,
    },
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Outcome {
    /// The model answered.
    Answered {
        /// The answer.
        answer: String,
    },
    /// The agent asks the user something before it can go on.
    NeedsInput {
        /// The question.
        question: String,
    },
    /// `max_iterations` model calls were made.
    MaxIterations,
    /// The token budget was spent.
    TokenBudget,
    /// `should_continue` said stop.
    Stopped,
    /// The run was canceled.
    Canceled,
    /// A model call failed.
    Failed {
        /// Why.
        error: String,
    },
}

/// Where the loop stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub enum Phase {
    /// The model is to be called.
    CallModel,
    /// The model's calls are to be run.
    CallTools {
        /// The calls.
        calls: Vec<ToolCall>,
    },
    /// The run is over.
    Done {
        /// How it ended.
        outcome: Outcome,
    },
}

/// What the driver must do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Call the model with this request.
    CallModel(ChatRequest),
    /// Run these calls (concurrently), then report their results.
    CallTools(Vec<ToolCall>),
    /// The run is over.
    Finish(Outcome),
}

/// The whole state of a run; serializable, so it can be checkpointed and resumed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReactState {
    /// The loop's settings.
    pub config: ReactConfig,
    /// The agent's tools (without the built-ins).
    pub tools: Vec<ToolSpec>,
    /// The conversation the model sees.
    pub messages: Vec<ChatMessage>,
    /// What happened, for people and streams.
    pub steps: Vec<Step>,
    /// Model calls made.
    pub iteration: u32,
    /// Tokens spent so far.
    pub usage: Usage,
    /// Where the loop stands.
    pub phase: Phase,
    /// User messages that came while tool calls were pending: they join the conversation
    /// after the tool results (a chat cannot put a user turn between a call and its result).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting: Vec<ChatMessage>,
}

fn builtin_specs(ask_user: bool) -> Vec<ToolSpec> {
    let mut v = vec![ToolSpec {
        name: FINISH.into(),
        description: "Give the final answer to the user and end.".into(),
        parameters: json!({"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}),
        examples: Vec::new(),
    }];
    if ask_user {
        v.push(ToolSpec {
            name: ASK_USER.into(),
            description: "Ask the user a question when you cannot go on without their answer.".into(),
            parameters: json!({"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]}),
            examples: Vec::new(),
        });
    }
    v
}

/// Tool descriptions and the call format, for models without native tool calling.
fn prompt_tools(tools: &[ToolSpec]) -> String {
    let mut s = String::from("\n\nYou can use these tools:\n");
    for t in tools {
        s.push_str(&format!(
            "- {}: {} Arguments (JSON Schema): {}\n",
            t.name, t.description, t.parameters
        ));
    }
    s.push_str(
        "\nTo use a tool, reply with only a JSON object: \
         {\"tool_call\": {\"name\": \"<tool name>\", \"arguments\": {<arguments>}}}\n\
         When you know the answer, call the tool \"finish\" with {\"answer\": \"<answer>\"}.",
    );
    s
}

/// Cuts `text` to `max` characters, saying how much was cut.
pub fn truncate_observation(text: &str, max: usize) -> String {
    let n = text.chars().count();
    if n <= max {
        return text.to_owned();
    }
    let head: String = text.chars().take(max).collect();
    format!("{head}\n…[truncated {} of {n} characters]", n - max)
}

impl ReactState {
    /// A new run: system prompt, earlier conversation (`history`), then the query.
    pub fn new(
        config: ReactConfig,
        system_prompt: &str,
        tools: Vec<ToolSpec>,
        history: Vec<ChatMessage>,
        query: &str,
    ) -> Self {
        let mut system = system_prompt.to_owned();
        if !config.native_tools {
            let mut all = tools.clone();
            all.extend(builtin_specs(config.ask_user));
            system.push_str(&prompt_tools(&all));
        }
        let mut messages = vec![ChatMessage::system(system)];
        messages.extend(history);
        messages.push(ChatMessage::user(query));
        ReactState {
            config,
            tools,
            messages,
            steps: Vec::new(),
            iteration: 0,
            usage: Usage::default(),
            phase: Phase::CallModel,
            waiting: Vec::new(),
        }
    }

    /// A message from the user to a run that is not done (one resumed after a restart, say):
    /// the model reads it on its next call, after the results of any pending tool calls.
    pub fn add_user(&mut self, text: &str) {
        let m = ChatMessage::user(text);
        match self.phase {
            Phase::CallTools { .. } => self.waiting.push(m),
            _ => self.messages.push(m),
        }
    }

    /// The answer, if the run ended with one.
    pub fn answer(&self) -> Option<&str> {
        match &self.phase {
            Phase::Done {
                outcome: Outcome::Answered { answer },
            } => Some(answer),
            _ => None,
        }
    }

    /// Whether the run is over.
    pub fn is_done(&self) -> bool {
        matches!(self.phase, Phase::Done { .. })
    }

    /// Ends the run (cancellation, a failed model call, a `should_continue` veto).
    pub fn finish(&mut self, outcome: Outcome) {
        self.phase = Phase::Done { outcome };
    }

    /// What to do next. Checks the iteration and token budgets before each model call.
    pub fn next_action(&mut self) -> Next {
        match &self.phase {
            Phase::Done { outcome } => Next::Finish(outcome.clone()),
            Phase::CallTools { calls } => Next::CallTools(calls.clone()),
            Phase::CallModel => {
                if self.iteration >= self.config.max_iterations {
                    self.finish(Outcome::MaxIterations);
                    return self.next_action();
                }
                if self
                    .config
                    .token_budget
                    .is_some_and(|b| self.usage.total() >= b)
                {
                    self.finish(Outcome::TokenBudget);
                    return self.next_action();
                }
                let mut tools = Vec::new();
                if self.config.native_tools {
                    tools = self.tools.clone();
                    tools.extend(builtin_specs(self.config.ask_user));
                }
                Next::CallModel(ChatRequest {
                    messages: self.messages.clone(),
                    tools,
                    max_tokens: self.config.max_tokens,
                    temperature: self.config.temperature,
                    json_schema: None,
                    stop: Vec::new(),
                })
            }
        }
    }

    fn observe(
        &mut self,
        call_id: &str,
        tool: &str,
        text: String,
        is_error: bool,
        data: Option<serde_json::Value>,
    ) {
        let text = truncate_observation(&text, self.config.max_observation_chars);
        if self.config.native_tools {
            self.messages.push(ChatMessage::tool(call_id, text.clone()));
        } else {
            let line = format!("Observation from {tool}: {text}");
            match self.messages.last_mut() {
                // Observations of one turn share one user message (chat templates want turns
                // to alternate).
                Some(m)
                    if m.role == ChatRole::User && m.content.starts_with("Observation from ") =>
                {
                    m.content.push('\n');
                    m.content.push_str(&line);
                }
                _ => self.messages.push(ChatMessage::user(line)),
            }
        }
        self.steps.push(Step::Observation {
            call_id: call_id.to_owned(),
            tool: tool.to_owned(),
            text,
            is_error,
            data,
        });
    }

    fn tool_spec(&self, name: &str) -> Option<ToolSpec> {
        self.tools
            .iter()
            .chain(builtin_specs(self.config.ask_user).iter())
            .find(|t| t.name == name)
            .cloned()
    }

    fn valid_names(&self) -> String {
        let mut names: Vec<String> = self.tools.iter().map(|t| t.name.clone()).collect();
        names.extend(
            builtin_specs(self.config.ask_user)
                .into_iter()
                .map(|t| t.name),
        );
        names.join(", ")
    }

    /// A bare string argument (from `Action Input: text`) goes to the tool's only parameter.
    /// Not one that opens like a JSON object or array: that is JSON that did not parse (a
    /// native tool call's `{name: Hamlet`), which the model must correct, not a value.
    fn fit_arguments(spec: &ToolSpec, args: Value) -> Value {
        if let Value::String(s) = &args
            && !s.trim_start().starts_with(['{', '['])
            && let Some(props) = spec.parameters.get("properties").and_then(Value::as_object)
            && props.len() == 1
        {
            let key = props.keys().next().cloned().unwrap_or_default();
            return json!({ key: s });
        }
        args
    }

    /// Feeds the model's answer: records it verbatim, then decides the phase.
    pub fn on_model(&mut self, resp: ChatResponse) {
        self.iteration += 1;
        self.usage.prompt_tokens += resp.usage.prompt_tokens;
        self.usage.completion_tokens += resp.usage.completion_tokens;
        let mut message = resp.message;
        message.role = ChatRole::Assistant;
        let mut calls = message.tool_calls.clone();
        let mut thought = message.content.trim().to_owned();
        let mut final_answer = None;
        if calls.is_empty() && !self.config.native_tools {
            let parsed = parse_model_text(&message.content);
            thought = parsed.thought;
            final_answer = parsed.final_answer;
            calls = parsed
                .calls
                .into_iter()
                .enumerate()
                .map(|(i, c)| ToolCall {
                    id: format!("call_{}_{i}", self.iteration),
                    name: c.name,
                    arguments: c.arguments,
                })
                .collect();
        }
        self.messages.push(message.clone());
        if calls.is_empty() {
            let answer = final_answer.unwrap_or_else(|| message.content.trim().to_owned());
            self.steps.push(Step::Answer {
                text: answer.clone(),
            });
            self.finish(Outcome::Answered { answer });
            return;
        }
        if !thought.is_empty() {
            self.steps.push(Step::Thought { text: thought });
        }
        let mut valid = Vec::new();
        for mut call in calls {
            self.steps.push(Step::ToolCall { call: call.clone() });
            let Some(spec) = self.tool_spec(&call.name) else {
                let msg = format!(
                    "Error: there is no tool named `{}`. Valid tools: {}.",
                    call.name,
                    self.valid_names()
                );
                self.observe(&call.id, &call.name, msg, true, None);
                continue;
            };
            call.arguments = Self::fit_arguments(&spec, call.arguments);
            if let Err(reason) = schema::validate(&spec.parameters, &call.arguments) {
                let msg = format!(
                    "Error: invalid arguments for `{}`: {reason}. Expected arguments (JSON Schema): {}",
                    call.name, spec.parameters
                );
                self.observe(&call.id, &call.name, msg, true, None);
                continue;
            }
            match call.name.as_str() {
                FINISH => {
                    let answer = call.arguments["answer"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                    self.steps.push(Step::Answer {
                        text: answer.clone(),
                    });
                    self.finish(Outcome::Answered { answer });
                    return;
                }
                ASK_USER => {
                    let question = call.arguments["question"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                    self.finish(Outcome::NeedsInput { question });
                    return;
                }
                _ => valid.push(call),
            }
        }
        self.phase = if valid.is_empty() {
            Phase::CallModel
        } else {
            Phase::CallTools { calls: valid }
        };
    }

    /// Feeds tool results (in call order) as observations; the model is asked next.
    pub fn on_tools(&mut self, results: Vec<ToolResult>) {
        for r in results {
            match r.output {
                Ok(out) => self.observe(&r.call_id, &r.name, out.text, false, out.data),
                Err(e) => self.observe(&r.call_id, &r.name, format!("Error: {e}"), true, None),
            }
        }
        self.messages.append(&mut self.waiting);
        self.phase = Phase::CallModel;
    }
}
