//! The metrics page's derived metrics: the default config's `derived:`
//! table, each entry a recording rule or a gauge of `/metrics`.

use super::cell;
use std::fmt::Write as _;

/// The default config's derived metrics: each a recording rule (the
/// record name `perf-exporter rules` gives it) or a gauge of `/metrics`
/// (its family, and why PromQL cannot give it).
pub(super) fn derived_section(table: &crate::config::derived::DerivedTable) -> String {
    use crate::export::prometheus::derived::{gauge_name, partition, Form};
    let mut out = String::from(
        "\n## Derived metrics\n\n\
         The default config's `derived:` table ([configuration guide](../guide/configuration.md)): \
         each entry is either a Prometheus recording rule (`perf-exporter rules` writes it; PromQL \
         computes it from the counters' rates; an entry with alternatives is one rule joining them \
         with `or`, so each platform's series give its value) or, where PromQL cannot express one of \
         its alternatives, a gauge of \
         `/metrics` the exporter evaluates over the window between its last two collections \
         (`perf_event_available{metric=\"perf_derived_<name>\"}` says whether this host can give it). \
         `stat`, the live view and OTLP evaluate every entry. A config without a `derived:` section \
         takes the entries whose inputs it counts (`check` lists the others).\n\n\
         | derived metric | on Prometheus | as | why | help |\n|---|---|---|---|---|\n",
    );
    for (d, form) in partition(table) {
        let (kind, name, why) = match form {
            Form::Rule(_) => (
                "recording rule",
                crate::app::rules::record(d),
                "PromQL gives it from the counters' rates".to_string(),
            ),
            Form::Gauge(why) => ("exporter gauge", gauge_name(d), why),
        };
        let _ = writeln!(
            out,
            "| `{}` | {kind} | `{name}` | {} | {} |",
            d.name,
            cell(&why),
            cell(d.help.as_deref().unwrap_or(""))
        );
    }
    out
}
