//! Framework overhead of the ReAct loop: µs per step with a scripted model and a trivial tool
//! (no model or tool time to hide behind), and resident memory per concurrent run.
//!
//!     cargo run --release -p agentry-core --example react_overhead [RUNS] [TOOL_STEPS]
//!
//! Prints `AGENTRY_STEP_US=<µs>` and `AGENTRY_RUN_KB=<KiB>` for `bench/react_overhead.sh`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentry_core::llm::*;
use agentry_core::react::{Outcome, ReactConfig, ReactState};
use agentry_core::run::{NoHooks, drive};
use agentry_core::tools::{FnTool, ToolOutput, ToolRegistry};
use serde_json::json;

fn script(steps: usize) -> Transcript {
    let mut r: Vec<ChatResponse> = (0..steps)
        .map(|i| ChatResponse {
            message: ChatMessage {
                role: ChatRole::Assistant,
                content: String::new(),
                tool_calls: vec![ToolCall {
                    id: format!("c{i}"),
                    name: "add".into(),
                    arguments: json!({"a": i, "b": 1}),
                }],
                tool_call_id: None,
            },
            usage: Usage::default(),
            finish_reason: FinishReason::ToolCalls,
        })
        .collect();
    r.push(ChatResponse {
        message: ChatMessage::assistant("done"),
        usage: Usage::default(),
        finish_reason: FinishReason::Stop,
    });
    Transcript::of(
        Capabilities {
            native_tools: true,
            ..Default::default()
        },
        r,
    )
}

fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let runs = args.first().copied().unwrap_or(20_000);
    let steps = args.get(1).copied().unwrap_or(4);
    let mut tools = ToolRegistry::new();
    tools.add(FnTool::new(
        "add",
        "Adds two numbers.",
        json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}),
        |v| async move { Ok(ToolOutput::text((v["a"].as_f64().unwrap_or(0.0) + v["b"].as_f64().unwrap_or(0.0)).to_string())) },
    ));
    let transcript = script(steps);
    let specs = tools.specs();

    // Warm-up, then timed runs; each run is steps+1 model calls (= ReAct steps).
    for _ in 0..200 {
        let llm = ScriptedProvider::new(transcript.clone());
        let mut s = ReactState::new(
            ReactConfig::default(),
            "You add.",
            specs.clone(),
            Vec::new(),
            "go",
        );
        drive(&mut s, &llm, &tools, &NoHooks, None).await;
    }
    let t0 = Instant::now();
    for _ in 0..runs {
        let llm = ScriptedProvider::new(transcript.clone());
        let mut s = ReactState::new(
            ReactConfig::default(),
            "You add.",
            specs.clone(),
            Vec::new(),
            "go",
        );
        let out = drive(&mut s, &llm, &tools, &NoHooks, None).await;
        assert!(matches!(out, Outcome::Answered { .. }));
    }
    let per_step = t0.elapsed().as_secs_f64() * 1e6 / (runs * (steps + 1)) as f64;
    println!(
        "agentry: {runs} runs x {} steps: {per_step:.2} µs per step",
        steps + 1
    );
    println!("AGENTRY_STEP_US={per_step:.3}");

    // Memory: N runs in flight at once, each parked in a tool call.
    let n = 2000;
    let mut slow = ToolRegistry::new();
    slow.add(FnTool::new(
        "add",
        "Waits.",
        json!({"type": "object", "properties": {}}),
        |_| async {
            tokio::time::sleep(Duration::from_millis(500)).await;
            Ok(ToolOutput::text("1"))
        },
    ));
    let slow = Arc::new(slow);
    let before = rss_kb();
    let mut handles = Vec::new();
    for _ in 0..n {
        let slow = slow.clone();
        let transcript = transcript.clone();
        let specs = specs.clone();
        handles.push(tokio::spawn(async move {
            let llm = ScriptedProvider::new(transcript);
            let mut s =
                ReactState::new(ReactConfig::default(), "You add.", specs, Vec::new(), "go");
            drive(&mut s, &llm, &slow, &NoHooks, None).await
        }));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let during = rss_kb();
    for h in handles {
        let _ = h.await;
    }
    let per_run = during.saturating_sub(before) as f64 / n as f64;
    println!("agentry: {n} concurrent runs: {per_run:.1} KiB resident per run");
    println!("AGENTRY_RUN_KB={per_run:.2}");
}
