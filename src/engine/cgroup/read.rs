//! Reading the `perf` backend: one `read()` per group, the multiplexing
//! estimate folded into monotonic totals exactly as for node-level groups,
//! and the `perf_cgroup_*` families.

use super::perf::{PerfBackend, Tracked};
#[cfg(doc)]
use super::CgroupIssue;
use crate::engine::read::value_of;
use crate::engine::trust::must_move;
use crate::snapshot::Family;

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
                if let Some(tm) = t.s.times.get_mut(g.set * ncols + g.col) {
                    tm.0 += d_en as f64 * 1e-9;
                    tm.1 += d_run as f64 * 1e-9;
                }
                // A cgroup event's times advance only while a task of the
                // cgroup runs on the CPU: both 0 means it has not run there
                // and its count is exactly 0; enabled without running is a
                // group the PMU never scheduled (no estimate: nothing).
                let mut stalls = g.stalls.iter_mut();
                for (k, (m, (metric, attr, scale))) in
                    g.members.iter_mut().zip(&plan.members).enumerate()
                {
                    let raw = value_of(&self.buf.values, k, m.counter.id);
                    let i = metric * ncols + g.col;
                    t.s.add(i, (d_en, d_run), (en, run), raw, &mut m.high, *scale);
                    // Only a member that must move has a stall memory.
                    if let Some(stall) = must_move(attr).then(|| stalls.next()).flatten() {
                        t.s.judge_stall(i, stall, true, (d_en, d_run), raw);
                    }
                }
            }
            t.s.flag_implausible(&self.roles, ncols);
            t.s.finish_states();
            debug_assert_eq!(t.s.times.len(), nsets * ncols);
        }
    }

    /// The per-cgroup families: one per metric (cgroups in path order),
    /// then the group times per cgroup and set.
    pub(super) fn push_families(&self, out: &mut Vec<Family>) {
        let series = self.tracked.values().map(|t| &t.s);
        super::series::push_families(&self.metrics, self.cpus.len(), series, out);
    }
}

impl Tracked {
    /// Marks, per (set, column), whether a group of that set is open on a
    /// CPU of the column: in place, so a collection allocates nothing per
    /// cgroup.
    fn mark_open_columns(&mut self, ncols: usize) {
        self.s.time_open.fill(false);
        for g in &self.groups {
            if let Some(o) = self.s.time_open.get_mut(g.set * ncols + g.col) {
                *o = true;
            }
        }
    }
}
