//! Per-workload discovery (stage 2, beside [`crate::pmu`]): where the
//! cgroup hierarchy is mounted, which cgroups the `cgroups:` section
//! selects, their labels, and which are left out and why.
//!
//! Nothing here opens a counter: the engine's per-cgroup backends take a
//! [`Selection`] and count it (`PERF_FLAG_PID_CGROUP` groups, or a BPF
//! program charging per-CPU counters at cgroup switch).
//!
//! The roots (procfs for mountinfo, the cgroup root itself) are
//! parameters, so every test can run against a fixture tree.
//!
//! At each collection the engine calls [`Selector::scan_if_changed`]:
//! one non-blocking `read(2)` of an inotify descriptor when no cgroup
//! was created or removed under the directories the last scan listed
//! (see [`watch`]), a new [`Selection`] when one was, made from the
//! listed tree as the events left it ([`tree`]), without walking the
//! whole tree again.

pub mod kube;
pub mod mount;
pub mod name;
pub mod rank;
mod select;
pub mod tree;
pub mod walk;
pub mod watch;

use std::path::{Path, PathBuf};

use crate::config::cgroups::CgroupsConfig;
use crate::problem::Problem;

pub use mount::{Lookup, Purpose};
pub use select::Selector;

/// A discovery error, naming the path and the OS error.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// No cgroup v2 hierarchy and no v1 `perf_event` hierarchy is mounted.
    #[error("no cgroup hierarchy that perf can count found in {mountinfo}: {why}")]
    NoHierarchy {
        /// The mountinfo file read.
        mountinfo: PathBuf,
        /// What was found instead, and what to do.
        why: String,
    },
    /// A file or directory could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// `--path.cgroupfs` is not a hierarchy the counting can use (statfs
    /// and the mount's controllers say what it is).
    #[error("--path.cgroupfs {path} is not a cgroup hierarchy perf can count on: {detail}")]
    NotAHierarchy {
        /// The path given.
        path: PathBuf,
        /// What it is, and what to give instead.
        detail: String,
    },
    /// `--path.cgroupfs` is not a directory.
    #[error(
        "--path.cgroupfs {path} is not a directory: give the cgroup root (e.g. /sys/fs/cgroup)"
    )]
    NotADirectory {
        /// The path given.
        path: PathBuf,
    },
}

impl CgroupError {
    /// The typed problem ([`Problem::NoCgroupHierarchy`]) for `check`,
    /// the landing page and the log.
    pub fn problem(&self) -> Problem {
        match self {
            CgroupError::NoHierarchy { mountinfo, why } => Problem::NoCgroupHierarchy {
                mountinfo: mountinfo.clone(),
                detail: why.clone(),
            },
            CgroupError::Io { path, source } => Problem::NoCgroupHierarchy {
                mountinfo: path.clone(),
                detail: format!("cannot read it: {source}"),
            },
            CgroupError::NotAHierarchy { path, detail } => Problem::NoCgroupHierarchy {
                mountinfo: path.clone(),
                detail: detail.clone(),
            },
            CgroupError::NotADirectory { path } => Problem::NoCgroupHierarchy {
                mountinfo: path.clone(),
                detail: "not a directory".into(),
            },
        }
    }
}

/// Reads a small file up to `cap` bytes, `None` when it cannot be read.
fn read_capped_opt(path: &Path, cap: u64) -> Option<String> {
    mount::read_capped(path, cap).ok()
}

/// Which kind of hierarchy the root is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hierarchy {
    /// The unified hierarchy (cgroup2), on a pure v2 host or a hybrid
    /// host's `unified` mount.
    V2,
    /// The v1 `perf_event` controller's hierarchy.
    V1PerfEvent,
}

impl Hierarchy {
    /// `cgroup2` or `cgroup v1 perf_event`.
    pub fn as_str(self) -> &'static str {
        match self {
            Hierarchy::V2 => "cgroup2",
            Hierarchy::V1PerfEvent => "cgroup v1 perf_event",
        }
    }
}

/// The root the cgroup paths are relative to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    /// The directory (e.g. `/sys/fs/cgroup`, `/sys/fs/cgroup/unified`,
    /// `/sys/fs/cgroup/perf_event`, or `--path.cgroupfs`).
    pub path: PathBuf,
    /// Its kind.
    pub hierarchy: Hierarchy,
}

/// What a selected cgroup is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A Kubernetes pod.
    Pod,
    /// A Kubernetes container (preset `kubernetes` with `containers: true`).
    Container,
    /// A systemd service.
    Service,
    /// Matched by a `paths:` glob.
    Path,
}

/// One cgroup to count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cgroup {
    /// The path relative to the root, `/`-separated, no leading slash:
    /// the `cgroup` label.
    pub rel: String,
    /// The directory (the root joined with `rel`): what the perf backend
    /// opens for `PERF_FLAG_PID_CGROUP`.
    pub dir: PathBuf,
    /// The cgroup id (the directory's inode number on cgroup v2): what a
    /// BPF program sees as `bpf_get_current_cgroup_id()`.
    pub id: u64,
    /// What it is.
    pub kind: Kind,
    /// Its labels in export order: `cgroup` first, then for Kubernetes
    /// `pod_uid`, `qos_class` and (containers) `container_id`.
    pub labels: Vec<(&'static str, String)>,
}

/// Why a matched cgroup is not counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeftOutReason {
    /// More cgroups matched than `max_cgroups`; busier ones won.
    OverLimit {
        /// The bound in force.
        max_cgroups: usize,
    },
    /// It vanished between discovery and use, or could not be read.
    Gone,
    /// A `**` glob stops at this directory ([`walk::MAX_DEPTH`] levels
    /// below the root): the cgroups below it are not matched. (It is not
    /// a matched cgroup itself, but where the walk stopped.)
    TooDeep {
        /// The bound.
        max_depth: usize,
    },
    /// Beyond what the counting backend can reach: at `level` (components
    /// below the root) `max_level` or deeper, or below `max_above`
    /// selected ancestors (see [`Selection::limit_nesting`]).
    BeyondReach {
        /// Its level below the root.
        level: usize,
        /// Its selected (and counted) ancestors.
        above: usize,
        /// The first level the backend cannot reach.
        max_level: usize,
        /// How many selected cgroups one task can be charged to.
        max_above: usize,
    },
}

/// A matched cgroup that is not counted, with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftOut {
    /// The path relative to the root.
    pub rel: String,
    /// Why.
    pub reason: LeftOutReason,
}

impl Kind {
    /// `pod`, `container`, `service` or `path`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Pod => "pod",
            Kind::Container => "container",
            Kind::Service => "service",
            Kind::Path => "path",
        }
    }
}

impl LeftOut {
    /// The typed problem: [`Problem::CgroupOverLimit`] or
    /// [`Problem::CgroupGone`].
    pub fn problem(&self) -> Problem {
        match self.reason {
            LeftOutReason::OverLimit { max_cgroups } => Problem::CgroupOverLimit {
                cgroup: self.rel.clone(),
                max_cgroups,
            },
            LeftOutReason::Gone => Problem::CgroupGone {
                cgroup: self.rel.clone(),
            },
            LeftOutReason::TooDeep { max_depth } => Problem::CgroupWalkTooDeep {
                cgroup: self.rel.clone(),
                max_depth,
            },
            LeftOutReason::BeyondReach {
                level,
                above,
                max_level,
                max_above,
            } => Problem::CgroupBeyondReach {
                cgroup: self.rel.clone(),
                level,
                above,
                max_level,
                max_above,
            },
        }
    }
}

impl Selection {
    /// Leaves out the counted cgroups a backend cannot reach: at level
    /// `max_level` or deeper (`a/b` is at level 2), or with `max_above`
    /// counted ancestors or more (a task is charged to its cgroup and at
    /// most `max_above` selected cgroups above it, the shallowest first).
    /// Ancestors left out do not count against a descendant. Returns the
    /// cgroups left out now.
    pub fn limit_nesting(&mut self, max_level: usize, max_above: usize) -> Vec<String> {
        let mut counted = std::mem::take(&mut self.counted);
        // Ancestors before descendants ("a" < "a/b"; '/' sorts before
        // every other byte of a name but a few controls and punctuation:
        // by level first to be sure).
        counted.sort_by_key(|c| (c.rel.split('/').count(), c.rel.clone()));
        let mut kept: Vec<Cgroup> = Vec::with_capacity(counted.len());
        let mut out = Vec::new();
        for c in counted {
            let level = c.rel.split('/').count();
            let above = kept
                .iter()
                .filter(|k| {
                    c.rel
                        .strip_prefix(k.rel.as_str())
                        .is_some_and(|r| r.starts_with('/'))
                })
                .count();
            if level >= max_level || above >= max_above {
                out.push(c.rel.clone());
                self.left_out.push(LeftOut {
                    rel: c.rel,
                    reason: LeftOutReason::BeyondReach {
                        level,
                        above,
                        max_level,
                        max_above,
                    },
                });
            } else {
                kept.push(c);
            }
        }
        kept.sort_by(|a, b| a.rel.cmp(&b.rel));
        self.counted = kept;
        self.left_out.sort_by(|a, b| a.rel.cmp(&b.rel));
        out
    }
}

/// The result of one scan: what is counted and what is left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// Counted, in a stable order (by `rel`).
    pub counted: Vec<Cgroup>,
    /// Matched but not counted.
    pub left_out: Vec<LeftOut>,
}

/// Finds the root of the `perf_event` hierarchy on a live host:
/// `given` (`--path.cgroupfs`) when set, checked with statfs, else from
/// `<procfs>/self/mountinfo` and `<procfs>/cgroups`: the v1 hierarchy with
/// the `perf_event` controller when it is mounted, else the cgroup2 mount
/// (preferring `/sys/fs/cgroup`, then a hybrid host's
/// `/sys/fs/cgroup/unified`). See [`Lookup`] for the bpf backend's root and
/// fixture trees.
pub fn find_root(procfs: &Path, given: Option<&Path>) -> Result<Root, CgroupError> {
    Lookup::new(procfs, given).find()
}

/// Finds the root and scans it once: what `check` lists.
pub fn discover(
    lookup: &Lookup<'_>,
    config: &CgroupsConfig,
) -> Result<(Root, Selection), CgroupError> {
    let root = lookup.find()?;
    let sel = Selector::new(root.clone(), config.clone())
        .without_watches()
        .scan()?;
    Ok((root, sel))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cg(rel: &str) -> Cgroup {
        Cgroup {
            rel: rel.into(),
            dir: PathBuf::from("/x").join(rel),
            id: 1,
            kind: Kind::Path,
            labels: vec![("cgroup", rel.into())],
        }
    }

    fn reason(sel: &Selection, rel: &str) -> Option<LeftOutReason> {
        sel.left_out
            .iter()
            .find(|l| l.rel == rel)
            .map(|l| l.reason.clone())
    }

    /// Too deep, or below too many counted ancestors: left out with the
    /// typed reason; an ancestor left out does not count against its
    /// descendants.
    #[test]
    fn nesting_beyond_a_backends_reach_is_left_out_with_the_reason() {
        let deep: Vec<String> = (1..=5).map(|l| format!("l{l}")).collect();
        let chain: Vec<String> = (1..=5).map(|n| deep[..n].join("/")).collect();
        let mut sel = Selection {
            counted: chain.iter().map(|r| cg(r)).chain([cg("x")]).collect(),
            left_out: Vec::new(),
        };
        // Reach: levels below 4, at most 2 counted ancestors.
        let out = sel.limit_nesting(4, 2);
        let counted: Vec<&str> = sel.counted.iter().map(|c| c.rel.as_str()).collect();
        assert_eq!(counted, ["l1", "l1/l2", "x"]);
        assert_eq!(out, ["l1/l2/l3", "l1/l2/l3/l4", "l1/l2/l3/l4/l5"]);
        assert_eq!(
            reason(&sel, "l1/l2/l3"),
            Some(LeftOutReason::BeyondReach {
                level: 3,
                above: 2,
                max_level: 4,
                max_above: 2
            })
        );
        let p = sel.left_out[0].problem();
        assert_eq!(p.code(), "cgroup_beyond_reach");
        assert_eq!(p.to_string(), "cgroup \"l1/l2/l3\" is not counted: the bpf backend's program charges a task to at most 2 selected cgroups, the shallowest first, and it has 2 selected ancestors");
        let p = LeftOut {
            rel: "a".into(),
            reason: LeftOutReason::BeyondReach {
                level: 20,
                above: 0,
                max_level: 16,
                max_above: 8,
            },
        }
        .problem();
        assert_eq!(p.to_string(), "cgroup \"a\" is not counted: the bpf backend's program reaches cgroups down to level 15 below the cgroup2 root and it is at level 20");
        // The deepest alone, its ancestors not selected: only the level.
        let mut sel = Selection {
            counted: vec![cg("l1/l2/l3"), cg("l1/l2/l3/l4")],
            left_out: Vec::new(),
        };
        assert_eq!(sel.limit_nesting(4, 2), ["l1/l2/l3/l4"]);
        assert_eq!(sel.counted.len(), 1);
        // Within reach: nothing moves.
        let mut sel = Selection {
            counted: vec![cg("a"), cg("a/b")],
            left_out: Vec::new(),
        };
        let before = sel.clone();
        assert!(sel.limit_nesting(16, 8).is_empty());
        assert_eq!(sel, before);
    }
}
