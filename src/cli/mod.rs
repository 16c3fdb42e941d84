//! The command line as typed ([`Args`], clap derive) and as resolved
//! ([`crate::app::Settings`]), split as ripgrep splits its LowArgs and
//! HiArgs: clap's value parsers turn every duration and enumeration into a
//! typed value (an unknown `--log.level` or a bare-number duration is
//! refused with what is valid), and [`Args::settings`] turns the flags into
//! what the application runs with. Serve-only flags belong to `serve` (and
//! to the bare command, which serves): `list --help` and `check --help` do
//! not show them, and `list` does not accept them.

mod otlp;

use crate::app::{Command, HostSettings, Settings, StatSettings, TopSettings, WebSettings};
use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

/// Linux perf_events counters (cycles, IPC, cache misses, DRAM bandwidth,
/// software events, tracepoints) for Prometheus and OpenTelemetry.
#[derive(Debug, Parser)]
#[command(name = "perf-exporter", version = crate::LONG_VERSION, about, long_about = None)]
pub struct Args {
    #[command(flatten)]
    global: GlobalArgs,
    /// The bare command serves: its flags are `serve`'s.
    #[command(flatten)]
    serve: ServeArgs,
    #[command(subcommand)]
    cmd: Option<Cmd>,
}

/// Flags every subcommand takes.
#[derive(Debug, clap::Args)]
struct GlobalArgs {
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
    /// cgroup root for per-workload counting (default: found in <path.procfs>/self/mountinfo: cgroup2, else the v1 perf_event hierarchy).
    #[arg(long = "path.cgroupfs", global = true, value_name = "DIR")]
    cgroupfs: Option<PathBuf>,
    /// Count on the simulated PMU described by --path.sysfs (a fixture tree) instead of the live kernel.
    #[arg(long, global = true)]
    simulate: bool,
    /// Sum every set over the node (as if each had `per: node`): one
    /// series per metric instead of one per CPU, core or socket.
    #[arg(long = "config.aggregate-cpus", global = true)]
    aggregate_cpus: bool,
    /// With --simulate: make every open on PMU fail with ERRNO (a number or EACCES, EPERM, EINVAL, ENOENT, EMFILE, EBUSY); `*` for every PMU. For tests of the explanations.
    #[arg(
        long = "simulate.refuse",
        global = true,
        value_name = "PMU=ERRNO",
        value_parser = parse_refuse,
        hide = true
    )]
    simulate_refuse: Vec<(String, i32)>,
    /// With --simulate: make PMU a fake guest PMU whose counters all count RATE events per second of running time, whatever the event (the guest that reports 395 instructions per second on a busy CPU). For tests of the self-test.
    #[arg(
        long = "simulate.guest-rate",
        global = true,
        value_name = "PMU=RATE",
        value_parser = parse_guest_rate,
        hide = true
    )]
    simulate_guest_rate: Vec<(String, f64)>,
    /// At start-up, check each core PMU's counters with a calibrated loop on one CPU (instructions and cycles must move by what it ran; catches a virtual PMU that counts next to nothing): a few milliseconds, once. Its verdict is logged, shown by `check` and on the landing page, and exported as perf_self_test_passed.
    #[arg(long = "collector.self-test", global = true)]
    self_test: bool,
    /// With --simulate: make every simulated perf_event_open take this long, e.g. 10ms (a slow build of the counters: scrapes are served while a reload opens its counters). For tests.
    #[arg(
        long = "simulate.open-delay",
        global = true,
        value_name = "DURATION",
        value_parser = crate::duration::parse,
        hide = true
    )]
    simulate_open_delay: Option<Duration>,
    /// Log level.
    #[arg(long = "log.level", global = true, value_enum, default_value_t = LogLevel::Info)]
    log_level: LogLevel,
    /// Log format.
    #[arg(long = "log.format", global = true, value_enum, default_value_t = LogFormat::Logfmt)]
    log_format: LogFormat,
}

/// `--log.level`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogLevel {
    /// Everything, including each connection's end.
    Debug,
    /// Start-up, reloads and shutdown.
    Info,
    /// Only what needs attention.
    Warn,
    /// Only failures.
    Error,
}

impl LogLevel {
    /// The `tracing` filter directive.
    pub fn directive(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
        }
    }
}

/// `--log.format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// `key=value` lines.
    Logfmt,
    /// One JSON object per line.
    Json,
}

/// Flags of `serve` (and of the bare command).
#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// Address to listen on.
    #[arg(long = "web.listen-address", default_value = ":9659", value_name = "[HOST]:PORT", value_parser = listen_address)]
    listen: String,
    /// Path under which to expose metrics (an absolute path other than the built-in pages).
    #[arg(long = "web.telemetry-path", default_value = "/metrics", value_parser = telemetry_path)]
    telemetry_path: String,
    /// Prefix of every route (the page, the API, the telemetry path, /-/...), for a reverse proxy that does not strip it: `/perf` serves `/perf/`, `/perf/metrics`, ...
    #[arg(long = "web.route-prefix", default_value = "/", value_name = "PATH", value_parser = route_prefix)]
    route_prefix: String,
    /// exporter-toolkit web config file: TLS, basic auth, response headers, rate limit.
    #[arg(long = "web.config.file", value_name = "FILE")]
    web_config_file: Option<PathBuf>,
    /// Let a reload turn TLS off or drop basic auth on the running listener (refused by default).
    #[arg(long = "web.config.allow-downgrade")]
    allow_downgrade: bool,
    /// Maximum number of scrapes in flight; more get 503 (0: no limit).
    #[arg(long = "web.max-requests", default_value_t = 40)]
    max_requests: usize,
    /// Maximum number of open connections; more wait to be accepted (0: no limit).
    #[arg(long = "web.max-connections", default_value_t = 512)]
    max_connections: usize,
    /// Leave out the metrics about the exporter itself, as node_exporter's flag of that name does (its promhttp_* and process_*): the process's (process_*: CPU, memory, file descriptors; a few /proc reads per scrape) and the HTTP server's (perf_http_rejected_requests_total, perf_live_streams_closed_total).
    #[arg(long = "web.disable-exporter-metrics")]
    disable_exporter_metrics: bool,
    /// Maximum number of open live-view streams (/api/v1/stream WebSockets); more get 503 (0: no bound of its own). Each holds a connection, and streams never take more than half of --web.max-connections.
    #[arg(long = "web.max-streams", default_value_t = 64)]
    max_streams: usize,
    /// Origins (scheme://host[:port]) besides the exporter's own whose pages may open /api/v1/stream, e.g. a dashboard's; comma-separated or repeated. Other browser origins get 403.
    #[arg(
        long = "web.allowed-origins",
        value_name = "ORIGIN",
        value_delimiter = ',',
        value_parser = crate::web::origin::parse_allowed
    )]
    allowed_origins: Vec<String>,
    /// Enable POST /-/reload (re-reads --config.file and --web.config.file, as SIGHUP does).
    #[arg(long = "web.enable-lifecycle")]
    enable_lifecycle: bool,
    /// Time a client has to send a request's headers (and the TLS handshake), also between keep-alive requests.
    #[arg(
        long = "web.read-header-timeout",
        default_value = "10s",
        value_name = "DURATION",
        value_parser = crate::duration::parse
    )]
    read_header_timeout: Duration,
    /// Time a scrape's collection may take (then 503), and a response write may stall.
    #[arg(
        long = "web.request-timeout",
        default_value = "30s",
        value_name = "DURATION",
        value_parser = crate::duration::parse
    )]
    request_timeout: Duration,
    /// Time one read of the config, web config, TLS or sysfs files may take at start-up and on reload (a hung NFS or FUSE mount); then the start-up fails, or the reload is refused and the next one tries again.
    #[arg(
        long = "config.read-timeout",
        default_value = "10s",
        value_name = "DURATION",
        value_parser = crate::duration::parse
    )]
    read_timeout: Duration,
    /// With --simulate: make every simulated group read take this long, e.g. 50ms (a slow PMU, to demo and test slow scrapes).
    #[arg(long = "simulate.read-delay", value_name = "DURATION", value_parser = crate::duration::parse)]
    simulate_read_delay: Option<Duration>,
    #[command(flatten)]
    otlp: otlp::OtlpArgs,
}

/// Refuses a listen address that could never be bound, before start-up:
/// `HOST:PORT` or `:PORT`, a port from 0 to 65535, an IPv6 address in
/// brackets. A host name is resolved when binding.
fn listen_address(s: &str) -> Result<String, String> {
    let Some((host, port)) = s.rsplit_once(':') else {
        return Err(format!("`{s}` is not HOST:PORT or :PORT (e.g. `:9659`)"));
    };
    if port.parse::<u16>().is_err() {
        return Err(format!("the port `{port}` is not a number from 0 to 65535"));
    }
    if let Some(inner) = host.strip_prefix('[') {
        let ok = inner
            .strip_suffix(']')
            .is_some_and(|a| a.parse::<std::net::Ipv6Addr>().is_ok());
        if !ok {
            return Err(format!(
                "`{host}` is not an IPv6 address in brackets (e.g. `[::1]`)"
            ));
        }
    } else if host.contains(':') {
        return Err(format!("an IPv6 address needs brackets: `[{host}]:{port}`"));
    } else if host.chars().any(|c| c.is_whitespace() || c == '/') {
        return Err(format!("`{host}` is not a host name or address"));
    }
    Ok(s.to_string())
}

/// `--web.route-prefix`: an absolute path, kept without its trailing `/`
/// (`/` itself is no prefix: the empty string).
fn route_prefix(s: &str) -> Result<String, String> {
    if !s.starts_with('/') {
        return Err(format!("`{s}` must start with `/` (e.g. `/{s}`)"));
    }
    if s.contains(['?', '#']) || s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("`{s}` is not a plain URL path"));
    }
    Ok(s.trim_end_matches('/').to_string())
}

/// Refuses a telemetry path that could never be reached (no leading `/`)
/// or that would hide a built-in page.
fn telemetry_path(s: &str) -> Result<String, String> {
    if !s.starts_with('/') {
        return Err(format!("`{s}` must start with `/` (e.g. `/{s}`)"));
    }
    if s == "/" || s.starts_with("/-/") || s.starts_with("/api/") {
        return Err(format!(
            "`{s}` is a built-in page (`/`, `/-/...`, `/api/...`); choose another path"
        ));
    }
    if s.contains(['?', '#']) || s.chars().any(char::is_whitespace) {
        return Err(format!("`{s}` is not a plain URL path"));
    }
    Ok(s.to_string())
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Serve /metrics (the default).
    Serve(Box<ServeArgs>),
    /// List every event this host offers, and whether it is available.
    List {
        /// JSON output.
        #[arg(long)]
        json: bool,
        /// List every tracepoint instead of their count.
        #[arg(long)]
        tracepoints: bool,
    },
    /// Counters in the terminal, like `perf stat -a -I`: each interval's counts, derived ratios and what is not available (with why), and a summary at the end (also on Ctrl-C).
    Stat {
        /// Print every INTERVAL, e.g. 1000ms or 1s.
        #[arg(short = 'I', long = "interval", default_value = "1s", value_name = "INTERVAL", value_parser = stat_interval)]
        interval: Duration,
        /// Stop after DURATION, e.g. 10s (default: at Ctrl-C).
        #[arg(short = 'd', long = "duration", value_name = "DURATION", value_parser = crate::duration::parse)]
        duration: Option<Duration>,
        /// A line per CPU.
        #[arg(long = "per-cpu")]
        per_cpu: bool,
        /// One JSON object per interval (the live view's frame), then `{"summary": ...}`.
        #[arg(long)]
        json: bool,
        /// Show only these metrics of the config or derived values (ipc, l1d_miss_ratio, ...); repeat or separate with commas.
        #[arg(
            short = 'e',
            long = "event",
            value_name = "METRIC",
            value_delimiter = ','
        )]
        select: Vec<String>,
    },
    /// Sampling in the terminal, like `perf top` by process: who the samples of an event go to (process, thread, cgroup or pod), refreshed; lost and throttled records shown; a summary at the end (also on Ctrl-C).
    Top(Box<TopArgs>),
    /// A profile with call stacks (kernel and user, frame pointers), symbolized, written as a gzipped pprof profile (as `go tool pprof` reads), like `perf record -a -g`; the same as serve's /api/v1/profile.
    Record(Box<RecordArgs>),
    /// Resolve the config and report each metric's winning event (and validate --web.config.file, when given).
    Check {
        /// JSON output.
        #[arg(long)]
        json: bool,
        /// Also fail when any metric is unavailable (by default `check` fails
        /// only where `serve` would refuse the config: nothing countable).
        #[arg(long)]
        strict: bool,
        /// exporter-toolkit web config file to validate (TLS files are read).
        #[arg(long = "web.config.file", value_name = "FILE")]
        web_config_file: Option<PathBuf>,
    },
    /// Derived metrics: `metrics import` turns perf's metric JSON into a config.
    #[command(subcommand)]
    Metrics(MetricsCmd),
    /// Writes the Prometheus recording rules of the config's derived metrics (its `derived:` table, the one stat, the live view and OTLP evaluate): a rule per metric PromQL can express over rate() of the exported counters, a comment saying why for the others (the exporter evaluates those).
    Rules {
        /// Replace the lines between `# BEGIN perf-exporter rules` and `# END perf-exporter rules` of this rules file instead of printing a rules file.
        #[arg(long, value_name = "FILE")]
        splice: Option<PathBuf>,
    },
    /// Writes the book's reference pages, generated from the code (for
    /// developers: `cargo run -- reference --out docs/src/reference`).
    #[command(hide = true)]
    Reference {
        /// The directory to write them into.
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
}

/// `perf-exporter metrics ...`.
#[derive(Debug, Subcommand)]
enum MetricsCmd {
    /// Reads perf's event and metric JSON files (a model's directory under the kernel's tools/perf/pmu-events/arch/, or Intel's perfmon files in perf's layout) and writes a config: `sets:` that count the events in schedulable groups and `derived:` entries for the metrics, reporting each metric it cannot take and why.
    Import {
        /// The JSON files: the events and the metrics of one CPU model.
        #[arg(value_name = "FILE", required = true)]
        files: Vec<PathBuf>,
        /// Write the config here (default: standard output).
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
        /// The PMU of events without a `Unit` (cpu on x86; e.g. armv8_pmuv3_0 on Arm).
        #[arg(long = "core-pmu", value_name = "PMU", default_value = "cpu")]
        core_pmu: String,
        /// General-purpose counters one core set may use (4: Intel cores with SMT on).
        #[arg(long = "counters", value_name = "N", default_value = "4", value_parser = clap::value_parser!(u64).range(1..=64))]
        counters: u64,
        /// The sysfs tree of the host the config is for (its /sys, or a fixture): bare names the files do not define (TSC) are resolved against its events, `Compat` is matched against its PMUs' `identifier`, and `PerPkg` events on a PMU without a cpumask are refused.
        #[arg(long = "target", value_name = "DIR")]
        target: Option<PathBuf>,
    },
}

impl Args {
    /// Parses the process's arguments; exits with clap's message (and code
    /// 2) when they are not valid.
    pub fn parse_args() -> Args {
        Args::try_parse_args(std::env::args_os()).unwrap_or_else(|e| e.exit())
    }

    /// Parses `args` (the program name first). The global flags may come
    /// before a subcommand (`perf-exporter --path.sysfs X list`); the
    /// serve-only flags only with `serve` or no subcommand.
    pub fn try_parse_args<I, T>(args: I) -> Result<Args, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let mut cmd = Args::command();
        let m = cmd.try_get_matches_from_mut(args)?;
        if let Some(sub) = m.subcommand_name() {
            let given = cmd
                .get_arguments()
                .filter(|a| !a.is_global_set())
                .find(|a| m.value_source(a.get_id().as_str()) == Some(ValueSource::CommandLine));
            if let Some(a) = given {
                let flag = a.get_long().unwrap_or(a.get_id().as_str());
                let msg = if sub == "serve" {
                    format!("--{flag} goes after `serve` (`perf-exporter serve --{flag} ...`)")
                } else {
                    format!("--{flag} applies to `serve` only, not to `{sub}`")
                };
                return Err(cmd.error(clap::error::ErrorKind::ArgumentConflict, msg));
            }
        }
        Args::from_arg_matches(&m).map_err(|e| e.format(&mut cmd))
    }

    /// The log settings, wanted before anything else runs.
    pub fn log(&self) -> (LogLevel, LogFormat) {
        (self.global.log_level, self.global.log_format)
    }

    /// Resolves the flags into what the application runs with.
    pub fn settings(self) -> Settings {
        let g = self.global;
        let (command, simulate_read_delay) = match self.cmd {
            Some(Cmd::List { json, tracepoints }) => (Command::List { json, tracepoints }, None),
            Some(Cmd::Check {
                json,
                strict,
                web_config_file,
            }) => (
                Command::Check {
                    json,
                    strict,
                    web_config_file,
                },
                None,
            ),
            Some(Cmd::Stat {
                interval,
                duration,
                per_cpu,
                json,
                select,
            }) => (
                Command::Stat(StatSettings {
                    interval,
                    duration,
                    per_cpu,
                    json,
                    select,
                }),
                None,
            ),
            Some(Cmd::Top(t)) => (Command::Top(t.settings()), None),
            Some(Cmd::Record(r)) => (Command::Record(r.settings()), None),
            Some(Cmd::Metrics(MetricsCmd::Import {
                files,
                output,
                core_pmu,
                counters,
                target,
            })) => (
                Command::MetricsImport {
                    files,
                    output,
                    target,
                    options: crate::config::import::Options {
                        core_pmu,
                        counters: usize::try_from(counters).unwrap_or(4),
                        target: None,
                    },
                },
                None,
            ),
            Some(Cmd::Rules { splice }) => (Command::Rules { splice }, None),
            Some(Cmd::Reference { out }) => (
                Command::Reference {
                    out,
                    cli: Box::new(<Args as clap::CommandFactory>::command()),
                },
                None,
            ),
            Some(Cmd::Serve(s)) => s.command(),
            None => self.serve.command(),
        };
        let host = HostSettings {
            sysfs: g.sysfs,
            procfs: g.procfs,
            tracefs: g.tracefs,
            cgroupfs: g.cgroupfs,
            simulate: g.simulate,
            simulate_read_delay,
            simulate_refuse: g.simulate_refuse,
            simulate_open_delay: g.simulate_open_delay,
            simulate_guest_rate: g.simulate_guest_rate,
            self_test: g.self_test,
            config_file: g.config_file,
            aggregate_cpus: g.aggregate_cpus,
        };
        Settings { host, command }
    }
}

/// `top`'s flags.
#[derive(Debug, clap::Args)]
struct TopArgs {
    /// Samples per second on each CPU.
    #[arg(short = 'F', long = "freq", default_value = "99", value_name = "HZ", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    freq: u64,
    /// A sample every PERIOD events instead of -F (at most 2^63-1: the
    /// kernel refuses a period with the top bit set).
    #[arg(short = 'c', long = "period", value_name = "PERIOD", value_parser = clap::value_parser!(u64).range(1..=i64::MAX as u64), conflicts_with = "freq")]
    period: Option<u64>,
    /// Stop after DURATION, e.g. 10s (default: at Ctrl-C).
    #[arg(short = 'd', long = "duration", value_name = "DURATION", value_parser = crate::duration::parse)]
    duration: Option<Duration>,
    /// Refresh every INTERVAL.
    #[arg(short = 'I', long = "interval", default_value = "1s", value_name = "INTERVAL", value_parser = stat_interval)]
    interval: Duration,
    /// The event to sample (default: cycles, or cpu-clock without a hardware PMU), with perf's modifiers if wanted (cycles:u, cpu-clock:k).
    #[arg(short = 'e', long = "event", value_name = "EVENT")]
    event: Option<String>,
    /// What samples are attributed to.
    #[arg(long = "by", default_value = "process", value_parser = ["process", "thread", "cgroup", "pod"])]
    by: String,
    /// One JSON object per refresh, then `{"summary": ...}`.
    #[arg(long)]
    json: bool,
    /// Data pages of each CPU's ring (a power of two, at most 512, as
    /// `sampling.ring_pages`).
    #[arg(long = "ring-pages", default_value_t = crate::perf::ring::DEFAULT_RING_PAGES, value_name = "N", value_parser = ring_pages)]
    ring_pages: usize,
    /// Only these CPUs, e.g. 0,2-3.
    #[arg(short = 'C', long = "cpu", value_name = "CPUS", value_parser = cpu_list)]
    cpus: Option<CpuList>,
    /// Rows of the table.
    #[arg(short = 'n', long = "rows", default_value = "20", value_name = "N")]
    rows: usize,
    /// Call stacks with each sample (kernel and user, frame pointers): the hottest stacks since the start, symbolized, under each refresh's table (not in --json).
    #[arg(short = 'g', long = "call-graph")]
    call_graph: bool,
}

impl TopArgs {
    fn settings(&self) -> TopSettings {
        use crate::engine::sample::By;
        TopSettings {
            freq: self.freq,
            period: self.period,
            duration: self.duration,
            interval: self.interval,
            event: self.event.clone(),
            by: match self.by.as_str() {
                "thread" => By::Thread,
                "cgroup" => By::Cgroup,
                "pod" => By::Pod,
                _ => By::Process,
            },
            json: self.json,
            ring_pages: self.ring_pages,
            cpus: self.cpus.clone().map(|c| c.0),
            rows: self.rows,
            callchain: self.call_graph.then(crate::perf::CallchainSpec::default),
        }
    }
}

/// `record`'s flags.
#[derive(Debug, clap::Args)]
struct RecordArgs {
    /// Sample for DURATION, e.g. 10s.
    #[arg(short = 'd', long = "duration", default_value = "10s", value_name = "DURATION", value_parser = crate::duration::parse)]
    duration: Duration,
    /// Write the profile (gzipped pprof) to FILE.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: PathBuf,
    /// The event to sample (default: cycles, or cpu-clock without a hardware PMU), with perf's modifiers if wanted.
    #[arg(short = 'e', long = "event", value_name = "EVENT")]
    event: Option<String>,
    /// Samples per second on each CPU.
    #[arg(short = 'F', long = "freq", default_value = "99", value_name = "HZ", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    freq: u64,
    /// The label samples go under (pod_uid, cgroup or process).
    #[arg(long = "by", default_value = "process", value_parser = ["process", "cgroup", "pod"])]
    by: String,
    /// Only the samples of this process.
    #[arg(long = "pid", value_name = "PID", conflicts_with_all = ["cgroup", "pod"])]
    pid: Option<u32>,
    /// Only the samples of this cgroup (its path from the cgroupfs root, e.g. /system.slice/x.service); implies --by cgroup.
    #[arg(long = "cgroup", value_name = "PATH", conflicts_with = "pod")]
    cgroup: Option<String>,
    /// Only the samples of this pod (its uid); implies --by pod.
    #[arg(long = "pod", value_name = "UID")]
    pod: Option<String>,
    /// Frames per stack at most (sample_max_stack; the kernel caps it at kernel.perf_event_max_stack).
    #[arg(long = "max-stack", default_value_t = crate::perf::DEFAULT_MAX_STACK, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1020))]
    max_stack: u16,
    /// No kernel frames (exclude_callchain_kernel).
    #[arg(long = "no-kernel-stack")]
    no_kernel_stack: bool,
    /// No user frames (exclude_callchain_user).
    #[arg(long = "no-user-stack")]
    no_user_stack: bool,
    /// Data pages of each CPU's ring (a power of two, at most 512).
    #[arg(long = "ring-pages", default_value_t = crate::app::PROFILE_RING_PAGES, value_name = "N", value_parser = ring_pages)]
    ring_pages: usize,
}

impl RecordArgs {
    fn settings(&self) -> crate::app::RecordSettings {
        use crate::engine::sample::{By, ProfileFilter};
        let by = match (self.by.as_str(), &self.pod, &self.cgroup) {
            (_, Some(_), _) | ("pod", ..) => By::Pod,
            (_, _, Some(_)) | ("cgroup", ..) => By::Cgroup,
            _ => By::Process,
        };
        let filter = match (&self.pid, &self.cgroup, &self.pod) {
            (Some(p), ..) => ProfileFilter::Pid(*p),
            (_, Some(c), _) => ProfileFilter::Name(c.clone()),
            (.., Some(p)) => ProfileFilter::Name(p.clone()),
            _ => ProfileFilter::All,
        };
        crate::app::RecordSettings {
            profile: crate::app::ProfileSettings {
                duration: self.duration,
                event: self.event.clone(),
                freq: self.freq,
                by,
                filter,
                callchain: crate::perf::CallchainSpec {
                    max_stack: self.max_stack,
                    exclude_kernel: self.no_kernel_stack,
                    exclude_user: self.no_user_stack,
                },
                ring_pages: self.ring_pages,
            },
            output: self.output.clone(),
        }
    }
}

/// `--ring-pages`: a power of two from 1 to 512 (the bound of
/// `sampling.ring_pages`: 2 MiB per CPU with 4 KiB pages, pinned).
fn ring_pages(s: &str) -> Result<usize, String> {
    use crate::config::sampling::MAX_RING_PAGES as MAX;
    let n: usize = s.parse().map_err(|e| format!("`{s}`: {e}"))?;
    if n == 0 || !n.is_power_of_two() || n > MAX {
        return Err(format!(
            "`{s}` is not a power of two from 1 to {MAX} (1, 2, 4, ... {MAX}: 2 MiB per CPU with 4 KiB pages, pinned)"
        ));
    }
    Ok(n)
}

/// A CPU list flag's value.
#[derive(Debug, Clone)]
struct CpuList(Vec<u32>);

/// `-C`: a CPU list (`0,2-3`).
fn cpu_list(s: &str) -> Result<CpuList, String> {
    crate::spec::format::parse_cpu_list(s)
        .map(CpuList)
        .map_err(|e| format!("`{s}`: {e}"))
}

/// `-I` of `stat`: a duration of at least 10ms (as `perf stat -I`).
fn stat_interval(s: &str) -> Result<Duration, String> {
    let d = crate::duration::parse(s)?;
    if d < Duration::from_millis(10) {
        return Err(format!("`{s}` is shorter than 10ms, the shortest interval"));
    }
    Ok(d)
}

/// `PMU=ERRNO` of `--simulate.refuse`.
fn parse_refuse(s: &str) -> Result<(String, i32), String> {
    let (pmu, e) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}` is not PMU=ERRNO"))?;
    let errno = match e {
        "EACCES" => libc::EACCES,
        "EPERM" => libc::EPERM,
        "EINVAL" => libc::EINVAL,
        "ENOENT" => libc::ENOENT,
        "EMFILE" => libc::EMFILE,
        "EBUSY" => libc::EBUSY,
        n => n.parse().map_err(|_| {
            format!(
                "`{e}` is not an errno (a number or EACCES, EPERM, EINVAL, ENOENT, EMFILE, EBUSY)"
            )
        })?,
    };
    Ok((pmu.to_string(), errno))
}

/// `PMU=RATE` of `--simulate.guest-rate`.
fn parse_guest_rate(s: &str) -> Result<(String, f64), String> {
    let (pmu, r) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}` is not PMU=RATE"))?;
    match r.parse::<f64>() {
        Ok(rate) if rate.is_finite() && rate >= 0.0 => Ok((pmu.to_string(), rate)),
        _ => Err(format!(
            "`{r}` is not a rate (events per second, 0 or more)"
        )),
    }
}

impl ServeArgs {
    /// The serve command, and the simulated read delay (a host setting).
    fn command(self) -> (Command, Option<Duration>) {
        let web = WebSettings {
            listen: self.listen,
            telemetry_path: self.telemetry_path,
            route_prefix: self.route_prefix,
            web_config_file: self.web_config_file,
            allow_downgrade: self.allow_downgrade,
            read_timeout: self.read_timeout,
            max_requests: self.max_requests,
            max_connections: self.max_connections,
            max_streams: self.max_streams,
            disable_exporter_metrics: self.disable_exporter_metrics,
            allowed_origins: self.allowed_origins,
            enable_lifecycle: self.enable_lifecycle,
            read_header_timeout: self.read_header_timeout,
            request_timeout: self.request_timeout,
            otlp: self.otlp.flags(),
        };
        (Command::Serve(Box::new(web)), self.simulate_read_delay)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        Args::try_parse_args(std::iter::once("perf-exporter").chain(args.iter().copied()))
    }

    /// Issue 24 item 15: `127.0.0.1:99999` was refused only after start-up.
    #[test]
    fn listen_addresses_are_checked_when_parsed() {
        for ok in [
            ":9659",
            "0.0.0.0:9659",
            "[::1]:9659",
            "localhost:9659",
            "127.0.0.1:0",
        ] {
            assert_eq!(listen_address(ok).as_deref(), Ok(ok));
        }
        for (bad, why) in [
            (
                "127.0.0.1:99999",
                "the port `99999` is not a number from 0 to 65535",
            ),
            ("9659", "`9659` is not HOST:PORT or :PORT (e.g. `:9659`)"),
            (":http", "the port `http` is not a number from 0 to 65535"),
            ("::1:9659", "an IPv6 address needs brackets: `[::1]:9659`"),
            (
                "[::x]:9659",
                "`[::x]` is not an IPv6 address in brackets (e.g. `[::1]`)",
            ),
        ] {
            assert_eq!(listen_address(bad), Err(why.to_string()), "{bad}");
        }
    }

    #[test]
    fn log_values_are_enumerations() {
        let e = parse(&["--log.level", "verbose"]).unwrap_err().to_string();
        assert!(
            e.contains("[possible values: debug, info, warn, error]"),
            "{e}"
        );
        let e = parse(&["--log.format", "text"]).unwrap_err().to_string();
        assert!(e.contains("[possible values: logfmt, json]"), "{e}");
        let a = parse(&["list", "--log.level", "warn"]).unwrap();
        assert_eq!(a.log().0, LogLevel::Warn);
    }

    #[test]
    fn durations_need_a_unit_and_a_bound() {
        let e = parse(&["--web.request-timeout", "5"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("write `5s` or `5ms`"), "{e}");
        let e = parse(&["serve", "--web.read-header-timeout", "3000000000000000h"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("longest allowed duration"), "{e}");
        let s = parse(&["--web.request-timeout", "1m30s"])
            .unwrap()
            .settings();
        match s.command {
            Command::Serve(w) => assert_eq!(w.request_timeout, Duration::from_secs(90)),
            _ => panic!("serve expected"),
        }
        let s = parse(&["serve", "--config.read-timeout", "250ms"])
            .unwrap()
            .settings();
        match s.command {
            Command::Serve(w) => assert_eq!(w.read_timeout, Duration::from_millis(250)),
            _ => panic!("serve expected"),
        }
        assert!(parse(&["--config.read-timeout", "0s"]).is_err());
    }

    #[test]
    fn serve_flags_are_serve_only() {
        assert!(parse(&["list", "--web.request-timeout", "5"]).is_err());
        assert!(parse(&["list", "--web.listen-address", ":1"]).is_err());
        let e = parse(&["--web.listen-address", ":1", "list"]).unwrap_err();
        assert!(
            e.to_string()
                .contains("--web.listen-address applies to `serve` only, not to `list`"),
            "{e}"
        );
        assert!(parse(&["--web.listen-address", ":1", "serve"]).is_err());
        // Global flags may come first.
        let a = parse(&["--path.sysfs", "/x", "--log.level", "warn", "check"]).unwrap();
        assert_eq!(a.log().0, LogLevel::Warn);
        assert_eq!(a.settings().host.sysfs, std::path::PathBuf::from("/x"));
        let a = parse(&["check", "--path.cgroupfs", "/c"]).unwrap();
        assert_eq!(a.settings().host.cgroupfs, Some(PathBuf::from("/c")));
        assert!(parse(&["check", "--web.config.file", "w.yml"]).is_ok());
        assert!(parse(&["serve", "--web.listen-address", ":1"]).is_ok());
        assert!(parse(&["list", "--web.allowed-origins", "https://a.example"]).is_err());
    }

    #[test]
    fn allowed_origins_are_origins() {
        let s = parse(&[
            "--web.allowed-origins",
            "https://Dash.example:443,http://a.example:3000",
        ])
        .unwrap()
        .settings();
        match s.command {
            Command::Serve(w) => assert_eq!(
                w.allowed_origins,
                ["https://dash.example", "http://a.example:3000"]
            ),
            _ => panic!("serve expected"),
        }
        let e = parse(&["serve", "--web.allowed-origins", "dash.example"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not an origin"), "{e}");
    }

    #[test]
    fn route_prefixes() {
        assert_eq!(route_prefix("/").as_deref(), Ok(""));
        assert_eq!(route_prefix("/perf/").as_deref(), Ok("/perf"));
        assert_eq!(route_prefix("/a/b").as_deref(), Ok("/a/b"));
        for bad in ["perf", "/p?x", "/p q"] {
            assert!(route_prefix(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn telemetry_paths() {
        for bad in ["metrics", "/", "/-/healthy", "/api/v1/snapshot", "/a b"] {
            assert!(telemetry_path(bad).is_err(), "{bad}");
        }
        assert_eq!(telemetry_path("/m").unwrap(), "/m");
    }
}
