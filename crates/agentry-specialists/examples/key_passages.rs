//! A play's key passages without and with the embedded chat model as the brief's reader
//! ([`agentry_specialists::rag::brief::Reader`]), side by side, with the time each took:
//!   cargo run --release -p agentry-specialists --example key_passages -- PLAY.txt...
//! (`scripts/fetch-models.sh` and `scripts/fetch-data.sh` first.)
use agentry_specialists::rag::brief::{Counts, Work, facets};
use agentry_specialists::rag::parse::{Format, parse};

/// The chat model as a reader.
struct R(agentry_local::ChatModel);
impl agentry_specialists::rag::brief::Reader for R {
    fn familiarity(&self, lead: &str, lines: &[&str]) -> Option<Vec<f32>> {
        self.0.line_familiarity(lead, lines).ok()
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let model = R(agentry_local::ChatModel::load_default()?);
    for path in std::env::args().skip(1) {
        let bytes = std::fs::read(&path)?;
        let p = parse(&bytes, Format::Text, &path)?;
        let w = Work::whole(&path, p);
        for reader in [false, true] {
            let t = std::time::Instant::now();
            let fs = facets(
                &w,
                &Counts::default(),
                5,
                if reader { Some(&model) } else { None },
            );
            println!("== {path} reader={reader} {:?}", t.elapsed());
            for f in fs.iter().filter(|f| f.title == "Key passages") {
                for p in &f.points {
                    println!("  {:?} {:?}: {}", p.label, p.speaker, p.text);
                }
            }
        }
    }
    Ok(())
}
