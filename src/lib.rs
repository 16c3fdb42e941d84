//! perf-exporter: Linux perf_events counters for Prometheus and OpenTelemetry.
//!
//! The pipeline, one module per stage:
//!
//! * [`duration`]: the one duration grammar of every flag (a leaf);
//! * [`config`]: the YAML configuration as written (no I/O but reading it);
//! * [`problem`]: why a metric is not counted, typed, with what to do (a leaf);
//! * [`pmu`]: PMU discovery from a sysfs root;
//! * [`resolve`]: event specs and fallback chains to concrete encodings;
//! * [`perf`]: the syscall layer, the one place with raw OS calls: `perf_event_open`, ioctls, `read`,
//!   behind the [`perf::Kernel`] seam (live kernel or simulated PMU);
//! * [`probe`]: proves an encoding opens on this host (for resolution, `list`, `check`);
//! * [`engine`]: groups per CPU / uncore instance, scaled monotonic
//!   counters, hotplug, producing a plain-data [`snapshot::Snapshot`];
//! * [`snapshot`]: the plain data model of a collection, which the exporters depend on;
//! * [`export`]: Prometheus text and OpenMetrics encoding, OTLP push;
//! * [`web`]: the HTTP endpoint (TLS, auth, limits, reload);
//! * [`report`]: the `list` and `check` commands' reports;
//! * [`privilege`]: which privilege the process holds and what it costs;
//! * [`fuzzing`]: the fuzz targets (cargo-fuzz and the corpus tests).
#![warn(missing_docs)]

pub mod config;
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
pub mod web;
