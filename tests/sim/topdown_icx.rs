//! Top-down levels 1 and 2 on a simulated Ice Lake-SP (the intel-icx
//! fixture, `GenuineIntel-6-6A-6`; and with a client Ice Lake identity,
//! 6-7E), through the default config: perf's `icelakex/icx-metrics.json`
//! formulas, the same as `icelake/icl-metrics.json`'s
//! (config/metrics/icelakex.json, config/metrics/README.md) over the perf-metrics `slots` and level-1
//! `topdown-*` events (`icl_td_events_attrs`: Ice Lake has no level-2
//! metric events) and the raw events its level 2 reads.
//!
//! The simulated PMU (`src/perf/sim/accept.rs`) gives Ice Lake 5 slots a
//! cycle, so per CPU and second: slots s = 1e10, retiring 102/255 of it,
//! bad speculation 26, frontend bound 51, backend bound 76;
//! `INT_MISC.UOP_DROPPING` d = 1e8 (d/s = 0.01); the clears
//! (`INT_MISC.RECOVERY_CYCLES` cmask 1 edge) c = 2e7 (5c/s = 0.01);
//! `IDQ_UOPS_NOT_DELIVERED.CYCLES_0_UOPS_DELIV.CORE` (cmask 5) 2.2e8;
//! `BR_MISP_RETIRED.ALL_BRANCHES` (the `branch-misses` alias) 5e6 and
//! `MACHINE_CLEARS.COUNT` 1.25e6; `CYCLE_ACTIVITY.STALLS_MEM_ANY` 3e8,
//! `.STALLS_TOTAL` 4e8, `EXE_ACTIVITY.BOUND_ON_STORES` (cmask 2) 1e8,
//! `.1_PORTS_UTIL` and `.2_PORTS_UTIL` 2e8 each; `UOPS_ISSUED.ANY` 5e9,
//! `IDQ.MS_UOPS` 5e8, `IDQ.MITE_UOPS` 2e9, `UOPS_DECODED.DEC0` 3e8 and
//! with cmask 1 1e8. By perf's formulas:
//!
//! * frontend_bound = 51/255 - 0.01; frontend_bound_latency =
//!   (5 × 2.2e8 - 1e8) / 1e10 = 0.1; frontend_bound_bandwidth = the
//!   difference;
//! * backend_bound = 76/255 + 0.01; backend_bound_memory = (3e8 + 1e8) /
//!   (4e8 + 2e8 + retiring × 2e8 + 1e8) × backend_bound; backend_bound_cpu
//!   the rest;
//! * retiring = 102/255; retiring_heavy_operations = retiring × 5e8/5e9 +
//!   retiring × (3e8 - 1e8)/2e9 = 0.2 × retiring; light the rest;
//! * bad_speculation = 1 - the other three = 26/255;
//!   bad_speculation_mispredicts = 5e6 / 6.25e6 × bad_speculation = 0.8 ×
//!   it; pipeline restarts the rest
//!
//! (every CPU counts the same, so the per-node sums keep these ratios).

use crate::engines::default_window;
use crate::shares::{check_shares, P_CORE_PAIRS};
use perf_exporter::pmu::PmuTable;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// The derived values by name, and the problems as (metric, reason).
type Window = (BTreeMap<String, Option<f64>>, Vec<(String, String)>);

/// The default config's derived values over one second of the simulated
/// intel-icx tree with the CPU identities of `procfs`, and the engine's
/// problems by metric.
fn one_window(procfs: &Path) -> Window {
    let sysfs = fixtures().join("sysfs/intel-icx");
    let mut t = PmuTable::discover(&sysfs).unwrap_or_else(|e| panic!("{}: {e}", sysfs.display()));
    t.read_identities(procfs);
    let w = default_window(t);
    (w.derived, w.problems)
}

const P: f64 = 255.0;

/// Model 6A: every level-1 and level-2 share takes perf's Ice Lake-SP
/// formula and equals its hand-computed value; each level-2 pair adds up
/// to its parent and the four level-1 shares to 1.
#[test]
fn ice_lake_sp_takes_perfs_level_1_and_2_formulas() {
    ice_lake_takes_perfs_level_1_and_2_formulas(&fixtures().join("procfs/intel-icx"));
}

/// Client Ice Lake (6-7E, `icelake/icl-metrics.json`: the same twelve
/// formulas, the same encodings) on the same tree: the same values.
#[test]
fn client_ice_lake_takes_the_same_formulas() {
    let (_dir, procfs) = with_model(0x7E);
    ice_lake_takes_perfs_level_1_and_2_formulas(&procfs);
}

fn ice_lake_takes_perfs_level_1_and_2_formulas(procfs: &Path) {
    let (d, problems) = one_window(procfs);
    let fe = 51.0 / P - 0.01;
    let be = 76.0 / P + 0.01;
    let ret = 102.0 / P;
    let bad = 26.0 / P;
    let mem = 4e8 / (4e8 + 2e8 + ret * 2e8 + 1e8) * be;
    let want: [(&str, f64); 12] = [
        ("frontend_bound", fe),
        ("frontend_bound_latency", 0.1),
        ("frontend_bound_bandwidth", fe - 0.1),
        ("bad_speculation", bad),
        ("bad_speculation_mispredicts", 0.8 * bad),
        ("bad_speculation_pipeline_restarts", 0.2 * bad),
        ("backend_bound", be),
        ("backend_bound_memory", mem),
        ("backend_bound_cpu", be - mem),
        ("retiring", ret),
        ("retiring_heavy_operations", 0.2 * ret),
        ("retiring_light_operations", 0.8 * ret),
    ];
    check_shares(&d, &want, &P_CORE_PAIRS, &[""]);
    // Every count the shares read is counted: no problem for any of them.
    for m in [
        "perf_topdown_slots_total",
        "perf_topdown_retiring_slots_total",
        "perf_topdown_bad_speculation_slots_total",
        "perf_topdown_frontend_bound_slots_total",
        "perf_topdown_backend_bound_slots_total",
        "perf_topdown_uop_dropping_slots_total",
        "perf_topdown_recovery_periods_total",
        "perf_topdown_issued_slots_total",
        "perf_pipeline_frontend_latency_slots_total",
        "perf_pipeline_branch_mispredicts_total",
        "perf_pipeline_restarts_total",
        "perf_pipeline_memory_stall_cycles_total",
        "perf_pipeline_execution_stall_cycles_total",
        "perf_pipeline_store_bound_cycles_total",
        "perf_pipeline_one_port_cycles_total",
        "perf_pipeline_two_ports_cycles_total",
        "perf_pipeline_microcode_sequencer_uops_total",
        "perf_pipeline_legacy_decode_uops_total",
        "perf_pipeline_decoder0_uops_total",
        "perf_pipeline_decoder0_cycles_total",
    ] {
        assert!(problems.iter().all(|(n, _)| n != m), "{m}: {problems:?}");
    }
}

/// The intel-icx tree's own cpuinfo with `model` (decimal) for 106, in a
/// temporary directory: the guard and the procfs root.
fn with_model(model: u32) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let procfs = dir.path().join("procfs");
    fs::create_dir_all(&procfs).unwrap();
    let cpuinfo = fs::read_to_string(fixtures().join("procfs/intel-icx/cpuinfo")).unwrap();
    assert!(cpuinfo.contains("model\t\t: 106\n"));
    fs::write(
        procfs.join("cpuinfo"),
        cpuinfo.replace("model\t\t: 106\n", &format!("model\t\t: {model}\n")),
    )
    .unwrap();
    (dir, procfs)
}

/// The problem of `metric`, which must be "no encoding for CPU <id>...".
fn no_encoding(problems: &[(String, String)], metric: &str, id: &str) {
    let p = problems
        .iter()
        .find(|(n, _)| n == metric)
        .unwrap_or_else(|| panic!("no problem for {metric} in {problems:?}"));
    assert!(
        p.1.starts_with(&format!("no encoding for CPU {id}")),
        "{p:?}"
    );
}

/// The intel-icx tree with a model no alternative names (6-FE): the Ice
/// Lake encodings are not taken. `INT_MISC.UOP_DROPPING`, the clears and
/// the heavy-operations events have no encoding for that CPU, so every
/// share whose Ice Lake formula reads them takes no value, except
/// frontend_bound (the Skylake formula's `topdown-fe-bound / slots`),
/// backend_bound (Alder Lake's `topdown-be-bound` share, without Ice
/// Lake's clears term) and retiring (the Alder Lake formula over the
/// perf-metrics events alone, the same as Ice Lake's).
#[test]
fn an_unknown_model_has_no_encoding_for_uop_dropping() {
    let (_dir, procfs) = with_model(0xFE);
    let (d, problems) = one_window(&procfs);
    for m in [
        "perf_topdown_uop_dropping_slots_total",
        "perf_topdown_recovery_periods_total",
        "perf_pipeline_microcode_sequencer_uops_total",
        "perf_pipeline_frontend_latency_slots_total",
    ] {
        no_encoding(&problems, m, "GenuineIntel-6-FE");
    }
    // The three shares other alternatives give, by hand; none of the rest.
    let taken = [
        ("frontend_bound", 51.0 / P),
        ("backend_bound", 76.0 / P),
        ("retiring", 102.0 / P),
    ];
    for n in crate::common::TOPDOWN_L1_L2 {
        let v = d.get(n).copied().flatten();
        match taken.iter().find(|(t, _)| *t == n) {
            Some((_, w)) => {
                let v = v.unwrap_or_else(|| panic!("{n}"));
                assert!((v - w).abs() < 1e-9, "{n}: {v}, by hand {w}");
            }
            None => assert_eq!(v, None, "{n} in {d:?}"),
        }
    }
}

/// Tiger Lake (6-8C; its `tigerlake/` files were not read): no Ice Lake
/// encoding is taken for it, as for any model the guards do not name.
#[test]
fn tiger_lake_is_not_covered() {
    let (_dir, procfs) = with_model(0x8C);
    let (d, problems) = one_window(&procfs);
    no_encoding(
        &problems,
        "perf_topdown_uop_dropping_slots_total",
        "GenuineIntel-6-8C",
    );
    assert_eq!(d.get("bad_speculation").copied().flatten(), None);
}

/// A Skylake-SP identity (6-55) on the same tree: no Ice Lake encoding
/// of `INT_MISC.UOP_DROPPING` (0x0D/0x10), the clears, the frontend
/// latency with cmask 5 or the heavy-operations events is taken for it,
/// and frontend_bound is not Ice Lake's (it falls back to `topdown-fe-bound
/// / slots`).
#[test]
fn a_skylake_model_gets_no_ice_lake_encoding() {
    let (_dir, procfs) = with_model(85);
    let (d, problems) = one_window(&procfs);
    for m in [
        "perf_topdown_uop_dropping_slots_total",
        "perf_topdown_recovery_periods_total",
        "perf_pipeline_microcode_sequencer_uops_total",
        "perf_pipeline_legacy_decode_uops_total",
        "perf_pipeline_decoder0_uops_total",
        "perf_pipeline_decoder0_cycles_total",
    ] {
        no_encoding(&problems, m, "GenuineIntel-6-55");
    }
    let fe = d
        .get("frontend_bound")
        .copied()
        .flatten()
        .expect("frontend_bound");
    assert!((fe - 51.0 / P).abs() < 1e-9, "frontend_bound {fe}");
}
