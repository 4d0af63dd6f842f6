//! Named sets of agentry's tools, for serving over MCP (`agentry mcp serve NAME`) or adding to
//! an agent.

use std::collections::BTreeMap;
use std::path::PathBuf;

use agentry_core::tools::ToolRegistry;

use crate::Error;

/// What the data agent or the `data` toolset may read: nothing unless given here.
#[derive(Debug, Clone, Default)]
pub struct DataOptions {
    /// Folders whose data files and SQLite files requests may name.
    pub folders: Vec<PathBuf>,
    /// Named sources (name -> file, folder, SQLite file or `postgres://` URL).
    pub sources: BTreeMap<String, String>,
    /// `postgres://` URLs requests may name.
    pub databases: Vec<String>,
    /// Time budget of one query in seconds (default 30).
    pub query_seconds: Option<u64>,
}

/// The data settings for charts in `output` reading what `options` allow, never anything under
/// `state_dir` or agentry's home (task stores, the knowledge base).
#[cfg(feature = "data")]
pub fn data_settings(
    output: &std::path::Path,
    options: &DataOptions,
    state_dir: &std::path::Path,
) -> Result<agentry_data::DataSettings, Error> {
    use agentry_data::{DataAccess, DataSettings};
    let mut access = DataAccess::default()
        .deny(state_dir)
        .deny(crate::home_dir());
    for f in &options.folders {
        access = access
            .with_folder(f)
            .map_err(|e| Error::Invalid(e.to_string()))?;
    }
    for (name, location) in &options.sources {
        access = access.with_source(name, location);
    }
    for url in &options.databases {
        access = access.with_database(url);
    }
    let mut s = DataSettings::new(output, access);
    if let Some(secs) = options.query_seconds {
        s.query_time = std::time::Duration::from_secs(secs.max(1));
    }
    Ok(s)
}

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

/// Where a toolset writes and what it may read.
#[derive(Debug, Clone, Default)]
pub struct ToolsetOptions {
    /// Where decks and charts are saved.
    pub output: PathBuf,
    /// What the `data` tools may read.
    pub data: DataOptions,
    /// Folders the `ppt` tools may take pictures from (none by default).
    pub pictures: Vec<PathBuf>,
}

/// The PPT tools' decks: saved in `output`, pictures only from `pictures`.
#[cfg(feature = "specialists")]
pub fn decks(
    output: &std::path::Path,
    pictures: &[PathBuf],
) -> Result<agentry_specialists::pptx::Decks, Error> {
    let mut d = agentry_specialists::pptx::Decks::new(output);
    for p in pictures {
        d = d.with_picture_folder(p).map_err(|e| {
            Error::Invalid(format!(
                "picture folder {} cannot be used: {e}",
                p.display()
            ))
        })?;
    }
    Ok(d)
}

/// The tools of a toolset: `builtin` (calculate, current_time), `ppt` (the PowerPoint tools;
/// decks saved in `output`, pictures from `pictures`) or `data` (query_db, analyze, visualize
/// over what `data` allows; charts saved in `output`).
pub fn toolset(name: &str, options: &ToolsetOptions) -> Result<ToolRegistry, Error> {
    let _ = options;
    match name {
        "builtin" => {
            let mut r = ToolRegistry::new();
            r.add(agentry_core::builtin::Calculate);
            r.add(agentry_core::builtin::CurrentTime);
            Ok(r)
        }
        #[cfg(feature = "specialists")]
        "ppt" => Ok(agentry_specialists::pptx::ppt_tools(&decks(
            &options.output,
            &options.pictures,
        )?)),
        #[cfg(feature = "data")]
        "data" => Ok(agentry_data::data_tools(data_settings(
            &options.output,
            &options.data,
            &crate::home_dir(),
        )?)),
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
