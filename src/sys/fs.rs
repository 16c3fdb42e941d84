//! `statfs(2)`: which filesystem a directory is on. A leaf (no crate
//! imports, stage 0 like [`super::abi`]): cgroup discovery asks it whether
//! `--path.cgroupfs` is a cgroup hierarchy at all, and of which version.
//! The magic numbers are libc's (`include/uapi/linux/magic.h`).

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The filesystem a directory is on, as `statfs(2)`'s `f_type` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsKind {
    /// `CGROUP2_SUPER_MAGIC`: the unified hierarchy.
    Cgroup2,
    /// `CGROUP_SUPER_MAGIC`: a cgroup v1 hierarchy (which controllers it
    /// has, statfs does not say: the mount's super options do).
    CgroupV1,
    /// `TMPFS_MAGIC`: e.g. the `/sys/fs/cgroup` of a v1 or hybrid host,
    /// under which the hierarchies are mounted.
    Tmpfs,
    /// Any other filesystem (the magic number).
    Other(i64),
}

/// The filesystem `path` is on.
// `f_type` and the magics are `c_long` on most architectures (i64 here)
// and `c_uint` on some (s390x): `i64::from` keeps it portable.
#[allow(clippy::useless_conversion)]
pub fn fs_kind(path: &Path) -> io::Result<FsKind> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: an all-zero `struct statfs` is a valid value (plain integers).
    let mut buf: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path that outlives the call; `buf` is
    // a valid, writable `struct statfs` the kernel fills.
    let rc = unsafe { libc::statfs(c.as_ptr(), &mut buf) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let t = i64::from(buf.f_type);
    Ok(match t {
        t if t == i64::from(libc::CGROUP2_SUPER_MAGIC) => FsKind::Cgroup2,
        t if t == i64::from(libc::CGROUP_SUPER_MAGIC) => FsKind::CgroupV1,
        t if t == i64::from(libc::TMPFS_MAGIC) => FsKind::Tmpfs,
        t => FsKind::Other(t),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_is_neither_cgroup_nor_tmpfs_and_a_missing_path_is_an_error() {
        // procfs's magic (0x9fa0) on every Linux.
        assert_eq!(fs_kind(Path::new("/proc")).unwrap(), FsKind::Other(0x9fa0));
        let e = fs_kind(Path::new("/nonexistent/x")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert_eq!(
            fs_kind(Path::new("a\0b")).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
    }

    #[test]
    fn dev_shm_is_tmpfs() {
        assert_eq!(fs_kind(Path::new("/dev/shm")).unwrap(), FsKind::Tmpfs);
    }
}
