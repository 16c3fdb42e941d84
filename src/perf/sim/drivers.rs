//! What the simulated kernel accepts for generic hardware and cache
//! events: a transcription of the kernel's own per-CPU tables, kept
//! apart from the resolver's (which come from the perf tool's view of
//! names). A wrong resolver entry then fails a simulated test instead of
//! being confirmed by the same table.
//!
//! The kernel maps `PERF_TYPE_HARDWARE` ids through the driver's
//! `event_map` and `PERF_TYPE_HW_CACHE` triples through its
//! `hw_cache_event_ids[cache][op][result]`. An entry of 0 means "not
//! supported" and the open fails with ENOENT; an entry of -1 means
//! "meaningless" and it fails with EINVAL (`arch/x86/events/core.c`,
//! `x86_pmu_event_init` → `set_ext_hw_attr` / `x86_setup_perfctr`).
//!
//! Transcribed from Linux 6.x:
//!
//! * Intel Skylake (`caps/pmu_name` = `skylake`): `intel_perfmon_event_map`
//!   without the stalled-cycles ids (set only for older models) and
//!   `skl_hw_cache_event_ids`, in `arch/x86/events/intel/core.c`;
//! * Intel Alder Lake `cpu_core` (Golden Cove): the same event map;
//!   `glc_hw_cache_event_ids` (named `spr_hw_cache_event_ids` before 6.8:
//!   no ITLB access event, no NODE writes);
//! * Intel Alder Lake `cpu_atom` (Gracemont): the same event map;
//!   `intel_pmu_init_grt` copies `glp_hw_cache_event_ids` (no L1D miss
//!   events, no NODE events);
//! * AMD Zen 2/3: `amd_zen2_perfmon_event_map` (no stalled-cycles-backend,
//!   bus-cycles or ref-cycles) and `amd_hw_cache_event_ids_f17h` (no LLC
//!   and no NODE events), in `arch/x86/events/amd/core.c`;
//! * AMD Zen 4: `amd_zen4_perfmon_event_map` (Zen 2's plus ref-cycles)
//!   and the same cache table.
//!
//! The CPU is told from the PMUs, not from the core PMU's `events/`
//! directory (which is what the resolver reads): `caps/pmu_name` and the
//! PMU name on Intel; on AMD (no `pmu_name`) the uncore PMUs, `amd_umc_*`
//! existing only on Zen 4 and later. A core PMU of another CPU accepts no
//! generic event: the simulator does not guess.

use crate::perf::abi::*;
use crate::pmu::{Pmu, PmuTable};

/// The CPU (driver) whose tables a core PMU follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Driver {
    /// Intel Skylake (client and server).
    Skylake,
    /// Intel Alder Lake P-core (`cpu_core`).
    GoldenCove,
    /// Intel Alder Lake E-core (`cpu_atom`).
    Gracemont,
    /// AMD Zen 2 and Zen 3.
    Zen2,
    /// AMD Zen 4.
    Zen4,
    /// A core PMU with no transcription here.
    Unknown,
}

/// Tells a core PMU's driver from the host's PMUs.
pub fn driver_of(table: &PmuTable, core: &Pmu) -> Driver {
    let has = |prefix: &str| table.pmus.iter().any(|p| p.name.starts_with(prefix));
    match (
        core.name.as_str(),
        core.caps.get("pmu_name").map(String::as_str),
    ) {
        ("cpu_core", _) => Driver::GoldenCove,
        ("cpu_atom", _) => Driver::Gracemont,
        ("cpu", Some("skylake")) => Driver::Skylake,
        ("cpu", None) if has("amd_umc") => Driver::Zen4,
        ("cpu", None) if has("amd_df") || has("ibs_op") => Driver::Zen2,
        _ => Driver::Unknown,
    }
}

/// `event_map(id) != 0`: whether the driver maps a generic hardware id.
pub fn hardware(driver: Driver, id: u64) -> Result<(), i32> {
    const INTEL: &[u64] = &[
        HW_CPU_CYCLES,
        HW_INSTRUCTIONS,
        HW_CACHE_REFERENCES,
        HW_CACHE_MISSES,
        HW_BRANCH_INSTRUCTIONS,
        HW_BRANCH_MISSES,
        HW_BUS_CYCLES,
        HW_REF_CPU_CYCLES,
    ];
    const ZEN2: &[u64] = &[
        HW_CPU_CYCLES,
        HW_INSTRUCTIONS,
        HW_CACHE_REFERENCES,
        HW_CACHE_MISSES,
        HW_BRANCH_INSTRUCTIONS,
        HW_BRANCH_MISSES,
        HW_STALLED_CYCLES_FRONTEND,
    ];
    let ok = match driver {
        Driver::Skylake | Driver::GoldenCove | Driver::Gracemont => INTEL.contains(&id),
        Driver::Zen2 => ZEN2.contains(&id),
        Driver::Zen4 => ZEN2.contains(&id) || id == HW_REF_CPU_CYCLES,
        Driver::Unknown => false,
    };
    if ok {
        Ok(())
    } else {
        Err(libc::ENOENT)
    }
}

/// One cache's row: for READ, WRITE and PREFETCH, `(access, miss)` as
/// `S` (supported), `N` (0, ENOENT) or `X` (-1, EINVAL).
type Row = [(E, E); 3];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum E {
    S,
    N,
    X,
}
use E::{N, S, X};

/// `skl_hw_cache_event_ids`, by cache id (L1D, L1I, LL, DTLB, ITLB, BPU,
/// NODE).
const SKYLAKE: [Row; 7] = [
    [(S, S), (S, N), (N, N)],
    [(N, S), (X, X), (N, N)],
    [(S, S), (S, S), (N, N)],
    [(S, S), (S, S), (N, N)],
    [(S, S), (X, X), (X, X)],
    [(S, S), (X, X), (X, X)],
    [(S, S), (S, S), (N, N)],
];

/// `glc_hw_cache_event_ids` (Golden Cove); entries the kernel leaves out
/// are 0.
const GOLDEN_COVE: [Row; 7] = [
    [(S, S), (S, N), (N, N)],
    [(N, S), (X, X), (N, N)],
    [(S, S), (S, S), (N, N)],
    [(S, S), (S, S), (N, N)],
    [(X, S), (X, X), (X, X)],
    [(S, S), (X, X), (X, X)],
    [(S, S), (N, N), (N, N)],
];

/// `glp_hw_cache_event_ids` (Goldmont Plus, Tremont, Gracemont).
const GOLDMONT_PLUS: [Row; 7] = [
    [(S, N), (S, N), (N, N)],
    [(S, S), (X, X), (N, N)],
    [(S, S), (S, S), (N, N)],
    [(S, S), (S, S), (N, N)],
    [(S, S), (X, X), (X, X)],
    [(S, S), (X, X), (X, X)],
    [(N, N), (N, N), (N, N)],
];

/// `amd_hw_cache_event_ids_f17h` (Zen and later).
const ZEN: [Row; 7] = [
    [(S, S), (N, N), (S, N)],
    [(S, S), (X, X), (N, N)],
    [(N, N), (N, N), (N, N)],
    [(S, S), (N, N), (N, N)],
    [(S, S), (X, X), (X, X)],
    [(S, S), (X, X), (X, X)],
    [(N, N), (X, X), (X, X)],
];

/// `hw_cache_event_ids[cache][op][result]`: whether the driver counts a
/// generic cache event. Out-of-range ids fail with EINVAL, as in the
/// kernel.
pub fn cache(driver: Driver, cache: u64, op: u64, result: u64) -> Result<(), i32> {
    if cache >= CACHE_MAX || op >= CACHE_OP_MAX || result >= CACHE_RESULT_MAX {
        return Err(libc::EINVAL);
    }
    let table = match driver {
        Driver::Skylake => &SKYLAKE,
        Driver::GoldenCove => &GOLDEN_COVE,
        Driver::Gracemont => &GOLDMONT_PLUS,
        Driver::Zen2 | Driver::Zen4 => &ZEN,
        Driver::Unknown => return Err(libc::ENOENT),
    };
    let (access, miss) = table[cache as usize][op as usize];
    match if result == CACHE_RESULT_MISS {
        miss
    } else {
        access
    } {
        S => Ok(()),
        N => Err(libc::ENOENT),
        X => Err(libc::EINVAL),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_say_what_the_kernel_says() {
        // AMD has no generic LLC events: perf shows `<not supported>`.
        assert_eq!(
            cache(Driver::Zen2, CACHE_LL, CACHE_OP_READ, CACHE_RESULT_MISS),
            Err(libc::ENOENT)
        );
        assert_eq!(
            cache(Driver::Skylake, CACHE_LL, CACHE_OP_READ, CACHE_RESULT_MISS),
            Ok(())
        );
        // Gracemont counts L1D loads but not their misses.
        assert_eq!(
            cache(
                Driver::Gracemont,
                CACHE_L1D,
                CACHE_OP_READ,
                CACHE_RESULT_ACCESS
            ),
            Ok(())
        );
        assert_eq!(
            cache(
                Driver::Gracemont,
                CACHE_L1D,
                CACHE_OP_READ,
                CACHE_RESULT_MISS
            ),
            Err(libc::ENOENT)
        );
        // -1 entries: EINVAL.
        assert_eq!(
            cache(
                Driver::Skylake,
                CACHE_L1I,
                CACHE_OP_WRITE,
                CACHE_RESULT_ACCESS
            ),
            Err(libc::EINVAL)
        );
        assert_eq!(cache(Driver::Skylake, CACHE_MAX, 0, 0), Err(libc::EINVAL));
        assert_eq!(
            hardware(Driver::Zen2, HW_STALLED_CYCLES_BACKEND),
            Err(libc::ENOENT)
        );
        assert_eq!(hardware(Driver::Zen4, HW_REF_CPU_CYCLES), Ok(()));
        assert_eq!(hardware(Driver::Zen2, HW_REF_CPU_CYCLES), Err(libc::ENOENT));
        assert_eq!(
            hardware(Driver::Skylake, HW_STALLED_CYCLES_FRONTEND),
            Err(libc::ENOENT)
        );
        assert_eq!(hardware(Driver::Unknown, HW_CPU_CYCLES), Err(libc::ENOENT));
        // Golden Cove has no generic ITLB access event; Skylake has one.
        assert_eq!(
            cache(
                Driver::GoldenCove,
                CACHE_ITLB,
                CACHE_OP_READ,
                CACHE_RESULT_ACCESS
            ),
            Err(libc::EINVAL)
        );
        assert_eq!(
            cache(
                Driver::Skylake,
                CACHE_ITLB,
                CACHE_OP_READ,
                CACHE_RESULT_ACCESS
            ),
            Ok(())
        );
    }
}
