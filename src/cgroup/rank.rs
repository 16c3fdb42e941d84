//! The bound on counted cgroups: beyond `max_cgroups`, the busiest win,
//! ranked by `cpu.stat` `usage_usec` (CPU time in microseconds, in every
//! cgroup2 directory whether or not the `cpu` controller is enabled)
//! since the previous ranking; a cgroup not seen then ranks by its total.
//! Ties go to the smaller path, so the choice is stable.

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

/// Ranks `(rel, id, usage)` entries: returns the indices of the `max`
/// winners (by usage since `prev`, the previous usage by id), in the
/// entries' order.
pub fn winners(
    entries: &[(&str, u64, Option<u64>)],
    prev: &HashMap<u64, u64>,
    max: usize,
) -> Vec<usize> {
    let mut order: Vec<(u64, &str, usize)> = entries
        .iter()
        .enumerate()
        .map(|(i, (rel, id, usage))| {
            let now = usage.unwrap_or(0);
            let since = prev.get(id).map_or(now, |p| now.saturating_sub(*p));
            (since, *rel, i)
        })
        .collect();
    order.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    let mut won: Vec<usize> = order.into_iter().take(max).map(|(_, _, i)| i).collect();
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

    #[test]
    fn busiest_since_the_last_ranking_win_ties_by_path() {
        // b used most in total but little since; c is new.
        let e = [
            ("a", 1, Some(500)),
            ("b", 2, Some(9000)),
            ("c", 3, Some(300)),
            ("d", 4, None),
        ];
        let prev = HashMap::from([(1, 100), (2, 8900)]);
        assert_eq!(winners(&e, &prev, 2), vec![0, 2]);
        // First ranking: totals.
        assert_eq!(winners(&e, &HashMap::new(), 2), vec![0, 1]);
        // Ties by path.
        let t = [("z", 1, Some(5)), ("y", 2, Some(5)), ("x", 3, Some(5))];
        assert_eq!(winners(&t, &HashMap::new(), 2), vec![1, 2]);
    }
}
