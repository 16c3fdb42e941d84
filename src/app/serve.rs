//! `serve`: start-up in a fixed order, then serve until SIGTERM/SIGINT.
//!
//! 1. Signal handlers, before anything else: SIGHUP's default action would
//!    end the process, and SIGTERM must work in every start-up state.
//! 2. The files (web config, config, PMU table) are read on a start-up
//!    thread while the runtime waits for it *or* a SIGTERM/SIGINT: a read
//!    that never returns (a FIFO, a hung mount) cannot hold the process,
//!    and one that makes no progress within `--config.read-timeout` ends
//!    the start-up with the file named.
//!    A SIGHUP during start-up asks for one reload once serving.
//! 3. The listener is bound before counters open (a listen error ends the
//!    start-up cheaply), then the engine, the reload thread and the OTLP
//!    push start, and the server runs.

use super::deadline::Deadline;
use super::host::HostSettings;
use super::opening::{log_problems, open_engine};
use super::reload::{prepare, Guard, Job, Prepared, Reloader, Sources};
use super::{AppError, WebSettings};
use crate::bounded::watch::step;
use crate::engine::Engine;
use crate::export::otlp::{self, ExportStats, OtlpSettings, Pusher};
use crate::export::Push;
use crate::privilege::Privilege;
use crate::web::config::WebConfig;
use crate::web::{self, State};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::signal::unix::{signal, Signal, SignalKind};

/// Starts the exporter and serves until SIGINT/SIGTERM.
pub(super) fn serve(host: HostSettings, web: WebSettings) -> Result<(), AppError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(16)
        .build()
        .map_err(AppError::Runtime)?;
    let r = rt.block_on(run(host, web));
    // A bcrypt or landing page still running on a blocking thread does
    // not hold up the exit (nor does the collector thread: it is not
    // waited for).
    rt.shutdown_timeout(Duration::from_millis(100));
    r
}

/// SIGTERM, SIGINT and SIGHUP.
struct Signals {
    term: Signal,
    int: Signal,
    hup: Signal,
}

impl Signals {
    fn new() -> std::io::Result<Self> {
        Ok(Signals {
            hup: signal(SignalKind::hangup())?,
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    async fn terminated(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }

    /// Runs `f` on a thread of its own and waits for it, unless SIGTERM or
    /// SIGINT comes first (then `None`): a start-up step that reads files
    /// (a FIFO, a hung mount) cannot hold off the shutdown.
    async fn unless_terminated<T: Send + 'static>(
        &mut self,
        what: &str,
        f: impl FnOnce() -> Result<T, AppError> + Send + 'static,
    ) -> Result<Option<T>, AppError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name(what.into())
            .spawn(move || drop(tx.send(f())))
            .map_err(AppError::Runtime)?;
        tokio::select! {
            r = rx => match r {
                Ok(r) => r.map(Some),
                Err(_) => Err(AppError::Runtime(std::io::Error::other(format!("the {what} thread died")))),
            },
            _ = self.terminated() => {
                tracing::info!("terminated during {what}");
                Ok(None)
            }
        }
    }

    /// Asks for a reload on each SIGHUP; returns on SIGTERM or SIGINT.
    async fn until_shutdown(mut self, reloader: Reloader) {
        loop {
            tokio::select! {
                _ = self.term.recv() => return,
                _ = self.int.recv() => return,
                _ = self.hup.recv() => {
                    tracing::info!("SIGHUP: reloading the configuration");
                    reloader.request_detached();
                }
            }
        }
    }
}

async fn run(host: HostSettings, web: WebSettings) -> Result<(), AppError> {
    let mut signals = Signals::new().map_err(AppError::Runtime)?;
    let otlp = OtlpSettings::resolve(&web.otlp, &otlp::process_env, &host.procfs)?;
    if web.otlp.profiles && otlp.is_none() {
        return Err(otlp::OtlpError::Invalid {
            origin: "--otlp.profiles".into(),
            msg: "profiles are pushed with the metrics: give an endpoint (--otlp.endpoint, OTEL_EXPORTER_OTLP_ENDPOINT) or --otlp.only, and no OTEL_SDK_DISABLED=true".into(),
        }
        .into());
    }
    let src = Sources {
        host,
        web_config_file: web.web_config_file.clone(),
        allow_downgrade: web.allow_downgrade,
        deadline: Deadline::new(web.read_timeout),
    };
    let s = src.clone();
    // The reads on a helper of the start-up thread, bounded by
    // --config.read-timeout: a hung mount fails the start-up.
    let load = move || {
        s.deadline
            .clone()
            .run("start-up reads", move || prepare(&s))
    };
    let Some(p) = signals.unless_terminated("start-up", load).await? else {
        return Ok(());
    };
    start(p, src, web, otlp, signals).await
}

fn log_privilege(privilege: Option<&Privilege>) {
    if let Some(p) = privilege {
        if p.grant().is_some() {
            tracing::info!(privilege = %p.summary(), "privilege");
        } else {
            tracing::warn!(privilege = %p.summary(), "privilege");
        }
    }
}

fn log_web_config(w: &WebConfig) {
    if w.file.is_some() {
        tracing::info!(web_config = %w.describe(), "web config");
    }
    for warn in &w.warnings {
        tracing::warn!(warning = %warn, "web config");
    }
}

async fn start(
    p: Prepared,
    src: Sources,
    web: WebSettings,
    otlp: Option<OtlpSettings>,
    mut signals: Signals,
) -> Result<(), AppError> {
    let simulated = p.kernel.simulated();
    tracing::info!(version = crate::VERSION, revision = crate::REVISION, simulated, sysfs = %p.host.table.sysfs.display(), "starting perf-exporter");
    let privilege = (!simulated).then(|| Privilege::detect(&src.host.procfs));
    log_privilege(privilege.as_ref());
    let web_config = p.loaded.web.unwrap_or_default();
    log_web_config(&web_config);
    let only = otlp.as_ref().is_some_and(|s| s.only);
    // Bind first: a listen error ends the start-up before counters open.
    let listener = if only {
        tracing::info!("--otlp.only: no HTTP listener");
        None
    } else {
        let path = format!("{}{}", web.route_prefix, web.telemetry_path);
        Some(web::bind(&web.listen, &path).await?)
    };
    // Before the engine's groups open, so they do not compete for counters.
    let self_test = src.host.self_test(Some(p.kernel.as_ref()), &p.loaded.table);
    let mut engine = open_engine(
        p.kernel.clone(),
        p.loaded.table.clone(),
        p.loaded.res,
        p.loaded.cgroups.as_ref(),
        &src.host.procfs,
    );
    engine.set_host_facts(src.host.facts());
    engine.set_self_test(self_test);
    engine.set_derived(p.loaded.derived.clone());
    log_engine(&engine, privilege.as_ref());
    let cgroups = p.loaded.cgroups.as_ref();
    super::cgroups::attach(&mut engine, p.kernel.clone(), cgroups, &src.host, None)?;
    let sampling = p.loaded.sampling.as_ref();
    let _sampling = super::sampling::attach(&mut engine, &p.kernel, &p.host, sampling, &src.host);
    let counting = crate::report::Counting::Opened(&engine);
    if let Some(why) = crate::report::nothing_to_count(counting, privilege.as_ref()) {
        return Err(AppError::NothingToCount(why));
    }
    let engine = Arc::new(Mutex::new(engine));
    // Applies CPU hotplug between scrapes (until serving ends).
    let _hotplug = crate::engine::follow_hotplug(&engine);
    // Re-measures the counter budget off the collection path.
    let _budget = crate::engine::follow_budget(&engine);
    let stats = otlp.as_ref().map(|_| Arc::new(ExportStats::default()));
    let guard = Guard::of(&web_config);
    let state = State::new(web::Options {
        engine: engine.clone(),
        telemetry_path: web.telemetry_path,
        route_prefix: web.route_prefix,
        simulated,
        config_name: src
            .host
            .config_file
            .as_ref()
            .map_or("<embedded default>".into(), |p| p.display().to_string()),
        otlp: stats.clone(),
        web_config,
        max_requests: web.max_requests,
        max_connections: web.max_connections,
        max_streams: web.max_streams,
        exporter_metrics: !web.disable_exporter_metrics,
        allowed_origins: web.allowed_origins,
        read_header_timeout: web.read_header_timeout,
        request_timeout: web.request_timeout,
        procfs: src.host.procfs.clone(),
    });
    let deadline = src.deadline.clone();
    state.set_profiler(Arc::new(super::record::ServeProfiler {
        kernel: p.kernel.clone(),
        host: src.host.clone(),
    }));
    let pushes = super::profile_push::start(otlp.as_ref(), &web.otlp, &p.kernel, &src.host)?;
    let mut job = Job {
        sources: src,
        table: p.loaded.table,
        ctx: p.host.ctx,
        kernel: p.kernel,
        engine: engine.clone(),
        state: state.clone(),
        guard,
    };
    let reloader = Reloader::start(move || job.run()).map_err(AppError::Runtime)?;
    if web.enable_lifecycle {
        state.set_lifecycle(Arc::new(reloader.clone()));
    }
    let pusher = match (otlp, stats) {
        (Some(settings), Some(stats)) => {
            match start_push(settings, stats, &engine, deadline, &mut signals).await? {
                Some(p) => Some(p),
                None => return Ok(()),
            }
        }
        _ => None,
    };
    let shutdown = signals.until_shutdown(reloader);
    match listener {
        Some(l) => web::serve(l, state, shutdown).await,
        None => shutdown.await,
    }
    for p in pusher.into_iter().chain(pushes) {
        tracing::debug!(exporter = p.name(), "stopping the push");
        p.shutdown();
    }
    Ok(())
}

/// Starts the OTLP push, collecting through `engine`. It reads its TLS
/// files: off the runtime thread, SIGTERM still heard, and bounded by
/// --config.read-timeout. `None`: terminated meanwhile.
async fn start_push(
    settings: OtlpSettings,
    stats: Arc<ExportStats>,
    engine: &Arc<Mutex<Engine>>,
    deadline: Deadline,
    signals: &mut Signals,
) -> Result<Option<Box<dyn Push>>, AppError> {
    tracing::info!(settings = %otlp::describe(&settings), "OTLP push");
    let e = engine.clone();
    let collect: otlp::Collect = Arc::new(move || {
        let c = {
            let mut g = e.lock().unwrap_or_else(PoisonError::into_inner);
            otlp::Collection {
                snapshot: g.collect(),
                derived: g.derived().clone(),
            }
        };
        crate::engine::after_collection(&e);
        c
    });
    let start = move || {
        deadline.run("otlp-files", move || {
            step("reading the OTLP TLS files (--otlp.certificate, --otlp.client-certificate, --otlp.client-key)");
            Pusher::start(settings, collect, stats)
                .map(|p| Box::new(p) as Box<dyn Push>)
                .map_err(AppError::from)
        })
    };
    let started = signals.unless_terminated("otlp-start", start).await?;
    if started.is_some() {
        tracing::info!("OTLP push started");
    }
    Ok(started)
}

fn log_engine(engine: &Engine, privilege: Option<&Privilege>) {
    engine.host_derived().log_left_out();
    let problems = engine.problems();
    log_problems(problems.iter().map(|(m, p)| (m.as_str(), p)));
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
    if let Some(p) = privilege {
        let problems = engine.problems();
        for f in p.report(problems.iter().map(|(m, p)| (m.as_str(), p))) {
            if f.warn {
                tracing::warn!("privilege: {}", f.message);
            } else {
                tracing::info!("privilege: {}", f.message);
            }
        }
    }
}
