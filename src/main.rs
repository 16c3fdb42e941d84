//! perf-exporter: command line. Flags, logging and exit codes; the work is
//! in the library.

use anyhow::{Context as _, Result};
use clap::{Parser, Subcommand};
use perf_exporter::config::Config;
use perf_exporter::export::otlp::{self, OtlpFlags, OtlpSettings};
use perf_exporter::perf::live::LiveKernel;
use perf_exporter::perf::sim::SimKernel;
use perf_exporter::perf::Kernel;
use perf_exporter::pmu::PmuTable;
use perf_exporter::privilege::Privilege;
use perf_exporter::probe::prober;
use perf_exporter::report::{CheckReport, ListReport};
use perf_exporter::resolve::chain::resolve_config;
use perf_exporter::resolve::Context;
use perf_exporter::web::config::WebConfig;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// Linux perf_events counters (cycles, IPC, cache misses, DRAM bandwidth,
/// software events, tracepoints) for Prometheus and OpenTelemetry.
#[derive(Debug, Parser)]
#[command(name = "perf-exporter", version, about, long_about = None)]
struct Cli {
    /// YAML config file (default: the embedded default config).
    #[arg(long = "config.file", global = true, value_name = "FILE")]
    config_file: Option<PathBuf>,
    /// sysfs mount point.
    #[arg(
        long = "path.sysfs",
        global = true,
        default_value = "/sys",
        value_name = "DIR"
    )]
    sysfs: PathBuf,
    /// procfs mount point.
    #[arg(
        long = "path.procfs",
        global = true,
        default_value = "/proc",
        value_name = "DIR"
    )]
    procfs: PathBuf,
    /// tracefs mount point (default: <path.sysfs>/kernel/tracing, then <path.sysfs>/kernel/debug/tracing).
    #[arg(long = "path.tracefs", global = true, value_name = "DIR")]
    tracefs: Option<PathBuf>,
    /// Count on the simulated PMU described by --path.sysfs (a fixture tree) instead of the live kernel.
    #[arg(long, global = true)]
    simulate: bool,
    /// Sum every set over CPUs (as if each had `per_cpu: false`): one
    /// series per metric instead of one per CPU.
    #[arg(long = "config.aggregate-cpus", global = true)]
    aggregate_cpus: bool,
    /// With --simulate: make every simulated group read take this long, e.g. 50ms (a slow PMU, to demo and test slow scrapes).
    #[arg(long = "simulate.read-delay", global = true, value_name = "DURATION")]
    simulate_read_delay: Option<String>,
    /// With --simulate: make every open on PMU fail with ERRNO (a number or EACCES, EPERM, EINVAL, ENOENT, EMFILE, EBUSY); `*` for every PMU. For tests of the explanations.
    #[arg(
        long = "simulate.refuse",
        global = true,
        value_name = "PMU=ERRNO",
        hide = true
    )]
    simulate_refuse: Vec<String>,
    /// Log level: debug, info, warn, error.
    #[arg(long = "log.level", global = true, default_value = "info")]
    log_level: String,
    /// Log format: logfmt or json.
    #[arg(long = "log.format", global = true, default_value = "logfmt")]
    log_format: String,
    #[command(flatten)]
    web: WebArgs,
    #[command(flatten)]
    otlp: OtlpArgs,
    #[command(subcommand)]
    cmd: Option<Cmd>,
}

#[derive(Debug, clap::Args)]
struct WebArgs {
    /// Address to listen on.
    #[arg(long = "web.listen-address", global = true, default_value = ":9659")]
    listen: String,
    /// Path under which to expose metrics.
    #[arg(long = "web.telemetry-path", global = true, default_value = "/metrics")]
    telemetry_path: String,
    /// exporter-toolkit web config file: TLS, basic auth, response headers, rate limit.
    #[arg(long = "web.config.file", global = true, value_name = "FILE")]
    web_config_file: Option<PathBuf>,
    /// Maximum number of scrapes in flight; more get 503 (0: no limit).
    #[arg(long = "web.max-requests", global = true, default_value_t = 40)]
    max_requests: usize,
    /// Enable POST /-/reload (re-reads --config.file and --web.config.file, as SIGHUP does).
    #[arg(long = "web.enable-lifecycle", global = true)]
    enable_lifecycle: bool,
    /// Time a client has to send a request's headers (and the TLS handshake), also between keep-alive requests.
    #[arg(
        long = "web.read-header-timeout",
        global = true,
        default_value = "10s",
        value_name = "DURATION"
    )]
    read_header_timeout: String,
    /// Time a scrape's collection may take (then 503), and a response write may stall.
    #[arg(
        long = "web.request-timeout",
        global = true,
        default_value = "30s",
        value_name = "DURATION"
    )]
    request_timeout: String,
}

/// OTLP push. Each flag overrides its OpenTelemetry environment variable
/// (named in the help); push is on when an endpoint is set either way, or
/// with --otlp.only.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "OTLP push (flags override the OTEL_* environment variables)")]
struct OtlpArgs {
    /// Base URL of the OTLP receiver; http/protobuf appends /v1/metrics (OTEL_EXPORTER_OTLP_ENDPOINT).
    #[arg(long = "otlp.endpoint", global = true, value_name = "URL")]
    endpoint: Option<String>,
    /// Full URL to push metrics to, used as is (OTEL_EXPORTER_OTLP_METRICS_ENDPOINT).
    #[arg(long = "otlp.metrics-endpoint", global = true, value_name = "URL")]
    metrics_endpoint: Option<String>,
    /// http/protobuf (default) or grpc (OTEL_EXPORTER_OTLP_PROTOCOL).
    #[arg(long = "otlp.protocol", global = true, value_name = "PROTOCOL")]
    protocol: Option<String>,
    /// Extra headers, k=v,k2=v2 with percent-encoded values, merged over the environment's (OTEL_EXPORTER_OTLP_HEADERS).
    #[arg(long = "otlp.headers", global = true, value_name = "K=V,...")]
    headers: Option<String>,
    /// Time allowed for one export, e.g. 10s (OTEL_EXPORTER_OTLP_TIMEOUT, in ms).
    #[arg(long = "otlp.timeout", global = true, value_name = "DURATION")]
    timeout: Option<String>,
    /// gzip or none (OTEL_EXPORTER_OTLP_COMPRESSION).
    #[arg(long = "otlp.compression", global = true, value_name = "ALGO")]
    compression: Option<String>,
    /// Time between pushes, e.g. 60s (OTEL_METRIC_EXPORT_INTERVAL, in ms).
    #[arg(long = "otlp.interval", global = true, value_name = "DURATION")]
    interval: Option<String>,
    /// PEM CA bundle trusted for an https endpoint, instead of the system roots (OTEL_EXPORTER_OTLP_CERTIFICATE).
    #[arg(long = "otlp.certificate", global = true, value_name = "FILE")]
    certificate: Option<PathBuf>,
    /// PEM client certificate for mutual TLS (OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE).
    #[arg(long = "otlp.client-certificate", global = true, value_name = "FILE")]
    client_certificate: Option<PathBuf>,
    /// PEM client key for mutual TLS (OTEL_EXPORTER_OTLP_CLIENT_KEY).
    #[arg(long = "otlp.client-key", global = true, value_name = "FILE")]
    client_key: Option<PathBuf>,
    /// service.name of the resource (OTEL_SERVICE_NAME; default perf-exporter).
    #[arg(long = "otlp.service-name", global = true, value_name = "NAME")]
    service_name: Option<String>,
    /// Resource attributes k=v,..., merged over the environment's (OTEL_RESOURCE_ATTRIBUTES).
    #[arg(
        long = "otlp.resource-attributes",
        global = true,
        value_name = "K=V,..."
    )]
    resource_attributes: Option<String>,
    /// Push only: no HTTP listener (OTEL_SDK_DISABLED=true makes this an error).
    #[arg(long = "otlp.only", global = true)]
    only: bool,
}

impl OtlpArgs {
    fn flags(&self) -> OtlpFlags {
        OtlpFlags {
            endpoint: self.endpoint.clone(),
            metrics_endpoint: self.metrics_endpoint.clone(),
            protocol: self.protocol.clone(),
            headers: self.headers.clone(),
            timeout: self.timeout.clone(),
            compression: self.compression.clone(),
            interval: self.interval.clone(),
            certificate: self.certificate.clone(),
            client_certificate: self.client_certificate.clone(),
            client_key: self.client_key.clone(),
            service_name: self.service_name.clone(),
            resource_attributes: self.resource_attributes.clone(),
            only: self.only,
        }
    }
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Serve /metrics (the default).
    Serve,
    /// List every event this host offers, and whether it is available.
    List {
        /// JSON output.
        #[arg(long)]
        json: bool,
        /// List every tracepoint instead of their count.
        #[arg(long)]
        tracepoints: bool,
    },
    /// Resolve the config and report each metric's winning event (and validate --web.config.file, when given).
    /// Fails whenever `serve` would refuse the config (nothing can be counted).
    Check {
        /// JSON output.
        #[arg(long)]
        json: bool,
        /// Also fail when any metric is unavailable.
        #[arg(long)]
        strict: bool,
    },
}

fn init_logging(level: &str, format: &str) -> Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_new(level).with_context(|| {
        format!("--log.level: `{level}` is not a level (debug, info, warn, error)")
    })?;
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    match format {
        "json" => b.json().init(),
        "logfmt" | "text" => b.init(),
        other => anyhow::bail!("--log.format: `{other}` is not a format (logfmt, json)"),
    }
    Ok(())
}

fn load_config(cli: &Cli) -> Result<Config> {
    let mut cfg = match &cli.config_file {
        Some(p) => Config::load(p)?,
        None => Config::default_config(),
    };
    if cli.aggregate_cpus {
        cfg.aggregate_cpus();
    }
    Ok(cfg)
}

/// Whether the sysfs root is this machine's own.
/// Whether the sysfs root is a mounted sysfs (this machine's own, also
/// when the host's `/sys` is mounted elsewhere, as in a DaemonSet) rather
/// than a copied tree.
fn is_live_sysfs(p: &Path, procfs: &Path) -> bool {
    let Ok(c) = std::fs::canonicalize(p) else {
        return false;
    };
    if c == Path::new("/sys") {
        return true;
    }
    std::fs::read_to_string(procfs.join("self/mountinfo"))
        .is_ok_and(|mi| perf_exporter::pmu::is_sysfs_mount(&c, &mi))
}

struct Host {
    table: PmuTable,
    ctx: Context,
    kernel: Option<Arc<dyn Kernel>>,
}

fn host(cli: &Cli) -> Result<Host> {
    let table = PmuTable::discover(&cli.sysfs)
        .with_context(|| format!("PMU discovery under --path.sysfs={}", cli.sysfs.display()))?;
    for w in &table.warnings {
        tracing::warn!(warning = %w, "sysfs entry skipped");
    }
    let ctx = match &cli.tracefs {
        Some(t) => Context {
            tracefs: Some(t.clone()),
            ..Context::default()
        },
        None => Context::for_host(&cli.sysfs, &cli.procfs),
    };
    if !cli.simulate_refuse.is_empty() && !cli.simulate {
        anyhow::bail!("--simulate.refuse needs --simulate");
    }
    if cli.simulate_read_delay.is_some() && !cli.simulate {
        anyhow::bail!("--simulate.read-delay needs --simulate");
    }
    let kernel: Option<Arc<dyn Kernel>> = if cli.simulate {
        let sim = SimKernel::new(table.clone());
        if let Some(d) = &cli.simulate_read_delay {
            sim.set_read_delay(
                perf_exporter::duration::parse(d)
                    .map_err(|e| anyhow::anyhow!("--simulate.read-delay: {e}"))?,
            );
        }
        for r in &cli.simulate_refuse {
            let (pmu, errno) = parse_refuse(r)?;
            if pmu == "*" {
                for p in &table.pmus {
                    sim.refuse(&p.name, errno);
                }
            } else {
                sim.refuse(pmu, errno);
            }
        }
        Some(Arc::new(sim))
    } else if is_live_sysfs(&cli.sysfs, &cli.procfs) {
        Some(Arc::new(LiveKernel::new()))
    } else {
        None
    };
    Ok(Host { table, ctx, kernel })
}

fn parse_refuse(s: &str) -> Result<(&str, i32)> {
    let (pmu, e) = s
        .split_once('=')
        .ok_or_else(|| anyhow::anyhow!("--simulate.refuse: `{s}` is not PMU=ERRNO"))?;
    let errno = match e {
        "EACCES" => libc::EACCES,
        "EPERM" => libc::EPERM,
        "EINVAL" => libc::EINVAL,
        "ENOENT" => libc::ENOENT,
        "EMFILE" => libc::EMFILE,
        "EBUSY" => libc::EBUSY,
        n => n.parse().map_err(|_| {
            anyhow::anyhow!("--simulate.refuse: `{e}` is not an errno (a number or EACCES, EPERM, EINVAL, ENOENT, EMFILE, EBUSY)")
        })?,
    };
    Ok((pmu, errno))
}

fn run(cli: Cli) -> Result<ExitCode> {
    match &cli.cmd {
        Some(Cmd::List { json, tracepoints }) => {
            let h = host(&cli)?;
            let probe = h.kernel.as_deref().map(prober);
            let privilege = h.kernel.as_ref().map(|_| Privilege::detect(&cli.procfs));
            let r = ListReport::new(
                &h.table,
                &h.ctx,
                probe.as_ref().map(|p| p as _),
                privilege.as_ref(),
                *tracepoints,
            );
            if *json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else {
                print!("{}", r.text());
            }
            Ok(ExitCode::SUCCESS)
        }
        Some(Cmd::Check { json, strict }) => {
            // A web config given to `check` is validated too (TLS files read).
            if let Some(p) = &cli.web.web_config_file {
                WebConfig::load(p).with_context(|| format!("--web.config.file={}", p.display()))?;
            }
            let cfg = load_config(&cli)?;
            let h = host(&cli)?;
            let probe = h.kernel.as_deref().map(prober);
            let mut res = resolve_config(&cfg, &h.table, &h.ctx, probe.as_ref().map(|p| p as _));
            if h.kernel.is_some() {
                perf_exporter::report::diagnose(&mut res, &Privilege::detect(&cli.procfs), true);
            }
            let r = CheckReport::new(&res);
            if *json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else {
                print!("{}", r.text());
            }
            if let Some(why) = r.failure(*strict) {
                eprintln!("perf-exporter: check failed: {why}");
            }
            Ok(ExitCode::from(r.exit_status(*strict)))
        }
        None | Some(Cmd::Serve) => serve(&cli),
    }
}

fn duration_flag(name: &str, v: &str) -> Result<std::time::Duration> {
    perf_exporter::duration::parse(v).map_err(|e| anyhow::anyhow!("{name}: {e}"))
}

fn serve(cli: &Cli) -> Result<ExitCode> {
    // A bad web config is refused before anything starts.
    let web_config = match &cli.web.web_config_file {
        Some(p) => {
            WebConfig::load(p).with_context(|| format!("--web.config.file={}", p.display()))?
        }
        None => WebConfig::default(),
    };
    let read_header_timeout =
        duration_flag("--web.read-header-timeout", &cli.web.read_header_timeout)?;
    let request_timeout = duration_flag("--web.request-timeout", &cli.web.request_timeout)?;
    let cfg = load_config(cli)?;
    let otlp = OtlpSettings::resolve(&cli.otlp.flags(), &otlp::process_env, &cli.procfs)?;
    let h = host(cli)?;
    let Some(kernel) = h.kernel else {
        anyhow::bail!(
            "--path.sysfs={} is not the live /sys; to serve a fixture tree, add --simulate",
            cli.sysfs.display()
        );
    };
    perf_exporter::web::run(perf_exporter::web::Options {
        config: cfg,
        config_file: cli.config_file.clone(),
        table: h.table,
        ctx: h.ctx,
        kernel,
        listen: cli.web.listen.clone(),
        telemetry_path: cli.web.telemetry_path.clone(),
        procfs: cli.procfs.clone(),
        otlp,
        web_config,
        max_requests: cli.web.max_requests,
        enable_lifecycle: cli.web.enable_lifecycle,
        read_header_timeout,
        request_timeout,
        aggregate_cpus: cli.aggregate_cpus,
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(e) = init_logging(&cli.log_level, &cli.log_format) {
        eprintln!("perf-exporter: {e:#}");
        return ExitCode::from(2);
    }
    match run(cli) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("perf-exporter: {e:#}");
            ExitCode::from(1)
        }
    }
}
