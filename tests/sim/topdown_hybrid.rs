//! Top-down levels 1 and 2 per core type on the simulated Raptor Lake
//! (the intel-hybrid fixture: P-cores `cpu_core` 0-15 with the
//! perf-metrics events, E-cores `cpu_atom` 16-27 with ordinary
//! `topdown-*` counters), through the default config: each share of one
//! window is computed from one core type's counts and equals the value
//! computed by hand below, and each level-2 pair adds up to its
//! level-1 parent.
//!
//! The counts the simulated PMU gives (`src/perf/sim/accept.rs`), per
//! second of a CPU:
//!
//! * P-cores: `slots` s = 12e9 (6 wide at 2 GHz); the metric events are
//!   their `PERF_METRICS` bytes over 255 of it: retiring 102, bad
//!   speculation 26, frontend bound 51, backend bound 76 (the four add up
//!   to 255, so their sum is s), heavy operations 20, branch mispredicts
//!   20, fetch latency 30, memory bound 40; `INT_MISC.UOP_DROPPING` (a raw
//!   event, 0xAD/0x10) d = 1e6.
//! * E-cores: `cpu-cycles` 2e9, so 5 slots a cycle is 1e10;
//!   `topdown-retiring` 0.4, `-fe-bound` 0.25, `-be-bound` 0.25 of it;
//!   level 2 (raw events): TOPDOWN_FE_BOUND.FRONTEND_LATENCY 1.5e9,
//!   .FRONTEND_BANDWIDTH 1.0e9, TOPDOWN_BAD_SPECULATION.MISPREDICT 6e8,
//!   .MACHINE_CLEARS 4e8, UOPS_RETIRED.MS 1e9,
//!   TOPDOWN_BE_BOUND.MEM_SCHEDULER 1e9, LD_HEAD.ANY_AT_RET 2e8 (cycles),
//!   MEM_SCHEDULER_BLOCK.ST_BUF 1e8 and .ALL 2e8 (cycles).
//!
//! So, by perf's formulas (config/metrics/alderlake.json):
//! frontend_bound = 51/255 - d/s, frontend_bound_latency = 30/255 - d/s,
//! frontend_bound_bandwidth = 21/255; bad_speculation = 1 - (51/255 - d/s +
//! 76/255 + 102/255) = 26/255 + d/s, bad_speculation_mispredicts = 20/255,
//! bad_speculation_pipeline_restarts = 6/255 + d/s; backend_bound = 76/255, backend_bound_memory
//! = 40/255, backend_bound_cpu = 36/255; retiring = 102/255, retiring_heavy_operations
//! = 20/255, retiring_light_operations = 82/255. E-cores: atom_frontend_bound
//! 0.25, atom_backend_bound 0.25, atom_retiring 0.4, atom_bad_speculation
//! 1 - 0.9 = 0.1; atom_frontend_bound_latency 0.15, _bandwidth 0.1,
//! atom_bad_speculation_mispredicts 0.06, _pipeline_restarts 0.04,
//! atom_backend_bound_memory min(0.25, 2e8/2e9 + 0.1 * 1e8/2e8) = 0.15,
//! atom_backend_bound_cpu 0.25 - 0.15 = 0.1, atom_ms_uops 0.1,
//! atom_base (4e9 - 1e9)/1e10 = 0.3. Before the split the P-core shares divided both core
//! types' `topdown-*` by the P-cores' slots (frontend bound about 0.41).

use crate::engines::{default_window, table, SEC};
use crate::shares::{check_shares, P_CORE_PAIRS};
use perf_exporter::config::Config;
use perf_exporter::engine::{Engine, Fds};
use perf_exporter::perf::sim::SimKernel;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// The default config's derived values over one second on the simulated
/// intel-hybrid (its procfs gives the CPU identity the model-guarded
/// `INT_MISC.UOP_DROPPING` needs), and the exported top-down families.
fn one_window() -> (
    BTreeMap<String, Option<f64>>,
    Vec<perf_exporter::snapshot::Family>,
) {
    let mut t = table("intel-hybrid");
    t.read_identities(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/procfs/intel-hybrid"),
    );
    let w = default_window(t);
    (w.derived, w.families)
}

/// The E-cores' level-2 pairs, each with its level-1 parent (the
/// P-cores' are [`P_CORE_PAIRS`]).
const ATOM_PAIRS: [(&str, &str, &str); 4] = [
    (
        "atom_frontend_bound",
        "atom_frontend_bound_latency",
        "atom_frontend_bound_bandwidth",
    ),
    (
        "atom_bad_speculation",
        "atom_bad_speculation_mispredicts",
        "atom_bad_speculation_pipeline_restarts",
    ),
    (
        "atom_backend_bound",
        "atom_backend_bound_memory",
        "atom_backend_bound_cpu",
    ),
    ("atom_retiring", "atom_base", "atom_ms_uops"),
];

#[test]
fn every_level_1_and_2_share_is_one_core_types_and_children_add_up() {
    let (d, families) = one_window();
    let drop = 1e6 / 12e9;
    let p = |x: f64| x / 255.0;
    let want: [(&str, f64); 24] = [
        ("frontend_bound", p(51.0) - drop),
        ("frontend_bound_latency", p(30.0) - drop),
        ("frontend_bound_bandwidth", p(21.0)),
        ("bad_speculation", p(26.0) + drop),
        ("bad_speculation_mispredicts", p(20.0)),
        ("bad_speculation_pipeline_restarts", p(6.0) + drop),
        ("backend_bound", p(76.0)),
        ("backend_bound_memory", p(40.0)),
        ("backend_bound_cpu", p(36.0)),
        ("retiring", p(102.0)),
        ("retiring_heavy_operations", p(20.0)),
        ("retiring_light_operations", p(82.0)),
        ("atom_frontend_bound", 0.25),
        ("atom_bad_speculation", 0.1),
        ("atom_backend_bound", 0.25),
        ("atom_retiring", 0.4),
        ("atom_frontend_bound_latency", 0.15),
        ("atom_frontend_bound_bandwidth", 0.1),
        ("atom_bad_speculation_mispredicts", 0.06),
        ("atom_bad_speculation_pipeline_restarts", 0.04),
        ("atom_backend_bound_memory", 0.15),
        ("atom_backend_bound_cpu", 0.1),
        ("atom_base", 0.3),
        ("atom_ms_uops", 0.1),
    ];
    // Each level-2 pair adds up to its parent, and each core type's four
    // level-1 shares to 1.
    let pairs: Vec<_> = P_CORE_PAIRS.iter().chain(&ATOM_PAIRS).copied().collect();
    check_shares(&d, &want, &pairs, &["", "atom_"]);
    // The P-cores' top-down counts are `cpu_core`'s only, the E-cores'
    // `cpu_atom`'s: never one series of both.
    for f in families
        .iter()
        .filter(|f| f.name.starts_with("perf_topdown_"))
    {
        let atom = f.name.starts_with("perf_topdown_atom_");
        for s in &f.samples {
            let pmu = s
                .labels
                .iter()
                .find(|(k, _)| *k == "pmu")
                .map(|(_, v)| v.to_string());
            let want = if atom { "cpu_atom" } else { "cpu_core" };
            assert_eq!(pmu.as_deref(), Some(want), "{} {:?}", f.name, s.labels);
        }
    }
}

/// The default's top-down groups on intel-hybrid are schedulable: the
/// simulated kernel (which refuses a metric event whose group leader is
/// not `slots`, as `intel_pmu_hw_config` does) opens every member of the
/// P-cores' group (`slots`, the eight metric events,
/// `INT_MISC.UOP_DROPPING`) and of the E-cores' (cycles and three
/// `topdown-*` counters; the level-2 groups of 5 and 4 raw events), and no
/// top-down metric is refused or unschedulable.
#[test]
fn the_p_cores_perf_metrics_group_opens_under_slots() {
    let mut t = table("intel-hybrid");
    t.read_identities(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/procfs/intel-hybrid"),
    );
    let cfg = Config::default_config();
    let k = Arc::new(SimKernel::with_manual_clock(t.clone()));
    let mut e = Engine::for_config(k.clone(), t, &cfg, Fds::Unbounded);
    e.collect();
    k.advance(SEC);
    e.collect();
    let bad: Vec<_> = e
        .problems()
        .into_iter()
        .filter(|(n, p)| {
            n.starts_with("perf_topdown_") && (p.open().is_some() || p.code() == "unschedulable")
        })
        .collect();
    assert!(bad.is_empty(), "{bad:?}");
}
