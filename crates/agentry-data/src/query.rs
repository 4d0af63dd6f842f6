//! Read-only SQL over files (CSV, Parquet, JSON, NDJSON: DataFusion), SQLite files and
//! PostgreSQL databases, with one result shape, [`Table`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::DataError;

/// A query result: column names and rows of JSON values.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Table {
    /// Column names, in order.
    pub columns: Vec<String>,
    /// One value per column in each row.
    pub rows: Vec<Vec<Value>>,
    /// More rows existed than the limit allowed.
    pub truncated: bool,
}

impl Table {
    /// The values of one column.
    pub fn column(&self, name: &str) -> Result<Vec<&Value>, DataError> {
        let i = self
            .columns
            .iter()
            .position(|c| c.eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                DataError::Input(format!(
                    "no column `{name}`; columns: {}",
                    self.columns.join(", ")
                ))
            })?;
        Ok(self.rows.iter().map(|r| &r[i]).collect())
    }

    /// The first `n` rows as a Markdown table.
    pub fn markdown(&self, n: usize) -> String {
        let mut s = format!("| {} |\n|", self.columns.join(" | "));
        s.push_str(&" --- |".repeat(self.columns.len()));
        s.push('\n');
        for r in self.rows.iter().take(n) {
            let cells: Vec<String> = r
                .iter()
                .map(|v| match v {
                    Value::Null => String::new(),
                    Value::String(s) => s.replace('|', "\\|"),
                    Value::Number(n) => n
                        .as_f64()
                        .filter(|f| f.fract() != 0.0)
                        .map_or(n.to_string(), |f| format!("{f:.2}")),
                    other => other.to_string(),
                })
                .collect();
            s.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
        if self.rows.len() > n {
            s.push_str(&format!("({} more rows)\n", self.rows.len() - n));
        }
        s
    }
}

/// Where data lives.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// Files queried together, each a table (name → path).
    Files(BTreeMap<String, PathBuf>),
    /// A SQLite database file, opened read-only.
    Sqlite(PathBuf),
    /// A PostgreSQL URL, queried in a read-only transaction.
    Postgres(String),
}

/// A table name from a file name: letters, digits and `_`.
pub fn table_name(path: &Path) -> String {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "data".into());
    let mut t: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    if t.starts_with(|c: char| c.is_ascii_digit()) {
        t.insert(0, 't');
    }
    t
}

/// What kind of data a file holds, by its extension: `csv`, `parquet`, `json` (also NDJSON) or
/// `sqlite`.
pub(crate) fn data_kind(path: &Path) -> Option<&'static str> {
    let ext = path.extension()?.to_string_lossy().to_ascii_lowercase();
    Some(match ext.as_str() {
        "csv" => "csv",
        "parquet" => "parquet",
        "json" | "ndjson" | "jsonl" => "json",
        "db" | "sqlite" | "sqlite3" => "sqlite",
        _ => return None,
    })
}

/// How long one query may run unless the agent is configured otherwise.
pub const DEFAULT_QUERY_TIME: Duration = Duration::from_secs(30);

impl Source {
    /// A location: `postgres://…`, a `.db`/`.sqlite`/`.sqlite3` file, a data file, or a folder
    /// (its data files, each a table).
    ///
    /// Unconfined: for locations the program itself chose. A location from a request goes
    /// through [`DataAccess::resolve`](super::DataAccess::resolve), which checks it first.
    pub fn parse(location: &str) -> Result<Source, DataError> {
        if location.starts_with("postgres://") || location.starts_with("postgresql://") {
            return Ok(Source::Postgres(location.to_owned()));
        }
        let p = PathBuf::from(location);
        if p.is_dir() {
            let mut files = BTreeMap::new();
            let entries = std::fs::read_dir(&p)
                .map_err(|e| DataError::Input(format!("cannot list {location}: {e}")))?;
            for e in entries.flatten() {
                let f = e.path();
                if data_kind(&f).is_some_and(|k| k != "sqlite") && f.is_file() {
                    files.insert(table_name(&f), f);
                }
            }
            if files.is_empty() {
                return Err(DataError::Input(format!("no data files in {location}")));
            }
            return Ok(Source::Files(files));
        }
        if !p.is_file() {
            return Err(DataError::Input(format!("no such file: {location}")));
        }
        match data_kind(&p) {
            Some("sqlite") => Ok(Source::Sqlite(p)),
            Some(_) => Ok(Source::Files(BTreeMap::from([(table_name(&p), p)]))),
            None => Err(DataError::Input(
                "unsupported data file type (csv, parquet, json, ndjson, sqlite, or a \
                 postgres:// URL)"
                    .into(),
            )),
        }
    }

    /// Runs `sql` (read-only) and returns at most `limit` rows, within [`DEFAULT_QUERY_TIME`].
    pub async fn query(&self, sql: &str, limit: usize) -> Result<Table, DataError> {
        self.query_within(sql, limit, DEFAULT_QUERY_TIME).await
    }

    /// Runs `sql` (read-only) and returns at most `limit` rows, stopping the engine when
    /// `time` runs out or when the returned future is dropped (a canceled task): DataFusion's
    /// tasks are aborted, SQLite is interrupted, PostgreSQL gets a `statement_timeout`.
    pub async fn query_within(
        &self,
        sql: &str,
        limit: usize,
        time: Duration,
    ) -> Result<Table, DataError> {
        let out_of_time = || {
            DataError::Query(format!(
                "the query ran out of its time budget ({} s) and was stopped",
                time.as_secs_f32()
            ))
        };
        match self {
            Source::Files(files) => {
                tokio::time::timeout(time, files::query_on_own_stack(files, sql, limit))
                    .await
                    .map_err(|_| out_of_time())?
            }
            Source::Sqlite(path) => {
                let conn = rusqlite::Connection::open_with_flags(
                    path,
                    rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
                        | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
                )
                .map_err(|e| DataError::Input(format!("cannot open the database: {e}")))?;
                // Interrupts the statement if this future ends first (time out or dropped).
                struct Interrupt(Option<rusqlite::InterruptHandle>);
                impl Drop for Interrupt {
                    fn drop(&mut self) {
                        if let Some(h) = self.0.take() {
                            h.interrupt();
                        }
                    }
                }
                let mut guard = Interrupt(Some(conn.get_interrupt_handle()));
                let sql = sql.to_owned();
                let run = tokio::task::spawn_blocking(move || sqlite(&conn, &sql, limit));
                let r = tokio::time::timeout(time, run)
                    .await
                    .map_err(|_| out_of_time())?
                    .map_err(|e| DataError::Query(e.to_string()))?;
                guard.0 = None;
                r
            }
            Source::Postgres(url) => tokio::time::timeout(time, postgres(url, sql, limit, time))
                .await
                .map_err(|_| out_of_time())?,
        }
    }

    /// Table names (files) or the kind of database; never a host path.
    pub fn describe(&self) -> String {
        match self {
            Source::Files(f) => format!(
                "tables: {}",
                f.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
            Source::Sqlite(_) => "a SQLite database".into(),
            Source::Postgres(_) => "a PostgreSQL database".into(),
        }
    }
}

fn sqlite(conn: &rusqlite::Connection, sql: &str, limit: usize) -> Result<Table, DataError> {
    use rusqlite::types::ValueRef;
    let mut st = conn
        .prepare(sql)
        .map_err(|e| DataError::Query(e.to_string()))?;
    if !st.readonly() {
        return Err(DataError::Query(
            "only read-only statements (SELECT, WITH ...) are allowed".into(),
        ));
    }
    let columns: Vec<String> = st.column_names().iter().map(|s| s.to_string()).collect();
    let n = columns.len();
    let mut rows = Vec::new();
    let mut truncated = false;
    let mut q = st.query([]).map_err(|e| DataError::Query(e.to_string()))?;
    while let Some(r) = q.next().map_err(|e| DataError::Query(e.to_string()))? {
        if rows.len() == limit {
            truncated = true;
            break;
        }
        let mut row = Vec::with_capacity(n);
        for i in 0..n {
            row.push(
                match r.get_ref(i).map_err(|e| DataError::Query(e.to_string()))? {
                    ValueRef::Null => Value::Null,
                    ValueRef::Integer(v) => Value::from(v),
                    ValueRef::Real(v) => Value::from(v),
                    ValueRef::Text(t) => Value::String(String::from_utf8_lossy(t).into_owned()),
                    ValueRef::Blob(b) => Value::String(format!("<{} bytes>", b.len())),
                },
            );
        }
        rows.push(row);
    }
    Ok(Table {
        columns,
        rows,
        truncated,
    })
}

/// Text from PostgreSQL's simple protocol, typed back where it reads as a number or boolean.
fn pg_value(s: Option<&str>) -> Value {
    match s {
        None => Value::Null,
        Some(t) => t
            .parse::<i64>()
            .map(Value::from)
            .or_else(|_| {
                t.parse::<f64>()
                    .ok()
                    .filter(|f| f.is_finite())
                    .map(Value::from)
                    .ok_or(())
            })
            .unwrap_or_else(|_| match t {
                "t" => Value::Bool(true),
                "f" => Value::Bool(false),
                _ => Value::String(t.to_owned()),
            }),
    }
}

/// PostgreSQL's own message (tokio-postgres' `Display` says only "db error").
fn pg_error(e: tokio_postgres::Error) -> DataError {
    match e.as_db_error() {
        Some(d) => DataError::Query(format!("{}: {}", d.code().code(), d.message())),
        None => DataError::Query(e.to_string()),
    }
}

async fn postgres(url: &str, sql: &str, limit: usize, time: Duration) -> Result<Table, DataError> {
    use tokio_postgres::SimpleQueryMessage;
    let (mut client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .map_err(|e| DataError::Input(format!("cannot connect to PostgreSQL: {e}")))?;
    let task = tokio::spawn(conn);
    // Cancels the statement on the server if this future ends first (out of time, or a
    // canceled task dropped it): `statement_timeout` alone can be reset by the SQL itself.
    struct Cancel(Option<tokio_postgres::CancelToken>);
    impl Drop for Cancel {
        fn drop(&mut self) {
            if let (Some(t), Ok(rt)) = (self.0.take(), tokio::runtime::Handle::try_current()) {
                rt.spawn(async move { t.cancel_query(tokio_postgres::NoTls).await });
            }
        }
    }
    let mut cancel = Cancel(Some(client.cancel_token()));
    // A read-only transaction: the database refuses any write the SQL might attempt.
    let tx = client
        .build_transaction()
        .read_only(true)
        .start()
        .await
        .map_err(pg_error)?;
    // The server stops the statement itself when the budget runs out.
    tx.simple_query(&format!(
        "SET LOCAL statement_timeout = {}",
        time.as_millis().max(1)
    ))
    .await
    .map_err(pg_error)?;
    let msgs = tx.simple_query(sql).await.map_err(pg_error)?;
    let _ = tx.rollback().await;
    cancel.0 = None;
    drop(client);
    task.abort();
    let mut t = Table::default();
    for m in msgs {
        if let SimpleQueryMessage::Row(r) = m {
            if t.columns.is_empty() {
                t.columns = r.columns().iter().map(|c| c.name().to_owned()).collect();
            }
            if t.rows.len() == limit {
                t.truncated = true;
                continue;
            }
            t.rows
                .push((0..r.len()).map(|i| pg_value(r.get(i))).collect());
        }
    }
    Ok(t)
}

mod files {
    use super::*;
    use datafusion::arrow::json::ArrayWriter;
    use datafusion::execution::options::ParquetReadOptions;
    use datafusion::prelude::{CsvReadOptions, JsonReadOptions, SQLOptions, SessionContext};

    /// Fields that spell a missing value in R and pandas exports.
    fn is_na(field: &str) -> bool {
        matches!(field, "NA" | "N/A" | "NaN" | "null" | "NULL")
    }

    /// A CSV file with its `NA`-style cells emptied (empty cells are nulls), in a temporary
    /// file, when its start holds any; else `None`. DataFusion 55 infers types with
    /// `null_regex` but its reader ignores it, so `NA` in a number column fails the query.
    fn csv_without_na(path: &Path, dir: &Path) -> Result<Option<PathBuf>, DataError> {
        use std::io::{BufRead, BufWriter, Read, Write};
        let read_err = |e: std::io::Error| DataError::Input(format!("{}: {e}", path.display()));
        let mut head = Vec::new();
        std::fs::File::open(path)
            .map_err(read_err)?
            .take(1 << 16)
            .read_to_end(&mut head)
            .map_err(read_err)?;
        let head = String::from_utf8_lossy(&head);
        if !head
            .lines()
            .skip(1)
            .any(|l| l.split(',').any(|f| is_na(f.trim_end_matches('\r'))))
        {
            return Ok(None);
        }
        std::fs::create_dir_all(dir).map_err(read_err)?;
        let target = dir.join(format!("{}.csv", table_name(path)));
        let mut out = BufWriter::new(std::fs::File::create(&target).map_err(read_err)?);
        let reader = std::io::BufReader::new(std::fs::File::open(path).map_err(read_err)?);
        let mut quoted = false;
        for line in reader.split(b'\n') {
            let line = line.map_err(read_err)?;
            let line = String::from_utf8_lossy(&line);
            let mut field = String::new();
            let mut cleaned = String::with_capacity(line.len());
            let flush = |field: &mut String, cleaned: &mut String| {
                if !is_na(field.trim_end_matches('\r')) {
                    cleaned.push_str(field);
                } else if field.ends_with('\r') {
                    cleaned.push('\r');
                }
                field.clear();
            };
            for c in line.chars() {
                if c == '"' {
                    quoted = !quoted;
                }
                if c == ',' && !quoted {
                    flush(&mut field, &mut cleaned);
                    cleaned.push(',');
                } else {
                    field.push(c);
                }
            }
            flush(&mut field, &mut cleaned);
            cleaned.push('\n');
            out.write_all(cleaned.as_bytes()).map_err(read_err)?;
        }
        out.flush().map_err(read_err)?;
        Ok(Some(target))
    }

    /// A JSON array file as NDJSON in a temporary file (DataFusion reads NDJSON).
    fn ndjson_of(path: &Path, dir: &Path) -> Result<PathBuf, DataError> {
        let v: Value = serde_json::from_slice(
            &std::fs::read(path)
                .map_err(|e| DataError::Input(format!("cannot read {}: {e}", path.display())))?,
        )
        .map_err(|e| DataError::Input(format!("{} is not JSON: {e}", path.display())))?;
        let Value::Array(items) = v else {
            return Err(DataError::Input(format!(
                "{}: expected an array of objects",
                path.display()
            )));
        };
        let mut out = String::new();
        for it in items {
            if !it.is_object() {
                return Err(DataError::Input(format!(
                    "{}: expected an array of objects",
                    path.display()
                )));
            }
            out.push_str(&it.to_string());
            out.push('\n');
        }
        let target = dir.join(format!("{}.ndjson", table_name(path)));
        std::fs::write(&target, out).map_err(|e| DataError::Input(e.to_string()))?;
        Ok(target)
    }

    /// Tokens (not counting white space) a query over files may have. DataFusion walks
    /// expressions recursively (to name, plan and print them) without the stack growth its
    /// parser has, and `a+a+...+a` parses without recursion into a tree as deep as it is
    /// long: 700 terms overflowed a 2 MiB worker stack in a debug build with unoptimized
    /// dependencies (in `SchemaDisplay`), and a longer chain would in any build. Planning
    /// such a chain also costs time in the square of its length (1,000 terms 1.5 s in a
    /// debug build, 5,000 terms 37 s), spent where a time budget cannot interrupt it. The
    /// depth of an expression is below the number of tokens, so this bounds both; 2,000
    /// tokens is some 10 KB of SQL, more than an analyst's query has.
    const MAX_TOKENS: usize = 2_000;

    /// The stack the query runs on: room for [`MAX_TOKENS`] levels of DataFusion's recursion
    /// in any build, with margin (reserved, not committed: pages are touched only as deep as
    /// a query goes).
    const STACK: usize = 64 << 20;

    /// [`query`] on a thread of its own with [`STACK`] bytes of stack, after refusing SQL of
    /// more than [`MAX_TOKENS`] tokens. Dropping the future (a time budget, a canceled task)
    /// stops the query: its runtime, with DataFusion's tasks, ends with it.
    pub(super) async fn query_on_own_stack(
        files: &BTreeMap<String, PathBuf>,
        sql: &str,
        limit: usize,
    ) -> Result<Table, DataError> {
        use datafusion::sql::sqlparser::dialect::GenericDialect;
        use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
        let tokens = Tokenizer::new(&GenericDialect {}, sql)
            .tokenize()
            .map_err(|e| DataError::Query(e.to_string()))?
            .iter()
            .filter(|t| !matches!(t, Token::Whitespace(_)))
            .count();
        if tokens > MAX_TOKENS {
            return Err(DataError::Query(format!(
                "the query is too long ({tokens} tokens; at most {MAX_TOKENS})"
            )));
        }
        let (files, sql) = (files.clone(), sql.to_owned());
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("agentry-data-query".into())
            .stack_size(STACK)
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = tx.send(Err(DataError::Query(format!(
                            "cannot start the query's runtime: {e}"
                        ))));
                        return;
                    }
                };
                let r = rt.block_on(async {
                    tokio::select! {
                        r = query(&files, &sql, limit) => Some(r),
                        _ = stopped => None,
                    }
                });
                if let Some(r) = r {
                    let _ = tx.send(r);
                }
            })
            .map_err(|e| DataError::Query(format!("cannot start the query's thread: {e}")))?;
        // Dropped with this future: the thread's select ends the query.
        let _stop = stop;
        rx.await
            .map_err(|_| DataError::Query("the query's thread ended without an answer".into()))?
    }

    pub(super) async fn query(
        files: &BTreeMap<String, PathBuf>,
        sql: &str,
        limit: usize,
    ) -> Result<Table, DataError> {
        let ctx = SessionContext::new();
        // Removed however the query ends, a dropped (canceled) future included.
        struct TempDir(PathBuf);
        impl Drop for TempDir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
        let tmp =
            TempDir(std::env::temp_dir().join(format!("agentry-data-{}", uuid::Uuid::new_v4())));
        let tmp = &tmp.0;
        async {
            for (name, path) in files {
                let p = path.display().to_string();
                let ext = path
                    .extension()
                    .map(|e| e.to_string_lossy().to_ascii_lowercase())
                    .unwrap_or_default();
                let r = match ext.as_str() {
                    "csv" => {
                        let file = match csv_without_na(path, tmp)? {
                            Some(f) => f.display().to_string(),
                            None => p.clone(),
                        };
                        let opts = CsvReadOptions::new().schema_infer_max_records(10_000);
                        ctx.register_csv(name, &file, opts).await
                    }
                    "parquet" => {
                        ctx.register_parquet(name, &p, ParquetReadOptions::default())
                            .await
                    }
                    _ => {
                        // JSON arrays become NDJSON first; NDJSON files are read as they are.
                        let first = std::fs::read(path)
                            .ok()
                            .and_then(|b| b.iter().find(|c| !c.is_ascii_whitespace()).copied());
                        let (file, suffix) = if first == Some(b'[') {
                            std::fs::create_dir_all(tmp)
                                .map_err(|e| DataError::Input(e.to_string()))?;
                            (
                                ndjson_of(path, tmp)?.display().to_string(),
                                ".ndjson".to_owned(),
                            )
                        } else {
                            (p.clone(), format!(".{ext}"))
                        };
                        let opts = JsonReadOptions::default().file_extension(&suffix);
                        ctx.register_json(name, &file, opts).await
                    }
                };
                r.map_err(|e| DataError::Input(format!("{}: {e}", path.display())))?;
            }
            let opts = SQLOptions::new()
                .with_allow_ddl(false)
                .with_allow_dml(false)
                .with_allow_statements(false);
            let df = ctx
                .sql_with_options(sql, opts)
                .await
                .map_err(|e| DataError::Query(e.to_string()))?;
            let columns: Vec<String> = df
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect();
            let batches = df
                .limit(0, Some(limit + 1))
                .map_err(|e| DataError::Query(e.to_string()))?
                .collect()
                .await
                .map_err(|e| DataError::Query(e.to_string()))?;
            let mut w = ArrayWriter::new(Vec::new());
            let refs: Vec<_> = batches.iter().collect();
            w.write_batches(&refs)
                .map_err(|e| DataError::Query(e.to_string()))?;
            w.finish().map_err(|e| DataError::Query(e.to_string()))?;
            let buf = w.into_inner();
            let objs: Vec<Map<String, Value>> = if buf.is_empty() {
                Vec::new()
            } else {
                serde_json::from_slice(&buf).map_err(|e| DataError::Query(e.to_string()))?
            };
            let truncated = objs.len() > limit;
            let rows = objs
                .into_iter()
                .take(limit)
                .map(|o| {
                    columns
                        .iter()
                        .map(|c| o.get(c).cloned().unwrap_or(Value::Null))
                        .collect()
                })
                .collect();
            Ok(Table {
                columns,
                rows,
                truncated,
            })
        }
        .await
    }
}
