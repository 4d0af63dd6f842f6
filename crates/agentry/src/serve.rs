//! Serving: every agent of a [`Config`] (configured, built-in, the orchestrator) at its path,
//! each with its card and task store, behind one listener, plus `GET /agents` listing them.
//! This is the only serve path: `agentry serve --agent echo` is a one-agent config.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use agentry_a2a::model::AgentCard;
use agentry_a2a::server::{A2aServer, AgentService, Credentials, DynAgentExecutor, ServerConfig};
use agentry_a2a::store::{MemoryStore, TaskStore};
use agentry_core::a2a::{AgentHandle, Served};
use agentry_core::runs::{Checkpoints, SqliteRunStore};

use crate::config::{Config, StoreKind};
use crate::setup::{Configs, open_store};
use crate::{Error, builtin};

/// One agent as served.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServedInfo {
    /// The card's name.
    pub name: String,
    /// The URL clients use.
    pub url: String,
    /// Where its task store is (`None`: in memory, or in PostgreSQL: see `database`).
    pub store: Option<std::path::PathBuf>,
    /// The PostgreSQL database its tasks are in (host, port, name; no credentials).
    pub database: Option<String>,
}

/// The agents of a config, ready to serve: an axum router and what it serves.
pub struct Service {
    /// Every agent's JSON-RPC, HTTP+JSON and card routes, and `GET /agents`.
    pub router: axum::Router,
    /// Makes `/readyz` say draining; hand [`Drain::after`] your shutdown signal.
    ///
    /// [`Drain::after`]: agentry_a2a::server::Drain::after
    pub drain: agentry_a2a::server::Drain,
    /// What is served, in order.
    pub agents: Vec<ServedInfo>,
    /// The bus of `[events]`, which the subscriptions listen on and `POST /events/{topic}`
    /// publishes to (`None` without that section). The subscriptions run as long as
    /// [`Service::router`] (or a clone of it) lives.
    pub events: Option<Arc<dyn agentry_flow::bus::EventBus>>,
}

impl Service {
    /// Makes every agent of `config` (connecting MCP servers, opening stores and knowledge
    /// bases). Fails before anything is served when any agent cannot be made.
    pub async fn build(config: Config) -> Result<Service, Error> {
        let server = &config.server.clone();
        let public = server.public_base();
        let state_dir = server.state_dir();
        let url_for = |p: &str| {
            if p == "/" {
                format!("{public}/")
            } else {
                format!("{public}{p}")
            }
        };
        // `store = "postgres://..."`: one database for every agent, connected once.
        #[cfg(feature = "postgres")]
        let pg = match &server.store {
            StoreKind::Postgres(spec) => {
                let options = agentry_postgres::Options::default()
                    .lease(std::time::Duration::from_secs(server.lease_seconds.max(1)))
                    .readers(server.store_readers);
                Some(agentry_postgres::Database::connect_with(&secret(spec)?, options).await?)
            }
            _ => None,
        };
        let database = {
            #[cfg(feature = "postgres")]
            {
                pg.as_ref().map(|db| db.target().to_owned())
            }
            #[cfg(not(feature = "postgres"))]
            {
                None::<String>
            }
        };
        // Checkpoints of an agent's runs go beside its tasks (same file, or same database),
        // so an interrupted run resumes, and a run and its task are backed up together.
        // `bus = "nats://..."`: task events shared by the replicas, one connection.
        let events: Option<Arc<dyn agentry_a2a::server::TaskEvents>> = match &server.bus {
            None => None,
            Some(spec) => {
                if matches!(server.store, StoreKind::Sqlite | StoreKind::Memory) {
                    return Err(Error::Invalid(
                        "[server] bus shares task events between replicas, which need a shared \
                         store: set store = \"postgres://...\" too"
                            .into(),
                    ));
                }
                #[cfg(feature = "nats")]
                {
                    Some(Arc::new(
                        agentry_nats::NatsEvents::connect(&secret(spec)?).await?,
                    ))
                }
                #[cfg(not(feature = "nats"))]
                {
                    let _ = spec;
                    return Err(Error::Disabled {
                        what: "[server] bus (task events over NATS)".into(),
                        feature: "nats",
                    });
                }
            }
        };
        // `queue = true`: new tasks sent without waiting queued for workers, on the bus's
        // NATS (JetStream); a worker that goes silent for a lease loses its turn to another.
        let queue: Option<agentry_a2a::server::Queueing> = match (server.queue, &server.bus) {
            (false, _) => None,
            (true, None) => {
                return Err(Error::Invalid(
                    "[server] queue puts turns on the bus's NATS JetStream: set bus = \
                     \"nats://...\" (and a shared store) too"
                        .into(),
                ));
            }
            #[cfg(feature = "nats")]
            (true, Some(spec)) => Some(agentry_a2a::server::Queueing {
                queue: Arc::new(
                    agentry_nats::NatsQueue::connect(
                        &secret(spec)?,
                        None,
                        std::time::Duration::from_secs(server.lease_seconds.max(1)),
                    )
                    .await?,
                ),
                workers: server.workers,
                name: None,
            }),
            #[cfg(not(feature = "nats"))]
            (true, Some(_)) => None,
        };
        let runs_for = |name: &str, file: Option<&Path>| -> Result<Checkpoints, Error> {
            #[cfg(feature = "postgres")]
            if let Some(db) = &pg {
                return Ok(Checkpoints::new(Arc::new(
                    db.run_store(namespace(name, file)),
                )));
            }
            let _ = name;
            Ok(match file {
                Some(file) => Checkpoints::new(Arc::new(SqliteRunStore::open(file)?)),
                None => Checkpoints::default(),
            })
        };
        let store_for = |name: &str, file: Option<&Path>| -> Result<AgentStore, Error> {
            let ns = namespace(name, file).to_owned();
            Ok(match &server.store {
                StoreKind::Postgres(_) => {
                    #[cfg(feature = "postgres")]
                    if let Some(db) = &pg {
                        return Ok((Arc::new(db.task_store(&ns)), None, ns));
                    }
                    return Err(Error::Disabled {
                        what: "a PostgreSQL task store".into(),
                        feature: "postgres",
                    });
                }
                StoreKind::Memory => (Arc::new(MemoryStore::default()), None, ns),
                StoreKind::Sqlite => {
                    let path = file
                        .map(Path::to_owned)
                        .unwrap_or_else(|| state_dir.join(format!("{name}.db")));
                    (
                        Arc::new(open_store(&path, server.durability.into())?),
                        Some(path),
                        ns,
                    )
                }
            })
        };
        // `[server.jwt] jwks_url`: fetched once here, followed after; every agent's verifier
        // shares the keys.
        let feed = match &server.jwt {
            Some(j) => match (&j.jwks_file, &j.jwks_url) {
                (Some(_), None) => None,
                (None, Some(url)) => {
                    let every = std::time::Duration::from_secs(
                        j.jwks_refresh_seconds.unwrap_or(300).max(5),
                    );
                    Some(crate::jwks::follow(url, every).await?)
                }
                _ => {
                    return Err(Error::Invalid(
                        "[server.jwt] needs exactly one of jwks_file and jwks_url".into(),
                    ));
                }
            },
            None => None,
        };
        let feed = feed.as_ref();
        let server_credentials = |url: &str| credentials(server, None, url, feed);
        let mut server_config = ServerConfig::default();
        server_config.push.allow_private = server.allow_private_push;
        server_config.allowed_hosts = server.host_allow_list();
        server_config.card = server.card.into();
        if let Some(n) = server.max_body_bytes {
            server_config.body_limit = n;
        }
        server_config.metrics = server.metrics;
        let body_limit = server_config.body_limit;
        server_config.drain_delay = std::time::Duration::from_millis(server.drain_delay_ms);
        let audit_log: Option<Arc<dyn agentry_governance::AuditSink>> = if server.audit {
            use agentry_governance::audit::AuditKey;
            let key = match &server.audit_key {
                Some(spec) => AuditKey::Hex(secret(spec)?),
                None => AuditKey::File(state_dir.join("audit.db.key")),
            };
            // Replicas on one database share one trail there; one machine keeps it in a
            // file beside its tasks.
            #[cfg(feature = "postgres")]
            let shared = match &pg {
                // A key file of one machine's would give each replica its own key, and the
                // shared chain could not be verified: refused rather than written so.
                Some(_) if server.audit_key.is_none() => {
                    return Err(Error::Invalid(
                        "[server] audit with store = \"postgres://...\" needs audit_key (64 hex \
                         digits, e.g. \"env:AGENTRY_AUDIT_KEY\"): every replica seals the shared \
                         trail with the same key"
                            .into(),
                    ));
                }
                Some(db) => Some(Arc::new(agentry_postgres::PgAuditLog::open(
                    db,
                    server.audit_chain.as_deref().unwrap_or("agentry"),
                    &key,
                )?)
                    as Arc<dyn agentry_governance::AuditSink>),
                None => None,
            };
            #[cfg(not(feature = "postgres"))]
            let shared = None;
            Some(match shared {
                Some(log) => log,
                None => Arc::new(agentry_governance::AuditLog::open_with(
                    &state_dir.join("audit.db"),
                    key,
                )?),
            })
        } else {
            None
        };
        let access_log = audit_log.clone().map(|log| {
            let trail = match server.audit_mode {
                crate::config::AuditMode::Durable => crate::governed::AuditTrail::durable(log),
                crate::config::AuditMode::Queued => crate::governed::AuditTrail::queued(log),
            };
            Arc::new(trail) as Arc<dyn agentry_a2a::server::AccessLog>
        });
        // Always installed: a request naming a trigger is refused unless one is configured.
        let triggers_db = server
            .triggers_db
            .as_deref()
            .map(agentry_governance::triggers::TriggerDb::open)
            .transpose()?;
        let triggers = Arc::new(agentry_governance::triggers::LiveTriggers::new(
            config.triggers.clone(),
            triggers_db,
        )?);
        let admission: Option<Arc<dyn agentry_a2a::server::Admit>> =
            Some(Arc::new(crate::governed::TriggerGate(triggers.clone())));
        let mut a2a = A2aServer::new().config(server_config);
        let mut served = Vec::new();
        let mut add = |path: String,
                       mut card: AgentCard,
                       executor: Arc<dyn DynAgentExecutor>,
                       (store, file, ns): AgentStore,
                       credentials: &Option<Credentials>| {
            if let Some(c) = credentials {
                c.declare(&mut card);
            }
            served.push((
                path.clone(),
                ServedInfo {
                    name: card.name.clone(),
                    url: url_for(&path),
                    store: file,
                    database: database.clone(),
                },
            ));
            let mut svc = AgentService {
                card,
                extended_card: None,
                executor,
                store,
                credentials: None,
                access_log: access_log.clone(),
                admission: admission.clone(),
                events: events.clone(),
                // Queued under the agent's namespace in the shared store: replicas of one
                // deployment agree on it.
                queue: queue.clone().map(|q| agentry_a2a::server::Queueing {
                    name: Some(ns),
                    ..q
                }),
            };
            if let Some(c) = credentials {
                svc = svc.with_credentials(c.clone());
            }
            a2a = std::mem::take(&mut a2a).agent(&path, svc);
        };

        // Each configured agent is made once (its MCP servers started once): the instance
        // served at its path is the one workflows use.
        let configs = Configs::read(config).await?;
        let mut configured = configs.agents.iter();
        let mut made = Vec::new();
        for entry in &configs.config.agents {
            let path = entry.normalized_path();
            let url = url_for(&path);
            let creds = credentials(server, Some(entry), &url, feed)?;
            if let Some(b) = &entry.builtin {
                let (card, executor) = builtin::make(b, &url, server).await?;
                check_skill_scopes(entry, &card, server.jwt.is_some())?;
                add(
                    path,
                    card,
                    executor,
                    store_for(b.name(), entry.db.as_deref())?,
                    &creds,
                );
            } else if let Some((_, cfg)) = configured.next() {
                let store = store_for(&cfg.name, entry.db.as_deref())?;
                let checkpoints = runs_for(&cfg.name, store.1.as_deref())?;
                let agent = Arc::new(
                    configs
                        .create(cfg.clone())
                        .await?
                        .with_checkpoints(checkpoints),
                );
                let card = agent.card(&url);
                check_skill_scopes(entry, &card, server.jwt.is_some())?;
                // With an audit trail, every tool call the agent makes is in it, whether
                // asked at its path or by a workflow step.
                let handle: Arc<dyn AgentHandle> = match &audit_log {
                    Some(log) => Arc::new(crate::governed::AuditedTools::new(agent, log.clone())),
                    None => agent,
                };
                add(path, card, Arc::new(Served(handle.clone())), store, &creds);
                made.push(handle);
            }
        }
        let setup = configs.assemble(made)?;
        if let Some(o) = &setup.config.orchestrator {
            #[cfg(feature = "postgres")]
            let engine = Arc::new(match &pg {
                Some(db) => setup.engine_on(Arc::new(db.run_store("workflows"))),
                None => setup.engine()?,
            });
            #[cfg(not(feature = "postgres"))]
            let engine = Arc::new(setup.engine()?);
            let mut orch =
                agentry_flow::a2a::Orchestrator::new("orchestrator", engine, setup.workflows()?);
            if setup.config.planner.is_some() {
                orch = orch.with_planner(Arc::new(setup.planner()?));
            }
            let path = format!("/{}", o.path.trim_matches('/'));
            let card = orch.card(&url_for(&path));
            let creds = server_credentials(&url_for(&path))?;
            add(
                path,
                card,
                Arc::new(orch),
                store_for("orchestrator", None)?,
                &creds,
            );
        }

        // `[events]`: the subscriptions start once every agent they may name is made.
        let mut subscriptions = crate::events::Running::default();
        let events = setup.events.clone();
        let mut events_routes = None;
        if let (Some(ev), Some(bus)) = (&setup.config.events, &events) {
            crate::events::check(ev, &setup.registry, &triggers)?;
            subscriptions =
                crate::events::subscribe(ev, bus, &setup.registry, &triggers, audit_log.as_ref())
                    .await?;
            if ev.endpoint {
                let path = crate::events::PATH;
                if let Some((p, _)) = served
                    .iter()
                    .find(|(p, _)| p == path || p.starts_with(&format!("{path}/")))
                {
                    return Err(Error::Invalid(format!(
                        "an agent is served at {p}, where [events] publishes: move it, or set \
                         [events] endpoint = false"
                    )));
                }
                let mut creds = server_credentials(&url_for(path))?;
                if let Some(c) = &mut creds {
                    c.required_scopes.extend(ev.publish_scopes.iter().cloned());
                }
                events_routes = Some(crate::events::routes(
                    bus.clone(),
                    creds,
                    audit_log.clone(),
                    body_limit,
                ));
            }
        }

        let root_taken = served.iter().any(|(p, _)| p == "/");
        let index = serde_json::json!({ "agents": served.iter().map(|(_, s)| serde_json::json!({
            "name": s.name, "url": s.url,
            "card": format!("{}/.well-known/agent-card.json", s.url.trim_end_matches('/')),
        })).collect::<Vec<_>>() });
        let index = Arc::new(index);
        // The subscriptions stop when the router is dropped: the listing route holds them.
        let subscriptions = Arc::new(subscriptions);
        let list = move || {
            let _held = &subscriptions;
            let index = index.clone();
            async move { axum::Json((*index).clone()) }
        };
        let (router, drain) = a2a.router_and_drain();
        let mut router = router.route("/agents", axum::routing::get(list.clone()));
        if !root_taken {
            router = router.route("/", axum::routing::get(list));
        }
        if let Some(r) = events_routes {
            router = router.merge(r);
        }
        if let Some(t) = &setup.config.token_service {
            let service = crate::tokens::TokenService::from_config(t, &state_dir, audit_log)?;
            router = router.merge(crate::tokens::routes(Arc::new(service)));
        }
        Ok(Service {
            router,
            drain,
            agents: served.into_iter().map(|(_, s)| s).collect(),
            events,
        })
    }
}

/// An agent's task store, its SQLite file (if one), and its namespace in a shared database
/// (and queue of turns).
type AgentStore = (Arc<dyn TaskStore>, Option<std::path::PathBuf>, String);

/// An agent's rows in a shared database (and its queue of turns): its entry's `db` file name
/// when it names one (as that names its SQLite file), else its name.
fn namespace<'a>(name: &'a str, file: Option<&'a Path>) -> &'a str {
    file.and_then(|f| f.file_stem())
        .and_then(|s| s.to_str())
        .unwrap_or(name)
}

/// The credentials an agent requires: its own when its entry names any (`bearer_tokens` or
/// `api_keys`; `[server]`'s then do not apply to it), else `[server]`'s; `None` when there are
/// none.
fn credentials(
    server: &crate::config::ServerSection,
    entry: Option<&crate::config::AgentEntry>,
    url: &str,
    feed: Option<&agentry_governance::JwksFeed>,
) -> Result<Option<Credentials>, Error> {
    let none = Vec::new();
    let (tokens, keys) = match entry {
        Some(e) if e.bearer_tokens.is_some() || e.api_keys.is_some() => (
            e.bearer_tokens.as_ref().unwrap_or(&none),
            e.api_keys.as_ref().unwrap_or(&none),
        ),
        _ => (&server.bearer_tokens, &server.api_keys),
    };
    let (mut verifier, mut required_scopes) = match &server.jwt {
        Some(j) => {
            let scopes = entry
                .and_then(|e| e.required_scopes.clone())
                .unwrap_or_else(|| j.required_scopes.clone());
            (Some(jwt_verifier(j, url, feed)?), scopes)
        }
        None => (None, Vec::new()),
    };
    if let Some(i) = &server.introspection {
        // Opaque tokens to the issuer's endpoint; JWTs still to `[server.jwt]`.
        verifier = Some(Arc::new(crate::introspect::Introspection::new(
            i.url.clone(),
            i.client_id.clone(),
            secret(&i.client_secret)?,
            i.audience.clone().unwrap_or_else(|| url.to_owned()),
            std::time::Duration::from_secs(i.cache_seconds.unwrap_or(60)),
            verifier,
        )));
        if server.jwt.is_none() {
            required_scopes = entry
                .and_then(|e| e.required_scopes.clone())
                .unwrap_or_else(|| i.required_scopes.clone());
        }
    }
    // A client CA makes client certificates credentials (of every agent of the server).
    let client_certs = server
        .tls
        .as_ref()
        .filter(|t| t.client_ca.is_some())
        .map(|t| agentry_a2a::server::ClientCerts {
            names: t.client_names.clone(),
        });
    if tokens.is_empty() && keys.is_empty() && verifier.is_none() && client_certs.is_none() {
        return Ok(None);
    }
    Ok(Some(Credentials {
        bearer_tokens: tokens.iter().map(|t| secret(t)).collect::<Result<_, _>>()?,
        api_key_header: Some(server.api_key_header.clone()),
        api_keys: keys.iter().map(|k| secret(k)).collect::<Result<_, _>>()?,
        required_for_all: true,
        verifier,
        required_scopes,
        skill_scopes: entry.map(|e| e.skill_scopes.clone()).unwrap_or_default(),
        client_certs,
    }))
}

/// An entry's `skill_scopes` name skills its card lists, and JWTs are verified to hold them.
fn check_skill_scopes(
    entry: &crate::config::AgentEntry,
    card: &AgentCard,
    jwt: bool,
) -> Result<(), Error> {
    if entry.skill_scopes.is_empty() {
        return Ok(());
    }
    if !jwt {
        return Err(Error::Invalid(format!(
            "[[agents]] {}: skill_scopes need [server.jwt] (only verified tokens carry scopes)",
            entry.path
        )));
    }
    for skill in entry.skill_scopes.keys() {
        if !card.skills.iter().any(|k| &k.id == skill) {
            let known: Vec<&str> = card.skills.iter().map(|k| k.id.as_str()).collect();
            return Err(Error::Invalid(format!(
                "[[agents]] {}: skill_scopes name `{skill}`, not a skill of {} ({})",
                entry.path,
                card.name,
                known.join(", ")
            )));
        }
    }
    Ok(())
}

/// `[server.jwt]` as the verifier of one agent (its audience: the configured one, else the
/// agent's URL).
fn jwt_verifier(
    j: &crate::config::JwtSection,
    url: &str,
    feed: Option<&agentry_governance::JwksFeed>,
) -> Result<Arc<dyn agentry_a2a::server::BearerVerifier>, Error> {
    use agentry_governance::{JwtPolicy, JwtVerifier};
    let audience = j.audience.clone().unwrap_or_else(|| url.to_owned());
    let mut policy = JwtPolicy::new(j.issuer.clone(), audience);
    if !j.algorithms.is_empty() {
        policy = policy
            .with_algorithms(&j.algorithms)
            .map_err(|e| Error::Invalid(format!("[server.jwt] algorithms: {e}")))?;
    }
    if let Some(s) = j.leeway_seconds {
        policy.leeway = std::time::Duration::from_secs(s);
    }
    let mut also = Vec::new();
    for a in &j.also {
        let mut p = policy.clone();
        p.issuer = a.issuer.clone();
        let v = JwtVerifier::from_jwks_file(&a.jwks_file, p)
            .map_err(|e| Error::Invalid(format!("[[server.jwt.also]] {}: {e}", a.issuer)))?;
        also.push((a.issuer.clone(), v));
    }
    let verifier = match (feed, &j.jwks_file) {
        (Some(feed), _) => JwtVerifier::from_feed(feed, policy),
        (None, Some(file)) => JwtVerifier::from_jwks_file(file, policy)
            .map_err(|e| Error::Invalid(format!("[server.jwt]: {e}")))?,
        (None, None) => {
            return Err(Error::Invalid(
                "[server.jwt] needs jwks_file or jwks_url".into(),
            ));
        }
    };
    if also.is_empty() {
        return Ok(Arc::new(crate::governed::JwtBearer(verifier)));
    }
    if also.iter().any(|(iss, _)| *iss == j.issuer) {
        return Err(Error::Invalid(format!(
            "[[server.jwt.also]]: {} is already [server.jwt]'s issuer",
            j.issuer
        )));
    }
    also.insert(0, (j.issuer.clone(), verifier));
    Ok(Arc::new(crate::governed::JwtIssuers(also)))
}

/// A credential as agentry.toml gives one: `env:NAME`, `file:PATH` (its first line) or the
/// value itself; trimmed, and refused when empty. Errors name where the secret was to come
/// from, never the secret.
pub fn secret(spec: &str) -> Result<String, Error> {
    let value = if let Some(name) = spec.strip_prefix("env:") {
        std::env::var(name).map_err(|_| {
            Error::Invalid(format!(
                "credential `env:{name}`: the environment variable is not set"
            ))
        })?
    } else if let Some(path) = spec.strip_prefix("file:") {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
            path: path.into(),
            source,
        })?;
        text.lines().next().unwrap_or_default().to_owned()
    } else {
        spec.to_owned()
    };
    let value = value.trim().to_owned();
    if value.is_empty() {
        return Err(Error::Invalid(format!(
            "credential `{}` is empty",
            if spec.starts_with("env:") || spec.starts_with("file:") {
                spec
            } else {
                "(inline)"
            }
        )));
    }
    Ok(value)
}

/// Serves every agent of `config` on its `[server]` host and port until `shutdown` resolves,
/// then finishes open requests and streams.
pub async fn serve(
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    let addr = format!("{}:{}", config.server.host, config.server.port);
    let open_agents = config
        .agents
        .iter()
        .filter(|e| {
            let own = e.bearer_tokens.as_ref().is_some_and(|t| !t.is_empty())
                || e.api_keys.as_ref().is_some_and(|k| !k.is_empty());
            !own && !config.server.has_credentials()
        })
        .count();
    // `POST /events/{topic}` starts subscribed agents: open like an agent without credentials.
    let open_events =
        config.events.as_ref().is_some_and(|e| e.endpoint) && !config.server.has_credentials();
    if !config.server.is_loopback() && open_events {
        tracing::warn!(
            "listening on {addr} beyond loopback with POST /events/{{topic}} WITHOUT \
             credentials: anyone who can reach this address can start the subscribed agents"
        );
    }
    if !config.server.is_loopback() && open_agents > 0 {
        tracing::warn!(
            "listening on {addr} beyond loopback with {open_agents} agent(s) WITHOUT \
             credentials: anyone who can reach this address can use them; set --token or \
             [server] bearer_tokens / api_keys"
        );
    }
    let tls = config
        .server
        .tls
        .as_ref()
        .map(|t| {
            agentry_a2a::server::tls::ServerTls::from_pem_files(
                &t.cert,
                &t.key,
                t.client_ca.as_deref(),
                t.require_client_cert,
            )
        })
        .transpose()?;
    let service = Service::build(config).await?;
    let listener = agentry_a2a::server::listen::bind(&addr)
        .await
        .map_err(|source| Error::Listen {
            addr: addr.clone(),
            source,
        })?;
    for a in &service.agents {
        let store = match (&a.store, &a.database) {
            (Some(p), _) => p.display().to_string(),
            (None, Some(db)) => format!("in PostgreSQL at {db}"),
            (None, None) => "in memory".to_owned(),
        };
        tracing::info!(
            "agent `{}` at {} (card: {}/.well-known/agent-card.json; tasks {store})",
            a.name,
            a.url,
            a.url.trim_end_matches('/')
        );
    }
    agentry_a2a::server::listen::serve_router_tls(
        listener,
        service.router,
        agentry_a2a::server::listen::Limits::default(),
        tls,
        service.drain.after(shutdown),
    )
    .await
    .map_err(|e| Error::io("server failed", e))
}

/// Serves the agents of a config file until Ctrl-C or SIGTERM: the whole of a program that
/// embeds agentry's server.
///
/// ```no_run
/// # async fn run() -> Result<(), agentry::Error> {
/// agentry::serve_config("agentry.toml").await
/// # }
/// ```
pub async fn serve_config(path: impl AsRef<Path>) -> Result<(), Error> {
    serve(Config::load(path)?, shutdown_signal()).await
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
    tracing::info!("shutting down; finishing open requests and streams");
}
