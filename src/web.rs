//! The HTTP endpoint: `/metrics` (collected at scrape time, no background
//! polling), the landing page with the resolution table, `/-/healthy` and
//! `/-/ready`; and the OTLP push ([`crate::export::otlp`]) beside it or
//! alone (`--otlp.only`), on the same engine.

use crate::config::Config;
use crate::engine::{ensure_fd_budget, Engine, Family, Kind, Sample, Snapshot};
use crate::export::otlp::{self, ExportStats, OtlpSettings, Pusher};
use crate::export::prometheus;
use crate::perf::Kernel;
use crate::pmu::PmuTable;
use crate::report::prober;
use crate::resolve::chain::{resolve_config, Status};
use crate::resolve::Context;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Errors of the web layer.
#[derive(Debug, thiserror::Error)]
pub enum WebError {
    /// The listen address does not parse.
    #[error("--web.listen-address `{0}` is not HOST:PORT or :PORT")]
    Address(String),
    /// Binding failed.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Nothing can be counted at all.
    #[error("nothing can be counted on this host: {0}")]
    NothingToCount(String),
    /// The OTLP push could not start.
    #[error(transparent)]
    Otlp(#[from] otlp::OtlpError),
    /// The async runtime failed to start.
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
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
}

/// Shared state of the server.
#[derive(Debug)]
pub struct State {
    /// Shared with the OTLP push, which collects through the same engine.
    engine: Arc<Mutex<Engine>>,
    /// The size of the last response, to allocate the next one at once.
    last_len: AtomicUsize,
    telemetry_path: String,
    simulated: bool,
    config_name: String,
    /// OTLP export results, when the push runs.
    otlp: Option<Arc<ExportStats>>,
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

/// Reads `kernel.perf_event_paranoid` and tells what it allows.
pub fn privilege_summary(procfs: &std::path::Path) -> String {
    let p = procfs.join("sys/kernel/perf_event_paranoid");
    let level = std::fs::read_to_string(&p)
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok());
    // SAFETY-free: geteuid has no preconditions, but it is a libc call;
    // use the procfs view instead to keep this module safe.
    let uid = std::fs::read_to_string(procfs.join("self/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(str::to_string))
        })
        .unwrap_or_else(|| "?".into());
    let caps = std::fs::read_to_string(procfs.join("self/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("CapEff:"))
                .map(|l| l.trim_start_matches("CapEff:").trim().to_string())
        })
        .and_then(|h| u64::from_str_radix(&h, 16).ok())
        .unwrap_or(0);
    let perfmon = caps & (1 << 38) != 0;
    let sys_admin = caps & (1 << 21) != 0;
    format!(
        "euid={uid} CAP_PERFMON={perfmon} CAP_SYS_ADMIN={sys_admin} perf_event_paranoid={}; system-wide counting needs CAP_PERFMON (or CAP_SYS_ADMIN) or perf_event_paranoid <= 0",
        level.map_or("unknown".into(), |l| l.to_string())
    )
}

/// Starts the exporter and serves until SIGINT/SIGTERM.
pub fn run(o: Options) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(WebError::Runtime)?;
    rt.block_on(serve(o))
}

/// Builds the engine for a config: resolve (probing on the kernel), fd
/// budget, open.
pub fn build_engine(
    config: &Config,
    table: &PmuTable,
    ctx: &Context,
    kernel: Arc<dyn Kernel>,
) -> Engine {
    let res = {
        let probe = prober(kernel.as_ref());
        resolve_config(config, table, ctx, Some(&probe))
    };
    let planned: usize = res
        .metrics
        .iter()
        .flat_map(|m| &m.instances)
        .map(|i| i.inst.cpus.len())
        .sum();
    if !kernel.simulated() {
        let b = ensure_fd_budget(planned);
        tracing::info!(
            needed = b.needed,
            soft = b.soft,
            hard = b.hard,
            "fd budget (RLIMIT_NOFILE)"
        );
    }
    Engine::new(kernel, table.clone(), res)
}

async fn serve(o: Options) -> anyhow::Result<ExitCode> {
    let simulated = o.kernel.simulated();
    tracing::info!(version = env!("CARGO_PKG_VERSION"), simulated, sysfs = %o.table.sysfs.display(), "starting perf-exporter");
    if !simulated {
        tracing::info!(privilege = %privilege_summary(&o.procfs), "privilege");
    }
    let engine = build_engine(&o.config, &o.table, &o.ctx, o.kernel.clone());
    for (metric, reason) in engine.problems() {
        tracing::warn!(%metric, %reason, "metric not (fully) available");
    }
    let counted = engine.runtime().iter().filter(|r| r.open_fds > 0).count();
    tracing::info!(
        metrics = engine.runtime().len(),
        counted,
        fds = engine.open_fds(),
        "counters open"
    );
    if !engine.counting() {
        let why = engine
            .problems()
            .into_iter()
            .take(5)
            .map(|(m, r)| format!("{m}: {r}"))
            .collect::<Vec<_>>()
            .join("; ");
        return Err(WebError::NothingToCount(why).into());
    }
    let engine = Arc::new(Mutex::new(engine));
    let stats = o.otlp.as_ref().map(|_| Arc::new(ExportStats::default()));
    let state = Arc::new(State {
        engine: engine.clone(),
        last_len: AtomicUsize::new(0),
        telemetry_path: o.telemetry_path.clone(),
        simulated,
        config_name: o
            .config_file
            .as_ref()
            .map_or("<embedded default>".into(), |p| p.display().to_string()),
        otlp: stats.clone(),
    });
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let only = o.otlp.as_ref().is_some_and(|s| s.only);
    // Bind before the push starts: a listen error ends the start-up.
    let listener = if only {
        tracing::info!("--otlp.only: no HTTP listener");
        None
    } else {
        Some(bind(&o.listen, &o.telemetry_path).await?)
    };
    let pusher = match (o.otlp, stats) {
        (Some(settings), Some(stats)) => {
            tracing::info!(settings = %otlp::describe(&settings), "OTLP push");
            let collect: otlp::Collect = Arc::new(move || collect(&engine));
            Some(Pusher::start(settings, collect, stats)?)
        }
        _ => None,
    };
    match listener {
        Some(l) => accept_loop(l, state, &mut term).await,
        None => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {},
                _ = term.recv() => {},
            }
        }
    }
    tracing::info!("shutting down");
    if let Some(p) = pusher {
        p.shutdown();
    }
    Ok(ExitCode::SUCCESS)
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
        source: last_err.unwrap_or_else(|| std::io::Error::other("no address")),
    })
}

/// Serves HTTP until SIGINT/SIGTERM.
async fn accept_loop(
    listener: tokio::net::TcpListener,
    state: Arc<State>,
    term: &mut tokio::signal::unix::Signal,
) {
    loop {
        tokio::select! {
            acc = listener.accept() => {
                let (stream, _) = match acc {
                    Ok(x) => x,
                    Err(e) => { tracing::warn!(error = %e, "accept failed"); continue; }
                };
                let st = state.clone();
                tokio::spawn(async move {
                    let io = hyper_util::rt::TokioIo::new(stream);
                    let svc = hyper::service::service_fn(move |req| {
                        let st = st.clone();
                        async move { Ok::<_, std::convert::Infallible>(handle(&st, req)) }
                    });
                    if let Err(e) = hyper::server::conn::http1::Builder::new().serve_connection(io, svc).await {
                        tracing::debug!(error = %e, "connection error");
                    }
                });
            }
            _ = tokio::signal::ctrl_c() => break,
            _ = term.recv() => break,
        }
    }
}

/// One engine collection, for a scrape or an OTLP push. A poisoned lock's
/// engine is used as it is, as scrapes always did.
fn collect(engine: &Mutex<Engine>) -> Snapshot {
    match engine.lock() {
        Ok(mut e) => e.collect(),
        Err(p) => p.into_inner().collect(),
    }
}

fn respond(status: StatusCode, ctype: &str, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    if let Ok(v) = hyper::header::HeaderValue::from_str(ctype) {
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    r
}

/// Collects and encodes one scrape.
pub fn scrape(state: &State, accept: &str) -> (String, &'static str) {
    let start = Instant::now();
    let mut snap = collect(&state.engine);
    add_self_metrics(&mut snap, state.simulated, start.elapsed().as_secs_f64());
    if let Some(st) = &state.otlp {
        snap.families.push(st.family());
    }
    // Room for the last response plus some growth.
    let hint = state.last_len.load(Ordering::Relaxed);
    let (body, ctype) = prometheus::encode(snap, accept, hint + hint / 8);
    state.last_len.store(body.len(), Ordering::Relaxed);
    (body, ctype)
}

fn add_self_metrics(snap: &mut Snapshot, simulated: bool, secs: f64) {
    snap.families.insert(
        0,
        Family {
            name: "perf_exporter_build_info".into(),
            help: "A metric with a constant '1' value labelled by version and whether the PMU is simulated.".into(),
            kind: Kind::Gauge,
            samples: vec![Sample {
                labels: vec![
                    ("version", env!("CARGO_PKG_VERSION").into()),
                    ("simulated", simulated.to_string()),
                ]
                .into(),
                value: 1.0,
            }],
        },
    );
    snap.families.push(Family {
        name: "perf_scrape_duration_seconds".into(),
        help: "Time this scrape took to read every perf group.".into(),
        kind: Kind::Gauge,
        samples: vec![Sample {
            labels: Vec::new().into(),
            value: secs,
        }],
    });
}

fn handle(state: &State, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let path = req.uri().path();
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = respond(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "method not allowed; use GET\n",
        );
        r.headers_mut().insert(
            hyper::header::ALLOW,
            hyper::header::HeaderValue::from_static("GET, HEAD"),
        );
        return r;
    }
    if path == state.telemetry_path {
        let accept = req
            .headers()
            .get(hyper::header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let (body, ctype) = scrape(state, accept);
        return respond(StatusCode::OK, ctype, body);
    }
    match path {
        "/" => respond(StatusCode::OK, "text/html; charset=utf-8", landing(state)),
        "/-/healthy" => respond(StatusCode::OK, "text/plain; charset=utf-8", "Healthy\n"),
        "/-/ready" => respond(StatusCode::OK, "text/plain; charset=utf-8", "Ready\n"),
        _ => respond(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "404 page not found\n",
        ),
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn landing(state: &State) -> String {
    let e = match state.engine.lock() {
        Ok(e) => e,
        Err(p) => p.into_inner(),
    };
    let mut rows = String::new();
    let problems = e.problems();
    for (rt, m) in e.runtime().iter().zip(&e.resolution().metrics) {
        let reason = if m.status == Status::Unavailable {
            m.reason()
        } else {
            problems
                .iter()
                .filter(|(n, _)| n == &rt.metric)
                .map(|(_, r)| r.clone())
                .collect::<Vec<_>>()
                .join("; ")
        };
        let status = if m.status != Status::Unavailable && rt.open_fds == 0 {
            "unavailable (open failed)"
        } else {
            m.status.as_str()
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
