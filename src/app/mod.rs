//! The composition root: what the binary runs, assembled from the
//! pipeline's stages. `list` and `check` report on this host; `serve`
//! starts the exporter (`app::serve`): signal handlers first, then the
//! configuration, the PMU table, the listener, the engine and the OTLP
//! push, and one reload path (`app::reload`) that start-up, SIGHUP and
//! `POST /-/reload` share.

mod cgroups;
mod deadline;
mod host;
mod import;
pub mod logfmt;
mod opening;
mod profile_push;
mod record;
/// The book's reference pages, generated from the code.
pub mod reference;
mod reload;
mod rules;
mod sampling;

pub use reload::ReloadError;
mod serve;
mod stat;
pub use stat::StatSettings;
mod top;
pub use record::{ProfileSettings, RecordSettings, PROFILE_RING_PAGES};
pub use top::TopSettings;

use host::Host;
pub use host::HostSettings;

use crate::config::ConfigError;
use crate::export::otlp::{OtlpError, OtlpFlags};
use crate::perf::sim::SimKernel;
use crate::perf::Kernel;
use crate::pmu::PmuError;
use crate::privilege::Privilege;
use crate::probe::prober;
use crate::report::{CheckReport, ListReport};
use crate::resolve::chain::{resolve_config, Resolution};
use crate::web::config::{WebConfig, WebConfigError};
use crate::web::WebError;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// What the command line resolved to.
#[derive(Debug)]
pub struct Settings {
    /// Where the host's PMUs, config and tracefs are.
    pub host: HostSettings,
    /// What to do.
    pub command: Command,
}

/// The subcommand, with its own settings.
#[derive(Debug)]
pub enum Command {
    /// Serve `/metrics` (and push OTLP).
    Serve(Box<WebSettings>),
    /// List every event of this host.
    List {
        /// JSON output.
        json: bool,
        /// Every tracepoint instead of their count.
        tracepoints: bool,
    },
    /// Counters in the terminal, like `perf stat -a -I`.
    Stat(StatSettings),
    /// Sampling in the terminal: who the samples go to.
    Top(TopSettings),
    /// A profile with call stacks, written as gzipped pprof.
    Record(RecordSettings),
    /// Resolve the config (and validate a web config).
    Check {
        /// JSON output.
        json: bool,
        /// `--strict`: fail on any unavailable metric.
        strict: bool,
        /// A web config to validate.
        web_config_file: Option<PathBuf>,
    },
    /// `metrics import`: perf's metric JSON into a config.
    MetricsImport {
        /// The JSON files.
        files: Vec<PathBuf>,
        /// Where to write the config (standard output when `None`).
        output: Option<PathBuf>,
        /// The core PMU and the counters of a set.
        options: crate::config::import::Options,
        /// The sysfs tree of the host the config is for (`--target`).
        target: Option<PathBuf>,
    },
    /// `rules`: the derived metrics' Prometheus recording rules.
    Rules {
        /// Replace the marked lines of this rules file instead of
        /// printing a file.
        splice: Option<PathBuf>,
    },
    /// Write the book's reference pages into a directory.
    Reference {
        /// The directory.
        out: PathBuf,
        /// The command line's clap `Command`, whose flags the CLI page
        /// lists.
        cli: Box<clap::Command>,
    },
}

/// `serve`'s settings.
#[derive(Debug)]
pub struct WebSettings {
    /// `--web.listen-address`.
    pub listen: String,
    /// `--web.telemetry-path`.
    pub telemetry_path: String,
    /// `--web.route-prefix`, without its trailing `/` (empty: none).
    pub route_prefix: String,
    /// `--web.config.file`.
    pub web_config_file: Option<PathBuf>,
    /// `--web.config.allow-downgrade`: a reload may turn TLS or auth off.
    pub allow_downgrade: bool,
    /// `--config.read-timeout`: how long start-up and each reload wait
    /// for one file read (a hung mount) before giving up.
    pub read_timeout: Duration,
    /// `--web.max-requests` (0: no limit).
    pub max_requests: usize,
    /// `--web.max-connections` (0: no limit).
    pub max_connections: usize,
    /// `--web.max-streams` (0: no limit).
    pub max_streams: usize,
    /// `--web.disable-exporter-metrics`: no `process_*` families, nor the
    /// HTTP server's own (`perf_http_rejected_requests_total`,
    /// `perf_live_streams_closed_total`).
    pub disable_exporter_metrics: bool,
    /// `--web.allowed-origins`, normalized.
    pub allowed_origins: Vec<String>,
    /// `--web.enable-lifecycle`.
    pub enable_lifecycle: bool,
    /// `--web.read-header-timeout`.
    pub read_header_timeout: Duration,
    /// `--web.request-timeout`.
    pub request_timeout: Duration,
    /// The `--otlp.*` flags.
    pub otlp: OtlpFlags,
}

/// Why the application could not run.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// The config file.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The config or web config at start-up.
    #[error(transparent)]
    Load(#[from] reload::ReloadError),
    /// The web config file.
    #[error("--web.config.file={file}: {err}")]
    WebConfig {
        /// The file.
        file: String,
        /// Why (in the message, printed once).
        err: WebConfigError,
    },
    /// PMU discovery.
    #[error("PMU discovery under --path.sysfs={sysfs}: {err}")]
    Pmu {
        /// The sysfs root.
        sysfs: String,
        /// Why (in the message, printed once).
        err: PmuError,
    },
    /// A `--simulate.*` knob without `--simulate`.
    #[error("--simulate.read-delay, --simulate.open-delay, --simulate.refuse and --simulate.guest-rate need --simulate")]
    DelayNeedsSimulate,
    /// Serving a fixture tree without `--simulate`.
    #[error("--path.sysfs={0} is not the live /sys; to serve a fixture tree, add --simulate")]
    NotLive(String),
    /// `cgroups: backend: bpf` and BPF cannot count here.
    #[error(transparent)]
    Bpf(#[from] crate::engine::cgroup::BpfUnavailable),
    /// Nothing to count: no metric configured, or not one counter could
    /// be opened.
    #[error(transparent)]
    NothingToCount(#[from] crate::report::NothingToCount),
    /// The OTLP settings or push.
    #[error(transparent)]
    Otlp(#[from] OtlpError),
    /// The HTTP listener.
    #[error(transparent)]
    Web(#[from] WebError),
    /// The async runtime, a signal handler or the start-up thread.
    #[error("cannot start: {0}")]
    Runtime(#[source] std::io::Error),
    /// `stat`'s `-e` names nothing known.
    #[error("{0}")]
    Stat(String),
    /// `top` cannot sample (its `-e`, `-C`, or every CPU refused).
    #[error("top: {0}")]
    Top(String),
    /// `record` cannot write its profile.
    #[error("record: {0}")]
    Record(String),
    /// `metrics import`: a file that cannot be read or taken.
    #[error("metrics import: {0}")]
    Import(String),
    /// `rules`: the file to splice into cannot be read, written or has
    /// no markers.
    #[error("rules: {0}")]
    Rules(String),
    /// A report could not be written as JSON.
    #[error("cannot encode the report as JSON: {0}")]
    Json(serde_json::Error),
}

impl From<crate::view::ViewError> for AppError {
    fn from(e: crate::view::ViewError) -> Self {
        match e {
            crate::view::ViewError::Io(e) => AppError::Runtime(e),
            crate::view::ViewError::Json(e) => AppError::Json(e),
        }
    }
}

impl From<deadline::ReadTimeout> for AppError {
    fn from(e: deadline::ReadTimeout) -> Self {
        AppError::Load(e.into())
    }
}

/// Loads a web config file, naming the flag in errors.
fn load_web_config(p: &std::path::Path) -> Result<WebConfig, AppError> {
    WebConfig::load(p).map_err(|err| AppError::WebConfig {
        file: p.display().to_string(),
        err,
    })
}

/// A report as JSON or as text.
fn output<R: serde::Serialize>(
    r: &R,
    json: bool,
    text: impl FnOnce() -> String,
) -> Result<String, AppError> {
    if json {
        serde_json::to_string_pretty(r)
            .map(|t| t + "\n")
            .map_err(AppError::Json)
    } else {
        Ok(text())
    }
}

/// What a command prints, and why it failed (`check` fails whenever
/// `serve` would refuse the config, and with `--strict` on any unavailable
/// metric: the report is printed either way).
#[derive(Debug)]
pub struct Output {
    /// For standard output.
    pub text: String,
    /// Why the command failed (exit status 1), for standard error.
    pub failure: Option<String>,
}

impl Output {
    fn ok(text: String) -> Self {
        Output {
            text,
            failure: None,
        }
    }
}

/// `check`'s series budget: what an engine counting `res` would export on
/// the host's online CPUs, counted from its plan with the counter budget
/// `budgets` (measured: where groups are cut and multiplex), without
/// opening a counter ([`crate::engine::series_budget`]).
fn budget(
    h: &Host,
    s: &HostSettings,
    res: Resolution,
    budgets: &[crate::engine::PmuCounters],
) -> crate::report::CheckBudget {
    let kernel = h
        .kernel
        .clone()
        .unwrap_or_else(|| Arc::new(SimKernel::new(h.table.clone())));
    let counts = crate::engine::series_budget(kernel, h.table.clone(), res, budgets);
    let cpus = crate::pmu::read_online_cpus(&s.sysfs).map_or(0, |c| c.len());
    crate::report::CheckBudget::from_counts(counts, cpus)
}

/// The window `check`'s collection judges the counters' states over.
const CHECK_WINDOW: Duration = Duration::from_millis(100);

/// Each metric's counter state after one collection of an engine counting
/// `res` on the host's kernel (the simulated PMU of a fixture tree without
/// one, on a manual clock: the window is exact), as `serve` would open it.
/// Its log is silenced: what it would say per CPU (a counter unavailable,
/// the fd budget) `check` says once in its report.
fn counter_states(
    h: &Host,
    s: &HostSettings,
    res: Resolution,
) -> Vec<crate::problem::MetricStates> {
    let (kernel, manual): (Arc<dyn Kernel>, _) = match &h.kernel {
        Some(k) => (k.clone(), h.manual.clone()),
        None => {
            let m = Arc::new(SimKernel::with_manual_clock(h.table.clone()));
            (m.clone(), Some(m))
        }
    };
    tracing::subscriber::with_default(tracing::subscriber::NoSubscriber::default(), || {
        let mut engine = opening::open_engine(kernel, h.table.clone(), res, None, &s.procfs);
        match &manual {
            Some(m) => m.advance(CHECK_WINDOW.as_nanos() as u64),
            None => std::thread::sleep(CHECK_WINDOW),
        }
        engine.collect();
        engine.metric_states()
    })
}

/// Runs `list` or `check` and returns what to print; `serve` runs until
/// SIGTERM/SIGINT and returns nothing to print.
pub fn run(s: Settings) -> Result<Output, AppError> {
    match s.command {
        Command::Serve(web) => serve::serve(s.host, *web).map(|()| Output::ok(String::new())),
        Command::Stat(st) => stat::stat(s.host, st).map(|()| Output::ok(String::new())),
        Command::Top(t) => top::top(s.host, t).map(|()| Output::ok(String::new())),
        Command::Record(r) => record::record(s.host, r).map(Output::ok),
        Command::Reference { out, cli } => reference::write(&out, &cli).map(Output::ok),
        Command::MetricsImport {
            files,
            output,
            options,
            target,
        } => import::run(&files, output.as_deref(), options, target.as_deref()),
        Command::Rules { splice } => rules::run(&s.host.load_config()?.derived, splice.as_deref()),
        Command::List { json, tracepoints } => {
            let h = Host::open(&s.host)?;
            let probe = h.kernel.as_deref().map(prober);
            let privilege = h.kernel.as_ref().map(|_| Privilege::detect(&s.host.procfs));
            let r = ListReport::new(
                &h.table,
                &h.ctx,
                probe.as_ref().map(|p| p as _),
                privilege.as_ref(),
                tracepoints,
            );
            output(&r, json, || r.text()).map(Output::ok)
        }
        Command::Check {
            json,
            strict,
            web_config_file,
        } => {
            // A web config given to `check` is validated too (TLS files read).
            if let Some(p) = &web_config_file {
                load_web_config(p)?;
            }
            let cfg = s.host.load_config()?;
            let facts = s.host.facts();
            let h = Host::open_with(&s.host, Some(&facts))?;
            sampling::check_event(cfg.sampling.as_ref(), &h, &s.host)?;
            let self_test = s.host.self_test(h.kernel.as_deref(), &h.table);
            let probe = h.kernel.as_deref().map(prober);
            let mut res = resolve_config(&cfg, &h.table, &h.ctx, probe.as_ref().map(|p| p as _));
            if h.kernel.is_some() {
                crate::report::diagnose(&mut res, &Privilege::detect(&s.host.procfs), true);
            }
            let budgets = h.kernel.as_deref().map_or_else(Vec::new, |k| {
                let online = k
                    .online_cpus(&h.table.sysfs)
                    .unwrap_or_else(|| h.table.topology.online.clone());
                crate::engine::counters::measure(k, &h.table, &online, &facts, &[])
            });
            let series = budget(&h, &s.host, res.clone(), &budgets);
            let derived = crate::engine::HostDerived::resolve(
                std::sync::Arc::new(cfg.derived),
                &res,
                &h.table,
            );
            let mut r = CheckReport::new(&res)
                .with_derived(&derived.resolution)
                .with_default_derived(derived.config.implicit.as_deref())
                .with_identities(&h.table)
                .with_counters(budgets)
                .with_self_test(self_test);
            if r.refusal.is_none() {
                r = r.with_states(&counter_states(&h, &s.host, res));
                r.budget = Some(series);
            }
            if let Some(c) = &cfg.cgroups {
                let found = cgroups::check_discover(c, h.kernel.as_deref(), &s.host);
                r.cgroups = Some(crate::report::CheckCgroups::new(&found, c.max_cgroups));
            }
            let choice = cgroups::check_choice(cfg.cgroups.as_ref(), h.kernel.as_deref(), &s.host);
            if let (Some(cg), Some(c)) = (r.cgroups.as_mut(), &choice) {
                cg.backend = Some(crate::report::CheckBackend::new(c));
            }
            let backend = choice
                .as_ref()
                .map(crate::report::backend_line)
                .unwrap_or_default();
            Ok(Output {
                text: output(&r, json, || cgroups::with_backend(&r, &backend))?,
                failure: r.failure(strict),
            })
        }
    }
}
