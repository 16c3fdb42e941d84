//! The simulated kernel's knobs, for tests and demos: the clock, slow
//! reads, multiplexing, activity, refusals and group limits. Every knob
//! changes only what happens after the call: the counters are brought up
//! to date with the old setting first. Counter budgets, the NMI watchdog
//! and stalled counters ([`SimKernel::set_counters`], ...) are the
//! failures issue 27 makes visible as counter states.

use super::SimKernel;
use std::sync::atomic::Ordering;

/// Sleeps for a delay knob's nanoseconds, if any.
pub(super) fn sleep_for(ns: &std::sync::atomic::AtomicU64) {
    let ns = ns.load(Ordering::Relaxed);
    if ns > 0 {
        std::thread::sleep(std::time::Duration::from_nanos(ns));
    }
}

impl SimKernel {
    /// Makes every group read take at least `d` of wall time (the calling
    /// thread sleeps, holding no lock): a slow PMU, for demos and tests
    /// of slow scrapes (`serve --simulate --simulate.read-delay`).
    pub fn set_read_delay(&self, d: std::time::Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.read_delay_ns.store(ns, Ordering::Relaxed);
    }

    /// Makes every open (counters, samplers, probes) take at least `d`
    /// of wall time (the calling thread sleeps, holding no lock): a slow
    /// build of an engine, for tests that scrapes are served while a
    /// reload opens its counters (`serve --simulate
    /// --simulate.open-delay`).
    pub fn set_open_delay(&self, d: std::time::Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.open_delay_ns.store(ns, Ordering::Relaxed);
    }

    /// Sleeps for the open delay, if one is set
    /// ([`set_open_delay`](Self::set_open_delay)).
    pub(super) fn open_delay(&self) {
        sleep_for(&self.open_delay_ns);
    }

    /// The simulated clock, in nanoseconds since creation (plus every
    /// [`advance`](Self::advance)).
    pub fn now_ns(&self) -> u64 {
        self.state().now()
    }

    /// Moves the clock forward by `ns` nanoseconds. On a real clock this
    /// adds to the elapsed time.
    pub fn advance(&self, ns: u64) {
        let mut st = self.state();
        st.offset_ns = st.offset_ns.saturating_add(ns);
    }

    /// Sets the multiplexing ratio (clamped to 0..=1) of the groups whose
    /// hardware PMU is `pmu_name`: the core PMU owning the CPU for generic
    /// hardware and cache events, `software` for software-only groups.
    /// Applies from now on.
    pub fn set_mux_ratio(&self, pmu_name: &str, ratio: f64) {
        let ratio = if ratio.is_nan() {
            1.0
        } else {
            ratio.clamp(0.0, 1.0)
        };
        let mut st = self.state();
        st.sync_all();
        st.mux.insert(pmu_name.to_string(), ratio);
    }

    /// Scales how busy `pmu_name`'s events are from now on (rates are
    /// multiplied by `factor`, default 1). Together with
    /// [`set_mux_ratio`](Self::set_mux_ratio) this makes the multiplexing
    /// estimate `value * enabled / running` go down between reads, as it
    /// does on real hardware when load shifts while a group is off the PMU.
    pub fn set_activity(&self, pmu_name: &str, factor: f64) {
        let factor = if factor.is_finite() {
            factor.max(0.0)
        } else {
            1.0
        };
        let mut st = self.state();
        st.sync_all();
        st.activity.insert(pmu_name.to_string(), factor);
    }

    /// Makes every open on `pmu_name` fail with `errno` (e.g. EACCES,
    /// EBUSY) until [`unrefuse`](Self::unrefuse).
    pub fn refuse(&self, pmu_name: &str, errno: i32) {
        self.state().refused.insert(pmu_name.to_string(), errno);
    }

    /// Undoes [`refuse`](Self::refuse).
    pub fn unrefuse(&self, pmu_name: &str) {
        self.state().refused.remove(pmu_name);
    }

    /// Limits a group to `n` events of `pmu_name` (leader included):
    /// opening one more as a member fails with EINVAL, like `arm_dmc620`,
    /// which allows one hardware event per group.
    pub fn set_max_group(&self, pmu_name: &str, n: usize) {
        self.state().max_group.insert(pmu_name.to_string(), n);
    }

    /// Makes groups of more than one event on `pmu_name` unschedulable:
    /// their `time_running` stays put while `time_enabled` grows.
    /// Single-event groups run normally. Applies from now on.
    pub fn set_group_never_runs(&self, pmu_name: &str, never: bool) {
        let mut st = self.state();
        st.sync_all();
        if never {
            st.never_runs.insert(pmu_name.to_string());
        } else {
            st.never_runs.remove(pmu_name);
        }
    }

    /// Makes every group on CPU `cpu` (of any size, on any PMU)
    /// unschedulable: its `time_running` stays put while `time_enabled`
    /// grows, as for a CPU whose counters another user holds. Applies
    /// from now on.
    pub fn set_cpu_never_runs(&self, cpu: u32, never: bool) {
        let mut st = self.state();
        st.sync_all();
        if never {
            st.never_runs_on.insert(cpu);
        } else {
            st.never_runs_on.remove(&cpu);
        }
    }

    /// Gives `pmu_name` a budget of `n` counters per CPU (default:
    /// unlimited), as the kernel schedules flexible groups: a group that
    /// needs more of them than are free opens and never runs
    /// (`time_running` stays 0, as on a 6-counter Arm core given a
    /// 7-event group); groups that fit share the free counters, each
    /// running `free / Σ sizes` of the time when they do not all fit at
    /// once (the kernel rotates them; this is its average). A group's
    /// size is its events of that PMU; software events take no counter.
    /// Simplified: no fixed counters, and a group that can never run does
    /// not starve the others (the kernel may). Applies from now on.
    pub fn set_counters(&self, pmu_name: &str, n: usize) {
        let mut st = self.state();
        st.sync_all();
        st.counters.insert(pmu_name.to_string(), n);
    }

    /// Makes the NMI watchdog hold (`true`) or release one of
    /// `pmu_name`'s counters (of its [`set_counters`](Self::set_counters)
    /// budget), as `kernel.nmi_watchdog=1` does on x86. Applies from now
    /// on.
    pub fn set_watchdog(&self, pmu_name: &str, on: bool) {
        let mut st = self.state();
        st.sync_all();
        if on {
            st.watchdog.insert(pmu_name.to_string());
        } else {
            st.watchdog.remove(pmu_name);
        }
    }

    /// Makes `pmu_name`'s counters stall (`true`): they stay scheduled
    /// (`time_running` advances) but their counts stand still, as a broken
    /// virtual PMU's do. Applies from now on.
    pub fn set_stalled(&self, pmu_name: &str, stalled: bool) {
        let mut st = self.state();
        st.sync_all();
        if stalled {
            st.stalled.insert(pmu_name.to_string());
        } else {
            st.stalled.remove(pmu_name);
        }
    }

    /// Makes another user (a second agent, a profiler) hold `n` of
    /// `pmu_name`'s counters with pinned events, from now on (0: it
    /// leaves): the budget the exporter measures drops by `n`, and groups
    /// that no longer fit never run.
    pub fn set_other_user(&self, pmu_name: &str, n: usize) {
        let mut st = self.state();
        st.sync_all();
        if n == 0 {
            st.others.remove(pmu_name);
        } else {
            st.others.insert(pmu_name.to_string(), n);
        }
    }

    /// Gives each core PMU the general-purpose counters its model has per
    /// CPU with SMT on ([`usual_counters`]), and with `watchdog` the NMI
    /// watchdog holding one of them: the budget `check --simulate`
    /// measures.
    pub fn set_usual_counters(&self, watchdog: bool) {
        for p in self.table.pmus.iter().filter(|p| p.is_core()) {
            let id = self.table.identity_of(&p.name);
            self.set_counters(&p.name, usual_counters(&p.name, id.known()));
            self.set_watchdog(&p.name, watchdog);
        }
    }
}

/// The general-purpose counters per CPU of a core PMU, by its name and
/// CPU identity, with SMT on (the simulator's table, from the vendors'
/// manuals): Intel cores before Ice Lake 4 (8 with SMT off), Golden Cove
/// (`cpu_core`) 8, Gracemont (`cpu_atom`) 6, AMD Zen 6, Arm PMUv3 cores
/// (Neoverse N1) and QEMU's emulated PMUv3 6. Fixed counters (Intel
/// cycles, instructions, ref-cycles, slots; the Arm cycle counter) are
/// not in the budget.
pub fn usual_counters(pmu: &str, identity: Option<&str>) -> usize {
    match pmu {
        "cpu_core" => 8,
        "cpu_atom" => 6,
        "cpu" if identity.is_some_and(|i| i.starts_with("AuthenticAMD")) => 6,
        "cpu" => 4,
        _ => 6,
    }
}
