//! Per-workload counting: the seam between cgroup discovery and the
//! backends that count per cgroup, and the `perf` backend.
//!
//! * **Discovery** ([`Discovery`]) says which cgroups to count; at every
//!   collection it is asked again (a [`Selector`] rescans the tree), and
//!   only when the counted set changed is the backend synced: new cgroups
//!   open (so a cgroup is counted within one scrape interval of its
//!   creation), removed ones close and their series leave.
//! * **Backends** ([`CgroupBackend`]) sync with a [`Selection`], read
//!   their counters and add the `perf_cgroup_*` families to a snapshot.
//!   The `perf` backend ([`PerfBackend`]) opens one group per cgroup, set
//!   and CPU with `PERF_FLAG_PID_CGROUP`; the `bpf` backend
//!   ([`BpfBackend`]: counters once per CPU, charged to cgroups in the
//!   kernel at every context switch) implements the same trait, so the
//!   exporters never see which one counts. [`choice`] says which counts.
//! * **Families.** Per-cgroup families are separate metrics: the node
//!   metric's name with `perf_` replaced by `perf_cgroup_`
//!   ([`family_name`]), labelled with the cgroup's labels (`cgroup`, and
//!   for Kubernetes `pod_uid`, `qos_class`, `container_id`), summed over
//!   CPUs unless `cgroups.per: cpu`. Mixing them into the node families would
//!   make `sum()` count twice.
//! * **What cannot be counted per cgroup** is a typed [`CgroupIssue`]
//!   (of the one vocabulary of reasons, [`crate::problem::Reason`]):
//!   uncore events (a memory controller does not know which task caused
//!   its traffic), a cgroup gone between discovery and open, counters
//!   that failed to open, cgroups left out for want of file descriptors.

mod bpf;
pub mod choice;
mod gaps;
mod perf;
mod plan;
mod plausible;
mod read;
mod series;

pub use bpf::{leave_out_unreachable, BpfBackend};
pub use choice::{BackendChoice, BackendKind, BpfUnavailable, Why};
pub use perf::PerfBackend;

use crate::cgroup::rank::Usage;
use crate::cgroup::{CgroupError, Selection, Selector};
pub use crate::problem::cgroup::{CgroupIssue, SetGap};
use crate::problem::plausible::FreqSource;
use crate::problem::{log_reason, LogFields};
use crate::snapshot::{Family, FamilyDef, Kind, Sample};
use std::fmt;
use tracing::Level;

/// Where the selection of cgroups comes from.
pub trait Discovery: Send + fmt::Debug {
    /// The cgroups to count now, or `None` when the last selection
    /// stands (asked at every collection: must be cheap then).
    fn poll(&mut self) -> Result<Option<Selection>, CgroupError>;
    /// The counted cgroups' CPU time (`cpu.stat`) read since the last
    /// call, if any (read every `rank_interval`, never at a scrape). The
    /// default reads none.
    fn usage(&mut self) -> Option<Usage> {
        None
    }
}

/// Rescans only when inotify saw the tree change (or the ranking over
/// `max_cgroups` may move): [`Selector::scan_if_changed`].
impl Discovery for Selector {
    fn poll(&mut self) -> Result<Option<Selection>, CgroupError> {
        self.scan_if_changed()
    }

    fn usage(&mut self) -> Option<Usage> {
        self.take_usage()
    }
}

/// A per-cgroup backend: the seam the `perf` backend and the BPF backend
/// implement.
pub trait CgroupBackend: Send + fmt::Debug {
    /// `perf` or `bpf`.
    fn name(&self) -> &'static str;
    /// Brings what is counted in line with `sel`: opens new cgroups,
    /// closes removed ones (their series leave the output).
    fn sync(&mut self, sel: &Selection);
    /// Reads every counter (one `read()` per group for `perf`).
    fn read(&mut self);
    /// Appends the `perf_cgroup_*` families as of the last read.
    fn families(&self, out: &mut Vec<Family>);
    /// What could not be counted, and why.
    fn issues(&self) -> Vec<CgroupIssue>;
    /// The cgroups counted now (relative paths).
    fn counted(&self) -> Vec<String>;
    /// Open file descriptors.
    fn open_fds(&self) -> usize;
    /// Reads one collection makes (`read()` calls).
    fn reads(&self) -> usize;
    /// Leaves out of `sel` the cgroups this backend cannot count (they
    /// would only ever read zero): [`Selection::limit_nesting`] by the BPF
    /// program's limits. The default leaves none out.
    fn leave_out(&self, sel: &mut Selection) {
        let _ = sel;
    }
    /// The online CPUs changed (hotplug). The default does nothing.
    fn cpus_changed(&mut self, online: &[u32]) {
        let _ = online;
    }
    /// Judges each counted cgroup's cycles and instructions against its
    /// `cpu.stat` reading in `usage`, made at the start of the collection
    /// that just read the counters (`plausible.rs`); `max` is the node
    /// CPUs' highest maximum frequency, when known. The default judges
    /// nothing.
    fn judge_usage(&mut self, usage: &Usage, max: Option<(f64, FreqSource)>) {
        let _ = (usage, max);
    }
    /// The accumulated counts, for a reload.
    fn totals(&self) -> CgroupTotals;
    /// Continues `old`'s counts where the same cgroup and metric
    /// continue, counting the same events. Returns how many series
    /// continued.
    fn carry_over(&mut self, old: CgroupTotals) -> usize;
}

/// Per-cgroup counts as plain data, carried over a reload.
#[derive(Debug, Clone, Default)]
pub struct CgroupTotals {
    /// `(cgroup, metric signature, cpu column, value, start ns)`.
    pub(crate) series: Vec<(String, Signature, Option<u32>, f64, u64)>,
    /// The group times, by cgroup, set name and CPU column.
    pub(crate) times: Vec<TimesTotal>,
}

/// One cgroup's group times of one set and column, carried over a reload.
#[derive(Debug, Clone)]
pub(crate) struct TimesTotal {
    pub(crate) cgroup: String,
    pub(crate) set: String,
    /// The CPU of the column (`None`: summed over CPUs).
    pub(crate) cpu: Option<u32>,
    pub(crate) enabled: f64,
    pub(crate) running: f64,
    pub(crate) start_ns: u64,
}

/// What a per-cgroup metric counts: its node name and every encoding
/// (PMU, type, config words, scale bits, exclude bits).
pub(crate) type Signature = (
    String,
    Vec<(String, u32, [u64; 4], u64, crate::sys::abi::Exclude)>,
);

/// The per-cgroup family of a node metric: `perf_` becomes
/// `perf_cgroup_` (`perf_cpu_clock_seconds_total` →
/// `perf_cgroup_cpu_clock_seconds_total`).
pub fn family_name(node: &str) -> String {
    format!("perf_cgroup_{}", node.strip_prefix("perf_").unwrap_or(node))
}

/// The per-cgroup help of a node metric's help.
pub fn family_help(node_help: &str) -> String {
    format!("{} Per cgroup.", node_help.trim_end())
}

/// The per-cgroup counting's own families, in the order of a collection
/// (each metric's `perf_cgroup_*` family comes from the config through
/// [`family_name`] and [`family_help`]): what the backends emit and the
/// reference of metrics lists. A series' cgroup labels are `cgroup`, or a
/// pod's `pod_uid`, `qos_class` and `static_pod` and a container's
/// `container_id`; `cpu` at `per: cpu`.
pub const FAMILIES: [&FamilyDef; 6] = [
    &GROUP_ENABLED,
    &GROUP_RUNNING,
    &COUNTER_STATES,
    &COUNTER_STATE,
    &RUNNING_RATIO,
    &USAGE,
];

/// The labels a per-cgroup series may carry (see [`FAMILIES`]).
pub const SERIES_LABELS: &[&str] = &[
    "cgroup|pod_uid",
    "qos_class",
    "static_pod",
    "container_id",
    "cpu",
];

const GROUP_ENABLED: FamilyDef = FamilyDef {
    name: "perf_cgroup_group_enabled_seconds_total",
    kind: Kind::Counter,
    help: "Time the set's per-cgroup perf groups were enabled, summed over CPUs; compare with running time to see multiplexing.",
    labels: &["set", "cgroup|pod_uid", "qos_class", "static_pod", "container_id", "cpu"],
};

const GROUP_RUNNING: FamilyDef = FamilyDef {
    name: "perf_cgroup_group_running_seconds_total",
    kind: Kind::Counter,
    help: "Time the set's per-cgroup perf groups were counting on the PMU (less than enabled when multiplexed).",
    labels: &["set", "cgroup|pod_uid", "qos_class", "static_pod", "container_id", "cpu"],
};

const COUNTER_STATES: FamilyDef = FamilyDef {
    name: "perf_cgroup_counter_states",
    kind: Kind::Gauge,
    help: "How many of a per-cgroup metric's series (cgroups, and CPUs where per_cpu) are in each state at the last collection: counting, multiplexed (time-sliced: the value is scaled by enabled/running), never_ran (the cgroup ran but its group was never on the PMU: no value was measured; a series never measured has no value at all), stalled (cycles or instructions on the PMU while the cgroup ran, yet not moving for 3 collections in a row); implausible (cycles or instructions the cgroup's CPU time from cpu.stat cannot produce: above that time × the maximum frequency, or near zero while it was busy; judged at each cpu.stat reading, every cgroups.rank_interval). A series whose cgroup has not run since its counters opened has no state yet.",
    labels: &["metric", "state"],
};

const COUNTER_STATE: FamilyDef = FamilyDef {
    name: "perf_cgroup_counter_state",
    kind: Kind::Gauge,
    help: "1 for the current state of each per-cgroup series that is not counting (multiplexed, never_ran); metric is the per-cgroup family; series that are counting have no series here (see perf_cgroup_counter_states).",
    labels: &["metric", "cgroup|pod_uid", "qos_class", "static_pod", "container_id", "cpu", "state"],
};

const RUNNING_RATIO: FamilyDef = FamilyDef {
    name: "perf_cgroup_counter_running_ratio",
    kind: Kind::Gauge,
    help: "The share of the last collection's window a per-cgroup series that is not counting was on the PMU while its cgroup ran (time_running / time_enabled): below 1 when multiplexed, 0 when it never ran; series that are counting (1) have no series here.",
    labels: &["metric", "cgroup|pod_uid", "qos_class", "static_pod", "container_id", "cpu"],
};

/// The family of the counted cgroups' CPU time from `cpu.stat`.
const USAGE: FamilyDef = FamilyDef {
    name: USAGE_FAMILY,
    kind: Kind::Counter,
    help: "CPU time of the cgroup (its tasks and its descendants'), from the kernel's cpu.stat usage_usec: the CPU share to use where a cgroup switches context often, which perf's cgroup clock (perf_cgroup_cpu_clock_seconds_total) counts low. Read every cgroups.rank_interval (30 s by default), not at each scrape: the value is up to that (plus one collection) old, so take rates over windows of several rank intervals. A cgroup counted since the last read has none yet.",
    labels: &["cgroup|pod_uid", "qos_class", "static_pod", "container_id"],
};

/// Discovery and a backend, as the engine runs them.
#[derive(Debug)]
pub struct CgroupCounting {
    discovery: Box<dyn Discovery>,
    backend: Box<dyn CgroupBackend>,
    /// The counted paths of the selection the backend was last synced to.
    synced: Option<Vec<String>>,
    /// The last selection.
    selection: Selection,
    /// The last discovery failure, until one succeeds.
    failure: Option<String>,
    /// The online CPUs of the last collection.
    online: Option<Vec<u32>>,
    /// Which backend counts and why, when the caller chose.
    choice: Option<BackendChoice>,
    /// `perf_cgroup_cpu_usage_seconds_total` as of the latest `cpu.stat`
    /// read, by counted cgroup path ([`USAGE_FAMILY`]).
    usage: Vec<(String, Sample)>,
    /// The `cpu.stat` reading of this collection, until the counters read
    /// after it are judged against it.
    to_judge: Option<Usage>,
    /// The node CPUs' highest maximum frequency, once known.
    max_freq: Option<(f64, FreqSource)>,
}

/// The family of the counted cgroups' CPU time from `cpu.stat`.
pub const USAGE_FAMILY: &str = "perf_cgroup_cpu_usage_seconds_total";

impl CgroupCounting {
    /// Counts what `discovery` selects with `backend`; discovers and opens
    /// at once.
    pub fn new(discovery: Box<dyn Discovery>, backend: Box<dyn CgroupBackend>) -> Self {
        let mut c = CgroupCounting {
            discovery,
            backend,
            synced: None,
            selection: Selection::default(),
            failure: None,
            online: None,
            choice: None,
            usage: Vec::new(),
            to_judge: None,
            max_freq: None,
        };
        c.refresh();
        c
    }

    /// Asks discovery again and syncs the backend when the counted set
    /// changed. A failed discovery keeps the previous selection.
    pub fn refresh(&mut self) {
        match self.discovery.poll() {
            Ok(None) => self.failure = None,
            Ok(Some(mut sel)) => {
                self.failure = None;
                self.backend.leave_out(&mut sel);
                self.log_unreachable(&sel);
                let rels: Vec<String> = sel.counted.iter().map(|c| c.rel.clone()).collect();
                if self.synced.as_ref() != Some(&rels) {
                    self.backend.sync(&sel);
                    // A cgroup no longer counted leaves at once.
                    self.usage.retain(|(rel, _)| rels.contains(rel));
                    self.synced = Some(rels);
                }
                self.selection = sel;
            }
            Err(e) => {
                if self.failure.is_none() {
                    tracing::warn!(error = %e, "cgroup discovery failed; counting the previous selection");
                }
                self.failure = Some(e.to_string());
            }
        }
        if let Some(u) = self.discovery.usage() {
            self.to_judge = Some(u.clone());
            self.set_usage(u);
        }
    }

    /// Takes a `cpu.stat` reading of the counted cgroups: their samples,
    /// labelled as their other series (built here, every `rank_interval`,
    /// so a scrape only clones them).
    fn set_usage(&mut self, u: Usage) {
        self.usage = u
            .usec
            .into_iter()
            .filter_map(|(rel, usec)| {
                let cg = self.selection.counted.iter().find(|c| c.rel == rel)?;
                let labels = series::labels_of(cg).into();
                let value = usec as f64 * 1e-6;
                let s = Sample {
                    labels,
                    value,
                    start_unix_nanos: 0,
                };
                Some((rel, s))
            })
            .collect();
    }

    /// Logs each cgroup the backend cannot reach once, when it is first
    /// left out for it.
    fn log_unreachable(&self, sel: &Selection) {
        use crate::cgroup::LeftOutReason;
        let before = |rel: &str| {
            self.selection
                .left_out
                .iter()
                .any(|l| l.rel == rel && matches!(l.reason, LeftOutReason::BeyondReach { .. }))
        };
        for l in &sel.left_out {
            if matches!(l.reason, LeftOutReason::BeyondReach { .. }) && !before(&l.rel) {
                let p = l.problem();
                log_reason!(
                    Level::WARN,
                    LogFields::of(&p),
                    [cgroup = %l.rel, backend = self.backend.name(),],
                    [],
                    "cgroup not counted"
                );
            }
        }
    }

    /// One collection on the CPUs `online`: rediscover, follow hotplug,
    /// then read.
    pub fn collect(&mut self, online: &[u32]) {
        self.refresh();
        if self.online.as_deref() != Some(online) {
            if self.online.is_some() {
                self.backend.cpus_changed(online);
            }
            self.online = Some(online.to_vec());
        }
        self.backend.read();
        if let Some(u) = self.to_judge.take() {
            self.backend.judge_usage(&u, self.max_freq);
        }
    }

    /// The node CPUs' highest maximum frequency, for the per-cgroup
    /// cycles bound (the node-level check reads it).
    pub fn set_max_freq(&mut self, max: Option<(f64, FreqSource)>) {
        self.max_freq = max;
    }

    /// Appends the per-cgroup families.
    pub fn families(&self, out: &mut Vec<Family>) {
        self.backend.families(out);
        if !self.usage.is_empty() {
            out.push(USAGE.family(self.usage.iter().map(|(_, s)| s.clone()).collect()));
        }
    }

    /// Records which backend counts and why (for the landing page).
    pub fn set_choice(&mut self, choice: BackendChoice) {
        self.choice = Some(choice);
    }

    /// Which backend counts and why, when recorded.
    pub fn choice(&self) -> Option<&BackendChoice> {
        self.choice.as_ref()
    }

    /// The backend.
    pub fn backend(&self) -> &dyn CgroupBackend {
        self.backend.as_ref()
    }

    /// The last selection (what was matched, counted and left out).
    pub fn selection(&self) -> &Selection {
        &self.selection
    }

    /// What is not counted and why (discovery's left-out cgroups are in
    /// [`selection`](Self::selection)).
    pub fn issues(&self) -> Vec<CgroupIssue> {
        let mut v = self.backend.issues();
        if let Some(f) = &self.failure {
            v.push(CgroupIssue::Discovery(f.clone()));
        }
        v
    }

    /// The accumulated counts, for a reload.
    pub fn totals(&self) -> CgroupTotals {
        self.backend.totals()
    }

    /// Continues a previous backend's counts.
    pub fn carry_over(&mut self, old: CgroupTotals) -> usize {
        self.backend.carry_over(old)
    }
}

impl crate::engine::Engine {
    /// Counts per cgroup from now on (replacing any previous counting).
    pub fn attach_cgroups(&mut self, c: CgroupCounting) {
        self.cgroups = Some(c);
    }

    /// The per-cgroup counting, if any.
    pub fn cgroups(&self) -> Option<&CgroupCounting> {
        self.cgroups.as_ref()
    }

    /// File descriptors left for per-cgroup counters under the engine's
    /// budget (`None`: no budget).
    pub fn cgroup_fd_room(&self) -> Option<usize> {
        self.fds.left(self.open_fds())
    }

    /// The CPUs online now (the columns of per-CPU cgroup series).
    pub fn online_cpus(&self) -> &[u32] {
        self.cpus.online()
    }

    /// Rediscovers and reads the per-cgroup counters.
    pub(super) fn read_cgroups(&mut self) {
        if let Some(c) = &mut self.cgroups {
            c.collect(self.cpus.online());
        }
    }

    /// Appends the per-cgroup families.
    pub(super) fn cgroup_families(&self, out: &mut Vec<Family>) {
        if let Some(c) = &self.cgroups {
            c.families(out);
        }
    }
}

#[cfg(test)]
mod tests;
