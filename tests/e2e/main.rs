//! The `e2e` suite: the real `perf-exporter` binary, mostly on the
//! simulated PMU, against real clients and servers: its commands and
//! flags, scrapes, reload, sampling, top-down, the HTTP limits and
//! security, the live stream and page (headless Chromium), OTLP push
//! (VictoriaMetrics, a gRPC receiver), Prometheus and the dashboards.
//! Each test starts its own processes on free ports, so they run in
//! parallel.
//!
//! One test binary for all of them (each test crate is a separate link);
//! a test is `MODULE::NAME`, e.g. `cargo test --test e2e web_security::`.

#[path = "../common/mod.rs"]
mod common;

mod cli;
mod cli_flags;
mod dashboards;
mod derived;
mod derived_check;
mod e2e_prometheus;
mod import;
mod live_stream;
mod live_view;
mod model_events;
mod otlp;
mod otlp_failures;
mod otlp_profiles;
mod reload;
mod sampling;
mod topdown;
mod web_limits;
mod web_security;
