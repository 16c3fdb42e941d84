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
//!   "derived": [ { "name": "ipc", "format": "ratio" }, { "name": "cpus_utilized", "format": "ratio" }, ... ],
//!   "top": [
//!     { "cgroup": "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice",
//!       "labels": { "pod_uid": "<uid>", "qos_class": "burstable" },
//!       "counts": { "perf_cgroup_cpu_clock_seconds_total": 0.42, ... },
//!       "derived": { "cpus_utilized": 0.42, "context_switches_per_second": 310.0, "ipc": null, ... },
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
//! * `derived`: the derived values of the rows, each with how to show it
//!   (`format`, from its `unit:`: `percent` for a share, `rate` per
//!   second, `ratio` a plain number): the entries of the served derived
//!   table (the config's `derived:`, or the default's) all of whose inputs
//!   are counted per cgroup (a metric whose `perf_cgroup_*` family is in
//!   the collection, another such entry, `duration_time`), in the table's
//!   order, evaluated by [`DerivedTable::evaluate`] over the row's counts
//!   as node-wide over the node's. An entry with an input not counted per
//!   cgroup has no per-cgroup value (a node-wide count in a cgroup's ratio
//!   would say something false).
//! * `top`: at most [`TOP_CGROUPS`] outermost counted cgroups, each with
//!   at most [`TOP_CGROUPS`] rows in `nested` (recursively).
//! * Each row: `cgroup` (the path under the cgroup root), its other labels
//!   (`pod_uid`, `qos_class`, `container_id`), `counts` (each
//!   `perf_cgroup_*` family's increase, summed over CPUs), `derived`
//!   (the values of `derived`; `null` where undefined in the window, a
//!   denominator that did not move; left out where an input has no count
//!   in this cgroup, and then in `unavailable`, with the input it lacks
//!   and why, as the frame's `unavailable` says the node's) and, where a family's
//!   counters never ran in the cgroup (`perf_cgroup_counter_state`
//!   `never_ran`), `not_counted` (family → why; perf's `<not counted>`):
//!   such a family has no count unless another CPU of it counted.

use super::{label, Format};
use crate::config::derived::{DerivedTable, Input, Source};
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
    /// The derived values of the rows: the entries of the served derived
    /// table all of whose inputs are counted per cgroup, in its order.
    pub derived: Vec<CgroupDerived>,
    /// The busiest outermost cgroups.
    pub top: Vec<CgroupRow>,
}

/// A derived value the rows have (a column of the page's table).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CgroupDerived {
    /// The derived table's name of it.
    pub name: String,
    /// How to show it ([`Format::of`] its `unit:`).
    pub format: Format,
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
    /// The [`CgroupTop::derived`] values of this cgroup: `None` (JSON
    /// `null`) where undefined in the window (a zero divisor); left out
    /// where an input has no count in this cgroup (it never ran here),
    /// and then in `unavailable`.
    pub derived: BTreeMap<String, Option<f64>>,
    /// The [`CgroupTop::derived`] values this cgroup has none of, with why:
    /// the input it lacks and that input's reason, as the frame's
    /// `unavailable` says the node's (`needs perf_cgroup_cpu_cycles_total:
    /// ...`). Not in the JSON when empty.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub unavailable: BTreeMap<String, String>,
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
    /// The per-cgroup families of the collection (counted per cgroup).
    families: Vec<&'a str>,
}

impl<'a> CgroupRows<'a> {
    /// Adds one `perf_cgroup_*` family's increases (summed over CPUs when
    /// the family is per CPU).
    pub(super) fn add(&mut self, fam: &'a Family, deltas: impl Iterator<Item = (&'a Sample, f64)>) {
        if fam.name.starts_with(GROUP_TIMES) || fam.name == CPU_STAT_USAGE {
            return;
        }
        self.families.push(&fam.name);
        for (s, d) in deltas {
            let Some(path) = label(&s.labels, "cgroup") else {
                continue;
            };
            let i = self.row_of(path, &s.labels);
            let counts = &mut self.rows[i].counts;
            match counts.last_mut() {
                Some((name, v)) if *name == &*fam.name => *v += d,
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

    /// The top list, or `None` where no cgroup is counted; the rows'
    /// derived values are `table`'s entries that apply per cgroup
    /// ([`per_cgroup`]), over the window of `secs`.
    pub(super) fn finish(self, table: &DerivedTable, secs: f64) -> Option<CgroupTop> {
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
        let table = per_cgroup(table, &self.families);
        let b = Build {
            rows: &self.rows,
            children: &children,
            rank: &rank,
            table: &table,
            secs,
        };
        Some(CgroupTop {
            counted: self.rows.len(),
            rank_by: rank_by.to_string(),
            derived: table
                .metrics
                .iter()
                .map(|d| CgroupDerived {
                    name: d.name.clone(),
                    format: Format::of(d),
                })
                .collect(),
            top: b.level(outer),
        })
    }
}

/// Turns the accumulated rows into the list, level by level.
struct Build<'b, 'a> {
    rows: &'b [Acc<'a>],
    children: &'b [Vec<usize>],
    rank: &'b [f64],
    /// The entries that apply per cgroup, reading the per-cgroup families.
    table: &'b DerivedTable,
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
        let not_counted: BTreeMap<String, String> = a
            .not_counted
            .iter()
            .map(|n| (n.to_string(), why.to_string()))
            .collect();
        let (derived, unavailable) = values(self.table, &counts, &not_counted, self.secs);
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
            unavailable,
            not_counted,
            nested: self.level(self.children[i].clone()),
        }
    }
}

/// The family a node metric is counted in per cgroup: `perf_` becomes
/// `perf_cgroup_`, as the engine names them.
fn cgroup_family(node: &str) -> String {
    format!(
        "{CGROUP_PREFIX}{}",
        node.strip_prefix("perf_").unwrap_or(node)
    )
}

/// The entries of `table` that apply per cgroup: all of whose inputs are
/// counted per cgroup (a metric whose family is among `families`, another
/// such entry, or the window's length), with their metric inputs reading
/// the per-cgroup families. An entry with an input that is not counted
/// per cgroup has no per-cgroup value at all: a node-wide count in a
/// cgroup's ratio would say something false.
fn per_cgroup(table: &DerivedTable, families: &[&str]) -> DerivedTable {
    let mut out = DerivedTable::default();
    for d in &table.metrics {
        let mut d = d.clone();
        if !d
            .formula
            .inputs
            .iter_mut()
            .all(|i| to_cgroup(i, families, &out))
        {
            continue;
        }
        // A probe of something not counted per cgroup is 0, as in perf.
        d.formula
            .probes
            .retain_mut(|i| to_cgroup(i, families, &out));
        d.threshold = None;
        out.metrics.push(d);
    }
    out
}

/// Makes `input` read its per-cgroup family; whether it is counted per
/// cgroup (`families`; a derived input: whether it is in `done`, the
/// entries that apply).
fn to_cgroup(input: &mut Input, families: &[&str], done: &DerivedTable) -> bool {
    match &input.source {
        Source::Metric(m) => {
            let f = cgroup_family(m);
            let counted = families.contains(&f.as_str());
            input.source = Source::Metric(f);
            counted
        }
        Source::Derived(x) => done.get(x).is_some(),
        Source::Duration => true,
    }
}

/// A row's values of the per-cgroup `table` over the window: `None`
/// where undefined (a zero divisor, or a derived input that is), and
/// those without a value in the second map, with why: the operand they
/// lack and its reason, said as the node's are
/// ([`why_missing`](super::why_missing)); a family the row has no count
/// of never ran in the cgroup (`not_counted`) or counted nothing there.
fn values(
    table: &DerivedTable,
    counts: &BTreeMap<String, f64>,
    not_counted: &BTreeMap<String, String>,
    secs: f64,
) -> (BTreeMap<String, Option<f64>>, BTreeMap<String, String>) {
    let mut out = BTreeMap::new();
    let mut unavailable: BTreeMap<String, String> = BTreeMap::new();
    let all = table.evaluate(
        &|m| counts.get(m).copied(),
        (secs > 0.0).then_some(secs),
        &|l| Err(format!("`{l}` has no value on this host")),
    );
    for (name, v) in all {
        let v = match v {
            Ok(v) => Some(v),
            Err(e) => {
                let why = |x: &str| {
                    unavailable.get(x).cloned().or_else(|| {
                        x.starts_with(CGROUP_PREFIX).then(|| {
                            not_counted
                                .get(x)
                                .cloned()
                                .unwrap_or_else(|| NO_COUNT.to_string())
                        })
                    })
                };
                match super::why_missing(table, name, e, &why) {
                    Some(why) => {
                        unavailable.insert(name.to_string(), why);
                        continue;
                    }
                    None => None,
                }
            }
        };
        out.insert(name.to_string(), v);
    }
    (out, unavailable)
}

/// Why a cgroup has no count of a family that did not say it never ran.
const NO_COUNT: &str = "no count in this cgroup in the window";
