//! `check`'s counter budget: per core PMU, the general-purpose counters
//! free (measured: `engine::counters`), who holds the others and what to
//! do, through the one vocabulary ([`Held`]).

use crate::engine::PmuCounters;
use crate::problem::budget::Held;
use crate::problem::{CounterState, MetricStates, Reason};
use crate::terminal::escape;
use serde::Serialize;
use std::fmt::Write as _;

/// One fact of a budget: its code, what it says and what to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckHeld {
    /// The fixed code (`nmi_watchdog`, `counters_held`, `virtual_pmu`,
    /// `budget_unknown`).
    pub code: &'static str,
    /// What it says.
    pub reason: String,
    /// What to do.
    pub what_to_do: String,
}

/// One core PMU's counter budget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckCounters {
    /// The core PMU.
    pub pmu: String,
    /// The CPU it was measured on.
    pub cpu: u32,
    /// General-purpose counters free for one group (`null`: not measured).
    pub free: Option<usize>,
    /// Whether `free` is a lower bound (every probe group ran).
    pub at_least: bool,
    /// The PMU's general-purpose counters, where the kernel tells.
    pub total: Option<usize>,
    /// Whether the PMU is a hypervisor's.
    #[serde(rename = "virtual")]
    pub virtual_pmu: bool,
    /// Who holds the others, and what to do.
    pub held: Vec<CheckHeld>,
}

impl CheckCounters {
    /// From a measurement.
    pub fn of(b: &PmuCounters) -> Self {
        CheckCounters {
            pmu: b.pmu.clone(),
            cpu: b.cpu,
            free: b.free,
            at_least: b.at_least,
            total: b.total,
            virtual_pmu: b.virtual_pmu,
            held: b.held.iter().map(held).collect(),
        }
    }
}

fn held(h: &Held) -> CheckHeld {
    CheckHeld {
        code: h.code(),
        reason: h.to_string(),
        what_to_do: h.what_to_do(),
    }
}

/// The text lines: `counters: cpu: 3 of 4 general-purpose counters free
/// (CPU 0)`, then each fact with what to do.
pub fn text(budgets: &[PmuCounters]) -> String {
    let mut s = String::new();
    for b in budgets {
        let _ = writeln!(s, "counters: {}", escape(&b.summary()));
        for h in &b.held {
            let _ = writeln!(s, "    {}", escape(&h.to_string()));
            let _ = writeln!(s, "    what to do: {}", escape(&h.what_to_do()));
        }
    }
    s
}

/// How many of a metric's per-CPU counters are in each state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckStateCounts {
    /// On the PMU all the time they were enabled.
    pub counting: u32,
    /// Time-sliced.
    pub multiplexed: u32,
    /// Running, their count standing still.
    pub stalled: u32,
    /// Enabled, never on the PMU.
    pub never_ran: u32,
    /// Counting what the CPU cannot produce.
    pub implausible: u32,
}

/// A metric's counter state after `check`'s collection
/// ([`MetricStates`]): JSON `counter_state`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckState {
    /// `counting`, `multiplexed`, `stalled`, `never_ran`, `implausible`
    /// (the worst of its counters), `unavailable` or `not_judged`.
    pub state: &'static str,
    /// The lowest running share among its counters (`null`: none judged).
    pub running_ratio: Option<f64>,
    /// Its counters in each state (absent when none was judged).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus: Option<CheckStateCounts>,
    /// The reason's code (a problem's, an implausibility's or the
    /// state's), `null` while counting.
    pub problem: Option<&'static str>,
    /// Why, `null` while counting.
    pub reason: Option<String>,
    /// What to do, `null` while counting.
    pub what_to_do: Option<String>,
    /// The state as `perf stat` says it (the text report).
    #[serde(skip)]
    pub perf: String,
}

impl CheckState {
    /// From a metric's states.
    pub fn of(m: &MetricStates) -> Self {
        let why = m.why();
        let n = |s: CounterState| m.cpus[s.index()];
        CheckState {
            state: m.state(),
            running_ratio: m.running_ratio,
            cpus: (m.judged() > 0).then(|| CheckStateCounts {
                counting: n(CounterState::Counting),
                multiplexed: n(CounterState::Multiplexed),
                stalled: n(CounterState::Stalled),
                never_ran: n(CounterState::NeverRan),
                implausible: n(CounterState::Implausible),
            }),
            problem: why.as_ref().map(|w| w.code),
            what_to_do: why.as_ref().map(|w| w.what_to_do.clone()),
            reason: why.map(|w| w.reason),
            perf: m.perf_text(),
        }
    }

    /// Its text lines under the metric's (`pad` wide indent): the state
    /// as perf says it, then why and what to do unless it counts or is
    /// unavailable (the report says why already).
    pub fn text(&self, pad: usize) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "{:pad$}    state: {}", "", self.perf);
        if self.state != "unavailable" {
            if let (Some(r), Some(w)) = (&self.reason, &self.what_to_do) {
                let _ = writeln!(s, "{:pad$}    why: {}", "", escape(r));
                let _ = writeln!(s, "{:pad$}    what to do: {}", "", escape(w));
            }
        }
        s
    }
}
