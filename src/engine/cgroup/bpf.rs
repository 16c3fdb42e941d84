//! The `bpf` backend: the counters of `cgroups.sets` open once per CPU
//! (one group per set, PMU and CPU, as the `perf` backend plans them, but
//! system-wide), and an in-kernel program charging their deltas to the
//! cgroup that was running at every context switch
//! ([`crate::perf::bpf`]). File descriptors: CPUs × events (+ the
//! program's few), whatever the number of cgroups; a `context-switches`
//! member is not opened, the program counts it ([`counted_by_program`]).
//!
//! * **Slots.** Each counted cgroup gets a slot; the program charges the
//!   running cgroup and every counted ancestor (a cgroup counts its
//!   descendants, as with `PERF_FLAG_PID_CGROUP` on cgroup v2). The cgroup
//!   id is the directory's inode number under the cgroupfs root. A removed
//!   cgroup's map entry is deleted at sync, its series leave, and its slot
//!   is reused from the next sync on (so a charge in flight on another CPU
//!   cannot land in the new owner's counts).
//! * **Scaling.** Each (cgroup, CPU, counter) has the count and the
//!   enabled and running times charged to it; the estimate is
//!   `count * enabled / running` folded into monotonic totals
//!   ([`mux_factor`], [`monotonic_delta`]), and judged into counter states
//!   (`perf_cgroup_counter_state`), exactly as for a `perf` group.
//!   A group of software counters with a clock takes its times from the
//!   clock's count ([`clock_of`]): the kernel always schedules such a
//!   group, so it runs exactly while enabled.
//! * **Hotplug.** A CPU back online gets new counters; the program starts
//!   a new generation of readings there. The charged counts live in the
//!   maps, so nothing counted is lost.
//!
//! [`mux_factor`]: crate::engine::mux_factor
//! [`monotonic_delta`]: crate::engine::monotonic_delta

use super::plan::{CgMetric, GroupPlan};
use super::series::Series;
use super::{CgroupBackend, CgroupIssue, CgroupTotals};
use crate::cgroup::Selection;
use crate::perf::bpf::{BpfCounter, BpfError, Charged, Reads, MAX_EVENTS, MAX_LEVELS, MAX_OWNERS};
use crate::perf::{Counter, Kernel};
use crate::resolve::chain::Resolution;
use std::collections::BTreeMap;
use std::sync::Arc;

/// One counter open on one CPU: its index `k` there and what it counts.
#[derive(Debug, Clone, Copy)]
struct Slot {
    cpu: u32,
    k: u32,
    metric: usize,
    scale: f64,
    /// Its set, when it leads the set's group (its times are the set's).
    leads: Option<usize>,
    /// The k of the counter on its CPU whose times scale it: its group's
    /// leader, or its group's clock ([`Self::clock_times`]).
    leader_k: u32,
    /// Whether the times at `leader_k` are that counter's count: a group
    /// of software counters with a clock ([`clock_of`]).
    clock_times: bool,
    col: usize,
    /// Whether it must move while its cgroup runs
    /// ([`crate::engine::trust::must_move`]).
    must_move: bool,
}

/// One counted cgroup.
#[derive(Debug)]
struct Tracked {
    id: u64,
    slot: u32,
    s: Series,
    /// Per counter of `BpfBackend::slots`: the high-water mark of the
    /// estimate and the last enabled and running times.
    high: Vec<f64>,
    last: Vec<(u64, u64)>,
    /// Per counter: its stall detection's memory.
    stall: Vec<crate::engine::trust::Stall>,
}

/// The `bpf` backend. See the [module docs](self).
#[derive(Debug)]
pub struct BpfBackend {
    kernel: Arc<dyn Kernel>,
    bpf: BpfCounter,
    metrics: Vec<CgMetric>,
    sets: Vec<String>,
    plan: Vec<GroupPlan>,
    cols: Vec<u32>,
    per_cpu: bool,
    online: Vec<u32>,
    /// The open groups per CPU (leader first).
    /// A member the program counts without a counter is `None`.
    groups: BTreeMap<u32, Vec<Vec<Option<Counter>>>>,
    /// Every counter the program reads, by CPU then `k`.
    slots: Vec<Slot>,
    tracked: BTreeMap<String, Tracked>,
    /// Slots free now, and slots released at the last sync.
    free: Vec<u32>,
    cooling: Vec<u32>,
    next_slot: u32,
    issues: Vec<CgroupIssue>,
    sync_issues: Vec<CgroupIssue>,
    charge_errors: u64,
    /// Per k, the last read of one cgroup's slot (per possible CPU).
    buf: Vec<Vec<Charged>>,
    /// Which count each metric is, for plausibility (`plausible.rs`).
    roles: Vec<Option<crate::problem::plausible::Count>>,
}

impl BpfBackend {
    /// Loads the program for up to `max_cgroups` counted cgroups, plans
    /// the counters of `sets` as the `perf` backend does and opens them on
    /// the online CPUs `cpus`. Fails when the program cannot be loaded or
    /// attached (the caller says why and what to do).
    pub fn new(
        kernel: Arc<dyn Kernel>,
        res: &Resolution,
        sets: &[String],
        cpus: &[u32],
        per_cpu: bool,
        max_cgroups: usize,
    ) -> Result<Self, BpfError> {
        let p = super::plan::plan(res, sets, per_cpu);
        let per_cpu_events = (0..=p.plan.iter().map(|g| g.cpu).max().unwrap_or(0))
            .map(|c| {
                p.plan
                    .iter()
                    .filter(|g| g.cpu == c)
                    .map(|g| g.members.len())
                    .sum::<usize>()
            })
            .max()
            .unwrap_or(0);
        // Twice the cgroups: a released slot rests one sync before reuse.
        let max_slots = u32::try_from(max_cgroups.saturating_mul(2).max(2)).unwrap_or(u32::MAX);
        let bpf = BpfCounter::load(max_slots, per_cpu_events as u32)?;
        let roles = super::plausible::roles(&p.plan, p.metrics.len());
        let mut b = BpfBackend {
            roles,
            kernel,
            bpf,
            metrics: p.metrics,
            sets: sets.to_vec(),
            plan: p.plan,
            cols: p.cols,
            per_cpu,
            online: cpus.to_vec(),
            groups: BTreeMap::new(),
            slots: Vec::new(),
            tracked: BTreeMap::new(),
            free: Vec::new(),
            cooling: Vec::new(),
            next_slot: 0,
            issues: p.issues,
            sync_issues: Vec::new(),
            charge_errors: 0,
            buf: Vec::new(),
        };
        for &cpu in cpus {
            b.open_cpu(cpu)?;
        }
        Ok(b)
    }

    /// How many times the kernel runs the switch program per switch (its
    /// links): 1 once loaded, whatever the CPUs opened or reopened.
    pub fn switch_attachments(&self) -> Result<usize, BpfError> {
        self.bpf.switch_attachments()
    }

    /// How the program reads `cpu`'s counters (which reads it spares).
    pub fn reads(&self, cpu: u32) -> Result<Reads, BpfError> {
        self.bpf.reads(cpu)
    }

    /// Opens `cpu`'s groups, puts them in the program's maps and attaches
    /// the switch program (once). A counter the kernel refuses is an issue
    /// (its group is left out); a map or attach failure is an error.
    fn open_cpu(&mut self, cpu: u32) -> Result<(), BpfError> {
        // The program leaves the CPU alone until its new counters are all
        // in place (a switch meanwhile is not charged: microseconds).
        self.bpf.pause(cpu)?;
        self.slots.retain(|s| s.cpu != cpu);
        self.groups.remove(&cpu);
        let mut groups = Vec::new();
        let (mut k, mut reads) = (0u32, Reads::default());
        let plan = std::mem::take(&mut self.plan);
        for gp in plan.iter().filter(|g| g.cpu == cpu) {
            let Some(members) = self.open_group(gp) else {
                continue;
            };
            // The times come from the group's clock when it has one the
            // program reads, else from its leader.
            let clock = clock_of(gp)
                .and_then(|j| u32::try_from(j).ok())
                .map(|j| k.saturating_add(j))
                .filter(|&c| c < MAX_EVENTS);
            let leader_k = clock.unwrap_or(k);
            if clock.is_none() {
                reads.times |= 1u32.checked_shl(k).unwrap_or(0);
            }
            for (i, (c, (metric, attr, scale))) in members.iter().zip(&gp.members).enumerate() {
                if k >= MAX_EVENTS {
                    break;
                }
                if reads.times & (1 << k) == 0 {
                    match spared_read(attr) {
                        Some(Spared::Switches) => reads.switches |= 1 << k,
                        Some(Spared::Migrations) => reads.migrations |= 1 << k,
                        Some(Spared::Faults) => reads.faults |= 1 << k,
                        None => {}
                    }
                }
                match c {
                    Some(c) => self.bpf.set_counter(cpu, k, c)?,
                    None => self.bpf.clear_counter(cpu, k)?,
                }
                self.slots.push(Slot {
                    cpu,
                    k,
                    metric: *metric,
                    scale: *scale,
                    leads: (i == 0).then_some(gp.set),
                    leader_k,
                    clock_times: clock.is_some(),
                    must_move: crate::engine::trust::must_move(attr),
                    col: if self.per_cpu {
                        self.cols.iter().position(|&x| x == cpu).unwrap_or(0)
                    } else {
                        0
                    },
                });
                k += 1;
            }
            groups.push(members);
        }
        self.plan = plan;
        self.slots.sort_by_key(|s| (s.k, s.cpu));
        let ks = self
            .slots
            .iter()
            .map(|s| s.k as usize + 1)
            .max()
            .unwrap_or(0);
        self.buf.resize(ks.max(self.buf.len()), Vec::new());
        self.groups.insert(cpu, groups);
        self.bpf.renew(cpu, reads)?;
        self.bpf.attach()
    }

    /// Opens and enables one system-wide group; `None` (and an issue) when
    /// the kernel refuses a member. A member the program counts without a
    /// counter ([`counted_by_program`]) is not opened (`None` in its
    /// place): the kernel then does not raise it at every switch.
    fn open_group(&mut self, gp: &GroupPlan) -> Option<Vec<Option<Counter>>> {
        let mut members: Vec<Option<Counter>> = Vec::with_capacity(gp.members.len());
        for (i, (metric, attr, _)) in gp.members.iter().enumerate() {
            if i > 0 && counted_by_program(attr) {
                members.push(None);
                continue;
            }
            let leader = members.first().and_then(Option::as_ref);
            match self.kernel.open(attr, gp.cpu, leader) {
                Ok(c) => members.push(Some(c)),
                Err(e) => {
                    self.open_failed(*metric, &e);
                    return None;
                }
            }
        }
        let first = members.first()?.as_ref()?;
        let (metric, attr, _) = gp.members.first()?;
        if let Err(e) = self.kernel.enable_group(first, attr, gp.cpu) {
            self.open_failed(*metric, &e);
            return None;
        }
        Some(members)
    }

    fn open_failed(&mut self, metric: usize, e: &crate::perf::PerfError) {
        super::plan::open_failed(&mut self.issues, &self.metrics, metric, e);
    }

    /// A slot for a new cgroup: a free one (released at an earlier sync),
    /// else a new one; `None` when every slot is taken.
    fn take_slot(&mut self) -> Option<u32> {
        if let Some(s) = self.free.pop() {
            return Some(s);
        }
        (self.next_slot < self.bpf.max_slots()).then(|| {
            self.next_slot += 1;
            self.next_slot - 1
        })
    }

    /// Charges every online CPU and reads what each counted cgroup got.
    fn read_all(&mut self) {
        for &cpu in &self.online {
            if self.groups.contains_key(&cpu) && self.bpf.charge(cpu).is_err() {
                self.charge_errors += 1;
            }
        }
        let ncols = self.cols.len();
        for t in self.tracked.values_mut() {
            t.s.time_open.fill(false);
            // One map lookup per cgroup gives every counter's and CPU's value.
            if self.bpf.read(t.slot, &mut self.buf).is_err() {
                self.buf.iter_mut().for_each(Vec::clear);
            }
            for (i, sl) in self.slots.iter().enumerate() {
                let at = |k: u32| self.buf.get(k as usize)?.get(sl.cpu as usize);
                let (Some(v), Some(lead)) = (at(sl.k), at(sl.leader_k)) else {
                    continue;
                };
                // A member's times are its leader's (the group is on the
                // PMU as a whole), or its group's clock's count.
                let (enabled, running) = if sl.clock_times {
                    (lead.counter, lead.counter)
                } else {
                    (lead.enabled, lead.running)
                };
                let v = Charged {
                    counter: v.counter,
                    enabled,
                    running,
                };
                // Each counter keeps the last times it was charged (its
                // leader's), so its window is its own.
                let (le, lr) = t.last[i];
                let d = (v.enabled.saturating_sub(le), v.running.saturating_sub(lr));
                t.last[i] = (le.max(v.enabled), lr.max(v.running));
                if let Some(set) = sl.leads {
                    if let Some(tm) = t.s.times.get_mut(set * ncols + sl.col) {
                        tm.0 += d.0 as f64 * 1e-9;
                        tm.1 += d.1 as f64 * 1e-9;
                    }
                    if let Some(o) = t.s.time_open.get_mut(set * ncols + sl.col) {
                        *o = true;
                    }
                }
                let k = sl.metric * ncols + sl.col;
                let cum = (v.enabled, v.running);
                t.s.add(k, d, cum, Some(v.counter), &mut t.high[i], sl.scale);
                if let Some(st) = t.stall.get_mut(i) {
                    t.s.judge_stall(k, st, sl.must_move, d, Some(v.counter));
                }
            }
            t.s.flag_implausible(&self.roles, ncols);
            t.s.finish_states();
        }
    }
}

/// The index in `gp` of a clock (`cpu-clock` or `task-clock`, counting
/// user and kernel) when every member is a software counter: such a group
/// always runs while enabled (the kernel's `group_can_go_on()`: "Groups
/// consisting entirely of software events can always go on"), so its
/// enabled and running times are both the time it counted, which its
/// clock's count is (nanoseconds). The program then reads no times (one
/// cheaper read per charge); else `None` and the leader's are read.
fn clock_of(gp: &GroupPlan) -> Option<usize> {
    use crate::sys::abi::{SW_CPU_CLOCK, SW_TASK_CLOCK, TYPE_SOFTWARE};
    if !gp.members.iter().all(|(_, a, _)| a.type_ == TYPE_SOFTWARE) {
        return None;
    }
    gp.members.iter().position(|(_, a, _)| {
        matches!(a.config[0], SW_CPU_CLOCK | SW_TASK_CLOCK) && a.exclude == Default::default()
    })
}

/// A counter whose read the program can do without (not a leader whose
/// times are read), and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Spared {
    /// `context-switches`: counted by the program at each `sched_switch`
    /// hit ([`Reads::switches`]).
    Switches,
    /// `cpu-migrations`: counted by the program from the task coming in
    /// ([`Reads::migrations`]).
    Migrations,
    /// `minor-faults`, `major-faults`: read only when a task may have
    /// faulted ([`Reads::faults`]).
    Faults,
}

/// How the program can spare this counter's read, if it can. The two it
/// counts itself must count kernel mode: the kernel raises them with the
/// scheduler's registers, so a `:u` one counts nothing (it is left to
/// the kernel). A fault counter is left unread only when no fault was
/// counted at all, whatever its modifiers filter.
fn spared_read(attr: &crate::perf::EventAttr) -> Option<Spared> {
    use crate::sys::abi::{
        SW_CONTEXT_SWITCHES, SW_CPU_MIGRATIONS, SW_PAGE_FAULTS_MAJ, SW_PAGE_FAULTS_MIN,
        TYPE_SOFTWARE,
    };
    if attr.type_ != TYPE_SOFTWARE {
        return None;
    }
    match attr.config[0] {
        SW_CONTEXT_SWITCHES if !attr.exclude.kernel => Some(Spared::Switches),
        SW_CPU_MIGRATIONS if !attr.exclude.kernel => Some(Spared::Migrations),
        SW_PAGE_FAULTS_MIN | SW_PAGE_FAULTS_MAJ => Some(Spared::Faults),
        _ => None,
    }
}

/// Whether the program counts this group member without a counter: a
/// `context-switches` it counts at every `sched_switch` hit
/// ([`Reads::switches`]), which needs nothing of the kernel (a leader is
/// opened all the same: its group hangs on it). Not opening it spares
/// the kernel's raise of it at every switch. A `cpu-migrations` is
/// still opened: the kernel sets the `sched_migrated` bit the program
/// reads only while such a counter is open somewhere
/// (`perf_event_task_migrate()`).
fn counted_by_program(attr: &crate::perf::EventAttr) -> bool {
    spared_read(attr) == Some(Spared::Switches)
}

/// Leaves out of `sel` the cgroups the BPF program never charges (see
/// [`BpfBackend`]'s `leave_out`); what `check` lists for `bpf`. Returns
/// them.
pub fn leave_out_unreachable(sel: &mut Selection) -> Vec<String> {
    sel.limit_nesting(MAX_LEVELS, MAX_OWNERS)
}

impl CgroupBackend for BpfBackend {
    fn name(&self) -> &'static str {
        "bpf"
    }

    fn sync(&mut self, sel: &Selection) {
        self.free.append(&mut self.cooling);
        self.sync_issues.clear();
        let keep: std::collections::HashSet<&str> =
            sel.counted.iter().map(|c| c.rel.as_str()).collect();
        let gone: Vec<String> = self
            .tracked
            .keys()
            .filter(|r| !keep.contains(r.as_str()))
            .cloned()
            .collect();
        for rel in gone {
            if let Some(t) = self.tracked.remove(&rel) {
                self.bpf.release(t.id);
                self.cooling.push(t.slot);
            }
        }
        for cg in &sel.counted {
            if self.tracked.contains_key(&cg.rel) {
                continue;
            }
            // The selector read the id (the directory's inode) when it
            // found the cgroup.
            let id = cg.id;
            if id == 0 {
                self.sync_issues.push(CgroupIssue::Gone {
                    cgroup: cg.rel.clone(),
                    errno: libc::ENOENT,
                });
                continue;
            }
            let Some(slot) = self.take_slot() else {
                self.sync_issues.push(CgroupIssue::SlotsFull {
                    cgroup: cg.rel.clone(),
                    slots: self.bpf.max_slots() as usize,
                });
                continue;
            };
            if let Err(e) = self.bpf.assign(slot, id) {
                tracing::warn!(error = %e, cgroup = %cg.rel, "cgroup not counted");
                self.free.push(slot);
                continue;
            }
            let n = self.slots.len();
            self.tracked.insert(
                cg.rel.clone(),
                Tracked {
                    id,
                    slot,
                    s: Series::new(cg, self.metrics.len(), &self.sets, &self.cols, self.per_cpu),
                    high: vec![0.0; n],
                    last: vec![(0, 0); n],
                    stall: vec![Default::default(); n],
                },
            );
        }
        tracing::debug!(counted = self.tracked.len(), "cgroups synced (bpf)");
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
        super::plausible::judge_each(series, usage, &self.roles, self.cols.len(), max);
    }

    /// The program walks [`MAX_LEVELS`] levels and charges a task to at
    /// most [`MAX_OWNERS`] selected cgroups: cgroups beyond are left out
    /// (never a zero for what is not counted).
    fn leave_out(&self, sel: &mut Selection) {
        leave_out_unreachable(sel);
    }

    fn families(&self, out: &mut Vec<crate::snapshot::Family>) {
        let series = self.tracked.values().map(|t| &t.s);
        super::series::push_families(&self.metrics, self.cols.len(), series, out);
    }

    fn issues(&self) -> Vec<CgroupIssue> {
        let mut v: Vec<CgroupIssue> = self
            .issues
            .iter()
            .chain(&self.sync_issues)
            .cloned()
            .collect();
        let planned = |i: usize| self.plan.iter().any(|g| g.set == i);
        if !self.tracked.is_empty() {
            for (i, set) in self.sets.iter().enumerate() {
                if planned(i) && !self.slots.iter().any(|s| s.leads == Some(i)) {
                    v.push(CgroupIssue::SetUnavailable {
                        set: set.clone(),
                        why: super::SetGap::OpenFailed,
                    });
                }
            }
        }
        v
    }

    fn counted(&self) -> Vec<String> {
        self.tracked.keys().cloned().collect()
    }

    /// The counters (CPUs × events opened) and the program's few, whatever the
    /// number of cgroups.
    fn open_fds(&self) -> usize {
        let open = self.groups.values().flatten().flatten().flatten().count();
        open + self.bpf.fds()
    }

    /// One program run per CPU and one map lookup per cgroup and counter.
    fn reads(&self) -> usize {
        self.online.len() + self.tracked.len() * self.slots.len()
    }

    /// A CPU back online gets new counters (the kernel does not re-enable
    /// them); counts charged so far stay in the maps.
    fn cpus_changed(&mut self, online: &[u32]) {
        let returned = super::plan::returned(&self.online, online);
        self.online = online.to_vec();
        for cpu in returned {
            if let Err(e) = self.open_cpu(cpu) {
                tracing::warn!(error = %e, cpu, "per-cgroup counters not reopened on a CPU back online");
            }
        }
        // The charged counts continue in the maps, where the same counter
        // (CPU, k) continues: the marks stay by position while the counters
        // are the same, else restart (monotonic totals never go back).
        let n = self.slots.len();
        for t in self.tracked.values_mut() {
            if t.high.len() != n {
                t.high = vec![0.0; n];
                t.last = vec![(0, 0); n];
                t.stall = vec![Default::default(); n];
            }
        }
    }

    fn totals(&self) -> CgroupTotals {
        let series = self.tracked.iter().map(|(rel, t)| (rel, &t.s));
        super::series::totals(&self.metrics, &self.sets, &self.cols, self.per_cpu, series)
    }

    fn carry_over(&mut self, old: CgroupTotals) -> usize {
        super::series::carry_over(
            &self.metrics,
            &self.sets,
            &self.cols,
            self.per_cpu,
            &mut self.tracked,
            |t| &mut t.s,
            old,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::EventAttr;
    use crate::sys::abi::{
        Exclude, SW_CONTEXT_SWITCHES, SW_CPU_CLOCK, SW_PAGE_FAULTS, SW_TASK_CLOCK, TYPE_HARDWARE,
        TYPE_SOFTWARE,
    };

    fn attr(type_: u32, config: u64, exclude: Exclude) -> EventAttr {
        EventAttr {
            type_,
            config: [config, 0, 0, 0],
            event: String::new(),
            pmu: String::new(),
            exclude,
        }
    }

    fn group(members: &[EventAttr]) -> GroupPlan {
        GroupPlan {
            set: 0,
            cpu: 0,
            members: members.iter().map(|a| (0, a.clone(), 1.0)).collect(),
        }
    }

    #[test]
    fn a_software_group_takes_its_times_from_its_clock_and_no_other_does() {
        let sw = |c| attr(TYPE_SOFTWARE, c, Exclude::default());
        let u = Exclude {
            kernel: true,
            ..Exclude::default()
        };
        // The default `software` set: cpu-clock leads.
        let g = group(&[
            sw(SW_CPU_CLOCK),
            sw(SW_CONTEXT_SWITCHES),
            sw(SW_PAGE_FAULTS),
        ]);
        assert_eq!(clock_of(&g), Some(0));
        // The clock need not lead.
        let g = group(&[sw(SW_PAGE_FAULTS), sw(SW_TASK_CLOCK)]);
        assert_eq!(clock_of(&g), Some(1));
        // No clock, a clock with a modifier, a hardware member: the
        // leader's times are read.
        assert_eq!(
            clock_of(&group(&[sw(SW_PAGE_FAULTS), sw(SW_CONTEXT_SWITCHES)])),
            None
        );
        assert_eq!(
            clock_of(&group(&[attr(TYPE_SOFTWARE, SW_CPU_CLOCK, u)])),
            None
        );
        let g = group(&[sw(SW_CPU_CLOCK), attr(TYPE_HARDWARE, 0, Exclude::default())]);
        assert_eq!(clock_of(&g), None);
    }

    #[test]
    fn the_program_spares_switches_and_migrations_counting_kernel_mode_and_fault_reads() {
        use crate::sys::abi::{SW_CPU_MIGRATIONS, SW_PAGE_FAULTS_MAJ, SW_PAGE_FAULTS_MIN};
        let k = Exclude {
            user: true,
            ..Exclude::default()
        };
        let u = Exclude {
            kernel: true,
            ..Exclude::default()
        };
        let all = Exclude::default();
        let spared = |c, e| spared_read(&attr(TYPE_SOFTWARE, c, e));
        assert_eq!(spared(SW_CONTEXT_SWITCHES, all), Some(Spared::Switches));
        assert_eq!(spared(SW_CONTEXT_SWITCHES, k), Some(Spared::Switches));
        assert_eq!(spared(SW_CPU_MIGRATIONS, all), Some(Spared::Migrations));
        assert_eq!(spared(SW_CPU_MIGRATIONS, k), Some(Spared::Migrations));
        // `:u`: the kernel raises both with the scheduler's registers, so
        // they count nothing; the program leaves them to the kernel.
        assert_eq!(spared(SW_CONTEXT_SWITCHES, u), None);
        assert_eq!(spared(SW_CPU_MIGRATIONS, u), None);
        // A fault counter is left unread only when no fault happened at
        // all: whatever it filters.
        for e in [all, k, u] {
            assert_eq!(spared(SW_PAGE_FAULTS_MIN, e), Some(Spared::Faults));
            assert_eq!(spared(SW_PAGE_FAULTS_MAJ, e), Some(Spared::Faults));
        }
        // `page-faults` is raised at every fault's entry, with nothing in
        // the task to tell: always read. So is the clock.
        assert_eq!(spared(SW_PAGE_FAULTS, all), None);
        assert_eq!(spared(SW_CPU_CLOCK, all), None);
        // The same config on another PMU type is another event.
        assert_eq!(
            spared_read(&attr(TYPE_HARDWARE, SW_CONTEXT_SWITCHES, all)),
            None
        );
    }
}
