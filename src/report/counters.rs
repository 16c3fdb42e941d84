//! `check`'s counter budget: per core PMU, the general-purpose counters
//! free (measured: `engine::counters`), who holds the others and what to
//! do, through the one vocabulary ([`Held`]).

use crate::engine::PmuCounters;
use crate::problem::budget::Held;
use crate::problem::Reason;
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
