//! The `data` agent type in the core factory: its tools, its closed default, its options.

use std::sync::Arc;

use agentry_core::agent::{AgentConfig, AgentFactory, parse_config};
use agentry_core::llm::{Capabilities, ScriptedProvider, Transcript};

fn config(options: &str) -> AgentConfig {
    parse_config(
        std::path::Path::new("data.toml"),
        &format!(
            "name = \"numbers\"\nagent_type = \"data\"\noptions = {{ {options} }}\n\
             [model]\nprovider = \"scripted\"\ntranscript = \"x\"\n"
        ),
    )
    .unwrap()
}

fn llm() -> Arc<ScriptedProvider> {
    Arc::new(ScriptedProvider::new(Transcript::of(
        Capabilities::default(),
        vec![],
    )))
}

#[test]
fn the_data_type_offers_its_tools_and_checks_its_options() {
    let mut f = AgentFactory::new();
    agentry_data::kind::register(&mut f, Vec::new());
    let agent = f.create_agent_with_model(config(""), llm()).unwrap();
    assert_eq!(agent.tools().names(), ["analyze", "query_db", "visualize"]);
    let card = agent.card("http://127.0.0.1:1/");
    assert_eq!(card.skills[0].id, "analyze_data");

    // A folder that does not exist, or options of the wrong shape, are refused up front.
    for bad in [
        "folders = [\"/no/such/folder/anywhere\"]",
        "folders = \"not a list\"",
        "sources = [\"not a table\"]",
    ] {
        let e = f
            .create_agent_with_model(config(bad), llm())
            .err()
            .unwrap_or_else(|| panic!("{bad} was accepted"))
            .to_string();
        assert!(e.contains("options."), "{bad}: {e}");
    }
}
