//! The simulated kernel: a [`Kernel`] that accepts exactly the encodings a
//! discovered sysfs tree (a [`PmuTable`], usually a test fixture) describes
//! and produces deterministic, plausible counts.
//!
//! # What it accepts
//!
//! * `PERF_TYPE_HARDWARE` (0) and `PERF_TYPE_HW_CACHE` (3) need a core PMU
//!   ([`PmuTable::core_pmus`]). With several core PMUs (hybrid x86) bits
//!   32-63 of `config` must hold one core PMU's type (the extended type)
//!   and the CPU must be one of that PMU's `cpus`; with one core PMU they
//!   must be 0 or its type. Which hardware ids and cache triples the
//!   driver counts comes from the simulator's own transcription of the
//!   kernel's tables ([`drivers`]), never from the resolver's: ENOENT for
//!   what the CPU does not count, EINVAL for what makes no sense
//!   (`L1-icache-stores`, ids out of range). `config1..3` must be 0.
//! * `PERF_TYPE_SOFTWARE` (1): ids 0..=11. `PERF_TYPE_TRACEPOINT` (2): any
//!   id, when the table has a `tracepoint` PMU.
//! * Any other type must be a PMU of the table (else ENOENT). Every set bit
//!   of `config..config3` must be covered by one of its formats (or by one
//!   of its named events' encodings), else EINVAL. A PMU with `cpus` only
//!   counts on those CPUs (else ENOENT). A PMU with a `cpumask` accepts any
//!   online CPU, as the Intel uncore driver does (it moves the event to the
//!   box's CPU); [`SimKernel::opens`] records every open so tests can check
//!   placement.
//! * Quirk of the intel-client fixture: `uncore_cbox_N` with N > 0 refuses
//!   `event=0xff` (the fixed `clockticks` counter exists on box 0 only, the
//!   driver's `single_fixed`) with EINVAL.
//! * Exclude bits (perf's modifiers, `cycles:u`): taken on the core PMUs,
//!   software events and tracepoints, refused with EINVAL on the PMUs
//!   whose drivers register `PERF_PMU_CAP_NO_EXCLUDE`
//!   ([`drivers::no_exclude`]: uncore, RAPL, C-states, `msr`). What they
//!   keep of a count is `rates::privilege_share`: 3/4 of a hardware
//!   event in user space, page faults 9/10 in user mode, `cpu-clock` all
//!   of it whatever the bits (as the kernel counts it), no guest ever.
//!   [`SimKernel::open_excludes`] records them with every open.
//! * A CPU that is not online fails with ENODEV.
//! * Groups: a member must name a live leader of this kernel (else EBADF),
//!   that is a leader (else EINVAL), on the same CPU (else EINVAL). As in
//!   the kernel, software-context events (`software`, `tracepoint`,
//!   `breakpoint`, `kprobe`, `uprobe`, `msr`) join any group, but a group
//!   holds hardware events of at most one PMU: mixing `cpu_core` with
//!   `cpu_atom`, or `uncore_imc_0` with `uncore_imc_1`, fails with EINVAL.
//!   Intel perf metrics: a `topdown-*` metric event opens only in a
//!   group led by `slots`, else EINVAL (see [`accept`]'s docs).
//!   [`SimKernel::set_max_group`] limits how many events of a PMU a group
//!   may hold; `arm_dmc620*` PMUs start with a limit of 1, like the driver.
//! * Counter budgets ([`SimKernel::set_counters`], with
//!   [`SimKernel::set_watchdog`] holding one): a group needing more of a
//!   PMU's counters than are free opens and never runs; groups that fit
//!   share them. [`SimKernel::set_stalled`]: counters that run without
//!   counting.
//! * Plausibility (`clock.rs`): the CPUs' busy time and maximum frequency
//!   ([`SimKernel::set_busy_share`], [`SimKernel::set_max_freq`]) and a
//!   fake guest PMU counting a tiny constant rate
//!   ([`SimKernel::set_guest_rate`]).
//!
//! # Counting
//!
//! Counts accumulate lazily, at read time, on a clock that is real
//! ([`SimKernel::new`]) or manual ([`SimKernel::with_manual_clock`] plus
//! [`SimKernel::advance`]). Over `dt` nanoseconds of enabled time a counter
//! gains `time_enabled += dt`, `time_running += dt * ratio` and
//! `value += dt * rate * ratio`, where `ratio` is the multiplexing ratio of
//! its group's PMU ([`SimKernel::set_mux_ratio`], default 1) and `rate` is
//! a per-event constant (events per second of enabled time, see
//! [`SimKernel::rate_of`]): cycles 2e9/s, instructions 3e9/s (IPC 1.5),
//! cpu-clock 1e9 ns/s (a system-wide cpu-clock counts wall time), IMC CAS reads 1.5e7/s, RAPL energy
//! 20 W, `cpu_thermal_margin` a constant 40, and so on. A group counts from
//! [`Kernel::enable_group`] on, and a group read reports the leader's times
//! with every member's value, leader first.
//!
//! Every knob changes only what happens after the call: the counters are
//! brought up to date with the old setting first.
//!
//! # Files
//!
//! [`accept`] (what opens are accepted), [`table`] (the fd table: a
//! compact slot per counter, sized for 512 CPUs × 200 cgroups),
//! [`syscalls`] (the [`Kernel`] seam), [`knobs`], [`hotplug`],
//! [`cgroup`] (a cgroup's share), [`rates`], [`drivers`] and [`samples`]
//! (samplers whose rings fill with records of simulated tasks).

mod accept;
mod cgroup;
mod clock;
pub mod drivers;
mod hotplug;
mod knobs;
pub use knobs::usual_counters;
mod rates;
pub(crate) mod samples;
mod syscalls;
mod table;

#[cfg(doc)]
use super::Kernel;
use crate::bounded::lock;
use crate::pmu::PmuTable;
use accept::{pmu_info, PmuInfo};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use table::State;

/// Counter ids, unique across every simulated kernel of the process and
/// never reused (the kernel's ids are global too).
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// One successful open, as recorded by [`SimKernel::opens`]: the PMU that
/// counts it (the core PMU owning the CPU for generic hardware events,
/// `software`, `tracepoint`), `perf_event_attr.type`, the four config words
/// and the CPU.
pub type OpenRecord = (String, u32, [u64; 4], u32);

/// The simulated kernel. See the [module docs](self).
pub struct SimKernel {
    table: PmuTable,
    /// Per PMU of `table` (same index): the bits its formats and events
    /// may set, and its named events' encodings.
    info: Vec<PmuInfo>,
    state: Arc<Mutex<State>>,
    /// Added to every group read, in nanoseconds ([`SimKernel::set_read_delay`]).
    read_delay_ns: AtomicU64,
    /// Added to every open, in nanoseconds ([`SimKernel::set_open_delay`]).
    open_delay_ns: AtomicU64,
    /// Readings of the CPUs' busy times ([`SimKernel::cpu_time_reads`]).
    cpu_time_reads: AtomicU64,
}

impl fmt::Debug for SimKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimKernel")
            .field("sysfs", &self.table.sysfs)
            .field("pmus", &self.table.pmus.len())
            .finish_non_exhaustive()
    }
}

/// The part of a [`CounterInner::Sim`](super::CounterInner::Sim) counter
/// that closes it on drop: 16 bytes, so a [`super::Counter`] stays 24.
#[derive(Debug)]
pub(crate) struct SimHandle {
    /// Index into the kernel's counter table.
    idx: u32,
    state: Weak<Mutex<State>>,
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        if let Some(state) = self.state.upgrade() {
            lock(&state).close(self.idx);
        }
    }
}

impl SimKernel {
    /// A simulated kernel for `table`, counting on the real clock (for
    /// `serve --simulate`). All of the table's online CPUs start online.
    pub fn new(table: PmuTable) -> Self {
        Self::build(table, false)
    }

    /// The same, on a manual clock that starts at 0 and moves only with
    /// [`advance`](Self::advance), so tests are exact.
    pub fn with_manual_clock(table: PmuTable) -> Self {
        Self::build(table, true)
    }

    fn build(table: PmuTable, manual: bool) -> Self {
        let info = table.pmus.iter().map(pmu_info).collect();
        let max_group = table
            .pmus
            .iter()
            .filter(|p| crate::pmu::pmu_name_matches("arm_dmc620", &p.name))
            .map(|p| (p.name.clone(), 1))
            .collect();
        let state = State::new(table.topology.online.clone(), max_group, manual);
        SimKernel {
            table,
            info,
            state: Arc::new(Mutex::new(state)),
            read_delay_ns: AtomicU64::new(0),
            open_delay_ns: AtomicU64::new(0),
            cpu_time_reads: AtomicU64::new(0),
        }
    }

    /// The PMU table it simulates.
    pub fn table(&self) -> &PmuTable {
        &self.table
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Every successful open so far, in order.
    pub fn opens(&self) -> Vec<OpenRecord> {
        self.state().opens()
    }

    /// The `exclude_*` bits (perf's modifiers, `cycles:u`) of every
    /// successful open, in the order of [`SimKernel::opens`].
    pub fn open_excludes(&self) -> Vec<crate::sys::abi::Exclude> {
        self.state().open_excludes()
    }

    /// How many group reads ([`Kernel::read_group`], one `read()` each on
    /// the live kernel) were made so far.
    pub fn reads(&self) -> u64 {
        self.state().reads
    }

    /// How many times the CPUs' busy times were read
    /// ([`Kernel::cpu_times`]: one read
    /// of `/proc/stat` each on the live kernel).
    pub fn cpu_time_reads(&self) -> u64 {
        self.cpu_time_reads.load(Ordering::Relaxed)
    }

    /// How many counters are open (opened and not yet dropped).
    pub fn live_counters(&self) -> usize {
        self.state().open_count()
    }

    /// The memory of the simulator's own tables (counters, interned
    /// events, the record of opens): the kernel's memory on a real host,
    /// which a measurement of the exporter subtracts.
    pub fn memory(&self) -> SimMemory {
        self.state().memory()
    }
}

/// What the simulator's tables take ([`SimKernel::memory`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimMemory {
    /// Bytes in use (resident once written).
    pub used: usize,
    /// Bytes allocated, including vectors' spare capacity.
    pub allocated: usize,
}

#[cfg(test)]
mod tests;
