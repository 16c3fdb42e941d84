//! Top-down level 1 of Arm Neoverse N2 in the default config (issue #30):
//! perf's `neoverse-n2-v2/metrics.json` and `sbsa.json` formulas
//! (config/metrics/neoverse-n2.json, the fourth alternative of
//! `frontend_bound`, `bad_speculation`, `backend_bound` and `retiring`)
//! evaluated on the simulated PMU of the arm-neoverse-n2 fixture (an N2
//! r0p0, `caps/slots` 5), each share compared with the value computed by
//! hand below, and the four adding up to 1. Where the PMU has no slot
//! events (arm-neoverse-n1, qemu-neoverse-n1) or is no Arm PMU, the Arm
//! alternative is rejected with the missing event's reason.
//!
//! The simulator's rates (`src/perf/sim/accept.rs`, `arm_slot_rate`;
//! events per second of enabled time on each CPU; the CPU count and the
//! window cancel out of every share): CPU_CYCLES 2e9, so 5 × 2e9 = 1e10
//! slots; STALL_SLOT_FRONTEND 0.2 × 1e10 + 2e9 = 4e9 (the N2 r0p0 counts
//! one slot more per cycle), STALL_SLOT_BACKEND 3e9, STALL_SLOT
//! 0.5 × 1e10 + 2e9 = 7e9, OP_SPEC 5e9, OP_RETIRED 4e9. The default
//! counts CPU_CYCLES × 5 as `perf_topdown_arm_slots_total` (1e10), so
//! perf's `cpu_cycles` is that over 5.
//!
//! * frontend_bound = (4e9 - 2e9) / (5 × 2e9) = 0.2
//! * backend_bound = 3e9 / 1e10 = 0.3
//! * retiring = 4e9 / 5e9 × (1 - (7e9 - 2e9) / 1e10) = 0.8 × 0.5 = 0.4
//! * bad_speculation = (1 - 0.8) × 0.5 = 0.1
//! * sum = 1
//!
//! Neoverse V2 (the arm-neoverse-v2 fixture: MIDR 0x410fd4f0, `caps/slots`
//! 8) and N2 r0p3 (the arm-neoverse-n2 tree with MIDR 0x410fd493, built at
//! run time) take perf's formula without the correction (the `if` branch
//! of `neoverse-n2-v2/metrics.json`: `#slots - 5` is 3 on a V2; the later
//! `strcmp_cpuid_str(0x410fd493)` test on an N2 r0p3), over their own
//! slots metric (config/metrics/neoverse-v2.json, neoverse-n2-r0p3.json:
//! the fifth and sixth alternatives). On the V2: CPU_CYCLES 2e9, 8 × 2e9 =
//! 1.6e10 slots (`perf_topdown_arm_v2_slots_total`), STALL_SLOT_FRONTEND
//! 0.2 × 1.6e10 = 3.2e9, STALL_SLOT_BACKEND 4.8e9, STALL_SLOT 8e9, OP_SPEC
//! 8e9, OP_RETIRED 6.4e9 (no erratum):
//!
//! * frontend_bound = 3.2e9 / (8 × 2e9) = 0.2 (with 5 slots a cycle it
//!   would be 3.2e9 / 1e10 = 0.32)
//! * backend_bound = 4.8e9 / 1.6e10 = 0.3
//! * retiring = 6.4e9 / 8e9 × (1 - 8e9 / 1.6e10) = 0.8 × 0.5 = 0.4
//! * bad_speculation = (1 - 0.8) × 0.5 = 0.1
//! * sum = 1
//!
//! On the N2 r0p3: 5 × 2e9 = 1e10 slots (`perf_topdown_arm_n2_slots_total`),
//! STALL_SLOT_FRONTEND 2e9, STALL_SLOT_BACKEND 3e9, STALL_SLOT 5e9 (no
//! extra slot per cycle), OP_SPEC 5e9, OP_RETIRED 4e9: frontend_bound
//! 2e9 / 1e10 = 0.2 (the r0p0 formula's `- cpu_cycles` would give 0),
//! backend_bound 0.3, retiring 0.8 × (1 - 0.5) = 0.4, bad_speculation 0.1.

use crate::engines::{copy_tree, default_derived_values, default_engine, SEC};
use perf_exporter::config::Config;
use perf_exporter::engine::{Engine, Fds};
use perf_exporter::perf::sim::SimKernel;
use perf_exporter::pmu::PmuTable;
use perf_exporter::problem::Class;
use perf_exporter::resolve::chain::Status;
use std::fs;
use std::path::Path;
use std::sync::Arc;

const LEVEL1: [&str; 4] = [
    "frontend_bound",
    "bad_speculation",
    "backend_bound",
    "retiring",
];

/// The slots metric of each Arm core's level-1 alternative: N2 r0p0-r0p2
/// (5 slots, with perf's correction), V2 (8) and N2 r0p3 and later (5).
/// The alternatives are found by the metric they read, not by position
/// (config/metrics/README.md gives the files' order; the Intel and AMD
/// ones before them differ per share).
const N2_SLOTS: &str = "perf_topdown_arm_slots_total";
const V2_SLOTS: &str = "perf_topdown_arm_v2_slots_total";
const N2_R0P3_SLOTS: &str = "perf_topdown_arm_n2_slots_total";

/// The index of the alternative over `slots` among those tried; `None`
/// where the alternatives tried stopped before it.
fn alt_over(d: &perf_exporter::resolve::derived::ResolvedDerived, slots: &str) -> Option<usize> {
    d.tried.iter().position(|t| t.event.contains(slots))
}

/// The N2 r0p0-r0p2 alternative of a level-1 entry, tried.
fn arm_tried(d: &perf_exporter::resolve::derived::ResolvedDerived) -> Option<usize> {
    alt_over(d, N2_SLOTS)
}

fn arm(d: &perf_exporter::resolve::derived::ResolvedDerived) -> usize {
    arm_tried(d).unwrap_or_else(|| panic!("no Arm alternative in {d:?}"))
}

/// The four level-1 shares of `e` over one second: each must take the
/// alternative over `slots`, equal the hand-computed value (module docs) and
/// the four add up to 1.
fn level_1_is(label: &str, k: &SimKernel, e: &mut Engine, slots: &str) {
    let r = &e.host_derived().resolution;
    for name in LEVEL1 {
        let d = r.get(name).expect("in the default table");
        let want = alt_over(d, slots);
        assert!(
            want.is_some(),
            "{label}: {name}: no alternative over {slots}: {d:?}"
        );
        assert_eq!(d.chosen, want, "{label}: {name}: {d:?}");
        assert_eq!(d.status, Status::Fallback, "{label}: {name}: {d:?}");
    }
    e.collect();
    k.advance(SEC);
    let s = e.collect();
    let v =
        perf_exporter::export::live::frame(&[], &s.families, 1.0, &Default::default(), e.derived())
            .derived;
    shares_are_the_simulated_ones(label, &v);
}

/// Level 1 in `v` is the simulated core's by hand (0.2, 0.1, 0.3, 0.4)
/// and adds up to 1.
fn shares_are_the_simulated_ones(label: &str, v: &std::collections::BTreeMap<String, Option<f64>>) {
    let mut sum = 0.0;
    for (name, want) in [
        ("frontend_bound", 0.2),
        ("bad_speculation", 0.1),
        ("backend_bound", 0.3),
        ("retiring", 0.4),
    ] {
        let got = v
            .get(name)
            .copied()
            .flatten()
            .unwrap_or_else(|| panic!("{label}: no value for {name}: {v:?}"));
        assert!(
            (got - want).abs() <= 1e-9,
            "{label}: {name} = {got}, want {want}"
        );
        sum += got;
    }
    assert!(
        (sum - 1.0).abs() <= 1e-9,
        "{label}: level 1 adds up to {sum}"
    );
}

#[test]
fn neoverse_v2_level_1_is_perfs_8_slot_formula_and_adds_up_to_1() {
    let (k, mut e) = default_engine("arm-neoverse-v2");
    level_1_is("arm-neoverse-v2", &k, &mut e, V2_SLOTS);
    // The other Arm cores' slots metrics are guarded to their MIDRs.
    let problems: Vec<String> = e
        .problems()
        .into_iter()
        .filter(|(n, _)| {
            *n == "perf_topdown_arm_slots_total" || *n == "perf_topdown_arm_n2_slots_total"
        })
        .map(|(n, p)| format!("{n}: {p}"))
        .collect();
    assert_eq!(problems.len(), 2, "{problems:?}");
    for p in &problems {
        assert!(p.contains("0x00000000410fd4f0"), "{p}");
    }
}

#[test]
fn neoverse_n2_r0p3_takes_perfs_formula_without_the_correction() {
    let dir = tempfile::tempdir().unwrap();
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sysfs/arm-neoverse-n2");
    let sysfs = dir.path().join("sysfs");
    copy_tree(&fixture, &sysfs);
    let cpus = sysfs.join("devices/system/cpu");
    let mut rewritten = 0;
    for entry in fs::read_dir(&cpus).unwrap() {
        let midr = entry.unwrap().path().join("regs/identification/midr_el1");
        if midr.exists() {
            fs::write(&midr, "0x00000000410fd493\n").unwrap();
            rewritten += 1;
        }
    }
    assert_eq!(rewritten, 4, "the fixture's CPUs");
    let mut t = PmuTable::discover(&sysfs).unwrap_or_else(|e| panic!("{}: {e}", sysfs.display()));
    t.read_identities(&dir.path().join("procfs"));
    let cfg = Config::default_config();
    let k = Arc::new(SimKernel::with_manual_clock(t.clone()));
    let mut e = Engine::for_config(k.clone(), t, &cfg, Fds::Unbounded);
    e.set_derived(Arc::new(cfg.derived.clone()));
    level_1_is("N2 r0p3", &k, &mut e, N2_R0P3_SLOTS);
}

#[test]
fn neoverse_n2_level_1_is_the_hand_computed_share_and_adds_up_to_1() {
    let (_k, e) = default_engine("arm-neoverse-n2");
    let r = &e.host_derived().resolution;
    for name in LEVEL1 {
        let d = r.get(name).expect("in the default table");
        assert_eq!(d.chosen, Some(arm(d)), "{name}: {d:?}");
        assert_eq!(d.status, Status::Fallback, "{name}: {d:?}");
    }
    shares_are_the_simulated_ones(
        "arm-neoverse-n2",
        &default_derived_values("arm-neoverse-n2"),
    );
    // No level 2 on Arm: perf's N2/V2 files have no TopdownL2 group.
    for name in ["frontend_bound_latency", "backend_bound_memory"] {
        let d = r.get(name).expect("in the default table");
        assert_eq!(d.status, Status::Unavailable, "{name}");
        assert_eq!(d.class(), Some(Class::NotOnPlatform), "{name}");
    }
}

/// The event each share's Arm formula reads first, which a PMU without
/// the slot events lacks.
fn first_arm_input(name: &str) -> &'static str {
    match name {
        "frontend_bound" => "stall_slot_frontend",
        "backend_bound" => "stall_slot_backend",
        _ => "op_retired",
    }
}

/// Neoverse N1 (the fixture's PMCEID has no STALL_SLOT or OP_* event,
/// `caps/slots` 0) and QEMU's emulated PMUv3: level 1 unavailable, the
/// Arm alternative rejected naming the missing event; an expected
/// absence, never a failure.
#[test]
fn arm_cores_without_slot_events_say_which_event_is_missing() {
    for fixture in ["arm-neoverse-n1", "qemu-neoverse-n1"] {
        let (_k, e) = default_engine(fixture);
        let r = &e.host_derived().resolution;
        for name in LEVEL1 {
            let d = r.get(name).expect("in the default table");
            assert_eq!(d.status, Status::Unavailable, "{fixture}: {name}");
            assert_eq!(d.class(), Some(Class::NotOnPlatform), "{fixture}: {name}");
            let arm = &d.tried[arm(d)];
            let why = arm
                .problem
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default();
            let missing = first_arm_input(name);
            assert!(
                why.contains(&format!("has no event `{missing}`")),
                "{fixture}: {name}: the Arm alternative's reason names {missing}: {why}"
            );
        }
    }
}

/// Every other platform takes its own alternative or none; the Arm one
/// never resolves there (no Arm PMU, no MIDR).
#[test]
fn other_platforms_never_take_the_arm_formula() {
    for fixture in [
        "intel-icx",
        "intel-hybrid",
        "intel-skx",
        "intel-client",
        "amd-zen4",
        "amd-zen3",
        "vm-no-pmu",
    ] {
        let (_k, e) = default_engine(fixture);
        let r = &e.host_derived().resolution;
        for name in LEVEL1 {
            let d = r.get(name).expect("in the default table");
            for (i, alt) in d.tried.iter().enumerate() {
                if alt.event.contains("perf_topdown_arm_") {
                    assert_ne!(d.chosen, Some(i), "{fixture}: {name}: {d:?}");
                    assert!(alt.problem.is_some(), "{fixture}: {name}: {d:?}");
                }
            }
        }
    }
}
