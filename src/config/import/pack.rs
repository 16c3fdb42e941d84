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
    // The perf-metrics events of Intel cores open only in a group whose
    // leader is `slots` (`arch/x86/events/intel/core.c`,
    // `intel_pmu_hw_config`: a metric event under any other leader is
    // refused with EINVAL), so a set writes `slots` first, then the metric
    // events by unit mask (level 1, then level 2, as the kernel numbers
    // them), then the rest in their packing order (a stable sort).
    for (_, events) in &mut sets {
        events.sort_by_key(|c| {
            if core(c) {
                perf_metrics_rank(c)
            } else {
                (2, 0)
            }
        });
    }
    sets
}

/// Where an event of a core set goes: `(0, 0)` for Intel's `slots`
/// (`event=0x00,umask=0x04`, fixed counter 3), `(1, umask)` for a
/// perf-metrics event (`event=0x00` with umask 0x80 to 0x87:
/// `topdown-retiring` .. `topdown-mem-bound`), `(2, 0)` for any other
/// (the encodings of `crate::sys::abi::intel_topdown`, read from the
/// spec's terms).
fn perf_metrics_rank(c: &Counted) -> (u8, u64) {
    let Some(terms) = c
        .specs
        .first()
        .and_then(|s| s.strip_suffix('/'))
        .and_then(|s| s.split_once('/'))
        .map(|(_, t)| t)
    else {
        return (2, 0);
    };
    let mut event = None;
    let mut umask = 0;
    for term in terms.split(',') {
        let (k, v) = term.split_once('=').unwrap_or((term, "1"));
        let v = v.trim();
        let n = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
            Some(h) => u64::from_str_radix(h, 16).ok(),
            None => v.parse().ok(),
        };
        match (k.trim(), n) {
            ("event", Some(n)) => event = Some(n),
            ("umask", Some(n)) => umask = n,
            ("event" | "umask", None) => return (2, 0),
            _ => {}
        }
    }
    match (event, umask) {
        (Some(0), 0x04) => (0, 0),
        (Some(0), u @ 0x80..=0x87) => (1, u),
        _ => (2, 0),
    }
}
