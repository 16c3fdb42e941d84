//! The live kernel: real `perf_event_open`, ioctl and `read` syscalls.

use super::cgroup::CgroupInner;
use super::hotplug::UeventWatcher;
use super::{
    parse_group_read, Counter, CounterInner, EventAttr, GroupReading, Kernel, OpenAt, READ_FORMAT,
};
use perf_event_open_sys as sys;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::OnceLock;

/// Real syscalls.
#[derive(Debug, Default)]
pub struct LiveKernel {
    /// The CPU hotplug uevent watcher, started by the first
    /// [`Kernel::hotplug_generation`] call (`None` if it cannot start).
    hotplug: OnceLock<Option<UeventWatcher>>,
}

impl LiveKernel {
    /// The live kernel. Nothing is opened until it is used.
    pub fn new() -> Self {
        Self::default()
    }
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn raw_fd(c: &Counter) -> Option<i32> {
    match &c.inner {
        CounterInner::Live(fd) => Some(fd.as_raw_fd()),
        CounterInner::Sim(_) => None,
    }
}

impl Kernel for LiveKernel {
    /// `perf_event_open(attr, pid, cpu, group, flags | FD_CLOEXEC)`, then
    /// the event's id: `pid = -1` system-wide, the cgroup directory's fd
    /// with `PERF_FLAG_PID_CGROUP`.
    fn sys_open(&self, attr: &EventAttr, at: OpenAt<'_>) -> Result<Counter, i32> {
        let (pid, flags) = match at.cgroup {
            None if at.thread => (0, 0),
            None => (-1, 0),
            Some(cg) => match &cg.inner {
                CgroupInner::Live(dir) => (
                    dir.as_raw_fd(),
                    sys::bindings::PERF_FLAG_PID_CGROUP as libc::c_ulong,
                ),
                CgroupInner::Sim(_) => return Err(libc::EBADF),
            },
        };
        let mut a = sys::bindings::perf_event_attr {
            type_: attr.type_,
            size: std::mem::size_of::<sys::bindings::perf_event_attr>() as u32,
            config: attr.config[0],
            read_format: READ_FORMAT,
            ..Default::default()
        };
        a.__bindgen_anon_3.config1 = attr.config[1];
        a.__bindgen_anon_4.config2 = attr.config[2];
        a.config3 = attr.config[3];
        attr.set_exclude(&mut a);
        // Only the leader starts disabled: enabling it enables the group.
        a.set_disabled(u64::from(at.group.is_none()));
        let group_fd = match at.group {
            Some(g) => raw_fd(g).ok_or(libc::EBADF)?,
            None => -1,
        };
        let cpu = i32::try_from(at.cpu).map_err(|_| libc::EINVAL)?;
        // SAFETY: `a` is a fully initialised perf_event_attr whose `size`
        // matches the struct the kernel reads; the pointer is valid for
        // the duration of the call. pid=-1 with a CPU counts system-wide,
        // pid=0 the calling thread;
        // with PERF_FLAG_PID_CGROUP, pid is an open cgroup directory fd
        // that the caller keeps open across the call.
        let fd = unsafe {
            sys::perf_event_open(
                &mut a,
                pid,
                cpu,
                group_fd,
                flags | sys::bindings::PERF_FLAG_FD_CLOEXEC as libc::c_ulong,
            )
        };
        if fd < 0 {
            return Err(errno());
        }
        // SAFETY: the kernel just returned this fd to us and nothing else
        // owns it; OwnedFd closes it on drop.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut id = 0u64;
        // SAFETY: PERF_EVENT_IOC_ID writes one u64 through the pointer,
        // which points at a live local.
        let r = unsafe { sys::ioctls::ID(owned.as_raw_fd(), &mut id) };
        if r < 0 {
            return Err(errno());
        }
        Ok(Counter {
            inner: CounterInner::Live(owned),
            id,
        })
    }

    /// `sched_setaffinity(0, {cpu})`: the calling thread only.
    fn pin_thread(&self, cpu: u32) -> Result<(), i32> {
        let cpu = usize::try_from(cpu).map_err(|_| libc::EINVAL)?;
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(libc::EINVAL);
        }
        // SAFETY: cpu_set_t is plain data; all zeroes is the empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: `cpu` is below CPU_SETSIZE (checked above), so CPU_SET
        // writes inside `set`.
        unsafe { libc::CPU_SET(cpu, &mut set) };
        // SAFETY: the pointer is to a live, initialised cpu_set_t of the
        // size passed; pid 0 is the calling thread.
        let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
        if r < 0 {
            return Err(errno());
        }
        Ok(())
    }

    fn sys_enable(&self, leader: &Counter) -> Result<(), i32> {
        let fd = raw_fd(leader).ok_or(libc::EBADF)?;
        // SAFETY: ENABLE takes an integer flag, no pointer; fd is open.
        let r = unsafe { sys::ioctls::ENABLE(fd, sys::bindings::PERF_IOC_FLAG_GROUP) };
        if r < 0 {
            return Err(errno());
        }
        Ok(())
    }

    fn sys_read(&self, leader: &Counter, out: &mut GroupReading) -> Result<(), i32> {
        let fd = raw_fd(leader).ok_or(libc::EBADF)?;
        // Room for 3 header words + 2 per member; groups are small, so a
        // stack buffer serves every realistic group without allocating.
        let mut buf = [0u8; (3 + 2 * 64) * 8];
        // SAFETY: buf is a live, writable buffer of buf.len() bytes.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            return Err(errno());
        }
        let n = n as usize;
        parse_group_read(&buf[..n], out).map_err(|_| libc::EIO)
    }

    fn sys_open_sampler(
        &self,
        spec: &super::SampleSpec,
        cpu: u32,
    ) -> Result<super::Sampler, super::ring_open::OpenStep> {
        super::ring_open::open_live(spec, cpu)
    }

    fn hotplug_generation(&self) -> Option<u64> {
        self.hotplug
            .get_or_init(|| match UeventWatcher::start() {
                Ok(w) => Some(w),
                Err(e) => {
                    tracing::warn!(error = %e, "no CPU hotplug signal; reading the online CPU list at every scrape");
                    None
                }
            })
            .as_ref()
            .and_then(UeventWatcher::generation)
    }

    fn wait_hotplug(&self, seen: u64, timeout: std::time::Duration) -> Option<u64> {
        self.hotplug.get()?.as_ref()?.wait(seen, timeout)
    }

    fn raise_nofile(&self, want: u64) -> Option<(u64, u64)> {
        Some(raise_nofile(want))
    }
}

/// Raises the soft RLIMIT_NOFILE toward `want` (never above the hard
/// limit). Returns the `(soft, hard)` limits in force afterwards.
pub fn raise_nofile(want: u64) -> (u64, u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit through a valid pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return (0, 0);
    }
    if lim.rlim_cur < want && lim.rlim_cur < lim.rlim_max {
        let new = libc::rlimit {
            rlim_cur: want.min(lim.rlim_max),
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit reads one rlimit through a valid pointer.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &new) } == 0 {
            lim.rlim_cur = new.rlim_cur;
        }
    }
    (lim.rlim_cur, lim.rlim_max)
}
