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
//! * A CPU that is not online fails with ENODEV.
//! * Groups: a member must name a live leader of this kernel (else EBADF),
//!   that is a leader (else EINVAL), on the same CPU (else EINVAL). As in
//!   the kernel, software-context events (`software`, `tracepoint`,
//!   `breakpoint`, `kprobe`, `uprobe`, `msr`) join any group, but a group
//!   holds hardware events of at most one PMU: mixing `cpu_core` with
//!   `cpu_atom`, or `uncore_imc_0` with `uncore_imc_1`, fails with EINVAL.
//!   [`SimKernel::set_max_group`] limits how many events of a PMU a group
//!   may hold; `arm_dmc620*` PMUs start with a limit of 1, like the driver.
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

mod cgroup;
pub mod drivers;
mod rates;

use super::abi::{PMU_TYPE_SHIFT, TYPE_HARDWARE, TYPE_HW_CACHE, TYPE_SOFTWARE, TYPE_TRACEPOINT};
use super::cgroup::{CgroupHandle, CgroupInner, CgroupOpenError};
use super::{Counter, CounterInner, EventAttr, GroupReading, Kernel, PerfError};
use crate::pmu::{Pmu, PmuEvent, PmuTable, Scope, TermValue};
use rates::{cache_rate, hardware_rate, named_rate, software_rate, unnamed_rate, Rate};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Instant;

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
}

impl fmt::Debug for SimKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimKernel")
            .field("sysfs", &self.table.sysfs)
            .field("pmus", &self.table.pmus.len())
            .finish_non_exhaustive()
    }
}

/// The part of a [`CounterInner::Sim`] counter that closes it on drop.
#[derive(Debug)]
pub(crate) struct SimHandle {
    /// Index into the kernel's counter table.
    pub(crate) idx: usize,
    state: Weak<Mutex<State>>,
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        if let Some(state) = self.state.upgrade() {
            lock(&state).close(self.idx);
        }
    }
}

#[derive(Debug, Clone, Default)]
struct PmuInfo {
    /// Bits that formats or event encodings may set, per config word.
    masks: [u64; 4],
    /// `(name, encoding, scale)` of every named event.
    aliases: Vec<(String, [u64; 4], Option<f64>)>,
}

#[derive(Debug)]
struct Slot {
    id: u64,
    pmu: String,
    sw: bool,
    cpu: u32,
    /// The group leader's index (itself for a leader).
    leader: usize,
    /// Members in open order (leaders only).
    members: Vec<usize>,
    /// The one hardware PMU of the group, if any (leaders only).
    group_hw: Option<String>,
    rate: Rate,
    enabled: bool,
    /// Its CPU went offline: it never counts again.
    frozen: bool,
    last_ns: u64,
    time_enabled: u64,
    time_running: f64,
    value: f64,
    /// The share of the CPU's count it gets: 1 system-wide, a cgroup's
    /// share for a cgroup counter ([`cgroup`]).
    share: f64,
}

#[derive(Debug)]
struct State {
    slots: Vec<Option<Slot>>,
    free: Vec<usize>,
    online: Vec<u32>,
    mux: HashMap<String, f64>,
    /// Activity factor per PMU: multiplies every rate (default 1).
    activity: HashMap<String, f64>,
    refused: HashMap<String, i32>,
    max_group: HashMap<String, usize>,
    never_runs: HashSet<String>,
    opens: Vec<OpenRecord>,
    start: Instant,
    manual: bool,
    offset_ns: u64,
    /// Bumped by every [`SimKernel::set_online`] (the hotplug signal).
    hotplug_generation: u64,
    /// Group reads so far.
    reads: u64,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl State {
    fn now(&self) -> u64 {
        let real = if self.manual {
            0
        } else {
            u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
        };
        real.saturating_add(self.offset_ns)
    }

    fn slot(&self, idx: usize) -> Option<&Slot> {
        self.slots.get(idx).and_then(Option::as_ref)
    }

    fn slot_mut(&mut self, idx: usize) -> Option<&mut Slot> {
        self.slots.get_mut(idx).and_then(Option::as_mut)
    }

    /// The multiplexing ratio a group runs at now.
    fn group_ratio(&self, leader: usize) -> f64 {
        let Some(l) = self.slot(leader) else {
            return 1.0;
        };
        let pmu = l.group_hw.as_deref().unwrap_or(&l.pmu);
        if !l.members.is_empty() && self.never_runs.contains(pmu) {
            return 0.0;
        }
        if self.mux.is_empty() {
            return 1.0;
        }
        self.mux.get(pmu).copied().unwrap_or(1.0)
    }

    /// The activity factor of a group's PMU.
    fn group_activity(&self, leader: usize) -> f64 {
        if self.activity.is_empty() {
            return 1.0;
        }
        let Some(l) = self.slot(leader) else {
            return 1.0;
        };
        let pmu = l.group_hw.as_deref().unwrap_or(&l.pmu);
        self.activity.get(pmu).copied().unwrap_or(1.0)
    }

    /// Brings a whole group up to `now`.
    fn sync_group(&mut self, leader: usize, now: u64) {
        let ratio = self.group_ratio(leader);
        let activity = self.group_activity(leader);
        // Borrow the member list out of the leader while advancing the
        // members (no allocation: this runs for every simulated read).
        let members = match self.slot_mut(leader) {
            Some(l) => {
                l.advance(now, ratio, activity);
                std::mem::take(&mut l.members)
            }
            None => return,
        };
        for &idx in &members {
            if let Some(s) = self.slots.get_mut(idx).and_then(Option::as_mut) {
                s.advance(now, ratio, activity);
            }
        }
        if let Some(l) = self.slot_mut(leader) {
            l.members = members;
        }
    }

    fn sync_all(&mut self) {
        let now = self.now();
        let leaders: Vec<usize> = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.as_ref().filter(|s| s.leader == i).map(|_| i))
            .collect();
        for l in leaders {
            self.sync_group(l, now);
        }
    }

    fn insert(&mut self, slot: Slot) -> usize {
        match self.free.pop() {
            Some(i) => {
                self.slots[i] = Some(slot);
                i
            }
            None => {
                self.slots.push(Some(slot));
                self.slots.len() - 1
            }
        }
    }

    /// Closes a counter: a closed leader's members become singleton
    /// groups, as in the kernel.
    fn close(&mut self, idx: usize) {
        let Some(leader) = self.slot(idx).map(|s| s.leader) else {
            return;
        };
        let now = self.now();
        self.sync_group(leader, now);
        let Some(slot) = self.slots.get_mut(idx).and_then(Option::take) else {
            return;
        };
        self.free.push(idx);
        if leader == idx {
            for m in slot.members {
                if let Some(s) = self.slot_mut(m) {
                    s.leader = m;
                    s.group_hw = (!s.sw).then(|| s.pmu.clone());
                }
            }
        } else if let Some(l) = self.slots.get_mut(leader).and_then(Option::as_mut) {
            l.members.retain(|&m| m != idx);
        }
    }
}

impl Slot {
    fn advance(&mut self, now: u64, ratio: f64, activity: f64) {
        if now <= self.last_ns {
            return;
        }
        let dt = now - self.last_ns;
        self.last_ns = now;
        if !self.enabled || self.frozen {
            return;
        }
        self.time_enabled += dt;
        self.time_running += dt as f64 * ratio;
        if let Rate::PerSec(r) = self.rate {
            self.value += dt as f64 * r / 1e9 * ratio * activity * self.share;
        }
    }

    fn reported(&self) -> u64 {
        match self.rate {
            Rate::Constant(v) => v,
            Rate::PerSec(_) => self.value as u64,
        }
    }
}

/// Encodes a named event through its PMU's formats (`None` if it needs a
/// `?` value or does not fit).
fn encode_alias(p: &Pmu, ev: &PmuEvent) -> Option<[u64; 4]> {
    let mut w = [0u64; 4];
    for t in &ev.terms {
        let TermValue::Num(v) = t.value else {
            return None;
        };
        match t.name.as_str() {
            "config" | "config0" => w[0] |= v,
            "config1" => w[1] |= v,
            "config2" => w[2] |= v,
            "config3" => w[3] |= v,
            name => {
                let f = p.formats.get(name)?;
                w[f.word.index()] |= f.encode(v).ok()?;
            }
        }
    }
    Some(w)
}

fn pmu_info(p: &Pmu) -> PmuInfo {
    let mut info = PmuInfo::default();
    for f in p.formats.values() {
        for &(lo, hi) in &f.ranges {
            let n = u32::from(hi - lo) + 1;
            let m = if n >= 64 {
                u64::MAX
            } else {
                ((1u64 << n) - 1) << lo
            };
            info.masks[f.word.index()] |= m;
        }
    }
    for ev in p.events.values() {
        if let Some(w) = encode_alias(p, ev) {
            for (m, x) in info.masks.iter_mut().zip(w) {
                *m |= x;
            }
            info.aliases.push((ev.name.clone(), w, ev.scale));
        }
    }
    info
}

/// Software-context PMUs: their events may join any group.
fn is_software_pmu(type_: u32, name: &str) -> bool {
    type_ == TYPE_SOFTWARE
        || type_ == TYPE_TRACEPOINT
        || matches!(
            name,
            "software" | "tracepoint" | "breakpoint" | "kprobe" | "uprobe" | "msr"
        )
}

/// What an accepted open resolves to.
struct Accepted {
    pmu: String,
    sw: bool,
    rate: Rate,
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
        let state = State {
            slots: Vec::new(),
            free: Vec::new(),
            online: table.topology.online.clone(),
            mux: HashMap::new(),
            activity: HashMap::new(),
            refused: HashMap::new(),
            max_group,
            never_runs: HashSet::new(),
            opens: Vec::new(),
            start: Instant::now(),
            manual,
            offset_ns: 0,
            hotplug_generation: 0,
            reads: 0,
        };
        SimKernel {
            table,
            info,
            state: Arc::new(Mutex::new(state)),
            read_delay_ns: AtomicU64::new(0),
        }
    }

    /// Makes every group read take at least `d` of wall time (the calling
    /// thread sleeps, holding no lock): a slow PMU, for demos and tests
    /// of slow scrapes (`serve --simulate --simulate.read-delay`).
    pub fn set_read_delay(&self, d: std::time::Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.read_delay_ns.store(ns, Ordering::Relaxed);
    }

    /// The PMU table it simulates.
    pub fn table(&self) -> &PmuTable {
        &self.table
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
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

    /// Hotplug. An offline CPU refuses opens with ENODEV, and the counters
    /// already open on it stop counting for good (the kernel removes them
    /// from the CPU's context; they do not resume when the CPU returns), so
    /// the caller has to reopen them.
    ///
    /// Each call moves [`Kernel::hotplug_generation`], as a uevent does on
    /// the live kernel.
    pub fn set_online(&self, cpu: u32, online: bool) {
        let mut st = self.state();
        st.sync_all();
        st.hotplug_generation += 1;
        if online {
            if let Err(pos) = st.online.binary_search(&cpu) {
                st.online.insert(pos, cpu);
            }
        } else {
            st.online.retain(|&c| c != cpu);
            for s in st.slots.iter_mut().flatten() {
                if s.cpu == cpu {
                    s.frozen = true;
                }
            }
        }
    }

    /// The CPUs online now (initially the table's `topology.online`).
    pub fn online_cpus(&self) -> Vec<u32> {
        self.state().online.clone()
    }

    /// Every successful open so far, in order.
    pub fn opens(&self) -> Vec<OpenRecord> {
        self.state().opens.clone()
    }

    /// How many group reads ([`Kernel::read_group`], one `read()` each on
    /// the live kernel) were made so far.
    pub fn reads(&self) -> u64 {
        self.state().reads
    }

    /// How many counters are open (opened and not yet dropped).
    pub fn live_counters(&self) -> usize {
        self.state().slots.iter().flatten().count()
    }

    /// The rate (events per second of enabled time) an encoding counts at,
    /// or `None` for a snapshot event (a constant) or an encoding this
    /// kernel would refuse on every CPU.
    pub fn rate_of(&self, type_: u32, config: [u64; 4]) -> Option<f64> {
        let attr = EventAttr {
            type_,
            config,
            event: String::new(),
            pmu: String::new(),
        };
        let cpus = self.state().online.clone();
        cpus.iter().find_map(|&c| match self.accept(&attr, c) {
            Ok(Accepted {
                rate: Rate::PerSec(r),
                ..
            }) => Some(r),
            _ => None,
        })
    }

    /// Validates an encoding on a CPU (not the CPU's online state, the
    /// refusals or the group) and finds its PMU and rate.
    fn accept(&self, attr: &EventAttr, cpu: u32) -> Result<Accepted, i32> {
        let c = attr.config;
        match attr.type_ {
            TYPE_HARDWARE | TYPE_HW_CACHE => {
                let cores = self.table.core_pmus();
                let ext = c[0] >> PMU_TYPE_SHIFT;
                let core = match cores.as_slice() {
                    [] => return Err(libc::ENOENT),
                    [one] if ext == 0 || ext == u64::from(one.type_) => *one,
                    [_] => return Err(libc::ENOENT),
                    many => *many
                        .iter()
                        .find(|p| u64::from(p.type_) == ext)
                        .ok_or(libc::ENOENT)?,
                };
                if let Scope::Cpus(cpus) = &core.scope {
                    if !cpus.contains(&cpu) {
                        return Err(libc::ENOENT);
                    }
                }
                if c[1..].iter().any(|&w| w != 0) {
                    return Err(libc::EINVAL);
                }
                let low = c[0] & 0xffff_ffff;
                let driver = drivers::driver_of(&self.table, core);
                let rate = if attr.type_ == TYPE_HARDWARE {
                    drivers::hardware(driver, low)?;
                    hardware_rate(low)
                } else {
                    let (cache, op, result) = (low & 0xff, (low >> 8) & 0xff, (low >> 16) & 0xff);
                    if low >> 24 != 0 {
                        return Err(libc::EINVAL);
                    }
                    drivers::cache(driver, cache, op, result)?;
                    cache_rate(low)
                };
                Ok(Accepted {
                    pmu: core.name.clone(),
                    sw: false,
                    rate: Rate::PerSec(rate),
                })
            }
            TYPE_SOFTWARE => {
                if c[0] > 11 {
                    return Err(libc::ENOENT);
                }
                if c[1..].iter().any(|&w| w != 0) {
                    return Err(libc::EINVAL);
                }
                let name = self
                    .table
                    .pmus
                    .iter()
                    .find(|p| p.type_ == TYPE_SOFTWARE)
                    .map_or("software", |p| p.name.as_str());
                Ok(Accepted {
                    pmu: name.to_string(),
                    sw: true,
                    rate: Rate::PerSec(software_rate(c[0])),
                })
            }
            TYPE_TRACEPOINT => {
                let p = self
                    .table
                    .pmus
                    .iter()
                    .find(|p| p.type_ == TYPE_TRACEPOINT)
                    .ok_or(libc::ENOENT)?;
                Ok(Accepted {
                    pmu: p.name.clone(),
                    sw: true,
                    rate: Rate::PerSec(500.0),
                })
            }
            t => {
                let (i, p) = self
                    .table
                    .pmus
                    .iter()
                    .enumerate()
                    .find(|(_, p)| p.type_ == t)
                    .ok_or(libc::ENOENT)?;
                let info = &self.info[i];
                if c.iter().zip(info.masks).any(|(&w, m)| w & !m != 0) {
                    return Err(libc::EINVAL);
                }
                if let Scope::Cpus(cpus) = &p.scope {
                    if !cpus.contains(&cpu) {
                        return Err(libc::ENOENT);
                    }
                }
                // intel-client: only cbox 0 has the fixed clockticks counter.
                if let Some(n) = p.name.strip_prefix("uncore_cbox_") {
                    let fixed_on_0 = self
                        .table
                        .get("uncore_cbox_0")
                        .is_some_and(|b| b.events.contains_key("clockticks"));
                    if n != "0" && fixed_on_0 && c[0] & 0xff == 0xff {
                        return Err(libc::EINVAL);
                    }
                }
                let rate = match info.aliases.iter().find(|(_, w, _)| *w == c) {
                    Some((name, _, scale)) => named_rate(p, name, *scale),
                    None => unnamed_rate(p),
                };
                Ok(Accepted {
                    pmu: p.name.clone(),
                    sw: is_software_pmu(t, &p.name),
                    rate,
                })
            }
        }
    }

    /// The slot index of a counter of this kernel, or EBADF.
    fn index_of(&self, st: &State, c: &Counter) -> Result<usize, i32> {
        let CounterInner::Sim(h) = &c.inner else {
            return Err(libc::EBADF);
        };
        if !std::ptr::eq(h.state.as_ptr(), Arc::as_ptr(&self.state)) {
            return Err(libc::EBADF);
        }
        match st.slot(h.idx) {
            Some(s) if s.id == c.id => Ok(h.idx),
            _ => Err(libc::EBADF),
        }
    }
}

impl SimKernel {
    /// Opens a counter that gets `share` of its CPU's count.
    fn open_share(
        &self,
        attr: &EventAttr,
        cpu: u32,
        group: Option<&Counter>,
        share: f64,
    ) -> Result<Counter, PerfError> {
        let err = |errno| PerfError::new("open", attr, cpu, errno);
        let acc = self.accept(attr, cpu).map_err(err)?;
        let mut st = self.state();
        if let Some(&errno) = st.refused.get(&acc.pmu) {
            return Err(err(errno));
        }
        if st.online.binary_search(&cpu).is_err() {
            return Err(err(libc::ENODEV));
        }
        let now = st.now();
        let mut enabled = false;
        let leader = match group {
            None => None,
            Some(g) => {
                let li = self.index_of(&st, g).map_err(err)?;
                let l = st.slot(li).ok_or_else(|| err(libc::EBADF))?;
                if l.leader != li || l.cpu != cpu {
                    return Err(err(libc::EINVAL));
                }
                if !acc.sw {
                    if let Some(hw) = &l.group_hw {
                        if *hw != acc.pmu {
                            return Err(err(libc::EINVAL));
                        }
                    }
                }
                if let Some(&max) = st.max_group.get(&acc.pmu) {
                    let same = std::iter::once(li)
                        .chain(l.members.iter().copied())
                        .filter(|&i| st.slot(i).is_some_and(|s| s.pmu == acc.pmu))
                        .count();
                    if same + 1 > max {
                        return Err(err(libc::EINVAL));
                    }
                }
                enabled = l.enabled;
                // Membership changes the group's schedulability: account
                // the time so far under the old one.
                st.sync_group(li, now);
                Some(li)
            }
        };
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let idx = st.insert(Slot {
            id,
            pmu: acc.pmu.clone(),
            sw: acc.sw,
            cpu,
            leader: usize::MAX,
            members: Vec::new(),
            group_hw: (!acc.sw).then(|| acc.pmu.clone()),
            rate: acc.rate,
            enabled,
            frozen: false,
            last_ns: now,
            time_enabled: 0,
            time_running: 0.0,
            value: 0.0,
            share,
        });
        match leader {
            None => {
                if let Some(s) = st.slot_mut(idx) {
                    s.leader = idx;
                }
            }
            Some(li) => {
                if let Some(s) = st.slot_mut(idx) {
                    s.leader = li;
                    s.group_hw = None;
                }
                if let Some(l) = st.slot_mut(li) {
                    l.members.push(idx);
                    if !acc.sw {
                        l.group_hw = Some(acc.pmu.clone());
                    }
                }
            }
        }
        st.opens.push((acc.pmu, attr.type_, attr.config, cpu));
        Ok(Counter {
            inner: CounterInner::Sim(SimHandle {
                idx,
                state: Arc::downgrade(&self.state),
            }),
            id,
        })
    }
}

impl Kernel for SimKernel {
    fn open(
        &self,
        attr: &EventAttr,
        cpu: u32,
        group: Option<&Counter>,
    ) -> Result<Counter, PerfError> {
        self.open_share(attr, cpu, group, 1.0)
    }

    /// Reads the cgroup's share of each CPU's counts from the fixture
    /// tree's `cpu.stat` files ([`cgroup`]).
    fn open_cgroup(&self, dir: &std::path::Path) -> Result<CgroupHandle, CgroupOpenError> {
        let share = cgroup::share_of(dir).map_err(|errno| CgroupOpenError {
            dir: dir.to_path_buf(),
            errno,
        })?;
        Ok(CgroupHandle {
            dir: dir.to_path_buf(),
            inner: CgroupInner::Sim(share),
        })
    }

    fn open_in_cgroup(
        &self,
        attr: &EventAttr,
        cg: &CgroupHandle,
        cpu: u32,
        group: Option<&Counter>,
    ) -> Result<Counter, PerfError> {
        let CgroupInner::Sim(share) = cg.inner else {
            return Err(PerfError::new("open", attr, cpu, libc::EBADF));
        };
        if !cg.dir.is_dir() {
            return Err(PerfError::new("open", attr, cpu, libc::ENOENT));
        }
        self.open_share(attr, cpu, group, share)
    }

    fn enable_group(&self, leader: &Counter, attr: &EventAttr, cpu: u32) -> Result<(), PerfError> {
        let mut st = self.state();
        let idx = self
            .index_of(&st, leader)
            .map_err(|e| PerfError::new("enable", attr, cpu, e))?;
        let bad = || PerfError::new("enable", attr, cpu, libc::EBADF);
        let li = st.slot(idx).ok_or_else(bad)?.leader;
        let now = st.now();
        st.sync_group(li, now);
        let members = st.slot(li).ok_or_else(bad)?.members.clone();
        for i in std::iter::once(li).chain(members) {
            if let Some(s) = st.slot_mut(i) {
                s.enabled = true;
            }
        }
        Ok(())
    }

    fn read_group(
        &self,
        leader: &Counter,
        attr: &EventAttr,
        cpu: u32,
        out: &mut GroupReading,
    ) -> Result<(), PerfError> {
        let delay = self.read_delay_ns.load(Ordering::Relaxed);
        if delay > 0 {
            std::thread::sleep(std::time::Duration::from_nanos(delay));
        }
        let mut st = self.state();
        st.reads += 1;
        let idx = self
            .index_of(&st, leader)
            .map_err(|e| PerfError::new("read", attr, cpu, e))?;
        let bad = || PerfError::new("read", attr, cpu, libc::EBADF);
        let li = st.slot(idx).ok_or_else(bad)?.leader;
        let now = st.now();
        st.sync_group(li, now);
        let l = st.slot(li).ok_or_else(bad)?;
        out.time_enabled = l.time_enabled;
        out.time_running = (l.time_running as u64).min(l.time_enabled);
        out.values.clear();
        out.values.push((l.id, l.reported()));
        for s in l.members.iter().filter_map(|&m| st.slot(m)) {
            out.values.push((s.id, s.reported()));
        }
        Ok(())
    }

    /// The simulation's own online set ([`SimKernel::set_online`]).
    fn online_cpus(&self, _sysfs: &std::path::Path) -> Option<Vec<u32>> {
        Some(self.state().online.clone())
    }

    /// Counts [`SimKernel::set_online`] calls.
    fn hotplug_generation(&self) -> Option<u64> {
        Some(self.state().hotplug_generation)
    }

    fn simulated(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests;
