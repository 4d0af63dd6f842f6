//! The CLI's error: the library's, the A2A client's, or a usage mistake; printed with its
//! whole cause chain and, where one helps, a hint.

use std::error::Error as _;

use agentry::a2a::A2aError;

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// Setting up or serving agents.
    #[error(transparent)]
    Agentry(#[from] agentry::Error),
    /// Calling an A2A agent.
    #[error(transparent)]
    A2a(#[from] A2aError),
    /// Arguments that do not fit together.
    #[error("{0}")]
    Usage(String),
    /// A run or server ended without doing its job; the message says how.
    #[error("{0}")]
    Failed(String),
}

impl CliError {
    /// `error: what: why: why...`, then a hint.
    pub(crate) fn report(&self) {
        let mut line = self.to_string();
        let mut source = self.source();
        while let Some(s) = source {
            let text = s.to_string();
            // transparent wrappers repeat their inner message
            if !line.ends_with(&text) {
                line.push_str(": ");
                line.push_str(&text);
            }
            source = s.source();
        }
        eprintln!("error: {line}");
        if let Some(hint) = self.hint() {
            eprintln!("hint: {hint}");
        }
    }

    fn hint(&self) -> Option<&'static str> {
        let e = match self {
            CliError::A2a(e) | CliError::Agentry(agentry::Error::A2a(e)) => e,
            _ => return None,
        };
        match e {
            A2aError::Connect { .. } => {
                Some("is the agent running? start one with `agentry serve --agent echo`")
            }
            A2aError::CardNotFound { .. } => {
                Some("pass the agent's base URL, e.g. http://127.0.0.1:8080")
            }
            A2aError::Unauthorized { .. } => Some("pass --token TOKEN or --api-key HEADER=VALUE"),
            A2aError::Forbidden { .. } => Some("these credentials are not allowed: use other ones"),
            A2aError::Rpc(r) if r.code == agentry::a2a::error::code::TASK_NOT_FOUND => {
                Some("check the task id; tasks of an in-memory agent are lost when it restarts")
            }
            _ => None,
        }
    }
}
