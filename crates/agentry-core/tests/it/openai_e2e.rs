//! End to end through a real OpenAI-compatible server process: PyPI `mockllm` 0.0.8 (FastAPI,
//! answers chat completions from a prompt→response file). It has no native tool calls, so this
//! also exercises tool calls written as text and parsed by agentry. Installed by
//! `scripts/test.sh` into the interop virtualenv; the embedded local model will add a second
//! server with a real model.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use agentry_core::agent::{AgentConfig, AgentFactory};
use agentry_core::react::{Outcome, Step};
use agentry_core::run::NoHooks;

fn mockllm() -> Option<PathBuf> {
    let venv = std::env::var_os("AGENTRY_INTEROP_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.venv-interop/bin/python")
        });
    let bin = venv.with_file_name("mockllm");
    agentry_testkit::require_path(agentry_testkit::Peer::Interop, bin, "run scripts/test.sh")
}

struct Child(tokio::process::Child);
impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.start_kill();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_calls_a_tool_through_a_real_openai_compatible_server() {
    let Some(bin) = mockllm() else { return };
    let dir = std::env::temp_dir().join(format!("agentry-mockllm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let responses = dir.join("responses.yml");
    std::fs::write(
        &responses,
        r#"responses:
  "What is (2 + 3) * 4?": 'I will use the calculator. {"tool_call": {"name": "calculate", "arguments": {"expression": "(2 + 3) * 4"}}}'
  "Observation from calculate: 20.0": "Thought: I have it.\nFinal Answer: (2 + 3) * 4 = 20"
defaults:
  unknown_response: "I do not know."
"#,
    )
    .unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // Its app under uvicorn directly, as `mockllm start` runs it but without the reloader
    // that command cannot turn off: the reloader runs the server in a second process, which
    // outlived the killed first one and kept listening after the tests.
    let _server = Child(
        tokio::process::Command::new(bin.with_file_name("python"))
            .args(["-m", "uvicorn", "mockllm.server:app"])
            .env("MOCKLLM_RESPONSES_FILE", &responses)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start mockllm"),
    );
    let mut up = false;
    for _ in 0..150 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(up, "mockllm did not start");

    let cfg: AgentConfig = toml::from_str(&format!(
        r#"
        name = "calculator"
        tools = ["calculate"]
        [model]
        provider = "openai"
        base_url = "http://127.0.0.1:{port}/v1"
        model = "gpt-4o-mini"
        api_key = "not-needed"
        native_tools = false
        json_schema = false
        "#
    ))
    .unwrap();
    let agent = Arc::new(AgentFactory::with_builtins().create_agent(cfg).unwrap());
    assert!(!agent.react_config().native_tools);
    let result = agent
        .run("What is (2 + 3) * 4?", None, &NoHooks, None)
        .await;
    assert_eq!(
        result.outcome,
        Outcome::Answered {
            answer: "(2 + 3) * 4 = 20".into()
        },
        "{:?}",
        result.steps
    );
    assert!(result.steps.iter().any(|s| matches!(s, Step::Observation { tool, text, is_error: false, .. } if tool == "calculate" && text == "20.0")));
    let _ = std::fs::remove_dir_all(&dir);
}
