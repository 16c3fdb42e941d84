//! No allocation per series on the scrape path: a collection on the
//! simulated PMU (one read per group, scaling, accumulation, snapshot) and
//! its text encoding into a reused buffer allocate the same number of
//! blocks on a 64-CPU and on a 256-CPU tree, although the second has four
//! times the groups and series; and a collection with per-cgroup counting
//! (the `perf` backend's reads, one per cgroup, set and CPU, and its
//! families) allocates as much for 64 cgroups as for 16. Counted with an instrumented global
//! allocator; one test in this binary, so no other test allocates
//! meanwhile. (Allocation *counts*, not speed or memory size, which the
//! benchmarks measure.)

#[path = "../benches/support/sysfs_gen.rs"]
mod sysfs_gen;

use perf_exporter::cgroup::{Cgroup, CgroupError, Kind, Selection};
use perf_exporter::config::{Config, Per};
use perf_exporter::engine::cgroup::{CgroupCounting, Discovery, PerfBackend};
use perf_exporter::engine::{Engine, Fds};
use perf_exporter::export::prometheus::{encode_openmetrics, encode_text};
use perf_exporter::perf::sim::SimKernel;
use perf_exporter::pmu::PmuTable;
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::sync::Arc;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// An engine for the default config on a generated `cpus`-CPU tree, on
/// the simulated PMU with a manual clock; every set per CPU, so that the
/// series grow with the CPUs (the default sums most sets per socket).
fn engine(tree: &std::path::Path, cpus: u32) -> (Arc<SimKernel>, Engine) {
    sysfs_gen::generate(
        tree,
        sysfs_gen::Shape {
            cpus,
            sockets: 2,
            imcs_per_socket: 8,
        },
    )
    .unwrap();
    let table = PmuTable::discover(tree).unwrap();
    let k = Arc::new(SimKernel::with_manual_clock(table.clone()));
    let mut cfg = Config::default_config();
    for s in &mut cfg.sets {
        s.per = Per::Cpu;
    }
    (
        k.clone(),
        Engine::for_config(k, table, &cfg, Fds::Unbounded),
    )
}

/// Allocations of one steady-state collection, of its text encoding and of
/// its OpenMetrics encoding; and the number of series.
fn allocations(cpus: u32) -> (usize, usize, usize, usize) {
    let tmp = tempfile::tempdir().unwrap();
    let (k, mut e) = engine(tmp.path(), cpus);
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

/// A selection that discovery makes once and then keeps (as the inotify
/// selector does while the tree does not change).
#[derive(Debug)]
struct Once(Option<Selection>);

impl Discovery for Once {
    fn poll(&mut self) -> Result<Option<Selection>, CgroupError> {
        Ok(self.0.take())
    }
}

/// Allocations of one steady-state collection counting `n` cgroups with
/// the default per-cgroup sets on 8 CPUs; and the number of series.
fn cgroup_allocations(n: usize) -> (usize, usize) {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("sys")).unwrap();
    let (k, mut e) = engine(&tmp.path().join("sys"), 8);
    let root = tmp.path().join("cgroup");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("cpu.stat"), format!("usage_usec {}\n", n * 10)).unwrap();
    let counted = (0..n)
        .map(|i| {
            let rel = format!("pod{i}");
            std::fs::create_dir(root.join(&rel)).unwrap();
            std::fs::write(root.join(&rel).join("cpu.stat"), "usage_usec 10\n").unwrap();
            Cgroup {
                dir: root.join(&rel),
                id: 0,
                kind: Kind::Path,
                labels: vec![("cgroup", rel.clone())],
                rel,
            }
        })
        .collect();
    let sel = Selection {
        counted,
        left_out: Vec::new(),
    };
    let sets = ["core", "cache", "software"].map(String::from);
    let b = PerfBackend::new(
        k.clone(),
        e.resolution(),
        &sets,
        e.online_cpus(),
        false,
        None,
    );
    let c = CgroupCounting::new(Box::new(Once(Some(sel))), Box::new(b));
    assert_eq!(c.backend().counted().len(), n);
    e.attach_cgroups(c);
    for _ in 0..3 {
        k.advance(1_000_000_000);
        e.collect();
    }
    k.advance(1_000_000_000);
    let r = Region::new(GLOBAL);
    let snap = e.collect();
    (r.change().allocations, snap.series())
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
    // One test in this binary (no other test allocates meanwhile), so the
    // cgroup path is measured here too.
    let (few, many) = (cgroup_allocations(16), cgroup_allocations(64));
    eprintln!("16 cgroups: {few:?}; 64 cgroups: {many:?} (collect, series)");
    assert!(many.1 > few.1 + 48 * 3, "{few:?} {many:?}");
    assert_eq!(
        few.0, many.0,
        "per-cgroup collection allocations grow with cgroups"
    );
}
