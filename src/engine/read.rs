//! Reading: one `read()` per group, then named steps: the group's times
//! (enabled/running deltas, a stalled or never-scheduled group), the
//! multiplexing estimate of each member folded into monotonic totals, the
//! gauges averaged over groups, and what the reads say about hotplug.
//!
//! The hot path allocates nothing: the read buffer, the series and the
//! time slots are reused from collection to collection.

use super::{Engine, Group, Member, SeriesState};
use crate::perf::ErrorKind;
use crate::problem::Problem;
use crate::snapshot::Snapshot;

/// The multiplexing factor of a group read: `enabled / running` when the
/// group was time-sliced (`running < enabled`), 1 when it counted all the
/// time, `None` when it never ran (no estimate is possible: export
/// nothing rather than zero).
#[inline]
pub fn mux_factor(enabled: u64, running: u64) -> Option<f64> {
    if running == 0 {
        None
    } else if running < enabled {
        Some(enabled as f64 / running as f64)
    } else {
        Some(1.0)
    }
}

/// Folds a new scaled estimate of a running count into its high-water
/// mark `high` and returns how much the exported counter grows (in raw
/// units): the increase of the mark, or 0 when the estimate fell. So a
/// counter fed by these deltas never decreases and never counts the same
/// events twice.
#[inline]
pub fn monotonic_delta(high: &mut f64, estimate: f64) -> f64 {
    if estimate > *high {
        let d = estimate - *high;
        *high = estimate;
        d
    } else {
        0.0
    }
}

/// What the reads of one collection saw, for the hotplug checks after it.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Seen {
    /// A read failed with ENODEV (an offline CPU).
    pub(super) failed_cpu: bool,
    /// Some group's enabled time moved.
    pub(super) moved: bool,
    /// Some group's enabled time stood still.
    pub(super) still: bool,
    /// Some group never ran twice and must be split.
    pub(super) split: bool,
    /// A core PMU group's running share dropped (another user took
    /// counters): measure the budget early.
    pub(super) share_dropped: bool,
    /// This window had a measurement's probe groups in the rotation: the
    /// shares are not compared (nor kept as the next window's baseline).
    pub(super) probed: bool,
}

/// Adds one member's raw count: gauges into this collection's sum (each
/// group counted once per series), counters through their high-water mark.
/// The same delta goes to the member's per-CPU series and, when the set is
/// summed, to its exported series.
pub(super) fn apply_member(
    series: &mut [SeriesState],
    m: &mut Member,
    group: usize,
    raw: u64,
    factor: f64,
) {
    let targets = [Some(m.series), (m.detail != m.series).then_some(m.detail)];
    if m.plan.snapshot {
        for i in targets.into_iter().flatten() {
            let Some(st) = series.get_mut(i) else {
                continue;
            };
            st.gauge_sum += raw as f64 * m.plan.scale;
            if st.gauge_last_group != group {
                st.gauge_last_group = group;
                st.gauge_groups += 1;
            }
        }
        return;
    }
    let d = monotonic_delta(&mut m.high, raw as f64 * factor) * m.plan.scale;
    for i in targets.into_iter().flatten() {
        let Some(st) = series.get_mut(i) else {
            continue;
        };
        st.value += d;
        st.has_data = true;
    }
}

/// A member's raw value in a group read: at its own position (values come
/// leader first in open order) unless the kernel reordered them, `None`
/// when the read does not have it (a member detached from its group).
#[inline]
pub(crate) fn value_of(values: &[(u64, u64)], k: usize, id: u64) -> Option<u64> {
    match values.get(k) {
        Some(&(i, v)) if i == id => Some(v),
        _ => values.iter().find(|(i, _)| *i == id).map(|&(_, v)| v),
    }
}

impl Engine {
    /// Reads every group once and returns the counters as exported (each
    /// set at its `per:` level).
    pub fn collect(&mut self) -> Snapshot {
        self.read_groups();
        self.snapshot()
    }

    /// Reads every group once and returns the counters at full
    /// resolution: per CPU whatever the sets' `per:` levels (what `stat`
    /// and the live view show; [`crate::snapshot::full_resolution`]).
    pub fn collect_full(&mut self) -> Snapshot {
        self.read_groups();
        let s = self.snapshot();
        Snapshot {
            families: crate::snapshot::full_resolution(s.families, self.detail_families()),
        }
    }

    /// Reads every group once (one `read()` each) and accumulates the
    /// counters, without building a snapshot.
    pub fn read_groups(&mut self) {
        self.check_hotplug();
        if self.cpus.take_retry() {
            self.reconcile();
        }
        self.series.reset_gauges();
        let mut seen = Seen {
            probed: self.counters.take_fresh(),
            ..Seen::default()
        };
        // Moved out and back (no allocation) so each read can borrow the
        // rest of the engine.
        let mut groups = std::mem::take(&mut self.groups);
        for (gi, g) in groups.iter_mut().enumerate() {
            self.read_group(g, gi, &mut seen);
        }
        self.groups = groups;
        self.series.finish_gauges();
        self.plausibility();
        self.finish_states();
        self.times.flush();
        self.after_reads(seen);
        if seen.split {
            self.split_never_ran();
        }
        // A drop asks for an early measurement, made off the collection
        // path (the budget follower, or `run_upkeep`) as soon as the early
        // measurements' rate allows.
        if seen.share_dropped && !self.counters.pending {
            tracing::debug!(
                "a core PMU group's running share dropped: counter budget to be measured early"
            );
        }
        self.counters.pending |= seen.share_dropped;
        self.read_cgroups();
    }

    /// One group: its `read()`, its times, its members.
    fn read_group(&mut self, g: &mut Group, gi: usize, seen: &mut Seen) {
        g.stalled = false;
        g.split = false;
        if let Err(kind) = self.read_leader(g) {
            seen.failed_cpu |= kind == ErrorKind::CpuOffline;
            return;
        }
        let last_running = g.last_running;
        let d_en = self.account_times(g, seen);
        let d_run = self.buf.time_running.saturating_sub(last_running);
        self.follow_share(g, d_en, d_run, seen);
        for (k, m) in g.members.iter_mut().enumerate() {
            let raw = value_of(&self.buf.values, k, m.counter.id);
            super::trust::judge(&mut self.series, m, d_en, d_run, raw);
        }
        let Some(factor) = mux_factor(self.buf.time_enabled, self.buf.time_running) else {
            self.never_ran(g, d_en, seen);
            return;
        };
        g.never_ran = 0;
        if d_en > 0 && d_run == 0 {
            // Ran before but not in this window (another user took the
            // counters): scaling would extrapolate the past over a window
            // nothing was measured in. The totals hold; the state says
            // `never_ran`.
            return;
        }
        for (k, m) in g.members.iter_mut().enumerate() {
            if let Some(raw) = value_of(&self.buf.values, k, m.counter.id) {
                apply_member(&mut self.series, m, gi, raw, factor);
            }
        }
    }

    /// The group's one `read()` (of its leader) into the read buffer; a
    /// failure counts in `perf_read_errors_total`.
    pub(super) fn read_leader(&mut self, g: &Group) -> Result<(), ErrorKind> {
        let leader = &g.members[0];
        let r =
            self.kernel
                .read_group(&leader.counter, &leader.plan.attr, g.key.cpu, &mut self.buf);
        let Err(e) = r else {
            return Ok(());
        };
        self.times.read_failed(g.time_slot);
        tracing::debug!(error = %e, "group read failed");
        Err(e.kind)
    }

    /// Takes the group's enabled/running deltas from the last read into its
    /// (set, CPU) slot and notes whether its enabled time moved or stood
    /// still. Returns the enabled delta.
    pub(super) fn account_times(&mut self, g: &mut Group, seen: &mut Seen) -> u64 {
        let (en, run) = (self.buf.time_enabled, self.buf.time_running);
        let d_en = en.saturating_sub(g.last_enabled);
        let d_run = run.saturating_sub(g.last_running);
        if d_en > 0 {
            seen.moved = true;
        } else if g.last_enabled > 0 {
            g.stalled = true;
            seen.still = true;
        }
        g.last_enabled = g.last_enabled.max(en);
        g.last_running = g.last_running.max(run);
        self.times.add(g.time_slot, d_en, d_run);
        d_en
    }

    /// Notes a core PMU group's running share over its window, and whether
    /// it dropped by more than [`super::counters::SHARE_DROP`] since its
    /// last window (or it never ran): another user may have taken counters.
    fn follow_share(&self, g: &mut Group, d_en: u64, d_run: u64, seen: &mut Seen) {
        if d_en == 0 || seen.probed {
            return;
        }
        let now = d_run.min(d_en) as f64 / d_en as f64;
        let core = self.table.get(&g.key.pmu).is_some_and(|p| p.is_core());
        let dropped = match g.share {
            Some(before) => now < before - super::counters::SHARE_DROP,
            None => now == 0.0,
        };
        seen.share_dropped |= core && dropped;
        g.share = Some(now);
    }

    /// A group that was enabled but never on the PMU: the second time, split
    /// it (or, alone or a perf-metrics unit, report its events as
    /// unschedulable).
    fn never_ran(&mut self, g: &mut Group, d_en: u64, seen: &mut Seen) {
        if d_en == 0 {
            return;
        }
        g.never_ran += 1;
        if g.never_ran < 2 {
            return;
        }
        let unit = super::plan::is_one_unit(&self.table, g.members.iter().map(|m| &m.plan.attr));
        if g.members.len() > 1 && !unit {
            g.split = true;
            seen.split = true;
        } else {
            // One event, or a perf-metrics unit (each of its events).
            for m in &g.members {
                self.unschedulable.insert(
                    m.plan.metric,
                    Problem::Unschedulable {
                        event: m.plan.attr.event.clone(),
                        pmu: m.plan.attr.pmu.clone(),
                        cpu: g.key.cpu,
                    },
                );
            }
        }
    }

    /// Splits every group marked as never scheduled.
    fn split_never_ran(&mut self) {
        let mut gi = self.groups.len();
        while gi > 0 {
            gi -= 1;
            if self.groups[gi].split {
                self.split_group(gi);
            }
        }
        self.refresh();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mux_factor_scales_time_sliced_groups_only() {
        assert_eq!(mux_factor(100, 100), Some(1.0));
        // running can exceed enabled by rounding: never scale down.
        assert_eq!(mux_factor(100, 101), Some(1.0));
        assert_eq!(mux_factor(100, 25), Some(4.0));
        assert_eq!(mux_factor(3, 2), Some(1.5));
        // Never ran: no estimate, not zero.
        assert_eq!(mux_factor(100, 0), None);
        assert_eq!(mux_factor(0, 0), None);
    }

    #[test]
    fn monotonic_delta_takes_only_increases_of_the_mark() {
        let mut high = 0.0;
        assert_eq!(monotonic_delta(&mut high, 10.0), 10.0);
        assert_eq!(monotonic_delta(&mut high, 25.0), 15.0);
        // The scaled estimate fell (multiplexing): nothing, mark kept.
        assert_eq!(monotonic_delta(&mut high, 20.0), 0.0);
        assert_eq!(high, 25.0);
        // Back above the mark: only the part above it counts.
        assert_eq!(monotonic_delta(&mut high, 30.0), 5.0);
        assert_eq!(monotonic_delta(&mut high, 30.0), 0.0);
        let mut total = 0.0;
        let mut h = 0.0;
        for e in [1.0, 5.0, 3.0, 4.0, 9.0, 2.0, 9.5] {
            total += monotonic_delta(&mut h, e);
        }
        assert_eq!(total, 9.5);
    }

    #[test]
    fn values_are_found_by_position_or_id() {
        let v = [(11, 7), (12, 9), (13, 1)];
        assert_eq!(value_of(&v, 1, 12), Some(9));
        // Reordered: found by id.
        assert_eq!(value_of(&v, 0, 13), Some(1));
        // Detached from the group: missing.
        assert_eq!(value_of(&v[..1], 1, 12), None);
    }
}
