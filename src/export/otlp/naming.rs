//! Naming: the OTel name and UCUM unit of a Prometheus-named family,
//! chosen so that the Prometheus translation of OTLP (what the Collector's
//! Prometheus exporter, Prometheus' OTLP receiver and VictoriaMetrics with
//! `-opentelemetry.usePrometheusNaming` do) gives back the exposition name
//! exactly. Nothing else is renamed: names the config refuses (a counter
//! without `_total`, a `:`) never get here.

use crate::snapshot::Kind;

/// Unit suffixes of Prometheus names and their UCUM units, as the
/// Prometheus translation of OTLP maps them.
const UNIT_SUFFIXES: &[(&str, &str)] = &[
    ("_bytes", "By"),
    ("_seconds", "s"),
    ("_joules", "J"),
    ("_celsius", "Cel"),
    ("_watts", "W"),
    ("_hertz", "Hz"),
    ("_volts", "V"),
];

/// The singular of a counted word, for a `{annotation}` unit.
fn singular(w: &str) -> String {
    match w {
        "tsc" => return "tick".into(),
        "aperf" | "mperf" => return "cycle".into(),
        _ => {}
    }
    for suf in ["sses", "shes", "ches", "xes"] {
        if w.ends_with(suf) {
            return w[..w.len() - 2].to_string();
        }
    }
    if let Some(s) = w.strip_suffix("ies") {
        return format!("{s}y");
    }
    match w.strip_suffix('s') {
        Some(s) if !s.ends_with('s') && !s.is_empty() => s.to_string(),
        _ => w.to_string(),
    }
}

/// The OTel name and UCUM unit of a Prometheus-named family.
///
/// `_total` is dropped from counters; a base-unit suffix becomes the unit
/// (`_bytes` `By`, `_seconds` `s`, `_joules` `J`, `_celsius` `Cel`, …);
/// other counters are counts of something and get an annotation unit from
/// the last word (`{cycle}`, `{instruction}`, `{miss}`), which the
/// Prometheus translation drops; `_` becomes `.`. A gauge ending in
/// `_ratio` gets unit `1`. So the translation (words joined with `_`, the
/// unit's suffix, `_total` for monotonic sums, `_ratio` for gauges in `1`)
/// gives back the Prometheus name for every name that follows the
/// conventions (counters end in `_total`).
pub(super) fn otel_metric(prom: &str, kind: Kind) -> (String, String) {
    let dots = |s: &str| s.replace([':', '_'], ".");
    let mut base = prom;
    if kind == Kind::Counter {
        base = base.strip_suffix("_total").unwrap_or(base);
    }
    for (suffix, unit) in UNIT_SUFFIXES {
        if let Some(b) = base.strip_suffix(suffix) {
            if !b.is_empty() {
                return (dots(b), (*unit).to_string());
            }
        }
    }
    if kind == Kind::Gauge {
        if let Some(b) = base.strip_suffix("_ratio").filter(|b| !b.is_empty()) {
            return (dots(b), "1".into());
        }
        return (dots(base), String::new());
    }
    let last = base.rsplit(['_', ':']).next().unwrap_or(base);
    (dots(base), format!("{{{}}}", singular(last)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Prometheus translation of an OTLP metric (what the OTel
    /// Collector's Prometheus exporter and Prometheus' own OTLP receiver do
    /// with suffixes on): non-alphanumerics to `_`, the unit's suffix
    /// unless the name has it, `_total` for monotonic sums, `_ratio` for
    /// gauges in `1`; `{annotations}` dropped.
    fn prometheus_name(name: &str, unit: &str, kind: Kind) -> String {
        let mut words: Vec<String> = name
            .split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect();
        let unit_word = match unit {
            "By" => Some("bytes"),
            "s" => Some("seconds"),
            "J" => Some("joules"),
            "Cel" => Some("celsius"),
            "W" => Some("watts"),
            "Hz" => Some("hertz"),
            "V" => Some("volts"),
            _ => None,
        };
        if let Some(u) = unit_word {
            if !words.iter().any(|w| w == u) {
                words.push(u.into());
            }
        }
        if kind == Kind::Counter {
            words.retain(|w| w != "total");
            words.push("total".into());
        }
        if kind == Kind::Gauge && unit == "1" {
            words.push("ratio".into());
        }
        words.join("_")
    }

    #[test]
    fn names_and_units() {
        let c = Kind::Counter;
        assert_eq!(
            otel_metric("perf_cpu_cycles_total", c),
            ("perf.cpu.cycles".into(), "{cycle}".into())
        );
        assert_eq!(
            otel_metric("perf_dram_read_bytes_total", c),
            ("perf.dram.read".into(), "By".into())
        );
        assert_eq!(
            otel_metric("perf_cpu_clock_seconds_total", c),
            ("perf.cpu.clock".into(), "s".into())
        );
        assert_eq!(
            otel_metric("perf_instructions_total", c),
            ("perf.instructions".into(), "{instruction}".into())
        );
        assert_eq!(
            otel_metric("perf_context_switches_total", c),
            ("perf.context.switches".into(), "{switch}".into())
        );
        assert_eq!(
            otel_metric("perf_cache_misses_total", c),
            ("perf.cache.misses".into(), "{miss}".into())
        );
        assert_eq!(
            otel_metric("perf_energy_package_joules_total", c),
            ("perf.energy.package".into(), "J".into())
        );
        assert_eq!(
            otel_metric("perf_msr_tsc_total", c),
            ("perf.msr.tsc".into(), "{tick}".into())
        );
        assert_eq!(
            otel_metric("perf_cpu_thermal_margin_celsius", Kind::Gauge),
            ("perf.cpu.thermal.margin".into(), "Cel".into())
        );
        assert_eq!(
            otel_metric("perf_event_available", Kind::Gauge),
            ("perf.event.available".into(), "".into())
        );
        assert_eq!(
            otel_metric("perf_x_ratio", Kind::Gauge),
            ("perf.x".into(), "1".into())
        );
    }

    #[test]
    fn every_default_metric_round_trips_through_the_prometheus_translation() {
        let cfg = crate::config::Config::default_config();
        let mut names: Vec<(String, Kind)> = cfg
            .sets
            .iter()
            .flat_map(|s| &s.events)
            .map(|e| {
                let k = if e.metric.value.ends_with("_total") {
                    Kind::Counter
                } else {
                    Kind::Gauge
                };
                (e.metric.value.clone(), k)
            })
            .collect();
        assert!(names.len() > 20);
        for (n, k) in [
            ("perf_event_available", Kind::Gauge),
            ("perf_group_enabled_seconds_total", Kind::Counter),
            ("perf_group_running_seconds_total", Kind::Counter),
            ("perf_read_errors_total", Kind::Counter),
            ("perf_x_ratio", Kind::Gauge),
        ] {
            names.push((n.into(), k));
        }
        for (n, k) in names {
            let (o, u) = otel_metric(&n, k);
            assert_eq!(prometheus_name(&o, &u, k), n, "{o} {u}");
            assert!(o.starts_with("perf."), "{o}");
            assert!(u.len() <= 63 && u.is_ascii());
        }
    }
}
