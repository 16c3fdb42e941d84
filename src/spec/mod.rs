//! The event spec grammar, as `perf` users write events.
//!
//! ```text
//! (any form below, then :mods or, for pmu/…/, mods right after the `/`)
//! cycles | instructions | cache-misses | ...        generic hardware (PERF_TYPE_HARDWARE)
//! L1-dcache-load-misses | LLC-loads | dTLB-... ...    generic cache (PERF_TYPE_HW_CACHE)
//! cpu-clock | context-switches | page-faults | ...   software (PERF_TYPE_SOFTWARE)
//! rNNNN                                              raw, on the core PMU(s)
//! pmu/event/  pmu/term=val,term/  pmu/event,term=val/  sysfs PMUs; `pmu` may be a glob
//! core/...                                           every core PMU
//! subsys:name                                        tracepoint
//! ```
//!
//! A leaf of the pipeline: it depends only on the kernel's ABI numbers
//! ([`crate::sys::abi`]). The grammars of sysfs (`format/` fields and
//! CPU lists, [`format`]) live here too: `config` and `pmu` both read them. The configuration stores specs parsed by it,
//! and the resolver takes them as parsed; nothing parses a spec twice.
//!
//! perf's event modifiers are part of the grammar: `cycles:u`,
//! `cpu/event=0x3c/k`, `r412e:uk`, `syscalls:sys_enter_read:u`. The ones
//! that choose what is counted are supported (`u` user, `k` kernel, `h`
//! hypervisor, `G` guest, `H` host; see [`Modifiers`]), with perf's
//! meaning of each combination. The others (`p`, `P`, `S`, `D`, `W`, `e`,
//! `I`, `b`, `R`) are refused with the column and what is supported. A
//! modifier is part of one event spec: `instructions:u` is another
//! quantity than `instructions`, so it is another metric
//! (`instructions_user_total`), never a label of the same one.
//! A term given twice (`cpu/event=1,event=2/`) is refused too, as perf
//! refuses it, rather than letting the last one win.

pub mod format;
mod modifiers;
mod names;
mod parse;
mod terms;
#[cfg(test)]
mod tests;

pub use modifiers::{Modifiers, SUPPORTED_MODIFIERS};
pub use names::{
    cache_event_names, cache_op_valid, generic_names, quote_list, suggest, HARDWARE,
    HARDWARE_SYSFS, SOFTWARE,
};
pub use parse::parse;
pub use terms::{check_scale, parse_number, parse_terms, SyntaxError, Term, TermValue};

use crate::sys::abi;
use std::fmt;
/// A parsed event spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventSpec {
    /// A generic hardware event: the `PERF_TYPE_HARDWARE` id.
    Hardware {
        /// As written.
        name: String,
        /// The id (0 = cycles … 9 = ref-cycles).
        id: u64,
    },
    /// A generic cache event: `id | op << 8 | result << 16`.
    HwCache {
        /// As written.
        name: String,
        /// The encoded config.
        config: u64,
    },
    /// A software event.
    Software {
        /// As written.
        name: String,
        /// The id.
        id: u64,
    },
    /// `rNNNN` on the core PMU(s).
    Raw(u64),
    /// `pmu/terms/`.
    Pmu {
        /// The PMU name or pattern (`core` means every core PMU).
        pmu: String,
        /// The terms, each a format term, an event alias (bare) or
        /// `config`/`config1`/`config2`.
        terms: Vec<Term>,
        /// Bare terms as written, in order (an alias may be among them).
        bare: Vec<String>,
    },
    /// `subsys:name`.
    Tracepoint {
        /// The subsystem (tracefs `events/<subsys>`).
        subsys: String,
        /// The event name.
        name: String,
    },
}

impl fmt::Display for EventSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EventSpec::Hardware { name, .. }
            | EventSpec::HwCache { name, .. }
            | EventSpec::Software { name, .. } => f.write_str(name),
            EventSpec::Raw(v) => write!(f, "r{v:x}"),
            EventSpec::Pmu { pmu, terms, .. } => {
                write!(f, "{pmu}/")?;
                for (i, t) in terms.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    match t.value {
                        TermValue::Num(v) => write!(f, "{}={v:#x}", t.name)?,
                        TermValue::Required => write!(f, "{}=?", t.name)?,
                    }
                }
                f.write_str("/")
            }
            EventSpec::Tracepoint { subsys, name } => write!(f, "{subsys}:{name}"),
        }
    }
}

/// A parsed event spec: the event and its modifiers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The event.
    pub spec: EventSpec,
    /// Its modifiers (none for most).
    pub modifiers: Modifiers,
}

/// Modifiers the kernel would ignore for an event, so that a series
/// counted with them would not mean what its spec says. Each names the
/// event (as parsed) and its modifiers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IgnoredModifiers {
    /// `cpu-clock` and `task-clock` count elapsed time whatever the bits.
    #[error("`{name}:{modifiers}`: the kernel counts `{name}` as elapsed time whatever the modifiers (they filter only its samples), so it would count the same as `{name}`; count `{name}`, or sample on `{name}:{modifiers}`")]
    Clock {
        /// `cpu-clock` or `task-clock`, as written.
        name: String,
        /// The modifiers.
        modifiers: Modifiers,
    },
    /// `h`, `G` or `H` on a software event.
    #[error("`{name}:{modifiers}`: the kernel applies only `u` and `k` to a software event (not `h`, `G` or `H`); write `{name}:u` or `{name}:k`")]
    Software {
        /// The software event, as written.
        name: String,
        /// The modifiers.
        modifiers: Modifiers,
    },
    /// Anything but `u` on a tracepoint.
    #[error("`{subsys}:{name}:{modifiers}`: on a tracepoint the kernel applies only `u` (it keeps the hits taken in user mode: syscall entry and exit, uprobes), so `:{modifiers}` would be ignored; write `{subsys}:{name}:u` or `{subsys}:{name}`")]
    Tracepoint {
        /// The subsystem.
        subsys: String,
        /// The tracepoint.
        name: String,
        /// The modifiers.
        modifiers: Modifiers,
    },
}

impl Event {
    /// Refuses modifiers the kernel would ignore for this event, which
    /// would give a series that does not mean what its spec says
    /// (`kernel/events/core.c`):
    ///
    /// * software events apply only `exclude_user` and `exclude_kernel`,
    ///   to the registers of the code that raised the event
    ///   (`perf_exclude_event`): `h`, `G` and `H` mean nothing there;
    /// * `cpu-clock` and `task-clock` count elapsed time whatever the
    ///   bits (`cpu_clock_event_update`, `task_clock_event_update`); the
    ///   bits only filter their samples (`perf_swevent_hrtimer`), so they
    ///   take modifiers when `sampling`, never when counting;
    /// * a tracepoint applies only `exclude_kernel`, keeping the hits
    ///   taken with user-mode registers (syscall entry and exit, uprobes;
    ///   `perf_tp_event_match`): only `u` means something there.
    pub fn check_modifiers(&self, sampling: bool) -> Result<(), IgnoredModifiers> {
        let modifiers = self.modifiers;
        if modifiers.is_empty() {
            return Ok(());
        }
        match &self.spec {
            EventSpec::Software { id, name }
                if (*id == abi::SW_CPU_CLOCK || *id == abi::SW_TASK_CLOCK) && !sampling =>
            {
                Err(IgnoredModifiers::Clock {
                    name: name.clone(),
                    modifiers,
                })
            }
            EventSpec::Software { name, .. }
                if modifiers.hv || modifiers.guest || modifiers.host =>
            {
                Err(IgnoredModifiers::Software {
                    name: name.clone(),
                    modifiers,
                })
            }
            EventSpec::Tracepoint { subsys, name }
                if modifiers
                    != (Modifiers {
                        user: true,
                        ..Modifiers::default()
                    }) =>
            {
                Err(IgnoredModifiers::Tracepoint {
                    subsys: subsys.clone(),
                    name: name.clone(),
                    modifiers,
                })
            }
            _ => Ok(()),
        }
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.spec)?;
        match (&self.spec, self.modifiers.is_empty()) {
            (_, true) => Ok(()),
            (EventSpec::Pmu { .. }, false) => write!(f, "{}", self.modifiers),
            (_, false) => write!(f, ":{}", self.modifiers),
        }
    }
}
