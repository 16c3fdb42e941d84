//! OTLP push of the engine's counters, over HTTP/protobuf or gRPC.
//!
//! One module per job, as `opentelemetry-otlp` splits its exporter:
//!
//! * `parse`: value parsers (protocol, compression, milliseconds,
//!   `key=value` lists, headers, endpoint URLs and their redaction);
//! * `table` and `settings`: [`OtlpSettings::resolve`], the `--otlp.*`
//!   flags over the OpenTelemetry environment variables: a table of each
//!   setting's flag and variables, and one small resolver per setting;
//! * `host` and `resource`: host detection and the resource
//!   (`host.*`, `service.*`, `telemetry.sdk.*`, a stable
//!   `service.instance.id`);
//! * `naming`: OTel names and UCUM units that the Prometheus translation
//!   maps back to the exposition names;
//! * `stats`: [`ExportStats`] and the failure-log rate limit;
//! * `convert`: a [`Snapshot`] as an OTLP request, each series with its
//!   own start time;
//! * `derived`: the config's derived metrics as gauges over the push
//!   interval (`perf.derived.*`);
//! * `transport`: `http` and `grpc`, and the TLS material both read;
//! * `push`: the push loop; `pusher`: the push thread ([`Pusher`]);
//! * `profiles` and `profile_push`: OTLP profiles (`--otlp.profiles`,
//!   the protocol's development `profiles` signal), one profile per
//!   interval, with the same settings.
//!
//! # One collection per export
//!
//! At each interval the push loop calls the engine's `collect` **once**
//! (one `read()` per perf group, the same reads a scrape makes), converts
//! that snapshot and sends it. The loop runs on its own thread with its
//! own runtime: a slow collector never delays `/metrics`.
//!
//! # Data model
//!
//! Counters become cumulative monotonic sums whose points carry their
//! series' start (when its group was opened, or its count restarted);
//! snapshot events become gauges. The config's derived metrics (`derived:`)
//! are gauges `perf_derived_<name>` over the push interval: each export
//! evaluates them over the window since the previous export's collection. Names and units follow the OTel
//! conventions and map back to the Prometheus names under the Prometheus
//! translation: `perf_cpu_cycles_total` is `perf.cpu.cycles` in
//! `{cycle}`, `perf_dram_read_bytes_total` is `perf.dram.read` in `By`.
//! Labels (`cpu`, `pmu`, `socket`, …) become attributes.
//!
//! The data points are built here rather than through the OpenTelemetry
//! SDK, whose metric data keeps one start time per metric (see
//! `convert`); the wire types and the gRPC client are
//! `opentelemetry-proto`'s.

mod convert;
mod derived;
mod flags;
mod host;
mod naming;
mod parse;
mod profile_push;
mod profiles;
mod push;
mod pusher;
mod resource;
#[cfg(test)]
mod resource_tests;
mod settings;
mod stats;
mod table;
mod transport;

use parse::redact_url;
pub(crate) use profile_push::{start as start_profiles, TakeProfile};
pub(crate) use pusher::Pusher;
pub(crate) use settings::{process_env, OtlpFlags, OtlpSettings};
pub(crate) use stats::{ExportStats, EXPORTS_HELP, EXPORTS_NAME};

use crate::snapshot::Snapshot;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// Errors of the OTLP exporter: configuration and start-up.
#[derive(Debug, thiserror::Error)]
pub enum OtlpError {
    /// A setting has a value that is not valid.
    #[error("{origin}: {msg}")]
    Invalid {
        /// The flag or environment variable it came from.
        origin: String,
        /// What is wrong.
        msg: String,
    },
    /// `--otlp.only` while `OTEL_SDK_DISABLED=true`.
    #[error("--otlp.only but OTEL_SDK_DISABLED=true: nothing to export to and no listener")]
    DisabledButOnly,
    /// A certificate or key file cannot be read or parsed, or the key does
    /// not belong to the certificate.
    #[error("{origin} {path}: {msg}")]
    Tls {
        /// The flag or environment variable it came from.
        origin: String,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        msg: String,
    },
    /// The exporter could not be built.
    #[error("cannot build the OTLP exporter: {0}")]
    Build(String),
    /// The push thread or its runtime could not start.
    #[error("cannot start the OTLP push thread: {0}")]
    Start(String),
}

/// One engine collection (the same a scrape makes) and the derived
/// metrics of the config it counts.
pub(crate) struct Collection {
    /// The snapshot.
    pub snapshot: Snapshot,
    /// The config's `derived:` table.
    pub derived: Arc<crate::config::derived::DerivedTable>,
}

/// Collects once.
pub(crate) type Collect = Arc<dyn Fn() -> Collection + Send + Sync>;

/// A one-line description of the settings for the start-up log (the
/// endpoint redacted, header names only: values may be secrets).
pub(crate) fn describe(s: &OtlpSettings) -> String {
    let names: Vec<&str> = s.headers.iter().map(|(k, _)| k.as_str()).collect();
    let res: BTreeMap<&str, &str> = s
        .resource
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    format!(
        "endpoint={} protocol={} interval={}ms timeout={}ms compression={} headers=[{}] ca={} client_cert={} resource={:?}",
        redact_url(&s.endpoint),
        s.protocol.as_str(),
        s.interval.as_millis(),
        s.timeout.as_millis(),
        s.compression.as_str(),
        names.join(","),
        s.tls.ca.as_ref().map_or("system".into(), |(p, _)| p.display().to_string()),
        s.tls.client.is_some(),
        res
    )
}

impl std::fmt::Debug for OtlpSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let headers: Vec<(&str, &str)> = self
            .headers
            .iter()
            .map(|(k, _)| (k.as_str(), "REDACTED"))
            .collect();
        f.debug_struct("OtlpSettings")
            .field("endpoint", &redact_url(&self.endpoint))
            .field(
                "base_endpoint",
                &self.base_endpoint.as_deref().map(redact_url),
            )
            .field("protocol", &self.protocol)
            .field("headers", &headers)
            .field("timeout", &self.timeout)
            .field("compression", &self.compression)
            .field("interval", &self.interval)
            .field("tls", &self.tls)
            .field("resource", &self.resource)
            .field("only", &self.only)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::settings::tests::on;
    use super::*;

    #[test]
    fn describe_and_debug_redact_the_endpoint_and_header_values() {
        let s = on(
            &OtlpFlags {
                metrics_endpoint: Some("https://u:pw@c:4318/v1/metrics?api_key=k3y".into()),
                headers: Some("x-api-key=s3cret".into()),
                ..Default::default()
            },
            &[],
        );
        let d = describe(&s);
        let redacted = "https://REDACTED@c:4318/v1/metrics?api_key=REDACTED";
        assert!(d.contains(&format!("endpoint={redacted} ")), "{d}");
        assert!(d.contains("headers=[x-api-key]"), "{d}");
        let dbg = format!("{s:?}");
        assert!(dbg.contains(redacted), "{dbg}");
        assert!(dbg.contains("(\"x-api-key\", \"REDACTED\")"), "{dbg}");
        for secret in ["pw", "k3y", "s3cret"] {
            assert!(!d.contains(secret) && !dbg.contains(secret), "{d}\n{dbg}");
        }
    }
}
