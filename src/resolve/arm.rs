//! Generic events on an Arm PMUv3 core PMU (`armv8_pmuv3_*`,
//! `armv8_cortex_*`, `armv9_neoverse_*`, ...).
//!
//! The Arm driver publishes no x86-style generic names (`cpu-cycles`,
//! ...). It maps a `PERF_TYPE_HARDWARE` id or `PERF_TYPE_HW_CACHE` triple
//! to an architectural PMUv3 event (`armv8_pmuv3_perf_map` and
//! `armv8_pmuv3_perf_cache_map` in `drivers/perf/arm_pmuv3.c`) and refuses
//! the open with ENOENT unless the CPU implements that event (its PMCEID
//! bit). The same bit decides whether the event is shown in the PMU's
//! `events/` directory (`armv8pmu_event_attr_is_visible`), so a generic
//! event is available exactly when the sysfs event it maps to exists.

use crate::pmu::Pmu;
use crate::sys::abi::{
    CACHE_BPU, CACHE_DTLB, CACHE_ITLB, CACHE_L1D, CACHE_L1I, CACHE_LL, CACHE_OP_READ,
    CACHE_RESULT_ACCESS, CACHE_RESULT_MISS, HW_BRANCH_INSTRUCTIONS, HW_BRANCH_MISSES,
    HW_BUS_CYCLES, HW_CACHE_MISSES, HW_CACHE_REFERENCES, HW_CPU_CYCLES, HW_INSTRUCTIONS,
    HW_STALLED_CYCLES_BACKEND, HW_STALLED_CYCLES_FRONTEND, TYPE_HARDWARE, TYPE_HW_CACHE,
};

/// A core PMU of the Arm PMUv3 driver: its names start `armv8_` or
/// `armv9_` (`armv8_pmu_init` and the ACPI `armv8_pmuv3_<n>`).
pub(super) fn is_pmuv3(p: &Pmu) -> bool {
    p.name.starts_with("armv8_") || p.name.starts_with("armv9_")
}

/// The sysfs name of the PMUv3 event a generic event maps to, `None`
/// where the driver maps nothing (`ref-cycles`, writes, prefetches, NODE).
pub(super) fn mapped_event(type_: u32, config: u64) -> Option<&'static str> {
    let config = config & 0xffff_ffff;
    match type_ {
        TYPE_HARDWARE => Some(match config {
            HW_CPU_CYCLES => "cpu_cycles",
            HW_INSTRUCTIONS => "inst_retired",
            HW_CACHE_REFERENCES => "l1d_cache",
            HW_CACHE_MISSES => "l1d_cache_refill",
            HW_BRANCH_INSTRUCTIONS => "pc_write_retired",
            HW_BRANCH_MISSES => "br_mis_pred",
            HW_BUS_CYCLES => "bus_cycles",
            HW_STALLED_CYCLES_FRONTEND => "stall_frontend",
            HW_STALLED_CYCLES_BACKEND => "stall_backend",
            _ => return None,
        }),
        TYPE_HW_CACHE => {
            let (cache, op, result) = (config & 0xff, (config >> 8) & 0xff, config >> 16);
            if op != CACHE_OP_READ {
                return None;
            }
            let (access, miss) = match cache {
                CACHE_L1D => ("l1d_cache", "l1d_cache_refill"),
                CACHE_L1I => ("l1i_cache", "l1i_cache_refill"),
                CACHE_DTLB => ("l1d_tlb", "l1d_tlb_refill"),
                CACHE_ITLB => ("l1i_tlb", "l1i_tlb_refill"),
                CACHE_LL => ("ll_cache_rd", "ll_cache_miss_rd"),
                CACHE_BPU => ("br_pred", "br_mis_pred"),
                _ => return None,
            };
            match result {
                CACHE_RESULT_ACCESS => Some(access),
                CACHE_RESULT_MISS => Some(miss),
                _ => None,
            }
        }
        _ => None,
    }
}

/// `Err(name)` when the PMUv3 core PMU cannot count this generic event:
/// the event it maps to (or the generic name, where nothing is mapped) is
/// not in its `events/`.
pub(super) fn offers(p: &Pmu, type_: u32, config: u64, generic: &str) -> Result<(), String> {
    match mapped_event(type_, config) {
        Some(name) if p.events.contains_key(name) => Ok(()),
        Some(name) => Err(name.to_string()),
        None => Err(generic.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generic_ids_map_as_the_kernel_maps_them() {
        assert_eq!(mapped_event(TYPE_HARDWARE, 0), Some("cpu_cycles"));
        // The extended type (big.LITTLE) is ignored.
        assert_eq!(
            mapped_event(TYPE_HARDWARE, 10 << 32 | 1),
            Some("inst_retired")
        );
        assert_eq!(mapped_event(TYPE_HARDWARE, 4), Some("pc_write_retired"));
        assert_eq!(mapped_event(TYPE_HARDWARE, 9), None, "ref-cycles");
        let l1d_read_miss = CACHE_L1D | CACHE_OP_READ << 8 | CACHE_RESULT_MISS << 16;
        assert_eq!(
            mapped_event(TYPE_HW_CACHE, l1d_read_miss),
            Some("l1d_cache_refill")
        );
        let ll_read = CACHE_LL | CACHE_OP_READ << 8;
        assert_eq!(mapped_event(TYPE_HW_CACHE, ll_read), Some("ll_cache_rd"));
        // Writes are not mapped by armv8_pmuv3_perf_cache_map.
        assert_eq!(mapped_event(TYPE_HW_CACHE, CACHE_L1D | 1 << 8), None);
    }
}
