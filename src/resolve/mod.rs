//! Resolution: an event spec plus the PMU table become concrete
//! `perf_event_attr` encodings (type, config words, CPUs, scale, unit), or
//! a reasoned "unavailable". No syscalls happen here; the live "does it
//! open" check is a probe passed in by the caller.
//!
//! Rules worth knowing (they are the kernel's):
//!
//! * Generic hardware and cache events go to the core PMU. On hybrid
//!   systems (`cpu_core` + `cpu_atom`) each core PMU gets its own event,
//!   with the PMU's type in bits 32-63 of `config` (the "extended type",
//!   `PERF_PMU_TYPE_SHIFT`), restricted to that PMU's `cpus`. The two may
//!   never share a group.
//! * On an Arm PMUv3 core PMU a generic event is offered only where the
//!   architectural event the kernel maps it to is in the PMU's `events/`
//!   (the CPU implements it); see `resolve/arm.rs`.
//! * A PMU with a `cpumask` (uncore: memory controllers, DF, RAPL) is
//!   opened once per listed CPU only. Opening it on every CPU makes the
//!   driver redirect each fd to the same box, so a sum would overcount.
//! * `.scale`/`.unit` are normalised to base units (`MiB` → bytes,
//!   `ns` → seconds), so IMC CAS counts carry a scale of exactly 64 bytes.

mod arm;
pub mod chain;
pub mod derived;
pub mod literals;
/// The event-spec grammar, a leaf module of its own ([`crate::spec`]);
/// re-exported under its old path.
pub use crate::spec;

use crate::pmu::host::{Tracefs, Tracepoints};
use crate::pmu::{normalize_unit, Pmu, PmuEvent, PmuTable, Scope, SyntaxError, TermValue};
use spec::{quote_list, suggest, Event, EventSpec, HARDWARE, HARDWARE_SYSFS, SOFTWARE};
use std::collections::BTreeMap;
use std::path::PathBuf;

pub use crate::sys::abi::{
    Exclude, PMU_TYPE_SHIFT, TYPE_HARDWARE, TYPE_HW_CACHE, TYPE_SOFTWARE, TYPE_TRACEPOINT,
};

/// PMU families whose older drivers expose no `cpumask` although they are
/// uncore (one counter set per device, `event->cpu` overwritten by the
/// driver). They are opened on one CPU, never on every CPU.
const UNCORE_WITHOUT_CPUMASK: &[&str] = &["arm_dmc620"];

/// Why a spec did not resolve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// The spec does not parse.
    #[error("{0}")]
    Syntax(String),
    /// Modifiers the kernel would ignore for this event when counting
    /// (`cpu-clock:u`, `sched:sched_switch:k`).
    #[error("{0}")]
    IgnoredModifiers(spec::IgnoredModifiers),
    /// No PMU matches the spec's PMU name.
    #[error("no PMU matches `{pattern}` on this host{hint}")]
    NoPmu {
        /// The name or pattern.
        pattern: String,
        /// "; did you mean ..." or the list of PMUs.
        hint: String,
    },
    /// The PMU exists but has no such event.
    #[error("{pmu} has no event `{event}`{hint}")]
    UnknownEvent {
        /// The PMU.
        pmu: String,
        /// The event.
        event: String,
        /// Suggestions.
        hint: String,
    },
    /// A generic event named through a PMU that names no events and has
    /// no format terms (`software/context-switches/`): a config mistake,
    /// the generic name alone is what to write.
    #[error("{pmu} has no sysfs events or format terms, so no event is named through it: write `{event}` instead")]
    GenericThroughPmu {
        /// The PMU.
        pmu: String,
        /// The generic event name.
        event: String,
    },
    /// A term that is neither a format nor an event of the PMU.
    #[error("{pmu} has no format term `{term}`; its terms are: {known}")]
    UnknownTerm {
        /// The PMU.
        pmu: String,
        /// The term.
        term: String,
        /// The formats it has.
        known: String,
    },
    /// An event needs a value only the user can give (`?` in sysfs).
    #[error(
        "{pmu}: term `{term}` needs a value (sysfs says `?`): write it as `{pmu}/...,{term}=N/`"
    )]
    RequiredTerm {
        /// The PMU.
        pmu: String,
        /// The term.
        term: String,
    },
    /// A value does not fit its format's bits.
    #[error("{pmu}: term `{term}`: {msg}")]
    TooWide {
        /// The PMU.
        pmu: String,
        /// The term.
        term: String,
        /// The detail.
        msg: String,
    },
    /// Hardware or cache event without any core PMU.
    #[error("no core PMU in sysfs (no `cpu`, `cpu_core`/`cpu_atom` or `armv8_pmuv3_*`): hardware events are unavailable on this host (a VM without a virtual PMU?)")]
    NoCorePmu,
    /// The core PMU hides this generic event.
    #[error("the core PMU `{pmu}` does not offer `{event}` (the kernel hides generic events this CPU cannot count)")]
    HiddenGeneric {
        /// The PMU.
        pmu: String,
        /// The sysfs event name.
        event: String,
    },
    /// Tracepoints need tracefs, which is not mounted where looked for
    /// (or `--path.tracefs` names a directory that is not one).
    #[error("tracepoint `{spec}`: {}", match given {
        Some(p) => format!("--path.tracefs {} is not a tracefs (it has no events/ directory)", p.display()),
        None => "tracefs is not mounted (mount -t tracefs nodev /sys/kernel/tracing, or give --path.tracefs)".into(),
    })]
    TracefsMissing {
        /// The tracepoint.
        spec: String,
        /// The `--path.tracefs` given, when it is not a tracefs.
        given: Option<PathBuf>,
    },
    /// tracefs exists but this process may not read it.
    #[error("tracepoint `{spec}`: tracefs at {} is not readable by this user (tracepoint ids are read from it; CAP_PERFMON does not open it)", path.display())]
    TracefsUnreadable {
        /// The tracepoint.
        spec: String,
        /// The tracefs mount.
        path: PathBuf,
    },
    /// No such tracepoint (or an unreadable id).
    #[error("tracepoint `{spec}`: {msg}")]
    Tracepoint {
        /// The tracepoint.
        spec: String,
        /// The detail.
        msg: String,
    },
    /// The PMU does not exist at all (software/tracepoint missing).
    #[error("PMU `{0}` is missing from sysfs")]
    MissingPmu(String),
}

impl From<SyntaxError> for ResolveError {
    fn from(e: SyntaxError) -> Self {
        ResolveError::Syntax(e.0)
    }
}

/// One concrete event on one PMU: what `perf_event_open` gets, and where.
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    /// The PMU that counts it (`cpu`, `cpu_core`, `uncore_imc_0`,
    /// `software`, `tracepoint`).
    pub pmu: String,
    /// `perf_event_attr.type`.
    pub type_: u32,
    /// `config`, `config1`, `config2`, `config3`.
    pub config: [u64; 4],
    /// The CPUs to open it on: one fd per CPU.
    pub cpus: Vec<u32>,
    /// Uncore scope (a cpumask): series are labelled `pmu` and `socket`
    /// instead of `cpu`.
    pub uncore: bool,
    /// Multiply counts by this to get base units.
    pub scale: f64,
    /// The base unit (`bytes`, `seconds`, `joules`, or empty).
    pub unit: String,
    /// `.snapshot`: an absolute reading (a gauge), not a running count.
    pub snapshot: bool,
    /// The exclude bits of the spec's modifiers (`cycles:u`), the same
    /// on every instance of one spec.
    pub exclude: Exclude,
}

/// Where tracepoint ids come from, and so on: the environment resolution
/// needs besides the PMU table.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// The tracefs mount (with `events/<subsys>/<name>/id`), if any.
    pub tracefs: Option<PathBuf>,
    /// A tracefs mount this process may not read (root-only, as usual,
    /// for a non-root user): named in the reason of tracepoint metrics.
    pub tracefs_denied: Option<PathBuf>,
    /// The tracepoints of `tracefs` and their ids, read by discovery:
    /// resolving a tracepoint reads no file.
    pub tracepoints: Tracepoints,
    /// A `--path.tracefs` that is not a tracefs: named in the reason.
    pub tracefs_given: Option<PathBuf>,
}

impl Context {
    /// The context of the host under these roots: where tracefs is (the
    /// usual places under `sysfs`, then `<procfs>/self/mountinfo`) and its
    /// tracepoints, by [`crate::pmu::host::find_tracefs`].
    pub fn for_host(sysfs: &std::path::Path, procfs: &std::path::Path) -> Self {
        crate::pmu::host::find_tracefs(sysfs, procfs).into()
    }
}

impl From<Tracefs> for Context {
    /// The context of a host whose tracefs was looked for by
    /// [`crate::pmu::host::find_tracefs`].
    fn from(t: Tracefs) -> Self {
        Context {
            tracefs: t.path,
            tracefs_denied: t.denied,
            tracepoints: t.tracepoints,
            tracefs_given: t.given,
        }
    }
}

/// Resolves a spec string (for callers that hold text, such as `list`;
/// a configuration holds its specs parsed and uses [`resolve`]).
pub fn resolve_str(
    s: &str,
    table: &PmuTable,
    ctx: &Context,
) -> Result<Vec<Instance>, ResolveError> {
    let spec = spec::parse(s)?;
    resolve(&spec, table, ctx)
}

/// Resolves a parsed spec to its instances, to be counted. Modifiers the
/// kernel would ignore when counting are refused
/// ([`Event::check_modifiers`]); the rest become each instance's
/// [`Instance::exclude`], for the PMU to accept or refuse at open.
pub fn resolve(
    spec: &Event,
    table: &PmuTable,
    ctx: &Context,
) -> Result<Vec<Instance>, ResolveError> {
    resolve_as(spec, table, ctx, false)
}

/// Resolves a spec string to be sampled (`top -e`, `sampling.event`):
/// like [`resolve_str`], but the modifiers that filter only samples
/// (`cpu-clock:u`) are taken.
pub fn resolve_sampled(
    s: &str,
    table: &PmuTable,
    ctx: &Context,
) -> Result<Vec<Instance>, ResolveError> {
    let spec = spec::parse(s)?;
    resolve_as(&spec, table, ctx, true)
}

fn resolve_as(
    spec: &Event,
    table: &PmuTable,
    ctx: &Context,
    sampling: bool,
) -> Result<Vec<Instance>, ResolveError> {
    spec.check_modifiers(sampling)
        .map_err(ResolveError::IgnoredModifiers)?;
    let exclude = spec.modifiers.exclude();
    let mut v = resolve_event(&spec.spec, table, ctx)?;
    for i in &mut v {
        i.exclude = exclude;
    }
    Ok(v)
}

/// Resolves an event without its modifiers.
fn resolve_event(
    spec: &EventSpec,
    table: &PmuTable,
    ctx: &Context,
) -> Result<Vec<Instance>, ResolveError> {
    match spec {
        EventSpec::Hardware { id, .. } => generic(table, TYPE_HARDWARE, *id, Some(*id)),
        EventSpec::HwCache { config, .. } => generic(table, TYPE_HW_CACHE, *config, None),
        EventSpec::Software { id, .. } => {
            let type_ = table.get("software").map_or(TYPE_SOFTWARE, |p| p.type_);
            // cpu-clock and task-clock count nanoseconds.
            let (scale, unit) = if *id <= 1 {
                (1e-9, "seconds")
            } else {
                (1.0, "")
            };
            Ok(vec![Instance {
                pmu: "software".into(),
                type_,
                config: [*id, 0, 0, 0],
                cpus: table.topology.online.clone(),
                uncore: false,
                scale,
                unit: unit.into(),
                snapshot: false,
                exclude: Exclude::default(),
            }])
        }
        EventSpec::Raw(v) => {
            let cores = table.core_pmus();
            if cores.is_empty() {
                return Err(ResolveError::NoCorePmu);
            }
            Ok(cores
                .into_iter()
                .map(|p| per_cpu_instance(table, p, [*v, 0, 0, 0]))
                .collect())
        }
        EventSpec::Tracepoint { subsys, name } => {
            let spec_s = format!("{subsys}:{name}");
            let Some(tp) = table.get("tracepoint") else {
                return Err(ResolveError::MissingPmu("tracepoint".into()));
            };
            if ctx.tracefs.is_none() {
                return Err(match &ctx.tracefs_denied {
                    Some(p) => ResolveError::TracefsUnreadable {
                        spec: spec_s,
                        path: p.clone(),
                    },
                    None => ResolveError::TracefsMissing {
                        spec: spec_s,
                        given: ctx.tracefs_given.clone(),
                    },
                });
            }
            let id = ctx
                .tracepoints
                .id(subsys, name)
                .map_err(|msg| ResolveError::Tracepoint { spec: spec_s, msg })?;
            Ok(vec![Instance {
                pmu: "tracepoint".into(),
                type_: tp.type_,
                config: [id, 0, 0, 0],
                cpus: table.topology.online.clone(),
                uncore: false,
                scale: 1.0,
                unit: String::new(),
                snapshot: false,
                exclude: Exclude::default(),
            }])
        }
        EventSpec::Pmu { pmu, terms, bare } => resolve_pmu(table, pmu, terms, bare),
    }
}

fn per_cpu_instance(table: &PmuTable, p: &Pmu, config: [u64; 4]) -> Instance {
    Instance {
        pmu: p.name.clone(),
        type_: p.type_,
        config,
        cpus: table.cpus_of(p),
        uncore: false,
        scale: 1.0,
        unit: String::new(),
        snapshot: false,
        exclude: Exclude::default(),
    }
}

/// Generic hardware/cache events on every core PMU.
fn generic(
    table: &PmuTable,
    type_: u32,
    config: u64,
    hw_id: Option<u64>,
) -> Result<Vec<Instance>, ResolveError> {
    let cores = table.core_pmus();
    if cores.is_empty() {
        return Err(ResolveError::NoCorePmu);
    }
    let hybrid = cores.len() > 1;
    let mut out = Vec::new();
    for p in cores {
        if let Some(id) = hw_id {
            // A core PMU that publishes generic names (x86) hides the ones
            // its CPU cannot count; the kernel then refuses the open.
            let publishes = HARDWARE_SYSFS.iter().any(|n| p.events.contains_key(*n));
            let name = HARDWARE_SYSFS[id as usize];
            if publishes && !p.events.contains_key(name) {
                if hybrid {
                    continue;
                }
                return Err(ResolveError::HiddenGeneric {
                    pmu: p.name.clone(),
                    event: name.into(),
                });
            }
        }
        if arm::is_pmuv3(p) {
            let generic = match hw_id {
                Some(id) => HARDWARE_SYSFS[id as usize].to_string(),
                None => format!("cache event {config:#x}"),
            };
            if let Err(event) = arm::offers(p, type_, config, &generic) {
                if hybrid {
                    continue;
                }
                return Err(ResolveError::HiddenGeneric {
                    pmu: p.name.clone(),
                    event,
                });
            }
        }
        let cfg = if hybrid {
            config | (u64::from(p.type_) << PMU_TYPE_SHIFT)
        } else {
            config
        };
        let mut inst = per_cpu_instance(table, p, [cfg, 0, 0, 0]);
        inst.type_ = type_;
        out.push(inst);
    }
    if out.is_empty() {
        return Err(ResolveError::HiddenGeneric {
            pmu: "core".into(),
            event: HARDWARE_SYSFS[hw_id.unwrap_or(0) as usize].into(),
        });
    }
    Ok(out)
}

fn pmu_families(table: &PmuTable) -> Vec<String> {
    let mut v: Vec<String> = table
        .pmus
        .iter()
        .map(|p| {
            let n = p.name.as_str();
            match n.rsplit_once('_') {
                Some((head, tail))
                    if !tail.is_empty() && tail.bytes().all(|b| b.is_ascii_hexdigit()) =>
                {
                    format!("{head}_*")
                }
                _ => n.to_string(),
            }
        })
        .collect();
    v.sort();
    v.dedup();
    v
}

fn resolve_pmu(
    table: &PmuTable,
    pattern: &str,
    terms: &[crate::pmu::Term],
    bare: &[String],
) -> Result<Vec<Instance>, ResolveError> {
    let matched: Vec<&Pmu> = if pattern == "core" && table.get("core").is_none() {
        table.core_pmus()
    } else {
        table.matching(pattern)
    };
    if matched.is_empty() {
        if pattern == "core" {
            return Err(ResolveError::NoCorePmu);
        }
        let fams = pmu_families(table);
        let close = suggest(pattern, fams.iter().map(String::as_str));
        let hint = if close.is_empty() {
            format!("; PMUs here: {}", fams.join(", "))
        } else {
            format!("; did you mean {}?", quote_list(&close))
        };
        return Err(ResolveError::NoPmu {
            pattern: pattern.into(),
            hint,
        });
    }
    let exact = matched.len() == 1 && matched[0].name == pattern;
    let mut out = Vec::new();
    let mut first_err = None;
    for p in &matched {
        match encode_on(table, p, terms, bare) {
            Ok(i) => out.push(i),
            // Expanding a pattern over several PMUs skips those that lack
            // the event (hybrid `core/slots/`); any other error is fatal.
            Err(e @ ResolveError::UnknownEvent { .. }) if !exact => {
                first_err.get_or_insert(e);
            }
            Err(e) => return Err(e),
        }
    }
    match (out.is_empty(), first_err) {
        (true, Some(e)) => Err(e),
        _ => Ok(out),
    }
}

/// Ordered term values: alias terms first, then the user's, which
/// override. `config`/`config1`.. are direct word assignments.
#[derive(Default)]
struct Terms<'p> {
    values: Vec<(String, TermValue)>,
    /// The named event of the spec (`cpu/mem-loads/`), whose terms come
    /// first.
    alias: Option<&'p PmuEvent>,
    /// A generic hardware event on a core PMU without sysfs events
    /// (`cpu/cycles/` on a PMU that names none).
    legacy_hw: Option<u64>,
}

impl Terms<'_> {
    fn set(&mut self, n: &str, v: TermValue) {
        if let Some(slot) = self.values.iter_mut().find(|(k, _)| k == n) {
            slot.1 = v;
        } else {
            self.values.push((n.to_string(), v));
        }
    }
}

/// Encodes `terms` on one PMU.
fn encode_on(
    table: &PmuTable,
    p: &Pmu,
    terms: &[crate::pmu::Term],
    bare: &[String],
) -> Result<Instance, ResolveError> {
    let t = collect_terms(p, terms, bare)?;
    if let Some(id) = t.legacy_hw {
        return legacy_hardware(table, p, id, &t.values);
    }
    let words = encode_words(p, &t.values)?;
    let alias = t.alias;
    let (scale, unit) = match alias {
        Some(a) => normalize_unit(a.scale.unwrap_or(1.0), a.unit.as_deref().unwrap_or("")),
        None => (1.0, String::new()),
    };
    let (cpus, uncore) = placement(table, p, alias);
    Ok(Instance {
        pmu: p.name.clone(),
        type_: p.type_,
        config: words,
        cpus,
        uncore,
        scale,
        unit,
        snapshot: alias.is_some_and(|a| a.snapshot),
        exclude: Exclude::default(),
    })
}

/// The spec's terms on `p`, a bare name standing for the PMU's event of
/// that name (its terms) or a generic hardware event.
fn collect_terms<'p>(
    p: &'p Pmu,
    terms: &[crate::pmu::Term],
    bare: &[String],
) -> Result<Terms<'p>, ResolveError> {
    let mut out = Terms::default();
    for (i, t) in terms.iter().enumerate() {
        let is_bare = bare.iter().any(|b| b == &t.name) && t.value == TermValue::Num(1);
        if is_bare && !p.formats.contains_key(&t.name) && !t.name.starts_with("config") {
            let ev = p.events.get(&t.name).or_else(|| {
                // `cpu/cycles/`: a generic name on a core PMU.
                HARDWARE
                    .iter()
                    .find(|(n, _)| *n == t.name)
                    .and_then(|&(_, id)| p.events.get(HARDWARE_SYSFS[id as usize]))
            });
            match ev {
                Some(ev) if out.alias.is_none() => {
                    for at in &ev.terms {
                        out.set(&at.name, at.value);
                    }
                    out.alias = Some(ev);
                    continue;
                }
                Some(_) => {
                    return Err(ResolveError::Syntax(format!(
                        "{}: only one named event per spec (found a second one, `{}`)",
                        p.name, t.name
                    )))
                }
                None if i == 0
                    && p.is_core()
                    && !HARDWARE_SYSFS.iter().any(|n| p.events.contains_key(*n))
                    && HARDWARE.iter().any(|(n, _)| *n == t.name) =>
                {
                    out.legacy_hw = HARDWARE
                        .iter()
                        .find(|(n, _)| *n == t.name)
                        .map(|&(_, id)| id);
                    continue;
                }
                None if p.events.is_empty()
                    && p.formats.is_empty()
                    && SOFTWARE.iter().chain(HARDWARE).any(|(n, _)| *n == t.name) =>
                {
                    return Err(ResolveError::GenericThroughPmu {
                        pmu: p.name.clone(),
                        event: t.name.clone(),
                    });
                }
                None => return Err(unknown_event(p, &t.name)),
            }
        }
        out.set(&t.name, t.value);
    }
    Ok(out)
}

/// `event` is not one of `p`'s: the closest names, and what `p` offers.
fn unknown_event(p: &Pmu, event: &str) -> ResolveError {
    let close = suggest(event, p.events.keys().map(String::as_str));
    let mut hint = String::new();
    if !close.is_empty() {
        hint.push_str(&format!("; did you mean {}?", quote_list(&close)));
    }
    if p.events.is_empty() && p.formats.is_empty() {
        hint.push_str(&format!(
            " ({} names no events and has no format terms in sysfs)",
            p.name
        ));
    } else if p.events.is_empty() {
        hint.push_str(&format!(
            " ({} names no events; write its format terms: {})",
            p.name,
            p.formats.keys().cloned().collect::<Vec<_>>().join(", ")
        ));
    } else {
        let names: Vec<&str> = p.events.keys().map(String::as_str).collect();
        let more = if names.len() > 20 { ", ..." } else { "" };
        hint.push_str(&format!(
            " ({} offers: {}{more})",
            p.name,
            names[..names.len().min(20)].join(", ")
        ));
    }
    ResolveError::UnknownEvent {
        pmu: p.name.clone(),
        event: event.to_string(),
        hint,
    }
}

/// A generic hardware event (`id`) opened through the legacy hardware
/// type, on `p` of a hybrid system.
fn legacy_hardware(
    table: &PmuTable,
    p: &Pmu,
    id: u64,
    values: &[(String, TermValue)],
) -> Result<Instance, ResolveError> {
    if !values.is_empty() {
        return Err(ResolveError::Syntax(format!(
            "{}: a generic hardware event takes no terms",
            p.name
        )));
    }
    let mut inst = per_cpu_instance(table, p, [id, 0, 0, 0]);
    inst.type_ = TYPE_HARDWARE;
    if table.core_pmus().len() > 1 {
        inst.config[0] |= u64::from(p.type_) << PMU_TYPE_SHIFT;
    }
    Ok(inst)
}

/// The `config` words of the term values, through `p`'s formats.
fn encode_words(p: &Pmu, values: &[(String, TermValue)]) -> Result<[u64; 4], ResolveError> {
    let mut words = [0u64; 4];
    for (name, v) in values {
        let TermValue::Num(v) = *v else {
            return Err(ResolveError::RequiredTerm {
                pmu: p.name.clone(),
                term: name.clone(),
            });
        };
        let direct = match name.as_str() {
            "config" => Some(0),
            "config1" => Some(1),
            "config2" => Some(2),
            "config3" => Some(3),
            _ => None,
        };
        if let Some(w) = direct {
            words[w] |= v;
            continue;
        }
        let Some(f) = p.formats.get(name) else {
            return Err(ResolveError::UnknownTerm {
                pmu: p.name.clone(),
                term: name.clone(),
                known: p.formats.keys().cloned().collect::<Vec<_>>().join(", "),
            });
        };
        words[f.word.index()] |= f.encode(v).map_err(|e| ResolveError::TooWide {
            pmu: p.name.clone(),
            term: name.clone(),
            msg: e.0,
        })?;
    }
    Ok(words)
}

/// The CPUs to open on, and whether the PMU is an uncore one (counted
/// once per instance, not per CPU).
fn placement(table: &PmuTable, p: &Pmu, alias: Option<&PmuEvent>) -> (Vec<u32>, bool) {
    let uncore_family = UNCORE_WITHOUT_CPUMASK
        .iter()
        .any(|f| crate::pmu::pmu_name_matches(f, &p.name));
    match &p.scope {
        Scope::Cpumask(_) => (table.cpus_of(p), true),
        Scope::AllCpus if uncore_family => (
            table.topology.online.iter().copied().take(1).collect(),
            true,
        ),
        _ => {
            let mut cpus = table.cpus_of(p);
            if alias.is_some_and(|a| a.per_pkg) {
                let mut seen = BTreeMap::new();
                cpus.retain(|c| seen.insert(table.topology.socket_of(*c), ()).is_none());
            }
            (cpus, false)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pmu::fixtures::table as fixture;

    #[test]
    fn imc_on_skx() {
        let t = fixture("intel-skx");
        let v = resolve_str("uncore_imc_*/cas_count_read/", &t, &Context::default()).unwrap();
        assert_eq!(v.len(), 6);
        assert_eq!(v[0].config[0], 0x304);
        assert_eq!(v[0].cpus, vec![0, 2]);
        assert_eq!(v[0].scale, 64.0);
        assert_eq!(v[0].unit, "bytes");
        assert!(v[0].uncore);
    }

    fn excl(user: bool, kernel: bool, hv: bool, host: bool, guest: bool) -> Exclude {
        Exclude {
            user,
            kernel,
            hv,
            host,
            guest,
        }
    }

    /// Every form carries its modifiers to each of its instances, with
    /// the encoding of the same event without them.
    #[test]
    fn modifiers_become_each_instances_exclude_bits() {
        let (f, t) = (false, true);
        let user = excl(f, t, t, f, t);
        let kernel = excl(t, f, t, f, f);
        let ctx = Context::default();
        let skx = fixture("intel-skx");
        for (spec, plain, want) in [
            ("cycles:u", "cycles", user),
            ("instructions:k", "instructions", kernel),
            ("cpu/cycles/u", "cpu/cycles/", user),
            ("cpu/event=0xc0/uk", "cpu/event=0xc0/", excl(f, f, t, f, t)),
            ("r3c:G", "r3c", excl(f, f, f, t, f)),
            ("LLC-load-misses:H", "LLC-load-misses", excl(f, f, f, f, t)),
            ("page-faults:u", "page-faults", user),
            (
                "uncore_imc_*/cas_count_read/k",
                "uncore_imc_*/cas_count_read/",
                kernel,
            ),
        ] {
            let v = resolve_str(spec, &skx, &ctx).unwrap_or_else(|e| panic!("{spec}: {e}"));
            let p = resolve_str(plain, &skx, &ctx).unwrap();
            assert_eq!(v.len(), p.len(), "{spec}");
            for (a, b) in v.iter().zip(&p) {
                assert_eq!(a.exclude, want, "{spec}");
                assert_eq!(b.exclude, Exclude::default(), "{plain}");
                assert_eq!((a.type_, a.config, &a.cpus), (b.type_, b.config, &b.cpus));
            }
        }
        let arm = fixture("arm-neoverse-n1");
        for spec in [
            "armv8_pmuv3_0/inst_retired/k",
            "armv8_pmuv3_*/inst_retired/k",
            "instructions:k",
        ] {
            let v = resolve_str(spec, &arm, &ctx).unwrap_or_else(|e| panic!("{spec}: {e}"));
            assert!(v.iter().all(|i| i.exclude == kernel), "{spec}: {v:?}");
        }
    }

    /// What the kernel would ignore when counting is refused with the
    /// reason; sampling takes `cpu-clock:u` (the bits filter samples).
    #[test]
    fn ignored_modifiers_are_refused_for_counting_only() {
        let t = fixture("intel-skx");
        let ctx = Context::default();
        let e = resolve_str("cpu-clock:u", &t, &ctx).unwrap_err();
        assert!(
            matches!(
                &e,
                ResolveError::IgnoredModifiers(spec::IgnoredModifiers::Clock { name, .. })
                    if name == "cpu-clock"
            ),
            "{e}"
        );
        let v = resolve_sampled("cpu-clock:u", &t, &ctx).unwrap();
        assert_eq!(v[0].exclude, excl(false, true, true, false, true));
        use spec::IgnoredModifiers as I;
        let kind = |s: &str| match resolve_str(s, &t, &ctx) {
            Err(ResolveError::IgnoredModifiers(i)) => i,
            other => panic!("{s}: {other:?}"),
        };
        assert!(matches!(kind("task-clock:k"), I::Clock { .. }));
        assert!(matches!(kind("context-switches:H"), I::Software { .. }));
        // The tracepoint's check comes before tracefs is looked for.
        for s in ["sched:sched_switch:k", "sched:sched_switch:uk"] {
            let i = kind(s);
            assert!(
                matches!(&i, I::Tracepoint { name, .. } if name == "sched_switch"),
                "{i:?}"
            );
            assert!(i.to_string().contains("only `u`"), "{i}");
        }
    }
}
