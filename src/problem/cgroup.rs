//! Why something is not counted per cgroup: [`CgroupIssue`], part of the
//! one vocabulary of reasons ([`super::Reason`]), rendered by it for the
//! log, `check`, the landing page and the reference.

use super::{Class, Problem, Reason};
use std::fmt;

/// Why something is not counted per cgroup.
#[derive(Debug, Clone, PartialEq)]
pub enum CgroupIssue {
    /// A set of `cgroups.sets` has uncore events, which no cgroup owns.
    Uncore {
        /// The set.
        set: String,
        /// The metric.
        metric: String,
        /// The uncore PMU.
        pmu: String,
    },
    /// The cgroup vanished between discovery and opening its counters.
    Gone {
        /// Its path relative to the root.
        cgroup: String,
        /// The errno.
        errno: i32,
    },
    /// Not counted by the `perf` backend: the kernel has no `perf_event`
    /// state in it (ENOENT opening `event` there, which opens system-wide
    /// on `cpu`); see [`crate::perf::cgroup`]'s notes.
    NoPerfEventState {
        /// Its path relative to the root.
        cgroup: String,
        /// The event that was refused.
        event: String,
        /// The CPU.
        cpu: u32,
    },
    /// Left out: the file descriptor budget ran out before it.
    FdBudget {
        /// Its path relative to the root.
        cgroup: String,
        /// Descriptors one cgroup needs.
        per_cgroup: usize,
        /// Descriptors left for cgroups.
        budget: usize,
    },
    /// Left out: every slot of the BPF program's maps is taken.
    SlotsFull {
        /// Its path relative to the root.
        cgroup: String,
        /// The slots.
        slots: usize,
    },
    /// A counter of a cgroup failed to open.
    Open {
        /// The metric.
        metric: String,
        /// Why.
        problem: Problem,
    },
    /// A per-cgroup group needs more counters of a PMU than it has free
    /// ([`Problem::GroupTooLarge`]): it is opened as groups that fit
    /// (which multiplex), not as one that would never run.
    Split(Problem),
    /// Discovery failed (the previous selection keeps counting).
    Discovery(String),
    /// A set of `cgroups.sets` has no group open in any counted cgroup:
    /// it has no per-cgroup series, not even group times.
    SetUnavailable {
        /// The set.
        set: String,
        /// Why.
        why: SetGap,
    },
}

/// Why a set of `cgroups.sets` is not counted per cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetGap {
    /// Every event of the set is on an uncore PMU.
    Uncore,
    /// No counter of the set is available on this host (see the
    /// node-level resolution for each metric's reason).
    Unavailable,
    /// Its groups failed to open in every counted cgroup (see the
    /// [`CgroupIssue::Open`] issues).
    OpenFailed,
}

impl fmt::Display for CgroupIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CgroupIssue::Uncore { set, metric, pmu } => write!(f, "set `{set}` of `cgroups.sets`: {metric} counts on the uncore PMU {pmu}, which cannot count per cgroup"),
            CgroupIssue::Gone { cgroup, errno } => write!(f, "cgroup {cgroup:?} vanished before its counters opened (errno {errno})"),
            CgroupIssue::NoPerfEventState { cgroup, event, cpu } => write!(f, "cgroup {cgroup:?} not counted: the kernel has no perf_event controller state in it (opening {event} there on CPU {cpu} fails with ENOENT, system-wide it opens)"),
            CgroupIssue::FdBudget { cgroup, per_cgroup, budget } => write!(f, "cgroup {cgroup:?} not counted: it needs {per_cgroup} file descriptors and {budget} were left for cgroups"),
            CgroupIssue::SlotsFull { cgroup, slots } => write!(f, "cgroup {cgroup:?} not counted: the {slots} slots of the BPF maps are taken"),
            CgroupIssue::Open { metric, problem } => write!(f, "{metric} per cgroup: {problem}"),
            CgroupIssue::Split(problem) => write!(f, "per cgroup: {problem}"),
            CgroupIssue::Discovery(e) => write!(f, "cgroup discovery: {e}"),
            CgroupIssue::SetUnavailable { set, why } => {
                let why = match why {
                    SetGap::Uncore => "every event of it is on an uncore PMU",
                    SetGap::Unavailable => "none of its counters is available on this host",
                    SetGap::OpenFailed => "its groups failed to open in every counted cgroup",
                };
                write!(f, "set `{set}` of `cgroups.sets` is unavailable per cgroup: {why}")
            }
        }
    }
}

impl CgroupIssue {
    /// A short fixed code ([`Problem::code`] where there is a problem):
    /// [`Reason::code`].
    pub fn code(&self) -> &'static str {
        Reason::code(self)
    }

    /// What to do about it: [`Reason::what_to_do`].
    pub fn what_to_do(&self) -> String {
        Reason::what_to_do(self)
    }

    /// One issue of each kind (with placeholders), for the reference;
    /// [`Open`](CgroupIssue::Open) carries a [`Problem`]'s code and is
    /// listed under [`Problem::catalogue`].
    pub fn examples() -> Vec<CgroupIssue> {
        let cgroup = || "<cgroup>".to_string();
        let set = || "<set>".to_string();
        vec![
            CgroupIssue::Uncore {
                set: set(),
                metric: "<metric>".into(),
                pmu: "<pmu>".into(),
            },
            CgroupIssue::Gone {
                cgroup: cgroup(),
                errno: 2,
            },
            CgroupIssue::NoPerfEventState {
                cgroup: cgroup(),
                event: "<event>".into(),
                cpu: 0,
            },
            CgroupIssue::FdBudget {
                cgroup: cgroup(),
                per_cgroup: 0,
                budget: 0,
            },
            CgroupIssue::SlotsFull {
                cgroup: cgroup(),
                slots: 0,
            },
            CgroupIssue::Discovery("<error>".into()),
            CgroupIssue::SetUnavailable {
                set: set(),
                why: SetGap::Uncore,
            },
            CgroupIssue::SetUnavailable {
                set: set(),
                why: SetGap::Unavailable,
            },
            CgroupIssue::SetUnavailable {
                set: set(),
                why: SetGap::OpenFailed,
            },
        ]
    }
}

impl Reason for CgroupIssue {
    /// A short fixed code ([`Problem::code`] where there is a problem).
    fn code(&self) -> &'static str {
        match self {
            CgroupIssue::Uncore { .. } => "uncore_per_cgroup",
            CgroupIssue::Gone { .. } => "cgroup_gone",
            CgroupIssue::FdBudget { .. } => "fd_limit",
            CgroupIssue::NoPerfEventState { .. } => "cgroup_no_perf_event",
            CgroupIssue::SlotsFull { .. } => "bpf_slots_full",
            CgroupIssue::Open { problem, .. } | CgroupIssue::Split(problem) => problem.code(),
            CgroupIssue::Discovery(_) => "discovery",
            CgroupIssue::SetUnavailable { .. } => "cgroup_set_unavailable",
        }
    }

    /// What to do about it.
    fn what_to_do(&self) -> String {
        match self {
            CgroupIssue::Uncore { set, .. } => format!("remove `{set}` from `cgroups.sets`: uncore counters (memory controllers, caches shared by every core, energy) count for the whole socket and cannot be attributed to a cgroup; the node-level series keep them"),
            CgroupIssue::Gone { .. } => "nothing: the cgroup was removed while it was being opened".into(),
            CgroupIssue::NoPerfEventState { .. } => "enable any controller in the cgroup v2 root's `cgroup.subtree_control` (e.g. `echo +pids > /sys/fs/cgroup/cgroup.subtree_control`; systemd does it at boot): until some controller is applied the kernel creates no state of the implicit perf_event controller in child cgroups; or count with `cgroups.backend: bpf`".into(),
            CgroupIssue::FdBudget { .. } => "raise RLIMIT_NOFILE (`ulimit -n`, systemd `LimitNOFILE=`, container `--ulimit nofile=`), lower `cgroups.max_cgroups`, or name fewer `cgroups.sets`".into(),
            CgroupIssue::SlotsFull { .. } => "raise `cgroups.max_cgroups` (the BPF maps are sized for twice it) and reload".into(),
            CgroupIssue::Open { problem, .. } | CgroupIssue::Split(problem) => {
                problem.what_to_do()
            }
            CgroupIssue::Discovery(_) => "check `--path.cgroupfs` and that the cgroup tree is readable".into(),
            CgroupIssue::SetUnavailable { set, why: SetGap::Uncore } => format!("remove `{set}` from `cgroups.sets`: uncore counters cannot be attributed to a cgroup"),
            CgroupIssue::SetUnavailable { set, why: SetGap::Unavailable } => format!("remove `{set}` from `cgroups.sets`, or see `check` for why its metrics are unavailable on this host (most need a hardware PMU)"),
            CgroupIssue::SetUnavailable { set, why: SetGap::OpenFailed } => format!("see the per-cgroup open failures of `{set}` for the reason; the node-level series of the set are unaffected"),
        }
    }

    fn class(&self) -> Class {
        match self {
            CgroupIssue::Gone { .. } => Class::NotOnPlatform,
            CgroupIssue::Open { problem, .. } | CgroupIssue::Split(problem) => problem.class(),
            _ => Class::Failed,
        }
    }

    fn summary(&self) -> &'static str {
        match self {
            CgroupIssue::Uncore { .. } => {
                "a set of `cgroups.sets` has uncore events, which no cgroup owns"
            }
            CgroupIssue::Gone { .. } => {
                "the cgroup vanished between discovery and opening its counters"
            }
            CgroupIssue::NoPerfEventState { .. } => {
                "the kernel has no perf_event controller state in the cgroup"
            }
            CgroupIssue::FdBudget { .. } => "the file descriptor budget ran out before the cgroup",
            CgroupIssue::SlotsFull { .. } => "every slot of the BPF program's maps is taken",
            CgroupIssue::Open { problem, .. } | CgroupIssue::Split(problem) => problem.summary(),
            CgroupIssue::Discovery(_) => {
                "cgroup discovery failed; the previous selection keeps counting"
            }
            CgroupIssue::SetUnavailable { .. } => {
                "a set of `cgroups.sets` has no group open in any counted cgroup"
            }
        }
    }
}
