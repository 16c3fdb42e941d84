//! How fast the simulated counters count: a plausible constant rate per
//! event (events per second of enabled time), or a constant reading for
//! a `.snapshot` event.

use crate::pmu::Pmu;
use crate::spec::HARDWARE_SYSFS;

/// A counter's rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Rate {
    /// Events per second of enabled time.
    PerSec(f64),
    /// A snapshot reading: always this value.
    Constant(u64),
}

/// Rate of a generic hardware event id.
pub(super) fn hardware_rate(id: u64) -> f64 {
    match id {
        0 | 6 | 9 => 2.0e9,
        1 => 3.0e9,
        2 => 5e7,
        3 => 1e7,
        4 => 5e8,
        5 => 5e6,
        _ => 2e8, // stalled-cycles-frontend/backend
    }
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
        if let Some(i) = HARDWARE_SYSFS.iter().position(|n| *n == name) {
            return Rate::PerSec(hardware_rate(i as u64));
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
