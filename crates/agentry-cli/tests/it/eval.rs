//! `agentry eval` end to end through the binary: a served agent evaluated with a scripted
//! user, every report written, `eval view` and `eval replay` on the result; and the embedded
//! model as the agent under test and as the user (the score does not matter, the path does).

use std::process::{Command, Stdio};

use crate::support::{BIN, Server, free_port, run, serve, stdout, wait_for};

fn tempdir(name: &str) -> agentry_testkit::Scratch {
    agentry_testkit::Scratch::new(&format!("cli-eval-{name}"))
}

#[test]
fn eval_writes_tau2_results_and_reports_that_view_and_replay_read() {
    let (_server, base) = serve("echo", &[]);
    let dir = tempdir("echo");
    let script = dir.join("script.json");
    std::fs::write(
        &script,
        r#"{"create_task_1": ["Create a task called Important Meeting for user_1."],
            "update_task_1": ["Mark task_1 as completed.", "Is it done?"]}"#,
    )
    .unwrap();
    let save = dir.join("run");
    let o = run(&[
        "eval",
        "--agent-a2a-endpoint",
        &base,
        "--domain",
        "mock",
        "--task-ids",
        "create_task_1,update_task_1",
        "--num-trials",
        "2",
        "--user-llm",
        &format!("scripted:{}", script.display()),
        "--save-to",
        save.to_str().unwrap(),
        "--quiet",
    ]);
    let out = stdout(&o);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // The echo agent repeats what it is told: it performs nothing, so every task fails.
    assert!(
        out.contains("4 simulations (2 tasks x 2 trials): 4 scored"),
        "{out}"
    );
    assert!(out.contains("pass^2"), "{out}");
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(save.join("results.json")).unwrap()).unwrap();
    assert_eq!(results["simulations"].as_array().unwrap().len(), 4);
    assert_eq!(results["info"]["environment_info"]["domain_name"], "mock");
    let sim = &results["simulations"][0];
    assert_eq!(
        sim["messages"][0]["content"],
        "Hi! How can I help you today?"
    );
    assert_eq!(sim["termination_reason"], "user_stop");
    assert_eq!(sim["reward_info"]["reward"], 0.0);
    let junit = std::fs::read_to_string(save.join("junit.xml")).unwrap();
    assert!(junit.contains(r#"tests="2" failures="2""#), "{junit}");
    let prom = std::fs::read_to_string(save.join("metrics.prom")).unwrap();
    assert!(
        prom.contains(r#"agentry_eval_pass_hat_k{domain="mock",k="1"} 0"#),
        "{prom}"
    );
    let html = std::fs::read_to_string(save.join("report.html")).unwrap();
    assert!(
        html.contains("Mark task_1 as completed."),
        "the conversations are in the page"
    );
    let events = std::fs::read_to_string(save.join("events.jsonl")).unwrap();
    assert_eq!(events.lines().count(), 4);

    let o = run(&["eval", "view", save.to_str().unwrap()]);
    assert!(stdout(&o).contains("update_task_1"), "{}", stdout(&o));
    let o = run(&["eval", "replay", save.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("every reward reproduced"),
        "{}",
        stdout(&o)
    );

    // Bad input is a clear error: an unknown task, a domain that is not there.
    let o = run(&["eval", "--agent-a2a-endpoint", &base, "--task-ids", "nope"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("no task \"nope\""));
    let o = run(&["eval", "--agent-a2a-endpoint", &base, "--domain", "airline"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("no domain \"airline\""));
}

#[test]
fn a_running_evaluation_serves_its_figures_to_prometheus() {
    let (_server, base) = serve("echo", &[]);
    let dir = tempdir("prom");
    // Long conversations, so that the run is still going when the endpoint is read.
    let turns: Vec<String> = (0..40).map(|i| format!("\"message {i}\"")).collect();
    let script: Vec<String> = [
        "create_task_1",
        "update_task_1",
        "impossible_task_1",
        "create_task_1_nl_eval",
    ]
    .iter()
    .map(|t| format!("\"{t}\": [{}]", turns.join(",")))
    .collect();
    std::fs::write(dir.join("script.json"), format!("{{{}}}", script.join(","))).unwrap();
    let port = free_port();
    let mut child = Command::new(BIN)
        .args([
            "eval",
            "--agent-a2a-endpoint",
            &base,
            "--num-trials",
            "8",
            "--max-concurrency",
            "1",
        ])
        .args([
            "--task-ids",
            "create_task_1,update_task_1,impossible_task_1,create_task_1_nl_eval",
        ])
        .args(["--metrics-port", &port.to_string(), "--quiet"])
        .arg(format!(
            "--user-llm=scripted:{}",
            dir.join("script.json").display()
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(port);
    let body = crate::support::http_get(port, "/metrics");
    let _ = child.wait();
    assert!(body.starts_with("HTTP/1.1 200"), "{body}");
    assert!(
        body.contains("# TYPE agentry_eval_simulations gauge"),
        "{body}"
    );
    assert!(
        body.contains(r#"agentry_eval_simulations{domain="mock"}"#),
        "{body}"
    );
}

#[test]
fn an_agent_behind_a_token_is_evaluated_with_it_and_refuses_without() {
    let (_server, base) = serve("echo", &["--token", "s3cret"]);
    let dir = tempdir("token");
    let script = dir.join("script.json");
    std::fs::write(&script, r#"{"create_task_1": ["Create a task."]}"#).unwrap();
    let user = format!("scripted:{}", script.display());
    let eval = |save: &str, extra: &[&str]| {
        let save = dir.join(save);
        let mut args = vec![
            "eval",
            "--agent-a2a-endpoint",
            &base,
            "--task-ids",
            "create_task_1",
            "--user-llm",
            &user,
            "--max-retries",
            "0",
            "--quiet",
            "--save-to",
            save.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        stdout(&run(&args))
    };
    let out = eval("with", &["--agent-a2a-auth-token", "s3cret"]);
    assert!(out.contains("1 scored, 0 infrastructure errors"), "{out}");
    let out = eval("without", &[]);
    assert!(out.contains("0 scored, 1 infrastructure errors"), "{out}");
    assert!(
        out.contains("authentication required"),
        "the reason is listed: {out}"
    );
}

#[test]
fn the_embedded_model_as_agent_and_as_user() {
    let models = std::env::var_os("AGENTRY_MODELS").map_or_else(
        || {
            std::path::PathBuf::from(std::env::var("HOME").unwrap_or_default())
                .join(".cache/agentry/models")
        },
        std::path::PathBuf::from,
    );
    if agentry_testkit::require_path(
        agentry_testkit::Peer::Models,
        models.join("smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),
        "run scripts/fetch-models.sh",
    )
    .is_none()
    {
        return;
    }
    let port = free_port();
    let config = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/agents/eval-local.toml");
    let _server = Server(
        Command::new(BIN)
            .args([
                "serve",
                "--config",
                config.to_str().unwrap(),
                "--port",
                &port.to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for(port);
    let save = tempdir("local").join("run");
    let o = run(&[
        "eval",
        "--agent-a2a-endpoint",
        &format!("http://127.0.0.1:{port}/support"),
        "--domain",
        "mock",
        "--task-ids",
        "create_task_1",
        "--user-llm",
        "local",
        "--max-steps",
        "4",
        "--save-to",
        save.to_str().unwrap(),
        "--quiet",
    ]);
    let out = stdout(&o);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(save.join("results.json")).unwrap()).unwrap();
    let sim = &results["simulations"][0];
    assert_ne!(sim["termination_reason"], "infrastructure_error", "{sim}");
    let msgs = sim["messages"].as_array().unwrap();
    assert!(
        msgs.iter()
            .any(|m| m["role"] == "user" && m["content"].as_str().is_some_and(|c| !c.is_empty())),
        "the embedded model spoke as the user: {sim}"
    );
    assert!(
        msgs.iter().filter(|m| m["role"] == "assistant").count() >= 2,
        "and as the agent: {sim}"
    );
    assert!(results["info"]["user_info"]["llm"] == "local");
}

/// Natural-language assertions judged by a model on an OpenAI-compatible endpoint (here
/// `agentry model serve`, the embedded model): the verdicts are recorded, not "unjudged".
/// The verdicts' quality does not matter; the path does.
#[test]
fn a_judge_on_an_openai_compatible_endpoint_judges_statements() {
    let models = std::env::var_os("AGENTRY_MODELS").map_or_else(
        || {
            std::path::PathBuf::from(std::env::var("HOME").unwrap_or_default())
                .join(".cache/agentry/models")
        },
        std::path::PathBuf::from,
    );
    let Some(_) = agentry_testkit::require_path(
        agentry_testkit::Peer::Models,
        models.join("smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),
        "run scripts/fetch-models.sh",
    ) else {
        return;
    };
    let Some(retail) = agentry_testkit::require_path(
        agentry_testkit::Peer::Shared,
        agentry_testkit::shared_dir().join("tau2/domains/retail"),
        "the tau2 retail domain is in ../shared/tau2",
    ) else {
        return;
    };
    let port = free_port();
    let _judge = Server(
        Command::new(BIN)
            .args(["model", "serve", "--port", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for(port);
    let (_agent, base) = serve("echo", &[]);
    let dir = tempdir("judge");
    let script = dir.join("script.json");
    std::fs::write(&script, r#"{"2": ["I want to return some items."]}"#).unwrap();
    let save = dir.join("run");
    let o = run(&[
        "eval",
        "--agent-a2a-endpoint",
        &base,
        "--domain",
        retail.to_str().unwrap(),
        "--task-ids",
        "2",
        "--user-llm",
        &format!("scripted:{}", script.display()),
        "--judge-llm",
        "any",
        "--judge-llm-base-url",
        &format!("http://127.0.0.1:{port}/v1"),
        "--save-to",
        save.to_str().unwrap(),
        "--quiet",
    ]);
    let out = stdout(&o);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("0 unjudged"), "{out}");
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(save.join("results.json")).unwrap()).unwrap();
    let info = &results["simulations"][0]["reward_info"];
    let verdicts = info["nl_assertions"].as_array();
    assert!(
        verdicts.is_some_and(|v| v.iter().all(|c| c["met"].is_boolean())),
        "the judge's verdicts are recorded: {info}"
    );
}
