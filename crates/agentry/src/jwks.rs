//! `[server.jwt] jwks_url`: the issuer's keys followed over HTTP. Fetched when the server
//! starts (one that cannot get its issuer's keys does not start: it could verify nothing),
//! then every `refresh` (revalidated with `If-None-Match`, so an unchanged set costs a 304),
//! and sooner, at most every [`MIN_GAP`], when a token names a key the set lacks: a rotated
//! key verifies within moments of being published, with no restart. A failed refresh keeps
//! the keys it had.

use std::time::{Duration, Instant};

use agentry_governance::JwksFeed;

use crate::Error;

/// The least time between two fetches (tokens with unknown keys cannot make it hammer the
/// issuer).
pub const MIN_GAP: Duration = Duration::from_secs(5);

/// The largest JWKS document taken (a set of a few keys is a few KB).
const MAX_JWKS: u64 = 1 << 20;

/// Fetches `url`'s JWKS and keeps it current in the returned feed.
pub async fn follow(url: &str, refresh: Duration) -> Result<JwksFeed, Error> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| Error::Invalid(format!("[server.jwt] jwks_url: HTTP client: {e}")))?;
    let (body, mut etag) = fetch(&http, url, None)
        .await
        .map_err(|e| Error::Invalid(format!("[server.jwt] jwks_url {url}: {e}")))?
        .ok_or_else(|| Error::Invalid(format!("[server.jwt] jwks_url {url}: no keys")))?;
    let feed = JwksFeed::from_json(url, &body)
        .map_err(|e| Error::Invalid(format!("[server.jwt] jwks_url: {e}")))?;
    let (url, kept) = (url.to_owned(), feed.clone());
    tokio::spawn(async move {
        let mut last = Instant::now();
        loop {
            tokio::select! {
                _ = tokio::time::sleep(refresh) => {}
                _ = kept.wanted() => {
                    let since = last.elapsed();
                    if since < MIN_GAP {
                        tokio::time::sleep(MIN_GAP - since).await;
                    }
                }
            }
            last = Instant::now();
            match fetch(&http, &url, etag.as_deref()).await {
                Ok(Some((body, tag))) => match kept.replace_json(&url, &body) {
                    Ok(()) => {
                        etag = tag;
                        tracing::info!(%url, "JWKS refreshed");
                    }
                    Err(e) => tracing::warn!(%url, "JWKS not replaced: {e}"),
                },
                Ok(None) => {}
                Err(e) => tracing::warn!(%url, "JWKS not refreshed, keeping the keys held: {e}"),
            }
        }
    });
    Ok(feed)
}

/// The document and its ETag; `None` when unchanged since `etag` (HTTP 304).
async fn fetch(
    http: &reqwest::Client,
    url: &str,
    etag: Option<&str>,
) -> Result<Option<(Vec<u8>, Option<String>)>, String> {
    let mut req = http.get(url);
    if let Some(tag) = etag {
        req = req.header(reqwest::header::IF_NONE_MATCH, tag);
    }
    let resp = req.send().await.map_err(|e| e.to_string())?;
    match resp.status().as_u16() {
        304 => Ok(None),
        200 => {
            let tag = resp
                .headers()
                .get(reqwest::header::ETAG)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            // Refused as it arrives: a chunked answer declares no length.
            let body = agentry_a2a::client::read_limited(resp, MAX_JWKS as usize)
                .await
                .map_err(|e| match e {
                    agentry_a2a::client::BodyError::TooLarge(_) => {
                        format!("the document is larger than {MAX_JWKS} bytes")
                    }
                    e => e.to_string(),
                })?;
            Ok(Some((body.to_vec(), tag)))
        }
        s => Err(format!("HTTP {s}")),
    }
}
