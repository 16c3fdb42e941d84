//! Prometheus exposition of a [`Snapshot`](crate::snapshot::Snapshot):
//! the classic text format (0.0.4, the default) and OpenMetrics
//! (negotiated by `Accept`), the latter through prometheus-client's
//! encoder ([`Format`]).
//!
//! prometheus-client only writes OpenMetrics, so the classic format is
//! written here; both come from the same snapshot.

pub mod derived;

use crate::snapshot::{Family, Kind, Sample};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::fmt::Write as _;
use std::sync::Arc;

/// Content type of the classic text format.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
/// Content type of OpenMetrics text.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// An exposition format of `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The classic text format (0.0.4), the default.
    Text,
    /// OpenMetrics text (1.0.0), when `Accept` prefers it.
    OpenMetrics,
}

impl Format {
    /// The format an `Accept` header asks for: OpenMetrics when it asks
    /// for it and prefers it to the classic format (by q-value), else the
    /// classic format.
    pub fn negotiate(accept: &str) -> Self {
        if wants_openmetrics(accept) {
            Format::OpenMetrics
        } else {
            Format::Text
        }
    }

    /// The `Content-Type` of a body in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Text => TEXT_CONTENT_TYPE,
            Format::OpenMetrics => OPENMETRICS_CONTENT_TYPE,
        }
    }
}

/// Whether an `Accept` header asks for OpenMetrics (and prefers it to
/// the classic format, by q-value).
fn wants_openmetrics(accept: &str) -> bool {
    let mut om = None::<f32>;
    let mut text = None::<f32>;
    for part in accept.split(',') {
        let mut it = part.split(';');
        let mt = it.next().unwrap_or("").trim();
        let q = it
            .filter_map(|p| p.trim().strip_prefix("q="))
            .find_map(|v| v.parse::<f32>().ok())
            .unwrap_or(1.0);
        if mt.eq_ignore_ascii_case("application/openmetrics-text") {
            om = Some(om.map_or(q, |x| x.max(q)));
        } else if mt.eq_ignore_ascii_case("text/plain") {
            text = Some(text.map_or(q, |x| x.max(q)));
        }
    }
    match (om, text) {
        (Some(o), Some(t)) => o > 0.0 && o >= t,
        (Some(o), None) => o > 0.0,
        _ => false,
    }
}

/// Escapes HELP text: `\\` and newline in both formats, and `"` too in
/// OpenMetrics (`quote`), whose HELP is an escaped string; the classic
/// text format has no `\\"` escape in HELP.
fn escape_help(s: &str, quote: bool, out: &mut String) {
    // The fast path, taken by every HELP the exporter writes itself:
    // printable ASCII with nothing to escape is copied whole (a scrape of
    // a small host is mostly HELP text, and testing it char by char
    // against `unsafe_char` cost more than the copy).
    if s.bytes()
        .all(|b| (b' '..=b'~').contains(&b) && b != b'\\' && !(quote && b == b'"'))
    {
        out.push_str(s);
        return;
    }
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' if quote => out.push_str("\\\""),
            // Other controls (CR, NUL, ESC, ...) and bidi overrides as
            // `\\xNN` / `\\u{NNNN}`: a reader sees the escape as text (the
            // formats define no other escape), never the raw byte.
            c if crate::terminal::unsafe_char(c) => {
                out.push('\\');
                out.push_str(&crate::terminal::escape(c.encode_utf8(&mut [0; 4])));
            }
            c => out.push(c),
        }
    }
}

/// Writes a sample value in the shortest form that reads back as the same
/// `f64`, never with an exponent, as Rust's `Display` does. Fast paths:
/// whole numbers below 2^53, which most counts are (`12`, not `12.0`),
/// through `itoa`; other values through `ryu`, several times faster than
/// `Display`, except from 2^53 (where `ryu` writes `.0` or an exponent) and
/// below 1e-5 (an exponent), which `Display` spells out. Where a value lies exactly halfway between
/// two shortest forms (e.g. 80368744177664.125), `ryu` rounds the last digit
/// to even and `Display` up: both read back as the same value.
fn write_value(v: f64, out: &mut String) {
    if v.is_nan() {
        out.push_str("NaN");
    } else if v.is_infinite() {
        out.push_str(if v > 0.0 { "+Inf" } else { "-Inf" });
    } else if v.fract() == 0.0
        && v.abs() < 9_007_199_254_740_992.0
        && !(v == 0.0 && v.is_sign_negative())
    {
        out.push_str(itoa::Buffer::new().format(v as i64));
    } else {
        let mut b = ryu::Buffer::new();
        let s = b.format_finite(v);
        if s.contains(['e', 'E']) || v == 0.0 || v.abs() >= 9_007_199_254_740_992.0 {
            let _ = write!(out, "{v}");
        } else {
            out.push_str(s);
        }
    }
}

/// Encodes families in the classic Prometheus text format (0.0.4).
pub fn encode_text(families: &[Family], out: &mut String) {
    for f in families {
        write_family(f, &[], out);
    }
}

/// One family in the classic format, its samples then `extra` (another
/// part's samples of the same family); nothing when it has none.
fn write_family(f: &Family, extra: &[Sample], out: &mut String) {
    if f.samples.is_empty() && extra.is_empty() {
        return;
    }
    out.push_str("# HELP ");
    out.push_str(&f.name);
    out.push(' ');
    escape_help(&f.help, false, out);
    out.push_str("\n# TYPE ");
    out.push_str(&f.name);
    out.push_str(match f.kind {
        Kind::Counter => " counter\n",
        Kind::Gauge => " gauge\n",
    });
    for s in f.samples.iter().chain(extra) {
        out.push_str(&f.name);
        out.push_str(s.labels.rendered());
        out.push(' ');
        write_value(s.value, out);
        out.push('\n');
    }
}

/// The families of `parts`, in order, each with the samples of the
/// family of `more` of the same name; then the families of `more` no
/// part has.
fn merged<'a>(
    parts: &'a [Arc<Vec<Family>>],
    more: &'a [Family],
) -> impl Iterator<Item = (&'a Family, &'a [Sample])> {
    let extra = |name: &str| {
        more.iter()
            .find(|m| m.name == name)
            .map_or(&[][..], |m| m.samples.as_slice())
    };
    let known = |name: &str| parts.iter().any(|p| p.iter().any(|f| f.name == name));
    parts
        .iter()
        .flat_map(|p| p.iter())
        .map(move |f| (f, extra(&f.name)))
        .chain(
            more.iter()
                .filter(move |m| !known(&m.name))
                .map(|m| (m, &[][..])),
        )
}

/// The families, in parts shared with the caller (a collection shared by
/// concurrent scrapes, plus each scrape's own self-metrics), so that
/// encoding needs no copy; `.1` adds samples to their families, or
/// families of its own after them ([`merged`]).
#[derive(Debug)]
struct SnapshotCollector(Vec<Arc<Vec<Family>>>, Arc<Vec<Family>>);

impl Collector for SnapshotCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for (f, extra) in merged(&self.0, &self.1) {
            if f.samples.is_empty() && extra.is_empty() {
                continue;
            }
            let (name, ty) = match f.kind {
                // OpenMetrics names the counter family without `_total`;
                // the encoder appends it to the sample.
                Kind::Counter => (
                    f.name.strip_suffix("_total").unwrap_or(&f.name),
                    MetricType::Counter,
                ),
                Kind::Gauge => (f.name.as_str(), MetricType::Gauge),
            };
            let mut help = String::with_capacity(f.help.len());
            escape_help(&f.help, true, &mut help);
            let mut fam = encoder.encode_descriptor(name, &help, None, ty)?;
            for s in f.samples.iter().chain(extra) {
                let labels: &[(&'static str, String)] = &s.labels;
                let me = fam.encode_family(&labels)?;
                match f.kind {
                    Kind::Counter => ConstCounter::new(s.value).encode(me)?,
                    Kind::Gauge => ConstGauge::new(s.value).encode(me)?,
                }
            }
        }
        Ok(())
    }
}

/// Encodes families as OpenMetrics text (ending with `# EOF`).
pub fn encode_openmetrics(
    families: Arc<Vec<Family>>,
    out: &mut String,
) -> Result<(), std::fmt::Error> {
    encode_openmetrics_parts(vec![families], Arc::default(), out)
}

/// Encodes the families of several parts, in order, as one OpenMetrics
/// exposition, with the samples and families of `more` ([`merged`]).
pub fn encode_openmetrics_parts(
    parts: Vec<Arc<Vec<Family>>>,
    more: Arc<Vec<Family>>,
    out: &mut String,
) -> Result<(), std::fmt::Error> {
    let mut reg = Registry::default();
    reg.register_collector(Box::new(SnapshotCollector(parts, more)));
    prometheus_client::encoding::text::encode(out, &reg)
}

/// Encodes families in several shared parts, in order and without
/// copying them, in `format` into a body of `capacity` bytes to start with
/// (the size of the previous scrape, so the buffer is allocated once, not
/// grown). OpenMetrics falls back to the classic format if its encoder
/// fails. `more` adds samples to the parts' families of its names, and
/// its other families after them ([`merged`]: the derived gauges and
/// their availability). Returns the body and the format it is in.
pub fn encode_parts(
    parts: &[Arc<Vec<Family>>],
    more: &Arc<Vec<Family>>,
    format: Format,
    capacity: usize,
) -> (String, Format) {
    let mut out = String::with_capacity(capacity.max(4096));
    let format = encode_parts_into(parts, more, format, &mut out);
    (out, format)
}

/// [`encode_parts`] into `out` (cleared first), a buffer the caller
/// reuses (the gzip path, which only compresses the text and so can keep
/// its buffer from one scrape to the next); the format it is in.
pub fn encode_parts_into(
    parts: &[Arc<Vec<Family>>],
    more: &Arc<Vec<Family>>,
    format: Format,
    out: &mut String,
) -> Format {
    out.clear();
    if format == Format::OpenMetrics {
        if encode_openmetrics_parts(parts.to_vec(), more.clone(), out).is_ok() {
            return Format::OpenMetrics;
        }
        out.clear();
    }
    for (f, extra) in merged(parts, more) {
        write_family(f, extra, out);
    }
    Format::Text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::Sample;

    fn fams() -> Vec<Family> {
        vec![
            Family {
                name: "perf_cpu_cycles_total".into(),
                help: "Cycles.".into(),
                kind: Kind::Counter,
                samples: vec![Sample {
                    labels: vec![("cpu", "0".into())].into(),
                    value: 12.0,
                    start_unix_nanos: 0,
                }],
            },
            Family {
                name: "perf_temp_celsius".into(),
                help: "a \\ b\nc".into(),
                kind: Kind::Gauge,
                samples: vec![Sample {
                    labels: vec![("pmu", "a\"b".into())].into(),
                    value: 0.5,
                    start_unix_nanos: 0,
                }],
            },
        ]
    }

    #[test]
    fn classic_text() {
        let mut s = String::new();
        encode_text(&fams(), &mut s);
        assert_eq!(
            s,
            "# HELP perf_cpu_cycles_total Cycles.\n# TYPE perf_cpu_cycles_total counter\nperf_cpu_cycles_total{cpu=\"0\"} 12\n\
             # HELP perf_temp_celsius a \\\\ b\\nc\n# TYPE perf_temp_celsius gauge\nperf_temp_celsius{pmu=\"a\\\"b\"} 0.5\n"
        );
    }

    /// Defect 4: user-supplied HELP text with `"` stays valid OpenMetrics.
    #[test]
    fn help_escapes_quotes_in_openmetrics() {
        let mut om = String::new();
        escape_help("say \"hi\" \\ now\n", true, &mut om);
        assert_eq!(om, r#"say \"hi\" \\ now\n"#);
        let mut text = String::new();
        escape_help("say \"hi\"", false, &mut text);
        assert_eq!(text, "say \"hi\"");
        let mut f = fams();
        f[0].help = "The \"quoted\" help.".into();
        let mut s = String::new();
        encode_openmetrics(Arc::new(f), &mut s).unwrap();
        assert!(
            s.contains("# HELP perf_cpu_cycles The \\\"quoted\\\" help.\n"),
            "{s}"
        );
    }

    #[test]
    fn values_format_like_display() {
        for v in [
            0.0,
            -0.0,
            1.0,
            12.0,
            -7.0,
            0.5,
            1e15,
            9_007_199_254_740_991.0,
            9_007_199_254_740_992.0,
            1e20,
            123_456_789.25,
            2.5e-7,
            f64::MAX,
        ] {
            let mut s = String::new();
            write_value(v, &mut s);
            assert_eq!(s, format!("{v}"), "{v:?}");
        }
        let mut s = String::new();
        write_value(f64::NAN, &mut s);
        write_value(f64::NEG_INFINITY, &mut s);
        assert_eq!(s, "NaN-Inf");
    }

    #[test]
    fn values_read_back_exactly_in_the_shortest_plain_form() {
        // Seconds, joules (RAPL's 2^-14 units) and ratios as the engine
        // makes them, values with few fraction bits (where two shortest
        // forms can tie), and arbitrary bit patterns (a xorshift sequence).
        let mut vals: Vec<f64> = (1..20_000u32)
            .flat_map(|i| {
                let x = f64::from(i);
                [
                    x * 1e-9 * 1_234_567.0,
                    x / 7.0,
                    x * 987_654.0 * 0.000_061_035_156_25,
                    1e-5 * x,
                    1e15 + x * 0.5,
                    2f64.powi(46) + 1e13 + x * 0.015_625,
                ]
            })
            .collect();
        let mut r: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..50_000 {
            r ^= r << 13;
            r ^= r >> 7;
            r ^= r << 17;
            vals.push(f64::from_bits(r));
        }
        for v in vals.into_iter().filter(|v| v.is_finite()) {
            let mut s = String::new();
            write_value(v, &mut s);
            let display = format!("{v}");
            assert_eq!(s.parse::<f64>().ok(), Some(v), "{s} for {v:e}");
            assert!(!s.contains('e'), "{s}");
            assert_eq!(s.len(), display.len(), "{s} vs {display}");
            if s != display {
                // Only a tie, broken the other way in the last digit.
                let (a, b) = (s.as_bytes(), display.as_bytes());
                assert_eq!(a[..a.len() - 1], b[..b.len() - 1], "{s} vs {display}");
            }
        }
    }

    #[test]
    fn openmetrics_text() {
        let mut s = String::new();
        encode_openmetrics(Arc::new(fams()), &mut s).unwrap();
        assert!(s.contains("# TYPE perf_cpu_cycles counter\n"), "{s}");
        assert!(s.contains("perf_cpu_cycles_total{cpu=\"0\"} 12"), "{s}");
        assert!(s.contains("perf_temp_celsius{pmu=\"a\\\"b\"} 0.5"), "{s}");
        assert!(s.ends_with("# EOF\n"), "{s}");
    }

    #[test]
    fn negotiation() {
        assert!(wants_openmetrics("application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4,*/*;q=0.1"));
        assert!(!wants_openmetrics("text/plain"));
        assert!(!wants_openmetrics("*/*"));
        assert!(!wants_openmetrics(
            "application/openmetrics-text;q=0.2,text/plain;q=0.9"
        ));
        assert_eq!(
            Format::negotiate("application/openmetrics-text"),
            Format::OpenMetrics
        );
        assert_eq!(Format::negotiate(""), Format::Text);
        assert_eq!(Format::Text.content_type(), TEXT_CONTENT_TYPE);
    }

    /// Issue 28 item 18: HELP kept raw CR, NUL and ESC (and bidi
    /// overrides); they are written as visible escapes a reader takes as
    /// text.
    #[test]
    fn help_controls_are_escaped_as_text() {
        let mut out = String::new();
        escape_help("a\rb\0c\x1b[2Jd\u{202E}e\nf\\g", false, &mut out);
        assert_eq!(out, "a\\\\x0db\\\\x00c\\\\x1b[2Jd\\\\u{202e}e\\nf\\\\g");
        assert!(!out.chars().any(crate::terminal::unsafe_char));
    }
}
