//! Planning: which groups the resolution needs on the CPUs online now,
//! their members, their label sets, and the export order of label sets.
//!
//! # Intel "perf metrics" groups (top-down level 1)
//!
//! Intel Ice Lake and later (and `cpu_core` on hybrid parts) count the
//! top-down level-1 categories in hardware: fixed counter 3 counts the
//! pipeline's `slots`, and the `PERF_METRICS` register holds, per
//! category, an 8-bit fraction of them (0xff = all). The kernel exposes
//! them as the sysfs events `slots` (`event=0x00,umask=0x4`) and
//! `topdown-retiring`, `-bad-spec`, `-fe-bound`, `-be-bound` (umask 0x80
//! to 0x83; 0x84 to 0x87 are the level-2 ones), and it enforces
//! (`arch/x86/events/intel/core.c`, `intel_pmu_hw_config`):
//!
//! * a metric event (`is_metric_event`: event code 0, umask 0x80 up to
//!   `INTEL_TD_METRIC_MAX`) opens only inside a group whose **leader is
//!   `slots`** (`is_slots_event(leader)`), else `perf_event_open` fails
//!   with `EINVAL`; it cannot sample, and the leader may not sample either;
//! * a metric event's count is not a counter of its own: when the group is
//!   updated (a read, a context switch) the kernel takes the slots count of
//!   fixed counter 3 and the metric's byte of `PERF_METRICS` and adds to
//!   the event the growth of `slots * byte / 0xff` since its last update
//!   (`icl_get_metrics_event_value`, `__icl_update_topdown_event`; the
//!   first kernels cleared both registers at every read instead). So the
//!   value `read()` returns for `topdown-retiring` is already a count of
//!   **slots**, accumulating like any counter, and the four level-1 values
//!   add up to the slots count up to the truncation of four 8-bit
//!   fractions (`mul_u64_u32_div` rounds down: a few slots short).
//!   They are read, scaled for multiplexing and made monotonic exactly
//!   like every other member: nothing about them is special once the group
//!   is built.
//!
//! The perf tool sorts such groups the same way (`arch_evlist__cmp` in
//! `tools/perf/arch/x86/util/evlist.c`): `slots` first, then the metric
//! events, then the rest. [`Engine::plan`] does it too, whatever the order
//! of the metrics in the YAML ([`topdown_rank`]); and a group split for
//! never being scheduled keeps `slots` and its metric events together
//! (`open.rs`). Which PMU has perf metrics is read from sysfs: the kernel
//! lists a `slots` event only on core PMUs with the feature (the perf
//! tool's `topdown_sys_has_perf_metrics` relies on the same fact). The
//! `topdown-*` events of `cpu_atom` (Gracemont) are ordinary counters
//! (`event=0x71..0x74,0xc2`) and need no leader.

use super::{Engine, GroupKey, MemberPlan};
use crate::config::Per;
use crate::perf::EventAttr;
use crate::pmu::{PmuTable, Scope};
use crate::resolve::chain::Status;
use std::collections::{BTreeMap, HashMap};

/// Where an event goes in its group ([`PmuTable::topdown_rank`]).
pub(super) fn topdown_rank(table: &PmuTable, attr: &EventAttr) -> u8 {
    table.topdown_rank(&attr.pmu, attr.type_, attr.config[0])
}

/// The label a core or software PMU's series of CPU `cpu` keeps at level
/// `per`: `cpu`, `core` (the lowest CPU of the core), `socket`, or none
/// (`node`).
pub(super) fn level_label(table: &PmuTable, per: Per, cpu: u32) -> Option<(&'static str, u32)> {
    match per {
        Per::Cpu => Some(("cpu", cpu)),
        Per::Core => Some(("core", table.topology.core_of(cpu))),
        Per::Socket => Some(("socket", table.topology.socket_of(cpu))),
        Per::Node => None,
    }
}

/// The labels of a series: `pmu` and `socket` for uncore PMUs (plus `cpu`
/// when several CPUs of one socket count the PMU), whatever the level;
/// for core and software PMUs the label of the level ([`level_label`]),
/// plus `pmu` for a summed series of a hybrid part's core PMU.
fn labels_for(
    table: &PmuTable,
    inst_pmu: &str,
    uncore: bool,
    cpu: u32,
    per: Per,
    shared_socket: bool,
) -> Vec<(&'static str, String)> {
    if uncore {
        let mut l = vec![
            ("pmu", inst_pmu.to_string()),
            ("socket", table.topology.socket_of(cpu).to_string()),
        ];
        if shared_socket {
            l.push(("cpu", cpu.to_string()));
        }
        l
    } else {
        let mut l: Vec<(&'static str, String)> = level_label(table, per, cpu)
            .map(|(k, v)| vec![(k, v.to_string())])
            .unwrap_or_default();
        // A hybrid part's core types (`cpu_core`, `cpu_atom`) count
        // different events under one name, and only some have `slots`:
        // their sums stay apart.
        if per != Per::Cpu
            && table.core_pmus().len() > 1
            && table.get(inst_pmu).is_some_and(|p| p.is_core())
        {
            l.push(("pmu", inst_pmu.to_string()));
        }
        l
    }
}

/// Splits `name_12` into `("name", 12)` (no number: `(s, 0)`), to order
/// `uncore_imc_2` before `uncore_imc_10`.
pub(super) fn natural(s: &str) -> (String, u64) {
    match s.rsplit_once('_') {
        Some((h, t)) if t.bytes().all(|b| b.is_ascii_digit()) && !t.is_empty() => {
            (h.to_string(), t.parse().unwrap_or(0))
        }
        _ => (s.to_string(), 0),
    }
}

/// A sort key ordering label sets numerically where values are numbers
/// (cpu 2 < 10) and naturally where they end in one (`imc_2 < imc_10`).
pub(super) fn label_order(l: &[(&'static str, String)]) -> Vec<(String, u64, String)> {
    l.iter()
        .map(|(_, v)| {
            let (h, n) = natural(v);
            match v.parse::<u64>() {
                Ok(x) => (String::new(), x, String::new()),
                Err(_) => (h, n, v.clone()),
            }
        })
        .collect()
}

/// Cuts a group's members into the groups a split opens: one per member,
/// except that a perf-metrics `slots` leader keeps the metric events that
/// follow it (the kernel refuses them in any other group).
pub(super) fn split_units(table: &PmuTable, plans: Vec<MemberPlan>) -> Vec<Vec<MemberPlan>> {
    let mut out: Vec<Vec<MemberPlan>> = Vec::new();
    for p in plans {
        let metric = topdown_rank(table, &p.attr) == 1;
        match out.last_mut() {
            Some(unit) if metric && topdown_rank(table, &unit[0].attr) == 0 => unit.push(p),
            _ => out.push(vec![p]),
        }
    }
    out
}

/// The general-purpose counters `members` take: one each, but for the
/// perf-metrics events, to which the kernel gives a pseudo-counter index
/// (`INTEL_PMC_IDX_METRIC_BASE`) and whose counts it computes from
/// `slots` and `PERF_METRICS` (`arch/x86/events/intel/core.c`).
pub(super) fn counters_needed(table: &PmuTable, members: &[MemberPlan]) -> usize {
    members
        .iter()
        .filter(|m| topdown_rank(table, &m.attr) != 1)
        .count()
}

/// `members` cut into groups that fit `free` counters (a perf-metrics
/// `slots` unit stays whole: [`split_units`]); `None` when they fit as
/// one group or cannot be cut. What opening does (`open.rs`,
/// `fit_to_counters`) and what the series count predicts (`count.rs`).
pub(super) fn fit_chunks(
    table: &PmuTable,
    members: &[MemberPlan],
    free: usize,
) -> Option<Vec<Vec<MemberPlan>>> {
    if counters_needed(table, members) <= free.max(1) {
        return None;
    }
    let units = split_units(table, members.to_vec());
    if units.len() < 2 {
        return None;
    }
    let mut chunks: Vec<Vec<MemberPlan>> = Vec::new();
    for unit in units {
        match chunks.last_mut() {
            Some(c) if counters_needed(table, c) + counters_needed(table, &unit) <= free => {
                c.extend(unit);
            }
            _ => chunks.push(unit),
        }
    }
    Some(chunks)
}

/// Whether a group is a perf-metrics unit (`slots` and its metric events
/// only): splitting it cannot help.
pub(super) fn is_one_unit<'a>(
    table: &PmuTable,
    mut attrs: impl Iterator<Item = &'a EventAttr>,
) -> bool {
    attrs
        .next()
        .is_some_and(|l| topdown_rank(table, l) == 0 && attrs.all(|a| topdown_rank(table, a) == 1))
}

impl Engine {
    /// CPUs an instance's events go on now: the PMU's cpumask or cpus
    /// against the online CPUs, or every online CPU; an uncore PMU without
    /// a cpumask (older `arm_dmc620`) keeps one online CPU.
    fn cpus_now(&self, inst: &crate::resolve::Instance) -> Vec<u32> {
        match self.table.get(&inst.pmu).map(|p| &p.scope) {
            Some(Scope::Cpumask(c)) | Some(Scope::Cpus(c)) => {
                c.iter().copied().filter(|&c| self.is_online(c)).collect()
            }
            _ if inst.uncore => match inst.cpus.first() {
                Some(&c) if self.is_online(c) => vec![c],
                _ => self.cpus.online().iter().copied().take(1).collect(),
            },
            _ => self.cpus.online().to_vec(),
        }
    }

    /// How far set `set`'s series are summed before export.
    pub(super) fn per(&self, set: usize) -> Per {
        self.resolution.sets.get(set).map_or(Per::Cpu, |s| s.per)
    }

    /// Desired groups and their members on the current CPUs.
    pub(super) fn plan(&self) -> BTreeMap<GroupKey, Vec<MemberPlan>> {
        let mut plan: BTreeMap<GroupKey, Vec<MemberPlan>> = BTreeMap::new();
        // Set indices by name, looked up once per metric (the first of a
        // name; linear in sets and metrics, not their product).
        let mut sets: HashMap<&str, usize> = HashMap::new();
        for (si, s) in self.resolution.sets.iter().enumerate() {
            sets.entry(s.name.as_str()).or_insert(si);
        }
        for (mi, m) in self.resolution.metrics.iter().enumerate() {
            if m.status == Status::Unavailable {
                continue;
            }
            let set = sets.get(m.set.as_str()).copied().unwrap_or(0);
            let per = self.per(set);
            for inst in &m.instances {
                let i = &inst.inst;
                let cpus = self.cpus_now(i);
                let mut sockets = BTreeMap::new();
                for &c in &cpus {
                    *sockets.entry(self.table.topology.socket_of(c)).or_insert(0) += 1;
                }
                for &cpu in &cpus {
                    let shared = sockets
                        .get(&self.table.topology.socket_of(cpu))
                        .copied()
                        .unwrap_or(0)
                        > 1;
                    let labels = labels_for(&self.table, &i.pmu, i.uncore, cpu, per, shared);
                    let detail = labels_for(&self.table, &i.pmu, i.uncore, cpu, Per::Cpu, shared);
                    plan.entry(GroupKey {
                        set,
                        pmu: i.pmu.clone(),
                        cpu,
                        split: 0,
                    })
                    .or_default()
                    .push(MemberPlan {
                        metric: mi,
                        attr: EventAttr {
                            type_: i.type_,
                            config: i.config,
                            event: inst.spec.clone(),
                            pmu: i.pmu.clone(),
                            exclude: i.exclude,
                        },
                        scale: i.scale,
                        snapshot: i.snapshot,
                        series: (mi, labels),
                        detail: (mi, detail),
                    });
                }
            }
        }
        for members in plan.values_mut() {
            // Stable: the YAML order is kept within each rank.
            members.sort_by_key(|m| topdown_rank(&self.table, &m.attr));
        }
        plan
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::config::Config;
    use crate::perf::sim::SimKernel;
    use crate::resolve::chain::{resolve_config, Resolution};
    use crate::resolve::Context;
    use std::sync::Arc;

    /// A set whose YAML order puts `slots` last (after cycles and two
    /// metric events), resolved on the hybrid fixture's simulated PMU: the
    /// table, the kernel and the resolution (also for the per-cgroup
    /// planning's test).
    pub(in crate::engine) fn hybrid_topdown_resolution() -> (PmuTable, Arc<SimKernel>, Resolution) {
        let table = crate::pmu::fixtures::table("intel-hybrid");
        let yaml = r#"
sets:
  - name: td
    events:
      - { metric: perf_cycles_total, event: "core/cpu-cycles/" }
      - { metric: perf_td_retiring_total, event: "core/topdown-retiring/" }
      - { metric: perf_td_be_total, event: "core/topdown-be-bound/" }
      - { metric: perf_td_slots_total, event: "core/slots/" }
"#;
        let cfg = Config::parse(yaml, "t.yaml").unwrap();
        let k = Arc::new(SimKernel::with_manual_clock(table.clone()));
        let res = {
            let p = crate::probe::prober(k.as_ref());
            resolve_config(&cfg, &table, &Context::default(), Some(&p))
        };
        (table, k, res)
    }

    /// `slots` leads its group (then the metric events, then the rest)
    /// whatever the YAML order, and the simulated kernel, which refuses a
    /// metric event under any other leader, opens every member.
    /// The slots group in YAML order that puts it last, on the hybrid
    /// fixture's simulated PMU (`setup` runs before anything opens).
    fn hybrid_topdown(setup: impl FnOnce(&SimKernel)) -> (Arc<SimKernel>, Engine) {
        let (table, k, res) = hybrid_topdown_resolution();
        setup(&k);
        let e = Engine::for_config(k.clone(), table, res, crate::engine::Fds::Unbounded);
        (k, e)
    }

    /// A perf-metrics group that is never scheduled is split once (the
    /// other events go on their own, `slots` keeps its metric events) and
    /// then reported unschedulable, not split again and again.
    #[test]
    fn an_unschedulable_perf_metrics_unit_is_reported_not_resplit() {
        let (k, mut e) = hybrid_topdown(|k| k.set_group_never_runs("cpu_core", true));
        let mut groups = Vec::new();
        for _ in 0..6 {
            k.advance(1_000_000_000);
            e.collect();
            groups.push(e.open_groups());
        }
        // After the split: per P-core, the unit and cycles alone.
        assert_eq!(groups[5], groups[3], "{groups:?}");
        let per_core = 16 * 2 + 12;
        assert_eq!(groups[5], per_core, "{groups:?}");
        let problems = e.problems();
        for m in [
            "perf_td_slots_total",
            "perf_td_retiring_total",
            "perf_td_be_total",
        ] {
            assert!(
                problems
                    .iter()
                    .any(|(n, p)| n == m && p.code() == "unschedulable"),
                "{m}: {problems:?}"
            );
        }
    }

    #[test]
    fn perf_metrics_groups_put_slots_first() {
        let (_k, e) = hybrid_topdown(|_| ());
        let plan = e.plan();
        let order = |pmu: &str, cpu: u32| -> Vec<String> {
            let (_, members) = plan
                .iter()
                .find(|(g, _)| g.pmu == pmu && g.cpu == cpu)
                .unwrap();
            members.iter().map(|m| m.attr.event.clone()).collect()
        };
        assert_eq!(
            order("cpu_core", 0),
            [
                "core/slots/",
                "core/topdown-retiring/",
                "core/topdown-be-bound/",
                "core/cpu-cycles/"
            ]
        );
        // cpu_atom has no `slots`: its topdown-* are ordinary counters
        // and keep the YAML order.
        assert_eq!(
            order("cpu_atom", 16),
            [
                "core/cpu-cycles/",
                "core/topdown-retiring/",
                "core/topdown-be-bound/"
            ]
        );
        // One group per (PMU, CPU), every member open, nothing refused
        // (cpu_atom's lack of `slots` is a resolution fact, not a refusal).
        assert_eq!(e.open_fds(), e.planned_fds());
        let refused: Vec<_> = e
            .problems()
            .into_iter()
            .filter(|(_, p)| p.open().is_some())
            .collect();
        assert!(refused.is_empty(), "{refused:?}");
    }

    /// A split of a never-scheduled group keeps `slots` with its metric
    /// events (alone the kernel refuses them), and such a unit is never
    /// split again (else it would be re-split at every other collection).
    #[test]
    fn a_split_keeps_the_perf_metrics_unit() {
        let table = crate::pmu::fixtures::table("intel-hybrid");
        let member = |config: u64| MemberPlan {
            metric: 0,
            attr: EventAttr {
                type_: 4,
                config: [config, 0, 0, 0],
                event: format!("{config:#x}"),
                pmu: "cpu_core".into(),
                exclude: Default::default(),
            },
            scale: 1.0,
            snapshot: false,
            series: (0, Vec::new()),
            detail: (0, Vec::new()),
        };
        let plans: Vec<MemberPlan> = [0x400, 0x8000, 0x8300, 0x3c]
            .into_iter()
            .map(member)
            .collect();
        let units = split_units(&table, plans.clone());
        let shape: Vec<usize> = units.iter().map(Vec::len).collect();
        assert_eq!(shape, [3, 1]);
        assert!(is_one_unit(&table, units[0].iter().map(|m| &m.attr)));
        assert!(!is_one_unit(&table, plans.iter().map(|m| &m.attr)));
        assert!(!is_one_unit(&table, units[1].iter().map(|m| &m.attr)));
        // The same encodings on cpu_atom (no perf metrics) split one by one.
        let atom: Vec<MemberPlan> = plans
            .into_iter()
            .map(|mut m| {
                m.attr.pmu = "cpu_atom".into();
                m.attr.type_ = 10;
                m
            })
            .collect();
        assert_eq!(split_units(&table, atom).len(), 4);
    }

    fn l(pairs: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
        pairs.iter().map(|(k, v)| (*k, v.to_string())).collect()
    }

    #[test]
    fn natural_splits_a_numeric_suffix() {
        assert_eq!(natural("uncore_imc_10"), ("uncore_imc".into(), 10));
        assert_eq!(natural("cpu"), ("cpu".into(), 0));
        assert_eq!(natural("imc_"), ("imc_".into(), 0));
        assert_eq!(natural("a_b1"), ("a_b1".into(), 0));
    }

    #[test]
    fn label_sets_order_numerically() {
        let mut sets = vec![l(&[("cpu", "10")]), l(&[("cpu", "2")]), l(&[("cpu", "1")])];
        sets.sort_by_cached_key(|s| label_order(s));
        assert_eq!(
            sets,
            vec![l(&[("cpu", "1")]), l(&[("cpu", "2")]), l(&[("cpu", "10")])]
        );
        let mut pmus = vec![
            l(&[("pmu", "uncore_imc_10"), ("socket", "0")]),
            l(&[("pmu", "uncore_imc_2"), ("socket", "1")]),
            l(&[("pmu", "uncore_imc_2"), ("socket", "0")]),
            l(&[("pmu", "uncore_cha_0"), ("socket", "0")]),
        ];
        pmus.sort_by_cached_key(|s| label_order(s));
        assert_eq!(
            pmus,
            vec![
                l(&[("pmu", "uncore_cha_0"), ("socket", "0")]),
                l(&[("pmu", "uncore_imc_2"), ("socket", "0")]),
                l(&[("pmu", "uncore_imc_2"), ("socket", "1")]),
                l(&[("pmu", "uncore_imc_10"), ("socket", "0")]),
            ]
        );
    }
}
