//! The per-cgroup series both backends keep and export alike: totals per
//! (metric, column), group times per (set, column), their labels, and the
//! `perf_cgroup_*` families, totals and carry-over built from them.

use super::plan::CgMetric;
use super::{CgroupTotals, TimesTotal};
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
    /// Per (metric, column) and per (set, column): when the count began
    /// (its group opened, or the earliest start a reload continued). Each
    /// slot has its own: a metric or set a reload adds starts anew, even
    /// in a cgroup whose other series continue.
    pub(super) starts: Vec<u64>,
    pub(super) time_starts: Vec<u64>,
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
        let now = super::super::now_unix_nanos();
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
            starts: vec![now; nmetrics * ncols],
            time_starts: vec![now; sets.len() * ncols],
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
                        start_unix_nanos: t.starts[k],
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
                    .zip(&t.time_starts)
                    .filter(|((_, open), _)| **open)
                    .map(move |(((tm, l), _), &start)| Sample {
                        labels: l.clone(),
                        value: pick(tm),
                        start_unix_nanos: start,
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

/// The accumulated counts and group times of `series` (by cgroup
/// path), for a reload.
pub(super) fn totals<'a>(
    metrics: &[CgMetric],
    sets: &[String],
    cols: &[u32],
    per_cpu: bool,
    series: impl Iterator<Item = (&'a String, &'a Series)>,
) -> CgroupTotals {
    let mut out = CgroupTotals::default();
    let column = |ci: usize| per_cpu.then(|| cols.get(ci).copied()).flatten();
    for (rel, t) in series {
        for (mi, m) in metrics.iter().enumerate() {
            for ci in 0..cols.len() {
                let k = mi * cols.len() + ci;
                if t.has_data[k] {
                    out.series.push((
                        rel.clone(),
                        m.signature.clone(),
                        column(ci),
                        t.values[k],
                        t.starts[k],
                    ));
                }
            }
        }
        for (si, set) in sets.iter().enumerate() {
            for ci in 0..cols.len() {
                let k = si * cols.len() + ci;
                let (enabled, running) = t.times[k];
                // A set never open in this cgroup has no times to keep.
                if enabled > 0.0 || running > 0.0 || t.time_open[k] {
                    out.times.push(TimesTotal {
                        cgroup: rel.clone(),
                        set: set.clone(),
                        cpu: column(ci),
                        enabled,
                        running,
                        start_ns: t.time_starts[k],
                    });
                }
            }
        }
    }
    out
}

/// The column of `cpu` (`None`: summed over CPUs) when the series layout
/// (per CPU or summed) is the same.
fn column_of(cols: &[u32], per_cpu: bool, cpu: Option<u32>) -> Option<usize> {
    match (cpu, per_cpu) {
        (None, false) => Some(0),
        (Some(c), true) => cols.iter().position(|&x| x == c),
        _ => None,
    }
}

/// The earlier of a fresh start and a continued one (0: unknown).
fn earliest(fresh: u64, old: u64) -> u64 {
    if old == 0 {
        fresh
    } else {
        fresh.min(old)
    }
}

/// Continues `old`'s counts in the series of the same cgroup path in
/// `tracked` (`series` picks them out), where the same metric (signature)
/// and column continue, and `old`'s group times where the same set (by
/// name) and column continue, as the node's group times do. Each
/// continued slot keeps its start; the others keep their fresh one.
/// Returns how many series (counts and group times) continued.
pub(super) fn carry_over<T>(
    metrics: &[CgMetric],
    sets: &[String],
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
        let Some(ci) = column_of(cols, per_cpu, cpu) else {
            continue;
        };
        let k = mi * ncols + ci;
        t.values[k] += value;
        t.has_data[k] = true;
        t.starts[k] = earliest(t.starts[k], start);
        n += 1;
    }
    for o in old.times {
        let Some(t) = tracked.get_mut(&o.cgroup).map(series) else {
            continue;
        };
        let Some(si) = sets.iter().position(|s| *s == o.set) else {
            continue;
        };
        let Some(ci) = column_of(cols, per_cpu, o.cpu) else {
            continue;
        };
        let k = si * ncols + ci;
        let (Some(tm), Some(st)) = (t.times.get_mut(k), t.time_starts.get_mut(k)) else {
            continue;
        };
        tm.0 += o.enabled;
        tm.1 += o.running;
        *st = earliest(*st, o.start_ns);
        n += 1;
    }
    n
}
