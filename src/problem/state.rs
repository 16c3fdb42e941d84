//! The state of a counter that opened: whether what it reads is a
//! measurement (issue 27, "counters you can trust"). One vocabulary for
//! `perf_counter_state`'s `state` label, the live view, `stat` and the
//! landing page, rendered here.
//!
//! The engine computes it at every collection from what it reads anyway
//! (one group read: `time_enabled`, `time_running` and the counts), per
//! counter series, over the window since the previous collection:
//!
//! * `counting`: on the PMU all the time it was enabled;
//! * `multiplexed`: time-sliced with other groups (`time_running <
//!   time_enabled`); the value is the estimate `raw × enabled / running`,
//!   exported with the running share (`perf_counter_running_ratio`);
//! * `stalled`: on the PMU (`time_running` advances) yet the count has not
//!   moved for [`STALL_COLLECTIONS`] collections in a row. Only counters
//!   that must move whenever a CPU runs at all are judged so: cycles and
//!   instructions of a core (hardware) PMU. An idle software counter
//!   (context switches, page faults), a tracepoint or an uncore counter
//!   legitimately stands still;
//! * `never_ran`: enabled (`time_enabled` advances) but never on the PMU
//!   (`time_running` does not): no value was measured in the window, as
//!   perf's `<not counted>`. The kernel does this to a group that needs
//!   more counters than are free.
//!
//! * `implausible`: the count is one the CPU cannot physically produce,
//!   judged at a bounded rate against the CPU's busy time, its maximum
//!   frequency and its retire width ([`super::plausible`], which says the
//!   bounds and where they come from). Only cycles and instructions of a
//!   core PMU, counted system-wide per CPU, are judged. Not a
//!   measurement: the live view and `stat` say why instead of the value.

use std::fmt;

/// Collections in a row a must-move counter's count stands still while it
/// runs before it is `stalled`.
pub const STALL_COLLECTIONS: u32 = 3;

/// The state of a counter over the last collection's window, the more
/// severe later (a series summed over CPUs takes its worst CPU's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum CounterState {
    /// On the PMU all the time it was enabled.
    #[default]
    Counting,
    /// Time-sliced: the value is scaled by enabled / running.
    Multiplexed,
    /// Running, but the count stood still (cycles, instructions only).
    Stalled,
    /// Enabled but never on the PMU: nothing was measured.
    NeverRan,
    /// A count the CPU cannot physically produce (cycles, instructions
    /// only): not a measurement.
    Implausible,
}

impl CounterState {
    /// Every state, in order of severity.
    pub const ALL: [CounterState; 5] = [
        CounterState::Counting,
        CounterState::Multiplexed,
        CounterState::Stalled,
        CounterState::NeverRan,
        CounterState::Implausible,
    ];

    /// The `state` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            CounterState::Counting => "counting",
            CounterState::Multiplexed => "multiplexed",
            CounterState::Stalled => "stalled",
            CounterState::NeverRan => "never_ran",
            CounterState::Implausible => "implausible",
        }
    }

    /// Its position in [`ALL`](Self::ALL).
    pub fn index(self) -> usize {
        self as usize
    }

    /// The state a label value names.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|x| x.as_str() == s)
    }

    /// The state of a window from its `time_enabled` and `time_running`
    /// increases, before the count is looked at; `None` when the enabled
    /// time did not advance (nothing to judge: two reads at one instant,
    /// a CPU gone offline).
    pub fn of_window(d_enabled: u64, d_running: u64) -> Option<Self> {
        if d_enabled == 0 {
            None
        } else if d_running == 0 {
            Some(CounterState::NeverRan)
        } else if d_running < d_enabled {
            Some(CounterState::Multiplexed)
        } else {
            Some(CounterState::Counting)
        }
    }

    /// Whether a value read in this state is a measurement (or, for
    /// `multiplexed`, an estimate from one). A `never_ran` counter's
    /// value is not: it is shown as `<not counted>`, with why; nor is an
    /// `implausible` one's (`<implausible>`, with why).
    pub fn is_measurement(self) -> bool {
        !matches!(self, CounterState::NeverRan | CounterState::Implausible)
    }

    /// What the state means and what to do, on one line.
    pub fn explain(self) -> &'static str {
        match self {
            CounterState::Counting => "counting: on the PMU all the time it was enabled",
            CounterState::Multiplexed => "multiplexed: time-sliced with other groups; the value is scaled by enabled/running time (what to do: fewer events per core PMU, or stop other users of the counters)",
            CounterState::Stalled => "stalled: on the PMU but the count has not moved for several collections, which cycles and instructions never do on a CPU that runs (a broken or virtual PMU?); what to do: compare with `perf stat` on the host, check the hypervisor's PMU passthrough",
            CounterState::NeverRan => "not counted: the counter was enabled but never on the PMU (its group needs more counters than are free); what to do: split the set, or stop other users of the counters (the NMI watchdog: `sysctl kernel.nmi_watchdog=0`)",
            CounterState::Implausible => "implausible: the count is one the CPU cannot physically produce (against its busy time, maximum frequency or retire width); what to do: do not trust it, compare with `perf stat -a` on the host, check the hypervisor's PMU passthrough",
        }
    }
}

impl fmt::Display for CounterState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_is_judged_by_its_times() {
        assert_eq!(CounterState::of_window(0, 0), None);
        assert_eq!(
            CounterState::of_window(100, 0),
            Some(CounterState::NeverRan)
        );
        assert_eq!(
            CounterState::of_window(100, 25),
            Some(CounterState::Multiplexed)
        );
        assert_eq!(
            CounterState::of_window(100, 100),
            Some(CounterState::Counting)
        );
        // Rounding never makes a counter look multiplexed.
        assert_eq!(
            CounterState::of_window(100, 101),
            Some(CounterState::Counting)
        );
    }

    #[test]
    fn labels_round_trip_and_severity_orders_states() {
        for (i, s) in CounterState::ALL.into_iter().enumerate() {
            assert_eq!(CounterState::parse(s.as_str()), Some(s));
            assert_eq!(s.index(), i);
        }
        assert_eq!(
            CounterState::parse("implausible"),
            Some(CounterState::Implausible)
        );
        assert_eq!(CounterState::parse("unavailable"), None);
        assert!(CounterState::Implausible > CounterState::NeverRan);
        assert!(!CounterState::Implausible.is_measurement());
        assert!(CounterState::NeverRan > CounterState::Stalled);
        assert!(CounterState::Stalled > CounterState::Multiplexed);
        assert!(CounterState::Multiplexed > CounterState::Counting);
        assert!(!CounterState::NeverRan.is_measurement());
        assert!(CounterState::Multiplexed.is_measurement());
    }
}
