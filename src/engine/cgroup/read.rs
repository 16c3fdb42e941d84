//! Reading the `perf` backend: one `read()` per group, the multiplexing
//! estimate folded into monotonic totals exactly as for node-level groups,
//! and the `perf_cgroup_*` families.

use super::perf::{PerfBackend, Tracked};
#[cfg(doc)]
use super::CgroupIssue;
use crate::engine::read::value_of;
use crate::engine::{monotonic_delta, mux_factor};
use crate::snapshot::{Family, Kind, Sample};

impl PerfBackend {
    /// Reads every group of every counted cgroup once.
    pub(super) fn read_all(&mut self) {
        let ncols = self.cpus.len();
        let nsets = self.sets.len();
        for t in self.tracked.values_mut() {
            t.mark_open_columns(ncols);
            for g in &mut t.groups {
                let Some(plan) = self.plan.get(g.plan) else {
                    continue;
                };
                let (Some(leader), Some((_, attr, _))) = (g.members.first(), plan.members.first())
                else {
                    continue;
                };
                if self
                    .kernel
                    .read_group(&leader.counter, attr, g.cpu, &mut self.buf)
                    .is_err()
                {
                    t.read_errors += 1;
                    continue;
                }
                let (en, run) = (self.buf.time_enabled, self.buf.time_running);
                let d_en = en.saturating_sub(g.last_enabled);
                let d_run = run.saturating_sub(g.last_running);
                g.last_enabled = g.last_enabled.max(en);
                g.last_running = g.last_running.max(run);
                if let Some(tm) = t.times.get_mut(g.set * ncols + g.col) {
                    tm.0 += d_en as f64 * 1e-9;
                    tm.1 += d_run as f64 * 1e-9;
                }
                // A cgroup event's times advance only while a task of the
                // cgroup runs on the CPU: both 0 means it has not run there
                // and its count is exactly 0; enabled without running is a
                // group the PMU never scheduled (no estimate: nothing).
                let factor = match mux_factor(en, run) {
                    Some(f) => f,
                    None if en == 0 => 1.0,
                    None => continue,
                };
                for (k, (m, (metric, _, scale))) in
                    g.members.iter_mut().zip(&plan.members).enumerate()
                {
                    if let Some(raw) = value_of(&self.buf.values, k, m.counter.id) {
                        let i = metric * ncols + g.col;
                        t.values[i] += monotonic_delta(&mut m.high, raw as f64 * factor) * scale;
                        t.has_data[i] = true;
                    }
                }
            }
            debug_assert_eq!(t.times.len(), nsets * ncols);
        }
    }

    /// The per-cgroup families: one per metric (cgroups in path order),
    /// then the group times per cgroup and set.
    pub(super) fn push_families(&self, out: &mut Vec<Family>) {
        let ncols = self.cpus.len();
        for (mi, m) in self.metrics.iter().enumerate() {
            let mut samples = Vec::with_capacity(self.tracked.len() * ncols);
            for t in self.tracked.values() {
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
        // Group times only where a group of the set is open on the
        // column's CPU: a set that could not be opened in a cgroup is an
        // issue ([`CgroupIssue::SetUnavailable`]), not a series of zeros.
        let times = |pick: fn(&(f64, f64)) -> f64| -> Vec<Sample> {
            self.tracked
                .values()
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
}

impl Tracked {
    /// Marks, per (set, column), whether a group of that set is open on a
    /// CPU of the column: in place, so a collection allocates nothing per
    /// cgroup.
    fn mark_open_columns(&mut self, ncols: usize) {
        self.time_open.fill(false);
        for g in &self.groups {
            if let Some(o) = self.time_open.get_mut(g.set * ncols + g.col) {
                *o = true;
            }
        }
    }
}
