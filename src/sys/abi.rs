//! The kernel's perf ABI constants, taken from `perf-event-open-sys`'s
//! bindings of `include/uapi/linux/perf_event.h` rather than written by
//! hand. This module is a leaf: it depends on nothing in the crate, so
//! the event-spec grammar, the resolver and the simulated kernel can all
//! name the same numbers.
//!
//! The bindings type most of these as C enums (`c_uint`); they are
//! re-exported here with the widths `perf_event_attr` uses (`type` is a
//! `u32`, `config` and `read_format` are `u64`).

use perf_event_open_sys::bindings as b;

/// `PERF_TYPE_HARDWARE`: generic hardware events, mapped by the core PMU's
/// driver to its own encoding.
pub const TYPE_HARDWARE: u32 = b::PERF_TYPE_HARDWARE;
/// `PERF_TYPE_SOFTWARE`: events the kernel counts itself.
pub const TYPE_SOFTWARE: u32 = b::PERF_TYPE_SOFTWARE;
/// `PERF_TYPE_TRACEPOINT`: `config` is a tracefs event id.
pub const TYPE_TRACEPOINT: u32 = b::PERF_TYPE_TRACEPOINT;
/// `PERF_TYPE_HW_CACHE`: `config = cache | op << 8 | result << 16`.
pub const TYPE_HW_CACHE: u32 = b::PERF_TYPE_HW_CACHE;
/// `PERF_TYPE_RAW`: the fixed type of x86's `cpu` PMU.
pub const TYPE_RAW: u32 = b::PERF_TYPE_RAW;
/// `PERF_TYPE_BREAKPOINT`.
pub const TYPE_BREAKPOINT: u32 = b::PERF_TYPE_BREAKPOINT;
/// `PERF_PMU_TYPE_SHIFT`: where a hybrid system's extended PMU type sits
/// in the `config` of a generic hardware or cache event.
pub const PMU_TYPE_SHIFT: u32 = b::PERF_PMU_TYPE_SHIFT;

/// `PERF_COUNT_HW_CPU_CYCLES`.
pub const HW_CPU_CYCLES: u64 = b::PERF_COUNT_HW_CPU_CYCLES as u64;
/// `PERF_COUNT_HW_INSTRUCTIONS`.
pub const HW_INSTRUCTIONS: u64 = b::PERF_COUNT_HW_INSTRUCTIONS as u64;
/// `PERF_COUNT_HW_CACHE_REFERENCES`.
pub const HW_CACHE_REFERENCES: u64 = b::PERF_COUNT_HW_CACHE_REFERENCES as u64;
/// `PERF_COUNT_HW_CACHE_MISSES`.
pub const HW_CACHE_MISSES: u64 = b::PERF_COUNT_HW_CACHE_MISSES as u64;
/// `PERF_COUNT_HW_BRANCH_INSTRUCTIONS`.
pub const HW_BRANCH_INSTRUCTIONS: u64 = b::PERF_COUNT_HW_BRANCH_INSTRUCTIONS as u64;
/// `PERF_COUNT_HW_BRANCH_MISSES`.
pub const HW_BRANCH_MISSES: u64 = b::PERF_COUNT_HW_BRANCH_MISSES as u64;
/// `PERF_COUNT_HW_BUS_CYCLES`.
pub const HW_BUS_CYCLES: u64 = b::PERF_COUNT_HW_BUS_CYCLES as u64;
/// `PERF_COUNT_HW_STALLED_CYCLES_FRONTEND`.
pub const HW_STALLED_CYCLES_FRONTEND: u64 = b::PERF_COUNT_HW_STALLED_CYCLES_FRONTEND as u64;
/// `PERF_COUNT_HW_STALLED_CYCLES_BACKEND`.
pub const HW_STALLED_CYCLES_BACKEND: u64 = b::PERF_COUNT_HW_STALLED_CYCLES_BACKEND as u64;
/// `PERF_COUNT_HW_REF_CPU_CYCLES`.
pub const HW_REF_CPU_CYCLES: u64 = b::PERF_COUNT_HW_REF_CPU_CYCLES as u64;
/// `PERF_COUNT_HW_MAX`: hardware ids are below this.
pub const HW_MAX: u64 = b::PERF_COUNT_HW_MAX as u64;

/// `PERF_COUNT_HW_CACHE_L1D`.
pub const CACHE_L1D: u64 = b::PERF_COUNT_HW_CACHE_L1D as u64;
/// `PERF_COUNT_HW_CACHE_L1I`.
pub const CACHE_L1I: u64 = b::PERF_COUNT_HW_CACHE_L1I as u64;
/// `PERF_COUNT_HW_CACHE_LL`.
pub const CACHE_LL: u64 = b::PERF_COUNT_HW_CACHE_LL as u64;
/// `PERF_COUNT_HW_CACHE_DTLB`.
pub const CACHE_DTLB: u64 = b::PERF_COUNT_HW_CACHE_DTLB as u64;
/// `PERF_COUNT_HW_CACHE_ITLB`.
pub const CACHE_ITLB: u64 = b::PERF_COUNT_HW_CACHE_ITLB as u64;
/// `PERF_COUNT_HW_CACHE_BPU`.
pub const CACHE_BPU: u64 = b::PERF_COUNT_HW_CACHE_BPU as u64;
/// `PERF_COUNT_HW_CACHE_NODE`.
pub const CACHE_NODE: u64 = b::PERF_COUNT_HW_CACHE_NODE as u64;
/// `PERF_COUNT_HW_CACHE_MAX`.
pub const CACHE_MAX: u64 = b::PERF_COUNT_HW_CACHE_MAX as u64;
/// `PERF_COUNT_HW_CACHE_OP_READ`.
pub const CACHE_OP_READ: u64 = b::PERF_COUNT_HW_CACHE_OP_READ as u64;
/// `PERF_COUNT_HW_CACHE_OP_WRITE`.
pub const CACHE_OP_WRITE: u64 = b::PERF_COUNT_HW_CACHE_OP_WRITE as u64;
/// `PERF_COUNT_HW_CACHE_OP_PREFETCH`.
pub const CACHE_OP_PREFETCH: u64 = b::PERF_COUNT_HW_CACHE_OP_PREFETCH as u64;
/// `PERF_COUNT_HW_CACHE_OP_MAX`.
pub const CACHE_OP_MAX: u64 = b::PERF_COUNT_HW_CACHE_OP_MAX as u64;
/// `PERF_COUNT_HW_CACHE_RESULT_ACCESS`.
pub const CACHE_RESULT_ACCESS: u64 = b::PERF_COUNT_HW_CACHE_RESULT_ACCESS as u64;
/// `PERF_COUNT_HW_CACHE_RESULT_MISS`.
pub const CACHE_RESULT_MISS: u64 = b::PERF_COUNT_HW_CACHE_RESULT_MISS as u64;
/// `PERF_COUNT_HW_CACHE_RESULT_MAX`.
pub const CACHE_RESULT_MAX: u64 = b::PERF_COUNT_HW_CACHE_RESULT_MAX as u64;

/// `PERF_COUNT_SW_CPU_CLOCK` (nanoseconds).
pub const SW_CPU_CLOCK: u64 = b::PERF_COUNT_SW_CPU_CLOCK as u64;
/// `PERF_COUNT_SW_TASK_CLOCK` (nanoseconds).
pub const SW_TASK_CLOCK: u64 = b::PERF_COUNT_SW_TASK_CLOCK as u64;
/// `PERF_COUNT_SW_PAGE_FAULTS`.
pub const SW_PAGE_FAULTS: u64 = b::PERF_COUNT_SW_PAGE_FAULTS as u64;
/// `PERF_COUNT_SW_CONTEXT_SWITCHES`.
pub const SW_CONTEXT_SWITCHES: u64 = b::PERF_COUNT_SW_CONTEXT_SWITCHES as u64;
/// `PERF_COUNT_SW_CPU_MIGRATIONS`.
pub const SW_CPU_MIGRATIONS: u64 = b::PERF_COUNT_SW_CPU_MIGRATIONS as u64;
/// `PERF_COUNT_SW_PAGE_FAULTS_MIN`.
pub const SW_PAGE_FAULTS_MIN: u64 = b::PERF_COUNT_SW_PAGE_FAULTS_MIN as u64;
/// `PERF_COUNT_SW_PAGE_FAULTS_MAJ`.
pub const SW_PAGE_FAULTS_MAJ: u64 = b::PERF_COUNT_SW_PAGE_FAULTS_MAJ as u64;
/// `PERF_COUNT_SW_ALIGNMENT_FAULTS`.
pub const SW_ALIGNMENT_FAULTS: u64 = b::PERF_COUNT_SW_ALIGNMENT_FAULTS as u64;
/// `PERF_COUNT_SW_EMULATION_FAULTS`.
pub const SW_EMULATION_FAULTS: u64 = b::PERF_COUNT_SW_EMULATION_FAULTS as u64;
/// `PERF_COUNT_SW_DUMMY`.
pub const SW_DUMMY: u64 = b::PERF_COUNT_SW_DUMMY as u64;
/// `PERF_COUNT_SW_BPF_OUTPUT`.
pub const SW_BPF_OUTPUT: u64 = b::PERF_COUNT_SW_BPF_OUTPUT as u64;
/// `PERF_COUNT_SW_CGROUP_SWITCHES`.
pub const SW_CGROUP_SWITCHES: u64 = b::PERF_COUNT_SW_CGROUP_SWITCHES as u64;
/// `PERF_COUNT_SW_MAX`: software ids are below this.
pub const SW_MAX: u64 = b::PERF_COUNT_SW_MAX as u64;

/// `PERF_FORMAT_TOTAL_TIME_ENABLED`.
pub const FORMAT_TOTAL_TIME_ENABLED: u64 = b::PERF_FORMAT_TOTAL_TIME_ENABLED as u64;
/// `PERF_FORMAT_TOTAL_TIME_RUNNING`.
pub const FORMAT_TOTAL_TIME_RUNNING: u64 = b::PERF_FORMAT_TOTAL_TIME_RUNNING as u64;
/// `PERF_FORMAT_ID`.
pub const FORMAT_ID: u64 = b::PERF_FORMAT_ID as u64;
/// `PERF_FORMAT_GROUP`.
pub const FORMAT_GROUP: u64 = b::PERF_FORMAT_GROUP as u64;

/// `PERF_SAMPLE_TID`: a sample carries `u32 pid, tid`.
pub const SAMPLE_TID: u64 = b::PERF_SAMPLE_TID as u64;
/// `PERF_SAMPLE_TIME`: `u64 time`.
pub const SAMPLE_TIME: u64 = b::PERF_SAMPLE_TIME as u64;
/// `PERF_SAMPLE_READ`: a `read_format` block.
pub const SAMPLE_READ: u64 = b::PERF_SAMPLE_READ as u64;
/// `PERF_SAMPLE_ID`: `u64 id`.
pub const SAMPLE_ID: u64 = b::PERF_SAMPLE_ID as u64;
/// `PERF_SAMPLE_CPU`: `u32 cpu, res`.
pub const SAMPLE_CPU: u64 = b::PERF_SAMPLE_CPU as u64;
/// `PERF_SAMPLE_PERIOD`: `u64 period`.
pub const SAMPLE_PERIOD: u64 = b::PERF_SAMPLE_PERIOD as u64;
/// `PERF_SAMPLE_IDENTIFIER`: `u64 id`, first.
pub const SAMPLE_IDENTIFIER: u64 = b::PERF_SAMPLE_IDENTIFIER as u64;
/// `PERF_SAMPLE_CALLCHAIN`: `u64 nr; u64 ips[nr]`.
pub const SAMPLE_CALLCHAIN: u64 = b::PERF_SAMPLE_CALLCHAIN as u64;
/// `PERF_SAMPLE_CGROUP` (Linux ≥ 5.7): `u64 cgroup id`.
pub const SAMPLE_CGROUP: u64 = b::PERF_SAMPLE_CGROUP as u64;
/// `PERF_FORMAT_LOST` (Linux ≥ 6.0): a `u64 lost` after each id.
pub const FORMAT_LOST: u64 = b::PERF_FORMAT_LOST as u64;

/// `PERF_RECORD_LOST`: `u64 id, lost`.
pub const RECORD_LOST: u32 = b::PERF_RECORD_LOST;
/// `PERF_RECORD_COMM`: `u32 pid, tid; char comm[]`.
pub const RECORD_COMM: u32 = b::PERF_RECORD_COMM;
/// `PERF_RECORD_EXIT`: `u32 pid, ppid, tid, ptid; u64 time`.
pub const RECORD_EXIT: u32 = b::PERF_RECORD_EXIT;
/// `PERF_RECORD_THROTTLE`: `u64 time, id, stream_id`.
pub const RECORD_THROTTLE: u32 = b::PERF_RECORD_THROTTLE;
/// `PERF_RECORD_UNTHROTTLE`: as `THROTTLE`.
pub const RECORD_UNTHROTTLE: u32 = b::PERF_RECORD_UNTHROTTLE;
/// `PERF_RECORD_FORK`: as `EXIT`.
pub const RECORD_FORK: u32 = b::PERF_RECORD_FORK;
/// `PERF_RECORD_SAMPLE`: the fields of `sample_type`, in ABI order.
pub const RECORD_SAMPLE: u32 = b::PERF_RECORD_SAMPLE;
/// `PERF_RECORD_CGROUP` (Linux ≥ 5.7): `u64 id; char path[]`.
pub const RECORD_CGROUP: u32 = b::PERF_RECORD_CGROUP;

/// `PERF_FLAG_FD_CLOEXEC`.
pub const FLAG_FD_CLOEXEC: u64 = b::PERF_FLAG_FD_CLOEXEC as u64;
/// `PERF_FLAG_PID_CGROUP`: `pid` is a cgroup directory's fd.
pub const FLAG_PID_CGROUP: u64 = b::PERF_FLAG_PID_CGROUP as u64;

/// The privilege-level filters of `perf_event_attr` (`exclude_user`,
/// `exclude_kernel`, `exclude_hv`, `exclude_host`, `exclude_guest`), which
/// perf's event modifiers (`cycles:u`) set. All clear: count everything,
/// as an event without modifiers does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Exclude {
    /// `exclude_user`: do not count user space.
    pub user: bool,
    /// `exclude_kernel`: do not count the kernel.
    pub kernel: bool,
    /// `exclude_hv`: do not count the hypervisor.
    pub hv: bool,
    /// `exclude_host`: do not count while the host runs (only KVM guests).
    pub host: bool,
    /// `exclude_guest`: do not count while a KVM guest runs.
    pub guest: bool,
}

impl Exclude {
    /// Whether any bit is set (the kernel's `event_has_any_exclude_flag`,
    /// which also counts `exclude_idle`, never set here).
    pub fn any(self) -> bool {
        self.user || self.kernel || self.hv || self.host || self.guest
    }
}

/// `INTEL_ARCH_EVENT_MASK`: an Intel core event's code and unit mask.
const INTEL_ARCH_EVENT_MASK: u64 = 0xffff;
/// `INTEL_TD_SLOTS`: the perf-metrics `slots` event (`event=0x00,umask=0x4`).
pub const INTEL_TD_SLOTS: u64 = 0x0400;

/// What an Intel core encoding is to the kernel's perf-metrics rules
/// (`arch/x86/events/perf_event.h`, `is_topdown_event`): `Some(true)` for
/// `slots`, `Some(false)` for a metric event (event code 0, unit mask from
/// `INTEL_TD_METRIC_RETIRING` 0x80 to `INTEL_TD_METRIC_MAX` 0x87, the
/// `topdown-*` sysfs events), `None` for anything else. It applies only on
/// a core PMU with the perf-metrics feature (one whose sysfs lists
/// `slots`); the caller checks that.
pub fn intel_topdown(config: u64) -> Option<bool> {
    match config & INTEL_ARCH_EVENT_MASK {
        INTEL_TD_SLOTS => Some(true),
        c if c & 0xff == 0 && (0x80..=0x87).contains(&(c >> 8)) => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The numbers perf_event_open(2) documents, so a bindings upgrade
    /// that renumbered anything would be noticed.
    #[test]
    fn documented_values() {
        assert_eq!(
            (TYPE_HARDWARE, TYPE_SOFTWARE, TYPE_TRACEPOINT, TYPE_HW_CACHE),
            (0, 1, 2, 3)
        );
        assert_eq!((TYPE_RAW, TYPE_BREAKPOINT, PMU_TYPE_SHIFT), (4, 5, 32));
        assert_eq!((HW_CPU_CYCLES, HW_REF_CPU_CYCLES, HW_MAX), (0, 9, 10));
        assert_eq!(
            (CACHE_NODE, CACHE_OP_PREFETCH, CACHE_RESULT_MISS),
            (6, 2, 1)
        );
        assert_eq!((SW_CPU_CLOCK, SW_CGROUP_SWITCHES, SW_MAX), (0, 11, 12));
        assert_eq!(
            FORMAT_TOTAL_TIME_ENABLED | FORMAT_TOTAL_TIME_RUNNING | FORMAT_ID | FORMAT_GROUP,
            0xf
        );
        assert_eq!((FLAG_FD_CLOEXEC, FLAG_PID_CGROUP), (8, 4));
        assert_eq!(
            (SAMPLE_TID, SAMPLE_PERIOD, SAMPLE_CGROUP, FORMAT_LOST),
            (2, 256, 1 << 21, 16)
        );
        assert_eq!((RECORD_LOST, RECORD_SAMPLE, RECORD_CGROUP), (2, 9, 19));
    }

    #[test]
    fn intel_topdown_encodings() {
        // The sysfs strings of cpu_core (tests/fixtures intel-hybrid).
        assert_eq!(intel_topdown(0x0400), Some(true));
        for retiring_to_mem_bound in [0x8000, 0x8100, 0x8300, 0x8700] {
            assert_eq!(intel_topdown(retiring_to_mem_bound), Some(false));
        }
        // cpu_atom's topdown-retiring (event=0xc2), cycles, a umask past
        // the metrics, and the hybrid extended type in bits 32-63.
        for other in [0xc2, 0x3c, 0x8800, 0x8001, 0x0000_000a_0000_0000] {
            assert_eq!(intel_topdown(other), None);
        }
        assert_eq!(intel_topdown(0x0000_0004_0000_8200), Some(false));
    }
}
