//! Throughput of the embedded models, for `bench/local.sh` (threads: CANDLE_NUM_THREADS and
//! RAYON_NUM_THREADS). Modes: `chat` (default), `prompt` (prompt processing alone), `embed [FILE]`.
//! Prints one JSON line: prompt and generation tokens/s, grammar mask cost, embedding
//! sentences/s, peak resident memory.
use std::sync::Arc;
use std::time::Instant;

use agentry_local::chat::TemplateMessage;
use agentry_local::constrain::Grammar;
use agentry_local::{ChatModel, GenerateOptions, LocalEmbedder};

fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let what = std::env::args().nth(1).unwrap_or_else(|| "chat".into());
    if what == "embed" {
        let e = LocalEmbedder::load_default()?;
        // `embed FILE`: 256 pieces of about 800 bytes of the file (ingestion-sized chunks,
        // ~200 tokens), cut at line ends; otherwise 256 short sentences.
        let texts: Vec<String> = match std::env::args().nth(2) {
            Some(path) => {
                let text = std::fs::read_to_string(path)?;
                let mut pieces = vec![String::new()];
                for line in text.lines().filter(|l| !l.trim().is_empty()) {
                    let last = pieces.last_mut().expect("never empty");
                    if last.len() > 800 {
                        pieces.push(line.to_string());
                    } else {
                        last.push_str(line);
                        last.push('\n');
                    }
                }
                pieces.into_iter().take(256).collect()
            }
            None => (0..256)
                .map(|i| format!("Sentence number {i} is about Hamlet, the prince of Denmark, and his father's ghost."))
                .collect(),
        };
        e.embed_blocking(&texts[..32])?; // warm up
        let t0 = Instant::now();
        e.embed_blocking(&texts)?;
        let s = t0.elapsed().as_secs_f64();
        println!(
            "{{\"embed_sentences_per_s\": {:.1}, \"peak_rss_mb\": {:.0}}}",
            texts.len() as f64 / s,
            peak_rss_mb()
        );
        return Ok(());
    }
    let m = ChatModel::load_default()?;
    let long = "Hamlet, Prince of Denmark, returns home to find his father dead and his mother married to his uncle Claudius. ".repeat(8);
    let msgs = [TemplateMessage {
        role: "user".into(),
        content: format!("{long}\nWrite a long essay about this story."),
    }];
    let ids = m.encode(&m.render(&msgs)?)?;
    // Warm-up on a different prompt (so the prompt cache does not serve the measured one).
    m.generate(
        &m.encode("Hello")?,
        &GenerateOptions {
            max_tokens: 4,
            ..Default::default()
        },
        &mut |_| true,
    )?;
    if what == "prompt" {
        // Prompt processing alone: the same prompt ten times, the cache cleared each time.
        let mut rates: Vec<f64> = (0..10)
            .map(|_| {
                m.clear_cache();
                let one = GenerateOptions {
                    max_tokens: 1,
                    ..Default::default()
                };
                m.generate(&ids, &one, &mut |_| true)
                    .map(|g| g.prompt_tokens as f64 / g.prompt_time.as_secs_f64())
            })
            .collect::<Result<_, _>>()?;
        rates.sort_by(f64::total_cmp);
        println!(
            "{{\"prompt_tokens\": {}, \"prompt_tok_per_s_median\": {:.1}, \"best\": {:.1}}}",
            ids.len(),
            rates[5],
            rates[9]
        );
        return Ok(());
    }
    let g = m.generate(
        &ids,
        &GenerateOptions {
            max_tokens: 128,
            ..Default::default()
        },
        &mut |_| true,
    )?;
    // Constrained: the mask's share of generation time.
    let tools: Vec<(String, serde_json::Value)> = ["rag_search", "summarize", "calculate", "visualize"]
        .iter()
        .map(|n| (n.to_string(), serde_json::json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})))
        .collect();
    let grammar = Arc::new(Grammar::tool_call(&tools, 200)?);
    let ids2 = m.encode(&m.render(&[TemplateMessage {
        role: "user".into(),
        content: "Summarize: the prince mourns his father.".into(),
    }])?)?;
    let c = m.generate(
        &ids2,
        &GenerateOptions {
            max_tokens: 96,
            grammar: Some(grammar),
            ..Default::default()
        },
        &mut |_| true,
    )?;
    println!(
        "{{\"prompt_tokens\": {}, \"prompt_tok_per_s\": {:.1}, \"gen_tokens\": {}, \"gen_tok_per_s\": {:.1}, \"mask_share\": {:.4}, \"mask_ms_per_token\": {:.3}, \"constrained_tokens\": {}, \"peak_rss_mb\": {:.0}}}",
        g.prompt_tokens,
        g.prompt_tokens as f64 / g.prompt_time.as_secs_f64(),
        g.completion_tokens,
        g.completion_tokens as f64 / g.generate_time.as_secs_f64(),
        c.mask_time.as_secs_f64() / c.generate_time.as_secs_f64(),
        1e3 * c.mask_time.as_secs_f64() / c.completion_tokens.max(1) as f64,
        c.completion_tokens,
        peak_rss_mb()
    );
    Ok(())
}
