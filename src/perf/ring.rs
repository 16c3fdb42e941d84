//! The perf ring buffer: the `mmap` of a sampling event's fd, read the way
//! the kernel's `perf_event_mmap_page` comment prescribes.
//!
//! # The kernel's side
//!
//! `mmap(fd, (1 + 2^n) * page_size)` maps one metadata page (the
//! `perf_event_mmap_page`) followed by a data area of `2^n` pages (the
//! page's `data_offset` and `data_size`, on Linux ≥ 4.1). The kernel writes
//! records at `data_head` and advances it; the reader consumes from
//! `data_tail` and advances that. Both are byte counts that only grow: the
//! position in the data area is `value % data_size`, so a record can run
//! off the end of the area and continue at its start.
//!
//! * `data_head` is read with **acquire** ordering (the kernel's
//!   `smp_load_acquire`, formerly `smp_rmb()` after the read): the records
//!   before `head` are completely written before we see `head`.
//! * `data_tail` is written with **release** ordering (`smp_store_release`,
//!   formerly `smp_mb()` before the write): our reads of the records are
//!   done before the kernel may reuse their space.
//!
//! A writable mapping tells the kernel that the reader maintains
//! `data_tail`, so it never overwrites unread records: when the area is
//! full it drops new records, counts them, and writes a `PERF_RECORD_LOST`
//! with the count once there is room again.
//!
//! Only the bytes between `tail` and `head` are ever borrowed as slices:
//! the kernel does not write there until we publish a new tail. Splitting
//! those bytes into records, and copying a record that wraps around the
//! end into a scratch buffer, is [`split_records`], safe code over two
//! ordinary `&[u8]` (and so testable under Miri).

use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

/// The data area's size in pages when nothing else is said: 8 pages
/// (32 KiB with 4 KiB pages) per CPU. At 99 Hz a sample record of the
/// fields `top` asks for is 56 bytes, so 32 KiB holds ~6 s of samples,
/// several times the 1 s drain interval; see docs/src/performance.md,
/// "Sampling", for the memory at 512 CPUs.
pub const DEFAULT_RING_PAGES: usize = 8;

/// A ring that cannot be mapped or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RingError {
    /// The data area is not a power-of-two number of pages.
    #[error(
        "ring of {pages} data pages: the data area must be a power of two pages (1, 2, 4, ...)"
    )]
    Pages {
        /// The pages asked for.
        pages: usize,
    },
    /// A record header's size is impossible (shorter than its header,
    /// or running past the kernel's `data_head`): the ring is skipped to
    /// `data_head`.
    #[error("corrupt record at ring offset {offset}: size {size} with {available} bytes left")]
    Corrupt {
        /// Bytes from the tail where the record starts.
        offset: usize,
        /// The size its header claims.
        size: usize,
        /// The bytes up to `data_head`.
        available: usize,
    },
}

/// The size of `struct perf_event_header`: `u32 type, u16 misc, u16 size`.
pub const HEADER_LEN: usize = 8;

/// Splits the readable bytes of a ring, given as two pieces (`a` from the
/// tail to the end of the data area, `b` from its start to the head; `b`
/// is empty when nothing wraps), into records, and calls `f` on each whole
/// record (header included). A record that straddles the two pieces is
/// copied into `scratch` first. Returns the bytes consumed: all of them,
/// or an error for a record whose size is impossible (the caller then
/// skips everything).
pub fn split_records(
    a: &[u8],
    b: &[u8],
    scratch: &mut Vec<u8>,
    f: &mut dyn FnMut(&[u8]),
) -> Result<usize, RingError> {
    let total = a.len() + b.len();
    let mut off = 0;
    while off < total {
        let left = total - off;
        if left < HEADER_LEN {
            return Err(RingError::Corrupt {
                offset: off,
                size: 0,
                available: left,
            });
        }
        let mut hdr = [0u8; HEADER_LEN];
        copy_wrapped(a, b, off, &mut hdr);
        let size = usize::from(u16::from_ne_bytes([hdr[6], hdr[7]]));
        if size < HEADER_LEN || size > left {
            return Err(RingError::Corrupt {
                offset: off,
                size,
                available: left,
            });
        }
        if off + size <= a.len() {
            f(&a[off..off + size]);
        } else if off >= a.len() {
            f(&b[off - a.len()..off - a.len() + size]);
        } else {
            scratch.clear();
            scratch.resize(size, 0);
            copy_wrapped(a, b, off, scratch);
            f(scratch);
        }
        off += size;
    }
    Ok(total)
}

/// Copies `out.len()` bytes starting `off` bytes into the concatenation of
/// `a` and `b` (the caller has checked that they exist).
fn copy_wrapped(a: &[u8], b: &[u8], off: usize, out: &mut [u8]) {
    let n = out.len();
    if off >= a.len() {
        out.copy_from_slice(&b[off - a.len()..off - a.len() + n]);
    } else {
        let first = (a.len() - off).min(n);
        out[..first].copy_from_slice(&a[off..off + first]);
        out[first..].copy_from_slice(&b[..n - first]);
    }
}

/// The two pieces of the readable region `[tail, head)` of a data area
/// of `size` bytes (a power of two): `(start, len)` of the piece from the
/// tail toward the end, and the length of the piece from the start.
fn pieces(tail: u64, head: u64, size: usize) -> ((usize, usize), usize) {
    let avail = head.wrapping_sub(tail).min(size as u64) as usize;
    let start = (tail & (size as u64 - 1)) as usize;
    let first = avail.min(size - start);
    ((start, first), avail - first)
}

/// What one drain found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Drained {
    /// Records handed over.
    pub records: u64,
    /// Bytes consumed.
    pub bytes: u64,
}

/// A mapped ring: the metadata page and the data area. Unmapped on drop.
#[derive(Debug)]
pub struct Ring {
    base: NonNull<u8>,
    map_len: usize,
    data_offset: usize,
    data_size: usize,
    scratch: Vec<u8>,
}

// SAFETY: the mapping is owned by this value alone (no aliasing handle is
// handed out), and the shared words are accessed through atomics.
unsafe impl Send for Ring {}

/// The system's page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no memory effects.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).ok().filter(|&p| p > 0).unwrap_or(4096)
}

/// The bytes a ring of `pages` data pages maps: `(1 + pages) * page`.
pub fn map_len(pages: usize) -> usize {
    (1 + pages) * page_size()
}

impl Ring {
    /// Maps a ring of `pages` data pages (a power of two) on a sampling
    /// event's fd, writable (the reader maintains `data_tail`). Fails with
    /// the errno of `mmap` (EPERM/ENOMEM over `perf_event_mlock_kb`).
    pub fn map(fd: BorrowedFd<'_>, pages: usize) -> Result<Ring, i32> {
        if pages == 0 || !pages.is_power_of_two() {
            return Err(libc::EINVAL);
        }
        let page = page_size();
        let len = (1 + pages) * page;
        // SAFETY: a fresh shared mapping of a perf fd; no existing memory
        // is touched; the result is checked against MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::ENOMEM));
        }
        let base = NonNull::new(p.cast::<u8>()).ok_or(libc::ENOMEM)?;
        let mut ring = Ring {
            base,
            map_len: len,
            data_offset: page,
            data_size: pages * page,
            scratch: Vec::new(),
        };
        // Linux ≥ 4.1 says where the data area is; older kernels leave
        // these 0 and the area is the pages after the first.
        let (off, size) = (ring.word(OFF_DATA_OFFSET), ring.word(OFF_DATA_SIZE));
        if size != 0 && off as usize + size as usize <= len && (size as usize).is_power_of_two() {
            ring.data_offset = off as usize;
            ring.data_size = size as usize;
        }
        Ok(ring)
    }

    /// The data area's size in bytes.
    pub fn data_size(&self) -> usize {
        self.data_size
    }

    /// The atomic word at `off` of the metadata page.
    fn atomic(&self, off: usize) -> &AtomicU64 {
        // SAFETY: `off` is one of the u64 fields of perf_event_mmap_page,
        // 8-byte aligned within the first (page-aligned) page of a live
        // mapping that outlives `&self`; the kernel accesses these words
        // atomically too.
        unsafe { AtomicU64::from_ptr(self.base.as_ptr().add(off).cast::<u64>()) }
    }

    fn word(&self, off: usize) -> u64 {
        self.atomic(off).load(Ordering::Relaxed)
    }

    /// Hands every complete record between `data_tail` and `data_head` to
    /// `f`, then publishes the new tail. A corrupt record skips the rest
    /// (the tail moves to the head, so reading goes on) and is returned as
    /// the error after the good records were handed over.
    pub fn drain(&mut self, f: &mut dyn FnMut(&[u8])) -> Result<Drained, RingError> {
        let head = self.atomic(OFF_DATA_HEAD).load(Ordering::Acquire);
        let tail = self.atomic(OFF_DATA_TAIL).load(Ordering::Relaxed);
        if head == tail {
            return Ok(Drained::default());
        }
        let ((start, first), second) = pieces(tail, head, self.data_size);
        // SAFETY: [tail, head) is written completely (acquire load of
        // head) and the kernel does not write there before we publish a
        // new tail below; both pieces lie inside the data area of the live
        // mapping (start + first <= data_size, second <= data_size).
        let (a, b) = unsafe {
            let data = self.base.as_ptr().add(self.data_offset);
            (
                std::slice::from_raw_parts(data.add(start), first),
                std::slice::from_raw_parts(data, second),
            )
        };
        let mut records = 0u64;
        let r = split_records(a, b, &mut self.scratch, &mut |rec| {
            records += 1;
            f(rec);
        });
        let new_tail = head;
        self.atomic(OFF_DATA_TAIL)
            .store(new_tail, Ordering::Release);
        r.map(|n| Drained {
            records,
            bytes: n as u64,
        })
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by `map` with this length and is
        // not referenced after drop.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.map_len);
        }
    }
}

use perf_event_open_sys::bindings::perf_event_mmap_page as MmapPage;
const OFF_DATA_HEAD: usize = std::mem::offset_of!(MmapPage, data_head);
const OFF_DATA_TAIL: usize = std::mem::offset_of!(MmapPage, data_tail);
const OFF_DATA_OFFSET: usize = std::mem::offset_of!(MmapPage, data_offset);
const OFF_DATA_SIZE: usize = std::mem::offset_of!(MmapPage, data_size);

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(ty: u32, payload: &[u8]) -> Vec<u8> {
        let mut v = ty.to_ne_bytes().to_vec();
        v.extend(0u16.to_ne_bytes());
        v.extend(((HEADER_LEN + payload.len()) as u16).to_ne_bytes());
        v.extend(payload);
        v
    }

    /// Lays `records` into a ring of `size` bytes starting at byte
    /// position `tail`, returning the area and the head.
    fn ring_with(size: usize, tail: u64, records: &[Vec<u8>]) -> (Vec<u8>, u64) {
        let mut area = vec![0xeeu8; size];
        let mut pos = tail;
        for r in records {
            for &byte in r {
                area[(pos % size as u64) as usize] = byte;
                pos = pos.wrapping_add(1);
            }
        }
        (area, pos)
    }

    fn drain_area(area: &[u8], tail: u64, head: u64) -> (Vec<Vec<u8>>, Result<usize, RingError>) {
        let ((start, first), second) = pieces(tail, head, area.len());
        let mut got = Vec::new();
        let mut scratch = Vec::new();
        let r = split_records(
            &area[start..start + first],
            &area[..second],
            &mut scratch,
            &mut |r| got.push(r.to_vec()),
        );
        (got, r)
    }

    #[test]
    fn records_that_wrap_the_end_are_copied_whole() {
        let recs = vec![
            rec(9, &[1; 24]),
            rec(3, &[2; 16]),
            rec(9, &[3; 40]),
            rec(2, &[4; 16]),
        ];
        // Every starting position, so the wrap falls inside headers,
        // payloads and exactly on record boundaries.
        for tail in (0..128u64).chain([u64::MAX - 40, (1 << 40) + 100]) {
            let (area, head) = ring_with(128, tail, &recs);
            let (got, r) = drain_area(&area, tail, head);
            assert_eq!(got, recs, "tail {tail}");
            assert_eq!(r, Ok(recs.iter().map(Vec::len).sum()));
        }
    }

    #[test]
    fn an_empty_ring_yields_nothing() {
        let (got, r) = drain_area(&[0u8; 64], 10, 10);
        assert!(got.is_empty());
        assert_eq!(r, Ok(0));
    }

    #[test]
    fn a_corrupt_size_is_an_error_after_the_good_records() {
        let mut bad = rec(9, &[0; 8]);
        bad[6..8].copy_from_slice(&4u16.to_ne_bytes()); // shorter than a header
        let good = rec(3, &[7; 8]);
        let (area, head) = ring_with(64, 60, &[good.clone(), bad]);
        let (got, r) = drain_area(&area, 60, head);
        assert_eq!(got, vec![good]);
        assert!(
            matches!(r, Err(RingError::Corrupt { size: 4, .. })),
            "{r:?}"
        );
        // A size running past the head.
        let mut long = rec(9, &[0; 8]);
        long[6..8].copy_from_slice(&200u16.to_ne_bytes());
        let (area, head) = ring_with(64, 0, &[long]);
        assert!(drain_area(&area, 0, head).1.is_err());
        // Fewer bytes than a header.
        let (got, r) = drain_area(&[0u8; 64], 0, 5);
        assert!(got.is_empty() && r.is_err());
    }

    #[test]
    fn layout_of_the_metadata_page() {
        // The offsets perf_event.h documents (after the 1 KiB of
        // reserved/self-monitoring words).
        assert_eq!(
            (OFF_DATA_HEAD, OFF_DATA_TAIL, OFF_DATA_OFFSET, OFF_DATA_SIZE),
            (1024, 1032, 1040, 1048)
        );
    }
}
