//! [`Error`]: what can go wrong while setting agents up and serving them. Each variant keeps
//! its cause as a `source`, so a caller can print the whole chain or match on the layer.

use std::path::PathBuf;

/// A setup or serving failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file could not be read.
    #[error("cannot read {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A config file does not parse or does not fit the schema.
    #[error("invalid {}: {reason}", path.display())]
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the field's path.
        reason: String,
    },
    /// A setting that cannot work; the message says what to change.
    #[error("{0}")]
    Invalid(String),
    /// A part this build was compiled without.
    #[error("{what} needs agentry's `{feature}` feature, which this build does not have")]
    Disabled {
        /// What was asked for.
        what: String,
        /// The cargo feature that provides it.
        feature: &'static str,
    },
    /// A task store could not be opened.
    #[error("cannot open the store {}", path.display())]
    Store {
        /// The SQLite file.
        path: PathBuf,
        /// Why.
        #[source]
        source: agentry_a2a::store::StoreError,
    },
    /// A run store (checkpoints of unfinished runs) could not be opened.
    #[error(transparent)]
    RunStore(#[from] agentry_core::runs::RunStoreError),
    /// `[[triggers]]` is not a valid registry.
    #[error("[[triggers]]")]
    Triggers(#[from] agentry_governance::triggers::TriggerError),
    /// `[server.tls]` or `[client_tls]` cannot be used (a missing file, a key that does not
    /// match its certificate).
    #[error("TLS settings")]
    Tls(#[from] agentry_a2a::server::tls::TlsError),
    /// The audit trail could not be opened (or was found tampered with at start).
    #[error("audit trail")]
    Audit(#[from] agentry_governance::AuditError),
    /// The server could not listen.
    #[error("cannot listen on {addr} (is the port taken?)")]
    Listen {
        /// Host and port.
        addr: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Other I/O: writing outputs, serving.
    #[error("{what}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// An agent could not be made.
    #[error(transparent)]
    Agent(#[from] agentry_core::agent::AgentError),
    /// A workflow could not be prepared, resumed or loaded.
    #[error(transparent)]
    Flow(#[from] agentry_flow::FlowError),
    /// A workflow file could not be loaded.
    #[error(transparent)]
    Workflow(#[from] agentry_flow::workflow::LoadError),
    /// The planner failed.
    #[error(transparent)]
    Plan(#[from] agentry_flow::PlanError),
    /// The knowledge base failed.
    #[cfg(feature = "specialists")]
    #[error(transparent)]
    Knowledge(#[from] agentry_specialists::rag::RagError),
    /// An embedded model could not be loaded.
    #[cfg(feature = "local")]
    #[error(transparent)]
    Local(#[from] agentry_local::LocalError),
    /// An embeddings endpoint could not be reached.
    #[error(transparent)]
    Embed(#[from] agentry_core::embed::EmbedError),
    /// The A2A layer failed.
    #[error(transparent)]
    A2a(#[from] agentry_a2a::A2aError),
    /// The PostgreSQL database of `store = "postgres://..."` could not be used.
    #[cfg(feature = "postgres")]
    #[error(transparent)]
    Postgres(#[from] agentry_postgres::Error),
    /// The NATS server of `bus = "nats://..."` could not be reached.
    #[cfg(feature = "nats")]
    #[error(transparent)]
    Nats(#[from] agentry_nats::Error),
}

impl Error {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            what: what.into(),
            source,
        }
    }
}
