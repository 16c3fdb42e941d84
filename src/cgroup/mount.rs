//! Where the cgroup hierarchy perf can count on is mounted, from
//! `/proc/self/mountinfo` (proc(5)):
//!
//! ```text
//! 41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
//! ```
//!
//! Field 5 is the mount point (octal escapes `\040` for a space, `\011`,
//! `\012`, `\134`), then optional fields up to `-`, then the filesystem
//! type and the super options: a v1 hierarchy names its controllers there
//! (`rw,perf_event`).
//!
//! `perf_event_open(PERF_FLAG_PID_CGROUP)` takes a directory of the
//! unified hierarchy (cgroup2) or of the v1 hierarchy that has the
//! `perf_event` controller; no other v1 hierarchy will do.

use super::{CgroupError, Hierarchy, Root};
use std::io::Read;
use std::path::{Path, PathBuf};

/// mountinfo is read up to this many bytes (a node with thousands of
/// container mounts stays well below it).
pub const MOUNTINFO_CAP: u64 = 8 << 20;

/// One mount of a cgroup filesystem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupMount {
    /// The mount point, unescaped.
    pub mount_point: PathBuf,
    /// cgroup2, or a v1 hierarchy.
    pub v2: bool,
    /// The v1 controllers (super options without `rw`/`ro`, ...).
    pub controllers: Vec<String>,
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
            let mount_point = left.split(' ').nth(4)?;
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
            })
        })
        .collect()
}

/// Picks the root among the cgroup mounts: cgroup2 at `/sys/fs/cgroup`,
/// then at `/sys/fs/cgroup/unified` (hybrid hosts), then any cgroup2
/// mount, then the v1 `perf_event` hierarchy.
pub fn pick(mounts: &[CgroupMount]) -> Option<Root> {
    let v2 = |p: &str| {
        mounts
            .iter()
            .find(|m| m.v2 && m.mount_point == Path::new(p))
    };
    let found = v2("/sys/fs/cgroup")
        .or_else(|| v2("/sys/fs/cgroup/unified"))
        .or_else(|| mounts.iter().find(|m| m.v2));
    if let Some(m) = found {
        return Some(Root {
            path: m.mount_point.clone(),
            hierarchy: Hierarchy::V2,
        });
    }
    mounts
        .iter()
        .find(|m| !m.v2 && m.controllers.iter().any(|c| c == "perf_event"))
        .map(|m| Root {
            path: m.mount_point.clone(),
            hierarchy: Hierarchy::V1PerfEvent,
        })
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
        "{found}; mount cgroup2 (`mount -t cgroup2 none /sys/fs/cgroup`) or the v1 perf_event controller (`mount -t cgroup -o perf_event none /sys/fs/cgroup/perf_event`), or give --path.cgroupfs"
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

/// See [`super::find_root`].
pub(super) fn find_root(procfs: &Path, given: Option<&Path>) -> Result<Root, CgroupError> {
    if let Some(p) = given {
        let meta = std::fs::metadata(p).map_err(|source| CgroupError::Io {
            path: p.to_path_buf(),
            source,
        })?;
        if !meta.is_dir() {
            return Err(CgroupError::NotADirectory {
                path: p.to_path_buf(),
            });
        }
        // cgroup2 has `cgroup.controllers` in every directory; a v1
        // hierarchy does not.
        let hierarchy = if p.join("cgroup.controllers").exists() {
            Hierarchy::V2
        } else {
            Hierarchy::V1PerfEvent
        };
        return Ok(Root {
            path: p.to_path_buf(),
            hierarchy,
        });
    }
    let mountinfo = procfs.join("self/mountinfo");
    let text = read_capped(&mountinfo, MOUNTINFO_CAP)?;
    let mounts = cgroup_mounts(&text);
    pick(&mounts).ok_or_else(|| CgroupError::NoHierarchy {
        why: why_none(&mounts),
        mountinfo,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn hybrid_host_picks_unified() {
        let r = pick(&cgroup_mounts(HYBRID)).unwrap();
        assert_eq!(r.path, PathBuf::from("/sys/fs/cgroup/unified"));
        assert_eq!(r.hierarchy, Hierarchy::V2);
    }

    #[test]
    fn pure_v2_wins_over_other_cgroup2_mounts() {
        let t = "50 1 0:40 / /host\\040cg rw shared:9 - cgroup2 cgroup2 rw,nsdelegate\n\
                 51 1 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw\n";
        let m = cgroup_mounts(t);
        assert_eq!(m[0].mount_point, PathBuf::from("/host cg"));
        assert_eq!(pick(&m).unwrap().path, PathBuf::from("/sys/fs/cgroup"));
        assert_eq!(pick(&m[..1]).unwrap().path, PathBuf::from("/host cg"));
    }

    #[test]
    fn v1_perf_event_hierarchy() {
        let t = "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n\
                 33 31 0:30 / /sys/fs/cgroup/perf_event rw - cgroup cgroup rw,perf_event\n";
        let r = pick(&cgroup_mounts(t)).unwrap();
        assert_eq!(r.path, PathBuf::from("/sys/fs/cgroup/perf_event"));
        assert_eq!(r.hierarchy, Hierarchy::V1PerfEvent);
    }

    #[test]
    fn nothing_usable_says_what_was_found_and_what_to_do() {
        let m = cgroup_mounts("32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n");
        assert_eq!(pick(&m), None);
        let w = why_none(&m);
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
    }
}
