//! The perf layer: the only place that talks to `perf_event_open(2)`.
//!
//! Everything above it goes through the [`Kernel`] seam, which has two
//! implementations: [`live::LiveKernel`] (real syscalls; the only `unsafe`
//! code in the crate) and [`sim::SimKernel`] (a simulated PMU driven by a
//! sysfs fixture, for tests and demos of hardware we do not have).
//!
//! Counters are opened system-wide on one CPU (`pid = -1`, `cpu = N`) as
//! groups, with `read_format = GROUP | ID | TOTAL_TIME_ENABLED |
//! TOTAL_TIME_RUNNING`, so one `read()` of the leader returns every
//! member's value plus the group's enabled and running times. When there
//! are more events than hardware counters the kernel multiplexes: a group
//! is scheduled only part of the time, `time_running < time_enabled`, and
//! the true count is estimated as `value * time_enabled / time_running`.

#[allow(unsafe_code)]
pub mod bpf;
pub mod cgroup;
#[allow(unsafe_code)]
pub mod hotplug;
#[allow(unsafe_code)]
pub mod live;
pub mod record;
#[allow(unsafe_code)]
pub mod ring;
#[allow(unsafe_code)]
pub mod ring_open;
mod sample_spec;
pub mod sim;

use crate::problem::{OpenFailure, Problem};
use crate::sys::abi;
pub use cgroup::{CgroupHandle, CgroupOpenError};
pub use ring_open::{CallchainSpec, SampleRate, SampleSpec, Sampler};
pub use sample_spec::DEFAULT_MAX_STACK;
use std::fmt;

/// `PERF_FORMAT_TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING | ID | GROUP`.
pub const READ_FORMAT: u64 = abi::FORMAT_TOTAL_TIME_ENABLED
    | abi::FORMAT_TOTAL_TIME_RUNNING
    | abi::FORMAT_ID
    | abi::FORMAT_GROUP;

/// What to open: the encoding plus names for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventAttr {
    /// `perf_event_attr.type`.
    pub type_: u32,
    /// `config`, `config1`, `config2`, `config3`.
    pub config: [u64; 4],
    /// The event as the user wrote it (for errors).
    pub event: String,
    /// The PMU (for errors).
    pub pmu: String,
    /// `exclude_user`, `exclude_kernel`, `exclude_hv`, `exclude_host`,
    /// `exclude_guest`: what perf's event modifiers (`cycles:u`) ask for.
    pub exclude: abi::Exclude,
}

impl EventAttr {
    /// The bits of `perf_event_attr`'s flag word for [`Self::exclude`],
    /// as the bindings' setters take them.
    pub(crate) fn set_exclude(&self, a: &mut perf_event_open_sys::bindings::perf_event_attr) {
        let x = self.exclude;
        a.set_exclude_user(u64::from(x.user));
        a.set_exclude_kernel(u64::from(x.kernel));
        a.set_exclude_hv(u64::from(x.hv));
        a.set_exclude_host(u64::from(x.host));
        a.set_exclude_guest(u64::from(x.guest));
    }
}

/// An open counter. Dropping it closes the fd.
#[derive(Debug)]
pub struct Counter {
    pub(crate) inner: CounterInner,
    /// The kernel's id for this event (`PERF_EVENT_IOC_ID`), which tags
    /// its value in a group read.
    pub id: u64,
}

#[derive(Debug)]
pub(crate) enum CounterInner {
    Live(std::os::fd::OwnedFd),
    /// An index into the simulated kernel's table; closes it on drop.
    Sim(sim::SimHandle),
}

/// One group read: the group's times and each member's `(id, value)`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupReading {
    /// Nanoseconds the group was enabled.
    pub time_enabled: u64,
    /// Nanoseconds the group was actually on the PMU.
    pub time_running: u64,
    /// `(id, raw value)` per member, leader first.
    pub values: Vec<(u64, u64)>,
}

/// A group read buffer that does not have the `read_format` layout.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed group read of {len} bytes: {msg}")]
pub struct ReadFormatError {
    /// The buffer length.
    pub len: usize,
    /// What is wrong.
    pub msg: &'static str,
}

/// Parses the bytes of a group `read()` with [`READ_FORMAT`]:
/// `nr, time_enabled, time_running, { value, id } * nr`, native-endian
/// u64s. Fills `out`, reusing its allocation.
pub fn parse_group_read(buf: &[u8], out: &mut GroupReading) -> Result<(), ReadFormatError> {
    let err = |msg| ReadFormatError {
        len: buf.len(),
        msg,
    };
    if !buf.len().is_multiple_of(8) {
        return Err(err("length is not a multiple of 8"));
    }
    let word = |i: usize| -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&buf[i * 8..i * 8 + 8]);
        u64::from_ne_bytes(b)
    };
    let words = buf.len() / 8;
    if words < 3 {
        return Err(err("shorter than the header"));
    }
    let nr = word(0);
    if nr > ((words - 3) / 2) as u64 {
        return Err(err("member count exceeds the buffer"));
    }
    out.time_enabled = word(1);
    out.time_running = word(2);
    out.values.clear();
    for k in 0..nr as usize {
        out.values.push((word(4 + 2 * k), word(3 + 2 * k)));
    }
    Ok(())
}

/// What went wrong with a perf syscall, classified by errno.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// ENOENT / EOPNOTSUPP: no PMU claims this encoding here.
    NotSupported,
    /// EACCES / EPERM: not allowed (perf_event_paranoid, CAP_PERFMON).
    Privilege,
    /// EMFILE / ENFILE: out of file descriptors.
    FdLimit,
    /// EINVAL: the PMU rejects the encoding or the group.
    Invalid,
    /// ENODEV: the CPU is offline (or the PMU is gone).
    CpuOffline,
    /// ENOSPC / EBUSY: no counter free (e.g. an NMI watchdog holds it).
    Busy,
    /// Anything else.
    Other,
}

/// A perf syscall failure, naming the event, PMU and CPU.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{op} {event} on PMU {pmu}, CPU {cpu}: {} (errno {errno})", describe(*kind))]
pub struct PerfError {
    /// `open`, `read`, `enable`.
    pub op: &'static str,
    /// The event.
    pub event: String,
    /// The PMU.
    pub pmu: String,
    /// The CPU.
    pub cpu: u32,
    /// The raw errno.
    pub errno: i32,
    /// Its class.
    pub kind: ErrorKind,
}

impl PerfError {
    /// Builds an error from an errno.
    pub fn new(op: &'static str, attr: &EventAttr, cpu: u32, errno: i32) -> Self {
        PerfError {
            op,
            event: attr.event.clone(),
            pmu: attr.pmu.clone(),
            cpu,
            errno,
            kind: classify(errno),
        }
    }

    /// The typed problem, for reports: what failed where, and what to do.
    pub fn problem(&self) -> Problem {
        let o = OpenFailure {
            op: self.op,
            event: self.event.clone(),
            pmu: self.pmu.clone(),
            cpu: self.cpu,
            errno: self.errno,
        };
        match self.kind {
            ErrorKind::NotSupported => Problem::NotOnPlatform {
                detail: format!(
                    "not supported on this host (errno {}): no PMU claims this encoding: {o}",
                    o.errno
                ),
                event: o.event,
            },
            ErrorKind::Privilege => Problem::Privilege(o),
            ErrorKind::FdLimit => Problem::FdLimit(o),
            ErrorKind::Invalid => Problem::PmuRefused(o),
            ErrorKind::CpuOffline => Problem::CpuOffline(o),
            ErrorKind::Busy => Problem::Busy(o),
            ErrorKind::Other => Problem::Failed(o),
        }
    }
}

/// Classifies an errno.
pub fn classify(errno: i32) -> ErrorKind {
    match errno {
        libc::ENOENT | libc::EOPNOTSUPP => ErrorKind::NotSupported,
        libc::EACCES | libc::EPERM => ErrorKind::Privilege,
        libc::EMFILE | libc::ENFILE => ErrorKind::FdLimit,
        libc::EINVAL => ErrorKind::Invalid,
        libc::ENODEV | libc::ENXIO => ErrorKind::CpuOffline,
        libc::ENOSPC | libc::EBUSY => ErrorKind::Busy,
        _ => ErrorKind::Other,
    }
}

fn describe(k: ErrorKind) -> &'static str {
    match k {
        ErrorKind::NotSupported => "not supported on this host",
        ErrorKind::Privilege => "permission denied",
        ErrorKind::FdLimit => "out of file descriptors",
        ErrorKind::Invalid => "rejected by the PMU (invalid encoding or group)",
        ErrorKind::CpuOffline => "CPU offline",
        ErrorKind::Busy => "no free hardware counter",
        ErrorKind::Other => "failed",
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(describe(*self))
    }
}

/// Where a counter opens: on `cpu`, system-wide (`cgroup = None`), only
/// while tasks of `cgroup` run there, or only while the calling thread
/// runs there (`thread`: the start-up self-test), as a new group leader
/// (`group = None`) or as a member of `group`.
#[derive(Debug, Clone, Copy)]
pub struct OpenAt<'a> {
    /// The CPU.
    pub cpu: u32,
    /// The cgroup, for `PERF_FLAG_PID_CGROUP`.
    pub cgroup: Option<&'a CgroupHandle>,
    /// The group to join.
    pub group: Option<&'a Counter>,
    /// Counts the calling thread only (`pid = 0`).
    pub thread: bool,
}

impl<'a> OpenAt<'a> {
    /// System-wide on `cpu`.
    pub fn system_wide(cpu: u32, group: Option<&'a Counter>) -> Self {
        OpenAt {
            cpu,
            cgroup: None,
            group,
            thread: false,
        }
    }

    /// On `cpu` while the calling thread runs there (`pid = 0`).
    pub fn this_thread(cpu: u32, group: Option<&'a Counter>) -> Self {
        OpenAt {
            cpu,
            cgroup: None,
            group,
            thread: true,
        }
    }

    /// On `cpu` while tasks of `cgroup` run there.
    pub fn in_cgroup(cgroup: &'a CgroupHandle, cpu: u32, group: Option<&'a Counter>) -> Self {
        OpenAt {
            cpu,
            cgroup: Some(cgroup),
            group,
            thread: false,
        }
    }
}

/// The seam between the engine and the kernel.
///
/// Implementations must be cheap to call on the scrape path: `read_group`
/// is one `read()` for the live kernel.
///
/// An implementation provides the three system calls ([`sys_open`],
/// [`sys_enable`], [`sys_read`]), which fail with an errno; the seam's
/// callers use [`open`], [`open_in_cgroup`], [`enable_group`] and
/// [`read_group`], whose errors name the event, PMU and CPU. (A wrapper,
/// such as a test's kernel with quirks, may override those instead.)
///
/// [`sys_open`]: Self::sys_open
/// [`sys_enable`]: Self::sys_enable
/// [`sys_read`]: Self::sys_read
/// [`open`]: Self::open
/// [`open_in_cgroup`]: Self::open_in_cgroup
/// [`enable_group`]: Self::enable_group
/// [`read_group`]: Self::read_group
pub trait Kernel: Send + Sync + fmt::Debug {
    /// `perf_event_open` of `attr` where `at` says, disabled when it leads
    /// a new group; the fd is close-on-exec. The default refuses with
    /// EOPNOTSUPP.
    fn sys_open(&self, attr: &EventAttr, at: OpenAt<'_>) -> Result<Counter, i32> {
        let _ = (attr, at);
        Err(libc::EOPNOTSUPP)
    }

    /// `PERF_EVENT_IOC_ENABLE` with `PERF_IOC_FLAG_GROUP` on a leader. The
    /// default refuses with EOPNOTSUPP.
    fn sys_enable(&self, leader: &Counter) -> Result<(), i32> {
        let _ = leader;
        Err(libc::EOPNOTSUPP)
    }

    /// One `read()` of a leader with [`READ_FORMAT`] into `out`. The
    /// default refuses with EOPNOTSUPP.
    fn sys_read(&self, leader: &Counter, out: &mut GroupReading) -> Result<(), i32> {
        let _ = (leader, out);
        Err(libc::EOPNOTSUPP)
    }

    /// Opens a sampler ([`ring_open`]) system-wide on `cpu`: the event and
    /// its members, the mapped ring, enabled. Fails with the step (`open`,
    /// `mmap`, `enable`) and its errno. The default refuses with
    /// EOPNOTSUPP.
    fn sys_open_sampler(
        &self,
        spec: &SampleSpec,
        cpu: u32,
    ) -> Result<Sampler, ring_open::OpenStep> {
        let _ = (spec, cpu);
        Err(("open", libc::EOPNOTSUPP))
    }

    /// [`sys_open_sampler`](Self::sys_open_sampler), its error naming the
    /// sampled event and the CPU.
    fn open_sampler(&self, spec: &SampleSpec, cpu: u32) -> Result<Sampler, PerfError> {
        self.sys_open_sampler(spec, cpu)
            .map_err(|(op, e)| PerfError::new(op, &spec.attr, cpu, e))
    }

    /// Opens a counting event system-wide on `cpu` (`pid = -1`), disabled,
    /// as a new group leader (`group = None`) or as a member of `group`.
    /// The fd is close-on-exec.
    fn open(
        &self,
        attr: &EventAttr,
        cpu: u32,
        group: Option<&Counter>,
    ) -> Result<Counter, PerfError> {
        self.sys_open(attr, OpenAt::system_wide(cpu, group))
            .map_err(|e| PerfError::new("open", attr, cpu, e))
    }

    /// Like [`open`](Self::open), but counting only the calling thread
    /// while it runs on `cpu` (`pid = 0`): the start-up self-test.
    fn open_thread(
        &self,
        attr: &EventAttr,
        cpu: u32,
        group: Option<&Counter>,
    ) -> Result<Counter, PerfError> {
        self.sys_open(attr, OpenAt::this_thread(cpu, group))
            .map_err(|e| PerfError::new("open", attr, cpu, e))
    }

    /// Pins the calling thread to `cpu` (`sched_setaffinity`), for the
    /// self-test's spin loop. The default refuses with EOPNOTSUPP.
    fn pin_thread(&self, cpu: u32) -> Result<(), i32> {
        let _ = cpu;
        Err(libc::EOPNOTSUPP)
    }

    /// Tells the kernel the calling thread just ran the self-test's
    /// loop, about `instructions` user-space instructions: the live
    /// kernel counted them itself (nothing to do); the simulation moves
    /// its clock by the time its CPU takes to run them.
    fn thread_ran(&self, instructions: u64) {
        let _ = instructions;
    }

    /// Opens a cgroup's directory (`O_RDONLY | O_DIRECTORY | O_CLOEXEC`)
    /// for [`open_in_cgroup`](Self::open_in_cgroup). A removed cgroup
    /// fails with ENOENT ([`CgroupOpenError::gone`]).
    fn open_cgroup(&self, dir: &std::path::Path) -> Result<CgroupHandle, CgroupOpenError> {
        cgroup::open_dir(dir)
    }

    /// Like [`open`](Self::open), but counting on `cpu` only while tasks
    /// of `cgroup` run there (`PERF_FLAG_PID_CGROUP` with the directory's
    /// fd as `pid`). A cgroup removed since its directory was opened fails
    /// with ENOENT.
    fn open_in_cgroup(
        &self,
        attr: &EventAttr,
        cgroup: &CgroupHandle,
        cpu: u32,
        group: Option<&Counter>,
    ) -> Result<Counter, PerfError> {
        self.sys_open(attr, OpenAt::in_cgroup(cgroup, cpu, group))
            .map_err(|e| PerfError::new("open", attr, cpu, e))
    }

    /// Enables a whole group (`PERF_EVENT_IOC_ENABLE` with
    /// `PERF_IOC_FLAG_GROUP`) on its leader.
    fn enable_group(&self, leader: &Counter, attr: &EventAttr, cpu: u32) -> Result<(), PerfError> {
        self.sys_enable(leader)
            .map_err(|e| PerfError::new("enable", attr, cpu, e))
    }

    /// Reads a group with one `read()` of its leader into `out`.
    fn read_group(
        &self,
        leader: &Counter,
        attr: &EventAttr,
        cpu: u32,
        out: &mut GroupReading,
    ) -> Result<(), PerfError> {
        self.sys_read(leader, out)
            .map_err(|e| PerfError::new("read", attr, cpu, e))
    }

    /// The online CPUs now, for hotplug detection. The live kernel reads
    /// `devices/system/cpu/online` under `sysfs`; the simulation keeps
    /// its own. The engine calls it only when
    /// [`hotplug_generation`](Self::hotplug_generation) moved (or is
    /// `None`), a read failed with `ENODEV`, a group stopped counting, or
    /// while a CPU it saw online is offline.
    fn online_cpus(&self, sysfs: &std::path::Path) -> Option<Vec<u32>> {
        crate::pmu::read_online_cpus(sysfs).ok()
    }

    /// A cheap CPU hotplug signal: a number that changes whenever a CPU
    /// may have gone online or offline, so the engine re-reads the online
    /// list only then. Must not cost a syscall. `None` when the kernel has
    /// no such signal: the engine then re-reads the online list at every
    /// collection.
    ///
    /// The live kernel counts CPU `online`/`offline`/`add`/`remove`
    /// uevents received on a `NETLINK_KOBJECT_UEVENT` socket by a
    /// background thread ([`hotplug::UeventWatcher`]), started at the first
    /// call; the simulation counts [`sim::SimKernel::set_online`] calls.
    fn hotplug_generation(&self) -> Option<u64> {
        None
    }

    /// Blocks until the hotplug generation differs from `seen` or `timeout`
    /// passes, and returns the generation then, so a thread can apply a
    /// hotplug between scrapes. `None` when there is nothing to wait for
    /// (the default: no signal, or one that cannot be waited on).
    fn wait_hotplug(&self, seen: u64, timeout: std::time::Duration) -> Option<u64> {
        let _ = (seen, timeout);
        None
    }

    /// Raises the soft `RLIMIT_NOFILE` toward `want` (never above the hard
    /// limit) and returns the `(soft, hard)` limits in force afterwards.
    /// `None` (the default) when counters cost no file descriptors (the
    /// simulation).
    fn raise_nofile(&self, want: u64) -> Option<(u64, u64)> {
        let _ = want;
        None
    }

    /// Whether this is the simulated PMU.
    fn simulated(&self) -> bool {
        false
    }

    /// Lets `d` pass for the counters opened (a probe of the counter
    /// budget waits for the kernel to schedule them, or not): the live
    /// kernel sleeps; the simulation moves its manual clock.
    fn settle(&self, d: std::time::Duration) {
        std::thread::sleep(d);
    }

    /// How many general-purpose counters `pmu` has per CPU, where the
    /// kernel tells (`None`: unknown, as on the live kernel: sysfs does
    /// not say; the simulation: its budget). The free ones are measured
    /// (`engine::counters`).
    fn pmu_counters(&self, pmu: &str) -> Option<usize> {
        let _ = pmu;
        None
    }

    /// Whether `pmu`'s counter budget is worth measuring: always on a
    /// live kernel; in the simulation only where a budget is modelled
    /// (else every probe group would run, up to the probe's bound).
    fn measures_counters(&self, pmu: &str) -> bool {
        let _ = pmu;
        true
    }

    // The clocks plausibility is judged against (issue 27 item 2): a
    // counter's count against the CPU's busy time and maximum frequency.

    /// A monotonic clock, nanoseconds (any origin): the engine's clock for
    /// work done at a bounded rate. The live kernel's is the process's
    /// monotonic clock; the simulation's is its own (manual) clock.
    fn monotonic_ns(&self) -> u64 {
        static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        let start = START.get_or_init(std::time::Instant::now);
        u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Each CPU's busy time since boot into `out`: `<procfs>/stat` on the
    /// live kernel ([`crate::pmu::cpuclock::read_cpu_times`]); the
    /// simulation's CPUs are busy as its knob says.
    fn cpu_times(
        &self,
        procfs: &std::path::Path,
        out: &mut Vec<crate::pmu::cpuclock::CpuTime>,
    ) -> Result<(), String> {
        crate::pmu::cpuclock::read_cpu_times(procfs, out)
    }

    /// The maximum frequency of each of `cpus` (read once per engine):
    /// cpufreq, else the TSC rate, on the live kernel
    /// ([`crate::pmu::cpuclock::max_freqs`]); the simulation's knob.
    fn max_freqs(
        &self,
        sysfs: &std::path::Path,
        procfs: &std::path::Path,
        cpus: &[u32],
    ) -> Vec<(u32, crate::pmu::cpuclock::MaxFreq)> {
        crate::pmu::cpuclock::max_freqs(sysfs, procfs, cpus)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(words: &[u64]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_ne_bytes()).collect()
    }

    #[test]
    fn group_read_layout() {
        let mut r = GroupReading::default();
        parse_group_read(&bytes(&[2, 100, 50, 7, 11, 9, 12]), &mut r).unwrap();
        assert_eq!(r.time_enabled, 100);
        assert_eq!(r.time_running, 50);
        assert_eq!(r.values, vec![(11, 7), (12, 9)]);
        assert!(parse_group_read(&bytes(&[3, 1, 1, 1, 1]), &mut r).is_err());
        assert!(parse_group_read(&[0u8; 7], &mut r).is_err());
        assert!(parse_group_read(&bytes(&[0, 1]), &mut r).is_err());
        assert!(parse_group_read(&bytes(&[u64::MAX, 1, 1]), &mut r).is_err());
    }

    #[test]
    fn errno_classes() {
        assert_eq!(classify(libc::ENOENT), ErrorKind::NotSupported);
        assert_eq!(classify(libc::EACCES), ErrorKind::Privilege);
        assert_eq!(classify(libc::EMFILE), ErrorKind::FdLimit);
        assert_eq!(classify(libc::ENODEV), ErrorKind::CpuOffline);
        let attr = EventAttr {
            type_: 0,
            config: [0; 4],
            event: "cycles".into(),
            pmu: "cpu".into(),
            exclude: Default::default(),
        };
        let e = PerfError::new("open", &attr, 3, libc::EACCES);
        let s = e.to_string();
        assert!(s.contains("cycles") && s.contains("CPU 3"), "{s}");
        let p = e.problem();
        assert_eq!(p.code(), "privilege");
        assert!(
            p.what_to_do().contains("perf_event_paranoid")
                && p.what_to_do().contains("CAP_PERFMON")
        );
        let p = PerfError::new("open", &attr, 3, libc::ENOENT).problem();
        assert_eq!(p.class(), crate::problem::Class::NotOnPlatform);
    }

    /// A kernel that implements no system call.
    #[derive(Debug)]
    struct Nothing;

    impl Kernel for Nothing {}

    #[test]
    fn the_seam_names_the_event_and_cpu_of_a_failed_system_call() {
        let attr = EventAttr {
            type_: 1,
            config: [0; 4],
            event: "cpu-clock".into(),
            pmu: "software".into(),
            exclude: Default::default(),
        };
        let e = Nothing.open(&attr, 3, None).unwrap_err();
        assert_eq!((e.op, e.errno, e.cpu), ("open", libc::EOPNOTSUPP, 3));
        let spec = SampleSpec {
            attr: attr.clone(),
            members: vec![],
            rate: SampleRate::Frequency(99),
            cgroup: false,
            ring_pages: 1,
            watermark: 0,
            callchain: None,
        };
        let e = Nothing.open_sampler(&spec, 2).unwrap_err();
        assert_eq!((e.op, e.errno, e.cpu), ("open", libc::EOPNOTSUPP, 2));
        assert_eq!(e.event, "cpu-clock");
        // The live kernel refuses a simulated cgroup's handle, naming it.
        let cg = CgroupHandle {
            dir: "/nowhere".into(),
            inner: cgroup::CgroupInner::Sim(Some(0.5)),
        };
        let e = live::LiveKernel::new()
            .open_in_cgroup(&attr, &cg, 1, None)
            .unwrap_err();
        assert_eq!((e.op, e.errno, e.cpu), ("open", libc::EBADF, 1));
    }
}
