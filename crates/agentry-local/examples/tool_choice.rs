//! Tool-choice accuracy of the embedded model in three modes over a suite (by default
//! `tests/data/tool_choice.json`): prompted (free text, parsed), constrained (grammar over all
//! tools), routed (grammar over the tools the embedder ranks best); `router` is the embedding
//! ranking alone, `reader` that ranking with the chat model reading the close best tools.
//!   cargo run --release -p agentry-local --example tool_choice [-- MODES [SUITE.json...]]
//! e.g. `-- router,routed tests/data/tool_choice_mcp.json tests/data/tool_choice_retail.json`.
//! Mode `openai` asks any OpenAI-compatible server instead (native tool calls): base URL in
//! `TOOL_CHOICE_BASE_URL` (default `http://127.0.0.1:8090/v1`, `agentry model serve`), model
//! in `TOOL_CHOICE_MODEL`, key in `OPENAI_API_KEY`. The router's embedder is the fetched
//! all-mpnet-base-v2 unless `AGENTRY_ROUTER_EMBED_MODEL` names another folder.
//! Mode `dump` writes the router's inputs for each suite (both embedders' vectors of every
//! request and tool text, the keyword scores, the router's own first choice) to
//! `$TOOL_CHOICE_DUMP` (default `router-lab/`), for `bench/local/router_lab.py`, which scores
//! variants of the router in seconds instead of a rebuild each.
use std::sync::Arc;

use agentry_local::eval::{ToolSuite, run_tool_choice};
use agentry_local::provider::{
    LocalConfig, ToolChoice, shared_chat_model, shared_embedder, shared_router_embedder,
};
use agentry_local::route::{CENTER_MIN_TOOLS, KEYWORD_WEIGHT, keyword_scores, tool_text};
use agentry_local::{LocalProvider, ToolRouter};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let modes = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "prompted,constrained,routed".into());
    let files: Vec<String> = std::env::args().skip(2).collect();
    let model = shared_chat_model(None)?;
    let embedder = shared_router_embedder(None)?;
    if files.is_empty() {
        let suite = serde_json::from_str(include_str!("../tests/data/tool_choice.json"))?;
        if modes == "dump" {
            return dump_suite(&suite, "tool_choice", &embedder).await;
        }
        return run_suite(&suite, &modes, &model, &embedder).await;
    }
    for f in files {
        println!("\n{f}");
        let suite = serde_json::from_str(&std::fs::read_to_string(&f)?)?;
        if modes == "dump" {
            dump_suite(&suite, &f, &embedder).await?;
            continue;
        }
        run_suite(&suite, &modes, &model, &embedder).await?;
    }
    Ok(())
}

/// Writes what the router sees for each request of `suite` (see the module's documentation).
async fn dump_suite(
    suite: &ToolSuite,
    file: &str,
    router_embedder: &Arc<agentry_local::LocalEmbedder>,
) -> Result<(), Box<dyn std::error::Error>> {
    use agentry_core::embed::DynEmbedder;
    let router = ToolRouter::new(router_embedder.clone() as Arc<_>);
    let mut texts = std::collections::BTreeSet::new();
    let mut cases = Vec::new();
    for c in &suite.cases {
        let tools = suite.tools_for(c);
        let ranked = router.rank(&c.request, tools).await?;
        let tool_texts: Vec<String> = tools.iter().map(tool_text).collect();
        let examples: Vec<&Vec<String>> = tools.iter().map(|t| &t.examples).collect();
        texts.extend(
            tool_texts
                .iter()
                .chain(examples.iter().copied().flatten())
                .cloned(),
        );
        texts.insert(c.request.clone());
        cases.push(serde_json::json!({
            "request": c.request,
            "tool": c.tool,
            "names": tools.iter().map(|t| &t.name).collect::<Vec<_>>(),
            "texts": tool_texts,
            "examples": examples,
            "keywords": keyword_scores(&c.request, tools),
            // A request offered no tools has no first choice.
            "router_first": ranked.first().map(|&(i, _)| &tools[i].name),
        }));
    }
    let texts: Vec<String> = texts.into_iter().collect();
    let mut vectors = serde_json::Map::new();
    let documents = shared_embedder(None)?;
    let embedders: [(&str, Arc<dyn DynEmbedder>); 2] = [
        ("router", router_embedder.clone()),
        ("documents", documents),
    ];
    for (name, e) in embedders {
        let mut v = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(64) {
            v.extend(e.embed_dyn(chunk.to_vec()).await?);
        }
        vectors.insert(name.into(), serde_json::to_value(v)?);
    }
    let dir = std::path::PathBuf::from(
        std::env::var("TOOL_CHOICE_DUMP").unwrap_or_else(|_| "router-lab".into()),
    );
    std::fs::create_dir_all(&dir)?;
    let stem = std::path::Path::new(file)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("suite");
    let out = dir.join(format!("{stem}.json"));
    let body = serde_json::json!({
        "keyword_weight": KEYWORD_WEIGHT,
        "center_min_tools": CENTER_MIN_TOOLS,
        "texts": texts,
        "vectors": vectors,
        "cases": cases,
    });
    std::fs::write(&out, serde_json::to_vec(&body)?)?;
    println!(
        "router inputs of {} requests in {}",
        suite.cases.len(),
        out.display()
    );
    Ok(())
}

async fn run_suite(
    suite: &ToolSuite,
    modes: &str,
    model: &Arc<agentry_local::ChatModel>,
    embedder: &Arc<agentry_local::LocalEmbedder>,
) -> Result<(), Box<dyn std::error::Error>> {
    let per_case = suite.cases.iter().filter(|c| c.tools.is_some()).count();
    if per_case > 0 {
        let offered: usize = suite.cases.iter().map(|c| suite.tools_for(c).len()).sum();
        println!(
            "suite: {} requests, {per_case} with their own tools ({:.1} offered on average); model {}",
            suite.cases.len(),
            offered as f64 / suite.cases.len().max(1) as f64,
            model.name()
        );
    } else {
        println!(
            "suite: {} requests over {} tools; model {}",
            suite.cases.len(),
            suite.tools.len(),
            model.name()
        );
    }
    println!("| mode | right tool | valid calls | right tool, arguments from the request | time |");
    println!("|---|---|---|---|---|");
    for mode in modes.split(',') {
        if mode == "router" || mode == "reader" {
            // The ranking alone (`reader`: with the chat model reading the close best tools):
            // is the right tool first, or in the top two?
            let router = ToolRouter::new(embedder.clone() as Arc<_>);
            let router = if mode == "reader" {
                router.with_reader(model.clone())
            } else {
                router
            };
            let (mut top1, mut top2) = (0, 0);
            let t0 = std::time::Instant::now();
            for c in &suite.cases {
                let tools = suite.tools_for(c);
                let r = router.rank(&c.request, tools).await?;
                let names: Vec<&str> = r.iter().map(|&(i, _)| tools[i].name.as_str()).collect();
                top1 += (names[0] == c.tool) as usize;
                top2 += names.iter().take(2).any(|n| *n == c.tool) as usize;
                if names[0] != c.tool && std::env::var_os("VERBOSE").is_some() {
                    println!(
                        "    router miss: {:?} -> {:?} {:.3}/{:.3} (want {})",
                        c.request,
                        &names[..names.len().min(2)],
                        r[0].1,
                        r.get(1).map_or(0.0, |x| x.1),
                        c.tool
                    );
                }
            }
            println!(
                "| {mode} only (top 1 / top 2) | {top1}/{n} / {top2}/{n} | - | - | {:.1} s |",
                t0.elapsed().as_secs_f64(),
                n = suite.cases.len()
            );
            continue;
        }
        if mode == "openai" {
            let cfg = agentry_core::llm::OpenAiConfig {
                base_url: std::env::var("TOOL_CHOICE_BASE_URL")
                    .unwrap_or_else(|_| "http://127.0.0.1:8090/v1".into()),
                model: std::env::var("TOOL_CHOICE_MODEL").unwrap_or_else(|_| "default".into()),
                ..Default::default()
            };
            let p = agentry_core::llm::OpenAiProvider::new(cfg)?;
            let r = run_tool_choice(&p, suite).await?;
            print_report(mode, &r);
            continue;
        }
        let choice = match mode {
            "prompted" => ToolChoice::Prompted,
            "constrained" => ToolChoice::Constrained,
            _ => ToolChoice::Routed,
        };
        let cfg = LocalConfig {
            tool_choice: choice,
            ..Default::default()
        };
        let router = (choice == ToolChoice::Routed).then(|| {
            let r = ToolRouter::new(embedder.clone() as Arc<_>);
            if cfg.route_read {
                r.with_reader(model.clone())
            } else {
                r
            }
        });
        let p = LocalProvider::from_parts(model.clone(), router, cfg);
        let r = run_tool_choice(&p, suite).await?;
        print_report(mode, &r);
    }
    Ok(())
}

fn print_report(mode: &str, r: &agentry_local::eval::ToolChoiceReport) {
    println!(
        "| {mode} | {}/{} ({:.0}%) | {}/{} | {}/{} | {:.1} s |",
        r.right(),
        r.cases.len(),
        100.0 * r.accuracy(),
        r.valid(),
        r.cases.len(),
        r.grounded(),
        r.right(),
        r.elapsed.as_secs_f64()
    );
    if std::env::var_os("VERBOSE").is_some() {
        for c in &r.cases {
            let hit = c.called.as_deref() == Some(c.expected.as_str());
            let args = c
                .arguments
                .as_ref()
                .map(|a| a.to_string())
                .unwrap_or_default();
            println!(
                "    {} {:?} -> {:?} {args} ({} tokens; want {})",
                if hit { "ok  " } else { "MISS" },
                c.request,
                c.called,
                c.tokens,
                c.expected
            );
        }
    }
}
