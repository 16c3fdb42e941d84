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

use crate::engines::SEC;
use perf_exporter::config::Config;
use perf_exporter::engine::{Engine, Fds};
use perf_exporter::perf::sim::SimKernel;
use perf_exporter::pmu::PmuTable;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Copies `from` to `to` (directories and regular files only).
fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).unwrap();
        }
    }
}

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

/// The derived values by name, and the problems as (metric, reason).
type Window = (BTreeMap<String, Option<f64>>, Vec<(String, String)>);

/// The default config's derived values over one second of the simulated
/// tree with CPU model `model`, and the engine's problems by metric.
fn one_window(model: u32) -> Window {
    let dir = tempfile::tempdir().unwrap();
    let (sysfs, procfs) = sapphire_rapids(dir.path(), model);
    let mut t = PmuTable::discover(&sysfs).unwrap_or_else(|e| panic!("{}: {e}", sysfs.display()));
    assert!(t.get("cpu").is_some() && t.get("cpu_core").is_none());
    t.read_identities(&procfs);
    let cfg = Config::default_config();
    let k = Arc::new(SimKernel::with_manual_clock(t.clone()));
    let mut e = Engine::for_config(k.clone(), t, &cfg, Fds::Unbounded);
    e.set_derived(Arc::new(cfg.derived.clone()));
    let s0 = e.collect();
    k.advance(SEC);
    let s1 = e.collect();
    let f = perf_exporter::export::live::frame(
        &s0.families,
        &s1.families,
        1.0,
        &Default::default(),
        e.derived(),
    );
    let problems = e
        .problems()
        .into_iter()
        .map(|(n, p)| (n.to_string(), p.to_string()))
        .collect();
    (f.derived, problems)
}

const P: f64 = 255.0;
const DROP: f64 = 1e6 / 12e9;

/// Model 8F: every level-1 and level-2 share takes the `alderlake.json`
/// (perf's SPR) formula and equals its hand-computed value; each level-2
/// pair adds up to its parent and the four level-1 shares to 1.
#[test]
fn sapphire_rapids_takes_perfs_level_1_and_2_formulas() {
    let (d, problems) = one_window(0x8F);
    let value = |n: &str| -> f64 {
        d.get(n)
            .copied()
            .flatten()
            .unwrap_or_else(|| panic!("{n}: no value in {d:?}; problems {problems:?}"))
    };
    let want: [(&str, f64); 12] = [
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
    for (n, w) in want {
        let v = value(n);
        assert!((v - w).abs() < 1e-9, "{n}: {v}, by hand {w}");
    }
    for (parent, a, b) in [
        (
            "frontend_bound",
            "frontend_bound_latency",
            "frontend_bound_bandwidth",
        ),
        (
            "bad_speculation",
            "bad_speculation_mispredicts",
            "bad_speculation_pipeline_restarts",
        ),
        ("backend_bound", "backend_bound_memory", "backend_bound_cpu"),
        (
            "retiring",
            "retiring_heavy_operations",
            "retiring_light_operations",
        ),
    ] {
        assert!(
            (value(a) + value(b) - value(parent)).abs() < 1e-9,
            "{a} + {b} != {parent}"
        );
    }
    let sum: f64 = [
        "frontend_bound",
        "bad_speculation",
        "backend_bound",
        "retiring",
    ]
    .iter()
    .map(|n| value(n))
    .sum();
    assert!((sum - 1.0).abs() < 1e-9, "level 1 adds up to {sum}");
    // Every count the shares read is counted: no problem for any of them.
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
        assert!(problems.iter().all(|(n, _)| n != m), "{m}: {problems:?}");
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
    let (d, problems) = one_window(0xFE);
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
