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
        }
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
