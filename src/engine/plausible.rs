//! Plausibility (issue 27 item 2): at most every [`CHECK_EVERY_NS`], each
//! CPU's cycles and instructions over the window since the last check are
//! judged against clocks the PMU does not drive: the CPU's busy time
//! ([`Kernel::cpu_times`]: `/proc/stat`), its maximum frequency
//! ([`Kernel::max_freqs`]: cpufreq, else the TSC rate; read once) and its
//! core's retire width. The bounds, their margins and where they come from
//! are [`crate::problem::plausible`]'s. A count that fails one makes its
//! series `implausible` until a check finds it plausible again; why is an
//! [`Implausible`], logged when it starts and stops and exported in
//! `perf_counter_implausible_info`.
//!
//! # Off the collection path
//!
//! A collection reads no file for it. The collection a check is due at
//! only takes every judged member's window (its count and group times
//! since the last check, from the reads it just made) and asks for a
//! busy-time reading: a [`BusyRead`] ([`Engine::busy_read`]), which the
//! caller runs right after the collection, without the engine
//! ([`super::after_collection`]: `serve` does it on the collector thread
//! once the scrape has its answer), and hands back
//! ([`Engine::judge_plausibility`]). The reading is paired with the
//! windows of that collection, so busy time and counts cover the same
//! window: a reading made more than [`MAX_SKEW_NS`] after the collection
//! (or never made) is not judged against, and the next window is not
//! judged either (it has no start). Verdicts take effect at the collection
//! after the check: a state is at most one check interval plus one
//! collection old.
//!
//! Cost: nothing on the collections between checks but one clock read
//! (and, while some counter is implausible, one pass over the members);
//! the collection a check is due at walks the open groups once; the
//! check, off that path, reads `/proc/stat` once (one file, about 100
//! bytes per CPU and the interrupt line). The maximum frequencies are read
//! with the first reading only.
//!
//! Only node-level groups, counted system-wide per CPU, are judged (a
//! per-cgroup count is a share of a CPU's and is not compared with the
//! CPU's busy time). Counts estimated from a group that ran less than
//! [`MIN_RUNNING_SHARE`] of the window are not compared with an upper
//! bound (the estimate is too noisy).
//!
//! [`Kernel::cpu_times`]: crate::perf::Kernel::cpu_times
//! [`Kernel::max_freqs`]: crate::perf::Kernel::max_freqs

use super::Engine;
use crate::perf::Kernel;
use crate::pmu::cpuclock::{CpuTime, MaxFreq};
use crate::problem::plausible::{
    retire_width, Count, FreqSource, Implausible, IPC_MARGIN, MIN_BUSY_SECONDS,
    NEAR_ZERO_PER_SECOND,
};
use crate::problem::{log_reason, LogFields};
use std::path::PathBuf;
use std::sync::Arc;
use tracing::Level;

/// How often plausibility is checked: at most once per 10 s of the
/// kernel's clock, so a scrape every second pays for it once in ten, and
/// the window is long enough for `/proc/stat`'s 10 ms ticks to be exact
/// to 0.1%.
pub(super) const CHECK_EVERY_NS: u64 = 10_000_000_000;

/// The longest a busy-time reading may follow the collection whose
/// windows it closes (250 ms: 2.5% of a check interval, well inside the
/// bounds' margins); a later one is not judged against.
pub(super) const MAX_SKEW_NS: u64 = 250_000_000;

/// The running share below which a multiplexed estimate is not compared
/// with an upper bound.
pub(super) const MIN_RUNNING_SHARE: f64 = 0.5;

/// The busy share of a window below which near-zero counts are not
/// judged.
const MIN_BUSY_SHARE: f64 = 0.5;

/// Cycles a CPU must count in a window before its IPC is judged.
const MIN_CYCLES_FOR_IPC: f64 = 1.0e6;

/// One member's plausibility state.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct MemberCheck {
    /// At the last check: its estimate (raw units) and its group's
    /// enabled and running times.
    mark: Option<(f64, u64, u64)>,
    /// Why it is implausible since the last check.
    verdict: Option<Implausible>,
}

/// The checker: when it last ran, the CPUs' busy times then, their
/// maximum frequencies.
#[derive(Debug)]
pub(super) struct Checker {
    procfs: PathBuf,
    last_at: Option<u64>,
    prev: Vec<CpuTime>,
    cur: Vec<CpuTime>,
    max: Option<Vec<(u32, MaxFreq)>>,
    /// Members flagged at the last check.
    flagged: usize,
    /// Whether a failure to read the busy times was logged.
    said_unreadable: bool,
    /// The windows of the collection a check was due at, until its
    /// busy-time reading comes back.
    pending: Option<Pending>,
}

/// A check waiting for its busy-time reading.
#[derive(Debug)]
struct Pending {
    /// The kernel's clock at the collection.
    at: u64,
    /// Whether a [`BusyRead`] was handed out for it.
    asked: bool,
    seen: Vec<Seen>,
}

/// A busy-time reading a collection asked for: run it off the collection
/// path ([`BusyRead::run`], without the engine) and hand the result back
/// ([`Engine::judge_plausibility`]).
#[derive(Debug)]
pub struct BusyRead {
    kernel: Arc<dyn Kernel>,
    procfs: PathBuf,
    /// The sysfs root and CPUs, when the maximum frequencies are still to
    /// be read.
    max: Option<(PathBuf, Vec<u32>)>,
    at: u64,
}

/// What a [`BusyRead`] read.
#[derive(Debug)]
pub struct BusyTimes {
    /// The collection whose windows it closes.
    at: u64,
    /// The kernel's clock after the reading.
    read_at: u64,
    times: Result<Vec<CpuTime>, String>,
    max: Option<Vec<(u32, MaxFreq)>>,
}

impl BusyRead {
    /// Reads the CPUs' busy times (`<procfs>/stat` on the live kernel)
    /// and, the first time, their maximum frequencies.
    pub fn run(self) -> BusyTimes {
        let mut v = Vec::new();
        let times = self.kernel.cpu_times(&self.procfs, &mut v).map(|()| v);
        let read_at = self.kernel.monotonic_ns();
        let max = self
            .max
            .map(|(sysfs, cpus)| self.kernel.max_freqs(&sysfs, &self.procfs, &cpus));
        BusyTimes {
            at: self.at,
            read_at,
            times,
            max,
        }
    }
}

/// One member's window, for the judging.
#[derive(Debug, Clone, Copy)]
struct Seen {
    group: usize,
    member: usize,
    /// The member's counter (its group may close before the verdict).
    id: u64,
    count: Count,
    cpu: u32,
    /// Its increase (estimate, raw units).
    delta: f64,
    d_enabled: u64,
    d_running: u64,
    exclude_user: bool,
    exclude_kernel: bool,
}

impl Seen {
    fn running_share(&self) -> f64 {
        if self.d_enabled == 0 {
            0.0
        } else {
            self.d_running as f64 / self.d_enabled as f64
        }
    }
}

/// The busy time of one CPU over a window, seconds.
#[derive(Debug, Clone, Copy)]
struct Busy {
    user: f64,
    system: f64,
}

/// Judges one member's window against its CPU's busy time and maximum
/// frequency (the IPC is judged per pair, [`judge_ipc`]).
fn judge_alone(s: &Seen, busy: Busy, max: Option<&MaxFreq>) -> Option<Implausible> {
    let window_s = s.d_enabled as f64 / 1e9;
    let busy_s = busy.user + busy.system;
    if s.count == Count::Cycles && s.running_share() >= MIN_RUNNING_SHARE {
        if let Some(&MaxFreq::Known(hz, source)) = max {
            // Slack of one tick's worth of cycles for the tick accounting.
            if s.delta > hz * (busy_s * source.margin() + 0.01) {
                return Some(Implausible::CyclesAboveMaxFrequency {
                    cpu: s.cpu,
                    per_busy_second: s.delta / busy_s.max(0.01),
                    max_hz: hz,
                    source,
                });
            }
        }
    }
    // The busy time of the privilege levels it counts.
    let mode_s = if s.exclude_user { 0.0 } else { busy.user }
        + if s.exclude_kernel { 0.0 } else { busy.system };
    let busy_share = if window_s > 0.0 {
        busy_s / window_s
    } else {
        0.0
    };
    if s.d_running > 0
        && mode_s >= MIN_BUSY_SECONDS
        && busy_share >= MIN_BUSY_SHARE
        && s.delta / mode_s < NEAR_ZERO_PER_SECOND
    {
        return Some(Implausible::NearZeroWhileBusy {
            cpu: s.cpu,
            count: s.count,
            per_busy_second: s.delta / mode_s,
            busy_share: busy_share.min(1.0),
        });
    }
    None
}

/// Judges a CPU's instructions per cycle: the pair counts the same
/// privilege levels, each ran at least [`MIN_RUNNING_SHARE`] of the
/// window, and the cycles moved enough to make the ratio meaningful.
fn judge_ipc(cycles: &Seen, instr: &Seen, pmu: &str) -> Option<Implausible> {
    let (width, arch) = retire_width(pmu)?;
    let same_levels =
        (cycles.exclude_user, cycles.exclude_kernel) == (instr.exclude_user, instr.exclude_kernel);
    if !same_levels
        || cycles.running_share() < MIN_RUNNING_SHARE
        || instr.running_share() < MIN_RUNNING_SHARE
        || cycles.delta < MIN_CYCLES_FOR_IPC
    {
        return None;
    }
    let ipc = instr.delta / cycles.delta;
    (ipc > width * IPC_MARGIN).then_some(Implausible::IpcAboveRetireWidth {
        cpu: cycles.cpu,
        ipc,
        width,
        arch,
    })
}

/// The highest known maximum frequency of the CPUs, with its source
/// (the per-cgroup cycles bound: a cgroup runs on any of them).
fn highest(max: Option<&[(u32, MaxFreq)]>) -> Option<(f64, FreqSource)> {
    max?.iter()
        .filter_map(|(_, m)| match m {
            MaxFreq::Known(hz, s) => Some((*hz, *s)),
            MaxFreq::Unknown(_) => None,
        })
        .max_by(|a, b| a.0.total_cmp(&b.0))
}

impl Checker {
    fn new(procfs: PathBuf) -> Self {
        Checker {
            procfs,
            last_at: None,
            prev: Vec::new(),
            cur: Vec::new(),
            max: None,
            flagged: 0,
            said_unreadable: false,
            pending: None,
        }
    }

    /// The busy time of `cpu` between the last two readings.
    fn busy(&self, cpu: u32) -> Option<Busy> {
        let find = |v: &[CpuTime]| v.iter().find(|t| t.cpu == cpu).copied();
        let (a, b) = (find(&self.prev)?, find(&self.cur)?);
        Some(Busy {
            user: b.user_ns.saturating_sub(a.user_ns) as f64 / 1e9,
            system: b.system_ns.saturating_sub(a.system_ns) as f64 / 1e9,
        })
    }
}

impl Engine {
    /// Checks the plausibility of cycles and instructions from now on,
    /// with `<procfs>/stat` as the busy time (the live kernel; the
    /// simulation has its own clocks).
    pub fn check_plausibility(&mut self, procfs: PathBuf) {
        self.plausible = Some(Checker::new(procfs));
    }

    /// At every collection, after the reads: when a check is due, the
    /// judged members' windows (its reading is asked for:
    /// [`busy_read`](Self::busy_read)); the verdicts into this
    /// collection's states.
    pub(super) fn plausibility(&mut self) {
        let Some(mut c) = self.plausible.take() else {
            return;
        };
        let now = self.kernel.monotonic_ns();
        if c.last_at
            .is_none_or(|t| now.saturating_sub(t) >= CHECK_EVERY_NS)
        {
            c.last_at = Some(now);
            if c.pending.is_some() {
                // Its reading never came: the next window has no start.
                c.cur.clear();
            }
            c.pending = Some(Pending {
                at: now,
                asked: false,
                seen: self.take_windows(),
            });
        }
        if c.flagged > 0 {
            for g in &self.groups {
                for m in &g.members {
                    let Some(why) = m.check.as_ref().and_then(|c| c.verdict) else {
                        continue;
                    };
                    // The exported series and the per-CPU one (the same
                    // for a `per: cpu` set; flagging twice is harmless).
                    for i in [m.series, m.detail] {
                        if let Some(st) = self.series.get_mut(i) {
                            st.window.flag(why);
                        }
                    }
                }
            }
        }
        self.plausible = Some(c);
    }

    /// The busy-time reading the last due collection asked for, once
    /// (`None`: no check waits for one). Run it without the engine and
    /// hand the result to [`judge_plausibility`](Self::judge_plausibility).
    pub fn busy_read(&mut self) -> Option<BusyRead> {
        let c = self.plausible.as_mut()?;
        let at = {
            let p = c.pending.as_mut().filter(|p| !p.asked)?;
            p.asked = true;
            p.at
        };
        let max = c
            .max
            .is_none()
            .then(|| (self.table.sysfs.clone(), self.table.topology.online.clone()));
        Some(BusyRead {
            kernel: self.kernel.clone(),
            procfs: c.procfs.clone(),
            max,
            at,
        })
    }

    /// Judges the windows a collection took against the busy times read
    /// for it ([`BusyRead::run`]); the verdicts count from the next
    /// collection. A reading for another collection is ignored; one made
    /// more than 250 ms (`MAX_SKEW_NS`) after its collection is not judged
    /// against; a verdict is for the member whose window was taken (a
    /// group closed meanwhile is not judged).
    pub fn judge_plausibility(&mut self, b: BusyTimes) {
        let Some(mut c) = self.plausible.take() else {
            return;
        };
        self.judge(&mut c, b);
        self.plausible = Some(c);
    }

    fn judge(&mut self, c: &mut Checker, b: BusyTimes) {
        if c.pending.as_ref().is_none_or(|p| p.at != b.at) {
            return;
        }
        let Some(p) = c.pending.take() else {
            return;
        };
        if let Some(max) = b.max.filter(|_| c.max.is_none()) {
            if let Some((_, MaxFreq::Unknown(why))) =
                max.iter().find(|(_, m)| matches!(m, MaxFreq::Unknown(_)))
            {
                tracing::info!(reason = %why, "cycles not checked against a maximum frequency");
            }
            c.max = Some(max);
        }
        if let Some(cg) = self.cgroups.as_mut() {
            cg.set_max_freq(highest(c.max.as_deref()));
        }
        std::mem::swap(&mut c.prev, &mut c.cur);
        match b.times {
            Ok(t) => c.cur = t,
            Err(e) => {
                if !c.said_unreadable {
                    c.said_unreadable = true;
                    tracing::warn!(error = %e, "plausibility not checked: no CPU busy time");
                }
                c.cur.clear();
            }
        }
        if b.read_at.saturating_sub(p.at) > MAX_SKEW_NS {
            tracing::debug!("plausibility: busy times read too late for their window; not judged");
            c.prev.clear();
            c.cur.clear();
            return;
        }
        self.check(c, &p.seen);
    }

    /// One check: every window judged against the busy times.
    fn check(&mut self, c: &mut Checker, seen: &[Seen]) {
        let mut verdicts: Vec<(&Seen, Option<Implausible>)> =
            seen.iter().map(|s| (s, None)).collect();
        for (i, s) in seen.iter().enumerate() {
            let Some(busy) = c.busy(s.cpu) else {
                continue;
            };
            let max = c
                .max
                .as_ref()
                .and_then(|m| m.iter().find(|(cpu, _)| *cpu == s.cpu))
                .map(|(_, m)| m);
            verdicts[i].1 = judge_alone(s, busy, max);
        }
        // IPC: each instructions member with the cycles of its CPU (a
        // quadratic pass, at most every 10 s, over a few judged counters
        // per CPU).
        for (i, ins) in seen.iter().enumerate() {
            if ins.count != Count::Instructions {
                continue;
            }
            let Some(pmu) = self.groups.get(ins.group).map(|g| g.key.pmu.as_str()) else {
                continue;
            };
            for (j, cyc) in seen.iter().enumerate() {
                if cyc.count != Count::Cycles || cyc.cpu != ins.cpu {
                    continue;
                }
                if let Some(why) = judge_ipc(cyc, ins, pmu) {
                    verdicts[i].1 = verdicts[i].1.or(Some(why));
                    verdicts[j].1 = verdicts[j].1.or(Some(why));
                }
            }
        }
        c.flagged = 0;
        for (s, why) in verdicts {
            c.flagged += usize::from(why.is_some());
            self.set_verdict(s, why);
        }
    }

    /// Every judged member's window since the last check (none for a
    /// member seen for the first time), with the marks moved to now.
    fn take_windows(&mut self) -> Vec<Seen> {
        let mut out = Vec::new();
        for (gi, g) in self.groups.iter_mut().enumerate() {
            let (en, run) = (g.last_enabled, g.last_running);
            for (mi, m) in g.members.iter_mut().enumerate() {
                let (Some(count), Some(check)) = (m.role, m.check.as_deref_mut()) else {
                    continue;
                };
                let last = check.mark.replace((m.high, en, run));
                let Some((high, en0, run0)) = last else {
                    continue;
                };
                let x = m.plan.attr.exclude;
                out.push(Seen {
                    group: gi,
                    member: mi,
                    id: m.counter.id,
                    count,
                    cpu: g.key.cpu,
                    delta: (m.high - high).max(0.0),
                    d_enabled: en.saturating_sub(en0),
                    d_running: run.saturating_sub(run0),
                    exclude_user: x.user,
                    exclude_kernel: x.kernel,
                });
            }
        }
        out
    }

    /// Sets a member's verdict, logging when it changes.
    fn set_verdict(&mut self, s: &Seen, why: Option<Implausible>) {
        let Some(m) = self
            .groups
            .get_mut(s.group)
            .and_then(|g| g.members.get_mut(s.member))
            .filter(|m| m.counter.id == s.id)
        else {
            return;
        };
        let Some(check) = m.check.as_deref_mut() else {
            return;
        };
        let was = std::mem::replace(&mut check.verdict, why);
        let metric = self
            .resolution
            .metrics
            .get(m.plan.metric)
            .map_or("", |x| x.metric.as_str());
        match (was, why) {
            (None, Some(w)) => log_reason!(
                Level::WARN,
                LogFields::of(&w),
                [metric, cpu = w.cpu(),],
                [],
                "counter implausible"
            ),
            (Some(_), None) => tracing::info!(metric, "counter plausible again"),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::CounterState;

    /// Which state a verdict leaves a counter in.
    fn state_of(why: Option<Implausible>) -> CounterState {
        why.map_or(CounterState::Counting, |_| CounterState::Implausible)
    }

    const S: u64 = 1_000_000_000;

    fn seen(count: Count, delta: f64) -> Seen {
        Seen {
            group: 0,
            member: 0,
            id: 0,
            count,
            cpu: 2,
            delta,
            d_enabled: 10 * S,
            d_running: 10 * S,
            exclude_user: false,
            exclude_kernel: false,
        }
    }

    const BUSY: Busy = Busy {
        user: 7.5,
        system: 2.5,
    };
    const MAX: MaxFreq = MaxFreq::Known(3.0e9, FreqSource::Cpufreq);

    #[test]
    fn cycles_beyond_the_maximum_frequency_are_implausible() {
        // 10 busy seconds at 3 GHz, margin 1.25: up to 37.5e9 (+ a tick).
        let ok = judge_alone(&seen(Count::Cycles, 37.0e9), BUSY, Some(&MAX));
        assert_eq!(state_of(ok), CounterState::Counting);
        let bad = judge_alone(&seen(Count::Cycles, 60.0e9), BUSY, Some(&MAX));
        assert!(
            matches!(bad, Some(Implausible::CyclesAboveMaxFrequency { cpu: 2, max_hz, .. }) if max_hz == 3.0e9),
            "{bad:?}"
        );
        // Half as busy: the same count is too many.
        let half = Busy {
            user: 3.0,
            system: 2.0,
        };
        assert!(judge_alone(&seen(Count::Cycles, 37.0e9), half, Some(&MAX)).is_some());
        // Unknown maximum: not checked.
        let unknown = MaxFreq::Unknown("none".into());
        assert_eq!(
            judge_alone(&seen(Count::Cycles, 60.0e9), BUSY, Some(&unknown)),
            None
        );
        // A noisy estimate (ran a quarter of the window) is not judged
        // against the upper bound.
        let mut mux = seen(Count::Cycles, 60.0e9);
        mux.d_running = 10 * S / 4;
        assert_eq!(judge_alone(&mux, BUSY, Some(&MAX)), None);
        // The TSC rate allows turbo: 2.5 × 3 GHz × 10 s.
        let tsc = MaxFreq::Known(3.0e9, FreqSource::Tsc);
        assert_eq!(
            judge_alone(&seen(Count::Cycles, 60.0e9), BUSY, Some(&tsc)),
            None
        );
    }

    #[test]
    fn a_busy_cpu_that_counts_next_to_nothing_is_implausible() {
        let guest = judge_alone(&seen(Count::Instructions, 3950.0), BUSY, Some(&MAX));
        assert!(
            matches!(guest, Some(Implausible::NearZeroWhileBusy { count: Count::Instructions, per_busy_second, .. }) if (per_busy_second - 395.0).abs() < 1e-9),
            "{guest:?}"
        );
        // An idle CPU may count next to nothing.
        let idle = Busy {
            user: 0.5,
            system: 0.2,
        };
        assert_eq!(
            judge_alone(&seen(Count::Instructions, 3950.0), idle, Some(&MAX)),
            None
        );
        // Counting user space only on a CPU busy in the kernel: fine.
        let kernel = Busy {
            user: 0.1,
            system: 9.9,
        };
        let mut u = seen(Count::Instructions, 3950.0);
        u.exclude_kernel = true;
        assert_eq!(judge_alone(&u, kernel, Some(&MAX)), None);
        // Plausible: 2e9 per busy second.
        assert_eq!(
            judge_alone(&seen(Count::Instructions, 2.0e10), BUSY, Some(&MAX)),
            None
        );
    }

    #[test]
    fn more_instructions_per_cycle_than_the_core_retires_are_implausible() {
        let c = seen(Count::Cycles, 1.0e10);
        let fine = seen(Count::Instructions, 6.0e10);
        assert_eq!(judge_ipc(&c, &fine, "cpu"), None);
        let bad = seen(Count::Instructions, 2.0e11);
        assert!(matches!(
            judge_ipc(&c, &bad, "cpu_core"),
            Some(Implausible::IpcAboveRetireWidth { ipc, width, arch: "x86", .. }) if ipc == 20.0 && width == 12.0
        ));
        assert!(judge_ipc(&c, &bad, "armv8_pmuv3_0").is_some());
        // An architecture without a known width, or a pair counting
        // different privilege levels, is not judged.
        assert_eq!(judge_ipc(&c, &bad, "riscv_pmu"), None);
        let mut user = bad;
        user.exclude_kernel = true;
        assert_eq!(judge_ipc(&c, &user, "cpu"), None);
    }
}
