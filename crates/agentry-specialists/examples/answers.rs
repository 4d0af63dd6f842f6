//! The RAG agent's answers to questions about a folder of documents, with the embedded
//! embedder and no model (the offline default), one after another:
//!   cargo run -p agentry-specialists --example answers -- FOLDER QUESTIONS.txt [POINTS]
//! A line of QUESTIONS.txt is a question, then optionally `|` and the phrases a good answer
//! quotes (`;` between them, any one will do): each answer then says whether it quotes one,
//! and the count closes the run. The knowledge base is kept in `FOLDER/.answers.db`, so a
//! second run ingests nothing. `bench/rag/` has two such files about the Shakespeare corpus.
//! (`scripts/fetch-models.sh` first.)
use agentry_specialists::rag::{KnowledgeBase, RagAgent};

fn words(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(folder), Some(questions)) = (args.next(), args.next()) else {
        return Err("usage: answers FOLDER QUESTIONS.txt [POINTS]".into());
    };
    let points: usize = args.next().map_or(Ok(5), |p| p.parse())?;
    let folder = std::path::PathBuf::from(folder);
    let embedder = agentry_local::provider::shared_embedder(None)?;
    let kb = KnowledgeBase::open(&folder.join(".answers.db"), embedder, "all-minilm-l6-v2")?;
    kb.ingest(&folder, "docs", &|_| {}).await?;
    let agent = RagAgent::new(kb, "docs");
    let (mut asked, mut answered) = (0, 0);
    for line in std::fs::read_to_string(questions)?.lines() {
        let (q, wanted) = line.split_once('|').unwrap_or((line, ""));
        let q = q.trim();
        if q.is_empty() || q.starts_with('#') {
            continue;
        }
        let wanted: Vec<String> = wanted
            .split(';')
            .map(words)
            .filter(|w| !w.is_empty())
            .collect();
        let t = std::time::Instant::now();
        let a = agent.answer(q, points).await?;
        println!("## {q} ({:.2} s)\n{}", t.elapsed().as_secs_f32(), a.answer);
        if !wanted.is_empty() {
            let quoted = a
                .key_points
                .iter()
                .any(|k| wanted.iter().any(|w| words(&k.text).contains(w.as_str())));
            println!("quotes a line expected: {quoted}\n");
            asked += 1;
            answered += quoted as usize;
        }
    }
    if asked > 0 {
        println!("{answered} of {asked} answers quote a line expected");
    }
    Ok(())
}
