//! Where the cgroup hierarchy perf can count on is mounted, from
//! `/proc/self/mountinfo` (proc(5)) and `/proc/cgroups`:
//!
//! ```text
//! 41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
//! 42 31 0:39 / /sys/fs/cgroup/perf_event rw,relatime - cgroup cgroup rw,perf_event
//! ```
//!
//! Field 3 is the device (`major:minor`, what `stat(2)` says of every
//! directory of that mount), field 5 the mount point (octal escapes `\040`
//! for a space, `\011`, `\012`, `\134`), then optional fields up to `-`,
//! then the filesystem type and the super options: a v1 hierarchy names
//! its controllers there (`rw,perf_event`).
//!
//! Which hierarchy is right depends on who reads the cgroups:
//!
//! * `perf_event_open(PERF_FLAG_PID_CGROUP)` (the `perf` backend) and
//!   `PERF_SAMPLE_CGROUP` (sampling) take the cgroups of the hierarchy the
//!   `perf_event` controller is bound to ([`Purpose::PerfEvent`]). On
//!   cgroup2 it is an implicit controller, present in every cgroup; bound
//!   to a v1 hierarchy (`/proc/cgroups`' hierarchy column is not 0), it is
//!   gone from cgroup2, and a cgroup2 directory fails with ENOENT. perf
//!   itself prefers the v1 `perf_event` mount for this reason
//!   (`cgroupfs_find_mountpoint()` in `tools/perf/util/cgroup.c`).
//! * `bpf_get_current_cgroup_id()` and `bpf_get_current_ancestor_cgroup_id()`
//!   (the `bpf` backend) return ids of the unified hierarchy (the kernel's
//!   `task_dfl_cgroup()`), whatever `perf_event` is bound to
//!   ([`Purpose::CgroupId`]).
//!
//! A `--path.cgroupfs` is checked with `statfs(2)`: a cgroup2 directory, a
//! directory of the v1 hierarchy with `perf_event` (the mount of its
//! device names the controllers), or the directory the host mounts its
//! hierarchies under (the tmpfs `/sys/fs/cgroup` of a v1 or hybrid host,
//! which a DaemonSet mounts whole), in which the right hierarchy is taken.
//! Anything else is refused, saying what it is and what to give instead.

use super::{CgroupError, Hierarchy, Root};
use crate::sys::fs::{fs_kind, FsKind};
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// mountinfo is read up to this many bytes (a node with thousands of
/// container mounts stays well below it).
pub const MOUNTINFO_CAP: u64 = 8 << 20;

/// `/proc/cgroups` is read up to this many bytes (a line per controller).
const PROC_CGROUPS_CAP: u64 = 64 << 10;

/// Who reads the cgroups of the root, so which hierarchy it must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// `perf_event_open(PERF_FLAG_PID_CGROUP)` and `PERF_SAMPLE_CGROUP`:
    /// the hierarchy the `perf_event` controller is bound to.
    PerfEvent,
    /// The cgroup ids a BPF program reads: the unified hierarchy.
    CgroupId,
}

/// One mount of a cgroup filesystem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupMount {
    /// The mount point, unescaped.
    pub mount_point: PathBuf,
    /// cgroup2, or a v1 hierarchy.
    pub v2: bool,
    /// The v1 controllers (super options without `rw`/`ro`, ...).
    pub controllers: Vec<String>,
    /// The device (`major`, `minor`): every directory of the mount has it.
    pub dev: (u32, u32),
}

impl CgroupMount {
    /// A v1 hierarchy with the `perf_event` controller.
    pub fn perf_event(&self) -> bool {
        !self.v2 && self.controllers.iter().any(|c| c == "perf_event")
    }
}

/// Undoes mountinfo's octal escapes (`\040` → space).
pub fn unescape(field: &str) -> String {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() {
            let oct = &b[i + 1..i + 4];
            if oct.iter().all(|c| (b'0'..=b'7').contains(c)) {
                let v = oct
                    .iter()
                    .fold(0u32, |acc, c| acc * 8 + u32::from(c - b'0'));
                if let Ok(byte) = u8::try_from(v) {
                    out.push(byte);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The cgroup mounts of a mountinfo text; lines that are not cgroup
/// mounts, or malformed, are skipped.
pub fn cgroup_mounts(mountinfo: &str) -> Vec<CgroupMount> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let mut l = left.split(' ');
            let (major, minor) = l.nth(2)?.split_once(':')?;
            let dev = (major.parse().ok()?, minor.parse().ok()?);
            let mount_point = l.nth(1)?;
            let mut r = right.split(' ');
            let fstype = r.next()?;
            let _source = r.next();
            let opts = r.next().unwrap_or("");
            let v2 = match fstype {
                "cgroup2" => true,
                "cgroup" => false,
                _ => return None,
            };
            let controllers = if v2 {
                Vec::new()
            } else {
                opts.split(',')
                    .filter(|o| !matches!(*o, "rw" | "ro") && !o.contains('='))
                    .map(str::to_string)
                    .collect()
            };
            Some(CgroupMount {
                mount_point: PathBuf::from(unescape(mount_point)),
                v2,
                controllers,
                dev,
            })
        })
        .collect()
}

/// The hierarchy id of the `perf_event` controller in a `/proc/cgroups`
/// text (`#subsys_name hierarchy num_cgroups enabled`): 0 when it is on
/// the unified hierarchy (or bound nowhere), else the v1 hierarchy's id;
/// `None` when the text has no `perf_event` line.
pub fn perf_event_hierarchy(proc_cgroups: &str) -> Option<u32> {
    proc_cgroups.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        if f.next()? != "perf_event" {
            return None;
        }
        f.next()?.parse().ok()
    })
}

/// The cgroup2 mount: at `/sys/fs/cgroup`, then at `/sys/fs/cgroup/unified`
/// (hybrid hosts), then any.
fn unified(mounts: &[CgroupMount]) -> Option<&CgroupMount> {
    let at = |p: &str| {
        mounts
            .iter()
            .find(|m| m.v2 && m.mount_point == Path::new(p))
    };
    at("/sys/fs/cgroup")
        .or_else(|| at("/sys/fs/cgroup/unified"))
        .or_else(|| mounts.iter().find(|m| m.v2))
}

/// How to mount a v1 `perf_event` hierarchy.
const MOUNT_V1: &str = "`mount -t cgroup -o perf_event none /sys/fs/cgroup/perf_event`";

/// Why the unified hierarchy is needed for the bpf backend.
const BPF_NEEDS_V2: &str =
    "the bpf backend charges the cgroup ids of the unified hierarchy (bpf_get_current_cgroup_id())";

/// Picks the root among the cgroup mounts for `purpose`. `perf_event_v1`
/// is the `perf_event` controller's hierarchy id (`/proc/cgroups`; 0: the
/// unified hierarchy, or unknown).
///
/// For [`Purpose::PerfEvent`]: the v1 hierarchy with the `perf_event`
/// controller when one is mounted (as perf does), else, unless
/// `perf_event` is bound to a v1 hierarchy mounted elsewhere, the cgroup2
/// mount. For [`Purpose::CgroupId`]: the cgroup2 mount. `Err` says what was
/// found and what to do.
pub fn pick(mounts: &[CgroupMount], purpose: Purpose, perf_event_v1: u32) -> Result<Root, String> {
    let v2 = |m: &CgroupMount| Root {
        path: m.mount_point.clone(),
        hierarchy: Hierarchy::V2,
    };
    match purpose {
        Purpose::PerfEvent => {
            if let Some(m) = mounts.iter().find(|m| m.perf_event()) {
                return Ok(Root {
                    path: m.mount_point.clone(),
                    hierarchy: Hierarchy::V1PerfEvent,
                });
            }
            if perf_event_v1 != 0 {
                return Err(format!(
                    "the perf_event controller is bound to cgroup v1 hierarchy {perf_event_v1} (/proc/cgroups), which is not mounted here, so cgroup2 cgroups have no perf_event state (perf_event_open fails with ENOENT): mount it ({MOUNT_V1}), or give its mount point with --path.cgroupfs"
                ));
            }
            unified(mounts).map(v2).ok_or_else(|| why_none(mounts))
        }
        Purpose::CgroupId => unified(mounts).map(v2).ok_or_else(|| {
            format!(
                "no cgroup2 mount, and {BPF_NEEDS_V2}: mount cgroup2 (`mount -t cgroup2 none /sys/fs/cgroup/unified`), or count with `cgroups.backend: perf`"
            )
        }),
    }
}

/// Why no root was picked, and what to do.
fn why_none(mounts: &[CgroupMount]) -> String {
    let v1: Vec<&str> = mounts
        .iter()
        .flat_map(|m| m.controllers.iter().map(String::as_str))
        .collect();
    let found = if v1.is_empty() {
        "no cgroup filesystem is mounted".to_string()
    } else {
        format!(
            "only cgroup v1 hierarchies without perf_event are mounted (controllers {})",
            v1.join(", ")
        )
    };
    format!(
        "{found}; mount cgroup2 (`mount -t cgroup2 none /sys/fs/cgroup`) or the v1 perf_event controller ({MOUNT_V1}), or give --path.cgroupfs"
    )
}

/// Reads a file up to `cap` bytes (procfs files report size 0, so the
/// length is not known before reading).
pub(super) fn read_capped(path: &Path, cap: u64) -> Result<String, CgroupError> {
    let io = |source| CgroupError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut buf = Vec::new();
    std::fs::File::open(path)
        .map_err(io)?
        .take(cap)
        .read_to_end(&mut buf)
        .map_err(io)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// Where and for what a cgroup root is looked for.
#[derive(Debug, Clone, Copy)]
pub struct Lookup<'a> {
    /// The procfs root (`self/mountinfo`, `cgroups`).
    pub procfs: &'a Path,
    /// `--path.cgroupfs`, if given.
    pub given: Option<&'a Path>,
    /// Who reads the cgroups.
    pub purpose: Purpose,
    /// The simulated PMU counts a fixture tree: a given directory is then
    /// taken as it is (cgroup2 when it has `cgroup.controllers`), not
    /// checked to be a cgroup filesystem.
    pub simulated: bool,
}

impl<'a> Lookup<'a> {
    /// A lookup of the `perf_event` hierarchy on a live host.
    pub fn new(procfs: &'a Path, given: Option<&'a Path>) -> Self {
        Lookup {
            procfs,
            given,
            purpose: Purpose::PerfEvent,
            simulated: false,
        }
    }

    /// The same lookup for `purpose`.
    pub fn purpose(self, purpose: Purpose) -> Self {
        Lookup { purpose, ..self }
    }

    /// The same lookup, on the simulated PMU or not.
    pub fn simulated(self, simulated: bool) -> Self {
        Lookup { simulated, ..self }
    }

    /// Finds the root: `given` checked (or taken as it is when
    /// simulated), else from mountinfo and `/proc/cgroups`.
    pub fn find(&self) -> Result<Root, CgroupError> {
        match self.given {
            Some(p) if self.simulated => given_as_is(p),
            Some(p) => self.check_given(p),
            None => {
                let mountinfo = self.procfs.join("self/mountinfo");
                let mounts = cgroup_mounts(&read_capped(&mountinfo, MOUNTINFO_CAP)?);
                pick(&mounts, self.purpose, self.perf_event_v1())
                    .map_err(|why| CgroupError::NoHierarchy { why, mountinfo })
            }
        }
    }

    /// `perf_event`'s hierarchy id from `<procfs>/cgroups` (0 when
    /// unreadable: the kernel has it on cgroup2 unless bound to v1).
    fn perf_event_v1(&self) -> u32 {
        read_capped(&self.procfs.join("cgroups"), PROC_CGROUPS_CAP)
            .ok()
            .and_then(|t| perf_event_hierarchy(&t))
            .unwrap_or(0)
    }

    /// The cgroup mounts of this process (none when mountinfo cannot be
    /// read: a v1 hierarchy is then not recognised).
    fn mounts(&self) -> Vec<CgroupMount> {
        read_capped(&self.procfs.join("self/mountinfo"), MOUNTINFO_CAP)
            .map(|t| cgroup_mounts(&t))
            .unwrap_or_default()
    }

    /// Checks `--path.cgroupfs` with statfs (and, for a v1 hierarchy, the
    /// controllers of the mount with its device).
    fn check_given(&self, p: &Path) -> Result<Root, CgroupError> {
        is_dir(p)?;
        let io = |source| CgroupError::Io {
            path: p.to_path_buf(),
            source,
        };
        let mounts = self.mounts();
        let bound = self.perf_event_v1();
        let refuse = |detail: String| CgroupError::NotAHierarchy {
            path: p.to_path_buf(),
            detail,
        };
        match fs_kind(p).map_err(io)? {
            FsKind::Cgroup2 if self.purpose == Purpose::PerfEvent && bound != 0 => {
                Err(refuse(format!(
                    "it is a cgroup2 directory, but the perf_event controller is bound to cgroup v1 hierarchy {bound} (/proc/cgroups), so its cgroups have no perf_event state (perf_event_open fails with ENOENT); {}",
                    self.instead(p, &mounts, bound)
                )))
            }
            FsKind::Cgroup2 => Ok(Root {
                path: p.to_path_buf(),
                hierarchy: Hierarchy::V2,
            }),
            FsKind::CgroupV1 => {
                let dev = dev_of(p).map_err(io)?;
                let controllers = mounts
                    .iter()
                    .find(|m| !m.v2 && m.dev == dev)
                    .map(|m| m.controllers.clone());
                match controllers {
                    Some(c) if c.iter().any(|c| c == "perf_event") => match self.purpose {
                        Purpose::PerfEvent => Ok(Root {
                            path: p.to_path_buf(),
                            hierarchy: Hierarchy::V1PerfEvent,
                        }),
                        Purpose::CgroupId => Err(refuse(format!(
                            "it is the cgroup v1 perf_event hierarchy, and {BPF_NEEDS_V2}; {}",
                            self.instead(p, &mounts, bound)
                        ))),
                    },
                    Some(c) => Err(refuse(format!(
                        "it is a cgroup v1 hierarchy without perf_event (controllers {}); {}",
                        c.join(","),
                        self.instead(p, &mounts, bound)
                    ))),
                    None => Err(refuse(format!(
                        "it is a cgroup v1 hierarchy, and {} names no cgroup mount of its device {}:{}, so whether it has perf_event is not known; {}",
                        self.procfs.join("self/mountinfo").display(),
                        dev.0,
                        dev.1,
                        self.instead(p, &mounts, bound)
                    ))),
                }
            }
            kind => match self.inside(p, &mounts, bound) {
                Some(root) => Ok(root),
                None => Err(refuse(format!(
                    "it is not a cgroup filesystem ({}) and no {} is mounted in it; {}",
                    kind_name(kind),
                    self.wanted(bound),
                    self.instead(p, &mounts, bound)
                ))),
            },
        }
    }

    /// What the lookup wants, in words.
    fn wanted(&self, bound: u32) -> &'static str {
        match (self.purpose, bound) {
            (Purpose::CgroupId, _) => "cgroup2 hierarchy",
            (Purpose::PerfEvent, 0) => "cgroup2 or v1 perf_event hierarchy",
            (Purpose::PerfEvent, _) => "v1 perf_event hierarchy",
        }
    }

    /// The hierarchy the lookup wants among the directories of `dir` (the
    /// host's cgroup mount point holding its hierarchies).
    fn inside(&self, dir: &Path, mounts: &[CgroupMount], bound: u32) -> Option<Root> {
        let mut subdirs: Vec<PathBuf> = std::fs::read_dir(dir)
            .ok()?
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .collect();
        // `unified` first among the cgroup2 candidates; else by name.
        subdirs.sort_by_key(|d| (d.file_name() != Some("unified".as_ref()), d.clone()));
        let mut v2 = None;
        for d in subdirs {
            match fs_kind(&d) {
                Ok(FsKind::Cgroup2) if v2.is_none() => v2 = Some(d),
                Ok(FsKind::CgroupV1) if self.purpose == Purpose::PerfEvent => {
                    let dev = dev_of(&d).ok()?;
                    if mounts.iter().any(|m| m.dev == dev && m.perf_event()) {
                        return Some(Root {
                            path: d,
                            hierarchy: Hierarchy::V1PerfEvent,
                        });
                    }
                }
                _ => {}
            }
        }
        if self.purpose == Purpose::PerfEvent && bound != 0 {
            return None;
        }
        v2.map(|path| Root {
            path,
            hierarchy: Hierarchy::V2,
        })
    }

    /// What to give instead of `p`: the right hierarchy in it, next to it
    /// or among this process's mounts, or how to mount one.
    fn instead(&self, p: &Path, mounts: &[CgroupMount], bound: u32) -> String {
        let near = self
            .inside(p, mounts, bound)
            .or_else(|| p.parent().and_then(|up| self.inside(up, mounts, bound)))
            .map(|r| r.path)
            .or_else(|| {
                pick(mounts, self.purpose, bound)
                    .ok()
                    .map(|r| r.path)
                    .filter(|r| r != p)
            });
        match near {
            Some(r) => format!("give --path.cgroupfs {:?}", r.display().to_string()),
            None => format!(
                "give the {} with --path.cgroupfs (mount one first: cgroup2 with `mount -t cgroup2 none /sys/fs/cgroup`, v1 perf_event with {MOUNT_V1})",
                self.wanted(bound)
            ),
        }
    }
}

/// A fixture tree, taken as it is: cgroup2 when it has `cgroup.controllers`
/// (every cgroup2 directory does), else the v1 `perf_event` hierarchy.
fn given_as_is(p: &Path) -> Result<Root, CgroupError> {
    is_dir(p)?;
    let hierarchy = if p.join("cgroup.controllers").exists() {
        Hierarchy::V2
    } else {
        Hierarchy::V1PerfEvent
    };
    Ok(Root {
        path: p.to_path_buf(),
        hierarchy,
    })
}

/// `p` is a directory, or why not.
fn is_dir(p: &Path) -> Result<(), CgroupError> {
    let meta = std::fs::metadata(p).map_err(|source| CgroupError::Io {
        path: p.to_path_buf(),
        source,
    })?;
    if meta.is_dir() {
        Ok(())
    } else {
        Err(CgroupError::NotADirectory {
            path: p.to_path_buf(),
        })
    }
}

/// The device of `p` as mountinfo writes it (`major:minor`).
fn dev_of(p: &Path) -> std::io::Result<(u32, u32)> {
    let d = std::fs::metadata(p)?.dev();
    Ok((libc::major(d), libc::minor(d)))
}

/// A filesystem kind in words.
fn kind_name(k: FsKind) -> String {
    match k {
        FsKind::Cgroup2 => "cgroup2".into(),
        FsKind::CgroupV1 => "cgroup v1".into(),
        FsKind::Tmpfs => "tmpfs".into(),
        FsKind::Other(m) => format!("filesystem magic {m:#x}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    /// The usual systemd hybrid layout with perf_event bound to v1.
    const HYBRID_V1_PERF: &str = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
42 31 0:39 / /sys/fs/cgroup/perf_event rw,relatime - cgroup cgroup rw,perf_event
43 31 0:40 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
";

    const PROC_CGROUPS_V1_PERF: &str = "#subsys_name\thierarchy\tnum_cgroups\tenabled
cpuset\t3\t1\t1
cpu\t1\t1\t1
perf_event\t9\t1\t1
";

    #[test]
    fn hybrid_host_picks_unified() {
        let r = pick(&cgroup_mounts(HYBRID), Purpose::PerfEvent, 0).unwrap();
        assert_eq!(r.path, PathBuf::from("/sys/fs/cgroup/unified"));
        assert_eq!(r.hierarchy, Hierarchy::V2);
        assert_eq!(cgroup_mounts(HYBRID)[2].dev, (0, 38));
    }

    #[test]
    fn hybrid_host_with_v1_perf_event_picks_it_for_perf_and_unified_for_bpf() {
        let m = cgroup_mounts(HYBRID_V1_PERF);
        let bound = perf_event_hierarchy(PROC_CGROUPS_V1_PERF).unwrap();
        assert_eq!(bound, 9);
        assert_eq!(
            pick(&m, Purpose::PerfEvent, bound).unwrap(),
            Root {
                path: "/sys/fs/cgroup/perf_event".into(),
                hierarchy: Hierarchy::V1PerfEvent
            }
        );
        // Also when /proc/cgroups cannot be read: the mount says it.
        assert_eq!(
            pick(&m, Purpose::PerfEvent, 0).unwrap().path,
            PathBuf::from("/sys/fs/cgroup/perf_event")
        );
        assert_eq!(
            pick(&m, Purpose::CgroupId, bound).unwrap(),
            Root {
                path: "/sys/fs/cgroup/unified".into(),
                hierarchy: Hierarchy::V2
            }
        );
    }

    #[test]
    fn perf_event_bound_to_an_unmounted_v1_hierarchy_refuses_cgroup2_for_perf() {
        let m = cgroup_mounts(HYBRID);
        let why = pick(&m, Purpose::PerfEvent, 9).unwrap_err();
        assert!(
            why.contains("hierarchy 9") && why.contains("ENOENT") && why.contains("-o perf_event"),
            "{why}"
        );
        // The bpf backend's ids are cgroup2's all the same.
        assert_eq!(
            pick(&m, Purpose::CgroupId, 9).unwrap().path,
            PathBuf::from("/sys/fs/cgroup/unified")
        );
    }

    #[test]
    fn proc_cgroups_lines() {
        assert_eq!(perf_event_hierarchy("perf_event 0 1 1\n"), Some(0));
        assert_eq!(perf_event_hierarchy(PROC_CGROUPS_V1_PERF), Some(9));
        assert_eq!(perf_event_hierarchy("cpu 1 1 1\nperf_event x 1 1\n"), None);
        assert_eq!(perf_event_hierarchy(""), None);
    }

    #[test]
    fn pure_v2_wins_over_other_cgroup2_mounts() {
        let t = "50 1 0:40 / /host\\040cg rw shared:9 - cgroup2 cgroup2 rw,nsdelegate\n\
                 51 1 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw\n";
        let m = cgroup_mounts(t);
        assert_eq!(m[0].mount_point, PathBuf::from("/host cg"));
        let p = |m: &[CgroupMount]| pick(m, Purpose::PerfEvent, 0).unwrap().path;
        assert_eq!(p(&m), PathBuf::from("/sys/fs/cgroup"));
        assert_eq!(p(&m[..1]), PathBuf::from("/host cg"));
    }

    #[test]
    fn v1_perf_event_hierarchy() {
        let t = "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n\
                 33 31 0:30 / /sys/fs/cgroup/perf_event rw - cgroup cgroup rw,perf_event\n";
        let m = cgroup_mounts(t);
        let r = pick(&m, Purpose::PerfEvent, 4).unwrap();
        assert_eq!(r.path, PathBuf::from("/sys/fs/cgroup/perf_event"));
        assert_eq!(r.hierarchy, Hierarchy::V1PerfEvent);
        let why = pick(&m, Purpose::CgroupId, 4).unwrap_err();
        assert!(why.contains("cgroups.backend: perf"), "{why}");
    }

    #[test]
    fn nothing_usable_says_what_was_found_and_what_to_do() {
        let m = cgroup_mounts("32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n");
        let w = pick(&m, Purpose::PerfEvent, 0).unwrap_err();
        assert!(
            w.contains("controllers cpu") && w.contains("--path.cgroupfs"),
            "{w}"
        );
        assert!(why_none(&[]).starts_with("no cgroup filesystem"));
    }

    #[test]
    fn escapes_and_garbage() {
        assert_eq!(unescape("a\\040b\\011c\\134d\\012"), "a b\tc\\d\n");
        assert_eq!(unescape("trail\\04"), "trail\\04");
        assert_eq!(unescape("\\999"), "\\999");
        assert!(cgroup_mounts("garbage\n - \n1 2 3\n\u{0} - cgroup2").is_empty());
        assert!(cgroup_mounts("1 2 x:y / /a rw - cgroup2 cgroup2 rw\n").is_empty());
    }

    /// A live lookup of this machine's tree: `--path.cgroupfs` given as a
    /// tmpfs holding the hierarchies, as a v1 hierarchy without
    /// perf_event, as a plain directory, and as a cgroup2 directory.
    #[test]
    fn given_directories_are_checked_with_statfs() {
        let procfs = Path::new("/proc");
        let mounts = cgroup_mounts(&std::fs::read_to_string("/proc/self/mountinfo").unwrap());
        let Some(v2) = unified(&mounts).map(|m| m.mount_point.clone()) else {
            panic!("this test needs a cgroup2 mount on the test machine (/proc/self/mountinfo has none)");
        };
        let find = |p: &Path| Lookup::new(procfs, Some(p)).find();
        assert_eq!(find(&v2).unwrap().hierarchy, Hierarchy::V2);
        // A plain directory (a fixture tree) is refused live, taken when simulated.
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("cgroup.controllers"), "").unwrap();
        let e = find(t.path()).unwrap_err();
        assert_eq!(e.problem().code(), "no_cgroup_hierarchy");
        assert!(e.to_string().contains("not a cgroup filesystem"), "{e}");
        let sim = Lookup::new(procfs, Some(t.path())).simulated(true);
        assert_eq!(sim.find().unwrap().hierarchy, Hierarchy::V2);
        // A v1 hierarchy without perf_event, if this host has one.
        if let Some(m) = mounts.iter().find(|m| !m.v2 && !m.perf_event()) {
            let e = find(&m.mount_point).unwrap_err().to_string();
            assert!(e.contains("without perf_event"), "{e}");
        }
        // The directory the hierarchies are mounted in (hybrid hosts).
        if let Some(up) = v2.parent().filter(|_| v2.ends_with("unified")) {
            let r = find(up).unwrap();
            assert_eq!(
                r,
                pick(&mounts, Purpose::PerfEvent, 0).unwrap(),
                "{}",
                up.display()
            );
        }
    }
}
