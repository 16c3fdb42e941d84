//! Criterion benchmarks of the live view's frames
//! (`crate::export::live`): two collections of the default config on a
//! generated 512-CPU, 2-socket tree (simulated PMU), 1 s apart (the
//! second and third: the first opens the groups and has no counts), and
//! the frame every stream interval builds and encodes once for all its
//! viewers.
//!
//! * `live_frame_512cpu`: built and encoded to JSON with the default
//!   per-CPU detail (the inputs of the per-CPU derived values), by the
//!   stream's [`Framer`], which has built frames of these series before
//!   (every frame but a stream's first);
//! * `live_frame_512cpu_all`: the same with every per-CPU counter
//!   (`?per_cpu=all`, and `stat --json`);
//! * `live_frame_512cpu_no_per_cpu`: without the per-CPU detail
//!   (`?per_cpu=0`);
//! * `live_frame_512cpu_first`: the default frame by a new [`Framer`] (a
//!   stream's first frame, `/api/v1/snapshot`);
//! * `live_frame_build_512cpu`, `live_frame_build_512cpu_all`: built only
//!   (the rest is the encoding);
//! * `live_frame_live`: the frame of this host's live kernel (root; the
//!   default config: software events, tracepoints and `msr` here), by a
//!   stream's [`Framer`].
//!
//! `cargo bench --bench live_frame`; `-- --test` runs each once (CI smoke).
#![allow(missing_docs)] // criterion_group! generates undocumented items

use criterion::{criterion_group, criterion_main, Criterion};
use perf_exporter::config::Config;
use perf_exporter::engine::{Engine, Fds};
use perf_exporter::export::live::{Framer, PerCpuDetail, Reasons};
use perf_exporter::perf::live::LiveKernel;
use perf_exporter::perf::Kernel;
use perf_exporter::pmu::PmuTable;
use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

#[path = "support/sim_engine.rs"]
mod sim_engine;
#[path = "support/sysfs_gen.rs"]
mod sysfs_gen;

fn bench_live_frame(c: &mut Criterion) {
    let tmp = tempfile::tempdir().expect("tempdir");
    sysfs_gen::generate(tmp.path(), sysfs_gen::SHAPE_512).expect("generate 512-CPU tree");
    let (k, mut e) = sim_engine::sim_engine(tmp.path());
    // The first collection opens the groups and has no counts yet: the
    // frames compare the second and third (a stream's steady state).
    e.collect();
    k.advance(1_000_000_000);
    let a = e.collect();
    k.advance(1_000_000_000);
    let b = e.collect();
    let r = Reasons::default();
    let t = perf_exporter::config::Config::default_config().derived;
    let (a, b) = (&a.families, &b.families);
    let mut framer = Framer::default();
    for detail in [PerCpuDetail::Derived, PerCpuDetail::All, PerCpuDetail::Off] {
        let f = framer.frame(a, b, 1.0, &r, detail, &t);
        let json = framer.encode(&f);
        eprintln!(
            "frame at 512 CPUs, per_cpu {detail:?}: {} bytes of JSON, {} series",
            json.len(),
            b.iter().map(|f| f.samples.len()).sum::<usize>()
        );
    }
    let mut frame_bench = |name: &str, detail: PerCpuDetail| {
        c.bench_function(name, |bench| {
            bench.iter(|| {
                let f = framer.frame(a, b, 1.0, &r, detail, &t);
                black_box(framer.encode(&f))
            })
        });
    };
    frame_bench("live_frame_512cpu", PerCpuDetail::Derived);
    frame_bench("live_frame_512cpu_all", PerCpuDetail::All);
    frame_bench("live_frame_512cpu_no_per_cpu", PerCpuDetail::Off);
    c.bench_function("live_frame_512cpu_first", |bench| {
        bench.iter(|| {
            let mut fresh = Framer::default();
            let f = fresh.frame(a, b, 1.0, &r, PerCpuDetail::Derived, &t);
            black_box(fresh.encode(&f))
        })
    });
    c.bench_function("live_frame_build_512cpu", |bench| {
        bench.iter(|| black_box(framer.frame(a, b, 1.0, &r, PerCpuDetail::Derived, &t)))
    });
    c.bench_function("live_frame_build_512cpu_all", |bench| {
        bench.iter(|| black_box(framer.frame(a, b, 1.0, &r, PerCpuDetail::All, &t)))
    });
    bench_live_kernel(c);
}

/// The frame of this host's live kernel with the default config.
fn bench_live_kernel(c: &mut Criterion) {
    let t = match PmuTable::discover(Path::new("/sys")) {
        Ok(t) => t,
        Err(e) => return eprintln!("live_frame_live: no PMU table: {e}"),
    };
    let k: Arc<dyn Kernel> = Arc::new(LiveKernel::new());
    let mut e = Engine::for_config(k, t, &Config::default_config(), Fds::Unbounded);
    let a = e.collect();
    std::thread::sleep(Duration::from_millis(200));
    let b = e.collect();
    let series: usize = b.families.iter().map(|f| f.samples.len()).sum();
    if series == 0 {
        return eprintln!("live_frame_live: nothing counted (not root?)");
    }
    let r = Reasons::default();
    let t = perf_exporter::config::Config::default_config().derived;
    let mut framer = Framer::default();
    let (a, b) = (&a.families, &b.families);
    let f = framer.frame(a, b, 0.2, &r, PerCpuDetail::Derived, &t);
    let json = framer.encode(&f);
    eprintln!(
        "frame of the live kernel: {} bytes of JSON, {series} series",
        json.len()
    );
    c.bench_function("live_frame_live", |bench| {
        bench.iter(|| {
            let f = framer.frame(a, b, 0.2, &r, PerCpuDetail::Derived, &t);
            black_box(framer.encode(&f))
        })
    });
}

criterion_group!(benches, bench_live_frame);
criterion_main!(benches);
