//! The agents agentry ships, made ready to serve: a card and an executor for each
//! [`BuiltinAgent`].

use std::sync::Arc;

use crate::agents::{Conformance, Echo};
use agentry_a2a::model::AgentCard;
use agentry_a2a::server::DynAgentExecutor;

use crate::Error;
use crate::config::{BuiltinAgent, EchoMode, ServerSection};

/// A built-in agent's card (advertising `url`) and executor. Everything that can fail on the
/// agent's own inputs (a knowledge base, a researcher config) fails here, before any store
/// is created.
///
/// `server` says where the server's own files are (task stores, runs: agents that read files
/// never read there) and which programs MCP stdio servers may start.
pub async fn make(
    agent: &BuiltinAgent,
    url: &str,
    server: &ServerSection,
) -> Result<(AgentCard, Arc<dyn DynAgentExecutor>), Error> {
    let _ = server; // read by the data and researcher agents, in builds that have them
    Ok(match agent {
        BuiltinAgent::Echo { mode } => {
            let mode = match mode {
                EchoMode::Task => crate::agents::EchoMode::Task,
                EchoMode::Message => crate::agents::EchoMode::Message,
            };
            (Echo::card(url), Arc::new(Echo { mode }))
        }
        BuiltinAgent::Conformance => (Conformance::card(url), Arc::new(Conformance::default())),
        #[cfg(feature = "specialists")]
        BuiltinAgent::Rag { collection, db } => {
            use agentry_core::a2a::Served;
            use agentry_specialists::agents::RagSpecialist;
            let kb = crate::knowledge::open(db.as_deref()).await?;
            let mut agent = agentry_specialists::rag::RagAgent::new(kb, collection);
            agent.reader = crate::knowledge::reader();
            let rag = Arc::new(RagSpecialist::new(agent));
            (rag.card(url), Arc::new(Served(rag)))
        }
        #[cfg(feature = "specialists")]
        BuiltinAgent::Ppt { output, pictures } => {
            use agentry_core::a2a::Served;
            use agentry_specialists::agents::PptSpecialist;
            let decks = crate::toolsets::decks(output, pictures)?;
            let ppt = Arc::new(PptSpecialist::new(&decks));
            (ppt.card(url), Arc::new(Served(ppt)))
        }
        #[cfg(feature = "specialists")]
        BuiltinAgent::Mail {
            outbox,
            from,
            send_scopes,
        } => {
            let mail = agentry_specialists::mail::MailAgent::new(
                outbox,
                from.clone(),
                send_scopes.clone(),
            )
            .map_err(|source| Error::Read {
                path: outbox.clone(),
                source,
            })?;
            (mail.card(url), Arc::new(mail))
        }
        #[cfg(feature = "data")]
        BuiltinAgent::Data {
            output,
            folders,
            sources,
            databases,
            query_seconds,
        } => {
            use agentry_core::a2a::Served;
            let settings = crate::toolsets::data_settings(
                output,
                &crate::toolsets::DataOptions {
                    folders: folders.clone(),
                    sources: sources.clone(),
                    databases: databases.clone(),
                    query_seconds: *query_seconds,
                },
                &server.state_dir(),
            )?;
            let data = Arc::new(agentry_data::DataSpecialist::new(settings));
            (data.card(url), Arc::new(Served(data)))
        }
        #[cfg(all(feature = "specialists", feature = "mcp"))]
        BuiltinAgent::Researcher { config } => {
            use agentry_core::a2a::Served;
            use agentry_specialists::research::Researcher;
            let text = std::fs::read_to_string(config).map_err(|source| Error::Read {
                path: config.clone(),
                source,
            })?;
            let cfg = agentry_core::agent::parse_config(config, &text).map_err(|reason| {
                Error::Config {
                    path: config.clone(),
                    reason,
                }
            })?;
            let r = Arc::new(
                Researcher::new(cfg).with_policy(crate::setup::launch_policy(&server.mcp_allow)),
            );
            (r.card(url), Arc::new(Served(r)))
        }
        #[allow(unreachable_patterns)]
        other => {
            return Err(Error::Disabled {
                what: format!("the built-in `{}` agent", other.name()),
                feature: match other {
                    BuiltinAgent::Data { .. } => "data",
                    BuiltinAgent::Researcher { .. } => "mcp",
                    _ => "specialists",
                },
            });
        }
    })
}
