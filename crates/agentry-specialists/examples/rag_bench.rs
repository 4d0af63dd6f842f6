//! Retrieval benchmark: ingestion throughput on real plays with the embedded embedder, then
//! hybrid query latency (FTS5 BM25 + sqlite-vec, fused) at larger sizes, built from the real
//! chunks and vectors (each replicated with a perturbed vector and a distinct document).
//! Writes the corpus and queries for `bench/rag/python_stack.py` to run the same searches, and
//! the embedded texts for `bench/rag/python_ingest.py` to embed with sentence-transformers.
//!
//!   cargo run --release -p agentry-specialists --example rag_bench -- PLAY... \
//!     --sizes 10000,100000 --queries 200 --export DIR

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use agentry_core::embed::DynEmbedder;
use agentry_specialists::rag::KnowledgeBase;
use agentry_specialists::rag::chunk::Chunk;
use agentry_specialists::rag::store::{SearchMode, embed_text};

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// A small deterministic generator (xorshift) for the perturbations.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut plays = Vec::new();
    let mut sizes = vec![10_000usize, 100_000];
    let mut queries = 200usize;
    let mut export: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--sizes" => {
                sizes = args
                    .next()
                    .unwrap_or_default()
                    .split(',')
                    .filter_map(|s| s.parse().ok())
                    .collect()
            }
            "--queries" => queries = args.next().and_then(|s| s.parse().ok()).unwrap_or(200),
            "--export" => export = args.next().map(PathBuf::from),
            p => plays.push(PathBuf::from(p)),
        }
    }
    let embedder: Arc<dyn DynEmbedder> = agentry_local::provider::shared_embedder(None)?;
    let dir = std::env::temp_dir().join(format!("agentry-rag-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;

    // 1. Ingestion: parse, chunk, embed, store.
    let base = KnowledgeBase::open(&dir.join("base.db"), embedder.clone(), "minilm")?;
    let t = Instant::now();
    let mut chunks = 0;
    for p in &plays {
        chunks += base.ingest(p, "base", &|_| {}).await?.chunks;
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "ingest: {chunks} chunks from {} files in {secs:.1} s = {:.1} chunks/s (embedded MiniLM, {} threads)",
        plays.len(),
        chunks as f64 / secs,
        std::env::var("CANDLE_NUM_THREADS").unwrap_or_else(|_| "default".into())
    );
    let corpus = base.export("base")?;

    // 1b. The embedding alone, on exactly the texts ingestion embedded: what the Python peer
    // (sentence-transformers) is timed on.
    let texts: Vec<String> = corpus
        .iter()
        .map(|(h, _)| embed_text(&h.title, &h.section, &h.text))
        .collect();
    let t = Instant::now();
    let again = embedder.embed_dyn(texts.clone()).await?;
    let secs = t.elapsed().as_secs_f64();
    println!(
        "embed only: {} chunks in {secs:.1} s = {:.1} chunks/s",
        texts.len(),
        texts.len() as f64 / secs
    );
    if let Some(out) = &export {
        std::fs::create_dir_all(out)?;
        let mut f = std::io::BufWriter::new(std::fs::File::create(out.join("ingest.jsonl"))?);
        for (text, v) in texts.iter().zip(&again) {
            writeln!(f, "{}", serde_json::json!({"text": text, "vector": v}))?;
        }
    }

    // Queries: sentences of the corpus (a phrase a reader remembers), embedded once.
    let mut qtexts = Vec::new();
    for (i, (h, _)) in corpus
        .iter()
        .enumerate()
        .step_by((corpus.len() / queries).max(1))
    {
        let words: Vec<&str> = h.text.split_whitespace().skip(i % 7).take(8).collect();
        qtexts.push(words.join(" "));
        if qtexts.len() == queries {
            break;
        }
    }
    let t = Instant::now();
    let qvecs = embedder.embed_dyn(qtexts.clone()).await?;
    println!(
        "query embedding: {:.2} ms per query (reported apart from search)",
        t.elapsed().as_secs_f64() * 1000.0 / qtexts.len() as f64
    );

    for &size in &sizes {
        let kb = KnowledgeBase::open(
            &dir.join(format!("kb{size}.db")),
            embedder.clone(),
            "minilm",
        )?;
        let mut rng = Rng(0x9E3779B97F4A7C15 ^ size as u64);
        let mut all_texts = Vec::with_capacity(size);
        let mut all_vecs: Vec<Vec<f32>> = Vec::with_capacity(size);
        let t = Instant::now();
        let mut copy = 0;
        while all_texts.len() < size {
            let take = (size - all_texts.len()).min(corpus.len());
            let mut cs = Vec::with_capacity(take);
            let mut vs = Vec::with_capacity(take);
            for (h, v) in &corpus[..take] {
                let mut v: Vec<f32> = if copy == 0 {
                    v.clone()
                } else {
                    v.iter().map(|x| x + 0.04 * rng.next()).collect()
                };
                let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                v.iter_mut().for_each(|x| *x /= n);
                cs.push(Chunk {
                    section: h.section.clone(),
                    page: None,
                    start: h.start,
                    end: h.end,
                    text: h.text.clone(),
                });
                all_texts.push(h.text.clone());
                all_vecs.push(v.clone());
                vs.push(v);
            }
            kb.add_embedded("bench", &format!("copy{copy}/corpus"), "corpus", &cs, &vs)?;
            copy += 1;
        }
        let build = t.elapsed().as_secs_f64();
        let mut kb = kb;
        // Both search paths in the same run: sqlite-vec and FTS5, then the in-memory indexes.
        for mode in [SearchMode::Sqlite, SearchMode::Memory] {
            kb.set_search_mode(mode);
            // Warm up (the first query loads the in-memory indexes), then time each query.
            let t = Instant::now();
            kb.search_embedded("bench", &qtexts[0], &qvecs[0], 10)?;
            let first = t.elapsed().as_secs_f64();
            for (q, v) in qtexts.iter().zip(&qvecs).take(10) {
                kb.search_embedded("bench", q, v, 10)?;
            }
            let mut ms = Vec::new();
            let mut found = 0;
            for (q, v) in qtexts.iter().zip(&qvecs) {
                let t = Instant::now();
                let hits = kb.search_embedded("bench", q, v, 10)?;
                ms.push(t.elapsed().as_secs_f64() * 1000.0);
                if std::env::var_os("RAG_BENCH_DEBUG").is_some() {
                    eprintln!("query {q:?}");
                    for h in hits.iter().take(3) {
                        eprintln!(
                            "  {:?} v{:?} k{:?} {:?}",
                            h.chunk_id,
                            h.vector_rank,
                            h.keyword_rank,
                            &h.text.chars().take(100).collect::<String>()
                        );
                    }
                }
                found += usize::from(hits.iter().any(|h| {
                    h.text
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" ")
                        .contains(q.as_str())
                }));
            }
            ms.sort_by(f64::total_cmp);
            println!(
                "agentry hybrid search ({mode:?} indexes) @ {size} chunks: p50 {:.2} ms, p99 {:.2} ms, \
             mean {:.2} ms; source chunk in top 10: {found}/{}; ingest {build:.1} s, \
             first search {first:.2} s",
                percentile(&ms, 0.5),
                percentile(&ms, 0.99),
                ms.iter().sum::<f64>() / ms.len() as f64,
                ms.len()
            );
        }
        if let Some(out) = &export {
            std::fs::create_dir_all(out)?;
            let mut f = std::io::BufWriter::new(std::fs::File::create(
                out.join(format!("vectors{size}.f32")),
            )?);
            for v in &all_vecs {
                for x in v {
                    f.write_all(&x.to_le_bytes())?;
                }
            }
            let mut t = std::io::BufWriter::new(std::fs::File::create(
                out.join(format!("texts{size}.jsonl")),
            )?);
            for s in &all_texts {
                writeln!(t, "{}", serde_json::to_string(s)?)?;
            }
        }
    }
    if let Some(out) = &export {
        let mut q = std::io::BufWriter::new(std::fs::File::create(out.join("queries.jsonl"))?);
        for (text, v) in qtexts.iter().zip(&qvecs) {
            writeln!(q, "{}", serde_json::json!({"text": text, "vector": v}))?;
        }
    }
    if std::env::var_os("RAG_BENCH_KEEP").is_some() {
        eprintln!("kept {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}
