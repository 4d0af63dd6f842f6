//! The data agent's tests, one binary (modules by concern).

mod data;
mod kind;
mod sql;

use std::path::PathBuf;

/// Where `scripts/fetch-data.sh` puts the demo data: `$AGENTRY_DATA`, else
/// `~/.cache/agentry/data`.
fn demo_data_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("AGENTRY_DATA") {
        return PathBuf::from(d);
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    home.join(".cache/agentry/data")
}
