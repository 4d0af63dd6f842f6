//! The data agent on real data and real engines: penguins.csv (PyPI palmerpenguins), vega's
//! cars.json and the 3-million-row flights Parquet file (npm vega-datasets), a SQLite file, and
//! PostgreSQL when the machine runs one (127.0.0.1:5432, database `test`; the output says
//! SKIPPED otherwise). Charts are checked by decoding the PNG with Pillow.

use std::path::{Path, PathBuf};
use std::process::Command;

use agentry_core::a2a::{AgentHandle, Ask};
use agentry_data::chart::{ChartKind, ChartSpec, render};
use agentry_data::stats::{Kind, describe};
use agentry_data::{DataAccess, DataSettings, DataSpecialist, Source};
use serde_json::{Value, json};

fn data() -> Option<PathBuf> {
    let d = crate::demo_data_dir();
    if d.join("penguins/penguins.csv").exists() && d.join("vega/flights-3m.parquet").exists() {
        return Some(d);
    }
    let msg = "demo data missing: run scripts/fetch-data.sh";
    agentry_testkit::missing::<()>(agentry_testkit::Peer::Models, &msg);
    None
}

/// A scratch folder for one test: removed when it passes, kept when it fails.
fn tempdir(name: &str) -> agentry_testkit::Scratch {
    agentry_testkit::Scratch::new(&format!("data-{name}"))
}

fn loc(p: &Path) -> String {
    p.display().to_string()
}

#[tokio::test]
async fn penguins_csv_grouped_described_and_charted() {
    let Some(d) = data() else { return };
    let src = Source::parse(&loc(&d.join("penguins/penguins.csv"))).unwrap();
    let t = src
        .query(
            "SELECT species, count(*) AS n, avg(body_mass_g) AS mass FROM penguins \
             GROUP BY species ORDER BY species",
            100,
        )
        .await
        .unwrap();
    assert_eq!(t.columns, ["species", "n", "mass"]);
    let counts: Vec<(String, i64)> = t
        .rows
        .iter()
        .map(|r| (r[0].as_str().unwrap().to_owned(), r[1].as_i64().unwrap()))
        .collect();
    assert_eq!(
        counts,
        [
            ("Adelie".into(), 152),
            ("Chinstrap".into(), 68),
            ("Gentoo".into(), 124)
        ]
    );
    // "NA" cells are nulls, so the mean is over the 342 weighed birds (pandas: 3700.66).
    assert!((t.rows[0][2].as_f64().unwrap() - 3700.662).abs() < 0.01);

    let all = src.query("SELECT * FROM penguins", 10_000).await.unwrap();
    assert_eq!(all.rows.len(), 344);
    let stats = describe(&all);
    let mass = stats.iter().find(|s| s.column == "body_mass_g").unwrap();
    assert_eq!((mass.count, mass.nulls), (342, 2));
    match mass.kind {
        // pandas' describe() of the same column: mean 4201.754386, std 801.954536, 25% 3550.
        Kind::Numeric {
            mean,
            std,
            p25,
            median,
            ..
        } => {
            assert!((mean - 4201.754386).abs() < 1e-4 && (std - 801.954536).abs() < 1e-4);
            assert_eq!((p25, median), (3550.0, 4050.0));
        }
        ref k => panic!("{k:?}"),
    }

    let dir = tempdir("penguins");
    let access = DataAccess::default()
        .with_folder(d.join("penguins"))
        .unwrap();
    let agent = DataSpecialist::new(DataSettings::new(dir.to_path_buf(), access));
    let request = json!({
        "source": "penguins.csv",
        "sql": "SELECT species, count(*) AS n FROM penguins GROUP BY species ORDER BY n DESC",
        "analyze": true,
        "chart": {"kind": "bar", "x": "species", "y": "n", "title": "Penguins per species"}
    })
    .to_string();
    let reply = agent.ask(Ask::text(request.clone())).await.unwrap();
    assert!(reply.text.contains("| Adelie | 152 |"), "{}", reply.text);
    assert_eq!(reply.data[0]["rows"][0], json!(["Adelie", 152]));
    let parts = &reply.artifacts[0].parts;
    assert_eq!(parts.len(), 2, "a PNG and an SVG file part");
    let png = dir.join("penguins-per-species.png");
    let svg = std::fs::read_to_string(dir.join("penguins-per-species.svg")).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("Adelie") && svg.contains("Penguins per species")
    );
    check_png(&png, 800, 500);
    assert_eq!(reply.data[0]["chart"]["png"], "penguins-per-species.png");

    // Another request's chart of the same title gets its own files (issue 18, item 14).
    let before = std::fs::read(&png).unwrap();
    let again = agent.ask(Ask::text(request)).await.unwrap();
    assert_eq!(
        again.data[0]["chart"],
        json!({"png": "penguins-per-species-2.png", "svg": "penguins-per-species-2.svg"})
    );
    assert_eq!(
        std::fs::read(&png).unwrap(),
        before,
        "the first chart is untouched"
    );
}

/// Pillow (in the deck checkers' venv) decodes the PNG; without it only the header is checked.
fn check_png(path: &Path, w: u32, h: u32) {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(u32::from_be_bytes(bytes[16..20].try_into().unwrap()), w);
    assert_eq!(u32::from_be_bytes(bytes[20..24].try_into().unwrap()), h);
    let py = std::env::var_os("AGENTRY_PPTX_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv-pptx/bin/python")
        });
    let out = Command::new(&py)
        .args([
            "-c",
            "import sys; from PIL import Image; im = Image.open(sys.argv[1]); im.load(); \
             px = im.convert('RGB').getcolors(1 << 20); print(im.size[0], im.size[1], len(px))",
        ])
        .arg(path)
        .output();
    match out {
        Ok(o) if o.status.success() => {
            let s = String::from_utf8_lossy(&o.stdout);
            let v: Vec<usize> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();
            assert_eq!((v[0], v[1]), (w as usize, h as usize));
            // Text (anti-aliased), axes and bars: many colours, not a blank canvas.
            assert!(v[2] > 20, "{s}");
        }
        _ => {
            agentry_testkit::missing::<()>(
                agentry_testkit::Peer::Interop,
                "Pillow missing, PNG not decoded: run scripts/test.sh",
            );
        }
    }
}

#[tokio::test]
async fn parquet_and_json_files_and_every_chart_kind() {
    let Some(d) = data() else { return };
    let flights = Source::parse(&loc(&d.join("vega/flights-3m.parquet"))).unwrap();
    let t = flights
        .query("SELECT count(*) AS n FROM flights_3m", 10)
        .await
        .unwrap();
    assert_eq!(t.rows[0][0], json!(3_000_000));
    let busiest = flights
        .query(
            "SELECT origin, count(*) AS n, avg(delay) AS delay FROM flights_3m \
             GROUP BY origin ORDER BY n DESC LIMIT 5",
            10,
        )
        .await
        .unwrap();
    assert_eq!(busiest.rows.len(), 5);
    let total: i64 = busiest.rows.iter().map(|r| r[1].as_i64().unwrap()).sum();
    assert!(total > 100_000 && total < 3_000_000);

    // A JSON array file (cars.json), read through NDJSON.
    let cars = Source::parse(&loc(&d.join("vega/cars.json"))).unwrap();
    let t = cars
        .query(
            "SELECT \"Origin\", count(*) AS n FROM cars GROUP BY \"Origin\" ORDER BY n DESC",
            10,
        )
        .await
        .unwrap();
    assert_eq!(t.rows.len(), 3);
    assert_eq!(
        t.rows.iter().map(|r| r[1].as_i64().unwrap()).sum::<i64>(),
        406
    );
    assert_eq!(t.rows[0][0], "USA");

    let all = cars.query("SELECT * FROM cars", 10_000).await.unwrap();
    let dir = tempdir("charts");
    for (kind, x, y) in [
        (ChartKind::Scatter, "Horsepower", Some("Miles_per_Gallon")),
        (ChartKind::Line, "Year", Some("Weight_in_lbs")),
        (ChartKind::Histogram, "Acceleration", None),
    ] {
        let spec = ChartSpec {
            kind,
            x: x.into(),
            y: y.map(str::to_owned),
            title: Some(format!("{kind:?}")),
            bins: None,
        };
        let c = render(&all, &spec).unwrap();
        let p = dir.join(format!("{kind:?}.png"));
        std::fs::write(&p, &c.png).unwrap();
        check_png(&p, 800, 500);
        assert!(c.svg.contains(x), "{kind:?}: axis label missing");
    }
    // Bad requests are clear errors.
    let spec = ChartSpec {
        kind: ChartKind::Bar,
        x: "Origin".into(),
        y: None,
        title: None,
        bins: None,
    };
    assert!(
        render(&all, &spec)
            .unwrap_err()
            .to_string()
            .contains("needs `y`")
    );
    let spec = ChartSpec {
        kind: ChartKind::Histogram,
        x: "Nope".into(),
        y: None,
        title: None,
        bins: None,
    };
    assert!(
        render(&all, &spec)
            .unwrap_err()
            .to_string()
            .contains("no column `Nope`")
    );
    // Files are read-only: DDL, DML and COPY are refused.
    for sql in [
        "CREATE TABLE x AS SELECT 1",
        "INSERT INTO cars VALUES (1)",
        "COPY cars TO '/tmp/agentry-copy.csv'",
    ] {
        let e = cars.query(sql, 10).await.unwrap_err();
        assert!(e.to_string().contains("query failed"), "{sql}: {e}");
    }
    assert!(!Path::new("/tmp/agentry-copy.csv").exists());
    let e = cars.query("SELEC nonsense", 10).await.unwrap_err();
    assert!(e.to_string().contains("query failed"), "{e}");
}

#[tokio::test]
async fn sqlite_files_are_queried_read_only() {
    let dir = tempdir("sqlite");
    let db = dir.join("shop.db");
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute_batch(
        "CREATE TABLE sales(region TEXT, amount REAL); \
         INSERT INTO sales VALUES ('north', 10.5), ('south', 4), ('north', 1.5), ('east', NULL);",
    )
    .unwrap();
    drop(c);
    let src = Source::parse(&loc(&db)).unwrap();
    let t = src
        .query(
            "SELECT region, sum(amount) AS total FROM sales GROUP BY region ORDER BY region",
            10,
        )
        .await
        .unwrap();
    assert_eq!(
        t.rows,
        [
            vec![json!("east"), Value::Null],
            vec![json!("north"), json!(12.0)],
            vec![json!("south"), json!(4.0)]
        ]
    );
    let e = src.query("DELETE FROM sales", 10).await.unwrap_err();
    assert!(e.to_string().contains("read-only"), "{e}");
    let t = src.query("SELECT * FROM sales", 2).await.unwrap();
    assert!(t.truncated && t.rows.len() == 2);
    assert!(
        Source::parse("/nonexistent/x.csv")
            .unwrap_err()
            .to_string()
            .contains("no such file")
    );
    // The refused DELETE left every row (the file was opened read-only, not just checked).
    let n = src
        .query("SELECT count(*) AS n FROM sales", 10)
        .await
        .unwrap();
    assert_eq!(n.rows, [vec![json!(4)]]);
}

#[tokio::test]
async fn postgresql_when_the_machine_runs_it() {
    let url = std::env::var("AGENTRY_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let (client, conn) = match tokio_postgres::connect(&url, tokio_postgres::NoTls).await {
        Ok(c) => c,
        Err(e) => {
            agentry_testkit::missing::<()>(
                agentry_testkit::Peer::Postgres,
                format!("no PostgreSQL at {url} ({e})"),
            );
            return;
        }
    };
    tokio::spawn(conn);
    let table = format!("agentry_data_{}", std::process::id());
    client
        .batch_execute(&format!(
            "DROP TABLE IF EXISTS {table}; CREATE TABLE {table}(city text, temp real, rainy boolean); \
             INSERT INTO {table} VALUES ('Oslo', 3.5, true), ('Rome', 18, false), ('Oslo', 5.5, false);"
        ))
        .await
        .unwrap();
    let src = Source::parse(&url).unwrap();
    let t = src
        .query(
            &format!("SELECT city, avg(temp) AS t, bool_or(rainy) AS r FROM {table} GROUP BY city ORDER BY city"),
            10,
        )
        .await
        .unwrap();
    assert_eq!(t.columns, ["city", "t", "r"]);
    assert_eq!(
        t.rows,
        [
            vec![json!("Oslo"), json!(4.5), json!(true)],
            vec![json!("Rome"), json!(18), json!(false)]
        ]
    );
    let e = src
        .query(&format!("DELETE FROM {table}"), 10)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("read-only"), "{e}");
    let n: i64 = client
        .query_one(&format!("SELECT count(*) FROM {table}"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 3, "the refused write changed nothing");
    client
        .batch_execute(&format!("DROP TABLE {table}"))
        .await
        .unwrap();
}
