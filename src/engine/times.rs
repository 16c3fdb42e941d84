//! Group times: per (set, CPU) slot, one collection's enabled and running
//! deltas summed over the CPU's groups of the set, flushed as their mean
//! over the groups into the exported series of the set's level: `{set,
//! cpu}`, `{set, core}`, `{set, socket}` or `{set}` (`per:`, summed over
//! the CPUs of the core, the package or the node) of
//! `perf_group_{enabled,running}_seconds_total` and
//! `perf_read_errors_total`. Six IMC groups on one CPU so count one
//! second per second, not six.
//!
//! Invariants: every slot's `export` indexes `series`; the indexes map
//! each key to the one entry holding it; `order` is a permutation of
//! `series` sorted by (set, level label) after [`GroupTimes::refresh_order`].

use crate::resolve::chain::Resolution;
use crate::snapshot::{Family, Kind, Labels, Sample};
use std::collections::HashMap;

/// Where a group-time series is: its level's label and value (`("cpu",
/// 3)`, `("core", 2)`, `("socket", 0)`); `None`: summed over the node.
pub(super) type At = Option<(&'static str, u32)>;

/// Per (set, CPU): this collection's deltas and how many groups gave them.
#[derive(Debug, Clone)]
struct TimeSlot {
    /// Index into `GroupTimes::series`.
    export: usize,
    d_enabled: u64,
    d_running: u64,
    groups: u32,
}

/// An exported group-time and read-error series.
#[derive(Debug, Clone)]
pub(super) struct TimeSeries {
    pub(super) set: usize,
    /// The level's label and value (`("cpu", 3)`, `("core", 2)`,
    /// `("socket", 0)`); `None`: summed over the node.
    pub(super) at: At,
    labels: Labels,
    pub(super) enabled: f64,
    pub(super) running: f64,
    pub(super) has_times: bool,
    pub(super) errors: u64,
    /// When its counts began (ns since the Unix epoch; 0: never opened).
    pub(super) start_ns: u64,
}

#[derive(Debug, Default)]
pub(super) struct GroupTimes {
    slots: Vec<TimeSlot>,
    slot_index: HashMap<(usize, u32), usize>,
    series: Vec<TimeSeries>,
    series_index: HashMap<(usize, At), usize>,
    /// `series` in export order (set, cpu).
    order: Vec<usize>,
}

impl GroupTimes {
    /// The exported series of set `set` at `at` (the level's label and
    /// value; `None`: summed over the node), created on first use.
    pub(super) fn series_of(&mut self, res: &Resolution, set: usize, at: At) -> usize {
        if let Some(&x) = self.series_index.get(&(set, at)) {
            return x;
        }
        let name = res.sets.get(set).map_or(String::new(), |s| s.name.clone());
        let mut pairs = vec![("set", name)];
        if let Some((k, v)) = at {
            pairs.push((k, v.to_string()));
        }
        let x = self.series.len();
        self.series.push(TimeSeries {
            set,
            at,
            labels: Labels::new(pairs),
            enabled: 0.0,
            running: 0.0,
            has_times: false,
            errors: 0,
            start_ns: 0,
        });
        self.series_index.insert((set, at), x);
        x
    }

    /// The slot of a (set, CPU), created on first use with its exported
    /// series `at` (the set's level on that CPU: `plan::level_label`).
    pub(super) fn slot_of(&mut self, res: &Resolution, set: usize, cpu: u32, at: At) -> usize {
        if let Some(&i) = self.slot_index.get(&(set, cpu)) {
            return i;
        }
        let export = self.series_of(res, set, at);
        let i = self.slots.len();
        self.slots.push(TimeSlot {
            export,
            d_enabled: 0,
            d_running: 0,
            groups: 0,
        });
        self.slot_index.insert((set, cpu), i);
        i
    }

    /// The exported series of a slot.
    fn export_of(&mut self, slot: usize) -> Option<&mut TimeSeries> {
        let x = self.slots.get(slot)?.export;
        self.series.get_mut(x)
    }

    /// A group of `slot` opened at `now`: its series starts then unless it
    /// started before.
    pub(super) fn opened(&mut self, slot: usize, now: u64) {
        if let Some(ts) = self.export_of(slot) {
            if ts.start_ns == 0 {
                ts.start_ns = now;
            }
        }
    }

    /// A failed read of a group of `slot`.
    pub(super) fn read_failed(&mut self, slot: usize) {
        if let Some(ts) = self.export_of(slot) {
            ts.errors += 1;
        }
    }

    /// One group's deltas, into its slot.
    pub(super) fn add(&mut self, slot: usize, d_enabled: u64, d_running: u64) {
        if let Some(t) = self.slots.get_mut(slot) {
            t.d_enabled += d_enabled;
            t.d_running += d_running;
            t.groups += 1;
        }
    }

    /// Adds each slot's deltas, averaged over its groups, to its exported
    /// series, and clears the slot.
    pub(super) fn flush(&mut self) {
        for t in &mut self.slots {
            if t.groups > 0 {
                if let Some(ts) = self.series.get_mut(t.export) {
                    ts.enabled += t.d_enabled as f64 * 1e-9 / f64::from(t.groups);
                    ts.running += t.d_running as f64 * 1e-9 / f64::from(t.groups);
                    ts.has_times = true;
                }
                t.d_enabled = 0;
                t.d_running = 0;
                t.groups = 0;
            }
        }
    }

    /// Puts the series in export order, (set, level label).
    pub(super) fn refresh_order(&mut self) {
        let mut order: Vec<usize> = (0..self.series.len()).collect();
        order.sort_by_key(|&i| (self.series[i].set, self.series[i].at));
        self.order = order;
    }

    /// Every exported series (for the totals of a reload).
    pub(super) fn series(&self) -> &[TimeSeries] {
        &self.series
    }

    /// An exported series by index, to continue an earlier engine's.
    pub(super) fn series_mut(&mut self, x: usize) -> Option<&mut TimeSeries> {
        self.series.get_mut(x)
    }

    /// The three families, in (set, level label) order; a per-CPU series
    /// shows while `online(cpu)`.
    pub(super) fn families(&self, online: impl Fn(u32) -> bool, families: &mut Vec<Family>) {
        let visible = |t: &TimeSeries| match t.at {
            Some(("cpu", c)) => online(c),
            _ => true,
        };
        let time_samples = |pick: fn(&TimeSeries) -> f64, need_times: bool| -> Vec<Sample> {
            self.order
                .iter()
                .map(|&i| &self.series[i])
                .filter(|t| (t.has_times || !need_times) && t.start_ns != 0 && visible(t))
                .map(|t| Sample {
                    labels: t.labels.clone(),
                    value: pick(t),
                    start_unix_nanos: t.start_ns,
                })
                .collect()
        };
        families.push(Family {
            name: "perf_group_enabled_seconds_total".into(),
            help: "Time the set's perf groups were enabled; compare with running time to see multiplexing.".into(),
            kind: Kind::Counter,
            samples: time_samples(|t| t.enabled, true),
        });
        families.push(Family {
            name: "perf_group_running_seconds_total".into(),
            help: "Time the set's perf groups were actually counting on the PMU (less than enabled when multiplexed).".into(),
            kind: Kind::Counter,
            samples: time_samples(|t| t.running, true),
        });
        families.push(Family {
            name: "perf_read_errors_total".into(),
            help: "Failed group reads.".into(),
            kind: Kind::Counter,
            samples: time_samples(|t| t.errors as f64, false),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolve::chain::ResolvedSet;

    fn res(sets: &[&str]) -> Resolution {
        Resolution {
            sets: sets
                .iter()
                .map(|n| ResolvedSet {
                    name: n.to_string(),
                    per: crate::config::Per::Cpu,
                })
                .collect(),
            metrics: Vec::new(),
        }
    }

    fn values(t: &GroupTimes, name: &str) -> Vec<(String, f64)> {
        let mut f = Vec::new();
        t.families(|c| c != 9, &mut f);
        let f = f.into_iter().find(|f| f.name == name).unwrap();
        f.samples
            .iter()
            .map(|s| {
                (
                    s.labels
                        .iter()
                        .map(|(_, v)| v.as_str())
                        .collect::<Vec<_>>()
                        .join(","),
                    s.value,
                )
            })
            .collect()
    }

    #[test]
    fn groups_of_one_slot_count_their_mean() {
        let r = res(&["imc"]);
        let mut t = GroupTimes::default();
        let s = t.slot_of(&r, 0, 2, Some(("cpu", 2)));
        assert_eq!(
            t.slot_of(&r, 0, 2, Some(("cpu", 2))),
            s,
            "one slot per (set, cpu)"
        );
        t.opened(s, 5);
        t.opened(s, 7);
        for _ in 0..6 {
            t.add(s, 1_000_000_000, 500_000_000);
        }
        t.flush();
        t.refresh_order();
        assert_eq!(
            values(&t, "perf_group_enabled_seconds_total"),
            [("imc,2".into(), 1.0)]
        );
        assert_eq!(
            values(&t, "perf_group_running_seconds_total"),
            [("imc,2".into(), 0.5)]
        );
        assert_eq!(t.series()[0].start_ns, 5, "the first start is kept");
        // Flushed: a second flush adds nothing.
        t.flush();
        assert_eq!(
            values(&t, "perf_group_enabled_seconds_total"),
            [("imc,2".into(), 1.0)]
        );
    }

    #[test]
    fn a_summed_set_shares_one_series_and_order_is_set_then_cpu() {
        let r = res(&["a", "b"]);
        let mut t = GroupTimes::default();
        let b1 = t.slot_of(&r, 1, 1, Some(("cpu", 1)));
        let a3 = t.slot_of(&r, 0, 3, None);
        let a0 = t.slot_of(&r, 0, 0, None);
        let b9 = t.slot_of(&r, 1, 9, Some(("cpu", 9)));
        for s in [b1, a3, a0, b9] {
            t.opened(s, 1);
        }
        t.read_failed(a3);
        t.read_failed(a0);
        t.read_failed(b9);
        t.refresh_order();
        // CPU 9 is offline: its series is not shown.
        assert_eq!(
            values(&t, "perf_read_errors_total"),
            [("a".into(), 2.0), ("b,1".into(), 0.0)]
        );
        assert_eq!(t.series().len(), 3);
    }
}
