//! Host discovery besides the PMU table: where the kernel's other
//! filesystems are mounted (tracefs today; cgroupfs belongs here too).
//!
//! Every root is a parameter: the sysfs root (`--path.sysfs`) and the
//! procfs root (`--path.procfs`), whose `self/mountinfo` lists the mounts
//! of this process's mount namespace.
//!
//! tracefs is usually at `<sysfs>/kernel/tracing` (or, on old kernels,
//! `<sysfs>/kernel/debug/tracing` through debugfs), but nothing forces
//! it there: a container may mount it anywhere, and some hosts mount it
//! only at `/tracing`. So when neither usual place has it, the mounts of
//! type `tracefs` (and `debugfs`, with its `tracing` directory) in
//! mountinfo are tried before tracepoints are declared unavailable.

use crate::bounded::{read_attribute, read_string, MOUNTINFO_BYTES};
use crate::spec::{quote_list, suggest};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where tracefs was found, or why not, and the tracepoints it lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tracefs {
    /// The tracefs directory (with `events/<subsys>/<name>/id`), if any.
    pub path: Option<PathBuf>,
    /// A tracefs this process may not read (root-only, mode 0700, as
    /// usual for a non-root user), when no readable one was found.
    pub denied: Option<PathBuf>,
    /// The tracepoints under `path`, with their ids.
    pub tracepoints: Tracepoints,
    /// A `--path.tracefs` that is not a tracefs (no `events/` in it).
    pub given: Option<PathBuf>,
}

impl Tracefs {
    /// The tracefs at `path` (`--path.tracefs`), with its tracepoints.
    /// A directory without `events/` is not a tracefs: tracepoints are
    /// then `tracefs_missing` (naming it), not absent from the platform;
    /// one this process may not read is `denied`.
    pub fn at(path: &Path) -> Tracefs {
        if path.join("events").is_dir() {
            return Tracefs {
                path: Some(path.to_path_buf()),
                denied: None,
                tracepoints: Tracepoints::discover(path),
                given: None,
            };
        }
        let denied = matches!(
            std::fs::read_dir(path),
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied
        );
        Tracefs {
            path: None,
            denied: denied.then(|| path.to_path_buf()),
            tracepoints: Tracepoints::default(),
            given: (!denied).then(|| path.to_path_buf()),
        }
    }
}

/// Finds tracefs: the usual places under `sysfs`, then the mounts listed
/// in `<procfs>/self/mountinfo`; and reads its tracepoints.
pub fn find_tracefs(sysfs: &Path, procfs: &Path) -> Tracefs {
    let mut candidates: Vec<PathBuf> = ["kernel/tracing", "kernel/debug/tracing"]
        .iter()
        .map(|p| sysfs.join(p))
        .collect();
    if let Ok(mi) = read_string(&procfs.join("self/mountinfo"), MOUNTINFO_BYTES) {
        candidates.extend(tracefs_mounts(&mi));
    }
    let path = candidates
        .iter()
        .find(|p| p.join("events").is_dir())
        .cloned();
    let denied = match path {
        Some(_) => None,
        None => candidates.into_iter().find(|p| {
            p.is_dir()
                && matches!(
                    std::fs::read_dir(p),
                    Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied
                )
        }),
    };
    let tracepoints = path
        .as_deref()
        .map(Tracepoints::discover)
        .unwrap_or_default();
    Tracefs {
        path,
        denied,
        tracepoints,
        given: None,
    }
}

/// The tracepoints of a tracefs, by subsystem and name: the id the kernel
/// gives each (`events/<subsys>/<name>/id`, the `config` of a
/// `PERF_TYPE_TRACEPOINT` event), or why it could not be read. Read once
/// per discovery (start-up and each reload; about 2,300 small files on a
/// 6.x kernel), so resolving a tracepoint does no I/O.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tracepoints {
    /// `events/` of the tracefs they were read from.
    events: PathBuf,
    by_subsys: BTreeMap<String, BTreeMap<String, Result<u64, String>>>,
}

impl Tracepoints {
    /// Reads every `events/<subsys>/<name>/id` under `tracefs`, bounded.
    pub fn discover(tracefs: &Path) -> Tracepoints {
        let events = tracefs.join("events");
        let mut by_subsys = BTreeMap::new();
        for subsys in subdirs(&events) {
            let dir = events.join(&subsys);
            let ids: BTreeMap<String, Result<u64, String>> = subdirs(&dir)
                .into_iter()
                .map(|name| {
                    let idp = dir.join(&name).join("id");
                    let id = match read_attribute(&idp) {
                        Ok(s) => s
                            .trim()
                            .parse::<u64>()
                            .map_err(|_| format!("{} does not hold a number", idp.display())),
                        Err(e) => Err(format!("{}: {e}", idp.display())),
                    };
                    (name, id)
                })
                .collect();
            if !ids.is_empty() {
                by_subsys.insert(subsys, ids);
            }
        }
        Tracepoints { events, by_subsys }
    }

    /// How many tracepoints were found.
    pub fn len(&self) -> usize {
        self.by_subsys.values().map(BTreeMap::len).sum()
    }

    /// Whether none was found.
    pub fn is_empty(&self) -> bool {
        self.by_subsys.is_empty()
    }

    /// The id of `subsys:name`; the error says what is wrong and suggests
    /// close names.
    pub fn id(&self, subsys: &str, name: &str) -> Result<u64, String> {
        let Some(names) = self.by_subsys.get(subsys) else {
            let mut msg = format!("no subsystem `{subsys}` in {}", self.events.display());
            let close = suggest(subsys, self.by_subsys.keys().map(String::as_str));
            if !close.is_empty() {
                msg.push_str(&format!("; did you mean {}?", quote_list(&close)));
            }
            return Err(msg);
        };
        match names.get(name) {
            Some(id) => id.clone(),
            None => {
                let mut msg = format!(
                    "no tracepoint `{name}` in {}",
                    self.events.join(subsys).display()
                );
                let close = suggest(name, names.keys().map(String::as_str));
                if !close.is_empty() {
                    msg.push_str(&format!("; did you mean {}?", quote_list(&close)));
                }
                Err(msg)
            }
        }
    }
}

/// The names of the subdirectories of a directory (its files, such as
/// `enable` and `filter`, left out), from the directory entries' types
/// (no `stat` each); none when it is unreadable.
fn subdirs(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The tracefs directories the text of a mountinfo names, in order:
/// `tracefs` mount points, then `<debugfs>/tracing`.
pub fn tracefs_mounts(mountinfo: &str) -> Vec<PathBuf> {
    let mut tracefs = Vec::new();
    let mut debugfs = Vec::new();
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let Some(mount_point) = left.split_whitespace().nth(4).map(unescape_mount) else {
            continue;
        };
        match right.split_whitespace().next() {
            Some("tracefs") => tracefs.push(PathBuf::from(mount_point)),
            Some("debugfs") => debugfs.push(Path::new(&mount_point).join("tracing")),
            _ => {}
        }
    }
    tracefs.extend(debugfs);
    tracefs
}

/// Whether `path` is where a sysfs is mounted, according to the text of
/// `/proc/self/mountinfo`: the live kernel's PMUs, as opposed to a copied
/// fixture tree. A DaemonSet mounts the host's `/sys` elsewhere (e.g.
/// `/host/sys`); it is just as live. `path` should be canonical.
pub fn is_sysfs_mount(path: &Path, mountinfo: &str) -> bool {
    mountinfo.lines().any(|line| {
        let Some((left, right)) = line.split_once(" - ") else {
            return false;
        };
        let fstype = right.split_whitespace().next().unwrap_or("");
        let mount_point = left.split_whitespace().nth(4).map(unescape_mount);
        fstype == "sysfs" && mount_point.as_deref() == Some(path.to_string_lossy().as_ref())
    })
}

/// Undoes mountinfo's octal escapes (`\040` for a space).
fn unescape_mount(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mkdir(p: &Path) {
        std::fs::create_dir_all(p).unwrap();
    }

    #[test]
    fn mountinfo_lists_tracefs_then_debugfs() {
        let mi = [
            "22 1 0:21 / /sys rw - sysfs sysfs rw",
            "40 22 0:12 / /mnt/my\\040trace rw,nosuid - tracefs nodev rw",
            "41 22 0:7 / /dbg rw - debugfs debugfs rw",
        ]
        .join("\n");
        assert_eq!(
            tracefs_mounts(&mi),
            vec![
                PathBuf::from("/mnt/my trace"),
                PathBuf::from("/dbg/tracing")
            ]
        );
    }

    /// Defect 7: tracefs mounted away from `<sysfs>/kernel/tracing` is
    /// found through mountinfo (before, tracepoints were "not mounted").
    #[test]
    fn tracefs_found_where_mountinfo_says() {
        let dir = tempfile::tempdir().unwrap();
        let sysfs = dir.path().join("sys");
        mkdir(&sysfs.join("kernel/tracing")); // empty mount point: no events/
        let elsewhere = dir.path().join("elsewhere tracing");
        mkdir(&elsewhere.join("events/sched/sched_switch"));
        std::fs::write(elsewhere.join("events/sched/sched_switch/id"), "316\n").unwrap();
        let procfs = dir.path().join("proc");
        mkdir(&procfs.join("self"));
        let escaped = elsewhere.to_string_lossy().replace(' ', "\\040");
        std::fs::write(
            procfs.join("self/mountinfo"),
            format!(
                "22 1 0:21 / /sys rw - sysfs sysfs rw\n40 22 0:12 / {escaped} rw - tracefs nodev rw\n"
            ),
        )
        .unwrap();
        let t = find_tracefs(&sysfs, &procfs);
        assert_eq!(t.path.as_deref(), Some(elsewhere.as_path()));
        assert_eq!(t.tracepoints.id("sched", "sched_switch"), Ok(316));
        assert_eq!(t.tracepoints.len(), 1);
        let e = t.tracepoints.id("sched", "sched_swtich").unwrap_err();
        assert!(e.contains("did you mean `sched_switch`"), "{e}");
        let e = t.tracepoints.id("shed", "sched_switch").unwrap_err();
        assert!(e.contains("did you mean `sched`"), "{e}");
        // Without the mount: nothing found, nothing denied.
        std::fs::write(procfs.join("self/mountinfo"), "").unwrap();
        assert_eq!(find_tracefs(&sysfs, &procfs), Tracefs::default());
    }
}
