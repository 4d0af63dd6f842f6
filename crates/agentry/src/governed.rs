//! Governance joined to the A2A server: the audit trail as the server's access log (and the
//! record of the tool calls agents make), JWT verification as its bearer verifier, the
//! triggers registry as its admission hook.
//! `[server] audit`, `[server.jwt]` and `[[triggers]]` use them; a
//! program that builds its own [`AgentService`](agentry_a2a::server::AgentService) can too:
//!
//! ```no_run
//! # fn run(svc: agentry::a2a::server::AgentService) -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use agentry::governance::{AuditLog, JwtPolicy, JwtVerifier};
//! use agentry::governed::{AuditTrail, JwtBearer};
//! let policy = JwtPolicy::new("https://idp.example.com", "http://127.0.0.1:8080/");
//! let verifier = JwtVerifier::from_jwks_file("jwks.json".as_ref(), policy)?;
//! let credentials = agentry::a2a::server::Credentials {
//!     verifier: Some(Arc::new(JwtBearer(verifier))),
//!     required_scopes: vec!["agents.use".into()],
//!     required_for_all: true,
//!     ..Default::default()
//! };
//! let svc = svc
//!     .with_credentials(credentials)
//!     .with_access_log(Arc::new(AuditTrail::durable(Arc::new(AuditLog::open("audit.db".as_ref())?))));
//! # let _ = svc; Ok(()) }
//! ```

use std::sync::Arc;
use std::time::Instant;

use agentry_a2a::envelope;
use agentry_a2a::server::{
    Access, AccessLog, Admission, Admit, BearerVerifier, Refused, VerifiedBearer,
};
use agentry_a2a::store::BoxFuture;
use agentry_core::a2a::{AgentHandle, Ask, Update, UpdateStream};
use agentry_core::react;
use agentry_governance::triggers::{LiveTriggers, Priority, RunMode, TriggerError};
use agentry_governance::{AuditSink, Event, JwtVerifier};

/// The audit trail as the server's access log: each decision an `authz` record (actor the
/// caller or `anonymous`, agent, operation as the skill, task, allow/deny, the reason).
#[derive(Debug)]
pub struct AuditTrail {
    log: std::sync::Arc<dyn AuditSink>,
    queued: bool,
}

impl AuditTrail {
    /// Each request served once its record is committed (fsynced).
    pub fn durable(log: std::sync::Arc<dyn AuditSink>) -> Self {
        AuditTrail { log, queued: false }
    }

    /// Each request served once its record is queued, in order (see
    /// [`agentry_governance::AuditLog::enqueue`]): a crash may lose the last records, at about
    /// half the cost.
    pub fn queued(log: std::sync::Arc<dyn AuditSink>) -> Self {
        AuditTrail { log, queued: true }
    }
}

impl AccessLog for AuditTrail {
    fn record(&self, a: Access) -> BoxFuture<'_, Result<(), String>> {
        // A delegated call: the agent presenting the token acts, on behalf of its subject.
        let caller = a.caller.unwrap_or_else(|| "anonymous".into());
        let mut e = match a.via.first() {
            Some(actor) => Event::new("authz", actor.clone()).on_behalf_of(caller),
            None => Event::new("authz", caller),
        };
        if a.via.len() > 1 {
            e = e.detail(serde_json::json!({ "reason": a.reason, "chain": a.via }));
        } else {
            e = e.detail(serde_json::json!({ "reason": a.reason }));
        }
        let mut e = e
            .agent(a.agent)
            .decision(if a.allowed { "allow" } else { "deny" });
        if let Some(op) = a.operation {
            e = e.skill(op);
        }
        if let Some(t) = a.task_id {
            e = e.task(t);
        }
        if let Some(c) = a.correlation_id {
            e = e.correlation(c);
        }
        if let Some(k) = a.idempotency_key {
            e = e.idempotency_key(k);
        }
        Box::pin(async move {
            let done = if self.queued {
                self.log.enqueue(e).await
            } else {
                self.log.append(e).await.map(drop)
            };
            done.map_err(|e| e.to_string())
        })
    }
}

/// The triggers registry as the server's admission hook: a send naming an unknown trigger,
/// one for another agent, or one whose scopes the caller lacks is refused; a known one gets
/// the trigger's priority and run mode where it names none, and the agent its prompt.
#[derive(Debug, Clone)]
pub struct TriggerGate(pub Arc<LiveTriggers>);

impl Admit for TriggerGate {
    fn admit(&self, a: Admission<'_>) -> Result<Option<String>, Refused> {
        let Some(id) = a.envelope.trigger_id.clone() else {
            return Ok(None);
        };
        let triggers = self.0.current();
        let t = triggers
            .admit(&id, a.agent, a.scopes)
            .map_err(|e| match e {
                TriggerError::Forbidden { ref missing, .. } => Refused::Forbidden {
                    scopes: missing.clone(),
                    message: e.to_string(),
                },
                other => Refused::Invalid(other.to_string()),
            })?;
        if a.envelope.priority.is_none() {
            a.envelope.priority = t.priority.map(|p| match p {
                Priority::Low => envelope::Priority::Low,
                Priority::Normal => envelope::Priority::Normal,
                Priority::High => envelope::Priority::High,
            });
        }
        if a.envelope.response_mode.is_none() {
            a.envelope.response_mode = t.run_mode.map(|m| match m {
                RunMode::Sync => envelope::ResponseMode::Sync,
                RunMode::Async => envelope::ResponseMode::Async,
                RunMode::Callback => envelope::ResponseMode::Callback,
            });
        }
        Ok((!t.system_prompt.trim().is_empty()).then(|| t.system_prompt.clone()))
    }
}

/// A JWT verifier as the server's bearer verifier: the token's `sub` and scopes (`scope`
/// and `scp`).
#[derive(Debug)]
pub struct JwtBearer(pub JwtVerifier);

impl BearerVerifier for JwtBearer {
    fn verify(&self, token: &str) -> Result<VerifiedBearer, String> {
        JwtBearer::verify_with(&self.0, token)
    }
}

/// JWTs of several issuers (agentry's token service and the users' identity provider, say),
/// each checked by its own verifier, chosen by the `iss` the token claims: a token naming an
/// issuer not listed is refused, and the chosen verifier checks everything, `iss` included.
#[derive(Debug)]
pub struct JwtIssuers(pub Vec<(String, JwtVerifier)>);

impl BearerVerifier for JwtIssuers {
    fn verify(&self, token: &str) -> Result<VerifiedBearer, String> {
        let verifier = match &self.0[..] {
            [(_, only)] => only,
            many => {
                // Read only to choose: the chosen verifier checks `iss` with the signature.
                let iss = agentry_governance::token::unverified_claim(token, "iss");
                &many
                    .iter()
                    .find(|(name, _)| Some(name) == iss.as_ref())
                    .ok_or("untrusted issuer")?
                    .1
            }
        };
        JwtBearer::verify_with(verifier, token)
    }
}

impl JwtBearer {
    fn verify_with(v: &JwtVerifier, token: &str) -> Result<VerifiedBearer, String> {
        let v = v.verify_shared(token).map_err(|e| e.to_string())?;
        Ok(VerifiedBearer {
            scopes: v.scopes.clone(),
            actors: v.actors.clone(),
            subject: v.claims.sub.clone(),
        })
    }
}

/// An agent whose tool calls go to the audit trail: a `tool` record for each call when its
/// result comes back (the agent, on whose behalf, the tool, its arguments, the task,
/// correlation id and idempotency key, `ok` or `error`, the latency), and an `unfinished`
/// record for a call whose turn ended (failed, canceled, dropped) before its result. The
/// record is written before the update that reports the result is passed on, so a client
/// that has seen a tool's result can find it in the trail.
pub struct AuditedTools {
    inner: Arc<dyn AgentHandle>,
    log: Arc<dyn AuditSink>,
}

impl AuditedTools {
    /// `inner`, its tool calls recorded in `log`.
    pub fn new(inner: Arc<dyn AgentHandle>, log: Arc<dyn AuditSink>) -> Self {
        AuditedTools { inner, log }
    }
}

/// A call seen but not yet answered: tool, arguments, when.
type Pending = std::collections::HashMap<String, (String, serde_json::Value, Instant)>;

/// What every record of one turn shares.
#[derive(Clone)]
struct TurnFacts {
    agent: String,
    caller: Option<String>,
    task: Option<String>,
    correlation: Option<String>,
    key: Option<String>,
}

impl TurnFacts {
    fn event(&self, tool: &str, call_id: &str, args: serde_json::Value) -> Event {
        let mut e = Event::new("tool", self.agent.clone())
            .agent(self.agent.clone())
            .skill(tool)
            .detail(serde_json::json!({ "call_id": call_id, "arguments": args }));
        if let Some(c) = &self.caller {
            e = e.on_behalf_of(c.clone());
        }
        if let Some(t) = &self.task {
            e = e.task(t.clone());
        }
        if let Some(c) = &self.correlation {
            e = e.correlation(c.clone());
        }
        if let Some(k) = &self.key {
            e = e.idempotency_key(k.clone());
        }
        e
    }
}

/// The arguments as recorded: at most 4 KiB of their JSON (a summary past that).
fn recorded_args(args: &serde_json::Value) -> serde_json::Value {
    let text = args.to_string();
    if text.len() <= 4096 {
        return args.clone();
    }
    let mut cut = 4096;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    serde_json::json!({ "truncated": &text[..cut], "bytes": text.len() })
}

impl AgentHandle for AuditedTools {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn description(&self) -> String {
        self.inner.description()
    }

    fn skills(&self) -> Vec<String> {
        self.inner.skills()
    }

    fn stream(&self, ask: Ask) -> UpdateStream<'_> {
        use futures_util::StreamExt;
        let facts = TurnFacts {
            agent: self.inner.name(),
            caller: ask.caller.clone(),
            task: ask.task_id.clone(),
            correlation: ask.envelope.as_ref().and_then(|e| e.correlation_id.clone()),
            key: ask
                .envelope
                .as_ref()
                .and_then(|e| e.idempotency_key.clone()),
        };
        let updates = self.inner.stream(ask);
        let log = self.log.clone();
        let state = (Some(updates), Pending::new(), facts, log);
        Box::pin(futures_util::stream::unfold(
            state,
            |(updates, mut pending, facts, log)| async move {
                let mut updates = updates?;
                let Some(item) = updates.next().await else {
                    // The turn ended: calls still open never returned.
                    for (id, (tool, args, at)) in pending.drain() {
                        let e = facts
                            .event(&tool, &id, args)
                            .decision("unfinished")
                            .latency(at.elapsed());
                        record(&*log, e).await;
                    }
                    return None;
                };
                if let Ok(Update::Progress {
                    data: Some(step), ..
                }) = &item
                {
                    match step.get("kind").and_then(|k| k.as_str()) {
                        Some("tool_call") => {
                            let call = &step["call"];
                            let id = call["id"].as_str().unwrap_or_default().to_owned();
                            let tool = call["name"].as_str().unwrap_or_default().to_owned();
                            // `finish` and `ask_user` end the run; they are not tools.
                            if tool != react::FINISH && tool != react::ASK_USER {
                                let args = recorded_args(&call["arguments"]);
                                pending.insert(id, (tool, args, Instant::now()));
                            }
                        }
                        Some("observation") => {
                            let id = step["call_id"].as_str().unwrap_or_default();
                            let failed = step["is_error"].as_bool().unwrap_or(false);
                            let (tool, args, at) = pending.remove(id).unwrap_or_else(|| {
                                let tool = step["tool"].as_str().unwrap_or_default();
                                (tool.to_owned(), serde_json::Value::Null, Instant::now())
                            });
                            let e = facts
                                .event(&tool, id, args)
                                .decision(if failed { "error" } else { "ok" })
                                .latency(at.elapsed());
                            record(&*log, e).await;
                        }
                        _ => {}
                    }
                }
                Some((item, (Some(updates), pending, facts, log)))
            },
        ))
    }
}

async fn record(log: &dyn AuditSink, e: Event) {
    if let Err(err) = log.append(e).await {
        tracing::error!("tool call not audited: {err}");
    }
}
