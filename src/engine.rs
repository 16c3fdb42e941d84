//! The counting engine: plans perf groups from a [`Resolution`], opens
//! them through a [`Kernel`], and turns group reads into a plain-data
//! [`Snapshot`] at scrape time.
//!
//! * **Groups.** Each set becomes one group per (PMU, CPU): core and
//!   software PMUs on every CPU they cover, uncore PMUs once per
//!   instance on each CPU of their `cpumask`. Hybrid core PMUs get
//!   separate groups (a group never mixes `cpu_core` and `cpu_atom`).
//! * **Reads.** One `read()` per group returns every member's raw count
//!   with the group's `time_enabled` and `time_running`. That is the
//!   whole cost of a collection on the kernel side: no other syscall, no
//!   `/sys` or `/proc` file is read while nothing changes.
//! * **Multiplexing.** When the PMU has fewer counters than events the
//!   kernel time-slices groups, so `time_running < time_enabled`. The
//!   count is estimated as `raw * enabled / running` (what `perf stat`
//!   prints, [`mux_factor`]). The estimate can go *down* between reads;
//!   exported counters take only increases of its high-water mark
//!   ([`monotonic_delta`]), so they never decrease and never count the
//!   same events twice.
//! * **Never scheduled.** A group whose `time_running` stays 0 while it is
//!   enabled cannot fit on the PMU; it is split into single-event groups
//!   (and a member that still never runs exports nothing, not zero).
//! * **Hotplug.** The online CPU list is re-read only when something says
//!   it may have changed: the kernel's hotplug signal
//!   ([`Kernel::hotplug_generation`]: a `NETLINK_KOBJECT_UEVENT` socket on
//!   the live kernel), a group read failing with `ENODEV`, or a group's
//!   `time_enabled` standing still while the others move (the kernel stops
//!   an offline CPU's events). Without a signal it is re-read at every
//!   collection. An offline CPU's groups are closed and its series leave
//!   the output; when it returns, its groups are reopened and its counters
//!   continue from their previous totals.
//! * **Aggregation.** A set with `per_cpu: false` sums its counters over
//!   CPUs into one series (uncore series keep `pmu` and `socket`); its
//!   gauges are averaged over CPUs, and its group-time and read-error
//!   series lose the `cpu` label (summed over CPUs).
//! * **Failures.** One CPU's or PMU's failure never drops the others.
//! * **Allocation.** Series are indexed, their label sets rendered once
//!   ([`Labels`]) and their export order computed when the plan changes,
//!   so a collection allocates per family, never per series.

use crate::perf::{Counter, ErrorKind, EventAttr, GroupReading, Kernel, PerfError};
use crate::pmu::{PmuTable, Scope};
use crate::problem::{Class, Problem};
use crate::resolve::chain::{Resolution, ResolvedMetric, Status};
use crate::snapshot::{Family, Kind, Labels, Sample, Snapshot};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

/// How a configured metric is doing at run time.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricRuntime {
    /// The metric.
    pub metric: String,
    /// `resolved`, `fallback`, `unavailable`.
    pub status: Status,
    /// The winning spec.
    pub event: Option<String>,
    /// PMUs it counts on.
    pub pmus: Vec<String>,
    /// Open fds.
    pub open_fds: usize,
    /// Why not available, or open failures (deduplicated).
    pub reasons: Vec<Problem>,
}

/// The multiplexing factor of a group read: `enabled / running` when the
/// group was time-sliced (`running < enabled`), 1 when it counted all the
/// time, `None` when it never ran (no estimate is possible: export
/// nothing rather than zero).
#[inline]
pub fn mux_factor(enabled: u64, running: u64) -> Option<f64> {
    if running == 0 {
        None
    } else if running < enabled {
        Some(enabled as f64 / running as f64)
    } else {
        Some(1.0)
    }
}

/// Folds a new scaled estimate of a running count into its high-water
/// mark `high` and returns how much the exported counter grows (in raw
/// units): the increase of the mark, or 0 when the estimate fell. So a
/// counter fed by these deltas never decreases and never counts the same
/// events twice.
#[inline]
pub fn monotonic_delta(high: &mut f64, estimate: f64) -> f64 {
    if estimate > *high {
        let d = estimate - *high;
        *high = estimate;
        d
    } else {
        0.0
    }
}

/// A series key: metric index plus labels.
type SeriesKey = (usize, Vec<(&'static str, String)>);

#[derive(Debug, Clone)]
struct SeriesState {
    /// The metric it belongs to.
    metric: usize,
    /// Its labels, rendered.
    labels: Labels,
    /// Accumulated counter value (base units) or last gauge reading.
    value: f64,
    /// Has ever had data.
    has_data: bool,
    /// Is currently backed by an open group.
    live: bool,
    /// Gauges: readings summed over the groups of this collection.
    gauge_sum: f64,
    /// Gauges: how many groups contributed in this collection.
    gauge_groups: u32,
    /// Gauges: the last group that contributed (to count groups once).
    gauge_last_group: usize,
}

#[derive(Debug, Clone, PartialEq)]
struct MemberPlan {
    metric: usize,
    attr: EventAttr,
    scale: f64,
    snapshot: bool,
    series: SeriesKey,
}

#[derive(Debug)]
struct Member {
    plan: MemberPlan,
    /// Index into `Engine::series`.
    series: usize,
    counter: Counter,
    /// High-water mark of the scaled estimate (raw units).
    high: f64,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct GroupKey {
    set: usize,
    pmu: String,
    cpu: u32,
    /// 0 for the planned group; >0 for groups split off it.
    split: usize,
}

#[derive(Debug)]
struct Group {
    key: GroupKey,
    members: Vec<Member>,
    /// Index into `Engine::time_slots` (its set and CPU).
    time_slot: usize,
    last_enabled: u64,
    last_running: u64,
    never_ran: u32,
    /// Scratch of one collection: time_enabled stood still.
    stalled: bool,
    /// Scratch of one collection: never ran twice, split it.
    split: bool,
}

/// Per (set, CPU): this collection's enabled/running deltas summed over
/// the CPU's groups of the set, and how many groups; they are exported as
/// the mean over the groups, so six IMC groups on one CPU do not count six
/// seconds per second.
#[derive(Debug, Clone)]
struct TimeSlot {
    /// Index into `Engine::time_series`.
    export: usize,
    d_enabled: u64,
    d_running: u64,
    groups: u32,
}

/// An exported `{set, cpu}` (or `{set}` for a `per_cpu: false` set) series
/// of the group-time and read-error families.
#[derive(Debug, Clone)]
struct TimeSeries {
    set: usize,
    /// `None`: summed over CPUs.
    cpu: Option<u32>,
    labels: Labels,
    enabled: f64,
    running: f64,
    has_times: bool,
    errors: u64,
}

/// A `perf_event_available` sample: which metric, and whether it has open
/// groups on its PMU (the value also needs the metric to be schedulable).
#[derive(Debug, Clone)]
struct Avail {
    metric: usize,
    labels: Labels,
    open: bool,
    /// `perf_event_unavailable_info`'s labels when not open: these plus
    /// `reason` and `class`.
    info: Labels,
}

/// The engine. Owns every fd.
#[derive(Debug)]
pub struct Engine {
    kernel: Arc<dyn Kernel>,
    table: PmuTable,
    resolution: Resolution,
    groups: Vec<Group>,
    /// Every series ever planned, by index.
    series: Vec<SeriesState>,
    series_index: HashMap<SeriesKey, usize>,
    /// Per metric: its series in export order (numeric label order).
    series_order: Vec<Vec<usize>>,
    /// Series of snapshot (gauge) members.
    gauge_series: Vec<usize>,
    time_slots: Vec<TimeSlot>,
    time_slot_index: HashMap<(usize, u32), usize>,
    time_series: Vec<TimeSeries>,
    time_series_index: HashMap<(usize, Option<u32>), usize>,
    /// `time_series` in export order (set, cpu).
    time_order: Vec<usize>,
    avail: Vec<Avail>,
    runtime: Vec<MetricRuntime>,
    online: Vec<u32>,
    /// `online` as a mask indexed by CPU.
    online_mask: Vec<bool>,
    buf: GroupReading,
    /// Members that can never be scheduled, by metric.
    unschedulable: BTreeMap<usize, Problem>,
    /// An open failed with ENODEV on a CPU the online list already shows
    /// (the kernel brings perf up on a CPU slightly after it appears):
    /// retry at the next collection.
    retry_open: bool,
    /// The kernel's hotplug generation when the online list was last read
    /// (`None`: the kernel has no signal; read it at every collection).
    hotplug_seen: Option<u64>,
    /// How many times the online list was read after start-up.
    online_reads: u64,
}

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

fn mask_of(online: &[u32]) -> Vec<bool> {
    let n = online.iter().max().map_or(0, |&m| m as usize + 1);
    let mut mask = vec![false; n];
    for &c in online {
        mask[c as usize] = true;
    }
    mask
}

impl Engine {
    /// Plans and opens every group.
    pub fn new(kernel: Arc<dyn Kernel>, table: PmuTable, resolution: Resolution) -> Self {
        let online = table.topology.online.clone();
        let runtime = resolution
            .metrics
            .iter()
            .map(|m| {
                let mut pmus: Vec<String> =
                    m.instances.iter().map(|i| i.inst.pmu.clone()).collect();
                pmus.dedup();
                MetricRuntime {
                    metric: m.metric.clone(),
                    status: m.status,
                    event: m.event.clone(),
                    pmus,
                    open_fds: 0,
                    reasons: if m.status == Status::Unavailable {
                        m.problem().cloned().into_iter().collect()
                    } else {
                        m.partial.clone()
                    },
                }
            })
            .collect();
        let metrics = resolution.metrics.len();
        let mut e = Engine {
            kernel,
            table,
            resolution,
            groups: Vec::new(),
            series: Vec::new(),
            series_index: HashMap::new(),
            series_order: vec![Vec::new(); metrics],
            gauge_series: Vec::new(),
            time_slots: Vec::new(),
            time_slot_index: HashMap::new(),
            time_series: Vec::new(),
            time_series_index: HashMap::new(),
            time_order: Vec::new(),
            avail: Vec::new(),
            runtime,
            online_mask: mask_of(&online),
            online,
            buf: GroupReading::default(),
            unschedulable: BTreeMap::new(),
            retry_open: false,
            hotplug_seen: None,
            online_reads: 0,
        };
        // Start listening for hotplug before reading the online list, so a
        // change in between is not missed.
        e.hotplug_seen = e.kernel.hotplug_generation();
        if let Some(online) = e.kernel.online_cpus(&e.table.sysfs) {
            e.set_online(online);
        }
        e.reconcile();
        e
    }

    /// The number of open fds.
    pub fn open_fds(&self) -> usize {
        self.groups.iter().map(|g| g.members.len()).sum()
    }

    /// The number of open groups: the `read()` calls of one collection.
    pub fn open_groups(&self) -> usize {
        self.groups.len()
    }

    /// The fds the plan needs on the current CPUs.
    pub fn planned_fds(&self) -> usize {
        self.plan().values().map(Vec::len).sum()
    }

    /// How many times the online CPU list was read since start-up (only
    /// when a hotplug signal, a failed read or a stalled group asked for
    /// it, or at every collection when the kernel has no hotplug signal).
    pub fn online_reads(&self) -> u64 {
        self.online_reads
    }

    /// Per-metric run-time state (for the landing page and logs).
    pub fn runtime(&self) -> &[MetricRuntime] {
        &self.runtime
    }

    /// The resolution the engine runs.
    pub fn resolution(&self) -> &Resolution {
        &self.resolution
    }

    /// Whether anything at all is being counted.
    pub fn counting(&self) -> bool {
        !self.groups.is_empty()
    }

    fn is_online(&self, cpu: u32) -> bool {
        self.online_mask.get(cpu as usize).copied().unwrap_or(false)
    }

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

    fn per_cpu(&self, set: usize) -> bool {
        self.resolution.sets.get(set).is_none_or(|s| s.per_cpu)
    }

    /// Desired groups and their members on the current CPUs.
    fn plan(&self) -> BTreeMap<GroupKey, Vec<MemberPlan>> {
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

    fn note(&mut self, metric: usize, reason: Problem) {
        let rt = &mut self.runtime[metric];
        if !rt.reasons.contains(&reason) && rt.reasons.len() < 16 {
            tracing::warn!(metric = %rt.metric, %reason, what_to_do = %reason.what_to_do(), "counter unavailable");
            rt.reasons.push(reason);
        }
    }

    /// The index of a series, created on first use.
    fn series_of(&mut self, key: &SeriesKey) -> usize {
        if let Some(&i) = self.series_index.get(key) {
            return i;
        }
        let i = self.series.len();
        self.series.push(SeriesState {
            metric: key.0,
            labels: Labels::new(key.1.clone()),
            value: 0.0,
            has_data: false,
            live: false,
            gauge_sum: 0.0,
            gauge_groups: 0,
            gauge_last_group: usize::MAX,
        });
        self.series_index.insert(key.clone(), i);
        i
    }

    /// The time slot of a (set, CPU), created on first use with its
    /// exported series.
    fn time_slot_of(&mut self, set: usize, cpu: u32) -> usize {
        if let Some(&i) = self.time_slot_index.get(&(set, cpu)) {
            return i;
        }
        let export_cpu = self.per_cpu(set).then_some(cpu);
        let export = match self.time_series_index.get(&(set, export_cpu)) {
            Some(&x) => x,
            None => {
                let name = self
                    .resolution
                    .sets
                    .get(set)
                    .map_or(String::new(), |s| s.name.clone());
                let mut pairs = vec![("set", name)];
                if let Some(c) = export_cpu {
                    pairs.push(("cpu", c.to_string()));
                }
                let x = self.time_series.len();
                self.time_series.push(TimeSeries {
                    set,
                    cpu: export_cpu,
                    labels: Labels::new(pairs),
                    enabled: 0.0,
                    running: 0.0,
                    has_times: false,
                    errors: 0,
                });
                self.time_series_index.insert((set, export_cpu), x);
                x
            }
        };
        let i = self.time_slots.len();
        self.time_slots.push(TimeSlot {
            export,
            d_enabled: 0,
            d_running: 0,
            groups: 0,
        });
        self.time_slot_index.insert((set, cpu), i);
        i
    }

    /// Opens `members` as one group (leader first), splitting off members
    /// the PMU refuses to group. Returns the groups opened.
    fn open_group(&mut self, key: GroupKey, members: Vec<MemberPlan>) -> Vec<Group> {
        let mut out = Vec::new();
        let mut pending = members;
        let mut split = key.split;
        while !pending.is_empty() {
            let mut opened: Vec<(MemberPlan, Counter)> = Vec::new();
            let mut deferred = Vec::new();
            for mp in pending.drain(..) {
                let leader = opened.first().map(|m| &m.1);
                match self.kernel.open(&mp.attr, key.cpu, leader) {
                    Ok(counter) => opened.push((mp, counter)),
                    Err(e)
                        if leader.is_some()
                            && matches!(e.kind, ErrorKind::Invalid | ErrorKind::Busy) =>
                    {
                        // The PMU will not take it in this group (too many
                        // events, one-event-per-group drivers): own group.
                        deferred.push(mp);
                    }
                    Err(e) => self.open_failed(&mp, e),
                }
            }
            if let Some(first) = opened.first() {
                if let Err(e) = self.kernel.enable_group(&first.1, &first.0.attr, key.cpu) {
                    for m in &opened {
                        self.note(m.0.metric, e.problem());
                    }
                } else {
                    let mut members = Vec::with_capacity(opened.len());
                    for (plan, counter) in opened {
                        let series = self.series_of(&plan.series);
                        self.series[series].live = true;
                        members.push(Member {
                            plan,
                            series,
                            counter,
                            high: 0.0,
                        });
                    }
                    let time_slot = self.time_slot_of(key.set, key.cpu);
                    out.push(Group {
                        key: GroupKey {
                            split,
                            ..key.clone()
                        },
                        members,
                        time_slot,
                        last_enabled: 0,
                        last_running: 0,
                        never_ran: 0,
                        stalled: false,
                        split: false,
                    });
                    split += 1;
                }
            }
            pending = deferred;
        }
        out
    }

    fn open_failed(&mut self, mp: &MemberPlan, e: PerfError) {
        if e.kind == ErrorKind::CpuOffline {
            self.retry_open = true;
            return;
        }
        self.note(mp.metric, e.problem());
    }

    /// Brings open groups in line with the plan on the current CPUs.
    fn reconcile(&mut self) {
        let plan = self.plan();
        // Close groups no longer planned (their CPU went away).
        let before = self.groups.len();
        let planned: HashSet<(usize, &str, u32)> = plan
            .keys()
            .map(|k| (k.set, k.pmu.as_str(), k.cpu))
            .collect();
        self.groups
            .retain(|g| planned.contains(&(g.key.set, g.key.pmu.as_str(), g.key.cpu)));
        if self.groups.len() != before {
            tracing::info!(
                closed = before - self.groups.len(),
                "closed groups of offline CPUs"
            );
        }
        // Open groups that are planned but not open.
        let open: HashSet<(usize, String, u32)> = self
            .groups
            .iter()
            .map(|g| (g.key.set, g.key.pmu.clone(), g.key.cpu))
            .collect();
        for (key, members) in plan {
            if !open.contains(&(key.set, key.pmu.clone(), key.cpu)) {
                let gs = self.open_group(key, members);
                self.groups.extend(gs);
            }
        }
        self.refresh();
    }

    /// Recomputes what depends on the set of open groups: which series are
    /// live, their export order, the availability samples and the fd
    /// counts. Runs when groups open or close, never per collection.
    fn refresh(&mut self) {
        // Series that lost every group stay out of the output.
        let mut live = vec![false; self.series.len()];
        for g in &self.groups {
            for m in &g.members {
                live[m.series] = true;
            }
        }
        for (st, l) in self.series.iter_mut().zip(live) {
            st.live = l;
        }
        // Export order: per metric, numeric label order (cpu 2 < 10).
        for o in &mut self.series_order {
            o.clear();
        }
        for (i, st) in self.series.iter().enumerate() {
            if let Some(o) = self.series_order.get_mut(st.metric) {
                o.push(i);
            }
        }
        for o in &mut self.series_order {
            o.sort_by_cached_key(|&i| label_order(&self.series[i].labels));
        }
        let mut gauges: Vec<usize> = self
            .groups
            .iter()
            .flat_map(|g| &g.members)
            .filter(|m| m.plan.snapshot)
            .map(|m| m.series)
            .collect();
        gauges.sort_unstable();
        gauges.dedup();
        self.gauge_series = gauges;
        // Group-time series in (set, cpu) order.
        let mut order: Vec<usize> = (0..self.time_series.len()).collect();
        order.sort_by_key(|&i| (self.time_series[i].set, self.time_series[i].cpu));
        self.time_order = order;
        // Open fds per metric and availability per (metric, PMU).
        for r in &mut self.runtime {
            r.open_fds = 0;
        }
        let mut open: HashSet<(usize, &str)> = HashSet::new();
        for g in &self.groups {
            for m in &g.members {
                self.runtime[m.plan.metric].open_fds += 1;
                open.insert((m.plan.metric, m.plan.attr.pmu.as_str()));
            }
        }
        let mut avail = Vec::new();
        for (mi, m) in self.resolution.metrics.iter().enumerate() {
            if m.status == Status::Unavailable {
                let pairs = vec![
                    ("metric", m.metric.clone()),
                    (
                        "event",
                        m.tried.first().map(|t| t.event.clone()).unwrap_or_default(),
                    ),
                    ("pmu", String::new()),
                ];
                avail.push(Avail {
                    metric: mi,
                    info: info_labels(&pairs, m.problem()),
                    labels: Labels::new(pairs),
                    open: false,
                });
                continue;
            }
            let mut pmus: Vec<&str> = m.instances.iter().map(|i| i.inst.pmu.as_str()).collect();
            pmus.sort_by_key(|p| natural(p));
            pmus.dedup();
            for p in pmus {
                let pairs = vec![
                    ("metric", m.metric.clone()),
                    ("event", m.event.clone().unwrap_or_default()),
                    ("pmu", p.to_string()),
                ];
                let reasons = &self.runtime[mi].reasons;
                let why = reasons
                    .iter()
                    .find(|r| r.pmu() == Some(p))
                    .or(reasons.first());
                avail.push(Avail {
                    metric: mi,
                    info: info_labels(&pairs, why),
                    labels: Labels::new(pairs),
                    open: open.contains(&(mi, p)),
                });
            }
        }
        self.avail = avail;
    }

    /// Splits a group that never runs into single-event groups.
    fn split_group(&mut self, idx: usize) {
        let g = self.groups.remove(idx);
        tracing::warn!(set = g.key.set, pmu = %g.key.pmu, cpu = g.key.cpu, members = g.members.len(),
            "group never scheduled on the PMU (more events than counters?); splitting it into single-event groups");
        let next_split = self
            .groups
            .iter()
            .filter(|o| o.key.set == g.key.set && o.key.pmu == g.key.pmu && o.key.cpu == g.key.cpu)
            .map(|o| o.key.split + 1)
            .max()
            .unwrap_or(1)
            .max(g.key.split + 1);
        let mut k = next_split;
        for m in g.members {
            // Keep the high-water mark: the new fd starts from zero.
            let plan = m.plan.clone();
            drop(m);
            let gs = self.open_group(
                GroupKey {
                    split: k,
                    ..g.key.clone()
                },
                vec![plan],
            );
            k += gs.len().max(1);
            self.groups.extend(gs);
        }
    }

    /// Checks for CPU hotplug: `online` is the current online CPU list.
    pub fn set_online(&mut self, online: Vec<u32>) {
        if online == self.online {
            return;
        }
        tracing::info!(from = %crate::pmu::format_cpu_list(&self.online), to = %crate::pmu::format_cpu_list(&online), "online CPUs changed");
        self.online_mask = mask_of(&online);
        self.online = online;
        // The cpumask of uncore PMUs moves when its CPU goes offline.
        if let Ok(t) = PmuTable::discover(&self.table.sysfs) {
            if !self.kernel.simulated() {
                for p in &mut self.table.pmus {
                    if let Some(np) = t.get(&p.name) {
                        p.scope = np.scope.clone();
                    }
                }
            }
            for (cpu, pkg) in t.topology.package {
                self.table.topology.package.entry(cpu).or_insert(pkg);
            }
        }
        self.reconcile();
    }

    /// Reads the online CPU list from the kernel and applies it.
    fn read_online(&mut self) {
        self.online_reads += 1;
        if let Some(online) = self.kernel.online_cpus(&self.table.sysfs) {
            self.set_online(online);
        }
    }

    /// Re-reads the online list when the kernel's hotplug signal moved, or
    /// at every collection when it has none.
    fn check_hotplug(&mut self) {
        match (self.kernel.hotplug_generation(), self.hotplug_seen) {
            (Some(now), Some(seen)) if now == seen => {}
            (now, _) => {
                // Note the generation first: a change after this read
                // moves it again and is seen at the next collection.
                self.hotplug_seen = now;
                self.read_online();
            }
        }
    }

    /// Reads every group once and returns the counters.
    pub fn collect(&mut self) -> Snapshot {
        self.read_groups();
        self.snapshot()
    }

    /// Reads every group once (one `read()` each) and accumulates the
    /// counters, without building a snapshot.
    pub fn read_groups(&mut self) {
        self.check_hotplug();
        if self.retry_open {
            self.retry_open = false;
            self.reconcile();
        }
        let mut failed_cpu = false;
        let mut any_moved = false;
        let mut any_still = false;
        let mut any_split = false;
        for &s in &self.gauge_series {
            if let Some(st) = self.series.get_mut(s) {
                st.gauge_sum = 0.0;
                st.gauge_groups = 0;
                st.gauge_last_group = usize::MAX;
            }
        }
        for gi in 0..self.groups.len() {
            let g = &mut self.groups[gi];
            g.stalled = false;
            g.split = false;
            let leader = &g.members[0];
            let r = self.kernel.read_group(
                &leader.counter,
                &leader.plan.attr,
                g.key.cpu,
                &mut self.buf,
            );
            if let Err(e) = r {
                if let Some(ts) = self
                    .time_slots
                    .get(g.time_slot)
                    .and_then(|s| self.time_series.get_mut(s.export))
                {
                    ts.errors += 1;
                }
                tracing::debug!(error = %e, "group read failed");
                if e.kind == ErrorKind::CpuOffline {
                    failed_cpu = true;
                }
                continue;
            }
            let (en, run) = (self.buf.time_enabled, self.buf.time_running);
            let d_en = en.saturating_sub(g.last_enabled);
            let d_run = run.saturating_sub(g.last_running);
            if d_en > 0 {
                any_moved = true;
            } else if g.last_enabled > 0 {
                g.stalled = true;
                any_still = true;
            }
            g.last_enabled = g.last_enabled.max(en);
            g.last_running = g.last_running.max(run);
            if let Some(t) = self.time_slots.get_mut(g.time_slot) {
                t.d_enabled += d_en;
                t.d_running += d_run;
                t.groups += 1;
            }
            let Some(factor) = mux_factor(en, run) else {
                if d_en > 0 {
                    g.never_ran += 1;
                    if g.never_ran >= 2 {
                        if g.members.len() > 1 {
                            g.split = true;
                            any_split = true;
                        } else {
                            let m = &g.members[0];
                            self.unschedulable.insert(
                                m.plan.metric,
                                Problem::Unschedulable {
                                    event: m.plan.attr.event.clone(),
                                    pmu: m.plan.attr.pmu.clone(),
                                    cpu: g.key.cpu,
                                },
                            );
                        }
                    }
                }
                continue;
            };
            g.never_ran = 0;
            let values = &self.buf.values;
            for (k, m) in g.members.iter_mut().enumerate() {
                // Values come leader first in open order: the member's own
                // position, unless the kernel reordered them.
                let raw = match values.get(k) {
                    Some(&(id, v)) if id == m.counter.id => v,
                    _ => match values.iter().find(|(id, _)| *id == m.counter.id) {
                        Some(&(_, v)) => v,
                        None => continue,
                    },
                };
                let Some(st) = self.series.get_mut(m.series) else {
                    continue;
                };
                if m.plan.snapshot {
                    st.gauge_sum += raw as f64 * m.plan.scale;
                    if st.gauge_last_group != gi {
                        st.gauge_last_group = gi;
                        st.gauge_groups += 1;
                    }
                    continue;
                }
                st.value += monotonic_delta(&mut m.high, raw as f64 * factor) * m.plan.scale;
                st.has_data = true;
            }
        }
        for &s in &self.gauge_series {
            if let Some(st) = self.series.get_mut(s) {
                if st.gauge_groups > 0 {
                    st.value = st.gauge_sum / f64::from(st.gauge_groups);
                    st.has_data = true;
                }
            }
        }
        for t in &mut self.time_slots {
            if t.groups > 0 {
                if let Some(ts) = self.time_series.get_mut(t.export) {
                    ts.enabled += t.d_enabled as f64 * 1e-9 / f64::from(t.groups);
                    ts.running += t.d_running as f64 * 1e-9 / f64::from(t.groups);
                    ts.has_times = true;
                }
                t.d_enabled = 0;
                t.d_running = 0;
                t.groups = 0;
            }
        }
        // A read saw an offline CPU, or a group's enabled time stood still
        // while others moved (the kernel stops an offline CPU's events):
        // the online list may have changed under us.
        if failed_cpu || (any_moved && any_still) {
            self.read_online();
        }
        // Groups that still stand still are on CPUs that are online: the
        // CPU went offline and came back between two collections, and the
        // kernel never re-enables such events. Reopen them at the next
        // collection (its reconcile refreshes the indexes); until then
        // their series stay in the output with their totals.
        if any_moved && self.groups.iter().any(|g| g.stalled) {
            let before = self.groups.len();
            self.groups.retain(|g| !g.stalled);
            tracing::info!(
                groups = before - self.groups.len(),
                "groups stopped counting (CPU offline and back?); reopening them"
            );
            self.retry_open = true;
        }
        if any_split {
            let mut gi = self.groups.len();
            while gi > 0 {
                gi -= 1;
                if self.groups[gi].split {
                    self.split_group(gi);
                }
            }
            self.refresh();
        }
        if failed_cpu {
            tracing::debug!("a read saw an offline CPU; re-planning at the next collection");
        }
    }

    /// The counters as of the last [`read_groups`](Self::read_groups).
    pub fn snapshot(&self) -> Snapshot {
        let mut families = Vec::with_capacity(self.series_order.len() + 4);
        // Counters by metric, in config order.
        for (mi, order) in self.series_order.iter().enumerate() {
            let mut samples = Vec::new();
            for &i in order {
                let st = &self.series[i];
                if st.live && st.has_data {
                    if samples.is_empty() {
                        samples.reserve_exact(order.len());
                    }
                    samples.push(Sample {
                        labels: st.labels.clone(),
                        value: st.value,
                        start_unix_nanos: 0,
                    });
                }
            }
            if samples.is_empty() {
                continue;
            }
            let m = &self.resolution.metrics[mi];
            families.push(Family {
                name: m.metric.clone(),
                help: m.help.clone(),
                kind: if m.gauge { Kind::Gauge } else { Kind::Counter },
                samples,
            });
        }
        families.push(Family {
            name: "perf_event_available".into(),
            help: "Whether a configured metric is counted on this host (1) or not (0); the reason is on the landing page and in `perf-exporter check`.".into(),
            kind: Kind::Gauge,
            samples: self
                .avail
                .iter()
                .map(|a| Sample {
                    labels: a.labels.clone(),
                    value: if a.open && !self.unschedulable.contains_key(&a.metric) {
                        1.0
                    } else {
                        0.0
                    },
                    start_unix_nanos: 0,
                })
                .collect(),
        });
        families.push(Family {
            name: "perf_event_unavailable_info".into(),
            help: "Why a configured metric is not counted (perf_event_available is 0): `reason` is one of a fixed set of problem codes, `class` is `not_on_platform` (expected on this hardware) or `failed` (should be countable here).".into(),
            kind: Kind::Gauge,
            samples: self
                .avail
                .iter()
                .filter_map(|a| {
                    let labels = if !a.open {
                        a.info.clone()
                    } else {
                        let u = self.unschedulable.get(&a.metric)?;
                        let pairs: Vec<(&'static str, String)> =
                            a.labels.to_vec();
                        info_labels(&pairs, Some(u))
                    };
                    Some(Sample {
                        labels,
                        value: 1.0,
                        start_unix_nanos: 0,
                    })
                })
                .collect(),
        });
        let visible = |t: &TimeSeries| t.cpu.is_none_or(|c| self.is_online(c));
        let time_samples = |pick: fn(&TimeSeries) -> f64| -> Vec<Sample> {
            self.time_order
                .iter()
                .map(|&i| &self.time_series[i])
                .filter(|t| t.has_times && visible(t))
                .map(|t| Sample {
                    labels: t.labels.clone(),
                    value: pick(t),
                    start_unix_nanos: 0,
                })
                .collect()
        };
        families.push(Family {
            name: "perf_group_enabled_seconds_total".into(),
            help: "Time the set's perf groups were enabled; compare with running time to see multiplexing.".into(),
            kind: Kind::Counter,
            samples: time_samples(|t| t.enabled),
        });
        families.push(Family {
            name: "perf_group_running_seconds_total".into(),
            help: "Time the set's perf groups were actually counting on the PMU (less than enabled when multiplexed).".into(),
            kind: Kind::Counter,
            samples: time_samples(|t| t.running),
        });
        families.push(Family {
            name: "perf_read_errors_total".into(),
            help: "Failed group reads.".into(),
            kind: Kind::Counter,
            samples: self
                .time_order
                .iter()
                .map(|&i| &self.time_series[i])
                .filter(|t| visible(t))
                .map(|t| Sample {
                    labels: t.labels.clone(),
                    value: t.errors as f64,
                    start_unix_nanos: 0,
                })
                .collect(),
        });
        Snapshot { families }
    }

    /// Why a metric is missing or partial, per metric.
    pub fn problems(&self) -> Vec<(String, Problem)> {
        let mut out = Vec::new();
        for (mi, rt) in self.runtime.iter().enumerate() {
            for r in &rt.reasons {
                out.push((rt.metric.clone(), r.clone()));
            }
            if let Some(u) = self.unschedulable.get(&mi) {
                out.push((rt.metric.clone(), u.clone()));
            }
        }
        out
    }
}

/// The labels of a `perf_event_unavailable_info` sample: an availability
/// sample's plus `reason` and `class` (each from a small fixed set).
fn info_labels(pairs: &[(&'static str, String)], why: Option<&Problem>) -> Labels {
    let mut v = pairs.to_vec();
    v.push(("reason", why.map_or("failed", Problem::code).into()));
    v.push((
        "class",
        why.map_or(Class::Failed, Problem::class).as_str().into(),
    ));
    Labels::new(v)
}

/// An engine's accumulated counts as plain data, taken before a config
/// reload replaces it ([`Engine::totals`]) and continued by the new engine
/// for every metric that counts exactly the same events
/// ([`Engine::carry_over`]), so unchanged counters never reset.
#[derive(Debug, Clone, Default)]
pub struct Totals {
    metrics: Vec<ResolvedMetric>,
    /// (series key with the index into `metrics`, value, has data)
    series: Vec<(SeriesKey, f64, bool)>,
    /// ((set name, cpu or None when summed), (enabled s, running s, has
    /// times, failed reads))
    times: Vec<(TimeKey, TimeTotals)>,
}

/// A group-time series by set name and CPU (`None`: summed over CPUs).
type TimeKey = (String, Option<u32>);
/// Enabled and running seconds, whether it has times, failed reads.
type TimeTotals = (f64, f64, bool, u64);

/// Whether two resolutions of a metric count the same thing the same way
/// (name, winning encodings, scale, kind); the CPUs may differ.
fn same_counting(a: &ResolvedMetric, b: &ResolvedMetric) -> bool {
    a.metric == b.metric
        && a.status != Status::Unavailable
        && b.status != Status::Unavailable
        && a.gauge == b.gauge
        && a.event == b.event
        && a.instances.len() == b.instances.len()
        && a.instances.iter().zip(&b.instances).all(|(x, y)| {
            x.spec == y.spec
                && x.inst.pmu == y.inst.pmu
                && x.inst.type_ == y.inst.type_
                && x.inst.config == y.inst.config
                && x.inst.scale == y.inst.scale
                && x.inst.uncore == y.inst.uncore
                && x.inst.snapshot == y.inst.snapshot
        })
}

impl Engine {
    /// The accumulated counts, to continue in a reloaded engine. Collect
    /// first so they are current.
    pub fn totals(&self) -> Totals {
        let set_name = |i: usize| {
            self.resolution
                .sets
                .get(i)
                .map_or_else(String::new, |s| s.name.clone())
        };
        Totals {
            metrics: self.resolution.metrics.clone(),
            series: self
                .series_index
                .iter()
                .filter_map(|(key, &i)| {
                    self.series
                        .get(i)
                        .map(|st| (key.clone(), st.value, st.has_data))
                })
                .collect(),
            times: self
                .time_series
                .iter()
                .map(|t| {
                    (
                        (set_name(t.set), t.cpu),
                        (t.enabled, t.running, t.has_times, t.errors),
                    )
                })
                .collect(),
        }
    }

    /// Continues `old`'s counters where this engine counts the same metric
    /// the same way: their series keep their totals instead of restarting
    /// at zero (the group self-counters continue by set name). Returns the
    /// names of the metrics continued.
    pub fn carry_over(&mut self, old: Totals) -> Vec<String> {
        let map: Vec<Option<usize>> = old
            .metrics
            .iter()
            .map(|om| {
                self.resolution
                    .metrics
                    .iter()
                    .position(|nm| same_counting(om, nm))
            })
            .collect();
        for ((oi, labels), value, has_data) in old.series {
            let Some(ni) = map.get(oi).copied().flatten() else {
                continue;
            };
            let gauge = self.resolution.metrics[ni].gauge;
            let idx = self.series_of(&(ni, labels));
            let st = &mut self.series[idx];
            if gauge {
                if !st.has_data {
                    st.value = value;
                }
            } else {
                st.value += value;
            }
            st.has_data |= has_data;
        }
        for ((set, cpu), (en, run, has, errors)) in old.times {
            let Some(si) = self.resolution.sets.iter().position(|s| s.name == set) else {
                continue;
            };
            if let Some(&x) = self.time_series_index.get(&(si, cpu)) {
                let t = &mut self.time_series[x];
                t.enabled += en;
                t.running += run;
                t.has_times |= has;
                t.errors += errors;
            }
        }
        map.iter()
            .flatten()
            .map(|&ni| self.resolution.metrics[ni].metric.clone())
            .collect()
    }
}

fn natural(s: &str) -> (String, u64) {
    match s.rsplit_once('_') {
        Some((h, t)) if t.bytes().all(|b| b.is_ascii_digit()) && !t.is_empty() => {
            (h.to_string(), t.parse().unwrap_or(0))
        }
        _ => (s.to_string(), 0),
    }
}

/// Orders label sets numerically where values are numbers (cpu 2 < 10).
fn label_order(l: &[(&'static str, String)]) -> Vec<(String, u64, String)> {
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

impl Drop for Engine {
    fn drop(&mut self) {
        // Members after leaders: closing a leader first would orphan the
        // group's other fds into singletons for a moment.
        for g in &mut self.groups {
            while g.members.len() > 1 {
                g.members.pop();
            }
        }
    }
}

/// Where the fd budget stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdBudget {
    /// fds the plan needs.
    pub needed: u64,
    /// The soft limit after raising it.
    pub soft: u64,
    /// The hard limit.
    pub hard: u64,
}

/// Checks the fd budget against RLIMIT_NOFILE, raising the soft limit
/// toward the hard one when the plan needs more (plus headroom for
/// sockets and files).
pub fn ensure_fd_budget(needed: usize) -> FdBudget {
    let want = needed as u64 + 128;
    let (soft, hard) = crate::perf::live::raise_nofile(want);
    if soft < want {
        tracing::warn!(needed, soft, hard, "RLIMIT_NOFILE is below what the plan needs; some counters will fail to open (raise `ulimit -n`)");
    }
    FdBudget {
        needed: needed as u64,
        soft,
        hard,
    }
}
