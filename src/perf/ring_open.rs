//! Sampling events: the open sampler ([`Sampler`]: the event's fd, its
//! members' fds and its [`Ring`]) of a [`SampleSpec`].
//!
//! A sampler is opened system-wide on one CPU (`pid = -1`), disabled; its
//! ring is mapped; then it is enabled (`PERF_EVENT_IOC_ENABLE` with
//! `PERF_IOC_FLAG_GROUP`), so no sample is taken before there is a ring
//! to hold it. The attr asks for:
//!
//! * `sample_type = TID | TIME | CPU | PERIOD` (+ `CGROUP` when attributing
//!   to cgroups, Linux ≥ 5.7; + `READ` with a group);
//! * `freq = 1` and `sample_freq = Hz` (the kernel adjusts the period to
//!   reach the frequency, so each sample's `PERIOD` says how many events
//!   it stands for), or a fixed `sample_period`;
//! * `comm = 1`, `task = 1` (`PERF_RECORD_COMM`, `FORK`/`EXIT`: names of
//!   the tasks that run on the CPU), `cgroup = 1` (`PERF_RECORD_CGROUP`:
//!   the id → path of every cgroup created while sampling), and
//!   `sample_id_all = 1` (those records end with the sample's TID, TIME,
//!   CPU fields too);
//! * with call stacks (`callchain`), `PERF_SAMPLE_CALLCHAIN`,
//!   `sample_max_stack` and `exclude_callchain_kernel`/`_user`;
//! * `watermark = 1` with `wakeup_watermark` bytes: the fd polls readable
//!   once that much is in the ring, so a reader sleeps in `epoll` between
//!   batches instead of polling.
//!
//! With a group (`members`, e.g. `instructions` under a `cycles` leader)
//! the leader has `read_format = GROUP | ID` and `PERF_SAMPLE_READ`: each
//! sample carries every member's running count, and the difference from
//! the previous sample on the CPU is what the member counted in between.

use super::ring::{Drained, Ring, RingError};
pub use super::sample_spec::{CallchainSpec, SampleRate, SampleSpec};
use super::EventAttr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// An open sampler on one CPU. Dropping it unmaps the ring and closes the
/// fds.
#[derive(Debug)]
pub struct Sampler {
    pub(crate) inner: SamplerInner,
    /// The CPU it samples.
    pub cpu: u32,
    /// The kernel's ids of the leader and the members, in order (a group
    /// read in a sample is tagged with them).
    pub ids: Vec<u64>,
}

#[derive(Debug)]
pub(crate) enum SamplerInner {
    Live {
        ring: Ring,
        leader: OwnedFd,
        _members: Vec<OwnedFd>,
    },
    Sim(super::sim::samples::SimSampler),
}

impl Sampler {
    /// The fd that polls readable at the wakeup watermark (`None` for the
    /// simulation, which is drained on a timer).
    pub fn poll_fd(&self) -> Option<RawFd> {
        match &self.inner {
            SamplerInner::Live { leader, .. } => Some(leader.as_raw_fd()),
            SamplerInner::Sim(_) => None,
        }
    }

    /// The fd registered with the current tokio runtime's reactor for
    /// readability (the wakeup watermark), or `None` for the simulation.
    /// The registration owns a duplicate of the fd, so it may outlive the
    /// sampler safely. Must be called inside a tokio runtime with I/O.
    pub fn readiness(&self) -> Option<std::io::Result<AsyncFd<OwnedFd>>> {
        let SamplerInner::Live { leader, .. } = &self.inner else {
            return None;
        };
        Some(leader.try_clone().and_then(|fd| {
            // SAFETY: the AsyncFd owns `fd` (a duplicate made for it), so
            // the descriptor stays open and refers to the same file until
            // the AsyncFd drops it; OwnedFd's as_raw_fd never changes.
            unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }
                .map_err(|e| e.into_parts().1)
        }))
    }

    /// Hands every record in the ring to `f` (the bytes of one record,
    /// header included) and frees their space.
    pub fn drain(&mut self, f: &mut dyn FnMut(&[u8])) -> Result<Drained, RingError> {
        match &mut self.inner {
            SamplerInner::Live { ring, .. } => ring.drain(f),
            SamplerInner::Sim(s) => Ok(s.drain(f)),
        }
    }

    /// The bytes of its ring's mapping (0 for the simulation).
    pub fn ring_bytes(&self) -> usize {
        match &self.inner {
            SamplerInner::Live { ring, .. } => ring.data_size() + super::ring::page_size(),
            SamplerInner::Sim(_) => 0,
        }
    }
}

/// A failed step of opening a sampler: the operation and the errno.
pub type OpenStep = (&'static str, i32);

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// The `perf_event_attr` of a sampler's leader (`sample`) or member.
fn attr_of(spec: &SampleSpec, e: &EventAttr, leader: bool) -> sys::bindings::perf_event_attr {
    let mut a = sys::bindings::perf_event_attr {
        type_: e.type_,
        size: std::mem::size_of::<sys::bindings::perf_event_attr>() as u32,
        config: e.config[0],
        ..Default::default()
    };
    a.__bindgen_anon_3.config1 = e.config[1];
    a.__bindgen_anon_4.config2 = e.config[2];
    a.config3 = e.config[3];
    e.set_exclude(&mut a);
    if leader {
        a.sample_type = spec.sample_type();
        a.read_format = spec.read_format();
        match spec.rate {
            SampleRate::Frequency(hz) => {
                a.set_freq(1);
                a.__bindgen_anon_1.sample_freq = hz;
            }
            SampleRate::Period(p) => a.__bindgen_anon_1.sample_period = p,
        }
        a.set_disabled(1);
        a.set_comm(1);
        a.set_task(1);
        a.set_cgroup(u64::from(spec.cgroup));
        a.set_sample_id_all(1);
        a.set_watermark(1);
        if let Some(cc) = spec.callchain {
            a.sample_max_stack = cc.max_stack;
            a.set_exclude_callchain_kernel(u64::from(cc.exclude_kernel));
            a.set_exclude_callchain_user(u64::from(cc.exclude_user));
        }
        let data = spec.ring_pages * super::ring::page_size();
        a.__bindgen_anon_2.wakeup_watermark = spec.watermark_for(data);
    }
    a
}

/// `perf_event_open` of one event system-wide on `cpu`, close-on-exec.
fn open_one(
    mut a: sys::bindings::perf_event_attr,
    cpu: u32,
    group: RawFd,
) -> Result<OwnedFd, OpenStep> {
    let cpu = i32::try_from(cpu).map_err(|_| ("open", libc::EINVAL))?;
    // SAFETY: `a` is a fully initialised perf_event_attr whose `size` is
    // the struct's; the pointer is valid for the call. pid = -1 with a CPU
    // samples every task on that CPU.
    let fd = unsafe {
        sys::perf_event_open(
            &mut a,
            -1,
            cpu,
            group,
            sys::bindings::PERF_FLAG_FD_CLOEXEC as libc::c_ulong,
        )
    };
    if fd < 0 {
        return Err(("open", errno()));
    }
    // SAFETY: the kernel just returned this fd and nothing else owns it.
    Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}

fn id_of(fd: &OwnedFd) -> Result<u64, OpenStep> {
    let mut id = 0u64;
    // SAFETY: PERF_EVENT_IOC_ID writes one u64 through a pointer to a live
    // local.
    if unsafe { sys::ioctls::ID(fd.as_raw_fd(), &mut id) } < 0 {
        return Err(("ioctl", errno()));
    }
    Ok(id)
}

/// Opens a sampler on the live kernel: the leader (disabled) and its
/// members, the ring, then enables the group.
pub(crate) fn open_live(spec: &SampleSpec, cpu: u32) -> Result<Sampler, OpenStep> {
    let leader = open_one(attr_of(spec, &spec.attr, true), cpu, -1)?;
    let mut ids = vec![id_of(&leader)?];
    let mut members = Vec::new();
    for m in &spec.members {
        let fd = open_one(attr_of(spec, m, false), cpu, leader.as_raw_fd())?;
        ids.push(id_of(&fd)?);
        members.push(fd);
    }
    use std::os::fd::AsFd;
    let ring = Ring::map(leader.as_fd(), spec.ring_pages).map_err(|e| ("mmap", e))?;
    // SAFETY: ENABLE takes an integer flag, no pointer; the fd is open.
    let r = unsafe { sys::ioctls::ENABLE(leader.as_raw_fd(), sys::bindings::PERF_IOC_FLAG_GROUP) };
    if r < 0 {
        return Err(("enable", errno()));
    }
    Ok(Sampler {
        inner: SamplerInner::Live {
            ring,
            leader,
            _members: members,
        },
        cpu,
        ids,
    })
}

use perf_event_open_sys as sys;
