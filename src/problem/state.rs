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

use super::plausible::Implausible;
use super::{Problem, Reason};
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

impl CounterState {
    /// What the state means, without what to do ([`explain`](Self::explain)'s first part).
    pub fn meaning(self) -> &'static str {
        let e = self.explain();
        e.split_once("what to do: ")
            .map_or(e, |(m, _)| m.trim_end_matches([' ', ';', '(', ',']))
    }

    /// What to do about it ([`explain`](Self::explain)'s last part; empty
    /// for `counting`).
    pub fn what_to_do(self) -> &'static str {
        self.explain()
            .split_once("what to do: ")
            .map_or("", |(_, t)| t.trim_end_matches(')'))
    }
}

/// One metric's counter states at a collection, for `check` and the
/// landing page: how many of its per-CPU counters (CPUs, uncore
/// instances) are in each state, the lowest running share among them and
/// why the worst is what it is, in the one vocabulary ([`Problem`],
/// [`Implausible`], [`CounterState`]), rendered here.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricStates {
    /// The metric.
    pub metric: String,
    /// Per state, in [`CounterState::ALL`] order, its counters in it.
    pub cpus: [u32; CounterState::ALL.len()],
    /// The lowest running share (`Δrunning / Δenabled`) among its
    /// counters; `None` when none was judged.
    pub running_ratio: Option<f64>,
    /// Why it is not counted (unavailable, or a group that can never be
    /// scheduled).
    pub problem: Option<Problem>,
    /// Why it is implausible, when one of its counters is.
    pub implausible: Option<Implausible>,
}

/// A metric's state, with why and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateReason {
    /// The fixed code: the problem's, the implausibility's, or the
    /// state's label value.
    pub code: &'static str,
    /// What it says.
    pub reason: String,
    /// What to do.
    pub what_to_do: String,
}

impl MetricStates {
    /// A metric none of whose counters opened, for `problem`.
    pub fn unavailable(metric: &str, problem: Option<Problem>) -> Self {
        MetricStates {
            metric: metric.to_string(),
            cpus: [0; CounterState::ALL.len()],
            running_ratio: None,
            problem,
            implausible: None,
        }
    }

    /// The worst state among its counters (`None`: none judged).
    pub fn worst(&self) -> Option<CounterState> {
        CounterState::ALL
            .into_iter()
            .rev()
            .find(|s| self.cpus[s.index()] > 0)
    }

    /// Its counters judged.
    pub fn judged(&self) -> u32 {
        self.cpus.iter().sum()
    }

    /// The state's label: the worst counter state, `unavailable` when
    /// nothing counts (with a problem), `not_judged` when counters are
    /// open but no window was judged yet.
    pub fn state(&self) -> &'static str {
        match (self.worst(), &self.problem) {
            (Some(s), _) => s.as_str(),
            (None, Some(_)) => "unavailable",
            (None, None) => "not_judged",
        }
    }

    /// Why the worst state is what it is, and what to do (`None` while
    /// counting or not judged).
    pub fn why(&self) -> Option<StateReason> {
        let of = |r: &dyn Reason| StateReason {
            code: r.code(),
            reason: r.to_string(),
            what_to_do: r.what_to_do(),
        };
        match self.worst() {
            None => self.problem.as_ref().map(|p| of(p)),
            Some(CounterState::Counting) => None,
            Some(CounterState::Implausible) if self.implausible.is_some() => {
                self.implausible.as_ref().map(|x| of(x))
            }
            Some(CounterState::NeverRan) if self.problem.is_some() => {
                self.problem.as_ref().map(|p| of(p))
            }
            Some(s) => Some(StateReason {
                code: s.as_str(),
                reason: s.meaning().to_string(),
                what_to_do: s.what_to_do().to_string(),
            }),
        }
    }

    /// The state as `perf stat` conventions say it: `<not counted>` for
    /// a counter that never ran, `<not supported>` for one that did not
    /// open, `<implausible>` for a count that is not a measurement, and
    /// the running share `(xx.xx%)` when below 100%, with how many of
    /// its counters are in the worst state.
    pub fn perf_text(&self) -> String {
        let Some(worst) = self.worst() else {
            return match self.problem {
                Some(_) => "<not supported>".into(),
                None => "not judged yet".into(),
            };
        };
        let n = self.judged();
        let k = self.cpus[worst.index()];
        let on = if k == n {
            format!("on {n} CPU{}", if n == 1 { "" } else { "s" })
        } else {
            format!("on {k} of {n} CPUs")
        };
        let head = match worst {
            CounterState::NeverRan => "<not counted>",
            CounterState::Implausible => "<implausible>",
            s => s.as_str(),
        };
        match self.running_ratio {
            Some(r) if r < 1.0 && worst.is_measurement() => {
                format!("{head} {on} ({:.2}%)", r * 100.0)
            }
            _ => format!("{head} {on}"),
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
        assert_eq!(CounterState::Counting.what_to_do(), "");
        for s in CounterState::ALL.into_iter().skip(1) {
            assert!(!s.what_to_do().is_empty() && !s.what_to_do().ends_with(')'));
            assert!(s
                .meaning()
                .starts_with(s.explain().split(':').next().unwrap_or("")));
            assert!(!s.meaning().contains("what to do"), "{}", s.meaning());
        }
    }

    #[test]
    fn a_metric_says_its_worst_state_as_perf_does() {
        let mut m = MetricStates::unavailable("c", None);
        assert_eq!(
            (m.state(), m.why(), m.perf_text().as_str()),
            ("not_judged", None, "not judged yet")
        );
        m.cpus = [6, 2, 0, 0, 0];
        m.running_ratio = Some(0.5);
        assert_eq!(m.state(), "multiplexed");
        assert_eq!(m.perf_text(), "multiplexed on 2 of 8 CPUs (50.00%)");
        assert_eq!(m.why().map(|w| w.code), Some("multiplexed"));
        m.cpus = [0, 0, 0, 1, 0];
        m.running_ratio = Some(0.0);
        assert_eq!(m.perf_text(), "<not counted> on 1 CPU");
        let why = m.why().unwrap_or_else(|| unreachable!());
        assert_eq!(why.what_to_do, CounterState::NeverRan.what_to_do());
        m.cpus = [8, 0, 0, 0, 0];
        m.running_ratio = Some(1.0);
        assert_eq!(
            (m.state(), m.why(), m.perf_text().as_str()),
            ("counting", None, "counting on 8 CPUs")
        );
        m.cpus = [7, 0, 0, 0, 1];
        m.implausible = Implausible::examples().pop();
        assert_eq!(m.perf_text(), "<implausible> on 1 of 8 CPUs");
        assert_eq!(m.why().map(|w| w.code), Some("near_zero_while_busy"));
        let p = Problem::NeedsHardwarePmu {
            event: "cycles".into(),
        };
        let u = MetricStates::unavailable("c", Some(p.clone()));
        assert_eq!(
            (u.state(), u.perf_text().as_str()),
            ("unavailable", "<not supported>")
        );
        assert_eq!(u.why().map(|w| w.what_to_do), Some(p.what_to_do()));
    }
}
