//! Per-cgroup plausibility (issue 27): a counted cgroup's cycles and
//! instructions, summed over its CPUs, judged against the cgroup's own
//! CPU time (`cpu.stat` `usage_usec`, a clock the PMU does not drive) with
//! the node-level bounds and margins ([`crate::problem::plausible`]):
//!
//! * cycles > CPU time × the highest maximum frequency of the node's CPUs
//!   × margin (1.25 from cpufreq, 2.5 from the TSC rate), plus a tick's
//!   worth (10 ms) of cycles; not judged while the maximum is unknown
//!   (the node-level check reads it at its first check) or while the
//!   cycles ran less than half of the window (a noisy estimate);
//! * cycles or instructions below 10⁶ per second of CPU time while the
//!   cgroup used at least 1 s of CPU in the window.
//!
//! Only the generic `cycles` and `instructions` counting every privilege
//! level are judged (a `:u` count of a cgroup busy in the kernel may be
//! near zero). A cgroup judged implausible has those series `implausible`
//! from the next collection until a check finds it plausible again.
//!
//! # Rate
//!
//! No `cpu.stat` is read for it: the check takes the readings per-cgroup
//! counting already makes every `cgroups.rank_interval` (30 s by default;
//! `perf_cgroup_cpu_usage_seconds_total`), read at the start of a
//! collection, right before the counters it is paired with. Its cost is
//! one pass over the counted cgroups' series at those collections.

use super::series::Series;
use crate::problem::plausible::{Count, FreqSource, MIN_BUSY_SECONDS, NEAR_ZERO_PER_SECOND};

/// The running share below which a cycles estimate is not compared with
/// the upper bound (as node-level).
const MIN_RUNNING_SHARE: f64 = 0.5;

/// Which count each metric is (per metric index): the generic cycles
/// and instructions counting every privilege level.
pub(crate) fn roles(plan: &[super::plan::GroupPlan], nmetrics: usize) -> Vec<Option<Count>> {
    let mut out = vec![None; nmetrics];
    for (metric, attr, _) in plan.iter().flat_map(|g| &g.members) {
        let all_levels = !attr.exclude.user && !attr.exclude.kernel;
        if let Some(r) = out.get_mut(*metric) {
            *r = (crate::engine::trust::must_move(attr) && all_levels).then(|| {
                if attr.config[0] & 0xffff_ffff == 0 {
                    Count::Cycles
                } else {
                    Count::Instructions
                }
            });
        }
    }
    out
}

/// Judges each cgroup of `series` (path, series) that `usage` has a
/// reading of ([`Series::judge_usage`]): both backends' `judge_usage`.
pub(super) fn judge_each<'a>(
    series: impl Iterator<Item = (&'a String, &'a mut Series)>,
    usage: &crate::cgroup::rank::Usage,
    roles: &[Option<Count>],
    ncols: usize,
    max: Option<(f64, FreqSource)>,
) {
    let by: std::collections::HashMap<&str, u64> =
        usage.usec.iter().map(|(r, u)| (r.as_str(), *u)).collect();
    for (rel, s) in series {
        if let Some(&usec) = by.get(rel.as_str()) {
            s.judge_usage(usec, roles, ncols, max);
        }
    }
}

impl Series {
    /// The totals (raw units: cycles and instructions have scale 1) of
    /// the metrics of role `r`, summed over the columns, and their
    /// lowest running share at the last collection.
    fn sum_of(&self, roles: &[Option<Count>], ncols: usize, r: Count) -> Option<(f64, f64)> {
        let mut found = None;
        for (m, _) in roles.iter().enumerate().filter(|(_, x)| **x == Some(r)) {
            for c in 0..ncols {
                let k = m * ncols + c;
                let v = self.values.get(k).copied().unwrap_or(0.0);
                let share = self.trust.get(k).copied().flatten().map_or(1.0, |t| t.1);
                let (sum, low): (f64, f64) = found.unwrap_or((0.0, 1.0));
                found = Some((sum + v, low.min(share)));
            }
        }
        found
    }

    /// Judges the window since the last reading against `usec`, the
    /// cgroup's `usage_usec` now; `max` is the highest maximum frequency
    /// of the node's CPUs, when known.
    pub(super) fn judge_usage(
        &mut self,
        usec: u64,
        roles: &[Option<Count>],
        ncols: usize,
        max: Option<(f64, FreqSource)>,
    ) {
        let cyc = self.sum_of(roles, ncols, Count::Cycles);
        let ins = self.sum_of(roles, ncols, Count::Instructions);
        let now = (usec, cyc.map_or(0.0, |c| c.0), ins.map_or(0.0, |i| i.0));
        let Some((u0, c0, i0)) = self.check.mark.replace(now) else {
            return;
        };
        let busy_s = usec.saturating_sub(u0) as f64 / 1e6;
        let mut bad = false;
        if let (Some((c, share)), Some((hz, source))) = (cyc, max) {
            let d = (c - c0).max(0.0);
            bad |= share >= MIN_RUNNING_SHARE && d > hz * (busy_s * source.margin() + 0.01);
        }
        if busy_s >= MIN_BUSY_SECONDS {
            for (total, before) in [(cyc, c0), (ins, i0)] {
                if let Some((t, _)) = total {
                    bad |= (t - before).max(0.0) / busy_s < NEAR_ZERO_PER_SECOND;
                }
            }
        }
        self.check.implausible = bad;
    }

    /// Flags the cycles and instructions series of this collection's
    /// windows while the last check found the cgroup implausible.
    pub(super) fn flag_implausible(&mut self, roles: &[Option<Count>], ncols: usize) {
        if !self.check.implausible {
            return;
        }
        for (m, _) in roles.iter().enumerate().filter(|(_, r)| r.is_some()) {
            for c in 0..ncols {
                if let Some(w) = self.windows.get_mut(m * ncols + c) {
                    w.raise(crate::problem::CounterState::Implausible);
                }
            }
        }
    }
}
