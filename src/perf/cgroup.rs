//! Cgroup targets: `perf_event_open(attr, pid = cgroup fd, cpu, group,
//! PERF_FLAG_PID_CGROUP)` counts on `cpu` only while a task of that cgroup
//! (or of its descendants, on cgroup v2) runs there.
//!
//! The kernel takes the cgroup as an fd of its directory, opened read-only
//! (`O_RDONLY | O_DIRECTORY`; opening needs read permission on the
//! directory only, no capability). The fd is needed only while counters
//! are opened; it is kept while they run so a cgroup can be reopened on a
//! returning CPU without a new path lookup. `cpu` must be a CPU (not -1).
//!
//! What the kernel says about a cgroup that went away: `open()` of a
//! removed directory fails with `ENOENT`; a directory fd opened before the
//! removal is refused by `perf_event_open` with `ENOENT` too (the cgroup's
//! `perf_event` state is no longer online), and an fd that is not a cgroup
//! directory with `EBADF`. Counters opened before the removal stay
//! readable and stop counting.
//!
//! `ENOENT` also comes from a live cgroup that has no `perf_event`
//! controller state. On cgroup v2 the controller is implicit (never listed
//! in `cgroup.controllers`), but the kernel creates its state in child
//! cgroups only once the hierarchy's controllers have been applied, i.e.
//! after some controller was enabled in the root's `cgroup.subtree_control`
//! (systemd does that at boot; a minimal init does not). Until then only
//! the root cgroup can be counted: seen with Debian's 6.1 arm64 kernel in
//! the emulated guest (tests/arm64_guest.rs), where the same encoding
//! opens system-wide and in the root cgroup but not in a child; writing
//! `+pids` to the root's `cgroup.subtree_control` makes it open. The
//! engine tells the two `ENOENT`s apart by the directory still existing
//! and the same event opening system-wide
//! ([`CgroupIssue::NoPerfEventState`](crate::engine::cgroup::CgroupIssue)).

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// An open cgroup directory: the `pid` of `PERF_FLAG_PID_CGROUP` opens.
/// Dropping it closes the fd.
#[derive(Debug)]
pub struct CgroupHandle {
    /// The directory.
    pub dir: PathBuf,
    pub(crate) inner: CgroupInner,
}

#[derive(Debug)]
pub(crate) enum CgroupInner {
    /// The directory's fd.
    Live(std::fs::File),
    /// The simulated kernel: this cgroup's share of each CPU's count;
    /// `None` where it has no `perf_event` state (see the module's notes:
    /// every open in it fails with ENOENT).
    Sim(Option<f64>),
}

/// A cgroup directory that could not be opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("open cgroup directory {}: {} (errno {errno})", dir.display(), std::io::Error::from_raw_os_error(*errno))]
pub struct CgroupOpenError {
    /// The directory.
    pub dir: PathBuf,
    /// The errno.
    pub errno: i32,
}

/// Opens a cgroup directory `O_RDONLY | O_DIRECTORY | O_CLOEXEC` (the
/// standard library sets close-on-exec).
pub fn open_dir(dir: &Path) -> Result<CgroupHandle, CgroupOpenError> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY)
        .open(dir)
        .map(|f| CgroupHandle {
            dir: dir.to_path_buf(),
            inner: CgroupInner::Live(f),
        })
        .map_err(|e| CgroupOpenError {
            dir: dir.to_path_buf(),
            errno: e.raw_os_error().unwrap_or(libc::EIO),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_directory_is_gone_and_a_file_is_not_a_directory() {
        let d = std::env::temp_dir().join(format!("pe-cg-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let h = open_dir(&d).unwrap();
        assert_eq!(h.dir, d);
        let f = d.join("file");
        std::fs::write(&f, "x").unwrap();
        let e = open_dir(&f).unwrap_err();
        assert_eq!(e.errno, libc::ENOTDIR);
        let e = open_dir(&d.join("nope")).unwrap_err();
        assert_eq!(e.errno, libc::ENOENT, "{e}");
        assert!(e.to_string().contains("nope"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
