//! The one serve path: configured, built-in and orchestrator agents behind one listener, with
//! the config's credentials enforced on every agent.

use std::path::PathBuf;

use agentry::a2a::A2aError;
use agentry::a2a::client::{A2aClient, Auth, ClientConfig};
use agentry::a2a::model::{Message, MessageSendParams, Role, SendMessageResult};
use agentry::config::{AgentEntry, BuiltinAgent, Config, EchoMode, StoreKind};

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/agents")
}

use crate::serve as start;

async fn http_get(base: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = base.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

async fn ask(url: &str, token: Option<&str>, text: &str) -> Result<String, A2aError> {
    ask_as(
        url,
        token.map_or(Auth::None, |t| Auth::Bearer(t.into())),
        text,
    )
    .await
}

async fn ask_as(url: &str, auth: Auth, text: &str) -> Result<String, A2aError> {
    let cfg = ClientConfig {
        auth,
        ..ClientConfig::default()
    };
    let client = A2aClient::discover(url, cfg).await?;
    let params = MessageSendParams::new(Message::text(Role::User, text));
    Ok(match client.send_message(params).await? {
        SendMessageResult::Task(t) => agentry::core::a2a::task_text(&t),
        SendMessageResult::Message(m) => m.text_content(),
    })
}

#[tokio::test]
async fn a_config_file_and_a_builtin_agent_share_one_server_and_its_credentials() {
    let mut config = Config::load(examples().join("agentry.toml")).unwrap();
    config.server.store = StoreKind::Memory;
    config.server.bearer_tokens = vec!["s3cret".into()];
    let mut echo = Config::builtin(
        BuiltinAgent::Echo {
            mode: EchoMode::Task,
        },
        Default::default(),
    );
    let mut entry: AgentEntry = echo.agents.remove(0);
    entry.path = "/echo".into();
    config.agents.push(entry);
    let base = start(config).await;

    // The index lists every agent, configured, built-in and the orchestrator.
    let index = http_get(&base, "/agents").await;
    for name in [
        "calculator",
        "echo-bot",
        "orchestrator",
        "\"url\":\"http://",
    ] {
        assert!(index.contains(name), "{name} missing from {index}");
    }
    assert!(index.contains(&format!("{base}/echo")), "{index}");

    // The token is required by configured agents as much as by built-in ones (before, `serve
    // --config --token` ignored the token).
    for path in ["/echo-bot", "/echo"] {
        let url = format!("{base}{path}");
        let denied = ask(&url, None, "hello").await;
        assert!(
            matches!(denied, Err(A2aError::Unauthorized { .. })),
            "{path}: {denied:?}"
        );
        let wrong = ask(&url, Some("guess"), "hello").await;
        assert!(
            matches!(wrong, Err(A2aError::Unauthorized { .. })),
            "{path}: {wrong:?}"
        );
    }
    assert_eq!(
        ask(&format!("{base}/echo-bot"), Some("s3cret"), "hello")
            .await
            .unwrap(),
        "You said hello."
    );
    let echoed = ask(&format!("{base}/echo"), Some("s3cret"), "ping")
        .await
        .unwrap();
    assert!(echoed.contains("ping"), "{echoed}");
}

/// Secrets from the environment or a file instead of the config; an agent with its own
/// credentials; each card declares what its agent takes.
#[tokio::test]
async fn credentials_come_from_env_or_files_per_agent_and_cards_declare_them() {
    let dir = agentry_testkit::Scratch::new("creds");
    std::fs::write(dir.join("token"), "from-a-file\n").unwrap();
    // A variable every test process has (setting one is unsafe in edition 2024).
    let var = "HOME";
    let key_value = std::env::var(var).expect("HOME is set");
    let text = format!(
        r#"
        [server]
        store = "memory"
        bearer_tokens = ["file:{}"]

        [[agents]]
        path = "/shared"
        builtin = {{ kind = "echo" }}

        [[agents]]
        path = "/own"
        builtin = {{ kind = "echo" }}
        api_keys = ["env:{var}"]
        "#,
        dir.join("token").display()
    );
    let config: Config = toml::from_str(&text).unwrap();
    let base = start(config).await;

    let card = |path: &str| {
        let base = base.clone();
        let path = path.to_owned();
        async move {
            let r = http_get(&base, &format!("{path}/.well-known/agent-card.json")).await;
            let body = &r[r.find("\r\n\r\n").unwrap() + 4..];
            serde_json::from_str::<serde_json::Value>(body).unwrap()
        }
    };
    let shared = card("/shared").await;
    assert_eq!(
        shared["securitySchemes"]["bearer"]["scheme"], "bearer",
        "{shared}"
    );
    assert_eq!(shared["security"], serde_json::json!([{"bearer": []}]));
    let own = card("/own").await;
    assert_eq!(
        own["securitySchemes"]["apiKey"]["name"], "X-API-Key",
        "{own}"
    );
    assert!(own["securitySchemes"].get("bearer").is_none(), "{own}");

    let shared_url = format!("{base}/shared");
    let own_url = format!("{base}/own");
    assert!(ask(&shared_url, Some("from-a-file"), "hi").await.is_ok());
    let key = Auth::ApiKey("X-API-Key".into(), key_value);
    assert!(ask_as(&own_url, key.clone(), "hi").await.is_ok());
    // Each agent takes only its own credentials.
    assert!(matches!(
        ask(&own_url, Some("from-a-file"), "hi").await,
        Err(A2aError::Unauthorized { .. })
    ));
    assert!(matches!(
        ask_as(&shared_url, key, "hi").await,
        Err(A2aError::Unauthorized { .. })
    ));

    // A secret that is not there stops the setup, naming where it was to come from.
    let missing: Config = toml::from_str(
        r#"
        [server]
        store = "memory"
        bearer_tokens = ["env:AGENTRY_TEST_NO_SUCH_VARIABLE"]
        [[agents]]
        path = "/"
        builtin = { kind = "echo" }
        "#,
    )
    .unwrap();
    let err = agentry::Service::build(missing)
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("AGENTRY_TEST_NO_SUCH_VARIABLE"), "{err}");
}

#[tokio::test]
async fn an_agent_that_cannot_be_made_fails_the_whole_setup_with_its_reason() {
    let dir = agentry_testkit::Scratch::new("serve-bad");
    let file = dir.join("agentry.toml");
    std::fs::write(
        &file,
        "[server]\nstore = \"memory\"\n[[agents]]\npath = \"/x\"\nconfig = \"missing.toml\"\n",
    )
    .unwrap();
    let err = match agentry::Service::build(Config::load(&file).unwrap()).await {
        Ok(_) => panic!("an agent whose config is missing was served"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("missing.toml"), "{err}");

    std::fs::write(
        &file,
        "[server]\nstore = \"memory\"\n[[agents]]\npath = \"/x\"\nconfig = \"a.toml\"\nbuiltin = { kind = \"conformance\" }\n",
    )
    .unwrap();
    let err = match agentry::Service::build(Config::load(&file).unwrap()).await {
        Ok(_) => panic!("an entry with two definitions was served"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("give one of"), "{err}");
}

/// The npm MCP memory server (installed by the test command), or `None` with a SKIPPED line;
/// with `AGENTRY_REQUIRE_INTEROP` set a missing server fails the test.
fn memory_server() -> Option<PathBuf> {
    agentry_testkit::require_path(
        agentry_testkit::Peer::Interop,
        agentry_testkit::repo_root()
            .join("tests/mcp-peers/node_modules/@modelcontextprotocol/server-memory/dist/index.js"),
        "run scripts/test.sh, which installs it",
    )
}

/// Serving a config with an orchestrator makes each configured agent once (before, its MCP
/// servers were started twice: once for its path, once for workflows), and a stdio server
/// starts only when `[server] mcp_allow` (or `$AGENTRY_MCP_ALLOW`) allows its program.
#[tokio::test]
async fn each_agent_is_made_once_and_starts_only_allowed_programs() {
    let Some(js) = memory_server() else { return };
    let dir = agentry_testkit::Scratch::new("serve-once");
    let starts = dir.join("starts");
    let config = |allow: &str| {
        format!(
            r#"
            [server]
            store = "memory"
            mcp_allow = [{allow}]
            [[agents]]
            path = "/keeper"
            [agents.agent]
            name = "keeper"
            [agents.agent.model]
            provider = "scripted"
            transcript = "{transcript}"
            [[agents.agent.mcp_servers]]
            name = "memory"
            command = "sh"
            args = ["-c", "echo started >> '{starts}'; exec node '{js}'"]
            [orchestrator]
            path = "/orchestrator"
            workflows = []
            "#,
            transcript = examples().join("echo-bot.json").display(),
            starts = starts.display(),
            js = js.display(),
        )
    };
    let file = dir.join("agentry.toml");
    std::fs::write(&file, config("\"sh\"")).unwrap();
    let service = agentry::Service::build(Config::load(&file).unwrap())
        .await
        .unwrap();
    let names: Vec<_> = service.agents.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["keeper", "orchestrator"]);
    let launched = std::fs::read_to_string(&starts).unwrap();
    assert_eq!(launched.lines().count(), 1, "started: {launched:?}");
    drop(service);

    if std::env::var_os("AGENTRY_MCP_ALLOW").is_some() {
        agentry_testkit::record_skip(
            "the MCP launch refusal was not checked: AGENTRY_MCP_ALLOW is set here",
        );
        return;
    }
    std::fs::write(&file, config("")).unwrap();
    let err = match agentry::Service::build(Config::load(&file).unwrap()).await {
        Ok(_) => panic!("a program nobody allowed was started"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("AGENTRY_MCP_ALLOW"), "{err}");
    assert_eq!(
        std::fs::read_to_string(&starts).unwrap().lines().count(),
        1,
        "the refused program ran"
    );
}
