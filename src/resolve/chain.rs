//! Fallback chains: a whole configuration resolved against one host.
//!
//! Each metric's alternatives are tried in order; the first that resolves
//! (and, when a probe is given, opens on the host) wins. The result types
//! here are separate from the config types: they describe what will be
//! counted, where, and why the other alternatives were not taken.

use super::{resolve, Context, Instance};
use crate::config::{Alternative, Config};
use crate::pmu::{normalize_unit, PmuTable};

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
    /// Why it failed, or `selected`.
    pub reason: String,
}

/// One counted instance of a metric: which spec of the winning
/// alternative (a sum has several) and its encoding.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricInstance {
    /// The spec.
    pub spec: String,
    /// The encoding and CPUs.
    pub inst: Instance,
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
    pub partial: Vec<String>,
}

impl ResolvedMetric {
    /// Why it is unavailable: the reasons of every alternative.
    /// Alternatives that failed for the same reason are named together.
    pub fn reason(&self) -> String {
        let mut groups: Vec<(Vec<&str>, &str)> = Vec::new();
        for t in self.tried.iter().filter(|t| t.reason != SELECTED) {
            match groups.iter_mut().find(|(_, r)| *r == t.reason) {
                Some(g) => g.0.push(&t.event),
                None => groups.push((vec![&t.event], &t.reason)),
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
    /// Per-CPU series (true) or summed over CPUs.
    pub per_cpu: bool,
}

/// The whole configuration, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolution {
    /// The sets.
    pub sets: Vec<ResolvedSet>,
    /// Every metric, in config order.
    pub metrics: Vec<ResolvedMetric>,
}

/// The `reason` of the winning alternative in `tried`.
pub const SELECTED: &str = "selected";

/// Checks that an instance really opens on this host: `Err(reason)` if
/// not. The engine passes the live kernel or the simulated PMU.
pub type Probe<'a> = &'a dyn Fn(&str, &Instance) -> Result<(), String>;

fn check_requires(req: &str, table: &PmuTable) -> Result<(), String> {
    let bad = || format!("`requires_format: {req}` is not `PMU/term=configN:bits`");
    let (pmu, rest) = req.split_once('/').ok_or_else(bad)?;
    let (term, want) = rest.split_once('=').ok_or_else(bad)?;
    let pmus = table.matching(pmu);
    if pmus.is_empty() {
        return Err(format!("no PMU matches `{pmu}` on this host"));
    }
    for p in pmus {
        let have = p.formats.get(term).map(|f| f.to_string());
        if have.as_deref() != Some(want.trim()) {
            return Err(format!(
                "needs {}/format/{term} = {want}, this host has {}",
                p.name,
                have.unwrap_or_else(|| "no such term".into())
            ));
        }
    }
    Ok(())
}

fn try_alternative(
    alt: &Alternative,
    table: &PmuTable,
    ctx: &Context,
    probe: Option<Probe>,
    partial: &mut Vec<String>,
) -> Result<Vec<MetricInstance>, String> {
    if let Some(req) = alt.requires_format() {
        check_requires(req, table)?;
    }
    let (scale, unit) = alt.overrides();
    let mut out = Vec::new();
    for spec in alt.specs() {
        let (parsed, spec) = (&spec.parsed, spec.text.as_str());
        let mut insts = resolve(parsed, table, ctx).map_err(|e| {
            if alt.specs().len() > 1 {
                format!("{spec}: {e}")
            } else {
                e.to_string()
            }
        })?;
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
            let mut first_err = None;
            let mut refused = Vec::new();
            insts.retain(|i| match probe(spec, i) {
                Ok(()) => true,
                Err(e) => {
                    refused.push(format!("{spec} on {}: {e}", i.pmu));
                    first_err.get_or_insert(e);
                    false
                }
            });
            if !insts.is_empty() {
                partial.extend(refused);
            }
            if insts.is_empty() {
                let e = first_err.unwrap_or_else(|| "no CPU to open it on".into());
                return Err(if alt.specs().len() > 1 {
                    format!("{spec}: {e}")
                } else {
                    e
                });
            }
        }
        if insts.iter().all(|i| i.cpus.is_empty()) {
            return Err(format!("{spec}: none of its CPUs is online"));
        }
        out.extend(insts.into_iter().map(|inst| MetricInstance {
            spec: spec.to_string(),
            inst,
        }));
    }
    Ok(out)
}

/// A counter's alternative must count and a gauge's must read
/// (`.snapshot`): otherwise the series would change type with the host.
fn same_kind(gauge: bool, insts: Vec<MetricInstance>) -> Result<Vec<MetricInstance>, String> {
    match (gauge, insts.iter().any(|i| i.inst.snapshot)) {
        (false, true) => Err("a `.snapshot` reading, not a count: declare the metric `gauge: true` and name it without `_total`".into()),
        (true, false) => Err("a count, not a reading: a `gauge: true` metric needs a `.snapshot` event".into()),
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
            per_cpu: set.per_cpu,
        });
        for m in &set.events {
            let mut tried = Vec::new();
            let mut won = None;
            let mut partial = Vec::new();
            for (idx, alt) in m.event.value.iter().enumerate() {
                partial.clear();
                let outcome = try_alternative(alt, table, ctx, probe, &mut partial)
                    .and_then(|insts| same_kind(m.gauge, insts));
                match outcome {
                    Ok(insts) => {
                        tried.push(Tried {
                            event: alt.display(),
                            reason: SELECTED.into(),
                        });
                        won = Some((idx, alt.display(), insts));
                        break;
                    }
                    Err(reason) => tried.push(Tried {
                        event: alt.display(),
                        reason,
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
