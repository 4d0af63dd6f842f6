//! Triggers: the named reasons a request may start work (a schedule, a webhook, a button),
//! each with its own instructions for the agent, the scopes a caller needs to fire it, the
//! agents it may start, and the operational defaults its requests get.
//!
//! A request names its trigger in the task envelope (`triggerId`); [`Triggers::admit`]
//! refuses an unknown trigger, one the caller's scopes do not cover and one aimed at an agent
//! it does not apply to, and returns what the agent adds to its own system prompt.
//!
//! ```
//! use agentry_governance::triggers::{Trigger, Triggers};
//! let weekly: Trigger = serde_json::from_value(serde_json::json!({
//!     "id": "weekly-report",
//!     "name": "Weekly report",
//!     "system_prompt": "Write for managers: five bullets at most.",
//!     "required_scopes": ["reports.write"],
//!     "agents": ["writer"],
//! })).unwrap();
//! let triggers = Triggers::new(vec![weekly]).unwrap();
//! let granted = vec!["reports.write".to_string()];
//! let ok = triggers.admit("weekly-report", "writer", Some(&granted)).unwrap();
//! assert_eq!(ok.system_prompt, "Write for managers: five bullets at most.");
//! assert!(triggers.admit("weekly-report", "writer", Some(&[])).is_err());
//! assert!(triggers.admit("weekly-report", "mailer", Some(&granted)).is_err());
//! assert!(triggers.admit("nightly", "writer", Some(&granted)).is_err());
//! ```

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use serde::{Deserialize, Serialize};

/// One trigger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Trigger {
    /// What requests name in their envelope's `triggerId`.
    pub id: String,
    /// For people (audit trails, dashboards).
    #[serde(default)]
    pub name: String,
    /// Instructions the agent adds to its own system prompt for requests of this trigger.
    #[serde(default)]
    pub system_prompt: String,
    /// Scopes the caller's token must grant to fire it (the operator's static credentials
    /// grant every scope).
    #[serde(default)]
    pub required_scopes: Vec<String>,
    /// The agents (by name) it may start; empty: any.
    #[serde(default)]
    pub agents: Vec<String>,
    /// Response mode its requests get when they name none.
    #[serde(default)]
    pub run_mode: Option<RunMode>,
    /// Priority its requests get when they name none.
    #[serde(default)]
    pub priority: Option<Priority>,
}

/// How a trigger's requests want their answer (the task envelope's response mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunMode {
    /// Wait for the task to finish.
    Sync,
    /// Answer at once with the task.
    Async,
    /// Answer at once; the finished task is pushed to the request's callback URL.
    Callback,
}

/// How urgent a trigger's requests are (the task envelope's priority).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    /// Can wait.
    Low,
    /// The default.
    Normal,
    /// Before the others.
    High,
}

/// Why a trigger was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TriggerError {
    /// No trigger has this id.
    #[error("unknown trigger `{0}`")]
    Unknown(String),
    /// The trigger does not start this agent.
    #[error("trigger `{trigger}` does not apply to agent `{agent}`")]
    NotForAgent {
        /// The trigger.
        trigger: String,
        /// The agent asked.
        agent: String,
    },
    /// The caller's scopes do not cover the trigger's.
    #[error("firing trigger `{trigger}` needs the scope(s) {}", missing.join(" "))]
    Forbidden {
        /// The trigger.
        trigger: String,
        /// The scopes the caller lacks.
        missing: Vec<String>,
    },
    /// The registry itself is not valid (two triggers with one id, an empty id).
    #[error("invalid triggers: {0}")]
    Invalid(String),
    /// The triggers database could not be read or written.
    #[error("triggers database: {0}")]
    Store(String),
}

/// The triggers an operator configured.
#[derive(Debug, Clone, Default)]
pub struct Triggers {
    by_id: HashMap<String, Trigger>,
}

impl Triggers {
    /// A registry of `triggers`, checked: ids unique and non-empty (modes and priorities
    /// are checked when a trigger is read).
    pub fn new(triggers: Vec<Trigger>) -> Result<Self, TriggerError> {
        let mut by_id = HashMap::new();
        for t in triggers {
            if t.id.is_empty() || !t.id.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(TriggerError::Invalid(format!(
                    "trigger id `{}` must be visible ASCII without spaces",
                    t.id
                )));
            }
            let id = t.id.clone();
            if by_id.insert(id.clone(), t).is_some() {
                return Err(TriggerError::Invalid(format!(
                    "trigger `{id}` is defined twice"
                )));
            }
        }
        Ok(Triggers { by_id })
    }

    /// The trigger with this id.
    pub fn get(&self, id: &str) -> Option<&Trigger> {
        self.by_id.get(id)
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Whether a request of a caller holding `scopes` (`None`: every scope) may fire trigger
    /// `id` at agent `agent`; the trigger when it may.
    pub fn admit(
        &self,
        id: &str,
        agent: &str,
        scopes: Option<&[String]>,
    ) -> Result<&Trigger, TriggerError> {
        let t = self
            .by_id
            .get(id)
            .ok_or_else(|| TriggerError::Unknown(id.to_owned()))?;
        if !t.agents.is_empty() && !t.agents.iter().any(|a| a == agent) {
            return Err(TriggerError::NotForAgent {
                trigger: id.to_owned(),
                agent: agent.to_owned(),
            });
        }
        if let Some(held) = scopes {
            let missing: Vec<String> = t
                .required_scopes
                .iter()
                .filter(|s| !held.contains(s))
                .cloned()
                .collect();
            if !missing.is_empty() {
                return Err(TriggerError::Forbidden {
                    trigger: id.to_owned(),
                    missing,
                });
            }
        }
        Ok(t)
    }
}

/// Triggers kept in a SQLite table, so an operator adds, changes and removes them without a
/// restart (`agentry triggers`); servers reading it through [`LiveTriggers`] see the change
/// within a second. Each row is a trigger as JSON, checked when written and when read.
pub struct TriggerDb {
    conn: Mutex<Connection>,
}

impl std::fmt::Debug for TriggerDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TriggerDb").finish_non_exhaustive()
    }
}

fn store_error(e: rusqlite::Error) -> TriggerError {
    TriggerError::Store(e.to_string())
}

impl TriggerDb {
    /// Opens (creating when needed) the database at `path`.
    pub fn open(path: &Path) -> Result<TriggerDb, TriggerError> {
        let conn = Connection::open(path).map_err(store_error)?;
        conn.busy_timeout(Duration::from_secs(5))
            .map_err(store_error)?;
        conn.execute_batch(
            "PRAGMA journal_mode=WAL;
             CREATE TABLE IF NOT EXISTS triggers (
                 id TEXT PRIMARY KEY,
                 definition TEXT NOT NULL,
                 updated_at INTEGER NOT NULL
             );",
        )
        .map_err(store_error)?;
        Ok(TriggerDb {
            conn: Mutex::new(conn),
        })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds `t`, or replaces the trigger with its id.
    pub fn put(&self, t: &Trigger) -> Result<(), TriggerError> {
        Triggers::new(vec![t.clone()])?;
        let json = serde_json::to_string(t).map_err(|e| TriggerError::Store(e.to_string()))?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        self.conn()
            .execute(
                "INSERT INTO triggers (id, definition, updated_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT(id) DO UPDATE SET definition = ?2, updated_at = ?3",
                rusqlite::params![t.id, json, now],
            )
            .map_err(store_error)?;
        Ok(())
    }

    /// Removes the trigger `id`; whether there was one.
    pub fn remove(&self, id: &str) -> Result<bool, TriggerError> {
        let n = self
            .conn()
            .execute("DELETE FROM triggers WHERE id = ?1", [id])
            .map_err(store_error)?;
        Ok(n > 0)
    }

    /// Every trigger, by id. A row that is not a valid trigger is an error naming it.
    pub fn list(&self) -> Result<Vec<Trigger>, TriggerError> {
        let conn = self.conn();
        let mut q = conn
            .prepare("SELECT id, definition FROM triggers ORDER BY id")
            .map_err(store_error)?;
        let rows = q
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
            .map_err(store_error)?;
        let mut out = Vec::new();
        for row in rows {
            let (id, json) = row.map_err(store_error)?;
            let t: Trigger = serde_json::from_str(&json).map_err(|e| {
                TriggerError::Invalid(format!("trigger `{id}` in the database: {e}"))
            })?;
            if t.id != id {
                return Err(TriggerError::Invalid(format!(
                    "the database's row `{id}` holds trigger `{}`",
                    t.id
                )));
            }
            out.push(t);
        }
        Ok(out)
    }

    /// Changes when another connection commits (SQLite's `data_version`).
    fn version(&self) -> Result<i64, TriggerError> {
        self.conn()
            .query_row("PRAGMA data_version", [], |r| r.get(0))
            .map_err(store_error)
    }
}

/// The triggers a server admits requests with: the configured ones plus, with a
/// [`TriggerDb`], the database's, read again at most once a second when it changed. A
/// database that becomes unreadable or invalid (a trigger defined in both, a bad row) keeps
/// the last good registry and says so in the log: requests naming a trigger it does not
/// hold are refused, as always.
#[derive(Debug)]
pub struct LiveTriggers {
    fixed: Vec<Trigger>,
    db: Option<TriggerDb>,
    state: Mutex<Live>,
}

#[derive(Debug)]
struct Live {
    current: Arc<Triggers>,
    version: i64,
    checked: Instant,
}

/// How often a server looks at the database's version.
const RECHECK: Duration = Duration::from_secs(1);

impl LiveTriggers {
    /// The configured `fixed` triggers and those of `db`; an error when they are not a
    /// valid registry now (a server does not start on a broken one).
    pub fn new(fixed: Vec<Trigger>, db: Option<TriggerDb>) -> Result<LiveTriggers, TriggerError> {
        let (current, version) = load(&fixed, db.as_ref())?;
        Ok(LiveTriggers {
            fixed,
            db,
            state: Mutex::new(Live {
                current: Arc::new(current),
                version,
                checked: Instant::now(),
            }),
        })
    }

    /// The registry as of now.
    pub fn current(&self) -> Arc<Triggers> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let Some(db) = &self.db else {
            return st.current.clone();
        };
        if st.checked.elapsed() < RECHECK {
            return st.current.clone();
        }
        st.checked = Instant::now();
        match db.version() {
            Ok(v) if v == st.version => {}
            Ok(_) => match load(&self.fixed, Some(db)) {
                Ok((t, v)) => {
                    st.current = Arc::new(t);
                    st.version = v;
                }
                Err(e) => tracing::warn!("{e}; keeping the triggers read before"),
            },
            Err(e) => tracing::warn!("{e}; keeping the triggers read before"),
        }
        st.current.clone()
    }
}

impl From<Triggers> for LiveTriggers {
    fn from(t: Triggers) -> LiveTriggers {
        LiveTriggers {
            fixed: t.by_id.values().cloned().collect(),
            db: None,
            state: Mutex::new(Live {
                current: Arc::new(t),
                version: 0,
                checked: Instant::now(),
            }),
        }
    }
}

fn load(fixed: &[Trigger], db: Option<&TriggerDb>) -> Result<(Triggers, i64), TriggerError> {
    let Some(db) = db else {
        return Ok((Triggers::new(fixed.to_vec())?, 0));
    };
    // The version first: a change committed while reading is seen at the next check.
    let version = db.version()?;
    let mut all = fixed.to_vec();
    all.extend(db.list()?);
    Ok((Triggers::new(all)?, version))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(id: &str) -> Trigger {
        Trigger {
            id: id.into(),
            name: String::new(),
            system_prompt: String::new(),
            required_scopes: Vec::new(),
            agents: Vec::new(),
            run_mode: None,
            priority: None,
        }
    }

    #[test]
    fn bad_registries_are_refused() {
        assert!(Triggers::new(vec![t("a"), t("a")]).is_err());
        assert!(Triggers::new(vec![t("")]).is_err());
        assert!(Triggers::new(vec![t("a b")]).is_err());
        let read = |v: serde_json::Value| serde_json::from_value::<Trigger>(v);
        assert!(read(serde_json::json!({"id": "m", "run_mode": "later"})).is_err());
        assert!(read(serde_json::json!({"id": "p", "priority": "urgent"})).is_err());
        let unknown_field =
            serde_json::from_value::<Trigger>(serde_json::json!({"id": "x", "prompt": "y"}));
        assert!(
            unknown_field.is_err(),
            "a misspelt field is an error, not ignored"
        );
    }

    #[test]
    fn any_agent_and_unlimited_callers_by_default() {
        let r = Triggers::new(vec![t("open")]).unwrap();
        assert!(r.admit("open", "anyone", None).is_ok());
        assert!(r.admit("open", "anyone", Some(&[])).is_ok());
        let mut scoped = t("scoped");
        scoped.required_scopes = vec!["a".into(), "b".into()];
        let r = Triggers::new(vec![scoped]).unwrap();
        assert!(
            r.admit("scoped", "x", None).is_ok(),
            "static credentials hold every scope"
        );
        assert_eq!(
            r.admit("scoped", "x", Some(&["a".into()])).unwrap_err(),
            TriggerError::Forbidden {
                trigger: "scoped".into(),
                missing: vec!["b".into()]
            }
        );
    }

    fn scoped(id: &str, scope: &str, prompt: &str) -> Trigger {
        let mut x = t(id);
        x.required_scopes = vec![scope.into()];
        x.system_prompt = prompt.into();
        x
    }

    #[test]
    fn the_database_holds_triggers_and_refuses_bad_ones() {
        let dir = std::env::temp_dir().join(format!("agentry-triggers-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t1.db");
        let _ = std::fs::remove_file(&path);
        let db = TriggerDb::open(&path).unwrap();
        db.put(&scoped("nightly", "reports.run", "Be brief."))
            .unwrap();
        db.put(&scoped("nightly", "reports.run", "Be briefer."))
            .unwrap();
        db.put(&t("weekly")).unwrap();
        let all = db.list().unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].system_prompt, "Be briefer.");
        assert!(matches!(
            db.put(&t("has space")),
            Err(TriggerError::Invalid(_))
        ));
        assert!(db.remove("weekly").unwrap());
        assert!(!db.remove("weekly").unwrap());
        // A row someone wrote by hand that is not a trigger is named, not skipped.
        db.conn()
            .execute(
                "INSERT INTO triggers VALUES ('broken', '{\"id\": \"broken\", \"colour\": 1}', 0)",
                [],
            )
            .unwrap();
        let e = db.list().unwrap_err().to_string();
        assert!(e.contains("broken") && e.contains("colour"), "{e}");
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn live_triggers_follow_the_database_and_keep_the_last_good_set() {
        let dir = std::env::temp_dir().join(format!("agentry-triggers-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t2.db");
        let _ = std::fs::remove_file(&path);
        let operator = TriggerDb::open(&path).unwrap();
        operator
            .put(&scoped("nightly", "reports.run", "Be brief."))
            .unwrap();
        let live =
            LiveTriggers::new(vec![t("fixed")], Some(TriggerDb::open(&path).unwrap())).unwrap();
        let held = vec!["reports.run".to_string()];
        assert!(live.current().admit("nightly", "a", Some(&held)).is_ok());
        assert!(live.current().admit("fixed", "a", None).is_ok());
        assert!(live.current().admit("hourly", "a", None).is_err());

        // Added, changed and removed by another connection: seen within a second.
        operator.put(&t("hourly")).unwrap();
        operator
            .put(&scoped("nightly", "reports.admin", "Be brief."))
            .unwrap();
        std::thread::sleep(RECHECK + Duration::from_millis(100));
        let now = live.current();
        assert!(now.admit("hourly", "a", None).is_ok());
        assert!(matches!(
            now.admit("nightly", "a", Some(&held)),
            Err(TriggerError::Forbidden { .. })
        ));
        operator.remove("hourly").unwrap();
        // A definition clashing with a configured one is not taken: the last good set stays.
        operator.put(&scoped("fixed", "x", "")).unwrap();
        std::thread::sleep(RECHECK + Duration::from_millis(100));
        let kept = live.current();
        assert!(
            kept.admit("hourly", "a", None).is_ok(),
            "kept the last good set"
        );
        assert!(kept.admit("fixed", "a", Some(&[])).is_ok());
        operator.remove("fixed").unwrap();
        std::thread::sleep(RECHECK + Duration::from_millis(100));
        assert!(live.current().admit("hourly", "a", None).is_err());
        // A server does not start on a clashing set.
        operator.put(&t("fixed")).unwrap();
        assert!(
            LiveTriggers::new(vec![t("fixed")], Some(TriggerDb::open(&path).unwrap())).is_err()
        );
        let _ = std::fs::remove_file(&path);
    }
}
