//! `/metrics`: the shared collection plus this scrape's self-metrics,
//! encoded as asked (`Accept`).

use super::collect::Collected;
use super::{State, REJECT_REASONS};
use crate::export::prometheus;
use crate::snapshot::{Family, Kind, Sample};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Encodes one scrape from a shared collection, with the self-metrics.
pub(super) fn encode(state: &State, c: &Collected, accept: &str) -> (String, &'static str) {
    // The shared collection is encoded in place; only the few
    // self-metrics are this scrape's own.
    let (front, mut back) = self_metrics(state, c.secs);
    if let Some(st) = &state.otlp {
        back.push(st.family());
    }
    // Room for the last response plus some growth.
    let hint = state.last_len.load(Ordering::Relaxed);
    let parts = [Arc::new(front), c.families.clone(), Arc::new(back)];
    let (body, ctype) = prometheus::encode_parts(&parts, accept, hint + hint / 8);
    state.last_len.store(body.len(), Ordering::Relaxed);
    (body, ctype)
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

/// The self-metrics of one scrape: build info (first in the output) and
/// the rest (last).
fn self_metrics(state: &State, secs: f64) -> (Vec<Family>, Vec<Family>) {
    let front = vec![Family {
            name: "perf_exporter_build_info".into(),
            help: "A metric with a constant '1' value labelled by version and whether the PMU is simulated.".into(),
            kind: Kind::Gauge,
            samples: vec![Sample {
                labels: vec![
                    ("version", env!("CARGO_PKG_VERSION").into()),
                    ("simulated", state.simulated.to_string()),
                ]
                .into(),
                value: 1.0,
                start_unix_nanos: 0,
            }],
    }];
    let mut back = Vec::with_capacity(6);
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
    (front, back)
}
