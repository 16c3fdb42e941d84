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

use super::plan::{CgMetric, GroupPlan};
use super::series::Series;
use super::{CgroupBackend, CgroupIssue, CgroupTotals, SetGap};
use crate::cgroup::rank::read_usage;
use crate::cgroup::{Cgroup, Selection};
use crate::engine::trust::{must_move, Stall};
use crate::perf::{CgroupHandle, Counter, GroupReading, Kernel, PerfError};
use crate::problem::{log_reason, LogFields};
use crate::resolve::chain::Resolution;
use std::collections::BTreeMap;
use std::sync::Arc;
use tracing::Level;

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
    /// The stall detection's memory (`stalled`: it runs, its count does
    /// not move) of each member that must move (cycles, instructions:
    /// [`must_move`]), in member order: the others need none, and at
    /// 512 CPUs × 200 cgroups a word per counter is 19 MiB.
    pub(super) stalls: Box<[Stall]>,
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

/// Why a cgroup's group did not open at all (a refused member is an
/// issue of its metric instead).
#[derive(Debug)]
enum Unopenable {
    /// ENOENT and the directory is gone: the cgroup was removed.
    Gone(i32),
    /// ENOENT on a live directory while the same event opens system-wide
    /// on that CPU: the kernel has no `perf_event` state in the cgroup
    /// ([`crate::perf::cgroup`]'s notes).
    NoPerfEventState { event: String, cpu: u32 },
}

/// One counted cgroup.
#[derive(Debug)]
pub(super) struct Tracked {
    /// Kept open while counting (see [`crate::perf::cgroup`]).
    pub(super) handle: CgroupHandle,
    pub(super) groups: Vec<CgGroup>,
    /// Its totals, times and labels.
    pub(super) s: Series,
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
    /// Which count each metric is, for plausibility (`plausible.rs`).
    pub(super) roles: Vec<Option<crate::problem::plausible::Count>>,
}

impl PerfBackend {
    /// Fits the planned groups in the core PMUs' measured budget
    /// ([`Engine::counter_budgets`](crate::engine::Engine::counter_budgets)):
    /// a group larger than a PMU's free counters is split before it opens
    /// ([`CgroupIssue::Split`]), not left to never run.
    #[must_use]
    pub fn within_counters(mut self, budgets: &[crate::engine::PmuCounters]) -> Self {
        let free = |pmu: &str| {
            budgets
                .iter()
                .find(|b| b.pmu == pmu)
                .and_then(crate::engine::PmuCounters::plan_free)
        };
        let plan = std::mem::take(&mut self.plan);
        self.plan = super::plan::fit_to_counters(plan, &self.sets, free, &mut self.issues);
        self
    }

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
        let p = super::plan::plan(res, sets, per_cpu);
        let roles = super::plausible::roles(&p.plan, p.metrics.len());
        PerfBackend {
            kernel,
            metrics: p.metrics,
            sets: sets.to_vec(),
            plan: p.plan,
            cpus: p.cols,
            per_cpu,
            online: cpus.to_vec(),
            tracked: BTreeMap::new(),
            fd_budget,
            issues: p.issues,
            sync_issues: Vec::new(),
            buf: GroupReading::default(),
            roles,
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
                Err(why) => {
                    vanished = Some(why);
                    break;
                }
            }
        }
        self.plan = plan;
        match vanished {
            Some(Unopenable::Gone(errno)) => return Err(gone(errno)),
            Some(Unopenable::NoPerfEventState { event, cpu }) => {
                return Err(CgroupIssue::NoPerfEventState {
                    cgroup: cg.rel.clone(),
                    event,
                    cpu,
                })
            }
            None => {}
        }
        Ok(Tracked {
            handle,
            groups,
            s: Series::new(cg, self.metrics.len(), &self.sets, &self.cpus, self.per_cpu),
            read_errors: 0,
        })
    }

    /// Opens and enables one group; `Err` when the cgroup cannot be
    /// counted at all (gone, or no `perf_event` state in it: both ENOENT
    /// from the kernel), `Ok(None)` when nothing of it opened.
    /// A member the kernel refuses is left out of the group (and named);
    /// the plan then no longer matches the group's members, so a group is
    /// kept only whole.
    fn open_group(
        &mut self,
        cg: &CgroupHandle,
        pi: usize,
        gp: &GroupPlan,
    ) -> Result<Option<CgGroup>, Unopenable> {
        let mut members: Vec<CgMember> = Vec::with_capacity(gp.members.len());
        for (metric, attr, _) in &gp.members {
            let leader = members.first().map(|m| &m.counter);
            match self.kernel.open_in_cgroup(attr, cg, gp.cpu, leader) {
                Ok(counter) => members.push(CgMember { counter, high: 0.0 }),
                Err(e) if vanishing(e.errno) && !cg.dir.is_dir() => {
                    return Err(Unopenable::Gone(e.errno))
                }
                // ESRCH, or a member's ENOENT after its leader opened in the
                // same cgroup, while the event opens system-wide: the cgroup
                // is being removed (its directory not yet gone), not an
                // event this host lacks.
                Err(e)
                    if (e.errno == libc::ESRCH
                        || (e.errno == libc::ENOENT && leader.is_some()))
                        && self.kernel.open(attr, gp.cpu, None).is_ok() =>
                {
                    return Err(Unopenable::Gone(e.errno))
                }
                // A leader's ENOENT in a live cgroup: the encoding, or the
                // cgroup? The same event system-wide on that CPU tells.
                Err(e)
                    if e.errno == libc::ENOENT
                        && leader.is_none()
                        && self.kernel.open(attr, gp.cpu, None).is_ok() =>
                {
                    return Err(Unopenable::NoPerfEventState {
                        event: attr.event.clone(),
                        cpu: gp.cpu,
                    });
                }
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
            stalls: gp
                .members
                .iter()
                .filter(|(_, attr, _)| must_move(attr))
                .map(|_| Stall::default())
                .collect(),
            last_enabled: 0,
            last_running: 0,
        }))
    }

    fn open_failed(&mut self, metric: usize, e: &PerfError) {
        super::plan::open_failed(&mut self.issues, &self.metrics, metric, e);
    }
}

/// The errnos of a cgroup removed while its counters open: ENOENT (its
/// directory, or its `perf_event` state, went) and ESRCH.
fn vanishing(errno: i32) -> bool {
    matches!(errno, libc::ENOENT | libc::ESRCH)
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
                    log_reason!(
                        Level::INFO,
                        LogFields::of(&issue),
                        [],
                        [],
                        "cgroup not counted"
                    );
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

    fn judge_usage(
        &mut self,
        usage: &crate::cgroup::rank::Usage,
        max: Option<(f64, crate::problem::plausible::FreqSource)>,
    ) {
        let series = self.tracked.iter_mut().map(|(r, t)| (r, &mut t.s));
        super::plausible::judge_each(series, usage, &self.roles, self.cpus.len(), max);
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
        let returned = super::plan::returned(&self.online, online);
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
        let series = self.tracked.iter().map(|(rel, t)| (rel, &t.s));
        super::series::totals(&self.metrics, &self.sets, &self.cpus, self.per_cpu, series)
    }

    fn carry_over(&mut self, old: CgroupTotals) -> usize {
        super::series::carry_over(
            &self.metrics,
            &self.sets,
            &self.cpus,
            self.per_cpu,
            &mut self.tracked,
            |t| &mut t.s,
            old,
        )
    }
}

impl PerfBackend {
    /// Planned sets with no group open in any counted cgroup (while some
    /// cgroup is counted).
    pub(super) fn unopened(&self) -> Vec<CgroupIssue> {
        if self.tracked.is_empty() {
            return Vec::new();
        }
        let mut open = vec![false; self.sets.len()];
        for t in self.tracked.values() {
            for g in &t.groups {
                if let Some(o) = open.get_mut(g.set) {
                    *o = true;
                }
            }
        }
        self.sets
            .iter()
            .enumerate()
            .filter(|(i, _)| !open[*i] && self.planned(*i))
            .map(|(_, set)| CgroupIssue::SetUnavailable {
                set: set.clone(),
                why: SetGap::OpenFailed,
            })
            .collect()
    }
}
