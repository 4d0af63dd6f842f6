//! The data specialist: read-only SQL over CSV, Parquet and JSON files (DataFusion), SQLite
//! files and PostgreSQL databases ([`query`]), summary statistics ([`stats`]), and charts as
//! PNG and SVG ([`chart`]). Tools `query_db`, `analyze`, `visualize` for models; a structured
//! request (`{"source", "sql", "analyze", "chart"}`) runs them without one.

#![warn(missing_docs)]

pub mod access;
pub mod chart;
pub mod kind;
pub mod query;
pub mod stats;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agentry_a2a::model::{Artifact, File, FileContent, Part};
use agentry_core::agent::AgentError;
use agentry_core::handle::{AgentHandle, Ask, Reply, UpdateStream, single};
use agentry_core::tools::{Tool, ToolRegistry};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub use access::DataAccess;
pub use chart::{ChartKind, ChartSpec};
pub use query::{DEFAULT_QUERY_TIME, Source, Table};

/// Why a data request failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DataError {
    /// The request itself: an unknown or refused source, a bad argument.
    #[error("{0}")]
    Input(String),
    /// The engine refused or failed the SQL (syntax, a write, the time budget).
    #[error("query failed: {0}")]
    Query(String),
    /// The chart could not be drawn or saved.
    #[error("chart: {0}")]
    Chart(String),
}

/// Rows returned to a caller at most.
const MAX_ROWS: usize = 10_000;

/// What the data tools and the data agent share: where they may read, how long a query may
/// run, where charts go.
#[derive(Debug, Clone)]
pub struct DataSettings {
    /// The sources a request may name (closed by default).
    pub access: DataAccess,
    /// Time budget of one query.
    pub query_time: Duration,
    /// Where charts are saved.
    pub out_dir: PathBuf,
}

impl DataSettings {
    /// Charts in `out_dir`, reading what `access` allows, [`DEFAULT_QUERY_TIME`] per query.
    pub fn new(out_dir: impl Into<PathBuf>, access: DataAccess) -> Self {
        DataSettings {
            access,
            query_time: DEFAULT_QUERY_TIME,
            out_dir: out_dir.into(),
        }
    }

    /// Resolves the request's `source` through the access rules and runs `sql` within the
    /// time budget; engine errors lose the host paths of the allowed folders.
    pub async fn query(
        &self,
        source: &str,
        sql: &str,
        limit: usize,
    ) -> Result<(Source, Table), DataError> {
        let src = self.access.resolve(source)?;
        let t = src
            .query_within(sql, limit, self.query_time)
            .await
            .map_err(|e| match e {
                DataError::Input(m) => DataError::Input(self.access.redact(&m)),
                DataError::Query(m) => DataError::Query(self.access.redact(&m)),
                other => other,
            })?;
        Ok((src, t))
    }
}

/// The data tools over `settings` (its access rules, query budget and chart folder).
pub fn data_tools(settings: DataSettings) -> ToolRegistry {
    let s = Arc::new(settings);
    let mut r = ToolRegistry::new();
    r.add(QueryDb(s.clone()));
    r.add(Analyze(s.clone()));
    r.add(Visualize(s));
    r
}

#[derive(Deserialize, JsonSchema)]
struct QueryArgs {
    /// A named source, or a CSV/Parquet/JSON/SQLite file (or `.`, all the files) relative to
    /// the agent's data folder, or an allowed postgres:// URL.
    source: String,
    /// One read-only SQL statement.
    sql: String,
    /// Rows to return (default 100).
    #[serde(default)]
    limit: Option<usize>,
}

struct QueryDb(Arc<DataSettings>);

impl Tool for QueryDb {
    const NAME: &'static str = "query_db";
    type Args = QueryArgs;
    type Output = Table;
    type Error = DataError;
    fn description(&self) -> String {
        format!(
            "Runs a read-only SQL query over data files (CSV, Parquet, JSON), a SQLite file or \
             a PostgreSQL database and returns the rows. Sources: {}.",
            self.0.access.summary()
        )
    }
    fn examples(&self) -> Vec<String> {
        vec!["How many penguins of each species are there?".into()]
    }
    async fn call(&self, a: QueryArgs) -> Result<Table, DataError> {
        let limit = a.limit.unwrap_or(100).clamp(1, MAX_ROWS);
        Ok(self.0.query(&a.source, &a.sql, limit).await?.1)
    }
}

struct Analyze(Arc<DataSettings>);

impl Tool for Analyze {
    const NAME: &'static str = "analyze";
    type Args = QueryArgs;
    type Output = Vec<stats::ColumnStats>;
    type Error = DataError;
    fn description(&self) -> String {
        "Summary statistics (count, mean, std, min, quartiles, max; distinct and top values) of \
         a query's result."
            .into()
    }
    async fn call(&self, a: QueryArgs) -> Result<Vec<stats::ColumnStats>, DataError> {
        let limit = a.limit.unwrap_or(MAX_ROWS).clamp(1, MAX_ROWS);
        let (_, t) = self.0.query(&a.source, &a.sql, limit).await?;
        Ok(stats::describe(&t))
    }
}

struct Visualize(Arc<DataSettings>);

#[derive(Deserialize, JsonSchema)]
struct VisualizeArgs {
    source: String,
    sql: String,
    chart: ChartSpec,
    /// File name stem for the PNG and SVG (default `chart`).
    #[serde(default)]
    name: Option<String>,
}

/// Saved chart files.
#[derive(Debug, Clone, Serialize)]
pub struct ChartFiles {
    /// The PNG's file name in the chart folder.
    pub png: String,
    /// The SVG's file name in the chart folder.
    pub svg: String,
}

impl Tool for Visualize {
    const NAME: &'static str = "visualize";
    type Args = VisualizeArgs;
    type Output = ChartFiles;
    type Error = DataError;
    fn description(&self) -> String {
        "Draws a bar, line, scatter or histogram chart of a query's result as PNG and SVG files."
            .into()
    }
    async fn call(&self, a: VisualizeArgs) -> Result<ChartFiles, DataError> {
        let (_, t) = self.0.query(&a.source, &a.sql, MAX_ROWS).await?;
        let c = render_off_workers(t, a.chart).await?;
        save(&self.0.out_dir, a.name.as_deref().unwrap_or("chart"), &c).await
    }
}

/// Rendering is CPU work: it runs on the blocking pool, not on an async worker.
async fn render_off_workers(t: Table, spec: ChartSpec) -> Result<chart::Chart, DataError> {
    tokio::task::spawn_blocking(move || chart::render(&t, &spec))
        .await
        .map_err(|e| DataError::Chart(e.to_string()))?
}

/// Saves the chart (off the async workers) under names relative to the chart folder (no
/// host paths); a name another request used gets a number instead of replacing its chart.
async fn save(
    dir: &std::path::Path,
    name: &str,
    c: &chart::Chart,
) -> Result<ChartFiles, DataError> {
    let stem = agentry_core::confine::file_stem(name);
    let (dir, png_bytes, svg_bytes) = (dir.to_path_buf(), c.png.clone(), c.svg.clone());
    let saved = tokio::task::spawn_blocking(move || {
        use agentry_core::confine::write_new;
        let png = write_new(&dir, &format!("{stem}.png"), &png_bytes, false)?;
        let stem = png.strip_suffix(".png").unwrap_or(&png);
        let svg = write_new(&dir, &format!("{stem}.svg"), svg_bytes.as_bytes(), false)?;
        Ok::<_, std::io::Error>(ChartFiles { png, svg })
    })
    .await
    .map_err(|e| DataError::Chart(format!("cannot save the chart: {e}")))?;
    saved.map_err(|e| DataError::Chart(format!("cannot save the chart: {e}")))
}

/// A data request as structured input.
#[derive(Debug, Clone, Deserialize)]
pub struct DataRequest {
    /// A file or folder the agent may read, a named source, or a listed database URL.
    pub source: String,
    /// One read-only statement (SELECT or WITH ...).
    pub sql: String,
    /// Summary statistics of every column of the result.
    #[serde(default)]
    pub analyze: bool,
    /// A chart of the result.
    #[serde(default)]
    pub chart: Option<ChartSpec>,
    /// Rows returned at most (capped by the agent).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// The data agent: runs a [`DataRequest`] and answers with the rows (Markdown preview and a
/// data part), the statistics, and the chart as PNG and SVG file parts (also saved in the
/// chart folder). It reads only what its [`DataAccess`] allows.
pub struct DataSpecialist {
    settings: DataSettings,
}

impl DataSpecialist {
    /// The agent over `settings`.
    pub fn new(settings: DataSettings) -> Self {
        DataSpecialist { settings }
    }

    /// The agent's card, served at `url`.
    pub fn card(&self, url: &str) -> agentry_a2a::model::AgentCard {
        let mut card = agentry_a2a::model::AgentCard::new("Data Analyst", &self.description(), url);
        card.default_output_modes = vec![
            "text/markdown".into(),
            "application/json".into(),
            "image/png".into(),
            "image/svg+xml".into(),
        ];
        card.skills = vec![agentry_a2a::model::AgentSkill {
            id: "analyze_data".into(),
            name: "Query, describe and chart data".into(),
            description: format!(
                "Send {{\"source\", \"sql\": \"SELECT ...\", \"analyze\": true, \"chart\": \
                 {{\"kind\": \"bar|line|scatter|histogram\", \"x\", \"y\"}}}}. Sources: {}.",
                self.settings.access.summary()
            ),
            tags: vec!["sql".into(), "statistics".into(), "charts".into()],
            examples: vec![
                "{\"source\": \"penguins.csv\", \"sql\": \"SELECT species, count(*) AS n FROM penguins GROUP BY species\", \"chart\": {\"kind\": \"bar\", \"x\": \"species\", \"y\": \"n\"}}".into(),
            ],
            input_modes: Some(vec!["application/json".into()]),
            output_modes: None,
            security: Vec::new(),
        }];
        card
    }

    /// Answers one request: rows, statistics, chart.
    pub async fn run(&self, req: &DataRequest) -> Result<Reply, DataError> {
        let limit = req.limit.unwrap_or(MAX_ROWS).clamp(1, MAX_ROWS);
        let (src, t) = self.settings.query(&req.source, &req.sql, limit).await?;
        let mut text = format!(
            "{} rows{} from {}\n\n{}",
            t.rows.len(),
            if t.truncated { " (truncated)" } else { "" },
            src.describe(),
            t.markdown(20)
        );
        let mut data = json!({"columns": t.columns, "rows": t.rows, "truncated": t.truncated});
        if req.analyze {
            let s = stats::describe(&t);
            text.push_str("\nStatistics:\n");
            for c in &s {
                match &c.kind {
                    stats::Kind::Numeric { mean, std, min, median, max, .. } => text.push_str(&format!(
                        "- {}: n={} mean={mean:.2} std={std:.2} min={min} median={median} max={max}\n",
                        c.column, c.count
                    )),
                    stats::Kind::Categorical { distinct, top, top_count } => text.push_str(&format!(
                        "- {}: n={} distinct={distinct} top={} ({top_count})\n",
                        c.column,
                        c.count,
                        top.clone().unwrap_or_default()
                    )),
                }
            }
            data["statistics"] = json!(s);
        }
        let mut artifacts = Vec::new();
        if let Some(spec) = &req.chart {
            let c = render_off_workers(t.clone(), spec.clone()).await?;
            let name = spec
                .title
                .clone()
                .unwrap_or_else(|| format!("{:?} {}", spec.kind, spec.x));
            let files = save(&self.settings.out_dir, &name, &c).await?;
            text.push_str(&format!("\nChart: {} and {}\n", files.png, files.svg));
            data["chart"] = json!(files);
            use base64::Engine;
            let b64 = base64::engine::general_purpose::STANDARD;
            let file = |bytes: &[u8], mime: &str, path: &str| {
                Part::file(File {
                    content: FileContent::Bytes(b64.encode(bytes)),
                    mime_type: Some(mime.into()),
                    name: std::path::Path::new(path)
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned()),
                })
            };
            artifacts.push(Artifact::new(
                Some("chart"),
                vec![
                    file(&c.png, "image/png", &files.png),
                    file(c.svg.as_bytes(), "image/svg+xml", &files.svg),
                ],
            ));
        }
        Ok(Reply {
            text,
            data: vec![data.as_object().cloned().unwrap_or_default()],
            artifacts,
            ..Default::default()
        })
    }
}

impl AgentHandle for DataSpecialist {
    fn name(&self) -> String {
        "data".into()
    }
    fn description(&self) -> String {
        "Queries CSV, Parquet and JSON files, SQLite and PostgreSQL with read-only SQL; \
         describes the result; charts it as PNG and SVG."
            .into()
    }
    fn skills(&self) -> Vec<String> {
        vec!["analyze_data".into()]
    }
    fn stream(&self, ask: Ask) -> UpdateStream<'_> {
        single(async move {
            let input = match ask.data.clone() {
                Some(d) => Value::Object(d),
                None => serde_json::from_str(ask.text.trim()).map_err(|_| {
                    AgentError::BadRequest(
                        "send a data request as JSON: {\"source\", \"sql\", \"analyze\", \"chart\"}"
                            .into(),
                    )
                })?,
            };
            let req: DataRequest = serde_json::from_value(input)
                .map_err(|e| AgentError::BadRequest(format!("not a data request: {e}")))?;
            let mut r = self.run(&req).await.map_err(AgentError::failed)?;
            r.context_id = ask.context_id;
            Ok(r)
        })
    }
}
