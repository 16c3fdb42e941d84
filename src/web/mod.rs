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
use tokio::sync::Semaphore;

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
    limiter: Option<RateLimiter>,
}

/// `/api/v1/snapshot` requests in flight; more get 503 at once. Their
/// own bound, apart from `--web.max-requests`: a snapshot holds its slot
/// for its whole interval, and scrapes must never wait behind the live
/// API.
pub(crate) const MAX_SNAPSHOTS: usize = 4;

/// Requests that may wait for a bcrypt verification at once; more are
/// refused (401) at once.
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
            auth,
            limiter: config
                .rate_limit
                .map(|r| RateLimiter::new(r.interval, r.burst)),
            config,
        }
    }
}

/// Reasons a request is turned away, for `perf_http_rejected_requests_total`.
const REJECT_REASONS: [&str; 4] = ["max_requests", "rate_limit", "unauthorized", "timeout"];

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
    connections: Option<Arc<Semaphore>>,
    /// Open live-view streams, under `--web.max-streams`.
    streams: Option<Arc<Semaphore>>,
    max_streams: usize,
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
    rejected: [AtomicU64; 4],
    /// Clients backed off after failed logins (kept across reloads).
    backoff: Backoff,
    /// Whether the last reload succeeded.
    reload_ok: AtomicBool,
    /// Unix time of the last successful (re)load, as f64 bits.
    last_success: AtomicU64,
    /// The process metrics' sources (under `--path.procfs`).
    process: process::Process,
    /// `--web.route-prefix` (empty: none).
    route_prefix: String,
}

impl State {
    /// The server's state.
    pub fn new(o: Options) -> Arc<State> {
        Arc::new(State {
            engine: o.engine,
            flight: Mutex::new(None),
            flight_started: Mutex::new(None),
            collector: OnceLock::new(),
            last_len: AtomicUsize::new(0),
            telemetry_path: o.telemetry_path,
            process: process::Process::new(&o.procfs),
            route_prefix: o.route_prefix,
            simulated: o.simulated,
            config_name: o.config_name,
            otlp: o.otlp,
            web: RwLock::new(Arc::new(WebRuntime::new(o.web_config, None))),
            inflight: (o.max_requests > 0).then(|| Arc::new(Semaphore::new(o.max_requests))),
            max_requests: o.max_requests,
            lifecycle: OnceLock::new(),
            connections: (o.max_connections > 0)
                .then(|| Arc::new(Semaphore::new(o.max_connections))),
            streams: (o.max_streams > 0).then(|| Arc::new(Semaphore::new(o.max_streams))),
            max_streams: o.max_streams,
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

    /// Serves a new web config from the next connection and request on.
    pub fn set_web_config(&self, w: WebConfig) {
        let mut g = self.web.write().unwrap_or_else(PoisonError::into_inner);
        let new = WebRuntime::new(w, Some(&g));
        *g = Arc::new(new);
    }

    /// Records a reload's outcome for `perf_config_last_reload_successful`
    /// (and its timestamp).
    pub fn record_reload(&self, ok: bool) {
        self.reload_ok.store(ok, Ordering::Relaxed);
        if ok {
            self.process.reread_limits();
            self.last_success
                .store(unix_now().to_bits(), Ordering::Relaxed);
        }
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
                    tokio::spawn(async move {
                        connection(st, stream, peer, watcher).await;
                        drop(slot);
                    });
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

/// One connection: the TLS handshake (bounded by the header timeout) when
/// TLS is on, then HTTP/1.1.
async fn connection(
    st: Arc<State>,
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    watcher: Watcher,
) {
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
            serve_http(st, stream, peer, watcher).await
        }
        Some(tls) => {
            let acceptor = tokio_rustls::TlsAcceptor::from(tls.server);
            match tokio::time::timeout(st.read_header_timeout, acceptor.accept(stream)).await {
                Ok(Ok(s)) => serve_http(st, s, peer, watcher).await,
                Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
            }
        }
    }
}

async fn serve_http<S>(st: Arc<State>, io: S, peer: SocketAddr, watcher: Watcher)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let stopping = st.stopping.subscribe();
    let io = TokioIo::new(StallTimeout::new(io, st.request_timeout));
    let header_timeout = st.read_header_timeout;
    let svc = hyper::service::service_fn(move |req| {
        let st = st.clone();
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

    fn reject(&self, reason: usize) {
        if let Some(c) = self.rejected.get(reason) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }
}
