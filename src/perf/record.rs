//! Decoding of the records a sampler's ring holds: safe code over byte
//! slices (one whole record each, as [`super::ring::split_records`] hands
//! them over), native-endian.
//!
//! Every record starts with `struct perf_event_header { u32 type; u16
//! misc; u16 size; }`. The ones decoded here (`include/uapi/linux/
//! perf_event.h`):
//!
//! * `PERF_RECORD_SAMPLE`: the fields `sample_type` asked for, in the
//!   ABI's order: `IDENTIFIER`, `IP`, `TID` (`u32 pid, tid`), `TIME`,
//!   `ADDR`, `ID`, `STREAM_ID`, `CPU` (`u32 cpu, res`), `PERIOD`, `READ`,
//!   `CALLCHAIN` (`u64 nr; u64 ips[nr]`, the kernel's frame-pointer walk:
//!   `PERF_CONTEXT_*` markers say where kernel and user frames start),
//!   ... `CGROUP` (`u64`, after the raw/branch/regs fields, which a
//!   sampler here never asks for);
//! * `READ` with `PERF_FORMAT_GROUP | ID`: `u64 nr; [time_enabled];
//!   [time_running]; { u64 value; u64 id; [u64 lost] } * nr`;
//! * `PERF_RECORD_COMM`: `u32 pid, tid; char comm[]` (NUL-terminated,
//!   padded to 8 bytes), then the `sample_id` trailer when
//!   `sample_id_all` is set;
//! * `PERF_RECORD_EXIT` / `FORK`: `u32 pid, ppid, tid, ptid; u64 time`;
//! * `PERF_RECORD_LOST`: `u64 id, lost` (records the kernel dropped
//!   because the ring was full);
//! * `PERF_RECORD_THROTTLE` / `UNTHROTTLE`: `u64 time, id, stream_id`
//!   (the kernel stopped/restarted sampling an event that interrupted too
//!   often, over `kernel.perf_event_max_sample_rate`);
//! * `PERF_RECORD_CGROUP` (Linux ≥ 5.7): `u64 id; char path[]`, emitted
//!   when a cgroup is created while sampling.
//!
//! Any other record type is [`Record::Other`]: skipped by its header's
//! size. Input that is shorter than its fields, or a size that does not
//! match, is a [`RecordError`], never a panic.

use crate::sys::abi;

/// A record that cannot be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed perf record (type {ty}, {len} bytes): {msg}")]
pub struct RecordError {
    /// The record's type (0 when the header itself is short).
    pub ty: u32,
    /// The bytes given.
    pub len: usize,
    /// What is wrong.
    pub msg: &'static str,
}

/// The sampler's formats, needed to decode its samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Format {
    /// `perf_event_attr.sample_type`.
    pub sample_type: u64,
    /// `perf_event_attr.read_format`.
    pub read_format: u64,
}

/// A sample's group read: `(value, id)` pairs, leader first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupValues<'a> {
    bytes: &'a [u8],
    stride: usize,
}

impl<'a> GroupValues<'a> {
    /// How many members (leader included).
    pub fn len(&self) -> usize {
        self.bytes.len() / self.stride
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// `(value, id)` of each member.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + 'a {
        let stride = self.stride;
        self.bytes
            .chunks_exact(stride)
            .map(|c| (u64_at(c, 0), u64_at(c, 8)))
    }
}

/// The fields of a `PERF_RECORD_SAMPLE` (0 for those not asked for).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sample<'a> {
    /// Process id (`TID`).
    pub pid: u32,
    /// Thread id (`TID`).
    pub tid: u32,
    /// Nanoseconds, perf clock (`TIME`).
    pub time: u64,
    /// The CPU (`CPU`).
    pub cpu: u32,
    /// The events this sample stands for (`PERIOD`).
    pub period: u64,
    /// The cgroup's id (`CGROUP`): its directory's inode number.
    pub cgroup: Option<u64>,
    /// The group read (`READ` with `PERF_FORMAT_GROUP`).
    pub read: Option<GroupValues<'a>>,
    /// The call chain (`CALLCHAIN`).
    pub callchain: Option<Callchain<'a>>,
}

/// The most entries a call chain is decoded with (frames and context
/// markers): the kernel stops at `kernel.perf_event_max_stack` (127 by
/// default, at most 65535 by sysctl) plus a marker per context; a chain
/// claiming more is refused as malformed rather than walked.
pub const MAX_CALLCHAIN: usize = 1024;

/// `PERF_CONTEXT_*`: the markers in a call chain, as `u64` (they are
/// negative numbers in the ABI, above any address the kernel reports).
pub mod context {
    /// `PERF_CONTEXT_HV`.
    pub const HV: u64 = -32i64 as u64;
    /// `PERF_CONTEXT_KERNEL`: kernel frames follow.
    pub const KERNEL: u64 = -128i64 as u64;
    /// `PERF_CONTEXT_USER`: user frames follow.
    pub const USER: u64 = -512i64 as u64;
    /// `PERF_CONTEXT_GUEST`.
    pub const GUEST: u64 = -2048i64 as u64;
    /// `PERF_CONTEXT_GUEST_KERNEL`.
    pub const GUEST_KERNEL: u64 = -2176i64 as u64;
    /// `PERF_CONTEXT_GUEST_USER`.
    pub const GUEST_USER: u64 = -2560i64 as u64;
    /// `PERF_CONTEXT_MAX`: every value at or above it is a marker.
    pub const MAX: u64 = -4095i64 as u64;
}

/// Where a call-chain frame ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Space {
    /// The kernel (`PERF_CONTEXT_KERNEL`).
    Kernel,
    /// The sampled task's user space (`PERF_CONTEXT_USER`).
    User,
    /// A hypervisor or guest context: kept as addresses, never symbolized.
    Other,
}

/// A sample's call chain: the raw `u64`s, markers included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Callchain<'a> {
    bytes: &'a [u8],
}

impl<'a> Callchain<'a> {
    /// The raw entries (frames and markers), innermost first.
    pub fn raw(&self) -> impl Iterator<Item = u64> + 'a {
        self.bytes.chunks_exact(8).map(|c| u64_at(c, 0))
    }

    /// The raw entries (markers included).
    pub fn len(&self) -> usize {
        self.bytes.len() / 8
    }

    /// Whether there is no entry.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The frames, innermost first, each with the context it ran in
    /// (the last marker before it; [`Space::User`] before any marker, as
    /// a user-space-only chain has none on old kernels). Unknown markers
    /// switch to [`Space::Other`].
    pub fn frames(&self) -> impl Iterator<Item = (Space, u64)> + 'a {
        let mut space = Space::User;
        self.raw().filter_map(move |ip| {
            if ip >= context::MAX {
                space = match ip {
                    context::KERNEL => Space::Kernel,
                    context::USER => Space::User,
                    _ => Space::Other,
                };
                None
            } else {
                Some((space, ip))
            }
        })
    }
}

/// One decoded record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record<'a> {
    /// `PERF_RECORD_SAMPLE`.
    Sample(Sample<'a>),
    /// `PERF_RECORD_COMM`: a task's (new) name.
    Comm {
        /// Process id.
        pid: u32,
        /// Thread id.
        tid: u32,
        /// The name (without the NUL), as bytes.
        comm: &'a [u8],
    },
    /// `PERF_RECORD_FORK`: a new task, named as its parent until it
    /// execs (then a `COMM` follows).
    Fork {
        /// Process id.
        pid: u32,
        /// Thread id.
        tid: u32,
        /// The parent's thread id.
        ptid: u32,
    },
    /// `PERF_RECORD_EXIT`.
    Exit {
        /// Process id.
        pid: u32,
        /// Thread id.
        tid: u32,
    },
    /// `PERF_RECORD_LOST`: `lost` records dropped.
    Lost {
        /// The event's id.
        id: u64,
        /// Records dropped.
        lost: u64,
    },
    /// `PERF_RECORD_THROTTLE` (`true`) or `UNTHROTTLE` (`false`).
    Throttle {
        /// Throttled (not unthrottled).
        throttled: bool,
        /// The event's id.
        id: u64,
    },
    /// `PERF_RECORD_CGROUP`: a cgroup's id and path (from the cgroupfs
    /// root, e.g. `/kubepods.slice/...`).
    Cgroup {
        /// The id (`PERF_SAMPLE_CGROUP`'s value).
        id: u64,
        /// The path, as bytes.
        path: &'a [u8],
    },
    /// Any other record type, skipped.
    Other(u32),
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[off..off + 8]);
    u64::from_ne_bytes(w)
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[off..off + 4]);
    u32::from_ne_bytes(w)
}

/// A cursor over a record's body.
struct Cursor<'a> {
    b: &'a [u8],
    off: usize,
    ty: u32,
}

impl<'a> Cursor<'a> {
    fn err(&self, msg: &'static str) -> RecordError {
        RecordError {
            ty: self.ty,
            len: self.b.len(),
            msg,
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], RecordError> {
        let end = self
            .off
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or_else(|| self.err("shorter than its fields"))?;
        let s = &self.b[self.off..end];
        self.off = end;
        Ok(s)
    }

    fn u64(&mut self) -> Result<u64, RecordError> {
        self.take(8).map(|s| u64_at(s, 0))
    }

    fn u32s(&mut self) -> Result<(u32, u32), RecordError> {
        self.take(8).map(|s| (u32_at(s, 0), u32_at(s, 4)))
    }

    /// A NUL-terminated string padded to 8 bytes: the bytes before the NUL.
    fn string(&mut self) -> Result<&'a [u8], RecordError> {
        let rest = &self.b[self.off..];
        let n = rest
            .iter()
            .position(|&c| c == 0)
            .ok_or_else(|| self.err("string without a NUL"))?;
        self.take((n + 1).next_multiple_of(8).min(rest.len()))?;
        Ok(&rest[..n])
    }
}

/// The type and size of a record's header.
pub fn header(b: &[u8]) -> Result<(u32, usize), RecordError> {
    if b.len() < 8 {
        return Err(RecordError {
            ty: 0,
            len: b.len(),
            msg: "shorter than a header",
        });
    }
    Ok((u32_at(b, 0), usize::from(u16::from_ne_bytes([b[6], b[7]]))))
}

/// Decodes one record (`b` is exactly the record, header included).
pub fn decode<'a>(b: &'a [u8], fmt: &Format) -> Result<Record<'a>, RecordError> {
    let (ty, size) = header(b)?;
    let mut c = Cursor { b, off: 8, ty };
    if size != b.len() {
        return Err(c.err("header size does not match the record"));
    }
    Ok(match ty {
        abi::RECORD_SAMPLE => Record::Sample(sample(&mut c, fmt)?),
        abi::RECORD_COMM => {
            let (pid, tid) = c.u32s()?;
            let comm = c.string()?;
            Record::Comm { pid, tid, comm }
        }
        abi::RECORD_EXIT | abi::RECORD_FORK => {
            let (pid, _ppid) = c.u32s()?;
            let (tid, ptid) = c.u32s()?;
            c.u64()?;
            if ty == abi::RECORD_FORK {
                Record::Fork { pid, tid, ptid }
            } else {
                Record::Exit { pid, tid }
            }
        }
        abi::RECORD_LOST => {
            let id = c.u64()?;
            let lost = c.u64()?;
            Record::Lost { id, lost }
        }
        abi::RECORD_THROTTLE | abi::RECORD_UNTHROTTLE => {
            let _time = c.u64()?;
            let id = c.u64()?;
            c.u64()?;
            Record::Throttle {
                throttled: ty == abi::RECORD_THROTTLE,
                id,
            }
        }
        abi::RECORD_CGROUP => {
            let id = c.u64()?;
            let path = c.string()?;
            Record::Cgroup { id, path }
        }
        other => Record::Other(other),
    })
}

/// The sample types a sampler here may ask for; any other changes the
/// layout and is refused rather than misread.
const KNOWN: u64 = abi::SAMPLE_IDENTIFIER
    | abi::SAMPLE_TID
    | abi::SAMPLE_TIME
    | abi::SAMPLE_ID
    | abi::SAMPLE_CPU
    | abi::SAMPLE_PERIOD
    | abi::SAMPLE_READ
    | abi::SAMPLE_CALLCHAIN
    | abi::SAMPLE_CGROUP;

fn sample<'a>(c: &mut Cursor<'a>, fmt: &Format) -> Result<Sample<'a>, RecordError> {
    let t = fmt.sample_type;
    if t & !KNOWN != 0 {
        return Err(c.err("sample_type has fields this decoder does not know"));
    }
    let mut s = Sample::default();
    if t & abi::SAMPLE_IDENTIFIER != 0 {
        c.u64()?;
    }
    if t & abi::SAMPLE_TID != 0 {
        (s.pid, s.tid) = c.u32s()?;
    }
    if t & abi::SAMPLE_TIME != 0 {
        s.time = c.u64()?;
    }
    if t & abi::SAMPLE_ID != 0 {
        c.u64()?;
    }
    if t & abi::SAMPLE_CPU != 0 {
        s.cpu = c.u32s()?.0;
    }
    if t & abi::SAMPLE_PERIOD != 0 {
        s.period = c.u64()?;
    }
    if t & abi::SAMPLE_READ != 0 {
        s.read = Some(read(c, fmt.read_format)?);
    }
    if t & abi::SAMPLE_CALLCHAIN != 0 {
        s.callchain = Some(callchain(c)?);
    }
    if t & abi::SAMPLE_CGROUP != 0 {
        s.cgroup = Some(c.u64()?);
    }
    Ok(s)
}

fn callchain<'a>(c: &mut Cursor<'a>) -> Result<Callchain<'a>, RecordError> {
    let nr = c.u64()?;
    let n = usize::try_from(nr)
        .ok()
        .filter(|&n| n <= MAX_CALLCHAIN)
        .ok_or_else(|| c.err("call chain deeper than MAX_CALLCHAIN"))?;
    Ok(Callchain {
        bytes: c.take(n * 8)?,
    })
}

fn read<'a>(c: &mut Cursor<'a>, rf: u64) -> Result<GroupValues<'a>, RecordError> {
    if rf & abi::FORMAT_GROUP == 0 || rf & abi::FORMAT_ID == 0 {
        return Err(c.err("a sample's read is decoded only with PERF_FORMAT_GROUP | ID"));
    }
    let nr = c.u64()?;
    if rf & abi::FORMAT_TOTAL_TIME_ENABLED != 0 {
        c.u64()?;
    }
    if rf & abi::FORMAT_TOTAL_TIME_RUNNING != 0 {
        c.u64()?;
    }
    let stride = if rf & abi::FORMAT_LOST != 0 { 24 } else { 16 };
    let n = usize::try_from(nr)
        .ok()
        .and_then(|n| n.checked_mul(stride))
        .ok_or_else(|| c.err("member count exceeds the record"))?;
    Ok(GroupValues {
        bytes: c.take(n)?,
        stride,
    })
}

/// Encoding, for tests, the fuzz corpus, benchmarks and the simulated PMU.
pub mod encode {
    use crate::sys::abi;

    /// A record of type `ty` with `body` (padded to 8 bytes).
    pub fn record(ty: u32, body: &[u8]) -> Vec<u8> {
        let mut v = Vec::with_capacity(8 + body.len() + 7);
        append(&mut v, ty, body);
        v
    }

    /// Appends a record of type `ty` with `body` (padded to 8 bytes).
    pub fn append(v: &mut Vec<u8>, ty: u32, body: &[u8]) {
        let size = 8 + body.len().next_multiple_of(8);
        v.extend(ty.to_ne_bytes());
        v.extend(0u16.to_ne_bytes());
        v.extend(u16::try_from(size).unwrap_or(u16::MAX).to_ne_bytes());
        v.extend(body);
        v.resize(v.len() + body.len().next_multiple_of(8) - body.len(), 0);
    }

    /// The body of a sample with `TID | TIME | CPU | PERIOD` (+ `CGROUP`).
    pub fn sample_body(
        pid: u32,
        tid: u32,
        time: u64,
        cpu: u32,
        period: u64,
        cgroup: Option<u64>,
    ) -> Vec<u8> {
        let mut b = Vec::with_capacity(48);
        b.extend(pid.to_ne_bytes());
        b.extend(tid.to_ne_bytes());
        b.extend(time.to_ne_bytes());
        b.extend(cpu.to_ne_bytes());
        b.extend(0u32.to_ne_bytes());
        b.extend(period.to_ne_bytes());
        if let Some(c) = cgroup {
            b.extend(c.to_ne_bytes());
        }
        b
    }

    /// The format of [`sample_body_with_chain`]'s samples (without
    /// `CGROUP`).
    pub const CHAIN_FORMAT: super::Format = super::Format {
        sample_type: abi::SAMPLE_TID
            | abi::SAMPLE_TIME
            | abi::SAMPLE_CPU
            | abi::SAMPLE_PERIOD
            | abi::SAMPLE_CALLCHAIN,
        read_format: 0,
    };

    /// The body of a sample with `TID | TIME | CPU | PERIOD | CALLCHAIN`
    /// (+ `CGROUP`): `chain` is the raw entries, markers included.
    pub fn sample_body_with_chain(
        pid: u32,
        period: u64,
        chain: &[u64],
        cgroup: Option<u64>,
    ) -> Vec<u8> {
        let mut b = sample_body(pid, pid, 1, 0, period, None);
        b.extend((chain.len() as u64).to_ne_bytes());
        b.extend(chain.iter().flat_map(|w| w.to_ne_bytes()));
        if let Some(c) = cgroup {
            b.extend(c.to_ne_bytes());
        }
        b
    }

    /// A `PERF_RECORD_COMM` body: pid, tid, the name NUL-terminated.
    pub fn comm_body(pid: u32, tid: u32, comm: &str) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(pid.to_ne_bytes());
        b.extend(tid.to_ne_bytes());
        b.extend(comm.as_bytes());
        b.push(0);
        b.resize(b.len().next_multiple_of(8), 0);
        b
    }

    /// A `PERF_RECORD_CGROUP` body.
    pub fn cgroup_body(id: u64, path: &str) -> Vec<u8> {
        let mut b = id.to_ne_bytes().to_vec();
        b.extend(path.as_bytes());
        b.push(0);
        b.resize(b.len().next_multiple_of(8), 0);
        b
    }

    /// A `PERF_RECORD_LOST` record.
    pub fn lost(id: u64, lost: u64) -> Vec<u8> {
        let mut b = id.to_ne_bytes().to_vec();
        b.extend(lost.to_ne_bytes());
        record(abi::RECORD_LOST, &b)
    }

    /// A `PERF_RECORD_THROTTLE` (or `UNTHROTTLE`) record.
    pub fn throttle(throttled: bool, id: u64) -> Vec<u8> {
        let ty = if throttled {
            abi::RECORD_THROTTLE
        } else {
            abi::RECORD_UNTHROTTLE
        };
        let b: Vec<u8> = [1u64, id, id]
            .iter()
            .flat_map(|w| w.to_ne_bytes())
            .collect();
        record(ty, &b)
    }
}

#[cfg(test)]
mod tests {
    use super::encode::*;
    use super::*;

    const FMT: Format = Format {
        sample_type: abi::SAMPLE_TID
            | abi::SAMPLE_TIME
            | abi::SAMPLE_CPU
            | abi::SAMPLE_PERIOD
            | abi::SAMPLE_CGROUP,
        read_format: 0,
    };

    #[test]
    fn a_sample_with_every_field() {
        let r = record(
            abi::RECORD_SAMPLE,
            &sample_body(10, 11, 12, 3, 1000, Some(77)),
        );
        let Record::Sample(s) = decode(&r, &FMT).unwrap() else {
            panic!("not a sample")
        };
        assert_eq!(
            (s.pid, s.tid, s.time, s.cpu, s.period),
            (10, 11, 12, 3, 1000)
        );
        assert_eq!(s.cgroup, Some(77));
        assert_eq!(s.read, None);
    }

    #[test]
    fn a_sample_with_a_group_read() {
        let fmt = Format {
            sample_type: abi::SAMPLE_TID | abi::SAMPLE_PERIOD | abi::SAMPLE_READ,
            read_format: abi::FORMAT_GROUP | abi::FORMAT_ID,
        };
        let words = [2u64, 500, 1, 900, 2];
        let mut body = Vec::new();
        body.extend(5u32.to_ne_bytes());
        body.extend(6u32.to_ne_bytes());
        body.extend(100u64.to_ne_bytes());
        body.extend(words.iter().flat_map(|w| w.to_ne_bytes()));
        let r = record(abi::RECORD_SAMPLE, &body);
        let Record::Sample(s) = decode(&r, &fmt).unwrap() else {
            panic!("not a sample")
        };
        assert_eq!(s.period, 100);
        let g: Vec<_> = s.read.unwrap().iter().collect();
        assert_eq!(g, vec![(500, 1), (900, 2)]);
        // A member count past the end is an error.
        let mut bad = body.clone();
        bad[16..24].copy_from_slice(&9u64.to_ne_bytes());
        assert!(decode(&record(abi::RECORD_SAMPLE, &bad), &fmt).is_err());
        bad[16..24].copy_from_slice(&u64::MAX.to_ne_bytes());
        assert!(decode(&record(abi::RECORD_SAMPLE, &bad), &fmt).is_err());
    }

    #[test]
    fn a_sample_with_a_call_chain() {
        let fmt = Format {
            sample_type: FMT.sample_type | abi::SAMPLE_CALLCHAIN,
            read_format: 0,
        };
        let chain = [
            context::KERNEL,
            0xffff_ffff_8100_0010,
            0xffff_ffff_8100_0020,
            context::USER,
            0x40_1000,
            0x40_2000,
            context::GUEST,
            0x77,
        ];
        let r = record(
            abi::RECORD_SAMPLE,
            &sample_body_with_chain(9, 100, &chain, Some(5)),
        );
        let Record::Sample(s) = decode(&r, &fmt).unwrap() else {
            panic!("not a sample")
        };
        assert_eq!(s.cgroup, Some(5), "the cgroup id after the chain");
        let cc = s.callchain.unwrap();
        assert_eq!(cc.len(), 8);
        let frames: Vec<_> = cc.frames().collect();
        assert_eq!(
            frames,
            vec![
                (Space::Kernel, 0xffff_ffff_8100_0010),
                (Space::Kernel, 0xffff_ffff_8100_0020),
                (Space::User, 0x40_1000),
                (Space::User, 0x40_2000),
                (Space::Other, 0x77),
            ]
        );
        // Without markers, frames are the user's.
        let r = record(
            abi::RECORD_SAMPLE,
            &sample_body_with_chain(9, 1, &[5, 6], None),
        );
        let fmt2 = Format {
            sample_type: fmt.sample_type & !abi::SAMPLE_CGROUP,
            read_format: 0,
        };
        let Record::Sample(s) = decode(&r, &fmt2).unwrap() else {
            panic!("not a sample")
        };
        assert!(s
            .callchain
            .unwrap()
            .frames()
            .all(|(sp, _)| sp == Space::User));
    }

    #[test]
    fn malformed_call_chains_are_errors() {
        let fmt = CHAIN_FORMAT;
        let body = sample_body_with_chain(1, 1, &[context::USER, 1, 2, 3], None);
        let nr_at = 32; // after TID, TIME, CPU, PERIOD
                        // A count past the record, absurd, or the largest u64.
        for nr in [5u64, MAX_CALLCHAIN as u64 + 1, 1 << 40, u64::MAX] {
            let mut b = body.clone();
            b[nr_at..nr_at + 8].copy_from_slice(&nr.to_ne_bytes());
            assert!(
                decode(&record(abi::RECORD_SAMPLE, &b), &fmt).is_err(),
                "{nr}"
            );
        }
        // Every truncation fails.
        let r = record(abi::RECORD_SAMPLE, &body);
        for n in 8..r.len() {
            let mut t = r[..n].to_vec();
            t[6..8].copy_from_slice(&(n as u16).to_ne_bytes());
            assert!(decode(&t, &fmt).is_err(), "{n} bytes");
        }
        // At the bound it decodes (a record of 1024 entries fits in u16).
        let deep: Vec<u64> = (0..MAX_CALLCHAIN as u64).collect();
        let r = record(
            abi::RECORD_SAMPLE,
            &sample_body_with_chain(1, 1, &deep, None),
        );
        let Record::Sample(s) = decode(&r, &fmt).unwrap() else {
            panic!("not a sample")
        };
        assert_eq!(s.callchain.unwrap().frames().count(), MAX_CALLCHAIN);
    }

    #[test]
    fn side_band_records() {
        let f = Format::default();
        let r = record(abi::RECORD_COMM, &comm_body(7, 8, "postgres"));
        assert_eq!(
            decode(&r, &f).unwrap(),
            Record::Comm {
                pid: 7,
                tid: 8,
                comm: b"postgres"
            }
        );
        let r = record(
            abi::RECORD_CGROUP,
            &cgroup_body(42, "/system.slice/x.service"),
        );
        assert_eq!(
            decode(&r, &f).unwrap(),
            Record::Cgroup {
                id: 42,
                path: b"/system.slice/x.service"
            }
        );
        assert_eq!(
            decode(&lost(1, 17), &f).unwrap(),
            Record::Lost { id: 1, lost: 17 }
        );
        assert_eq!(
            decode(&throttle(false, 4), &f).unwrap(),
            Record::Throttle {
                throttled: false,
                id: 4
            }
        );
        let exit: Vec<u8> = [1u32, 0, 2, 0]
            .iter()
            .flat_map(|w| w.to_ne_bytes())
            .chain(5u64.to_ne_bytes())
            .collect();
        assert_eq!(
            decode(&record(abi::RECORD_EXIT, &exit), &f).unwrap(),
            Record::Exit { pid: 1, tid: 2 }
        );
        assert_eq!(
            decode(&record(abi::RECORD_FORK, &exit), &f).unwrap(),
            Record::Fork {
                pid: 1,
                tid: 2,
                ptid: 0
            }
        );
        // Unknown types are skipped, whatever their body.
        assert_eq!(
            decode(&record(200, &[1, 2, 3]), &f).unwrap(),
            Record::Other(200)
        );
    }

    #[test]
    fn short_or_corrupt_input_is_an_error() {
        let f = FMT;
        assert!(decode(&[], &f).is_err());
        assert!(decode(&[9, 0, 0, 0, 0, 0, 8], &f).is_err());
        let r = record(abi::RECORD_SAMPLE, &sample_body(1, 1, 1, 1, 1, Some(1)));
        // Every truncation (with the header's size patched to match) fails.
        for n in 8..r.len() {
            let mut t = r[..n].to_vec();
            t[6..8].copy_from_slice(&(n as u16).to_ne_bytes());
            assert!(decode(&t, &f).is_err(), "{n} bytes");
        }
        // A size that does not match.
        let mut t = r.clone();
        t[6..8].copy_from_slice(&16u16.to_ne_bytes());
        assert!(decode(&t, &f).is_err());
        // A string without NUL.
        let mut c = record(abi::RECORD_COMM, &comm_body(1, 1, "abcdefg"));
        let n = c.len();
        c[n - 1] = b'x';
        assert!(decode(&c, &f).is_err());
        // A sample_type with fields the decoder does not know.
        let odd = Format {
            sample_type: 1, // IP
            read_format: 0,
        };
        assert!(decode(&r, &odd).is_err());
    }
}
