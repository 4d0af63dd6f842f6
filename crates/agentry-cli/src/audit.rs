//! `agentry audit verify|show|head`: read the audit trail an auditor trusts.

use std::path::{Path, PathBuf};

use agentry::governance::{AuditError, AuditLog, Record};
use clap::Subcommand;

use crate::error::CliError;

#[derive(Subcommand)]
pub(crate) enum AuditCommand {
    /// Check every record's chain and MAC and the head file; name the first tampered record.
    Verify {
        /// The log (default $AGENTRY_HOME/audit.db; its key is `<log>.key` beside it).
        #[arg(long)]
        log: Option<PathBuf>,
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
        #[arg(long)]
        log: Option<PathBuf>,
        /// One JSON record per line.
        #[arg(long)]
        json: bool,
    },
    /// Print the log's head (`SEQ MAC`), to keep somewhere the log's host cannot change.
    Head {
        #[arg(long)]
        log: Option<PathBuf>,
    },
}

fn open(log: Option<&Path>) -> Result<AuditLog, CliError> {
    let path = log.map_or_else(|| agentry::home_dir().join("audit.db"), Path::to_owned);
    if !path.exists() {
        return Err(CliError::Usage(format!(
            "no audit log at {} (give one with --log)",
            path.display()
        )));
    }
    AuditLog::open(&path).map_err(failed)
}

fn failed(e: AuditError) -> CliError {
    CliError::Failed(e.to_string())
}

pub(crate) async fn run(cmd: AuditCommand) -> Result<(), CliError> {
    tokio::task::spawn_blocking(move || run_blocking(cmd))
        .await
        .map_err(|e| CliError::Failed(e.to_string()))?
}

fn run_blocking(cmd: AuditCommand) -> Result<(), CliError> {
    match cmd {
        AuditCommand::Verify { log, head } => {
            let log = open(log.as_deref())?;
            let verified = match head {
                None => log.verify(),
                Some(h) => {
                    let (seq, mac) = h
                        .split_once([':', ' '])
                        .and_then(|(s, m)| Some((s.trim().parse().ok()?, m.trim())))
                        .ok_or_else(|| CliError::Usage(format!("--head {h}: not SEQ:MAC")))?;
                    log.verify_against(seq, mac)
                }
            }
            .map_err(failed)?;
            println!(
                "ok: {} records, chain and head intact ({})",
                verified.records,
                log.path().display()
            );
            Ok(())
        }
        AuditCommand::Show {
            correlation,
            log,
            json,
        } => {
            let log = open(log.as_deref())?;
            let records = log.by_correlation(&correlation).map_err(failed)?;
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
        AuditCommand::Head { log } => {
            let log = open(log.as_deref())?;
            match log.verify().map_err(failed)?.head {
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
