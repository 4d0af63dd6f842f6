//! The `agentry` binary end to end: serve a built-in agent, call it with the CLI.

use std::process::{Command, Output, Stdio};

use crate::support::{BIN, Server, free_port, http_get, post_json, run, serve, stdout, wait_for};

#[test]
fn serve_then_card_send_stream_get_cancel() {
    let (_server, url) = serve("echo", &[]);
    let card = run(&["a2a", "card", &url]);
    assert!(card.status.success());
    assert!(
        stdout(&card).starts_with("echo v") && stdout(&card).contains("(A2A 1.0, 0.3)"),
        "{}",
        stdout(&card)
    );

    let sent = run(&["a2a", "send", &url, "hello from the cli"]);
    assert!(sent.status.success());
    let text = stdout(&sent);
    assert!(
        text.contains("(completed)") && text.contains("hello from the cli"),
        "{text}"
    );

    let streamed = run(&["a2a", "send", &url, "streamed", "--stream"]);
    let text = stdout(&streamed);
    assert!(
        text.contains("[working]")
            && text.contains("[artifact echo] streamed")
            && text.contains("[completed]"),
        "{text}"
    );

    let json = run(&["a2a", "send", &url, "as json", "--json"]);
    let task: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let id = task["id"].as_str().unwrap();
    assert_eq!(task["kind"], "task");

    let got = run(&["a2a", "get", &url, id, "--json"]);
    let again: serde_json::Value = serde_json::from_slice(&got.stdout).unwrap();
    assert_eq!(again["status"]["state"], "completed");

    let cancel = run(&["a2a", "cancel", &url, id]);
    assert!(!cancel.status.success());
    let err = String::from_utf8_lossy(&cancel.stderr);
    assert!(
        err.contains("cannot be canceled") && err.contains("-32002"),
        "{err}"
    );
}

#[test]
fn a2a_calls_pick_binding_and_version() {
    let (_server, url) = serve("echo", &[]);
    let card = stdout(&run(&["a2a", "card", &url]));
    for iface in [
        "JSONRPC 1.0",
        "JSONRPC 0.3",
        "HTTP+JSON 1.0",
        "HTTP+JSON 0.3",
    ] {
        assert!(card.contains(&format!("interface: {iface}")), "{card}");
    }
    for extra in [
        &["--binding", "rest"][..],
        &["--a2a-version", "0.3"][..],
        &["--binding", "rest", "--a2a-version", "0.3"][..],
    ] {
        let mut args = vec!["a2a", "send", &url, "over any binding", "--stream"];
        args.extend_from_slice(extra);
        let out = run(&args);
        let text = stdout(&out);
        assert!(
            out.status.success() && text.contains("[artifact echo] over any binding"),
            "{extra:?}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let bad = run(&["a2a", "send", &url, "x", "--a2a-version", "2.0"]);
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("use 1.0 or 0.3"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}

#[test]
fn conformance_agent_continues_and_cancels_a_task() {
    let (_server, url) = serve("conformance", &["--store", "memory"]);
    let first = run(&["a2a", "send", &url, "turn one", "--json"]);
    let task: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    assert_eq!(task["status"]["state"], "working");
    let id = task["id"].as_str().unwrap();
    let next = run(&["a2a", "send", &url, "turn two", "--task", id, "--json"]);
    let task: serde_json::Value = serde_json::from_slice(&next.stdout).unwrap();
    assert_eq!(task["history"].as_array().unwrap().len(), 4);
    let canceled = run(&["a2a", "cancel", &url, id]);
    assert!(canceled.status.success());
    assert!(stdout(&canceled).contains("(canceled)"));
}

#[test]
fn errors_say_what_to_do() {
    let port = free_port();
    let out = run(&["a2a", "card", &format!("http://127.0.0.1:{port}")]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot connect") && err.contains("agentry serve"),
        "{err}"
    );

    let (_server, url) = serve("echo", &["--store", "memory", "--token", "s3cret"]);
    let out = run(&["a2a", "send", &url, "hi"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--token"), "{err}");
    let ok = run(&["a2a", "send", &url, "hi", "--token", "s3cret"]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
}

fn examples() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/agents")
}

#[test]
fn chat_with_a_configured_agent_shows_its_tool_calls() {
    use std::io::Write;
    let mut child = Command::new(BIN)
        .args(["chat", "--config"])
        .arg(examples().join("calculator.toml"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"What is (2 + 3) * 4?\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(stdout(&out).trim(), "(2 + 3) * 4 = 20");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("calling calculate({\"expression\":\"(2 + 3) * 4\"})")
            && err.contains("calculate returned: 20"),
        "{err}"
    );
}

/// `agentry serve --config examples/agents/agentry.toml` on a free port, once it listens.
fn serve_examples(extra: &[&str]) -> (Server, u16) {
    let port = free_port();
    let child = Command::new(BIN)
        .args(["serve", "--config"])
        .arg(examples().join("agentry.toml"))
        .args(["--port", &port.to_string()])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let server = Server(child);
    wait_for(port);
    (server, port)
}

#[test]
fn serve_config_serves_each_agent_at_its_path_with_an_index() {
    let (_server, port) = serve_examples(&[]);
    let base = format!("http://127.0.0.1:{port}");
    let card = run(&["a2a", "card", &format!("{base}/calculator"), "--json"]);
    let card: serde_json::Value = serde_json::from_slice(&card.stdout).unwrap();
    assert_eq!(card["name"], "calculator");
    assert_eq!(card["url"], format!("{base}/calculator"));
    assert_eq!(card["skills"][0]["examples"][0], "What is (2 + 3) * 4?");
    let sent = run(&[
        "a2a",
        "send",
        &format!("{base}/calculator"),
        "What is (2 + 3) * 4?",
    ]);
    assert!(
        stdout(&sent).contains("(2 + 3) * 4 = 20"),
        "{}",
        stdout(&sent)
    );
    let echo = run(&["a2a", "send", &format!("{base}/echo-bot"), "hello"]);
    assert!(stdout(&echo).contains("You said hello."));
    // The index lists both agents.
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "GET /agents HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    assert!(
        resp.contains("\"name\":\"calculator\"") && resp.contains("\"name\":\"echo-bot\""),
        "{resp}"
    );
}

/// `--token` guards configured agents as it guards built-in ones (it was silently ignored with
/// `--config`), and `--agent` with `--config` is refused instead of one of them being dropped.
#[test]
fn serve_config_with_a_token_requires_it() {
    let (_server, port) = serve_examples(&["--token", "s3cret"]);
    let url = format!("http://127.0.0.1:{port}/echo-bot");
    let denied = run(&["a2a", "send", &url, "hello"]);
    let err = String::from_utf8_lossy(&denied.stderr);
    assert!(!denied.status.success() && err.contains("--token"), "{err}");
    let ok = run(&["a2a", "send", &url, "hello", "--token", "s3cret"]);
    assert!(stdout(&ok).contains("You said hello."), "{}", stdout(&ok));

    let both = run(&["serve", "--config", "x.toml", "--agent", "echo"]);
    assert!(!both.status.success());
    assert!(
        String::from_utf8_lossy(&both.stderr).contains("cannot be used with"),
        "{}",
        String::from_utf8_lossy(&both.stderr)
    );
}

fn run_in(home: &std::path::Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("AGENTRY_HOME", home)
        .output()
        .unwrap()
}

#[test]
fn workflows_run_plan_and_resume_from_the_cli() {
    let home = std::env::temp_dir().join(format!("agentry-cli-flow-{}", std::process::id()));
    let cfg = examples().join("agentry.toml");
    let cfg = cfg.to_str().unwrap();
    let flow = examples().join("compute-report.yaml");
    let out = run_in(
        &home,
        &["workflow", "run", flow.to_str().unwrap(), "--config", cfg],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout(&out).trim(),
        "(2 + 3) * 4 = 20 (report: You said hello.)"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("▶ compute (calculator)") && err.contains("✓ report: You said hello."),
        "{err}"
    );

    // A finished run resumes to the same result without running anything again.
    let run_id = err
        .split("agentry workflow resume ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap();
    let again = run_in(&home, &["workflow", "resume", run_id, "--config", cfg]);
    assert!(again.status.success());
    assert_eq!(
        stdout(&again).trim(),
        "(2 + 3) * 4 = 20 (report: You said hello.)"
    );
    assert!(
        !String::from_utf8_lossy(&again.stderr).contains("▶"),
        "nothing re-ran"
    );
    let missing = run_in(
        &home,
        &["workflow", "resume", "no-such-run", "--config", cfg],
    );
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no run no-such-run to resume"));

    let plan = run_in(
        &home,
        &["plan", "Compute (2+3)*4 and report it", "--config", cfg],
    );
    let yaml = stdout(&plan);
    assert!(
        yaml.contains("agent: calculator") && yaml.contains("- compute"),
        "{yaml}"
    );
    let planned = run_in(
        &home,
        &["run", "Compute (2+3)*4 and report it", "--config", cfg],
    );
    assert!(
        planned.status.success(),
        "{}",
        String::from_utf8_lossy(&planned.stderr)
    );
    assert_eq!(stdout(&planned).trim(), "You said hello.");
}

#[test]
fn the_orchestrator_is_served_as_an_a2a_agent() {
    let port = free_port();
    let home = std::env::temp_dir().join(format!("agentry-cli-orch-{port}"));
    let child = Command::new(BIN)
        .args(["serve", "--config"])
        .arg(examples().join("agentry.toml"))
        .args(["--port", &port.to_string()])
        .env("AGENTRY_HOME", &home)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _server = Server(child);
    wait_for(port);
    let url = format!("http://127.0.0.1:{port}/orchestrator");
    let card: serde_json::Value =
        serde_json::from_slice(&run(&["a2a", "card", &url, "--json"]).stdout).unwrap();
    let skills: Vec<&str> = card["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(skills, ["compute-and-report", "plan"]);
    let out = run(&[
        "a2a",
        "send",
        &url,
        "Compute (2+3)*4 and report it",
        "--stream",
    ]);
    let text = stdout(&out);
    assert!(
        text.contains("planned 2 steps")
            && text.contains("step compute done")
            && text.contains("[completed] You said hello."),
        "{text}"
    );
}

#[test]
fn mcp_serve_is_usable_by_the_python_and_typescript_sdk_clients() {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = root.join(".venv-mcp/bin/python");
    if !python.exists() {
        agentry_testkit::missing::<()>(
            agentry_testkit::Peer::Interop,
            "PyPI mcp missing in .venv-mcp: run scripts/test.sh",
        );
        return;
    }
    let script = root.join("tests/interop/mcp_py_client.py");
    let check = |out: Output| {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["tools"], serde_json::json!(["calculate", "current_time"]));
        assert_eq!(v["result"], serde_json::json!(["20.0"]));
        assert_eq!(v["structured"], serde_json::json!({"result": 20.0}));
        assert_eq!(v["bad"]["isError"], true);
        assert!(
            v["bad"]["text"][0]
                .as_str()
                .unwrap()
                .contains("$.expression must be string")
        );
    };
    // stdio: the SDK client launches `agentry mcp serve builtin`.
    check(
        Command::new(&python)
            .arg(&script)
            .args(["stdio", BIN, "mcp", "serve", "builtin"])
            .output()
            .unwrap(),
    );
    // Streamable HTTP.
    let port = free_port();
    let child = Command::new(BIN)
        .args([
            "mcp",
            "serve",
            "builtin",
            "--http",
            &format!("127.0.0.1:{port}"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _server = Server(child);
    wait_for(port);
    check(
        Command::new(&python)
            .arg(&script)
            .args(["http", &format!("http://127.0.0.1:{port}/mcp")])
            .output()
            .unwrap(),
    );

    // The official TypeScript SDK client, both transports.
    let ts = root.join("tests/mcp-peers/ts_client_checks.mjs");
    if !root
        .join("tests/mcp-peers/node_modules/@modelcontextprotocol/sdk")
        .exists()
    {
        agentry_testkit::missing::<()>(
            agentry_testkit::Peer::Interop,
            "npm @modelcontextprotocol/sdk missing: run scripts/test.sh",
        );
        return;
    }
    let ts_check = |out: Output| {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["tools"], serde_json::json!(["calculate", "current_time"]));
        assert_eq!(v["result"], serde_json::json!(["20.0"]));
        assert_eq!(v["bad"]["isError"], true);
    };
    ts_check(
        Command::new("node")
            .arg(&ts)
            .args(["stdio", BIN, "mcp", "serve", "builtin"])
            .output()
            .unwrap(),
    );
    ts_check(
        Command::new("node")
            .arg(&ts)
            .args(["http", &format!("http://127.0.0.1:{port}/mcp")])
            .output()
            .unwrap(),
    );
}

#[tokio::test]
async fn agentry_agents_use_agentry_tools_over_mcp() {
    let spec = agentry::mcp::McpServerSpec::stdio("agentry", BIN, &["mcp", "serve", "builtin"]);
    let client = agentry::mcp::McpClient::connect(spec, &agentry::mcp::LaunchPolicy::any())
        .await
        .unwrap();
    assert_eq!(client.protocol_version().await.unwrap(), "2026-07-28");
    // Issue 18, item 7: 10k nested parentheses aborted the server (stack overflow); now a
    // tool error, and the server goes on.
    let mut args = serde_json::Map::new();
    let deep = format!("{}1{}", "(".repeat(10_000), ")".repeat(10_000));
    args.insert("expression".into(), serde_json::json!(deep));
    let r = client.call("calculate", args).await.unwrap();
    assert_eq!(r.is_error, Some(true), "{r:?}");
    let mut args = serde_json::Map::new();
    args.insert("expression".into(), serde_json::json!("2^10"));
    let r = client.call("calculate", args).await.unwrap();
    assert_eq!(
        agentry::mcp::map_result("agentry", "calculate", r)
            .unwrap()
            .text,
        "1024.0"
    );
}

/// The embedded models are fetched (`scripts/fetch-models.sh`); say SKIPPED when not, unless
/// the test command requires them.
fn have_models() -> bool {
    let dir = std::env::var_os("AGENTRY_MODELS").map_or_else(
        || {
            std::path::PathBuf::from(std::env::var("HOME").unwrap_or_default())
                .join(".cache/agentry/models")
        },
        std::path::PathBuf::from,
    );
    let ok = dir.join("smollm2/SmolLM2-135M-Instruct.Q4_1.gguf").exists();
    ok || agentry_testkit::missing::<()>(
        agentry_testkit::Peer::Models,
        format!(
            "embedded models missing in {}: run scripts/fetch-models.sh",
            dir.display()
        ),
    )
    .is_some()
}

#[test]
fn an_agent_on_the_embedded_model_and_the_openai_compatible_endpoint() {
    if !have_models() {
        return;
    }
    // An agent on the local model, served over A2A, answers through its calculator tool.
    let port = free_port();
    let config = examples().join("local.toml");
    let server = Server(
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
    let url = format!("http://127.0.0.1:{port}/assistant");
    let o = run(&["a2a", "send", &url, "What is 17 * 23?", "--stream"]);
    let out = stdout(&o);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("calculate"), "{out}");
    assert!(
        out.contains("391"),
        "the tool's result is in the stream: {out}"
    );
    assert!(out.contains("completed"), "{out}");
    drop(server);

    // `agentry model serve`: the OpenAI-compatible endpoint lists both models.
    let port = free_port();
    let _server = Server(
        Command::new(BIN)
            .args(["model", "serve", "--port", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for(port);
    let models = http_get(port, "/v1/models");
    assert!(models.starts_with("HTTP/1.1 200"), "{models}");
    assert!(
        models.contains("all-minilm-l6-v2") && models.contains("\"object\":\"list\""),
        "{models}"
    );

    // Issue 18, item 4: a 2.8 KB request whose schema nests 31 definitions, each using the
    // previous one twice, aborted the server (2^31 nodes expanded inline). Now it is answered
    // and the server goes on.
    let mut defs = serde_json::Map::new();
    defs.insert("d0".into(), serde_json::json!({"type": "integer"}));
    for i in 1..=31 {
        let prev = format!("#/$defs/d{}", i - 1);
        defs.insert(
            format!("d{i}"),
            serde_json::json!({"type": "object", "properties": {"a": {"$ref": prev}, "b": {"$ref": prev}},
                               "required": ["a", "b"]}),
        );
    }
    let bomb = serde_json::json!({
        "model": "any", "max_tokens": 8,
        "messages": [{"role": "user", "content": "numbers"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "n",
            "schema": {"$defs": defs, "$ref": "#/$defs/d31"}}}
    })
    .to_string();
    assert!(bomb.len() < 4096, "{} bytes", bomb.len());
    let answer = post_json(port, "/v1/chat/completions", &bomb);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let models = http_get(port, "/v1/models");
    assert!(
        models.starts_with("HTTP/1.1 200"),
        "the server lives on: {models}"
    );
}

/// The data agent served over A2A: a JSON request in; rows, statistics and a chart (PNG and SVG
/// file parts, also saved in --output) out.
#[test]
fn the_data_agent_over_a2a() {
    let penguins = std::env::var_os("AGENTRY_DATA")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/agentry/data")
        })
        .join("penguins/penguins.csv");
    if !penguins.exists() {
        agentry_testkit::missing::<()>(
            agentry_testkit::Peer::Models,
            "penguins.csv missing: run scripts/fetch-data.sh",
        );
        return;
    }
    let out = std::env::temp_dir().join(format!("agentry-cli-data-{}", std::process::id()));
    let folder = penguins.parent().unwrap().to_str().unwrap().to_owned();
    let (_server, url) = serve(
        "data",
        &[
            "--store",
            "memory",
            "--output",
            out.to_str().unwrap(),
            "--data",
            &folder,
        ],
    );
    let card = stdout(&run(&["a2a", "card", &url]));
    assert!(
        card.contains("Data Analyst") && card.contains("analyze_data"),
        "{card}"
    );
    let request = serde_json::json!({
        "source": "penguins.csv",
        "sql": "SELECT island, avg(flipper_length_mm) AS flipper FROM penguins GROUP BY island ORDER BY island",
        "analyze": true,
        "chart": {"kind": "bar", "x": "island", "y": "flipper", "title": "Flipper by island"}
    });
    let o = run(&["a2a", "send", &url, &request.to_string(), "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let task: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(task["status"]["state"], "completed", "{task}");
    let parts = task["artifacts"][0]["parts"].as_array().unwrap();
    let text = parts[0]["text"].as_str().unwrap();
    assert!(
        text.contains("| Biscoe |") && text.contains("Statistics:"),
        "{text}"
    );
    assert_eq!(parts[1]["data"]["rows"].as_array().unwrap().len(), 3);
    let files: Vec<&str> = parts
        .iter()
        .filter_map(|p| p["file"]["mimeType"].as_str())
        .collect();
    assert_eq!(files, ["image/png", "image/svg+xml"]);
    assert!(out.join("flipper-by-island.png").exists());
    // A request that is not one gets a failed task with the reason, not a crash.
    let o = run(&["a2a", "send", &url, "what about penguins?", "--json"]);
    let task: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
    let all = format!("{task}{}", String::from_utf8_lossy(&o.stderr));
    assert!(all.contains("send a data request as JSON"), "{all}");
}

/// `agentry audit`: `verify` passes an intact log and names the first tampered record,
/// `show --correlation` prints one request's path in order, `head` prints what `verify
/// --head` later checks.
#[test]
fn audit_verify_show_and_head() {
    use agentry::governance::{AuditLog, Event};
    let home = agentry_testkit::Scratch::new("cli-audit");
    let db = home.join("audit.db");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let log = AuditLog::open(&db).unwrap();
        for (actor, agent, decision, corr) in [
            ("jwt:alice", "orchestrator", "allow", "req-1"),
            ("orchestrator", "knowledge", "allow", "req-1"),
            ("jwt:bob", "mail", "deny", "req-2"),
            ("orchestrator", "mail", "allow", "req-1"),
        ] {
            let e = Event::new("authz", actor)
                .agent(agent)
                .decision(decision)
                .correlation(corr);
            log.append(e).await.unwrap();
        }
    });
    let ok = run_in(&home, &["audit", "verify"]);
    assert!(ok.status.success(), "{ok:?}");
    assert!(stdout(&ok).contains("ok: 4 records"), "{}", stdout(&ok));
    let head = stdout(&run_in(&home, &["audit", "head"])).trim().to_owned();
    assert!(head.starts_with("4:"), "{head}");

    let shown = stdout(&run_in(&home, &["audit", "show", "--correlation", "req-1"]));
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(lines.len(), 3, "{shown}");
    assert!(lines[0].starts_with("#1 ") && lines[0].contains("jwt:alice -> orchestrator: allow"));
    assert!(lines[2].starts_with("#4 ") && lines[2].contains("orchestrator -> mail: allow"));
    let none = run_in(&home, &["audit", "show", "--correlation", "nope"]);
    assert!(!none.status.success());

    // bob's refusal rewritten as an allow
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "DROP TRIGGER audit_no_update; UPDATE audit SET decision = 'allow' WHERE seq = 3;",
    )
    .unwrap();
    let bad = run_in(&home, &["audit", "verify"]);
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("tampered at record 3"), "{err}");
    let bad = run_in(&home, &["audit", "verify", "--head", &head]);
    assert!(!bad.status.success());
}

/// `agentry audit --store postgres://...`: the chain replicas share in PostgreSQL, read as
/// the SQLite log is: `verify`, `head`, `show`, and an edit found at its record (the key from
/// the environment, as `audit_key` would give it).
#[cfg(feature = "postgres")]
#[test]
fn audit_reads_the_chain_in_postgresql() {
    use agentry::governance::Event;
    use agentry::governance::audit::AuditKey;
    let url = std::env::var("AGENTRY_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let chain = format!("cli-{}", agentry::a2a::new_id());
    let key = "9a".repeat(32);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let Some(db) = rt.block_on(async {
        match agentry::postgres::Database::connect(&url).await {
            Ok(db) => Some(db),
            Err(e) => agentry_testkit::missing(
                agentry_testkit::Peer::Postgres,
                format!("no PostgreSQL at {url} ({e})"),
            ),
        }
    }) else {
        return;
    };
    rt.block_on(async {
        let log =
            agentry::postgres::PgAuditLog::open(&db, &chain, &AuditKey::Hex(key.clone())).unwrap();
        for (actor, corr) in [
            ("jwt:alice", "req-1"),
            ("jwt:bob", "req-2"),
            ("orchestrator", "req-1"),
        ] {
            log.append(
                Event::new("authz", actor)
                    .agent("mail")
                    .decision("allow")
                    .correlation(corr),
            )
            .await
            .unwrap();
        }
    });
    let trail = [
        "--store",
        url.as_str(),
        "--key",
        "env:AUDIT_TEST_KEY",
        "--chain",
        chain.as_str(),
    ];
    let audit = |args: &[&str]| {
        let mut all = vec!["audit"];
        all.extend_from_slice(args);
        all.extend_from_slice(&trail);
        Command::new(BIN)
            .args(&all)
            .env("AUDIT_TEST_KEY", &key)
            .output()
            .unwrap()
    };
    let ok = audit(&["verify"]);
    assert!(ok.status.success(), "{ok:?}");
    assert!(stdout(&ok).contains("ok: 3 records"), "{}", stdout(&ok));
    let head = stdout(&audit(&["head"])).trim().to_owned();
    assert!(head.starts_with("3:"), "{head}");
    let shown = stdout(&audit(&["show", "--correlation", "req-1"]));
    assert_eq!(shown.lines().count(), 2, "{shown}");
    assert!(shown.contains("jwt:alice -> mail: allow"), "{shown}");
    rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        client
            .batch_execute(&format!(
                "BEGIN; ALTER TABLE agentry_audit DISABLE TRIGGER agentry_audit_no_change;
                 UPDATE agentry_audit SET actor = 'jwt:mallory' WHERE chain = '{chain}' AND seq = 2;
                 ALTER TABLE agentry_audit ENABLE TRIGGER agentry_audit_no_change; COMMIT"
            ))
            .await
            .unwrap();
    });
    let bad = audit(&["verify"]);
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("tampered at record 2"), "{err}");
}

/// `serve --audit`: the refused and the let-through calls are in the audit trail, which
/// `audit verify` finds intact while the server keeps appending.
#[test]
fn serve_with_audit_records_every_decision() {
    use agentry::governance::AuditLog;
    let home = agentry_testkit::Scratch::new("cli-served-audit");
    let (_server, url) = crate::support::serve_in(&home, "echo", &["--token", "s3cret", "--audit"]);
    let denied = run(&["a2a", "send", &url, "hello"]);
    assert!(!denied.status.success());
    let ok = run(&["a2a", "send", &url, "hello", "--token", "s3cret"]);
    assert!(stdout(&ok).contains("(completed)"), "{}", stdout(&ok));
    let verified = run_in(&home, &["audit", "verify"]);
    assert!(verified.status.success(), "{verified:?}");
    let log = AuditLog::open(&home.join("audit.db")).unwrap();
    let records = log.records(1, 100).unwrap();
    let denials: Vec<_> = records
        .iter()
        .filter(|r| r.event.decision.as_deref() == Some("deny"))
        .collect();
    assert_eq!(denials.len(), 1, "{records:#?}");
    assert_eq!(denials[0].event.actor, "anonymous");
    let sends: Vec<_> = records
        .iter()
        .filter(|r| r.event.skill.as_deref() == Some("message/send"))
        .collect();
    assert_eq!(sends.len(), 1, "{records:#?}");
    assert_eq!(sends[0].event.decision.as_deref(), Some("allow"));
    assert!(sends[0].event.actor.starts_with("bearer:"), "{records:#?}");
    assert_eq!(sends[0].event.agent.as_deref(), Some("echo"));
}

/// `agentry agents`: the capability registry of a config, remote agents as their cards say
/// (description and skills read from the card, not the config), as text or JSON.
#[test]
fn agents_lists_the_registry_from_the_cards() {
    let (_server, url) = serve("echo", &[]);
    let dir = agentry_testkit::Scratch::new("cli-agents");
    let config = dir.join("agentry.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nstore = \"memory\"\n[[remotes]]\nname = \"repeater\"\nurl = \"{url}\"\ndescription = \"as configured\"\n"
        ),
    )
    .unwrap();
    let config = config.to_string_lossy().into_owned();
    let o = run(&["agents", "--config", &config]);
    assert!(o.status.success(), "{o:?}");
    let text = stdout(&o);
    assert!(text.contains("repeater: Echoes every message"), "{text}");
    assert!(text.contains("skill echo"), "{text}");
    let o = run(&["agents", "--config", &config, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v[0]["name"], "repeater");
    assert_eq!(v[0]["skills"], serde_json::json!(["echo"]));
}
