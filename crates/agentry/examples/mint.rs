//! Mints bearer JWTs for the governance benchmark (`bench/governance.sh`): writes a fresh
//! Ed25519 issuer's JWKS, times minting N tokens, prints the last one.
//!
//! ```text
//! cargo run --release -p agentry --no-default-features --example mint -- JWKS_OUT ISSUER AUDIENCE [N]
//! ```

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use agentry::governance::{Grant, TokenIssuer};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [jwks, issuer, audience, ..] = args.as_slice() else {
        return Err("usage: mint JWKS_OUT ISSUER AUDIENCE [N]".into());
    };
    let n: usize = args
        .get(3)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(10_000);
    let idp = TokenIssuer::generate(issuer.clone())?;
    std::fs::write(jwks, idp.jwks().to_string())?;
    let grant = Grant {
        subject: "bench".into(),
        audience: audience.clone(),
        scopes: BTreeSet::from(["echo.use".to_owned()]),
        lifetime: Duration::from_secs(3600),
        act: None,
    };
    let mut took = Vec::with_capacity(n);
    let mut token = String::new();
    for _ in 0..n.max(1) {
        let t = Instant::now();
        token = idp.issue(&grant)?;
        took.push(t.elapsed());
    }
    took.sort_unstable();
    let at = |q: f64| took[((took.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6;
    eprintln!(
        "MINT n={} p50_us={:.1} p99_us={:.1}",
        took.len(),
        at(0.5),
        at(0.99)
    );
    println!("{token}");
    Ok(())
}
