//! The agents a workflow can use, local or remote, with fallback and a circuit breaker.
//!
//! Each name may have a local implementation (in-process), a remote one (an A2A URL), or both.
//! In `A2a` mode a step goes to the remote agent and falls back to the local one when the remote
//! is unreachable; in `Direct` mode local wins. A remote that fails `BREAKER_THRESHOLD` times in a
//! row is skipped for `cooldown` (the breaker is open), so a dead remote is not retried on every
//! step. `AGENTRY_AGENT_MODE=direct|a2a` selects the mode.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentry_a2a::client::{Auth, ClientConfig};
use agentry_core::a2a::{AgentHandle, Ask, RemoteAgent, Reply};
use agentry_core::agent::AgentError;
use serde::Serialize;

use crate::delegation::Delegation;

/// Where steps go first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// In-process implementations first.
    Direct,
    /// Remote agents over A2A first, local ones as fallback.
    A2a,
}

impl Mode {
    /// From `AGENTRY_AGENT_MODE` (`direct` or `a2a`), default `a2a`.
    pub fn from_env() -> Self {
        match std::env::var("AGENTRY_AGENT_MODE").as_deref() {
            Ok("direct") => Mode::Direct,
            _ => Mode::A2a,
        }
    }
}

const BREAKER_THRESHOLD: u32 = 3;

#[derive(Default)]
struct Breaker {
    failures: u32,
    open_until: Option<Instant>,
}

/// What the planner and validator know about an agent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentInfo {
    /// The agent's name in workflows.
    pub name: String,
    /// What it does (from its card or handle).
    pub description: String,
    /// Its skill ids.
    pub skills: Vec<String>,
    /// The scopes its card asks a caller's token to hold (empty: none, or a local agent, or a
    /// card not read yet).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// Skills whose own requirement differs from the agent's, with their scopes.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub skill_scopes: BTreeMap<String, Vec<String>>,
}

/// The credentials a call to a remote agent presents.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub enum RemoteAccess {
    /// The registry's client configuration (none by default).
    #[default]
    Client,
    /// These credentials, the agent's own (a bearer token or API key the operator holds).
    Static(Auth),
    /// A token minted for each call by the registry's [`Delegation`], for `audience` (default:
    /// the card's URL), on behalf of the turn's caller; a turn without a caller token is
    /// refused rather than sent with other credentials.
    Delegated {
        /// The `aud` the token names.
        audience: Option<String>,
    },
}

#[derive(Clone)]
struct Entry {
    local: Option<Arc<dyn AgentHandle>>,
    remote: Option<(String, RemoteAccess)>,
    description: String,
    skills: Vec<String>,
}

/// The agents of a workflow run.
pub struct AgentRegistry {
    entries: BTreeMap<String, Entry>,
    mode: Mode,
    cooldown: Duration,
    client: ClientConfig,
    remotes: tokio::sync::Mutex<HashMap<String, (Arc<RemoteAgent>, Instant)>>,
    card_ttl: Duration,
    breakers: Mutex<HashMap<String, Breaker>>,
    delegation: Option<Arc<dyn Delegation>>,
}

impl Default for AgentRegistry {
    fn default() -> Self {
        Self::new(Mode::from_env())
    }
}

impl AgentRegistry {
    /// An empty registry that prefers `mode` for agents both local and remote.
    pub fn new(mode: Mode) -> Self {
        AgentRegistry {
            entries: BTreeMap::new(),
            mode,
            cooldown: Duration::from_secs(30),
            client: ClientConfig {
                connect_timeout: Duration::from_secs(2),
                retries: 0,
                ..ClientConfig::default()
            },
            remotes: Default::default(),
            card_ttl: Duration::from_secs(300),
            breakers: Default::default(),
            delegation: None,
        }
    }

    /// Calls to remote agents trust this CA and present this client certificate (mTLS).
    pub fn with_client_tls(mut self, tls: agentry_a2a::client::ClientTls) -> Self {
        self.client.tls = Some(tls);
        self
    }

    /// How long an agent that failed is skipped before being tried again (default 30 s).
    pub fn with_cooldown(mut self, d: Duration) -> Self {
        self.cooldown = d;
        self
    }

    /// Where steps go first for agents both local and remote.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Registers an in-process agent under its name.
    pub fn add_local(&mut self, agent: Arc<dyn AgentHandle>) -> &mut Self {
        let name = agent.name();
        let e = self.entries.entry(name).or_insert_with(|| Entry {
            local: None,
            remote: None,
            description: agent.description(),
            skills: agent.skills(),
        });
        e.local = Some(agent);
        self
    }

    /// Where [`RemoteAccess::Delegated`] agents' tokens come from.
    pub fn with_delegation(mut self, d: Arc<dyn Delegation>) -> Self {
        self.delegation = Some(d);
        self
    }

    /// Registers a remote agent (its skills and description are read from its card on first
    /// use; give them here to validate before any network call).
    pub fn add_remote(
        &mut self,
        name: &str,
        url: &str,
        description: &str,
        skills: Vec<String>,
    ) -> &mut Self {
        self.add_remote_with(name, url, description, skills, RemoteAccess::Client)
    }

    /// As [`add_remote`](Self::add_remote), calling it with `access`.
    pub fn add_remote_with(
        &mut self,
        name: &str,
        url: &str,
        description: &str,
        skills: Vec<String>,
        access: RemoteAccess,
    ) -> &mut Self {
        let e = self
            .entries
            .entry(name.to_owned())
            .or_insert_with(|| Entry {
                local: None,
                remote: None,
                description: description.to_owned(),
                skills: skills.clone(),
            });
        e.remote = Some((url.to_owned(), access));
        if e.skills.is_empty() {
            e.skills = skills;
        }
        self
    }

    /// Whether a step may name `agent` (a registered name or an A2A URL).
    pub fn knows(&self, agent: &str) -> bool {
        is_url(agent) || self.entries.contains_key(agent)
    }

    /// Skill ids of a registered agent (`None` when unknown, e.g. a URL not yet contacted).
    pub fn skills(&self, agent: &str) -> Option<&[String]> {
        self.entries.get(agent).map(|e| e.skills.as_slice())
    }

    /// What the planner and validator know of every agent.
    pub fn describe(&self) -> Vec<AgentInfo> {
        self.entries
            .iter()
            .map(|(n, e)| AgentInfo {
                name: n.clone(),
                description: e.description.clone(),
                skills: e.skills.clone(),
                scopes: Vec::new(),
                skill_scopes: BTreeMap::new(),
            })
            .collect()
    }

    /// The capability registry: every agent as its card now says (remote cards read, or
    /// revalidated once past their TTL), with the scopes each agent and skill requires. With
    /// `held` (a user's scopes), only what that user may ask: skills they lack the scopes of
    /// are left out, and agents with none left. A remote that cannot be reached is listed as
    /// configured (its requirements are checked again when a step calls it).
    pub async fn catalog(&self, held: Option<&[String]>) -> Vec<AgentInfo> {
        let mut out = Vec::new();
        for mut info in self.describe() {
            let remote = match self.entries.get(&info.name).and_then(|e| e.remote.as_ref()) {
                Some((url, _)) if !self.breaker_open(url) => self.remote(url).await.ok(),
                _ => None,
            };
            if let Some(agent) = remote {
                if !agent.description().is_empty() {
                    info.description = agent.description();
                }
                info.skills = agent.skills();
                info.scopes = agent.required_scopes(None);
                for skill in &info.skills {
                    let own = agent.required_scopes(Some(skill));
                    if own != info.scopes {
                        info.skill_scopes.insert(skill.clone(), own);
                    }
                }
                if let Some(held) = held {
                    let card_ok = agent.allows(None, held).is_ok();
                    let all = info.skills.len();
                    info.skills.retain(|s| agent.allows(Some(s), held).is_ok());
                    info.skill_scopes.retain(|s, _| info.skills.contains(s));
                    if info.skills.is_empty() && (all > 0 || !card_ok) {
                        continue;
                    }
                }
            }
            out.push(info);
        }
        out
    }

    /// The circuit of a remote URL is open (calls skip it).
    pub fn breaker_open(&self, url: &str) -> bool {
        let b = self.breakers.lock().unwrap_or_else(|p| p.into_inner());
        b.get(url)
            .and_then(|b| b.open_until)
            .is_some_and(|t| Instant::now() < t)
    }

    fn record(&self, url: &str, ok: bool) {
        let mut b = self.breakers.lock().unwrap_or_else(|p| p.into_inner());
        let e = b.entry(url.to_owned()).or_default();
        if ok {
            *e = Breaker::default();
        } else {
            e.failures += 1;
            if e.failures >= BREAKER_THRESHOLD {
                e.open_until = Some(Instant::now() + self.cooldown);
                tracing::warn!(%url, "remote agent unreachable {} times: circuit open", e.failures);
            }
        }
    }

    /// The remote agent at `url`, its card revalidated (`If-None-Match`) once older than the
    /// card TTL: skills and security requirements change, and an unchanged card costs a 304.
    async fn remote(&self, url: &str) -> Result<Arc<RemoteAgent>, AgentError> {
        let mut cache = self.remotes.lock().await;
        if let Some((r, at)) = cache.get(url) {
            if at.elapsed() < self.card_ttl {
                return Ok(r.clone());
            }
            let r = match r.revalidate().await? {
                None => r.clone(),
                Some(fresh) => Arc::new(fresh),
            };
            cache.insert(url.to_owned(), (r.clone(), Instant::now()));
            return Ok(r);
        }
        let r = Arc::new(RemoteAgent::connect(url, self.client.clone()).await?);
        cache.insert(url.to_owned(), (r.clone(), Instant::now()));
        Ok(r)
    }

    /// How long a remote agent's card is trusted before it is read again (default 300 s).
    pub fn with_card_ttl(mut self, ttl: Duration) -> Self {
        self.card_ttl = ttl;
        self
    }

    async fn ask_remote(
        &self,
        url: &str,
        access: &RemoteAccess,
        ask: Ask,
    ) -> Result<Reply, AgentError> {
        if self.breaker_open(url) {
            return Err(AgentError::Unreachable(format!(
                "{url}: circuit open after repeated failures"
            )));
        }
        let r = match self.remote(url).await {
            Ok(agent) => {
                // Refused before any call when the card asks for scopes the caller lacks.
                let needed = match &ask.scopes {
                    Some(held) => {
                        agent
                            .requirement(ask.skill.as_deref(), held)
                            .map_err(|missing| AgentError::Forbidden {
                                agent: url.to_owned(),
                                missing,
                            })?
                    }
                    None => None,
                };
                match access {
                    RemoteAccess::Client => agent.ask(ask).await,
                    RemoteAccess::Static(auth) => agent.with_auth(auth.clone()).ask(ask).await,
                    RemoteAccess::Delegated { audience } => {
                        let auth = self.delegate(url, &agent, audience, needed, &ask).await?;
                        agent.with_auth(auth).ask(ask).await
                    }
                }
            }
            Err(e) => Err(e),
        };
        match &r {
            Err(AgentError::Unreachable(_)) => {
                self.remotes.lock().await.remove(url);
                self.record(url, false);
            }
            _ => self.record(url, true),
        }
        r
    }

    /// A token for one call to `agent` for the turn's caller, with the scopes the card
    /// requires for the skill (`needed`; `None`: what the token service allows).
    async fn delegate(
        &self,
        url: &str,
        agent: &RemoteAgent,
        audience: &Option<String>,
        needed: Option<Vec<String>>,
        ask: &Ask,
    ) -> Result<Auth, AgentError> {
        let refuse = |reason: String| AgentError::Delegation {
            agent: url.to_owned(),
            reason,
        };
        let Some(d) = &self.delegation else {
            return Err(refuse("no token service is configured".into()));
        };
        let Some(subject) = &ask.subject_token else {
            return Err(refuse(
                "the request was not made with a token that can be delegated".into(),
            ));
        };
        let audience = audience
            .clone()
            .or_else(|| agent.url())
            .unwrap_or_else(|| url.to_owned());
        let correlation = ask
            .envelope
            .as_ref()
            .and_then(|e| e.correlation_id.as_deref());
        d.credential(subject, &audience, needed.as_deref(), correlation)
            .await
            .map_err(|e| refuse(e.to_string()))
    }

    /// Asks `agent`, choosing local or remote by mode, falling back when the remote is down.
    pub async fn ask(&self, agent: &str, ask: Ask) -> Result<Reply, AgentError> {
        if is_url(agent) {
            return self.ask_remote(agent, &RemoteAccess::Client, ask).await;
        }
        let e = self
            .entries
            .get(agent)
            .cloned()
            .ok_or_else(|| AgentError::UnknownAgent(agent.to_owned()))?;
        match (&e.local, &e.remote, self.mode) {
            (Some(local), None, _) | (Some(local), Some(_), Mode::Direct) => local.ask(ask).await,
            (None, Some((url, access)), _) => self.ask_remote(url, access, ask).await,
            (Some(local), Some((url, access)), Mode::A2a) => {
                match self.ask_remote(url, access, ask.clone()).await {
                    Err(AgentError::Unreachable(why)) => {
                        tracing::info!(%agent, "remote unreachable ({why}); using the local agent");
                        local.ask(ask).await
                    }
                    other => other,
                }
            }
            (None, None, _) => Err(AgentError::Invalid {
                agent: agent.to_owned(),
                reason: "it has neither a local implementation nor a URL".into(),
            }),
        }
    }
}

pub(crate) fn is_url(agent: &str) -> bool {
    agent.starts_with("http://") || agent.starts_with("https://")
}
