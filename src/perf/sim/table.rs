//! The simulated kernel's file descriptor table: one compact [`Slot`] per
//! open counter, holding what the kernel keeps per event (which event, on
//! which CPU, its group links, enabled/running times and count), and the
//! knobs that apply from now on.
//!
//! It is sized for a simulated 512-CPU server counting 200 cgroups (1.2
//! million counters): a slot is 64 bytes, names are interned, a group's
//! members are a sibling list through the slots (as the kernel's
//! `sibling_list`), and the record of opens is 8 bytes each.

use super::rates::Rate;
use crate::perf::sim::OpenRecord;
use crate::sys::abi::Exclude;
use std::collections::{HashMap, HashSet};
use std::time::Instant;

/// "No slot" in a link, "no PMU" in a group's hardware PMU.
pub(super) const NONE: u32 = u32::MAX;
const NO_PMU: u16 = u16::MAX;

/// Slot flags.
const OPEN: u8 = 1;
const ENABLED: u8 = 2;
/// Its CPU went offline: it never counts again.
const FROZEN: u8 = 4;

/// One event as opened: its PMU (an index into [`State::pmus`]), whether
/// it is a software-context event, how fast it counts, and the encoding.
#[derive(Debug, Clone, Copy)]
pub(super) struct EventKind {
    pub(super) pmu: u16,
    pub(super) sw: bool,
    pub(super) rate: Rate,
    /// A perf-metrics event (`topdown-*`): the kernel gives it a
    /// pseudo-counter (`INTEL_PMC_IDX_METRIC_BASE`), no general-purpose
    /// one, so it takes nothing of a PMU's counter budget.
    pub(super) counterless: bool,
    type_: u32,
    config: [u64; 4],
    exclude: Exclude,
}

/// What an event takes of its PMU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum KindClass {
    /// A software event (no counter budget).
    Software,
    /// A hardware event: one counter.
    Hardware,
    /// A perf-metrics event (`topdown-*`): no counter of its own.
    Metric,
}

/// One open counter.
#[derive(Debug, Clone, Copy)]
pub(super) struct Slot {
    pub(super) id: u64,
    last_ns: u64,
    pub(super) time_enabled: u64,
    pub(super) time_running: f64,
    value: f64,
    /// Index into [`State::kinds`].
    pub(super) kind: u32,
    pub(super) cpu: u32,
    /// The group leader's index (itself for a leader).
    pub(super) leader: u32,
    /// The next member of its group in open order: a leader's first
    /// member, a member's next sibling.
    pub(super) next: u32,
    /// Index into [`State::shares`]: the share of its CPU's count it gets
    /// (1 system-wide, a cgroup's share for a cgroup counter).
    share: u32,
    /// The one hardware PMU of the group, if any (leaders only).
    group_hw: u16,
    flags: u8,
}

impl Slot {
    fn advance(&mut self, now: u64, ratio: f64, activity: f64, rate: Rate, share: f64) {
        if now <= self.last_ns {
            return;
        }
        let dt = now - self.last_ns;
        self.last_ns = now;
        if self.flags & ENABLED == 0 || self.flags & FROZEN != 0 {
            return;
        }
        self.time_enabled += dt;
        self.time_running += dt as f64 * ratio;
        if let Rate::PerSec(r) = rate {
            self.value += dt as f64 * r / 1e9 * ratio * activity * share;
        }
    }

    pub(super) fn enabled(&self) -> bool {
        self.flags & ENABLED != 0
    }
}

/// A new counter, as [`State::insert`] takes it.
pub(super) struct NewSlot {
    pub(super) id: u64,
    pub(super) kind: u32,
    pub(super) cpu: u32,
    pub(super) share: f64,
    pub(super) enabled: bool,
    pub(super) now: u64,
}

/// The table and the knobs.
#[derive(Debug)]
pub(super) struct State {
    slots: Vec<Slot>,
    free: Vec<u32>,
    open: usize,
    /// PMU names, interned.
    pmus: Vec<String>,
    kinds: Vec<EventKind>,
    kind_index: HashMap<(u32, [u64; 4], u16, Exclude), u32>,
    shares: Vec<f64>,
    share_index: HashMap<u64, u32>,
    /// Every successful open: `(kind, cpu)`.
    opens: Vec<(u32, u32)>,
    pub(super) online: Vec<u32>,
    pub(super) mux: HashMap<String, f64>,
    /// Activity factor per PMU: multiplies every rate (default 1).
    pub(super) activity: HashMap<String, f64>,
    pub(super) refused: HashMap<String, i32>,
    pub(super) max_group: HashMap<String, usize>,
    pub(super) never_runs: HashSet<String>,
    /// CPUs whose groups (of any size, on any PMU) never run.
    pub(super) never_runs_on: HashSet<u32>,
    /// Counters per CPU of a PMU (the counter budget; absent: unlimited).
    pub(super) counters: HashMap<String, usize>,
    /// PMUs on which the NMI watchdog holds one counter (pinned).
    pub(super) watchdog: HashSet<String>,
    /// PMUs whose counters run without counting.
    pub(super) stalled: HashSet<String>,
    /// Counters per CPU held by another user's pinned events, by PMU.
    pub(super) others: HashMap<String, usize>,
    /// PMUs whose counters all count this constant rate per second of
    /// running time, whatever the event (a fake guest PMU).
    pub(super) guest: HashMap<String, f64>,
    /// The CPUs' busy time and maximum frequency (`clock.rs`).
    pub(super) clock: super::clock::CpuClock,
    start: Instant,
    manual: bool,
    pub(super) offset_ns: u64,
    /// Bumped by every [`super::SimKernel::set_online`] (the hotplug signal).
    pub(super) hotplug_generation: u64,
    /// Group reads so far.
    pub(super) reads: u64,
}

impl State {
    pub(super) fn new(online: Vec<u32>, max_group: HashMap<String, usize>, manual: bool) -> Self {
        State {
            slots: Vec::new(),
            free: Vec::new(),
            open: 0,
            pmus: Vec::new(),
            kinds: Vec::new(),
            kind_index: HashMap::new(),
            shares: Vec::new(),
            share_index: HashMap::new(),
            opens: Vec::new(),
            online,
            mux: HashMap::new(),
            activity: HashMap::new(),
            refused: HashMap::new(),
            max_group,
            never_runs: HashSet::new(),
            never_runs_on: HashSet::new(),
            counters: HashMap::new(),
            watchdog: HashSet::new(),
            stalled: HashSet::new(),
            others: HashMap::new(),
            guest: HashMap::new(),
            clock: super::clock::CpuClock::default(),
            start: Instant::now(),
            manual,
            offset_ns: 0,
            hotplug_generation: 0,
            reads: 0,
        }
    }

    /// Whether the clock moves only when told.
    pub(super) fn is_manual(&self) -> bool {
        self.manual
    }

    /// A PMU's budget less what pinned users hold (the watchdog, others).
    pub(super) fn free_of(&self, name: &str) -> Option<usize> {
        let total = *self.counters.get(name)?;
        let held =
            usize::from(self.watchdog.contains(name)) + self.others.get(name).copied().unwrap_or(0);
        Some(total.saturating_sub(held))
    }

    pub(super) fn now(&self) -> u64 {
        let real = if self.manual {
            0
        } else {
            u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
        };
        real.saturating_add(self.offset_ns)
    }

    /// An open counter's slot.
    pub(super) fn slot(&self, idx: u32) -> Option<&Slot> {
        self.slots.get(idx as usize).filter(|s| s.flags & OPEN != 0)
    }

    fn slot_mut(&mut self, idx: u32) -> Option<&mut Slot> {
        self.slots
            .get_mut(idx as usize)
            .filter(|s| s.flags & OPEN != 0)
    }

    /// How many counters are open.
    pub(super) fn open_count(&self) -> usize {
        self.open
    }

    /// The PMU name of an interned index.
    pub(super) fn pmu_name(&self, pmu: u16) -> &str {
        self.pmus.get(usize::from(pmu)).map_or("", String::as_str)
    }

    /// The type and config of an open counter's event.
    pub(super) fn encoding(&self, idx: u32) -> Option<(u32, [u64; 4])> {
        let k = self.kind(self.slot(idx)?);
        Some((k.type_, k.config))
    }

    /// The event kind of a slot.
    pub(super) fn kind(&self, s: &Slot) -> EventKind {
        self.kind_of(s.kind)
    }

    /// An interned event kind.
    pub(super) fn kind_of(&self, k: u32) -> EventKind {
        self.kinds[k as usize]
    }

    /// Interns an event kind; `None` past 65,535 PMU names or 2^32 kinds.
    pub(super) fn intern_kind(
        &mut self,
        pmu: &str,
        class: KindClass,
        rate: Rate,
        type_: u32,
        config: [u64; 4],
        exclude: Exclude,
    ) -> Option<u32> {
        let p = match self.pmus.iter().position(|n| n == pmu) {
            Some(p) => u16::try_from(p).ok()?,
            None => {
                let p = u16::try_from(self.pmus.len())
                    .ok()
                    .filter(|&p| p != NO_PMU)?;
                self.pmus.push(pmu.to_string());
                p
            }
        };
        if let Some(&k) = self.kind_index.get(&(type_, config, p, exclude)) {
            return Some(k);
        }
        let k = u32::try_from(self.kinds.len()).ok()?;
        self.kinds.push(EventKind {
            pmu: p,
            sw: class == KindClass::Software,
            rate,
            counterless: class == KindClass::Metric,
            type_,
            config,
            exclude,
        });
        self.kind_index.insert((type_, config, p, exclude), k);
        Some(k)
    }

    fn intern_share(&mut self, share: f64) -> u32 {
        let next = self.shares.len() as u32;
        let i = *self.share_index.entry(share.to_bits()).or_insert(next);
        if i == next {
            self.shares.push(share);
        }
        i
    }

    /// The hardware PMU that decides a group's schedulability: its one
    /// hardware PMU, else the leader's own.
    fn group_pmu(&self, l: &Slot) -> &str {
        self.pmu_name(self.group_pmu_index(l))
    }

    fn group_pmu_index(&self, l: &Slot) -> u16 {
        if l.group_hw == NO_PMU {
            self.kinds[l.kind as usize].pmu
        } else {
            l.group_hw
        }
    }

    /// The share of the time a group runs under its PMU's counter budget
    /// ([`super::SimKernel::set_counters`]): 0 when it needs more counters
    /// than are free (the watchdog's taken), else the free counters over
    /// what the enabled groups that fit on its CPU need, at most 1 (the
    /// kernel's rotation, averaged). `None` without a budget.
    fn budget_ratio(&self, leader: u32, l: &Slot) -> Option<f64> {
        let p = self.group_pmu_index(l);
        let name = self.pmu_name(p);
        let free = self.free_of(name)?;
        let need = self.count_of_pmu(leader, p);
        if need > free {
            return Some(0.0);
        }
        let mut sum = 0;
        for (i, s) in self.slots.iter().enumerate() {
            let i = i as u32;
            if s.flags & OPEN == 0 || s.leader != i || s.cpu != l.cpu || !s.enabled() {
                continue;
            }
            if self.group_pmu_index(s) != p {
                continue;
            }
            let n = self.count_of_pmu(i, p);
            if n <= free {
                sum += n;
            }
        }
        Some(if sum <= free || sum == 0 {
            1.0
        } else {
            free as f64 / sum as f64
        })
    }

    /// Whether a change of the groups on a PMU changes other groups'
    /// ratios (a counter budget is set): then every group is brought up
    /// to date under the old schedule first.
    pub(super) fn sync_for_schedule(&mut self) {
        if !self.counters.is_empty() {
            self.sync_all();
        }
    }

    /// The multiplexing ratio a group runs at now.
    fn group_ratio(&self, leader: u32) -> f64 {
        let Some(l) = self.slot(leader) else {
            return 1.0;
        };
        if self.never_runs_on.contains(&l.cpu) {
            return 0.0;
        }
        if self.never_runs.is_empty() && self.mux.is_empty() && self.counters.is_empty() {
            return 1.0;
        }
        let pmu = self.group_pmu(l);
        if l.next != NONE && self.never_runs.contains(pmu) {
            return 0.0;
        }
        let budget = self.budget_ratio(leader, l).unwrap_or(1.0);
        self.mux.get(pmu).copied().unwrap_or(1.0) * budget
    }

    /// The activity factor of a group's PMU.
    fn group_activity(&self, leader: u32) -> f64 {
        if self.activity.is_empty() && self.stalled.is_empty() {
            return 1.0;
        }
        let Some(l) = self.slot(leader) else {
            return 1.0;
        };
        let pmu = self.group_pmu(l);
        if self.stalled.contains(pmu) {
            return 0.0;
        }
        self.activity.get(pmu).copied().unwrap_or(1.0)
    }

    /// The constant rate a fake guest PMU counts for a group, if any
    /// ([`super::SimKernel::set_guest_rate`]).
    fn group_guest(&self, leader: u32) -> Option<f64> {
        if self.guest.is_empty() {
            return None;
        }
        let l = self.slot(leader)?;
        self.guest.get(self.group_pmu(l)).copied()
    }

    fn advance(
        &mut self,
        idx: u32,
        now: u64,
        ratio: f64,
        activity: f64,
        guest: Option<f64>,
    ) -> u32 {
        let Some(s) = self.slots.get(idx as usize).filter(|s| s.flags & OPEN != 0) else {
            return NONE;
        };
        let rate = match (self.kinds[s.kind as usize].rate, guest) {
            (Rate::PerSec(_), Some(g)) => Rate::PerSec(g),
            (r, _) => r,
        };
        let share = self.shares[s.share as usize];
        let s = &mut self.slots[idx as usize];
        s.advance(now, ratio, activity, rate, share);
        s.next
    }

    /// Brings a whole group up to `now`.
    pub(super) fn sync_group(&mut self, leader: u32, now: u64) {
        let ratio = self.group_ratio(leader);
        let guest = self.group_guest(leader);
        let activity = if guest.is_some() {
            1.0
        } else {
            self.group_activity(leader)
        };
        let mut i = leader;
        while i != NONE {
            i = self.advance(i, now, ratio, activity, guest);
        }
    }

    pub(super) fn sync_all(&mut self) {
        let now = self.now();
        for i in 0..self.slots.len() as u32 {
            if self.slot(i).is_some_and(|s| s.leader == i) {
                self.sync_group(i, now);
            }
        }
    }

    /// The members of a group after its leader, in open order.
    pub(super) fn members(&self, leader: u32) -> impl Iterator<Item = (u32, &Slot)> + '_ {
        let first = self.slot(leader).map_or(NONE, |l| l.next);
        std::iter::successors(
            (first != NONE).then(|| (first, &self.slots[first as usize])),
            |(_, s)| (s.next != NONE).then(|| (s.next, &self.slots[s.next as usize])),
        )
    }

    /// Adds a counter, as a new group (`leader = None`) or at the end of
    /// `leader`'s group; its index, or `None` when the table is full
    /// (2^32 - 1 counters).
    pub(super) fn insert(&mut self, new: NewSlot, leader: Option<u32>) -> Option<u32> {
        self.sync_for_schedule();
        let share = self.intern_share(new.share);
        let kind = self.kinds[new.kind as usize];
        let slot = Slot {
            id: new.id,
            last_ns: new.now,
            time_enabled: 0,
            time_running: 0.0,
            value: 0.0,
            kind: new.kind,
            cpu: new.cpu,
            leader: NONE,
            next: NONE,
            share,
            group_hw: if kind.sw || leader.is_some() {
                NO_PMU
            } else {
                kind.pmu
            },
            flags: OPEN | if new.enabled { ENABLED } else { 0 },
        };
        let idx = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = slot;
                i
            }
            None => {
                let i = u32::try_from(self.slots.len())
                    .ok()
                    .filter(|&i| i != NONE)?;
                self.slots.push(slot);
                i
            }
        };
        self.open += 1;
        self.opens.push((new.kind, new.cpu));
        match leader {
            None => self.slots[idx as usize].leader = idx,
            Some(li) => {
                self.slots[idx as usize].leader = li;
                let tail = self.members(li).last().map_or(li, |(i, _)| i);
                self.slots[tail as usize].next = idx;
                if !kind.sw {
                    if let Some(l) = self.slot_mut(li) {
                        l.group_hw = kind.pmu;
                    }
                }
            }
        }
        Some(idx)
    }

    /// Whether a hardware event of `pmu` may join `leader`'s group: a
    /// group holds hardware events of at most one PMU.
    pub(super) fn hw_conflict(&self, leader: &Slot, pmu: u16) -> bool {
        leader.group_hw != NO_PMU && leader.group_hw != pmu
    }

    /// Events of `pmu` in `leader`'s group that take a counter (a
    /// perf-metrics event takes none), leader included.
    pub(super) fn count_of_pmu(&self, leader: u32, pmu: u16) -> usize {
        let takes = |s: &Slot| {
            let k = self.kind(s);
            k.pmu == pmu && !k.counterless
        };
        let own = self.slot(leader).map(takes);
        usize::from(own == Some(true)) + self.members(leader).filter(|(_, s)| takes(s)).count()
    }

    /// Enables a group (leader and members).
    pub(super) fn enable(&mut self, leader: u32) {
        self.sync_for_schedule();
        let mut i = leader;
        while let Some(s) = self.slot_mut(i) {
            s.flags |= ENABLED;
            i = s.next;
        }
    }

    /// Stops every counter of `cpu` for good.
    pub(super) fn freeze_cpu(&mut self, cpu: u32) {
        for s in &mut self.slots {
            if s.flags & OPEN != 0 && s.cpu == cpu {
                s.flags |= FROZEN;
            }
        }
    }

    /// A counter's reading: a snapshot event's constant, or its count.
    pub(super) fn reported(&self, s: &Slot) -> u64 {
        match self.kinds[s.kind as usize].rate {
            Rate::Constant(v) => v,
            Rate::PerSec(_) => s.value as u64,
        }
    }

    /// Closes a counter: a closed leader's members become singleton
    /// groups, as in the kernel.
    pub(super) fn close(&mut self, idx: u32) {
        let Some(leader) = self.slot(idx).map(|s| s.leader) else {
            return;
        };
        let now = self.now();
        self.sync_group(leader, now);
        self.sync_for_schedule();
        let closed = self.slots[idx as usize];
        self.slots[idx as usize].flags = 0;
        self.free.push(idx);
        self.open -= 1;
        if leader == idx {
            let mut m = closed.next;
            while m != NONE {
                let sw = self.kinds[self.slots[m as usize].kind as usize].sw;
                let pmu = self.kinds[self.slots[m as usize].kind as usize].pmu;
                let s = &mut self.slots[m as usize];
                let next = s.next;
                s.leader = m;
                s.next = NONE;
                s.group_hw = if sw { NO_PMU } else { pmu };
                m = next;
            }
        } else {
            self.unlink(leader, idx, closed.next);
        }
    }

    /// Removes `idx` from `leader`'s sibling list.
    fn unlink(&mut self, leader: u32, idx: u32, next: u32) {
        let mut i = leader;
        while let Some(s) = self.slot_mut(i) {
            if s.next == idx {
                s.next = next;
                return;
            }
            i = s.next;
        }
    }

    /// The table's memory: bytes in use, and bytes allocated (vectors
    /// grow by doubling; the part not yet used is address space the
    /// process has not touched, so not resident).
    pub(super) fn memory(&self) -> super::SimMemory {
        use std::mem::size_of;
        let per_kind = size_of::<EventKind>() + size_of::<((u32, [u64; 4], u16), u32)>() + 1;
        let per_share = size_of::<f64>() + size_of::<(u64, u32)>() + 1;
        let names: usize = self.pmus.iter().map(|p| p.capacity() + 24).sum();
        let used = self.slots.len() * size_of::<Slot>()
            + self.free.len() * size_of::<u32>()
            + self.opens.len() * size_of::<(u32, u32)>()
            + self.kinds.len() * per_kind
            + self.shares.len() * per_share
            + names;
        let allocated = self.slots.capacity() * size_of::<Slot>()
            + self.free.capacity() * size_of::<u32>()
            + self.opens.capacity() * size_of::<(u32, u32)>()
            + self.kinds.capacity().max(self.kind_index.capacity()) * per_kind
            + self.shares.capacity().max(self.share_index.capacity()) * per_share
            + names;
        super::SimMemory { used, allocated }
    }

    /// Every successful open so far, in order.
    pub(super) fn opens(&self) -> Vec<OpenRecord> {
        self.opens
            .iter()
            .map(|&(k, cpu)| {
                let k = self.kinds[k as usize];
                (self.pmu_name(k.pmu).to_string(), k.type_, k.config, cpu)
            })
            .collect()
    }

    /// The exclude bits of every successful open, in the order of
    /// [`Self::opens`].
    pub(super) fn open_excludes(&self) -> Vec<Exclude> {
        self.opens
            .iter()
            .map(|&(k, _)| self.kinds[k as usize].exclude)
            .collect()
    }
}
