//! No allocation per series on the scrape path: a collection on the
//! simulated PMU (one read per group, scaling, accumulation, snapshot) and
//! its text encoding into a reused buffer allocate the same number of
//! blocks on a 64-CPU and on a 256-CPU tree, although the second has four
//! times the groups and series. Counted with an instrumented global
//! allocator; one test in this binary, so no other test allocates
//! meanwhile. (Allocation *counts*, not speed or memory size, which the
//! benchmarks measure.)

#[path = "../benches/support/sysfs_gen.rs"]
mod sysfs_gen;

use perf_exporter::config::Config;
use perf_exporter::engine::Engine;
use perf_exporter::export::prometheus::{encode_openmetrics, encode_text};
use perf_exporter::perf::sim::SimKernel;
use perf_exporter::pmu::PmuTable;
use perf_exporter::probe::prober;
use perf_exporter::resolve::chain::resolve_config;
use perf_exporter::resolve::Context;
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::sync::Arc;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Allocations of one steady-state collection, of its text encoding and of
/// its OpenMetrics encoding; and the number of series.
fn allocations(cpus: u32) -> (usize, usize, usize, usize) {
    let tmp = tempfile::tempdir().unwrap();
    sysfs_gen::generate(
        tmp.path(),
        sysfs_gen::Shape {
            cpus,
            sockets: 2,
            imcs_per_socket: 8,
        },
    )
    .unwrap();
    let table = PmuTable::discover(tmp.path()).unwrap();
    let k = Arc::new(SimKernel::with_manual_clock(table.clone()));
    let res = {
        let p = prober(k.as_ref());
        resolve_config(
            &Config::default_config(),
            &table,
            &Context::default(),
            Some(&p),
        )
    };
    let mut e = Engine::new(k.clone(), table, res);
    let mut text = String::new();
    let mut om = String::new();
    // Warm up: buffers reach their size.
    for _ in 0..3 {
        k.advance(1_000_000_000);
        let s = e.collect();
        text.clear();
        encode_text(&s.families, &mut text);
        om.clear();
        encode_openmetrics(Arc::new(s.families), &mut om).unwrap();
    }
    k.advance(1_000_000_000);
    let r = Region::new(GLOBAL);
    let snap = e.collect();
    let collect = r.change().allocations;
    let r = Region::new(GLOBAL);
    text.clear();
    encode_text(&snap.families, &mut text);
    let encode = r.change().allocations;
    let series = snap.series();
    let fams = Arc::new(snap.families);
    om.clear();
    let r = Region::new(GLOBAL);
    encode_openmetrics(fams, &mut om).unwrap();
    let openmetrics = r.change().allocations;
    (collect, encode, openmetrics, series)
}

#[test]
fn allocations_do_not_grow_with_series() {
    let small = allocations(64);
    let big = allocations(256);
    eprintln!("64 CPUs: {small:?}; 256 CPUs: {big:?} (collect, text, openmetrics, series)");
    assert!(big.3 > 3 * small.3, "{small:?} {big:?}");
    assert_eq!(small.0, big.0, "collection allocations grow with series");
    assert_eq!(small.1, big.1, "text encoding allocations grow with series");
    assert_eq!(small.1, 0, "text encoding into a reused buffer allocates");
    assert_eq!(small.2, big.2, "OpenMetrics allocations grow with series");
}
