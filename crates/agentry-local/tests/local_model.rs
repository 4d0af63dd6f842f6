//! The embedded models for real: SmolLM2-135M-Instruct (GGUF) and all-MiniLM-L6-v2, fetched by
//! `scripts/fetch-models.sh`. Without the files these tests say SKIPPED (and fail when
//! `AGENTRY_REQUIRE_MODELS=1`, as the test command sets).

use std::path::Path;
use std::sync::Arc;

use agentry_core::agent::{AgentConfig, AgentFactory, parse_config};
use agentry_core::embed::{Embedder, dot};
use agentry_core::llm::{ChatMessage, ChatRequest, LlmProvider, OpenAiConfig, OpenAiProvider};
use agentry_core::react::{Outcome, Step};
use agentry_core::run::NoHooks;
use agentry_core::tools::schema::validate;
use agentry_local::chat::TemplateMessage;
use agentry_local::constrain::Grammar;
use agentry_local::eval::{ToolCase, ToolSuite, run_tool_choice};
use agentry_local::provider::{
    LocalConfig, ToolChoice, shared_chat_model, shared_embedder, shared_router_embedder,
};
use agentry_local::{ChatModel, GenerateOptions, LocalEmbedder, LocalProvider, ToolRouter, paths};
use serde_json::{Value, json};

fn have_models() -> bool {
    let ok = paths::chat_model_path().exists()
        && paths::embedder_path().join("model.safetensors").exists()
        && paths::router_embedder_path()
            .join("model.safetensors")
            .exists();
    if !ok {
        let msg = format!(
            "embedded models not found under {}: run `bash scripts/fetch-models.sh`",
            paths::models_dir().display()
        );
        agentry_testkit::missing::<()>(agentry_testkit::Peer::Models, &msg);
    }
    ok
}

fn model() -> Arc<ChatModel> {
    shared_chat_model(None).expect("chat model loads")
}

fn embedder() -> Arc<LocalEmbedder> {
    shared_embedder(None).expect("embedder loads")
}

/// The tool router's embedder (all-mpnet-base-v2), as `LocalProvider::new` loads it.
fn router_embedder() -> Arc<LocalEmbedder> {
    shared_router_embedder(None).expect("router embedder loads")
}

fn suite() -> ToolSuite {
    serde_json::from_str(include_str!("data/tool_choice.json")).unwrap()
}

fn provider(choice: ToolChoice) -> LocalProvider {
    // As `LocalProvider::new` makes it: the router on its own embedder (no reader by default).
    let router =
        (choice == ToolChoice::Routed).then(|| ToolRouter::new(router_embedder() as Arc<_>));
    LocalProvider::from_parts(
        model(),
        router,
        LocalConfig {
            tool_choice: choice,
            ..Default::default()
        },
    )
}

#[test]
fn tokenizer_from_the_gguf_splits_digits_and_round_trips() {
    if !have_models() {
        return;
    }
    let m = model();
    let ids = m.encode("In 2024, Hamlet's year").unwrap();
    // SmolLM2 writes numbers digit by digit (its pre-tokenizer, fixed over candle's default).
    let digits: Vec<u32> = "0123456789"
        .chars()
        .map(|c| m.encode(&c.to_string()).unwrap()[0])
        .collect();
    assert_eq!(
        ids.iter().filter(|i| digits.contains(i)).count(),
        4,
        "{ids:?}"
    );
    let special = m.encode("<|im_start|>user").unwrap();
    assert_eq!(special[0], 1, "<|im_start|> is one special token");
    let prompt = m
        .render(&[TemplateMessage {
            role: "user".into(),
            content: "Hi".into(),
        }])
        .unwrap();
    assert!(prompt.ends_with("<|im_start|>assistant\n"), "{prompt:?}");
    assert!(
        prompt.contains("<|im_start|>system\n"),
        "the template adds its default system turn"
    );
}

#[test]
fn greedy_generation_is_deterministic_and_reuses_the_prompt_cache() {
    if !have_models() {
        return;
    }
    let m = model();
    let text = m
        .render(&[TemplateMessage {
            role: "user".into(),
            content: "What is 2+2? Answer in one short sentence.".into(),
        }])
        .unwrap();
    let ids = m.encode(&text).unwrap();
    let opts = GenerateOptions {
        max_tokens: 24,
        ..Default::default()
    };
    let mut streamed = String::new();
    let a = m
        .generate(&ids, &opts, &mut |p| {
            streamed.push_str(p);
            true
        })
        .unwrap();
    let b = m.generate(&ids, &opts, &mut |_| true).unwrap();
    assert_eq!(a.text, b.text);
    assert_eq!(streamed, a.text, "streamed pieces add up to the text");
    assert!(a.text.contains('4'), "{:?}", a.text);
    assert_eq!(
        b.prompt_computed, 0,
        "the second run reuses the cached prompt"
    );
    eprintln!(
        "generation: {:?} ({} tokens, {:.1} tok/s)",
        a.text,
        a.completion_tokens,
        a.completion_tokens as f64 / a.generate_time.as_secs_f64()
    );
    // Stop strings cut the text.
    let stopped = m
        .generate(
            &ids,
            &GenerateOptions {
                stop: vec!["4".into()],
                ..opts
            },
            &mut |_| true,
        )
        .unwrap();
    assert!(!stopped.text.contains('4'));
    assert!(a.text.starts_with(&stopped.text));
}

#[test]
fn constrained_calls_are_valid_and_only_name_real_tools() {
    if !have_models() {
        return;
    }
    let m = model();
    let s = suite();
    let tools: Vec<(String, Value)> = s
        .tools
        .iter()
        .map(|t| (t.name.clone(), t.parameters.clone()))
        .collect();
    let grammar = Arc::new(Grammar::tool_call(&tools, 80).unwrap());
    let (mut mask, mut total, mut tokens) = (0.0, 0.0, 0);
    // Requests that invite invented tools ("send_email", "translate") still get real ones.
    for q in [
        "Send an email to Bob about the meeting.",
        "Translate 'good morning' into French.",
        "Plot the penguins by island.",
        "What is 12 * 7?",
    ] {
        let text = m
            .render(&[
                TemplateMessage {
                    role: "system".into(),
                    content: "Reply with a JSON tool call {\"name\": ..., \"arguments\": {...}}."
                        .into(),
                },
                TemplateMessage {
                    role: "user".into(),
                    content: q.into(),
                },
            ])
            .unwrap();
        let g = m
            .generate(
                &m.encode(&text).unwrap(),
                &GenerateOptions {
                    max_tokens: 120,
                    grammar: Some(grammar.clone()),
                    ..Default::default()
                },
                &mut |_| true,
            )
            .unwrap();
        let v: Value = serde_json::from_str(&g.text).unwrap_or_else(|e| panic!("{e}: {}", g.text));
        let name = v["name"].as_str().unwrap();
        let tool = s
            .tools
            .iter()
            .find(|t| t.name == name)
            .expect("a real tool");
        validate(&tool.parameters, &v["arguments"]).unwrap_or_else(|e| panic!("{e}: {}", g.text));
        mask += g.mask_time.as_secs_f64();
        total += g.generate_time.as_secs_f64();
        tokens += g.completion_tokens;
        eprintln!("{q:?} -> {}", g.text);
    }
    eprintln!(
        "mask cost: {:.2} ms of {:.1} ms per token ({:.1}% of generation time)",
        1e3 * mask / tokens as f64,
        1e3 * total / tokens as f64,
        100.0 * mask / total
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_choice_suite_routed_reaches_80_percent() {
    if !have_models() {
        return;
    }
    let s = suite();
    assert!(s.cases.len() >= 50 && s.tools.len() >= 8);
    let r = run_tool_choice(&provider(ToolChoice::Routed), &s)
        .await
        .unwrap();
    eprintln!(
        "tool choice, routed + constrained: right tool {}/{} ({:.0}%), valid calls {}/{}",
        r.right(),
        r.cases.len(),
        100.0 * r.accuracy(),
        r.valid(),
        r.cases.len()
    );
    for c in r
        .cases
        .iter()
        .filter(|c| c.called.as_deref() != Some(c.expected.as_str()))
    {
        eprintln!(
            "  miss: {:?} -> {:?} (want {})",
            c.request, c.called, c.expected
        );
    }
    assert_eq!(r.valid(), r.cases.len(), "every call is valid");
    assert!(r.accuracy() >= 0.8, "accuracy {:.2}", r.accuracy());
}

/// The reader's score is a log-probability: negative, and the chain rule holds across the
/// two paths it takes (the prompt path over the prefix, candle's ops over the rest).
#[test]
fn a_continuations_log_probability_follows_the_chain_rule() {
    if !have_models() {
        return;
    }
    let m = model();
    let prefix = m
        .encode("Tool: tail: Display the last lines of a file.\nRequest:")
        .unwrap();
    let (a, b) = (
        m.encode(" Show the last").unwrap(),
        m.encode(" 5 lines of app.log").unwrap(),
    );
    let whole = m
        .continuation_logprob(&prefix, &[a.as_slice(), b.as_slice()].concat())
        .unwrap();
    let first = m.continuation_logprob(&prefix, &a).unwrap();
    let then = m
        .continuation_logprob(&[prefix.as_slice(), a.as_slice()].concat(), &b)
        .unwrap();
    assert!(
        whole < 0.0 && first < 0.0 && then < 0.0,
        "{whole} {first} {then}"
    );
    assert!(
        (whole - (first + then)).abs() < 0.05 * whole.abs().max(1.0),
        "log P(a b) = {whole}, log P(a) + log P(b | a) = {}",
        first + then
    );
    assert!(m.continuation_logprob(&prefix, &[]).is_err());
}

/// Every position of a long continuation is scored through the prompt path (many rows at
/// once, the vocabulary's product dense); each score must be what the token-at-a-time path
/// gives. And the lines a model's training text quotes over and over are the ones it is
/// surest of: Macbeth's "To-morrow" above the lines round it, in a passage of his answer to
/// "The queen, my lord, is dead" (the brief's reader rests on this).
#[test]
fn every_position_is_scored_as_one_at_a_time_and_famous_lines_stand_out() {
    if !have_models() {
        return;
    }
    let m = model();
    let prefix = m.encode("MACBETH.\n").unwrap();
    let text = m
        .encode("She should have died hereafter;\nThere would have been a time for such a word.")
        .unwrap();
    assert!(
        text.len() >= 16,
        "{} tokens: too few for the prompt path",
        text.len()
    );
    let all = m.token_logprobs(&prefix, &text).unwrap();
    for (i, &lp) in all.iter().enumerate() {
        let before = [prefix.as_slice(), &text[..i]].concat();
        let one = m.token_logprobs(&before, &text[i..=i]).unwrap()[0];
        // Alone, the vocabulary's product is candle's quantized one (its activations rounded
        // to 8 bits): a few hundredths apart.
        assert!(
            (lp - one).abs() < 0.1 + 0.02 * one.abs(),
            "token {i}: {lp} at once, {one} alone"
        );
    }
    let lines = [
        "She should have died hereafter;",
        "There would have been a time for such a word.--",
        "To-morrow, and to-morrow, and to-morrow,",
        "Creeps in this petty pace from day to day,",
        "Why, then, the horses were saddled at the inn by the river,",
        "And the steward counted the candles twice before the guests came.",
    ];
    let sure = m
        .line_familiarity(
            "SEYTON.\nThe queen, my lord, is dead.\n\nMACBETH.\n",
            &lines,
        )
        .unwrap();
    eprintln!("{sure:?}");
    assert_eq!(sure.len(), lines.len());
    let best = (0..lines.len())
        .max_by(|&a, &b| sure[a].total_cmp(&sure[b]))
        .unwrap();
    assert_eq!(lines[best], lines[2], "{sure:?}");
    // The two invented lines are read as ordinary prose.
    assert!(
        sure[2] > sure[4] + 1.0 && sure[2] > sure[5] + 1.0,
        "{sure:?}"
    );
}

/// The tool-choice suites `scripts/fetch-data.sh` builds from BFCL v4's data (PyPI
/// bfcl-eval): requests and functions written by the leaderboard's authors and users, which
/// nobody here tuned the router for. `None` (a skip, or a failure where the test command
/// requires the data) when they are not there.
fn bfcl_suite(name: &str) -> Option<ToolSuite> {
    let dir = std::env::var_os("AGENTRY_DATA").map_or_else(
        || Path::new(&std::env::var_os("HOME").unwrap_or_default()).join(".cache/agentry/data"),
        Into::into,
    );
    let path = dir.join("bfcl").join(name);
    match std::fs::read_to_string(&path) {
        Ok(text) => Some(serde_json::from_str(&text).expect("a BFCL suite parses")),
        Err(_) => {
            let msg = format!(
                "{} not found: run `bash scripts/fetch-data.sh`",
                path.display()
            );
            agentry_testkit::missing::<()>(agentry_testkit::Peer::Models, &msg);
            None
        }
    }
}

/// The case of `suite` named `id` (BFCL's `multi_turn_base_13_turn1`).
fn case<'a>(suite: &'a ToolSuite, id: &str) -> &'a ToolCase {
    suite
        .cases
        .iter()
        .find(|c| c.id.as_deref() == Some(id))
        .unwrap_or_else(|| panic!("{id} is in the suite"))
}

/// The router alone (the embedder's ranking plus the keyword score), first choice, on every
/// fourth of BFCL's 1,053 live requests: with their own functions (4 on average), then with
/// other requests' functions added up to 32. Issue 23's bar is 85% on requests the routing
/// was not tuned on; measured on all 1,053 in docs/BENCHMARKS.md ("Tool choice"). A quarter
/// keeps the test to a minute or two: each request brings its own functions' texts to embed,
/// and the router's MPNet costs five times MiniLM's compute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_router_picks_tools_on_bfcl_requests_nobody_tuned_it_for() {
    if !have_models() {
        return;
    }
    let router = ToolRouter::new(router_embedder() as Arc<_>);
    for name in ["bfcl_live_multiple.json", "bfcl_live_multiple_wide.json"] {
        let Some(suite) = bfcl_suite(name) else {
            return;
        };
        assert!(suite.cases.len() > 1000, "{name}: {}", suite.cases.len());
        let (mut right, mut asked) = (0, 0);
        for c in suite.cases.iter().step_by(4) {
            asked += 1;
            let tools = suite.tools_for(c);
            assert!(tools.iter().any(|t| t.name == c.tool), "{name}: {}", c.tool);
            let ranked = router.rank(&c.request, tools).await.unwrap();
            right += usize::from(tools[ranked[0].0].name == c.tool);
        }
        let share = right as f64 / asked as f64;
        eprintln!(
            "{name}: router first choice {right}/{asked} ({:.1}%)",
            100.0 * share
        );
        assert!(share >= 0.85, "{name}: {share:.3}");
    }
}

/// The router alone on the three suites written from real tools' names, descriptions and
/// schemas, with no examples and before any router change was run on them (the MCP reference
/// servers' 22 tools, tau2 retail's 16, all 38 for the held-out requests). Measured with
/// all-mpnet-base-v2: 37/46, 33/40, 33/40 (MiniLM: 30, 30, 33); the bar sits below, a guard
/// against a change that helps the development set at their cost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_router_chooses_among_one_servers_tools_on_suites_it_was_not_tuned_on() {
    if !have_models() {
        return;
    }
    let router = ToolRouter::new(router_embedder() as Arc<_>);
    for (name, text) in [
        ("mcp", include_str!("data/tool_choice_mcp.json")),
        ("retail", include_str!("data/tool_choice_retail.json")),
        ("held out", include_str!("data/tool_choice_heldout.json")),
    ] {
        let suite: ToolSuite = serde_json::from_str(text).unwrap();
        let mut right = 0;
        for c in &suite.cases {
            let tools = suite.tools_for(c);
            let ranked = router.rank(&c.request, tools).await.unwrap();
            right += usize::from(tools[ranked[0].0].name == c.tool);
        }
        let share = right as f64 / suite.cases.len() as f64;
        eprintln!("{name}: router first choice {right}/{}", suite.cases.len());
        assert!(share >= 0.75, "{name}: {right}/{}", suite.cases.len());
    }
}

/// Among one API's tools, the shared part of their texts (all of them "the Gorilla file
/// system", "the trading bot") is taken out of the comparison: the router's first choice is
/// the tool the request differs toward. Four requests of BFCL's multi-turn suite (where the
/// centering was chosen) that the router (all-mpnet-base-v2) got wrong without it: `mkdir`
/// for "set up a new file called 'Notes2023.txt'", `du` for "have a look at what's inside
/// 'Annual_Report_2023.docx'", `get_available_stocks` for "what stocks have I been keeping
/// tabs on lately?", `estimate_drive_feasibility_by_mileage` for "a rough distance from
/// Rivermist to Greenway".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_router_compares_tools_of_one_api_by_what_sets_them_apart() {
    if !have_models() {
        return;
    }
    let Some(suite) = bfcl_suite("bfcl_multi_turn.json") else {
        return;
    };
    let router = ToolRouter::new(router_embedder() as Arc<_>);
    for id in [
        "multi_turn_base_42_turn0",
        "multi_turn_base_6_turn2",
        "multi_turn_base_142_turn1",
        "multi_turn_base_92_turn0",
    ] {
        let c = case(&suite, id);
        let tools = suite.tools_for(c);
        assert!(tools.len() >= 10, "{id}: a whole API's tools");
        let ranked = router.rank(&c.request, tools).await.unwrap();
        assert_eq!(tools[ranked[0].0].name, c.tool, "{id}: {:?}", c.request);
    }
}

/// Within one API's tools the embedder's first choice is often still a neighbour (`find` for
/// "investigate within 'log.txt' for the occurrence of the keyword", `cp` for "verify both
/// ... are identical", `send_message` for "show me all the messages I have send so far");
/// the chat model reading the close tools' descriptions puts the right one first. Four
/// requests of BFCL's multi-turn suite, on which the reader's settings were chosen (the
/// measured effect on all suites is in docs/BENCHMARKS.md); the embedder alone gets none of
/// them, the reader at least three. Not all four: on one machine (AMD EPYC, AVX2 without
/// AVX-512) `find` stayed 0.011 ahead of `grep` for the first, half a nat of the reader's
/// log-likelihood, where another CPU's rounding put `grep` first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reader_tells_neighbouring_tools_of_one_api_apart() {
    if !have_models() {
        return;
    }
    let Some(suite) = bfcl_suite("bfcl_multi_turn.json") else {
        return;
    };
    // The reader is for the small embedder (`route_read`, off by default: with the router's
    // all-mpnet-base-v2 it no longer gained on the development set); MiniLM's misses here.
    let router = ToolRouter::new(embedder() as Arc<_>);
    let reader = router.clone().with_reader(model());
    let mut right = Vec::new();
    for id in [
        "multi_turn_base_1_turn2",
        "multi_turn_base_21_turn1",
        "multi_turn_base_53_turn2",
        "multi_turn_base_62_turn3",
    ] {
        let c = case(&suite, id);
        let tools = suite.tools_for(c);
        let first = |r: Vec<(usize, f32)>| tools[r[0].0].name.clone();
        let alone = first(router.rank(&c.request, tools).await.unwrap());
        let ranked = reader.rank(&c.request, tools).await.unwrap();
        eprintln!(
            "{id}: {:?}",
            ranked
                .iter()
                .take(4)
                .map(|r| (tools[r.0].name.as_str(), r.1))
                .collect::<Vec<_>>()
        );
        let read = first(ranked);
        assert_ne!(alone, c.tool, "{id}: the embedder alone already gets it");
        if read == c.tool {
            right.push(id);
        }
    }
    assert!(right.len() >= 3, "the reader got {right:?} of 4");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_answers_with_the_local_model_through_valid_tool_calls() {
    if !have_models() {
        return;
    }
    let mut factory = AgentFactory::with_builtins();
    agentry_local::provider::register(&mut factory);
    let cfg: AgentConfig = parse_config(
        Path::new("calc.toml"),
        r#"
name = "calculator"
description = "Does arithmetic"
tools = ["calculate", "current_time"]
max_iterations = 4
[model]
provider = "local"
"#,
    )
    .unwrap();
    let agent = factory.create_agent(cfg).unwrap();
    let state = agent.run("What is 17 * 23?", None, &NoHooks, None).await;
    let calls: Vec<_> = state
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::ToolCall { call } => Some(call.clone()),
            _ => None,
        })
        .collect();
    eprintln!("steps: {:#?}", state.steps);
    assert_eq!(calls[0].name, "calculate", "routed to the calculator");
    let observed = state.steps.iter().any(
        |s| matches!(s, Step::Observation { text, is_error: false, .. } if text.contains("391")),
    );
    assert!(observed, "the tool computed 17 * 23 = 391");
    assert!(
        matches!(state.outcome, Outcome::Answered { .. }),
        "{:?}",
        state.outcome
    );
    assert!(
        !state
            .steps
            .iter()
            .any(|s| matches!(s, Step::Observation { is_error: true, .. })),
        "no invalid or unknown tool call"
    );
    // A bad setting is refused with the field named.
    let bad: AgentConfig = parse_config(
        Path::new("bad.toml"),
        "name = \"x\"\n[model]\nprovider = \"local\"\ntool_choise = \"routed\"\n",
    )
    .unwrap();
    let e = factory
        .create_agent(bad)
        .err()
        .expect("unknown field refused")
        .to_string();
    assert!(e.contains("tool_choise"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_compatible_endpoint_serves_chat_tools_streaming_and_embeddings() {
    if !have_models() {
        return;
    }
    let state = agentry_local::serve::ServeState {
        chat: provider(ToolChoice::Routed),
        embedder: Some(embedder()),
        embedder_name: "all-minilm-l6-v2".into(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, agentry_local::serve::router(state)).await });

    // agentry-core's own OpenAI client, over real HTTP.
    let client = OpenAiProvider::new(OpenAiConfig {
        base_url: base.clone(),
        model: "smollm2".into(),
        native_tools: true,
        request_timeout_ms: 120_000,
        ..Default::default()
    })
    .unwrap();
    let suite = suite();
    let resp = client
        .chat(ChatRequest {
            messages: vec![ChatMessage::user("Draw a histogram of flight delays.")],
            tools: suite.tools.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    let call = &resp.message.tool_calls[0];
    assert_eq!(call.name, "visualize");
    let spec = suite.tools.iter().find(|t| t.name == "visualize").unwrap();
    validate(&spec.parameters, &call.arguments).unwrap();
    let text = client
        .chat(ChatRequest {
            messages: vec![ChatMessage::user("Say hello.")],
            max_tokens: Some(12),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(!text.message.content.is_empty());

    let http = reqwest::Client::new();
    let models: Value = http
        .get(format!("{base}/models"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["data"].as_array().unwrap().len(), 2);

    // Streaming: chunks, then [DONE].
    let body = http
        .post(format!("{base}/chat/completions"))
        .json(&json!({"model": "x", "stream": true, "max_tokens": 8,
                      "messages": [{"role": "user", "content": "Count to three."}]}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let datas: Vec<&str> = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect();
    assert_eq!(*datas.last().unwrap(), "[DONE]");
    let content: String = datas
        .iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(String::from)
        })
        .collect();
    assert!(!content.is_empty(), "{body}");

    // Embeddings match the in-process embedder.
    let e: Value = http
        .post(format!("{base}/embeddings"))
        .json(&json!({"model": "all-minilm-l6-v2", "input": ["Who is Hamlet?", "the prince of Denmark"]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let v: Vec<f32> = serde_json::from_value(e["data"][0]["embedding"].clone()).unwrap();
    let local = embedder()
        .embed(vec!["Who is Hamlet?".into()])
        .await
        .unwrap();
    assert_eq!(v.len(), 384);
    assert!(dot(&v, &local[0]) > 0.9999);
    // agentry-core's OpenAI-compatible embedder (what RAG uses with AGENTRY_EMBED_URL) agrees.
    let remote = agentry_core::llm::OpenAiEmbedder::connect(OpenAiConfig {
        base_url: base.clone(),
        model: "all-minilm-l6-v2".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    assert_eq!(Embedder::dimensions(&remote), 384);
    let r = remote
        .embed(vec![
            "the prince of Denmark".into(),
            "Who is Hamlet?".into(),
        ])
        .await
        .unwrap();
    assert!(dot(&r[1], &local[0]) > 0.9999);

    // Bad input: a clear OpenAI-style error, 400.
    let r = http
        .post(format!("{base}/chat/completions"))
        .json(&json!({"messages": [{"role": "wizard", "content": "x"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let err: Value = r.json().await.unwrap();
    assert!(
        err["error"]["message"].as_str().unwrap().contains("wizard"),
        "{err}"
    );
    let r = http
        .post(format!("{base}/embeddings"))
        .json(&json!({"input": 5}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embeddings_match_sentence_transformers() {
    if !have_models() {
        return;
    }
    // Written by bench/local/st_reference.py with PyPI sentence-transformers on the same files:
    // the default embedder (BERT) and the router's (MPNet).
    for (embedder, reference) in [
        (embedder(), include_str!("data/minilm_reference.json")),
        (router_embedder(), include_str!("data/mpnet_reference.json")),
    ] {
        matches_sentence_transformers(&embedder, reference).await;
    }
}

async fn matches_sentence_transformers(embedder: &LocalEmbedder, reference: &str) {
    let reference: Value = serde_json::from_str(reference).unwrap();
    let texts: Vec<String> = serde_json::from_value(reference["texts"].clone()).unwrap();
    let want: Vec<Vec<f32>> = serde_json::from_value(reference["embeddings"].clone()).unwrap();
    assert_eq!(want[0].len(), embedder.dims());
    let got = embedder.embed(texts.clone()).await.unwrap();
    let largest = |a: &[f32], b: &[f32]| {
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max)
    };
    for ((t, g), w) in texts.iter().zip(&got).zip(&want) {
        let cos = dot(g, w) / (dot(w, w).sqrt() * dot(g, g).sqrt());
        let diff = largest(g, w);
        eprintln!("cosine {cos:.6}  largest difference {diff:e}  {t:?}");
        assert!(cos > 0.999_99, "{t:?}: cosine {cos}");
        assert!(diff < 1e-5, "{t:?}: a component differs by {diff}");
    }
    // A text's vector does not depend on the batch it is packed with.
    for (i, t) in texts.iter().enumerate() {
        let single = embedder.embed(vec![t.clone()]).await.unwrap();
        assert!(largest(&single[0], &got[i]) < 1e-6, "{t:?} alone");
    }
}
