//! `/metrics`: the shared collection plus the exporter's own metrics,
//! encoded as asked (`Accept`, `Accept-Encoding`), once per collection.
//!
//! The exporter's own metrics are one table ([`self_metrics`]): each
//! family's name, type, help, unit and where its value comes from.

use super::process::{Process, Reading};
use super::{gzip, State, CLOSE_REASONS, REJECT_REASONS};
use crate::export::otlp;
use crate::export::prometheus::{self, Format};
use crate::snapshot::{Family, Kind, Labels, Sample};
use hyper::body::Bytes;
use std::cell::RefCell;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

/// A `/metrics` body as sent: an exposition format, gzip-compressed or
/// not. A collection keeps one body of each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Want {
    /// The classic text format.
    Text,
    /// The classic text format, gzip-compressed.
    TextGzip,
    /// OpenMetrics.
    OpenMetrics,
    /// OpenMetrics, gzip-compressed.
    OpenMetricsGzip,
}

impl Want {
    /// Every body, in the order of their slots.
    pub(super) const ALL: [Want; 4] = [
        Want::Text,
        Want::TextGzip,
        Want::OpenMetrics,
        Want::OpenMetricsGzip,
    ];

    /// The body in `format`, compressed if `gzip`.
    pub(super) fn new(format: Format, gzip: bool) -> Self {
        match (format, gzip) {
            (Format::Text, false) => Want::Text,
            (Format::Text, true) => Want::TextGzip,
            (Format::OpenMetrics, false) => Want::OpenMetrics,
            (Format::OpenMetrics, true) => Want::OpenMetricsGzip,
        }
    }

    /// What the request's `Accept` and `Accept-Encoding` headers ask for.
    pub(super) fn of(accept: &str, accept_encoding: &str) -> Self {
        Want::new(Format::negotiate(accept), gzip::accepted(accept_encoding))
    }

    /// Its exposition format.
    pub(super) fn format(self) -> Format {
        match self {
            Want::Text | Want::TextGzip => Format::Text,
            Want::OpenMetrics | Want::OpenMetricsGzip => Format::OpenMetrics,
        }
    }

    /// Whether it is gzip-compressed.
    pub(super) fn gzip(self) -> bool {
        matches!(self, Want::TextGzip | Want::OpenMetricsGzip)
    }

    /// Its slot in a collection's bodies, `0..ALL.len()`.
    pub(super) fn slot(self) -> usize {
        self as usize
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

thread_local! {
    /// The text of this thread's last gzip body, its buffer reused by the
    /// next (one allocation and its page-touching fewer per scrape); let
    /// go when it grew beyond [`KEEP_TEXT_UP_TO`].
    static KEPT_TEXT: RefCell<String> = const { RefCell::new(String::new()) };
}

/// The largest text buffer a thread keeps between gzip bodies (a 2-CPU
/// host's five events are 7 KB, the default config's 30 KB; a 512-CPU
/// host at full resolution, 1.2 MB, allocates its own each time).
const KEEP_TEXT_UP_TO: usize = 256 * 1024;

/// Encodes the body `want` asks for from a shared collection's parts, in
/// order: the exporter's own metrics before the engine's families, the
/// families, its own metrics after them; then the derived gauges of
/// `derived`, whose `perf_event_available` samples join the engine's.
pub(super) fn encode(
    state: &State,
    parts: &[Arc<Vec<Family>>; 3],
    derived: &Arc<Vec<Family>>,
    want: Want,
) -> Encoded {
    // Room for the last response plus some growth.
    let hint = state.last_len.load(Ordering::Relaxed);
    if want.gzip() {
        // The text is only compressed, never sent: into this thread's
        // kept buffer.
        let kept = KEPT_TEXT.try_with(|t| {
            let mut kept = t.try_borrow_mut().ok()?;
            let text: &mut String = &mut kept;
            let room = hint + hint / 8;
            if text.capacity() < room {
                text.clear();
                text.reserve(room);
            }
            let format = prometheus::encode_parts_into(parts, derived, want.format(), text);
            state.last_len.store(text.len(), Ordering::Relaxed);
            let (body, gzip) = match gzip::compress(text.as_bytes()) {
                Some(z) => (Bytes::from(z), true),
                None => (Bytes::copy_from_slice(text.as_bytes()), false),
            };
            if text.capacity() > KEEP_TEXT_UP_TO {
                *text = String::new();
            }
            Some(Encoded {
                body,
                ctype: format.content_type(),
                gzip,
            })
        });
        if let Ok(Some(e)) = kept {
            return e;
        }
    }
    let (text, format) = prometheus::encode_parts(parts, derived, want.format(), hint + hint / 8);
    state.last_len.store(text.len(), Ordering::Relaxed);
    // Sent as it is should deflate ever fail (in memory it does not).
    let (body, gzip) = match want.gzip().then(|| gzip::compress(text.as_bytes())) {
        Some(Some(z)) => (Bytes::from(z), true),
        _ => (Bytes::from(text), false),
    };
    Encoded {
        body,
        ctype: format.content_type(),
        gzip,
    }
}

/// What the self-metrics are read from at the end of a collection.
struct Ctx<'a> {
    state: &'a State,
    /// How long the collection took.
    secs: f64,
    process: Reading,
}

/// Where a self-metric's samples come from.
#[derive(Debug)]
enum Get {
    /// One unlabelled sample, left out when `None`.
    One(fn(&Ctx<'_>) -> Option<f64>),
    /// Labelled samples (none: the family is left out).
    Many(fn(&Ctx<'_>) -> Vec<Sample>),
}

/// One of the exporter's own metric families.
#[derive(Debug)]
pub struct SelfMetric {
    /// The family's name.
    pub name: &'static str,
    /// Its type.
    pub kind: Kind,
    /// Its help.
    pub help: &'static str,
    /// The base unit the name ends in (`seconds`, `bytes`), empty for a
    /// count or a flag.
    pub unit: &'static str,
    /// The label names its samples carry.
    pub labels: &'static [&'static str],
    /// About the exporter itself (its HTTP server, its process) rather
    /// than what it counts or how: left out with
    /// `--web.disable-exporter-metrics`, as node_exporter's flag leaves
    /// out its `promhttp_*` and `process_*` families.
    pub exporter: bool,
    get: Get,
}

/// Every family of the exporter's own metrics, in the order of a scrape
/// (for the reference of metrics).
pub fn self_metrics() -> impl Iterator<Item = &'static SelfMetric> {
    FRONT.iter().chain(BACK)
}

/// The families before the engine's in a scrape.
const FRONT: &[SelfMetric] = &[SelfMetric {
    name: "perf_exporter_build_info",
    kind: Kind::Gauge,
    help: "A metric with a constant '1' value labelled by version, revision and whether the PMU is simulated.",
    unit: "",
    labels: &["version", "revision", "simulated"],
    exporter: false,
    get: Get::Many(build_info),
}];

/// The families after the engine's, in order (the process families in
/// node_exporter's).
const BACK: &[SelfMetric] = &[
    SelfMetric {
        name: "perf_scrape_duration_seconds",
        kind: Kind::Gauge,
        help: "Time the collection serving this scrape took to read every perf group (concurrent scrapes share one).",
        unit: "seconds",
        labels: &[],
        exporter: false,
        get: Get::One(|c| Some(c.secs)),
    },
    SelfMetric {
        name: "perf_config_last_reload_successful",
        kind: Kind::Gauge,
        help: "Whether the last configuration reload (SIGHUP or POST /-/reload) succeeded (1) or was refused and the previous configuration kept (0).",
        unit: "",
        labels: &[],
        exporter: false,
        get: Get::One(|c| Some(if c.state.reload_ok.load(Ordering::Relaxed) { 1.0 } else { 0.0 })),
    },
    SelfMetric {
        name: "perf_config_last_reload_success_timestamp_seconds",
        kind: Kind::Gauge,
        help: "When the configuration was last loaded successfully, in Unix seconds.",
        unit: "seconds",
        labels: &[],
        exporter: false,
        get: Get::One(|c| Some(f64::from_bits(c.state.last_success.load(Ordering::Relaxed)))),
    },
    SelfMetric {
        name: "perf_http_rejected_requests_total",
        kind: Kind::Counter,
        help: "HTTP requests turned away: over --web.max-requests, over the web config's rate limit, without valid credentials, collection over --web.request-timeout, or credentials not verified because the bcrypt queue was full (auth_busy).",
        unit: "",
        labels: &["reason"],
        exporter: true,
        get: Get::Many(rejected),
    },
    SelfMetric {
        name: "perf_live_streams_closed_total",
        kind: Kind::Counter,
        help: "Live-view streams (/api/v1/stream) the server closed: more than 4 frames in flight or a write blocked for 3 intervals (too_slow), no ping echoed for 3 intervals and at least 5 s (no_echo), login revoked by a web config reload (revoked), the viewer broke the WebSocket protocol (protocol).",
        unit: "",
        labels: &["reason"],
        exporter: true,
        get: Get::Many(streams_closed),
    },
    SelfMetric {
        name: otlp::EXPORTS_NAME,
        kind: Kind::Counter,
        help: otlp::EXPORTS_HELP,
        unit: "",
        labels: &["result"],
        exporter: false,
        get: Get::Many(otlp_exports),
    },
    SelfMetric {
        name: "process_cpu_seconds_total",
        kind: Kind::Counter,
        help: "Total user and system CPU time spent in seconds.",
        unit: "seconds",
        labels: &[],
        exporter: true,
        get: Get::One(|c| c.process.cpu_seconds),
    },
    SelfMetric {
        name: "process_open_fds",
        kind: Kind::Gauge,
        help: "Number of open file descriptors.",
        unit: "",
        labels: &[],
        exporter: true,
        get: Get::One(|c| c.process.open_fds),
    },
    SelfMetric {
        name: "process_max_fds",
        kind: Kind::Gauge,
        help: "Maximum number of open file descriptors.",
        unit: "",
        labels: &[],
        exporter: true,
        get: Get::One(|c| c.process.max_fds),
    },
    SelfMetric {
        name: "process_virtual_memory_bytes",
        kind: Kind::Gauge,
        help: "Virtual memory size in bytes.",
        unit: "bytes",
        labels: &[],
        exporter: true,
        get: Get::One(|c| c.process.virtual_bytes),
    },
    SelfMetric {
        name: "process_resident_memory_bytes",
        kind: Kind::Gauge,
        help: "Resident memory size in bytes.",
        unit: "bytes",
        labels: &[],
        exporter: true,
        get: Get::One(|c| c.process.resident_bytes),
    },
    SelfMetric {
        name: "process_start_time_seconds",
        kind: Kind::Gauge,
        help: "Start time of the process since unix epoch in seconds.",
        unit: "seconds",
        labels: &[],
        exporter: true,
        get: Get::One(|c| c.process.start_time),
    },
];

fn sample(labels: Labels, value: f64) -> Sample {
    Sample {
        labels,
        value,
        start_unix_nanos: 0,
    }
}

/// Label sets made once per process and shared by every scrape (a
/// [`Labels`] is rendered once and cloned by reference count).
fn cached<const N: usize>(
    cell: &'static OnceLock<[Labels; N]>,
    make: impl Fn(usize) -> Vec<(&'static str, String)>,
) -> &'static [Labels; N] {
    cell.get_or_init(|| std::array::from_fn(|i| Labels::new(make(i))))
}

fn build_info(c: &Ctx<'_>) -> Vec<Sample> {
    // One label set for each value of `simulated`.
    static LABELS: OnceLock<[Labels; 2]> = OnceLock::new();
    let labels = cached(&LABELS, |i| {
        vec![
            ("version", crate::VERSION.into()),
            ("revision", crate::REVISION.into()),
            ("simulated", (i == 1).to_string()),
        ]
    });
    vec![sample(labels[usize::from(c.state.simulated)].clone(), 1.0)]
}

/// One sample per reason, labelled `reason` (`labels`, in the order of
/// `counts`), from its counter.
fn by_reason(labels: &[Labels], counts: &[std::sync::atomic::AtomicU64]) -> Vec<Sample> {
    labels
        .iter()
        .zip(counts)
        .map(|(l, n)| sample(l.clone(), n.load(Ordering::Relaxed) as f64))
        .collect()
}

/// The `reason` label set of each of `reasons`, made once.
fn reason_labels<const N: usize>(
    cell: &'static OnceLock<[Labels; N]>,
    reasons: &'static [&'static str; N],
) -> &'static [Labels; N] {
    cached(cell, |i| vec![("reason", reasons[i].to_string())])
}

fn rejected(c: &Ctx<'_>) -> Vec<Sample> {
    static LABELS: OnceLock<[Labels; REJECT_REASONS.len()]> = OnceLock::new();
    by_reason(reason_labels(&LABELS, &REJECT_REASONS), &c.state.rejected)
}

fn streams_closed(c: &Ctx<'_>) -> Vec<Sample> {
    static LABELS: OnceLock<[Labels; CLOSE_REASONS.len()]> = OnceLock::new();
    by_reason(reason_labels(&LABELS, &CLOSE_REASONS), &c.state.hub.closed)
}

/// Only when OTLP pushes.
fn otlp_exports(c: &Ctx<'_>) -> Vec<Sample> {
    c.state
        .otlp
        .as_ref()
        .map_or_else(Vec::new, |st| st.samples())
}

/// The empty label set, shared.
fn unlabelled() -> Labels {
    static NONE: OnceLock<Labels> = OnceLock::new();
    NONE.get_or_init(|| Labels::new(Vec::new())).clone()
}

/// The table's families with their samples, those without any left out.
fn families(table: &[SelfMetric], c: &Ctx<'_>) -> Vec<Family> {
    table
        .iter()
        .filter(|m| c.state.exporter_metrics || !m.exporter)
        .filter_map(|m| {
            let samples = match m.get {
                Get::One(f) => vec![sample(unlabelled(), f(c)?)],
                Get::Many(f) => f(c),
            };
            (!samples.is_empty()).then(|| Family {
                name: m.name.into(),
                help: m.help.into(),
                kind: m.kind,
                samples,
            })
        })
        .collect()
}

/// The exporter's own metrics at the end of a collection that took `secs`:
/// build info (first in the output) and the rest (last), OTLP's export
/// statistics among them when OTLP pushes.
pub(super) fn own_metrics(state: &State, secs: f64) -> (Vec<Family>, Vec<Family>) {
    let c = Ctx {
        state,
        secs,
        process: state
            .process
            .as_ref()
            .map(Process::read)
            .unwrap_or_default(),
    };
    (families(FRONT, &c), families(BACK, &c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_body_has_its_own_slot() {
        for (i, w) in Want::ALL.into_iter().enumerate() {
            assert_eq!(w.slot(), i);
            assert_eq!(Want::new(w.format(), w.gzip()), w);
        }
        assert_eq!(
            Want::of("application/openmetrics-text", "gzip"),
            Want::OpenMetricsGzip
        );
        assert_eq!(Want::of("", ""), Want::Text);
    }

    /// Each name says its unit (Prometheus naming), a counter's ends in
    /// `_total`, and no name is given twice.
    #[test]
    fn self_metric_names_follow_the_conventions() {
        let mut seen = std::collections::BTreeSet::new();
        for m in self_metrics() {
            assert!(seen.insert(m.name), "{} twice", m.name);
            let base = m.name.strip_suffix("_total").unwrap_or(m.name);
            assert_eq!(m.kind == Kind::Counter, base != m.name, "{}", m.name);
            if !m.unit.is_empty() {
                assert!(
                    base.ends_with(&format!("_{}", m.unit)),
                    "{} in {}",
                    m.name,
                    m.unit
                );
            }
        }
    }
}
