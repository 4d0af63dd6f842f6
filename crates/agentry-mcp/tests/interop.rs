//! Against real MCP servers from the registries: npm `@modelcontextprotocol/server-everything`
//! (stdio and Streamable HTTP), `server-filesystem`, `server-memory` (stdio), and a server on
//! PyPI `mcp` 2.x (stdio and HTTP, the 2026-07-28 revision). Installed by `scripts/test.sh`.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use agentry_core::llm::ToolCall;
use agentry_core::tools::ToolError;
use agentry_mcp::*;
use serde_json::{Map, Value, json};

fn root() -> PathBuf {
    agentry_testkit::repo_root()
}

fn missing(what: &str) -> Option<()> {
    agentry_testkit::missing(
        agentry_testkit::Peer::Interop,
        format!("{what} is missing: run scripts/test.sh, which installs it"),
    )
}

fn npm_server(pkg: &str) -> Option<String> {
    let p = root().join(format!(
        "tests/mcp-peers/node_modules/@modelcontextprotocol/{pkg}/dist/index.js"
    ));
    if p.exists() {
        Some(p.display().to_string())
    } else {
        missing(&format!("npm @modelcontextprotocol/{pkg}"))?;
        None
    }
}

fn py() -> Option<(String, String)> {
    let python = root().join(".venv-mcp/bin/python");
    if python.exists() {
        Some((
            python.display().to_string(),
            root()
                .join("tests/interop/mcp_py_server.py")
                .display()
                .to_string(),
        ))
    } else {
        missing("PyPI mcp (in .venv-mcp)")?;
        None
    }
}

fn args(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

use agentry_testkit::free_port;

struct Child(tokio::process::Child);
impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.start_kill();
    }
}

/// Starts server-everything in `mode` (`streamableHttp`, `sse`) on `port`.
async fn node_server(js: &str, mode: &str, port: u16) -> Child {
    let child = Child(
        tokio::process::Command::new("node")
            .args([js, mode])
            .env("PORT", port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap(),
    );
    wait_port(port).await;
    child
}

async fn wait_port(port: u16) {
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("nothing listens on {port}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_over_stdio() {
    let Some(js) = npm_server("server-everything") else {
        return;
    };
    let spec = McpServerSpec::stdio("everything", "node", &[&js, "stdio"]);
    let tools = McpTools::connect(&[spec], &LaunchPolicy::any())
        .await
        .unwrap();
    let reg = tools.registry().await.unwrap();
    let names = reg.names();
    assert!(names.len() >= 10, "{names:?}");
    assert!(
        names.contains(&"everything__echo") && names.contains(&"everything__get-sum"),
        "{names:?}"
    );

    let call = |name: &str, a: Value| ToolCall {
        id: "1".into(),
        name: name.into(),
        arguments: a,
    };
    let r = reg
        .call(&call("everything__echo", json!({"message": "hi"})))
        .await;
    assert_eq!(r.output.unwrap().text, "Echo: hi");
    let r = reg
        .call(&call("everything__get-sum", json!({"a": 2, "b": 3})))
        .await;
    assert!(r.output.unwrap().text.contains('5'));
    // structuredContent becomes data.
    let r = reg
        .call(&call(
            "everything__get-structured-content",
            json!({"location": "Chicago"}),
        ))
        .await
        .output
        .unwrap();
    let structured = &r.data.unwrap()["structured"];
    assert!(structured["temperature"].is_number(), "{structured}");
    // Images become listed files.
    let r = reg
        .call(&call("everything__get-tiny-image", json!({})))
        .await
        .output
        .unwrap();
    let files = r.data.unwrap()["files"].as_array().unwrap().clone();
    assert_eq!(files[0]["kind"], "image");
    assert_eq!(files[0]["mimeType"], "image/png");
    // Bad arguments are refused by our schema check before reaching the server.
    let r = reg
        .call(&call("everything__get-sum", json!({"a": "two"})))
        .await;
    assert!(
        matches!(r.output, Err(ToolError::InvalidArguments { .. })),
        "{r:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_over_streamable_http() {
    let Some(js) = npm_server("server-everything") else {
        return;
    };
    let port = free_port();
    let _server = node_server(&js, "streamableHttp", port).await;
    let spec = McpServerSpec::http("everything", &format!("http://127.0.0.1:{port}/mcp"));
    let client = McpClient::connect(spec, &LaunchPolicy::default())
        .await
        .unwrap();
    let tools = client.list_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "echo"));
    let r = client
        .call("echo", args(json!({"message": "over http"})))
        .await
        .unwrap();
    let out = map_result("everything", "echo", r).unwrap();
    assert_eq!(out.text, "Echo: over http");
    // An unknown tool comes back as an error the model can react to, not a crash.
    let r = client.call("no-such-tool", Map::new()).await;
    match r {
        Ok(res) => assert!(map_result("everything", "no-such-tool", res).is_err()),
        Err(e) => assert!(e.to_string().contains("everything"), "{e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filesystem_and_memory_servers_over_stdio() {
    let (Some(fs), Some(mem)) = (npm_server("server-filesystem"), npm_server("server-memory"))
    else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("agentry-mcp-fs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("hello.txt"), "hello from a file").unwrap();
    let mut memory = McpServerSpec::stdio("memory", "node", &[&mem]);
    memory.env.insert(
        "MEMORY_FILE_PATH".into(),
        dir.join("memory.json").display().to_string(),
    );
    let mut files = McpServerSpec::stdio("fs", "node", &[&fs, dir.to_str().unwrap()]);
    files.allow_tools = vec!["read_*".into(), "list_*".into()];
    let tools = McpTools::connect(&[files, memory], &LaunchPolicy::any())
        .await
        .unwrap();
    let reg = tools.registry().await.unwrap();
    let names = reg.names();
    assert!(
        names.iter().all(|n| n.starts_with("fs__read_")
            || n.starts_with("fs__list_")
            || n.starts_with("memory__")),
        "{names:?}"
    );
    assert!(!names.contains(&"fs__write_file"), "filtered out");
    let r = reg
        .call(&ToolCall {
            id: "1".into(),
            name: "fs__read_text_file".into(),
            arguments: json!({"path": dir.join("hello.txt")}),
        })
        .await;
    assert_eq!(r.output.unwrap().text, "hello from a file");
    let r = reg
        .call(&ToolCall {
            id: "2".into(),
            name: "memory__create_entities".into(),
            arguments: json!({"entities": [{"name": "Hamlet", "entityType": "prince", "observations": ["Danish"]}]}),
        })
        .await;
    assert!(r.output.is_ok(), "{r:?}");
    let r = reg
        .call(&ToolCall {
            id: "3".into(),
            name: "memory__read_graph".into(),
            arguments: json!({}),
        })
        .await;
    assert!(r.output.unwrap().text.contains("Hamlet"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_server_on_both_transports_and_a_crash_restart() {
    let Some((python, script)) = py() else { return };
    // stdio (negotiates the newest revision the server speaks)
    let spec = McpServerSpec::stdio("py", &python, &[&script, "stdio"]);
    let client = McpClient::connect(spec, &LaunchPolicy::any())
        .await
        .unwrap();
    let r = client
        .call("add", args(json!({"a": 2, "b": 40})))
        .await
        .unwrap();
    assert_eq!(map_result("py", "add", r).unwrap().text, "42");
    // The server crashes; the next call restarts it.
    let crashed = client.call("crash", Map::new()).await;
    assert!(crashed.is_err(), "{crashed:?}");
    let r = client
        .call("echo", args(json!({"message": "back"})))
        .await
        .unwrap();
    assert_eq!(map_result("py", "echo", r).unwrap().text, "back");

    // Streamable HTTP
    let port = free_port();
    let _server = Child(
        tokio::process::Command::new(&python)
            .args([script.as_str(), "http", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap(),
    );
    wait_port(port).await;
    let client = McpClient::connect(
        McpServerSpec::http("pyhttp", &format!("http://127.0.0.1:{port}/mcp")),
        &LaunchPolicy::default(),
    )
    .await
    .unwrap();
    let r = client
        .call("echo", args(json!({"message": "http"})))
        .await
        .unwrap();
    assert_eq!(map_result("pyhttp", "echo", r).unwrap().text, "http");
    // A call that outlives its inactivity timeout is canceled and reported.
    let mut slow = McpServerSpec::http("pyslow", &format!("http://127.0.0.1:{port}/mcp"));
    slow.timeout_secs = 0.3;
    let slow = McpClient::connect(slow, &LaunchPolicy::default())
        .await
        .unwrap();
    let e = slow
        .call("sleep", args(json!({"seconds": 5})))
        .await
        .unwrap_err();
    assert!(matches!(e, McpError::Timeout { .. }), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fan_out_returns_every_server_and_a_hung_one_stalls_nothing() {
    let (Some((python, script)), Some(js)) = (py(), npm_server("server-everything")) else {
        return;
    };
    let a = McpClient::connect(
        McpServerSpec::stdio("py", &python, &[&script, "stdio"]),
        &LaunchPolicy::any(),
    )
    .await
    .unwrap();
    let b = McpClient::connect(
        McpServerSpec::stdio("everything", "node", &[&js, "stdio"]),
        &LaunchPolicy::any(),
    )
    .await
    .unwrap();
    let calls = vec![
        (
            a.clone(),
            "echo".to_owned(),
            args(json!({"message": "from py"})),
        ),
        (
            b.clone(),
            "echo".to_owned(),
            args(json!({"message": "from js"})),
        ),
        (a.clone(), "sleep".to_owned(), args(json!({"seconds": 30}))),
    ];
    let results = fan_out(calls, 4, Duration::from_millis(1500)).await;
    assert_eq!(results[0].result.as_ref().unwrap().text, "from py");
    assert_eq!(results[1].result.as_ref().unwrap().text, "Echo: from js");
    assert!(
        results[2]
            .result
            .as_ref()
            .unwrap_err()
            .contains("timed out"),
        "{:?}",
        results[2]
    );
}

#[tokio::test]
async fn the_launch_allow_list_is_enforced() {
    let policy = LaunchPolicy {
        allowed: vec!["node".into()],
        allow_any: false,
    };
    let e = McpClient::connect(
        McpServerSpec::stdio("x", "/bin/sh", &["-c", "true"]),
        &policy,
    )
    .await
    .err()
    .unwrap();
    assert!(matches!(e, McpError::NotAllowed(_)), "{e}");
    let e = McpClient::connect(
        McpServerSpec {
            command: None,
            ..McpServerSpec::stdio("y", "", &[])
        },
        &policy,
    )
    .await
    .err()
    .unwrap();
    assert!(e.to_string().contains("needs `command` or `url`"), "{e}");
    let _ = Arc::new(());
}

#[test]
fn the_launch_policy_is_closed_by_default_and_matches_files() {
    // Nothing is launched unless allowed.
    assert!(matches!(
        LaunchPolicy::default().check("sh"),
        Err(McpError::NotAllowed(_))
    ));
    // A name admits the program PATH finds, by name or by its path, started by that path.
    let sh = LaunchPolicy::allow(["sh"]);
    let by_name = sh.check("sh").unwrap();
    assert!(by_name.is_absolute(), "{}", by_name.display());
    assert_eq!(sh.check(by_name.to_str().unwrap()).unwrap(), by_name);
    // A program of the same name elsewhere is another program.
    let dir = std::env::temp_dir().join(format!("agentry-launch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let other = dir.join("sh");
    std::fs::copy(&by_name, &other).unwrap();
    let e = sh.check(other.to_str().unwrap()).unwrap_err();
    assert!(matches!(e, McpError::NotAllowed(_)), "{e}");
    assert!(e.to_string().contains("AGENTRY_MCP_ALLOW"), "{e}");
    // Allowed by its full path, that copy (and only it) may start.
    let copy = LaunchPolicy::allow([other.to_str().unwrap()]);
    assert_eq!(copy.check(other.to_str().unwrap()).unwrap(), other);
    assert!(copy.check("sh").is_err());
    // Something that is not there is refused, not guessed.
    assert!(sh.check("./no-such-program").is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_configured_with_mcp_servers_uses_their_tools() {
    use agentry_core::agent::{AgentConfig, AgentFactory};
    use agentry_core::llm::*;
    use agentry_core::react::Outcome;
    let (Some((python, script)), Some(js)) = (py(), npm_server("server-everything")) else {
        return;
    };
    let cfg: AgentConfig = toml::from_str(&format!(
        r#"
        name = "mathy"
        tools = ["calculate"]
        [model]
        provider = "scripted"
        transcript = "unused.json"
        [[mcp_servers]]
        name = "py"
        command = "{python}"
        args = ["{script}", "stdio"]
        timeout_secs = 10
        [[mcp_servers]]
        name = "everything"
        command = "node"
        args = ["{js}", "stdio"]
        allow_tools = ["echo", "get-sum"]
        "#
    ))
    .unwrap();
    let call = |id: &str, name: &str, a: Value| {
        ChatResponse::tool_calls(vec![ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: a,
        }])
    };
    let llm = std::sync::Arc::new(ScriptedProvider::new(Transcript::of(
        Capabilities {
            native_tools: true,
            ..Default::default()
        },
        vec![
            call("1", "py__add", json!({"a": 2, "b": 3})),
            call("2", "everything__echo", json!({"message": "five"})),
            call("3", "finish", json!({"answer": "2 + 3 = 5"})),
        ],
    )));
    let agent = create_agent_with_model(
        &AgentFactory::with_builtins(),
        cfg,
        llm,
        &LaunchPolicy::any(),
    )
    .await
    .unwrap();
    let tools = agent.tools();
    let names = tools.names();
    assert_eq!(
        names,
        [
            "calculate",
            "everything__echo",
            "everything__get-sum",
            "py__add",
            "py__crash",
            "py__echo",
            "py__grow",
            "py__sleep"
        ]
    );
    let r = agent
        .run("What is 2 + 3?", None, &agentry_core::run::NoHooks, None)
        .await;
    assert_eq!(
        r.outcome,
        Outcome::Answered {
            answer: "2 + 3 = 5".into()
        }
    );
    let obs: Vec<String> = r
        .steps
        .iter()
        .filter_map(|s| match s {
            agentry_core::react::Step::Observation { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(obs, ["5", "Echo: five"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_sse_servers_are_reached_by_falling_back() {
    let Some(js) = npm_server("server-everything") else {
        return;
    };
    let port = free_port();
    let _server = node_server(&js, "sse", port).await;
    // No transport named: Streamable HTTP is tried first, then legacy HTTP+SSE.
    let client = McpClient::connect(
        McpServerSpec::http("old", &format!("http://127.0.0.1:{port}/sse")),
        &LaunchPolicy::default(),
    )
    .await
    .unwrap();
    let r = client
        .call("echo", args(json!({"message": "from the past"})))
        .await
        .unwrap();
    assert_eq!(
        map_result("old", "echo", r).unwrap().text,
        "Echo: from the past"
    );
    let tools = client.list_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "get-sum"));
    // Named explicitly.
    let mut spec = McpServerSpec::http("old2", &format!("http://127.0.0.1:{port}/sse"));
    spec.transport = Some("sse".into());
    let client = McpClient::connect(spec, &LaunchPolicy::default())
        .await
        .unwrap();
    let r = client
        .call("get-sum", args(json!({"a": 1, "b": 2})))
        .await
        .unwrap();
    assert!(map_result("old2", "get-sum", r).unwrap().text.contains('3'));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_http_server_gets_a_new_session() {
    let Some(js) = npm_server("server-everything") else {
        return;
    };
    let port = free_port();
    let start = || {
        Child(
            tokio::process::Command::new("node")
                .args([js.as_str(), "streamableHttp"])
                .env("PORT", port.to_string())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .unwrap(),
        )
    };
    let server = start();
    wait_port(port).await;
    let client = McpClient::connect(
        McpServerSpec::http("e", &format!("http://127.0.0.1:{port}/mcp")),
        &LaunchPolicy::default(),
    )
    .await
    .unwrap();
    client
        .call("echo", args(json!({"message": "one"})))
        .await
        .unwrap();
    // The server restarts and forgets the session (server-everything then answers 400, not 404).
    let mut s = server;
    let _ = s.0.kill().await;
    drop(s);
    let _server = start();
    wait_port(port).await;
    let r = client
        .call("echo", args(json!({"message": "two"})))
        .await
        .unwrap();
    assert_eq!(map_result("e", "echo", r).unwrap().text, "Echo: two");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_added_at_run_time_join_the_agent_after_list_changed() {
    use agentry_core::agent::{AgentConfig, AgentFactory};
    use agentry_core::llm::*;
    use agentry_core::react::Outcome;
    let Some((python, script)) = py() else { return };
    let cfg: AgentConfig = toml::from_str(&format!(
        r#"
        name = "grower"
        [model]
        provider = "scripted"
        transcript = "unused.json"
        [[mcp_servers]]
        name = "py"
        command = "{python}"
        args = ["{script}", "stdio"]
        protocol = "initialize"
        "#
    ))
    .unwrap();
    let call = |id: &str, name: &str| {
        ChatResponse::tool_calls(vec![ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: json!({}),
        }])
    };
    let done = ChatResponse::text;
    let llm = std::sync::Arc::new(ScriptedProvider::new(Transcript::of(
        Capabilities {
            native_tools: true,
            ..Default::default()
        },
        vec![
            call("1", "py__grow"),
            done("grown"),
            call("2", "py__extra"),
            done("used it"),
        ],
    )));
    let agent = create_agent_with_model(&AgentFactory::new(), cfg, llm, &LaunchPolicy::any())
        .await
        .unwrap();
    assert!(!agent.tools().names().contains(&"py__extra"));
    let r = agent
        .run("grow", None, &agentry_core::run::NoHooks, None)
        .await;
    assert_eq!(
        r.outcome,
        Outcome::Answered {
            answer: "grown".into()
        }
    );
    // The next run sees the new tool and can call it.
    let r = agent
        .run("use the new tool", None, &agentry_core::run::NoHooks, None)
        .await;
    assert_eq!(
        r.outcome,
        Outcome::Answered {
            answer: "used it".into()
        },
        "{:?}",
        r.steps
    );
    assert!(agent.tools().names().contains(&"py__extra"));
    assert!(r.steps.iter().any(|s| matches!(s, agentry_core::react::Step::Observation { text, is_error: false, .. } if text == "extra!")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_extends_the_timeout_up_to_the_cap_and_late_progress_is_harmless() {
    let Some(js) = npm_server("server-everything") else {
        return;
    };
    let mut spec = McpServerSpec::stdio("everything", "node", &[&js, "stdio"]);
    spec.timeout_secs = 0.6; // between two progress steps (0.25 s) it never expires...
    spec.max_timeout_secs = 1.5; // ...but the cap does.
    let client = McpClient::connect(spec, &LaunchPolicy::any())
        .await
        .unwrap();
    // 1 s of work in 4 steps: finishes within the cap thanks to progress.
    let r = client
        .call(
            "trigger-long-running-operation",
            args(json!({"duration": 1, "steps": 4})),
        )
        .await;
    assert!(
        r.is_ok(),
        "progress should have extended the 0.6 s timeout: {r:?}"
    );
    // 10 s of work: the cap ends it; the call is canceled while the server goes on sending
    // progress for a while, which must not disturb the next calls.
    let t0 = std::time::Instant::now();
    let e = client
        .call(
            "trigger-long-running-operation",
            args(json!({"duration": 10, "steps": 40})),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, McpError::Timeout { .. }), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(5), "the cap applies");
    for i in 0..3 {
        let r = client
            .call("echo", args(json!({"message": format!("after {i}")})))
            .await
            .unwrap();
        assert_eq!(
            map_result("everything", "echo", r).unwrap().text,
            format!("Echo: after {i}")
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}
