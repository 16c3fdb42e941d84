//! The default config's derived table as a config without a `derived:`
//! section takes it: only the entries (and alternatives) whose inputs
//! that config counts; the others listed with what they miss
//! ([`LeftOut`]), so `check` and the landing page say why they are not
//! there.
//!
//! Plain data, no I/O.

use std::collections::BTreeSet;

use super::{Derived, DerivedTable, Formula, Source};

/// A default derived metric left out of a config that has no `derived:`
/// section: no alternative of its `expr:` reads only metrics the config
/// counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftOut {
    /// Its name.
    pub name: String,
    /// The inputs of its first alternative the config does not count
    /// (event metrics, or derived metrics left out themselves).
    pub missing: Vec<String>,
}

impl DerivedTable {
    /// The default table as a config without a `derived:` section takes
    /// it: only the alternatives whose inputs are all metrics in
    /// `counted` (or derived metrics kept, or `duration_time`), and only
    /// the entries left an alternative; the others are listed in
    /// [`DerivedTable::implicit`] with what they miss. A threshold that
    /// reads something left out is dropped; a `has_event(..)` probe of
    /// something not counted is 0, as in a written table.
    #[must_use]
    pub fn for_metrics(&self, counted: &BTreeSet<&str>) -> DerivedTable {
        let mut kept: BTreeSet<String> = BTreeSet::new();
        let mut metrics = Vec::new();
        let mut left_out = Vec::new();
        // Evaluation order: a derived input is decided before its readers.
        for d in &self.metrics {
            let missing = |f: &Formula| -> Vec<String> {
                f.inputs
                    .iter()
                    .filter_map(|i| match &i.source {
                        Source::Metric(m) if !counted.contains(m.as_str()) => Some(m.clone()),
                        Source::Derived(x) if !kept.contains(x) && *x != d.name => Some(x.clone()),
                        _ => None,
                    })
                    .collect()
            };
            let keep_probes = |f: &Formula| Formula {
                probes: f
                    .probes
                    .iter()
                    .filter(|i| match &i.source {
                        Source::Metric(m) => counted.contains(m.as_str()),
                        Source::Derived(x) => kept.contains(x),
                        Source::Duration => true,
                    })
                    .cloned()
                    .collect(),
                ..f.clone()
            };
            let mut usable = d
                .formulas()
                .filter(|f| missing(f).is_empty())
                .map(keep_probes);
            let Some(first) = usable.next() else {
                left_out.push(LeftOut {
                    name: d.name.clone(),
                    missing: missing(&d.formula),
                });
                continue;
            };
            let fallbacks = usable.collect();
            let threshold = d
                .threshold
                .as_ref()
                .filter(|t| missing(t).is_empty())
                .map(keep_probes);
            kept.insert(d.name.clone());
            metrics.push(Derived {
                formula: first,
                fallbacks,
                threshold,
                ..d.clone()
            });
        }
        DerivedTable {
            metrics,
            implicit: Some(left_out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::derived::tests::with;

    /// The default table over a config's metrics: an alternative reading
    /// a metric it does not count goes, an entry with none left goes
    /// (and so does, transitively, an entry reading it), a threshold
    /// reading something left out goes, a probe of it is dropped (0).
    #[test]
    fn the_default_table_keeps_what_the_config_counts() {
        let table = with(concat!(
            "  - name: ipc\n    expr: [perf_instructions_total / perf_ref_total, instructions / cycles]\n    threshold: ipc < perf_l1d_read_misses_total\n",
            "  - name: refs\n    expr: perf_ref_total / duration_time if has_event(perf_ref_total) else 0\n",
            "  - name: per_ref\n    expr: refs / ipc\n",
            "  - name: cpi\n    expr: 1 / ipc\n    threshold: cpi > 1 if has_event(perf_ref_total) else 0\n",
        ))
        .unwrap()
        .derived;
        let counted: BTreeSet<&str> = ["perf_instructions_total", "perf_cpu_cycles_total"]
            .into_iter()
            .collect();
        let t = table.for_metrics(&counted);
        let names: Vec<&str> = t.metrics.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["ipc", "cpi"]);
        let ipc = t.get("ipc").unwrap();
        assert_eq!(ipc.formula.text, "instructions / cycles");
        assert!(ipc.fallbacks.is_empty());
        assert_eq!(ipc.threshold, None);
        let cpi = t.get("cpi").unwrap();
        assert!(cpi.threshold.as_ref().unwrap().probes.is_empty());
        assert_eq!(
            t.implicit,
            Some(vec![
                LeftOut {
                    name: "refs".into(),
                    missing: vec!["perf_ref_total".into()],
                },
                LeftOut {
                    name: "per_ref".into(),
                    missing: vec!["refs".into()],
                },
            ])
        );
        // A config counting everything keeps the table as it is.
        let all: BTreeSet<&str> = [
            "perf_instructions_total",
            "perf_cpu_cycles_total",
            "perf_ref_total",
            "perf_l1d_read_misses_total",
        ]
        .into_iter()
        .collect();
        let t = table.for_metrics(&all);
        assert_eq!(t.metrics, table.metrics);
        assert_eq!(t.implicit, Some(Vec::new()));
    }
}
