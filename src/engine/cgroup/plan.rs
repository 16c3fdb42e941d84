//! Planning shared by the backends: which metrics of `cgroups.sets` are
//! counted per cgroup (uncore ones are refused), and the groups to open
//! per set, PMU and CPU.

use super::{CgroupIssue, Signature};
use crate::perf::{EventAttr, PerfError};
use crate::problem::{log_reason, LogFields};
use crate::resolve::chain::{Resolution, Status};
use crate::snapshot::Text;
use std::collections::{BTreeMap, BTreeSet};
use tracing::Level;

/// A metric counted per cgroup.
#[derive(Debug, Clone)]
pub(super) struct CgMetric {
    /// `perf_cgroup_...`.
    pub(super) family: Text,
    pub(super) help: Text,
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
            family: super::family_name(&m.metric).into(),
            help: super::family_help(&m.help).into(),
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
        log_reason!(
            Level::WARN,
            LogFields::of(i),
            [],
            [],
            "not counted per cgroup"
        );
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

/// Splits the planned groups that need more counters of their PMU than
/// it has free (`free`: the measured budget of a core PMU, `None` where
/// unknown) into groups that fit, in order, before anything opens: a
/// group larger than the free counters would never be scheduled (and,
/// the kernel stopping its flexible pass at the first group that does
/// not fit, starve the groups rotated after it). Each split is an issue
/// ([`CgroupIssue::Split`], once per set and PMU), logged.
pub(super) fn fit_to_counters(
    plan: Vec<GroupPlan>,
    sets: &[String],
    free: impl Fn(&str) -> Option<usize>,
    issues: &mut Vec<CgroupIssue>,
) -> Vec<GroupPlan> {
    let mut out = Vec::with_capacity(plan.len());
    for g in plan {
        let pmu = g
            .members
            .first()
            .map(|m| m.1.pmu.clone())
            .unwrap_or_default();
        let Some(n) = free(&pmu).filter(|&n| n > 0 && g.members.len() > n) else {
            out.push(g);
            continue;
        };
        let issue = CgroupIssue::Split(crate::problem::Problem::GroupTooLarge {
            set: sets.get(g.set).cloned().unwrap_or_default(),
            pmu,
            events: g.members.len(),
            counters: n,
        });
        if !issues.contains(&issue) {
            log_reason!(
                Level::WARN,
                LogFields::of(&issue),
                [],
                [],
                "per-cgroup group split"
            );
            issues.push(issue);
        }
        for chunk in g.members.chunks(n) {
            out.push(GroupPlan {
                set: g.set,
                cpu: g.cpu,
                members: chunk.to_vec(),
            });
        }
    }
    out
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
        log_reason!(
            Level::WARN,
            LogFields::of(&issue),
            [],
            [],
            "per-cgroup counter unavailable"
        );
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

    /// A group of 7 events on a PMU with 6 free counters is planned as
    /// 6 + 1, with the issue said once; groups that fit and PMUs without
    /// a budget are left alone.
    #[test]
    fn a_group_larger_than_the_free_counters_is_split_at_plan_time() {
        let member = |pmu: &str, i: usize| -> PlannedMember {
            let attr = EventAttr {
                type_: 8,
                config: [i as u64, 0, 0, 0],
                event: format!("e{i}"),
                pmu: pmu.into(),
                exclude: Default::default(),
            };
            (i, attr, 1.0)
        };
        let group = |set: usize, pmu: &str, n: usize, cpu: u32| GroupPlan {
            set,
            cpu,
            members: (0..n).map(|i| member(pmu, i)).collect(),
        };
        let plan = vec![
            group(0, "armv8_pmuv3_0", 7, 0),
            group(0, "armv8_pmuv3_0", 7, 1),
            group(1, "armv8_pmuv3_0", 6, 0),
            group(2, "software", 9, 0),
        ];
        let sets = ["big".to_string(), "fits".to_string(), "sw".to_string()];
        let mut issues = Vec::new();
        let free = |p: &str| (p == "armv8_pmuv3_0").then_some(6);
        let out = fit_to_counters(plan, &sets, free, &mut issues);
        let shape: Vec<(usize, u32, usize)> = out
            .iter()
            .map(|g| (g.set, g.cpu, g.members.len()))
            .collect();
        assert_eq!(
            shape,
            [
                (0, 0, 6),
                (0, 0, 1),
                (0, 1, 6),
                (0, 1, 1),
                (1, 0, 6),
                (2, 0, 9)
            ]
        );
        assert_eq!(issues.len(), 1, "{issues:?}");
        assert_eq!(issues[0].code(), "group_too_large");
        assert!(issues[0].to_string().contains("set `big`"), "{}", issues[0]);
    }

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
                        .map(|(m, _, _)| planned.metrics[*m].family.to_string());
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
