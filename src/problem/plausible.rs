//! Why a counter that counts is `implausible` (issue 27): its count is
//! one the CPU cannot physically produce, judged against a clock the PMU
//! does not drive (the CPU's busy time from `/proc/stat`) and the CPU's
//! limits (its maximum frequency, its retire width). One typed reason per
//! check ([`Implausible`]), with its code, message and what to do, in the
//! one vocabulary of reasons ([`Reason`]).
//!
//! The bounds, and where they come from:
//!
//! * **cycles ≤ maximum frequency × busy time × margin.** A core's cycle
//!   counter counts unhalted cycles, at most its highest clock while it
//!   runs. The maximum is cpufreq's `cpuinfo_max_freq`, with
//!   [`FREQ_MARGIN`] for the skew between the counter's window and the
//!   tick-based busy time; where cpufreq is absent (most VMs) the TSC rate
//!   x86 prints as `cpu MHz` stands in, with [`TSC_MARGIN`], because turbo
//!   clocks run up to about twice the TSC's nominal rate; where neither is
//!   known the bound is not checked (and the engine says why once).
//! * **instructions per cycle ≤ retire width × margin.** A core retires
//!   at most a fixed number of instructions per cycle. The widths
//!   ([`retire_width`]) are generous on purpose, the widest core of each
//!   architecture the vendors disclosed plus the instructions that fuse
//!   into one operation (a compare and its branch): x86 12 (Intel's Lion
//!   Cove retires 12 operations per cycle after an 8-wide rename; Golden
//!   Cove and AMD's Zen 4 and Zen 5 retire 8), Arm 12 (the widest
//!   Neoverse V and Cortex-X cores decode and dispatch 10 per cycle, with
//!   compare-and-branch fusion on top); [`IPC_MARGIN`] covers the skew of
//!   two counters estimated in different multiplexed windows.
//! * **a busy CPU retires instructions.** A CPU that was busy for at least
//!   [`MIN_BUSY_SECONDS`] and half of the window, whose cycles or
//!   instructions count less than [`NEAR_ZERO_PER_SECOND`] per busy
//!   second (a CPU at 1 MHz with an IPC of 1), is not counting what it
//!   runs: the guest that reports 395 instructions per second on a fully
//!   busy CPU, with `time_running` equal to `time_enabled`.

use super::{Class, Reason};
use std::fmt;

/// The margin over `cpuinfo_max_freq` × busy time.
pub const FREQ_MARGIN: f64 = 1.25;

/// The margin over the TSC rate × busy time where cpufreq is absent:
/// turbo clocks reach about twice the nominal (TSC) rate.
pub const TSC_MARGIN: f64 = 2.5;

/// The margin over the retire width.
pub const IPC_MARGIN: f64 = 1.25;

/// Events per busy second below which cycles or instructions are "near
/// zero" (a CPU at 1 MHz retiring one instruction per cycle).
pub const NEAR_ZERO_PER_SECOND: f64 = 1.0e6;

/// Busy seconds a window needs before near-zero counts are judged.
pub const MIN_BUSY_SECONDS: f64 = 1.0;

/// The generous retire width of a core PMU's architecture, by the PMU's
/// name (`cpu`, `cpu_core`, `cpu_atom`: x86; `armv8_*`, `armv9_*`: Arm);
/// `None` for any other (no IPC bound is checked).
pub fn retire_width(pmu: &str) -> Option<(f64, &'static str)> {
    if matches!(pmu, "cpu" | "cpu_core" | "cpu_atom") {
        Some((12.0, "x86"))
    } else if pmu.starts_with("armv8_") || pmu.starts_with("armv9_") {
        Some((12.0, "Arm"))
    } else {
        None
    }
}

/// Where a CPU's maximum frequency came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FreqSource {
    /// cpufreq's `cpuinfo_max_freq`.
    Cpufreq,
    /// The TSC rate (`cpu MHz` of `/proc/cpuinfo` without cpufreq).
    Tsc,
}

impl FreqSource {
    /// The margin the bound allows over it.
    pub fn margin(self) -> f64 {
        match self {
            FreqSource::Cpufreq => FREQ_MARGIN,
            FreqSource::Tsc => TSC_MARGIN,
        }
    }

    /// Where it came from, in words (`cpufreq cpuinfo_max_freq`, `TSC
    /// rate`).
    pub fn as_str(self) -> &'static str {
        match self {
            FreqSource::Cpufreq => "cpufreq cpuinfo_max_freq",
            FreqSource::Tsc => "TSC rate",
        }
    }
}

/// Which count of a CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    /// Cycles.
    Cycles,
    /// Instructions.
    Instructions,
}

impl Count {
    fn as_str(self) -> &'static str {
        match self {
            Count::Cycles => "cycles",
            Count::Instructions => "instructions",
        }
    }
}

/// Why a counter's count is not physically possible. Plain numbers, so a
/// verdict costs no allocation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Implausible {
    /// More cycles per busy second than the CPU's maximum frequency
    /// (times the margin).
    CyclesAboveMaxFrequency {
        /// The CPU.
        cpu: u32,
        /// Cycles per busy second measured.
        per_busy_second: f64,
        /// The maximum frequency, Hz.
        max_hz: f64,
        /// Where it came from.
        source: FreqSource,
    },
    /// More instructions per cycle than the core can retire.
    IpcAboveRetireWidth {
        /// The CPU.
        cpu: u32,
        /// The IPC measured.
        ipc: f64,
        /// The retire width allowed.
        width: f64,
        /// The architecture it is for.
        arch: &'static str,
    },
    /// A busy CPU whose cycles or instructions stay near zero.
    NearZeroWhileBusy {
        /// The CPU.
        cpu: u32,
        /// Which count.
        count: Count,
        /// Its events per busy second.
        per_busy_second: f64,
        /// The share of the window the CPU was busy.
        busy_share: f64,
    },
}

impl Implausible {
    /// Every code, in the order of [`examples`](Self::examples).
    pub const CODES: &'static [&'static str] = &[
        "cycles_above_max_frequency",
        "ipc_above_retire_width",
        "near_zero_while_busy",
    ];

    /// The CPU it is about.
    pub fn cpu(&self) -> u32 {
        match *self {
            Implausible::CyclesAboveMaxFrequency { cpu, .. }
            | Implausible::IpcAboveRetireWidth { cpu, .. }
            | Implausible::NearZeroWhileBusy { cpu, .. } => cpu,
        }
    }

    /// One of each code, with typical values.
    pub fn examples() -> Vec<Implausible> {
        vec![
            Implausible::CyclesAboveMaxFrequency {
                cpu: 0,
                per_busy_second: 6.0e9,
                max_hz: 3.0e9,
                source: FreqSource::Cpufreq,
            },
            Implausible::IpcAboveRetireWidth {
                cpu: 0,
                ipc: 40.0,
                width: 12.0,
                arch: "x86",
            },
            Implausible::NearZeroWhileBusy {
                cpu: 0,
                count: Count::Instructions,
                per_busy_second: 395.0,
                busy_share: 1.0,
            },
        ]
    }

    /// The message and what to do of a code alone (the live view and
    /// `stat` have the code, from `perf_counter_implausible_info`):
    /// `implausible: <summary>; what to do: ...`.
    pub fn explain_code(code: &str) -> Option<String> {
        Self::examples()
            .into_iter()
            .find(|x| x.code() == code)
            .map(|x| {
                format!(
                    "implausible: {}; what to do: {}",
                    x.summary(),
                    x.what_to_do()
                )
            })
    }
}

impl Reason for Implausible {
    fn code(&self) -> &'static str {
        match self {
            Implausible::CyclesAboveMaxFrequency { .. } => "cycles_above_max_frequency",
            Implausible::IpcAboveRetireWidth { .. } => "ipc_above_retire_width",
            Implausible::NearZeroWhileBusy { .. } => "near_zero_while_busy",
        }
    }

    fn what_to_do(&self) -> String {
        "do not trust this counter's values: compare with `perf stat -a` on the host (or in the guest), check the hypervisor's PMU passthrough (KVM/QEMU: `-cpu host,pmu=on`; cloud: an instance type with a full virtual PMU), and report it with the CPU model if it persists on bare metal".into()
    }

    fn class(&self) -> Class {
        Class::Failed
    }

    fn summary(&self) -> &'static str {
        match self {
            Implausible::CyclesAboveMaxFrequency { .. } => {
                "more cycles per busy second than the CPU's maximum frequency allows"
            }
            Implausible::IpcAboveRetireWidth { .. } => {
                "more instructions per cycle than the core can retire"
            }
            Implausible::NearZeroWhileBusy { .. } => {
                "cycles or instructions near zero on a busy CPU (a virtual PMU that does not count the guest?)"
            }
        }
    }
}

impl fmt::Display for Implausible {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Implausible::CyclesAboveMaxFrequency {
                cpu,
                per_busy_second,
                max_hz,
                source,
            } => write!(
                f,
                "CPU {cpu} counted {:.2} G cycles per busy second, above its maximum frequency of {:.2} GHz ({}) × {}",
                per_busy_second / 1e9,
                max_hz / 1e9,
                source.as_str(),
                source.margin()
            ),
            Implausible::IpcAboveRetireWidth {
                cpu,
                ipc,
                width,
                arch,
            } => write!(
                f,
                "CPU {cpu} retired {ipc:.2} instructions per cycle, above the widest {arch} core's {width} × {IPC_MARGIN}"
            ),
            Implausible::NearZeroWhileBusy {
                cpu,
                count,
                per_busy_second,
                busy_share,
            } => write!(
                f,
                "CPU {cpu} was busy {:.0}% of the time but counted {per_busy_second:.0} {} per busy second (fewer than {NEAR_ZERO_PER_SECOND:.0})",
                busy_share * 100.0,
                count.as_str()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_an_example_a_message_and_what_to_do() {
        let codes: Vec<&str> = Implausible::examples().iter().map(Reason::code).collect();
        assert_eq!(codes, Implausible::CODES);
        let guest = Implausible::examples()[2];
        assert_eq!(
            guest.to_string(),
            "CPU 0 was busy 100% of the time but counted 395 instructions per busy second (fewer than 1000000)"
        );
        assert!(Implausible::explain_code("near_zero_while_busy")
            .is_some_and(|s| s.starts_with("implausible: cycles or instructions near zero")));
        assert_eq!(Implausible::explain_code("nope"), None);
        assert_eq!(retire_width("cpu_core"), Some((12.0, "x86")));
        assert_eq!(retire_width("armv8_pmuv3_0"), Some((12.0, "Arm")));
        assert_eq!(retire_width("software"), None);
    }
}
