//! The `perf` backend: for each counted cgroup, each CPU and each set of
//! `cgroups.sets`, one group opened with `PERF_FLAG_PID_CGROUP` (the
//! cgroup directory's fd as `pid`), read with one `read()` and scaled for
//! multiplexing exactly as node-level groups are ([`mux_factor`],
//! [`monotonic_delta`]). A cgroup is counted whole or not at all: when the
//! file descriptor budget cannot hold every new cgroup, the busiest (by
//! `cpu.stat` usage) are opened first and the rest are left out and named.
//!
//! [`mux_factor`]: crate::engine::mux_factor
//! [`monotonic_delta`]: crate::engine::monotonic_delta

use super::{CgroupBackend, CgroupIssue, CgroupTotals, Signature};
use crate::cgroup::rank::read_usage;
use crate::cgroup::{Cgroup, Selection};
use crate::perf::{CgroupHandle, Counter, EventAttr, GroupReading, Kernel, PerfError};
use crate::resolve::chain::{Resolution, Status};
use crate::snapshot::Labels;
use std::collections::BTreeMap;
use std::sync::Arc;

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
type PlannedMember = (usize, EventAttr, f64);

/// One planned group on one CPU: its set and members.
#[derive(Debug, Clone)]
pub(super) struct GroupPlan {
    set: usize,
    cpu: u32,
    pub(super) members: Vec<PlannedMember>,
}

/// An open per-cgroup counter: kept small, there are cgroups × CPUs ×
/// events of them (its event and scale are in the group's plan).
#[derive(Debug)]
pub(super) struct CgMember {
    pub(super) counter: Counter,
    /// High-water mark of the scaled estimate (raw units).
    pub(super) high: f64,
}

#[derive(Debug)]
pub(super) struct CgGroup {
    /// Index into `PerfBackend::plan`: its set, CPU and members' events.
    pub(super) plan: usize,
    pub(super) set: usize,
    pub(super) cpu: u32,
    /// Column of its CPU (0 when summed over CPUs).
    pub(super) col: usize,
    pub(super) members: Vec<CgMember>,
    pub(super) last_enabled: u64,
    pub(super) last_running: u64,
}

impl Drop for CgGroup {
    fn drop(&mut self) {
        // Members before the leader: closing the leader first would turn
        // the members into singleton groups for a moment.
        while self.members.len() > 1 {
            self.members.pop();
        }
    }
}

/// One counted cgroup.
#[derive(Debug)]
pub(super) struct Tracked {
    pub(super) rel: String,
    /// Kept open while counting (see [`crate::perf::cgroup`]).
    pub(super) handle: CgroupHandle,
    pub(super) groups: Vec<CgGroup>,
    /// Per (metric, column): the total in base units.
    pub(super) values: Vec<f64>,
    pub(super) has_data: Vec<bool>,
    /// Per column: the series labels.
    pub(super) labels: Vec<Labels>,
    /// Per (set, column): enabled and running seconds, and labels.
    pub(super) times: Vec<(f64, f64)>,
    pub(super) time_labels: Vec<Labels>,
    /// Per (set, column): whether a group of that set is open on a CPU of
    /// the column, as of the last read (refreshed in place).
    pub(super) time_open: Vec<bool>,
    pub(super) start_ns: u64,
    pub(super) read_errors: u64,
}

/// The `perf` backend. See the [module docs](self).
#[derive(Debug)]
pub struct PerfBackend {
    pub(super) kernel: Arc<dyn Kernel>,
    pub(super) metrics: Vec<CgMetric>,
    pub(super) sets: Vec<String>,
    pub(super) plan: Vec<GroupPlan>,
    /// The CPUs of the columns (one column, summed, unless per CPU).
    pub(super) cpus: Vec<u32>,
    pub(super) per_cpu: bool,
    /// The CPUs online at the last hotplug check.
    online: Vec<u32>,
    pub(super) tracked: BTreeMap<String, Tracked>,
    fd_budget: Option<usize>,
    issues: Vec<CgroupIssue>,
    /// Per-sync issues (gone, fd budget), replaced at every sync.
    sync_issues: Vec<CgroupIssue>,
    pub(super) buf: GroupReading,
}

fn now_unix_nanos() -> u64 {
    super::super::now_unix_nanos()
}

impl PerfBackend {
    /// Plans the per-cgroup groups of `sets` from a resolution, opened on
    /// the CPUs of `cpus` that the metrics cover (the online CPUs; others
    /// when they come online): every available counter metric of
    /// those sets, on its core or software PMU. Metrics of uncore PMUs are
    /// refused ([`CgroupIssue::Uncore`]). `fd_budget` bounds the
    /// descriptors opened (`None`: no bound).
    pub fn new(
        kernel: Arc<dyn Kernel>,
        res: &Resolution,
        sets: &[String],
        cpus: &[u32],
        per_cpu: bool,
        fd_budget: Option<usize>,
    ) -> Self {
        let mut metrics = Vec::new();
        let mut issues = Vec::new();
        let mut plans: BTreeMap<(usize, String, u32), Vec<PlannedMember>> = BTreeMap::new();
        let mut all_cpus = std::collections::BTreeSet::new();
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
                            )
                        })
                        .collect(),
                ),
            });
            for inst in &m.instances {
                let i = &inst.inst;
                for &cpu in &i.cpus {
                    all_cpus.insert(cpu);
                    plans.entry((set, i.pmu.clone(), cpu)).or_default().push((
                        mi,
                        EventAttr {
                            type_: i.type_,
                            config: i.config,
                            event: inst.spec.clone(),
                            pmu: i.pmu.clone(),
                        },
                        i.scale,
                    ));
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
            .map(|((set, _, cpu), members)| GroupPlan { set, cpu, members })
            .collect();
        // Every CPU the metrics cover, online now or not: a CPU that comes
        // online later gets its groups then (`cpus_changed`).
        let cols: Vec<u32> = if per_cpu {
            all_cpus.into_iter().collect()
        } else {
            vec![0]
        };
        PerfBackend {
            kernel,
            metrics,
            sets: sets.to_vec(),
            plan,
            cpus: cols,
            per_cpu,
            online: cpus.to_vec(),
            tracked: BTreeMap::new(),
            fd_budget,
            issues,
            sync_issues: Vec::new(),
            buf: GroupReading::default(),
        }
    }

    /// Whether set `set` (an index of `sets`) has a planned group.
    pub(super) fn planned(&self, set: usize) -> bool {
        self.plan.iter().any(|g| g.set == set)
    }

    /// Descriptors one cgroup needs: its directory and every planned
    /// counter.
    pub fn fds_per_cgroup(&self) -> usize {
        1 + self.plan.iter().map(|g| g.members.len()).sum::<usize>()
    }

    fn col_of(&self, cpu: u32) -> usize {
        if self.per_cpu {
            self.cpus.iter().position(|&c| c == cpu).unwrap_or(0)
        } else {
            0
        }
    }

    fn labels_of(&self, cg: &Cgroup) -> Vec<(&'static str, String)> {
        if cg.labels.is_empty() {
            vec![("cgroup", cg.rel.clone())]
        } else {
            cg.labels.clone()
        }
    }

    /// Opens one cgroup's groups; `Err` with the issue when it vanished.
    fn open_cgroup(&mut self, cg: &Cgroup) -> Result<Tracked, CgroupIssue> {
        let gone = |errno| CgroupIssue::Gone {
            cgroup: cg.rel.clone(),
            errno,
        };
        let handle = self
            .kernel
            .open_cgroup(&cg.dir)
            .map_err(|e| gone(e.errno))?;
        let base = self.labels_of(cg);
        let ncols = self.cpus.len();
        let labels: Vec<Labels> = self
            .cpus
            .iter()
            .map(|c| {
                let mut l = base.clone();
                if self.per_cpu {
                    l.push(("cpu", c.to_string()));
                }
                Labels::new(l)
            })
            .collect();
        let mut time_labels = Vec::with_capacity(self.sets.len() * ncols);
        for s in &self.sets {
            for c in &self.cpus {
                let mut l = base.clone();
                l.push(("set", s.clone()));
                if self.per_cpu {
                    l.push(("cpu", c.to_string()));
                }
                time_labels.push(Labels::new(l));
            }
        }
        let mut groups = Vec::with_capacity(self.plan.len());
        let plan = std::mem::take(&mut self.plan);
        let mut vanished = None;
        for (pi, gp) in plan.iter().enumerate() {
            if !self.online.contains(&gp.cpu) {
                continue;
            }
            match self.open_group(&handle, pi, gp) {
                Ok(Some(g)) => groups.push(g),
                Ok(None) => {}
                Err(errno) => {
                    vanished = Some(errno);
                    break;
                }
            }
        }
        self.plan = plan;
        if let Some(errno) = vanished {
            return Err(gone(errno));
        }
        Ok(Tracked {
            rel: cg.rel.clone(),
            handle,
            groups,
            values: vec![0.0; self.metrics.len() * ncols],
            has_data: vec![false; self.metrics.len() * ncols],
            labels,
            times: vec![(0.0, 0.0); self.sets.len() * ncols],
            time_labels,
            time_open: vec![false; self.sets.len() * ncols],
            start_ns: now_unix_nanos(),
            read_errors: 0,
        })
    }

    /// Opens and enables one group; `Err(errno)` when the cgroup is gone
    /// (ENOENT from the kernel), `Ok(None)` when nothing of it opened.
    /// A member the kernel refuses is left out of the group (and named);
    /// the plan then no longer matches the group's members, so a group is
    /// kept only whole.
    fn open_group(
        &mut self,
        cg: &CgroupHandle,
        pi: usize,
        gp: &GroupPlan,
    ) -> Result<Option<CgGroup>, i32> {
        let mut members: Vec<CgMember> = Vec::with_capacity(gp.members.len());
        for (metric, attr, _) in &gp.members {
            let leader = members.first().map(|m| &m.counter);
            match self.kernel.open_in_cgroup(attr, cg, gp.cpu, leader) {
                Ok(counter) => members.push(CgMember { counter, high: 0.0 }),
                Err(e) if e.errno == libc::ENOENT && !cg.dir.is_dir() => return Err(e.errno),
                Err(e) => {
                    self.open_failed(*metric, &e);
                    return Ok(None);
                }
            }
        }
        let (Some(first), Some((metric, attr, _))) = (members.first(), gp.members.first()) else {
            return Ok(None);
        };
        if let Err(e) = self.kernel.enable_group(&first.counter, attr, gp.cpu) {
            self.open_failed(*metric, &e);
            return Ok(None);
        }
        Ok(Some(CgGroup {
            plan: pi,
            set: gp.set,
            cpu: gp.cpu,
            col: self.col_of(gp.cpu),
            members,
            last_enabled: 0,
            last_running: 0,
        }))
    }

    fn open_failed(&mut self, metric: usize, e: &PerfError) {
        let issue = CgroupIssue::Open {
            metric: self.metrics[metric].signature.0.clone(),
            problem: e.problem(),
        };
        if !self.issues.contains(&issue) && self.issues.len() < 32 {
            tracing::warn!(%issue, what_to_do = %issue.what_to_do(), "per-cgroup counter unavailable");
            self.issues.push(issue);
        }
    }
}

impl CgroupBackend for PerfBackend {
    fn name(&self) -> &'static str {
        "perf"
    }

    fn sync(&mut self, sel: &Selection) {
        let keep: std::collections::HashSet<&str> =
            sel.counted.iter().map(|c| c.rel.as_str()).collect();
        let before = self.tracked.len();
        self.tracked.retain(|rel, _| keep.contains(rel.as_str()));
        let closed = before - self.tracked.len();
        let per = self.fds_per_cgroup();
        let mut room = self.fd_budget.map(|b| b.saturating_sub(self.open_fds()));
        self.sync_issues.clear();
        let mut opened = 0;
        let mut new: Vec<&Cgroup> = sel
            .counted
            .iter()
            .filter(|c| !self.tracked.contains_key(&c.rel))
            .collect();
        if room.is_some_and(|r| r < new.len().saturating_mul(per)) {
            // Not all fit: the busiest (by `cpu.stat` usage) first.
            new.sort_by_cached_key(|c| std::cmp::Reverse(read_usage(&c.dir).unwrap_or(0)));
        }
        for cg in new {
            if let Some(r) = room {
                if r < per {
                    self.sync_issues.push(CgroupIssue::FdBudget {
                        cgroup: cg.rel.clone(),
                        per_cgroup: per,
                        budget: self.fd_budget.unwrap_or(0),
                    });
                    continue;
                }
            }
            match self.open_cgroup(cg) {
                Ok(t) => {
                    if let Some(r) = &mut room {
                        *r -= per;
                    }
                    opened += 1;
                    self.tracked.insert(cg.rel.clone(), t);
                }
                Err(issue) => {
                    tracing::info!(%issue, "cgroup not counted");
                    self.sync_issues.push(issue);
                }
            }
        }
        let starved = self
            .sync_issues
            .iter()
            .filter(|i| matches!(i, CgroupIssue::FdBudget { .. }))
            .count();
        if starved > 0 {
            tracing::warn!(
                left_out = starved,
                per_cgroup = per,
                budget = self.fd_budget.unwrap_or(0),
                "cgroups left out for want of file descriptors (raise RLIMIT_NOFILE or lower cgroups.max_cgroups)"
            );
        }
        tracing::debug!(
            opened,
            closed,
            counted = self.tracked.len(),
            "cgroups synced"
        );
    }

    fn read(&mut self) {
        self.read_all();
    }

    fn families(&self, out: &mut Vec<crate::snapshot::Family>) {
        self.push_families(out);
    }

    fn issues(&self) -> Vec<CgroupIssue> {
        let mut v: Vec<CgroupIssue> = self
            .issues
            .iter()
            .chain(&self.sync_issues)
            .cloned()
            .collect();
        v.extend(self.unopened());
        v
    }

    fn counted(&self) -> Vec<String> {
        self.tracked.keys().cloned().collect()
    }

    fn open_fds(&self) -> usize {
        self.tracked
            .values()
            .map(|t| 1 + t.groups.iter().map(|g| g.members.len()).sum::<usize>())
            .sum()
    }

    /// The kernel does not re-enable a CPU's events when it comes back
    /// online: every group of a CPU that returned is reopened (its totals
    /// continue; the new counters start from 0). Groups of a CPU that went
    /// offline stay: they read their final counts.
    fn cpus_changed(&mut self, online: &[u32]) {
        let returned: Vec<u32> = online
            .iter()
            .copied()
            .filter(|c| !self.online.contains(c))
            .collect();
        self.online = online.to_vec();
        if returned.is_empty() {
            return;
        }
        let plan = std::mem::take(&mut self.plan);
        let mut tracked = std::mem::take(&mut self.tracked);
        for t in tracked.values_mut() {
            t.groups.retain(|g| !returned.contains(&g.cpu));
            for (pi, gp) in plan.iter().enumerate() {
                if returned.contains(&gp.cpu) {
                    if let Ok(Some(g)) = self.open_group(&t.handle, pi, gp) {
                        t.groups.push(g);
                    }
                }
            }
        }
        self.tracked = tracked;
        self.plan = plan;
        tracing::info!(cpus = ?returned, "per-cgroup groups reopened on CPUs back online");
    }

    fn reads(&self) -> usize {
        self.tracked.values().map(|t| t.groups.len()).sum()
    }

    fn totals(&self) -> CgroupTotals {
        let mut series = Vec::new();
        for t in self.tracked.values() {
            for (mi, m) in self.metrics.iter().enumerate() {
                for (ci, &cpu) in self.cpus.iter().enumerate() {
                    let k = mi * self.cpus.len() + ci;
                    if t.has_data[k] {
                        series.push((
                            t.rel.clone(),
                            m.signature.clone(),
                            self.per_cpu.then_some(cpu),
                            t.values[k],
                            t.start_ns,
                        ));
                    }
                }
            }
        }
        CgroupTotals { series }
    }

    fn carry_over(&mut self, old: CgroupTotals) -> usize {
        let mut n = 0;
        let ncols = self.cpus.len();
        for (rel, sig, cpu, value, start) in old.series {
            let Some(t) = self.tracked.get_mut(&rel) else {
                continue;
            };
            let Some(mi) = self.metrics.iter().position(|m| m.signature == sig) else {
                continue;
            };
            let ci = match (cpu, self.per_cpu) {
                (None, false) => 0,
                (Some(c), true) => match self.cpus.iter().position(|&x| x == c) {
                    Some(ci) => ci,
                    None => continue,
                },
                _ => continue,
            };
            let k = mi * ncols + ci;
            t.values[k] += value;
            t.has_data[k] = true;
            t.start_ns = t.start_ns.min(start.max(1));
            n += 1;
        }
        n
    }
}
