//! The per-cgroup series both backends keep and export alike: totals per
//! (metric, column), group times per (set, column), their labels, and the
//! `perf_cgroup_*` families, totals and carry-over built from them.

use super::plan::CgMetric;
use super::CgroupTotals;
use crate::cgroup::Cgroup;
use crate::snapshot::{Family, Kind, Labels, Sample};
use std::collections::BTreeMap;

/// One counted cgroup's series.
#[derive(Debug)]
pub(super) struct Series {
    /// Per (metric, column): the total in base units.
    pub(super) values: Vec<f64>,
    pub(super) has_data: Vec<bool>,
    /// Per column: the series labels.
    pub(super) labels: Vec<Labels>,
    /// Per (set, column): enabled and running seconds, and labels.
    pub(super) times: Vec<(f64, f64)>,
    pub(super) time_labels: Vec<Labels>,
    /// Per (set, column): whether a group of that set counts on a CPU of
    /// the column, as of the last read (refreshed in place).
    pub(super) time_open: Vec<bool>,
    pub(super) start_ns: u64,
}

/// The labels of a cgroup's series: `cgroup`, or its Kubernetes labels.
fn labels_of(cg: &Cgroup) -> Vec<(&'static str, String)> {
    if cg.labels.is_empty() {
        vec![("cgroup", cg.rel.clone())]
    } else {
        cg.labels.clone()
    }
}

impl Series {
    /// Empty series of `cg` for `nmetrics` metrics, the sets `sets` and the
    /// columns `cols` (CPUs when `per_cpu`).
    pub(super) fn new(
        cg: &Cgroup,
        nmetrics: usize,
        sets: &[String],
        cols: &[u32],
        per_cpu: bool,
    ) -> Series {
        let base = labels_of(cg);
        let ncols = cols.len();
        let with = |extra: Option<(&'static str, String)>, c: u32| {
            let mut l = base.clone();
            l.extend(extra);
            if per_cpu {
                l.push(("cpu", c.to_string()));
            }
            Labels::new(l)
        };
        let labels = cols.iter().map(|&c| with(None, c)).collect();
        let time_labels = sets
            .iter()
            .flat_map(|s| cols.iter().map(|&c| with(Some(("set", s.clone())), c)))
            .collect();
        Series {
            values: vec![0.0; nmetrics * ncols],
            has_data: vec![false; nmetrics * ncols],
            labels,
            times: vec![(0.0, 0.0); sets.len() * ncols],
            time_labels,
            time_open: vec![false; sets.len() * ncols],
            start_ns: super::super::now_unix_nanos(),
        }
    }
}

/// The per-cgroup families: one per metric (cgroups in the order given),
/// then the group times per cgroup and set.
pub(super) fn push_families<'a>(
    metrics: &[CgMetric],
    ncols: usize,
    series: impl Iterator<Item = &'a Series> + Clone,
    out: &mut Vec<Family>,
) {
    for (mi, m) in metrics.iter().enumerate() {
        let mut samples = Vec::new();
        for t in series.clone() {
            for ci in 0..ncols {
                let k = mi * ncols + ci;
                if t.has_data[k] {
                    samples.push(Sample {
                        labels: t.labels[ci].clone(),
                        value: t.values[k],
                        start_unix_nanos: t.start_ns,
                    });
                }
            }
        }
        if !samples.is_empty() {
            out.push(Family {
                name: m.family.clone(),
                help: m.help.clone(),
                kind: Kind::Counter,
                samples,
            });
        }
    }
    // Group times only where a group of the set counts on the column's
    // CPU: a set that could not be opened in a cgroup is an issue
    // ([`super::CgroupIssue::SetUnavailable`]), not a series of zeros.
    let times = |pick: fn(&(f64, f64)) -> f64| -> Vec<Sample> {
        series
            .clone()
            .flat_map(|t| {
                t.times
                    .iter()
                    .zip(&t.time_labels)
                    .zip(&t.time_open)
                    .filter(|(_, open)| **open)
                    .map(move |((tm, l), _)| Sample {
                        labels: l.clone(),
                        value: pick(tm),
                        start_unix_nanos: t.start_ns,
                    })
            })
            .collect()
    };
    let enabled = times(|t| t.0);
    if enabled.is_empty() {
        return;
    }
    out.push(Family {
        name: "perf_cgroup_group_enabled_seconds_total".into(),
        help: "Time the set's per-cgroup perf groups were enabled, summed over CPUs; compare with running time to see multiplexing.".into(),
        kind: Kind::Counter,
        samples: enabled,
    });
    out.push(Family {
        name: "perf_cgroup_group_running_seconds_total".into(),
        help: "Time the set's per-cgroup perf groups were counting on the PMU (less than enabled when multiplexed).".into(),
        kind: Kind::Counter,
        samples: times(|t| t.1),
    });
}

/// The accumulated counts of `series` (by cgroup path), for a reload.
pub(super) fn totals<'a>(
    metrics: &[CgMetric],
    cols: &[u32],
    per_cpu: bool,
    series: impl Iterator<Item = (&'a String, &'a Series)>,
) -> CgroupTotals {
    let mut out = Vec::new();
    for (rel, t) in series {
        for (mi, m) in metrics.iter().enumerate() {
            for (ci, &cpu) in cols.iter().enumerate() {
                let k = mi * cols.len() + ci;
                if t.has_data[k] {
                    out.push((
                        rel.clone(),
                        m.signature.clone(),
                        per_cpu.then_some(cpu),
                        t.values[k],
                        t.start_ns,
                    ));
                }
            }
        }
    }
    CgroupTotals { series: out }
}

/// Continues `old`'s counts in the series of the same cgroup path in
/// `tracked` (`series` picks them out), where the same metric (signature)
/// and column continue. Returns how many series continued.
pub(super) fn carry_over<T>(
    metrics: &[CgMetric],
    cols: &[u32],
    per_cpu: bool,
    tracked: &mut BTreeMap<String, T>,
    series: fn(&mut T) -> &mut Series,
    old: CgroupTotals,
) -> usize {
    let mut n = 0;
    let ncols = cols.len();
    for (rel, sig, cpu, value, start) in old.series {
        let Some(t) = tracked.get_mut(&rel).map(series) else {
            continue;
        };
        let Some(mi) = metrics.iter().position(|m| m.signature == sig) else {
            continue;
        };
        let ci = match (cpu, per_cpu) {
            (None, false) => 0,
            (Some(c), true) => match cols.iter().position(|&x| x == c) {
                Some(ci) => ci,
                None => continue,
            },
            _ => continue,
        };
        let k = mi * ncols + ci;
        t.values[k] += value;
        t.has_data[k] = true;
        t.start_ns = t.start_ns.min(start.max(1));
        n += 1;
    }
    n
}
