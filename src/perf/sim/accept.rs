//! What the simulated kernel accepts: an encoding is validated against
//! the PMU table (formats, named events, `cpus`) and the simulator's own
//! transcription of the drivers' tables ([`drivers`]), and resolves to the
//! PMU that counts it and its rate. See the [module docs](super) for the
//! rules.
//!
//! # Top-down level 1
//!
//! The simulated pipeline has consistent slot accounting, so that the
//! level-1 fractions computed from its counts add up to 1:
//!
//! * **Intel perf metrics** (a core PMU whose sysfs lists `slots`):
//!   `slots` counts 6 per cycle (1.2e10/s, Golden Cove's width) and the
//!   metric events (event code 0, umask 0x80..0x87) count a fixed share
//!   of it in 255ths, as the kernel derives them from the 8-bit fields of
//!   `PERF_METRICS`: retiring 102, bad speculation 26, frontend 51,
//!   backend 76 (sum 255), and the level-2 ones inside those. A metric
//!   event opens only in a group whose leader is `slots`, else EINVAL
//!   ([`SimKernel::topdown_rule`], the kernel's `intel_pmu_hw_config`).
//! * **Intel Ice Lake** (`caps/pmu_name` `icelake`): the same
//!   perf-metrics events at 5 slots per cycle (1e10/s, Sunny Cove's
//!   width), only the four level-1 ones (umask 0x80..0x83); its raw
//!   level-2 events count as the intel-icx fixture's test says
//!   (`tests/sim/topdown_icx.rs`): `INT_MISC.UOP_DROPPING` 1e8, the
//!   clears 2e7, fetch-latency cycles 2.2e8, and Skylake's rates for the
//!   encodings the two share.
//! * **Intel Skylake** (the classic formula from raw events): cycles
//!   2e9/s (4 slots each: 8e9), `UOPS_RETIRED.RETIRE_SLOTS` 4.0e9,
//!   `UOPS_ISSUED.ANY` 5.2e9, `INT_MISC.RECOVERY_CYCLES` 1e8 (4 slots
//!   each), `IDQ_UOPS_NOT_DELIVERED.CORE` 1.6e9: retiring 0.5, bad
//!   speculation (5.2 - 4.0 + 0.4) / 8 = 0.2, frontend 0.2, backend 0.1.
//! * **AMD Zen 4** (pipeline utilisation): `ls_not_halted_cyc` 2e9/s (6
//!   dispatch slots each: 1.2e10), `ex_ret_ops` 4.8e9, `de_src_op_disp.all`
//!   6.0e9, `de_no_dispatch_per_slot` frontend 2.4e9, backend 3.0e9, SMT
//!   contention 0.6e9: retiring 0.4, bad speculation 0.1, frontend 0.2,
//!   backend 0.25, SMT contention 0.05.
//! * **Intel Gracemont** (`cpu_atom`): its `topdown-*` events are
//!   ordinary counters (no `slots`), 5 slots per cycle: retiring 0.4, bad
//!   speculation 0.1, frontend 0.25, backend 0.25 of 1e10/s. Level 2
//!   (raw events): frontend latency 1.5e9 and bandwidth 1.0e9 slots,
//!   mispredicts 6e8 and machine clears 4e8 slots, microcode-sequencer
//!   uops 1e9 of the 4e9 retiring, memory-scheduler slots 1e9; cycles with
//!   the oldest load stalled at retirement 2e8 (0.1 of the 2e9 cycles),
//!   memory-scheduler blocks 2e8 cycles, 1e8 of them store-buffer full:
//!   perf's load/store bound min(0.25, 0.1 + 0.1 * 1e8 / 2e8) = 0.15,
//!   core bound 0.1.
//! * **Arm** `stall_frontend` 4e8/s and `stall_backend` 6e8/s against
//!   2e9 cycles. Where the core PMU has a `caps/slots` width S (PMMIR_EL1,
//!   Armv8.4 PMU and later) its slot events count S × 2e9 slots a second:
//!   `stall_slot_frontend` 0.2 of them, `stall_slot_backend` 0.3,
//!   `stall_slot` their sum, `op_spec` the other 0.5 and `op_retired`
//!   0.8 of `op_spec` (retiring 0.4, bad speculation 0.1). A Neoverse N2
//!   r0p0 to r0p2 (MIDR part 0xD49, revision 0-2) counts one slot more
//!   per cycle in `stall_slot` and `stall_slot_frontend`, as that silicon
//!   does (fixed in r0p3; Arm's telemetry-solution data for N2 r0p3, the
//!   reason of perf's workaround).

use super::drivers;
use super::rates::{cache_rate, hardware_rate, named_rate, software_rate, unnamed_rate, Rate};
use super::SimKernel;
use crate::perf::EventAttr;
use crate::pmu::{Pmu, PmuEvent, Scope, TermValue};
use crate::sys::abi::{
    PMU_TYPE_SHIFT, TYPE_HARDWARE, TYPE_HW_CACHE, TYPE_SOFTWARE, TYPE_TRACEPOINT,
};

#[derive(Debug, Clone, Default)]
pub(super) struct PmuInfo {
    /// Bits that formats or event encodings may set, per config word.
    masks: [u64; 4],
    /// `(name, encoding, scale)` of every named event.
    aliases: Vec<(String, [u64; 4], Option<f64>)>,
}

/// Encodes a named event through its PMU's formats (`None` if it needs a
/// `?` value or does not fit).
fn encode_alias(p: &Pmu, ev: &PmuEvent) -> Option<[u64; 4]> {
    let mut w = [0u64; 4];
    for t in &ev.terms {
        let TermValue::Num(v) = t.value else {
            return None;
        };
        match t.name.as_str() {
            "config" | "config0" => w[0] |= v,
            "config1" => w[1] |= v,
            "config2" => w[2] |= v,
            "config3" => w[3] |= v,
            name => {
                let f = p.formats.get(name)?;
                w[f.word.index()] |= f.encode(v).ok()?;
            }
        }
    }
    Some(w)
}

pub(super) fn pmu_info(p: &Pmu) -> PmuInfo {
    let mut info = PmuInfo::default();
    for f in p.formats.values() {
        for &(lo, hi) in &f.ranges {
            let n = u32::from(hi - lo) + 1;
            let m = if n >= 64 {
                u64::MAX
            } else {
                ((1u64 << n) - 1) << lo
            };
            info.masks[f.word.index()] |= m;
        }
    }
    for ev in p.events.values() {
        if let Some(w) = encode_alias(p, ev) {
            for (m, x) in info.masks.iter_mut().zip(w) {
                *m |= x;
            }
            info.aliases.push((ev.name.clone(), w, ev.scale));
        }
    }
    info
}

/// Software-context PMUs: their events may join any group.
fn is_software_pmu(type_: u32, name: &str) -> bool {
    type_ == TYPE_SOFTWARE
        || type_ == TYPE_TRACEPOINT
        || matches!(
            name,
            "software" | "tracepoint" | "breakpoint" | "kprobe" | "uprobe" | "msr"
        )
}

/// Golden Cove's issue width: slots per cycle of the simulated `slots`.
const SLOTS_PER_SEC: f64 = 6.0 * 2.0e9;

/// Sunny Cove's (Ice Lake's) issue width: 5 slots per cycle, the `5 *`
/// of perf's `icelakex/icx-metrics.json` formulas.
const ICL_SLOTS_PER_SEC: f64 = 5.0 * 2.0e9;

/// Whether `p` is the core PMU of an Ice Lake (`caps/pmu_name`
/// `icelake`, [`drivers`]).
fn icelake(table: &crate::pmu::PmuTable, p: &Pmu) -> bool {
    matches!(
        drivers::driver_of(table, p),
        drivers::Driver::Intel(i) if i.cache == Some(drivers::IntelCache::Icelake)
    )
}

/// A metric event's share of `slots`, in 255ths (`PERF_METRICS` bytes),
/// by unit mask (`topdown-retiring` 0x80 .. `topdown-mem-bound` 0x87).
fn metric_share(umask: u64) -> Option<f64> {
    let share = match umask {
        0x80 => 102, // retiring
        0x81 => 26,  // bad speculation
        0x82 => 51,  // frontend bound
        0x83 => 76,  // backend bound
        0x84 => 20,  // heavy operations (part of retiring)
        0x85 => 20,  // branch mispredicts (part of bad speculation)
        0x86 => 30,  // fetch latency (part of frontend bound)
        0x87 => 40,  // memory bound (part of backend bound)
        _ => return None,
    };
    Some(f64::from(share) / 255.0)
}

/// What a raw encoding on a perf-metrics PMU is to the kernel's topdown
/// rules: `Some(true)` for `slots`, `Some(false)` for a metric event,
/// `None` for anything else (or a PMU without perf metrics).
fn topdown_kind(table: &crate::pmu::PmuTable, p: &Pmu, config: u64) -> Option<bool> {
    if !p.events.contains_key("slots") {
        return None;
    }
    let (event, umask) = (config & 0xff, (config >> 8) & 0xff);
    // Ice Lake has the four level-1 metric events only
    // (arch/x86/events/intel/core.c: `num_topdown_events = 4`,
    // `icl_td_events_attrs`).
    let last = if icelake(table, p) { 0x83 } else { 0x87 };
    match (event, umask) {
        (0, 0x04) => Some(true),
        (0, u) if u <= last && metric_share(u).is_some() => Some(false),
        _ => None,
    }
}

/// Rates of the top-down events (see the module docs): perf-metrics
/// `slots` and metric events, and the raw pipeline events of Skylake and
/// Zen 4, by the simulator's own driver detection ([`drivers`]).
fn pipeline_rate(table: &crate::pmu::PmuTable, p: &Pmu, config: u64) -> Option<f64> {
    let icelake = icelake(table, p);
    if let Some(slots) = topdown_kind(table, p, config) {
        let umask = (config >> 8) & 0xff;
        let per_sec = if icelake {
            ICL_SLOTS_PER_SEC
        } else {
            SLOTS_PER_SEC
        };
        return match slots {
            true => Some(per_sec),
            false => metric_share(umask).map(|s| per_sec * s),
        };
    }
    let driver = drivers::driver_of(table, p);
    let skylake = matches!(
        driver,
        drivers::Driver::Intel(i) if i.cache == Some(drivers::IntelCache::Skylake)
    );
    let zen4 = matches!(driver, drivers::Driver::Amd(a) if a.map == drivers::AmdMap::Zen4);
    // The E-cores of the hybrid parts (`intel_pmu_init_grt`'s table on
    // `cpu_atom`, see [`drivers`]).
    let gracemont = p.name == "cpu_atom"
        && matches!(
            driver,
            drivers::Driver::Intel(i) if i.cache == Some(drivers::IntelCache::Tremont)
        );
    let r = match config {
        // UOPS_ISSUED.ANY, UOPS_RETIRED.RETIRE_SLOTS,
        // INT_MISC.RECOVERY_CYCLES, IDQ_UOPS_NOT_DELIVERED.CORE.
        0x010e if skylake => 5.2e9,
        0x02c2 if skylake => 4.0e9,
        0x010d if skylake => 1.0e8,
        0x019c if skylake => 1.6e9,
        // Top-down level 2 (BR_MISP_RETIRED.ALL_BRANCHES, 0xC5, is the
        // `branch-misses` alias): IDQ_UOPS_NOT_DELIVERED.CYCLES_0_UOPS_
        // DELIV.CORE (cmask 4), MACHINE_CLEARS.COUNT (cmask 1, edge),
        // UOPS_RETIRED.MACRO_FUSED, CYCLE_ACTIVITY.STALLS_MEM_ANY (cmask
        // 20), .STALLS_TOTAL (cmask 4), EXE_ACTIVITY.BOUND_ON_STORES,
        // .1_PORTS_UTIL, .2_PORTS_UTIL.
        0x0400_019c if skylake => 2.0e8,
        0x0104_01c3 if skylake || icelake => 1.25e6,
        0x04c2 if skylake => 2.0e8,
        0x1400_14a3 if skylake || icelake => 3.0e8,
        0x0400_04a3 if skylake || icelake => 4.0e8,
        0x40a6 if skylake => 1.0e8,
        0x02a6 if skylake || icelake => 2.0e8,
        0x04a6 if skylake || icelake => 2.0e8,
        // Ice Lake-SP (icelakex/pipeline.json, frontend.json; the same
        // encodings as Skylake's above where they are shared), against
        // 1e10 slots a second: INT_MISC.UOP_DROPPING (0x0D/0x10),
        // INT_MISC.RECOVERY_CYCLES with cmask 1 and edge (the clears),
        // IDQ_UOPS_NOT_DELIVERED.CYCLES_0_UOPS_DELIV.CORE (cmask 5),
        // EXE_ACTIVITY.BOUND_ON_STORES (cmask 2), UOPS_ISSUED.ANY,
        // IDQ.MS_UOPS (0x79/0x30), IDQ.MITE_UOPS (0x79/0x04),
        // UOPS_DECODED.DEC0 (0x56/0x01) and it with cmask 1.
        0x100d if icelake => 1.0e8,
        0x0104_010d if icelake => 2.0e7,
        0x0500_019c if icelake => 2.2e8,
        0x0200_40a6 if icelake => 1.0e8,
        0x010e if icelake => 5.0e9,
        0x3079 if icelake => 5.0e8,
        0x0479 if icelake => 2.0e9,
        0x0156 if icelake => 3.0e8,
        0x0100_0156 if icelake => 1.0e8,
        // ex_ret_ops, de_src_op_disp.all, de_no_dispatch_per_slot
        // (event 0x1a0: bits 32-35 hold its high nibble) frontend,
        // backend and SMT contention.
        0xc1 if zen4 => 4.8e9,
        0x07aa if zen4 => 6.0e9,
        0x1_0000_01a0 if zen4 => 2.4e9,
        0x1_0000_1ea0 if zen4 => 3.0e9,
        0x1_0000_60a0 if zen4 => 0.6e9,
        // Pipeline utilisation level 2 (ex_ret_brn_misp, 0xC3, is the
        // `branch-misses` alias): de_no_dispatch_per_slot.no_ops_from_
        // frontend with cmask 6, resyncs_or_nc_redirects, ex_ret_ucode_ops
        // (0x1C2), ex_no_retire.load_not_complete, .not_complete.
        0x1_0600_01a0 if zen4 => 2.0e8,
        0x96 if zen4 => 5.0e6,
        0x1_0000_00c2 if zen4 => 1.2e9,
        0xa2d6 if zen4 => 3.0e8,
        0x02d6 if zen4 => 5.0e8,
        // Gracemont's top-down level 2 (`cpu_atom`, alderlake/pipeline.json,
        // memory.json, cache.json): TOPDOWN_FE_BOUND.FRONTEND_LATENCY
        // (0x71/0x72) and .FRONTEND_BANDWIDTH (0x71/0x8D),
        // TOPDOWN_BAD_SPECULATION.MISPREDICT (0x73/0x04) and
        // .MACHINE_CLEARS (0x73/0x03), UOPS_RETIRED.MS (0xC2/0x01),
        // TOPDOWN_BE_BOUND.MEM_SCHEDULER (0x74/0x02), LD_HEAD.ANY_AT_RET
        // (0x05/0xFF), MEM_SCHEDULER_BLOCK.ST_BUF (0x04/0x01) and .ALL
        // (0x04/0x07).
        0x7271 if gracemont => 1.5e9,
        0x8d71 if gracemont => 1.0e9,
        0x0473 if gracemont => 6.0e8,
        0x0373 if gracemont => 4.0e8,
        0x01c2 if gracemont => 1.0e9,
        0x0274 if gracemont => 1.0e9,
        0xff05 if gracemont => 2.0e8,
        0x0104 if gracemont => 1.0e8,
        0x0704 if gracemont => 2.0e8,
        _ => return None,
    };
    Some(r)
}

/// Gracemont's (`cpu_atom`) `topdown-*` events, ordinary counters of a
/// 5-wide core's slots (1e10/s): retiring 0.4, bad speculation 0.1,
/// frontend 0.25, backend 0.25.
fn atom_topdown_rate(name: &str) -> Option<f64> {
    let share = match name {
        "topdown-retiring" => 0.4,
        "topdown-bad-spec" => 0.1,
        "topdown-fe-bound" | "topdown-be-bound" => 0.25,
        _ => return None,
    };
    Some(5.0 * 2.0e9 * share)
}

/// Arm's `stall_frontend` / `stall_backend` (and their slot variants).
fn arm_stall_rate(name: &str) -> f64 {
    if name.contains("frontend") {
        4.0e8
    } else {
        6.0e8
    }
}

/// The simulated core clock of the Arm slot events (cycles a second).
const ARM_CYCLES_PER_SEC: f64 = 2.0e9;

/// Whether the first CPU of `p` is a Neoverse N2 r0p0 to r0p2 (MIDR
/// implementer 0x41, part 0xD49, variant 0, revision 0-2), whose
/// `stall_slot` and `stall_slot_frontend` count one slot more per cycle.
fn n2_slot_erratum(table: &crate::pmu::PmuTable, p: &Pmu) -> bool {
    let cpu = crate::pmu::cpuid::identity_cpu(p);
    let path = table.sysfs.join(format!(
        "devices/system/cpu/cpu{cpu}/regs/identification/midr_el1"
    ));
    let Ok(text) = crate::bounded::read_attribute(&path) else {
        return false;
    };
    let Ok(midr) = crate::pmu::cpuid::render_midr(text.as_bytes()) else {
        return false;
    };
    midr.len() == 18 && midr[..17] == *"0x00000000410fd49" && matches!(&midr[17..], "0" | "1" | "2")
}

/// The Arm PMUv3 slot events of a core with a `caps/slots` width (see the
/// module docs), or `None` (another event, or no width).
fn arm_slot_rate(table: &crate::pmu::PmuTable, p: &Pmu, name: &str) -> Option<f64> {
    let width = p
        .caps
        .get("slots")
        .and_then(|v| {
            let v = v.trim();
            v.strip_prefix("0x")
                .map_or_else(|| v.parse().ok(), |h| u64::from_str_radix(h, 16).ok())
        })
        .filter(|&w: &u64| w > 0)?;
    let slots = ARM_CYCLES_PER_SEC * f64::from(u32::try_from(width).ok()?);
    let erratum = || {
        if n2_slot_erratum(table, p) {
            ARM_CYCLES_PER_SEC
        } else {
            0.0
        }
    };
    Some(match name {
        "stall_slot_frontend" => 0.2 * slots + erratum(),
        "stall_slot_backend" => 0.3 * slots,
        "stall_slot" => 0.5 * slots + erratum(),
        "op_spec" => 0.5 * slots,
        "op_retired" => 0.4 * slots,
        _ => return None,
    })
}

/// What an accepted open resolves to.
pub(super) struct Accepted<'a> {
    pub(super) pmu: &'a str,
    pub(super) sw: bool,
    pub(super) rate: Rate,
}

impl SimKernel {
    /// Whether an event is a perf-metrics event (`topdown-*` on a PMU with
    /// `slots`), which the kernel schedules on no general-purpose counter.
    pub(super) fn is_metric_event(&self, attr: &EventAttr) -> bool {
        self.table
            .pmus
            .iter()
            .find(|p| p.type_ == attr.type_)
            .and_then(|p| topdown_kind(&self.table, p, attr.config[0]))
            == Some(false)
    }

    /// The kernel's perf-metrics rule (`intel_pmu_hw_config`): a metric
    /// event (`topdown-*` on a PMU with `slots`) opens only in a group
    /// whose leader is `slots`; alone, or under any other leader, the open
    /// fails with EINVAL. `leader` is the leader's type and config.
    pub(super) fn topdown_rule(
        &self,
        attr: &EventAttr,
        leader: Option<(u32, [u64; 4])>,
    ) -> Result<(), i32> {
        let kind_of = |type_: u32, config: u64| {
            let p = self.table.pmus.iter().find(|p| p.type_ == type_)?;
            topdown_kind(&self.table, p, config)
        };
        if kind_of(attr.type_, attr.config[0]) != Some(false) {
            return Ok(());
        }
        match leader {
            Some((t, c)) if kind_of(t, c[0]) == Some(true) => Ok(()),
            _ => Err(libc::EINVAL),
        }
    }

    /// The rate (events per second of enabled time) an encoding counts at,
    /// or `None` for a snapshot event (a constant) or an encoding this
    /// kernel would refuse on every CPU.
    pub fn rate_of(&self, type_: u32, config: [u64; 4]) -> Option<f64> {
        let attr = EventAttr {
            type_,
            config,
            event: String::new(),
            pmu: String::new(),
            exclude: Default::default(),
        };
        let cpus = self.state().online.clone();
        cpus.iter().find_map(|&c| match self.accept(&attr, c) {
            Ok(Accepted {
                rate: Rate::PerSec(r),
                ..
            }) => Some(r),
            _ => None,
        })
    }

    /// Validates an encoding on a CPU (not the CPU's online state, the
    /// refusals or the group) and finds its PMU and rate.
    pub(super) fn accept(&self, attr: &EventAttr, cpu: u32) -> Result<Accepted<'_>, i32> {
        let c = attr.config;
        match attr.type_ {
            TYPE_HARDWARE | TYPE_HW_CACHE => self.accept_generic(attr, cpu),
            TYPE_SOFTWARE => {
                if c[0] > 11 {
                    return Err(libc::ENOENT);
                }
                if c[1..].iter().any(|&w| w != 0) {
                    return Err(libc::EINVAL);
                }
                let name = self
                    .table
                    .pmus
                    .iter()
                    .find(|p| p.type_ == TYPE_SOFTWARE)
                    .map_or("software", |p| p.name.as_str());
                Ok(Accepted {
                    pmu: name,
                    sw: true,
                    rate: Rate::PerSec(software_rate(c[0])),
                })
            }
            TYPE_TRACEPOINT => {
                let p = self
                    .table
                    .pmus
                    .iter()
                    .find(|p| p.type_ == TYPE_TRACEPOINT)
                    .ok_or(libc::ENOENT)?;
                Ok(Accepted {
                    pmu: &p.name,
                    sw: true,
                    rate: Rate::PerSec(500.0),
                })
            }
            t => self.accept_dynamic(attr, t, cpu),
        }
    }

    /// A generic hardware or cache event, on the core PMU its extended
    /// type names (or the only one).
    fn accept_generic(&self, attr: &EventAttr, cpu: u32) -> Result<Accepted<'_>, i32> {
        let c = attr.config;
        let cores = self.table.core_pmus();
        let ext = c[0] >> PMU_TYPE_SHIFT;
        let core = match cores.as_slice() {
            [] => return Err(libc::ENOENT),
            [one] if ext == 0 || ext == u64::from(one.type_) => *one,
            [_] => return Err(libc::ENOENT),
            many => *many
                .iter()
                .find(|p| u64::from(p.type_) == ext)
                .ok_or(libc::ENOENT)?,
        };
        if let Scope::Cpus(cpus) = &core.scope {
            if !cpus.contains(&cpu) {
                return Err(libc::ENOENT);
            }
        }
        if c[1..].iter().any(|&w| w != 0) {
            return Err(libc::EINVAL);
        }
        let low = c[0] & 0xffff_ffff;
        let driver = drivers::driver_of(&self.table, core);
        let rate = if attr.type_ == TYPE_HARDWARE {
            drivers::hardware(driver, low)?;
            hardware_rate(low)
        } else {
            let (cache, op, result) = (low & 0xff, (low >> 8) & 0xff, (low >> 16) & 0xff);
            if low >> 24 != 0 {
                return Err(libc::EINVAL);
            }
            drivers::cache(driver, cache, op, result)?;
            cache_rate(low)
        };
        Ok(Accepted {
            pmu: &core.name,
            sw: false,
            rate: Rate::PerSec(rate),
        })
    }

    /// An event of a PMU with a dynamic type `t` (core, uncore, ...): its
    /// format masks, exclusion support and CPUs checked.
    fn accept_dynamic(&self, attr: &EventAttr, t: u32, cpu: u32) -> Result<Accepted<'_>, i32> {
        let c = attr.config;
        let (i, p) = self
            .table
            .pmus
            .iter()
            .enumerate()
            .find(|(_, p)| p.type_ == t)
            .ok_or(libc::ENOENT)?;
        let info = &self.info[i];
        if c.iter().zip(info.masks).any(|(&w, m)| w & !m != 0) {
            return Err(libc::EINVAL);
        }
        if attr.exclude.any() && drivers::no_exclude(&p.name) {
            return Err(libc::EINVAL);
        }
        if let Scope::Cpus(cpus) = &p.scope {
            if !cpus.contains(&cpu) {
                return Err(libc::ENOENT);
            }
        }
        // intel-client: only cbox 0 has the fixed clockticks counter.
        if let Some(n) = p.name.strip_prefix("uncore_cbox_") {
            let fixed_on_0 = self
                .table
                .get("uncore_cbox_0")
                .is_some_and(|b| b.events.contains_key("clockticks"));
            if n != "0" && fixed_on_0 && c[0] & 0xff == 0xff {
                return Err(libc::EINVAL);
            }
        }
        let alias = info.aliases.iter().find(|(_, w, _)| *w == c);
        let arm_slots = alias.and_then(|(name, _, _)| arm_slot_rate(&self.table, p, name));
        let rate = match (pipeline_rate(&self.table, p, c[0]), alias) {
            (Some(r), _) => Rate::PerSec(r),
            (None, Some(_)) if arm_slots.is_some() => Rate::PerSec(arm_slots.unwrap_or_default()),
            (None, Some((name, _, _))) if name.starts_with("stall_") => {
                Rate::PerSec(arm_stall_rate(name))
            }
            (None, Some((name, _, _))) if name.starts_with("topdown-") => {
                atom_topdown_rate(name).map_or_else(|| unnamed_rate(p), Rate::PerSec)
            }
            (None, Some((name, _, scale))) => named_rate(p, name, *scale),
            (None, None) => unnamed_rate(p),
        };
        Ok(Accepted {
            pmu: &p.name,
            sw: is_software_pmu(t, &p.name),
            rate,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::{Counter, GroupReading, Kernel};

    fn hybrid() -> SimKernel {
        SimKernel::with_manual_clock(crate::pmu::fixtures::table("intel-hybrid"))
    }

    fn open(k: &SimKernel, pmu: &str, config: u64, g: Option<&Counter>) -> Result<Counter, i32> {
        let attr = EventAttr {
            type_: k.table().get(pmu).unwrap().type_,
            config: [config, 0, 0, 0],
            event: format!("{pmu}/{config:#x}/"),
            pmu: pmu.into(),
            exclude: Default::default(),
        };
        let cpu = if pmu == "cpu_atom" { 16 } else { 0 };
        k.open(&attr, cpu, g).map_err(|e| e.errno)
    }

    /// The kernel's rule (intel_pmu_hw_config): a metric event needs a
    /// `slots` leader; EINVAL alone or under another leader.
    #[test]
    fn topdown_metric_events_need_a_slots_leader() {
        let k = hybrid();
        // cpu_core's sysfs: slots event=0x00,umask=0x4; topdown-retiring
        // umask=0x80, topdown-be-bound umask=0x83; cpu-cycles event=0x3c.
        assert_eq!(open(&k, "cpu_core", 0x8000, None).err(), Some(libc::EINVAL));
        let cycles = open(&k, "cpu_core", 0x3c, None).unwrap();
        assert_eq!(
            open(&k, "cpu_core", 0x8300, Some(&cycles)).err(),
            Some(libc::EINVAL)
        );
        let slots = open(&k, "cpu_core", 0x0400, None).unwrap();
        open(&k, "cpu_core", 0x8000, Some(&slots)).unwrap();
        open(&k, "cpu_core", 0x8300, Some(&slots)).unwrap();
        // Other events may join the group after them.
        open(&k, "cpu_core", 0x3c, Some(&slots)).unwrap();
        // cpu_atom's topdown-retiring (event=0xc2) is an ordinary counter.
        open(&k, "cpu_atom", 0xc2, None).unwrap();
    }

    /// The level-1 metric events add up to `slots` (within the rounding
    /// of four truncated counts).
    #[test]
    fn topdown_level1_adds_up_to_slots() {
        let k = hybrid();
        let slots = open(&k, "cpu_core", 0x0400, None).unwrap();
        let metrics: Vec<Counter> = [0x8000, 0x8100, 0x8200, 0x8300]
            .iter()
            .map(|&c| open(&k, "cpu_core", c, Some(&slots)).unwrap())
            .collect();
        let attr = EventAttr {
            type_: 0,
            config: [0; 4],
            event: "slots".into(),
            pmu: "cpu_core".into(),
            exclude: Default::default(),
        };
        k.enable_group(&slots, &attr, 0).unwrap();
        k.advance(3_000_000_000);
        let mut r = GroupReading::default();
        k.read_group(&slots, &attr, 0, &mut r).unwrap();
        assert_eq!(r.values.len(), 1 + metrics.len());
        let total = r.values[0].1;
        assert_eq!(total, 36_000_000_000);
        let sum: u64 = r.values[1..].iter().map(|v| v.1).sum();
        assert!(total - sum <= 4, "slots {total}, categories {sum}");
        // retiring 102/255 = 0.4 of the slots.
        assert_eq!(r.values[1].1, 14_400_000_000);
    }
}
