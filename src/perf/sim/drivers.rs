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
//!   and the same cache table;
//! * Arm PMUv3 (`armv8_*`/`armv9_*` PMUs): `armv8_pmuv3_perf_map` and
//!   `armv8_pmuv3_perf_cache_map` (`drivers/perf/arm_pmuv3.c`), each
//!   entry an architectural event number that the open also requires the
//!   CPU to implement (its PMCEID bit, else ENOENT).
//!
//! The CPU is told from the PMUs, not from the core PMU's `events/`
//! directory (which is what the resolver reads): `caps/pmu_name` and the
//! PMU name on Intel; on AMD (no `pmu_name`) the uncore PMUs, `amd_umc_*`
//! existing only on Zen 4 and later. On Arm the PMCEID bits are read back
//! from the event numbers the PMU's `events/` files show: the kernel shows
//! exactly the events whose PMCEID bit is set. A core PMU of another CPU
//! accepts no generic event: the simulator does not guess.

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
    /// Arm PMUv3, with the PMCEID bits of the common events 0x00-0x3f.
    ArmPmuv3 {
        /// Bit n: the CPU implements common event n.
        pmceid: u64,
    },
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
        (n, _) if n.starts_with("armv8_") || n.starts_with("armv9_") => Driver::ArmPmuv3 {
            pmceid: arm_pmceid(core),
        },
        _ => Driver::Unknown,
    }
}

/// The common events (below 0x40) an Arm PMUv3 PMU shows: `event=0x..`.
fn arm_pmceid(core: &Pmu) -> u64 {
    core.events
        .values()
        .filter_map(|e| match e.terms.as_slice() {
            [t] if t.name == "event" => match t.value {
                crate::pmu::TermValue::Num(v) if v < 64 => Some(1u64 << v),
                _ => None,
            },
            _ => None,
        })
        .fold(0, |a, b| a | b)
}

/// `armv8_pmuv3_perf_map`: the event a generic hardware id maps to.
fn arm_hardware(id: u64) -> Option<u64> {
    const MAP: [u64; 9] = [0x11, 0x08, 0x04, 0x03, 0x0c, 0x10, 0x1d, 0x23, 0x24];
    MAP.get(id as usize).copied()
}

/// `armv8_pmuv3_perf_cache_map`: READ only, `(access, miss)` per cache.
fn arm_cache(cache: u64, op: u64, result: u64) -> Option<u64> {
    const MAP: [Option<(u64, u64)>; 7] = [
        Some((0x04, 0x03)), // L1D: L1D_CACHE, L1D_CACHE_REFILL
        Some((0x14, 0x01)), // L1I
        Some((0x36, 0x37)), // LL: LL_CACHE_RD, LL_CACHE_MISS_RD
        Some((0x25, 0x05)), // DTLB: L1D_TLB, L1D_TLB_REFILL
        Some((0x26, 0x02)), // ITLB
        Some((0x12, 0x10)), // BPU: BR_PRED, BR_MIS_PRED
        None,               // NODE
    ];
    let (access, miss) = MAP.get(cache as usize).copied().flatten()?;
    (op == CACHE_OP_READ).then_some(if result == CACHE_RESULT_MISS {
        miss
    } else {
        access
    })
}

/// An Arm open: mapped, and implemented by the CPU.
fn arm_implemented(pmceid: u64, event: Option<u64>) -> Result<(), i32> {
    match event {
        Some(e) if pmceid >> e & 1 == 1 => Ok(()),
        _ => Err(libc::ENOENT),
    }
}

/// `event_map(id) != 0`: whether the driver maps a generic hardware id.
pub fn hardware(driver: Driver, id: u64) -> Result<(), i32> {
    // Every driver here maps the first six ids (cycles, instructions,
    // cache references and misses, branches and branch misses); then
    // Intel adds bus-cycles and ref-cycles, Zen 2 stalled-cycles-frontend,
    // and Zen 4 ref-cycles as well.
    let common = id <= HW_BRANCH_MISSES;
    let ok = match driver {
        Driver::Skylake | Driver::GoldenCove | Driver::Gracemont => {
            common || id == HW_BUS_CYCLES || id == HW_REF_CPU_CYCLES
        }
        Driver::Zen2 => common || id == HW_STALLED_CYCLES_FRONTEND,
        Driver::Zen4 => common || id == HW_STALLED_CYCLES_FRONTEND || id == HW_REF_CPU_CYCLES,
        Driver::ArmPmuv3 { pmceid } => return arm_implemented(pmceid, arm_hardware(id)),
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

/// A table as the kernel's source reads, by cache id (L1D, L1I, LL, DTLB,
/// ITLB, BPU, NODE), one row per cache separated by `/`, each row READ,
/// WRITE and PREFETCH as two letters, access then miss: `"SS SN NN/..."`.
/// A letter other than `S`, `N` or `X` fails the build (const evaluation).
const fn rows(t: &[u8; 62]) -> [Row; 7] {
    const fn e(b: u8) -> E {
        match b {
            b'S' => E::S,
            b'N' => E::N,
            b'X' => E::X,
            _ => panic!("a cache table entry is S, N or X"),
        }
    }
    let mut out = [[(E::N, E::N); 3]; 7];
    let mut r = 0;
    while r < 7 {
        let mut op = 0;
        while op < 3 {
            let at = r * 9 + op * 3;
            out[r][op] = (e(t[at]), e(t[at + 1]));
            op += 1;
        }
        r += 1;
    }
    out
}

/// `skl_hw_cache_event_ids`.
const SKYLAKE: [Row; 7] = rows(b"SS SN NN/NS XX NN/SS SS NN/SS SS NN/SS XX XX/SS XX XX/SS SS NN");

/// `glc_hw_cache_event_ids` (Golden Cove); entries the kernel leaves out
/// are 0.
const GOLDEN_COVE: [Row; 7] =
    rows(b"SS SN NN/NS XX NN/SS SS NN/SS SS NN/XS XX XX/SS XX XX/SS NN NN");

/// `glp_hw_cache_event_ids` (Goldmont Plus, Tremont, Gracemont).
const GOLDMONT_PLUS: [Row; 7] =
    rows(b"SN SN NN/SS XX NN/SS SS NN/SS SS NN/SS XX XX/SS XX XX/NN NN NN");

/// `amd_hw_cache_event_ids_f17h` (Zen and later).
const ZEN: [Row; 7] = rows(b"SS NN SN/SS XX NN/NN NN NN/SS NN NN/SS XX XX/SS XX XX/NN XX XX");

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
        Driver::ArmPmuv3 { pmceid } => {
            return arm_implemented(pmceid, arm_cache(cache, op, result))
        }
        Driver::Unknown => return Err(libc::ENOENT),
    };
    let (access, miss) = table[cache as usize][op as usize];
    match if result == CACHE_RESULT_MISS {
        miss
    } else {
        access
    } {
        E::S => Ok(()),
        E::N => Err(libc::ENOENT),
        E::X => Err(libc::EINVAL),
    }
}

/// PMU families whose drivers register with `PERF_PMU_CAP_NO_EXCLUDE`:
/// they count every privilege level at once, so the kernel refuses an
/// event with any `exclude_*` bit (perf's `:u`, `:k`, ...) with EINVAL
/// (`perf_try_init_event` in `kernel/events/core.c`, on
/// `event_has_any_exclude_flag`). Transcribed for the PMUs of the
/// fixtures from the drivers' `struct pmu`: Intel uncore
/// (`uncore_pmu_register`, `arch/x86/events/intel/uncore.c`: `uncore_imc`,
/// `uncore_cbox`, `uncore_arb`, `uncore_clock`, ...), RAPL (`power`,
/// `power_core`: `arch/x86/events/rapl.c`), C-state residency
/// (`cstate_core`, `cstate_pkg`: `arch/x86/events/intel/cstate.c`), `msr`
/// (`arch/x86/events/msr.c`; this machine's kernel refuses `msr/tsc/u`),
/// AMD uncore (`amd_df`, `amd_l3`, `amd_umc`: `arch/x86/events/amd/uncore.c`),
/// and Arm's DMC-620 and CMN (`drivers/perf/arm_dmc620_pmu.c`,
/// `drivers/perf/arm-cmn.c`). Not IBS: recent kernels dropped the flag
/// there and filter its samples instead.
pub fn no_exclude(pmu: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "uncore_",
        "power",
        "cstate_",
        "amd_df",
        "amd_l3",
        "amd_umc",
        "arm_dmc620",
        "arm_cmn",
    ];
    pmu == "msr" || PREFIXES.iter().any(|x| pmu.starts_with(x))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_say_what_the_kernel_says() {
        use Driver::*;
        let (rd, wr) = (CACHE_OP_READ, CACHE_OP_WRITE);
        let (acc, miss) = (CACHE_RESULT_ACCESS, CACHE_RESULT_MISS);
        let cases = [
            // AMD has no generic LLC events: perf shows `<not supported>`.
            (Zen2, CACHE_LL, rd, miss, Err(libc::ENOENT)),
            (Skylake, CACHE_LL, rd, miss, Ok(())),
            // Gracemont counts L1D loads but not their misses.
            (Gracemont, CACHE_L1D, rd, acc, Ok(())),
            (Gracemont, CACHE_L1D, rd, miss, Err(libc::ENOENT)),
            // -1 entries: EINVAL.
            (Skylake, CACHE_L1I, wr, acc, Err(libc::EINVAL)),
            (Skylake, CACHE_MAX, 0, 0, Err(libc::EINVAL)),
            // Golden Cove has no generic ITLB access event; Skylake has one.
            (GoldenCove, CACHE_ITLB, rd, acc, Err(libc::EINVAL)),
            (Skylake, CACHE_ITLB, rd, acc, Ok(())),
            // A row's last pair is PREFETCH: Zen counts L1D prefetches.
            (Zen4, CACHE_L1D, CACHE_OP_PREFETCH, acc, Ok(())),
            (Zen4, CACHE_L1D, CACHE_OP_PREFETCH, miss, Err(libc::ENOENT)),
        ];
        for (d, c, op, r, want) in cases {
            assert_eq!(cache(d, c, op, r), want, "{d:?} {c} {op} {r}");
        }
        assert_eq!(hardware(Zen2, HW_STALLED_CYCLES_BACKEND), Err(libc::ENOENT));
        assert_eq!(hardware(Zen4, HW_REF_CPU_CYCLES), Ok(()));
        assert_eq!(hardware(Zen2, HW_REF_CPU_CYCLES), Err(libc::ENOENT));
        assert_eq!(
            hardware(Skylake, HW_STALLED_CYCLES_FRONTEND),
            Err(libc::ENOENT)
        );
        assert_eq!(hardware(Unknown, HW_CPU_CYCLES), Err(libc::ENOENT));
        // Arm: mapped and implemented (PMCEID), else ENOENT.
        let n1 = ArmPmuv3 {
            pmceid: 1 << 0x11 | 1 << 0x03,
        };
        assert_eq!(hardware(n1, HW_CPU_CYCLES), Ok(()));
        assert_eq!(hardware(n1, HW_INSTRUCTIONS), Err(libc::ENOENT));
        assert_eq!(hardware(n1, HW_REF_CPU_CYCLES), Err(libc::ENOENT));
        assert_eq!(cache(n1, CACHE_L1D, rd, miss), Ok(()));
        assert_eq!(cache(n1, CACHE_L1D, wr, miss), Err(libc::ENOENT));
    }
}
