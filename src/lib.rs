//! perf-exporter: Linux perf_events counters for Prometheus and OpenTelemetry.
//!
//! # Stage order
//!
//! The crate is a pipeline of stages. A module may use modules of its own
//! stage or of earlier stages, never of a later one, and no file imports
//! itself in a circle (`tests/layering.rs` resolves every `use`, `super::`
//! and inline path to a file and fails on a back-edge or a file cycle). A
//! stage is a top-level module:
//!
//! 0. leaves, usable by every stage: [`duration`] (the one duration
//!    grammar of every flag), [`spec`] (the event-spec grammar and the
//!    grammars of sysfs terms, formats and CPU lists), [`sys`] (the
//!    kernel's ABI numbers, from perf-event-open-sys, and `statfs`),
//!    [`problem`] (the typed reasons why a metric is not counted,
//!    with what to do), [`bounded`] (bounded reads of files the
//!    exporter does not control: regular files only, capped),
//!    [`terminal`] (names escaped for the terminal views) and [`derive`]
//!    (perf's metric-expression grammar and its evaluator, for the
//!    `derived:` metrics);
//! 1. [`config`]: the YAML configuration as written, specs stored parsed
//!    (no I/O but reading the file);
//! 2. [`pmu`]: discovery from the sysfs and procfs roots: PMUs, topology,
//!    and where tracefs is ([`pmu::host`]); [`cgroup`]: the cgroup root
//!    and the workloads a `cgroups:` section selects;
//! 3. [`resolve`]: event specs and fallback chains to concrete encodings
//!    or a reasoned "unavailable" (no syscalls);
//! 4. [`perf`]: the syscall layer, with [`sys`] the one place with raw OS calls:
//!    `perf_event_open`, ioctls, `read`, behind the [`perf::Kernel`] seam
//!    (live kernel or simulated PMU with its own acceptance tables);
//! 5. [`engine`]: groups per CPU / uncore instance, scaled monotonic
//!    counters, hotplug, producing [`snapshot`]s (the plain data model of
//!    a collection, which the exporters depend on instead of the engine);
//!    [`privilege`] (what the process may open and what missing privilege
//!    costs) and the availability [`probe`] sit beside it;
//! 6. [`export`] (Prometheus text and OpenMetrics encoding, OTLP push),
//!    with [`report`] (the `list` and `check` reports) and [`view`] (how
//!    `stat` and `top` print in the terminal);
//! 7. [`web`]: the HTTP endpoint (routes, shared collection, TLS, auth,
//!    limits, landing page);
//! 8. the application: [`app`], the composition root (start-up, the one
//!    reload path, signals), and [`cli`], the command line as typed and as
//!    resolved (and `main`, thin);
//!
//! and [`fuzzing`], the fuzz targets, which may reach every stage.
#![warn(missing_docs)]

pub mod app;
pub mod bounded;
pub mod cgroup;
pub mod cli;
pub mod config;
pub mod derive;
pub mod duration;
pub mod engine;
pub mod export;
pub mod fuzzing;
pub mod perf;
pub mod pmu;
pub mod privilege;
pub mod probe;
pub mod problem;
pub mod report;
pub mod resolve;
pub mod snapshot;
pub mod spec;
pub mod sys;
pub mod terminal;
pub(crate) mod view;
pub mod web;

/// The version (`Cargo.toml`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The source revision this binary was built from (`git rev-parse --short
/// HEAD` at build time, see `build.rs`), `unknown` outside git.
pub const REVISION: &str = env!("PERF_EXPORTER_REVISION");

/// `--version`'s line after the name: `0.1.0 (revision 1a2b3c4)`.
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (revision ",
    env!("PERF_EXPORTER_REVISION"),
    ")"
);
