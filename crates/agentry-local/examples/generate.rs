//! Generates with the embedded chat model: a free answer, then a constrained tool call.
//!   cargo run -p agentry-local --example generate -- "What is the capital of France?"
use std::sync::Arc;

use agentry_local::chat::TemplateMessage;
use agentry_local::constrain::Grammar;
use agentry_local::{ChatModel, GenerateOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let q = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "What is the capital of France?".into());
    let t0 = std::time::Instant::now();
    let model = ChatModel::load_default()?;
    println!("loaded {} in {:?}", model.name(), t0.elapsed());
    let prompt = model.render(&[TemplateMessage {
        role: "user".into(),
        content: q.clone(),
    }])?;
    let ids = model.encode(&prompt)?;
    let g = model.generate(
        &ids,
        &GenerateOptions {
            max_tokens: 64,
            ..Default::default()
        },
        &mut |p| {
            print!("{p}");
            true
        },
    )?;
    println!(
        "\n-- {} prompt tokens in {:?}, {} tokens in {:?} ({:.1} tok/s)",
        g.prompt_tokens,
        g.prompt_time,
        g.completion_tokens,
        g.generate_time,
        g.completion_tokens as f64 / g.generate_time.as_secs_f64()
    );
    let tools = vec![
        (
            "calculate".to_string(),
            serde_json::json!({"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}),
        ),
        (
            "search_documents".to_string(),
            serde_json::json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}),
        ),
    ];
    let grammar = Arc::new(Grammar::tool_call(&tools, 120)?);
    let sys = "You can call tools: calculate (evaluates arithmetic), search_documents (finds text in documents). Reply with a JSON tool call.";
    let prompt = model.render(&[
        TemplateMessage {
            role: "system".into(),
            content: sys.into(),
        },
        TemplateMessage {
            role: "user".into(),
            content: q,
        },
    ])?;
    let ids = model.encode(&prompt)?;
    let opts = GenerateOptions {
        max_tokens: 200,
        grammar: Some(grammar),
        ..Default::default()
    };
    let g = model.generate(&ids, &opts, &mut |_| true)?;
    println!(
        "{}\n-- {} tokens ({} forced) in {:?}, masks {:?}",
        g.text, g.completion_tokens, g.forced_tokens, g.generate_time, g.mask_time
    );
    Ok(())
}
