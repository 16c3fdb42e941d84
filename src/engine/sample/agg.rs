//! Aggregation of decoded records: samples, estimated events and group
//! read deltas per key (process, thread or cgroup id), the names the
//! side-band records give, and lost/throttle counts per CPU.
//!
//! **Bounds.** Every map keyed by a task or cgroup grows with outside
//! input (a fork storm makes a `FORK` and an `EXIT` record per task, and a
//! `COMM` per exec). A long-running consumer (`serve`) ends a window after
//! each export ([`Aggregate::end_window`]): the sums start over (they were
//! exported), the tasks that exited (`PERF_RECORD_EXIT`) are forgotten,
//! and beyond [`MAX_TASKS`] entries the tasks not seen in the window go
//! too (counted: [`Forgotten`]). Within a window, samples of more than
//! [`MAX_TASKS`] keys are summed under [`OVER_BOUND`], never dropped.

use crate::perf::record::{Record, Sample};
use std::collections::HashMap;

/// What samples are attributed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum By {
    /// The process (thread group): its pid.
    #[default]
    Process,
    /// The thread: its tid.
    Thread,
    /// The cgroup (`PERF_SAMPLE_CGROUP`): its path.
    Cgroup,
    /// The Kubernetes pod of the cgroup: its uid.
    Pod,
}

impl By {
    /// The word of the command line and the config.
    pub fn as_str(self) -> &'static str {
        match self {
            By::Process => "process",
            By::Thread => "thread",
            By::Cgroup => "cgroup",
            By::Pod => "pod",
        }
    }

    /// The label of the sampled families' names: the word, except for
    /// pods, whose names are their UIDs: `pod_uid` (a label named `pod`
    /// always holds a pod's name, and Kubernetes service discovery adds
    /// one of its own).
    pub fn label(self) -> &'static str {
        match self {
            By::Pod => "pod_uid",
            other => other.as_str(),
        }
    }

    /// Whether samples need `PERF_SAMPLE_CGROUP`.
    pub fn needs_cgroup(self) -> bool {
        matches!(self, By::Cgroup | By::Pod)
    }
}

/// Tasks (or cgroups) an aggregate keeps sums, names or parents for at
/// most ([`Aggregate::end_window`]).
pub const MAX_TASKS: usize = 16384;

/// The key of the samples of keys beyond [`MAX_TASKS`] in one window
/// (named [`OVER_BOUND`]): no pid, tid or cgroup id is `u64::MAX`.
pub(super) const OVER_BOUND_KEY: u64 = u64::MAX;

/// The name of the samples of keys beyond the bound: longer than a task
/// name can be (15 bytes), and no cgroup path or pod uid.
pub const OVER_BOUND: &str = "(more tasks than the table holds)";

/// Tasks forgotten at the ends of windows, by why.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Forgotten {
    /// They exited (`PERF_RECORD_EXIT`) and their samples were exported.
    pub exited: u64,
    /// More than [`MAX_TASKS`] were held: the ones not seen in the window.
    pub table_full: u64,
}

/// One key's sums.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sums {
    /// Samples.
    pub samples: u64,
    /// Sum of the samples' periods: the estimated events.
    pub events: u64,
    /// Per group member (leader first): what it counted between the
    /// previous sample on the CPU and this one, summed.
    pub members: Vec<u64>,
}

/// Per-CPU ring health.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuHealth {
    /// Records the kernel dropped (`PERF_RECORD_LOST`'s counts).
    pub lost: u64,
    /// `PERF_RECORD_LOST` records seen.
    pub lost_records: u64,
    /// `PERF_RECORD_THROTTLE` records seen.
    pub throttled: u64,
    /// Records that could not be decoded, and corrupt drains.
    pub errors: u64,
}

/// The running aggregate.
#[derive(Debug, Default)]
pub struct Aggregate {
    /// How samples are keyed.
    pub by: By,
    /// Sums per key (pid, tid or cgroup id).
    pub sums: HashMap<u64, Sums>,
    /// Task names from `PERF_RECORD_COMM`, by tid.
    pub comms: HashMap<u32, String>,
    /// Each key's process id (thread mode: tid → pid).
    pub pids: HashMap<u64, u32>,
    /// Each task forked while sampling: its parent's tid (a child is
    /// named as its parent until it execs).
    pub parents: HashMap<u32, u32>,
    /// Cgroup paths from `PERF_RECORD_CGROUP`, by id.
    pub cgroups: HashMap<u64, String>,
    /// Ring health, by CPU.
    pub health: HashMap<u32, CpuHealth>,
    /// Samples in total.
    pub samples: u64,
    /// Call stacks, when collected ([`Aggregate::with_stacks`]).
    pub stacks: Option<super::stacks::Stacks>,
    /// The previous group read per CPU (values by member position).
    last_read: HashMap<u32, Vec<u64>>,
    /// Tasks that exited in the window whose sums name them (at most one
    /// per key of the window).
    exited: Vec<u32>,
    /// Tasks with a record in this window (at most the bound).
    touched: std::collections::HashSet<u32>,
    /// Tasks whose `PERF_RECORD_EXIT` was drained: a `FORK` or `COMM` of
    /// theirs drained later adds no entry, which would otherwise never be
    /// forgotten. Each CPU has its own ring: a child's exit on one CPU can
    /// be drained before its fork on its parent's CPU, or an exec's `COMM`
    /// on the CPU it ran on before it migrated, and a loaded drain can lag
    /// by several windows; this holds whether the task was known at its
    /// exit or not. The latest `max_tasks` of them, oldest first out
    /// (`early_order`); a tid reused by a new task within them goes
    /// unnamed by records (the namer reads its name from procfs).
    exited_early: HashMap<u32, bool>,
    /// `exited_early`'s tids in the order they came.
    early_order: std::collections::VecDeque<u32>,
    /// Every task that exited in this window (at most the bound): returned
    /// by [`end_window`](Self::end_window) so that names read from procfs
    /// for them (the namer's cache) are forgotten too.
    exits: Vec<u32>,
    /// The bound of every map (tests lower it).
    max_tasks: usize,
    /// Tasks forgotten so far.
    pub forgotten: Forgotten,
}

impl Aggregate {
    /// An empty aggregate keyed `by`.
    pub fn new(by: By) -> Self {
        Aggregate {
            by,
            max_tasks: MAX_TASKS,
            ..Default::default()
        }
    }

    /// Notes a task with a record in this window (kept at an end of window
    /// over the bound).
    fn touch(&mut self, tid: u32) {
        if self.touched.len() < self.max_tasks {
            self.touched.insert(tid);
        }
    }

    /// Task entries held now: names, parents and keys (the
    /// `perf_sampled_tasks` gauge).
    pub fn tasks(&self) -> usize {
        self.comms.len() + self.parents.len() + self.pids.len()
    }

    /// Ends a window whose sums were exported: the sums start over, the
    /// tasks that exited are forgotten, and over the bound those not seen
    /// in the window (then, if still over, all). Returns the ids forgotten
    /// (for the namer's cache).
    pub fn end_window(&mut self) -> Vec<u32> {
        self.sums.clear();
        self.pids.clear();
        let mut gone = std::mem::take(&mut self.exited);
        let exits = std::mem::take(&mut self.exits);
        for id in &gone {
            let known = self.comms.remove(id).is_some() | self.parents.remove(id).is_some();
            if known {
                self.forgotten.exited += 1;
            }
        }
        let max = self.max_tasks;
        if self.comms.len() + self.parents.len() > max {
            let touched = std::mem::take(&mut self.touched);
            let before = self.comms.len() + self.parents.len();
            fn evict<V>(
                m: &mut HashMap<u32, V>,
                keep: &std::collections::HashSet<u32>,
                gone: &mut Vec<u32>,
            ) {
                m.retain(|id, _| {
                    let k = keep.contains(id);
                    if !k {
                        gone.push(*id);
                    }
                    k
                });
            }
            evict(&mut self.comms, &touched, &mut gone);
            evict(&mut self.parents, &touched, &mut gone);
            if self.comms.len() + self.parents.len() > max {
                let none = std::collections::HashSet::new();
                evict(&mut self.comms, &none, &mut gone);
                evict(&mut self.parents, &none, &mut gone);
            }
            let after = self.comms.len() + self.parents.len();
            self.forgotten.table_full += (before - after) as u64;
        }
        // Cgroup paths: re-read from the cgroupfs when needed again.
        if self.cgroups.len() > max {
            self.forgotten.table_full += self.cgroups.len() as u64;
            self.cgroups.clear();
        }
        self.touched.clear();
        gone.extend(exits);
        gone
    }

    /// Whether `tid` exited before this record of it (see
    /// `exited_early`): then it is forgotten at once.
    fn exited_already(&mut self, tid: u32) -> bool {
        let Some(seen) = self.exited_early.get_mut(&tid) else {
            return false;
        };
        // Counted once, at its first late record.
        if !*seen {
            *seen = true;
            self.forgotten.exited += 1;
        }
        true
    }

    /// [`new`](Self::new) with a lower bound than [`MAX_TASKS`].
    #[cfg(test)]
    pub(crate) fn bounded(by: By, max_tasks: usize) -> Self {
        Aggregate {
            max_tasks,
            ..Aggregate::new(by)
        }
    }

    /// Also collects the samples' call stacks.
    pub fn with_stacks(mut self) -> Self {
        self.stacks = Some(super::stacks::Stacks::default());
        self
    }

    /// Adds one decoded record, from the ring of `cpu`.
    pub fn add(&mut self, cpu: u32, r: &Record<'_>) {
        match r {
            Record::Sample(s) => self.sample(cpu, s),
            Record::Comm { tid, .. } | Record::Fork { tid, .. } if self.exited_already(*tid) => {}
            Record::Comm { pid, tid, comm } => {
                let name = String::from_utf8_lossy(comm).into_owned();
                self.comms.insert(*tid, name);
                self.touch(*tid);
                let _ = pid;
            }
            Record::Fork { tid, ptid, .. } => {
                match self.comms.get(ptid).cloned() {
                    Some(c) => {
                        self.comms.insert(*tid, c);
                    }
                    None => {
                        self.parents.insert(*tid, *ptid);
                    }
                }
                self.touch(*tid);
            }
            Record::Exit { pid, tid } => self.exit(*pid, *tid),
            Record::Lost { lost, .. } => {
                let h = self.health.entry(cpu).or_default();
                h.lost += lost;
                h.lost_records += 1;
            }
            Record::Throttle {
                throttled: true, ..
            } => self.health.entry(cpu).or_default().throttled += 1,
            Record::Cgroup { id, path } => {
                self.cgroups
                    .insert(*id, String::from_utf8_lossy(path).into_owned());
            }
            _ => {}
        }
    }

    /// A task exited: forgotten now when its name names no sums of this
    /// window, else at the window's end (after they were exported).
    fn exit(&mut self, pid: u32, tid: u32) {
        if self.exits.len() < self.max_tasks {
            self.exits.push(tid);
        }
        let key = match self.by {
            By::Process if pid == tid => Some(u64::from(pid)),
            By::Thread => Some(u64::from(tid)),
            _ => None,
        };
        let known = if key.is_some_and(|k| self.sums.contains_key(&k)) {
            // About one per key of the window: bounded with the sums.
            if self.exited.len() <= self.max_tasks {
                self.exited.push(tid);
            }
            true
        } else if self.comms.remove(&tid).is_some() | self.parents.remove(&tid).is_some() {
            self.forgotten.exited += 1;
            true
        } else {
            false
        };
        // Its fork or a comm may still be in another CPU's ring. A task
        // known at its exit is counted forgotten already (`seen`).
        if self.exited_early.insert(tid, known).is_none() {
            self.early_order.push_back(tid);
            if self.early_order.len() > self.max_tasks {
                if let Some(old) = self.early_order.pop_front() {
                    self.exited_early.remove(&old);
                }
            }
        }
    }

    /// Counts a record or drain that could not be decoded.
    pub fn error(&mut self, cpu: u32) {
        self.health.entry(cpu).or_default().errors += 1;
    }

    fn sample(&mut self, cpu: u32, s: &Sample<'_>) {
        let key = match self.by {
            By::Process => u64::from(s.pid),
            By::Thread => u64::from(s.tid),
            By::Cgroup | By::Pod => s.cgroup.unwrap_or(0),
        };
        // Beyond the bound in this window: summed under one key.
        let over = self.max_tasks.max(1);
        let key = if !self.sums.contains_key(&key) && self.sums.len() >= over {
            OVER_BOUND_KEY
        } else {
            key
        };
        if key != OVER_BOUND_KEY && matches!(self.by, By::Process | By::Thread) {
            self.pids.entry(key).or_insert(s.pid);
            self.touch(s.tid);
        }
        self.samples += 1;
        if let (Some(st), Some(cc)) = (&mut self.stacks, &s.callchain) {
            st.add(key, s.pid, s.period, cc);
        }
        let e = self.sums.entry(key).or_default();
        e.samples += 1;
        e.events += s.period;
        if let Some(read) = &s.read {
            let last = self.last_read.entry(cpu).or_default();
            let n = read.len();
            if e.members.len() < n {
                e.members.resize(n, 0);
            }
            for (i, (value, _id)) in read.iter().enumerate() {
                // The first sample on a CPU has no previous read: its
                // counts since the group started are attributed to it.
                let prev = last.get(i).copied().unwrap_or(0);
                e.members[i] += value.saturating_sub(prev);
            }
            last.clear();
            last.extend(read.iter().map(|(v, _)| v));
        }
    }

    /// Lost records, summed over CPUs.
    pub fn lost(&self) -> u64 {
        self.health.values().map(|h| h.lost).sum()
    }

    /// Throttle records, summed over CPUs.
    pub fn throttled(&self) -> u64 {
        self.health.values().map(|h| h.throttled).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::record::{decode, encode, Format};
    use crate::sys::abi;

    #[test]
    fn samples_names_and_health_per_cpu() {
        let fmt = Format {
            sample_type: abi::SAMPLE_TID | abi::SAMPLE_TIME | abi::SAMPLE_CPU | abi::SAMPLE_PERIOD,
            read_format: 0,
        };
        let mut a = Aggregate::new(By::Process);
        let recs = [
            encode::record(abi::RECORD_COMM, &encode::comm_body(7, 7, "busy")),
            encode::record(
                abi::RECORD_SAMPLE,
                &encode::sample_body(7, 8, 1, 1, 100, None),
            ),
            encode::record(
                abi::RECORD_SAMPLE,
                &encode::sample_body(7, 7, 2, 1, 50, None),
            ),
            encode::record(
                abi::RECORD_SAMPLE,
                &encode::sample_body(9, 9, 3, 1, 10, None),
            ),
            encode::lost(1, 12),
            encode::throttle(true, 1),
            encode::throttle(false, 1),
        ];
        for r in &recs {
            a.add(1, &decode(r, &fmt).unwrap());
        }
        assert_eq!(a.samples, 3);
        assert_eq!(a.sums[&7].samples, 2);
        assert_eq!(a.sums[&7].events, 150);
        assert_eq!(a.comms[&7], "busy");
        assert_eq!(
            a.health[&1],
            CpuHealth {
                lost: 12,
                lost_records: 1,
                throttled: 1,
                errors: 0
            }
        );
    }

    /// The sample format of the task-record tests.
    fn task_format() -> Format {
        Format {
            sample_type: abi::SAMPLE_TID | abi::SAMPLE_TIME | abi::SAMPLE_CPU | abi::SAMPLE_PERIOD,
            read_format: 0,
        }
    }

    /// A FORK or EXIT record of task `t` (pid, ppid, tid, ptid, time).
    fn task_record(ty: u32, t: u32) -> Vec<u8> {
        let b: Vec<u8> = [t, 1, t, 1]
            .iter()
            .flat_map(|w| w.to_ne_bytes())
            .chain(0u64.to_ne_bytes())
            .collect();
        encode::record(ty, &b)
    }

    /// Issue 28 item 6: a fork storm grew the maps without bound. Exited
    /// tasks are forgotten at the end of a window, tasks beyond the bound
    /// not seen in the window too (counted), and samples of keys beyond
    /// the bound within a window are summed under one key.
    #[test]
    fn a_fork_storm_is_forgotten_and_the_maps_stay_bounded() {
        let (fmt, task) = (task_format(), task_record);
        let mut a = Aggregate::bounded(By::Process, 100);
        let add = |a: &mut Aggregate, r: Vec<u8>| a.add(0, &decode(&r, &fmt).unwrap());
        add(
            &mut a,
            encode::record(abi::RECORD_COMM, &encode::comm_body(1, 1, "init")),
        );
        for w in 0..50u32 {
            for i in 0..1000u32 {
                let t = 10 + w * 1000 + i;
                add(&mut a, task(abi::RECORD_FORK, t));
                add(
                    &mut a,
                    encode::record(abi::RECORD_COMM, &encode::comm_body(t, t, "true")),
                );
                add(
                    &mut a,
                    encode::record(
                        abi::RECORD_SAMPLE,
                        &encode::sample_body(t, t, 1, 0, 5, None),
                    ),
                );
                add(&mut a, task(abi::RECORD_EXIT, t));
            }
            assert!(a.sums.len() <= 101, "{}", a.sums.len());
            assert_eq!(a.sums.values().map(|s| s.samples).sum::<u64>(), 1000);
            assert_eq!(a.sums[&OVER_BOUND_KEY].samples, 900);
            let gone = a.end_window();
            assert!(gone.len() >= 100);
            assert!(a.tasks() <= 1, "window {w}: {} task entries", a.tasks());
        }
        assert_eq!(a.forgotten.table_full, 0);
        // 50 x the bound: the exits past the bound in a window are not
        // noted, but never make the maps grow past the bound.
        assert!(a.forgotten.exited >= 50 * 100, "{:?}", a.forgotten);
        // Live tasks (no exit) beyond the bound: those not seen in the
        // window go, counted.
        for t in 100_000..100_300u32 {
            add(
                &mut a,
                encode::record(abi::RECORD_COMM, &encode::comm_body(t, t, "live")),
            );
        }
        a.end_window();
        assert!(a.tasks() <= 100, "{}", a.tasks());
        assert!(a.forgotten.table_full >= 200, "{:?}", a.forgotten);
    }

    /// Each CPU has its own ring: a short task's EXIT (on its own CPU) can
    /// be drained before its FORK (on its parent's CPU) and its COMM. Those
    /// late records add no entry that nothing would ever forget (a fork
    /// storm under CI load held 1,194 entries for 94 live tasks).
    #[test]
    fn an_exit_drained_before_its_fork_leaves_no_entry() {
        let (fmt, task) = (task_format(), task_record);
        let mut a = Aggregate::bounded(By::Process, 100);
        let add = |a: &mut Aggregate, r: Vec<u8>| a.add(0, &decode(&r, &fmt).unwrap());
        for t in 10..60u32 {
            add(&mut a, task(abi::RECORD_EXIT, t));
        }
        // Half the late records in the same window, half in the next.
        for t in 10..35u32 {
            add(&mut a, task(abi::RECORD_FORK, t));
            add(
                &mut a,
                encode::record(abi::RECORD_COMM, &encode::comm_body(t, t, "true")),
            );
        }
        a.end_window();
        for t in 35..60u32 {
            add(&mut a, task(abi::RECORD_FORK, t));
        }
        assert_eq!(a.tasks(), 0);
        assert_eq!(a.forgotten.exited, 50, "{:?}", a.forgotten);
        // A task that is still alive is kept.
        add(
            &mut a,
            encode::record(abi::RECORD_COMM, &encode::comm_body(99, 99, "live")),
        );
        a.end_window();
        a.end_window();
        assert_eq!(a.tasks(), 1);
        // Every exit of a window is in what it returns, known or not, so
        // that the names read from procfs for them go too.
        add(&mut a, task(abi::RECORD_EXIT, 123));
        assert!(a.end_window().contains(&123));
    }

    /// A task known at its exit (its fork drained) whose exec `COMM`, on
    /// the CPU it ran on before it migrated, is drained after the exit:
    /// the late name adds no entry either, and the task is counted
    /// forgotten once.
    #[test]
    fn a_comm_drained_after_the_exit_of_a_known_task_leaves_no_entry() {
        let (fmt, task) = (task_format(), task_record);
        let mut a = Aggregate::bounded(By::Process, 100);
        let add = |a: &mut Aggregate, r: Vec<u8>| a.add(0, &decode(&r, &fmt).unwrap());
        for t in 10..60u32 {
            add(&mut a, task(abi::RECORD_FORK, t));
        }
        assert_eq!(a.tasks(), 50);
        for t in 10..60u32 {
            add(&mut a, task(abi::RECORD_EXIT, t));
        }
        a.end_window();
        for t in 10..60u32 {
            add(
                &mut a,
                encode::record(abi::RECORD_COMM, &encode::comm_body(t, t, "true")),
            );
        }
        a.end_window();
        assert_eq!(a.tasks(), 0);
        assert_eq!(a.forgotten.exited, 50, "{:?}", a.forgotten);
    }
}
