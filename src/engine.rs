//! The counting engine: plans perf groups from a [`Resolution`], opens
//! them through a [`Kernel`], and turns group reads into a plain-data
//! [`Snapshot`] at scrape time.
//!
//! * **Groups.** Each set becomes one group per (PMU, CPU): core and
//!   software PMUs on every CPU they cover, uncore PMUs once per
//!   instance on each CPU of their `cpumask`. Hybrid core PMUs get
//!   separate groups (a group never mixes `cpu_core` and `cpu_atom`).
//! * **Reads.** One `read()` per group returns every member's raw count
//!   with the group's `time_enabled` and `time_running`.
//! * **Multiplexing.** When the PMU has fewer counters than events the
//!   kernel time-slices groups, so `time_running < time_enabled`. The
//!   count is estimated as `raw * enabled / running` (what `perf stat`
//!   prints). The estimate can go *down* between reads; exported
//!   counters take only increases of its high-water mark, so they never
//!   decrease and never count the same events twice.
//! * **Never scheduled.** A group whose `time_running` stays 0 while it is
//!   enabled cannot fit on the PMU; it is split into single-event groups
//!   (and a member that still never runs exports nothing, not zero).
//! * **Hotplug.** The online CPU list is checked at each collection; an
//!   offline CPU's groups are closed and its series leave the output. When
//!   it returns, its groups are reopened and its counters continue from
//!   their previous totals.
//! * **Failures.** One CPU's or PMU's failure never drops the others.

use crate::perf::{Counter, ErrorKind, EventAttr, GroupReading, Kernel, PerfError};
use crate::pmu::{PmuTable, Scope};
use crate::resolve::chain::{Resolution, ResolvedMetric, Status};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// A metric family in a snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    /// The metric name, with `_total` for counters.
    pub name: String,
    /// HELP text.
    pub help: String,
    /// Counter or gauge.
    pub kind: Kind,
    /// Samples.
    pub samples: Vec<Sample>,
}

/// The Prometheus type of a family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Monotonic.
    Counter,
    /// A reading.
    Gauge,
}

/// One sample.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Label pairs, in order.
    pub labels: Vec<(&'static str, String)>,
    /// The value, in base units.
    pub value: f64,
}

/// Everything one collection produced: plain data, no perf types.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// Families in a stable order.
    pub families: Vec<Family>,
}

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
    pub reasons: Vec<String>,
}

/// A series key: metric index plus labels.
type SeriesKey = (usize, Vec<(&'static str, String)>);

#[derive(Debug, Default, Clone)]
struct SeriesState {
    /// Accumulated counter value (base units) or last gauge reading.
    value: f64,
    /// Has ever had data.
    has_data: bool,
    /// Is currently backed by an open group.
    live: bool,
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
    last_enabled: u64,
    last_running: u64,
    never_ran: u32,
}

/// The engine. Owns every fd.
#[derive(Debug)]
pub struct Engine {
    kernel: Arc<dyn Kernel>,
    table: PmuTable,
    resolution: Resolution,
    groups: Vec<Group>,
    series: HashMap<SeriesKey, SeriesState>,
    /// (set, cpu) -> (enabled, running) seconds, accumulated.
    group_times: BTreeMap<(usize, u32), (f64, f64)>,
    read_errors: BTreeMap<(usize, u32), u64>,
    runtime: Vec<MetricRuntime>,
    online: Vec<u32>,
    buf: GroupReading,
    /// Members that can never be scheduled, by metric.
    unschedulable: BTreeMap<usize, String>,
    /// An open failed with ENODEV on a CPU the online list already shows
    /// (the kernel brings perf up on a CPU slightly after it appears):
    /// retry at the next collection.
    retry_open: bool,
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
                        vec![m.reason()]
                    } else {
                        m.partial.clone()
                    },
                }
            })
            .collect();
        let mut e = Engine {
            kernel,
            table,
            resolution,
            groups: Vec::new(),
            series: HashMap::new(),
            group_times: BTreeMap::new(),
            read_errors: BTreeMap::new(),
            runtime,
            online,
            buf: GroupReading::default(),
            unschedulable: BTreeMap::new(),
            retry_open: false,
        };
        e.reconcile();
        e
    }

    /// The number of open fds.
    pub fn open_fds(&self) -> usize {
        self.groups.iter().map(|g| g.members.len()).sum()
    }

    /// The fds the plan needs on the current CPUs.
    pub fn planned_fds(&self) -> usize {
        self.plan().values().map(Vec::len).sum()
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

    /// CPUs an instance's events go on now: the PMU's cpumask or cpus
    /// against the online CPUs, or every online CPU; an uncore PMU without
    /// a cpumask (older `arm_dmc620`) keeps one online CPU.
    fn cpus_now(&self, inst: &crate::resolve::Instance) -> Vec<u32> {
        let online = |c: &u32| self.online.contains(c);
        match self.table.get(&inst.pmu).map(|p| &p.scope) {
            Some(Scope::Cpumask(c)) | Some(Scope::Cpus(c)) => {
                c.iter().copied().filter(online).collect()
            }
            _ if inst.uncore => match inst.cpus.first() {
                Some(c) if online(c) => vec![*c],
                _ => self.online.iter().copied().take(1).collect(),
            },
            _ => self.online.clone(),
        }
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
            let per_cpu = self.resolution.sets.get(set).is_none_or(|s| s.per_cpu);
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

    fn note(&mut self, metric: usize, reason: String) {
        let rt = &mut self.runtime[metric];
        if !rt.reasons.contains(&reason) && rt.reasons.len() < 16 {
            tracing::warn!(metric = %rt.metric, %reason, "counter unavailable");
            rt.reasons.push(reason);
        }
    }

    /// Opens `members` as one group (leader first), splitting off members
    /// the PMU refuses to group. Returns the groups opened.
    fn open_group(&mut self, key: GroupKey, members: Vec<MemberPlan>) -> Vec<Group> {
        let mut out = Vec::new();
        let mut pending = members;
        let mut split = key.split;
        while !pending.is_empty() {
            let mut opened: Vec<Member> = Vec::new();
            let mut deferred = Vec::new();
            for mp in pending.drain(..) {
                let leader = opened.first().map(|m| &m.counter);
                match self.kernel.open(&mp.attr, key.cpu, leader) {
                    Ok(counter) => opened.push(Member {
                        plan: mp,
                        counter,
                        high: 0.0,
                    }),
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
                if let Err(e) = self
                    .kernel
                    .enable_group(&first.counter, &first.plan.attr, key.cpu)
                {
                    for m in &opened {
                        self.note(m.plan.metric, e.reason());
                    }
                } else {
                    for m in &opened {
                        self.series.entry(m.plan.series.clone()).or_default().live = true;
                    }
                    out.push(Group {
                        key: GroupKey {
                            split,
                            ..key.clone()
                        },
                        members: opened,
                        last_enabled: 0,
                        last_running: 0,
                        never_ran: 0,
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
        let reason = format!("{} on {}: {}", mp.attr.event, mp.attr.pmu, e.reason());
        self.note(mp.metric, reason);
    }

    /// Brings open groups in line with the plan on the current CPUs.
    fn reconcile(&mut self) {
        let plan = self.plan();
        // Close groups no longer planned (their CPU went away).
        let before = self.groups.len();
        let planned_keys: Vec<(usize, String, u32)> =
            plan.keys().map(|k| (k.set, k.pmu.clone(), k.cpu)).collect();
        let mut closed = Vec::new();
        self.groups.retain(|g| {
            let keep = planned_keys.contains(&(g.key.set, g.key.pmu.clone(), g.key.cpu));
            if !keep {
                closed.extend(g.members.iter().map(|m| m.plan.series.clone()));
            }
            keep
        });
        for s in closed {
            if let Some(st) = self.series.get_mut(&s) {
                st.live = false;
            }
        }
        if self.groups.len() != before {
            tracing::info!(
                closed = before - self.groups.len(),
                "closed groups of offline CPUs"
            );
        }
        // Open groups that are planned but not open.
        for (key, members) in plan {
            let open = self
                .groups
                .iter()
                .any(|g| g.key.set == key.set && g.key.pmu == key.pmu && g.key.cpu == key.cpu);
            if !open {
                let gs = self.open_group(key, members);
                self.groups.extend(gs);
            }
        }
        // Series that lost every group stay out of the output.
        let live: std::collections::HashSet<&SeriesKey> = self
            .groups
            .iter()
            .flat_map(|g| g.members.iter().map(|m| &m.plan.series))
            .collect();
        for (k, st) in self.series.iter_mut() {
            st.live = live.contains(k);
        }
        for r in &mut self.runtime {
            r.open_fds = 0;
        }
        for g in &self.groups {
            self.read_errors.entry((g.key.set, g.key.cpu)).or_default();
        }
        for g in &self.groups {
            for m in &g.members {
                self.runtime[m.plan.metric].open_fds += 1;
            }
        }
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

    /// Reads every group once and returns the counters.
    pub fn collect(&mut self) -> Snapshot {
        if let Some(online) = self.kernel.online_cpus(&self.table.sysfs) {
            self.set_online(online);
        }
        if self.retry_open {
            self.retry_open = false;
            self.reconcile();
        }
        let mut to_split = Vec::new();
        let mut failed_cpu = false;
        // Per (set, cpu): summed enabled/running deltas and group count;
        // the exported seconds are the mean over the groups, so six IMC
        // groups on one CPU do not count six seconds per second.
        let mut times: BTreeMap<(usize, u32), (u64, u64, u32)> = BTreeMap::new();
        // Groups whose time_enabled did not move: candidates for dead fds.
        let mut still = Vec::new();
        let mut any_moved = false;
        for gi in 0..self.groups.len() {
            let g = &self.groups[gi];
            let leader = &g.members[0];
            let r = self.kernel.read_group(
                &leader.counter,
                &leader.plan.attr,
                g.key.cpu,
                &mut self.buf,
            );
            if let Err(e) = r {
                *self.read_errors.entry((g.key.set, g.key.cpu)).or_default() += 1;
                tracing::debug!(error = %e, "group read failed");
                if e.kind == ErrorKind::CpuOffline {
                    failed_cpu = true;
                }
                continue;
            }
            let (en, run) = (self.buf.time_enabled, self.buf.time_running);
            let g = &mut self.groups[gi];
            let d_en = en.saturating_sub(g.last_enabled);
            let d_run = run.saturating_sub(g.last_running);
            if d_en > 0 {
                any_moved = true;
            } else if g.last_enabled > 0 {
                still.push(gi);
            }
            g.last_enabled = g.last_enabled.max(en);
            g.last_running = g.last_running.max(run);
            let t = times.entry((g.key.set, g.key.cpu)).or_default();
            t.0 += d_en;
            t.1 += d_run;
            t.2 += 1;
            if run == 0 {
                if d_en > 0 {
                    g.never_ran += 1;
                    if g.never_ran >= 2 {
                        if g.members.len() > 1 {
                            to_split.push(gi);
                        } else {
                            let m = &g.members[0];
                            self.unschedulable.insert(
                                m.plan.metric,
                                format!("{} on {} CPU {}: never scheduled on the PMU (time_running stays 0)", m.plan.attr.event, m.plan.attr.pmu, g.key.cpu),
                            );
                        }
                    }
                }
                continue;
            }
            g.never_ran = 0;
            let factor = if run < en {
                en as f64 / run as f64
            } else {
                1.0
            };
            for m in &mut g.members {
                let Some(&(_, raw)) = self.buf.values.iter().find(|(id, _)| *id == m.counter.id)
                else {
                    continue;
                };
                let st = self.series.entry(m.plan.series.clone()).or_default();
                if m.plan.snapshot {
                    st.value = raw as f64 * m.plan.scale;
                    st.has_data = true;
                    continue;
                }
                let est = raw as f64 * factor;
                if est > m.high {
                    st.value += (est - m.high) * m.plan.scale;
                    m.high = est;
                }
                st.has_data = true;
            }
        }
        for ((set, cpu), (en, run, n)) in times {
            let t = self.group_times.entry((set, cpu)).or_default();
            t.0 += en as f64 * 1e-9 / f64::from(n);
            t.1 += run as f64 * 1e-9 / f64::from(n);
        }
        // A group whose enabled time stood still while others moved has a
        // dead fd: its CPU went offline and came back between two
        // collections (the kernel disables events on an offline CPU and
        // never re-enables them). Reopen it; its series keep their totals.
        if any_moved && !still.is_empty() {
            tracing::info!(
                groups = still.len(),
                "groups stopped counting (CPU offline and back?); reopening them"
            );
            for gi in still.iter().rev() {
                let g = self.groups.remove(*gi);
                to_split.retain(|x| x != gi);
                for x in to_split.iter_mut() {
                    if *x > *gi {
                        *x -= 1;
                    }
                }
                drop(g);
            }
            self.retry_open = true;
        }
        for gi in to_split.into_iter().rev() {
            self.split_group(gi);
        }
        if failed_cpu {
            tracing::debug!("a read saw an offline CPU; re-planning at the next collection");
        }
        self.snapshot()
    }

    fn snapshot(&self) -> Snapshot {
        let mut families = Vec::new();
        // Counters by metric, in config order.
        let mut by_metric: BTreeMap<usize, Vec<Sample>> = BTreeMap::new();
        for ((mi, labels), st) in &self.series {
            if st.live && st.has_data {
                by_metric.entry(*mi).or_default().push(Sample {
                    labels: labels.clone(),
                    value: st.value,
                });
            }
        }
        for (mi, mut samples) in by_metric {
            let m = &self.resolution.metrics[mi];
            samples.sort_by_key(|s| label_order(&s.labels));
            families.push(Family {
                name: m.metric.clone(),
                help: m.help.clone(),
                kind: if m.gauge { Kind::Gauge } else { Kind::Counter },
                samples,
            });
        }
        // Availability.
        let mut avail = Vec::new();
        for (mi, m) in self.resolution.metrics.iter().enumerate() {
            if m.status == Status::Unavailable {
                avail.push(Sample {
                    labels: vec![
                        ("metric", m.metric.clone()),
                        (
                            "event",
                            m.tried.first().map(|t| t.event.clone()).unwrap_or_default(),
                        ),
                        ("pmu", String::new()),
                    ],
                    value: 0.0,
                });
                continue;
            }
            let mut pmus: Vec<&str> = m.instances.iter().map(|i| i.inst.pmu.as_str()).collect();
            pmus.sort_by_key(|p| natural(p));
            pmus.dedup();
            for p in pmus {
                let open = self
                    .groups
                    .iter()
                    .flat_map(|g| &g.members)
                    .any(|mm| mm.plan.metric == mi && mm.plan.attr.pmu == p);
                let ok = open && !self.unschedulable.contains_key(&mi);
                avail.push(Sample {
                    labels: vec![
                        ("metric", m.metric.clone()),
                        ("event", m.event.clone().unwrap_or_default()),
                        ("pmu", p.to_string()),
                    ],
                    value: if ok { 1.0 } else { 0.0 },
                });
            }
        }
        families.push(Family {
            name: "perf_event_available".into(),
            help: "Whether a configured metric is counted on this host (1) or not (0); the reason is on the landing page and in `perf-exporter check`.".into(),
            kind: Kind::Gauge,
            samples: avail,
        });
        let names: Vec<&str> = self
            .resolution
            .sets
            .iter()
            .map(|s| s.name.as_str())
            .collect();
        let time_samples = |pick: fn(&(f64, f64)) -> f64| -> Vec<Sample> {
            self.group_times
                .iter()
                .filter(|((_, cpu), _)| self.online.contains(cpu))
                .map(|((set, cpu), t)| Sample {
                    labels: vec![
                        ("set", names.get(*set).unwrap_or(&"").to_string()),
                        ("cpu", cpu.to_string()),
                    ],
                    value: pick(t),
                })
                .collect()
        };
        families.push(Family {
            name: "perf_group_enabled_seconds_total".into(),
            help: "Time the set's perf groups were enabled; compare with running time to see multiplexing.".into(),
            kind: Kind::Counter,
            samples: time_samples(|t| t.0),
        });
        families.push(Family {
            name: "perf_group_running_seconds_total".into(),
            help: "Time the set's perf groups were actually counting on the PMU (less than enabled when multiplexed).".into(),
            kind: Kind::Counter,
            samples: time_samples(|t| t.1),
        });
        families.push(Family {
            name: "perf_read_errors_total".into(),
            help: "Failed group reads.".into(),
            kind: Kind::Counter,
            samples: self
                .read_errors
                .iter()
                .filter(|((_, cpu), _)| self.online.contains(cpu))
                .map(|((set, cpu), n)| Sample {
                    labels: vec![
                        ("set", names.get(*set).unwrap_or(&"").to_string()),
                        ("cpu", cpu.to_string()),
                    ],
                    value: *n as f64,
                })
                .collect(),
        });
        Snapshot { families }
    }

    /// Why a metric is missing or partial, per metric.
    pub fn problems(&self) -> Vec<(String, String)> {
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

/// An engine's accumulated counts as plain data, taken before a config
/// reload replaces it ([`Engine::totals`]) and continued by the new engine
/// for every metric that counts exactly the same events
/// ([`Engine::carry_over`]), so unchanged counters never reset.
#[derive(Debug, Clone, Default)]
pub struct Totals {
    metrics: Vec<ResolvedMetric>,
    /// (series key with the index into `metrics`, value, has data)
    series: Vec<(SeriesKey, f64, bool)>,
    /// ((set name, cpu), (enabled, running) seconds)
    group_times: Vec<((String, u32), (f64, f64))>,
    /// ((set name, cpu), failed reads)
    read_errors: Vec<((String, u32), u64)>,
}

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
                .series
                .iter()
                .map(|(key, st)| (key.clone(), st.value, st.has_data))
                .collect(),
            group_times: self
                .group_times
                .iter()
                .map(|((set, cpu), t)| ((set_name(*set), *cpu), *t))
                .collect(),
            read_errors: self
                .read_errors
                .iter()
                .map(|((set, cpu), n)| ((set_name(*set), *cpu), *n))
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
            let st = self.series.entry((ni, labels)).or_default();
            if gauge {
                if !st.has_data {
                    st.value = value;
                }
            } else {
                st.value += value;
            }
            st.has_data |= has_data;
        }
        let set_index = |name: &str| self.resolution.sets.iter().position(|s| s.name == name);
        for ((set, cpu), (en, run)) in old.group_times {
            if let Some(si) = set_index(&set) {
                let t = self.group_times.entry((si, cpu)).or_default();
                t.0 += en;
                t.1 += run;
            }
        }
        for ((set, cpu), n) in old.read_errors {
            if let Some(si) = set_index(&set) {
                *self.read_errors.entry((si, cpu)).or_default() += n;
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
