//! The legacy HTTP+SSE transport (protocol revision 2024-11-05), which rmcp no longer ships:
//! `GET` the SSE endpoint, whose first event names the URL to `POST` messages to; every
//! message from the server arrives as an SSE event on that stream.

use std::borrow::Cow;
use std::time::Duration;

use agentry_a2a::sse::SseParser;
use futures_util::StreamExt;
use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::{mpsc, oneshot};

/// Why the legacy transport failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LegacySseError {
    /// The HTTP exchange failed.
    #[error("legacy SSE: {0}")]
    Http(String),
    /// The stream never said where to post messages.
    #[error("legacy SSE: the server sent no endpoint event")]
    NoEndpoint,
}

/// A client transport over the 2024-11-05 HTTP+SSE protocol.
pub struct LegacySseTransport {
    http: reqwest13::Client,
    endpoint: String,
    rx: mpsc::Receiver<RxJsonRpcMessage<RoleClient>>,
    reader: tokio::task::JoinHandle<()>,
    headers: reqwest13::header::HeaderMap,
}

/// Resolves the endpoint the server announced against the SSE URL.
fn resolve(base: &str, endpoint: &str) -> String {
    if endpoint.starts_with("http://") || endpoint.starts_with("https://") {
        return endpoint.to_owned();
    }
    // scheme://host[:port] of the base, then the absolute path.
    let after_scheme = base.find("://").map(|i| i + 3).unwrap_or(0);
    let host_end = base[after_scheme..]
        .find('/')
        .map(|i| after_scheme + i)
        .unwrap_or(base.len());
    if endpoint.starts_with('/') {
        format!("{}{endpoint}", &base[..host_end])
    } else {
        let dir = base
            .rfind('/')
            .filter(|&i| i >= host_end)
            .map(|i| &base[..=i])
            .unwrap_or(base);
        format!("{dir}{endpoint}")
    }
}

impl LegacySseTransport {
    /// Opens the SSE stream at `url` and waits for the endpoint event.
    pub async fn connect(
        url: &str,
        headers: reqwest13::header::HeaderMap,
        connect_timeout: Duration,
    ) -> Result<Self, LegacySseError> {
        let http = reqwest13::Client::builder()
            .connect_timeout(connect_timeout)
            .build()
            .map_err(|e| LegacySseError::Http(e.to_string()))?;
        let resp = http
            .get(url)
            .headers(headers.clone())
            .header("accept", "text/event-stream")
            .send()
            .await
            .map_err(|e| LegacySseError::Http(e.to_string()))?;
        if !resp.status().is_success() {
            return Err(LegacySseError::Http(format!(
                "GET {url}: HTTP {}",
                resp.status()
            )));
        }
        let (tx, rx) = mpsc::channel(256);
        let (ep_tx, ep_rx) = oneshot::channel::<String>();
        let reader = tokio::spawn(async move {
            let mut body = resp.bytes_stream();
            let mut parser = SseParser::new();
            let mut ep_tx = Some(ep_tx);
            while let Some(Ok(chunk)) = body.next().await {
                let events = match parser.push(&chunk) {
                    Ok(events) => events,
                    Err(e) => {
                        // The server's messages end here: its calls fail as closed.
                        tracing::warn!("legacy SSE: {e}; stream dropped");
                        return;
                    }
                };
                for data in events {
                    let data = data.trim();
                    if data.is_empty() {
                        continue; // Some servers open with an empty event.
                    }
                    if let Some(t) = ep_tx.take_if(|_| !data.starts_with('{')) {
                        let _ = t.send(data.to_owned());
                        continue;
                    }
                    match serde_json::from_str::<RxJsonRpcMessage<RoleClient>>(data) {
                        Ok(m) => {
                            if tx.send(m).await.is_err() {
                                return;
                            }
                        }
                        Err(e) => tracing::debug!("legacy SSE: unreadable message ({e}): {data}"),
                    }
                }
            }
        });
        let endpoint = tokio::time::timeout(connect_timeout, ep_rx)
            .await
            .map_err(|_| LegacySseError::NoEndpoint)?
            .map_err(|_| LegacySseError::NoEndpoint)?;
        Ok(LegacySseTransport {
            http,
            endpoint: resolve(url, &endpoint),
            rx,
            reader,
            headers,
        })
    }
}

impl Transport<RoleClient> for LegacySseTransport {
    type Error = LegacySseError;

    fn name() -> Cow<'static, str> {
        "legacy-sse".into()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let req = self
            .http
            .post(&self.endpoint)
            .headers(self.headers.clone())
            .json(&item);
        async move {
            let r = req
                .send()
                .await
                .map_err(|e| LegacySseError::Http(e.to_string()))?;
            if r.status().is_success() {
                Ok(())
            } else {
                Err(LegacySseError::Http(format!("POST: HTTP {}", r.status())))
            }
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.rx.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.reader.abort();
        Ok(())
    }
}

impl Drop for LegacySseTransport {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::resolve;

    #[test]
    fn endpoints_resolve_against_the_sse_url() {
        assert_eq!(
            resolve("http://h:1/sse", "/message?sessionId=a"),
            "http://h:1/message?sessionId=a"
        );
        assert_eq!(
            resolve("http://h:1/mcp/sse", "messages?x=1"),
            "http://h:1/mcp/messages?x=1"
        );
        assert_eq!(resolve("http://h:1/sse", "http://o:2/m"), "http://o:2/m");
    }
}
