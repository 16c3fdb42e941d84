//! The core PMUs' counter budget (issue 27 item 3): how many
//! general-purpose counters are free, measured the way `perf` users do it
//! by hand, who holds the others where the host tells, and whether the
//! PMU is a hypervisor's.
//!
//! # Measuring
//!
//! On one online CPU of each core PMU, groups of 1, 2, 3, ... copies of
//! one event that needs a general-purpose counter (`branch-instructions`:
//! x86 has no fixed counter for it, Arm PMUv3 none either; `instructions`
//! where that does not open and no fixed counter takes it) are opened as
//! flexible groups, enabled, left for [`SETTLE`] and read: the first group
//! whose `time_enabled` advanced while its `time_running` did not (the
//! kernel never scheduled it), or that the PMU refuses at open (x86
//! validates a group against its counters), is one more than the free
//! counters. Pinned users (the NMI watchdog, another agent's pinned
//! events) take their counters before any flexible group, so what this
//! finds is what one group of the exporter can use. At most [`MAX_PROBE`]
//! counters are probed (beyond that the budget is "at least").
//!
//! # When
//!
//! At start-up, before the groups open (the plan splits groups larger
//! than the budget: `open.rs`), and then at most every
//! [`REMEASURE`]: a measurement adds a flexible group to the CPU's
//! rotation for up to `MAX_PROBE` settle windows (the exporter's own
//! groups there run a little less of the time meanwhile) and opens up to
//! `MAX_PROBE (MAX_PROBE + 1) / 2` short-lived fds; and a budget changes
//! only when another user arrives or leaves, which a few minutes' delay
//! reports well enough. After start-up a measurement never runs inside a
//! collection (it takes up to `(free + 1) × SETTLE`, about 60 ms on a
//! 4-counter core): `serve` runs it on a thread of its own
//! ([`super::follow_budget`]), which takes a [`BudgetProbe`] from the
//! engine when one is due, runs it without holding the engine, and hands
//! the result back; `stat` runs it between intervals
//! ([`Engine::run_upkeep`](super::Engine::run_upkeep)). Collections use
//! the latest result: it is at most [`REMEASURE`] plus one measurement
//! old (the follower wakes when one is due). A group that never runs
//! meanwhile is split when it is seen (`read.rs`), whatever the budget
//! said.
//!
//! Earlier when a drop shows: a core PMU group whose running share falls
//! by more than [`SHARE_DROP`] between collections, or that stops running,
//! asks for a measurement in that collection (`read.rs`), at most one per
//! [`EARLY_REMEASURE_NS`] of the kernel's clock (a drop inside that
//! interval is measured when it ends). The window a measurement's probe
//! groups were in the rotation is not compared, so a probe never asks
//! for the next one.
//!
//! # Who holds the rest
//!
//! The host names only the NMI watchdog (`kernel.nmi_watchdog=1`, one
//! counter on x86). Where the kernel seam tells the PMU's counters
//! ([`Kernel::pmu_counters`]: the simulation) the rest is other users'; otherwise a
//! budget below the highest one measured since start-up is (another user
//! arrived mid-run). The `hypervisor` CPU flag or a DMI vendor or product
//! of a virtual machine says the instance type decides the counters.

use crate::perf::{EventAttr, GroupReading, Kernel};
use crate::pmu::virt::HostFacts;
use crate::pmu::{PmuTable, Scope};
use crate::problem::budget::Held;
use crate::snapshot::{Family, Kind, Labels, Sample};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The largest group probed: more general-purpose counters than any core
/// PMU has per CPU (x86 has at most 8 with SMT off, Arm PMUv3 at most 31
/// event counters but cores implement 6 to 20).
pub const MAX_PROBE: usize = 32;
/// How long each probe group is left enabled before it is read: a few of
/// the kernel's rotation ticks (`perf_event_mux_interval_ms`, 4 ms by
/// default), so a group that fits is scheduled at least once.
pub const SETTLE: Duration = Duration::from_millis(12);
/// The least time between two measurements after start-up.
pub const REMEASURE: Duration = Duration::from_secs(300);
/// The least time between two measurements when a core PMU group's
/// running share drops between collections (or a group stops running:
/// another user took counters), so the budget follows within a
/// collection or two instead of [`REMEASURE`].
pub const EARLY_REMEASURE_NS: u64 = 30_000_000_000;
/// The drop of a group's running share between two windows that asks
/// for an early measurement (the kernel's rotation makes shares jitter by
/// less).
pub const SHARE_DROP: f64 = 0.05;

/// `PERF_COUNT_HW_BRANCH_INSTRUCTIONS`.
const HW_BRANCH_INSTRUCTIONS: u64 = 4;
/// `PERF_COUNT_HW_INSTRUCTIONS`.
const HW_INSTRUCTIONS: u64 = 1;

/// One core PMU's budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PmuCounters {
    /// The core PMU.
    pub pmu: String,
    /// The CPU it was measured on.
    pub cpu: u32,
    /// General-purpose counters free for one group (`None`: not measured).
    pub free: Option<usize>,
    /// Whether `free` is only a lower bound ([`MAX_PROBE`] all ran).
    pub at_least: bool,
    /// The PMU's general-purpose counters, where the kernel tells.
    pub total: Option<usize>,
    /// Who holds the others, whether it is virtual, or why it is not
    /// measured.
    pub held: Vec<Held>,
    /// Counters held by the NMI watchdog (0 or 1).
    pub watchdog: usize,
    /// Counters held by other users, where that can be told.
    pub others: Option<usize>,
    /// Whether the PMU is a hypervisor's.
    pub virtual_pmu: bool,
}

impl PmuCounters {
    /// The budget the plan fits groups in (`None`: unknown or unbounded).
    pub fn plan_free(&self) -> Option<usize> {
        self.free.filter(|_| !self.at_least)
    }

    /// One line for `check` and the page: `cpu: 3 of 4 general-purpose
    /// counters free`.
    pub fn summary(&self) -> String {
        match (self.free, self.total) {
            (None, _) => format!("{}: not measured", self.pmu),
            (Some(f), _) if self.at_least => {
                format!("{}: at least {f} general-purpose counters free", self.pmu)
            }
            (Some(f), Some(t)) => format!(
                "{}: {f} of {t} general-purpose counters free (CPU {})",
                self.pmu, self.cpu
            ),
            (Some(f), None) => format!(
                "{}: {f} general-purpose counters free (CPU {})",
                self.pmu, self.cpu
            ),
        }
    }
}

/// The events a probe may count on `pmu`, in order: generic branch
/// instructions (a general-purpose counter everywhere), then, where no
/// fixed counter takes the first one (not Intel), instructions (QEMU's
/// emulated PMUv3 counts no branch event). The PMU's type is the extended
/// type where several core PMUs share the generic events (hybrid).
fn probe_attrs(table: &PmuTable, pmu: &crate::pmu::Pmu) -> Vec<EventAttr> {
    let hybrid = table.pmus.iter().filter(|p| p.is_core()).count() > 1;
    let ext = if hybrid {
        u64::from(pmu.type_) << 32
    } else {
        0
    };
    let intel = table
        .identity_of(&pmu.name)
        .known()
        .is_some_and(|i| i.starts_with("GenuineIntel"))
        || pmu.name.starts_with("cpu_");
    let attr = |id: u64, name: &str| EventAttr {
        type_: crate::sys::abi::TYPE_HARDWARE,
        config: [ext | id, 0, 0, 0],
        event: name.into(),
        pmu: pmu.name.clone(),
        exclude: Default::default(),
    };
    let mut v = vec![attr(HW_BRANCH_INSTRUCTIONS, "branch-instructions")];
    if !intel {
        v.push(attr(HW_INSTRUCTIONS, "instructions"));
    }
    v
}

/// Whether a group of `n` probe events is scheduled on `cpu`: `Ok(None)`
/// when the PMU refuses it (too many for its counters), `Err` when even
/// the first event does not open.
fn group_runs(
    kernel: &dyn Kernel,
    attr: &EventAttr,
    cpu: u32,
    n: usize,
    buf: &mut GroupReading,
) -> Result<Option<bool>, String> {
    let leader = kernel
        .open(attr, cpu, None)
        .map_err(|e| e.problem().to_string())?;
    let mut members = Vec::with_capacity(n.saturating_sub(1));
    for _ in 1..n {
        match kernel.open(attr, cpu, Some(&leader)) {
            Ok(c) => members.push(c),
            Err(_) => return Ok(None),
        }
    }
    if kernel.enable_group(&leader, attr, cpu).is_err() {
        return Ok(None);
    }
    kernel.settle(SETTLE);
    let r = kernel.read_group(&leader, attr, cpu, buf);
    // Members before the leader.
    drop(members);
    drop(leader);
    match r {
        Ok(()) if buf.time_enabled == 0 => Err("the probe group's time did not advance".into()),
        Ok(()) => Ok(Some(buf.time_running > 0)),
        Err(_) => Ok(None),
    }
}

/// Measures `pmu`'s free counters on `cpu`: `(free, at_least)`.
fn measure_free(kernel: &dyn Kernel, attr: &EventAttr, cpu: u32) -> Result<(usize, bool), String> {
    let mut buf = GroupReading::default();
    for n in 1..=MAX_PROBE {
        match group_runs(kernel, attr, cpu, n, &mut buf)? {
            Some(true) => {}
            Some(false) | None => return Ok((n - 1, false)),
        }
    }
    Ok((MAX_PROBE, true))
}

/// The CPU a core PMU is measured on: its first online CPU.
pub(super) fn cpu_of(pmu: &crate::pmu::Pmu, online: &[u32]) -> Option<u32> {
    match &pmu.scope {
        Scope::Cpus(c) | Scope::Cpumask(c) => c.iter().copied().find(|c| online.contains(c)),
        _ => online.first().copied(),
    }
}

/// What a measurement opens: per core PMU whose budget is worth measuring,
/// the CPU it is measured on and the probe events to try, in order.
#[derive(Debug, Clone)]
struct Target {
    pmu: String,
    cpu: u32,
    attrs: Vec<EventAttr>,
}

/// The core PMUs of `table` to measure on `online` CPUs.
fn targets(kernel: &dyn Kernel, table: &PmuTable, online: &[u32]) -> Vec<Target> {
    let mut out = Vec::new();
    for pmu in table.pmus.iter().filter(|p| p.is_core()) {
        if !kernel.measures_counters(&pmu.name) {
            continue;
        }
        let Some(cpu) = cpu_of(pmu, online) else {
            continue;
        };
        out.push(Target {
            pmu: pmu.name.clone(),
            cpu,
            attrs: probe_attrs(table, pmu),
        });
    }
    out
}

/// Measures each target through `kernel` (the probes: opens, an enable,
/// [`SETTLE`] and a read per group size).
fn measure_targets(
    kernel: &dyn Kernel,
    targets: &[Target],
    facts: &HostFacts,
    before: &[PmuCounters],
) -> Vec<PmuCounters> {
    let mut out = Vec::new();
    for t in targets {
        let mut measured = Err("no probe event".to_string());
        for attr in &t.attrs {
            measured = measure_free(kernel, attr, t.cpu);
            if measured.is_ok() {
                break;
            }
        }
        let prev = before.iter().find(|b| b.pmu == t.pmu);
        out.push(explain(
            &t.pmu,
            t.cpu,
            measured,
            kernel.pmu_counters(&t.pmu),
            facts,
            prev,
        ));
    }
    out
}

/// Measures every core PMU of `table` through `kernel`. `before` is the
/// previous measurement (its highest budgets tell other users that came
/// since, where the kernel does not say the PMU's counters).
pub fn measure(
    kernel: &dyn Kernel,
    table: &PmuTable,
    online: &[u32],
    facts: &HostFacts,
    before: &[PmuCounters],
) -> Vec<PmuCounters> {
    measure_targets(kernel, &targets(kernel, table, online), facts, before)
}

/// A re-measure of the budget, taken from the engine when one is due
/// ([`Engine::budget_probe`](super::Engine::budget_probe)) with what it
/// needs, so it runs without the engine: off the collection path, on a
/// thread of its own ([`super::follow_budget`]). Its result goes back
/// with [`Engine::set_budget`](super::Engine::set_budget).
#[derive(Debug)]
pub struct BudgetProbe {
    kernel: Arc<dyn Kernel>,
    targets: Vec<Target>,
    facts: HostFacts,
    before: Vec<PmuCounters>,
}

impl BudgetProbe {
    /// Runs the probes (up to `(free + 1) × SETTLE` per core PMU, about
    /// 60 ms on a 4-counter core).
    pub fn run(self) -> MeasuredBudget {
        MeasuredBudget(measure_targets(
            self.kernel.as_ref(),
            &self.targets,
            &self.facts,
            &self.before,
        ))
    }
}

/// The result of a [`BudgetProbe`].
#[derive(Debug, Clone)]
pub struct MeasuredBudget(Vec<PmuCounters>);

/// A measurement with who holds the rest.
fn explain(
    pmu: &str,
    cpu: u32,
    measured: Result<(usize, bool), String>,
    total: Option<usize>,
    facts: &HostFacts,
    prev: Option<&PmuCounters>,
) -> PmuCounters {
    let watchdog = usize::from(facts.watchdog_holds_counter());
    let virtual_by = facts.virtual_by();
    let mut held = Vec::new();
    let (free, at_least) = match measured {
        Ok((f, a)) => (Some(f), a),
        Err(why) => {
            held.push(Held::NotMeasured {
                pmu: pmu.into(),
                why,
            });
            (None, false)
        }
    };
    if watchdog > 0 {
        held.push(Held::NmiWatchdog { pmu: pmu.into() });
    }
    // The highest budget seen: the baseline other users take from.
    let baseline = prev
        .and_then(|p| p.free.map(|f| f + p.others.unwrap_or(0)))
        .filter(|_| prev.is_some_and(|p| !p.at_least));
    let others = match (free, total, at_least) {
        (Some(f), Some(t), false) => Some(t.saturating_sub(f + watchdog)),
        (Some(f), None, false) => baseline.map(|b| b.saturating_sub(f)),
        _ => None,
    };
    if let Some(h) = others.filter(|&h| h > 0) {
        held.push(Held::OtherUsers {
            pmu: pmu.into(),
            held: h,
        });
    }
    if let (Some(by), Some(f)) = (&virtual_by, free) {
        held.push(Held::VirtualPmu {
            pmu: pmu.into(),
            by: by.clone(),
            free: f,
        });
    }
    PmuCounters {
        pmu: pmu.into(),
        cpu,
        free,
        at_least,
        total,
        held,
        watchdog,
        others,
        virtual_pmu: virtual_by.is_some(),
    }
}

/// The engine's budget: the last measurement and when the last one began.
#[derive(Debug, Default)]
pub(super) struct Budgets {
    pub(super) last: Vec<PmuCounters>,
    pub(super) facts: HostFacts,
    at: Option<Instant>,
    /// The kernel's clock at the last measurement (the early ones' rate).
    at_ns: Option<u64>,
    /// A measurement was made since the last collection's reads.
    fresh: bool,
    /// A core PMU group's running share dropped since the last
    /// measurement: one is wanted as soon as [`due_in_at`](Self::due_in_at) allows.
    pub(super) pending: bool,
}

impl Budgets {
    /// The free counters a group of `pmu` fits in.
    pub(super) fn free(&self, pmu: &str) -> Option<usize> {
        self.last
            .iter()
            .find(|b| b.pmu == pmu)
            .and_then(PmuCounters::plan_free)
    }

    /// Sets the host's facts and explains the last measurement again.
    pub(super) fn set_facts(&mut self, facts: HostFacts) {
        self.facts = facts;
        let last = std::mem::take(&mut self.last);
        self.last = last
            .into_iter()
            .map(|b| {
                let measured = match (
                    b.free,
                    b.held.iter().find_map(|h| match h {
                        Held::NotMeasured { why, .. } => Some(why.clone()),
                        _ => None,
                    }),
                ) {
                    (Some(f), _) => Ok((f, b.at_least)),
                    (None, why) => Err(why.unwrap_or_default()),
                };
                // Its own baseline: what others held stays held.
                let base = PmuCounters {
                    free: b.free.map(|f| f + b.others.unwrap_or(0)),
                    others: None,
                    ..b.clone()
                };
                explain(&b.pmu, b.cpu, measured, b.total, &self.facts, Some(&base))
            })
            .collect();
    }

    /// How long until a measurement is due ([`REMEASURE`] after the last
    /// one began; zero when none was made).
    pub(super) fn due_in(&self) -> Duration {
        self.at
            .map_or(Duration::ZERO, |t| REMEASURE.saturating_sub(t.elapsed()))
    }

    /// How long until a measurement is due at `now_ns` (the kernel's
    /// clock): the regular one, or sooner when a running-share drop asked
    /// for an early one ([`EARLY_REMEASURE_NS`] after the last).
    pub(super) fn due_in_at(&self, now_ns: u64) -> Duration {
        let regular = self.due_in();
        if !self.pending {
            return regular;
        }
        let since = self.at_ns.map_or(u64::MAX, |t| now_ns.saturating_sub(t));
        regular.min(Duration::from_nanos(
            EARLY_REMEASURE_NS.saturating_sub(since),
        ))
    }

    /// Whether a measurement was made since the last call.
    pub(super) fn take_fresh(&mut self) -> bool {
        std::mem::take(&mut self.fresh)
    }

    /// Measures now, logging what changed.
    pub(super) fn measure(&mut self, kernel: &dyn Kernel, table: &PmuTable, online: &[u32]) {
        self.at = Some(Instant::now());
        self.at_ns = Some(kernel.monotonic_ns());
        self.pending = false;
        let now = measure(kernel, table, online, &self.facts, &self.last);
        self.apply(MeasuredBudget(now));
    }

    /// A measurement to run off the collection path, when one is due; the
    /// next is due [`REMEASURE`] after it.
    pub(super) fn probe(
        &mut self,
        kernel: &Arc<dyn Kernel>,
        table: &PmuTable,
        online: &[u32],
    ) -> Option<BudgetProbe> {
        let now_ns = kernel.monotonic_ns();
        if !self.due_in_at(now_ns).is_zero() {
            return None;
        }
        self.at = Some(Instant::now());
        self.at_ns = Some(now_ns);
        self.pending = false;
        Some(BudgetProbe {
            kernel: kernel.clone(),
            targets: targets(kernel.as_ref(), table, online),
            facts: self.facts.clone(),
            before: self.last.clone(),
        })
    }

    /// Takes a measurement as the budget, logging what changed.
    pub(super) fn apply(&mut self, m: MeasuredBudget) {
        let now = m.0;
        for b in &now {
            let was = self.last.iter().find(|o| o.pmu == b.pmu);
            if was.map(|w| (w.free, &w.held)) != Some((b.free, &b.held)) {
                let held: Vec<String> =
                    b.held.iter().map(crate::problem::Reason::explain).collect();
                tracing::info!(pmu = %b.pmu, budget = %b.summary(), held = %held.join("; "), "counter budget measured");
            }
        }
        self.last = now;
        self.fresh = true;
    }

    /// Makes a measurement due now (tests).
    #[cfg(test)]
    pub(super) fn expire(&mut self) {
        self.at = Instant::now().checked_sub(REMEASURE);
    }

    /// `perf_pmu_counters{pmu, kind}` and `perf_pmu_virtual{pmu}`.
    pub(super) fn families(&self, families: &mut Vec<Family>) {
        let mut counters = Vec::new();
        let mut virt = Vec::new();
        for b in &self.last {
            let kinds = [
                ("free", b.free),
                ("total", b.total),
                ("nmi_watchdog", b.free.map(|_| b.watchdog)),
                ("other_users", b.others),
            ];
            for (kind, v) in kinds {
                if let Some(v) = v {
                    counters.push(sample(
                        vec![("pmu", b.pmu.clone()), ("kind", kind.into())],
                        v as f64,
                    ));
                }
            }
            virt.push(sample(
                vec![("pmu", b.pmu.clone())],
                f64::from(u8::from(b.virtual_pmu)),
            ));
        }
        families.push(Family {
            name: "perf_pmu_counters".into(),
            help: "A core PMU's general-purpose counters per CPU, measured at start-up and at most every 5 minutes: kind=free (what one group can use; a group larger is split), total (where the kernel tells), nmi_watchdog (held by the NMI watchdog), other_users (held by others, where that can be told).".into(),
            kind: Kind::Gauge,
            samples: counters,
        });
        families.push(Family {
            name: "perf_pmu_virtual".into(),
            help: "1 when a core PMU is a hypervisor's (the hypervisor CPU flag or a virtual machine's DMI vendor or product): the instance type decides its counters.".into(),
            kind: Kind::Gauge,
            samples: virt,
        });
    }
}

fn sample(labels: Vec<(&'static str, String)>, value: f64) -> Sample {
    Sample {
        labels: Labels::new(labels),
        value,
        start_unix_nanos: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::sim::SimKernel;
    use crate::pmu::fixtures::table;
    use crate::problem::Reason;

    fn codes(b: &PmuCounters) -> Vec<&'static str> {
        b.held.iter().map(Reason::code).collect()
    }

    /// The probe finds the simulated budget less the watchdog's and
    /// another user's pinned counters, and says who holds them.
    #[test]
    fn the_probe_finds_the_free_counters_and_who_holds_the_rest() {
        let t = table("intel-skx");
        let k = SimKernel::with_manual_clock(t.clone());
        let online = t.topology.online.clone();
        // No budget modelled: nothing to measure.
        assert!(measure(&k, &t, &online, &HostFacts::default(), &[]).is_empty());
        k.set_counters("cpu", 4);
        let b = measure(&k, &t, &online, &HostFacts::default(), &[]);
        assert_eq!(b.len(), 1);
        assert_eq!(
            (b[0].free, b[0].total, b[0].at_least),
            (Some(4), Some(4), false)
        );
        assert!(b[0].held.is_empty());
        assert_eq!(k.live_counters(), 0, "every probe closed");
        k.set_watchdog("cpu", true);
        let facts = HostFacts {
            nmi_watchdog: Some(true),
            x86: true,
            ..HostFacts::default()
        };
        let b = measure(&k, &t, &online, &facts, &b);
        assert_eq!(b[0].free, Some(3));
        assert_eq!(codes(&b[0]), ["nmi_watchdog"]);
        k.set_other_user("cpu", 2);
        let b = measure(&k, &t, &online, &facts, &b);
        assert_eq!((b[0].free, b[0].others), (Some(1), Some(2)));
        assert_eq!(codes(&b[0]), ["nmi_watchdog", "counters_held"]);
        assert!(
            b[0].summary().starts_with("cpu: 1 of 4"),
            "{}",
            b[0].summary()
        );
    }

    /// Without the PMU's count, a budget that drops below the highest one
    /// measured is another user's; a virtual PMU says what the instance
    /// type exposes.
    #[test]
    fn a_drop_since_the_last_measurement_is_another_users() {
        let facts = HostFacts {
            hypervisor_flag: true,
            ..HostFacts::default()
        };
        let first = explain("cpu", 0, Ok((6, false)), None, &facts, None);
        assert_eq!(first.others, None);
        assert_eq!(codes(&first), ["virtual_pmu"]);
        assert!(first.held[0]
            .what_to_do()
            .starts_with("this instance type exposes 6 counters"));
        let later = explain("cpu", 0, Ok((4, false)), None, &facts, Some(&first));
        assert_eq!(later.others, Some(2));
        assert_eq!(codes(&later), ["counters_held", "virtual_pmu"]);
        // The baseline holds: the third still knows 6.
        let third = explain("cpu", 0, Ok((5, false)), None, &facts, Some(&later));
        assert_eq!(third.others, Some(1));
        let failed = explain(
            "cpu",
            0,
            Err("open: ENOENT".into()),
            None,
            &HostFacts::default(),
            None,
        );
        assert_eq!(codes(&failed), ["budget_unknown"]);
        assert_eq!(failed.plan_free(), None);
    }

    /// Hybrid: each core PMU is measured on its own CPUs with its type as
    /// the extended type.
    #[test]
    fn hybrid_core_pmus_are_measured_apart() {
        let t = table("intel-hybrid");
        let k = SimKernel::with_manual_clock(t.clone());
        k.set_counters("cpu_core", 8);
        k.set_counters("cpu_atom", 6);
        let b = measure(&k, &t, &t.topology.online, &HostFacts::default(), &[]);
        let got: Vec<(String, Option<usize>)> = b.iter().map(|b| (b.pmu.clone(), b.free)).collect();
        assert_eq!(
            got,
            [
                ("cpu_atom".to_string(), Some(6)),
                ("cpu_core".to_string(), Some(8))
            ]
        );
        assert!(b[0].cpu >= 16 && b[1].cpu < 16, "{b:?}");
    }
}
