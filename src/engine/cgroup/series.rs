//! The per-cgroup series both backends keep and export alike: totals per
//! (metric, column), group times per (set, column), their labels, and the
//! `perf_cgroup_*` families, totals and carry-over built from them.

use super::plan::CgMetric;
use super::{
    CgroupTotals, TimesTotal, COUNTER_STATE, COUNTER_STATES, GROUP_ENABLED, GROUP_RUNNING,
    RUNNING_RATIO,
};
use crate::cgroup::Cgroup;
use crate::engine::trust::{ratio_labels, state_labels, Stall, Window};
use crate::problem::CounterState;
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
    /// Per (metric, column): this collection's group windows (scratch),
    /// the state and running share of the last collection that judged it
    /// (`None`: not yet), and whether any window of it was ever on the
    /// PMU (a measurement, not only the exact 0 of a cgroup that did not
    /// run).
    pub(super) windows: Vec<Window>,
    pub(super) trust: Vec<Option<(CounterState, f64)>>,
    pub(super) measured: Vec<bool>,
    /// Its plausibility against its `cpu.stat` time (`plausible.rs`).
    pub(super) check: CgCheck,
}

/// One cgroup's plausibility state (judged in `plausible.rs`).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct CgCheck {
    /// At the last reading: `usage_usec`, cycles and instructions.
    pub(super) mark: Option<(u64, f64, f64)>,
    /// Whether the last check found it implausible.
    pub(super) implausible: bool,
}

/// The labels of a cgroup's series: `cgroup`, or its Kubernetes labels.
pub(super) fn labels_of(cg: &Cgroup) -> Vec<(&'static str, String)> {
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
            windows: vec![Window::default(); nmetrics * ncols],
            trust: vec![None; nmetrics * ncols],
            measured: vec![false; nmetrics * ncols],
            check: Default::default(),
        }
    }

    /// Adds one group member's contribution to (metric, column) slot `k`:
    /// its window (the group's `time_enabled` and `time_running`
    /// increases `d_en`, `d_run`) and, where it is a measurement, its
    /// count. `cum` are the group's cumulative times, `raw` the member's
    /// count, `high` its high-water mark, `scale` its unit scale.
    ///
    /// A group that has not run yet (`time_enabled` 0: the cgroup had no
    /// task on the CPU) counted exactly 0; one enabled but never on the
    /// PMU has no value (no estimate is possible), nor does a window it
    /// was not on the PMU in (scaling would extrapolate the past over it;
    /// the total holds, and the state says `never_ran`).
    pub(super) fn add(
        &mut self,
        k: usize,
        (d_en, d_run): (u64, u64),
        (en, run): (u64, u64),
        raw: Option<u64>,
        high: &mut f64,
        scale: f64,
    ) {
        if let Some(w) = self.windows.get_mut(k) {
            w.add_times(d_en, d_run);
        }
        let factor = match crate::engine::mux_factor(en, run) {
            Some(f) => f,
            None if en == 0 => 1.0,
            None => return,
        };
        if d_en > 0 && d_run == 0 {
            return;
        }
        let Some(raw) = raw else {
            return;
        };
        if let (Some(v), Some(h), Some(m)) = (
            self.values.get_mut(k),
            self.has_data.get_mut(k),
            self.measured.get_mut(k),
        ) {
            *v += crate::engine::monotonic_delta(high, raw as f64 * factor) * scale;
            *h = true;
            *m |= run > 0;
        }
    }

    /// Judges slot `k`'s counter for a stall (after [`add`](Self::add)
    /// of its window): `stall` is that counter's memory, `must_move`
    /// whether it is one that must move while its cgroup runs
    /// ([`crate::engine::trust::must_move`]).
    pub(super) fn judge_stall(
        &mut self,
        k: usize,
        stall: &mut Stall,
        must_move: bool,
        (d_en, d_run): (u64, u64),
        raw: Option<u64>,
    ) {
        if stall.state(must_move, d_en, d_run, raw) == Some(CounterState::Stalled) {
            if let Some(w) = self.windows.get_mut(k) {
                w.raise(CounterState::Stalled);
            }
        }
    }

    /// Turns this collection's windows into each slot's state and clears
    /// them. A slot whose state is not a measurement (`never_ran`) and
    /// that was never measured has no value: it leaves the output (its
    /// only data were the exact 0s of CPUs the cgroup did not run on,
    /// which would read as "counted 0"); one measured before keeps its
    /// total, flagged by its state, as node-level series do.
    pub(super) fn finish_states(&mut self) {
        for (k, w) in self.windows.iter_mut().enumerate() {
            if let Some(v) = w.take_verdict() {
                self.trust[k] = Some(v);
            }
            let unmeasured = self.trust[k].is_some_and(|(s, _)| !s.is_measurement());
            if unmeasured && !self.measured[k] {
                self.has_data[k] = false;
            }
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
    if !enabled.is_empty() {
        push_times(enabled, times(|t| t.1), out);
    }
    push_states(metrics, ncols, series, out);
}

/// The group-time families.
fn push_times(enabled: Vec<Sample>, running: Vec<Sample>, out: &mut Vec<Family>) {
    out.push(GROUP_ENABLED.family(enabled));
    out.push(GROUP_RUNNING.family(running));
}

/// The per-cgroup counter states, as the node's (`engine::trust`):
/// `perf_cgroup_counter_states{metric, state}` (how many of a metric's
/// per-cgroup series are in each state; every state present for a metric
/// with a judged series: bounded by the config), then, only for series
/// that are not `counting`, `perf_cgroup_counter_state{metric, <the
/// series' labels>, state}` = 1 and `perf_cgroup_counter_running_ratio`.
/// `metric` is the per-cgroup family's name. A cgroup that has not run
/// since its counters opened has no state yet.
fn push_states<'a>(
    metrics: &[CgMetric],
    ncols: usize,
    series: impl Iterator<Item = &'a Series> + Clone,
    out: &mut Vec<Family>,
) {
    let mut counts = Vec::new();
    let mut troubled = Vec::new();
    let mut ratios = Vec::new();
    for (mi, m) in metrics.iter().enumerate() {
        let mut n = [0u32; CounterState::ALL.len()];
        let mut any = false;
        for t in series.clone() {
            for ci in 0..ncols {
                let Some((state, ratio)) = t.trust.get(mi * ncols + ci).copied().flatten() else {
                    continue;
                };
                n[state.index()] += 1;
                any = true;
                if state != CounterState::Counting {
                    let series_labels = t.labels.get(ci).map(|l| l.to_vec()).unwrap_or_default();
                    let rl = ratio_labels(&m.family, &series_labels);
                    troubled.push(sample(state_labels(&rl, state), 1.0));
                    ratios.push(sample(rl, ratio));
                }
            }
        }
        if any {
            for (s, c) in CounterState::ALL.into_iter().zip(n) {
                let l = Labels::new(vec![
                    ("metric", m.family.to_string()),
                    ("state", s.as_str().to_string()),
                ]);
                counts.push(sample(l, f64::from(c)));
            }
        }
    }
    if counts.is_empty() {
        return;
    }
    out.push(COUNTER_STATES.family(counts));
    out.push(COUNTER_STATE.family(troubled));
    out.push(RUNNING_RATIO.family(ratios));
}

fn sample(labels: Labels, value: f64) -> Sample {
    Sample {
        labels,
        value,
        start_unix_nanos: 0,
    }
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
        t.measured[k] |= value > 0.0;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn series(per_cpu: bool, cols: &[u32]) -> Series {
        let cg = Cgroup {
            rel: "app/a".into(),
            dir: "/nonexistent/app/a".into(),
            id: 1,
            kind: crate::cgroup::Kind::Path,
            labels: vec![("cgroup", "app/a".into())],
        };
        Series::new(&cg, 1, &["core".to_string()], cols, per_cpu)
    }

    /// What both backends feed [`Series::add`] with, summed over two
    /// CPUs: the cgroup has not run on CPU 0 (times 0: an exact 0), and
    /// on CPU 1 its group is enabled and never on the PMU. The sum is not
    /// a measurement: no value, state `never_ran`; once CPU 1 counts, a
    /// value, then a window off the PMU keeps it flagged, never scaled
    /// over the window.
    #[test]
    fn a_slot_never_measured_has_no_value_only_a_state() {
        let mut s = series(false, &[0]);
        let (mut h0, mut h1) = (0.0, 0.0);
        s.add(0, (0, 0), (0, 0), Some(0), &mut h0, 1.0);
        s.add(0, (0, 0), (0, 0), Some(0), &mut h1, 1.0);
        s.finish_states();
        assert!(s.has_data[0] && s.trust[0].is_none(), "idle: exactly 0");
        s.add(0, (0, 0), (0, 0), Some(0), &mut h0, 1.0);
        s.add(0, (100, 0), (100, 0), Some(0), &mut h1, 1.0);
        s.finish_states();
        assert!(!s.has_data[0], "never measured: no value");
        assert_eq!(s.trust[0], Some((CounterState::NeverRan, 0.0)));
        // It runs half the window: a scaled measurement.
        s.add(0, (100, 50), (200, 50), Some(10), &mut h1, 1.0);
        s.finish_states();
        assert!(s.has_data[0] && s.measured[0]);
        assert_eq!(s.values[0], 40.0);
        assert_eq!(s.trust[0], Some((CounterState::Multiplexed, 0.5)));
        // Off the PMU for a window: the total holds (no extrapolation).
        s.add(0, (100, 0), (300, 50), Some(10), &mut h1, 1.0);
        s.finish_states();
        assert!(s.has_data[0]);
        assert_eq!(s.values[0], 40.0);
        assert_eq!(s.trust[0], Some((CounterState::NeverRan, 0.0)));
        // A collection that judges nothing keeps the last state.
        s.finish_states();
        assert_eq!(s.trust[0], Some((CounterState::NeverRan, 0.0)));
    }

    /// The state families list only what is not counting, with the
    /// per-cgroup family as `metric`; the counts per state are all there.
    #[test]
    fn state_families_list_only_series_not_counting() {
        let metrics = vec![CgMetric {
            family: "perf_cgroup_cpu_cycles_total".into(),
            help: crate::snapshot::Text::of(""),
            signature: ("perf_cpu_cycles_total".into(), Vec::new()),
        }];
        let mut s = series(true, &[0, 1]);
        let (mut h0, mut h1) = (0.0, 0.0);
        s.add(0, (100, 100), (100, 100), Some(5), &mut h0, 1.0);
        s.add(1, (100, 0), (100, 0), Some(0), &mut h1, 1.0);
        s.finish_states();
        let mut out = Vec::new();
        push_states(&metrics, 2, [&s].into_iter(), &mut out);
        let names: Vec<&str> = out.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "perf_cgroup_counter_states",
                "perf_cgroup_counter_state",
                "perf_cgroup_counter_running_ratio"
            ]
        );
        let rendered = |f: &Family| -> Vec<(String, f64)> {
            f.samples
                .iter()
                .map(|x| (x.labels.rendered().to_string(), x.value))
                .collect()
        };
        let m = "metric=\"perf_cgroup_cpu_cycles_total\"";
        assert_eq!(
            rendered(&out[0]),
            [
                (format!("{{{m},state=\"counting\"}}"), 1.0),
                (format!("{{{m},state=\"multiplexed\"}}"), 0.0),
                (format!("{{{m},state=\"stalled\"}}"), 0.0),
                (format!("{{{m},state=\"never_ran\"}}"), 1.0),
                (format!("{{{m},state=\"implausible\"}}"), 0.0),
            ]
        );
        assert_eq!(
            rendered(&out[1]),
            [(
                format!("{{{m},cgroup=\"app/a\",cpu=\"1\",state=\"never_ran\"}}"),
                1.0
            )]
        );
        assert_eq!(
            rendered(&out[2]),
            [(format!("{{{m},cgroup=\"app/a\",cpu=\"1\"}}"), 0.0)]
        );
    }
}
