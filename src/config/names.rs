//! Metric-name rules, checked at load so that a name means the same
//! series over every protocol.
//!
//! * A counter's name ends in `_total`. Otherwise Prometheus text shows
//!   `x`, while OpenMetrics and OTLP add `_total`, so where a series is
//!   stored would depend on the protocol (and `promtool check metrics`
//!   fails).
//! * No `:`. Colons are for recording rules, and OTLP turns them into `_`.
//! * No `__` prefix (reserved by Prometheus, e.g. `__name__`).
//! * No name of the exporter's own metrics (`perf_event_available`,
//!   `perf_exporter_*`, `perf_group_*`, ...), and no two metrics whose
//!   families collide once `_total` is added or removed (`foo` next to
//!   `foo_total`): OpenMetrics names a counter's family without `_total`.

/// Names (exact) and prefixes (ending in `_`) of the exporter's own
/// metrics.
pub(super) const RESERVED: &[&str] = &[
    "perf_event_available",
    "perf_event_paranoid",
    "perf_read_errors_total",
    "perf_exporter_",
    "perf_group_",
    "perf_config_",
    "perf_http_",
    "perf_otlp_",
    "perf_scrape_",
    "perf_event_unavailable_info",
    // The per-cgroup families the exporter derives (DESIGN.md).
    "perf_cgroup_",
    // Its own process metrics (node_exporter's names).
    "process_",
    // The `sampling:` section's families (`engine::sample::families`).
    "perf_sampled_",
    "perf_ring_",
];

/// The longest metric name accepted, in bytes. Prometheus sets no limit,
/// but a name is repeated in every sample of every scrape, and the text
/// reports align on it.
pub(super) const MAX_NAME_LEN: usize = 200;

/// Whether `s` has Prometheus's metric-name syntax.
pub fn valid_syntax(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// The family a name belongs to in OpenMetrics: without `_total`.
pub(super) fn family(name: &str) -> &str {
    name.strip_suffix("_total").unwrap_or(name)
}

/// Checks one name; the error is the reason and, where there is one, the
/// name to use instead.
pub(super) fn check(name: &str, gauge: bool) -> Result<(), String> {
    if name.len() > MAX_NAME_LEN {
        let head: String = name.chars().take(32).collect();
        return Err(format!(
            "a metric name of {} bytes (`{}...`) is longer than the {MAX_NAME_LEN} allowed; choose a shorter name",
            name.len(),
            head.escape_debug()
        ));
    }
    if !valid_syntax(name) {
        let fixed: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let fixed = fixed.trim_start_matches(|c: char| c.is_ascii_digit() || c == '_');
        let fixed = if fixed.is_empty() {
            "perf_metric"
        } else {
            fixed
        };
        return Err(format!(
            "`{name}` is not a valid Prometheus metric name ([a-zA-Z_][a-zA-Z0-9_]*); use `{}`",
            with_suffix(fixed, gauge)
        ));
    }
    if name.starts_with("__") {
        return Err(format!(
            "`{name}`: names starting with `__` are reserved by Prometheus (`__name__`); use `{}`",
            with_suffix(name.trim_start_matches('_'), gauge)
        ));
    }
    if name.contains(':') {
        return Err(format!(
            "`{name}`: `:` is reserved for recording rules, and OTLP turns it into `_`; use `{}`",
            with_suffix(&name.replace(':', "_"), gauge)
        ));
    }
    if let Some(r) = RESERVED
        .iter()
        .find(|r| family(name) == family(r) || (r.ends_with('_') && name.starts_with(*r)))
    {
        return Err(format!(
            "`{name}` collides with the exporter's own metric{} `{r}{}`: choose another name",
            if r.ends_with('_') { "s" } else { "" },
            if r.ends_with('_') { "*" } else { "" }
        ));
    }
    match (gauge, name.ends_with("_total")) {
        (false, false) => Err(format!(
            "counter `{name}` must end in `_total` (OpenMetrics and OTLP add it, so the stored name would depend on the protocol); use `{name}_total`, or declare `gauge: true` for a reading"
        )),
        (true, true) => Err(format!(
            "gauge `{name}` must not end in `_total` (that suffix marks counters); use `{}`",
            family(name)
        )),
        _ => Ok(()),
    }
}

fn with_suffix(stem: &str, gauge: bool) -> String {
    let stem = family(stem);
    if gauge {
        stem.to_string()
    } else {
        format!("{stem}_total")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_need_total_and_no_colon() {
        assert!(check("perf_x_total", false).is_ok());
        assert!(check("perf_temp_celsius", true).is_ok());
        let e = check("perf_cpu_cycles", false).unwrap_err();
        assert!(e.contains("use `perf_cpu_cycles_total`"), "{e}");
        let e = check("perf:x_total", false).unwrap_err();
        assert!(e.contains("use `perf_x_total`"), "{e}");
        let e = check("perf_temp_total", true).unwrap_err();
        assert!(e.contains("use `perf_temp`"), "{e}");
        let e = check("9bad", false).unwrap_err();
        assert!(
            e.contains("not a valid Prometheus metric name") && e.contains("use `bad_total`"),
            "{e}"
        );
        assert!(check("", false)
            .unwrap_err()
            .contains("use `perf_metric_total`"));
        assert!(check("bad name", false)
            .unwrap_err()
            .contains("use `bad_name_total`"));
    }

    #[test]
    fn names_are_capped() {
        let long = format!("perf_{}_total", "x".repeat(70_000));
        let e = check(&long, false).unwrap_err();
        assert!(e.contains("longer than the 200 allowed"), "{e}");
        assert!(e.len() < 200, "the message does not repeat the name: {e}");
        let ok = format!("perf_{}_total", "x".repeat(MAX_NAME_LEN - 11));
        assert_eq!(ok.len(), MAX_NAME_LEN);
        assert!(check(&ok, false).is_ok());
    }

    #[test]
    fn reserved_names() {
        for n in [
            "__name__",
            "perf_event_available",
            "perf_event_available_total",
            "perf_exporter_build_info",
            "perf_group_enabled_seconds_total",
            "perf_read_errors_total",
            "process_cpu_seconds_total",
            "perf_event_unavailable_info",
            "perf_sampled_events_total",
            "perf_ring_lost_records_total",
            "perf_ring_throttle_events_total",
        ] {
            let e = check(n, !n.ends_with("_total")).unwrap_err();
            assert!(e.contains("reserved") || e.contains("collides"), "{n}: {e}");
        }
    }
}
