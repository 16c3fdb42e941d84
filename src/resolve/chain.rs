//! Fallback chains: a whole configuration resolved against one host.
//!
//! Each metric's alternatives are tried in order; the first that resolves
//! (and, when a probe is given, opens on the host) wins. The result types
//! here are separate from the config types: they describe what will be
//! counted, where, and why the other alternatives were not taken.

use super::{resolve, Context, Instance, ResolveError};
use crate::config::{Alternative, Config, CpuRequirement, FormatRequirement};
use crate::pmu::cpuid::CpuIdentity;
use crate::pmu::{normalize_unit, PmuTable};
use crate::problem::{Class, Problem};

/// How a metric resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// The first alternative won.
    Resolved,
    /// A later alternative won.
    Fallback,
    /// Nothing works on this host.
    Unavailable,
}

impl Status {
    /// `resolved`, `fallback` or `unavailable`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Resolved => "resolved",
            Status::Fallback => "fallback",
            Status::Unavailable => "unavailable",
        }
    }
}

/// An alternative that was tried, and why it was or was not taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tried {
    /// The alternative as written (`a + b` for a sum).
    pub event: String,
    /// Why it failed; `None` for the alternative selected.
    pub problem: Option<Problem>,
}

/// One counted instance of a metric: which spec of the winning
/// alternative (a sum has several) and its encoding.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricInstance {
    /// The spec.
    pub spec: String,
    /// The encoding and CPUs.
    pub inst: Instance,
    /// Where it goes in a group ([`PmuTable::topdown_rank`]): `slots`
    /// first, then the perf-metrics `topdown-*` events, then the rest.
    pub topdown_rank: u8,
}

/// A metric as resolved on this host.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedMetric {
    /// The set it belongs to.
    pub set: String,
    /// The metric name.
    pub metric: String,
    /// HELP text.
    pub help: String,
    /// The outcome.
    pub status: Status,
    /// The winning alternative, if any.
    pub event: Option<String>,
    /// What will be opened.
    pub instances: Vec<MetricInstance>,
    /// Every alternative tried, in order.
    pub tried: Vec<Tried>,
    /// A `.snapshot` reading: exported as a gauge.
    pub gauge: bool,
    /// The base unit.
    pub unit: String,
    /// Instances of the winning alternative the probe refused (the rest
    /// are counted), with why.
    pub partial: Vec<Problem>,
}

impl ResolvedMetric {
    /// The problems of every alternative that failed, in order.
    pub fn problems(&self) -> impl Iterator<Item = &Problem> {
        self.tried.iter().filter_map(|t| t.problem.as_ref())
    }

    /// The problem that explains an unavailable metric best: the first
    /// failure (something to fix), then a missing hardware PMU, before any
    /// other expected absence. A chain that names a hybrid part's PMU
    /// (`cpu_core/...`) before the generic `core/...` is absent from a VM
    /// without a PMU because it has none, not because the events are
    /// another platform's: "no PMU matches `cpu_core`" would hide it as
    /// another platform's metric (the live page leaves those out).
    pub fn problem(&self) -> Option<&Problem> {
        self.problems()
            .find(|p| p.class() == Class::Failed)
            .or_else(|| {
                self.problems()
                    .find(|p| matches!(p, Problem::NeedsHardwarePmu { .. }))
            })
            .or_else(|| self.problems().next())
    }

    /// For an unavailable metric: not on this platform (every
    /// alternative is absent here) or failed (one should work but did
    /// not). `None` when it is counted.
    pub fn class(&self) -> Option<Class> {
        (self.status == Status::Unavailable)
            .then(|| self.problem().map_or(Class::Failed, Problem::class))
    }

    /// Why it is unavailable: the reasons of every alternative.
    /// Alternatives that failed for the same reason are named together.
    pub fn reason(&self) -> String {
        let mut groups: Vec<(Vec<&str>, String)> = Vec::new();
        for t in &self.tried {
            let Some(p) = &t.problem else { continue };
            let r = p.to_string();
            match groups.iter_mut().find(|(_, g)| *g == r) {
                Some(g) => g.0.push(&t.event),
                None => groups.push((vec![&t.event], r)),
            }
        }
        groups
            .into_iter()
            .map(|(evs, r)| format!("{}: {r}", evs.join(", ")))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// A set as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedSet {
    /// The name.
    pub name: String,
    /// How far its series are summed before export.
    pub per: crate::config::Per,
}

/// The whole configuration, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolution {
    /// The sets.
    pub sets: Vec<ResolvedSet>,
    /// Every metric, in config order.
    pub metrics: Vec<ResolvedMetric>,
}

impl Resolution {
    /// Whether nothing at all would be counted: no metric is configured,
    /// or every metric is unavailable. `serve` refuses to start on such a
    /// resolution and `check` fails on it.
    pub fn counts_nothing(&self) -> bool {
        self.metrics.iter().all(|m| m.status == Status::Unavailable)
    }

    /// Every problem, of alternatives tried and of instances refused,
    /// for a diagnosis that refines them in place.
    pub fn problems_mut(&mut self) -> impl Iterator<Item = &mut Problem> {
        self.metrics.iter_mut().flat_map(|m| {
            m.tried
                .iter_mut()
                .filter_map(|t| t.problem.as_mut())
                .chain(m.partial.iter_mut())
        })
    }
}

/// How the selected alternative is shown where a reason would be.
pub const SELECTED: &str = "selected";

/// Checks that an instance really opens on this host: `Err(problem)` if
/// not. The engine passes the live kernel or the simulated PMU.
pub type Probe<'a> = &'a dyn Fn(&str, &Instance) -> Result<(), Problem>;

/// The typed problem of a spec that did not resolve.
pub fn problem_of(e: ResolveError, event: &str) -> Problem {
    let event = event.to_string();
    match e {
        ResolveError::NoCorePmu => Problem::NeedsHardwarePmu { event },
        ResolveError::TracefsMissing { given, .. } => Problem::TracefsMissing { event, given },
        ResolveError::TracefsUnreadable { path, .. } => Problem::TracefsUnreadable { event, path },
        e @ (ResolveError::Syntax(_)
        | ResolveError::IgnoredModifiers(_)
        | ResolveError::RequiredTerm { .. }
        | ResolveError::GenericThroughPmu { .. }
        | ResolveError::TooWide { .. }) => Problem::Config {
            event,
            detail: e.to_string(),
        },
        e @ (ResolveError::NoPmu { .. }
        | ResolveError::UnknownEvent { .. }
        | ResolveError::UnknownTerm { .. }
        | ResolveError::HiddenGeneric { .. }
        | ResolveError::Tracepoint { .. }
        | ResolveError::MissingPmu(_)) => Problem::NotOnPlatform {
            event,
            detail: e.to_string(),
        },
    }
}

fn check_requires(req: &FormatRequirement, table: &PmuTable) -> Result<(), Problem> {
    let absent = |detail: String| Problem::NotOnPlatform {
        event: req.to_string(),
        detail,
    };
    let pmus = table.matching(&req.pmu);
    if pmus.is_empty() {
        return Err(absent(format!("no PMU matches `{}` on this host", req.pmu)));
    }
    for p in pmus {
        let have = p.formats.get(&req.term);
        if have != Some(&req.format) {
            return Err(absent(format!(
                "needs {}/format/{} = {}, this host has {}",
                p.name,
                req.term,
                req.format,
                have.map_or_else(|| "no such term".into(), |f| f.to_string())
            )));
        }
    }
    Ok(())
}

/// Keeps the instances whose PMU's CPU identity matches a `requires_cpu`
/// guard; none left is the first mismatch's problem, so the chain falls
/// through to the next alternative. When some are kept (one core PMU of
/// a hybrid matches), each dropped PMU's mismatch goes to `partial`.
fn cpu_guard(
    req: &CpuRequirement,
    table: &PmuTable,
    spec: &str,
    insts: &mut Vec<Instance>,
    partial: &mut Vec<Problem>,
) -> Result<(), Problem> {
    let mut skipped = Vec::new();
    insts.retain(|i| {
        let (identity, known) = match table.identity_of(&i.pmu) {
            CpuIdentity::Known(id) if req.matches(&id) => return true,
            CpuIdentity::Known(id) => (id, true),
            CpuIdentity::Unknown(why) => (why, false),
        };
        skipped.push(Problem::NoCpuEncoding {
            event: spec.to_string(),
            pmu: i.pmu.clone(),
            identity,
            known,
        });
        false
    });
    if insts.is_empty() && !skipped.is_empty() {
        return Err(skipped.swap_remove(0));
    }
    partial.extend(skipped);
    Ok(())
}

/// Before resolving a guarded alternative: when no CPU of the host has a
/// matching identity, the guard's problem, so that an encoding written for
/// another CPU is not judged by this CPU's format (an AMD `event=0x1a0`
/// does not fit Intel's 8-bit event field: that is not a config error).
///
/// A host without a core PMU (a VM without a virtual PMU) judges the guard
/// against its own identity ([`PmuTable::host_identity`], from cpuinfo):
/// another CPU's encoding is not on this platform, while this CPU's waits
/// for a hardware PMU as any core event does. An unknown identity there
/// judges nothing.
fn cpu_precheck(
    req: &CpuRequirement,
    table: &PmuTable,
    spec: &crate::spec::EventSpec,
    text: &str,
) -> Result<(), Problem> {
    if let Some(CpuIdentity::Known(id)) = &table.host_identity {
        if !req.matches(id) {
            let pmu = match spec {
                crate::spec::EventSpec::Pmu { pmu, .. } => pmu.clone(),
                _ => "cpu".into(),
            };
            return Err(Problem::NoCpuEncoding {
                event: text.to_string(),
                pmu,
                identity: id.clone(),
                known: true,
            });
        }
    }
    let spec = text;
    let mut first = None;
    for pmu in table.core_pmus() {
        let (identity, known) = match table.identity_of(&pmu.name) {
            CpuIdentity::Known(id) if req.matches(&id) => return Ok(()),
            CpuIdentity::Known(id) => (id, true),
            CpuIdentity::Unknown(why) => (why, false),
        };
        first.get_or_insert(Problem::NoCpuEncoding {
            event: spec.to_string(),
            pmu: pmu.name.clone(),
            identity,
            known,
        });
    }
    first.map_or(Ok(()), Err)
}

/// A `core/...` spec on a hybrid host counts only on the core PMUs that
/// have the event (`core/slots/`: `cpu_core`, not `cpu_atom`); each core PMU
/// it skipped goes to `partial`, so `check` and the landing page say why
/// those CPUs have no series.
fn core_pmus_without(
    parsed: &crate::spec::EventSpec,
    table: &PmuTable,
    spec: &str,
    insts: &[Instance],
    partial: &mut Vec<Problem>,
) {
    let crate::spec::EventSpec::Pmu { pmu, .. } = parsed else {
        return;
    };
    if pmu != "core" || table.get("core").is_some() || insts.is_empty() {
        return;
    }
    let counted: Vec<&str> = insts.iter().map(|i| i.pmu.as_str()).collect();
    for p in table.core_pmus() {
        if !counted.contains(&p.name.as_str()) {
            partial.push(Problem::NotOnPlatform {
                event: spec.to_string(),
                detail: format!(
                    "{} has no such event: counted on {} only",
                    p.name,
                    counted.join(", ")
                ),
            });
        }
    }
}

/// Names the spec of a sum in a problem's message.
fn in_sum(p: Problem, spec: &str, sum: bool) -> Problem {
    match p {
        Problem::NotOnPlatform { event, detail } if sum => Problem::NotOnPlatform {
            event,
            detail: format!("{spec}: {detail}"),
        },
        Problem::Config { event, detail } if sum => Problem::Config {
            event,
            detail: format!("{spec}: {detail}"),
        },
        p => p,
    }
}

fn try_alternative(
    alt: &Alternative,
    table: &PmuTable,
    ctx: &Context,
    probe: Option<Probe>,
    partial: &mut Vec<Problem>,
) -> Result<Vec<MetricInstance>, Problem> {
    if let Some(req) = alt.requires_format() {
        check_requires(req, table)?;
    }
    if let (Some(req), Some(first)) = (alt.requires_cpu(), alt.specs().first()) {
        cpu_precheck(req, table, &first.parsed.spec, &first.text)?;
    }
    let (scale, unit) = alt.overrides();
    let sum = alt.specs().len() > 1;
    let mut out = Vec::new();
    for spec in alt.specs() {
        let (parsed, spec) = (&spec.parsed, spec.text.as_str());
        let mut insts =
            resolve(parsed, table, ctx).map_err(|e| in_sum(problem_of(e, spec), spec, sum))?;
        core_pmus_without(&parsed.spec, table, spec, &insts, partial);
        if let Some(req) = alt.requires_cpu() {
            cpu_guard(req, table, spec, &mut insts, partial)?;
        }
        for i in &mut insts {
            if let Some(s) = scale {
                let (s, u) = normalize_unit(s, unit.unwrap_or(""));
                i.scale = s;
                i.unit = u;
            } else if let Some(u) = unit {
                let (s, u) = normalize_unit(i.scale, u);
                i.scale = s;
                i.unit = u;
            }
        }
        if let Some(probe) = probe {
            let mut refused = Vec::new();
            let first_pmu = insts.first().map(|i| i.pmu.clone()).unwrap_or_default();
            insts.retain(|i| match probe(spec, i) {
                Ok(()) => true,
                Err(e) => {
                    refused.push(e);
                    false
                }
            });
            if insts.is_empty() {
                return Err(refused.into_iter().next().unwrap_or(Problem::NoOnlineCpu {
                    event: spec.to_string(),
                    pmu: first_pmu,
                }));
            }
            partial.extend(refused);
        }
        if insts.iter().all(|i| i.cpus.is_empty()) {
            return Err(Problem::NoOnlineCpu {
                event: spec.to_string(),
                pmu: insts.first().map(|i| i.pmu.clone()).unwrap_or_default(),
            });
        }
        out.extend(insts.into_iter().map(|inst| MetricInstance {
            spec: spec.to_string(),
            topdown_rank: table.topdown_rank(&inst.pmu, inst.type_, inst.config[0]),
            inst,
        }));
    }
    Ok(out)
}

/// A counter's alternative must count and a gauge's must read
/// (`.snapshot`): otherwise the series would change type with the host.
fn same_kind(
    gauge: bool,
    event: String,
    insts: Vec<MetricInstance>,
) -> Result<Vec<MetricInstance>, Problem> {
    let wrong = |detail: &str| {
        Err(Problem::Config {
            event,
            detail: detail.into(),
        })
    };
    match (gauge, insts.iter().any(|i| i.inst.snapshot)) {
        (false, true) => wrong("a `.snapshot` reading, not a count: declare the metric `gauge: true` and name it without `_total`"),
        (true, false) => wrong("a count, not a reading: a `gauge: true` metric needs a `.snapshot` event"),
        _ => Ok(insts),
    }
}

/// Resolves every metric of `cfg` on the host described by `table`.
pub fn resolve_config(
    cfg: &Config,
    table: &PmuTable,
    ctx: &Context,
    probe: Option<Probe>,
) -> Resolution {
    let mut metrics = Vec::new();
    let mut sets = Vec::new();
    for set in &cfg.sets {
        sets.push(ResolvedSet {
            name: set.name.value.clone(),
            per: set.per,
        });
        for m in &set.events {
            let mut tried = Vec::new();
            let mut won = None;
            let mut partial = Vec::new();
            for (idx, alt) in m.event.value.iter().enumerate() {
                partial.clear();
                let outcome = try_alternative(alt, table, ctx, probe, &mut partial)
                    .and_then(|insts| same_kind(m.gauge, alt.display(), insts));
                match outcome {
                    Ok(insts) => {
                        tried.push(Tried {
                            event: alt.display(),
                            problem: None,
                        });
                        won = Some((idx, alt.display(), insts));
                        break;
                    }
                    Err(problem) => tried.push(Tried {
                        event: alt.display(),
                        problem: Some(problem),
                    }),
                }
            }
            let name = m.metric.value.clone();
            let help = m
                .help
                .clone()
                .unwrap_or_else(|| format!("perf event counter {name}."));
            let r = match won {
                Some((idx, event, instances)) => {
                    let gauge = instances.iter().any(|i| i.inst.snapshot);
                    let unit = instances
                        .first()
                        .map(|i| i.inst.unit.clone())
                        .unwrap_or_default();
                    ResolvedMetric {
                        set: set.name.value.clone(),
                        metric: name,
                        help,
                        status: if idx == 0 {
                            Status::Resolved
                        } else {
                            Status::Fallback
                        },
                        event: Some(event),
                        instances,
                        tried,
                        gauge,
                        unit,
                        partial,
                    }
                }
                None => ResolvedMetric {
                    set: set.name.value.clone(),
                    metric: name,
                    help,
                    status: Status::Unavailable,
                    event: None,
                    instances: Vec::new(),
                    tried,
                    gauge: false,
                    unit: String::new(),
                    partial: Vec::new(),
                },
            };
            metrics.push(r);
        }
    }
    Resolution { sets, metrics }
}

#[cfg(test)]
mod problem_tests {
    use super::*;

    /// A VM without a PMU: the hybrid part's `cpu_core/...` is absent
    /// because no PMU matches, the generic `core/...` because there is no
    /// hardware PMU at all; the metric says the latter, the reason the user
    /// can act on (and the live page keeps its card).
    #[test]
    fn a_missing_hardware_pmu_explains_before_another_platforms_pmu() {
        let absent = Problem::NotOnPlatform {
            event: "cpu_core/topdown-fe-bound/".into(),
            detail: "no PMU matches `cpu_core` on this host".into(),
        };
        let no_pmu = Problem::NeedsHardwarePmu {
            event: "core/topdown-fe-bound/".into(),
        };
        let m = ResolvedMetric {
            set: "topdown".into(),
            metric: "perf_topdown_frontend_bound_slots_total".into(),
            help: String::new(),
            status: Status::Unavailable,
            event: None,
            instances: Vec::new(),
            tried: vec![
                Tried {
                    event: "cpu_core/topdown-fe-bound/".into(),
                    problem: Some(absent.clone()),
                },
                Tried {
                    event: "core/topdown-fe-bound/".into(),
                    problem: Some(no_pmu.clone()),
                },
            ],
            gauge: false,
            unit: String::new(),
            partial: Vec::new(),
        };
        assert_eq!(m.problem(), Some(&no_pmu));
        assert_eq!(m.class(), Some(Class::NotOnPlatform));
        // Only other platforms' PMUs absent: the first of them.
        let mut other = m.clone();
        other.tried.truncate(1);
        assert_eq!(other.problem(), Some(&absent));
    }
}
