//! perf-exporter: Linux perf_events counters for Prometheus and OpenTelemetry.
//!
//! The pipeline, one module per stage:
//!
//! * [`duration`]: the one duration grammar of every flag (a leaf);
//! * [`config`]: the YAML configuration as written (no I/O but reading it);
//! * [`pmu`]: PMU discovery from a sysfs root;
//! * [`resolve`]: event specs and fallback chains to concrete encodings;
//! * [`perf`]: the syscall layer, the one place with raw OS calls: `perf_event_open`, ioctls, `read`,
//!   behind the [`perf::Kernel`] seam (live kernel or simulated PMU);
//! * [`engine`]: groups per CPU / uncore instance, scaled monotonic
//!   counters, hotplug, producing a plain-data [`snapshot::Snapshot`];
//! * [`snapshot`]: the plain data model of a collection, which the exporters depend on;
//! * [`export`]: Prometheus text and OpenMetrics encoding, OTLP push;
//! * [`web`]: the HTTP endpoint (routes, shared collection, TLS, auth, limits);
//! * [`report`]: the `list` and `check` commands' reports;
//! * [`privilege`]: which privilege the process holds and what it costs;
//! * [`app`]: the composition root: start-up, the one reload path, signals;
//! * [`cli`]: the command line as typed and as resolved (thin; over [`app`]);
//! * [`fuzzing`]: the fuzz targets (cargo-fuzz and the corpus tests).
#![warn(missing_docs)]

pub mod app;
pub mod cli;
pub mod config;
pub mod duration;
pub mod engine;
pub mod export;
pub mod fuzzing;
pub mod perf;
pub mod pmu;
pub mod privilege;
pub mod report;
pub mod resolve;
pub mod snapshot;
pub mod web;
