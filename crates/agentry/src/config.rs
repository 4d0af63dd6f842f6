//! The `agentry.toml` schema: the server, the agents it serves (configured or built-in), remote
//! agents, the planner, the orchestrator and the built-in team.
//!
//! Relative paths in a file are resolved against the file's folder when it is loaded, so a
//! config means the same wherever the program runs.
//!
//! ```
//! let config: agentry::Config = toml::from_str(r#"
//!     [server]
//!     port = 9000
//!     bearer_tokens = ["env:AGENTRY_TOKEN"]   # or the token itself, or "file:/run/secrets/t"
//!
//!     [[agents]]
//!     path = "/echo"
//!     builtin = { kind = "echo" }
//!
//!     [[agents]]
//!     path = "/private"
//!     builtin = { kind = "echo", mode = "message" }
//!     api_keys = ["file:/run/secrets/private-key"]   # this agent's own credentials
//! "#).unwrap();
//! assert_eq!(config.agents[0].path, "/echo");
//! ```

use std::path::{Path, PathBuf};

use agentry_core::agent::{AgentConfig, ModelConfig, parse_config};
use serde::Deserialize;

use crate::Error;

/// `agentry.toml`: the server and everything it serves or uses.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Config {
    /// Where and how agents are served.
    #[serde(default)]
    pub server: ServerSection,
    /// Agents served at their paths.
    #[serde(default)]
    pub agents: Vec<AgentEntry>,
    /// Remote A2A agents workflows may use by name.
    #[serde(default)]
    pub remotes: Vec<RemoteEntry>,
    /// The model that plans workflows (`agentry plan`, `agentry run`).
    #[serde(default)]
    pub planner: Option<PlannerSection>,
    /// Serve an orchestrator agent running these workflows.
    #[serde(default)]
    pub orchestrator: Option<OrchestratorSection>,
    /// The built-in RAG → PPT team behind `agentry run`.
    #[serde(default)]
    pub team: Option<TeamSection>,
    /// Serve an RFC 8693 token service (`POST /token`, `/.well-known/jwks.json`) minting
    /// delegated tokens for the agents.
    #[serde(default)]
    pub token_service: Option<TokenServiceSection>,
    /// Where workflows get the delegated tokens for `[[remotes]]` marked `delegate = true`:
    /// an RFC 8693 token service (agentry's `[token_service]` or an identity provider's).
    #[serde(default)]
    pub delegation: Option<DelegationSection>,
    /// Triggers requests may name in their task envelope (`triggerId`): each with the
    /// instructions it adds to the agent's prompt, the scopes needed to fire it, the agents it
    /// may start and its defaults. A request naming a trigger not listed here is refused.
    #[serde(default)]
    pub triggers: Vec<agentry_governance::triggers::Trigger>,
    /// `[client_tls]`: what this process's calls to other agents trust and present (a
    /// private CA; a client certificate for agents that take them, mTLS).
    #[serde(default)]
    pub client_tls: Option<ClientTlsSection>,
    /// `[events]`: publish-subscribe between agents (`POST /events/{topic}`, the agents'
    /// `publish_event` tool, `[[events.subscribe]]`).
    #[serde(default)]
    pub events: Option<EventsSection>,
}

/// `[events]`: publish-subscribe between agents. Events go on the `[server] bus` (NATS
/// JetStream: kept until every subscriber has handled them, shared by a subscriber's
/// replicas) or, without one, stay in the process.
///
/// ```
/// let config: agentry::Config = toml::from_str(r#"
///     [events]
///     agent_topics = ["invoice.*"]       # the agents' publish_event tool may publish here
///     [[events.subscribe]]
///     topic = "order.created"             # `*` one name, a final `>` the rest
///     agent = "billing"                   # a configured agent or a [[remotes]] entry
///     reply_topic = "billing.done"        # its answers published here
/// "#).unwrap();
/// assert_eq!(config.events.unwrap().subscribe[0].agent, "billing");
/// ```
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct EventsSection {
    /// Serve `POST /events/{topic}` (a JSON object as the body) for publishers outside the
    /// agents (default `true`); it takes the `[server]` credentials.
    #[serde(default = "yes")]
    pub endpoint: bool,
    /// With verified tokens (`[server.jwt]`, `[server.introspection]`): the scopes a token
    /// needs to publish on the endpoint (default `["events.publish"]`; the operator's static
    /// tokens and keys hold every scope).
    #[serde(default = "publish_scopes")]
    pub publish_scopes: Vec<String>,
    /// The topics (patterns) the agents' `publish_event` tool may publish on; empty (the
    /// default): the agents have no such tool.
    #[serde(default)]
    pub agent_topics: Vec<String>,
    /// Keeps this deployment's events apart from others on the same NATS (the stream
    /// `AGENTRY_EVENTS_<NAMESPACE>`).
    #[serde(default)]
    pub namespace: Option<String>,
    /// Which agent handles which events.
    #[serde(default)]
    pub subscribe: Vec<Subscription>,
}

fn yes() -> bool {
    true
}

fn publish_scopes() -> Vec<String> {
    vec!["events.publish".into()]
}

/// `[[events.subscribe]]`: an agent asked to handle each event whose topic matches
/// (`concurrency` at a time); one it fails on is delivered again (on NATS, up to 5 times).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Subscription {
    /// The topics: dot-separated names, `*` for one name, a final `>` for the rest.
    pub topic: String,
    /// The agent, by name: a configured agent of this file or a `[[remotes]]` entry.
    pub agent: String,
    /// A `[[triggers]]` id: its system prompt is added to the agent's for these events, and
    /// its `agents` must include this one.
    #[serde(default)]
    pub trigger: Option<String>,
    /// Where the agent's answer to each event is published (its text and data, and the
    /// event it answers), for the next agent in a chain.
    #[serde(default)]
    pub reply_topic: Option<String>,
    /// Events this replica hands the agent at once (default 1: one at a time, in order); at
    /// most 64. On NATS each replica takes only as many as it has room for, so the others
    /// share the rest.
    #[serde(default = "one")]
    pub concurrency: usize,
}

fn one() -> usize {
    1
}

/// `[server.tls]`: serve over HTTPS; with `client_ca`, client certificates that CA signed
/// are credentials (`mtls:` and the certificate's subject common name).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct TlsSection {
    /// The server's certificate chain (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM).
    pub key: PathBuf,
    /// The CA whose client certificates are credentials (PEM); none: no client certificates.
    #[serde(default)]
    pub client_ca: Option<PathBuf>,
    /// Refuse, at the handshake, clients that present no certificate (default: they may
    /// use another credential instead).
    #[serde(default)]
    pub require_client_cert: bool,
    /// The subject common names accepted; empty: any certificate the CA signed.
    #[serde(default)]
    pub client_names: Vec<String>,
}

/// `[client_tls]`: see [`Config::client_tls`].
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ClientTlsSection {
    /// A CA to trust besides the public roots (PEM).
    #[serde(default)]
    pub ca: Option<PathBuf>,
    /// The client certificate chain to present (PEM), with `key`.
    #[serde(default)]
    pub cert: Option<PathBuf>,
    /// Its private key (PEM).
    #[serde(default)]
    pub key: Option<PathBuf>,
}

/// `[token_service]`: delegated, short-lived tokens for calls between agents.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct TokenServiceSection {
    /// The `iss` of the tokens it mints (agents verify them with `[server.jwt]` naming this
    /// issuer and this service's JWKS).
    pub issuer: String,
    /// Its Ed25519 key (PKCS#8), created (mode 0600) when missing; default
    /// `<state_dir>/token-service.key`.
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    /// Lifetime of a minted token, in seconds (default 300; never past the subject token's).
    #[serde(default)]
    pub lifetime_seconds: Option<u64>,
    /// The longest delegation (`act`) chain it mints (default 4).
    #[serde(default)]
    pub max_depth: Option<usize>,
    /// The identity provider whose users' tokens may be exchanged.
    #[serde(default)]
    pub upstream: Option<UpstreamSection>,
    /// Who may ask, by client id (the acting agent's name) and secret (`env:`, `file:` or
    /// the value), sent with HTTP Basic authentication.
    #[serde(default)]
    pub clients: std::collections::BTreeMap<String, String>,
    /// Each agent a token may be minted for (its audience, usually its URL) and the most
    /// scopes it may be given.
    #[serde(default)]
    pub ceilings: std::collections::BTreeMap<String, Vec<String>>,
}

/// `[delegation]`: the token service this config's workflows exchange their caller's token
/// at, for a short-lived token per call to a remote agent.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct DelegationSection {
    /// The token endpoint (`.../token`).
    pub token_url: String,
    /// This orchestrator's client id there (the `act` name its tokens carry).
    pub client_id: String,
    /// Its secret: `env:NAME`, `file:PATH` or the value.
    pub client_secret: String,
}

/// `[token_service.upstream]`: the identity provider.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct UpstreamSection {
    /// Its public keys.
    pub jwks_file: PathBuf,
    /// Its `iss`.
    pub issuer: String,
}

impl Config {
    /// Reads a TOML or YAML file (by extension) and resolves its relative paths.
    pub fn load(path: impl AsRef<Path>) -> Result<Config, Error> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
            path: path.to_owned(),
            source,
        })?;
        let mut config: Config = parse_config(path, &text).map_err(|reason| Error::Config {
            path: path.to_owned(),
            reason,
        })?;
        config.resolve(path.parent().unwrap_or(Path::new(".")));
        Ok(config)
    }

    /// A config that serves one built-in agent at `/` (what `agentry serve --agent NAME` runs).
    pub fn builtin(agent: BuiltinAgent, server: ServerSection) -> Config {
        Config {
            server,
            agents: vec![AgentEntry {
                path: "/".into(),
                builtin: Some(agent),
                config: None,
                agent: None,
                db: None,
                bearer_tokens: None,
                api_keys: None,
                required_scopes: None,
                skill_scopes: Default::default(),
            }],
            ..Config::default()
        }
    }

    /// Makes every relative path of the file relative to `base` (the file's folder).
    fn resolve(&mut self, base: &Path) {
        let join = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        if let Some(d) = &mut self.server.state_dir {
            join(d);
        }
        if let Some(f) = self.server.jwt.as_mut().and_then(|j| j.jwks_file.as_mut()) {
            join(f);
        }
        if let Some(f) = &mut self.server.triggers_db {
            join(f);
        }
        if let Some(t) = &mut self.server.tls {
            join(&mut t.cert);
            join(&mut t.key);
            t.client_ca.as_mut().map(join);
        }
        if let Some(t) = &mut self.client_tls {
            t.ca.as_mut().map(join);
            t.cert.as_mut().map(join);
            t.key.as_mut().map(join);
        }
        if let Some(t) = &mut self.token_service {
            if let Some(k) = &mut t.key_file {
                join(k);
            }
            if let Some(u) = &mut t.upstream {
                join(&mut u.jwks_file);
            }
        }
        for a in &mut self.agents {
            if let Some(c) = &mut a.config {
                join(c);
            }
            if let Some(c) = &mut a.agent {
                resolve_model(&mut c.model, base);
            }
            if let Some(d) = &mut a.db {
                join(d);
            }
            match &mut a.builtin {
                Some(BuiltinAgent::Rag { db: Some(d), .. }) => join(d),
                Some(BuiltinAgent::Ppt { output, pictures }) => {
                    join(output);
                    pictures.iter_mut().for_each(join);
                }
                Some(BuiltinAgent::Mail { outbox, .. }) => join(outbox),
                Some(BuiltinAgent::Data {
                    output,
                    folders,
                    sources,
                    ..
                }) => {
                    join(output);
                    folders.iter_mut().for_each(join);
                    for loc in sources.values_mut() {
                        if !loc.contains("://") && Path::new(loc.as_str()).is_relative() {
                            *loc = base.join(&*loc).display().to_string();
                        }
                    }
                }
                Some(BuiltinAgent::Researcher { config }) => join(config),
                _ => {}
            }
        }
        if let Some(p) = &mut self.planner {
            resolve_model(&mut p.model, base);
        }
        if let Some(o) = &mut self.orchestrator {
            o.workflows.iter_mut().for_each(join);
        }
        if let Some(t) = &mut self.team {
            if let Some(m) = &mut t.model {
                resolve_model(m, base);
            }
            t.output.as_mut().map(join);
            t.db.as_mut().map(join);
        }
    }
}

/// A scripted model's transcript path is relative to the file that names it.
pub(crate) fn resolve_model(model: &mut ModelConfig, base: &Path) {
    if let ModelConfig::Scripted { transcript } = model
        && transcript.is_relative()
    {
        *transcript = base.join(&*transcript);
    }
}

/// `[server]`: where agents are served and what they keep.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct ServerSection {
    /// Address to listen on.
    pub host: String,
    /// Port to listen on.
    pub port: u16,
    /// Task store: `sqlite` (default; tasks survive a restart), `memory`, or a PostgreSQL
    /// URL (`postgres://user@host/db`, or `env:NAME` / `file:PATH` holding one; feature
    /// `postgres`): tasks and checkpoints in one database that several replicas share.
    pub store: StoreKind,
    /// Where SQLite files go (task stores, workflow runs); default [`crate::home_dir`].
    #[serde(alias = "data_dir")]
    pub state_dir: Option<PathBuf>,
    /// Public base URL for the cards; default `http://HOST:PORT`.
    pub public_url: Option<String>,
    /// Where workflow steps go first for agents that are both local and remote: `a2a`
    /// (remote, falling back to local) or `direct` (local). Default: `$AGENTRY_AGENT_MODE`,
    /// else `a2a`.
    pub agent_mode: Option<String>,
    /// Bearer tokens of which every call must carry one (or one of `api_keys`); both empty: no
    /// credentials required. Each is the token itself, `env:NAME` (read from the environment
    /// at start) or `file:PATH` (the file's first line), so the config itself need not hold
    /// secrets.
    pub bearer_tokens: Vec<String>,
    /// API keys, one of which a call may carry in `api_key_header` instead (same forms).
    pub api_keys: Vec<String>,
    /// The header API keys come in; default `X-API-Key`.
    pub api_key_header: String,
    /// Let push-notification webhooks target loopback and private addresses (tests only).
    pub allow_private_push: bool,
    /// More host names clients may use (the `Host` header) when listening on loopback, which
    /// answers only `localhost`, `127.0.0.1`, `[::1]` and the public URL's host by default
    /// (so a DNS-rebound name cannot reach an agent from a web page).
    pub allowed_hosts: Vec<String>,
    /// The agent card a request without `A2A-Version` gets: `both` (default: the 0.3 card
    /// with the 1.0 fields added, which every SDK of both generations reads) or `1.0` (valid
    /// against the strict 1.0 JSON schema, unreadable to 0.3-only clients). A request with
    /// the header always gets its generation's card.
    pub card: CardChoice,
    /// The largest request body, in bytes (default 4 MiB); larger ones get HTTP 413 with a
    /// JSON-RPC (or `google.rpc.Status`) error body.
    pub max_body_bytes: Option<usize>,
    /// Serve Prometheus metrics at `GET /metrics` (default `false`: they count every agent's
    /// traffic and need no credentials; expose them to your monitoring network only).
    /// `/healthz` and `/readyz` are always served.
    pub metrics: bool,
    /// On SIGTERM, how long `/readyz` answers 503 (`draining`) while requests are still
    /// taken, before the listener closes and open requests and streams finish (default 0).
    /// Set it to what your load balancer needs to take the replica out.
    pub drain_delay_ms: u64,
    /// What an answered task survives with the SQLite store: `power` (default: the machine
    /// losing power; every group commit is fsynced) or `process` (the process dying; commits
    /// are not fsynced, for disks whose flushes are slow). docs/BENCHMARKS.md has the cost
    /// of each.
    pub durability: DurabilityChoice,
    /// With a PostgreSQL store: how long a replica's hold on a task whose turn it runs lasts
    /// unless renewed (default 30; renewed every third of it). When a replica dies, its
    /// running tasks are recovered by another replica this much later; shorter means
    /// faster takeover and more renewals.
    pub lease_seconds: u64,
    /// With a PostgreSQL store: connections for reads, beside the one writer (default 4;
    /// each pipelines concurrent queries).
    pub store_readers: usize,
    /// Task events shared by replicas: a NATS URL (`nats://host:4222`, or `env:NAME` /
    /// `file:PATH` holding one; feature `nats`). A subscription reaching a replica that does
    /// not run the task's turn then follows it there. Needs a shared store (PostgreSQL).
    pub bus: Option<String>,
    /// Queue the turn of a new task sent without waiting for its answer (`blocking: false`,
    /// or the task envelope's `async` and `callback` response modes) on NATS JetStream (the
    /// `bus` server), for the agent's workers on any replica, instead of running it where the
    /// request landed (default `false`). Needs `bus` and a shared store.
    pub queue: bool,
    /// With `queue`: turns of each agent this replica takes from the queue at once (default
    /// 4). 0: it only queues (a front end); a replica no load balancer sends requests to is a
    /// pull worker.
    pub workers: usize,
    /// Programs the agents' MCP stdio servers may start, besides those of
    /// `$AGENTRY_MCP_ALLOW`: names looked up on `PATH` or paths, compared as the files they
    /// resolve to; `"*"` allows any. None by default: a config naming `command = "npx"` is
    /// refused until `npx` is listed here or in the variable.
    pub mcp_allow: Vec<String>,
    /// Record every authorization decision of every agent (who asked for what, let through
    /// or refused) in the tamper-evident audit trail `<state_dir>/audit.db` (its key in
    /// `audit.db.key`), before the request is served; `agentry audit verify` checks it.
    /// With `store = "postgres://..."` the trail is in that database instead (tables
    /// `agentry_audit`, `agentry_audit_head`), one chain every replica appends to.
    pub audit: bool,
    /// The audit trail's HMAC key, 64 hex digits, inline or as `env:NAME` / `file:PATH`.
    /// Unset: `<state_dir>/audit.db.key`, made on first use. Replicas sharing a PostgreSQL
    /// trail must all have the same key: set it here from a secret store.
    pub audit_key: Option<String>,
    /// The chain a PostgreSQL trail appends to (default `agentry`): replicas of one
    /// deployment name the same; another deployment on the same database, another.
    pub audit_chain: Option<String>,
    /// When a request goes on after its decision is recorded: `durable` (default: once the
    /// record is committed and fsynced) or `queued` (once it is queued in order, committed
    /// within milliseconds; a crash may lose the last records; about half the cost, see
    /// docs/BENCHMARKS.md).
    pub audit_mode: AuditMode,
    /// Bearer JWTs from an issuer the operator trusts, besides (or instead of) the static
    /// credentials: every call then needs a credential.
    pub jwt: Option<JwtSection>,
    /// Triggers also kept in this SQLite database (relative to the config file), besides
    /// `[[triggers]]`: `agentry triggers put|remove --db FILE` changes them while agents
    /// run, and every agent sees the change within a second.
    pub triggers_db: Option<PathBuf>,
    /// Serve over HTTPS (and take client certificates): `[server.tls]`.
    pub tls: Option<TlsSection>,
    /// Bearer tokens checked by their issuer (OAuth 2.0 introspection, RFC 7662):
    /// `[server.introspection]`, for opaque access tokens; JWTs still go to `[server.jwt]`
    /// when both are set.
    pub introspection: Option<IntrospectionSection>,
}

/// `[server.introspection]`: see [`ServerSection::introspection`].
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct IntrospectionSection {
    /// The issuer's introspection endpoint.
    pub url: String,
    /// This server's client id there (HTTP Basic).
    pub client_id: String,
    /// Its secret: `env:NAME`, `file:PATH` or the value.
    pub client_secret: String,
    /// The `aud` an active token must name (default: each agent's own URL).
    #[serde(default)]
    pub audience: Option<String>,
    /// Scopes every token must carry (per agent: its entry's `required_scopes`).
    #[serde(default)]
    pub required_scopes: Vec<String>,
    /// How long an answer is kept at most (default 60 s; never past the token's `exp`).
    #[serde(default)]
    pub cache_seconds: Option<u64>,
}

/// See [`ServerSection::audit_mode`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditMode {
    /// Served once the record is committed.
    #[default]
    Durable,
    /// Served once the record is queued.
    Queued,
}

/// `[server.jwt]`: which bearer JWTs the agents accept.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct JwtSection {
    /// The issuer's public keys as a JWKS file (re-read when a token names a key it does
    /// not hold, so a rotated key only needs publishing there). This or `jwks_url`.
    #[serde(default)]
    pub jwks_file: Option<PathBuf>,
    /// The issuer's JWKS URL (its `jwks_uri`): fetched at start, refreshed every
    /// `jwks_refresh_seconds` (default 300) and when a token names an unknown key.
    #[serde(default)]
    pub jwks_url: Option<String>,
    /// How often the JWKS URL is fetched again, in seconds (default 300).
    #[serde(default)]
    pub jwks_refresh_seconds: Option<u64>,
    /// The one `iss` accepted.
    pub issuer: String,
    /// The `aud` a token must name; default: each agent's own URL (its card's `url`), so a
    /// token minted for one agent is refused by the others.
    #[serde(default)]
    pub audience: Option<String>,
    /// Algorithms accepted: any of EdDSA, ES256, ES384, RS256, RS384, RS512, PS256, PS384,
    /// PS512 (default EdDSA, ES256, RS256).
    #[serde(default)]
    pub algorithms: Vec<String>,
    /// Scopes every token must carry (an agent entry's `required_scopes` replaces them).
    #[serde(default)]
    pub required_scopes: Vec<String>,
    /// Clock skew allowed on `exp` and `nbf`, in seconds (default 30).
    #[serde(default)]
    pub leeway_seconds: Option<u64>,
    /// More issuers whose tokens are accepted too, each with its own keys (the same audience,
    /// algorithms and scopes apply): agentry's token service beside the users' identity
    /// provider, or any OAuth 2.0 issuer whose client-credentials tokens are JWTs.
    #[serde(default)]
    pub also: Vec<IssuerSection>,
}

/// `[[server.jwt.also]]`: one more trusted issuer.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct IssuerSection {
    /// Its `iss`.
    pub issuer: String,
    /// Its public keys (re-read when a token names a key it does not hold).
    pub jwks_file: PathBuf,
}

/// See [`ServerSection::durability`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DurabilityChoice {
    /// Survives the process dying.
    Process,
    /// Survives a power loss too.
    #[default]
    Power,
}

impl From<DurabilityChoice> for agentry_a2a::store::Durability {
    fn from(d: DurabilityChoice) -> Self {
        match d {
            DurabilityChoice::Process => agentry_a2a::store::Durability::Process,
            DurabilityChoice::Power => agentry_a2a::store::Durability::Power,
        }
    }
}

/// See [`ServerSection::card`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub enum CardChoice {
    /// Both generations' fields.
    #[default]
    #[serde(rename = "both")]
    Both,
    /// The 1.0 card only.
    #[serde(rename = "1.0")]
    V1_0,
}

impl From<CardChoice> for agentry_a2a::server::CardDefault {
    fn from(c: CardChoice) -> Self {
        match c {
            CardChoice::Both => agentry_a2a::server::CardDefault::Both,
            CardChoice::V1_0 => agentry_a2a::server::CardDefault::V1_0,
        }
    }
}

impl Default for ServerSection {
    fn default() -> Self {
        ServerSection {
            host: "127.0.0.1".into(),
            port: 8080,
            store: StoreKind::Sqlite,
            state_dir: None,
            public_url: None,
            agent_mode: None,
            bearer_tokens: Vec::new(),
            api_keys: Vec::new(),
            api_key_header: "X-API-Key".into(),
            allow_private_push: false,
            triggers_db: None,
            tls: None,
            introspection: None,
            allowed_hosts: Vec::new(),
            card: CardChoice::Both,
            max_body_bytes: None,
            metrics: false,
            drain_delay_ms: 0,
            durability: DurabilityChoice::Power,
            lease_seconds: 30,
            store_readers: 4,
            bus: None,
            queue: false,
            workers: 4,
            mcp_allow: Vec::new(),
            audit: false,
            audit_mode: AuditMode::Durable,
            audit_key: None,
            audit_chain: None,
            jwt: None,
        }
    }
}

impl ServerSection {
    /// Whether any agent requires credentials (`[server]`'s or its own).
    pub fn has_credentials(&self) -> bool {
        !self.bearer_tokens.is_empty()
            || !self.api_keys.is_empty()
            || self.jwt.is_some()
            || self.tls.as_ref().is_some_and(|t| t.client_ca.is_some())
            || self.introspection.is_some()
    }

    /// The folder of the SQLite files: `state_dir`, else [`crate::home_dir`].
    pub fn state_dir(&self) -> PathBuf {
        self.state_dir.clone().unwrap_or_else(crate::home_dir)
    }

    /// Whether the listener is on a loopback address.
    pub fn is_loopback(&self) -> bool {
        agentry_a2a::server::listen::loopback_hosts(&self.host).is_some()
    }

    /// The host names a loopback listener answers (see `allowed_hosts`); `None` (any) for
    /// other listeners.
    pub fn host_allow_list(&self) -> Option<Vec<String>> {
        let mut hosts = agentry_a2a::server::listen::loopback_hosts(&self.host)?;
        if let Some(u) = &self.public_url
            && let Some(rest) = u.split_once("://").map(|(_, r)| r)
        {
            let authority = rest.split('/').next().unwrap_or_default();
            hosts.push(agentry_a2a::server::listen::host_name(authority).to_owned());
        }
        hosts.extend(self.allowed_hosts.iter().cloned());
        Some(hosts)
    }

    /// The base URL the cards advertise, without a trailing slash.
    pub fn public_base(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        self.public_url
            .clone()
            .unwrap_or_else(|| format!("{scheme}://{}:{}", self.host, self.port))
            .trim_end_matches('/')
            .to_owned()
    }
}

/// Where tasks are kept.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
#[non_exhaustive]
pub enum StoreKind {
    /// One SQLite file per agent under the state folder; tasks survive a restart.
    Sqlite,
    /// In memory: lost on exit (oldest finished tasks evicted past 10,000).
    Memory,
    /// One PostgreSQL database for every agent (and every replica): tasks, push configs,
    /// idempotency keys and run checkpoints. Holds a URL, or `env:NAME` / `file:PATH`
    /// naming where the URL is (it may carry a password).
    Postgres(String),
}

impl std::fmt::Debug for StoreKind {
    /// Never the URL: it may hold a password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreKind::Sqlite => f.write_str("Sqlite"),
            StoreKind::Memory => f.write_str("Memory"),
            StoreKind::Postgres(_) => f.write_str("Postgres(..)"),
        }
    }
}

impl std::str::FromStr for StoreKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "sqlite" => Ok(StoreKind::Sqlite),
            "memory" => Ok(StoreKind::Memory),
            s if s.starts_with("postgres://")
                || s.starts_with("postgresql://")
                || s.starts_with("env:")
                || s.starts_with("file:") =>
            {
                Ok(StoreKind::Postgres(s.to_owned()))
            }
            _ => Err(
                "store: `sqlite`, `memory`, or a PostgreSQL URL (`postgres://user@host/db`, \
                 `env:NAME`, `file:PATH`)"
                    .into(),
            ),
        }
    }
}

impl TryFrom<String> for StoreKind {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

/// `[[agents]]`: one served agent, from a config file, an inline table, or built in.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct AgentEntry {
    /// URL path the agent is served at (`/` or `/name`).
    pub path: String,
    /// An agent config file (TOML or YAML).
    #[serde(default)]
    pub config: Option<PathBuf>,
    /// An inline agent config.
    #[serde(default)]
    pub agent: Option<AgentConfig>,
    /// A built-in agent.
    #[serde(default)]
    pub builtin: Option<BuiltinAgent>,
    /// The task store's SQLite file; default `<state_dir>/<name>.db`.
    #[serde(default)]
    pub db: Option<PathBuf>,
    /// This agent's own bearer tokens (same forms). An entry with its own credentials
    /// (tokens or keys) takes only those, not `[server]`'s.
    #[serde(default)]
    pub bearer_tokens: Option<Vec<String>>,
    /// This agent's own API keys, instead of `[server]`'s (same forms).
    #[serde(default)]
    pub api_keys: Option<Vec<String>>,
    /// The scopes a JWT must carry to call this agent, instead of `[server.jwt]`'s.
    #[serde(default)]
    pub required_scopes: Option<Vec<String>>,
    /// Scopes a JWT must also carry for a request naming one of the agent's skills (the task
    /// envelope's `skill`), by skill id; declared on each skill in the card.
    #[serde(default)]
    pub skill_scopes: std::collections::BTreeMap<String, Vec<String>>,
}

/// The agents agentry ships, servable without writing an agent config.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum BuiltinAgent {
    /// Echoes each message, as a task or (`mode = "message"`) as a direct message.
    Echo {
        /// `task` (default) or `message`.
        #[serde(default)]
        mode: EchoMode,
    },
    /// The agent conformance suites drive (behaviour chosen by messageId prefix).
    Conformance,
    /// The RAG specialist over one collection of a knowledge base.
    Rag {
        /// The collection it answers from.
        collection: String,
        /// The knowledge base file; default `$AGENTRY_HOME/knowledge.db`.
        #[serde(default)]
        db: Option<PathBuf>,
    },
    /// The PowerPoint specialist; decks are saved in `output`.
    Ppt {
        /// Where decks are saved.
        output: PathBuf,
        /// Folders pictures may be taken from (none by default: outlines name picture paths).
        #[serde(default)]
        pictures: Vec<PathBuf>,
    },
    /// The mail agent: drafts into `outbox/drafts`; sends a draft (to the `outbox/sent`
    /// spool, for a mail relay) only after a confirmation turn, for callers holding
    /// `send_scopes` (default `mail.send`).
    Mail {
        /// The outbox folder.
        outbox: PathBuf,
        /// The `From:` of its drafts.
        from: String,
        /// Scopes a caller's token must hold to send (callers with the operator's own
        /// credentials may always).
        #[serde(default = "default_send_scopes")]
        send_scopes: Vec<String>,
    },
    /// The data analyst (SQL, statistics, charts); charts are saved in `output`. It reads
    /// only what `folders`, `sources` and `databases` allow (nothing by default) and never the
    /// server's state folder.
    Data {
        /// Where charts are saved.
        output: PathBuf,
        /// Folders whose data files and SQLite files requests may name (by relative path).
        #[serde(default)]
        folders: Vec<PathBuf>,
        /// Named sources: a request's `source` equal to a name reads its location (a file, a
        /// folder, a SQLite file or a `postgres://` URL).
        #[serde(default)]
        sources: std::collections::BTreeMap<String, String>,
        /// `postgres://` URLs requests may name.
        #[serde(default)]
        databases: Vec<String>,
        /// Time budget of one query, in seconds (default 30).
        #[serde(default)]
        query_seconds: Option<u64>,
    },
    /// The researcher: a question fanned out to MCP servers, or delegated over A2A.
    Researcher {
        /// Its configuration (mode, a2a_url, `[[sources]]`).
        config: PathBuf,
    },
}

impl BuiltinAgent {
    /// The agent's name: its task store's file name and its log name.
    pub fn name(&self) -> &'static str {
        match self {
            BuiltinAgent::Echo { .. } => "echo",
            BuiltinAgent::Conformance => "conformance",
            BuiltinAgent::Rag { .. } => "rag",
            BuiltinAgent::Ppt { .. } => "ppt",
            BuiltinAgent::Mail { .. } => "mail",
            BuiltinAgent::Data { .. } => "data",
            BuiltinAgent::Researcher { .. } => "researcher",
        }
    }
}

/// How the echo agent answers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EchoMode {
    /// As a completed task.
    #[default]
    Task,
    /// As a direct message, without a task.
    Message,
}

/// `[[remotes]]`: a remote A2A agent workflows may use by name.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct RemoteEntry {
    /// The name workflow steps use.
    pub name: String,
    /// Its base URL (the card is read from there).
    pub url: String,
    /// What it does, for the planner.
    #[serde(default)]
    pub description: String,
    /// Its skill ids, for validation before its card is read.
    #[serde(default)]
    pub skills: Vec<String>,
    /// Call it with a token minted per call from the caller's (needs `[delegation]`); a
    /// request made without a delegable token is refused rather than sent without one.
    #[serde(default)]
    pub delegate: bool,
    /// The `aud` of the delegated tokens (default: the URL in its card).
    #[serde(default)]
    pub audience: Option<String>,
    /// A bearer token of its own to call it with (`env:`, `file:` or the value).
    #[serde(default)]
    pub bearer_token: Option<String>,
    /// Or an API key (same forms), sent in `api_key_header` (default `X-API-Key`).
    #[serde(default)]
    pub api_key: Option<String>,
    /// The header the API key goes in.
    #[serde(default)]
    pub api_key_header: Option<String>,
}

/// `[planner]`: the model that plans workflows.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct PlannerSection {
    /// Any provider.
    pub model: ModelConfig,
    /// Attempts to repair an invalid plan with the validator's errors.
    #[serde(default)]
    pub max_repairs: Option<u32>,
}

/// `[orchestrator]`: an A2A agent whose skills are workflows.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct OrchestratorSection {
    /// Where it is served.
    #[serde(default = "default_orchestrator_path")]
    pub path: String,
    /// Workflow files (YAML, JSON or TOML).
    #[serde(default)]
    pub workflows: Vec<PathBuf>,
}

fn default_send_scopes() -> Vec<String> {
    vec!["mail.send".into()]
}

fn default_orchestrator_path() -> String {
    "/orchestrator".into()
}

/// `[team]`: the built-in RAG → PPT team behind `agentry run`. With a `model` (any provider)
/// the model reads the request and writes the cited summary; without one the team is
/// rule-based and extractive.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct TeamSection {
    /// Reads the request and writes the cited summary.
    pub model: Option<ModelConfig>,
    /// The document collection to draw on.
    pub collection: Option<String>,
    /// Where the deck and summary go.
    pub output: Option<PathBuf>,
    /// The knowledge base file.
    pub db: Option<PathBuf>,
}
