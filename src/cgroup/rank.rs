//! The bound on counted cgroups: beyond `max_cgroups`, the busiest win,
//! ranked by `cpu.stat` `usage_usec` (CPU time in microseconds, in every
//! cgroup2 directory whether or not the `cpu` controller is enabled)
//! since the previous ranking; a cgroup not seen then ranks by its total.
//! Ties go to the smaller path, so the choice is stable.
//!
//! Ranking reads every matched cgroup's `cpu.stat`, so it runs every
//! `cgroups.rank_interval` (30 s by default), not at every scrape; and
//! with hysteresis: a counted cgroup is displaced only by a left-out one
//! busier by a margin ([`displaces`]), so near-equal cgroups do not trade
//! places (and open and close their counters) at every ranking.

use super::read_capped_opt;
use std::collections::HashMap;
use std::path::Path;

/// `cpu.stat` is a few lines; read at most this much.
const CPU_STAT_CAP: u64 = 4096;

/// `usage_usec` of a `cpu.stat` text.
pub fn usage_usec(cpu_stat: &str) -> Option<u64> {
    cpu_stat
        .lines()
        .find_map(|l| l.strip_prefix("usage_usec "))
        .and_then(|v| v.trim().parse().ok())
}

/// `usage_usec` of the cgroup directory `dir`; `None` when it has no
/// readable `cpu.stat` (a v1 `perf_event` hierarchy, or gone).
pub fn read_usage(dir: &Path) -> Option<u64> {
    read_capped_opt(&dir.join("cpu.stat"), CPU_STAT_CAP).and_then(|t| usage_usec(&t))
}

/// The CPU time of the counted cgroups at the latest read of their
/// `cpu.stat` (`perf_cgroup_cpu_usage_seconds_total`): read every
/// `rank_interval` (with the ranking's reads over the bound, else on their
/// own, only the counted cgroups), never at a scrape. So the value is at
/// most `rank_interval` (plus one collection) old.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Usage {
    /// (path relative to the root, `usage_usec`) of the counted cgroups
    /// with a readable `cpu.stat`, in the selection's order.
    pub usec: Vec<(String, u64)>,
}

/// When the counted cgroups' `cpu.stat` is next read, and the reading not
/// yet taken.
#[derive(Debug, Default)]
pub(crate) struct UsageReads {
    next: Option<std::time::Instant>,
    fresh: Option<Usage>,
}

impl UsageReads {
    /// Whether a read is due at `now`.
    pub(crate) fn due(&self, now: std::time::Instant) -> bool {
        self.next.is_none_or(|t| now >= t)
    }

    /// Keeps a reading; the next is due at `next`.
    pub(crate) fn record(&mut self, usage: Usage, next: std::time::Instant) {
        self.fresh = Some(usage);
        self.next = Some(next);
    }

    /// The reading made since the last call, if any.
    pub(crate) fn take(&mut self) -> Option<Usage> {
        self.fresh.take()
    }
}

/// A counted cgroup keeps its place against a left-out one unless that
/// one used more than this fraction (1/4) more CPU since the previous
/// ranking ...
pub const MARGIN_DIVISOR: u64 = 4;

/// ... and at least this much more (µs): near-idle cgroups do not trade
/// places over a few microseconds.
pub const MARGIN_MIN_USEC: u64 = 10_000;

/// One matched cgroup at a ranking.
#[derive(Debug, Clone, Copy)]
pub struct Entry<'a> {
    /// The path relative to the root (ties go to the smaller).
    pub rel: &'a str,
    /// The cgroup id.
    pub id: u64,
    /// `usage_usec` now (`None`: unreadable, ranks as 0).
    pub usage: Option<u64>,
    /// Counted since the previous ranking.
    pub counted: bool,
}

/// Whether `challenger` (usage since the previous ranking) displaces a
/// counted cgroup that used `incumbent`: busier by the margin.
pub fn displaces(challenger: u64, incumbent: u64) -> bool {
    let margin = (incumbent / MARGIN_DIVISOR).max(MARGIN_MIN_USEC);
    challenger > incumbent.saturating_add(margin)
}

/// Ranks the entries: returns the indices of the `max` winners, in the
/// entries' order. Usage is counted since `prev` (the previous usage by
/// id; a cgroup not seen then ranks by its total). Counted cgroups keep
/// their places (the busiest first when there are more than `max`), free
/// places go to the busiest left-out ones, then a left-out cgroup
/// displaces the least busy counted one only when it [`displaces`] it, so
/// near-equal usage never flaps.
pub fn winners(entries: &[Entry<'_>], prev: &HashMap<u64, u64>, max: usize) -> Vec<usize> {
    let since = |e: &Entry<'_>| {
        let now = e.usage.unwrap_or(0);
        prev.get(&e.id).map_or(now, |p| now.saturating_sub(*p))
    };
    // Busiest first, ties by path.
    let mut order: Vec<(u64, &str, usize, bool)> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| (since(e), e.rel, i, e.counted))
        .collect();
    order.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    let (mut held, mut rest): (Vec<_>, Vec<_>) = order.into_iter().partition(|x| x.3);
    held.truncate(max);
    let free = max - held.len();
    let mut won: Vec<(u64, usize)> = held.iter().map(|x| (x.0, x.2)).collect();
    won.extend(rest.drain(..free.min(rest.len())).map(|x| (x.0, x.2)));
    // The least busy counted ones against the busiest left out.
    let mut weakest: Vec<usize> = (0..won.len()).collect();
    weakest.sort_by(|&a, &b| won[a].0.cmp(&won[b].0).then(b.cmp(&a)));
    for (slot, c) in weakest.into_iter().zip(rest) {
        if !displaces(c.0, won[slot].0) {
            break;
        }
        won[slot] = (c.0, c.2);
    }
    let mut won: Vec<usize> = won.into_iter().map(|x| x.1).collect();
    won.sort_unstable();
    won
}

/// Between rankings (no `cpu.stat` read): the counted cgroups still
/// matched keep their places, free places go to the others in path order
/// (they are ranked at the next ranking). Returns indices, in order.
pub fn hold(entries: &[Entry<'_>], max: usize) -> Vec<usize> {
    let mut won: Vec<usize> = (0..entries.len())
        .filter(|&i| entries[i].counted)
        .take(max)
        .collect();
    let mut rest = (0..entries.len()).filter(|&i| !entries[i].counted);
    while won.len() < max {
        match rest.next() {
            Some(i) => won.push(i),
            None => break,
        }
    }
    won.sort_unstable();
    won
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_is_read_from_cpu_stat() {
        let t = "usage_usec 1234\nuser_usec 1000\nsystem_usec 234\n";
        assert_eq!(usage_usec(t), Some(1234));
        assert_eq!(usage_usec("user_usec 5\n"), None);
        assert_eq!(usage_usec("usage_usec x\n"), None);
    }

    fn e(rel: &str, id: u64, usage: Option<u64>, counted: bool) -> Entry<'_> {
        Entry {
            rel,
            id,
            usage,
            counted,
        }
    }

    #[test]
    fn busiest_since_the_last_ranking_win_ties_by_path() {
        // b used most in total but little since; c is new.
        let x = [
            e("a", 1, Some(500_000), false),
            e("b", 2, Some(9_000_000), false),
            e("c", 3, Some(300_000), false),
            e("d", 4, None, false),
        ];
        let prev = HashMap::from([(1, 100_000), (2, 8_900_000)]);
        assert_eq!(winners(&x, &prev, 2), vec![0, 2]);
        // First ranking: totals.
        assert_eq!(winners(&x, &HashMap::new(), 2), vec![0, 1]);
        // Ties by path.
        let t = [
            e("z", 1, Some(5), false),
            e("y", 2, Some(5), false),
            e("x", 3, Some(5), false),
        ];
        assert_eq!(winners(&t, &HashMap::new(), 2), vec![1, 2]);
    }

    /// Near-equal usage never trades places: re-ranking the same cgroups
    /// again and again keeps the counted ones, whichever is a little
    /// busier each time.
    #[test]
    fn near_equal_usage_does_not_flap() {
        let prev = HashMap::from([(1, 0), (2, 0), (3, 0)]);
        // a counted; b, c left out and up to 20% busier.
        for (b, c) in [
            (1_100_000, 1_000_000),
            (1_200_000, 1_150_000),
            (1_000_001, 1_199_999),
        ] {
            let x = [
                e("a", 1, Some(1_000_000), true),
                e("b", 2, Some(b), false),
                e("c", 3, Some(c), false),
            ];
            assert_eq!(winners(&x, &prev, 1), vec![0], "{b} {c}");
        }
        // Near idle: a few microseconds never displace.
        let x = [e("a", 1, Some(0), true), e("b", 2, Some(9_000), false)];
        assert_eq!(winners(&x, &prev, 1), vec![0]);
    }

    /// A clearly busier left-out cgroup wins at the next ranking, in place
    /// of the least busy counted one.
    #[test]
    fn a_clearly_busier_newcomer_wins() {
        let prev = HashMap::from([(1, 0), (2, 0)]);
        let x = [
            e("a", 1, Some(1_000_000), true),
            e("b", 2, Some(5_000_000), true),
            e("c", 3, Some(1_300_000), false),
            e("d", 4, Some(100), false),
        ];
        assert_eq!(winners(&x, &prev, 2), vec![1, 2]);
        // Two places free up: the two busiest left out take them.
        let y = [x[0], x[2], x[3]];
        assert_eq!(winners(&y, &prev, 3), vec![0, 1, 2]);
        assert!(displaces(1_250_001, 1_000_000));
        assert!(!displaces(1_250_000, 1_000_000));
    }

    /// Between rankings the counted keep their places and free places go
    /// by path.
    #[test]
    fn hold_keeps_the_counted_and_fills_by_path() {
        let x = [
            e("a", 1, None, false),
            e("b", 2, None, true),
            e("c", 3, None, false),
            e("d", 4, None, true),
        ];
        assert_eq!(hold(&x, 2), vec![1, 3]);
        assert_eq!(hold(&x, 3), vec![0, 1, 3]);
    }
}
