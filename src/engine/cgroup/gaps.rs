//! Sets of `cgroups.sets` that have no per-cgroup group: reported as
//! [`CgroupIssue::SetUnavailable`], never exported as zero group times.

use super::perf::PerfBackend;
use super::{CgroupIssue, SetGap};

/// The sets (by name) for which no group was planned: every event on an
/// uncore PMU (named by an [`CgroupIssue::Uncore`] issue), or no counter
/// available on this host.
pub(super) fn unplanned(
    sets: &[String],
    planned: impl Fn(usize) -> bool,
    issues: &[CgroupIssue],
) -> Vec<CgroupIssue> {
    sets.iter()
        .enumerate()
        .filter(|(i, _)| !planned(*i))
        .map(|(_, set)| {
            let uncore = issues
                .iter()
                .any(|i| matches!(i, CgroupIssue::Uncore { set: s, .. } if s == set));
            CgroupIssue::SetUnavailable {
                set: set.clone(),
                why: if uncore {
                    SetGap::Uncore
                } else {
                    SetGap::Unavailable
                },
            }
        })
        .collect()
}

impl PerfBackend {
    /// Planned sets with no group open in any counted cgroup (while some
    /// cgroup is counted).
    pub(super) fn unopened(&self) -> Vec<CgroupIssue> {
        if self.tracked.is_empty() {
            return Vec::new();
        }
        let mut open = vec![false; self.sets.len()];
        for t in self.tracked.values() {
            for g in &t.groups {
                if let Some(o) = open.get_mut(g.set) {
                    *o = true;
                }
            }
        }
        self.sets
            .iter()
            .enumerate()
            .filter(|(i, _)| !open[*i] && self.planned(*i))
            .map(|(_, set)| CgroupIssue::SetUnavailable {
                set: set.clone(),
                why: SetGap::OpenFailed,
            })
            .collect()
    }
}
