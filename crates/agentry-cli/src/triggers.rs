//! `agentry triggers list|put|remove --db FILE`: the triggers database servers with
//! `[server] triggers_db` follow while they run.

use std::path::PathBuf;

use agentry::governance::triggers::{Trigger, TriggerDb, TriggerError};
use clap::Subcommand;

use crate::error::CliError;

#[derive(Subcommand)]
pub(crate) enum TriggersCommand {
    /// Print every trigger in the database as JSON, one per line.
    List {
        /// The database (`[server] triggers_db`).
        #[arg(long)]
        db: PathBuf,
    },
    /// Add a trigger, or replace the one with its id: a JSON object with `id`, `name`,
    /// `system_prompt`, `required_scopes`, `agents`, `run_mode`, `priority`.
    Put {
        #[arg(long)]
        db: PathBuf,
        /// The trigger as JSON, or `@FILE` to read it from a file.
        trigger: String,
    },
    /// Remove a trigger.
    Remove {
        #[arg(long)]
        db: PathBuf,
        id: String,
    },
}

fn failed(e: TriggerError) -> CliError {
    CliError::Failed(e.to_string())
}

pub(crate) async fn run(cmd: TriggersCommand) -> Result<(), CliError> {
    tokio::task::spawn_blocking(move || run_blocking(cmd))
        .await
        .map_err(|e| CliError::Failed(e.to_string()))?
}

fn run_blocking(cmd: TriggersCommand) -> Result<(), CliError> {
    match cmd {
        TriggersCommand::List { db } => {
            for t in TriggerDb::open(&db)
                .and_then(|d| d.list())
                .map_err(failed)?
            {
                println!("{}", serde_json::to_string(&t).unwrap_or_default());
            }
        }
        TriggersCommand::Put { db, trigger } => {
            let text = match trigger.strip_prefix('@') {
                Some(file) => std::fs::read_to_string(file)
                    .map_err(|e| CliError::Usage(format!("cannot read {file}: {e}")))?,
                None => trigger,
            };
            let t: Trigger = serde_json::from_str(&text)
                .map_err(|e| CliError::Usage(format!("not a trigger: {e}")))?;
            TriggerDb::open(&db)
                .and_then(|d| d.put(&t))
                .map_err(failed)?;
            eprintln!("trigger `{}` saved", t.id);
        }
        TriggersCommand::Remove { db, id } => {
            if !TriggerDb::open(&db)
                .and_then(|d| d.remove(&id))
                .map_err(failed)?
            {
                return Err(CliError::Usage(format!(
                    "no trigger `{id}` in {}",
                    db.display()
                )));
            }
            eprintln!("trigger `{id}` removed");
        }
    }
    Ok(())
}
