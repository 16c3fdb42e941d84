//! Top-down level 2 of the default config (issue #30) on the simulated
//! PMU: the Skylake family (intel-skx, intel-client) and AMD Zen 4
//! (amd-zen4) evaluate every level-2 entry from the simulator's counts,
//! each compared with the value computed by hand below; the shares under
//! one level-1 category add up to it; every other fixture has the level-2
//! entries unavailable with their inputs' reasons (an expected absence,
//! never a failure).
//!
//! The simulator's rates (events per second of enabled time on each CPU,
//! `src/perf/sim/accept.rs` `pipeline_rate` and the `cpu-cycles` and
//! `branch-misses` aliases of `src/perf/sim/rates.rs`); the CPU count
//! and the window cancel out of every share.
//!
//! Skylake: cycles 2e9 (slots 4 × 2e9 = 8e9), UOPS_RETIRED.RETIRE_SLOTS
//! 4e9, UOPS_ISSUED.ANY 5.2e9, INT_MISC.RECOVERY_CYCLES 1e8,
//! IDQ_UOPS_NOT_DELIVERED.CORE 1.6e9, instructions 3e9; level 2:
//! IDQ_UOPS_NOT_DELIVERED.CYCLES_0_UOPS_DELIV.CORE 2e8,
//! BR_MISP_RETIRED.ALL_BRANCHES 5e6, MACHINE_CLEARS.COUNT 1.25e6,
//! UOPS_RETIRED.MACRO_FUSED 2e8, CYCLE_ACTIVITY.STALLS_MEM_ANY 3e8,
//! .STALLS_TOTAL 4e8, EXE_ACTIVITY.BOUND_ON_STORES 1e8, .1_PORTS_UTIL 2e8,
//! .2_PORTS_UTIL 2e8.
//!
//! * frontend_bound = 1.6e9 / 8e9 = 0.2
//! * bad_speculation = (5.2e9 - 4e9 + 4 × 1e8) / 8e9 = 1.6e9 / 8e9 = 0.2
//! * retiring = 4e9 / 8e9 = 0.5
//! * backend_bound = 1 - 0.2 - (5.2e9 + 4 × 1e8) / 8e9 = 1 - 0.2 - 0.7 = 0.1
//! * frontend_bound_latency = 4 × 2e8 / 8e9 = 0.1
//! * frontend_bound_bandwidth = 0.2 - 0.1 = 0.1
//! * bad_speculation_mispredicts = 5e6 / (5e6 + 1.25e6) × 0.2 = 0.8 × 0.2 = 0.16
//! * bad_speculation_pipeline_restarts = 0.2 - 0.16 = 0.04
//! * backend_bound_memory = (3e8 + 1e8) / (4e8 + (2e8 + 0.5 × 2e8) + 1e8) × 0.1
//!   = 4e8 / 8e8 × 0.1 = 0.05
//! * backend_bound_cpu = 0.1 - 0.05 = 0.05
//! * retiring_heavy_operations = (4e9 + 2e8 - 3e9) / 8e9 = 1.2e9 / 8e9 = 0.15
//! * retiring_light_operations = 0.5 - 0.15 = 0.35
//!
//! Zen 4: ls_not_halted_cyc 2e9 (slots 6 × 2e9 = 1.2e10), ex_ret_ops
//! 4.8e9, de_src_op_disp.all 6e9, de_no_dispatch_per_slot frontend 2.4e9,
//! backend 3e9, SMT contention 0.6e9; level 2: the frontend event with
//! cmask 6 2e8, ex_ret_brn_misp 5e6, resyncs_or_nc_redirects 5e6,
//! ex_no_retire.load_not_complete 3e8, .not_complete 5e8,
//! ex_ret_ucode_ops 1.2e9.
//!
//! * frontend_bound = 2.4e9 / 1.2e10 = 0.2
//! * bad_speculation = (6e9 - 4.8e9) / 1.2e10 = 0.1
//! * backend_bound = 3e9 / 1.2e10 = 0.25
//! * retiring = 4.8e9 / 1.2e10 = 0.4 (and smt_contention 0.05: the five add to 1)
//! * frontend_bound_latency = 6 × 2e8 / 1.2e10 = 0.1
//! * frontend_bound_bandwidth = (2.4e9 - 6 × 2e8) / 1.2e10 = 0.1
//! * bad_speculation_mispredicts = 0.1 × 5e6 / (5e6 + 5e6) = 0.05
//! * bad_speculation_pipeline_restarts = 0.1 × 5e6 / (5e6 + 5e6) = 0.05
//! * backend_bound_memory = 0.25 × 3e8 / 5e8 = 0.15
//! * backend_bound_cpu = 0.25 × (1 - 0.6) = 0.1
//! * retiring_fastpath = 0.4 × (1 - 1.2e9 / 4.8e9) = 0.4 × 0.75 = 0.3
//! * retiring_microcode = 0.4 × 0.25 = 0.1

use crate::engines::{default_derived_values, default_engine};
use perf_exporter::problem::Class;
use perf_exporter::resolve::chain::Status;
use std::collections::BTreeMap;

/// The level-2 entries under each level-1 category, on both platforms.
const UNDER: [(&str, &[&str]); 4] = [
    (
        "frontend_bound",
        &["frontend_bound_latency", "frontend_bound_bandwidth"],
    ),
    (
        "bad_speculation",
        &[
            "bad_speculation_mispredicts",
            "bad_speculation_pipeline_restarts",
        ],
    ),
    (
        "backend_bound",
        &["backend_bound_memory", "backend_bound_cpu"],
    ),
    (
        "retiring",
        &[
            "retiring_heavy_operations",
            "retiring_light_operations",
            "retiring_fastpath",
            "retiring_microcode",
        ],
    ),
];

/// Every level-2 entry of the default config.
fn level2() -> Vec<&'static str> {
    UNDER
        .iter()
        .flat_map(|(_, l2)| l2.iter().copied())
        .collect()
}

fn value(v: &BTreeMap<String, Option<f64>>, fixture: &str, name: &str) -> f64 {
    v.get(name)
        .copied()
        .flatten()
        .unwrap_or_else(|| panic!("{fixture}: no value for {name}: {v:?}"))
}

fn close(got: f64, want: f64) -> bool {
    (got - want).abs() <= 1e-9
}

fn check(fixture: &str, want: &[(&str, f64)]) {
    let v = default_derived_values(fixture);
    for (name, w) in want {
        let got = value(&v, fixture, name);
        assert!(close(got, *w), "{fixture}: {name} = {got}, want {w}");
    }
    // The shares under one level-1 category add up to it.
    for (parent, children) in UNDER {
        let have: Vec<f64> = children
            .iter()
            .filter_map(|c| v.get(*c).copied().flatten())
            .collect();
        assert_eq!(have.len(), 2, "{fixture}: level 2 of {parent}: {have:?}");
        let sum: f64 = have.iter().sum();
        let p = value(&v, fixture, parent);
        assert!(
            close(sum, p),
            "{fixture}: level 2 of {parent} adds to {sum}, not {p}"
        );
    }
}

#[test]
fn skylake_level_2_is_the_hand_computed_share() {
    for fixture in ["intel-skx", "intel-client"] {
        check(
            fixture,
            &[
                ("frontend_bound", 0.2),
                ("bad_speculation", 0.2),
                ("backend_bound", 0.1),
                ("retiring", 0.5),
                ("frontend_bound_latency", 0.1),
                ("frontend_bound_bandwidth", 0.1),
                ("bad_speculation_mispredicts", 0.16),
                ("bad_speculation_pipeline_restarts", 0.04),
                ("backend_bound_memory", 0.05),
                ("backend_bound_cpu", 0.05),
                ("retiring_heavy_operations", 0.15),
                ("retiring_light_operations", 0.35),
            ],
        );
    }
}

#[test]
fn zen4_level_2_is_the_hand_computed_share() {
    check(
        "amd-zen4",
        &[
            ("frontend_bound", 0.2),
            ("bad_speculation", 0.1),
            ("backend_bound", 0.25),
            ("retiring", 0.4),
            ("smt_contention", 0.05),
            ("frontend_bound_latency", 0.1),
            ("frontend_bound_bandwidth", 0.1),
            ("bad_speculation_mispredicts", 0.05),
            ("bad_speculation_pipeline_restarts", 0.05),
            ("backend_bound_memory", 0.15),
            ("backend_bound_cpu", 0.1),
            ("retiring_fastpath", 0.3),
            ("retiring_microcode", 0.1),
        ],
    );
}

/// Every level-2 entry resolves on Ice Lake-SP (intel-icx: its own
/// alternative, the first), on the perf-metrics P-cores of intel-hybrid
/// (Alder Lake's, the second), on the Skylake family (Skylake's, the
/// third) and on Zen 4 (Zen 4's, the last: each
/// of perf's Zen 4 level-2 formulas divides with `d_ratio`, 0 for a
/// window without dispatch slots; `frontend_bound_latency` and
/// `_bandwidth` read Zen 4's own frontend-latency family, so Skylake's
/// plain quotient, which comes first, does not resolve there), and the
/// other vendor's retiring split is unavailable as not on this platform.
#[test]
fn each_platform_takes_its_own_formula() {
    let intel_only = ["retiring_heavy_operations", "retiring_light_operations"];
    let amd_only = ["retiring_fastpath", "retiring_microcode"];
    for (fixture, other, chosen) in [
        ("intel-icx", &amd_only, Some(0)),
        ("intel-hybrid", &amd_only, Some(1)),
        ("intel-skx", &amd_only, Some(2)),
        ("intel-client", &amd_only, Some(2)),
        ("amd-zen4", &intel_only, None),
    ] {
        let (_k, e) = default_engine(fixture);
        let r = &e.host_derived().resolution;
        for name in level2() {
            let d = r
                .get(name)
                .unwrap_or_else(|| panic!("{fixture}: {name} not in the table"));
            if other.contains(&name) {
                assert_eq!(d.status, Status::Unavailable, "{fixture}: {name}");
                assert_eq!(d.class(), Some(Class::NotOnPlatform), "{fixture}: {name}");
            } else {
                assert_ne!(d.status, Status::Unavailable, "{fixture}: {name}: {d:?}");
                if chosen.is_some() {
                    assert_eq!(d.chosen, chosen, "{fixture}: {name}: {d:?}");
                } else {
                    assert_eq!(
                        d.chosen,
                        Some(d.tried.len() - 1),
                        "{fixture}: {name}: {d:?}"
                    );
                    let expr = d.expr.as_deref().unwrap_or("");
                    assert!(expr.contains("d_ratio("), "{fixture}: {name}: {expr}");
                }
            }
        }
    }
}

/// Each of `names` is unavailable on `fixture` as "not on this
/// platform", with a reason.
fn not_on_platform(fixture: &str, names: &[&str]) {
    let (_k, e) = default_engine(fixture);
    let r = &e.host_derived().resolution;
    for name in names {
        let d = r
            .get(name)
            .unwrap_or_else(|| panic!("{fixture}: {name} not in the table"));
        assert_eq!(d.status, Status::Unavailable, "{fixture}: {name}");
        assert!(d.problem().is_some(), "{fixture}: {name}: no reason");
        assert_eq!(
            d.class(),
            Some(Class::NotOnPlatform),
            "{fixture}: {name}: {:?}",
            d.problem()
        );
    }
}

/// Where level 1 comes from the perf-metrics events or nowhere, level 2
/// is unavailable with its inputs' reasons: not on this platform, never
/// a failure.
#[test]
fn other_platforms_have_no_level_2_and_say_why() {
    for fixture in [
        "amd-zen3",
        "arm-neoverse-n1",
        "arm-neoverse-n2",
        "qemu-neoverse-n1",
        "vm-no-pmu",
    ] {
        not_on_platform(fixture, &level2());
    }
}

/// The E-cores' level 2 (`atom_*`, perf's `cpu_atom` TopdownL2 of
/// adl-metrics.json) exists on the hybrid parts only: on every other
/// fixture each share is unavailable as "not on this platform" (no
/// `cpu_atom` PMU, or a CPU the Alder Lake model guard does not match).
#[test]
fn the_e_cores_level_2_is_not_on_other_platforms() {
    for fixture in [
        "intel-skx",
        "intel-client",
        "amd-zen4",
        "amd-zen3",
        "arm-neoverse-n1",
        "arm-neoverse-n2",
        "qemu-neoverse-n1",
        "vm-no-pmu",
    ] {
        not_on_platform(fixture, &crate::common::ATOM_L2);
    }
}

/// Zen 4's level 1 is perf's Zen 4 formulas (`amdzen4/pipeline.json` @
/// 037dd1308c6dfa64edd2dfcd1b8177a3f484a124, group `PipelineL1`): each
/// share divides with `d_ratio(.., total_dispatch_slots)`. Skylake's
/// `frontend_bound` and `retiring` read the same counts (slots, frontend
/// and retiring slots) and come first, so they carry the guard
/// `requires_cpu: "GenuineIntel-.*"`: on amd-zen4 they are "no encoding for
/// CPU AuthenticAMD-..." and all four shares take the Zen 4 alternative,
/// with the values by hand (module docs: 0.2, 0.1, 0.25,
/// 0.4). A window without dispatch slots (two collections at the same
/// instant of the simulator's clock: every count's delta is 0) gives 0
/// for each, `d_ratio`'s value for a zero divisor; on intel-skx the same
/// window leaves Skylake's plain quotients undefined. Intel keeps its
/// alternatives: the perf-metrics one on intel-hybrid, Skylake's on
/// intel-skx and intel-client.
#[test]
fn zen4_level_1_takes_perfs_zen4_formulas() {
    const L1: [&str; 4] = [
        "frontend_bound",
        "bad_speculation",
        "backend_bound",
        "retiring",
    ];
    let (_k, e) = default_engine("amd-zen4");
    let r = &e.host_derived().resolution;
    for name in L1 {
        let d = r.get(name).unwrap();
        // Found by its formula: the alternatives before it differ per
        // share (Ice Lake's come first for some).
        assert!(d.chosen.is_some(), "amd-zen4: {name}: {d:?}");
        let expr = d.expr.as_deref().unwrap_or("");
        assert!(
            expr.starts_with("d_ratio(") && expr.ends_with(", total_dispatch_slots)"),
            "amd-zen4: {name}: {expr}"
        );
    }
    for name in ["frontend_bound", "retiring"] {
        let skylake = &r.get(name).unwrap().tried[1];
        let why = skylake.problem.as_ref().expect("Skylake's rejected");
        assert_eq!(why.code(), "no_cpu_encoding", "{name}: {why}");
        assert!(
            why.to_string()
                .starts_with("no encoding for CPU AuthenticAMD-25-"),
            "{name}: {why}"
        );
    }
    let v = default_derived_values("amd-zen4");
    for (name, want) in L1.iter().zip([0.2, 0.1, 0.25, 0.4]) {
        let got = value(&v, "amd-zen4", name);
        assert!(close(got, want), "amd-zen4: {name} = {got}, want {want}");
    }
    // A window without slots (the cores halted throughout: every count's
    // delta 0), evaluated by the table each host takes.
    let empty = |fixture: &str| -> Vec<(String, Option<f64>)> {
        let (_k, e) = default_engine(fixture);
        e.derived()
            .evaluate(&|_| Some(0.0), Some(1.0), &|_| Err("not read".into()))
            .into_iter()
            .map(|(n, v)| (n.to_string(), v.ok().filter(|x| x.is_finite())))
            .collect()
    };
    let of = |vs: &[(String, Option<f64>)], name: &str| {
        vs.iter().find(|(n, _)| n == name).and_then(|(_, v)| *v)
    };
    let zen4 = empty("amd-zen4");
    let skx = empty("intel-skx");
    for name in L1 {
        assert_eq!(of(&zen4, name), Some(0.0), "amd-zen4: {name}");
    }
    for name in ["frontend_bound", "retiring"] {
        assert_eq!(of(&skx, name), None, "intel-skx: {name}");
    }
    // Intel keeps its own alternatives (found by formula: their positions
    // differ per share).
    for fixture in ["intel-hybrid", "intel-skx", "intel-client"] {
        let (_k, e) = default_engine(fixture);
        let r = &e.host_derived().resolution;
        for name in L1 {
            let d = r.get(name).unwrap();
            let expr = d.expr.as_deref().unwrap_or("");
            assert!(
                d.chosen.is_some() && !expr.contains("dispatch_slots"),
                "{fixture}: {name}: {d:?}"
            );
        }
    }
}
