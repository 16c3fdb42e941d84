//! perf-exporter: Linux perf_events counters for Prometheus and OpenTelemetry.
//!
//! The pipeline, one module per stage:
//!
//! * [`config`]: the YAML configuration as written (no I/O but reading it);
//! * [`pmu`]: PMU discovery from a sysfs root;
//! * [`resolve`]: event specs and fallback chains to concrete encodings;
//! * [`perf`]: the only `unsafe` code: `perf_event_open`, ioctls, `read`,
//!   behind the [`perf::Kernel`] seam (live kernel or simulated PMU);
//! * [`engine`]: groups per CPU / uncore instance, scaled monotonic
//!   counters, hotplug, producing a plain-data [`engine::Snapshot`];
//! * [`export`]: Prometheus text and OpenMetrics encoding, OTLP push;
//! * [`web`]: the HTTP endpoint;
//! * [`report`]: the `list` and `check` commands' reports.
#![warn(missing_docs)]

pub mod config;
pub mod engine;
pub mod export;
pub mod perf;
pub mod pmu;
pub mod report;
pub mod resolve;
pub mod web;
