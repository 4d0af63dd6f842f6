//! What a data agent may read: named sources, allowed folders and allowed database URLs, given
//! by whoever runs the agent. Closed by default: [`DataAccess::default`] reads nothing.
//!
//! Why: the location in a request comes from the caller (a model, a remote agent, any client
//! of the server). Without confinement a data agent reads every CSV and SQLite file the
//! process can open, other agents' task stores included, and probes networks through
//! `postgres://` URLs. Paths are resolved with symlinks followed and checked after resolution,
//! only regular files are read (a FIFO or a device would hang or never end), and errors never
//! say whether a path outside the allowed places exists.
//!
//! ```
//! use agentry_data::DataAccess;
//! let dir = std::env::temp_dir().join("agentry-access-doc");
//! std::fs::create_dir_all(&dir).unwrap();
//! std::fs::write(dir.join("sales.csv"), "region,amount\nnorth,3\n").unwrap();
//! let access = DataAccess::default().with_folder(&dir).unwrap();
//! assert!(access.resolve("sales.csv").is_ok());
//! assert!(access.resolve("/etc/passwd").is_err());
//! assert!(DataAccess::default().resolve("sales.csv").is_err());
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use super::DataError;
use super::query::{Source, data_kind, table_name};
use agentry_core::confine::Folders;

/// The places a data agent may read from. See the module docs.
#[derive(Debug, Clone, Default)]
pub struct DataAccess {
    /// Name -> location, set by the operator (trusted: not confined to the folders).
    named: BTreeMap<String, String>,
    /// Folders whose data files and SQLite files requests may name.
    folders: Folders,
    /// `postgres://` URLs a request may name verbatim.
    databases: Vec<String>,
}

impl DataAccess {
    /// Adds a named source: a request's `source` equal to `name` reads `location` (a file, a
    /// folder, a SQLite file or a `postgres://` URL).
    pub fn with_source(mut self, name: impl Into<String>, location: impl Into<String>) -> Self {
        self.named.insert(name.into(), location.into());
        self
    }

    /// Allows every data file and SQLite file under `folder` (which must exist).
    pub fn with_folder(mut self, folder: impl AsRef<Path>) -> Result<Self, DataError> {
        let f = folder.as_ref();
        self.folders.allow(f).map_err(|e| {
            DataError::Input(format!("data folder {} cannot be used: {e}", f.display()))
        })?;
        Ok(self)
    }

    /// Allows requests to name this `postgres://` URL.
    pub fn with_database(mut self, url: impl Into<String>) -> Self {
        self.databases.push(url.into());
        self
    }

    /// Never reads anything under `path`, even inside an allowed folder.
    pub fn deny(mut self, path: impl AsRef<Path>) -> Self {
        self.folders.deny(path.as_ref());
        self
    }

    /// Whether nothing at all is allowed.
    pub fn is_closed(&self) -> bool {
        self.named.is_empty() && self.folders.is_empty() && self.databases.is_empty()
    }

    /// What a caller may name, for tool descriptions and error messages (no host paths).
    pub fn summary(&self) -> String {
        if self.is_closed() {
            return "no data sources are configured for this agent".into();
        }
        let mut parts = Vec::new();
        if !self.named.is_empty() {
            parts.push(format!(
                "the named sources {}",
                self.named.keys().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
        if !self.folders.is_empty() {
            parts.push(
                "a data file (csv, parquet, json, ndjson) or SQLite file by its path relative \
                 to the allowed folder, or `.` for all of its files"
                    .into(),
            );
        }
        if !self.databases.is_empty() {
            parts.push(format!(
                "{} configured database URL(s)",
                self.databases.len()
            ));
        }
        parts.join("; ")
    }

    fn refused(&self, location: &str) -> DataError {
        DataError::Input(format!(
            "`{location}` is not a data source this agent may read (it may read {})",
            self.summary()
        ))
    }

    /// The source a request's `location` names, if this access allows it.
    pub fn resolve(&self, location: &str) -> Result<Source, DataError> {
        if let Some(configured) = self.named.get(location) {
            return Source::parse(configured);
        }
        if location.starts_with("postgres://") || location.starts_with("postgresql://") {
            return match self.databases.iter().any(|d| d == location) {
                true => Ok(Source::Postgres(location.to_owned())),
                false => Err(self.refused(location)),
            };
        }
        if location.contains("://") || location.is_empty() || location.contains('\0') {
            return Err(self.refused(location));
        }
        match self.folders.resolve(location) {
            Some(real) => self.source_at(&real, location),
            None => Err(self.refused(location)),
        }
    }

    fn source_at(&self, real: &Path, location: &str) -> Result<Source, DataError> {
        let meta = std::fs::metadata(real).map_err(|_| self.refused(location))?;
        if meta.is_dir() {
            let mut files = BTreeMap::new();
            let entries = std::fs::read_dir(real)
                .map_err(|e| DataError::Input(format!("cannot list `{location}`: {e}")))?;
            for e in entries.flatten() {
                // Each entry resolved and checked again: a symlink in the folder may point out.
                let Ok(file) = e.path().canonicalize() else {
                    continue;
                };
                let regular = std::fs::metadata(&file).is_ok_and(|m| m.is_file());
                if regular
                    && self.folders.contains(&file)
                    && data_kind(&file).is_some_and(|k| k != "sqlite")
                {
                    files.insert(table_name(&e.path()), file);
                }
            }
            if files.is_empty() {
                return Err(DataError::Input(format!("no data files in `{location}`")));
            }
            return Ok(Source::Files(files));
        }
        if !meta.is_file() {
            return Err(self.refused(location));
        }
        match data_kind(real) {
            Some("sqlite") => Ok(Source::Sqlite(real.to_path_buf())),
            Some(_) => Ok(Source::Files(BTreeMap::from([(
                table_name(Path::new(location)),
                real.to_path_buf(),
            )]))),
            None => Err(DataError::Input(format!(
                "`{location}`: unsupported data file type (csv, parquet, json, ndjson, sqlite)"
            ))),
        }
    }

    /// `message` with the allowed folders' host paths removed (engine errors quote the files
    /// they read).
    pub fn redact(&self, message: &str) -> String {
        self.folders.redact(message)
    }
}
