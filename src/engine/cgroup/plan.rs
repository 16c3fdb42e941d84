//! Planning shared by the backends: which metrics of `cgroups.sets` are
//! counted per cgroup (uncore ones are refused), and the groups to open
//! per set, PMU and CPU.

use super::{CgroupIssue, Signature};
use crate::perf::{EventAttr, PerfError};
use crate::resolve::chain::{Resolution, Status};
use std::collections::{BTreeMap, BTreeSet};

/// A metric counted per cgroup.
#[derive(Debug, Clone)]
pub(super) struct CgMetric {
    /// `perf_cgroup_...`.
    pub(super) family: String,
    pub(super) help: String,
    /// What it counts, for carry-over.
    pub(super) signature: Signature,
}

/// A planned member: `(metric, attr, scale)`.
pub(super) type PlannedMember = (usize, EventAttr, f64);

/// One planned group on one CPU: its set and members.
#[derive(Debug, Clone)]
pub(super) struct GroupPlan {
    pub(super) set: usize,
    pub(super) cpu: u32,
    pub(super) members: Vec<PlannedMember>,
}

/// The plan of a backend.
#[derive(Debug, Default)]
pub(super) struct Planned {
    pub(super) metrics: Vec<CgMetric>,
    pub(super) plan: Vec<GroupPlan>,
    /// The CPUs of the columns: every CPU the metrics cover when per CPU,
    /// else one column (`0`).
    pub(super) cols: Vec<u32>,
    pub(super) issues: Vec<CgroupIssue>,
}

/// Plans the per-cgroup groups of `sets` from a resolution: every
/// available counter metric of those sets, on its core or software PMU,
/// one group per set, PMU and CPU, `slots` first where there is one
/// (online now or not: a CPU that comes
/// online later gets its groups then). Metrics of uncore PMUs are refused
/// ([`CgroupIssue::Uncore`]); the issues are logged.
pub(super) fn plan(res: &Resolution, sets: &[String], per_cpu: bool) -> Planned {
    let mut metrics = Vec::new();
    let mut issues = Vec::new();
    let mut plans: BTreeMap<(usize, String, u32), Vec<(u8, PlannedMember)>> = BTreeMap::new();
    let mut all_cpus = BTreeSet::new();
    for m in &res.metrics {
        let Some(set) = sets.iter().position(|s| *s == m.set) else {
            continue;
        };
        if m.status == Status::Unavailable || m.gauge {
            continue;
        }
        if let Some(u) = m.instances.iter().find(|i| i.inst.uncore) {
            issues.push(CgroupIssue::Uncore {
                set: m.set.clone(),
                metric: m.metric.clone(),
                pmu: u.inst.pmu.clone(),
            });
            continue;
        }
        let mi = metrics.len();
        metrics.push(CgMetric {
            family: super::family_name(&m.metric),
            help: format!("{} Per cgroup.", m.help.trim_end()),
            signature: (
                m.metric.clone(),
                m.instances
                    .iter()
                    .map(|i| {
                        (
                            i.inst.pmu.clone(),
                            i.inst.type_,
                            i.inst.config,
                            i.inst.scale.to_bits(),
                            i.inst.exclude,
                        )
                    })
                    .collect(),
            ),
        });
        for inst in &m.instances {
            let i = &inst.inst;
            for &cpu in &i.cpus {
                all_cpus.insert(cpu);
                let attr = EventAttr {
                    type_: i.type_,
                    config: i.config,
                    event: inst.spec.clone(),
                    pmu: i.pmu.clone(),
                    exclude: i.exclude,
                };
                let group = plans.entry((set, i.pmu.clone(), cpu)).or_default();
                group.push((inst.topdown_rank, (mi, attr, i.scale)));
            }
        }
    }
    let gaps = super::gaps::unplanned(sets, |i| plans.keys().any(|k| k.0 == i), &issues);
    issues.extend(gaps);
    for i in &issues {
        tracing::warn!(issue = %i, what_to_do = %i.what_to_do(), "not counted per cgroup");
    }
    let plan = plans
        .into_iter()
        .map(|((set, _, cpu), mut members)| {
            // `slots` leads a perf-metrics group, as in the node's groups
            // (the kernel refuses a metric event under another leader);
            // stable: the YAML order within a rank.
            members.sort_by_key(|(rank, _)| *rank);
            let members = members.into_iter().map(|(_, m)| m).collect();
            GroupPlan { set, cpu, members }
        })
        .collect();
    let cols: Vec<u32> = if per_cpu {
        all_cpus.into_iter().collect()
    } else {
        vec![0]
    };
    Planned {
        metrics,
        plan,
        cols,
        issues,
    }
}

/// Records that `metric`'s per-cgroup counter failed to open (once per
/// distinct problem, at most 32), and logs it.
pub(super) fn open_failed(
    issues: &mut Vec<CgroupIssue>,
    metrics: &[CgMetric],
    metric: usize,
    e: &PerfError,
) {
    let issue = CgroupIssue::Open {
        metric: metrics[metric].signature.0.clone(),
        problem: e.problem(),
    };
    if !issues.contains(&issue) && issues.len() < 32 {
        tracing::warn!(%issue, what_to_do = %issue.what_to_do(), "per-cgroup counter unavailable");
        issues.push(issue);
    }
}

/// The CPUs of `online` that `before` did not have (back online).
pub(super) fn returned(before: &[u32], online: &[u32]) -> Vec<u32> {
    online
        .iter()
        .copied()
        .filter(|c| !before.contains(c))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A perf-metrics group per cgroup puts `slots` first, then the
    /// metric events, then the rest, whatever the YAML order (the node's
    /// groups do the same: `engine::plan`).
    #[test]
    fn slots_leads_a_per_cgroup_perf_metrics_group() {
        let (_, _, res) = crate::engine::plan::tests::hybrid_topdown_resolution();
        let planned = plan(&res, &["td".to_string()], true);
        let order = |pmu: &str| -> Vec<Vec<String>> {
            let mut orders: Vec<Vec<String>> = planned
                .plan
                .iter()
                .filter(|g| g.members[0].1.pmu == pmu)
                .map(|g| {
                    let names = g
                        .members
                        .iter()
                        .map(|(m, _, _)| planned.metrics[*m].family.clone());
                    names.collect()
                })
                .collect();
            orders.dedup();
            orders
        };
        let td = super::super::family_name;
        assert_eq!(
            order("cpu_core"),
            [[
                td("perf_td_slots_total"),
                td("perf_td_retiring_total"),
                td("perf_td_be_total"),
                td("perf_cycles_total"),
            ]]
        );
        // `cpu_atom`'s topdown-* are ordinary counters: the YAML order.
        assert_eq!(
            order("cpu_atom"),
            [[
                td("perf_cycles_total"),
                td("perf_td_retiring_total"),
                td("perf_td_be_total"),
            ]]
        );
    }
}
