//! Domains in tau2's directory format: `policy.md`, `tasks.json`, `split_tasks.json`,
//! `db.json` and, for domains whose users have tools, `user_db.json`.
//!
//! The mock domain ships with agentry. Any other directory in that format loads as long as
//! agentry implements its toolkit (tau2's tools are Python code; agentry ports `mock` and
//! `retail`), so `--domain path/to/tau2-bench/data/tau2/domains/retail` evaluates on tau2's
//! own copy of the data.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use crate::env::{Environment, TOOLKITS, Tools};
use crate::task::{Task, TaskError};

/// A domain: its policy, tasks, databases and tools.
#[derive(Debug, Clone)]
pub struct Domain {
    /// Its name (`mock`, `retail`).
    pub name: String,
    /// The agent's policy, given to the agent under test.
    pub policy: String,
    /// Every task.
    pub tasks: Vec<Task>,
    /// Named subsets of task ids (`base`, `train`, `test`).
    pub splits: BTreeMap<String, Vec<String>>,
    /// The tools and their schemas.
    pub tools: Arc<Tools>,
    db: Arc<Value>,
    user_db: Option<Arc<Value>>,
    /// Where it was read from (`None`: built in).
    pub source: Option<PathBuf>,
}

/// A domain could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum DomainError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file is not valid JSON.
    #[error("{path}: {source}")]
    Json {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// A task is not in tau2's format.
    #[error(transparent)]
    Task(#[from] TaskError),
    /// No toolkit for the domain.
    #[error(
        "no toolkit for domain {0:?}: agentry implements {TOOLKITS:?} (name the directory after one, or pass the toolkit)"
    )]
    Toolkit(String),
    /// A name that is neither built in nor a directory.
    #[error("{0}")]
    NotFound(String),
    /// A task id or split that the domain does not have.
    #[error("{0}")]
    Selection(String),
}

impl Domain {
    /// The domain shipped with agentry: `mock`.
    pub fn builtin(name: &str) -> Option<Domain> {
        if name != "mock" {
            return None;
        }
        let parse = |s: &str| -> Value { serde_json::from_str(s).expect("shipped data parses") };
        let tasks = match parse(include_str!("../domains/mock/tasks.json")) {
            Value::Array(items) => items
                .into_iter()
                .map(Task::from_value)
                .collect::<Result<Vec<_>, _>>()
                .expect("shipped tasks parse"),
            _ => Vec::new(),
        };
        let splits =
            serde_json::from_value(parse(include_str!("../domains/mock/split_tasks.json")))
                .unwrap_or_default();
        Some(Domain {
            name: "mock".into(),
            policy: include_str!("../domains/mock/policy.md").to_owned(),
            tasks,
            splits,
            tools: Tools::by_kind("mock")?,
            db: Arc::new(parse(include_str!("../domains/mock/db.json"))),
            user_db: Some(Arc::new(parse(include_str!(
                "../domains/mock/user_db.json"
            )))),
            source: None,
        })
    }

    /// `mock` (built in), `retail` (from `$TAU2_DATA_DIR/tau2/domains/retail`, tau2's own
    /// variable), or a directory.
    pub fn resolve(spec: &str, toolkit: Option<&str>) -> Result<Domain, DomainError> {
        let path = Path::new(spec);
        if path.is_dir() {
            return Domain::load(path, toolkit);
        }
        if let Some(d) = Domain::builtin(spec) {
            return Ok(d);
        }
        if TOOLKITS.contains(&spec) {
            if let Some(dir) = std::env::var_os("TAU2_DATA_DIR") {
                let dir = PathBuf::from(dir).join("tau2").join("domains").join(spec);
                if dir.is_dir() {
                    return Domain::load(&dir, Some(spec));
                }
            }
            return Err(DomainError::NotFound(format!(
                "the {spec} domain's data is not shipped with agentry: pass --domain with the directory \
                 (a tau2-bench checkout's data/tau2/domains/{spec}) or set TAU2_DATA_DIR to a tau2 data directory"
            )));
        }
        Err(DomainError::NotFound(format!(
            "no domain {spec:?}: built in is \"mock\"; otherwise give a directory in tau2's format"
        )))
    }

    /// Reads a domain directory. The toolkit is `toolkit`, else the directory's name.
    pub fn load(dir: &Path, toolkit: Option<&str>) -> Result<Domain, DomainError> {
        let name = dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        let kind = toolkit.unwrap_or(&name);
        let tools = Tools::by_kind(kind).ok_or_else(|| DomainError::Toolkit(kind.to_owned()))?;
        let read = |file: &str| -> Result<String, DomainError> {
            let path = dir.join(file);
            std::fs::read_to_string(&path).map_err(|source| DomainError::Io { path, source })
        };
        let json = |file: &str| -> Result<Value, DomainError> {
            let text = read(file)?;
            serde_json::from_str(&text).map_err(|source| DomainError::Json {
                path: dir.join(file),
                source,
            })
        };
        let tasks = match json("tasks.json")? {
            Value::Array(items) => items
                .into_iter()
                .map(Task::from_value)
                .collect::<Result<Vec<_>, _>>()?,
            _ => {
                return Err(DomainError::NotFound(format!(
                    "{}: not a list of tasks",
                    dir.join("tasks.json").display()
                )));
            }
        };
        let splits = if dir.join("split_tasks.json").exists() {
            serde_json::from_value(json("split_tasks.json")?).map_err(|source| {
                DomainError::Json {
                    path: dir.join("split_tasks.json"),
                    source,
                }
            })?
        } else {
            BTreeMap::new()
        };
        let user_db = if dir.join("user_db.json").exists() {
            Some(Arc::new(json("user_db.json")?))
        } else {
            None
        };
        Ok(Domain {
            name: tools.kind.to_owned(),
            policy: read("policy.md")?,
            tasks,
            splits,
            tools,
            db: Arc::new(json("db.json")?),
            user_db,
            source: Some(dir.to_owned()),
        })
    }

    /// A fresh environment: the databases as shipped, nothing run yet.
    pub fn environment(&self) -> Environment {
        Environment::new(
            self.tools.clone(),
            (*self.db).clone(),
            self.user_db.as_deref().cloned(),
        )
    }

    /// The task with this id.
    pub fn task(&self, id: &str) -> Option<&Task> {
        self.tasks.iter().find(|t| t.id == id)
    }

    /// The tasks a run covers: the given ids (in that order), else the split (`base` when the
    /// domain has one, else all), then the first `limit`.
    pub fn select(
        &self,
        ids: &[String],
        split: Option<&str>,
        limit: Option<usize>,
    ) -> Result<Vec<Task>, DomainError> {
        let mut out: Vec<Task> = if !ids.is_empty() {
            ids.iter()
                .map(|id| {
                    self.task(id).cloned().ok_or_else(|| {
                        DomainError::Selection(format!("domain {} has no task {id:?}", self.name))
                    })
                })
                .collect::<Result<_, _>>()?
        } else {
            let split = match split {
                Some(s) => Some(s),
                None if self.splits.contains_key("base") => Some("base"),
                None => None,
            };
            match split {
                Some(s) => {
                    let members = self.splits.get(s).ok_or_else(|| {
                        DomainError::Selection(format!(
                            "domain {} has no split {s:?} (it has {:?})",
                            self.name,
                            self.splits.keys().collect::<Vec<_>>()
                        ))
                    })?;
                    self.tasks
                        .iter()
                        .filter(|t| members.contains(&t.id))
                        .cloned()
                        .collect()
                }
                None => self.tasks.clone(),
            }
        };
        if let Some(n) = limit {
            out.truncate(n);
        }
        Ok(out)
    }

    /// The user simulator's guidelines: the ones for users with tools, or without.
    pub fn user_guidelines(&self, with_tools: bool) -> &'static str {
        if !with_tools {
            include_str!("../domains/simulation_guidelines.md")
        } else {
            include_str!("../domains/simulation_guidelines_tools.md")
        }
    }
}
