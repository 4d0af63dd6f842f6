//! The `data` agent type for the core factory: the data tools, a prompt and a card skill on
//! the same ReAct engine as every agent, for models that write the SQL themselves.
//!
//! Options: `output` (the chart folder, default `charts`), `folders` (list), `sources` (table
//! of name -> location), `databases` (list of `postgres://` URLs), `query_seconds`. Nothing is
//! readable by default.

use std::path::PathBuf;
use std::sync::Arc;

use agentry_a2a::model::AgentSkill;
use agentry_core::agent::{AgentConfig, AgentError, AgentFactory, AgentKind};
use agentry_core::tools::ToolRegistry;
use serde_json::Value;

use crate::{DataAccess, DataSettings, data_tools};

const DATA_PROMPT: &str = "You answer questions about data with SQL. Call query_db with the \
     source and one read-only SELECT statement (each file is a table named after it); use \
     analyze for summary statistics and visualize for a chart when it helps. Finish with the \
     numbers you found and the chart's path if you made one. Never invent numbers.";

/// Registers `data`. `denied`: the host's own folders (agentry's home and state), which a
/// `data` agent never reads, even inside a folder its options allow.
pub fn register(factory: &mut AgentFactory, denied: Vec<PathBuf>) {
    factory.register_agent_type(
        "data",
        Arc::new(move |cfg: &AgentConfig, _: &ToolRegistry| {
            let out = PathBuf::from(cfg.option_str("output").unwrap_or("charts"));
            let settings = settings(cfg, out, &denied)?;
            Ok(AgentKind {
                system_prompt: cfg
                    .system_prompt
                    .clone()
                    .unwrap_or_else(|| DATA_PROMPT.into()),
                tools: data_tools(settings),
                skills: vec![AgentSkill {
                    id: "analyze_data".into(),
                    name: "Query, describe and chart data".into(),
                    description: "SQL over CSV, Parquet and JSON files, SQLite and PostgreSQL; \
                                  statistics; bar, line, scatter and histogram charts."
                        .into(),
                    tags: vec!["sql".into(), "statistics".into(), "charts".into()],
                    examples: cfg
                        .examples_or(&["How many penguins of each species are in penguins.csv?"]),
                    input_modes: None,
                    output_modes: None,
                    security: Vec::new(),
                }],
                ..Default::default()
            })
        }),
    );
}

/// The type's access and budget from its options.
fn settings(
    cfg: &AgentConfig,
    out: PathBuf,
    denied: &[PathBuf],
) -> Result<DataSettings, AgentError> {
    let bad = |what: &str| AgentError::Invalid {
        agent: cfg.name.clone(),
        reason: format!("options.{what}"),
    };
    let mut access = DataAccess::default();
    for d in denied {
        access = access.deny(d);
    }
    for f in cfg.option_strings("folders")? {
        access = access
            .with_folder(&f)
            .map_err(|e| bad(&format!("folders: {e}")))?;
    }
    for url in cfg.option_strings("databases")? {
        access = access.with_database(url);
    }
    match cfg.options.get("sources") {
        None => {}
        Some(Value::Object(m)) => {
            for (name, loc) in m {
                let loc = loc
                    .as_str()
                    .ok_or_else(|| bad("sources must map names to locations"))?;
                access = access.with_source(name, loc);
            }
        }
        Some(_) => return Err(bad("sources must map names to locations")),
    }
    let mut s = DataSettings::new(out, access);
    if let Some(secs) = cfg.options.get("query_seconds").and_then(Value::as_u64) {
        s.query_time = std::time::Duration::from_secs(secs.max(1));
    }
    Ok(s)
}
