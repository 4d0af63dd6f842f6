//! The ReAct loop on scripted transcripts: tool errors, hallucinated tools, bad arguments,
//! budgets, cancellation, resume after a crash, parallel tool calls, text-parsed calls.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentry_core::llm::*;
use agentry_core::react::{Outcome, ReactConfig, ReactState, Step};
use agentry_core::run::{CheckpointHooks, NoHooks, drive};
use agentry_core::runs::Checkpoints;
use agentry_core::tools::{FnTool, Tool, ToolError, ToolOutput, ToolRegistry};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize, JsonSchema)]
struct AddArgs {
    a: f64,
    b: f64,
}

struct Add(Arc<AtomicUsize>);
impl Tool for Add {
    const NAME: &'static str = "add";
    type Args = AddArgs;
    type Output = f64;
    type Error = String;
    fn description(&self) -> String {
        "Adds two numbers.".into()
    }
    async fn call(&self, args: AddArgs) -> Result<f64, String> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(args.a + args.b)
    }
}

fn call(id: &str, name: &str, args: Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: args,
    }
}

fn tool_turn(calls: Vec<ToolCall>) -> ChatResponse {
    ChatResponse {
        message: ChatMessage {
            role: ChatRole::Assistant,
            content: String::new(),
            tool_calls: calls,
            tool_call_id: None,
        },
        usage: Usage {
            prompt_tokens: 10,
            completion_tokens: 5,
        },
        finish_reason: FinishReason::ToolCalls,
    }
}

fn text_turn(text: &str) -> ChatResponse {
    ChatResponse {
        message: ChatMessage::assistant(text),
        usage: Usage {
            prompt_tokens: 10,
            completion_tokens: 5,
        },
        finish_reason: FinishReason::Stop,
    }
}

fn native() -> Capabilities {
    Capabilities {
        native_tools: true,
        json_schema: false,
        streaming: false,
    }
}

fn registry(count: Arc<AtomicUsize>) -> ToolRegistry {
    let mut r = ToolRegistry::new().with_default_timeout(Duration::from_millis(300));
    r.add(Add(count));
    r.add(FnTool::new(
        "fail",
        "Always fails.",
        json!({"type": "object", "properties": {}}),
        |_| async {
            Err(ToolError::Failed {
                tool: "fail".into(),
                reason: "disk on fire".into(),
            })
        },
    ));
    r.add(FnTool::new(
        "slow",
        "Sleeps.",
        json!({"type": "object", "properties": {}}),
        |_| async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok(ToolOutput::text("late"))
        },
    ));
    r
}

fn state(reg: &ToolRegistry, cfg: ReactConfig) -> ReactState {
    ReactState::new(
        cfg,
        "You are a calculator.",
        reg.specs(),
        Vec::new(),
        "What is 2+3?",
    )
}

fn observations(s: &ReactState) -> Vec<(String, bool)> {
    s.steps
        .iter()
        .filter_map(|st| match st {
            Step::Observation { text, is_error, .. } => Some((text.clone(), *is_error)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn answers_after_a_tool_call() {
    let n = Arc::new(AtomicUsize::new(0));
    let reg = registry(n.clone());
    let llm = ScriptedProvider::new(Transcript::of(
        native(),
        vec![
            tool_turn(vec![call("c1", "add", json!({"a": 2, "b": 3}))]),
            tool_turn(vec![call("c2", "finish", json!({"answer": "5"}))]),
        ],
    ));
    let mut s = state(&reg, ReactConfig::default());
    let out = drive(&mut s, &llm, &reg, &NoHooks, None).await;
    assert_eq!(out, Outcome::Answered { answer: "5".into() });
    assert_eq!(n.load(Ordering::SeqCst), 1);
    assert_eq!(observations(&s), vec![("5.0".into(), false)]);
    // The assistant turns are kept verbatim, each followed by its tool answers.
    let roles: Vec<ChatRole> = s.messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            ChatRole::System,
            ChatRole::User,
            ChatRole::Assistant,
            ChatRole::Tool,
            ChatRole::Assistant
        ]
    );
    assert_eq!(s.messages[2].tool_calls[0].id, "c1");
    assert_eq!(s.usage.total(), 30);
}

#[tokio::test]
async fn hallucinated_tools_and_bad_arguments_get_corrective_observations() {
    let n = Arc::new(AtomicUsize::new(0));
    let reg = registry(n.clone());
    let llm = ScriptedProvider::new(Transcript::of(
        native(),
        vec![
            tool_turn(vec![call("c1", "calculator", json!({"expr": "2+3"}))]),
            tool_turn(vec![call("c2", "add", json!({"a": "two", "b": 3}))]),
            tool_turn(vec![call("c3", "fail", json!({}))]),
            tool_turn(vec![call("c4", "add", json!({"a": 2, "b": 3}))]),
            text_turn("It is 5."),
        ],
    ));
    let mut s = state(&reg, ReactConfig::default());
    let out = drive(&mut s, &llm, &reg, &NoHooks, None).await;
    assert_eq!(
        out,
        Outcome::Answered {
            answer: "It is 5.".into()
        }
    );
    let obs = observations(&s);
    assert!(
        obs[0].1
            && obs[0].0.contains("no tool named `calculator`")
            && obs[0].0.contains("add, fail, slow, finish"),
        "{obs:?}"
    );
    assert!(
        obs[1].1 && obs[1].0.contains("$.a must be number"),
        "{obs:?}"
    );
    assert!(obs[2].1 && obs[2].0.contains("disk on fire"), "{obs:?}");
    assert_eq!(obs[3], ("5.0".into(), false));
    assert_eq!(
        n.load(Ordering::SeqCst),
        1,
        "invalid calls never reach the tool"
    );
}

#[tokio::test]
async fn budgets_end_a_run() {
    let reg = registry(Arc::new(AtomicUsize::new(0)));
    let looping: Vec<_> = (0..10)
        .map(|i| tool_turn(vec![call(&format!("c{i}"), "add", json!({"a": 1, "b": 1}))]))
        .collect();
    let llm = ScriptedProvider::new(Transcript::of(native(), looping.clone()));
    let mut s = state(
        &reg,
        ReactConfig {
            max_iterations: 3,
            ..Default::default()
        },
    );
    assert_eq!(
        drive(&mut s, &llm, &reg, &NoHooks, None).await,
        Outcome::MaxIterations
    );
    assert_eq!(llm.calls(), 3);

    let llm = ScriptedProvider::new(Transcript::of(native(), looping));
    let mut s = state(
        &reg,
        ReactConfig {
            token_budget: Some(40),
            ..Default::default()
        },
    );
    assert_eq!(
        drive(&mut s, &llm, &reg, &NoHooks, None).await,
        Outcome::TokenBudget
    );
    assert_eq!(
        llm.calls(),
        3,
        "15 tokens a call: the budget of 40 allows three"
    );
}

#[tokio::test]
async fn tool_timeouts_are_observations() {
    let reg = registry(Arc::new(AtomicUsize::new(0)));
    let llm = ScriptedProvider::new(Transcript::of(
        native(),
        vec![
            tool_turn(vec![call("c1", "slow", json!({}))]),
            text_turn("gave up"),
        ],
    ));
    let mut s = state(&reg, ReactConfig::default());
    drive(&mut s, &llm, &reg, &NoHooks, None).await;
    assert!(observations(&s)[0].0.contains("timed out after 300 ms"));
}

#[tokio::test]
async fn independent_calls_of_one_turn_run_in_parallel() {
    // Each tool waits until all three are in flight at once; run one after another they would
    // wait forever (the 2 s tool timeout would then fail them).
    let in_flight = Arc::new(AtomicUsize::new(0));
    let mut reg = ToolRegistry::new().with_default_timeout(Duration::from_secs(2));
    for name in ["a", "b", "c"] {
        let in_flight = in_flight.clone();
        reg.add(FnTool::new(
            name,
            "waits for its siblings",
            json!({"type": "object", "properties": {}}),
            move |_| {
                let in_flight = in_flight.clone();
                async move {
                    in_flight.fetch_add(1, Ordering::SeqCst);
                    while in_flight.load(Ordering::SeqCst) < 3 {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    Ok(ToolOutput::text(name))
                }
            },
        ));
    }
    let llm = ScriptedProvider::new(Transcript::of(
        native(),
        vec![
            tool_turn(vec![
                call("1", "a", json!({})),
                call("2", "b", json!({})),
                call("3", "c", json!({})),
            ]),
            text_turn("done"),
        ],
    ));
    let mut s = state(&reg, ReactConfig::default());
    drive(&mut s, &llm, &reg, &NoHooks, None).await;
    // Results come back in call order, none timed out.
    let obs: Vec<(String, bool)> = observations(&s);
    assert_eq!(
        obs,
        [
            ("a".into(), false),
            ("b".into(), false),
            ("c".into(), false)
        ]
    );
}

#[tokio::test]
async fn cancellation_stops_at_the_next_step() {
    let reg = registry(Arc::new(AtomicUsize::new(0)));
    let llm = ScriptedProvider::new(Transcript::of(
        native(),
        vec![
            tool_turn(vec![call("c1", "slow", json!({}))]),
            text_turn("never asked"),
        ],
    ));
    let (tx, rx) = tokio::sync::watch::channel(false);
    let mut s = state(&reg, ReactConfig::default());
    // Canceled once the model has asked for the slow tool (an event, not a guessed delay).
    let canceler = async {
        while llm.calls() < 1 {
            tokio::task::yield_now().await;
        }
        tx.send(true).unwrap();
    };
    let (out, ()) = tokio::join!(drive(&mut s, &llm, &reg, &NoHooks, Some(rx)), canceler);
    assert_eq!(out, Outcome::Canceled);
    assert_eq!(llm.calls(), 1, "no model call after the cancel");
}

/// A provider that "crashes" (its future never resolves) on a chosen call.
struct CrashOn {
    inner: ScriptedProvider,
    crash_at: usize,
    seen: AtomicUsize,
}

impl LlmProvider for CrashOn {
    fn capabilities(&self) -> Capabilities {
        native()
    }
    async fn chat(&self, req: ChatRequest) -> Result<ChatResponse, LlmError> {
        if self.seen.fetch_add(1, Ordering::SeqCst) + 1 == self.crash_at {
            std::future::pending::<()>().await;
        }
        self.inner.chat(req).await
    }
}

#[tokio::test]
async fn resumes_after_a_crash_without_redoing_finished_steps() {
    let n = Arc::new(AtomicUsize::new(0));
    let reg = registry(n.clone());
    let script = vec![
        tool_turn(vec![call("c1", "add", json!({"a": 2, "b": 3}))]),
        tool_turn(vec![call("c2", "add", json!({"a": 5, "b": 5}))]),
        tool_turn(vec![call("c3", "finish", json!({"answer": "10"}))]),
    ];
    let store = Checkpoints::default();
    // First process: crashes while waiting for the third model call.
    let first = CrashOn {
        inner: ScriptedProvider::new(Transcript::of(native(), script.clone())),
        crash_at: 3,
        seen: AtomicUsize::new(0),
    };
    let mut s = state(&reg, ReactConfig::default());
    let hooks = CheckpointHooks {
        store: &store,
        run_id: "run-1",
    };
    let crashed = tokio::time::timeout(
        Duration::from_millis(200),
        drive(&mut s, &first, &reg, &hooks, None),
    )
    .await;
    assert!(crashed.is_err(), "the run was interrupted");
    assert_eq!(n.load(Ordering::SeqCst), 2);

    // Second process: loads the checkpoint and continues with the remaining exchange only.
    let mut resumed = store.load("run-1").await.expect("a checkpoint");
    assert_eq!(resumed.iteration, 2);
    let rest = ScriptedProvider::new(Transcript::of(native(), script[2..].to_vec()));
    let out = drive(&mut resumed, &rest, &reg, &hooks, None).await;
    assert_eq!(
        out,
        Outcome::Answered {
            answer: "10".into()
        }
    );
    assert_eq!(n.load(Ordering::SeqCst), 2, "no tool ran twice");
    assert_eq!(rest.calls(), 1);
}

#[tokio::test]
async fn models_without_native_tools_call_through_text() {
    let n = Arc::new(AtomicUsize::new(0));
    let reg = registry(n.clone());
    let caps = Capabilities {
        native_tools: false,
        ..Default::default()
    };
    let llm = ScriptedProvider::new(Transcript::of(
        caps,
        vec![
            text_turn(
                "I should add.\n```json\n{\"tool_call\": {\"name\": \"add\", \"arguments\": {\"a\": 2, \"b\": 3}}}\n```",
            ),
            text_turn("Thought: done\nAction: finish\nAction Input: the answer is 5"),
        ],
    ));
    let mut s = state(
        &reg,
        ReactConfig {
            native_tools: false,
            ..Default::default()
        },
    );
    assert!(
        s.messages[0].content.contains("add: Adds two numbers."),
        "tools described in the prompt"
    );
    let out = drive(&mut s, &llm, &reg, &NoHooks, None).await;
    assert_eq!(
        out,
        Outcome::Answered {
            answer: "the answer is 5".into()
        }
    );
    assert_eq!(n.load(Ordering::SeqCst), 1);
    assert!(
        s.messages
            .iter()
            .any(|m| m.role == ChatRole::User && m.content.starts_with("Observation from add: 5"))
    );
    assert!(matches!(&s.steps[0], Step::Thought { text } if text == "I should add."));
}

#[tokio::test]
async fn ask_user_ends_with_a_question() {
    let reg = registry(Arc::new(AtomicUsize::new(0)));
    let llm = ScriptedProvider::new(Transcript::of(
        native(),
        vec![tool_turn(vec![call(
            "c1",
            "ask_user",
            json!({"question": "Which numbers?"}),
        )])],
    ));
    let mut s = state(&reg, ReactConfig::default());
    let out = drive(&mut s, &llm, &reg, &NoHooks, None).await;
    assert_eq!(
        out,
        Outcome::NeedsInput {
            question: "Which numbers?".into()
        }
    );
}

#[tokio::test]
async fn state_round_trips_through_json() {
    let reg = registry(Arc::new(AtomicUsize::new(0)));
    let llm = ScriptedProvider::new(Transcript::of(
        native(),
        vec![
            tool_turn(vec![call("c1", "add", json!({"a": 1, "b": 2}))]),
            text_turn("3"),
        ],
    ));
    let mut s = state(&reg, ReactConfig::default());
    drive(&mut s, &llm, &reg, &NoHooks, None).await;
    let back: ReactState = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
    assert_eq!(back, s);
}

#[tokio::test]
async fn transcript_mismatch_is_a_clear_failure() {
    let reg = registry(Arc::new(AtomicUsize::new(0)));
    let t = Transcript {
        capabilities: native(),
        entries: vec![TranscriptEntry {
            expect: Some("something else".into()),
            request: None,
            response: text_turn("x"),
        }],
    };
    let llm = ScriptedProvider::new(t);
    let mut s = state(&reg, ReactConfig::default());
    match drive(&mut s, &llm, &reg, &NoHooks, None).await {
        Outcome::Failed { error } => assert!(
            error.contains("expected the last message to contain"),
            "{error}"
        ),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn long_observations_are_truncated() {
    let mut reg = ToolRegistry::new();
    reg.add(FnTool::new(
        "big",
        "Returns a lot.",
        json!({"type": "object", "properties": {}}),
        |_| async { Ok(ToolOutput::text("x".repeat(10_000))) },
    ));
    let llm = ScriptedProvider::new(Transcript::of(
        native(),
        vec![
            tool_turn(vec![call("c1", "big", json!({}))]),
            text_turn("ok"),
        ],
    ));
    let mut s = state(
        &reg,
        ReactConfig {
            max_observation_chars: 100,
            ..Default::default()
        },
    );
    drive(&mut s, &llm, &reg, &NoHooks, None).await;
    let obs = &observations(&s)[0].0;
    assert!(
        obs.starts_with(&"x".repeat(100)) && obs.ends_with("[truncated 9900 of 10000 characters]"),
        "{obs}"
    );
    assert!(
        s.messages
            .iter()
            .any(|m| m.role == ChatRole::Tool && m.content.len() < 200)
    );
}

struct StopAfterOne;
impl agentry_core::run::RunHooks for StopAfterOne {
    fn should_continue(&self, state: &ReactState) -> bool {
        state.iteration < 1
    }
}

#[tokio::test]
async fn should_continue_can_stop_a_run() {
    let reg = registry(Arc::new(AtomicUsize::new(0)));
    let llm = ScriptedProvider::new(Transcript::of(
        native(),
        vec![
            tool_turn(vec![call("c1", "add", json!({"a": 1, "b": 1}))]),
            text_turn("never asked"),
        ],
    ));
    let mut s = state(&reg, ReactConfig::default());
    assert_eq!(
        drive(&mut s, &llm, &reg, &StopAfterOne, None).await,
        Outcome::Stopped
    );
    assert_eq!(llm.calls(), 1);
}

#[tokio::test]
async fn namespaces_keep_same_named_tools_apart() {
    let mk = |answer: &'static str| {
        let mut r = ToolRegistry::new();
        r.add(FnTool::new(
            "search",
            "Searches.",
            json!({"type": "object", "properties": {}}),
            move |_| async move { Ok(ToolOutput::text(answer)) },
        ));
        r
    };
    let mut all = ToolRegistry::new();
    all.merge(Some("news"), &mk("from news"))
        .merge(Some("web"), &mk("from web"));
    assert_eq!(all.names(), ["news__search", "web__search"]);
    let r = all.call(&call("1", "web__search", json!({}))).await;
    assert_eq!(r.output.unwrap().text, "from web");
    let r = all.call(&call("2", "search", json!({}))).await;
    assert!(matches!(r.output, Err(ToolError::Unknown { .. })));
    let filtered = all.clone().with_filter(agentry_core::tools::ToolFilter {
        allow: vec!["news__*".into()],
        deny: vec![],
    });
    assert_eq!(filtered.names(), ["news__search"]);
    assert!(matches!(
        filtered
            .call(&call("3", "web__search", json!({})))
            .await
            .output,
        Err(ToolError::Unknown { .. })
    ));
}

#[tokio::test]
async fn recorded_exchanges_replay_identically() {
    let path = std::env::temp_dir().join(format!("agentry-rec-{}.json", std::process::id()));
    let real = ScriptedProvider::new(Transcript::of(
        native(),
        vec![
            tool_turn(vec![call("c1", "add", json!({"a": 2, "b": 3}))]),
            text_turn("5"),
        ],
    ));
    let rec = RecordingProvider::new(Box::new(real), &path);
    let reg = registry(Arc::new(AtomicUsize::new(0)));
    let mut s1 = state(&reg, ReactConfig::default());
    let out1 = drive(&mut s1, &rec, &reg, &NoHooks, None).await;
    let recorded = Transcript::load(&path).unwrap();
    assert_eq!(recorded.entries.len(), 2);
    assert!(
        recorded.entries[0]
            .request
            .as_ref()
            .unwrap()
            .messages
            .iter()
            .any(|m| m.content == "What is 2+3?")
    );
    let replay = ScriptedProvider::from_file(&path).unwrap();
    let mut s2 = state(&reg, ReactConfig::default());
    let out2 = drive(&mut s2, &replay, &reg, &NoHooks, None).await;
    assert_eq!(out1, out2);
    assert_eq!(s1.messages, s2.messages);
    let _ = std::fs::remove_file(&path);
}

/// Issue 20: a message to a run that is not done (a run resumed after a restart) joins the
/// conversation; while tool calls are pending it waits for their results, since a chat cannot
/// put a user turn between a call and its result. It survives a checkpoint.
#[test]
fn a_user_message_to_an_unfinished_run_joins_after_pending_tool_results() {
    let reg = registry(Arc::new(AtomicUsize::new(0)));
    let mut s = state(&reg, ReactConfig::default());
    s.add_user("also in hex");
    assert_eq!(s.messages.last().unwrap().content, "also in hex");
    s.on_model(ChatResponse::tool_calls(vec![ToolCall {
        id: "c1".into(),
        name: "add".into(),
        arguments: json!({"a": 2, "b": 3}),
    }]));
    s.add_user("and double it");
    let s: ReactState = serde_json::from_value(serde_json::to_value(&s).unwrap()).unwrap();
    let mut s = s;
    assert_eq!(s.waiting.len(), 1, "held while the call is pending");
    s.on_tools(vec![agentry_core::tools::ToolResult {
        call_id: "c1".into(),
        name: "add".into(),
        output: Ok(ToolOutput::text("5")),
    }]);
    let n = s.messages.len();
    assert_eq!(s.messages[n - 2].tool_call_id.as_deref(), Some("c1"));
    assert_eq!(s.messages[n - 1].content, "and double it");
    assert!(s.waiting.is_empty());
}
