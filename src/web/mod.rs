//! The HTTP endpoint: `/metrics` (collected at scrape time, no background
//! polling), the landing page with the resolution table, `/-/healthy`,
//! `/-/ready` and `/-/reload`; and the OTLP push
//! ([`crate::export::otlp`]) beside it or alone (`--otlp.only`), on the
//! same engine.
//!
//! Hardening:
//!
//! * **Web config** ([`config`]): exporter-toolkit's `--web.config.file`:
//!   HTTPS with rustls (client certificates, versions, suites), basic
//!   auth with bcrypt hashes ([`auth`]), extra response headers, a rate
//!   limit. Read at start (a bad file ends the start-up) and on reload.
//! * **Limits.** At most `--web.max-requests` scrapes in flight (more get
//!   503); concurrent scrapes share one collection (one `read()` per
//!   group serves them all); request headers must arrive within
//!   `--web.read-header-timeout` (slowloris), also between keep-alive
//!   requests and for the TLS handshake; a scrape is bounded by
//!   `--web.request-timeout`, and so is a client that stops reading its
//!   response; headers are capped at 16 KiB and request bodies at
//!   64 KiB; only GET and HEAD on the metric, landing and health paths,
//!   404 elsewhere.
//! * **Reload** (SIGHUP, or `POST /-/reload` with
//!   `--web.enable-lifecycle`): the config and the web config are read
//!   again and the engine is swapped under its lock; metrics that count
//!   the same events keep their totals ([`Engine::carry_over`]). An
//!   invalid new config is refused, the old one keeps serving, and
//!   `perf_config_last_reload_successful` goes to 0.
//! * **Shutdown.** SIGTERM/SIGINT stop accepting, let requests in flight
//!   finish for up to half a second, and exit.

pub mod auth;
pub mod config;
pub mod io;
pub mod x509;

use crate::config::{Config, ConfigError};
use crate::engine::Engine;
use crate::export::otlp::{self, ExportStats, OtlpSettings, Pusher};
use crate::export::prometheus;
use crate::perf::Kernel;
use crate::pmu::{PmuError, PmuTable};
use crate::privilege::Privilege;
use crate::probe::prober;
use crate::problem::Class;
use crate::resolve::chain::{resolve_config, Resolution, Status};
use crate::resolve::Context;
use crate::snapshot::{Family, Kind, Sample, Snapshot};
use auth::{parse_basic, BasicAuth, RateLimiter};
use config::{WebConfig, WebConfigError};
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ALLOW, AUTHORIZATION, CONNECTION, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use io::{Body, StallTimeout};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::{watch, Semaphore};

/// Request headers (start line included) larger than this get 431.
pub const MAX_HEADER_BYTES: usize = 16 * 1024;
/// Requests announcing a larger body get 413 (no endpoint reads one).
pub const MAX_BODY_BYTES: u64 = 64 * 1024;
/// How long requests in flight may finish after SIGTERM.
pub const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);
/// File descriptors kept free for connections while the engine opens its
/// counters, so an fd-starved engine never starves the listener.
pub const FD_RESERVE: usize = 16;

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
    /// Nothing can be counted at all.
    #[error("nothing can be counted on this host: {0}")]
    NothingToCount(String),
    /// The OTLP push could not start.
    #[error(transparent)]
    Otlp(#[from] otlp::OtlpError),
    /// The async runtime or a signal handler failed to start.
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
}

/// Why a reload was refused (the old config keeps serving).
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The config file is invalid or unreadable.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The web config file is invalid or unreadable.
    #[error("--web.config.file: {0}")]
    WebConfig(#[from] WebConfigError),
    /// PMU discovery failed.
    #[error("PMU discovery: {0}")]
    Pmu(#[from] PmuError),
    /// Not one metric of the new config resolves here.
    #[error("nothing in the new config can be counted on this host: {0}")]
    NothingToCount(String),
}

/// What `serve` needs.
#[derive(Debug)]
pub struct Options {
    /// The config.
    pub config: Config,
    /// Where it came from (None: embedded default).
    pub config_file: Option<PathBuf>,
    /// The PMU table.
    pub table: PmuTable,
    /// Resolution context.
    pub ctx: Context,
    /// The kernel (live or simulated).
    pub kernel: Arc<dyn Kernel>,
    /// `--web.listen-address`.
    pub listen: String,
    /// `--web.telemetry-path`.
    pub telemetry_path: String,
    /// `--path.procfs`.
    pub procfs: PathBuf,
    /// OTLP push, when configured (`--otlp.only` in it: no listener).
    pub otlp: Option<OtlpSettings>,
    /// `--web.config.file`, loaded (TLS, auth, headers); default: none.
    pub web_config: WebConfig,
    /// `--web.max-requests` (0: no limit).
    pub max_requests: usize,
    /// `--web.enable-lifecycle`: `POST /-/reload`.
    pub enable_lifecycle: bool,
    /// `--web.read-header-timeout`.
    pub read_header_timeout: Duration,
    /// `--web.request-timeout`.
    pub request_timeout: Duration,
    /// `--config.aggregate-cpus`: every set summed over CPUs, also after
    /// a reload.
    pub aggregate_cpus: bool,
}

/// The web config as served: the file plus its auth and rate limiter.
#[derive(Debug)]
struct WebRuntime {
    config: WebConfig,
    auth: Option<BasicAuth>,
    /// One bcrypt verification on a blocking thread at a time; the others
    /// wait here, holding no thread (a flood of wrong passwords must not
    /// take the blocking threads collections need).
    bcrypt_gate: Semaphore,
    limiter: Option<RateLimiter>,
}

impl WebRuntime {
    fn new(config: WebConfig) -> Self {
        WebRuntime {
            bcrypt_gate: Semaphore::new(1),
            auth: BasicAuth::new(&config.users),
            limiter: config
                .rate_limit
                .map(|r| RateLimiter::new(r.interval, r.burst)),
            config,
        }
    }
}

/// One shared collection: the snapshot and how long it took.
#[derive(Debug)]
struct Collected {
    /// The engine's families, shared by every scrape that joined.
    families: Arc<Vec<Family>>,
    secs: f64,
}

type Flight = watch::Receiver<Option<Arc<Collected>>>;

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
    lifecycle: bool,
    read_header_timeout: Duration,
    request_timeout: Duration,
    rejected: [AtomicU64; 4],
    reload: Reloader,
}

/// What a reload needs, and how the last one went.
#[derive(Debug)]
struct Reloader {
    config_file: Option<PathBuf>,
    /// `--config.aggregate-cpus`.
    aggregate_cpus: bool,
    web_config_file: Option<PathBuf>,
    table: PmuTable,
    ctx: Context,
    kernel: Arc<dyn Kernel>,
    /// What this process holds, to diagnose permission errors (live kernel).
    privilege: Option<Privilege>,
    /// One reload at a time.
    lock: Mutex<()>,
    ok: AtomicBool,
    /// Unix time of the last successful (re)load, as f64 bits.
    last_success: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Parses `:9659`, `0.0.0.0:9659`, `[::1]:9659`, `localhost:9659`.
pub fn parse_listen(s: &str) -> Result<Vec<SocketAddr>, WebError> {
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

/// Starts the exporter and serves until SIGINT/SIGTERM.
pub fn run(o: Options) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(16)
        .build()
        .map_err(WebError::Runtime)?;
    let r = rt.block_on(serve(o));
    // A collection still running on a blocking thread does not hold up
    // the exit.
    rt.shutdown_timeout(Duration::from_millis(100));
    r
}

/// Resolves a config on this host, probing each candidate encoding on
/// the kernel.
pub fn resolve_plan(
    config: &Config,
    table: &PmuTable,
    ctx: &Context,
    kernel: &dyn Kernel,
) -> Resolution {
    let probe = prober(kernel);
    resolve_config(config, table, ctx, Some(&probe))
}

/// Opens an engine for a resolution within the fd budget, keeping up to
/// [`FD_RESERVE`] descriptors free for connections.
pub fn open_engine(kernel: Arc<dyn Kernel>, table: PmuTable, res: Resolution) -> Engine {
    crate::engine::open_with_reserve(kernel, table, res, FD_RESERVE)
}

/// Why nothing can be counted, for the start-up error.
fn nothing_to_count(engine: &Engine, privilege: Option<&Privilege>) -> String {
    if engine.resolution().metrics.is_empty() {
        return "the config has no metrics".into();
    }
    // What a user can fix first (permission errors), expected absences last.
    let problems = engine.problems();
    let first = crate::report::explain_first(problems.iter().map(|(m, p)| (m.as_str(), p)), 5);
    match privilege.filter(|p| p.grant().is_none()) {
        Some(p) => format!("{}; the first problems: {first}", p.summary()),
        None => first,
    }
}

async fn serve(o: Options) -> anyhow::Result<ExitCode> {
    // Before anything else: SIGHUP's default action would end the process.
    let signals = Signals::new().map_err(WebError::Runtime)?;
    let simulated = o.kernel.simulated();
    tracing::info!(version = env!("CARGO_PKG_VERSION"), simulated, sysfs = %o.table.sysfs.display(), "starting perf-exporter");
    let privilege = (!simulated).then(|| Privilege::detect(&o.procfs));
    if let Some(p) = &privilege {
        if p.grant().is_some() {
            tracing::info!(privilege = %p.summary(), "privilege");
        } else {
            tracing::warn!(privilege = %p.summary(), "privilege");
        }
    }
    if o.web_config.file.is_some() {
        tracing::info!(web_config = %o.web_config.describe(), "web config");
    }
    for w in &o.web_config.warnings {
        tracing::warn!(warning = %w, "web config");
    }
    let only = o.otlp.as_ref().is_some_and(|s| s.only);
    // Bind first: a listen error ends the start-up before counters open.
    let listener = if only {
        tracing::info!("--otlp.only: no HTTP listener");
        None
    } else {
        Some(bind(&o.listen, &o.telemetry_path).await?)
    };
    let mut res = resolve_plan(&o.config, &o.table, &o.ctx, o.kernel.as_ref());
    if let Some(p) = &privilege {
        crate::report::diagnose(&mut res, p, true);
    }
    let engine = open_engine(o.kernel.clone(), o.table.clone(), res);
    for (metric, reason) in engine.problems() {
        tracing::warn!(%metric, %reason, what_to_do = %reason.what_to_do(), class = reason.class().as_str(), "metric not (fully) available");
    }
    let counted = engine.runtime().iter().filter(|r| r.open_fds > 0).count();
    let (fds, planned) = (engine.open_fds(), engine.planned_fds());
    tracing::info!(
        metrics = engine.runtime().len(),
        counted,
        fds,
        planned,
        "counters open"
    );
    if fds < planned {
        tracing::warn!(
            fds,
            planned,
            "opened {fds} of {planned} planned counters; the warnings above say why (also on the landing page and in perf_event_available)"
        );
    }
    if let Some(p) = &privilege {
        let problems = engine.problems();
        for f in p.report(problems.iter().map(|(m, p)| (m.as_str(), p))) {
            if f.warn {
                tracing::warn!("privilege: {}", f.message);
            } else {
                tracing::info!("privilege: {}", f.message);
            }
        }
    }
    if !engine.counting() {
        return Err(WebError::NothingToCount(nothing_to_count(&engine, privilege.as_ref())).into());
    }
    let engine = Arc::new(Mutex::new(engine));
    // Applies CPU hotplug between scrapes (until `serve` returns).
    let _hotplug = crate::engine::follow_hotplug(&engine);
    let stats = o.otlp.as_ref().map(|_| Arc::new(ExportStats::default()));
    let web_config_file = o.web_config.file.clone();
    let state = Arc::new(State {
        engine: engine.clone(),
        flight: Mutex::new(None),
        last_len: AtomicUsize::new(0),
        telemetry_path: o.telemetry_path.clone(),
        simulated,
        config_name: o
            .config_file
            .as_ref()
            .map_or("<embedded default>".into(), |p| p.display().to_string()),
        otlp: stats.clone(),
        web: RwLock::new(Arc::new(WebRuntime::new(o.web_config))),
        inflight: (o.max_requests > 0).then(|| Arc::new(Semaphore::new(o.max_requests))),
        max_requests: o.max_requests,
        lifecycle: o.enable_lifecycle,
        read_header_timeout: o.read_header_timeout,
        request_timeout: o.request_timeout,
        rejected: Default::default(),
        reload: Reloader {
            config_file: o.config_file,
            aggregate_cpus: o.aggregate_cpus,
            web_config_file,
            table: o.table,
            ctx: o.ctx,
            kernel: o.kernel,
            privilege,
            lock: Mutex::new(()),
            ok: AtomicBool::new(true),
            last_success: AtomicU64::new(unix_now().to_bits()),
        },
    });
    let pusher = match (o.otlp, stats) {
        (Some(settings), Some(stats)) => {
            tracing::info!(settings = %otlp::describe(&settings), "OTLP push");
            let collect: otlp::Collect = Arc::new(move || collect(&engine));
            Some(Pusher::start(settings, collect, stats)?)
        }
        _ => None,
    };
    let graceful = GracefulShutdown::new();
    match listener {
        Some(l) => accept_loop(l, state.clone(), signals, &graceful).await,
        None => signals.until_shutdown(&state).await,
    }
    tracing::info!("shutting down");
    tokio::select! {
        _ = graceful.shutdown() => {}
        _ = tokio::time::sleep(SHUTDOWN_GRACE) => {
            tracing::info!(grace_ms = SHUTDOWN_GRACE.as_millis() as u64, "requests still in flight after the grace period; closing them");
        }
    }
    if let Some(p) = pusher {
        p.shutdown();
    }
    Ok(ExitCode::SUCCESS)
}

/// SIGTERM, SIGINT and SIGHUP, registered at start.
struct Signals {
    term: Signal,
    int: Signal,
    hup: Signal,
}

impl Signals {
    fn new() -> std::io::Result<Self> {
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    /// Reloads on SIGHUP; returns on SIGTERM or SIGINT.
    async fn until_shutdown(mut self, state: &Arc<State>) {
        loop {
            tokio::select! {
                _ = self.term.recv() => return,
                _ = self.int.recv() => return,
                _ = self.hup.recv() => {
                    tracing::info!("SIGHUP: reloading the configuration");
                    let st = state.clone();
                    // Detached: a reload never delays a shutdown.
                    drop(tokio::task::spawn_blocking(move || reload(&st)));
                }
            }
        }
    }
}

/// Binds the first of the listen address's addresses that works.
async fn bind(listen: &str, telemetry_path: &str) -> Result<tokio::net::TcpListener, WebError> {
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

/// Serves connections until SIGINT/SIGTERM (reloading on SIGHUP).
async fn accept_loop(
    listener: tokio::net::TcpListener,
    state: Arc<State>,
    signals: Signals,
    graceful: &GracefulShutdown,
) {
    let shutdown = signals.until_shutdown(&state);
    tokio::pin!(shutdown);
    let mut backoff = Duration::from_millis(5);
    let mut last_warn: Option<Instant> = None;
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            acc = listener.accept() => match acc {
                Ok((stream, peer)) => {
                    backoff = Duration::from_millis(5);
                    let st = state.clone();
                    let watcher = graceful.watcher();
                    tokio::spawn(connection(st, stream, peer, watcher));
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
        None => serve_http(st, stream, watcher).await,
        Some(tls) => {
            let acceptor = tokio_rustls::TlsAcceptor::from(tls.server);
            match tokio::time::timeout(st.read_header_timeout, acceptor.accept(stream)).await {
                Ok(Ok(s)) => serve_http(st, s, watcher).await,
                Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
            }
        }
    }
}

async fn serve_http<S>(st: Arc<State>, io: S, watcher: Watcher)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let io = TokioIo::new(StallTimeout::new(io, st.request_timeout));
    let header_timeout = st.read_header_timeout;
    let svc = hyper::service::service_fn(move |req| {
        let st = st.clone();
        async move { Ok::<_, std::convert::Infallible>(handle(st, req).await) }
    });
    let mut b = hyper::server::conn::http1::Builder::new();
    b.timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .max_buf_size(64 * 1024)
        .max_header_size(MAX_HEADER_BYTES)
        .keep_alive(true);
    if let Err(e) = watcher.watch(b.serve_connection(io, svc)).await {
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

    /// One collection, shared: a scrape arriving while a collection is in
    /// progress waits for it instead of reading every group again. `None`
    /// if the collection died.
    async fn shared_collect(self: &Arc<Self>) -> Option<Arc<Collected>> {
        let (mut rx, lead) = {
            let mut f = lock(&self.flight);
            match &*f {
                Some(rx) => (rx.clone(), None),
                None => {
                    let (tx, rx) = watch::channel(None);
                    *f = Some(rx.clone());
                    (rx, Some(tx))
                }
            }
        };
        if let Some(tx) = lead {
            let st = self.clone();
            // Runs to the end even if every scrape waiting for it gives up.
            drop(tokio::task::spawn_blocking(move || {
                // Clears the flight however the collection ends.
                struct Clear<'a>(&'a Mutex<Option<Flight>>);
                impl Drop for Clear<'_> {
                    fn drop(&mut self) {
                        *lock(self.0) = None;
                    }
                }
                let clear = Clear(&st.flight);
                let start = Instant::now();
                let snap = collect(&st.engine);
                let c = Arc::new(Collected {
                    families: Arc::new(snap.families),
                    secs: start.elapsed().as_secs_f64(),
                });
                drop(clear);
                let _ = tx.send(Some(c));
            }));
        }
        let got = match rx.wait_for(Option::is_some).await {
            Ok(v) => v.clone(),
            Err(_) => None,
        };
        got
    }
}

/// One engine collection, for a scrape or an OTLP push. A poisoned lock's
/// engine is used as it is, as scrapes always did.
fn collect(engine: &Mutex<Engine>) -> Snapshot {
    lock(engine).collect()
}

fn respond(status: StatusCode, ctype: &str, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Body::new(body));
    *r.status_mut() = status;
    if let Ok(v) = HeaderValue::from_str(ctype) {
        r.headers_mut().insert(CONTENT_TYPE, v);
    }
    r
}

fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    respond(status, "text/plain; charset=utf-8", body)
}

/// Encodes one scrape from a shared collection, with the self-metrics.
fn encode(state: &State, c: &Collected, accept: &str) -> (String, &'static str) {
    // The shared collection is encoded in place; only the few
    // self-metrics are this scrape's own.
    let (front, mut back) = self_metrics(state, c.secs);
    if let Some(st) = &state.otlp {
        back.push(st.family());
    }
    // Room for the last response plus some growth.
    let hint = state.last_len.load(Ordering::Relaxed);
    let parts = [Arc::new(front), c.families.clone(), Arc::new(back)];
    let (body, ctype) = prometheus::encode_parts(&parts, accept, hint + hint / 8);
    state.last_len.store(body.len(), Ordering::Relaxed);
    (body, ctype)
}

fn gauge(name: &str, help: &str, value: f64) -> Family {
    Family {
        name: name.into(),
        help: help.into(),
        kind: Kind::Gauge,
        samples: vec![Sample {
            labels: Vec::new().into(),
            value,
            start_unix_nanos: 0,
        }],
    }
}

/// The self-metrics of one scrape: build info (first in the output) and
/// the rest (last).
fn self_metrics(state: &State, secs: f64) -> (Vec<Family>, Vec<Family>) {
    let front = vec![Family {
            name: "perf_exporter_build_info".into(),
            help: "A metric with a constant '1' value labelled by version and whether the PMU is simulated.".into(),
            kind: Kind::Gauge,
            samples: vec![Sample {
                labels: vec![
                    ("version", env!("CARGO_PKG_VERSION").into()),
                    ("simulated", state.simulated.to_string()),
                ]
                .into(),
                value: 1.0,
                start_unix_nanos: 0,
            }],
    }];
    let mut back = Vec::with_capacity(6);
    back.push(gauge(
        "perf_scrape_duration_seconds",
        "Time the collection serving this scrape took to read every perf group (concurrent scrapes share one).",
        secs,
    ));
    let r = &state.reload;
    back.push(gauge(
        "perf_config_last_reload_successful",
        "Whether the last configuration reload (SIGHUP or POST /-/reload) succeeded (1) or was refused and the previous configuration kept (0).",
        if r.ok.load(Ordering::Relaxed) { 1.0 } else { 0.0 },
    ));
    back.push(gauge(
        "perf_config_last_reload_success_timestamp_seconds",
        "When the configuration was last loaded successfully, in Unix seconds.",
        f64::from_bits(r.last_success.load(Ordering::Relaxed)),
    ));
    back.push(Family {
        name: "perf_http_rejected_requests_total".into(),
        help: "HTTP requests turned away: over --web.max-requests, over the web config's rate limit, without valid credentials, or collection over --web.request-timeout.".into(),
        kind: Kind::Counter,
        samples: REJECT_REASONS
            .iter()
            .zip(&state.rejected)
            .map(|(reason, n)| Sample {
                labels: vec![("reason", (*reason).to_string())].into(),
                value: n.load(Ordering::Relaxed) as f64,
                start_unix_nanos: 0,
            })
            .collect(),
    });
    (front, back)
}

/// Handles one request and adds the web config's headers.
async fn handle(st: Arc<State>, req: Request<Incoming>) -> Response<Body> {
    let web = st.web();
    let mut resp = route(&st, &web, req).await;
    for (k, v) in &web.config.headers {
        resp.headers_mut().insert(k.clone(), v.clone());
    }
    resp
}

async fn authorized(web: &Arc<WebRuntime>, req: &Request<Incoming>) -> bool {
    let Some(auth) = &web.auth else {
        return true;
    };
    let Some(creds) = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(parse_basic)
    else {
        return false;
    };
    if let Some(v) = auth.cached(&creds) {
        return v;
    }
    let Ok(_one) = web.bcrypt_gate.acquire().await else {
        return false;
    };
    let w = web.clone();
    tokio::task::spawn_blocking(move || w.auth.as_ref().is_some_and(|a| a.verify(&creds)))
        .await
        .unwrap_or(false)
}

fn method_not_allowed(allow: &'static str) -> Response<Body> {
    let mut r = text(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("method not allowed; use {allow}\n"),
    );
    r.headers_mut()
        .insert(ALLOW, HeaderValue::from_static(allow));
    r
}

async fn route(st: &Arc<State>, web: &Arc<WebRuntime>, req: Request<Incoming>) -> Response<Body> {
    let too_big = req
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .is_some_and(|n| n > MAX_BODY_BYTES);
    if too_big {
        let mut r = text(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("request body too large (limit {MAX_BODY_BYTES} bytes)\n"),
        );
        r.headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
        return r;
    }
    if let Some(l) = &web.limiter {
        if !l.allow() {
            st.reject(1);
            return text(StatusCode::TOO_MANY_REQUESTS, "Too Many Requests\n");
        }
    }
    if !authorized(web, &req).await {
        st.reject(2);
        let mut r = text(StatusCode::UNAUTHORIZED, "Unauthorized\n");
        r.headers_mut().insert(
            hyper::header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Basic"),
        );
        return r;
    }
    let get = req.method() == Method::GET || req.method() == Method::HEAD;
    let path = req.uri().path();
    if path == st.telemetry_path {
        if !get {
            return method_not_allowed("GET, HEAD");
        }
        let accept = req
            .headers()
            .get(hyper::header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        return metrics(st, &accept).await;
    }
    match path {
        "/" | "/-/healthy" | "/-/ready" if !get => method_not_allowed("GET, HEAD"),
        "/" => {
            let s = st.clone();
            match tokio::task::spawn_blocking(move || landing(&s)).await {
                Ok(page) => respond(StatusCode::OK, "text/html; charset=utf-8", page),
                Err(_) => text(StatusCode::INTERNAL_SERVER_ERROR, "landing page failed\n"),
            }
        }
        "/-/healthy" => text(StatusCode::OK, "Healthy\n"),
        "/-/ready" => text(StatusCode::OK, "Ready\n"),
        "/-/reload" => {
            if !st.lifecycle {
                return text(
                    StatusCode::FORBIDDEN,
                    "Lifecycle API is not enabled (start with --web.enable-lifecycle).\n",
                );
            }
            if req.method() != Method::POST && req.method() != Method::PUT {
                return method_not_allowed("POST, PUT");
            }
            let s = st.clone();
            match tokio::task::spawn_blocking(move || reload(&s)).await {
                Ok(Ok(summary)) => text(StatusCode::OK, format!("{summary}\n")),
                Ok(Err(e)) => text(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("failed to reload config: {e}\n"),
                ),
                Err(_) => text(StatusCode::INTERNAL_SERVER_ERROR, "reload failed\n"),
            }
        }
        _ => text(StatusCode::NOT_FOUND, "404 page not found\n"),
    }
}

/// `/metrics`: a slot under `--web.max-requests`, then a shared
/// collection bounded by `--web.request-timeout`.
async fn metrics(st: &Arc<State>, accept: &str) -> Response<Body> {
    let permit = match &st.inflight {
        Some(sem) => match sem.clone().try_acquire_owned() {
            Ok(p) => Some(p),
            Err(_) => {
                st.reject(0);
                return text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!(
                        "Limit of concurrent requests reached ({}), try again later.\n",
                        st.max_requests
                    ),
                );
            }
        },
        None => None,
    };
    let c = match tokio::time::timeout(st.request_timeout, st.shared_collect()).await {
        Ok(Some(c)) => c,
        Ok(None) => return text(StatusCode::INTERNAL_SERVER_ERROR, "collection failed\n"),
        Err(_) => {
            st.reject(3);
            return text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "collection took longer than --web.request-timeout ({:?})\n",
                    st.request_timeout
                ),
            );
        }
    };
    let (body, ctype) = encode(st, &c, accept);
    let mut r = respond(StatusCode::OK, ctype, body);
    let b = std::mem::take(r.body_mut());
    *r.body_mut() = b.holding(permit);
    r
}

/// Re-reads the config (and the web config) and swaps the engine; logs
/// the outcome and records it for `perf_config_last_reload_successful`.
/// The old config keeps serving when the new one is refused.
pub fn reload(state: &State) -> Result<String, ReloadError> {
    let r = &state.reload;
    let _one = lock(&r.lock);
    let out = try_reload(state);
    match &out {
        Ok(summary) => {
            r.ok.store(true, Ordering::Relaxed);
            r.last_success
                .store(unix_now().to_bits(), Ordering::Relaxed);
            tracing::info!(%summary, "configuration reloaded");
        }
        Err(e) => {
            r.ok.store(false, Ordering::Relaxed);
            tracing::error!(error = %e, "configuration reload refused; the previous configuration keeps serving");
        }
    }
    out
}

fn try_reload(state: &State) -> Result<String, ReloadError> {
    let r = &state.reload;
    let mut cfg = match &r.config_file {
        Some(p) => Config::load(p)?,
        None => Config::default_config(),
    };
    if r.aggregate_cpus {
        cfg.aggregate_cpus();
    }
    let web = match &r.web_config_file {
        Some(p) => Some(WebConfig::load(p)?),
        None => None,
    };
    // A live host may have gained PMUs (a module loaded); the simulated
    // one is its fixture.
    let table = if r.kernel.simulated() {
        r.table.clone()
    } else {
        let t = PmuTable::discover(&r.table.sysfs)?;
        for w in &t.warnings {
            tracing::warn!(warning = %w, "sysfs entry skipped");
        }
        t
    };
    let mut res = resolve_plan(&cfg, &table, &r.ctx, r.kernel.as_ref());
    if let Some(p) = &r.privilege {
        crate::report::diagnose(&mut res, p, true);
    }
    if let Some(why) = crate::report::serve_would_refuse(&res) {
        return Err(ReloadError::NothingToCount(why));
    }
    let summary = {
        let mut e = lock(&state.engine);
        // A last read, so the totals carried over are current; then the
        // old counters close before the new ones open (no double fds).
        e.collect();
        let totals = e.totals();
        let old_problems = e.problems();
        *e = Engine::new(
            r.kernel.clone(),
            table.clone(),
            Resolution {
                sets: Vec::new(),
                metrics: Vec::new(),
            },
        );
        let mut ne = open_engine(r.kernel.clone(), table, res);
        let continued = ne.carry_over(totals);
        // Only what changed: the rest was logged at start or last reload.
        for (metric, reason) in ne.problems() {
            if !old_problems.contains(&(metric.clone(), reason.clone())) {
                tracing::warn!(%metric, %reason, what_to_do = %reason.what_to_do(), "metric not (fully) available");
            }
        }
        let counted = ne
            .resolution()
            .metrics
            .iter()
            .filter(|m| m.status != Status::Unavailable)
            .count();
        let s = format!(
            "{counted} of {} metrics counted: {} continue their counts, {} start from zero (new or changed); {} of {} planned counters open",
            ne.resolution().metrics.len(),
            continued.len(),
            counted.saturating_sub(continued.len()),
            ne.open_fds(),
            ne.planned_fds()
        );
        *e = ne;
        s
    };
    if let Some(w) = web {
        tracing::info!(web_config = %w.describe(), "web config reloaded");
        for warn in &w.warnings {
            tracing::warn!(warning = %warn, "web config");
        }
        let mut g = match state.web.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        *g = Arc::new(WebRuntime::new(w));
    }
    Ok(summary)
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The reason cell of a metric on the landing page: every alternative's
/// problem for an unavailable metric (then what to do about the one that
/// matters), or the open failures of a counted one.
fn landing_reason<'a>(
    m: &crate::resolve::chain::ResolvedMetric,
    runtime: impl Iterator<Item = &'a crate::problem::Problem>,
) -> String {
    if m.status == Status::Unavailable {
        let what = m
            .problem()
            .map(|p| format!(". What to do: {}", p.what_to_do()))
            .unwrap_or_default();
        return format!("{}{what}", m.reason());
    }
    runtime
        .map(crate::problem::Problem::explain)
        .collect::<Vec<_>>()
        .join("; ")
}

fn landing(state: &State) -> String {
    let e = lock(&state.engine);
    let mut rows = String::new();
    let problems = e.problems();
    for (rt, m) in e.runtime().iter().zip(&e.resolution().metrics) {
        let reason = landing_reason(
            m,
            problems
                .iter()
                .filter(|(n, _)| n == &rt.metric)
                .map(|(_, p)| p),
        );
        let status = match m.class() {
            Some(Class::NotOnPlatform) => "unavailable: not on this platform",
            Some(Class::Failed) => "unavailable: failed",
            None if rt.open_fds == 0 => "unavailable: open failed",
            None => m.status.as_str(),
        };
        rows.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            esc(&rt.metric),
            esc(status),
            esc(rt.event.as_deref().unwrap_or("-")),
            esc(&rt.pmus.join(", ")),
            rt.open_fds,
            esc(&reason)
        ));
    }
    format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>perf-exporter</title>\
<style>body{{font-family:sans-serif}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}}</style></head>\n\
<body><h1>perf-exporter</h1><p>Version {}{}. Config: {}.</p>\n\
<ul><li><a href=\"{}\">Metrics</a></li><li><a href=\"/-/healthy\">Health</a></li><li><a href=\"/-/ready\">Readiness</a></li></ul>\n\
<h2>Resolution</h2><table><tr><th>metric</th><th>status</th><th>event</th><th>PMU</th><th>fds</th><th>reason</th></tr>\n{}</table></body></html>\n",
        env!("CARGO_PKG_VERSION"),
        if state.simulated { " (simulated PMU)" } else { "" },
        esc(&state.config_name),
        esc(&state.telemetry_path),
        rows
    )
}
