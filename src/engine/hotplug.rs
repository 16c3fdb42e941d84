//! CPU hotplug: following the online CPU list, reading an offline CPU's
//! groups one last time before closing them, reopening a returning CPU's
//! groups, and a thread that does this between scrapes.
//!
//! What the kernel does (`kernel/events/core.c`): when a CPU goes offline
//! its perf context is scheduled out and every event is removed from it
//! and turned off; the members of a group are detached into singleton
//! groups. The events keep their counts and `time_enabled` stops: they
//! stay readable until closed, so a last read loses nothing (a detached
//! member is read on its own). When the CPU comes back, nothing
//! re-enables them: the engine has to open new groups, which start from
//! zero and continue the series' totals.
//!
//! How the engine learns about it, cheapest first:
//! * the kernel's hotplug signal ([`Kernel::hotplug_generation`], a uevent
//!   counter on the live kernel): [`follow_hotplug`] waits for it
//!   ([`Kernel::wait_hotplug`]) and applies it at once
//!   ([`Engine::on_hotplug`]), and each collection checks it (an atomic
//!   load);
//! * a group read failing with `ENODEV`, or a group's enabled time
//!   standing still while others move (no uevents reach a user-namespaced
//!   container);
//! * while any CPU is known offline, the online list is re-read at every
//!   collection, so a return is noticed within one scrape even without a
//!   signal.
//!
//! A signal after which the online list looks unchanged means a CPU went
//! and came back in between (its old events are dead) or a spurious
//! signal: every group is read one last time and reopened, which loses
//! nothing either way.

use super::open::close_group;
use super::read::{apply_member, mux_factor, value_of, Seen};
use super::{Engine, Group};
use crate::perf::Kernel;
use crate::pmu::PmuTable;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long the follower waits for a signal before checking whether it
/// should stop.
const WAIT: Duration = Duration::from_millis(500);
/// Retry interval for opens that failed with ENODEV on a CPU that just
/// came online, and how many retries before leaving it to collections.
const RETRY: Duration = Duration::from_millis(20);
const RETRIES: u32 = 50;

impl Engine {
    /// Applies the current online CPU list: groups of CPUs that went
    /// offline are read one last time and closed (their series leave the
    /// output, keeping their totals), CPUs that came back get their groups
    /// reopened (their counters continue from their totals). Returns
    /// whether the list changed.
    pub(super) fn set_online(&mut self, online: Vec<u32>) -> bool {
        let Some(before) = self.cpus.set(online) else {
            return false;
        };
        tracing::info!(from = %crate::pmu::format_cpu_list(&before), to = %crate::pmu::format_cpu_list(self.cpus.online()), "online CPUs changed");
        // At once for core and software PMUs, which follow the online list.
        self.reconcile();
        // The cpumask of uncore PMUs moves when its CPU goes offline (and a
        // new CPU brings its package id): rediscover, then open what moved.
        if self.rediscover() {
            self.reconcile();
        }
        true
    }

    /// Takes the PMUs' cpumasks and the CPUs' packages from sysfs again;
    /// returns whether anything changed.
    fn rediscover(&mut self) -> bool {
        let Ok(t) = PmuTable::discover(&self.table.sysfs) else {
            return false;
        };
        let mut changed = false;
        if !self.kernel.simulated() {
            for p in &mut self.table.pmus {
                if let Some(np) = t.get(&p.name) {
                    if p.scope != np.scope {
                        p.scope = np.scope.clone();
                        changed = true;
                    }
                }
            }
        }
        for (cpu, pkg) in t.topology.package {
            if let std::collections::btree_map::Entry::Vacant(v) =
                self.table.topology.package.entry(cpu)
            {
                v.insert(pkg);
                changed = true;
            }
        }
        changed
    }

    /// Reads the online CPU list from the kernel and applies it. Returns
    /// whether it changed.
    fn read_online(&mut self) -> bool {
        self.cpus.count_read();
        match self.kernel.online_cpus(&self.table.sysfs) {
            Some(online) => self.set_online(online),
            None => false,
        }
    }

    /// Re-reads the online list when the kernel's hotplug signal moved, at
    /// every collection when it has none, and while a CPU is known offline.
    pub(super) fn check_hotplug(&mut self) {
        match (self.kernel.hotplug_generation(), self.cpus.hotplug_seen) {
            (Some(now), Some(seen)) if now == seen => {
                if self.cpus.known_offline() {
                    self.read_online();
                }
            }
            (None, _) => {
                self.cpus.hotplug_seen = None;
                self.read_online();
            }
            (now, _) => {
                // Note the generation first: a change after this read
                // moves it again and is seen at the next check.
                self.cpus.hotplug_seen = now;
                if !self.read_online() {
                    tracing::info!("CPU hotplug signalled but the online CPUs look unchanged (a CPU went and came back?); reopening every group after a last read");
                    self.reopen_all();
                }
            }
        }
    }

    /// Applies a CPU hotplug signal between collections, at once: an
    /// offline CPU's groups are read one last time and closed, a returning
    /// CPU's are opened. Cheap when nothing changed (an atomic load).
    /// Returns whether an open failed because the kernel was not ready on
    /// a CPU that just came online (call again shortly).
    pub fn on_hotplug(&mut self) -> bool {
        self.check_hotplug();
        if self.cpus.take_retry() {
            self.reconcile();
        }
        self.cpus.retry_open
    }

    /// After the reads of a collection: a read that saw an offline CPU, or
    /// a group whose enabled time stood still while others moved, means the
    /// online list may have changed under us. Groups that still stand still
    /// are on CPUs that are online: the CPU went offline and came back
    /// between two collections, and the kernel never re-enables such
    /// events. They were just read (their counts are frozen since the
    /// offline), so they are closed and reopened now.
    pub(super) fn after_reads(&mut self, seen: Seen) {
        if seen.failed_cpu || (seen.moved && seen.still) {
            self.read_online();
        }
        if seen.moved && self.groups.iter().any(|g| g.stalled) {
            let (stalled, keep): (Vec<Group>, Vec<Group>) = std::mem::take(&mut self.groups)
                .into_iter()
                .partition(|g| g.stalled);
            self.groups = keep;
            tracing::info!(
                groups = stalled.len(),
                "groups stopped counting (CPU offline and back?); reopening them"
            );
            stalled.into_iter().for_each(close_group);
            self.reconcile();
        }
    }

    /// Reads every group one last time, closes it and opens the plan anew.
    fn reopen_all(&mut self) {
        let all = std::mem::take(&mut self.groups);
        self.close_after_last_read(all);
        self.reconcile();
    }

    /// Reads `groups` one last time (an offline CPU's events keep their
    /// counts until closed), then closes them.
    pub(super) fn close_after_last_read(&mut self, mut groups: Vec<Group>) {
        for g in &mut groups {
            self.read_last(g);
        }
        self.times.flush();
        groups.into_iter().for_each(close_group);
    }

    /// The last read of a group: its counters (not its gauges, which belong
    /// to a collection), each member on its own if the kernel detached it
    /// from the group.
    fn read_last(&mut self, g: &mut Group) {
        if self.read_leader(g).is_err() {
            return;
        }
        self.account_times(g, &mut Seen::default());
        let factor = mux_factor(self.buf.time_enabled, self.buf.time_running);
        let mut detached = Vec::new();
        for (k, m) in g.members.iter_mut().enumerate() {
            if m.plan.snapshot {
                continue;
            }
            match (value_of(&self.buf.values, k, m.counter.id), factor) {
                (Some(raw), Some(f)) => apply_member(&mut self.series, m, usize::MAX, raw, f),
                (Some(_), None) => {}
                (None, _) => detached.push(k),
            }
        }
        for k in detached {
            let m = &mut g.members[k];
            if self
                .kernel
                .read_group(&m.counter, &m.plan.attr, g.key.cpu, &mut self.buf)
                .is_err()
            {
                continue;
            }
            let factor = mux_factor(self.buf.time_enabled, self.buf.time_running);
            if let (Some(raw), Some(f)) = (value_of(&self.buf.values, 0, m.counter.id), factor) {
                apply_member(&mut self.series, m, usize::MAX, raw, f);
            }
        }
    }
}

/// Applies the kernel's CPU hotplug signal to an engine between scrapes,
/// on a thread of its own ([`follow_hotplug`]). Dropping it stops the
/// thread (within half a second).
#[derive(Debug)]
pub struct HotplugFollower {
    stop: Arc<AtomicBool>,
    _thread: JoinHandle<()>,
}

impl Drop for HotplugFollower {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Starts a thread that waits for the kernel's CPU hotplug signal and
/// applies it to `engine` at once ([`Engine::on_hotplug`]), so a CPU's
/// last counts are read as it goes offline and its counting resumes as
/// soon as it is back, not at the next scrape. `None` when the kernel has
/// no signal to wait for (collections then notice hotplug themselves).
/// The engine may be replaced inside the mutex (a reload); the thread
/// ends when the follower or the mutex is dropped.
pub fn follow_hotplug(engine: &Arc<Mutex<Engine>>) -> Option<HotplugFollower> {
    let kernel = engine
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .kernel
        .clone();
    let seen = kernel.hotplug_generation()?;
    kernel.wait_hotplug(seen, Duration::ZERO)?;
    let stop = Arc::new(AtomicBool::new(false));
    let weak = Arc::downgrade(engine);
    let thread = {
        let stop = stop.clone();
        std::thread::Builder::new()
            .name("perf-hotplug-apply".into())
            .stack_size(256 * 1024)
            .spawn(move || follow(kernel, weak, stop, seen))
            .map_err(|e| tracing::warn!(error = %e, "cannot start the hotplug thread; hotplug is applied at scrapes"))
            .ok()?
    };
    Some(HotplugFollower {
        stop,
        _thread: thread,
    })
}

fn follow(
    kernel: Arc<dyn Kernel>,
    engine: Weak<Mutex<Engine>>,
    stop: Arc<AtomicBool>,
    mut seen: u64,
) {
    let mut retries = 0u32;
    while !stop.load(Ordering::SeqCst) {
        let timeout = if retries > 0 { RETRY } else { WAIT };
        let Some(now) = kernel.wait_hotplug(seen, timeout) else {
            return;
        };
        if now == seen && retries == 0 {
            continue;
        }
        seen = now;
        let Some(e) = engine.upgrade() else {
            return;
        };
        let again = e
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .on_hotplug();
        retries = match (again, retries) {
            (false, _) => 0,
            (true, 0) => RETRIES,
            (true, n) => n - 1,
        };
    }
}
