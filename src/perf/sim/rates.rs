//! How fast the simulated counters count: a plausible constant rate per
//! event (events per second of enabled time), or a constant reading for
//! a `.snapshot` event.

use crate::perf::EventAttr;
use crate::pmu::Pmu;
use crate::sys::abi::{self, TYPE_SOFTWARE, TYPE_TRACEPOINT};

/// A counter's rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Rate {
    /// Events per second of enabled time.
    PerSec(f64),
    /// A snapshot reading: always this value.
    Constant(u64),
}

impl Rate {
    /// This rate, counting only `share` of the events (a snapshot reading
    /// is what it is).
    pub(super) fn times(self, share: f64) -> Rate {
        match self {
            Rate::PerSec(r) => Rate::PerSec(r * share),
            c @ Rate::Constant(_) => c,
        }
    }
}

/// The share of an event's count that its exclude bits keep, as the
/// kernel applies them to each kind of event (`kernel/events/core.c`):
///
/// * hardware and PMU events: the simulated CPUs spend 3/4 of their
///   events in user space and 1/4 in the kernel; no hypervisor level is
///   ever counted and no KVM guest ever runs, so `G` alone counts nothing;
/// * software events: the kernel applies `exclude_user` and
///   `exclude_kernel` to the registers of the code that raised the event
///   (`perf_exclude_event`), `cpu-clock` and `task-clock` count time
///   whatever the bits; page faults are raised 9/10 in user mode,
///   context switches, migrations and the rest in the kernel;
/// * tracepoints: only `exclude_kernel` applies (`perf_tp_event_match`),
///   and the simulated tracepoints fire in the kernel.
pub(super) fn privilege_share(attr: &EventAttr) -> f64 {
    let x = attr.exclude;
    let keep = |user: f64, kernel: f64| {
        f64::from(u8::from(!x.user)) * user + f64::from(u8::from(!x.kernel)) * kernel
    };
    match attr.type_ {
        TYPE_SOFTWARE => match attr.config[0] {
            abi::SW_CPU_CLOCK | abi::SW_TASK_CLOCK => 1.0,
            abi::SW_PAGE_FAULTS
            | abi::SW_PAGE_FAULTS_MIN
            | abi::SW_PAGE_FAULTS_MAJ
            | abi::SW_ALIGNMENT_FAULTS
            | abi::SW_EMULATION_FAULTS => keep(0.9, 0.1),
            _ => keep(0.0, 1.0),
        },
        TYPE_TRACEPOINT => f64::from(u8::from(!x.kernel)),
        _ if x.host => 0.0,
        _ => keep(0.75, 0.25),
    }
}

/// The simulated core's rates of the generic hardware events, by id and
/// by the name its sysfs `events/` directory gives each: the simulator's
/// own table, written from the kernel's side (x86's `events_sysfs_show`
/// names), not taken from the resolver's, so a wrong name there shows as
/// a wrong count here.
const HARDWARE_RATES: &[(u64, &str, f64)] = &[
    (abi::HW_CPU_CYCLES, "cpu-cycles", 2.0e9),
    (abi::HW_INSTRUCTIONS, "instructions", 3.0e9),
    (abi::HW_CACHE_REFERENCES, "cache-references", 5e7),
    (abi::HW_CACHE_MISSES, "cache-misses", 1e7),
    (abi::HW_BRANCH_INSTRUCTIONS, "branch-instructions", 5e8),
    (abi::HW_BRANCH_MISSES, "branch-misses", 5e6),
    (abi::HW_BUS_CYCLES, "bus-cycles", 2.0e9),
    (
        abi::HW_STALLED_CYCLES_FRONTEND,
        "stalled-cycles-frontend",
        2e8,
    ),
    (
        abi::HW_STALLED_CYCLES_BACKEND,
        "stalled-cycles-backend",
        2e8,
    ),
    (abi::HW_REF_CPU_CYCLES, "ref-cycles", 2.0e9),
];

/// Rate of a generic hardware event id.
pub(super) fn hardware_rate(id: u64) -> f64 {
    HARDWARE_RATES
        .iter()
        .find(|r| r.0 == id)
        .map_or(2e8, |r| r.2)
}

pub(super) fn cache_rate(config: u64) -> f64 {
    let miss = config & (1 << 16) != 0;
    match (miss, config & 0xff) {
        (true, 0) => 2e7,
        (true, _) => 4e6,
        (false, _) => 1e9,
    }
}

pub(super) fn software_rate(id: u64) -> f64 {
    match id {
        0 | 1 => 1.0e9,
        2 => 1000.0,
        3 => 2000.0,
        4 => 50.0,
        5 => 990.0,
        6 => 10.0,
        _ => 100.0,
    }
}

/// Rate of a sysfs PMU's event, by the name of the named event it encodes.
pub(super) fn named_rate(p: &Pmu, name: &str, scale: Option<f64>) -> Rate {
    if p.is_core() {
        if let Some(r) = HARDWARE_RATES.iter().find(|r| r.1 == name) {
            return Rate::PerSec(r.2);
        }
    }
    let has = |xs: &[&str]| xs.iter().any(|x| name.contains(x));
    let r = if has(&["cpu_thermal_margin"]) {
        return Rate::Constant(40);
    } else if has(&["energy"]) {
        20.0 / scale.filter(|s| *s > 0.0).unwrap_or(1.0)
    } else if has(&["tsc", "aperf", "mperf"]) {
        2.5e9
    } else if has(&["data_total"]) {
        2.0e7
    } else if has(&["cas_count_read", "data_read"]) {
        1.5e7
    } else if has(&["cas_count_write", "data_write"]) {
        0.5e7
    } else if has(&["cycles", "clockticks"]) {
        2.0e9
    } else if has(&["instructions", "inst_retired", "irperf"]) {
        3.0e9
    } else {
        return unnamed_rate(p);
    };
    Rate::PerSec(r)
}

/// Rate of a raw encoding no named event matches.
pub(super) fn unnamed_rate(p: &Pmu) -> Rate {
    let memory = ["imc", "umc", "df", "dmc"]
        .iter()
        .any(|x| p.name.contains(x));
    Rate::PerSec(if memory { 1.0e7 } else { 1.0e6 })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table covers every generic hardware id once, in the kernel's
    /// order, and a name finds the same rate as its id.
    #[test]
    fn hardware_rates_cover_every_id_once() {
        let ids: Vec<u64> = HARDWARE_RATES.iter().map(|r| r.0).collect();
        assert_eq!(ids, (0..abi::HW_MAX).collect::<Vec<_>>());
        assert_eq!(hardware_rate(abi::HW_INSTRUCTIONS), 3.0e9);
        assert_eq!(hardware_rate(abi::HW_STALLED_CYCLES_BACKEND), 2e8);
    }
}
