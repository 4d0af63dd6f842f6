//! Named sets of agentry's tools, for serving over MCP (`agentry mcp serve NAME`) or adding to
//! an agent.

use std::path::PathBuf;

use agentry_core::tools::ToolRegistry;

use crate::Error;

/// The toolsets this build has.
pub fn names() -> Vec<&'static str> {
    let mut n = vec!["builtin"];
    if cfg!(feature = "specialists") {
        n.push("ppt");
    }
    if cfg!(feature = "data") {
        n.push("data");
    }
    n
}

/// The tools of a toolset: `builtin` (calculate, current_time), `ppt` (the PowerPoint tools;
/// decks saved in `output`) or `data` (query_db, analyze, visualize; charts saved in `output`).
pub fn toolset(name: &str, output: PathBuf) -> Result<ToolRegistry, Error> {
    let _ = &output;
    match name {
        "builtin" => {
            let mut r = ToolRegistry::new();
            r.add(agentry_core::builtin::Calculate);
            r.add(agentry_core::builtin::CurrentTime);
            Ok(r)
        }
        #[cfg(feature = "specialists")]
        "ppt" => Ok(agentry_specialists::pptx::ppt_tools(
            &agentry_specialists::pptx::Decks::new(output),
        )),
        #[cfg(feature = "data")]
        "data" => Ok(agentry_specialists::data::data_tools(output)),
        #[cfg(not(feature = "specialists"))]
        "ppt" => Err(Error::Disabled {
            what: "the ppt toolset".into(),
            feature: "specialists",
        }),
        #[cfg(not(feature = "data"))]
        "data" => Err(Error::Disabled {
            what: "the data toolset".into(),
            feature: "data",
        }),
        other => Err(Error::Invalid(format!(
            "unknown toolset `{other}`; toolsets: {}",
            names().join(", ")
        ))),
    }
}
