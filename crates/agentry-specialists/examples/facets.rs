//! Every facet of each text's brief on the offline defaults (no reader), one point a line,
//! so that a change to the method can be compared over many texts with `diff`:
//!   cargo run -p agentry-specialists --example facets -- TEXT.txt... > facets.txt
//! The texts are read whole, as one chunk, with the collection's counts left empty.
use agentry_specialists::rag::brief::{Counts, Work, facets};
use agentry_specialists::rag::parse::{Format, parse};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for path in std::env::args().skip(1) {
        let bytes = std::fs::read(&path)?;
        let p = parse(&bytes, Format::Text, &path)?;
        let w = Work::whole(&path, p);
        println!("== {path}");
        for f in facets(&w, &Counts::default(), 5, None) {
            println!("# {}", f.title);
            for k in &f.points {
                println!(
                    "  [{}..{}] {:?}: {}",
                    k.citation.start,
                    k.citation.end,
                    k.label.as_deref().unwrap_or(""),
                    k.text
                );
            }
        }
    }
    Ok(())
}
