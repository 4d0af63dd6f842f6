//! Every authorization decision the server makes, reported to an [`AccessLog`] (an audit
//! trail) before anything is done for the request.
//!
//! The log is awaited: a request whose decision could not be recorded is refused with an
//! internal error, so nothing happens that the trail does not show (fail closed).

use std::sync::Arc;

use crate::envelope::Envelope;
use crate::jsonrpc::Request;
use crate::store::BoxFuture;

/// One decision: who asked which agent for what, and whether it was let through.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Access {
    /// The agent (its card's name).
    pub agent: String,
    /// The operation, by its v0.3 method name (`message/send`, `tasks/get`, ...); `None` when
    /// the request was refused before its body was read (no credentials).
    pub operation: Option<&'static str>,
    /// The task the request names, if it names one.
    pub task_id: Option<String>,
    /// Who the request authenticated as (`bearer:…`, `api-key:…`); `None` for anonymous.
    pub caller: Option<String>,
    /// The agents presenting the caller's delegated token for them, most recent first
    /// (empty: the caller itself).
    pub via: Vec<String>,
    /// Let through or refused.
    pub allowed: bool,
    /// Why, in a few words.
    pub reason: String,
    /// The request's correlation id, from its task envelope ([`crate::envelope`]).
    pub correlation_id: Option<String>,
    /// The request's idempotency key, from its task envelope.
    pub idempotency_key: Option<String>,
}

/// Where decisions go. `record` resolves once the decision is kept; an error refuses the
/// request.
pub trait AccessLog: Send + Sync + 'static {
    /// Keeps `access`; the error says why it could not.
    fn record(&self, access: Access) -> BoxFuture<'_, Result<(), String>>;
}

/// An agent's log and name, as its handlers use them.
#[derive(Clone)]
pub(super) struct Audited {
    pub(super) log: Arc<dyn AccessLog>,
    pub(super) agent: String,
}

impl Audited {
    /// Records a decision about `req` (or about an undecoded request).
    pub(super) async fn record(
        &self,
        req: Option<&Request>,
        env: Option<&Envelope>,
        caller: Option<&str>,
        via: &[String],
        allowed: bool,
        reason: String,
    ) -> Result<(), String> {
        let access = Access {
            agent: self.agent.clone(),
            operation: req.map(Request::method),
            task_id: req.and_then(task_of),
            caller: caller.map(str::to_owned),
            via: via.to_vec(),
            allowed,
            reason,
            correlation_id: env.and_then(|e| e.correlation_id.clone()),
            idempotency_key: env.and_then(|e| e.idempotency_key.clone()),
        };
        self.log.record(access).await
    }
}

/// The task a request names: the task it reads or changes, or the task a message continues.
fn task_of(req: &Request) -> Option<String> {
    match req {
        Request::SendMessage(p) | Request::StreamMessage(p) => p.message.task_id.clone(),
        Request::GetTask(p) => Some(p.id.clone()),
        Request::CancelTask(p) | Request::Resubscribe(p) | Request::ListPushConfigs(p) => {
            Some(p.id.clone())
        }
        Request::SetPushConfig(p) => Some(p.task_id.clone()),
        Request::GetPushConfig(p) => Some(p.id.clone()),
        Request::DeletePushConfig(p) => Some(p.id.clone()),
        Request::GetExtendedCard | Request::ListTasks(_) => None,
    }
}
