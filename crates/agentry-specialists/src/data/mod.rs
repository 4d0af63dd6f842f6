//! The data specialist: read-only SQL over CSV, Parquet and JSON files (DataFusion), SQLite
//! files and PostgreSQL databases ([`query`]), summary statistics ([`stats`]), and charts as
//! PNG and SVG ([`chart`]). Tools `query_db`, `analyze`, `visualize` for models; a structured
//! request (`{"source", "sql", "analyze", "chart"}`) runs them without one.

pub mod chart;
pub mod query;
pub mod stats;

use std::path::PathBuf;

use agentry_a2a::model::{Artifact, File, FileContent, Part};
use agentry_core::agent::AgentError;
use agentry_core::handle::{AgentHandle, Ask, Reply, UpdateStream, single};
use agentry_core::tools::{Tool, ToolRegistry};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub use chart::{ChartKind, ChartSpec};
pub use query::{Source, Table};

/// Why a data request failed.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    #[error("{0}")]
    Input(String),
    #[error("query failed: {0}")]
    Query(String),
    #[error("chart: {0}")]
    Chart(String),
}

/// Rows returned to a caller at most.
const MAX_ROWS: usize = 10_000;

/// The data tools; charts are written into `out_dir`.
pub fn data_tools(out_dir: impl Into<PathBuf>) -> ToolRegistry {
    let out_dir = out_dir.into();
    let mut r = ToolRegistry::new();
    r.add(QueryDb);
    r.add(Analyze);
    r.add(Visualize { out_dir });
    r
}

#[derive(Deserialize, JsonSchema)]
struct QueryArgs {
    /// A CSV/Parquet/JSON file or a folder of them (each file a table named after it), a
    /// SQLite file, or a postgres:// URL.
    source: String,
    /// One read-only SQL statement.
    sql: String,
    /// Rows to return (default 100).
    #[serde(default)]
    limit: Option<usize>,
}

struct QueryDb;

impl Tool for QueryDb {
    const NAME: &'static str = "query_db";
    type Args = QueryArgs;
    type Output = Table;
    type Error = DataError;
    fn description(&self) -> String {
        "Runs a read-only SQL query over data files (CSV, Parquet, JSON), a SQLite file or a \
         PostgreSQL database and returns the rows."
            .into()
    }
    fn examples(&self) -> Vec<String> {
        vec!["How many penguins of each species are there?".into()]
    }
    async fn call(&self, a: QueryArgs) -> Result<Table, DataError> {
        Source::parse(&a.source)?
            .query(&a.sql, a.limit.unwrap_or(100).clamp(1, MAX_ROWS))
            .await
    }
}

struct Analyze;

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
        let t = Source::parse(&a.source)?
            .query(&a.sql, a.limit.unwrap_or(MAX_ROWS).clamp(1, MAX_ROWS))
            .await?;
        Ok(stats::describe(&t))
    }
}

struct Visualize {
    out_dir: PathBuf,
}

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
    pub png: String,
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
        let t = Source::parse(&a.source)?.query(&a.sql, MAX_ROWS).await?;
        let c = chart::render(&t, &a.chart)?;
        save(&self.out_dir, a.name.as_deref().unwrap_or("chart"), &c)
    }
}

fn save(dir: &std::path::Path, name: &str, c: &chart::Chart) -> Result<ChartFiles, DataError> {
    let stem = crate::pptx::file_stem(name);
    std::fs::create_dir_all(dir)
        .map_err(|e| DataError::Chart(format!("{}: {e}", dir.display())))?;
    let png = dir.join(format!("{stem}.png"));
    let svg = dir.join(format!("{stem}.svg"));
    std::fs::write(&png, &c.png)
        .and_then(|_| std::fs::write(&svg, &c.svg))
        .map_err(|e| DataError::Chart(e.to_string()))?;
    Ok(ChartFiles {
        png: png.display().to_string(),
        svg: svg.display().to_string(),
    })
}

/// A data request as structured input.
#[derive(Debug, Clone, Deserialize)]
pub struct DataRequest {
    pub source: String,
    pub sql: String,
    #[serde(default)]
    pub analyze: bool,
    #[serde(default)]
    pub chart: Option<ChartSpec>,
    #[serde(default)]
    pub limit: Option<usize>,
}

/// The data agent: runs a [`DataRequest`] and answers with the rows (Markdown preview and a
/// data part), the statistics, and the chart as PNG and SVG file parts (also saved in
/// `out_dir`).
pub struct DataSpecialist {
    pub out_dir: PathBuf,
}

impl DataSpecialist {
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
            description: "Send {\"source\": FILE|FOLDER|SQLITE|postgres://URL, \"sql\": \"SELECT \
                          ...\", \"analyze\": true, \"chart\": {\"kind\": \
                          \"bar|line|scatter|histogram\", \"x\", \"y\"}}."
                .into(),
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

    pub async fn run(&self, req: &DataRequest) -> Result<Reply, DataError> {
        let src = Source::parse(&req.source)?;
        let limit = req.limit.unwrap_or(MAX_ROWS).clamp(1, MAX_ROWS);
        let t = src.query(&req.sql, limit).await?;
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
            let c = chart::render(&t, spec)?;
            let name = spec
                .title
                .clone()
                .unwrap_or_else(|| format!("{:?} {}", spec.kind, spec.x));
            let files = save(&self.out_dir, &name, &c)?;
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
                    AgentError::Other(
                        "send a data request as JSON: {\"source\", \"sql\", \"analyze\", \"chart\"}"
                            .into(),
                    )
                })?,
            };
            let req: DataRequest = serde_json::from_value(input)
                .map_err(|e| AgentError::Other(format!("not a data request: {e}")))?;
            let mut r = self
                .run(&req)
                .await
                .map_err(|e| AgentError::Other(e.to_string()))?;
            r.context_id = ask.context_id;
            Ok(r)
        })
    }
}
