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

use std::path::{Path, PathBuf};

use crate::config::cgroups::CgroupsConfig;

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

/// The result of one scan: what is counted and what is left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// Counted, in a stable order (by `rel`).
    pub counted: Vec<Cgroup>,
    /// Matched but not counted.
    pub left_out: Vec<LeftOut>,
}

/// Finds the cgroup root: `given` (`--path.cgroupfs`) when set, else
/// from `<procfs>/self/mountinfo`: the cgroup2 mount (preferring
/// `/sys/fs/cgroup`, then a hybrid host's `/sys/fs/cgroup/unified`),
/// else the v1 hierarchy with the `perf_event` controller.
pub fn find_root(procfs: &Path, given: Option<&Path>) -> Result<Root, CgroupError> {
    // Skeleton: to be written (issue 13).
    let _ = (procfs, given);
    Err(CgroupError::NoHierarchy {
        mountinfo: procfs.join("self/mountinfo"),
        why: "cgroup discovery is not implemented yet".into(),
    })
}

/// Selects cgroups under a root by a `cgroups:` section, remembering the
/// previous scan's `cpu.stat` usage to rank by usage since then.
#[derive(Debug)]
pub struct Selector {
    root: Root,
    config: CgroupsConfig,
}

impl Selector {
    /// A selector for `root` by `config`.
    pub fn new(root: Root, config: CgroupsConfig) -> Self {
        Selector { root, config }
    }

    /// The root.
    pub fn root(&self) -> &Root {
        &self.root
    }

    /// The section it selects by.
    pub fn config(&self) -> &CgroupsConfig {
        &self.config
    }

    /// Walks the tree and selects: presets and globs, labels, then at
    /// most `max_cgroups`, the busiest by `cpu.stat` usage since the
    /// previous scan.
    pub fn scan(&mut self) -> Result<Selection, CgroupError> {
        // Skeleton: to be written (issue 13).
        Ok(Selection::default())
    }
}
