//! Top-down levels 1 and 2 on a simulated Sapphire Rapids, through the
//! default config: perf's `sapphirerapids/spr-metrics.json` (and
//! `emeraldrapids/emr-metrics.json`) give the same TMA level 1 and 2
//! formulas over the perf-metrics events as the P-core ones of
//! `adl-metrics.json` (config/metrics/README.md), so the default's
//! `alderlake.json` alternatives resolve there once
//! `INT_MISC.UOP_DROPPING` (0xAD/0x10, `sapphirerapids/pipeline.json`,
//! `emeraldrapids/pipeline.json`) is counted on models 8F and CF.
//!
//! No fixture of its own: the tree is the intel-hybrid fixture's, built at
//! run time with its P-core PMU `cpu_core` renamed `cpu` and the E-core PMU
//! `cpu_atom` left out, `caps/pmu_name` `sapphire_rapids` and no `cpus`
//! file (a PMU of every CPU), as the kernel registers Sapphire Rapids' and
//! Emerald Rapids' core PMU: `arch/x86/events/intel/core.c`
//! `intel_pmu_init` gives both models `td_attr = glc_td_events_attrs`
//! (named `spr_td_events_attrs` before the Golden Cove rename), the nine
//! entries `slots`, `topdown-retiring`, `-bad-spec`, `-fe-bound`,
//! `-be-bound`, `-heavy-ops`, `-br-mispredict`, `-fetch-lat`, `-mem-bound`
//! with the encodings of `cpu_core`'s aliases (`slots` event=0x00,umask=0x4;
//! umask 0x80 .. 0x87). The CPU identity is a `cpuinfo` written beside it
//! (family 6, model 0x8F, stepping 8: `GenuineIntel-6-8F-8`).
//!
//! The simulated PMU (`src/perf/sim/accept.rs`) treats any core PMU whose
//! sysfs lists `slots` as a perf-metrics PMU, so per CPU and second:
//! slots s = 12e9, retiring 102/255 of it, bad speculation 26, frontend
//! bound 51, backend bound 76, heavy operations 20, branch mispredicts 20,
//! fetch latency 30, memory bound 40; `INT_MISC.UOP_DROPPING` (a raw event
//! without an alias) d = 1e6. By perf's formulas:
//!
//! * frontend_bound = 51/255 - d/s, frontend_bound_latency = 30/255 - d/s,
//!   frontend_bound_bandwidth = 21/255;
//! * bad_speculation = 26/255 + d/s, bad_speculation_mispredicts = 20/255,
//!   bad_speculation_pipeline_restarts = 6/255 + d/s;
//! * backend_bound = 76/255, backend_bound_memory = 40/255,
//!   backend_bound_cpu = 36/255;
//! * retiring = 102/255, retiring_heavy_operations = 20/255,
//!   retiring_light_operations = 82/255
//!
//! (every CPU counts the same, so the per-node sums keep these ratios).

use crate::engines::{copy_tree, default_window, DefaultWindow};
use crate::shares::{check_shares, P_CORE_PAIRS};
use perf_exporter::pmu::PmuTable;
use std::fs;
use std::path::{Path, PathBuf};

/// The Sapphire Rapids tree (see the module docs) under `dir`, with a
/// `cpuinfo` of family 6 and `model` (decimal, as the kernel writes it),
/// stepping 8, for every CPU of the fixture: its sysfs and procfs roots.
fn sapphire_rapids(dir: &Path, model: u32) -> (PathBuf, PathBuf) {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sysfs/intel-hybrid");
    let sysfs = dir.join("sysfs");
    copy_tree(&fixture, &sysfs);
    let devices = sysfs.join("bus/event_source/devices");
    fs::remove_dir_all(devices.join("cpu_atom")).unwrap();
    fs::rename(devices.join("cpu_core"), devices.join("cpu")).unwrap();
    fs::remove_file(devices.join("cpu/cpus")).unwrap();
    fs::write(devices.join("cpu/caps/pmu_name"), "sapphire_rapids\n").unwrap();
    let cpus = fs::read_dir(sysfs.join("devices/system/cpu"))
        .unwrap()
        .filter_map(|e| {
            e.unwrap()
                .file_name()
                .to_str()?
                .strip_prefix("cpu")?
                .parse::<u32>()
                .ok()
        })
        .max()
        .expect("the fixture's CPUs");
    let procfs = dir.join("procfs");
    fs::create_dir_all(&procfs).unwrap();
    let mut cpuinfo = String::new();
    for cpu in 0..=cpus {
        cpuinfo.push_str(&format!(
            "processor\t: {cpu}\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: {model}\n\
             model name\t: Intel(R) Xeon(R) (modelled)\nstepping\t: 8\nphysical id\t: 0\n\n"
        ));
    }
    fs::write(procfs.join("cpuinfo"), cpuinfo).unwrap();
    (sysfs, procfs)
}

/// The default config's derived values over one second of the simulated
/// tree with CPU model `model`, and the engine's problems by metric.
fn one_window(model: u32) -> DefaultWindow {
    let dir = tempfile::tempdir().unwrap();
    let (sysfs, procfs) = sapphire_rapids(dir.path(), model);
    let mut t = PmuTable::discover(&sysfs).unwrap_or_else(|e| panic!("{}: {e}", sysfs.display()));
    assert!(t.get("cpu").is_some() && t.get("cpu_core").is_none());
    t.read_identities(&procfs);
    default_window(t)
}

const P: f64 = 255.0;
const DROP: f64 = 1e6 / 12e9;

/// The twelve level-1 and level-2 shares on the tree, by hand (module
/// docs).
const SHARES: [(&str, f64); 12] = [
    ("frontend_bound", 51.0 / P - DROP),
    ("frontend_bound_latency", 30.0 / P - DROP),
    ("frontend_bound_bandwidth", 21.0 / P),
    ("bad_speculation", 26.0 / P + DROP),
    ("bad_speculation_mispredicts", 20.0 / P),
    ("bad_speculation_pipeline_restarts", 6.0 / P + DROP),
    ("backend_bound", 76.0 / P),
    ("backend_bound_memory", 40.0 / P),
    ("backend_bound_cpu", 36.0 / P),
    ("retiring", 102.0 / P),
    ("retiring_heavy_operations", 20.0 / P),
    ("retiring_light_operations", 82.0 / P),
];

/// Model `model`: every level-1 and level-2 share takes the
/// `alderlake.json` formula (the first alternative) and equals its
/// hand-computed value; each level-2 pair adds up to its parent and the
/// four level-1 shares to 1; every count the shares read is counted.
fn takes_perfs_level_1_and_2_formulas(model: u32) -> DefaultWindow {
    let w = one_window(model);
    check_shares(&w.derived, &SHARES, &P_CORE_PAIRS, &[""]);
    for m in [
        "perf_topdown_slots_total",
        "perf_topdown_retiring_slots_total",
        "perf_topdown_bad_speculation_slots_total",
        "perf_topdown_frontend_bound_slots_total",
        "perf_topdown_backend_bound_slots_total",
        "perf_topdown_heavy_operations_slots_total",
        "perf_topdown_branch_mispredict_slots_total",
        "perf_topdown_fetch_latency_slots_total",
        "perf_topdown_memory_bound_slots_total",
        "perf_topdown_uop_dropping_slots_total",
    ] {
        assert!(
            w.problems.iter().all(|(n, _)| n != m),
            "{model:X}: {m}: {:?}",
            w.problems
        );
    }
    w
}

/// Model 8F (Sapphire Rapids, perf's `spr-metrics.json`).
#[test]
fn sapphire_rapids_takes_perfs_level_1_and_2_formulas() {
    takes_perfs_level_1_and_2_formulas(0x8F);
}

/// Model CF (Emerald Rapids): perf's `emeraldrapids/emr-metrics.json` @
/// 40ccd6aa3e2e05be93394e3cd560c718dedfcc77 gives the same twelve
/// formulas as `spr-metrics.json` (config/metrics/README.md), and the
/// kernel the same `cpu` PMU, so every share takes the same alternative
/// as on Sapphire Rapids, with the same value.
#[test]
fn emerald_rapids_resolves_as_sapphire_rapids() {
    let spr = one_window(0x8F);
    let emr = takes_perfs_level_1_and_2_formulas(0xCF);
    for (n, _) in SHARES {
        let (s, e) = (&spr.chosen[n], &emr.chosen[n]);
        assert!(e.is_some(), "{n}: unavailable on EMR");
        assert_eq!(s, e, "{n}: EMR takes another alternative than SPR");
        assert_eq!(spr.derived[n], emr.derived[n], "{n}");
    }
}

/// The same tree with a model no alternative names (6-FE): the
/// `INT_MISC.UOP_DROPPING` family has no encoding for that CPU, and the
/// shares whose `alderlake.json` formula reads it take no value (the
/// Skylake and Zen 4 alternatives read counts this CPU does not have),
/// except frontend_bound, which falls back to the Skylake formula's
/// `topdown-fe-bound / slots`; the shares over the perf-metrics events
/// alone still resolve.
#[test]
fn an_unknown_model_has_no_encoding_for_uop_dropping() {
    let DefaultWindow {
        derived: d,
        problems,
        ..
    } = one_window(0xFE);
    let uop = problems
        .iter()
        .find(|(n, _)| n == "perf_topdown_uop_dropping_slots_total")
        .unwrap_or_else(|| panic!("no problem for UOP_DROPPING in {problems:?}"));
    assert!(
        uop.1.starts_with("no encoding for CPU GenuineIntel-6-FE"),
        "{uop:?}"
    );
    for n in [
        "bad_speculation",
        "frontend_bound_latency",
        "frontend_bound_bandwidth",
        "bad_speculation_pipeline_restarts",
    ] {
        assert_eq!(d.get(n).copied().flatten(), None, "{n} in {d:?}");
    }
    let fe = d
        .get("frontend_bound")
        .copied()
        .flatten()
        .expect("frontend_bound");
    assert!((fe - 51.0 / P).abs() < 1e-9, "frontend_bound {fe}");
    for (n, w) in [
        ("backend_bound", 76.0 / P),
        ("retiring", 102.0 / P),
        ("bad_speculation_mispredicts", 20.0 / P),
        ("backend_bound_memory", 40.0 / P),
        ("retiring_heavy_operations", 20.0 / P),
    ] {
        let v = d.get(n).copied().flatten().unwrap_or_else(|| panic!("{n}"));
        assert!((v - w).abs() < 1e-9, "{n}: {v}, by hand {w}");
    }
}

/// perf's `tma_info_l1mpki` and `tma_info_l3mpki` on Sapphire Rapids
/// (`spr-metrics.json` @ e80b500370e71b8cd7dd64be4080cee0a3e5068f) and
/// `tma_info_memory_l1mpki` / `_l3mpki` on Emerald Rapids
/// (`emr-metrics.json` @ 40ccd6aa3e2e05be93394e3cd560c718dedfcc77) are
/// Skylake's `L1MPKI` and `L3MPKI`, `1e3 * MEM_LOAD_RETIRED.L1_MISS /
/// INST_RETIRED.ANY` (and `.L3_MISS`), over the same encodings (0xD1/0x08,
/// 0xD1/0x20 in both `cache.json`): `l1d_read_mpki` and `llc_read_mpki`
/// take them on models 8F and CF. The simulator counts a raw event no
/// alias names at 1e6 a second per CPU and `instructions` at 3e9, so both
/// are 1e3 × 1e6 / 3e9 = 1/3; on a model no guard names (6-FE) they have
/// no encoding for that CPU.
#[test]
fn sapphire_and_emerald_rapids_take_perfs_mpki() {
    for model in [0x8F, 0xCF] {
        let w = one_window(model);
        for n in ["l1d_read_mpki", "llc_read_mpki"] {
            let v = crate::shares::value(&w.derived, n);
            assert!((v - 1.0 / 3.0).abs() < 1e-9, "{model:X}: {n} = {v}");
        }
    }
    let w = one_window(0xFE);
    for m in [
        "perf_l1d_retired_load_misses_total",
        "perf_l3_retired_load_misses_total",
    ] {
        let (_, why) = w
            .problems
            .iter()
            .find(|(n, _)| n == m)
            .unwrap_or_else(|| panic!("{m}: no problem in {:?}", w.problems));
        assert!(
            why.starts_with("no encoding for CPU GenuineIntel-6-FE"),
            "{m}: {why}"
        );
    }
    for n in ["l1d_read_mpki", "llc_read_mpki"] {
        assert_eq!(w.derived.get(n).copied().flatten(), None, "{n}");
    }
}
