//! The simulated CPUs' clocks, which plausibility is judged against
//! (issue 27 item 2), and the knobs that make a counter implausible: how
//! busy the CPUs are ([`SimKernel::set_busy_share`], default fully busy,
//! 3/4 of it in user space as the counters' privilege split), their
//! maximum frequency ([`SimKernel::set_max_freq`], default 3 GHz from
//! cpufreq, above the simulated 2e9 cycles/s) and a fake guest PMU that
//! counts a tiny constant rate whatever the event
//! ([`SimKernel::set_guest_rate`]). Cycles beyond the maximum frequency
//! come from [`SimKernel::set_activity`] above 1.5.
//!
//! The start-up self-test's thread ([`Kernel::thread_ran`]): the
//! simulated CPU runs its loop at [`THREAD_INSTRUCTIONS_PER_SEC`], the
//! rate its `instructions` count at, so the clock moves by the loop's
//! instructions over that rate, and the thread's counters (system-wide
//! ones on its CPU: the thread has the CPU to itself) count what the loop
//! ran, unless a knob says otherwise ([`SimKernel::set_guest_rate`]).
//!
//! [`Kernel::thread_ran`]: crate::perf::Kernel::thread_ran

use super::SimKernel;
use crate::pmu::cpuclock::{CpuTime, MaxFreq};
use crate::problem::plausible::FreqSource;

/// The busy time of every simulated CPU (they are all alike) and their
/// maximum frequency.
#[derive(Debug, Clone, Copy)]
pub(super) struct CpuClock {
    /// The share of the time the CPUs are busy from `since` on.
    share: f64,
    /// Busy nanoseconds up to `since`.
    busy_ns: f64,
    since: u64,
    /// The maximum frequency (`None`: unknown).
    max_hz: Option<f64>,
}

impl Default for CpuClock {
    fn default() -> Self {
        CpuClock {
            share: 1.0,
            busy_ns: 0.0,
            since: 0,
            max_hz: Some(3.0e9),
        }
    }
}

impl CpuClock {
    /// Busy nanoseconds at `now`.
    fn busy_at(&self, now: u64) -> f64 {
        self.busy_ns + now.saturating_sub(self.since) as f64 * self.share
    }
}

/// The simulated CPUs' instructions per second (the rate
/// `instructions` count at: 3e9, an IPC of 1.5 at 2e9 cycles per second).
pub(super) const THREAD_INSTRUCTIONS_PER_SEC: f64 = 3.0e9;

impl SimKernel {
    /// The calling thread ran `instructions` instructions: the clock
    /// moves by the time the simulated CPU takes for them.
    pub(super) fn sim_thread_ran(&self, instructions: u64) {
        let ns = instructions as f64 / THREAD_INSTRUCTIONS_PER_SEC * 1e9;
        self.advance(ns as u64);
    }

    /// Makes every CPU busy `share` (clamped to 0..=1) of the time from now
    /// on, as `/proc/stat` would say (default 1: fully busy). The counters'
    /// rates do not change ([`set_activity`](Self::set_activity) does that).
    pub fn set_busy_share(&self, share: f64) {
        let share = if share.is_finite() {
            share.clamp(0.0, 1.0)
        } else {
            1.0
        };
        let mut st = self.state();
        let now = st.now();
        let c = &mut st.clock;
        c.busy_ns = c.busy_at(now);
        c.since = now;
        c.share = share;
    }

    /// Sets the CPUs' maximum frequency (`None`: unknown, as on a VM
    /// without cpufreq or a TSC rate); default 3 GHz.
    pub fn set_max_freq(&self, hz: Option<f64>) {
        self.state().clock.max_hz = hz.filter(|h| h.is_finite() && *h > 0.0);
    }

    /// Makes every counter of `pmu_name` count `per_sec` events per
    /// second of running time, whatever its event (`None`: count as
    /// usual): a fake guest PMU, such as the one that reports 395
    /// instructions per second on a fully busy CPU. Applies from now on.
    pub fn set_guest_rate(&self, pmu_name: &str, per_sec: Option<f64>) {
        let mut st = self.state();
        st.sync_all();
        match per_sec.filter(|r| r.is_finite() && *r >= 0.0) {
            Some(r) => st.guest.insert(pmu_name.to_string(), r),
            None => st.guest.remove(pmu_name),
        };
    }

    /// Each online CPU's busy time, 3/4 in user space.
    pub(super) fn sim_cpu_times(&self, out: &mut Vec<CpuTime>) {
        let st = self.state();
        let busy = st.clock.busy_at(st.now());
        let user = (busy * 0.75) as u64;
        out.clear();
        out.extend(st.online.iter().map(|&cpu| CpuTime {
            cpu,
            user_ns: user,
            system_ns: (busy as u64).saturating_sub(user),
        }));
    }

    /// The maximum frequency of each of `cpus`.
    pub(super) fn sim_max_freqs(&self, cpus: &[u32]) -> Vec<(u32, MaxFreq)> {
        let max = self.state().clock.max_hz;
        cpus.iter()
            .map(|&c| {
                let f = match max {
                    Some(hz) => MaxFreq::Known(hz, FreqSource::Cpufreq),
                    None => MaxFreq::Unknown(
                        "the simulated CPUs have no maximum frequency (set_max_freq)".into(),
                    ),
                };
                (c, f)
            })
            .collect()
    }
}
