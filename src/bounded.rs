//! Bounded reads of files the exporter does not control: sysfs and procfs
//! attributes, mountinfo, tracefs ids, the config and web config files and
//! the PEM files they name.
//!
//! A path may name something that is not a file at all, by mistake or by
//! malice: a FIFO (whose `open` blocks until a writer comes, and whose
//! `read` then blocks until it writes), a device (`/dev/zero` never ends),
//! or a huge or sparse file. Every such read here:
//!
//! * opens with `O_NONBLOCK`, so opening a FIFO returns at once (for a
//!   regular file the flag has no effect);
//! * refuses what `fstat` on the open file does not call a regular file.
//!   The kernel's sysfs attributes and procfs files are regular files (of
//!   size 4096 or 0: their size says nothing of what a read returns), so
//!   nothing legitimate is refused;
//! * reads at most a cap of bytes (one more, to tell "exactly the cap"
//!   from "more"), whatever the file's size claims.
//!
//! Errors are `std::io::Error`s whose message says why (the kind of file,
//! or the cap); the caller adds the path, as for any other I/O error.
//!
//! A regular file on a hung network or FUSE mount still blocks (the kernel
//! ignores `O_NONBLOCK` for regular files): [`watch`] records which file
//! a thread is reading, so that the thread waiting for it can give up.

pub mod watch;

use std::io::{Error, ErrorKind, Read};
use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `m`, taking the data over from a thread that panicked holding
/// it (every value guarded here stays consistent between statements, so a
/// poisoned lock is no reason to stop serving): the one lock helper of
/// the crate.
pub fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The most read from one sysfs or procfs attribute. The kernel formats
/// an attribute into one page (`sysfs_emit`), which is at most 64 KiB
/// (arm64, ppc64 with 64 KiB pages).
pub const ATTRIBUTE_BYTES: u64 = 64 << 10;

/// The most read from `/proc/self/mountinfo`: about 150 bytes per mount,
/// so room for some 50,000 mounts (a busy Kubernetes node has a few
/// thousand).
pub const MOUNTINFO_BYTES: u64 = 8 << 20;

/// The most read from `/proc/cpuinfo`, which grows with the CPUs (about
/// 1.5 KiB each on x86): room for some 10,000.
pub const CPUINFO_BYTES: u64 = 16 << 20;

/// The most read from a config or web config file.
pub const CONFIG_BYTES: u64 = 1 << 20;

/// The most read from a PEM file (a CA bundle of the whole web PKI is
/// about 250 KB).
pub const PEM_BYTES: u64 = 4 << 20;

/// Reads at most `max` bytes of the regular file `path`; anything else is
/// refused with the reason.
pub fn read_bytes(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let _reading = watch::reading(path);
    #[cfg(test)]
    watch::hang::block_if_hung(path);
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let ft = f.metadata()?.file_type();
    if !ft.is_file() {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!("not a regular file ({}): refused", kind_of(&ft)),
        ));
    }
    let mut buf = Vec::new();
    f.take(max + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > max {
        return Err(Error::new(
            ErrorKind::FileTooLarge,
            format!("larger than {}: refused", human(max)),
        ));
    }
    Ok(buf)
}

/// [`read_bytes`] as UTF-8 text.
pub fn read_string(path: &Path, max: u64) -> std::io::Result<String> {
    String::from_utf8(read_bytes(path, max)?)
        .map_err(|_| Error::new(ErrorKind::InvalidData, "not UTF-8 text"))
}

/// A sysfs or procfs attribute ([`ATTRIBUTE_BYTES`] at most).
pub fn read_attribute(path: &Path) -> std::io::Result<String> {
    read_string(path, ATTRIBUTE_BYTES)
}

/// What a file that is not a regular file is, in words.
fn kind_of(ft: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_dir() {
        "a directory"
    } else {
        "not a file"
    }
}

/// `max` in KiB or MiB.
fn human(max: u64) -> String {
    if max < 1024 {
        format!("{max} bytes")
    } else if max >= 1 << 20 && max.is_multiple_of(1 << 20) {
        format!("{} MiB", max >> 20)
    } else {
        format!("{} KiB", max.div_ceil(1024))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_within_the_cap_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("type");
        std::fs::write(&p, "4\n").unwrap();
        assert_eq!(read_attribute(&p).unwrap(), "4\n");
        std::fs::write(&p, vec![b'x'; 10]).unwrap();
        assert_eq!(read_bytes(&p, 10).unwrap().len(), 10);
        let e = read_bytes(&p, 9).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::FileTooLarge);
        assert_eq!(e.to_string(), "larger than 9 bytes: refused");
    }

    #[test]
    fn a_fifo_a_device_and_a_directory_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let st = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo runs");
        assert!(st.success());
        let e = read_attribute(&fifo).unwrap_err();
        assert!(e.to_string().contains("a FIFO"), "{e}");
        let e = read_attribute(Path::new("/dev/zero")).unwrap_err();
        assert!(e.to_string().contains("a character device"), "{e}");
        let e = read_attribute(dir.path()).unwrap_err();
        assert!(e.to_string().contains("a directory"), "{e}");
    }

    #[test]
    fn sizes_read_as_words() {
        assert_eq!(human(64 << 10), "64 KiB");
        assert_eq!(human(1 << 20), "1 MiB");
        assert_eq!(human(100), "100 bytes");
        assert_eq!(human(1500), "2 KiB");
    }
}
