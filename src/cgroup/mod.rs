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
//! (see [`watch`]), a new [`Selection`] when one was.

pub mod kube;
pub mod mount;
pub mod rank;
pub mod walk;
pub mod watch;

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::config::cgroups::CgroupsConfig;
use crate::problem::Problem;

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

/// Finds the cgroup root: `given` (`--path.cgroupfs`) when set, else
/// from `<procfs>/self/mountinfo`: the cgroup2 mount (preferring
/// `/sys/fs/cgroup`, then a hybrid host's `/sys/fs/cgroup/unified`),
/// else the v1 hierarchy with the `perf_event` controller.
pub fn find_root(procfs: &Path, given: Option<&Path>) -> Result<Root, CgroupError> {
    mount::find_root(procfs, given)
}

/// Finds the root and scans it once: what `check` lists.
pub fn discover(
    procfs: &Path,
    given: Option<&Path>,
    config: &CgroupsConfig,
) -> Result<(Root, Selection), CgroupError> {
    let root = find_root(procfs, given)?;
    let sel = Selector::new(root.clone(), config.clone())
        .without_watches()
        .scan()?;
    Ok((root, sel))
}

/// Selects cgroups under a root by a `cgroups:` section, remembering the
/// previous scan's `cpu.stat` usage to rank by usage since then.
#[derive(Debug)]
pub struct Selector {
    root: Root,
    config: CgroupsConfig,
    globs: Vec<walk::PathGlob>,
    /// `usage_usec` by cgroup id at the last ranking.
    usage: HashMap<u64, u64>,
    /// The watches of the last scan (None: inotify unavailable).
    watcher: Option<watch::Watcher>,
    /// Whether a scan ran, and whether it left cgroups out over the
    /// limit (then every check re-ranks).
    scanned: bool,
    over_limit: bool,
    watch: bool,
}

impl Selector {
    /// A selector for `root` by `config` (whose globs the config
    /// validated; one that does not compile selects nothing).
    pub fn new(root: Root, config: CgroupsConfig) -> Self {
        let globs = config
            .paths
            .iter()
            .filter_map(|p| walk::PathGlob::new(p).ok())
            .collect();
        Selector {
            root,
            config,
            globs,
            usage: HashMap::new(),
            watcher: None,
            scanned: false,
            over_limit: false,
            watch: true,
        }
    }

    /// Without inotify: [`changed`](Self::changed) is always true (for
    /// tests and the benchmark of a plain rescan).
    pub fn without_watches(mut self) -> Self {
        self.watch = false;
        self
    }

    /// The root.
    pub fn root(&self) -> &Root {
        &self.root
    }

    /// The section it selects by.
    pub fn config(&self) -> &CgroupsConfig {
        &self.config
    }

    /// How many directories the last scan watches (0 without inotify).
    pub fn watches(&self) -> usize {
        self.watcher.as_ref().map_or(0, watch::Watcher::watches)
    }

    /// Whether the selection may differ from the last scan's: no scan
    /// yet, a cgroup created or removed under a listed directory, cgroups
    /// left out over the limit (the ranking moves with usage), or no
    /// working inotify. Cheap: one non-blocking read.
    pub fn changed(&mut self) -> bool {
        if !self.scanned || self.over_limit {
            return true;
        }
        match self.watcher.as_mut() {
            Some(w) => !w.complete() || w.changed(),
            None => true,
        }
    }

    /// [`scan`](Self::scan) when [`changed`](Self::changed), else `None`
    /// (the last selection stands): what the engine calls at each
    /// collection.
    pub fn scan_if_changed(&mut self) -> Result<Option<Selection>, CgroupError> {
        if self.changed() {
            self.scan().map(Some)
        } else {
            Ok(None)
        }
    }

    /// Walks the tree and selects: presets and globs, labels, then at
    /// most `max_cgroups`, the busiest by `cpu.stat` usage since the
    /// previous scan.
    pub fn scan(&mut self) -> Result<Selection, CgroupError> {
        let root = self.root.path.clone();
        std::fs::read_dir(&root).map_err(|source| CgroupError::Io {
            path: root.clone(),
            source,
        })?;
        // Fresh watches (closing the old descriptor drops the old ones),
        // each added before its directory is listed.
        self.watcher = if self.watch {
            watch::Watcher::new()
        } else {
            None
        };
        let candidates = walk::Visitor {
            root: &root,
            watcher: self.watcher.as_mut(),
        }
        .select(&self.config, &self.globs);
        let mut sel = Selection::default();
        let mut found = Vec::with_capacity(candidates.len());
        for c in candidates {
            match std::fs::metadata(&c.dir) {
                Ok(m) if m.is_dir() => found.push((c, m.ino())),
                _ => sel.left_out.push(LeftOut {
                    rel: c.rel,
                    reason: LeftOutReason::Gone,
                }),
            }
        }
        let max = self.config.max_cgroups;
        self.over_limit = found.len() > max;
        let keep: Vec<bool> = if self.over_limit {
            let entries: Vec<(&str, u64, Option<u64>)> = found
                .iter()
                .map(|(c, id)| (c.rel.as_str(), *id, rank::read_usage(&c.dir)))
                .collect();
            let won = rank::winners(&entries, &self.usage, max);
            self.usage = entries
                .iter()
                .filter_map(|(_, id, u)| u.map(|u| (*id, u)))
                .collect();
            let mut k = vec![false; found.len()];
            for i in won {
                k[i] = true;
            }
            k
        } else {
            self.usage.clear();
            vec![true; found.len()]
        };
        for ((c, id), keep) in found.into_iter().zip(keep) {
            if keep {
                let mut labels = vec![("cgroup", c.rel.clone())];
                labels.extend(c.labels);
                sel.counted.push(Cgroup {
                    rel: c.rel,
                    dir: c.dir,
                    id,
                    kind: c.kind,
                    labels,
                });
            } else {
                sel.left_out.push(LeftOut {
                    rel: c.rel,
                    reason: LeftOutReason::OverLimit { max_cgroups: max },
                });
            }
        }
        sel.left_out.sort_by(|a, b| a.rel.cmp(&b.rel));
        self.scanned = true;
        Ok(sel)
    }
}
