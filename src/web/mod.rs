//! The HTTP endpoint: `/metrics` (collected at scrape time, no background
//! polling, gzip when asked), the landing page with the resolution table,
//! `/-/healthy`, `/-/ready` and `/-/reload`. Start-up, reload and signals
//! belong to [`crate::app`], which builds a [`State`] and calls [`serve`].
//!
//! Hardening:
//!
//! * **Web config** ([`config`]): exporter-toolkit's `--web.config.file`:
//!   HTTPS with rustls (client certificates, versions, suites), basic
//!   auth with bcrypt hashes (`web::auth`), extra response headers, a rate
//!   limit. Read at start (a bad file ends the start-up) and on reload
//!   ([`State::set_web_config`]).
//! * **Limits.** At most `--web.max-connections` open connections (more
//!   wait in the kernel's accept queue) and `--web.max-requests` scrapes
//!   in flight (more get 503); `/api/v1/snapshot` has a bound of its own
//!   ([`MAX_SNAPSHOTS`], intervals up to 10s), so that scrapes never wait
//!   behind the live API; a `/api/v1/stream` upgrade from a browser page
//!   of another origin gets 403 ([`origin`]); concurrent scrapes share one collection
//!   (one `read()` per group serves them all); request headers must
//!   arrive within `--web.read-header-timeout` (slowloris), also between
//!   keep-alive requests and for the TLS handshake; a scrape is bounded by
//!   `--web.request-timeout`, and so is a client that stops reading its
//!   response; headers are capped at 16 KiB and request bodies at
//!   64 KiB; only GET and HEAD on the metric, landing and health paths,
//!   404 elsewhere; HTTP/2 with prior knowledge gets a GOAWAY
//!   (`HTTP_1_1_REQUIRED`), not a silent close. `/-/healthy` answers 503
//!   while a collection has run longer than `--web.request-timeout` (no
//!   scrape can succeed).
//! * **Shutdown.** When the shutdown future given to [`serve`] completes,
//!   the server stops accepting, lets requests in flight finish for up to
//!   half a second, and returns.

mod auth;
pub mod config;
mod io;
pub mod x509;

mod collect;
pub mod gzip;
mod h2;
mod landing;
pub mod origin;
mod process;
mod profile;
pub use profile::{
    ProfileFormat, ProfileRequest, Profiler, DEFAULT_PROFILE_SECS, MAX_PROFILE_HZ, MAX_PROFILE_SECS,
};
mod reload;
mod routes;
mod scrape;
pub use scrape::{self_metrics, SelfMetric};
mod stream;
mod stream_ws;

pub use landing::{causes, reasons};
pub use reload::{ReloadError, Reloaded};

use crate::engine::Engine;
use crate::export::otlp::ExportStats;
use auth::{Backoff, BasicAuth, RateLimiter};
use collect::Flight;
use config::WebConfig;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use io::StallTimeout;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Request headers (start line included) larger than this get 431.
const MAX_HEADER_BYTES: usize = 16 * 1024;
/// Requests announcing a larger body get 413 (no endpoint reads one).
const MAX_BODY_BYTES: u64 = 64 * 1024;
/// How long requests in flight may finish after shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);

/// Errors of the web layer.
#[derive(Debug, thiserror::Error)]
pub enum WebError {
    /// The listen address does not parse.
    #[error("--web.listen-address `{0}` is not HOST:PORT or :PORT")]
    Address(String),
    /// Binding failed.
    #[error("cannot listen on {addr}: {err}")]
    Bind {
        /// The address.
        addr: String,
        /// The OS error (in the message, not a separate cause, so it is
        /// printed once).
        err: std::io::Error,
    },
}

/// `POST /-/reload`: the application's one reload path.
pub trait Lifecycle: Send + Sync + std::fmt::Debug {
    /// Asks for a reload; resolves to the outcome of a reload that began
    /// after the request (a summary, or why it was refused).
    fn reload(&self) -> Pin<Box<dyn Future<Output = Reloaded> + Send>>;
}

/// What the server needs.
#[derive(Debug)]
pub struct Options {
    /// The engine, shared with the OTLP push and swapped by reloads.
    pub engine: Arc<Mutex<Engine>>,
    /// `--web.telemetry-path`.
    pub telemetry_path: String,
    /// `--web.route-prefix` without its trailing `/` (empty: none).
    pub route_prefix: String,
    /// Whether the PMU is simulated (build info, landing page).
    pub simulated: bool,
    /// The config's name for the landing page.
    pub config_name: String,
    /// OTLP export results, when the push runs.
    pub otlp: Option<Arc<ExportStats>>,
    /// `--web.config.file`, loaded (TLS, auth, headers); default: none.
    pub web_config: WebConfig,
    /// `--web.max-requests` (0: no limit).
    pub max_requests: usize,
    /// `--web.max-connections` (0: no limit).
    pub max_connections: usize,
    /// `--web.max-streams`: open `/api/v1/stream` WebSockets (0: no limit).
    pub max_streams: usize,
    /// The exporter's families about itself: its HTTP server's and its
    /// process's (off with `--web.disable-exporter-metrics`).
    pub exporter_metrics: bool,
    /// `--web.allowed-origins`: origins besides the exporter's own whose
    /// pages may open `/api/v1/stream` ([`origin::normalize`]d).
    pub allowed_origins: Vec<String>,
    /// `--web.read-header-timeout`.
    pub read_header_timeout: Duration,
    /// `--web.request-timeout`.
    pub request_timeout: Duration,
    /// `--path.procfs`: the process metrics read `self/` under it.
    pub procfs: std::path::PathBuf,
}

#[cfg(test)]
impl Options {
    /// A test server's options over `engine`: simulated, without limits,
    /// OTLP or a web config file, the config named `test`, the process
    /// metrics read under a procfs that does not exist.
    pub(crate) fn for_tests(engine: Arc<Mutex<Engine>>) -> Self {
        Options {
            engine,
            telemetry_path: "/metrics".into(),
            route_prefix: String::new(),
            simulated: true,
            config_name: "test".into(),
            otlp: None,
            web_config: WebConfig::default(),
            max_requests: 0,
            max_connections: 0,
            max_streams: 0,
            exporter_metrics: true,
            allowed_origins: Vec::new(),
            read_header_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(10),
            procfs: "/nonexistent/proc".into(),
        }
    }
}

/// The web config as served: the file plus its auth and rate limiter.
#[derive(Debug)]
struct WebRuntime {
    config: WebConfig,
    /// Kept across reloads that leave the users as they were (and with
    /// it the verification cache).
    auth: Option<Arc<BasicAuth>>,
    /// One bcrypt verification on a blocking thread at a time; the others
    /// wait here, holding no thread (a flood of wrong passwords must not
    /// take every blocking thread), at most
    /// [`BCRYPT_QUEUE`] of them and for at most `--web.request-timeout`.
    bcrypt_gate: Semaphore,
    /// Requests waiting at the gate.
    bcrypt_waiting: AtomicUsize,
    /// How long the last verification took, in microseconds (for the
    /// `Retry-After` of a refusal when the queue is full).
    bcrypt_micros: AtomicU64,
    limiter: Option<RateLimiter>,
}

/// `/api/v1/snapshot` requests in flight; more get 503 at once. Their
/// own bound, apart from `--web.max-requests`: a snapshot holds its slot
/// for its whole interval, and scrapes must never wait behind the live
/// API.
pub(crate) const MAX_SNAPSHOTS: usize = 4;

/// Requests that may wait for a bcrypt verification at once; more are
/// refused at once with 503 and `Retry-After` (not 401: their
/// credentials were not found wrong), counted as `auth_busy`. Credentials
/// verified before never wait here: their cached verdict answers first.
const BCRYPT_QUEUE: usize = 16;

impl WebRuntime {
    fn new(config: WebConfig, previous: Option<&WebRuntime>) -> Self {
        let auth = match previous {
            Some(p) if p.config.users == config.users => p.auth.clone(),
            _ => BasicAuth::new(&config.users).map(Arc::new),
        };
        WebRuntime {
            bcrypt_gate: Semaphore::new(1),
            bcrypt_waiting: AtomicUsize::new(0),
            bcrypt_micros: AtomicU64::new(0),
            auth,
            limiter: config
                .rate_limit
                .map(|r| RateLimiter::new(r.interval, r.burst)),
            config,
        }
    }
}

/// Why a request is turned away, for `perf_http_rejected_requests_total`.
#[derive(Debug, Clone, Copy)]
enum Reject {
    /// Over `--web.max-requests`.
    MaxRequests = 0,
    /// Over the web config's rate limit, or backed off after failed
    /// logins.
    RateLimit = 1,
    /// Missing or wrong credentials.
    Unauthorized = 2,
    /// A collection over `--web.request-timeout`.
    Timeout = 3,
    /// Credentials not verified: the bcrypt queue was full (503, not
    /// 401: nothing said they were wrong).
    AuthBusy = 4,
}

/// The `reason` label of each [`Reject`], in its order.
const REJECT_REASONS: [&str; 5] = [
    "max_requests",
    "rate_limit",
    "unauthorized",
    "timeout",
    "auth_busy",
];

/// Why the server closed a live-view stream: the `reason` label of
/// `perf_live_streams_closed_total`, in the order of the stream hub's
/// counts: more than 4 frames in flight or a write blocked for 3
/// intervals; no ping echoed for 3 intervals (at least 5 s); a reload
/// revoked its login; the viewer broke the protocol (see `stream`).
const CLOSE_REASONS: [&str; 4] = ["too_slow", "no_echo", "revoked", "protocol"];

/// Shared state of the server.
#[derive(Debug)]
pub struct State {
    /// Shared with the OTLP push, which collects through the same engine;
    /// a reload swaps the engine inside the lock.
    engine: Arc<Mutex<Engine>>,
    /// The collection in progress, which concurrent scrapes join.
    flight: Mutex<Option<Flight>>,
    /// When the collection in progress began (for `/-/healthy`).
    flight_started: Mutex<Option<Instant>>,
    /// The collector thread's queue (see `collect`).
    collector: OnceLock<std::sync::mpsc::Sender<collect::Job>>,
    /// The size of the last response, to allocate the next one at once.
    last_len: AtomicUsize,
    /// How long the last scrape's collection took, its body included, in
    /// nanoseconds (`u64::MAX` before the first): whether the next one
    /// runs on the scrape's own thread (see `collect`).
    last_took: AtomicU64,
    /// The bound on `last_took` below which a scrape collects on its own
    /// thread, in nanoseconds ([`collect::INLINE_BELOW`]; tests move it).
    inline_below: AtomicU64,
    /// The `/metrics` derived gauges' window (collector thread only).
    derived: Mutex<collect::DerivedGauges>,
    telemetry_path: String,
    simulated: bool,
    config_name: String,
    /// OTLP export results, when the push runs.
    otlp: Option<Arc<ExportStats>>,
    web: RwLock<Arc<WebRuntime>>,
    inflight: Option<Arc<Semaphore>>,
    max_requests: usize,
    /// `POST /-/reload`, with `--web.enable-lifecycle`.
    lifecycle: OnceLock<Arc<dyn Lifecycle>>,
    /// `/api/v1/profile`'s profiler and its one profile in flight.
    profiles: profile::Slot,
    connections: Option<Arc<Semaphore>>,
    /// Open live-view streams, under [`stream_limit`].
    streams: Option<Arc<Semaphore>>,
    max_streams: usize,
    /// Bumped by each web config change: open streams check that their
    /// login still holds ([`State::login_holds`]).
    web_changes: tokio::sync::watch::Sender<u64>,
    /// `--web.allowed-origins`, normalized.
    allowed_origins: Vec<String>,
    /// Snapshots in flight, under [`MAX_SNAPSHOTS`].
    snapshots: Arc<Semaphore>,
    /// The live view's shared collections.
    hub: stream::Hub,
    /// Set when the server stops: connections finish their request and
    /// close.
    stopping: tokio::sync::watch::Sender<bool>,
    read_header_timeout: Duration,
    request_timeout: Duration,
    rejected: [AtomicU64; 5],
    /// Clients backed off after failed logins (kept across reloads).
    backoff: Backoff,
    /// Whether the last reload succeeded.
    reload_ok: AtomicBool,
    /// Unix time of the last successful (re)load, as f64 bits.
    last_success: AtomicU64,
    /// The process metrics' sources (under `--path.procfs`); `None` with
    /// `--web.disable-exporter-metrics`.
    process: Option<process::Process>,
    /// The families about the exporter itself (its HTTP server, its
    /// process); off with `--web.disable-exporter-metrics`.
    exporter_metrics: bool,
    /// `--web.route-prefix` (empty: none).
    route_prefix: String,
}

impl State {
    /// The server's state.
    pub fn new(o: Options) -> Arc<State> {
        let max_streams = stream_limit(o.max_streams, o.max_connections);
        if max_streams != o.max_streams {
            tracing::info!(
                max_streams,
                max_connections = o.max_connections,
                "live view: open streams limited to half of --web.max-connections, so that scrapes always find a connection"
            );
        }
        Arc::new(State {
            engine: o.engine,
            flight: Mutex::new(None),
            flight_started: Mutex::new(None),
            collector: OnceLock::new(),
            last_len: AtomicUsize::new(0),
            last_took: AtomicU64::new(u64::MAX),
            inline_below: AtomicU64::new(collect::INLINE_BELOW.as_nanos() as u64),
            derived: Mutex::default(),
            telemetry_path: o.telemetry_path,
            process: o.exporter_metrics.then(|| process::Process::new(&o.procfs)),
            exporter_metrics: o.exporter_metrics,
            route_prefix: o.route_prefix,
            simulated: o.simulated,
            config_name: o.config_name,
            otlp: o.otlp,
            web: RwLock::new(Arc::new(WebRuntime::new(o.web_config, None))),
            inflight: (o.max_requests > 0).then(|| Arc::new(Semaphore::new(o.max_requests))),
            max_requests: o.max_requests,
            lifecycle: OnceLock::new(),
            profiles: profile::Slot::default(),
            connections: (o.max_connections > 0)
                .then(|| Arc::new(Semaphore::new(o.max_connections))),
            streams: (max_streams > 0).then(|| Arc::new(Semaphore::new(max_streams))),
            max_streams,
            web_changes: tokio::sync::watch::Sender::new(0),
            allowed_origins: o.allowed_origins,
            snapshots: Arc::new(Semaphore::new(MAX_SNAPSHOTS)),
            hub: stream::Hub::default(),
            stopping: tokio::sync::watch::Sender::new(false),
            read_header_timeout: o.read_header_timeout,
            request_timeout: o.request_timeout,
            rejected: Default::default(),
            backoff: Backoff::default(),
            reload_ok: AtomicBool::new(true),
            last_success: AtomicU64::new(unix_now().to_bits()),
        })
    }

    /// Enables `POST /-/reload` (`--web.enable-lifecycle`).
    pub fn set_lifecycle(&self, l: Arc<dyn Lifecycle>) {
        let _ = self.lifecycle.set(l);
    }

    /// Enables `GET /api/v1/profile`.
    pub fn set_profiler(&self, p: Arc<dyn Profiler>) {
        self.profiles.set(p);
    }

    /// Serves a new web config from the next connection and request on.
    /// Open streams whose login the new config revokes are closed.
    pub fn set_web_config(&self, w: WebConfig) {
        {
            let mut g = self.web.write().unwrap_or_else(PoisonError::into_inner);
            let new = WebRuntime::new(w, Some(&g));
            *g = Arc::new(new);
        }
        self.web_changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Whether a stream opened with `login` (the user and the hash its
    /// password was verified against; `None`: no credentials were
    /// needed) may stay open under the web config now served: no auth, or
    /// the same user with the same hash.
    fn login_holds(&self, login: Option<&(String, String)>) -> bool {
        let web = self.web();
        if web.auth.is_none() {
            return true;
        }
        login.is_some_and(|(user, hash)| web.config.users.get(user) == Some(hash))
    }

    /// Records a reload's outcome for `perf_config_last_reload_successful`
    /// (and its timestamp). After a successful one, the next scrape's
    /// collection runs on the collector thread: the new config's cost is
    /// not known yet.
    pub fn record_reload(&self, ok: bool) {
        self.reload_ok.store(ok, Ordering::Relaxed);
        if ok {
            self.last_took.store(u64::MAX, Ordering::Relaxed);
            if let Some(p) = &self.process {
                p.reread_limits();
            }
            self.last_success
                .store(unix_now().to_bits(), Ordering::Relaxed);
        }
    }
}

/// The bound of open streams: `--web.max-streams` (0: none), but at most
/// half of `--web.max-connections` (at least 1) when that is set, since
/// each stream holds a connection: streams never take every connection
/// from the scrapes.
fn stream_limit(max_streams: usize, max_connections: usize) -> usize {
    if max_connections == 0 {
        return max_streams;
    }
    let half = (max_connections / 2).max(1);
    match max_streams {
        0 => half,
        n => n.min(half),
    }
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Parses `:9659`, `0.0.0.0:9659`, `[::1]:9659`, `localhost:9659`.
fn parse_listen(s: &str) -> Result<Vec<SocketAddr>, WebError> {
    let bad = || WebError::Address(s.into());
    if let Some(port) = s.strip_prefix(':') {
        let port: u16 = port.parse().map_err(|_| bad())?;
        return Ok(vec![
            SocketAddr::from(([0, 0, 0, 0, 0, 0, 0, 0], port)),
            SocketAddr::from(([0, 0, 0, 0], port)),
        ]);
    }
    use std::net::ToSocketAddrs;
    let v: Vec<SocketAddr> = s.to_socket_addrs().map_err(|_| bad())?.collect();
    if v.is_empty() {
        return Err(bad());
    }
    Ok(v)
}

/// Binds the first of the listen address's addresses that works.
pub async fn bind(listen: &str, telemetry_path: &str) -> Result<tokio::net::TcpListener, WebError> {
    let addrs = parse_listen(listen)?;
    let mut last_err = None;
    for a in &addrs {
        match tokio::net::TcpListener::bind(a).await {
            Ok(l) => {
                match l.local_addr() {
                    Ok(a) => tracing::info!(address = %a, path = %telemetry_path, "listening"),
                    Err(_) => {
                        tracing::info!(address = %listen, path = %telemetry_path, "listening")
                    }
                }
                return Ok(l);
            }
            Err(e) => last_err = Some(e),
        }
    }
    Err(WebError::Bind {
        addr: listen.to_string(),
        err: last_err.unwrap_or_else(|| std::io::Error::other("no address")),
    })
}

/// Serves connections until `shutdown` completes, then lets requests in
/// flight finish for up to half a second.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<State>,
    shutdown: impl Future<Output = ()>,
) {
    let graceful = GracefulShutdown::new();
    accept_loop(listener, state.clone(), shutdown, &graceful).await;
    // Connections close after the request in flight (see serve_http).
    state.stopping.send_replace(true);
    tracing::info!("shutting down");
    tokio::select! {
        _ = graceful.shutdown() => {}
        _ = tokio::time::sleep(SHUTDOWN_GRACE) => {
            tracing::info!(grace_ms = SHUTDOWN_GRACE.as_millis() as u64, "requests still in flight after the grace period; closing them");
        }
    }
}

async fn accept_loop(
    listener: tokio::net::TcpListener,
    state: Arc<State>,
    shutdown: impl Future<Output = ()>,
    graceful: &GracefulShutdown,
) {
    tokio::pin!(shutdown);
    let mut backoff = Duration::from_millis(5);
    let mut last_warn: Option<Instant> = None;
    loop {
        // Over --web.max-connections, further connections wait in the
        // kernel's accept queue until one closes.
        let slot = match &state.connections {
            Some(sem) => tokio::select! {
                _ = &mut shutdown => break,
                p = sem.clone().acquire_owned() => p.ok(),
            },
            None => None,
        };
        tokio::select! {
            _ = &mut shutdown => break,
            acc = listener.accept() => match acc {
                Ok((stream, peer)) => {
                    backoff = Duration::from_millis(5);
                    let st = state.clone();
                    let watcher = graceful.watcher();
                    tokio::spawn(connection(st, stream, peer, watcher, slot));
                }
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    if last_warn.is_none_or(|t| t.elapsed() > Duration::from_secs(60)) {
                        tracing::warn!(error = %e, "accept failed (out of file descriptors?); backing off");
                        last_warn = Some(Instant::now());
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                }
            },
        }
    }
}

/// A connection's `--web.max-connections` slot, until the connection
/// ends or a WebSocket upgrade takes it: an open stream is an open
/// connection, and holds its slot until it closes.
#[derive(Debug, Clone, Default)]
struct ConnSlot(Arc<Mutex<Option<OwnedSemaphorePermit>>>);

impl ConnSlot {
    /// The slot, for an upgraded connection to hold.
    fn take(&self) -> Option<OwnedSemaphorePermit> {
        crate::bounded::lock(&self.0).take()
    }
}

/// One connection (holding `slot` until it ends, or until an upgrade
/// takes it): the TLS handshake (bounded by the header timeout) when TLS
/// is on, then HTTP/1.1.
async fn connection(
    st: Arc<State>,
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    watcher: Watcher,
    slot: Option<OwnedSemaphorePermit>,
) {
    let slot = ConnSlot(Arc::new(Mutex::new(slot)));
    let _ = stream.set_nodelay(true);
    let tls = st.web().config.tls.clone();
    match tls {
        None => {
            // Bounded like a request's headers (a client that sends
            // nothing is closed by the header timeout either way).
            let h2 = tokio::time::timeout(st.read_header_timeout, h2::is_prior_knowledge(&stream));
            if h2.await.unwrap_or(false) {
                tracing::debug!(%peer, "HTTP/2 prior knowledge refused (HTTP/1.1 only)");
                return h2::refuse(stream).await;
            }
            serve_http(st, stream, peer, watcher, slot).await
        }
        Some(tls) => {
            let acceptor = tokio_rustls::TlsAcceptor::from(tls.server);
            match tokio::time::timeout(st.read_header_timeout, acceptor.accept(stream)).await {
                Ok(Ok(s)) => serve_http(st, s, peer, watcher, slot).await,
                Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
            }
        }
    }
}

async fn serve_http<S>(st: Arc<State>, io: S, peer: SocketAddr, watcher: Watcher, slot: ConnSlot)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let stopping = st.stopping.subscribe();
    let io = TokioIo::new(StallTimeout::new(io, st.request_timeout));
    let header_timeout = st.read_header_timeout;
    let svc = hyper::service::service_fn(move |mut req: hyper::Request<_>| {
        let st = st.clone();
        req.extensions_mut().insert(slot.clone());
        async move { Ok::<_, std::convert::Infallible>(routes::handle(st, req, peer.ip()).await) }
    });
    let mut b = hyper::server::conn::http1::Builder::new();
    b.timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .max_buf_size(64 * 1024)
        .max_header_size(MAX_HEADER_BYTES)
        .keep_alive(true);
    // Upgrades: the live view's WebSocket (`/api/v1/stream`). hyper-util's
    // `Watcher::watch` takes no upgradeable connection, so the graceful
    // close is done here; the watcher, held until the connection ends,
    // still tells `serve` when every connection has.
    let mut stopping = stopping;
    let conn = b.serve_connection(io, svc).with_upgrades();
    tokio::pin!(conn);
    let r = tokio::select! {
        r = conn.as_mut() => r,
        _ = async { stopping.wait_for(|s| *s).await.map(|_| ()) } => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    drop(watcher);
    if let Err(e) = r {
        tracing::debug!(error = %e, "connection closed");
    }
}

impl State {
    fn web(&self) -> Arc<WebRuntime> {
        match self.web.read() {
            Ok(w) => w.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    fn reject(&self, reason: Reject) {
        if let Some(c) = self.rejected.get(reason as usize) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::stream_limit;

    /// Issue 28 item 14: `--web.max-streams 0` let 300 streams through
    /// against `--web.max-connections 4`.
    #[test]
    fn streams_take_at_most_half_of_the_connections() {
        assert_eq!(stream_limit(0, 4), 2);
        assert_eq!(stream_limit(64, 4), 2);
        assert_eq!(stream_limit(1, 4), 1);
        assert_eq!(stream_limit(64, 512), 64);
        assert_eq!(stream_limit(0, 512), 256);
        assert_eq!(stream_limit(5, 1), 1);
        // No connection bound: the flag's, none included.
        assert_eq!(stream_limit(7, 0), 7);
        assert_eq!(stream_limit(0, 0), 0);
    }
}
