//! Serving a router on a TCP listener with the limits any socket an agent opens needs, for
//! every listener agentry has (agents, `mcp serve --http`, `model serve`).
//!
//! `axum::serve` sets no timer, so hyper's header-read timeout never fires and a client that
//! sends half a request (or nothing) holds its connection forever; it also accepts without
//! limit, so a few thousand such clients exhaust the process's file descriptors (slowloris).
//! [`serve_router`] bounds both: hyper's header-read timeout with a timer (it runs whenever a
//! connection waits for a request head, so it is also the idle timeout between keep-alive
//! requests) and a cap on open connections (beyond it, new connections wait in the kernel's
//! backlog instead of being accepted). [`host_guard`] answers only the `Host` names given, so a
//! DNS-rebound name cannot reach a loopback listener from a web page.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// What one listener allows.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Time to send a request's head, counted from when the connection starts waiting for it
    /// (so also the longest idle time between keep-alive requests).
    pub header_read: Duration,
    /// Connections open at once; more wait in the backlog until one closes. By default what
    /// the process's open-files limit leaves after 256 descriptors for stores, outgoing
    /// calls and child processes (at least 64; 1024 where the limit cannot be read), so the
    /// cap, not the descriptor table, is what a flood of connections meets.
    pub max_connections: usize,
    /// After shutdown is asked for, how long open requests and streams get to finish.
    pub shutdown_grace: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_read: Duration::from_secs(30),
            max_connections: open_files_limit()
                .map_or(1024, |n| n.saturating_sub(256).clamp(64, 1 << 20)),
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

/// The soft limit on open files (Linux: `/proc/self/limits`), `None` where unknown.
fn open_files_limit() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let soft = line.split_whitespace().nth(3)?;
    if soft == "unlimited" {
        return Some(1 << 20);
    }
    soft.parse().ok()
}

/// How many connections may wait to be accepted (capped by the kernel, `somaxconn`): a burst
/// of clients connecting at once waits there instead of having its SYNs dropped (retried a
/// second, then 3, 7, 15 s later: the tail of a burst at the default 1,024).
pub const BACKLOG: u32 = 4096;

/// Binds a listener on `addr` with a [`BACKLOG`]-deep accept queue (`TcpListener::bind`
/// gives 1,024).
pub async fn bind(addr: impl tokio::net::ToSocketAddrs) -> std::io::Result<TcpListener> {
    let mut last = None;
    for a in tokio::net::lookup_host(addr).await? {
        let socket = if a.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        socket.set_reuseaddr(true)?;
        match socket.bind(a).and_then(|()| socket.listen(BACKLOG)) {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("the address resolves to nothing")))
}

/// Serves `router` on `listener` within `limits` until `shutdown` resolves; then stops
/// accepting and gives open connections [`Limits::shutdown_grace`] to finish.
pub async fn serve_router(
    listener: TcpListener,
    router: axum::Router,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_router_tls(listener, router, limits, None, shutdown).await
}

/// [`serve_router`] over TLS when `tls` is given: the handshake runs in the connection's
/// task (bounded by the header-read timeout, so a client that stalls in it holds no more
/// than a connection slot), and a verified client certificate goes with each of the
/// connection's requests (see [`super::tls`]).
pub async fn serve_router_tls(
    listener: TcpListener,
    router: axum::Router,
    limits: Limits,
    tls: Option<super::tls::ServerTls>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(CoarseTimer::new(limits.header_read))
        .header_read_timeout(limits.header_read)
        .keep_alive(true);
    #[cfg(feature = "grpc")]
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(e) => {
                    // Out of descriptors or a connection reset before accept: wait a little
                    // rather than spin, and go on serving the open connections.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        if let Some(tls) = &tls {
            let (tls, http, watcher, router) = (
                tls.clone(),
                http.clone(),
                graceful.watcher(),
                router.clone(),
            );
            #[cfg(feature = "grpc")]
            let stop = stop_rx.clone();
            let handshake = limits.header_read;
            tokio::spawn(async move {
                let Ok(Ok((stream, cert))) =
                    tokio::time::timeout(handshake, tls.accept(stream)).await
                else {
                    drop(permit);
                    return;
                };
                #[cfg(feature = "grpc")]
                let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
                let inner = TowerToHyperService::new(router);
                let svc = hyper::service::service_fn(
                    move |mut req: hyper::Request<hyper::body::Incoming>| {
                        if let Some(c) = &cert {
                            req.extensions_mut().insert(c.clone());
                        }
                        hyper::service::Service::call(&inner, req)
                    },
                );
                #[cfg(feature = "grpc")]
                if h2 {
                    h2::serve(TokioIo::new(stream), svc, stop, handshake).await;
                    drop(permit);
                    return;
                }
                let _ = watcher
                    .watch(http.serve_connection(TokioIo::new(stream), svc))
                    .await;
                drop(permit);
            });
            continue;
        }
        // HTTP/2 clients (gRPC's) say so with its preface, HTTP/1.1 ones by anything else;
        // told apart in the connection's task, within the header-read timeout.
        #[cfg(feature = "grpc")]
        {
            let (http, watcher, router) = (http.clone(), graceful.watcher(), router.clone());
            let (limit, stop) = (limits.header_read, stop_rx.clone());
            tokio::spawn(async move {
                match h2::sniff(&stream, limit).await {
                    Some(h2::Version::H2) => {
                        let svc = TowerToHyperService::new(router);
                        h2::serve(TokioIo::new(stream), svc, stop, limit).await;
                    }
                    Some(h2::Version::H1) => {
                        let svc = TowerToHyperService::new(router);
                        let conn = http.serve_connection(TokioIo::new(stream), svc);
                        let _ = watcher.watch(conn).await;
                    }
                    None => {}
                }
                drop(permit);
            });
        }
        #[cfg(not(feature = "grpc"))]
        {
            let conn = http.serve_connection(
                TokioIo::new(stream),
                TowerToHyperService::new(router.clone()),
            );
            let conn = graceful.watch(conn);
            tokio::spawn(async move {
                // Errors here are the client's (reset, timeout, bad request): nothing to report.
                let _ = conn.await;
                drop(permit);
            });
        }
    }
    drop(listener);
    #[cfg(feature = "grpc")]
    let _ = stop_tx.send(true);
    // Every connection's slot back: HTTP/1.1 ones through the watcher, HTTP/2 ones by
    // their own hand (see `h2::Stop`).
    let all_closed = async {
        graceful.shutdown().await;
        let n = u32::try_from(limits.max_connections.max(1)).unwrap_or(u32::MAX);
        let _ = permits.acquire_many(n).await;
    };
    tokio::select! {
        () = all_closed => {}
        () = tokio::time::sleep(limits.shutdown_grace) => {
            tracing::info!("shutdown: connections still open after the grace period are dropped");
        }
    }
    Ok(())
}

/// HTTP/2 beside HTTP/1.1 on one port (feature `grpc`: gRPC needs HTTP/2).
#[cfg(feature = "grpc")]
mod h2 {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use hyper_util::rt::{TokioExecutor, TokioTimer};
    use tokio::net::TcpStream;

    /// Says when the server stops: HTTP/2 connections are not hyper-util's graceful
    /// watcher's (which cannot also close them when idle), so the listener tells them itself
    /// and waits for their slots.
    pub(super) type Stop = tokio::sync::watch::Receiver<bool>;

    /// HTTP/2's connection preface, the first bytes an HTTP/2 client sends.
    const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

    pub(super) enum Version {
        H1,
        H2,
    }

    /// Which HTTP the client speaks, from its first bytes (peeked, not taken): the preface,
    /// or anything else. `None`: it closed, or sent no verdict within `limit` (a client that
    /// connects and stalls holds its slot no longer than one that stalls in a request head).
    pub(super) async fn sniff(stream: &TcpStream, limit: Duration) -> Option<Version> {
        let deadline = tokio::time::Instant::now() + limit;
        let mut buf = [0u8; PREFACE.len()];
        loop {
            let n = tokio::time::timeout_at(deadline, stream.peek(&mut buf))
                .await
                .ok()?
                .ok()?;
            if n == 0 {
                return None;
            }
            if buf[..n] != PREFACE[..n] {
                return Some(Version::H1);
            }
            if n == PREFACE.len() {
                return Some(Version::H2);
            }
            // Part of the preface: peeking again at once would see the same bytes (and a
            // peek that finds bytes waiting never meets the deadline by itself).
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(5).min(limit)).await;
        }
    }

    /// Serves one HTTP/2 connection. Like an HTTP/1.1 connection idle past the header-read
    /// timeout, one on which no request starts for `idle` is asked to close (GOAWAY: the
    /// streams it has open, a gRPC stream following a task, still run to their end); so is
    /// every one when the server stops.
    pub(super) async fn serve<I, S, B>(io: I, svc: S, mut stop: Stop, idle: Duration)
    where
        I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
        S: hyper::service::Service<
                hyper::Request<hyper::body::Incoming>,
                Response = hyper::Response<B>,
            > + Send
            + 'static,
        S::Future: Send + 'static,
        S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
        B: hyper::body::Body + Send + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let busy = Arc::new(AtomicBool::new(false));
        let seen = busy.clone();
        let svc = hyper::service::service_fn(move |req| {
            seen.store(true, Ordering::Relaxed);
            svc.call(req)
        });
        let mut http = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
        http.timer(TokioTimer::new())
            // Headers no larger than an HTTP/1.1 head may be (hyper's default there).
            .max_header_list_size(64 * 1024)
            // A peer that stops answering pings is gone (or stalls on purpose, also in
            // the closing handshake a GOAWAY starts): its connection is dropped.
            .keep_alive_interval(idle)
            .keep_alive_timeout(idle);
        let conn = http.serve_connection(io, svc);
        tokio::pin!(conn);
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + idle, idle);
        let mut asked = false;
        loop {
            tokio::select! {
                // Errors here are the client's (reset, protocol error): nothing to report.
                _ = &mut conn => return,
                // The server stops (the sender dropped counts too).
                _ = stop.wait_for(|s| *s), if !asked => {
                    asked = true;
                    conn.as_mut().graceful_shutdown();
                }
                _ = tick.tick(), if !asked => {
                    if !busy.swap(false, Ordering::Relaxed) {
                        asked = true;
                        conn.as_mut().graceful_shutdown();
                    }
                }
            }
        }
    }
}

/// hyper's timer, for the header-read timeout only, at a coarse grain.
///
/// hyper arms the timeout for every request head (so also between keep-alive requests) and
/// drops it once the head is in. On tokio's timer that is an entry put in the timer wheel and
/// taken out again under the driver's lock (shared by the workers), per request: about 350
/// instructions of a message echo's 49,000 by callgrind, beside the lock. Here a sleep costs nothing
/// until it is polled; polled (hyper waits for a head), it leaves a weak reference to its
/// waker in a list that one task per listener sweeps every `tick`, waking those past their
/// deadline and forgetting those dropped. A timeout fires up to one tick late.
#[derive(Clone)]
struct CoarseTimer(Arc<Waiting>);

/// The sleeps waiting for their deadline (weak: a dropped one is forgotten at the next sweep).
#[derive(Default)]
struct Waiting(std::sync::Mutex<Vec<std::sync::Weak<Slot>>>);

struct Slot {
    deadline: std::time::Instant,
    fired: std::sync::atomic::AtomicBool,
    waker: futures_util::task::AtomicWaker,
}

impl CoarseTimer {
    /// A timer for a timeout of `timeout`: swept every eighth of it, between 10 ms and 1 s.
    /// Needs a Tokio runtime (the sweeping task's).
    fn new(timeout: Duration) -> CoarseTimer {
        let waiting = Arc::new(Waiting::default());
        let tick = (timeout / 8).clamp(Duration::from_millis(10), Duration::from_secs(1));
        tokio::spawn(sweep(Arc::downgrade(&waiting), tick));
        CoarseTimer(waiting)
    }
}

impl Waiting {
    fn list(&self) -> std::sync::MutexGuard<'_, Vec<std::sync::Weak<Slot>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Wakes the sleeps past their deadline every `tick`, until the timer is gone.
async fn sweep(waiting: std::sync::Weak<Waiting>, tick: Duration) {
    use std::sync::atomic::Ordering;
    let mut every = tokio::time::interval(tick);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let Some(waiting) = waiting.upgrade() else {
            return;
        };
        let mut list = std::mem::take(&mut *waiting.list());
        let now = std::time::Instant::now();
        list.retain(|w| match w.upgrade() {
            None => false,
            Some(slot) if slot.deadline <= now => {
                slot.fired.store(true, Ordering::Release);
                slot.waker.wake();
                false
            }
            Some(_) => true,
        });
        waiting.list().append(&mut list);
    }
}

impl hyper::rt::Timer for CoarseTimer {
    fn sleep(&self, duration: Duration) -> std::pin::Pin<Box<dyn hyper::rt::Sleep>> {
        self.sleep_until(std::time::Instant::now() + duration)
    }

    fn sleep_until(
        &self,
        deadline: std::time::Instant,
    ) -> std::pin::Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(CoarseSleep {
            deadline,
            waiting: self.0.clone(),
            slot: None,
        })
    }
}

struct CoarseSleep {
    deadline: std::time::Instant,
    waiting: Arc<Waiting>,
    /// Made when first polled.
    slot: Option<Arc<Slot>>,
}

impl hyper::rt::Sleep for CoarseSleep {}

impl Future for CoarseSleep {
    type Output = ();

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        use std::sync::atomic::Ordering;
        let this = self.get_mut();
        let slot = match &this.slot {
            Some(slot) => slot,
            None => {
                let slot = Arc::new(Slot {
                    deadline: this.deadline,
                    fired: std::sync::atomic::AtomicBool::new(false),
                    waker: futures_util::task::AtomicWaker::new(),
                });
                this.waiting.list().push(Arc::downgrade(&slot));
                this.slot.insert(slot)
            }
        };
        slot.waker.register(cx.waker());
        // Checked after registering: a sweep between the two still wakes this task.
        if slot.fired.load(Ordering::Acquire) {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    }
}

/// The host names a listener bound to `bind_host` should answer when it is a loopback address
/// (`localhost`, `127.0.0.1`, `[::1]` and `bind_host` itself); `None` for other listeners,
/// whose names the operator knows and a guard would only get wrong.
pub fn loopback_hosts(bind_host: &str) -> Option<Vec<String>> {
    let h = bind_host.trim_start_matches('[').trim_end_matches(']');
    let loopback = h.eq_ignore_ascii_case("localhost")
        || h.parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    loopback.then(|| {
        let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "[::1]"]
            .into_iter()
            .map(str::to_owned)
            .collect();
        if !hosts.iter().any(|x| x.eq_ignore_ascii_case(bind_host)) {
            hosts.push(bind_host.to_owned());
        }
        hosts
    })
}

/// `router` answering only requests whose `Host` (without its port, case-insensitive; IPv6 in
/// brackets) is one of `hosts`; others get 421 Misdirected Request.
pub fn host_guard(router: axum::Router, hosts: &[String]) -> axum::Router {
    let hosts: Arc<[String]> = hosts.iter().map(|h| h.to_ascii_lowercase()).collect();
    router.layer(axum::middleware::from_fn(
        move |req: axum::extract::Request, next: axum::middleware::Next| {
            let hosts = hosts.clone();
            async move {
                // HTTP/2 (gRPC) carries the host as the request's `:authority`, not a header.
                let host = req
                    .headers()
                    .get(header::HOST)
                    .and_then(|h| h.to_str().ok())
                    .or_else(|| req.uri().authority().map(|a| a.as_str()))
                    .map(|h| host_name(h).to_ascii_lowercase());
                match host {
                    Some(h) if hosts.contains(&h) => next.run(req).await,
                    _ => (
                        StatusCode::MISDIRECTED_REQUEST,
                        "this server does not answer for that Host",
                    )
                        .into_response(),
                }
            }
        },
    ))
}

/// `name` of a `Host` value or authority `name[:port]` (`[v6]` keeps its brackets).
pub fn host_name(host: &str) -> &str {
    match host.rfind(':') {
        Some(i) if !host[i..].contains(']') => &host[..i],
        _ => host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_without_ports() {
        assert_eq!(host_name("localhost:8080"), "localhost");
        assert_eq!(host_name("[::1]:80"), "[::1]");
        assert_eq!(host_name("[::1]"), "[::1]");
        assert_eq!(host_name("example.com"), "example.com");
    }

    #[test]
    fn only_loopback_listeners_get_a_list() {
        assert!(loopback_hosts("0.0.0.0").is_none());
        assert!(loopback_hosts("10.0.0.5").is_none());
        let l = loopback_hosts("127.0.0.1").unwrap();
        assert!(l.contains(&"localhost".to_owned()) && l.contains(&"[::1]".to_owned()));
        assert!(loopback_hosts("[::1]").is_some());
        assert!(loopback_hosts("LOCALHOST").is_some());
    }

    /// A sleep fires once past its deadline (within a tick), not before; a dropped one is
    /// forgotten by the next sweep.
    #[tokio::test]
    async fn coarse_sleeps_fire_after_their_deadline_and_are_forgotten_when_dropped() {
        use futures_util::FutureExt as _;
        use hyper::rt::Timer as _;
        let timer = CoarseTimer::new(Duration::from_millis(80));
        let start = std::time::Instant::now();
        let short = timer.sleep(Duration::from_millis(30));
        let mut long = timer.sleep(Duration::from_secs(60));
        // Polled once: registered, pending.
        assert!(long.as_mut().now_or_never().is_none());
        assert_eq!(timer.0.list().len(), 1);
        tokio::time::timeout(Duration::from_secs(5), short)
            .await
            .expect("the short sleep fires");
        let waited = start.elapsed();
        assert!(
            waited >= Duration::from_millis(30),
            "fired early: {waited:?}"
        );
        assert!(long.as_mut().now_or_never().is_none());
        drop(long);
        // The next sweep drops the dead entry.
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert_eq!(timer.0.list().len(), 0);
    }
}
