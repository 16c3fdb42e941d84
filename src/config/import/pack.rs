//! Packing a config's events into sets, one perf group each, so that
//! each group fits the PMU's counters (see the module docs of
//! [`super`]).

use std::collections::{BTreeMap, BTreeSet};

use super::{Counted, Options, Taken};

/// Packs the events into sets, metric by metric (see the module
/// docs).
pub(super) fn pack(order: &[&Taken], opts: &Options) -> Vec<(String, Vec<Counted>)> {
    let mut sets: Vec<(String, Vec<Counted>)> = Vec::new();
    let mut placed: BTreeSet<String> = BTreeSet::new();
    let core = |c: &Counted| c.pmu == opts.core_pmu || c.pmu == "cpu_core" || c.pmu == "cpu_atom";
    for t in order {
        let mut by_pmu: BTreeMap<&str, Vec<&Counted>> = BTreeMap::new();
        for c in &t.events {
            if !placed.contains(&c.metric) {
                by_pmu.entry(c.pmu.as_str()).or_default().push(c);
            }
        }
        for (pmu, new) in by_pmu {
            let limit = if core(new[0]) { opts.counters } else { 4 };
            let general = |v: &[Counted]| v.iter().filter(|c| c.general).count();
            // Into a set that already counts some of this metric's
            // events on this PMU (so its ratio divides one group's
            // counts), or its own, while it fits; else a new one.
            let mut current: Option<usize> = sets
                .iter()
                .position(|(_, v)| v[0].pmu == pmu && v.iter().any(|c| t.events.contains(c)));
            for c in new {
                let fits = |i: usize| {
                    sets[i].1[0].pmu == pmu
                        && (!c.general || general(&sets[i].1) < limit)
                        && sets[i].1.len() < 16
                };
                let i = match current.filter(|&i| fits(i)) {
                    Some(i) => i,
                    None => {
                        let mut name = t.name.clone();
                        let mut n = 1;
                        while sets.iter().any(|(s, _)| *s == name) {
                            n += 1;
                            name = format!("{}_{n}", t.name);
                        }
                        sets.push((name, Vec::new()));
                        sets.len() - 1
                    }
                };
                sets[i].1.push(c.clone());
                placed.insert(c.metric.clone());
                current = Some(i);
            }
        }
    }
    sets
}
