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
//! ([`crate::perf::abi`]). The configuration stores specs parsed by it,
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

use crate::perf::abi;
use std::fmt;

/// A parse error of one of the small grammars (event specs, sysfs terms
/// and formats), without a path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SyntaxError(pub String);

/// A term's value in an event alias or a user spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TermValue {
    /// A number (hex `0x..` or decimal). A bare term means 1.
    Num(u64),
    /// `?`: the user must supply this term (e.g. arm_cmn `nodeid=?`).
    Required,
}

/// One `name=value` term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    /// The term's name: a format name or `config`/`config1`/`config2`.
    pub name: String,
    /// Its value.
    pub value: TermValue,
}

/// Parses a number the way the kernel and perf write them: `0x` hex or
/// decimal.
pub fn parse_number(s: &str) -> Result<u64, SyntaxError> {
    let s = s.trim();
    let r = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16)
    } else {
        s.parse::<u64>()
    };
    r.map_err(|_| SyntaxError(format!("`{s}` is not a number")))
}

/// Parses an event term string such as `event=0x04,umask=0x03` or
/// `event=0xd,umask=0x1,cmask=1,any=1`. A bare term means `=1`; `?` means
/// the user must supply the value.
pub fn parse_terms(s: &str) -> Result<Vec<Term>, SyntaxError> {
    let s = s.trim();
    let mut terms = Vec::new();
    if s.is_empty() {
        return Ok(terms);
    }
    for part in s.split(',') {
        let part = part.trim();
        if part.is_empty() {
            return Err(SyntaxError(format!("empty term in `{s}`")));
        }
        let (name, value) = match part.split_once('=') {
            Some((n, v)) => {
                let v = v.trim();
                let value = if v == "?" {
                    TermValue::Required
                } else {
                    TermValue::Num(parse_number(v)?)
                };
                (n.trim(), value)
            }
            None => (part, TermValue::Num(1)),
        };
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(SyntaxError(format!("`{name}` is not a term name")));
        }
        terms.push(Term {
            name: name.to_string(),
            value,
        });
    }
    Ok(terms)
}

/// Checks a scale factor, from sysfs `.scale` or a config `scale:`: a
/// count is multiplied by it, so it must be a finite positive number of a
/// sane size (the kernel's own range from 2^-32 J for RAPL to 64 bytes
/// for a CAS). Returns the reason when it is not.
pub fn check_scale(scale: f64) -> Result<(), &'static str> {
    if !scale.is_finite() {
        Err("a scale must be a finite number")
    } else if scale <= 0.0 {
        Err("a scale must be positive (zero or a negative scale would export zeros or decreasing counters)")
    } else if !(1e-15..=1e15).contains(&scale) {
        Err("a scale must lie between 1e-15 and 1e15 (a larger one overflows to +Inf)")
    } else {
        Ok(())
    }
}

/// `PERF_TYPE_HARDWARE` event ids and the names perf accepts for them.
pub const HARDWARE: &[(&str, u64)] = &[
    ("cycles", abi::HW_CPU_CYCLES),
    ("cpu-cycles", abi::HW_CPU_CYCLES),
    ("instructions", abi::HW_INSTRUCTIONS),
    ("cache-references", abi::HW_CACHE_REFERENCES),
    ("cache-misses", abi::HW_CACHE_MISSES),
    ("branch-instructions", abi::HW_BRANCH_INSTRUCTIONS),
    ("branches", abi::HW_BRANCH_INSTRUCTIONS),
    ("branch-misses", abi::HW_BRANCH_MISSES),
    ("bus-cycles", abi::HW_BUS_CYCLES),
    ("stalled-cycles-frontend", abi::HW_STALLED_CYCLES_FRONTEND),
    ("idle-cycles-frontend", abi::HW_STALLED_CYCLES_FRONTEND),
    ("stalled-cycles-backend", abi::HW_STALLED_CYCLES_BACKEND),
    ("idle-cycles-backend", abi::HW_STALLED_CYCLES_BACKEND),
    ("ref-cycles", abi::HW_REF_CPU_CYCLES),
];

/// The sysfs `events/` name the kernel uses for each hardware id, indexed
/// by `PERF_COUNT_HW_*` (x86's `events_sysfs_show` names).
pub const HARDWARE_SYSFS: [&str; abi::HW_MAX as usize] = [
    "cpu-cycles",
    "instructions",
    "cache-references",
    "cache-misses",
    "branch-instructions",
    "branch-misses",
    "bus-cycles",
    "stalled-cycles-frontend",
    "stalled-cycles-backend",
    "ref-cycles",
];

/// `PERF_TYPE_SOFTWARE` event ids and names (perf_event_open(2)). The
/// `software` PMU has no `events/` directory, so these are built in.
pub const SOFTWARE: &[(&str, u64)] = &[
    ("cpu-clock", abi::SW_CPU_CLOCK),
    ("task-clock", abi::SW_TASK_CLOCK),
    ("page-faults", abi::SW_PAGE_FAULTS),
    ("faults", abi::SW_PAGE_FAULTS),
    ("context-switches", abi::SW_CONTEXT_SWITCHES),
    ("cs", abi::SW_CONTEXT_SWITCHES),
    ("cpu-migrations", abi::SW_CPU_MIGRATIONS),
    ("migrations", abi::SW_CPU_MIGRATIONS),
    ("minor-faults", abi::SW_PAGE_FAULTS_MIN),
    ("major-faults", abi::SW_PAGE_FAULTS_MAJ),
    ("alignment-faults", abi::SW_ALIGNMENT_FAULTS),
    ("emulation-faults", abi::SW_EMULATION_FAULTS),
    ("dummy", abi::SW_DUMMY),
    ("bpf-output", abi::SW_BPF_OUTPUT),
    ("cgroup-switches", abi::SW_CGROUP_SWITCHES),
];

/// Cache ids of `PERF_TYPE_HW_CACHE` and their accepted names.
const CACHES: &[(u64, &[&str])] = &[
    (abi::CACHE_L1D, &["L1-dcache", "l1-d", "l1d", "L1-data"]),
    (
        abi::CACHE_L1I,
        &["L1-icache", "l1-i", "l1i", "L1-instruction"],
    ),
    (abi::CACHE_LL, &["LLC", "L2"]),
    (abi::CACHE_DTLB, &["dTLB", "d-tlb", "Data-TLB"]),
    (abi::CACHE_ITLB, &["iTLB", "i-tlb", "Instruction-TLB"]),
    (abi::CACHE_BPU, &["branch", "branches", "bpu", "btb", "bpc"]),
    (abi::CACHE_NODE, &["node"]),
];
const OPS: &[(u64, &[&str])] = &[
    (abi::CACHE_OP_READ, &["load", "loads", "read"]),
    (abi::CACHE_OP_WRITE, &["store", "stores", "write"]),
    (
        abi::CACHE_OP_PREFETCH,
        &[
            "prefetch",
            "prefetches",
            "speculative-read",
            "speculative-load",
        ],
    ),
];
const RESULTS: &[(u64, &[&str])] = &[
    (
        abi::CACHE_RESULT_ACCESS,
        &["refs", "Reference", "ops", "access"],
    ),
    (abi::CACHE_RESULT_MISS, &["misses", "miss"]),
];

/// Which ops each cache supports as a *name* (perf's
/// `evsel__hw_cache_stat`). Whether a CPU's driver counts it is another
/// matter, which only the kernel (or the simulator's transcription of its
/// tables) knows.
pub fn cache_op_valid(cache: u64, op: u64) -> bool {
    use abi::*;
    match cache {
        CACHE_L1D | CACHE_LL | CACHE_DTLB | CACHE_NODE => op < CACHE_OP_MAX,
        CACHE_L1I => op == CACHE_OP_READ || op == CACHE_OP_PREFETCH,
        CACHE_ITLB | CACHE_BPU => op == CACHE_OP_READ,
        _ => false,
    }
}

/// The canonical generic cache event names, e.g. `L1-dcache-load-misses`.
pub fn cache_event_names() -> Vec<String> {
    let mut out = Vec::new();
    for &(c, cn) in CACHES {
        for &(o, _) in OPS {
            if !cache_op_valid(c, o) {
                continue;
            }
            let (plural, single) = match o {
                0 => ("loads", "load"),
                1 => ("stores", "store"),
                _ => ("prefetches", "prefetch"),
            };
            out.push(format!("{}-{plural}", cn[0]));
            out.push(format!("{}-{single}-misses", cn[0]));
        }
    }
    out
}

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

/// perf's event modifiers that choose what is counted, as a set (their
/// order means nothing to perf, nor here). perf's rules, which
/// [`Modifiers::exclude`] follows (`tools/perf/util/parse-events.c`, and
/// `perf stat -vv` shows them): the first of `u`, `k`, `h` excludes every
/// privilege level, and each of them then includes its own; the first of
/// `G`, `H` excludes both sides, and each includes its own; `u` without
/// `G` or `H` also excludes the guest (perf on a host counts the host's
/// user space, not a guest's). So `u` is `exclude_kernel, exclude_hv,
/// exclude_guest`, `k` is `exclude_user, exclude_hv`, `uk` is
/// `exclude_hv, exclude_guest`, `G` is `exclude_host`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Modifiers {
    /// `u`: user-space counting.
    pub user: bool,
    /// `k`: kernel counting.
    pub kernel: bool,
    /// `h`: hypervisor counting.
    pub hv: bool,
    /// `G`: guest counting (in KVM guests).
    pub guest: bool,
    /// `H`: host counting (not in KVM guests).
    pub host: bool,
}

/// The supported modifiers, for messages.
pub const SUPPORTED_MODIFIERS: &str =
    "`u` (user), `k` (kernel), `h` (hypervisor), `G` (guest), `H` (host), and combinations such as `uk`";

/// perf's other modifiers: what each means, for a refusal that says so.
const OTHER_MODIFIERS: &[(char, &str)] = &[
    ('p', "precise skid level"),
    ('P', "maximum precise level"),
    ('I', "non-idle counting"),
    ('S', "read the group on samples"),
    ('D', "pinned to the PMU"),
    ('W', "weak group"),
    ('e', "exclusive use of the PMU"),
    ('b', "BPF aggregation"),
    ('R', "retire latency"),
];

impl Modifiers {
    /// None: count every privilege level, host and guest.
    pub fn is_empty(self) -> bool {
        self == Modifiers::default()
    }

    /// The `perf_event_attr` exclude bits perf sets for these modifiers.
    pub fn exclude(self) -> abi::Exclude {
        let levels = self.user || self.kernel || self.hv;
        let sides = self.guest || self.host;
        abi::Exclude {
            user: levels && !self.user,
            kernel: levels && !self.kernel,
            hv: levels && !self.hv,
            host: sides && !self.host,
            guest: if sides { !self.guest } else { self.user },
        }
    }

    /// Parses the modifiers `text` of the event spec `spec` (for
    /// messages); `column` is the 1-based column of `text`'s first
    /// character in the spec as written.
    pub fn parse(spec: &str, text: &str, column: usize) -> Result<Modifiers, SyntaxError> {
        let mut m = Modifiers::default();
        for (i, c) in text.char_indices() {
            match c {
                'u' => m.user = true,
                'k' => m.kernel = true,
                'h' => m.hv = true,
                'G' => m.guest = true,
                'H' => m.host = true,
                _ => {
                    let col = column + text[..i].chars().count();
                    let what = match OTHER_MODIFIERS.iter().find(|(o, _)| *o == c) {
                        Some((_, what)) => format!("perf's `{c}` ({what}) is not supported"),
                        None => format!("`{c}` is not an event modifier"),
                    };
                    return Err(SyntaxError(format!(
                        "`{spec}`, column {col}: {what}; the supported modifiers are {SUPPORTED_MODIFIERS}"
                    )));
                }
            }
        }
        Ok(m)
    }
}

impl fmt::Display for Modifiers {
    /// perf's letters, in the order `ukhGH` (empty for none).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (on, c) in [
            (self.user, 'u'),
            (self.kernel, 'k'),
            (self.hv, 'h'),
            (self.guest, 'G'),
            (self.host, 'H'),
        ] {
            if on {
                write!(f, "{c}")?;
            }
        }
        Ok(())
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

fn lookup(table: &[(&str, u64)], s: &str) -> Option<u64> {
    table
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(s))
        .map(|&(_, id)| id)
}

fn parse_cache(s: &str) -> Option<u64> {
    let find = |tab: &[(u64, &[&str])], x: &str| -> Option<u64> {
        tab.iter()
            .find(|(_, names)| names.iter().any(|n| n.eq_ignore_ascii_case(x)))
            .map(|&(id, _)| id)
    };
    // Cache names themselves contain '-', so try every split point.
    for (i, _) in s.match_indices('-') {
        let (cache, rest) = (&s[..i], &s[i + 1..]);
        let Some(c) = find(CACHES, cache) else {
            continue;
        };
        let (op, result) = match find(OPS, rest) {
            Some(op) => (op, 0),
            None => {
                let Some((o, r)) = rest.rsplit_once('-') else {
                    continue;
                };
                match (find(OPS, o), find(RESULTS, r)) {
                    (Some(o), Some(r)) => (o, r),
                    _ => continue,
                }
            }
        };
        if cache_op_valid(c, op) {
            return Some(c | (op << 8) | (result << 16));
        }
    }
    None
}

/// Whether `s` is a generic (hardware, cache, software) or raw event: what
/// `s:modifiers` would modify, as opposed to a tracepoint's subsystem.
fn generic_or_raw(s: &str) -> bool {
    let raw = s
        .strip_prefix('r')
        .is_some_and(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit()));
    raw || lookup(HARDWARE, s).is_some()
        || lookup(SOFTWARE, s).is_some()
        || parse_cache(s).is_some()
}

/// Every generic (hardware, cache, software) name, for suggestions.
pub fn generic_names() -> Vec<String> {
    let mut v: Vec<String> = HARDWARE.iter().map(|(n, _)| n.to_string()).collect();
    v.extend(cache_event_names());
    v.extend(SOFTWARE.iter().map(|(n, _)| n.to_string()));
    v
}

/// Parses one event spec, with its modifiers.
pub fn parse(spec: &str) -> Result<Event, SyntaxError> {
    let lead = spec.len() - spec.trim_start().len();
    let s = spec.trim();
    if s.is_empty() {
        return Err(SyntaxError("empty event spec".into()));
    }
    // 1-based column, in `spec` as written (and quoted in messages), of
    // byte `at` of `s`.
    let column = |at: usize| lead + s[..at].chars().count() + 1;
    let shown = spec.trim_end();
    let (body, mods_at) = if let (Some(first), Some(last)) = (s.find('/'), s.rfind('/')) {
        if first == last {
            return Err(SyntaxError(format!(
                "`{s}`: a PMU event is written `pmu/terms/`, with a closing `/` (and modifiers after it: `pmu/terms/u`)"
            )));
        }
        (&s[..=last], (last + 1 < s.len()).then_some(last + 1))
    } else {
        let colons: Vec<usize> = s.match_indices(':').map(|(i, _)| i).collect();
        match colons.as_slice() {
            [] => (s, None),
            [c] if generic_or_raw(&s[..*c]) => {
                if *c + 1 == s.len() {
                    return Err(SyntaxError(format!(
                        "`{shown}`, column {}: no modifier after `:`; the supported modifiers are {SUPPORTED_MODIFIERS}",
                        column(*c)
                    )));
                }
                (&s[..*c], Some(*c + 1))
            }
            [_] => (s, None),
            [a, c] if !generic_or_raw(&s[..*a]) => {
                if *c + 1 == s.len() {
                    return Err(SyntaxError(format!(
                        "`{shown}`, column {}: no modifier after `:`; the supported modifiers are {SUPPORTED_MODIFIERS}",
                        column(*c)
                    )));
                }
                (&s[..*c], Some(*c + 1))
            }
            [.., c] => {
                return Err(SyntaxError(format!(
                    "`{shown}`, column {}: one `:` too many (an event is written `event:mods` or, a tracepoint, `subsys:name:mods`)",
                    column(*c)
                )))
            }
        }
    };
    let modifiers = match mods_at {
        Some(at) => Modifiers::parse(shown, &s[at..], column(at))?,
        None => Modifiers::default(),
    };
    Ok(Event {
        spec: parse_event(body)?,
        modifiers,
    })
}

/// Parses an event spec without modifiers.
fn parse_event(s: &str) -> Result<EventSpec, SyntaxError> {
    if let Some(slash) = s.find('/') {
        let pmu = &s[..slash];
        let rest = &s[slash + 1..];
        let Some(inner) = rest.strip_suffix('/') else {
            return Err(SyntaxError(format!(
                "`{s}`: a PMU event is written `pmu/terms/`, with a closing `/`"
            )));
        };
        if pmu.is_empty()
            || !pmu
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '*' || c == '-')
        {
            return Err(SyntaxError(format!("`{pmu}` is not a PMU name")));
        }
        if inner.contains('/') {
            return Err(SyntaxError(format!("`{s}` has more than two `/`")));
        }
        let terms = parse_terms(inner).map_err(|e| SyntaxError(format!("`{s}`: {}", e.0)))?;
        if terms.is_empty() {
            return Err(SyntaxError(format!("`{s}` names no event or term")));
        }
        for (i, t) in terms.iter().enumerate() {
            if terms[..i].iter().any(|u| u.name == t.name) {
                return Err(SyntaxError(format!(
                    "`{s}`: term `{}` is given twice (perf refuses a duplicate term rather than letting one win): keep one",
                    t.name
                )));
            }
        }
        let bare = inner
            .split(',')
            .map(str::trim)
            .filter(|t| !t.contains('='))
            .map(str::to_string)
            .collect();
        return Ok(EventSpec::Pmu {
            pmu: pmu.to_string(),
            terms,
            bare,
        });
    }
    if let Some((subsys, name)) = s.split_once(':') {
        let ok = |x: &str| {
            !x.is_empty()
                && x.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        if !ok(subsys) || !ok(name) {
            return Err(SyntaxError(format!(
                "`{s}`: a tracepoint is written `subsys:name` (with modifiers: `subsys:name:u`)"
            )));
        }
        return Ok(EventSpec::Tracepoint {
            subsys: subsys.to_string(),
            name: name.to_string(),
        });
    }
    if let Some(hex) = s.strip_prefix('r') {
        if !hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return parse_number(&format!("0x{hex}")).map(EventSpec::Raw);
        }
    }
    if let Some(id) = lookup(HARDWARE, s) {
        return Ok(EventSpec::Hardware {
            name: s.to_string(),
            id,
        });
    }
    if let Some(id) = lookup(SOFTWARE, s) {
        return Ok(EventSpec::Software {
            name: s.to_string(),
            id,
        });
    }
    if let Some(config) = parse_cache(s) {
        return Ok(EventSpec::HwCache {
            name: s.to_string(),
            config,
        });
    }
    let names = generic_names();
    let close = suggest(s, names.iter().map(String::as_str));
    let mut msg = format!("unknown event `{s}`");
    if !close.is_empty() {
        msg.push_str(&format!("; did you mean {}?", quote_list(&close)));
    }
    msg.push_str(" (events of a PMU are written `pmu/event/`; run `perf-exporter list` to see what this host offers)");
    Err(SyntaxError(msg))
}

/// The closest names to `s` (Jaro-Winkler, case-insensitive), best first.
pub fn suggest<'a>(s: &str, names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let lower = s.to_ascii_lowercase();
    let mut scored: Vec<(f64, &str)> = names
        .map(|n| {
            let n_l = n.to_ascii_lowercase();
            let jw = strsim::jaro_winkler(&lower, &n_l);
            // Transpositions of short names (`mrs` for `msr`) score low
            // on Jaro-Winkler; an edit distance catches them.
            let close = strsim::osa_distance(&lower, &n_l) <= (lower.len() / 3).max(1);
            (if close { jw.max(0.81) } else { jw }, n)
        })
        .filter(|(score, _)| *score > 0.8)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    scored.dedup_by(|a, b| a.1 == b.1);
    scored
        .into_iter()
        .take(3)
        .map(|(_, n)| n.to_string())
        .collect()
}

/// `` `a`, `b` or `c` ``.
pub fn quote_list(v: &[String]) -> String {
    let q: Vec<String> = v.iter().map(|x| format!("`{x}`")).collect();
    match q.len() {
        0 => String::new(),
        1 => q[0].clone(),
        n => format!("{} or {}", q[..n - 1].join(", "), q[n - 1]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generic_names_parse() {
        assert_eq!(
            parse("cycles").unwrap().spec,
            EventSpec::Hardware {
                name: "cycles".into(),
                id: 0
            }
        );
        assert!(matches!(
            parse("ref-cycles").unwrap().spec,
            EventSpec::Hardware { id: 9, .. }
        ));
        assert!(matches!(
            parse("branches").unwrap().spec,
            EventSpec::Hardware { id: 4, .. }
        ));
        assert!(matches!(
            parse("context-switches").unwrap().spec,
            EventSpec::Software { id: 3, .. }
        ));
        assert!(matches!(
            parse("major-faults").unwrap().spec,
            EventSpec::Software { id: 6, .. }
        ));
    }

    #[test]
    fn cache_names_encode() {
        let c = |s: &str| match parse(s).unwrap().spec {
            EventSpec::HwCache { config, .. } => config,
            other => panic!("{other:?}"),
        };
        assert_eq!(c("L1-dcache-load-misses"), 0x10000);
        assert_eq!(c("L1-dcache-loads"), 0);
        assert_eq!(c("LLC-load-misses"), 0x10002);
        assert_eq!(c("LLC-stores"), 0x102);
        assert_eq!(c("dTLB-load-misses"), 0x10003);
        assert_eq!(c("iTLB-load-misses"), 0x10004);
        assert_eq!(c("branch-load-misses"), 0x10005);
        assert_eq!(c("node-prefetch-misses"), 0x10206);
        assert_eq!(c("l1d-load-misses"), 0x10000);
        assert!(parse("iTLB-stores").is_err());
        assert_eq!(cache_event_names().len(), 6 + 4 + 6 + 6 + 2 + 2 + 6);
    }

    #[test]
    fn pmu_specs() {
        let EventSpec::Pmu { pmu, terms, bare } =
            parse("cpu/event=0xd1,umask=0x20,cmask=2,inv,edge/")
                .unwrap()
                .spec
        else {
            panic!()
        };
        assert_eq!(pmu, "cpu");
        assert_eq!(terms.len(), 5);
        assert_eq!(bare, vec!["inv", "edge"]);
        assert!(matches!(
            parse("uncore_imc_*/cas_count_read/").unwrap().spec,
            EventSpec::Pmu { .. }
        ));
        let EventSpec::Pmu { terms, .. } = parse("arm_cmn/type=5,nodeid=?/").unwrap().spec else {
            panic!()
        };
        assert_eq!(terms[1].value, TermValue::Required);
        assert!(parse("cpu/event=1").is_err());
        assert!(parse("cpu//").is_err());
        assert!(parse("a/b/c/").is_err());
    }

    #[test]
    fn raw_and_tracepoints() {
        assert_eq!(parse("r412e").unwrap().spec, EventSpec::Raw(0x412e));
        assert_eq!(
            parse("syscalls:sys_enter_getppid").unwrap().spec,
            EventSpec::Tracepoint {
                subsys: "syscalls".into(),
                name: "sys_enter_getppid".into()
            }
        );
        assert!(parse("sched:").is_err());
    }

    #[test]
    fn duplicate_terms_refused() {
        let e = parse("cpu/event=1,event=2/").unwrap_err().0;
        assert!(e.contains("term `event` is given twice"), "{e}");
        assert!(parse("cpu/cycles,cycles/").is_err());
        assert!(parse("cpu/event=1,umask=2/").is_ok());
    }

    fn mods(s: &str) -> (EventSpec, abi::Exclude) {
        let e = parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
        (e.spec, e.modifiers.exclude())
    }

    fn ex(user: bool, kernel: bool, hv: bool, host: bool, guest: bool) -> abi::Exclude {
        abi::Exclude {
            user,
            kernel,
            hv,
            host,
            guest,
        }
    }

    /// Each modifier alone sets what `perf stat -vv` shows perf 6.1 set.
    #[test]
    fn each_modifier_sets_perfs_exclude_bits() {
        let f = false;
        let t = true;
        assert_eq!(mods("cycles").1, abi::Exclude::default());
        assert_eq!(mods("cycles:u").1, ex(f, t, t, f, t));
        assert_eq!(mods("cycles:k").1, ex(t, f, t, f, f));
        assert_eq!(mods("cycles:h").1, ex(t, t, f, f, f));
        assert_eq!(mods("cycles:G").1, ex(f, f, f, t, f));
        assert_eq!(mods("cycles:H").1, ex(f, f, f, f, t));
        assert!(matches!(
            mods("instructions:u").0,
            EventSpec::Hardware { id: 1, .. }
        ));
    }

    #[test]
    fn combinations_and_order() {
        let f = false;
        let t = true;
        assert_eq!(mods("cycles:uk").1, ex(f, f, t, f, t));
        assert_eq!(mods("cycles:ku").1, mods("cycles:uk").1);
        assert_eq!(mods("cycles:uG").1, ex(f, t, t, t, f));
        assert_eq!(mods("cycles:Gu").1, ex(f, t, t, t, f));
        assert_eq!(mods("cycles:kH").1, ex(t, f, t, f, t));
        assert_eq!(mods("cycles:uH").1, mods("cycles:u").1);
        assert_eq!(mods("cycles:GH").1, abi::Exclude::default());
        assert_eq!(mods("cycles:ukh").1, ex(f, f, f, f, t));
        // The set prints in perf's order, and prints back to itself.
        let e = parse("cycles:Hku").unwrap();
        assert_eq!(e.to_string(), "cycles:ukH");
        assert_eq!(parse(&e.to_string()).unwrap(), e);
    }

    /// Every form takes modifiers: generic, cache, software, raw, sysfs
    /// PMU (after the closing `/`), tracepoint (a third field).
    #[test]
    fn every_form_takes_modifiers() {
        let u = mods("cycles:u").1;
        assert!(matches!(mods("LLC-load-misses:u"), (EventSpec::HwCache { .. }, x) if x == u));
        assert!(matches!(mods("page-faults:u"), (EventSpec::Software { .. }, x) if x == u));
        assert_eq!(mods("r412e:u"), (EventSpec::Raw(0x412e), u));
        let (p, x) = mods("cpu/cycles/u");
        assert!(
            matches!(p, EventSpec::Pmu { ref pmu, .. } if pmu == "cpu"),
            "{p:?}"
        );
        assert_eq!(x, u);
        let (p, x) = mods("armv8_pmuv3/inst_retired/k");
        assert!(matches!(p, EventSpec::Pmu { ref bare, .. } if bare == &["inst_retired"]));
        assert_eq!(x, mods("cycles:k").1);
        assert_eq!(
            parse("cpu/event=0x3c/uk").unwrap().to_string(),
            "cpu/event=0x3c/uk"
        );
        let (p, x) = mods("syscalls:sys_enter_getppid:u");
        assert_eq!(
            p,
            EventSpec::Tracepoint {
                subsys: "syscalls".into(),
                name: "sys_enter_getppid".into()
            }
        );
        assert_eq!(x, u);
        assert_eq!(
            parse("sched:sched_switch:u").unwrap().to_string(),
            "sched:sched_switch:u"
        );
        // A tracepoint without modifiers is not taken for `event:mods`.
        assert_eq!(mods("sched:sched_switch").1, abi::Exclude::default());
        assert!(parse("cpu/cycles/").unwrap().modifiers.is_empty());
    }

    /// A refused modifier names the spec, the modifier, its column and
    /// what is supported.
    #[test]
    fn unsupported_modifiers_name_the_column() {
        let e = parse("cycles:up").unwrap_err().0;
        assert!(e.starts_with("`cycles:up`, column 9: perf's `p`"), "{e}");
        assert!(e.contains("`u` (user), `k` (kernel)"), "{e}");
        for (s, col) in [
            ("cpu-clock:ppp", 11),
            ("instructions:S", 14),
            ("r412e:D", 7),
            ("cpu/event=0x3c/uW", 17),
            ("cpu/event=0x3c/e", 16),
            ("sched:sched_switch:I", 20),
            ("cycles:b", 8),
        ] {
            let e = parse(s).unwrap_err().0;
            assert!(
                e.contains(&format!("column {col}: perf's")) && e.contains("not supported"),
                "{s}: {e}"
            );
        }
        // Leading blanks count in the column, as written and quoted.
        let e = parse("  cycles:x ").unwrap_err().0;
        assert!(
            e.starts_with("`  cycles:x`, column 10: `x` is not an event modifier"),
            "{e}"
        );
        let e = parse("cycles:").unwrap_err().0;
        assert!(e.contains("column 7: no modifier after `:`"), "{e}");
        let e = parse("sched:sched_switch:").unwrap_err().0;
        assert!(e.contains("column 19: no modifier"), "{e}");
        let e = parse("cycles:u:k").unwrap_err().0;
        assert!(e.contains("column 9: one `:` too many"), "{e}");
        assert!(parse("sched:sched_switch:u:k").is_err());
        assert!(parse("cpu/event=1").unwrap_err().0.contains("closing `/`"));
    }

    #[test]
    fn scales() {
        assert!(check_scale(64.0).is_ok());
        assert!(check_scale(2f64.powi(-32)).is_ok());
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e308, 1e-300] {
            assert!(check_scale(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn unknown_suggests() {
        let e = parse("cycels").unwrap_err().0;
        assert!(e.contains("did you mean `cycles`"), "{e}");
        let e = parse("context-switch").unwrap_err().0;
        assert!(e.contains("`context-switches`"), "{e}");
    }
}
