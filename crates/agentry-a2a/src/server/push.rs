//! Push notifications: the task is POSTed to each webhook of a task when its state changes.
//!
//! Deliveries run off the agent's path: `notify` only queues (a full queue drops the
//! notification with a warning rather than slow the agent), and a worker posts with retries and
//! exponential backoff. Targets on private, loopback and link-local addresses are refused unless
//! configuration allows them, so a client cannot aim the server at its own network (SSRF).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc};

use crate::error::RpcError;
use crate::model::{PushNotificationConfig, Task};

/// Push delivery settings.
#[derive(Debug, Clone)]
pub struct PushSettings {
    /// Allow webhooks on loopback and private networks (tests, trusted deployments).
    pub allow_private: bool,
    pub timeout: Duration,
    /// Attempts after the first one.
    pub retries: u32,
    pub backoff: Duration,
    pub queue: usize,
}

impl Default for PushSettings {
    fn default() -> Self {
        PushSettings {
            allow_private: false,
            timeout: Duration::from_secs(10),
            retries: 3,
            backoff: Duration::from_millis(200),
            queue: 4096,
        }
    }
}

struct Job {
    config: PushNotificationConfig,
    body: Arc<Vec<u8>>,
}

/// Queues and delivers push notifications.
#[derive(Clone)]
pub struct PushSender {
    tx: mpsc::Sender<Job>,
    settings: Arc<PushSettings>,
}

impl PushSender {
    /// Starts the delivery worker on the current runtime.
    pub fn start(settings: PushSettings) -> Self {
        let (tx, mut rx) = mpsc::channel::<Job>(settings.queue.max(1));
        let settings = Arc::new(settings);
        let client = reqwest::Client::builder()
            .connect_timeout(settings.timeout)
            .timeout(settings.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        let s = settings.clone();
        tokio::spawn(async move {
            let limit = Arc::new(Semaphore::new(64));
            while let Some(job) = rx.recv().await {
                let Ok(permit) = limit.clone().acquire_owned().await else {
                    break;
                };
                let client = client.clone();
                let s = s.clone();
                tokio::spawn(async move {
                    deliver(&client, &s, &job).await;
                    drop(permit);
                });
            }
        });
        PushSender { tx, settings }
    }

    pub fn settings(&self) -> &PushSettings {
        &self.settings
    }

    /// Queues the task for every config; never waits.
    /// Queues the task's notification to each config's webhook: v0.3's bare Task, or for
    /// configs made over v1.0 a `StreamResponse` (`{"task": …}`) in v1.0 form.
    pub(crate) fn notify(&self, configs: &[PushNotificationConfig], task: &Task) {
        let mut v03 = None;
        let mut v10 = None;
        for config in configs {
            let body = if config.body_version.as_deref() == Some("1.0") {
                v10.get_or_insert_with(|| {
                    Arc::new(
                        serde_json::to_vec(&serde_json::json!({ "task": crate::v1::task(task) }))
                            .unwrap_or_default(),
                    )
                })
            } else {
                v03.get_or_insert_with(|| Arc::new(serde_json::to_vec(task).unwrap_or_default()))
            };
            let job = Job {
                config: config.clone(),
                body: body.clone(),
            };
            if self.tx.try_send(job).is_err() {
                tracing::warn!(task = %task.id, url = %config.url, "push queue full: notification dropped");
            }
        }
    }

    /// Checks a webhook URL when a config is set: scheme, and literal addresses.
    pub fn check_url(&self, url: &str) -> Result<(), RpcError> {
        check_url_syntax(url, self.settings.allow_private).map_err(|why| {
            RpcError::invalid_params(format!("push notification url refused: {why}"))
        })
    }
}

async fn deliver(client: &reqwest::Client, s: &PushSettings, job: &Job) {
    let url = &job.config.url;
    if let Err(why) = check_target(url, s.allow_private).await {
        tracing::warn!(%url, "push notification refused: {why}");
        return;
    }
    let mut delay = s.backoff;
    for attempt in 0..=s.retries {
        let mut req = client
            .post(url)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(job.body.as_ref().clone());
        if let Some(token) = &job.config.token {
            req = req.header("X-A2A-Notification-Token", token);
        }
        if let Some(auth) = &job.config.authentication
            && let Some(cred) = &auth.credentials
            && auth
                .schemes
                .iter()
                .any(|s| s.eq_ignore_ascii_case("bearer"))
        {
            req = req.bearer_auth(cred);
        }
        match req.send().await {
            Ok(r) if r.status().is_success() => return,
            Ok(r) if r.status().is_client_error() && r.status().as_u16() != 429 => {
                tracing::warn!(%url, status = %r.status(), "push notification rejected by webhook");
                return;
            }
            Ok(r) => tracing::debug!(%url, status = %r.status(), attempt, "push retry"),
            Err(e) => tracing::debug!(%url, attempt, "push retry: {e}"),
        }
        if attempt < s.retries {
            tokio::time::sleep(delay).await;
            delay *= 2;
        }
    }
    tracing::warn!(%url, "push notification failed after {} attempts", s.retries + 1);
}

/// Scheme and literal-address checks that need no DNS.
pub fn check_url_syntax(url: &str, allow_private: bool) -> Result<(), String> {
    let u = reqwest::Url::parse(url).map_err(|e| format!("invalid URL {url:?}: {e}"))?;
    if u.scheme() != "http" && u.scheme() != "https" {
        return Err(format!("scheme {:?} is not http or https", u.scheme()));
    }
    let host = u.host_str().ok_or("URL has no host")?;
    if allow_private {
        return Ok(());
    }
    if host.eq_ignore_ascii_case("localhost") || host.ends_with(".localhost") {
        return Err("loopback targets are not allowed".into());
    }
    if let Ok(ip) = host.trim_matches(['[', ']']).parse::<IpAddr>()
        && is_private(ip)
    {
        return Err(format!("{ip} is a private or loopback address"));
    }
    Ok(())
}

/// Full check before a delivery: the host's resolved addresses must all be public.
async fn check_target(url: &str, allow_private: bool) -> Result<(), String> {
    check_url_syntax(url, allow_private)?;
    if allow_private {
        return Ok(());
    }
    let u = reqwest::Url::parse(url).map_err(|e| e.to_string())?;
    let host = u
        .host_str()
        .unwrap_or_default()
        .trim_matches(['[', ']'])
        .to_owned();
    let port = u.port_or_known_default().unwrap_or(80);
    let addrs = tokio::net::lookup_host((host.as_str(), port))
        .await
        .map_err(|e| format!("cannot resolve {host}: {e}"))?;
    for a in addrs {
        if is_private(a.ip()) {
            return Err(format!("{host} resolves to private address {}", a.ip()));
        }
    }
    Ok(())
}

/// Loopback, private, link-local, unspecified, multicast, CGNAT and unique-local addresses.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_multicast()
                || v4.is_broadcast()
                || (o[0] == 100 && (64..128).contains(&o[1]))
                || o[0] == 0
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_private(IpAddr::V4(v4));
            }
            let s = v6.segments();
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_private_targets_unless_allowed() {
        for bad in [
            "http://127.0.0.1:9/x",
            "http://localhost/x",
            "http://10.1.2.3/",
            "http://192.168.0.1/",
            "http://169.254.169.254/latest/meta-data",
            "http://[::1]:80/",
            "http://[::ffff:127.0.0.1]/",
            "http://[fd00::1]/",
            "ftp://example.com/",
            "not a url",
        ] {
            assert!(
                check_url_syntax(bad, false).is_err(),
                "{bad} should be refused"
            );
        }
        assert!(check_url_syntax("https://example.com/hook", false).is_ok());
        assert!(check_url_syntax("http://127.0.0.1:9/x", true).is_ok());
        assert!(check_url_syntax("ftp://127.0.0.1/", true).is_err());
    }
}
