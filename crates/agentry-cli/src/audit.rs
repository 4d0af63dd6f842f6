//! `agentry audit verify|show|head`: read the audit trail an auditor trusts: the SQLite log of
//! one machine, or (`--store postgres://...`) the chain replicas share in PostgreSQL.

use std::path::PathBuf;
use std::sync::Arc;

use agentry::governance::{AuditError, AuditLog, Record, Verified};
use clap::{Args, Subcommand};

use crate::error::CliError;

#[derive(Subcommand)]
pub(crate) enum AuditCommand {
    /// Check every record's chain and MAC and the head; name the first tampered record.
    Verify {
        #[command(flatten)]
        trail: Trail,
        /// Also check that the log still holds a head recorded elsewhere earlier, as
        /// printed by `agentry audit head` (`SEQ MAC` or `SEQ:MAC`).
        #[arg(long, value_name = "SEQ:MAC")]
        head: Option<String>,
    },
    /// Print the records of one request (every hop), in order.
    Show {
        /// The correlation id.
        #[arg(long)]
        correlation: String,
        #[command(flatten)]
        trail: Trail,
        /// One JSON record per line.
        #[arg(long)]
        json: bool,
    },
    /// Print the log's head (`SEQ MAC`), to keep somewhere the log's host cannot change.
    Head {
        #[command(flatten)]
        trail: Trail,
    },
}

/// Which trail: a SQLite file, or a chain in PostgreSQL.
#[derive(Args)]
pub(crate) struct Trail {
    /// The log (default $AGENTRY_HOME/audit.db; its key is `<log>.key` beside it).
    #[arg(long, conflicts_with = "store")]
    log: Option<PathBuf>,
    /// The PostgreSQL database of a replicated deployment (`store` of its agentry.toml;
    /// `env:NAME` or `file:PATH` too).
    #[arg(long, requires = "key")]
    store: Option<String>,
    /// The chain's key there (`audit_key`: 64 hex digits, `env:NAME` or `file:PATH`).
    #[arg(long)]
    key: Option<String>,
    /// The chain there (`audit_chain`).
    #[arg(long, default_value = "agentry")]
    chain: String,
}

enum Opened {
    File(Arc<AuditLog>),
    #[cfg(feature = "postgres")]
    Pg(agentry::postgres::PgAuditLog),
}

impl Opened {
    async fn open(t: Trail) -> Result<Opened, CliError> {
        if let Some(store) = t.store {
            #[cfg(feature = "postgres")]
            {
                let secret =
                    |s: &str| agentry::serve::secret(s).map_err(|e| CliError::Usage(e.to_string()));
                let db = agentry::postgres::Database::connect(&secret(&store)?)
                    .await
                    .map_err(|e| CliError::Failed(e.to_string()))?;
                let key = agentry::governance::audit::AuditKey::Hex(secret(
                    t.key.as_deref().unwrap_or_default(),
                )?);
                let log =
                    agentry::postgres::PgAuditLog::open(&db, &t.chain, &key).map_err(failed)?;
                return Ok(Opened::Pg(log));
            }
            #[cfg(not(feature = "postgres"))]
            {
                let _ = store;
                return Err(CliError::Usage(
                    "--store: this agentry was built without the `postgres` feature".into(),
                ));
            }
        }
        let path = t
            .log
            .unwrap_or_else(|| agentry::home_dir().join("audit.db"));
        if !path.exists() {
            return Err(CliError::Usage(format!(
                "no audit log at {} (give one with --log, or --store for PostgreSQL)",
                path.display()
            )));
        }
        let log = blocking(move || AuditLog::open(&path)).await?;
        Ok(Opened::File(Arc::new(log)))
    }

    fn describe(&self) -> String {
        match self {
            Opened::File(log) => log.path().display().to_string(),
            #[cfg(feature = "postgres")]
            Opened::Pg(log) => format!("{log:?}"),
        }
    }

    async fn verify(&self, head: Option<(u64, String)>) -> Result<Verified, CliError> {
        match self {
            Opened::File(log) => {
                let log = log.clone();
                blocking(move || match &head {
                    None => log.verify(),
                    Some((seq, mac)) => log.verify_against(*seq, mac),
                })
                .await
            }
            #[cfg(feature = "postgres")]
            Opened::Pg(log) => match &head {
                None => log.verify().await,
                Some((seq, mac)) => log.verify_against(*seq, mac).await,
            }
            .map_err(failed),
        }
    }

    async fn by_correlation(&self, id: String) -> Result<Vec<Record>, CliError> {
        match self {
            Opened::File(log) => {
                let log = log.clone();
                blocking(move || log.by_correlation(&id)).await
            }
            #[cfg(feature = "postgres")]
            Opened::Pg(log) => log.by_correlation(&id).await.map_err(failed),
        }
    }
}

/// The SQLite log's calls block (they read the file): off the runtime's threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, AuditError> + Send + 'static,
) -> Result<T, CliError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| CliError::Failed(e.to_string()))?
        .map_err(failed)
}

fn failed(e: AuditError) -> CliError {
    CliError::Failed(e.to_string())
}

pub(crate) async fn run(cmd: AuditCommand) -> Result<(), CliError> {
    match cmd {
        AuditCommand::Verify { trail, head } => {
            let head = head
                .map(|h| {
                    h.split_once([':', ' '])
                        .and_then(|(s, m)| Some((s.trim().parse().ok()?, m.trim().to_owned())))
                        .ok_or_else(|| CliError::Usage(format!("--head {h}: not SEQ:MAC")))
                })
                .transpose()?;
            let log = Opened::open(trail).await?;
            let verified = log.verify(head).await?;
            println!(
                "ok: {} records, chain and head intact ({})",
                verified.records,
                log.describe()
            );
            Ok(())
        }
        AuditCommand::Show {
            correlation,
            trail,
            json,
        } => {
            let log = Opened::open(trail).await?;
            let records = log.by_correlation(correlation.clone()).await?;
            if records.is_empty() {
                return Err(CliError::Failed(format!(
                    "no record with correlation id {correlation}"
                )));
            }
            for r in &records {
                if json {
                    println!("{}", serde_json::to_string(r).unwrap_or_default());
                } else {
                    println!("{}", line(r));
                }
            }
            Ok(())
        }
        AuditCommand::Head { trail } => {
            let log = Opened::open(trail).await?;
            match log.verify(None).await?.head {
                Some((seq, mac)) => println!("{seq}:{mac}"),
                None => println!("0:"),
            }
            Ok(())
        }
    }
}

/// `#seq time kind actor [for user] -> agent/skill task decision latency detail`.
fn line(r: &Record) -> String {
    let e = &r.event;
    let mut s = format!("#{} {} {:<10} {}", r.seq, time(r.at_ms), e.kind, e.actor);
    if let Some(who) = &e.on_behalf_of {
        s.push_str(&format!(" for {who}"));
    }
    if let Some(a) = &e.agent {
        s.push_str(&format!(" -> {a}"));
        if let Some(k) = &e.skill {
            s.push_str(&format!("/{k}"));
        }
    }
    if let Some(t) = &e.task_id {
        s.push_str(&format!(" task {t}"));
    }
    if let Some(d) = &e.decision {
        s.push_str(&format!(": {d}"));
    }
    if let Some(us) = e.latency_us {
        s.push_str(&format!(" ({:.1} ms)", us as f64 / 1000.0));
    }
    if !e.detail.is_null() {
        s.push_str(&format!(" {}", e.detail));
    }
    s
}

/// UTC `HH:MM:SS.mmm` of a day (the date is rarely what one reads a request's path for).
fn time(at_ms: i64) -> String {
    let ms = at_ms.rem_euclid(86_400_000);
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        ms / 3_600_000,
        ms / 60_000 % 60,
        ms / 1000 % 60,
        ms % 1000
    )
}
