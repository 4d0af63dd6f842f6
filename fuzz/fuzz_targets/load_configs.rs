//! Fuzzes the loaders of files a user (or a download) hands agentry: an agent config (TOML,
//! YAML) and a workflow (YAML, TOML, JSON), then the workflow's validation. Any text gives a
//! value or an error, never a panic. The first byte picks the format.
#![no_main]

use agentry_core::agent::{AgentConfig, parse_config};
use agentry_flow::{AgentRegistry, Mode, Workflow};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else { return };
    let Ok(text) = std::str::from_utf8(rest) else { return };
    let ext = ["toml", "yaml", "json"][usize::from(pick) % 3];
    let path = std::path::PathBuf::from(format!("agent.{ext}"));
    let _ = parse_config::<AgentConfig>(&path, text);
    if let Ok(wf) = Workflow::parse(text, ext) {
        let _ = agentry_flow::validate::validate(&wf, &AgentRegistry::new(Mode::Direct));
    }
});
