//! Sets of `cgroups.sets` that have no per-cgroup group: reported as
//! [`CgroupIssue::SetUnavailable`], never exported as zero group times
//! (the sets planned but opened nowhere: `PerfBackend::unopened`).

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
