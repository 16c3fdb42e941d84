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

use crate::engines::{default_derived_values, default_engine};
use perf_exporter::problem::Class;
use perf_exporter::resolve::chain::Status;

const LEVEL1: [&str; 4] = [
    "frontend_bound",
    "bad_speculation",
    "backend_bound",
    "retiring",
];

/// The index of the Arm alternative in a level-1 entry: the one over
/// `perf_topdown_arm_slots_total` (the files' order of
/// config/metrics/README.md puts it last: Ice Lake-SP, where it gives a
/// formula of its own, Alder Lake, Skylake, Zen 4, N2).
/// `None` where the alternatives tried stopped before it.
fn arm_tried(d: &perf_exporter::resolve::derived::ResolvedDerived) -> Option<usize> {
    d.tried
        .iter()
        .position(|t| t.event.contains("perf_topdown_arm_slots_total"))
}

fn arm(d: &perf_exporter::resolve::derived::ResolvedDerived) -> usize {
    let i = arm_tried(d).unwrap_or_else(|| panic!("no Arm alternative in {d:?}"));
    assert_eq!(
        i,
        d.tried.len() - 1,
        "the Arm alternative is the last: {d:?}"
    );
    i
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
    let v = default_derived_values("arm-neoverse-n2");
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
            .unwrap_or_else(|| panic!("no value for {name}: {v:?}"));
        assert!((got - want).abs() <= 1e-9, "{name} = {got}, want {want}");
        sum += got;
    }
    assert!((sum - 1.0).abs() <= 1e-9, "level 1 adds up to {sum}");
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
            let i = arm_tried(d);
            assert!(i.is_none() || d.chosen != i, "{fixture}: {name}: {d:?}");
            if let Some(arm) = i.and_then(|i| d.tried.get(i)) {
                assert!(arm.problem.is_some(), "{fixture}: {name}: {d:?}");
            }
        }
    }
}
