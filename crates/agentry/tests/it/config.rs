//! `agentry.toml` as a file: relative paths, built-in agents, errors that name the problem.

use agentry::config::{BuiltinAgent, Config, StoreKind};

fn write(dir: &std::path::Path, name: &str, text: &str) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn temp(name: &str) -> agentry_testkit::Scratch {
    agentry_testkit::Scratch::new(&format!("config-{name}"))
}

#[test]
fn relative_paths_resolve_against_the_files_folder() {
    let dir = temp("relative");
    let file = write(
        &dir,
        "agentry.toml",
        r#"
        [server]
        store = "memory"
        state_dir = "state"
        bearer_tokens = ["t1"]

        [[agents]]
        path = "/calc"
        config = "calc.toml"

        [[agents]]
        path = "decks"
        builtin = { kind = "ppt", output = "out" }

        [orchestrator]
        workflows = ["flow.yaml"]

        [team]
        db = "kb.db"
        "#,
    );
    let c = Config::load(&file).unwrap();
    assert_eq!(c.server.store, StoreKind::Memory);
    assert_eq!(c.server.state_dir(), dir.join("state"));
    assert_eq!(c.server.bearer_tokens, ["t1"]);
    assert_eq!(
        c.agents[0].config.as_deref(),
        Some(dir.join("calc.toml").as_path())
    );
    assert_eq!(c.agents[1].normalized_path(), "/decks");
    match &c.agents[1].builtin {
        Some(BuiltinAgent::Ppt { output, pictures }) => {
            assert_eq!(output, &dir.join("out"));
            assert!(pictures.is_empty(), "no picture folder unless configured");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(c.orchestrator.unwrap().workflows, [dir.join("flow.yaml")]);
    assert_eq!(c.team.unwrap().db, Some(dir.join("kb.db")));
}

#[test]
fn the_old_data_dir_key_still_means_the_state_folder() {
    let c: Config = toml::from_str("[server]\ndata_dir = \"/var/lib/agentry\"").unwrap();
    assert_eq!(
        c.server.state_dir(),
        std::path::Path::new("/var/lib/agentry")
    );
}

/// The server settings this session added: the header-less card, the body limit and the
/// store's durability (fsynced by default), and a clear error for a value that is none of them.
#[test]
fn card_body_limit_and_durability_settings() {
    use agentry::config::{CardChoice, DurabilityChoice};
    let c: Config = toml::from_str("[server]\nport = 1").unwrap();
    assert_eq!(c.server.card, CardChoice::Both);
    assert_eq!(c.server.durability, DurabilityChoice::Power);
    assert_eq!(c.server.max_body_bytes, None);
    let c: Config =
        toml::from_str("[server]\ncard = \"1.0\"\ndurability = \"process\"\nmax_body_bytes = 1024")
            .unwrap();
    assert_eq!(c.server.card, CardChoice::V1_0);
    assert_eq!(c.server.durability, DurabilityChoice::Process);
    assert_eq!(c.server.max_body_bytes, Some(1024));
    let e = toml::from_str::<Config>("[server]\ndurability = \"disk\"").unwrap_err();
    assert!(e.to_string().contains("power"), "{e}");
    // PostgreSQL's read connections: 4 unless set.
    assert_eq!(c.server.store_readers, 4);
    let c: Config = toml::from_str("[server]\nstore_readers = 12").unwrap();
    assert_eq!(c.server.store_readers, 12);
}

#[test]
fn mistakes_are_named() {
    let dir = temp("mistakes");
    let typo = write(&dir, "typo.toml", "[server]\nprot = 9000\n");
    let e = Config::load(&typo).unwrap_err().to_string();
    assert!(e.contains("typo.toml") && e.contains("prot"), "{e}");

    let missing = dir.join("nope.toml");
    let e = Config::load(&missing).unwrap_err();
    assert!(matches!(e, agentry::Error::Read { .. }), "{e:?}");
    assert!(
        std::error::Error::source(&e).is_some(),
        "the io error is kept as the source"
    );

    let unknown = write(
        &dir,
        "kind.toml",
        "[[agents]]\npath = \"/\"\nbuiltin = { kind = \"nope\" }\n",
    );
    let e = Config::load(&unknown).unwrap_err().to_string();
    assert!(e.contains("nope"), "{e}");
}

/// `store`: sqlite, memory, or where a PostgreSQL URL is (never shown: it may hold a
/// password); anything else is named with what is accepted.
#[tokio::test]
async fn stores_are_sqlite_memory_or_a_postgresql_url() {
    use agentry::config::StoreKind;
    let dir = temp("stores");
    for (value, expected) in [
        ("sqlite", StoreKind::Sqlite),
        ("memory", StoreKind::Memory),
        (
            "postgres://agentry:sekrit@db/agentry",
            StoreKind::Postgres("postgres://agentry:sekrit@db/agentry".into()),
        ),
        (
            "env:DATABASE_URL",
            StoreKind::Postgres("env:DATABASE_URL".into()),
        ),
    ] {
        let file = write(
            &dir,
            "store.toml",
            &format!("[server]\nstore = \"{value}\"\n"),
        );
        let config = Config::load(&file).unwrap();
        assert!(config.server.store == expected, "{value}");
        assert!(!format!("{config:?}").contains("sekrit"), "{config:?}");
    }
    // Shared task events without a shared store make no sense: refused, saying why.
    let bus = write(
        &dir,
        "bus.toml",
        "[server]\nstore = \"memory\"\nbus = \"nats://127.0.0.1:4222\"\n\n[[agents]]\npath = \"/\"\nbuiltin = { kind = \"echo\" }\n",
    );
    let e = match agentry::Service::build(Config::load(&bus).unwrap()).await {
        Err(e) => e.to_string(),
        Ok(_) => panic!("a bus over a memory store was accepted"),
    };
    assert!(e.contains("shared store"), "{e}");
    // A queue of turns lives on the bus's NATS: refused without one.
    let queue = write(
        &dir,
        "queue.toml",
        "[server]\nqueue = true\n\n[[agents]]\npath = \"/\"\nbuiltin = { kind = \"echo\" }\n",
    );
    let e = match agentry::Service::build(Config::load(&queue).unwrap()).await {
        Err(e) => e.to_string(),
        Ok(_) => panic!("a queue without a bus was accepted"),
    };
    assert!(e.contains("bus = \"nats://"), "{e}");
    let wrong = write(&dir, "wrong.toml", "[server]\nstore = \"mysql://db\"\n");
    let e = Config::load(&wrong).unwrap_err().to_string();
    assert!(e.contains("postgres://") && e.contains("memory"), "{e}");
}

/// A `[[remotes]]` entry's credentials: one kind at most, `delegate` only with a token
/// service to ask, `audience` only for delegated tokens; each mistake named.
#[tokio::test]
async fn remote_credentials_are_checked_when_loaded() {
    let cases = [
        (
            "delegate = true",
            "",
            "delegate = true needs a [delegation] section",
        ),
        (
            "delegate = true\nbearer_token = \"t\"",
            "[delegation]\ntoken_url = \"http://127.0.0.1:1/token\"\nclient_id = \"o\"\nclient_secret = \"s\"\n",
            "use one of delegate, bearer_token and api_key",
        ),
        (
            "audience = \"mail\"",
            "",
            "audience is for delegated tokens",
        ),
        (
            "api_key_header = \"X-Key\"",
            "",
            "api_key_header without api_key",
        ),
        (
            "bearer_token = \"env:AGENTRY_TEST_UNSET_TOKEN\"",
            "",
            "AGENTRY_TEST_UNSET_TOKEN",
        ),
    ];
    for (remote, extra, expected) in cases {
        let text = format!(
            "[server]\nstore = \"memory\"\n{extra}[[remotes]]\nname = \"mail\"\nurl = \"http://127.0.0.1:1/mail\"\n{remote}\n"
        );
        let config: Config = toml::from_str(&text).unwrap();
        let e = match agentry::setup::Setup::from_config(config).await {
            Ok(_) => panic!("accepted: {text}"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains(expected) && e.contains("mail"), "{text}\n{e}");
    }
    for ok in [
        "delegate = true\naudience = \"mail\"",
        "api_key = \"k\"",
        "",
    ] {
        let text = format!(
            "[delegation]\ntoken_url = \"http://127.0.0.1:1/token\"\nclient_id = \"o\"\nclient_secret = \"s\"\n[[remotes]]\nname = \"mail\"\nurl = \"http://127.0.0.1:1/mail\"\n{ok}\n"
        );
        let config: Config = toml::from_str(&text).unwrap();
        assert!(
            agentry::setup::Setup::from_config(config).await.is_ok(),
            "{text}"
        );
    }
}
