//! Governance joined to the A2A server: the audit trail as the server's access log, JWT
//! verification as its bearer verifier, the triggers registry as its admission hook.
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

use agentry_a2a::envelope;
use agentry_a2a::server::{
    Access, AccessLog, Admission, Admit, BearerVerifier, Refused, VerifiedBearer,
};
use agentry_a2a::store::BoxFuture;
use agentry_governance::triggers::{Priority, RunMode, TriggerError, Triggers};
use agentry_governance::{AuditLog, Event, JwtVerifier};

/// The audit trail as the server's access log: each decision an `authz` record (actor the
/// caller or `anonymous`, agent, operation as the skill, task, allow/deny, the reason).
#[derive(Debug)]
pub struct AuditTrail {
    log: std::sync::Arc<AuditLog>,
    queued: bool,
}

impl AuditTrail {
    /// Each request served once its record is committed (fsynced).
    pub fn durable(log: std::sync::Arc<AuditLog>) -> Self {
        AuditTrail { log, queued: false }
    }

    /// Each request served once its record is queued, in order (see
    /// [`AuditLog::enqueue`]): a crash may lose the last records, at about half the cost.
    pub fn queued(log: std::sync::Arc<AuditLog>) -> Self {
        AuditTrail { log, queued: true }
    }
}

impl AccessLog for AuditTrail {
    fn record(&self, a: Access) -> BoxFuture<'_, Result<(), String>> {
        let mut e = Event::new("authz", a.caller.unwrap_or_else(|| "anonymous".into()))
            .agent(a.agent)
            .decision(if a.allowed { "allow" } else { "deny" })
            .detail(serde_json::json!({ "reason": a.reason }));
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
#[derive(Debug, Clone, Default)]
pub struct TriggerGate(pub Arc<Triggers>);

impl Admit for TriggerGate {
    fn admit(&self, a: Admission<'_>) -> Result<Option<String>, Refused> {
        let Some(id) = a.envelope.trigger_id.clone() else {
            return Ok(None);
        };
        let t = self.0.admit(&id, a.agent, a.scopes).map_err(|e| match e {
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
        let claims = self.0.verify(token).map_err(|e| e.to_string())?;
        Ok(VerifiedBearer {
            scopes: claims.scopes().into_iter().collect(),
            subject: claims.sub,
        })
    }
}
