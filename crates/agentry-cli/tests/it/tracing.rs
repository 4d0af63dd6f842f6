//! OpenTelemetry: one trace for a multi-agent request, across two `agentry serve` processes
//! and the official Python MCP SDK, decoded by the OpenTelemetry project's own protobuf
//! definitions (`tests/interop/otlp_receiver.py`).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Server, free_port, post_json_with, serve_config};

/// The collector: the receiver script in the MCP peers' virtualenv, writing spans to `out`.
fn collector(python: &Path, out: &Path) -> (Server, u16) {
    let root = agentry_testkit::repo_root();
    let mut child: Child = Command::new(python)
        .arg(root.join("tests/interop/otlp_receiver.py"))
        .arg(out)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line.trim().parse().unwrap_or_else(|_| panic!("{line:?}"));
    (Server(child), port)
}

/// `agentry serve --config` exporting to the collector as `service`.
fn serve(config: &Path, port: u16, collector: u16, service: &str, python: &Path) -> Server {
    let endpoint = format!("http://127.0.0.1:{collector}");
    serve_config(
        config,
        port,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_ref()),
            ("OTEL_SERVICE_NAME", service.as_ref()),
            ("OTEL_BSP_SCHEDULE_DELAY", "100".as_ref()),
            ("AGENTRY_MCP_ALLOW", python.as_os_str()),
        ],
    )
}

/// Stops a server as an operator would (SIGTERM), so it flushes its spans.
fn terminate(mut s: Server) {
    let _ = Command::new("kill")
        .args(["-TERM", &s.0.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = s.0.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn spans(out: &Path) -> Vec<Value> {
    std::fs::read_to_string(out)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn attr<'a>(s: &'a Value, key: &str) -> &'a Value {
    &s["attributes"][key]
}

#[test]
fn one_trace_covers_a_request_across_agents_and_an_mcp_server() {
    let root = agentry_testkit::repo_root();
    let python = root.join(".venv-mcp/bin/python");
    let ready = python.exists()
        && Command::new(&python)
            .args([
                "-c",
                "import mcp, opentelemetry.sdk, opentelemetry.exporter.otlp.proto.http",
            ])
            .status()
            .is_ok_and(|s| s.success());
    if !ready {
        agentry_testkit::missing::<()>(
            agentry_testkit::Peer::Interop,
            "PyPI mcp and opentelemetry-sdk missing in .venv-mcp: run scripts/test.sh",
        );
        return;
    }
    let dir = agentry_testkit::Scratch::new("trace");
    for d in ["worker", "orchestrator"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    let out = dir.join("spans.jsonl");
    let (receiver, otlp) = collector(&python, &out);

    // The worker: a ReAct agent whose (scripted) model calls the Python MCP server's echo.
    let transcript = dir.join("worker/transcript.json");
    std::fs::write(
        &transcript,
        json!({"capabilities": {"native_tools": true}, "entries": [
            {"response": {"message": {"role": "assistant", "content": "",
                "tool_calls": [{"id": "call_1", "name": "py__echo",
                                "arguments": {"message": "traced"}}]},
                "usage": {"prompt_tokens": 42, "completion_tokens": 7},
                "finish_reason": "tool_calls"}},
            {"response": {"message": {"role": "assistant", "content": "",
                "tool_calls": [{"id": "call_2", "name": "finish",
                                "arguments": {"answer": "echoed: traced"}}]},
                "usage": {"prompt_tokens": 60, "completion_tokens": 5},
                "finish_reason": "tool_calls"}}
        ]})
        .to_string(),
    )
    .unwrap();
    let worker_port = free_port();
    let worker_toml = dir.join("worker/agentry.toml");
    std::fs::write(
        &worker_toml,
        format!(
            r#"
            [server]
            store = "memory"
            [[agents]]
            path = "/worker"
            [agents.agent]
            name = "worker"
            [agents.agent.model]
            provider = "scripted"
            transcript = "{transcript}"
            [[agents.agent.mcp_servers]]
            name = "py"
            command = "{python}"
            args = ["{script}", "stdio"]
            env = {{ OTEL_SERVICE_NAME = "mcp-py" }}
            "#,
            transcript = transcript.display(),
            python = python.display(),
            script = root.join("tests/interop/mcp_py_server.py").display(),
        ),
    )
    .unwrap();
    // The orchestrator: one workflow whose step asks the worker, over A2A.
    let orch_port = free_port();
    std::fs::write(
        dir.join("orchestrator/echo.yaml"),
        "name: echo-remote\ndescription: Has the worker echo.\nsteps:\n  - id: ask\n    agent: worker\n    input: \"Echo traced\"\n",
    )
    .unwrap();
    let orch_toml = dir.join("orchestrator/agentry.toml");
    std::fs::write(
        &orch_toml,
        format!(
            r#"
            [server]
            store = "memory"
            [[remotes]]
            name = "worker"
            url = "http://127.0.0.1:{worker_port}/worker"
            [orchestrator]
            path = "/orchestrator"
            workflows = ["echo.yaml"]
            "#
        ),
    )
    .unwrap();
    let worker = serve(&worker_toml, worker_port, otlp, "worker-proc", &python);
    let orchestrator = serve(&orch_toml, orch_port, otlp, "orchestrator-proc", &python);

    // A caller's trace and correlation id.
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let caller_span = "00f067aa0ba902b7";
    let send = json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {
        "message": {"role": "user", "messageId": "m-trace-1",
            "parts": [{"kind": "text", "text": "go"}],
            "metadata": {"urn:agentry:a2a:task-envelope:v1": {"correlationId": "corr-trace-1"}}},
        "configuration": {"blocking": true}}});
    let raw = post_json_with(
        orch_port,
        "/orchestrator/",
        &send.to_string(),
        &[("traceparent", &format!("00-{trace}-{caller_span}-01"))],
    );
    assert!(raw.contains("echoed: traced"), "{raw}");

    terminate(orchestrator);
    terminate(worker);
    // Wait until the spans of all three processes have arrived.
    let deadline = Instant::now() + Duration::from_secs(20);
    let all = loop {
        let all = spans(&out);
        let services = |s: &str| all.iter().any(|x| x["service"] == s);
        if ["orchestrator-proc", "worker-proc", "mcp-py"]
            .iter()
            .all(|s| services(s))
            || Instant::now() > deadline
        {
            break all;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    drop(receiver);
    let in_trace: Vec<&Value> = all.iter().filter(|s| s["trace_id"] == trace).collect();
    let names: Vec<String> = in_trace
        .iter()
        .map(|s| format!("{}:{}:{}", s["service"], s["kind"], s["name"]))
        .collect();
    let find = |service: &str, kind: &str, name: &str| -> &Value {
        in_trace
            .iter()
            .find(|s| s["service"] == service && s["kind"] == kind && s["name"] == name)
            .unwrap_or_else(|| panic!("no {service} {kind} span {name:?} in {names:#?}"))
    };

    // The orchestrator's request continues the caller's span.
    let entry = find("orchestrator-proc", "server", "message/send");
    assert_eq!(entry["parent_span_id"], caller_span);
    assert_eq!(attr(entry, "rpc.method"), "message/send");
    assert_eq!(attr(entry, "http.response.status_code"), 200);
    // Its calls to the worker (the send, then following the task) are client spans under the
    // workflow step, and each request the worker served names one of them as its parent.
    let step = find("orchestrator-proc", "internal", "workflow step ask");
    assert_eq!(attr(step, "gen_ai.agent.name"), "worker");
    let calls: Vec<&Value> = in_trace
        .iter()
        .copied()
        .filter(|s| s["service"] == "orchestrator-proc" && s["kind"] == "client")
        .collect();
    assert!(!calls.is_empty(), "no A2A client span in {names:#?}");
    let served: Vec<&Value> = in_trace
        .iter()
        .copied()
        .filter(|s| s["service"] == "worker-proc" && s["kind"] == "server")
        .collect();
    assert!(!served.is_empty(), "no worker request span in {names:#?}");
    for s in &served {
        assert!(
            calls.iter().any(|c| c["span_id"] == s["parent_span_id"]),
            "{s:#} has no caller span: {names:#?}"
        );
    }
    // The step, the agent run, the model call with its tokens (GenAI conventions), the tool.
    let run = find("worker-proc", "internal", "invoke_agent worker");
    let send = served
        .iter()
        .find(|s| s["span_id"] == run["parent_span_id"])
        .unwrap_or_else(|| panic!("the agent's run is not under a request: {names:#?}"));
    assert!(
        ["SendMessage", "message/send"].contains(&send["name"].as_str().unwrap()),
        "{send:#}"
    );
    // Two model calls, one per step; the first asked for the tool.
    let step1 = find("worker-proc", "internal", "react step 1");
    let chat = in_trace
        .iter()
        .find(|s| s["name"] == "chat transcript" && s["parent_span_id"] == step1["span_id"])
        .unwrap_or_else(|| panic!("no model call in step 1: {names:#?}"));
    assert_eq!(
        in_trace
            .iter()
            .filter(|s| s["name"] == "chat transcript")
            .count(),
        2
    );
    assert_eq!(attr(chat, "gen_ai.operation.name"), "chat");
    assert_eq!(attr(chat, "gen_ai.provider.name"), "agentry.scripted");
    assert_eq!(attr(chat, "gen_ai.usage.input_tokens"), 42);
    assert_eq!(attr(chat, "gen_ai.usage.output_tokens"), 7);
    assert_eq!(attr(chat, "gen_ai.response.finish_reasons"), "tool_calls");
    assert_eq!(attr(step1, "agentry.react.iteration"), 1);
    assert_eq!(step1["parent_span_id"], run["span_id"]);
    let tool = find("worker-proc", "internal", "execute_tool py__echo");
    assert_eq!(tool["parent_span_id"], step1["span_id"]);
    assert_eq!(attr(tool, "gen_ai.tool.call.id"), "call_1");
    // The MCP call carries its context in `_meta`: the Python SDK's own server span is its
    // child, in the same trace.
    let mcp_call = find("worker-proc", "client", "tools/call echo");
    assert_eq!(mcp_call["parent_span_id"], tool["span_id"]);
    let mcp_served = find("mcp-py", "server", "tools/call echo");
    assert_eq!(
        mcp_served["parent_span_id"], mcp_call["span_id"],
        "{names:#?}"
    );
    assert_eq!(attr(mcp_served, "gen_ai.tool.name"), "echo");

    // Every agentry span of the request carries its correlation id.
    let ours: Vec<&&Value> = in_trace
        .iter()
        .filter(|s| s["service"] != "mcp-py")
        .collect();
    assert!(ours.len() >= 10, "{names:#?}");
    for s in &ours {
        assert_eq!(attr(s, "agentry.correlation_id"), "corr-trace-1", "{s:#}");
    }
    // Nothing of the request strayed into another trace.
    let strays: Vec<&Value> = all
        .iter()
        .filter(|s| s["trace_id"] != trace && s["attributes"]["agentry.correlation_id"].is_string())
        .collect();
    assert!(strays.is_empty(), "{strays:#?}");
}
