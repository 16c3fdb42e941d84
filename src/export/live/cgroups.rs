//! The per-workload top list of a frame (`per_cgroup`), from the
//! `perf_cgroup_*` families of per-cgroup counting.
//!
//! **Nothing is counted twice.** A perf event on a cgroup counts the tasks
//! of that cgroup *and of its descendants* (the kernel matches a task's
//! cgroup against the event's with `cgroup_is_descendant`): a container's
//! counts are already inside its pod's. So the `perf_cgroup_*` families
//! never go into the frame's node-level `counts` (they count the same
//! events again), rows are never added up, and a counted cgroup inside
//! another counted cgroup (a container in its pod, for the `kubernetes`
//! preset with `containers: true`) is listed under it in `nested`, not
//! next to it.
//!
//! ```json
//! "per_cgroup": {
//!   "counted": 7,
//!   "rank_by": "perf_cgroup_cpu_clock_seconds_total",
//!   "top": [
//!     { "cgroup": "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice",
//!       "labels": { "pod_uid": "<uid>", "qos_class": "burstable" },
//!       "counts": { "perf_cgroup_cpu_clock_seconds_total": 0.42, ... },
//!       "derived": { "cpu_share": 0.21, "context_switches_per_second": 310.0, "ipc": null, ... },
//!       "nested": [ { "cgroup": ".../cri-containerd-<id>.scope", "labels": { "container_id": "<id>", ... }, ... } ] }
//!   ]
//! }
//! ```
//!
//! * `counted`: the cgroups with per-cgroup series in the window, at
//!   every level (the landing page lists each, and those left out).
//! * `rank_by`: the family the rows are sorted by, busiest first: CPU
//!   cycles where they are counted per cgroup, else CPU time
//!   (`cpu-clock`), else context switches.
//! * `top`: at most [`TOP_CGROUPS`] outermost counted cgroups, each with
//!   at most [`TOP_CGROUPS`] rows in `nested` (recursively).
//! * Each row: `cgroup` (the path under the cgroup root), its other labels
//!   (`pod_uid`, `qos_class`, `container_id`), `counts` (each
//!   `perf_cgroup_*` family's increase, summed over CPUs), `derived`
//!   ([`CGROUP_DERIVED`], present where the inputs are counted per cgroup;
//!   `null` where the denominator did not move) and, where a family's
//!   counters never ran in the cgroup (`perf_cgroup_counter_state`
//!   `never_ran`), `not_counted` (family → why; perf's `<not counted>`):
//!   such a family has no count unless another CPU of it counted.

use super::{label, Formula};
use crate::problem::CounterState;
use crate::snapshot::{Family, Labels, Sample};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// The prefix of the per-cgroup families.
pub const CGROUP_PREFIX: &str = "perf_cgroup_";

/// Rows at each level of the top list.
pub const TOP_CGROUPS: usize = 10;

/// Per-cgroup families that are not counts of events: the group times
/// (per set, for the multiplexing), not summed into a row.
const GROUP_TIMES: &str = "perf_cgroup_group_";

/// The per-cgroup CPU time from `cpu.stat`, read every rank interval (not
/// at each collection): a frame's increase of it would be 0 or a jump, so
/// it is not in a row's counts (`cpu_share` is from `cpu-clock`).
const CPU_STAT_USAGE: &str = "perf_cgroup_cpu_usage_seconds_total";

/// How a row's derived value is computed.
#[derive(Debug, Clone, Copy)]
pub(super) enum CgroupFormula {
    /// A ratio or rate of the row's own counts.
    Own(Formula),
    /// The row's count over the node-level count of the same quantity.
    Share(&'static str, &'static str),
}

/// The derived values of a row.
pub(super) const CGROUP_DERIVED: &[(&str, CgroupFormula)] = &[
    (
        "cpu_share",
        CgroupFormula::Share(
            "perf_cgroup_cpu_clock_seconds_total",
            "perf_cpu_clock_seconds_total",
        ),
    ),
    (
        "cycles_share",
        CgroupFormula::Share("perf_cgroup_cpu_cycles_total", "perf_cpu_cycles_total"),
    ),
    (
        "ipc",
        CgroupFormula::Own(Formula::Ratio(
            "perf_cgroup_instructions_total",
            "perf_cgroup_cpu_cycles_total",
        )),
    ),
    (
        "context_switches_per_second",
        CgroupFormula::Own(Formula::Rate("perf_cgroup_context_switches_total")),
    ),
];

/// What the rows are ranked by, the first counted.
const RANK_BY: &[&str] = &[
    "perf_cgroup_cpu_cycles_total",
    "perf_cgroup_cpu_clock_seconds_total",
    "perf_cgroup_context_switches_total",
];

/// The top list (module docs).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CgroupTop {
    /// Cgroups with per-cgroup series in the window, at every level.
    pub counted: usize,
    /// The family the rows are sorted by (descending).
    pub rank_by: String,
    /// The busiest outermost cgroups.
    pub top: Vec<CgroupRow>,
}

/// One cgroup of the top list.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CgroupRow {
    /// The path under the cgroup root.
    pub cgroup: String,
    /// The series' other labels (`pod_uid`, `qos_class`, `container_id`).
    pub labels: BTreeMap<String, String>,
    /// `perf_cgroup_*` family → increase over the window, summed over CPUs.
    pub counts: BTreeMap<String, f64>,
    /// [`CGROUP_DERIVED`] whose inputs are counted.
    pub derived: BTreeMap<String, Option<f64>>,
    /// `perf_cgroup_*` family → why it was not counted in this cgroup in
    /// the window (a series of it `never_ran`: `perf_cgroup_counter_state`);
    /// such a family is in `counts` only where another series of it (a CPU)
    /// counted something. Not in the JSON when empty.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub not_counted: BTreeMap<String, String>,
    /// The busiest counted cgroups inside this one (already in its
    /// counts).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nested: Vec<CgroupRow>,
}

/// One cgroup while the frame is built.
struct Acc<'a> {
    path: &'a str,
    labels: &'a Labels,
    counts: Vec<(&'a str, f64)>,
    /// Families with a series that never ran in the window.
    not_counted: Vec<&'a str>,
}

/// Accumulates the per-cgroup families while a frame is built.
#[derive(Default)]
pub(super) struct CgroupRows<'a> {
    index: HashMap<&'a str, usize>,
    rows: Vec<Acc<'a>>,
}

impl<'a> CgroupRows<'a> {
    /// Adds one `perf_cgroup_*` family's increases (summed over CPUs when
    /// the family is per CPU).
    pub(super) fn add(&mut self, fam: &'a Family, deltas: impl Iterator<Item = (&'a Sample, f64)>) {
        if fam.name.starts_with(GROUP_TIMES) || fam.name == CPU_STAT_USAGE {
            return;
        }
        for (s, d) in deltas {
            let Some(path) = label(&s.labels, "cgroup") else {
                continue;
            };
            let i = self.row_of(path, &s.labels);
            let counts = &mut self.rows[i].counts;
            match counts.last_mut() {
                Some((name, v)) if *name == fam.name => *v += d,
                _ => counts.push((&fam.name, d)),
            }
        }
    }

    /// The row of `path`, added with `labels` when new.
    fn row_of(&mut self, path: &'a str, labels: &'a Labels) -> usize {
        let rows = &mut self.rows;
        *self.index.entry(path).or_insert_with(|| {
            rows.push(Acc {
                path,
                labels,
                counts: Vec::new(),
                not_counted: Vec::new(),
            });
            rows.len() - 1
        })
    }

    /// Notes the per-cgroup series that never ran in the window
    /// (`perf_cgroup_counter_state`, state `never_ran`): their families
    /// are not counted in their cgroups' rows.
    pub(super) fn states(&mut self, fam: &'a Family) {
        for s in &fam.samples {
            let (Some(path), Some(metric), Some(state)) = (
                label(&s.labels, "cgroup"),
                label(&s.labels, "metric"),
                label(&s.labels, "state"),
            ) else {
                continue;
            };
            if CounterState::parse(state).is_some_and(|x| !x.is_measurement()) {
                let i = self.row_of(path, &s.labels);
                let nc = &mut self.rows[i].not_counted;
                if !nc.contains(&metric) {
                    nc.push(metric);
                }
            }
        }
    }

    /// The top list, or `None` where no cgroup is counted.
    pub(super) fn finish(self, node: &BTreeMap<String, f64>, secs: f64) -> Option<CgroupTop> {
        if self.rows.is_empty() {
            return None;
        }
        let count = |a: &Acc, m: &str| a.counts.iter().find(|(n, _)| *n == m).map(|(_, v)| *v);
        let rank_by = RANK_BY
            .iter()
            .find(|m| {
                self.rows
                    .iter()
                    .any(|a| count(a, m).is_some_and(|v| v > 0.0))
            })
            .or_else(|| {
                RANK_BY
                    .iter()
                    .find(|m| self.rows.iter().any(|a| count(a, m).is_some()))
            })
            .copied()
            .unwrap_or(RANK_BY[1]);
        let rank: Vec<f64> = self
            .rows
            .iter()
            .map(|a| count(a, rank_by).unwrap_or(0.0))
            .collect();
        // The nearest counted ancestor of each cgroup.
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); self.rows.len()];
        let mut outer = Vec::new();
        for (i, a) in self.rows.iter().enumerate() {
            let mut p = a.path;
            let parent = loop {
                let Some(cut) = p.rfind('/') else { break None };
                p = &p[..cut];
                if let Some(&j) = self.index.get(p) {
                    break Some(j);
                }
            };
            match parent {
                Some(j) => children[j].push(i),
                None => outer.push(i),
            }
        }
        let b = Build {
            rows: &self.rows,
            children: &children,
            rank: &rank,
            node,
            secs,
        };
        Some(CgroupTop {
            counted: self.rows.len(),
            rank_by: rank_by.to_string(),
            top: b.level(outer),
        })
    }
}

/// Turns the accumulated rows into the list, level by level.
struct Build<'b, 'a> {
    rows: &'b [Acc<'a>],
    children: &'b [Vec<usize>],
    rank: &'b [f64],
    node: &'b BTreeMap<String, f64>,
    secs: f64,
}

impl Build<'_, '_> {
    /// The busiest [`TOP_CGROUPS`] of `ids`, with their nested rows.
    fn level(&self, mut ids: Vec<usize>) -> Vec<CgroupRow> {
        ids.sort_by(|&a, &b| {
            self.rank[b]
                .total_cmp(&self.rank[a])
                .then_with(|| self.rows[a].path.cmp(self.rows[b].path))
        });
        ids.truncate(TOP_CGROUPS);
        ids.into_iter().map(|i| self.row(i)).collect()
    }

    fn row(&self, i: usize) -> CgroupRow {
        let a = &self.rows[i];
        // A family that never ran here and counted nothing in the window
        // has no count: 0 would read as a measurement.
        let counts: BTreeMap<String, f64> = a
            .counts
            .iter()
            .filter(|(n, v)| *v > 0.0 || !a.not_counted.contains(n))
            .map(|(n, v)| (n.to_string(), *v))
            .collect();
        let why = CounterState::NeverRan.explain();
        let not_counted = a
            .not_counted
            .iter()
            .map(|n| (n.to_string(), why.to_string()))
            .collect();
        let mut derived = BTreeMap::new();
        for (name, form) in CGROUP_DERIVED {
            if let Some(v) = value(*form, &counts, self.node, self.secs) {
                derived.insert(name.to_string(), v);
            }
        }
        CgroupRow {
            cgroup: a.path.to_string(),
            labels: a
                .labels
                .iter()
                .filter(|(k, _)| !matches!(*k, "cgroup" | "cpu" | "metric" | "state"))
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
            counts,
            derived,
            not_counted,
            nested: self.level(self.children[i].clone()),
        }
    }
}

/// A row's derived value: `None` where an input is not counted,
/// `Some(None)` where the denominator did not move.
fn value(
    form: CgroupFormula,
    counts: &BTreeMap<String, f64>,
    node: &BTreeMap<String, f64>,
    secs: f64,
) -> Option<Option<f64>> {
    match form {
        CgroupFormula::Own(f) => super::eval(f, counts, secs).ok(),
        CgroupFormula::Share(own, total) => {
            let (v, t) = (counts.get(own)?, node.get(total)?);
            Some((*t > 0.0).then(|| v / t))
        }
    }
}
