//! The file descriptor budget. Every counter is an fd, and so is every
//! connection the server accepts. The soft `RLIMIT_NOFILE` is raised
//! toward the hard limit when the plan needs more; what is free then is
//! shared: a reserve for connections (at most `reserve`, at most a quarter
//! of what is free, at least [`MIN_RESERVE`]) and the rest for counters,
//! opened in plan order (the first sets first). Counters beyond the budget
//! are reported as lacking file descriptors, with the limit to raise, and
//! what fits is served.

use crate::perf::Kernel;
use crate::problem::Problem;
use crate::resolve::chain::Resolution;
use std::collections::BTreeSet;

/// Descriptors asked for beyond the plan (sockets, files, the runtime).
const HEADROOM: u64 = 128;
/// Descriptors always kept for connections when any are free.
const MIN_RESERVE: usize = 2;

/// Where the fd budget stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FdBudget {
    /// fds the plan needs.
    needed: u64,
    /// The soft limit after raising it.
    soft: u64,
    /// The hard limit.
    hard: u64,
    /// fds free before the counters were opened.
    free: u64,
    /// fds the counters may use (the rest of `free` is kept for
    /// connections).
    counters: u64,
}

/// How many of the `free` descriptors counters may use, keeping a share
/// for connections: `min(reserve, max(free / 4, MIN_RESERVE))`.
fn counter_share(free: usize, reserve: usize) -> usize {
    let keep = reserve.min((free / 4).max(MIN_RESERVE)).min(free);
    free - keep
}

/// How many more files this process may open, counted up to `max` by
/// opening `/dev/null` until the limit refuses (and closing them again).
/// `None` when that cannot be told (`/dev/null` fails otherwise).
fn free_fds(max: usize) -> Option<usize> {
    let mut held = Vec::new();
    while held.len() < max {
        match std::fs::File::open("/dev/null") {
            Ok(f) => held.push(f),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => break,
            Err(_) => return None,
        }
    }
    Some(held.len())
}

/// How many file descriptors an engine may open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fds {
    /// Every counter of the plan, `RLIMIT_NOFILE` left as it is (the
    /// simulation, tests and benchmarks).
    #[default]
    Unbounded,
    /// Within the fd budget: `RLIMIT_NOFILE` is raised toward what the
    /// plan needs (through the [`Kernel`]), up to `reserve` descriptors
    /// are kept free for connections and what fits is opened. `extra`
    /// descriptors are asked for beyond the node-level plan (the
    /// per-cgroup counters, opened after the node-level ones within what
    /// is left: [`Engine::cgroup_fd_room`](super::Engine::cgroup_fd_room)).
    /// A kernel without such a limit (the simulation) opens everything.
    Budget {
        /// Descriptors kept for connections.
        reserve: usize,
        /// Descriptors wanted beyond the node-level plan.
        extra: usize,
    },
}

/// The counters' share of the descriptors under `fds` (`None`: no cap)
/// and, when not one is free for them, the problem to name before any
/// other ([`Problem::FdExhausted`]).
pub(super) fn counter_cap(
    kernel: &dyn Kernel,
    res: &Resolution,
    fds: Fds,
) -> (Option<usize>, Option<Problem>) {
    let Fds::Budget { reserve, extra } = fds else {
        return (None, None);
    };
    let planned: usize = extra
        + res
            .metrics
            .iter()
            .flat_map(|m| &m.instances)
            .map(|i| i.inst.cpus.len())
            .sum::<usize>();
    // The hotplug watcher's descriptors are not the counters'.
    let _ = kernel.hotplug_generation();
    let Some((soft, hard)) = kernel.raise_nofile(planned as u64 + HEADROOM) else {
        return (None, None);
    };
    let Some(free) = free_fds(planned + reserve) else {
        return (None, None);
    };
    let b = FdBudget {
        needed: planned as u64,
        soft,
        hard,
        free: free as u64,
        counters: counter_share(free, reserve) as u64,
    };
    tracing::info!(
        needed = b.needed,
        soft = b.soft,
        hard = b.hard,
        free = b.free,
        counters = b.counters,
        "fd budget (RLIMIT_NOFILE)"
    );
    if b.counters < b.needed {
        tracing::warn!(needed = b.needed, counters = b.counters, soft = b.soft, hard = b.hard,
            "RLIMIT_NOFILE is below what the plan needs; opening what fits (raise the limit: `ulimit -n`, systemd LimitNOFILE=, or the container runtime's nofile limit)");
    }
    // Even the resolver's probes may have failed for want of fds, so the
    // metrics' own reasons can point elsewhere: say it first.
    let exhausted = (b.counters == 0).then(|| Problem::FdExhausted {
        soft: b.soft,
        hard: b.hard,
        used: b.soft.saturating_sub(b.free),
        raise_to: b.soft.saturating_sub(b.free) + b.needed.max(1) + reserve as u64,
    });
    (Some(b.counters as usize), exhausted)
}

/// The engine's descriptor budget while it runs: the cap on counter fds,
/// what a round of opening may still open, the metrics left short, and
/// the problem named first when nothing at all was free.
///
/// Invariants: without a cap the room is unbounded; with one, a round's
/// room starts at the cap less the fds open and only shrinks by opens
/// (and grows back by fds closed again in the round), so the open fds
/// never exceed the cap.
#[derive(Debug, Default)]
pub(super) struct Descriptors {
    /// At most this many fds are opened (`None`: no budget).
    cap: Option<usize>,
    /// Scratch while opening: fds that may still be opened.
    room: usize,
    /// Metrics with counters left unopened for want of file descriptors.
    starved: BTreeSet<usize>,
    /// Set when no descriptor at all was free for counters: the cause of
    /// everything else, named first in
    /// [`Engine::problems`](super::Engine::problems).
    exhausted: Option<Problem>,
}

impl Descriptors {
    /// At most `cap` counter fds (`None`: no budget).
    pub(super) fn new(cap: Option<usize>) -> Descriptors {
        Descriptors {
            cap,
            ..Descriptors::default()
        }
    }

    /// Names the exhausted budget before any other problem.
    pub(super) fn set_exhausted(&mut self, p: Option<Problem>) {
        self.exhausted = p;
    }

    /// Starts a round of opening with `open` fds open.
    pub(super) fn begin(&mut self, open: usize) {
        self.room = self.left(open).unwrap_or(usize::MAX);
    }

    /// Whether one more fd may be opened in this round.
    pub(super) fn has_room(&self) -> bool {
        self.room > 0
    }

    /// One fd was opened.
    pub(super) fn opened(&mut self) {
        self.room = self.room.saturating_sub(1);
    }

    /// `n` fds opened in this round were closed again.
    pub(super) fn closed(&mut self, n: usize) {
        self.room = self.room.saturating_add(n);
    }

    /// What the cap leaves with `open` fds open (`None`: no cap).
    pub(super) fn left(&self, open: usize) -> Option<usize> {
        self.cap.map(|c| c.saturating_sub(open))
    }

    /// A counter of `metric` was left unopened for want of fds.
    pub(super) fn starve(&mut self, metric: usize) {
        self.starved.insert(metric);
    }

    /// The metrics left short, ascending.
    pub(super) fn starved(&self) -> &BTreeSet<usize> {
        &self.starved
    }

    /// The exhausted budget, when not one fd was free for counters.
    pub(super) fn exhausted(&self) -> Option<&Problem> {
        self.exhausted.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_keep_a_share_of_free_descriptors() {
        assert_eq!(counter_share(1000, 16), 984);
        assert_eq!(counter_share(40, 16), 30);
        assert_eq!(counter_share(14, 16), 11);
        assert_eq!(counter_share(3, 16), 1);
        assert_eq!(counter_share(2, 16), 0);
        assert_eq!(counter_share(1, 16), 0);
        assert_eq!(counter_share(0, 16), 0);
        assert_eq!(counter_share(100, 0), 100);
    }

    #[test]
    fn a_round_opens_no_more_than_the_cap_leaves() {
        let mut d = Descriptors::new(Some(5));
        d.begin(3);
        assert!(d.has_room());
        d.opened();
        assert!(d.has_room());
        d.opened();
        assert!(!d.has_room(), "3 open + 2 = the cap");
        d.closed(1);
        assert!(d.has_room());
        assert_eq!(d.left(5), Some(0));
        assert_eq!(d.left(9), Some(0), "never below zero");
        // A new round starts from what is open, not from the last room.
        d.begin(0);
        for _ in 0..5 {
            assert!(d.has_room());
            d.opened();
        }
        assert!(!d.has_room());
    }

    #[test]
    fn without_a_cap_the_room_is_unbounded() {
        let mut d = Descriptors::new(None);
        d.begin(1_000_000);
        d.opened();
        assert!(d.has_room());
        assert_eq!(d.left(7), None);
        d.starve(3);
        d.starve(1);
        d.starve(3);
        assert_eq!(d.starved().iter().copied().collect::<Vec<_>>(), [1, 3]);
        assert!(d.exhausted().is_none());
    }

    #[test]
    fn free_descriptors_are_counted_up_to_the_bound() {
        assert_eq!(free_fds(5), Some(5));
    }
}
