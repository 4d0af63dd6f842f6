//! Data-agent query time on the 3-million-row flights Parquet file (npm vega-datasets): each
//! query once cold (file opened and planned), then the median of 5 runs, through the same
//! [`Source::query`] the agent uses. `bench/data.sh` runs pandas and DuckDB on the same file.
//!
//!   cargo run --release -p agentry-specialists --example data_bench -- FLIGHTS.parquet

use std::time::Instant;

use agentry_data::Source;

pub const QUERIES: [(&str, &str); 3] = [
    (
        "count delayed > 60 min",
        "SELECT count(*) AS n FROM flights WHERE delay > 60",
    ),
    (
        "top 10 origins by flights, mean delay",
        "SELECT origin, count(*) AS n, avg(delay) AS mean_delay FROM flights GROUP BY origin ORDER BY n DESC LIMIT 10",
    ),
    (
        "mean delay and distance by destination",
        "SELECT destination, avg(delay) AS d, avg(distance) AS km FROM flights GROUP BY destination ORDER BY d DESC",
    ),
];

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: data_bench FLIGHTS.parquet")?;
    // The file as table `flights`, like the Python side.
    let dir = std::env::temp_dir().join(format!("agentry-data-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let link = dir.join("flights.parquet");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(std::fs::canonicalize(&path)?, &link)?;
    let src = Source::parse(&link.display().to_string())?;
    let schema = src.query("SELECT * FROM flights LIMIT 1", 1).await?;
    println!("columns: {}", schema.columns.join(", "));
    for (name, sql) in QUERIES {
        let t = Instant::now();
        let r = src.query(sql, 1000).await?;
        let cold = t.elapsed().as_secs_f64() * 1000.0;
        let mut runs = Vec::new();
        for _ in 0..5 {
            let t = Instant::now();
            src.query(sql, 1000).await?;
            runs.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        runs.sort_by(f64::total_cmp);
        println!(
            "agentry (DataFusion) | {name}: cold {cold:.0} ms, median {:.0} ms ({} rows)",
            runs[2],
            r.rows.len()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
