//! `agentry`: serve agents over A2A, call any A2A agent, run workflows and the main job from
//! the shell. Argument parsing and output only: everything else is the `agentry` library.

mod audit;
mod calls;
mod chat;
mod error;
#[cfg(feature = "eval")]
mod eval;
mod flows;
#[cfg(feature = "specialists")]
mod jobs;
#[cfg(feature = "local")]
mod models;
mod output;
mod tokens;
mod triggers;

/// A2A serving allocates many small objects per request across threads, where glibc's
/// allocator spends a large share of the time (measured in `bench/`); mimalloc, called as
/// `agentry::alloc` explains.
#[global_allocator]
static GLOBAL: agentry::alloc::MiMalloc = agentry::alloc::MiMalloc;

use std::path::PathBuf;
use std::process::ExitCode;

use agentry::config::{BuiltinAgent, Config, EchoMode, ServerSection, StoreKind};
use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::error::CliError;

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
    /// Serve a built-in agent (--agent) or the agents of a config file (--config) over A2A.
    Serve(ServeArgs),
    /// Call an A2A agent.
    #[command(subcommand)]
    A2a(calls::A2aCommand),
    /// Chat with an agent defined in a config file (TOML or YAML), showing its tool calls.
    Chat {
        #[arg(long)]
        config: PathBuf,
    },
    /// Benchmark an A2A agent on a tau2-bench domain (simulated user, tools, database
    /// state), scored as tau2 scores it; `agentry eval view DIR` shows a run.
    #[cfg(feature = "eval")]
    Eval(eval::EvalArgs),
    /// Verify the audit trail, or print the path of one request through it.
    #[command(subcommand)]
    Audit(audit::AuditCommand),
    /// A development identity provider: sign user tokens, print their JWKS.
    #[command(subcommand)]
    Token(tokens::TokenCommand),
    /// Add, change or remove triggers in a triggers database while agents run.
    #[command(subcommand)]
    Triggers(triggers::TriggersCommand),
    /// Run or resume workflows over the agents of a config file.
    #[command(subcommand)]
    Workflow(WorkflowCommand),
    /// Serve agentry's tools over MCP.
    #[command(subcommand)]
    Mcp(McpCommand),
    /// The embedded local models.
    #[cfg(feature = "local")]
    #[command(subcommand)]
    Model(models::ModelCommand),
    /// The capability registry: every agent a config's workflows may use (local ones, and
    /// remote ones as their cards now say), with the scopes each agent and skill requires.
    /// With --scopes, only what a user holding them may ask.
    Agents {
        #[arg(long, default_value = "agentry.toml")]
        config: PathBuf,
        /// A user's scopes, space-separated.
        #[arg(long)]
        scopes: Option<String>,
        #[arg(long)]
        json: bool,
    },
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
        /// ppt: a folder pictures may be taken from (repeatable; none by default).
        #[arg(long, value_name = "FOLDER")]
        pictures: Vec<PathBuf>,
        #[command(flatten)]
        data: DataArgs,
    },
}

/// What the data agent or toolset may read: nothing unless given here.
#[derive(Args, Clone, Default)]
struct DataArgs {
    /// data: a folder whose data files (CSV, Parquet, JSON) and SQLite files requests may name,
    /// by path relative to it (repeatable). Without one the data agent reads nothing.
    #[arg(long = "data", value_name = "FOLDER")]
    folders: Vec<PathBuf>,
    /// data: a postgres:// URL requests may name (repeatable).
    #[arg(long = "database", value_name = "URL")]
    databases: Vec<String>,
    /// data: time budget of one query, in seconds (default 30).
    #[arg(long, value_name = "SECONDS")]
    query_seconds: Option<u64>,
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
enum CardArg {
    /// The 0.3 card with the 1.0 fields added (the default).
    Both,
    /// The 1.0 card only.
    #[value(name = "1.0")]
    V1,
}

#[derive(Args)]
struct ServeArgs {
    /// Serve the agents of this file (agentry.toml); the flags below override its [server].
    #[arg(long, conflicts_with = "agent")]
    config: Option<PathBuf>,
    /// Serve this built-in agent at / (default: echo).
    #[arg(long, value_enum)]
    agent: Option<AgentName>,
    /// Port (default 8080, or the config's).
    #[arg(long)]
    port: Option<u16>,
    /// Address (default 127.0.0.1, or the config's).
    #[arg(long)]
    host: Option<String>,
    /// The URL clients should use (put in the agent cards); default http://HOST:PORT/.
    #[arg(long)]
    public_url: Option<String>,
    /// Task store: sqlite (the default; tasks survive a restart), memory (lost on exit), or
    /// a PostgreSQL URL (postgres://user@host/db, or env:NAME holding one) that several
    /// replicas share.
    #[arg(long, value_parser = parse_store)]
    store: Option<StoreKind>,
    /// Task events shared by replicas (a NATS URL, nats://host:4222, or env:NAME): a stream
    /// reaching a replica that does not run the task follows it there. Needs a PostgreSQL
    /// store.
    #[arg(long)]
    bus: Option<String>,
    /// Queue the turns of new tasks sent without waiting (blocking: false) on the bus's NATS
    /// JetStream for the agents' workers on any replica, and run N of them at once here (0:
    /// only queue). Needs --bus.
    #[arg(long, value_name = "N")]
    workers: Option<usize>,
    /// Built-in agent: its SQLite task store; default $AGENTRY_HOME/<agent>.db
    /// (AGENTRY_HOME defaults to ~/.local/share/agentry).
    #[arg(long, conflicts_with = "config")]
    db: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "task")]
    echo_mode: EchoModeArg,
    /// Allow push-notification webhooks on loopback/private addresses (tests only).
    #[arg(long)]
    allow_private_push: bool,
    /// The agent card for requests without `A2A-Version`: both generations' fields (every
    /// SDK reads it) or strictly 1.0 (what the 1.0 JSON schema validates).
    #[arg(long, value_enum)]
    card: Option<CardArg>,
    /// Record every authorization decision in the audit trail ($AGENTRY_HOME/audit.db;
    /// `agentry audit verify` checks it).
    #[arg(long)]
    audit: bool,
    /// Require this bearer token on every call (added to the config's `bearer_tokens`).
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
    /// ppt: a folder pictures may be taken from (repeatable; none by default).
    #[arg(long, value_name = "FOLDER")]
    pictures: Vec<PathBuf>,
    #[command(flatten)]
    data: DataArgs,
}

#[derive(Clone, Copy, ValueEnum)]
enum EchoModeArg {
    Task,
    Message,
}

/// A tool or model listener's router: on loopback it answers only loopback host names (a
/// DNS-rebound page gets 421); beyond loopback, where these listeners take no credentials,
/// it says so loudly.
#[cfg(any(feature = "mcp", feature = "local"))]
fn guarded(router: axum::Router, addr: &str) -> axum::Router {
    let host = agentry::a2a::server::listen::host_name(addr);
    match agentry::a2a::server::listen::loopback_hosts(host) {
        Some(hosts) => agentry::a2a::server::listen::host_guard(router, &hosts),
        None => {
            tracing::warn!(
                "listening on {addr}, beyond loopback, with no credentials: anyone who can \
                 reach it can use it"
            );
            router
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    #[cfg(feature = "local")]
    {
        // Before any thread starts: candle sizes its CPU pool once, from the environment.
        let threads = cli.threads.or_else(|| {
            std::env::var("CANDLE_NUM_THREADS")
                .is_err()
                .then(|| std::thread::available_parallelism().map_or(1, |n| n.get().min(2)))
        });
        if let Some(n) = threads {
            // SAFETY: single-threaded here; the runtime and loggers start below.
            #[allow(unsafe_code)]
            unsafe {
                agentry::local::set_threads(n)
            };
        }
    }
    #[cfg(not(feature = "local"))]
    let _ = cli.threads;
    // Dropped last, after the runtime: spans not yet exported go out then (the exporter
    // blocks, which it may not do inside the runtime).
    let _telemetry = logging();
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
    match rt.block_on(dispatch(cli.command)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            e.report();
            ExitCode::FAILURE
        }
    }
}

/// What the export layer needs to live as long as the process (nothing without `otel`).
#[cfg(feature = "otel")]
type Telemetry = Option<agentry::telemetry::Telemetry>;
#[cfg(not(feature = "otel"))]
type Telemetry = Option<std::convert::Infallible>;

/// Logs (events, no span prefixes) to stderr as `AGENTRY_LOG` filters them, as text or, with
/// `AGENTRY_LOG_FORMAT=json`, one JSON object per line (time, level, target, fields, and the
/// fields of the spans around the event: a request's method, task and correlation id) for
/// log collectors; with the `otel` feature and `OTEL_EXPORTER_OTLP_ENDPOINT` set, spans over
/// OTLP as `AGENTRY_TRACE` filters them (default `info`, the dependencies' own spans and
/// logs left out).
fn logging() -> Telemetry {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{EnvFilter, Layer, filter};

    let logs =
        EnvFilter::try_from_env("AGENTRY_LOG").unwrap_or_else(|_| EnvFilter::new("info,rmcp=warn"));
    let json = std::env::var("AGENTRY_LOG_FORMAT").is_ok_and(|f| f.eq_ignore_ascii_case("json"));
    let text = (!json).then(|| {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_filter(filter::filter_fn(|m| m.is_event()))
    });
    let lines = json.then(|| {
        tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(false)
            .with_span_list(true)
            .with_writer(std::io::stderr)
            .with_filter(filter::filter_fn(|m| m.is_event()))
    });
    let registry = tracing_subscriber::registry()
        .with(text.with_filter(logs.clone()))
        .with(lines.with_filter(logs));
    #[cfg(feature = "otel")]
    {
        let telemetry = match agentry::telemetry::Telemetry::from_env("agentry") {
            Ok(t) => t,
            Err(e) => {
                eprintln!("warning: {e}: spans are not exported");
                None
            }
        };
        let spans = EnvFilter::try_from_env("AGENTRY_TRACE").unwrap_or_else(|_| {
            EnvFilter::new("info,rmcp=warn,hyper=off,h2=off,reqwest=off,tower=off")
        });
        registry
            .with(telemetry.as_ref().map(|t| t.layer().with_filter(spans)))
            .init();
        telemetry
    }
    #[cfg(not(feature = "otel"))]
    {
        registry.init();
        None
    }
}

async fn dispatch(command: Command) -> Result<(), CliError> {
    match command {
        Command::Serve(args) => {
            let config = serve_config(args)?;
            agentry::serve(config, agentry::shutdown_signal()).await?;
            eprintln!("agentry: stopped");
            Ok(())
        }
        Command::A2a(cmd) => calls::run(cmd).await,
        Command::Chat { config } => chat::run(&config).await,
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
        Command::Audit(cmd) => audit::run(cmd).await,
        #[cfg(feature = "eval")]
        Command::Eval(args) => eval::run_cmd(args).await,
        Command::Triggers(cmd) => triggers::run(cmd).await,
        Command::Token(cmd) => tokens::run(cmd),
        Command::Mcp(McpCommand::Serve {
            toolset,
            http,
            pictures,
            data,
        }) => mcp_serve(&toolset, http, pictures, data).await,
        #[cfg(feature = "local")]
        Command::Model(cmd) => models::run(cmd).await,
        Command::Agents {
            config,
            scopes,
            json,
        } => flows::show_agents(&config, scopes.as_deref(), json).await,
        Command::Plan { task, config, json } => flows::plan_and_show(&task, &config, json).await,
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
                Config::load(&config)?.team
            } else {
                Some(Default::default())
            };
            match team {
                None => flows::plan_and_run(&task, &config, input.as_deref(), json).await,
                #[cfg(feature = "specialists")]
                Some(t) => {
                    let mut o = agentry::team::TeamOptions::from_section(t);
                    if let Some(c) = collection {
                        o.collection = c;
                    }
                    if let Some(out) = output {
                        o.output = out;
                    }
                    o.db = db.or(o.db);
                    o.in_process = in_process;
                    jobs::run_team(&task, o, json).await
                }
                #[cfg(not(feature = "specialists"))]
                Some(_) => {
                    let _ = (collection, output, db, in_process);
                    Err(agentry::Error::Disabled {
                        what: "the built-in team".into(),
                        feature: "specialists",
                    }
                    .into())
                }
            }
        }
        #[cfg(feature = "specialists")]
        Command::Ingest {
            paths,
            collection,
            db,
            json,
        } => jobs::ingest(&paths, &collection, db.as_deref(), json).await,
        #[cfg(not(feature = "specialists"))]
        Command::Ingest { .. } => Err(agentry::Error::Disabled {
            what: "`agentry ingest`".into(),
            feature: "specialists",
        }
        .into()),
    }
}

/// The one config `agentry serve` runs: the file's, or one built-in agent at `/`, with the
/// flags applied on top.
fn serve_config(args: ServeArgs) -> Result<Config, CliError> {
    let mut config = match &args.config {
        Some(path) => Config::load(path)?,
        None => {
            let agent = match args.agent.unwrap_or(AgentName::Echo) {
                AgentName::Echo => BuiltinAgent::Echo {
                    mode: match args.echo_mode {
                        EchoModeArg::Task => EchoMode::Task,
                        EchoModeArg::Message => EchoMode::Message,
                    },
                },
                AgentName::Conformance => BuiltinAgent::Conformance,
                AgentName::Rag => BuiltinAgent::Rag {
                    collection: args.collection.clone(),
                    db: args.kb.clone(),
                },
                AgentName::Ppt => BuiltinAgent::Ppt {
                    output: args.output.clone(),
                    pictures: args.pictures.clone(),
                },
                AgentName::Data => BuiltinAgent::Data {
                    output: args.output.clone(),
                    folders: args.data.folders.clone(),
                    sources: Default::default(),
                    databases: args.data.databases.clone(),
                    query_seconds: args.data.query_seconds,
                },
                AgentName::Researcher => BuiltinAgent::Researcher {
                    config: args.researcher.clone().ok_or_else(|| {
                        CliError::Usage(
                            "--agent researcher needs --researcher FILE (see \
                             examples/agents/researcher.toml)"
                                .into(),
                        )
                    })?,
                },
            };
            let mut c = Config::builtin(agent, ServerSection::default());
            c.agents[0].db = args.db.clone();
            c
        }
    };
    let s = &mut config.server;
    if let Some(h) = args.host {
        s.host = h;
    }
    if let Some(p) = args.port {
        s.port = p;
    }
    if let Some(u) = args.public_url {
        s.public_url = Some(u);
    }
    if let Some(st) = args.store {
        s.store = st;
    }
    if let Some(b) = args.bus {
        s.bus = Some(b);
    }
    if let Some(n) = args.workers {
        s.queue = true;
        s.workers = n;
    }
    if let Some(t) = args.token {
        s.bearer_tokens.push(t);
    }
    s.allow_private_push |= args.allow_private_push;
    s.audit |= args.audit;
    if let Some(c) = args.card {
        s.card = match c {
            CardArg::Both => agentry::config::CardChoice::Both,
            CardArg::V1 => agentry::config::CardChoice::V1_0,
        };
    }
    Ok(config)
}

async fn mcp_serve(
    name: &str,
    http: Option<String>,
    pictures: Vec<PathBuf>,
    data: DataArgs,
) -> Result<(), CliError> {
    #[cfg(feature = "mcp")]
    {
        // Decks go to $AGENTRY_PPT_OUTPUT, charts to $AGENTRY_DATA_OUTPUT; else the current
        // folder.
        let var = if name == "data" {
            "AGENTRY_DATA_OUTPUT"
        } else {
            "AGENTRY_PPT_OUTPUT"
        };
        let out = std::env::var_os(var).unwrap_or_else(|| ".".into());
        let options = agentry::toolsets::ToolsetOptions {
            output: out.into(),
            data: agentry::toolsets::DataOptions {
                folders: data.folders,
                databases: data.databases,
                query_seconds: data.query_seconds,
                ..Default::default()
            },
            pictures,
        };
        let tools = agentry::toolsets::toolset(name, &options)?;
        let server = agentry::mcp::ToolServer::new(&format!("agentry-{name}"), tools);
        match http {
            None => server
                .serve_stdio()
                .await
                .map_err(|e| CliError::Failed(format!("MCP stdio server: {e}"))),
            Some(addr) => {
                let listener =
                    agentry::a2a::server::listen::bind(&addr)
                        .await
                        .map_err(|source| agentry::Error::Listen {
                            addr: addr.clone(),
                            source,
                        })?;
                eprintln!("agentry: MCP toolset `{name}` at http://{addr}/mcp");
                let router = guarded(server.http_router(None), &addr);
                agentry::a2a::server::listen::serve_router(
                    listener,
                    router,
                    agentry::a2a::server::listen::Limits::default(),
                    agentry::shutdown_signal(),
                )
                .await
                .map_err(|e| agentry::Error::Io {
                    what: "MCP server failed".into(),
                    source: e,
                })?;
                Ok(())
            }
        }
    }
    #[cfg(not(feature = "mcp"))]
    {
        let _ = (name, http, pictures, data);
        Err(agentry::Error::Disabled {
            what: "`agentry mcp serve`".into(),
            feature: "mcp",
        }
        .into())
    }
}

/// `--store`: what agentry.toml's `store` accepts.
fn parse_store(s: &str) -> Result<StoreKind, String> {
    s.parse()
}
