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
//! "meaningless" and it fails with EINVAL; an id past the map
//! (`>= PERF_COUNT_HW_MAX`) fails with EINVAL (`arch/x86/events/core.c`,
//! `x86_pmu_event_init` → `set_ext_hw_attr` / `x86_setup_perfctr`;
//! `drivers/perf/arm_pmu.c`, `armpmu_map_event`).
//!
//! Transcribed from Linux 6.18 (facts only, the tables are ours):
//!
//! * **Intel** (`arch/x86/events/intel/core.c`, `intel_pmu_init`): the
//!   model switch installs one `hw_cache_event_ids` table per model and
//!   writes the model's `name` to `caps/pmu_name`, which is what the
//!   simulator reads ([`INTEL_MODELS`], [`INTEL_HYBRID`]). The hardware
//!   ids go through `intel_perfmon_event_map` (cycles, instructions,
//!   cache references and misses, branches and their misses, bus-cycles,
//!   ref-cycles) on every model; only Nehalem, Westmere and Sandy Bridge
//!   add both stalled-cycles ids, Ivy Bridge the frontend one. A model the
//!   switch does not name takes its `default:` case: the architectural
//!   events still work (from CPUID leaf 0xA; the simulator takes every
//!   one as present, as `intel_arch_events_quirk` zeroes only those CPUID
//!   marks absent), the cache table stays all 0 (every generic cache
//!   event ENOENT) and `pmu_name` is `generic_arch_v1`, `generic_arch_v2+`
//!   or `generic_arch_v5+`. An unlisted `pmu_name` (a newer kernel's
//!   model) is simulated the same way: the simulator does not guess a
//!   table. Hosts without architectural perfmon (P6, Pentium 4, Knights
//!   Corner: `p6_pmu_init`, `p4_pmu_init`, `knc_pmu_init`) show no
//!   `pmu_name` and are not simulated.
//! * **AMD** (`arch/x86/events/amd/core.c`): `amd_pmu_init` installs
//!   `amd_hw_cache_event_ids_f17h` from family 0x17 on and
//!   `amd_hw_cache_event_ids` before; `amd_pmu_event_map` picks
//!   `amd_zen4_perfmon_event_map` for Zen 4 and family 0x1a on,
//!   `amd_zen2_perfmon_event_map` for Zen 2 and family 0x19 on,
//!   `amd_zen1_perfmon_event_map` for Zen 1 and else
//!   `amd_perfmon_event_map` (K7 to family 16h). The Zen generation is
//!   the family and model ranges of `bsp_init_amd`
//!   (`arch/x86/kernel/cpu/amd.c`), read from the core PMU's CPU identity
//!   (`cpuinfo`); without one, from the uncore PMUs (`amd_umc_*` exists
//!   on Zen 4 and later, `amd_df`/`ibs_op` on Zen: taken as Zen 2/3).
//! * **Arm PMUv3** (`armv8_*`/`armv9_*` PMUs): `armv8_pmuv3_perf_map` and
//!   `armv8_pmuv3_perf_cache_map` (`drivers/perf/arm_pmuv3.c`), each
//!   entry an architectural event number that the open also requires the
//!   CPU to implement (its PMCEID bit, else ENOENT). The PMCEID bits are
//!   read back from the event numbers the PMU's `events/` files show: the
//!   kernel shows exactly the events whose PMCEID bit is set.
//!
//! The CPU is told from the PMUs and the CPU identity, not from the core
//! PMU's `events/` directory (which is what the resolver reads). A core
//! PMU of another CPU accepts no generic event.

use crate::pmu::{Pmu, PmuTable};
use crate::sys::abi::*;

/// The CPU (driver) whose tables a core PMU follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Driver {
    /// An Intel core PMU with architectural perfmon.
    Intel(Intel),
    /// An AMD core PMU.
    Amd(Amd),
    /// Arm PMUv3, with the PMCEID bits of the common events 0x00-0x3f.
    ArmPmuv3 {
        /// Bit n: the CPU implements common event n.
        pmceid: u64,
    },
    /// A core PMU with no transcription here.
    Unknown,
}

/// What `intel_pmu_init` installed for one model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Intel {
    /// The model's `hw_cache_event_ids`; `None`: all 0 (no model table).
    pub cache: Option<IntelCache>,
    /// `intel_perfmon_event_map[PERF_COUNT_HW_STALLED_CYCLES_FRONTEND]` set.
    pub stalled_frontend: bool,
    /// `intel_perfmon_event_map[PERF_COUNT_HW_STALLED_CYCLES_BACKEND]` set.
    pub stalled_backend: bool,
}

/// Intel's cache tables, by the kernel's table (and its per-model edits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntelCache {
    /// `core2_hw_cache_event_ids`.
    Core2,
    /// `nehalem_hw_cache_event_ids`.
    Nehalem,
    /// `westmere_hw_cache_event_ids`.
    Westmere,
    /// `atom_hw_cache_event_ids` (Bonnell, Saltwell).
    Bonnell,
    /// `slm_hw_cache_event_ids` (Silvermont, Airmont, Knights Landing/Mill).
    Silvermont,
    /// `glm_hw_cache_event_ids`.
    Goldmont,
    /// `glp_hw_cache_event_ids`.
    GoldmontPlus,
    /// `glp_hw_cache_event_ids` with the ITLB read access entry set to -1:
    /// Tremont's case and `intel_pmu_init_grt` (Gracemont, Crestmont, and
    /// through `intel_pmu_init_skt` Skymont and Darkmont).
    Tremont,
    /// `snb_hw_cache_event_ids` (Sandy Bridge; Ivy Bridge changes only the
    /// event of a supported entry).
    SandyBridge,
    /// `hsw_hw_cache_event_ids` (Haswell, Broadwell).
    Haswell,
    /// `skl_hw_cache_event_ids`.
    Skylake,
    /// `skl_hw_cache_event_ids` with the ITLB read access entry set to -1
    /// (the Ice Lake case: Ice Lake, Tiger Lake, Rocket Lake).
    Icelake,
    /// `glc_hw_cache_event_ids` (`intel_pmu_init_glc`, and through
    /// `intel_pmu_init_lnc` Lion Cove); named `spr_hw_cache_event_ids`
    /// before 6.8 (no ITLB access event, no NODE writes).
    GoldenCove,
}

/// An Intel model's tables: `stalled` is (frontend, backend).
const fn intel(cache: Option<IntelCache>, stalled: (bool, bool)) -> Intel {
    Intel {
        cache,
        stalled_frontend: stalled.0,
        stalled_backend: stalled.1,
    }
}

/// The `default:` case (and Yonah's `core`, which installs no table).
pub const INTEL_ARCHITECTURAL: Intel = intel(None, (false, false));

/// `intel_pmu_init`'s non-hybrid cases (Linux 6.18): the `name` each sets
/// (`caps/pmu_name` of the `cpu` PMU) and what it installs. Tiger Lake
/// and Rocket Lake share Ice Lake's case and name, Emerald Rapids
/// Sapphire Rapids', Kaby Lake and Comet Lake Skylake's; Darkmont
/// (Clearwater Forest) came in 6.15.
pub const INTEL_MODELS: &[(&str, Intel)] = {
    use IntelCache::*;
    const NONE: (bool, bool) = (false, false);
    &[
        ("core", intel(None, NONE)),
        ("core2", intel(Some(Core2), NONE)),
        ("nehalem", intel(Some(Nehalem), (true, true))),
        ("westmere", intel(Some(Westmere), (true, true))),
        ("bonnell", intel(Some(Bonnell), NONE)),
        ("silvermont", intel(Some(Silvermont), NONE)),
        ("knights-landing", intel(Some(Silvermont), NONE)),
        ("goldmont", intel(Some(Goldmont), NONE)),
        ("goldmont_plus", intel(Some(GoldmontPlus), NONE)),
        ("Tremont", intel(Some(Tremont), NONE)),
        ("gracemont", intel(Some(Tremont), NONE)),
        ("crestmont", intel(Some(Tremont), NONE)),
        ("darkmont", intel(Some(Tremont), NONE)),
        ("sandybridge", intel(Some(SandyBridge), (true, true))),
        ("ivybridge", intel(Some(SandyBridge), (true, false))),
        ("haswell", intel(Some(Haswell), NONE)),
        ("broadwell", intel(Some(Haswell), NONE)),
        ("skylake", intel(Some(Skylake), NONE)),
        ("icelake", intel(Some(Icelake), NONE)),
        ("sapphire_rapids", intel(Some(GoldenCove), NONE)),
        ("granite_rapids", intel(Some(GoldenCove), NONE)),
        ("generic_arch_v1", intel(None, NONE)),
        ("generic_arch_v2+", intel(None, NONE)),
        ("generic_arch_v5+", intel(None, NONE)),
    ]
};

/// `intel_pmu_init`'s hybrid cases (Linux 6.18), whose PMUs are
/// `cpu_core`, `cpu_atom` and (Arrow Lake H) `cpu_lowpower`. Every one
/// installs `glc_hw_cache_event_ids` on `cpu_core` (`intel_pmu_init_glc`,
/// or `intel_pmu_init_lnc` which calls it) and the Tremont variant of
/// `glp_hw_cache_event_ids` on the others (`intel_pmu_init_grt`, or
/// `intel_pmu_init_skt` which calls it). Raptor Lake shares Alder Lake's
/// name, Arrow Lake U Meteor Lake's, Arrow Lake Lunar Lake's, Wildcat
/// Lake (6.18) Panther Lake's (6.16).
pub const INTEL_HYBRID: &[&str] = &[
    "alderlake_hybrid",
    "meteorlake_hybrid",
    "lunarlake_hybrid",
    "pantherlake_hybrid",
    "arrowlake_h_hybrid",
];

/// The Intel tables a core PMU shows by its name and `caps/pmu_name`.
fn intel_of(pmu: &str, pmu_name: &str) -> Intel {
    let hybrid = INTEL_HYBRID.contains(&pmu_name);
    match pmu {
        "cpu_core" if hybrid => intel(Some(IntelCache::GoldenCove), (false, false)),
        "cpu_atom" | "cpu_lowpower" if hybrid => intel(Some(IntelCache::Tremont), (false, false)),
        "cpu" => INTEL_MODELS
            .iter()
            .find(|(n, _)| *n == pmu_name)
            .map_or(INTEL_ARCHITECTURAL, |(_, m)| *m),
        _ => INTEL_ARCHITECTURAL,
    }
}

/// What the AMD driver installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Amd {
    /// The hardware event map.
    pub map: AmdMap,
    /// The cache table.
    pub cache: AmdCache,
}

/// AMD's hardware event maps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmdMap {
    /// `amd_perfmon_event_map` (K7 to family 16h): the first six ids and
    /// both stalled-cycles ids.
    K7,
    /// `amd_zen1_perfmon_event_map`: the same ids.
    Zen1,
    /// `amd_zen2_perfmon_event_map` (Zen 2, Zen 3): the first six and
    /// stalled-cycles-frontend.
    Zen2,
    /// `amd_zen4_perfmon_event_map` (Zen 4, Zen 5): Zen 2's and ref-cycles.
    Zen4,
}

/// AMD's cache tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmdCache {
    /// `amd_hw_cache_event_ids` (before family 0x17).
    K7,
    /// `amd_hw_cache_event_ids_f17h` (Zen and later: no LLC and no NODE
    /// events).
    Zen,
}

/// AMD's tables for a family and model (`amd_pmu_init`,
/// `amd_pmu_event_map`, with `bsp_init_amd`'s Zen ranges).
pub fn amd_of(family: u32, model: u32) -> Amd {
    let zen1 = family == 0x17 && matches!(model, 0x00..=0x2f | 0x50..=0x5f);
    let zen2 =
        family == 0x17 && matches!(model, 0x30..=0x4f | 0x60..=0x7f | 0x90..=0x91 | 0xa0..=0xaf);
    let zen4 = family == 0x19 && matches!(model, 0x10..=0x1f | 0x60..=0xaf);
    let map = if zen4 || family >= 0x1a {
        AmdMap::Zen4
    } else if zen2 || family >= 0x19 {
        AmdMap::Zen2
    } else if zen1 {
        AmdMap::Zen1
    } else {
        AmdMap::K7
    };
    let cache = if family >= 0x17 {
        AmdCache::Zen
    } else {
        AmdCache::K7
    };
    Amd { map, cache }
}

/// `AuthenticAMD-<family>-<MODEL>-<stepping>` (family decimal, model hex):
/// the family and model.
fn amd_identity(identity: &str) -> Option<(u32, u32)> {
    let mut f = identity.strip_prefix("AuthenticAMD-")?.split('-');
    let family = f.next()?.parse().ok()?;
    let model = u32::from_str_radix(f.next()?, 16).ok()?;
    Some((family, model))
}

/// Tells a core PMU's driver from the host's PMUs and CPU identity.
pub fn driver_of(table: &PmuTable, core: &Pmu) -> Driver {
    let has = |prefix: &str| table.pmus.iter().any(|p| p.name.starts_with(prefix));
    let pmu_name = core.caps.get("pmu_name").map(String::as_str);
    let identity = table
        .identities
        .get(&core.name)
        .and_then(|i| i.known())
        .and_then(amd_identity);
    match (core.name.as_str(), pmu_name) {
        (n, _) if n.starts_with("armv8_") || n.starts_with("armv9_") => Driver::ArmPmuv3 {
            pmceid: arm_pmceid(core),
        },
        ("cpu" | "cpu_core" | "cpu_atom" | "cpu_lowpower", Some(name)) => {
            Driver::Intel(intel_of(&core.name, name))
        }
        ("cpu", None) => match identity {
            Some((family, model)) if family >= 6 => Driver::Amd(amd_of(family, model)),
            Some(_) => Driver::Unknown,
            None if has("amd_umc") => Driver::Amd(amd_of(0x19, 0x11)),
            None if has("amd_df") || has("ibs_op") => Driver::Amd(amd_of(0x19, 0x01)),
            None => Driver::Unknown,
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
    if id >= HW_MAX {
        return Err(libc::EINVAL);
    }
    // Every x86 map has the first six ids (cycles, instructions, cache
    // references and misses, branches and branch misses).
    let common = id <= HW_BRANCH_MISSES;
    let ok = match driver {
        Driver::Intel(m) => {
            common
                || id == HW_BUS_CYCLES
                || id == HW_REF_CPU_CYCLES
                || (id == HW_STALLED_CYCLES_FRONTEND && m.stalled_frontend)
                || (id == HW_STALLED_CYCLES_BACKEND && m.stalled_backend)
        }
        Driver::Amd(a) => {
            let stalled_frontend = id == HW_STALLED_CYCLES_FRONTEND;
            match a.map {
                AmdMap::K7 | AmdMap::Zen1 => {
                    common || stalled_frontend || id == HW_STALLED_CYCLES_BACKEND
                }
                AmdMap::Zen2 => common || stalled_frontend,
                AmdMap::Zen4 => common || stalled_frontend || id == HW_REF_CPU_CYCLES,
            }
        }
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

// Each table below as the kernel's source reads it, 6.18. An entry the
// kernel's initializer leaves out is 0 (N).

/// `core2_hw_cache_event_ids`.
const CORE2: [Row; 7] = rows(b"SS SS SN/SS XX NN/SS SS NN/SS SS NN/SS XX XX/SS XX XX/NN NN NN");

/// `nehalem_hw_cache_event_ids`.
const NEHALEM: [Row; 7] = rows(b"SS SS SS/SS XX NN/SS SS SS/SS SS NN/SS XX XX/SS XX XX/SS SS SS");

/// `westmere_hw_cache_event_ids` (other events than Nehalem's, the same
/// entries set).
const WESTMERE: [Row; 7] = rows(b"SS SS SS/SS XX NN/SS SS SS/SS SS NN/SS XX XX/SS XX XX/SS SS SS");

/// `atom_hw_cache_event_ids` (Bonnell).
const BONNELL: [Row; 7] = rows(b"SN SN NN/SS XX NN/SS SS NN/SS SS NN/SS XX XX/SS XX XX/NN NN NN");

/// `slm_hw_cache_event_ids` (Silvermont, Knights Landing).
const SILVERMONT: [Row; 7] =
    rows(b"NS NN NN/SS XX NN/SN SS SS/NS NN NN/SS XX XX/SS XX XX/NN NN NN");

/// `glm_hw_cache_event_ids`.
const GOLDMONT: [Row; 7] = rows(b"SN SN NN/SS XX NN/SS SS SS/SN SN NN/SS XX XX/SS XX XX/NN NN NN");

/// `glp_hw_cache_event_ids` (Goldmont Plus).
const GOLDMONT_PLUS: [Row; 7] =
    rows(b"SN SN NN/SS XX NN/SS SS NN/SS SS NN/SS XX XX/SS XX XX/NN NN NN");

/// `glp_hw_cache_event_ids` with ITLB read access -1 (Tremont, and
/// `intel_pmu_init_grt`: Gracemont, Crestmont, Skymont, Darkmont).
const TREMONT: [Row; 7] = rows(b"SN SN NN/SS XX NN/SS SS NN/SS SS NN/XS XX XX/SS XX XX/NN NN NN");

/// `snb_hw_cache_event_ids` (Sandy Bridge, Ivy Bridge).
const SANDY_BRIDGE: [Row; 7] =
    rows(b"SS SS NS/NS XX NN/SS SS SS/SS SS NN/SS XX XX/SS XX XX/SS SS SS");

/// `hsw_hw_cache_event_ids` (Haswell, Broadwell).
const HASWELL: [Row; 7] = rows(b"SS SN NN/NS XX NN/SS SS NN/SS SS NN/SS XX XX/SS XX XX/SS SS NN");

/// `skl_hw_cache_event_ids`.
const SKYLAKE: [Row; 7] = rows(b"SS SN NN/NS XX NN/SS SS NN/SS SS NN/SS XX XX/SS XX XX/SS SS NN");

/// `skl_hw_cache_event_ids` with ITLB read access -1 (the Ice Lake case).
const ICELAKE: [Row; 7] = rows(b"SS SN NN/NS XX NN/SS SS NN/SS SS NN/XS XX XX/SS XX XX/SS SS NN");

/// `glc_hw_cache_event_ids` (Golden Cove, Lion Cove).
const GOLDEN_COVE: [Row; 7] =
    rows(b"SS SN NN/NS XX NN/SS SS NN/SS SS NN/XS XX XX/SS XX XX/SS NN NN");

/// `amd_hw_cache_event_ids` (K7 to family 16h).
const AMD_K7: [Row; 7] = rows(b"SS NN SS/SS XX SN/SS SN NN/SS NN NN/SS XX XX/SS XX XX/SS XX XX");

/// `amd_hw_cache_event_ids_f17h` (Zen and later).
const ZEN: [Row; 7] = rows(b"SS NN SN/SS XX NN/NN NN NN/SS NN NN/SS XX XX/SS XX XX/NN XX XX");

/// An Intel cache table's entries.
fn intel_table(t: IntelCache) -> &'static [Row; 7] {
    match t {
        IntelCache::Core2 => &CORE2,
        IntelCache::Nehalem => &NEHALEM,
        IntelCache::Westmere => &WESTMERE,
        IntelCache::Bonnell => &BONNELL,
        IntelCache::Silvermont => &SILVERMONT,
        IntelCache::Goldmont => &GOLDMONT,
        IntelCache::GoldmontPlus => &GOLDMONT_PLUS,
        IntelCache::Tremont => &TREMONT,
        IntelCache::SandyBridge => &SANDY_BRIDGE,
        IntelCache::Haswell => &HASWELL,
        IntelCache::Skylake => &SKYLAKE,
        IntelCache::Icelake => &ICELAKE,
        IntelCache::GoldenCove => &GOLDEN_COVE,
    }
}

/// `hw_cache_event_ids[cache][op][result]`: whether the driver counts a
/// generic cache event. Out-of-range ids fail with EINVAL, as in the
/// kernel; a driver with no table (all 0) fails every one with ENOENT.
pub fn cache(driver: Driver, cache: u64, op: u64, result: u64) -> Result<(), i32> {
    if cache >= CACHE_MAX || op >= CACHE_OP_MAX || result >= CACHE_RESULT_MAX {
        return Err(libc::EINVAL);
    }
    let table = match driver {
        Driver::Intel(Intel { cache: Some(t), .. }) => intel_table(t),
        Driver::Intel(Intel { cache: None, .. }) => return Err(libc::ENOENT),
        Driver::Amd(Amd {
            cache: AmdCache::K7,
            ..
        }) => &AMD_K7,
        Driver::Amd(Amd {
            cache: AmdCache::Zen,
            ..
        }) => &ZEN,
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
    use std::path::Path;

    const SKL: Driver = Driver::Intel(intel(Some(IntelCache::Skylake), (false, false)));
    const GLC: Driver = Driver::Intel(intel(Some(IntelCache::GoldenCove), (false, false)));
    const GRT: Driver = Driver::Intel(intel(Some(IntelCache::Tremont), (false, false)));

    fn zen(family: u32, model: u32) -> Driver {
        Driver::Amd(amd_of(family, model))
    }

    fn fixture(name: &str) -> PmuTable {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let mut t = PmuTable::discover(&root.join("sysfs").join(name)).unwrap();
        t.read_identities(&root.join("procfs").join(name));
        t
    }

    #[test]
    fn tables_say_what_the_kernel_says() {
        let (rd, wr) = (CACHE_OP_READ, CACHE_OP_WRITE);
        let (acc, miss) = (CACHE_RESULT_ACCESS, CACHE_RESULT_MISS);
        let zen3 = zen(0x19, 0x01);
        let zen4 = zen(0x19, 0x11);
        let cases = [
            // AMD has no generic LLC events: perf shows `<not supported>`.
            (zen3, CACHE_LL, rd, miss, Err(libc::ENOENT)),
            (SKL, CACHE_LL, rd, miss, Ok(())),
            // Gracemont counts L1D loads but not their misses.
            (GRT, CACHE_L1D, rd, acc, Ok(())),
            (GRT, CACHE_L1D, rd, miss, Err(libc::ENOENT)),
            // ... and `intel_pmu_init_grt` makes its ITLB access -1.
            (GRT, CACHE_ITLB, rd, acc, Err(libc::EINVAL)),
            (GRT, CACHE_ITLB, rd, miss, Ok(())),
            // -1 entries: EINVAL.
            (SKL, CACHE_L1I, wr, acc, Err(libc::EINVAL)),
            (SKL, CACHE_MAX, 0, 0, Err(libc::EINVAL)),
            // Golden Cove has no generic ITLB access event; Skylake has one.
            (GLC, CACHE_ITLB, rd, acc, Err(libc::EINVAL)),
            (SKL, CACHE_ITLB, rd, acc, Ok(())),
            // A row's last pair is PREFETCH: Zen counts L1D prefetches.
            (zen4, CACHE_L1D, CACHE_OP_PREFETCH, acc, Ok(())),
            (zen4, CACHE_L1D, CACHE_OP_PREFETCH, miss, Err(libc::ENOENT)),
        ];
        for (d, c, op, r, want) in cases {
            assert_eq!(cache(d, c, op, r), want, "{d:?} {c} {op} {r}");
        }
        assert_eq!(hardware(zen3, HW_STALLED_CYCLES_BACKEND), Err(libc::ENOENT));
        assert_eq!(hardware(zen4, HW_REF_CPU_CYCLES), Ok(()));
        assert_eq!(hardware(zen3, HW_REF_CPU_CYCLES), Err(libc::ENOENT));
        assert_eq!(hardware(SKL, HW_STALLED_CYCLES_FRONTEND), Err(libc::ENOENT));
        assert_eq!(hardware(Driver::Unknown, HW_CPU_CYCLES), Err(libc::ENOENT));
        // Past the map: EINVAL on every driver (x86_setup_perfctr's
        // `attr->config >= x86_pmu.max_events`, armpmu_map_event's check).
        for d in [SKL, zen4, Driver::Unknown] {
            assert_eq!(hardware(d, HW_MAX), Err(libc::EINVAL), "{d:?}");
        }
        // Arm: mapped and implemented (PMCEID), else ENOENT.
        let n1 = Driver::ArmPmuv3 {
            pmceid: 1 << 0x11 | 1 << 0x03,
        };
        assert_eq!(hardware(n1, HW_CPU_CYCLES), Ok(()));
        assert_eq!(hardware(n1, HW_INSTRUCTIONS), Err(libc::ENOENT));
        assert_eq!(hardware(n1, HW_REF_CPU_CYCLES), Err(libc::ENOENT));
        assert_eq!(cache(n1, CACHE_L1D, rd, miss), Ok(()));
        assert_eq!(cache(n1, CACHE_L1D, wr, miss), Err(libc::ENOENT));
    }

    /// The `cpu` PMU's `caps/pmu_name` picks `intel_pmu_init`'s table:
    /// before, every name but `skylake` refused every generic event.
    #[test]
    fn each_intel_pmu_name_gets_its_models_table() {
        use IntelCache::*;
        let cases = [
            ("sapphire_rapids", Some(GoldenCove)),
            ("granite_rapids", Some(GoldenCove)),
            ("icelake", Some(Icelake)),
            ("skylake", Some(Skylake)),
            ("broadwell", Some(Haswell)),
            ("haswell", Some(Haswell)),
            ("ivybridge", Some(SandyBridge)),
            ("sandybridge", Some(SandyBridge)),
            ("westmere", Some(Westmere)),
            ("nehalem", Some(Nehalem)),
            ("core2", Some(Core2)),
            ("bonnell", Some(Bonnell)),
            ("silvermont", Some(Silvermont)),
            ("knights-landing", Some(Silvermont)),
            ("goldmont", Some(Goldmont)),
            ("goldmont_plus", Some(GoldmontPlus)),
            ("Tremont", Some(Tremont)),
            ("gracemont", Some(Tremont)),
            ("crestmont", Some(Tremont)),
            ("darkmont", Some(Tremont)),
            ("core", None),
            ("generic_arch_v2+", None),
            ("generic_arch_v5+", None),
        ];
        for (name, want) in cases {
            assert_eq!(intel_of("cpu", name).cache, want, "{name}");
        }
        for name in INTEL_HYBRID {
            assert_eq!(intel_of("cpu_core", name).cache, Some(GoldenCove), "{name}");
            assert_eq!(intel_of("cpu_atom", name).cache, Some(Tremont), "{name}");
        }
        assert_eq!(
            intel_of("cpu_lowpower", "arrowlake_h_hybrid").cache,
            Some(Tremont)
        );
        // Sapphire Rapids counts what a real one does: cycles, instructions,
        // L1d loads and misses, LLC loads and misses, L1i misses (not L1i
        // loads: glc has no entry, ENOENT, as perf shows `<not supported>`).
        let spr = Driver::Intel(intel_of("cpu", "sapphire_rapids"));
        let rd = CACHE_OP_READ;
        let (acc, miss) = (CACHE_RESULT_ACCESS, CACHE_RESULT_MISS);
        for id in [HW_CPU_CYCLES, HW_INSTRUCTIONS, HW_REF_CPU_CYCLES] {
            assert_eq!(hardware(spr, id), Ok(()), "{id}");
        }
        for (c, r) in [(CACHE_L1D, acc), (CACHE_L1D, miss), (CACHE_LL, acc)] {
            assert_eq!(cache(spr, c, rd, r), Ok(()), "{c} {r}");
        }
        assert_eq!(cache(spr, CACHE_LL, rd, miss), Ok(()));
        assert_eq!(cache(spr, CACHE_L1I, rd, miss), Ok(()));
        assert_eq!(cache(spr, CACHE_L1I, rd, acc), Err(libc::ENOENT));
        // Ice Lake (Tiger Lake, Rocket Lake): Skylake's table without the
        // ITLB access event.
        let icl = Driver::Intel(intel_of("cpu", "icelake"));
        assert_eq!(cache(icl, CACHE_ITLB, rd, acc), Err(libc::EINVAL));
        assert_eq!(cache(icl, CACHE_L1D, rd, miss), Ok(()));
        assert_eq!(cache(icl, CACHE_LL, CACHE_OP_WRITE, miss), Ok(()));
        // Stalled cycles: Nehalem to Sandy Bridge both, Ivy Bridge frontend.
        let ivb = Driver::Intel(intel_of("cpu", "ivybridge"));
        let snb = Driver::Intel(intel_of("cpu", "sandybridge"));
        assert_eq!(hardware(ivb, HW_STALLED_CYCLES_FRONTEND), Ok(()));
        assert_eq!(hardware(ivb, HW_STALLED_CYCLES_BACKEND), Err(libc::ENOENT));
        assert_eq!(hardware(snb, HW_STALLED_CYCLES_BACKEND), Ok(()));
    }

    /// An Intel model the switch does not name (the `default:` case, or a
    /// name this transcription does not list) counts the architectural
    /// events and no generic cache event, as the kernel does.
    #[test]
    fn an_unlisted_intel_model_counts_the_architectural_events_only() {
        for name in ["generic_arch_v5+", "generic_arch_v1", "a_future_lake"] {
            let d = Driver::Intel(intel_of("cpu", name));
            for id in [
                HW_CPU_CYCLES,
                HW_INSTRUCTIONS,
                HW_CACHE_REFERENCES,
                HW_CACHE_MISSES,
                HW_BRANCH_INSTRUCTIONS,
                HW_BRANCH_MISSES,
                HW_BUS_CYCLES,
                HW_REF_CPU_CYCLES,
            ] {
                assert_eq!(hardware(d, id), Ok(()), "{name} {id}");
            }
            assert_eq!(hardware(d, HW_STALLED_CYCLES_FRONTEND), Err(libc::ENOENT));
            for c in 0..CACHE_MAX {
                for op in 0..CACHE_OP_MAX {
                    for r in 0..CACHE_RESULT_MAX {
                        assert_eq!(cache(d, c, op, r), Err(libc::ENOENT), "{name}");
                    }
                }
            }
        }
        // A hybrid PMU under an unlisted name takes the default too.
        assert_eq!(intel_of("cpu_core", "a_future_hybrid"), INTEL_ARCHITECTURAL);
    }

    /// AMD: the map by Zen generation (`bsp_init_amd`'s ranges), the cache
    /// table by family.
    #[test]
    fn amd_families_get_their_maps_and_cache_tables() {
        let cases = [
            // (family, model, map, cache)
            (0x10, 0x04, AmdMap::K7, AmdCache::K7),
            (0x15, 0x02, AmdMap::K7, AmdCache::K7),
            (0x17, 0x01, AmdMap::Zen1, AmdCache::Zen),
            (0x17, 0x08, AmdMap::Zen1, AmdCache::Zen),
            (0x17, 0x31, AmdMap::Zen2, AmdCache::Zen),
            (0x17, 0x71, AmdMap::Zen2, AmdCache::Zen),
            (0x19, 0x01, AmdMap::Zen2, AmdCache::Zen),
            (0x19, 0x21, AmdMap::Zen2, AmdCache::Zen),
            (0x19, 0x11, AmdMap::Zen4, AmdCache::Zen),
            (0x19, 0x61, AmdMap::Zen4, AmdCache::Zen),
            (0x1a, 0x02, AmdMap::Zen4, AmdCache::Zen),
        ];
        for (family, model, map, cache) in cases {
            assert_eq!(
                amd_of(family, model),
                Amd { map, cache },
                "{family:#x} {model:#x}"
            );
        }
        let rd = CACHE_OP_READ;
        let miss = CACHE_RESULT_MISS;
        let (k10, zen1, zen2, zen5) = (zen(0x10, 4), zen(0x17, 1), zen(0x17, 0x31), zen(0x1a, 2));
        // K7-16h and Zen 1 map both stalled-cycles ids; Zen 2 only the
        // frontend one; ref-cycles from Zen 4 (and 5) on.
        for d in [k10, zen1] {
            assert_eq!(hardware(d, HW_STALLED_CYCLES_BACKEND), Ok(()), "{d:?}");
            assert_eq!(hardware(d, HW_REF_CPU_CYCLES), Err(libc::ENOENT), "{d:?}");
        }
        assert_eq!(hardware(zen2, HW_STALLED_CYCLES_BACKEND), Err(libc::ENOENT));
        assert_eq!(hardware(zen5, HW_REF_CPU_CYCLES), Ok(()));
        for d in [k10, zen1, zen2, zen5] {
            assert_eq!(hardware(d, HW_BUS_CYCLES), Err(libc::ENOENT), "{d:?}");
        }
        // Before Zen the LLC (L2) and NODE events exist; from Zen on not.
        assert_eq!(cache(k10, CACHE_LL, rd, miss), Ok(()));
        assert_eq!(cache(k10, CACHE_NODE, rd, miss), Ok(()));
        assert_eq!(cache(zen1, CACHE_LL, rd, miss), Err(libc::ENOENT));
        assert_eq!(cache(zen5, CACHE_NODE, rd, miss), Err(libc::ENOENT));
        assert_eq!(cache(zen5, CACHE_L1I, rd, miss), Ok(()));
    }

    /// The fixtures: Intel by `caps/pmu_name`, AMD by the CPU identity
    /// (and by the uncore PMUs when there is none).
    #[test]
    fn fixtures_get_their_drivers() {
        let core = |t: &PmuTable, name: &str| driver_of(t, t.get(name).unwrap());
        let skx = fixture("intel-skx");
        assert_eq!(core(&skx, "cpu"), SKL);
        let adl = fixture("intel-hybrid");
        assert_eq!(core(&adl, "cpu_core"), GLC);
        assert_eq!(core(&adl, "cpu_atom"), GRT);
        let milan = fixture("amd-zen3");
        assert_eq!(core(&milan, "cpu"), zen(0x19, 0x01));
        let genoa = fixture("amd-zen4");
        assert_eq!(core(&genoa, "cpu"), zen(0x19, 0x11));
        // Without identities: the uncore PMUs tell.
        let mut genoa = genoa;
        genoa.identities.clear();
        assert_eq!(core(&genoa, "cpu"), Driver::Amd(amd_of(0x19, 0x11)));
        let mut milan = milan;
        milan.identities.clear();
        assert_eq!(core(&milan, "cpu"), Driver::Amd(amd_of(0x19, 0x01)));
    }
}
