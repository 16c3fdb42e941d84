//! Why a core PMU has fewer general-purpose counters free than it has
//! ([`Held`]), part of the one vocabulary of reasons ([`super::Reason`]):
//! who holds the others where the host tells (the NMI watchdog, another
//! user the measurement saw arrive), whether the PMU is a hypervisor's
//! (an instance type's counters), or why the budget could not be
//! measured. `check`, the landing page and the log render them from here.

use super::{Class, Reason};
use std::fmt;

/// One fact about a core PMU's counter budget, with what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    /// The NMI watchdog (`kernel.nmi_watchdog=1`, x86) holds one counter
    /// (a pinned cycles event on every CPU).
    NmiWatchdog {
        /// The core PMU.
        pmu: String,
    },
    /// Other users hold counters the host does not name (pinned events of
    /// another profiler or agent): the measured budget is below the
    /// PMU's counters less the watchdog's, or dropped since an earlier
    /// measurement.
    OtherUsers {
        /// The core PMU.
        pmu: String,
        /// Counters they hold.
        held: usize,
    },
    /// The PMU is a hypervisor's (the `hypervisor` CPU flag, or a DMI
    /// vendor or product of a virtual machine): the instance type decides
    /// how many counters the guest has.
    VirtualPmu {
        /// The core PMU.
        pmu: String,
        /// What says so (`hypervisor flag`, the DMI vendor and product).
        by: String,
        /// The counters measured free.
        free: usize,
    },
    /// The budget could not be measured (the probe event did not open).
    NotMeasured {
        /// The core PMU.
        pmu: String,
        /// Why.
        why: String,
    },
}

impl Held {
    /// Examples of every variant, for the reference.
    pub(crate) fn examples() -> Vec<Held> {
        vec![
            Held::NmiWatchdog { pmu: "cpu".into() },
            Held::OtherUsers {
                pmu: "cpu".into(),
                held: 2,
            },
            Held::VirtualPmu {
                pmu: "cpu".into(),
                by: "hypervisor flag".into(),
                free: 3,
            },
            Held::NotMeasured {
                pmu: "cpu".into(),
                why: "open: EOPNOTSUPP".into(),
            },
        ]
    }

    /// The PMU it is about.
    pub fn pmu(&self) -> &str {
        match self {
            Held::NmiWatchdog { pmu }
            | Held::OtherUsers { pmu, .. }
            | Held::VirtualPmu { pmu, .. }
            | Held::NotMeasured { pmu, .. } => pmu,
        }
    }
}

impl fmt::Display for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Held::NmiWatchdog { pmu } => write!(
                f,
                "the NMI watchdog holds one of PMU {pmu}'s counters (kernel.nmi_watchdog=1)"
            ),
            Held::OtherUsers { pmu, held } => write!(
                f,
                "{held} of PMU {pmu}'s counters are held by other users (pinned events of another profiler or agent; the host does not say which)"
            ),
            Held::VirtualPmu { pmu, by, free } => write!(
                f,
                "PMU {pmu} is a hypervisor's ({by}): this instance type exposes {free} general-purpose counters"
            ),
            Held::NotMeasured { pmu, why } => {
                write!(f, "the counters of PMU {pmu} could not be measured: {why}")
            }
        }
    }
}

impl Reason for Held {
    fn code(&self) -> &'static str {
        match self {
            Held::NmiWatchdog { .. } => "nmi_watchdog",
            Held::OtherUsers { .. } => "counters_held",
            Held::VirtualPmu { .. } => "virtual_pmu",
            Held::NotMeasured { .. } => "budget_unknown",
        }
    }

    fn what_to_do(&self) -> String {
        match self {
            Held::NmiWatchdog { .. } => "set kernel.nmi_watchdog=0 to free one counter (`sysctl kernel.nmi_watchdog=0`; persist it in /etc/sysctl.d; the hard-lockup detector is then off)".into(),
            Held::OtherUsers { .. } => "find the other user (another `perf`, profiler or monitoring agent: `ls -l /proc/*/fd 2>/dev/null | grep perf_event`) and stop it or give it fewer events; until then sets larger than the free counters are split and multiplex".into(),
            Held::VirtualPmu { free, .. } => format!("this instance type exposes {free} counters: keep each set within {free} events of this PMU, or use a bare-metal (or full-host) instance type for the model's counters"),
            Held::NotMeasured { .. } => "nothing is planned against a budget on this PMU: a set larger than its counters is found when it never runs, and split then; check `perf stat -e branch-instructions` on the host".into(),
        }
    }

    fn class(&self) -> Class {
        match self {
            Held::VirtualPmu { .. } => Class::NotOnPlatform,
            _ => Class::Failed,
        }
    }

    fn summary(&self) -> &'static str {
        match self {
            Held::NmiWatchdog { .. } => "the NMI watchdog holds one general-purpose counter",
            Held::OtherUsers { .. } => "other users hold general-purpose counters",
            Held::VirtualPmu { .. } => "a virtual PMU: the instance type decides the counters",
            Held::NotMeasured { .. } => "the free counters could not be measured",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fact_says_what_to_do() {
        for h in Held::examples() {
            assert_eq!(h.pmu(), "cpu");
            assert!(!h.what_to_do().is_empty(), "{h}");
            assert!(h.explain().contains("what to do"), "{h}");
        }
        let w = Held::NmiWatchdog { pmu: "cpu".into() };
        assert!(w.what_to_do().starts_with("set kernel.nmi_watchdog=0"));
        let v = Held::VirtualPmu {
            pmu: "cpu".into(),
            by: "DMI Amazon EC2".into(),
            free: 3,
        };
        assert!(v
            .what_to_do()
            .starts_with("this instance type exposes 3 counters"));
    }
}
