//! Push notifications: the task is POSTed to each webhook of a task when its state changes.
//!
//! Deliveries run off the agent's path: `queue` only queues (a full queue drops the
//! notification with a warning rather than slow the agent; one task may hold only a share of
//! the queue, so a task with many webhooks cannot crowd out the others), and a worker posts
//! with retries and exponential backoff. Each (task, webhook) pair is one lane, delivered in
//! order: a webhook gets a task's notifications in the order its states changed.
//!
//! Targets on private, loopback, link-local and other special-purpose addresses are refused
//! unless configuration allows them, so a client cannot aim the server at its own network
//! (SSRF). The check is made where the connection is made: the HTTP client resolves names
//! through [`PublicResolver`], which drops special-purpose addresses, so a name that changes its
//! answer between a check and the connection (DNS rebinding) still cannot reach them.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc};

use crate::error::RpcError;
use crate::model::{PushNotificationConfig, Task};
use crate::store::{OutgoingPush, TaskStore};

/// Push delivery settings.
#[derive(Debug, Clone)]
pub struct PushSettings {
    /// Allow webhooks on loopback and private networks (tests, trusted deployments).
    pub allow_private: bool,
    /// How long one delivery may take.
    pub timeout: Duration,
    /// Attempts after the first one.
    pub retries: u32,
    /// The first retry's wait; doubled after each.
    pub backoff: Duration,
    /// Notifications waiting for delivery, all tasks together.
    pub queue: usize,
    /// Notifications one task may have waiting (a share of `queue`).
    pub per_task: usize,
}

impl Default for PushSettings {
    fn default() -> Self {
        PushSettings {
            allow_private: false,
            timeout: Duration::from_secs(10),
            retries: 3,
            backoff: Duration::from_millis(200),
            queue: 4096,
            per_task: 64,
        }
    }
}

struct Job {
    task_id: String,
    config: PushNotificationConfig,
    body: Arc<Vec<u8>>,
    /// The outbox entry to acknowledge once the delivery is over (delivered or given up).
    ack: Option<(Arc<dyn TaskStore>, String)>,
}

impl Job {
    fn done(&self) {
        if let Some((store, id)) = &self.ack {
            // Queued at call time (the store contract): no need to wait for it.
            drop(store.ack_push(id));
        }
    }
}

/// Notifications waiting per task, for the per-task share of the queue.
#[derive(Default)]
struct Waiting(Mutex<HashMap<String, usize>>);

impl Waiting {
    fn take(&self, task: &str, max: usize) -> bool {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let n = m.entry(task.to_owned()).or_default();
        if *n >= max {
            return false;
        }
        *n += 1;
        true
    }

    fn release(&self, task: &str) {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = m.get_mut(task) {
            *n -= 1;
            if *n == 0 {
                m.remove(task);
            }
        }
    }
}

/// One lane per (task, webhook): a lane delivers its notifications one after another, in the
/// order the task's states changed, so a webhook never sees `working` after `completed`.
/// Lanes of different tasks or webhooks run side by side.
#[derive(Default, Clone)]
struct Lanes(Arc<Mutex<HashMap<LaneKey, VecDeque<Job>>>>);

/// A lane: (task id, webhook URL).
type LaneKey = (String, String);

impl Lanes {
    fn key(job: &Job) -> LaneKey {
        (job.task_id.clone(), job.config.url.clone())
    }

    /// `Some(job)` when its lane was idle (the caller delivers it and then drains the lane),
    /// `None` when it queued behind the lane's delivery in progress.
    fn enter(&self, job: Job) -> Option<Job> {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match m.entry(Self::key(&job)) {
            std::collections::hash_map::Entry::Occupied(mut e) => {
                e.get_mut().push_back(job);
                None
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(VecDeque::new());
                Some(job)
            }
        }
    }

    /// The lane's next notification after `done`, or `None` with the lane closed (under the
    /// same lock as [`Lanes::enter`], so nothing queues into a lane nobody drains).
    fn next(&self, done: &Job) -> Option<Job> {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let key = Self::key(done);
        let next = m.get_mut(&key).and_then(VecDeque::pop_front);
        if next.is_none() {
            m.remove(&key);
        }
        next
    }
}

/// How one notification's delivery ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Delivery {
    /// The webhook answered 2xx, after this many attempts.
    Delivered(u32),
    /// The webhook answered a 4xx other than 429: the notification is not retried.
    Rejected(u16),
    /// Every attempt failed (5xx, 429, timeout, connection refused).
    GaveUp(u32),
    /// Not sent: the target is not allowed (a private address) or cannot be reached at all.
    Refused(String),
}

impl Delivery {
    fn log(&self, url: &str) {
        match self {
            Delivery::Delivered(_) => {}
            Delivery::Rejected(status) => {
                tracing::warn!(%url, status, "push notification rejected by webhook")
            }
            Delivery::GaveUp(n) => {
                tracing::warn!(%url, "push notification failed after {n} attempts")
            }
            Delivery::Refused(why) => tracing::warn!(%url, "push notification refused: {why}"),
        }
    }
}

/// Resolves names for push deliveries and keeps only public addresses: the addresses checked
/// are the addresses connected to.
#[derive(Debug, Clone, Copy, Default)]
pub struct PublicResolver;

impl reqwest::dns::Resolve for PublicResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .filter(|a| !is_private(a.ip()))
                .collect();
            if addrs.is_empty() {
                return Err(format!("{host} has no public address").into());
            }
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// Queues and delivers push notifications.
#[derive(Clone)]
pub struct PushSender {
    tx: mpsc::Sender<Job>,
    settings: Arc<PushSettings>,
    waiting: Arc<Waiting>,
}

impl PushSender {
    /// Starts the delivery worker on the current runtime.
    pub fn start(settings: PushSettings) -> Self {
        let (tx, mut rx) = mpsc::channel::<Job>(settings.queue.max(1));
        let settings = Arc::new(settings);
        let mut client = reqwest::Client::builder()
            .connect_timeout(settings.timeout)
            .timeout(settings.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy();
        if !settings.allow_private {
            client = client.dns_resolver(Arc::new(PublicResolver));
        }
        // Without a client that filters, nothing is delivered (never an unfiltered one).
        let client = client.build().ok();
        let s = settings.clone();
        let waiting = Arc::new(Waiting::default());
        let w = waiting.clone();
        tokio::spawn(async move {
            let limit = Arc::new(Semaphore::new(64));
            let lanes = Lanes::default();
            while let Some(job) = rx.recv().await {
                let Some(first) = lanes.enter(job) else {
                    continue; // queued behind its lane's delivery in progress
                };
                let (lanes, limit, client, s, w) = (
                    lanes.clone(),
                    limit.clone(),
                    client.clone(),
                    s.clone(),
                    w.clone(),
                );
                tokio::spawn(async move {
                    let mut job = first;
                    loop {
                        let Ok(permit) = limit.acquire().await else {
                            return;
                        };
                        let outcome = match &client {
                            Some(c) => deliver(c, &s, &job).await,
                            None => Delivery::Refused("no HTTP client".into()),
                        };
                        drop(permit);
                        outcome.log(&job.config.url);
                        job.done();
                        w.release(&job.task_id);
                        match lanes.next(&job) {
                            Some(next) => job = next,
                            None => return,
                        }
                    }
                });
            }
        });
        PushSender {
            tx,
            settings,
            waiting,
        }
    }

    /// The settings in force.
    pub fn settings(&self) -> &PushSettings {
        &self.settings
    }

    /// The task's notification to each config's webhook: v0.3's bare Task, or for configs
    /// made over v1.0 a `StreamResponse` (`{"task": …}`) in v1.0 form. The hub stores them
    /// with the task (its outbox), then [`queue`]s them.
    ///
    /// [`queue`]: PushSender::queue
    pub(crate) fn outgoing(configs: &[PushNotificationConfig], task: &Task) -> Vec<OutgoingPush> {
        let mut v03 = None;
        let mut v10 = None;
        configs
            .iter()
            .map(|config| {
                let body = if config.body_version.as_deref() == Some("1.0") {
                    v10.get_or_insert_with(|| {
                        serde_json::to_vec(&crate::wire::v1::StreamResponse::Task(task.into()))
                            .unwrap_or_default()
                    })
                } else {
                    v03.get_or_insert_with(|| serde_json::to_vec(task).unwrap_or_default())
                };
                OutgoingPush {
                    id: crate::new_id(),
                    task_id: task.id.clone(),
                    config: config.clone(),
                    body: body.clone(),
                }
            })
            .collect()
    }

    /// Queues notifications for delivery, acknowledged in `store`'s outbox when done. Never
    /// waits; returns how many were queued (the others were dropped, and logged).
    pub(crate) fn queue(
        &self,
        items: Vec<OutgoingPush>,
        store: Option<&Arc<dyn TaskStore>>,
    ) -> usize {
        let mut queued = 0;
        for p in items {
            let job = Job {
                ack: store.map(|s| (s.clone(), p.id)),
                task_id: p.task_id,
                config: p.config,
                body: Arc::new(p.body),
            };
            if !self
                .waiting
                .take(&job.task_id, self.settings.per_task.max(1))
            {
                tracing::warn!(task = %job.task_id, url = %job.config.url, "push: the task's share of the queue is full: notification dropped");
                job.done();
                continue;
            }
            let task_id = job.task_id.clone();
            if let Err(e) = self.tx.try_send(job) {
                self.waiting.release(&task_id);
                let job = e.into_inner();
                tracing::warn!(task = %task_id, url = %job.config.url, "push queue full: notification dropped");
                job.done();
            } else {
                queued += 1;
            }
        }
        queued
    }

    /// Checks a webhook URL when a config is set: scheme, and literal addresses.
    pub fn check_url(&self, url: &str) -> Result<(), RpcError> {
        check_url_syntax(url, self.settings.allow_private).map_err(|why| {
            RpcError::invalid_params(format!("push notification url refused: {why}"))
        })
    }
}

async fn deliver(client: &reqwest::Client, s: &PushSettings, job: &Job) -> Delivery {
    let url = &job.config.url;
    if let Err(why) = check_target(url, s.allow_private).await {
        return Delivery::Refused(why);
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
            Ok(r) if r.status().is_success() => return Delivery::Delivered(attempt + 1),
            Ok(r) if r.status().is_client_error() && r.status().as_u16() != 429 => {
                return Delivery::Rejected(r.status().as_u16());
            }
            Ok(r) => tracing::debug!(%url, status = %r.status(), attempt, "push retry"),
            Err(e) => tracing::debug!(%url, attempt, "push retry: {e}"),
        }
        if attempt < s.retries {
            tokio::time::sleep(delay).await;
            delay *= 2;
        }
    }
    Delivery::GaveUp(s.retries + 1)
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

/// Every address a webhook may not target: loopback, private, link-local, unspecified,
/// multicast, broadcast, CGNAT, benchmarking, documentation, reserved and IETF-assigned IPv4
/// ranges; for IPv6 the same plus unique-local, site-local, discard, documentation, Teredo, and
/// the IPv4 address inside IPv4-mapped, IPv4-compatible, NAT64 and 6to4 addresses.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => private_v4(v4),
        IpAddr::V6(v6) => private_v6(v6),
    }
}

fn private_v4(v4: Ipv4Addr) -> bool {
    let o = v4.octets();
    v4.is_loopback()
        || v4.is_private()
        || v4.is_link_local()
        || v4.is_unspecified()
        || v4.is_multicast()
        || v4.is_broadcast()
        || o[0] == 0 // "this network"
        || (o[0] == 100 && (64..128).contains(&o[1])) // CGNAT 100.64/10
        || (o[0] == 192 && o[1] == 0 && o[2] == 0) // IETF protocol assignments 192.0.0/24
        || (o[0] == 192 && o[1] == 0 && o[2] == 2) // TEST-NET-1
        || (o[0] == 198 && o[1] == 51 && o[2] == 100) // TEST-NET-2
        || (o[0] == 203 && o[1] == 0 && o[2] == 113) // TEST-NET-3
        || (o[0] == 198 && (o[1] & 0xfe) == 18) // benchmarking 198.18/15
        || (o[0] == 192 && o[1] == 88 && o[2] == 99) // 6to4 relay anycast
        || o[0] >= 240 // reserved 240/4
}

fn private_v6(v6: Ipv6Addr) -> bool {
    let s = v6.segments();
    let embedded_v4 = |hi: u16, lo: u16| {
        let [a, b] = hi.to_be_bytes();
        let [c, d] = lo.to_be_bytes();
        private_v4(Ipv4Addr::new(a, b, c, d))
    };
    if let Some(v4) = v6.to_ipv4_mapped() {
        return private_v4(v4);
    }
    v6.is_loopback()
        || v6.is_unspecified()
        || v6.is_multicast()
        || (s[0] & 0xfe00) == 0xfc00 // unique local fc00::/7
        || (s[0] & 0xffc0) == 0xfe80 // link-local fe80::/10
        || (s[0] & 0xffc0) == 0xfec0 // site-local fec0::/10 (deprecated, still routed locally)
        || (s[0] == 0x0100 && s[1..4] == [0, 0, 0]) // discard 100::/64
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation 2001:db8::/32
        || (s[0] == 0x2001 && s[1] == 0) // Teredo 2001::/32 (tunnels to any IPv4)
        || (s[0] == 0x2001 && s[1] < 0x0200 && s[1] >= 0x0010) // ORCHID and other 2001::/23 assignments
        || (s[0] == 0x3fff && s[1] < 0x1000) // documentation 3fff::/20
        // IPv4-compatible ::a.b.c.d (deprecated): the IPv4 address decides.
        || (s[..6] == [0, 0, 0, 0, 0, 0] && embedded_v4(s[6], s[7]))
        // NAT64 64:ff9b::/96 and local-use 64:ff9b:1::/48: a gateway reaches the IPv4 inside.
        || (s[0] == 0x0064 && s[1] == 0xff9b && (s[2..6] == [0, 0, 0, 0] || s[2] == 1)
            && (s[2] == 1 || embedded_v4(s[6], s[7])))
        // 6to4 2002::/16: the IPv4 address is in the next 32 bits.
        || (s[0] == 0x2002 && embedded_v4(s[1], s[2]))
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
            "http://[fec0::1]/",
            "http://[64:ff9b::7f00:1]/",
            "http://[64:ff9b::a00:1]/",
            "http://[2002:7f00:1::]/",
            "http://[2002:c0a8:1::1]/",
            "http://[::127.0.0.1]/",
            "http://[::10.0.0.1]/",
            "http://[2001:db8::1]/",
            "http://[2001::1]/",
            "http://192.0.0.8/",
            "http://198.18.0.1/",
            "http://240.0.0.1/",
            "http://0.0.0.0/",
            "ftp://example.com/",
            "not a url",
        ] {
            assert!(
                check_url_syntax(bad, false).is_err(),
                "{bad} should be refused"
            );
        }
        assert!(check_url_syntax("https://example.com/hook", false).is_ok());
        // Public addresses, also inside NAT64 and 6to4, stay reachable.
        for good in [
            "http://8.8.8.8/",
            "http://[2606:4700::1111]/",
            "http://[64:ff9b::808:808]/",
            "http://[2002:808:808::1]/",
        ] {
            assert!(check_url_syntax(good, false).is_ok(), "{good} should pass");
        }
        assert!(check_url_syntax("http://127.0.0.1:9/x", true).is_ok());
        assert!(check_url_syntax("ftp://127.0.0.1/", true).is_err());
    }

    #[tokio::test]
    async fn the_delivery_resolver_never_yields_a_private_address() {
        use reqwest::dns::Resolve;
        use std::str::FromStr;
        // `localhost` resolves to loopback only: nothing is left to connect to.
        let name = reqwest::dns::Name::from_str("localhost").unwrap();
        let r = PublicResolver.resolve(name).await;
        assert!(r.is_err(), "loopback came through");
    }

    #[tokio::test]
    async fn a_delivery_to_a_name_that_resolves_privately_never_connects() {
        // A listener on loopback, reached by name: the filtering resolver refuses it even
        // though the URL's syntax passed (the DNS-rebinding case).
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let client = reqwest::Client::builder()
            .dns_resolver(Arc::new(PublicResolver))
            .no_proxy()
            .build()
            .unwrap();
        let accepted = tokio::spawn(async move {
            tokio::time::timeout(Duration::from_secs(2), l.accept())
                .await
                .is_ok()
        });
        let sent = client
            .post(format!("http://localhost:{port}/hook"))
            .send()
            .await;
        assert!(sent.is_err());
        assert!(!accepted.await.unwrap(), "the connection reached loopback");
    }

    /// What the test webhook does with each request, in order; `Ok` once the script runs out.
    #[derive(Clone, Copy, Debug)]
    enum Answer {
        Ok,
        Status(u16),
        Hang(Duration),
    }

    /// A webhook on loopback that answers by `script` and records the state of every task it
    /// is sent (also those it answers with an error).
    struct Hook {
        url: String,
        seen: Arc<Mutex<Vec<String>>>,
    }

    async fn hook(script: Vec<Answer>) -> Hook {
        use axum::{Router, body::Bytes, extract::State, routing::post};
        type Shared = (Arc<Mutex<VecDeque<Answer>>>, Arc<Mutex<Vec<String>>>);
        async fn handle(State((script, seen)): State<Shared>, body: Bytes) -> http::StatusCode {
            let task: Task = serde_json::from_slice(&body).unwrap();
            seen.lock().unwrap().push(task.status.state.to_string());
            let answer = script.lock().unwrap().pop_front().unwrap_or(Answer::Ok);
            match answer {
                Answer::Ok => http::StatusCode::OK,
                Answer::Status(code) => http::StatusCode::from_u16(code).unwrap(),
                Answer::Hang(d) => {
                    tokio::time::sleep(d).await;
                    http::StatusCode::OK
                }
            }
        }
        let seen = Arc::new(Mutex::new(Vec::new()));
        let shared: Shared = (Arc::new(Mutex::new(script.into())), seen.clone());
        let app = Router::new()
            .route("/hook", post(handle))
            .with_state(shared);
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", l.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(l, app).await });
        Hook { url, seen }
    }

    fn settings() -> PushSettings {
        PushSettings {
            allow_private: true,
            timeout: Duration::from_millis(300),
            retries: 2,
            backoff: Duration::from_millis(10),
            ..PushSettings::default()
        }
    }

    fn task_in(state: crate::model::TaskState) -> Task {
        let mut t = Task::new("t1".into(), "c1".into());
        t.status = crate::model::TaskStatus::now(state, None);
        t
    }

    fn job_for(url: &str) -> Job {
        Job {
            task_id: "t1".into(),
            config: PushNotificationConfig {
                id: None,
                url: url.into(),
                token: None,
                authentication: None,
                body_version: None,
            },
            body: Arc::new(serde_json::to_vec(&task_in(crate::model::TaskState::Working)).unwrap()),
            ack: None,
        }
    }

    #[tokio::test]
    async fn deliveries_retry_server_errors_and_timeouts_and_stop_on_client_errors() {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_millis(300))
            .build()
            .unwrap();
        let s = settings();
        let cases = [
            (
                vec![Answer::Status(503), Answer::Status(500)],
                Delivery::Delivered(3),
                3,
            ),
            (
                vec![Answer::Hang(Duration::from_secs(2))],
                Delivery::Delivered(2),
                2,
            ),
            (vec![Answer::Status(429)], Delivery::Delivered(2), 2),
            (vec![Answer::Status(400)], Delivery::Rejected(400), 1),
            (vec![Answer::Status(404)], Delivery::Rejected(404), 1),
            (vec![Answer::Status(503); 5], Delivery::GaveUp(3), 3),
        ];
        for (script, expected, requests) in cases {
            let h = hook(script.clone()).await;
            let got = deliver(&client, &s, &job_for(&h.url)).await;
            assert_eq!(got, expected, "{script:?}");
            assert_eq!(h.seen.lock().unwrap().len(), requests, "{script:?}");
        }
        // Nothing listening: every attempt fails, and the sender says so.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let dead = format!("http://{}/hook", l.local_addr().unwrap());
        drop(l);
        assert_eq!(
            deliver(&client, &s, &job_for(&dead)).await,
            Delivery::GaveUp(3)
        );
        // A private target is refused before anything is sent, by address or by a name that
        // resolves to one.
        let closed = PushSettings {
            allow_private: false,
            ..settings()
        };
        let h = hook(Vec::new()).await;
        assert!(matches!(
            deliver(&client, &closed, &job_for(&h.url)).await,
            Delivery::Refused(_)
        ));
        let by_name = h.url.replace("127.0.0.1", "localhost");
        assert!(matches!(
            deliver(&client, &closed, &job_for(&by_name)).await,
            Delivery::Refused(_)
        ));
        assert!(h.seen.lock().unwrap().is_empty());
    }

    /// The first notification is slow to be accepted; the ones after it still arrive after it
    /// (before lanes, each was posted on its own and `completed` overtook `working`).
    #[tokio::test]
    async fn a_webhook_gets_a_tasks_notifications_in_order() {
        use crate::model::TaskState::*;
        let h = hook(vec![
            Answer::Hang(Duration::from_millis(150)),
            Answer::Status(503),
        ])
        .await;
        let other = hook(Vec::new()).await;
        let sender = PushSender::start(settings());
        let config = |url: &str| PushNotificationConfig {
            id: None,
            url: url.into(),
            token: None,
            authentication: None,
            body_version: None,
        };
        let configs = [config(&h.url), config(&other.url)];
        for state in [Submitted, Working, InputRequired, Working, Completed] {
            assert_eq!(
                sender.queue(PushSender::outgoing(&configs, &task_in(state)), None),
                2
            );
        }
        let expected = [
            "submitted",
            "working",
            "input-required",
            "working",
            "completed",
        ];
        for _ in 0..500 {
            if other.seen.lock().unwrap().len() >= 5 && h.seen.lock().unwrap().len() >= 6 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // The retried 503 is sent twice, in its place.
        let mut seen = h.seen.lock().unwrap().clone();
        seen.dedup();
        assert_eq!(seen, expected);
        assert_eq!(*other.seen.lock().unwrap(), expected);
    }

    #[tokio::test]
    async fn a_task_holds_only_its_share_of_the_queue() {
        let h = hook(vec![Answer::Hang(Duration::from_millis(200))]).await;
        let sender = PushSender::start(PushSettings {
            per_task: 2,
            ..settings()
        });
        let configs = [PushNotificationConfig {
            id: None,
            url: h.url.clone(),
            token: None,
            authentication: None,
            body_version: None,
        }];
        let t = task_in(crate::model::TaskState::Working);
        assert_eq!(sender.queue(PushSender::outgoing(&configs, &t), None), 1);
        assert_eq!(sender.queue(PushSender::outgoing(&configs, &t), None), 1);
        assert_eq!(
            sender.queue(PushSender::outgoing(&configs, &t), None),
            0,
            "a third waiting notification was kept"
        );
        // Another task still gets its notifications through.
        let mut other = t.clone();
        other.id = "t2".into();
        assert_eq!(
            sender.queue(PushSender::outgoing(&configs, &other), None),
            1
        );
    }
}
