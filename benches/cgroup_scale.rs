//! Per-workload counting at scale (a report, not a timed test):
//!
//! 1. **Simulated, 512 CPUs × 200 cgroups**: the generated 512-CPU,
//!    2-socket tree (`support/sysfs_gen.rs`) on the simulated PMU, the
//!    default config, and 200 cgroups of a generated cgroup tree counted
//!    with the default per-cgroup sets (`core`, `cache`, `software`) by the
//!    `perf` backend, summed over CPUs (64 CPUs with `--short`).
//! 2. **Live, 2 CPUs × 200 cgroups** (root): 200 real cgroups under
//!    `/sys/fs/cgroup/unified/pe-cgmem-bench-<pid>` on this host's
//!    kernel (software events only here: no hardware PMU).
//!
//! Reported per case: descriptors (counters and directories), group reads
//! per collection, CPU time per scrape (a collection plus the text
//! encoding, this thread's schedstat) without and with the cgroups, RSS
//! before and after, the heap the cgroups added (a counting allocator),
//! split into the simulator's own tables ([`SimKernel::memory`], the
//! kernel's memory on a real host) and the exporter's, response bytes
//! (plain and gzip at the exporter's level); and what a rescan of the
//! cgroup tree costs (listing the directories and reading each
//! `cpu.stat`).
//!
//! ```sh
//! cargo bench --bench cgroup_scale -- [--short] [--live | --simulated] [--scrapes=N]
//! ```
//! Exits non-zero only when it cannot run; the goal (under 100 ms of CPU
//! per scrape and 256 MiB RSS at 512 × 200) is printed, not enforced.

#[path = "support/harness.rs"]
mod harness;
#[path = "support/sysfs_gen.rs"]
mod sysfs_gen;

use harness::{err, machine, quantile, status_kib, Error};
use perf_exporter::cgroup::{Cgroup, CgroupError, Kind, Selection};
use perf_exporter::config::Config;
use perf_exporter::engine::cgroup::{CgroupCounting, Discovery, PerfBackend};
use perf_exporter::engine::{Engine, Fds};
use perf_exporter::export::prometheus::encode_text;
use perf_exporter::perf::live::LiveKernel;
use perf_exporter::perf::sim::SimKernel;
use perf_exporter::perf::Kernel;
use perf_exporter::pmu::PmuTable;
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Bytes allocated and not yet freed, process-wide.
fn heap_bytes() -> u64 {
    let s = GLOBAL.stats();
    // A realloc counts its growth as allocated, its shrinking as freed.
    s.bytes_allocated.saturating_sub(s.bytes_deallocated) as u64
}

/// The size of `text` gzip-compressed at the fastest level, as `/metrics`
/// sends it.
fn gzip_len(text: &str) -> usize {
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let _ = z.write_all(text.as_bytes());
    z.finish().map_or(0, |v| v.len())
}

const CGROUPS: usize = 200;

/// One selection, made once and then kept (as the inotify selector keeps
/// it while the tree does not change: `Ok(None)`).
#[derive(Debug, Clone)]
struct Fixed(Option<Selection>);

impl Discovery for Fixed {
    fn poll(&mut self) -> Result<Option<Selection>, CgroupError> {
        Ok(self.0.take())
    }
}

fn selection(root: &Path, rels: &[String]) -> Selection {
    Selection {
        counted: rels
            .iter()
            .map(|r| Cgroup {
                rel: r.clone(),
                dir: root.join(r),
                id: 0,
                kind: Kind::Path,
                labels: vec![("cgroup", r.clone())],
            })
            .collect(),
        left_out: Vec::new(),
    }
}

/// This thread's CPU time in seconds (schedstat, nanoseconds).
fn thread_cpu() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0.0, |ns| ns as f64 * 1e-9)
}

fn rss_kib() -> u64 {
    status_kib(std::process::id(), "VmRSS").unwrap_or(0)
}

/// CPU seconds per scrape (collection + encoding) over `n` scrapes (this
/// thread's schedstat, which the kernel updates at ticks and switches, so
/// it is taken over the whole run), median wall seconds, and the response
/// bytes, plain and gzip.
fn scrapes(e: &mut Engine, n: usize) -> (f64, f64, (usize, usize)) {
    let mut wall = Vec::with_capacity(n);
    let mut bytes = 0;
    let mut text = String::new();
    let c0 = thread_cpu();
    for _ in 0..n {
        let t0 = Instant::now();
        let s = e.collect();
        text.clear();
        encode_text(&s.families, &mut text);
        wall.push(t0.elapsed().as_secs_f64());
        bytes = text.len();
    }
    let cpu = (thread_cpu() - c0) / n as f64;
    (cpu, quantile(&wall, 0.5), (bytes, gzip_len(&text)))
}

/// Lists `n` cgroup directories and reads their `cpu.stat`: what a rescan
/// of the tree costs at each collection.
fn rescan_cost(root: &Path, rels: &[String], n: usize) -> f64 {
    let c0 = thread_cpu();
    for _ in 0..n {
        let mut found = 0;
        for r in rels {
            if std::fs::read(root.join(r).join("cpu.stat")).is_ok() {
                found += 1;
            }
        }
        let _ = std::fs::read_dir(root).map(|d| d.count());
        assert_eq!(found, rels.len());
    }
    (thread_cpu() - c0) / n as f64
}

struct Report {
    case: String,
    fds: usize,
    reads: usize,
    base_cpu: f64,
    cpu: f64,
    wall50: f64,
    /// What the simulated kernel's own tables grew by, attaching (bytes
    /// in use, bytes allocated); `None` on the live kernel.
    sim_heap: Option<(u64, u64)>,
    /// Heap the process grew by, attaching the cgroups and scraping.
    heap_grew: u64,
    rss_before: u64,
    rss_after: u64,
    /// Before the cgroups attach: heap in use, and the simulated kernel's
    /// tables (bytes in use, allocated; `None` on the live kernel).
    node_heap: (u64, Option<(u64, u64)>),
    bytes_before: (usize, usize),
    bytes: (usize, usize),
    rescan: f64,
}

fn print(r: &Report) {
    println!("## {}", r.case);
    println!("  per-cgroup descriptors       {:>10}", r.fds);
    println!("  group reads per collection   {:>10}", r.reads);
    println!(
        "  CPU per scrape, no cgroups   {:>10.1} ms",
        r.base_cpu * 1e3
    );
    println!(
        "  CPU per scrape, cgroups      {:>10.1} ms (median wall {:.1} ms)",
        r.cpu * 1e3,
        r.wall50 * 1e3
    );
    println!(
        "  CPU per group read (with its share of the snapshot) {:.2} us",
        (r.cpu - r.base_cpu) / r.reads.max(1) as f64 * 1e6
    );
    println!(
        "  RSS                          {:>10.1} MiB -> {:.1} MiB (peak {:.1} MiB)",
        r.rss_before as f64 / 1024.0,
        r.rss_after as f64 / 1024.0,
        status_kib(std::process::id(), "VmHWM").unwrap_or(0) as f64 / 1024.0
    );
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let (heap, sim) = r.node_heap;
    println!("  heap before the cgroups      {:>10.1} MiB", mib(heap));
    if let Some((used, allocated)) = sim {
        println!(
            "  of which the simulated kernel {:>9.1} MiB ({:.1} MiB in use), the exporter {:.1} MiB",
            mib(allocated),
            mib(used),
            mib(heap.saturating_sub(allocated))
        );
    }
    println!(
        "  heap grown by the cgroups    {:>10.1} MiB",
        mib(r.heap_grew)
    );
    if let Some((used, allocated)) = r.sim_heap {
        println!(
            "  of which the simulated kernel {:>9.1} MiB ({:.1} MiB in use: its tables, the kernel's memory on a real host)",
            mib(allocated),
            mib(used)
        );
        println!(
            "  of which the exporter        {:>10.1} MiB",
            mib(r.heap_grew.saturating_sub(allocated))
        );
        println!(
            "  RSS without the simulator's tables in use {:.1} MiB",
            r.rss_after as f64 / 1024.0 - mib(used)
        );
    }
    println!(
        "  response bytes (gzip)        {:>10} ({}) -> {} ({})",
        r.bytes_before.0, r.bytes_before.1, r.bytes.0, r.bytes.1
    );
    println!("  rescan of the tree (CPU)     {:>10.2} ms", r.rescan * 1e3);
}

fn engine_for(k: Arc<dyn Kernel>, t: PmuTable) -> Engine {
    let cfg = Config::default_config();
    Engine::for_config(k, t, &cfg, Fds::Unbounded)
}

/// Attaches the `perf` backend for `rels`; returns its descriptors and
/// reads per collection.
fn attach(e: &mut Engine, k: Arc<dyn Kernel>, root: &Path, rels: &[String]) -> (usize, usize) {
    let sets: Vec<String> = ["core", "cache", "software"].map(String::from).to_vec();
    let b = PerfBackend::new(k, e.resolution(), &sets, e.online_cpus(), false, None);
    let c = CgroupCounting::new(Box::new(Fixed(Some(selection(root, rels)))), Box::new(b));
    let counts = (c.backend().open_fds(), c.backend().reads());
    e.attach_cgroups(c);
    counts
}

/// `n` scrapes on the simulated PMU; 512 CPUs, or 64 in short mode (the
/// smoke run stays short).
fn simulated(n: usize, short: bool) -> Result<Report, Error> {
    let shape = if short {
        sysfs_gen::Shape {
            cpus: 64,
            ..sysfs_gen::SHAPE_512
        }
    } else {
        sysfs_gen::SHAPE_512
    };
    let tmp = tempfile::tempdir()?;
    let sys = tmp.path().join("sys");
    std::fs::create_dir_all(&sys)?;
    sysfs_gen::generate(&sys, shape)?;
    let cg = tmp.path().join("cgroup");
    std::fs::create_dir_all(&cg)?;
    std::fs::write(
        cg.join("cpu.stat"),
        format!("usage_usec {}\n", CGROUPS * 1000),
    )?;
    let rels: Vec<String> = (0..CGROUPS).map(|i| format!("pod{i:03}")).collect();
    for r in &rels {
        std::fs::create_dir_all(cg.join(r))?;
        std::fs::write(cg.join(r).join("cpu.stat"), "usage_usec 1000\n")?;
    }
    let t = PmuTable::discover(&sys).map_err(|e| err(e.to_string()))?;
    let sim = Arc::new(SimKernel::new(t.clone()));
    let k: Arc<dyn Kernel> = sim.clone();
    let mut e = engine_for(k.clone(), t);
    e.collect();
    let (base_cpu, _, bytes_before) = scrapes(&mut e, n);
    let rss_before = rss_kib();
    let heap_before = heap_bytes();
    let sim_before = sim.memory();
    let (fds, reads) = attach(&mut e, k, &cg, &rels);
    let (cpu, wall50, bytes) = scrapes(&mut e, n);
    let rss_after = rss_kib();
    let heap_grew = heap_bytes().saturating_sub(heap_before);
    let sim_after = sim.memory();
    let sim_heap = (
        sim_after.used.saturating_sub(sim_before.used) as u64,
        sim_after.allocated.saturating_sub(sim_before.allocated) as u64,
    );
    Ok(Report {
        case: format!(
            "simulated PMU: {} CPUs x 200 cgroups x default per-cgroup sets (core, cache, software)",
            shape.cpus
        ),
        fds,
        reads,
        base_cpu,
        cpu,
        wall50,
        sim_heap: Some(sim_heap),
        heap_grew,
        rss_before,
        rss_after,
        node_heap: (
            heap_before,
            Some((sim_before.used as u64, sim_before.allocated as u64)),
        ),
        bytes_before,
        bytes,
        rescan: rescan_cost(&cg, &rels, n.max(20)),
    })
}

/// Created cgroups, removed on drop.
struct LiveTree(PathBuf);

impl Drop for LiveTree {
    fn drop(&mut self) {
        if let Ok(rd) = std::fs::read_dir(&self.0) {
            for e in rd.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    let _ = std::fs::remove_dir(e.path());
                }
            }
        }
        let _ = std::fs::remove_dir(&self.0);
    }
}

fn live(n: usize) -> Result<Report, Error> {
    let root = PathBuf::from(format!(
        "/sys/fs/cgroup/unified/pe-cgmem-bench-{}",
        std::process::id()
    ));
    std::fs::create_dir(&root)
        .map_err(|e| err(format!("mkdir {} (run as root): {e}", root.display())))?;
    let tree = LiveTree(root.clone());
    let rels: Vec<String> = (0..CGROUPS).map(|i| format!("pod{i:03}")).collect();
    for r in &rels {
        std::fs::create_dir(root.join(r))?;
    }
    let live = Arc::new(LiveKernel::new());
    let _ = live.raise_nofile(20_000);
    let k: Arc<dyn Kernel> = live;
    let t = PmuTable::discover(Path::new("/sys")).map_err(|e| err(e.to_string()))?;
    let mut e = engine_for(k.clone(), t);
    e.collect();
    let (base_cpu, _, bytes_before) = scrapes(&mut e, n);
    let rss_before = rss_kib();
    let heap_before = heap_bytes();
    let (fds, reads) = attach(&mut e, k, &root, &rels);
    let (cpu, wall50, bytes) = scrapes(&mut e, n);
    let r = Report {
        case: "live kernel: this host's CPUs x 200 cgroups (software events; no hardware PMU here)"
            .into(),
        fds,
        reads,
        base_cpu,
        cpu,
        wall50,
        sim_heap: None,
        heap_grew: heap_bytes().saturating_sub(heap_before),
        rss_before,
        rss_after: rss_kib(),
        node_heap: (heap_before, None),
        bytes_before,
        bytes,
        rescan: rescan_cost(&root, &rels, n.max(20)),
    };
    drop(e);
    drop(tree);
    Ok(r)
}

/// A case of the report, run when its flag is given (or no case flag).
type Case<'a> = Box<dyn Fn() -> Result<Report, Error> + 'a>;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let short = args.iter().any(|a| a == "--short");
    let only = |case: &str| {
        let picked = args.iter().any(|a| a == "--live" || a == "--simulated");
        !picked || args.iter().any(|a| a == case)
    };
    let n = args
        .iter()
        .find_map(|a| a.strip_prefix("--scrapes=")?.parse().ok())
        .unwrap_or(if short { 3 } else { 30 });
    println!(
        "# cgroup_scale ({}), {}",
        if short { "short" } else { "full" },
        machine()
    );
    let mut failed = false;
    // Live first: its RSS is then not the simulated case's leftovers.
    let cases: [(&str, Case); 2] = [
        ("--live", Box::new(|| live(n))),
        ("--simulated", Box::new(|| simulated(n, short))),
    ];
    for (_, case) in cases.into_iter().filter(|(name, _)| only(name)) {
        match case() {
            Ok(r) => print(&r),
            Err(e) => {
                eprintln!("cgroup_scale: {e}");
                failed = true;
            }
        }
    }
    println!("goal at 512 CPUs x 200 cgroups: < 100 ms CPU per scrape, < 256 MiB RSS (printed, not enforced)");
    if failed {
        std::process::exit(1);
    }
}
