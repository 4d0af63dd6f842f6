//! `agentry`: serve agents over A2A and call any A2A agent from the shell.

mod configured;
mod flows;
mod jobs;
mod models;
mod output;

/// A2A serving allocates many small objects per request across threads, where glibc's
/// allocator spends a large share of the time (measured in `bench/`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use agentry_a2a::A2aError;
use agentry_a2a::agents::{Conformance, Echo, EchoMode};
use agentry_a2a::client::{A2aClient, Auth, Binding, ClientConfig, fetch_card};
use agentry_a2a::model::*;
use agentry_a2a::server::{A2aServer, AgentService, ServerConfig};
use agentry_a2a::store::{MemoryStore, SqliteStore, TaskStore};
use agentry_a2a::version::ProtocolVersion;
use agentry_specialists::agents::Served;
use clap::{Args, Parser, Subcommand, ValueEnum};
use futures_util::StreamExt;

#[derive(Parser)]
#[command(
    name = "agentry",
    version,
    about = "Specialized AI agents that cooperate over A2A"
)]
struct Cli {
    /// CPU threads for the embedded models (default: CANDLE_NUM_THREADS, else 2).
    #[arg(long, global = true, env = "AGENTRY_THREADS")]
    threads: Option<usize>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve a built-in agent over A2A (JSON-RPC + SSE).
    Serve(ServeArgs),
    /// Call an A2A agent.
    #[command(subcommand)]
    A2a(A2aCommand),
    /// Chat with an agent defined in a config file (TOML or YAML), showing its tool calls.
    Chat {
        #[arg(long)]
        config: PathBuf,
    },
    /// Run or resume workflows over the agents of a config file.
    #[command(subcommand)]
    Workflow(WorkflowCommand),
    /// Serve agentry's tools over MCP.
    #[command(subcommand)]
    Mcp(McpCommand),
    /// The embedded local models.
    #[command(subcommand)]
    Model(models::ModelCommand),
    /// Plan a workflow for a task (with the config's [planner] model) and show it.
    Plan {
        task: String,
        #[arg(long, default_value = "agentry.toml")]
        config: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Plan a workflow for a task, then run it. Without a config file, the built-in team does
    /// it: the RAG agent over the knowledge base, then the PPT agent (e.g. "Create a 5-slide
    /// presentation about Hamlet based on our documents").
    Run {
        task: String,
        /// Agents and planner model; when the file does not exist the built-in team runs.
        #[arg(long, default_value = "agentry.toml")]
        config: PathBuf,
        /// The run's input, as JSON (the task is added as `text`).
        #[arg(long)]
        input: Option<String>,
        #[arg(long)]
        json: bool,
        /// Built-in team: the document collection to draw on (default `documents`).
        #[arg(long)]
        collection: Option<String>,
        /// Built-in team: where the deck and summary go (default `.`).
        #[arg(long)]
        output: Option<PathBuf>,
        /// Built-in team: knowledge base file (default $AGENTRY_HOME/knowledge.db).
        #[arg(long)]
        db: Option<PathBuf>,
        /// Built-in team: call the agents in-process instead of over A2A.
        #[arg(long)]
        in_process: bool,
    },
    /// Add files or folders (text, Markdown, HTML, DOCX, PDF) to a document collection of the
    /// knowledge base; changed files are re-ingested, unchanged ones skipped.
    Ingest {
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        #[arg(long, default_value = "documents")]
        collection: String,
        /// Knowledge base file (default $AGENTRY_HOME/knowledge.db).
        #[arg(long)]
        db: Option<PathBuf>,
        /// Print each file's report as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum McpCommand {
    /// Serve a toolset over MCP: stdio by default, Streamable HTTP at ADDR/mcp with --http.
    Serve {
        /// `builtin` (calculate, current_time), `ppt` (the PowerPoint tools; decks saved in
        /// $AGENTRY_PPT_OUTPUT, default the current folder) or `data` (query_db, analyze,
        /// visualize; charts in $AGENTRY_DATA_OUTPUT).
        toolset: String,
        /// Listen for Streamable HTTP on this address (e.g. 127.0.0.1:8090).
        #[arg(long)]
        http: Option<String>,
    },
}

#[derive(Subcommand)]
enum WorkflowCommand {
    /// Run a workflow file (YAML, JSON or TOML), showing each step as it happens.
    Run {
        file: PathBuf,
        /// The agents (and remotes) the workflow may use.
        #[arg(long, default_value = "agentry.toml")]
        config: PathBuf,
        /// The run's input, as JSON.
        #[arg(long)]
        input: Option<String>,
        /// Print events and the final state as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Continue a run after a crash: finished steps are kept, the rest run.
    Resume {
        run_id: String,
        #[arg(long, default_value = "agentry.toml")]
        config: PathBuf,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum AgentName {
    /// Echoes each message (as a task, or as a direct message with --echo-mode message).
    Echo,
    /// The test agent for conformance suites (behaviour chosen by messageId prefix).
    Conformance,
    /// The RAG specialist over a collection of the knowledge base (--collection).
    Rag,
    /// The PowerPoint specialist (decks saved in --output).
    Ppt,
    /// The researcher: a question fanned out to MCP servers (--researcher FILE).
    Researcher,
    /// The data analyst: SQL over files and databases, statistics, charts (in --output).
    Data,
}

#[derive(Clone, Copy, ValueEnum)]
enum StoreKind {
    /// SQLite file (the default; tasks survive a restart).
    Sqlite,
    /// In memory (lost on exit; oldest finished tasks evicted past 10,000).
    Memory,
}

#[derive(Args)]
struct ServeArgs {
    /// Serve the agents of this file (agentry.toml) instead of a built-in agent.
    #[arg(long)]
    config: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "echo")]
    agent: AgentName,
    #[arg(long, default_value_t = 8080)]
    port: u16,
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// The URL clients should use (put in the agent card); default http://HOST:PORT/.
    #[arg(long)]
    public_url: Option<String>,
    #[arg(long, value_enum, default_value = "sqlite")]
    store: StoreKind,
    /// SQLite file; default $AGENTRY_HOME/<agent>.db (AGENTRY_HOME defaults to
    /// ~/.local/share/agentry).
    #[arg(long)]
    db: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "task")]
    echo_mode: EchoModeArg,
    /// Allow push-notification webhooks on loopback/private addresses (tests only).
    #[arg(long)]
    allow_private_push: bool,
    /// Require this bearer token on every call.
    #[arg(long, env = "AGENTRY_SERVE_TOKEN")]
    token: Option<String>,
    /// rag: the collection it answers from.
    #[arg(long, default_value = "documents")]
    collection: String,
    /// rag: knowledge base file (default $AGENTRY_HOME/knowledge.db).
    #[arg(long)]
    kb: Option<PathBuf>,
    /// ppt, data: where decks and charts are saved.
    #[arg(long, default_value = ".")]
    output: PathBuf,
    /// researcher: its configuration (TOML or YAML: mode, a2a_url, [[sources]]).
    #[arg(long)]
    researcher: Option<PathBuf>,
}

#[derive(Clone, Copy, ValueEnum)]
enum EchoModeArg {
    Task,
    Message,
}

#[derive(Args, Clone)]
struct CallOpts {
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// Bearer token.
    #[arg(long, global = true, env = "AGENTRY_TOKEN")]
    token: Option<String>,
    /// API key as HEADER=VALUE.
    #[arg(long, global = true)]
    api_key: Option<String>,
    /// Request timeout in seconds.
    #[arg(long, global = true, default_value_t = 60)]
    timeout: u64,
    /// Preferred binding when the card offers several: jsonrpc or rest (HTTP+JSON).
    #[arg(long, global = true, value_enum, default_value_t = BindingArg::Jsonrpc)]
    binding: BindingArg,
    /// Speak this A2A version instead of the newest both sides support: 1.0 or 0.3.
    #[arg(long = "a2a-version", global = true)]
    a2a_version: Option<String>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum BindingArg {
    Jsonrpc,
    Rest,
}

#[derive(Subcommand)]
enum A2aCommand {
    /// Show an agent's card.
    Card {
        url: String,
        #[command(flatten)]
        opts: CallOpts,
    },
    /// Send a message.
    Send {
        url: String,
        text: String,
        /// Stream events as they happen.
        #[arg(long)]
        stream: bool,
        /// Continue this task.
        #[arg(long)]
        task: Option<String>,
        /// Continue this context.
        #[arg(long)]
        context: Option<String>,
        /// Return at once instead of waiting for the turn to end.
        #[arg(long)]
        no_wait: bool,
        #[command(flatten)]
        opts: CallOpts,
    },
    /// Show a task.
    Get {
        url: String,
        task: String,
        /// At most this many history messages.
        #[arg(long)]
        history: Option<i64>,
        #[command(flatten)]
        opts: CallOpts,
    },
    /// Cancel a task.
    Cancel {
        url: String,
        task: String,
        #[command(flatten)]
        opts: CallOpts,
    },
    /// Follow a running task's events.
    Resubscribe {
        url: String,
        task: String,
        #[command(flatten)]
        opts: CallOpts,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Before any thread starts: candle sizes its CPU pool once, from the environment.
    let threads = cli.threads.or_else(|| {
        std::env::var("CANDLE_NUM_THREADS")
            .is_err()
            .then(|| std::thread::available_parallelism().map_or(1, |n| n.get().min(2)))
    });
    if let Some(n) = threads {
        // SAFETY: single-threaded here; the runtime and loggers start below.
        unsafe { agentry_local::set_threads(n) };
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("AGENTRY_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,rmcp=warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(async {
        match cli.command {
            Command::Serve(args) => match &args.config {
                Some(path) => {
                    let port = (args.port != 8080).then_some(args.port);
                    configured::serve(path, port, shutdown_signal()).await
                }
                None => serve(args).await,
            },
            Command::A2a(cmd) => a2a(cmd).await,
            Command::Chat { config } => configured::chat(&config).await,
            Command::Workflow(WorkflowCommand::Run {
                file,
                config,
                input,
                json,
            }) => flows::run_file(&file, &config, input.as_deref(), json).await,
            Command::Workflow(WorkflowCommand::Resume {
                run_id,
                config,
                json,
            }) => flows::resume(&run_id, &config, json).await,
            Command::Mcp(McpCommand::Serve { toolset, http }) => {
                mcp_serve(&toolset, http.as_deref()).await
            }
            Command::Model(cmd) => models::run(cmd).await,
            Command::Plan { task, config, json } => {
                flows::plan_and_show(&task, &config, json).await
            }
            Command::Run {
                task,
                config,
                input,
                json,
                collection,
                output,
                db,
                in_process,
            } => {
                // A config file with agents runs them; one with a [team] section (or none at
                // all) runs the built-in team, with the section's model if it names one.
                let team = if config.exists() {
                    configured::team_section(&config)?
                } else {
                    Some(configured::TeamSection::default())
                };
                match team {
                    None => flows::plan_and_run(&task, &config, input.as_deref(), json).await,
                    Some(t) => {
                        let o = jobs::RunOpts {
                            collection: collection
                                .or(t.collection)
                                .unwrap_or_else(|| "documents".into()),
                            output: output.or(t.output).unwrap_or_else(|| ".".into()),
                            db: db.or(t.db),
                            in_process,
                            json,
                            model: t.model,
                        };
                        jobs::run_builtin(&task, o).await
                    }
                }
            }
            Command::Ingest {
                paths,
                collection,
                db,
                json,
            } => jobs::ingest(&paths, &collection, db.as_deref(), json).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            if let Some(hint) = hint(&e) {
                eprintln!("hint: {hint}");
            }
            ExitCode::FAILURE
        }
    }
}

fn hint(e: &A2aError) -> Option<&'static str> {
    match e {
        A2aError::Connect { .. } => {
            Some("is the agent running? start one with `agentry serve --agent echo`")
        }
        A2aError::CardNotFound { .. } => {
            Some("pass the agent's base URL, e.g. http://127.0.0.1:8080")
        }
        A2aError::Unauthorized { .. } => Some("pass --token TOKEN or --api-key HEADER=VALUE"),
        A2aError::Rpc(r) if r.code == agentry_a2a::error::code::TASK_NOT_FOUND => {
            Some("check the task id; tasks of an in-memory agent are lost when it restarts")
        }
        _ => None,
    }
}

pub(crate) fn data_dir() -> PathBuf {
    if let Some(h) = std::env::var_os("AGENTRY_HOME") {
        return PathBuf::from(h);
    }
    let base = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .unwrap_or_else(|| PathBuf::from("."));
    base.join("agentry")
}

async fn serve(args: ServeArgs) -> Result<(), A2aError> {
    let url = args
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{}:{}/", args.host, args.port));
    // Everything that can fail on the agent's own inputs first, before a store is created.
    let served: (
        &str,
        AgentCard,
        Arc<dyn agentry_a2a::server::DynAgentExecutor>,
    ) = match args.agent {
        AgentName::Echo => {
            let mode = match args.echo_mode {
                EchoModeArg::Task => EchoMode::Task,
                EchoModeArg::Message => EchoMode::Message,
            };
            ("echo", Echo::card(&url), Arc::new(Echo { mode }))
        }
        AgentName::Conformance => (
            "conformance",
            Conformance::card(&url),
            Arc::new(Conformance::default()),
        ),
        AgentName::Rag => {
            let rag = Arc::new(jobs::rag_agent(&args.collection, args.kb.as_deref()).await?);
            ("rag", rag.card(&url), Arc::new(Served(rag)))
        }
        AgentName::Ppt => {
            let ppt = Arc::new(jobs::ppt_agent(&args.output));
            ("ppt", ppt.card(&url), Arc::new(Served(ppt)))
        }
        AgentName::Data => {
            let data = Arc::new(agentry_specialists::data::DataSpecialist {
                out_dir: args.output.clone(),
            });
            ("data", data.card(&url), Arc::new(Served(data)))
        }
        AgentName::Researcher => {
            let path = args.researcher.as_ref().ok_or_else(|| {
                    A2aError::Other(
                        "--agent researcher needs --researcher FILE (see examples/agents/researcher.toml)"
                            .into(),
                    )
                })?;
            let r = Arc::new(jobs::researcher(path)?);
            let card = r.card(&url);
            (
                "researcher",
                card,
                Arc::new(agentry_specialists::research::ServedResearcher(r)),
            )
        }
    };
    let (name, card, executor) = served;
    let store: Arc<dyn TaskStore> = match args.store {
        StoreKind::Memory => Arc::new(MemoryStore::default()),
        StoreKind::Sqlite => {
            let path = args
                .db
                .clone()
                .unwrap_or_else(|| data_dir().join(format!("{name}.db")));
            let s = SqliteStore::open(&path).map_err(|e| {
                A2aError::Other(format!("cannot open task store {}: {e}", path.display()))
            })?;
            tracing::info!("task store: {}", path.display());
            Arc::new(s)
        }
    };
    let mut svc = AgentService {
        card,
        extended_card: None,
        executor,
        store,
        credentials: None,
    };
    if let Some(token) = args.token {
        svc = svc.with_credentials(agentry_a2a::server::Credentials {
            bearer_tokens: vec![token],
            required_for_all: true,
            ..Default::default()
        });
    }
    let mut config = ServerConfig::default();
    config.push.allow_private = args.allow_private_push;
    let listener = tokio::net::TcpListener::bind((args.host.as_str(), args.port))
        .await
        .map_err(|e| {
            A2aError::Other(format!(
                "cannot listen on {}:{}: {e} (is the port taken? try --port)",
                args.host, args.port
            ))
        })?;
    eprintln!("agentry: serving agent `{name}` at {url} (card: {url}.well-known/agent-card.json)");
    A2aServer::new()
        .config(config)
        .agent("/", svc)
        .serve(listener, shutdown_signal())
        .await
        .map_err(|e| A2aError::Other(format!("server failed: {e}")))?;
    eprintln!("agentry: stopped");
    Ok(())
}

pub(crate) async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
    eprintln!("agentry: shutting down; finishing open requests and streams");
}

/// The tools of a named toolset.
fn toolset(name: &str) -> Result<agentry_core::tools::ToolRegistry, A2aError> {
    let mut r = agentry_core::tools::ToolRegistry::new();
    match name {
        "builtin" => {
            r.add(agentry_core::builtin::Calculate);
            r.add(agentry_core::builtin::CurrentTime);
        }
        // Decks are saved in $AGENTRY_PPT_OUTPUT, else the current folder.
        "ppt" => {
            let out = std::env::var_os("AGENTRY_PPT_OUTPUT").unwrap_or_else(|| ".".into());
            r = agentry_specialists::pptx::ppt_tools(&agentry_specialists::pptx::Decks::new(out));
        }
        // Charts are saved in $AGENTRY_DATA_OUTPUT, else the current folder.
        "data" => {
            let out = std::env::var_os("AGENTRY_DATA_OUTPUT").unwrap_or_else(|| ".".into());
            r = agentry_specialists::data::data_tools(out);
        }
        other => {
            return Err(A2aError::Other(format!(
                "unknown toolset `{other}`; toolsets: builtin, ppt, data"
            )));
        }
    }
    Ok(r)
}

async fn mcp_serve(name: &str, http: Option<&str>) -> Result<(), A2aError> {
    let server = agentry_mcp::ToolServer::new(&format!("agentry-{name}"), toolset(name)?);
    match http {
        None => server
            .serve_stdio()
            .await
            .map_err(|e| A2aError::Other(format!("MCP stdio server: {e}"))),
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| A2aError::Other(format!("cannot listen on {addr}: {e}")))?;
            eprintln!("agentry: MCP toolset `{name}` at http://{addr}/mcp");
            axum::serve(listener, server.http_router(None))
                .with_graceful_shutdown(shutdown_signal())
                .await
                .map_err(|e| A2aError::Other(e.to_string()))
        }
    }
}

fn client_config(opts: &CallOpts) -> Result<ClientConfig, A2aError> {
    let auth = match (&opts.token, &opts.api_key) {
        (Some(t), _) => Auth::Bearer(t.clone()),
        (None, Some(kv)) => {
            let (h, v) = kv.split_once('=').ok_or_else(|| {
                A2aError::Other("--api-key takes HEADER=VALUE, e.g. X-API-Key=secret".into())
            })?;
            Auth::ApiKey(h.to_owned(), v.to_owned())
        }
        (None, None) => Auth::None,
    };
    Ok(ClientConfig {
        request_timeout: std::time::Duration::from_secs(opts.timeout),
        auth,
        binding: match opts.binding {
            BindingArg::Jsonrpc => Binding::JsonRpc,
            BindingArg::Rest => Binding::HttpJson,
        },
        ..ClientConfig::default()
    })
}

async fn connect(url: &str, opts: &CallOpts) -> Result<A2aClient, A2aError> {
    let client = A2aClient::discover(url, client_config(opts)?).await?;
    match opts.a2a_version.as_deref() {
        None => Ok(client),
        Some(v) => {
            let version = ProtocolVersion::parse(v)
                .ok_or_else(|| A2aError::Other(format!("--a2a-version {v:?}: use 1.0 or 0.3")))?;
            Ok(client.with_version(version))
        }
    }
}

async fn a2a(cmd: A2aCommand) -> Result<(), A2aError> {
    match cmd {
        A2aCommand::Card { url, opts } => {
            let card = fetch_card(&url, &client_config(&opts)?).await?;
            output::card(&card, opts.json);
        }
        A2aCommand::Send {
            url,
            text,
            stream,
            task,
            context,
            no_wait,
            opts,
        } => {
            let client = connect(&url, &opts).await?;
            let mut message = Message::text(Role::User, text);
            message.task_id = task;
            message.context_id = context;
            let mut params = MessageSendParams::new(message);
            if no_wait {
                params.configuration = Some(MessageSendConfiguration {
                    blocking: Some(false),
                    ..Default::default()
                });
            }
            if stream {
                let mut events = Box::pin(client.stream_message(params));
                while let Some(ev) = events.next().await {
                    output::event(&ev?, opts.json);
                }
            } else {
                match client.send_message(params).await? {
                    SendMessageResult::Task(t) => output::task(&t, opts.json),
                    SendMessageResult::Message(m) => output::message(&m, opts.json),
                }
            }
        }
        A2aCommand::Get {
            url,
            task,
            history,
            opts,
        } => {
            let client = connect(&url, &opts).await?;
            output::task(&client.get_task(&task, history).await?, opts.json);
        }
        A2aCommand::Cancel { url, task, opts } => {
            let client = connect(&url, &opts).await?;
            output::task(&client.cancel_task(&task).await?, opts.json);
        }
        A2aCommand::Resubscribe { url, task, opts } => {
            let client = connect(&url, &opts).await?;
            let mut events = Box::pin(client.resubscribe(&task));
            while let Some(ev) = events.next().await {
                output::event(&ev?, opts.json);
            }
        }
    }
    Ok(())
}
