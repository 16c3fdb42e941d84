//! Planning: which groups the resolution needs on the CPUs online now,
//! their members, their label sets, and the export order of label sets.

use super::{Engine, GroupKey, MemberPlan};
use crate::perf::EventAttr;
use crate::pmu::{PmuTable, Scope};
use crate::resolve::chain::Status;
use std::collections::BTreeMap;

/// The labels of a series: `pmu` and `socket` for uncore PMUs (plus `cpu`
/// when several CPUs of one socket count the PMU), `cpu` for core and
/// software PMUs of a per-CPU set, none when summed over CPUs.
fn labels_for(
    table: &PmuTable,
    inst_pmu: &str,
    uncore: bool,
    cpu: u32,
    per_cpu: bool,
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
    } else if per_cpu {
        vec![("cpu", cpu.to_string())]
    } else {
        Vec::new()
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
                _ => self.online.iter().copied().take(1).collect(),
            },
            _ => self.online.clone(),
        }
    }

    /// Whether set `set` keeps the `cpu` label.
    pub(super) fn per_cpu(&self, set: usize) -> bool {
        self.resolution.sets.get(set).is_none_or(|s| s.per_cpu)
    }

    /// Desired groups and their members on the current CPUs.
    pub(super) fn plan(&self) -> BTreeMap<GroupKey, Vec<MemberPlan>> {
        let mut plan: BTreeMap<GroupKey, Vec<MemberPlan>> = BTreeMap::new();
        for (mi, m) in self.resolution.metrics.iter().enumerate() {
            if m.status == Status::Unavailable {
                continue;
            }
            let set = self
                .resolution
                .sets
                .iter()
                .position(|s| s.name == m.set)
                .unwrap_or(0);
            let per_cpu = self.per_cpu(set);
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
                    let labels = labels_for(&self.table, &i.pmu, i.uncore, cpu, per_cpu, shared);
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
                        },
                        scale: i.scale,
                        snapshot: i.snapshot,
                        series: (mi, labels),
                    });
                }
            }
        }
        plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
