//! The tables of families the code defines (per-cgroup counting,
//! sampling, the exporter's own) for the metrics page, and the unit a
//! family's name says.

use super::cell;
use crate::config::{self, Config};
use crate::engine::{cgroup, sample};
use crate::snapshot::{FamilyDef, Kind};
use crate::web;

/// The unit a family's name says (Prometheus's base-unit suffixes).
pub(super) fn unit(name: &str) -> &'static str {
    let base = name.strip_suffix("_total").unwrap_or(name);
    [
        ("_seconds", "seconds"),
        ("_bytes", "bytes"),
        ("_joules", "joules"),
        ("_celsius", "degrees Celsius"),
        ("_ratio", "ratio (0 to 1)"),
        ("_info", "info (always 1)"),
        ("_slots", "issue slots"),
        ("_cycles", "cycles"),
    ]
    .iter()
    .find(|(suffix, _)| base.ends_with(suffix))
    .map_or(
        if name.ends_with("_total") {
            "events"
        } else {
            "1"
        },
        |(_, u)| *u,
    )
}

/// The sampler's and the exporter's own families, from their tables.
pub(super) fn defined_sections() -> String {
    let mut out = String::new();
    out.push_str(&def_section(
        "Sampling",
        "With a `sampling:` section ([configuration](config.md)). In a help, `{by}` is the \
         `sampling.by` word, `{top}` is `sampling.top` and `{max_tasks}` the bound of the \
         sampler's task tables.",
        sample::FAMILIES.iter(),
    ));
    out.push_str("\n## The exporter's own families\n\n");
    out.push_str(
        "On `/metrics`, around the engine's (`perf_otlp_exports_total` only when OTLP pushes).\n\n",
    );
    out.push_str(DEF_HEAD);
    for m in web::self_metrics() {
        out.push_str(&def_row(m.name, m.kind, m.labels.iter().copied(), m.help));
    }
    out
}

/// The header of a table of family definitions.
const DEF_HEAD: &str = "| family | type | unit | labels | help |\n|---|---|---|---|---|\n";

/// One family definition as a table row; a label `a|b` is one of them.
fn def_row<'a>(
    name: &str,
    kind: Kind,
    labels: impl Iterator<Item = &'a str>,
    help: &str,
) -> String {
    let labels: Vec<String> = labels
        .map(|l| {
            l.split('|')
                .map(|x| format!("`{x}`"))
                .collect::<Vec<_>>()
                .join(" or ")
        })
        .collect();
    format!(
        "| `{name}` | {} | {} | {} | {} |\n",
        if kind == Kind::Counter {
            "counter"
        } else {
            "gauge"
        },
        unit(name),
        if labels.is_empty() {
            "none".to_string()
        } else {
            labels.join(", ")
        },
        cell(help)
    )
}

/// A section of family definitions.
fn def_section<'a>(title: &str, intro: &str, defs: impl Iterator<Item = &'a FamilyDef>) -> String {
    let mut out = format!("\n## {title}\n\n{intro}\n\n{DEF_HEAD}");
    for d in defs {
        out.push_str(&def_row(d.name, d.kind, d.labels.iter().copied(), d.help));
    }
    out
}

/// The per-cgroup families: each metric of the default `cgroups.sets`
/// as its per-cgroup family, then the per-cgroup counting's own.
pub(super) fn cgroup_section(cfg: &Config) -> String {
    let mut out = def_section(
        "Per-cgroup counting",
        "With a `cgroups:` section ([configuration](config.md)): each metric of the sets of \
         `cgroups.sets` (by default those below, of the default config) has a per-cgroup \
         family, and per-cgroup counting adds its own. A series carries its cgroup's labels: \
         `cgroup` (its path), or a pod's `pod_uid`, `qos_class` and `static_pod` and a \
         container's `container_id`; and `cpu` at `cgroups.per: cpu`.",
        cgroup::FAMILIES.iter().copied(),
    );
    out.push_str("\n### Per-cgroup families of the default sets\n\n");
    out.push_str(DEF_HEAD);
    for set in cfg
        .sets
        .iter()
        .filter(|s| config::cgroups::DEFAULT_SETS.contains(&s.name.value.as_str()))
    {
        for m in &set.events {
            let name = cgroup::family_name(&m.metric.value);
            out.push_str(&def_row(
                &name,
                if m.gauge { Kind::Gauge } else { Kind::Counter },
                cgroup::SERIES_LABELS.iter().copied(),
                &cgroup::family_help(m.help.as_deref().unwrap_or("")),
            ));
        }
    }
    out
}
