//! The counting engine: plans perf groups from a [`Resolution`], opens
//! them through a [`Kernel`], and turns group reads into a plain-data
//! [`Snapshot`](crate::snapshot::Snapshot) at scrape time.
//!
//! * **Groups** (`plan.rs`). Each set becomes one group per
//!   (PMU, CPU): core and software PMUs on every CPU they cover, uncore
//!   PMUs once per instance on each CPU of their `cpumask`. Hybrid core
//!   PMUs get separate groups (a group never mixes `cpu_core` and
//!   `cpu_atom`). Intel "perf metrics" groups (`slots` and `topdown-*`)
//!   are led by `slots`, as the kernel requires (see `plan.rs`).
//! * **Reads** (`read.rs`). One `read()` per group returns every
//!   member's raw count with the group's `time_enabled` and
//!   `time_running`. That is the whole cost of a collection on the kernel
//!   side: no other syscall, no `/sys` or `/proc` file is read while
//!   nothing changes.
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
//!   Where the core PMU's free counters were measured (`counters.rs`: at
//!   start-up, then at most every 5 minutes, off the collection path:
//!   [`follow_budget`]), a group larger than them is
//!   split before it is opened (`open.rs`), with
//!   [`Problem::GroupTooLarge`]; per cgroup too (`cgroup/plan.rs`).
//! * **Counter states** (`trust.rs`). Each collection judges every
//!   counter series from the same reads: `counting`, `multiplexed`,
//!   `never_ran` or `stalled` ([`CounterState`]), exported as
//!   `perf_counter_states` (bounded by the config) and, for counters not
//!   counting only, `perf_counter_state` and `perf_counter_running_ratio`.
//! * **Plausibility** (`plausible.rs`). Once asked for
//!   ([`Engine::check_plausibility`]), every [`plausible::CHECK_EVERY_NS`]
//!   the cycles and instructions of each CPU are judged against its busy
//!   time, maximum frequency and retire width; a count the CPU cannot
//!   produce makes its series `implausible`, with why. The busy time is
//!   read after the collection, not in it ([`after_collection`]).
//! * **Upkeep** (`upkeep.rs`). A collection makes one `read()` per group
//!   and nothing else: the work done at a bounded rate (the busy-time
//!   reading, the budget's re-measure) runs where no scrape waits for
//!   it, and the per-CPU detail is built only when asked for
//!   ([`Engine::detail_families`]).
//! * **Hotplug** (`hotplug.rs`). When a CPU goes offline the
//!   kernel stops its events (their `time_enabled` stands still) and, on
//!   current kernels, detaches the members of each group, but every event
//!   stays readable with its final count until it is closed (`perf stat`
//!   reads them). The engine therefore reads an offline CPU's groups one
//!   last time (each member on its own if the group read lost it) before
//!   closing them, so nothing counted since the last scrape is lost. Events
//!   of a CPU that went away are never re-enabled by the kernel when it
//!   returns: its groups are reopened, and its counters continue from their
//!   totals. [`follow_hotplug`] reacts to the kernel's hotplug signal
//!   between scrapes, so a returning CPU counts again within milliseconds.
//!   Without a signal (no uevents reach a user-namespaced container) a
//!   group read failing with `ENODEV` or a group's `time_enabled` standing
//!   still while others move reveals an offline CPU, and while any CPU is
//!   known offline the online list is re-read at every collection, so its
//!   return is noticed within one scrape.
//! * **Aggregation** (`per:` of a set, [`Per`](crate::config::Per)). The
//!   engine always counts per CPU: every member adds its scaled delta of
//!   one collection to its per-CPU *detail* series and, when the set is
//!   summed (`per: core | socket | node`), to its *exported* series too,
//!   one per core (`core="N"`, N the lowest CPU of sysfs
//!   `topology/core_cpus_list`), package (`socket="N"`) or node (no
//!   label). So a sum is over the scaled per-CPU values of the same
//!   collection, and a CPU going offline never lowers it. Uncore series
//!   keep `pmu` and `socket` at every level. Gauges are averaged over the
//!   CPUs summed. The exposition ([`Engine::snapshot`]) has the exported
//!   series; the live view and `stat` have the per-CPU ones as well
//!   ([`Engine::detail_families`]). Group-time and read-error series carry
//!   the level's label (`set` and `cpu`, `core`, `socket`, or `set` alone).
//!   A summed series' state (`trust.rs`) is its worst CPU's, with the
//!   running share of its summed times, and `perf_counter_states` counts
//!   per-CPU counters whatever the level, so one CPU that never counted
//!   (`never_ran 1`, the rest `counting`) stays distinguishable from all.
//! * **Start times.** Every counter series records when its count began
//!   (the wall-clock time its first group opened), kept while its total is
//!   carried over (a CPU's return, a reload that counts the same events)
//!   and new when the count restarts; OTLP exports it as
//!   `start_time_unix_nano`.
//! * **Carry-over** (`totals.rs`). A config reload continues
//!   the totals of every metric that counts the same events the same way;
//!   the totals of metrics it removes are parked until the next reload,
//!   which continues them if they come back.
//! * **File descriptors** (`budget.rs`). Each counter is an
//!   fd. Under a low `RLIMIT_NOFILE` the engine opens what fits, in plan
//!   order, and names the rest with the limit to raise.
//! * **Failures.** One CPU's or PMU's failure never drops the others.
//! * **Allocation.** Series are indexed, their label sets rendered once
//!   ([`Labels`]) and their export order computed when the plan changes,
//!   so a collection allocates per family, never per series.
//!
//! # State
//!
//! The [`Engine`] is built one way, [`Engine::for_config`] (`build.rs`),
//! and owns its state as typed parts, each with its invariants and tests:
//! the series and their totals (`series.rs`: [`Totals`] and the parked
//! totals of a reload, `totals::Parked`), the group times (`times.rs`), the
//! CPUs and hotplug (`cpus.rs`), the fd budget (`budget.rs`), the
//! per-cgroup counting ([`cgroup::CgroupCounting`]) and the samplers'
//! families ([`sample::SampledFamilies`]). The open groups, the
//! per-metric run-time state and the availability samples stay in the
//! engine, which ties the parts together at each collection.

mod budget;
mod build;
pub mod cgroup;
mod count;
pub mod counters;
mod cpus;
mod derived;
mod hotplug;
mod open;
mod plan;
mod plausible;
mod read;
mod runtime;
pub mod sample;
pub mod selftest;
mod series;
mod times;
mod totals;
mod trust;
mod upkeep;

pub use budget::Fds;
pub use build::{Opening, ToCount};
pub use count::series_budget;
pub use counters::{BudgetProbe, MeasuredBudget, PmuCounters};
pub use derived::HostDerived;
pub use hotplug::{follow_hotplug, HotplugFollower};
pub use plausible::{BusyRead, BusyTimes};
pub use read::{monotonic_delta, mux_factor};
pub use runtime::MetricRuntime;
pub use totals::Totals;
pub use upkeep::{after_collection, follow_budget, BudgetFollower};

use crate::perf::{Counter, EventAttr, GroupReading, Kernel};
use crate::pmu::PmuTable;
use crate::problem::plausible::Implausible;
use crate::problem::{CounterState, Problem};
use crate::resolve::chain::Resolution;
use crate::snapshot::{Labels, Text};
use std::collections::BTreeMap;
use std::sync::Arc;

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
    /// When its count began (ns since the Unix epoch; 0: never opened).
    start_ns: u64,
    /// Gauges: readings summed over the groups of this collection.
    gauge_sum: f64,
    /// Gauges: how many groups contributed in this collection.
    gauge_groups: u32,
    /// Gauges: the last group that contributed (to count groups once).
    gauge_last_group: usize,
    /// Its counter state (`trust.rs`) and the running share of the last
    /// collection that judged it (`None`: not judged yet).
    trust: Option<(CounterState, f64)>,
    /// Scratch of one collection: what its groups' windows say.
    window: trust::Window,
    /// `perf_counter_state`'s labels for the state they were built in
    /// and `perf_counter_running_ratio`'s: built when an exported series
    /// first is not `counting` (rebuilt when its state changes, never per
    /// collection), so the per-CPU detail of a summed set and a healthy
    /// host's series carry none.
    trouble_labels: Option<(Labels, Labels)>,
    /// Why it is `implausible`, with `perf_counter_implausible_info`'s
    /// labels (rebuilt when the reason changes).
    /// Boxed: rare, and a series carries it in one word.
    implausible: Option<Box<(Implausible, Labels)>>,
    /// In the exposition (the series of the set's level).
    exported: bool,
    /// A per-CPU series (uncore: per instance), for the live view and
    /// `stat`; both flags for the series of a `per: cpu` set.
    detail: bool,
}

#[derive(Debug, Clone, PartialEq)]
struct MemberPlan {
    metric: usize,
    attr: EventAttr,
    scale: f64,
    snapshot: bool,
    /// The exported series (the set's level).
    series: SeriesKey,
    /// The per-CPU series (the same key for a `per: cpu` set).
    detail: SeriesKey,
}

#[derive(Debug)]
struct Member {
    plan: MemberPlan,
    /// Index into the series table: the exported series.
    series: usize,
    /// Index into the series table: the per-CPU series (`series` when
    /// the set is not summed).
    detail: usize,
    counter: Counter,
    /// High-water mark of the scaled estimate (raw units).
    high: f64,
    /// Cycles or instructions of a core PMU: its count must move whenever
    /// it runs, and is judged for plausibility (`trust.rs`).
    role: Option<crate::problem::plausible::Count>,
    /// Its plausibility: the count at the last check and the verdict
    /// (`plausible.rs`); only for a member with a `role` (boxed: the
    /// others, most of them, carry one word).
    check: Option<Box<plausible::MemberCheck>>,
    /// Its raw count at the last read.
    last_raw: u64,
    /// Collections in a row it ran and its count stood still.
    unmoved: u32,
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
    /// Its (set, CPU) slot in the group times.
    time_slot: usize,
    last_enabled: u64,
    last_running: u64,
    never_ran: u32,
    /// Its running share (`Δrunning / Δenabled`) in the last window its
    /// enabled time moved (`None`: none yet): a drop on a core PMU asks
    /// for an early measurement of the budget (`counters.rs`).
    share: Option<f64>,
    /// Scratch of one collection: time_enabled stood still.
    stalled: bool,
    /// Scratch of one collection: never ran twice, split it.
    split: bool,
}

/// A `perf_event_available` sample: which metric, and whether it has open
/// groups on its PMU (the value also needs the metric to be schedulable).
#[derive(Debug, Clone)]
struct Avail {
    metric: usize,
    /// Its labels: `metric`, and `pmu` when the metric's samples are per
    /// PMU (resolved for several, some of them not counting).
    labels: Labels,
    /// The metric's one sample when it is counted on every PMU (`metric`
    /// alone); `None` for a metric unavailable or partly countable, whose
    /// samples stay per PMU.
    whole: Option<Labels>,
    open: bool,
    /// The encoding tried, for the labels of a 0 sample.
    event: String,
    /// The labels when not open: these plus `event`, `reason` and `class`.
    info: Labels,
}

/// The engine. Owns every fd.
#[derive(Debug)]
pub struct Engine {
    kernel: Arc<dyn Kernel>,
    table: PmuTable,
    resolution: Resolution,
    groups: Vec<Group>,
    /// Every series ever planned, with its total.
    series: series::SeriesTable,
    /// The group-time and read-error series.
    times: times::GroupTimes,
    avail: Vec<Avail>,
    runtime: Vec<MetricRuntime>,
    /// The online CPUs and what is known of hotplug.
    cpus: cpus::Cpus,
    buf: GroupReading,
    /// Members that can never be scheduled, by metric.
    unschedulable: BTreeMap<usize, Problem>,
    /// The file descriptor budget.
    fds: budget::Descriptors,
    /// Totals of metrics the last reload removed, kept for the next one
    /// (the grace period, [`totals::Parked`]).
    parked: totals::Parked,
    /// Per-workload counting, when a `cgroups:` section asks for it.
    cgroups: Option<cgroup::CgroupCounting>,
    /// Sampled attribution's families (`sampling:`), added to snapshots.
    sampled: Option<Arc<sample::SampledFamilies>>,
    /// Per metric, its family's name and help, made once and shared by
    /// every snapshot's families.
    family_text: Vec<(Text, Text)>,
    /// Per metric, `perf_counter_states`' labels, one per state.
    state_count_labels: Vec<[Labels; CounterState::ALL.len()]>,
    /// The core PMUs' measured counter budget.
    counters: counters::Budgets,
    /// Plausibility checks (`plausible.rs`), once asked for.
    plausible: Option<plausible::Checker>,
    /// The start-up self-test's verdicts (`selftest.rs`), when it ran.
    self_test: Vec<selftest::SelfTest>,
    /// Groups opened but not yet enabled (an engine built beside a
    /// running one: [`Opening::disabled`]); `None` once groups
    /// are enabled as they open.
    disabled: Option<Vec<open::Disabled>>,
    /// How many times the per-CPU detail was built
    /// ([`Engine::detail_families`]).
    detail_builds: std::sync::atomic::AtomicU64,
    /// The config's derived metrics (`derived:`), which every reader of
    /// this engine's collections evaluates over its windows.
    derived: Arc<HostDerived>,
}

impl Engine {
    /// Adds sampled attribution's families to every snapshot (`None`:
    /// stop); returns the previous source, so a reload can hand it to the
    /// new engine.
    pub fn set_sampled(
        &mut self,
        s: Option<Arc<sample::SampledFamilies>>,
    ) -> Option<Arc<sample::SampledFamilies>> {
        std::mem::replace(&mut self.sampled, s)
    }
}

/// Wall-clock nanoseconds since the Unix epoch (1 if the clock is before it,
/// so a start time is never mistaken for "unknown").
fn now_unix_nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .max(1)
}

impl Engine {
    /// Plans and opens groups, at most `fd_cap` fds (`None`: no cap);
    /// counters beyond it are reported as lacking file descriptors. The
    /// public constructor is [`Engine::for_config`].
    fn open(
        kernel: Arc<dyn Kernel>,
        table: PmuTable,
        resolution: Resolution,
        fd_cap: Option<usize>,
        disabled: bool,
    ) -> Self {
        let mut e = Self::unopened(kernel, table, resolution, fd_cap, disabled);
        // Start listening for hotplug before reading the online list, so a
        // change in between is not missed.
        e.cpus.hotplug_seen = e.kernel.hotplug_generation();
        if let Some(online) = e.kernel.online_cpus(&e.table.sysfs) {
            e.set_online(online);
        }
        // Before anything opens: the plan fits groups in the budget.
        e.measure_counters();
        e.reconcile();
        e
    }

    /// The engine's state before anything is measured or opened, on the
    /// table's online CPUs (what [`series_budget`](count::series_budget)
    /// plans from).
    fn unopened(
        kernel: Arc<dyn Kernel>,
        table: PmuTable,
        resolution: Resolution,
        fd_cap: Option<usize>,
        disabled: bool,
    ) -> Self {
        let online = table.topology.online.clone();
        let runtime = runtime::initial(&resolution);
        let metrics = resolution.metrics.len();
        let mut e = Engine {
            kernel,
            table,
            resolution,
            groups: Vec::new(),
            series: series::SeriesTable::new(metrics),
            times: times::GroupTimes::default(),
            avail: Vec::new(),
            runtime,
            cpus: cpus::Cpus::new(online),
            buf: GroupReading::default(),
            unschedulable: BTreeMap::new(),
            fds: budget::Descriptors::new(fd_cap),
            parked: totals::Parked::default(),
            cgroups: None,
            sampled: None,
            family_text: Vec::new(),
            state_count_labels: Vec::new(),
            counters: counters::Budgets::default(),
            plausible: None,
            self_test: Vec::new(),
            disabled: disabled.then(Vec::new),
            detail_builds: std::sync::atomic::AtomicU64::new(0),
            derived: Arc::default(),
        };
        e.state_count_labels = trust::count_labels(&e.resolution);
        e.family_text = e
            .resolution
            .metrics
            .iter()
            .map(|m| (Text::from(m.metric.clone()), Text::from(m.help.clone())))
            .collect();
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
    /// it, while a CPU is known offline, or at every collection when the
    /// kernel has no hotplug signal).
    pub fn online_reads(&self) -> u64 {
        self.cpus.reads()
    }

    /// The resolution the engine runs.
    pub fn resolution(&self) -> &Resolution {
        &self.resolution
    }

    /// Whether anything at all is being counted.
    pub fn counting(&self) -> bool {
        !self.groups.is_empty()
    }

    /// Measures the core PMUs' free counters now (`counters.rs`: the
    /// engine does it at start-up; after that, [`budget_probe`] says when
    /// one is due, at most every 5 minutes, and it runs off the collection
    /// path).
    ///
    /// [`budget_probe`]: Self::budget_probe
    pub fn measure_counters(&mut self) {
        let online = self.cpus.online().to_vec();
        self.counters
            .measure(self.kernel.as_ref(), &self.table, &online);
    }

    /// A re-measure of the counter budget when one is due (at most every
    /// [`counters::REMEASURE`]; `None` before): run it without the engine
    /// ([`BudgetProbe::run`]) and hand the result to
    /// [`set_budget`](Self::set_budget). A collection never measures.
    pub fn budget_probe(&mut self) -> Option<BudgetProbe> {
        let online = self.cpus.online().to_vec();
        self.counters.probe(&self.kernel, &self.table, &online)
    }

    /// How long until [`budget_probe`](Self::budget_probe) has one.
    pub fn budget_due_in(&self) -> std::time::Duration {
        self.counters.due_in_at(self.kernel.monotonic_ns())
    }

    /// Takes a measurement as the counter budget: the next collection
    /// exports it, groups opened from now on are planned within it.
    pub fn set_budget(&mut self, m: MeasuredBudget) {
        self.counters.apply(m);
    }

    /// Runs, inline, the work a collection leaves for after it (the
    /// plausibility check's busy-time reading) and a budget re-measure
    /// when one is due: for `stat`, between its intervals, and tests.
    /// `serve` runs them off the engine's lock instead
    /// ([`after_collection`], [`follow_budget`]).
    pub fn run_upkeep(&mut self) {
        if let Some(r) = self.busy_read() {
            self.judge_plausibility(r.run());
        }
        if let Some(p) = self.budget_probe() {
            self.set_budget(p.run());
        }
    }

    /// Exports the start-up self-test's verdicts
    /// ([`selftest::run`]: `perf_self_test_passed`, the landing page); a
    /// reload hands them to the new engine.
    pub fn set_self_test(&mut self, t: Vec<selftest::SelfTest>) {
        self.self_test = t;
    }

    /// The start-up self-test's verdicts (empty: it did not run).
    pub fn self_test(&self) -> &[selftest::SelfTest] {
        &self.self_test
    }

    /// The core PMUs' counter budget at the last measurement.
    pub fn counter_budgets(&self) -> &[PmuCounters] {
        &self.counters.last
    }

    /// What the host tells about its counters (the NMI watchdog, a
    /// virtual PMU), read by the caller under its procfs and sysfs roots;
    /// the budget is explained again with them.
    pub fn set_host_facts(&mut self, facts: crate::pmu::virt::HostFacts) {
        self.counters.set_facts(facts);
    }

    /// The config's derived metrics, evaluated by the readers of this
    /// engine's collections (`stat`, the live view, OTLP, the `/metrics`
    /// gauges): resolved on this host ([`HostDerived::resolve`]: each
    /// entry with the alternative of its `expr:` this host takes, the
    /// first whose inputs the engine counts, and the host's `#` literals
    /// folded in).
    pub fn set_derived(&mut self, derived: Arc<crate::config::derived::DerivedTable>) {
        let host = HostDerived::resolve(derived, &self.resolution, &self.table);
        self.derived = Arc::new(host);
    }

    /// The table this host evaluates ([`Engine::set_derived`]; empty
    /// until set).
    pub fn derived(&self) -> &Arc<crate::config::derived::DerivedTable> {
        &self.derived.table
    }

    /// The derived metrics as resolved on this host: the config's table,
    /// each one's resolution and the table evaluated.
    pub fn host_derived(&self) -> &Arc<HostDerived> {
        &self.derived
    }

    fn is_online(&self, cpu: u32) -> bool {
        self.cpus.is_online(cpu)
    }
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
