//! `/metrics`: the shared collection plus the exporter's own metrics,
//! encoded as asked (`Accept`, `Accept-Encoding`), once per collection.

use super::collect::Collected;
use super::{gzip, State, REJECT_REASONS};
use crate::export::prometheus;
use crate::snapshot::{Family, Kind, Sample};
use hyper::body::Bytes;
use std::sync::atomic::Ordering;

/// Which `/metrics` body a scrape wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Want {
    /// OpenMetrics (else the classic text format).
    pub(super) openmetrics: bool,
    /// gzip-compressed.
    pub(super) gzip: bool,
}

impl Want {
    /// How many different bodies there are.
    pub(super) const COUNT: usize = 4;

    /// The body's slot, `0..COUNT`.
    pub(super) fn index(self) -> usize {
        usize::from(self.openmetrics) * 2 + usize::from(self.gzip)
    }

    /// What the request's `Accept` and `Accept-Encoding` headers ask for.
    pub(super) fn of(accept: &str, accept_encoding: &str) -> Self {
        Want {
            openmetrics: prometheus::wants_openmetrics(accept),
            gzip: gzip::accepted(accept_encoding),
        }
    }
}

/// One encoded `/metrics` body.
#[derive(Debug)]
pub(super) struct Encoded {
    /// The bytes sent (compressed if `gzip`).
    pub(super) body: Bytes,
    pub(super) ctype: &'static str,
    pub(super) gzip: bool,
}

/// Encodes the body `want` asks for from a shared collection and the
/// exporter's own metrics taken with it.
pub(super) fn encode(state: &State, c: &Collected, want: Want) -> Encoded {
    // Room for the last response plus some growth.
    let hint = state.last_len.load(Ordering::Relaxed);
    let parts = [c.own.0.clone(), c.families.clone(), c.own.1.clone()];
    let (text, ctype) = prometheus::encode_parts_as(&parts, want.openmetrics, hint + hint / 8);
    state.last_len.store(text.len(), Ordering::Relaxed);
    let body = if want.gzip {
        Bytes::from(gzip::compress(text.as_bytes()))
    } else {
        Bytes::from(text)
    };
    Encoded {
        body,
        ctype,
        gzip: want.gzip,
    }
}

fn gauge(name: &str, help: &str, value: f64) -> Family {
    Family {
        name: name.into(),
        help: help.into(),
        kind: Kind::Gauge,
        samples: vec![Sample {
            labels: Vec::new().into(),
            value,
            start_unix_nanos: 0,
        }],
    }
}

/// The exporter's own metrics at the end of a collection that took `secs`:
/// build info (first in the output) and the rest (last), OTLP's export
/// statistics among them when OTLP pushes.
pub(super) fn own_metrics(state: &State, secs: f64) -> (Vec<Family>, Vec<Family>) {
    let front = vec![Family {
            name: "perf_exporter_build_info".into(),
            help: "A metric with a constant '1' value labelled by version, revision and whether the PMU is simulated.".into(),
            kind: Kind::Gauge,
            samples: vec![Sample {
                labels: vec![
                    ("version", crate::VERSION.into()),
                    ("revision", crate::REVISION.into()),
                    ("simulated", state.simulated.to_string()),
                ]
                .into(),
                value: 1.0,
                start_unix_nanos: 0,
            }],
    }];
    let mut back = Vec::with_capacity(5);
    back.push(gauge(
        "perf_scrape_duration_seconds",
        "Time the collection serving this scrape took to read every perf group (concurrent scrapes share one).",
        secs,
    ));
    back.push(gauge(
        "perf_config_last_reload_successful",
        "Whether the last configuration reload (SIGHUP or POST /-/reload) succeeded (1) or was refused and the previous configuration kept (0).",
        if state.reload_ok.load(Ordering::Relaxed) { 1.0 } else { 0.0 },
    ));
    back.push(gauge(
        "perf_config_last_reload_success_timestamp_seconds",
        "When the configuration was last loaded successfully, in Unix seconds.",
        f64::from_bits(state.last_success.load(Ordering::Relaxed)),
    ));
    back.push(Family {
        name: "perf_http_rejected_requests_total".into(),
        help: "HTTP requests turned away: over --web.max-requests, over the web config's rate limit, without valid credentials, or collection over --web.request-timeout.".into(),
        kind: Kind::Counter,
        samples: REJECT_REASONS
            .iter()
            .zip(&state.rejected)
            .map(|(reason, n)| Sample {
                labels: vec![("reason", (*reason).to_string())].into(),
                value: n.load(Ordering::Relaxed) as f64,
                start_unix_nanos: 0,
            })
            .collect(),
    });
    if let Some(st) = &state.otlp {
        back.push(st.family());
    }
    back.extend(super::process::families(&state.procfs));
    (front, back)
}
