//! Why a metric is not counted: a typed [`Problem`] with its context
//! (event, PMU, CPU, errno), a message and a "what to do".
//!
//! Every place that explains unavailability renders from it: `check`
//! (text and JSON), `list`, the landing page, the log, the privilege
//! report and `perf_event_available`'s `reason` label
//! ([`Problem::code`], a small fixed set).
//!
//! Problems fall in two classes ([`Class`]): **not on this platform**
//! (the host has no such PMU, event, format or tracepoint, or no hardware
//! PMU at all: an expected absence, nothing to fix) and **failed** (the
//! host should count it but something stands in the way: privilege, a
//! seccomp profile, file descriptors, tracefs, the PMU refusing the
//! encoding, ...).
//!
//! One vocabulary of reasons ([`Reason`]): besides [`Problem`], the
//! per-cgroup issues ([`cgroup::CgroupIssue`]) and the per-cgroup
//! backend's reasons ([`backend::Why`]) and why a counter is implausible
//! ([`plausible::Implausible`]) live here, each matched on its
//! variants for its code, message and what to do; [`catalogue`] lists
//! every code for the reference.
//!
//! A leaf: plain data, no I/O. The perf layer builds open failures
//! ([`OpenFailure`]); the privilege report refines permission errors once
//! it knows what the process holds ([`Problem::Privilege`] becomes
//! [`Problem::Seccomp`] or [`Problem::Refused`] when `CAP_PERFMON` is
//! held: a process that holds it is never told to grant it).

use std::fmt;
use std::path::PathBuf;

pub mod backend;
pub mod budget;
mod catalogue;
pub mod cgroup;
pub mod plausible;
pub mod state;
pub use catalogue::{catalogue, Entry, Vocabulary};
pub use state::{CounterState, MetricStates, StateReason};

/// A reason: why something is not (fully) counted, or counted as it is.
/// The one vocabulary of reasons: [`Problem`] (a metric, PMU or CPU),
/// [`cgroup::CgroupIssue`] (per-cgroup counting), [`backend::Why`]
/// (the per-cgroup backend) and [`budget::Held`] (a PMU's counters). Each says its fixed code, its message
/// ([`Display`](fmt::Display)) and what to do, matched on its variants;
/// the renderings built from them ([`explain`](Reason::explain), the
/// reference's [`catalogue`]) are the ones the log, `check`, the pages,
/// the metrics and the live view show.
pub trait Reason: fmt::Display {
    /// A short fixed code (`perf_event_available`'s `reason`, the
    /// JSON of `check`, the pages).
    fn code(&self) -> &'static str;
    /// What the user can do about it (empty: nothing is wrong).
    fn what_to_do(&self) -> String;
    /// Expected absence (nothing to fix) or failure.
    fn class(&self) -> Class;
    /// What the code means, in a few words, whatever the details (the
    /// reference).
    fn summary(&self) -> &'static str;
    /// The message and what to do, on one line (for logs and pages):
    /// `message; what to do: ...`, or the message alone when nothing is
    /// to be done.
    fn explain(&self) -> String {
        let todo = self.what_to_do();
        if todo.is_empty() {
            self.to_string()
        } else {
            format!("{self}; what to do: {todo}")
        }
    }
}

/// A reason as the log writes it: `code=`, `reason=` (the message) and
/// `what_to_do=`, the one rendering of reasons for the log ([`log_reason`]
/// writes them), as [`Reason::explain`] is for the pages and `check`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFields {
    /// The reason's code.
    pub code: &'static str,
    /// Its message (or a grouped cause's headline).
    pub reason: String,
    /// What to do (empty: nothing is wrong).
    pub what_to_do: String,
}

impl LogFields {
    /// The fields of a reason.
    pub fn of<R: Reason + ?Sized>(r: &R) -> Self {
        LogFields {
            code: r.code(),
            reason: r.to_string(),
            what_to_do: r.what_to_do(),
        }
    }
}

/// Logs a reason at a level: the subject's fields (`[metric = %m,]`,
/// each with its trailing comma), the reason's [`LogFields`] (`code`,
/// `reason`, `what_to_do`), more fields and the message:
/// `log_reason!(Level::WARN, LogFields::of(&p), [metric = %m,], [], "counter unavailable")`.
/// Every log line that says why something is not (fully) counted goes
/// through it.
macro_rules! log_reason {
    ($level:expr, $fields:expr, [$($before:tt)*], [$($after:tt)*], $($msg:tt)+) => {{
        let $crate::problem::LogFields { code, reason, what_to_do } = $fields;
        ::tracing::event!($level, $($before)* code, %reason, %what_to_do, $($after)* $($msg)+)
    }};
}
pub(crate) use log_reason;

/// How to grant what system-wide counting needs.
pub const HOW_TO_GRANT: &str = "grant CAP_PERFMON (a file capability: `setcap cap_perfmon=ep /path/to/perf-exporter`; systemd: `AmbientCapabilities=CAP_PERFMON`; Kubernetes: `securityContext.capabilities.add: [PERFMON]`), or set kernel.perf_event_paranoid=0 for the whole host";

/// Whether a problem is an expected absence or a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Class {
    /// The host has no such PMU, event or format (or no hardware PMU):
    /// expected on this platform, nothing to fix.
    NotOnPlatform,
    /// The host should count it, but something stands in the way.
    Failed,
}

impl Class {
    /// `not_on_platform` or `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Class::NotOnPlatform => "not_on_platform",
            Class::Failed => "failed",
        }
    }
}

/// A failed perf syscall: what, where and the errno.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenFailure {
    /// `open`, `enable`, `read`.
    pub op: &'static str,
    /// The event as written.
    pub event: String,
    /// The PMU.
    pub pmu: String,
    /// The CPU.
    pub cpu: u32,
    /// The raw errno.
    pub errno: i32,
}

impl fmt::Display for OpenFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} on PMU {}, CPU {}",
            self.op, self.event, self.pmu, self.cpu
        )
    }
}

/// Why a metric (or one alternative, PMU or CPU of it) is not counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// No such PMU, event, format term or tracepoint on this host, or the
    /// kernel says no PMU claims the encoding (ENOENT/EOPNOTSUPP).
    NotOnPlatform {
        /// The event.
        event: String,
        /// What the host lacks.
        detail: String,
    },
    /// A `#` literal of a derived metric's expression that this host (or
    /// this exporter) gives no value (`#slots` without the core PMU's
    /// `caps/slots`).
    LiteralUnavailable {
        /// As written (`#slots`).
        literal: String,
        /// Why it has no value.
        detail: String,
    },
    /// Hardware or cache events without a core PMU (a VM without a
    /// virtual PMU).
    NeedsHardwarePmu {
        /// The event.
        event: String,
    },
    /// The event spec is wrong for this PMU (a value needed, too wide,
    /// a syntax error).
    Config {
        /// The event.
        event: String,
        /// What is wrong.
        detail: String,
    },
    /// tracefs is not mounted where the exporter looks, or
    /// `--path.tracefs` names a directory that is not a tracefs.
    TracefsMissing {
        /// The tracepoint.
        event: String,
        /// The `--path.tracefs` given, when it is not a tracefs.
        given: Option<PathBuf>,
    },
    /// tracefs exists but this process may not read it (mode 0700).
    TracefsUnreadable {
        /// The tracepoint.
        event: String,
        /// The tracefs mount.
        path: PathBuf,
    },
    /// None of the PMU's CPUs is online.
    NoOnlineCpu {
        /// The event.
        event: String,
        /// The PMU.
        pmu: String,
    },
    /// An alternative guarded by `requires_cpu` does not apply to the CPU
    /// identity of the PMU it would count on, or that identity is unknown.
    NoCpuEncoding {
        /// The event.
        event: String,
        /// The PMU.
        pmu: String,
        /// The identity (`GenuineIntel-6-55-4`), or why it is unknown.
        identity: String,
        /// Whether `identity` is an identity (else it is the reason).
        known: bool,
    },
    /// EACCES/EPERM without the privilege system-wide counting needs.
    Privilege(OpenFailure),
    /// EACCES/EPERM on every open although `CAP_PERFMON` is held: a
    /// seccomp profile or an LSM refuses `perf_event_open`.
    Seccomp {
        /// The failure.
        open: OpenFailure,
        /// `Seccomp:` of `/proc/self/status` (0 none, 1 strict, 2 filter).
        mode: Option<u8>,
        /// What allows system-wide counting (`CAP_PERFMON`, ...).
        allowed_by: &'static str,
    },
    /// EACCES/EPERM on this event only, although `CAP_PERFMON` is held
    /// and other events open: the kernel restricts this event.
    Refused {
        /// The failure.
        open: OpenFailure,
        /// What allows system-wide counting (`CAP_PERFMON`, ...).
        allowed_by: &'static str,
    },
    /// EMFILE/ENFILE.
    FdLimit(OpenFailure),
    /// No file descriptor is left for counters at all (`RLIMIT_NOFILE`).
    FdExhausted {
        /// The soft limit.
        soft: u64,
        /// The hard limit.
        hard: u64,
        /// Descriptors the exporter itself uses.
        used: u64,
        /// The limit that would fit the plan.
        raise_to: u64,
    },
    /// EINVAL: the PMU refuses the encoding (or the group).
    PmuRefused(OpenFailure),
    /// ENODEV/ENXIO: the CPU is offline.
    CpuOffline(OpenFailure),
    /// ENOSPC/EBUSY: no free hardware counter.
    Busy(OpenFailure),
    /// The group never ran (`time_running` stays 0): more events than
    /// counters.
    Unschedulable {
        /// The event.
        event: String,
        /// The PMU.
        pmu: String,
        /// The CPU.
        cpu: u32,
    },
    /// Any other errno.
    Failed(OpenFailure),
    /// A set's group needs more counters of a PMU than it has free (the
    /// budget measured at start-up, `engine::counters`):
    /// it could never be scheduled, so it was opened as smaller groups
    /// (which multiplex) instead of as one that never runs.
    GroupTooLarge {
        /// The set.
        set: String,
        /// The PMU.
        pmu: String,
        /// Its events in the set, per CPU.
        events: usize,
        /// The PMU's free counters.
        counters: usize,
    },
    /// A `cgroups:` section is configured, but no cgroup hierarchy perf
    /// can count on (cgroup2, or v1 with `perf_event`) is mounted.
    NoCgroupHierarchy {
        /// The mountinfo read (or the `--path.cgroupfs` given).
        mountinfo: PathBuf,
        /// What was found, and what to do.
        detail: String,
    },
    /// A matched cgroup is not counted: more than `max_cgroups` matched
    /// and busier ones (by `cpu.stat` usage) won.
    CgroupOverLimit {
        /// The cgroup, relative to the root.
        cgroup: String,
        /// The bound in force.
        max_cgroups: usize,
    },
    /// A matched cgroup vanished (or became unreadable) between discovery
    /// and use.
    CgroupGone {
        /// The cgroup, relative to the root.
        cgroup: String,
    },
    /// A matched cgroup is not counted: the `bpf` backend's program does
    /// not reach it (it walks `max_level` levels below the cgroup2 root
    /// and charges a task to at most `max_above` selected cgroups, the
    /// shallowest first), so it would only ever read zero.
    CgroupBeyondReach {
        /// The cgroup, relative to the root.
        cgroup: String,
        /// Its level below the root.
        level: usize,
        /// Its selected ancestors.
        above: usize,
        /// The first level the program does not reach.
        max_level: usize,
        /// Selected cgroups one task is charged to at most.
        max_above: usize,
    },
    /// A `**` of `cgroups.paths` stops at this directory, `max_depth`
    /// levels below the root: the cgroups below it are not matched.
    CgroupWalkTooDeep {
        /// The directory, relative to the root.
        cgroup: String,
        /// The bound.
        max_depth: usize,
    },
    /// A set named in `cgroups.sets` has uncore events: the uncore PMU
    /// counts for the whole socket and cannot be attributed to a cgroup.
    UncoreInCgroupSet {
        /// The set.
        set: String,
        /// The event.
        event: String,
        /// The uncore PMU.
        pmu: String,
    },
    /// The start-up self-test (`--collector.self-test`): a core PMU's
    /// counters did not count a calibrated loop as it ran on one CPU (the
    /// guest PMU that counts 395 instructions per second on a busy CPU).
    SelfTestFailed {
        /// The core PMU.
        pmu: String,
        /// The CPU the loop ran on.
        cpu: u32,
        /// Which bound the counts broke, with the numbers.
        detail: String,
    },
}

impl Problem {
    /// The `reason` label value: one of a small fixed set.
    pub fn code(&self) -> &'static str {
        match self {
            Problem::NotOnPlatform { .. } => "not_on_platform",
            Problem::NeedsHardwarePmu { .. } => "needs_hardware_pmu",
            Problem::Config { .. } => "config",
            Problem::TracefsMissing { .. } => "tracefs_missing",
            Problem::TracefsUnreadable { .. } => "tracefs_unreadable",
            Problem::NoOnlineCpu { .. } => "no_online_cpu",
            Problem::NoCpuEncoding { .. } => "no_cpu_encoding",
            Problem::Privilege(_) => "privilege",
            Problem::Seccomp { .. } => "seccomp",
            Problem::Refused { .. } => "refused",
            Problem::FdLimit(_) | Problem::FdExhausted { .. } => "fd_limit",
            Problem::PmuRefused(_) => "pmu_refused",
            Problem::CpuOffline(_) => "cpu_offline",
            Problem::Busy(_) => "busy",
            Problem::Unschedulable { .. } => "unschedulable",
            Problem::Failed(_) => "failed",
            Problem::GroupTooLarge { .. } => "group_too_large",
            Problem::NoCgroupHierarchy { .. } => "no_cgroup_hierarchy",
            Problem::CgroupOverLimit { .. } => "cgroup_over_limit",
            Problem::CgroupGone { .. } => "cgroup_gone",
            Problem::CgroupBeyondReach { .. } => "cgroup_beyond_reach",
            Problem::CgroupWalkTooDeep { .. } => "cgroup_walk_too_deep",
            Problem::UncoreInCgroupSet { .. } => "uncore_per_cgroup",
            Problem::SelfTestFailed { .. } => "self_test_failed",
            Problem::LiteralUnavailable { .. } => "literal_unavailable",
        }
    }

    /// Every [`code`](Self::code), for documentation and tests.
    pub const CODES: &'static [&'static str] = &[
        "not_on_platform",
        "needs_hardware_pmu",
        "config",
        "tracefs_missing",
        "tracefs_unreadable",
        "no_online_cpu",
        "privilege",
        "seccomp",
        "refused",
        "fd_limit",
        "pmu_refused",
        "cpu_offline",
        "busy",
        "unschedulable",
        "failed",
        "group_too_large",
        "no_cgroup_hierarchy",
        "cgroup_over_limit",
        "cgroup_gone",
        "uncore_per_cgroup",
        "no_cpu_encoding",
        "cgroup_beyond_reach",
        "cgroup_walk_too_deep",
        "self_test_failed",
        "literal_unavailable",
    ];

    /// Expected absence or failure.
    pub fn class(&self) -> Class {
        match self {
            // A cgroup that went away is churn, nothing to fix.
            Problem::NotOnPlatform { .. }
            | Problem::NeedsHardwarePmu { .. }
            | Problem::NoCpuEncoding { .. }
            | Problem::LiteralUnavailable { .. }
            | Problem::CgroupGone { .. } => Class::NotOnPlatform,
            _ => Class::Failed,
        }
    }

    /// The event it is about.
    pub fn event(&self) -> &str {
        match self {
            Problem::NotOnPlatform { event, .. }
            | Problem::NeedsHardwarePmu { event }
            | Problem::Config { event, .. }
            | Problem::TracefsMissing { event, .. }
            | Problem::TracefsUnreadable { event, .. }
            | Problem::NoOnlineCpu { event, .. }
            | Problem::NoCpuEncoding { event, .. }
            | Problem::Unschedulable { event, .. }
            | Problem::UncoreInCgroupSet { event, .. } => event,
            Problem::LiteralUnavailable { literal, .. } => literal,
            Problem::FdExhausted { .. }
            | Problem::GroupTooLarge { .. }
            | Problem::NoCgroupHierarchy { .. }
            | Problem::CgroupOverLimit { .. }
            | Problem::CgroupGone { .. }
            | Problem::CgroupBeyondReach { .. }
            | Problem::CgroupWalkTooDeep { .. }
            | Problem::SelfTestFailed { .. } => "",
            Problem::Seccomp { open, .. } | Problem::Refused { open, .. } => &open.event,
            Problem::Privilege(o)
            | Problem::FdLimit(o)
            | Problem::PmuRefused(o)
            | Problem::CpuOffline(o)
            | Problem::Busy(o)
            | Problem::Failed(o) => &o.event,
        }
    }

    /// The PMU it is about, when known.
    pub fn pmu(&self) -> Option<&str> {
        match self {
            Problem::NoOnlineCpu { pmu, .. }
            | Problem::NoCpuEncoding { pmu, .. }
            | Problem::Unschedulable { pmu, .. }
            | Problem::GroupTooLarge { pmu, .. }
            | Problem::UncoreInCgroupSet { pmu, .. }
            | Problem::SelfTestFailed { pmu, .. } => Some(pmu),
            _ => self.open().map(|o| o.pmu.as_str()),
        }
    }

    /// The failed syscall, for open failures.
    pub fn open(&self) -> Option<&OpenFailure> {
        match self {
            Problem::Seccomp { open, .. } | Problem::Refused { open, .. } => Some(open),
            Problem::Privilege(o)
            | Problem::FdLimit(o)
            | Problem::PmuRefused(o)
            | Problem::CpuOffline(o)
            | Problem::Busy(o)
            | Problem::Failed(o) => Some(o),
            _ => None,
        }
    }

    /// A permission error (EACCES/EPERM) of any diagnosis.
    pub fn is_permission(&self) -> bool {
        matches!(
            self,
            Problem::Privilege(_) | Problem::Seccomp { .. } | Problem::Refused { .. }
        )
    }

    /// What the user can do about it.
    pub fn what_to_do(&self) -> String {
        match self {
            Problem::NotOnPlatform { .. } => "nothing on this host: it is expected on other hardware or kernels (`perf-exporter list` shows what this host offers; add an alternative encoding to count it here)".into(),
            Problem::LiteralUnavailable { .. } => "nothing to fix on this host: the literal is a fact it does not publish; give the derived metric an alternative `expr` without it (or with a number in its place)".into(),
            Problem::NeedsHardwarePmu { .. } => "run on bare metal or give the VM a virtual PMU (KVM/QEMU: `-cpu host,pmu=on`; VMware: enable virtualized CPU performance counters; cloud: a bare-metal or full-host instance type); software events, tracepoints and `msr` work without one".into(),
            Problem::Config { .. } => "fix the event in the config (`perf-exporter list` shows the PMUs, events and format terms of this host)".into(),
            Problem::TracefsMissing { given: Some(p), .. } => format!("give --path.tracefs the tracefs mount (usually /sys/kernel/tracing: `findmnt -t tracefs`), or mount tracefs there (`mount -t tracefs nodev {}`)", p.display()),
            Problem::TracefsMissing { .. } => "mount tracefs (`mount -t tracefs nodev /sys/kernel/tracing`) or give --path.tracefs".into(),
            Problem::TracefsUnreadable { path, .. } => format!(
                "run as root, make tracefs readable (`mount -o remount,mode=0755 {}`), give a readable --path.tracefs, or leave tracepoints out; CAP_PERFMON does not help here",
                path.display()
            ),
            Problem::NoOnlineCpu { .. } => "nothing: it is counted once one of its CPUs is online".into(),
            Problem::NoCpuEncoding { identity, known: true, .. } => format!("add an alternative with `requires_cpu` matching {identity} (see perf's pmu-events/arch/*/mapfile.csv)"),
            Problem::NoCpuEncoding { .. } => "give --path.procfs (x86 reads cpuinfo there) or check that sysfs has regs/identification/midr_el1 (Arm), or add an alternative without `requires_cpu`".into(),
            Problem::Privilege(_) => format!(
                "system-wide counting needs CAP_PERFMON (or CAP_SYS_ADMIN before Linux 5.8) or kernel.perf_event_paranoid <= 0: {HOW_TO_GRANT}"
            ),
            Problem::Seccomp { mode: Some(m), .. } if *m > 0 => "allow perf_event_open in the seccomp profile: container runtimes' default profiles allow it only with CAP_SYS_ADMIN (podman, Docker); run with a profile that allows it (`--security-opt seccomp=/path/to/profile.json`; Kubernetes: `securityContext.seccompProfile` of type `Localhost`), or, if an LSM denies it, allow perf_event_open there; CAP_PERFMON is already held, and adding CAP_SYS_ADMIN would also pass such a profile but grants far more than counting needs".into(),
            Problem::Seccomp { .. } => "no seccomp filter is active, so look for an LSM that denies perf_event_open (SELinux: `ausearch -m avc`, the `perf_event` class; AppArmor: the profile's `capability perfmon` rule; a BPF LSM) and allow it there; granting capabilities does not help".into(),
            Problem::Refused { .. } => "nothing to grant: the kernel restricts this event on this host (kernel lockdown, an LSM policy, or a limit of the event itself, as for `ftrace:function`); leave it out or count another event".into(),
            Problem::FdExhausted { raise_to, .. } => format!("raise RLIMIT_NOFILE to at least {raise_to} (`ulimit -n`, systemd `LimitNOFILE=`, container `--ulimit nofile=`)"),
            Problem::FdLimit(_) => "raise RLIMIT_NOFILE (`ulimit -n`, systemd `LimitNOFILE=`, container `--ulimit nofile=`): the exporter raises its soft limit up to the hard limit itself, so raise the hard limit".into(),
            Problem::PmuRefused(o) if crate::spec::parse(&o.event).is_ok_and(|e| !e.modifiers.is_empty()) => "drop the modifiers (`:u`, `:k`, ...): this PMU counts every privilege level at once and its driver refuses any of them (PERF_PMU_CAP_NO_EXCLUDE: uncore, RAPL, C-states, msr); otherwise the driver does not take this encoding (or group) on this CPU: check the event against `perf-exporter list`".into(),
            Problem::PmuRefused(_) => "the PMU driver does not take this encoding (or group) on this CPU: check the event against `perf-exporter list` and the CPU model's event list, or put it in a set of its own".into(),
            Problem::CpuOffline(_) => "nothing: it is counted again when the CPU comes online".into(),
            Problem::Busy(_) => "another user holds the counter (e.g. the NMI watchdog: `sysctl kernel.nmi_watchdog=0`), or the set has more events than the PMU has counters: split the set".into(),
            Problem::Unschedulable { .. } => "the PMU never had a free counter for it: split the set, or stop other users of the counters (the NMI watchdog: `sysctl kernel.nmi_watchdog=0`)".into(),
            Problem::Failed(_) => "see the errno; report it if it persists".into(),
            Problem::GroupTooLarge { set, counters, .. } => format!("split set `{set}` into sets of at most {counters} events of this PMU, so each is counted as one group without multiplexing; or free counters (the NMI watchdog holds one: `sysctl kernel.nmi_watchdog=0`)"),
            Problem::NoCgroupHierarchy { .. } => "mount cgroup2 (`mount -t cgroup2 none /sys/fs/cgroup`) or the v1 perf_event controller, give the host's cgroup root with --path.cgroupfs (a DaemonSet mounts it read-only), or remove the `cgroups:` section".into(),
            Problem::CgroupOverLimit { .. } => "raise `cgroups.max_cgroups` (each counted cgroup costs one perf group per CPU), or narrow the preset or `paths:`; the busiest cgroups by `cpu.stat` usage are counted, re-ranked every `cgroups.rank_interval`".into(),
            Problem::CgroupGone { .. } => "nothing: the cgroup was removed (its workload ended); the next scan no longer matches it".into(),
            Problem::UncoreInCgroupSet { set, .. } => format!("remove `{set}` from `cgroups.sets`: it stays counted per socket; count per cgroup only core, cache and software sets"),
            Problem::CgroupWalkTooDeep { max_depth, .. } => format!("spell out the levels below it in a glob of `cgroups.paths` (`a/*/*/b`, or `a/deep/**` from a literal prefix closer to them): a `**` is followed {max_depth} levels below the root, which bounds a hostile tree"),
            Problem::CgroupBeyondReach { .. } => "count it with `cgroups.backend: perf`, or select a shallower ancestor instead (a cgroup's counts include its descendants'), or fewer nested cgroups above it".into(),
            Problem::SelfTestFailed { pmu, .. } => format!("do not take PMU {pmu}'s counts on this host as measurements: on a VM the hypervisor's virtual PMU does not count what the guest runs (give the VM a working virtual PMU: KVM/QEMU `-cpu host,pmu=on`, a bare-metal or full-host instance type); compare with `perf stat -e instructions:u,cycles:u` of a busy loop, and report it with the CPU model and hypervisor"),
        }
    }

    /// The cause in few words, where what to do and the details are
    /// said elsewhere (a page card that a note below explains).
    pub fn cause(&self) -> String {
        match self {
            Problem::NeedsHardwarePmu { .. } => {
                "needs a hardware PMU, which this host does not have".into()
            }
            p => p.to_string(),
        }
    }

    /// The message and what to do, on one line (for logs and pages):
    /// [`Reason::explain`].
    pub fn explain(&self) -> String {
        Reason::explain(self)
    }
}

impl Reason for Problem {
    fn code(&self) -> &'static str {
        Problem::code(self)
    }

    fn what_to_do(&self) -> String {
        Problem::what_to_do(self)
    }

    fn class(&self) -> Class {
        Problem::class(self)
    }

    fn summary(&self) -> &'static str {
        Problem::summary(self)
    }
}

/// Subjects (metrics, derived values, page cards) that are not
/// available for one cause: the cause said once, naming them all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grouped<'a> {
    /// The cause (the first subject's problem).
    pub problem: &'a Problem,
    /// What it applies to, in the order first seen, each once.
    pub subjects: Vec<String>,
}

/// Groups `(subject, problem)` pairs by cause: problems that say the same
/// to the user (code, message and what to do) are one cause. The groups
/// are in the order their first subject came.
pub fn group<'a, S: Into<String>>(
    items: impl IntoIterator<Item = (S, &'a Problem)>,
) -> Vec<Grouped<'a>> {
    let mut out: Vec<(Grouped<'a>, String, String)> = Vec::new();
    for (subject, p) in items {
        let (text, todo) = (p.to_string(), p.what_to_do());
        let subject = subject.into();
        let at = out
            .iter()
            .position(|(g, t, w)| g.problem.code() == p.code() && *t == text && *w == todo);
        match at {
            Some(i) => {
                let g = &mut out[i].0;
                if !g.subjects.contains(&subject) {
                    g.subjects.push(subject);
                }
            }
            None => out.push((
                Grouped {
                    problem: p,
                    subjects: vec![subject],
                },
                text,
                todo,
            )),
        }
    }
    out.into_iter().map(|(g, _, _)| g).collect()
}

impl Grouped<'_> {
    /// The cause without the subjects: for a group of metrics that need
    /// a hardware PMU, `27 metrics need a hardware PMU, which this host
    /// does not have (...)`; else the problem's message.
    pub fn headline(&self, noun: &str) -> String {
        match (self.problem, self.subjects.len()) {
            (Problem::NeedsHardwarePmu { .. }, n) if n > 1 => format!(
                "{n} {noun} need a hardware PMU, which this host does not have (no core PMU in sysfs: no `cpu`, `cpu_core`/`cpu_atom` or `armv8_pmuv3_*`; a VM without a virtual PMU?)"
            ),
            _ => self.problem.to_string(),
        }
    }

    /// The cause as the log writes it: [`headline`](Self::headline) as
    /// its reason.
    pub fn log_fields(&self, noun: &str) -> LogFields {
        LogFields {
            reason: self.headline(noun),
            ..LogFields::of(self.problem)
        }
    }

    /// The subjects, comma-separated.
    pub fn list(&self) -> String {
        self.subjects.join(", ")
    }

    /// The cause, the subjects and what to do, on one line: `27 metrics
    /// need a hardware PMU, ...: a, b, c; what to do: ...`, or `a, b: the
    /// problem; what to do: ...`.
    pub fn explain(&self, noun: &str) -> String {
        let todo = self.problem.what_to_do();
        match (self.problem, self.subjects.len()) {
            (Problem::NeedsHardwarePmu { .. }, n) if n > 1 => {
                format!(
                    "{}: {}; what to do: {todo}",
                    self.headline(noun),
                    self.list()
                )
            }
            _ => format!("{}: {}; what to do: {todo}", self.list(), self.problem),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::NotOnPlatform { detail, .. } | Problem::Config { detail, .. } => {
                f.write_str(detail)
            }
            Problem::LiteralUnavailable { literal, detail } => write!(f, "the literal `{literal}` has no value on this host: {detail}"),
            Problem::NeedsHardwarePmu { .. } => f.write_str("no core PMU in sysfs (no `cpu`, `cpu_core`/`cpu_atom` or `armv8_pmuv3_*`): hardware events need a hardware PMU, which this host (a VM without a virtual PMU?) does not have"),
            Problem::TracefsMissing { given: Some(p), .. } => write!(f, "--path.tracefs {} is not a tracefs: it has no events/ directory (tracepoint ids are read from it)", p.display()),
            Problem::TracefsMissing { .. } => f.write_str("tracefs is not mounted (tracepoint ids are read from it)"),
            Problem::TracefsUnreadable { path, .. } => write!(
                f,
                "tracefs at {} is not readable by this user (tracepoint ids are read from it)",
                path.display()
            ),
            Problem::NoOnlineCpu { pmu, .. } => write!(f, "none of the CPUs of {pmu} is online"),
            Problem::NoCpuEncoding { identity, known: true, .. } => write!(f, "no encoding for CPU {identity}"),
            Problem::NoCpuEncoding { identity, .. } => write!(f, "CPU identity unknown ({identity})"),
            Problem::Privilege(o) => write!(f, "permission denied (errno {}): {o}: this process lacks the privilege to count system-wide", o.errno),
            Problem::Seccomp { open, mode, allowed_by } => {
                write!(f, "permission denied (errno {}): {open}, and every other counter, although {allowed_by} allows system-wide counting: ", open.errno)?;
                match mode {
                    Some(m) if *m > 0 => write!(f, "a seccomp filter is active (Seccomp: {m} in /proc/self/status), so a seccomp profile (or an LSM) is the likely cause"),
                    Some(_) => f.write_str("no seccomp filter is active (Seccomp: 0), so an LSM or kernel lockdown is the likely cause"),
                    None => f.write_str("a seccomp profile or an LSM is the likely cause"),
                }
            }
            Problem::Refused { open, allowed_by } => write!(f, "permission denied (errno {}): {open}, although {allowed_by} allows system-wide counting and other events open: the kernel restricts this event, not a missing capability", open.errno),
            Problem::FdLimit(o) => write!(f, "out of file descriptors (errno {}): {o}", o.errno),
            Problem::FdExhausted { soft, hard, used, .. } => write!(
                f,
                "out of file descriptors: no file descriptor is free for counters: the open-files limit RLIMIT_NOFILE is {soft} (hard limit {hard}) and the exporter itself uses {used}"
            ),
            Problem::PmuRefused(o) => write!(f, "rejected by the PMU: invalid encoding or group (errno {}): {o}", o.errno),
            Problem::CpuOffline(o) => write!(f, "CPU offline (errno {}): {o}", o.errno),
            Problem::Busy(o) => write!(f, "no free hardware counter (errno {}): {o}", o.errno),
            Problem::Unschedulable { event, pmu, cpu } => write!(
                f,
                "{event} on {pmu} CPU {cpu}: never scheduled on the PMU (time_running stays 0)"
            ),
            Problem::Failed(o) => write!(f, "failed (errno {}): {o}", o.errno),
            Problem::GroupTooLarge { set, pmu, events, counters } => write!(
                f,
                "set `{set}` has {events} events of {pmu} but {pmu} has {counters} free counters: as one group it would never be scheduled, so its events are counted in smaller groups that take turns (multiplexed)"
            ),
            Problem::NoCgroupHierarchy { mountinfo, detail } => write!(
                f,
                "no cgroup hierarchy to count per workload in {}: {detail}",
                mountinfo.display()
            ),
            Problem::CgroupOverLimit { cgroup, max_cgroups } => write!(
                f,
                "cgroup {cgroup:?} is not counted: more than max_cgroups ({max_cgroups}) cgroups matched and busier ones won"
            ),
            Problem::CgroupGone { cgroup } => {
                write!(f, "cgroup {cgroup:?} is gone: it vanished between discovery and use")
            }
            Problem::CgroupWalkTooDeep { cgroup, max_depth } => write!(
                f,
                "cgroups below {cgroup:?} are not matched: a `**` of cgroups.paths is followed {max_depth} levels below the root and stops there"
            ),
            Problem::CgroupBeyondReach { cgroup, level, above, max_level, max_above } => {
                write!(f, "cgroup {cgroup:?} is not counted: the bpf backend's program ")?;
                if level >= max_level {
                    write!(f, "reaches cgroups down to level {} below the cgroup2 root and it is at level {level}", max_level.saturating_sub(1))
                } else {
                    write!(f, "charges a task to at most {max_above} selected cgroups, the shallowest first, and it has {above} selected ancestors")
                }
            }
            Problem::UncoreInCgroupSet { set, event, pmu } => write!(
                f,
                "set `{set}` named in cgroups.sets has {event} on the uncore PMU {pmu}: uncore counters count for the whole socket and cannot be attributed to a cgroup"
            ),
            Problem::SelfTestFailed { pmu, cpu, detail } => write!(
                f,
                "the self-test's calibrated loop on CPU {cpu} was not counted as it ran by PMU {pmu}: {detail}"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(errno: i32) -> OpenFailure {
        OpenFailure {
            op: "open",
            event: "cycles".into(),
            pmu: "cpu".into(),
            cpu: 3,
            errno,
        }
    }

    #[test]
    fn codes_are_a_small_fixed_set() {
        let all = Problem::examples();
        let mut codes: Vec<&str> = all.iter().map(Problem::code).collect();
        codes.dedup();
        assert_eq!(codes, Problem::CODES);
        for p in &all {
            assert!(!p.to_string().is_empty() && !p.what_to_do().is_empty());
        }
        let mut absent: Vec<&str> = all
            .iter()
            .filter(|p| p.class() == Class::NotOnPlatform)
            .map(Problem::code)
            .collect();
        absent.dedup();
        assert_eq!(
            absent,
            [
                "not_on_platform",
                "needs_hardware_pmu",
                "cgroup_gone",
                "no_cpu_encoding",
                "literal_unavailable"
            ]
        );
    }

    #[test]
    fn open_failures_carry_their_context() {
        let p = Problem::FdLimit(open(24));
        assert_eq!(
            p.to_string(),
            "out of file descriptors (errno 24): open cycles on PMU cpu, CPU 3"
        );
        assert!(p.what_to_do().contains("raise RLIMIT_NOFILE"));
        assert_eq!((p.event(), p.pmu()), ("cycles", Some("cpu")));
        assert_eq!(p.open().map(|o| o.errno), Some(24));
    }

    #[test]
    fn problems_are_grouped_by_cause() {
        let hw = |e: &str| Problem::NeedsHardwarePmu { event: e.into() };
        let l2 = |e: &str| Problem::NotOnPlatform {
            event: e.into(),
            detail: "no PMU matches `cpu` on this host".into(),
        };
        let ps = [
            ("perf_cpu_cycles_total", hw("cycles")),
            ("perf_l2_misses_total", l2("cpu/event=0x24/")),
            ("perf_instructions_total", hw("instructions")),
            ("perf_l2_references_total", l2("cpu/event=0x60/")),
            (
                "perf_interrupts_total",
                Problem::TracefsMissing {
                    event: "irq:irq_handler_entry".into(),
                    given: None,
                },
            ),
            (
                "perf_cpu_cycles_total",
                Problem::NeedsHardwarePmu {
                    event: "cpu/cpu-cycles/".into(),
                },
            ),
        ];
        let g = group(ps.iter().map(|(m, p)| (*m, p)));
        let lines: Vec<String> = g.iter().map(|g| g.explain("metrics")).collect();
        assert_eq!(
            lines,
            [
                format!("2 metrics need a hardware PMU, which this host does not have (no core PMU in sysfs: no `cpu`, `cpu_core`/`cpu_atom` or `armv8_pmuv3_*`; a VM without a virtual PMU?): perf_cpu_cycles_total, perf_instructions_total; what to do: {}", hw("x").what_to_do()),
                format!("perf_l2_misses_total, perf_l2_references_total: no PMU matches `cpu` on this host; what to do: {}", l2("x").what_to_do()),
                "perf_interrupts_total: tracefs is not mounted (tracepoint ids are read from it); what to do: mount tracefs (`mount -t tracefs nodev /sys/kernel/tracing`) or give --path.tracefs".to_string(),
            ]
        );
        assert_eq!(g[2].headline("metrics"), g[2].problem.to_string());
        assert_eq!(
            g[0].problem.cause(),
            "needs a hardware PMU, which this host does not have"
        );
        assert_eq!(g[2].problem.cause(), g[2].problem.to_string());
    }

    /// Only a process without privilege is told to grant CAP_PERFMON.
    #[test]
    fn only_missing_privilege_says_grant_cap_perfmon() {
        let grant = Problem::Privilege(open(13));
        assert!(grant.explain().contains("setcap cap_perfmon=ep"));
        let seccomp = Problem::Seccomp {
            open: open(1),
            mode: Some(2),
            allowed_by: "CAP_PERFMON",
        };
        let s = seccomp.explain();
        assert!(
            s.contains("Seccomp: 2") && s.contains("seccomp profile"),
            "{s}"
        );
        assert!(s.contains("--security-opt seccomp="), "{s}");
        let lsm = Problem::Seccomp {
            open: open(13),
            mode: Some(0),
            allowed_by: "CAP_PERFMON",
        };
        assert!(lsm.explain().contains("LSM"), "{}", lsm.explain());
        let refused = Problem::Refused {
            open: open(1),
            allowed_by: "CAP_PERFMON",
        };
        let tracefs = Problem::TracefsUnreadable {
            event: "sched:sched_switch".into(),
            path: "/sys/kernel/tracing".into(),
        };
        for p in [seccomp, lsm, refused, tracefs] {
            let s = p.explain();
            assert!(
                !s.contains("grant CAP_PERFMON") && !s.contains("setcap"),
                "{s}"
            );
        }
    }
}
