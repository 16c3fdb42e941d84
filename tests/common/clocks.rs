//! Comparing two clocks on a loaded machine (issue 24, item 12).
//!
//! A test that compares the exporter's time with another clock (`cpu.stat`,
//! `perf stat`, `/proc/stat`, `getrusage`) reads the two one after the
//! other. On a busy machine the reader can be preempted between the reads,
//! and a busy workload's clock runs on meanwhile: the two then differ by
//! the time between the reads, which reads like an accuracy bug
//! (`0.256 s vs cpu.stat 0.599 s`). So:
//!
//! * [`bracket`] reads the reference clock just before *and* just after the
//!   measured read; the reference's growth over a window is then a
//!   [`Span`] (the least and the most the reads allow), and the measured
//!   growth is compared with that span, not with one point of it;
//! * [`compare_clocks`] measures again, once, when a comparison failed
//!   while the bracketing reads were far apart (the machine was loaded),
//!   and when it fails for good says how far apart they were and the load
//!   average (`/proc/loadavg`), so that a failure on a loaded machine does
//!   not read as a counting bug;
//! * it does the same when the hypervisor took CPU time from this VM
//!   during the measurement (`steal` in `/proc/stat`): `cpu-clock` counts
//!   stolen time that `cpu.stat` leaves out, so a burst of steal makes the
//!   exporter read high against `cpu.stat` (+5..8% was seen).

use std::fmt;
use std::time::{Duration, Instant};

/// A measured read with the reference clocks read just before and just
/// after it.
#[derive(Debug, Clone)]
pub(crate) struct Bracket<T> {
    /// The reference clocks just before the measured read.
    pub before: Vec<f64>,
    /// What the measured read returned.
    pub value: T,
    /// The reference clocks just after it.
    pub after: Vec<f64>,
    /// Wall time from the first reference read to the last.
    pub gap: Duration,
}

/// Reads `reference` (one value per clock, e.g. one `cpu.stat` per
/// cgroup), then `measure`, then `reference` again.
pub(crate) fn bracket<T>(
    reference: impl Fn() -> Vec<f64>,
    measure: impl FnOnce() -> T,
) -> Bracket<T> {
    let t0 = Instant::now();
    let before = reference();
    let value = measure();
    let after = reference();
    Bracket {
        before,
        value,
        after,
        gap: t0.elapsed(),
    }
}

impl<T> Bracket<T> {
    /// Reference clock `i`'s growth from this bracket to `end`, as the
    /// reads bound it.
    pub(crate) fn growth<U>(&self, end: &Bracket<U>, i: usize) -> Span {
        Span {
            lo: end.before[i] - self.after[i],
            hi: end.after[i] - self.before[i],
        }
    }

    /// The larger of the two brackets' gaps.
    pub(crate) fn max_gap<U>(&self, end: &Bracket<U>) -> Duration {
        self.gap.max(end.gap)
    }
}

/// The least and the most a reference clock can have grown by.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Span {
    pub lo: f64,
    pub hi: f64,
}

impl Span {
    /// A span of one value (a reference read once).
    pub(crate) fn exact(v: f64) -> Span {
        Span { lo: v, hi: v }
    }

    /// Whether `ours` is within `tol` of the span.
    pub(crate) fn agrees(&self, ours: f64, tol: f64) -> bool {
        ours >= self.lo - tol && ours <= self.hi + tol
    }

    /// Whether `ours`, a perf CPU clock, is within `tol` of the span
    /// while the reference is `cpu.stat`: the CPU clock may also be above
    /// it by up to `steal`, the time the hypervisor took meanwhile (this
    /// kernel has `CONFIG_PARAVIRT_TIME_ACCOUNTING`: `cpu.stat` leaves
    /// stolen time out, the CPU clock, `local_clock()`, counts it).
    pub(crate) fn agrees_but_steal(&self, ours: f64, tol: f64, steal: f64) -> bool {
        ours >= self.lo - tol && ours <= self.hi + tol + steal.max(0.0)
    }

    /// The middle of the span (for relative tolerances).
    pub(crate) fn mid(&self) -> f64 {
        (self.lo + self.hi) / 2.0
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.lo == self.hi {
            write!(f, "{:.4}", self.lo)
        } else {
            write!(f, "{:.4}..{:.4}", self.lo, self.hi)
        }
    }
}

/// What one measurement of a clock comparison found.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// One line per comparison that failed (none: it agreed).
    pub failures: Vec<String>,
    /// The largest time between two reads that should have been
    /// simultaneous (the bracketing reads, or the two tools' windows).
    pub gap: Duration,
    /// CPU time stolen by the hypervisor during the measurement, seconds.
    pub steal: f64,
}

impl Outcome {
    pub(crate) fn new(gap: Duration) -> Outcome {
        Outcome {
            failures: Vec::new(),
            gap,
            steal: 0.0,
        }
    }

    /// Records a failed comparison unless `ok`.
    pub(crate) fn check(&mut self, ok: bool, failure: impl FnOnce() -> String) {
        if !ok {
            self.failures.push(failure());
        }
    }
}

/// `/proc/loadavg`, trimmed (or why it could not be read).
pub(crate) fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|e| format!("unreadable: {e}"))
}

/// Runs `measure` (given the attempt number, 1 or 2); when it fails with a
/// gap above `large_gap`, measures once more; panics when it fails for
/// good, with the failures, the gap and the load average.
pub(crate) fn compare_clocks(
    what: &str,
    large_gap: Duration,
    mut measure: impl FnMut(u32) -> Outcome,
) {
    let s0 = steal_seconds();
    let mut first = measure(1);
    first.steal = steal_seconds() - s0;
    if first.failures.is_empty() {
        return;
    }
    let load = loadavg();
    if first.gap <= large_gap && first.steal < STEAL_ALLOWED {
        panic!("{}", report(what, &first, &load, 1, large_gap));
    }
    eprintln!(
        "{what}: disagreed while the reads were {:?} apart (> {large_gap:?}?) or {:.3} s was stolen \
         (load average {load}): measuring once more\n  {}",
        first.gap,
        first.steal,
        first.failures.join("\n  ")
    );
    let s0 = steal_seconds();
    let mut second = measure(2);
    second.steal = steal_seconds() - s0;
    if !second.failures.is_empty() {
        panic!(
            "{}\n(the first measurement too: {})",
            report(what, &second, &loadavg(), 2, large_gap),
            first.failures.join("; ")
        );
    }
}

/// Stolen time (all CPUs) below which a failed comparison is not measured
/// again for it.
const STEAL_ALLOWED: f64 = 0.01;

/// Time the hypervisor took from this VM's CPUs so far (`steal` of
/// `/proc/stat`'s `cpu` line, in USER_HZ ticks of 10 ms), in seconds; 0
/// when unreadable.
pub(crate) fn steal_seconds() -> f64 {
    steal_of("cpu ")
}

/// Time the hypervisor took from CPU `cpu` so far (its `cpuN` line of
/// `/proc/stat`), in seconds; 0 when unreadable.
pub(crate) fn cpu_steal_seconds(cpu: u32) -> f64 {
    steal_of(&format!("cpu{cpu} "))
}

/// The steal column of the `/proc/stat` line starting with `tag`, in
/// seconds (USER_HZ ticks of 10 ms); 0 when unreadable.
fn steal_of(tag: &str) -> f64 {
    std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with(tag))?.to_string();
            line.split_whitespace().nth(8)?.parse::<f64>().ok()
        })
        .map_or(0.0, |t| t / 100.0)
}

fn report(what: &str, o: &Outcome, load: &str, attempts: u32, large_gap: Duration) -> String {
    format!(
        "{what}: {}\n(measured {attempts} time(s); the reads that should be simultaneous were up to \
         {:?} apart{}; {:.3} s stolen by the hypervisor meanwhile; load average {load}. On a \
         loaded machine a large gap, steal or load means a clock was read late or counted \
         stolen time, not necessarily that a count is wrong)",
        o.failures.join("\n  "),
        o.gap,
        if o.gap > large_gap {
            format!(", more than the {large_gap:?} this comparison allows for")
        } else {
            String::new()
        },
        o.steal
    )
}
