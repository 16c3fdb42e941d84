//! Criterion benchmarks of the live view's frames
//! (`crate::export::live`): two collections of the default config on a
//! generated 512-CPU, 2-socket tree (simulated PMU), 1 s apart, and the
//! frame every stream interval builds and encodes once for all its
//! viewers.
//!
//! * `live_frame_512cpu`: built and encoded to JSON, without the per-CPU
//!   detail (what `/api/v1/stream?interval=1s` sends by default);
//! * `live_frame_512cpu_per_cpu`: the same with the per-CPU detail
//!   (`?per_cpu=1`, what the page asks for);
//! * `live_frame_build_512cpu` / `..._per_cpu`: built only.
//!
//! `cargo bench --bench live_frame`; `-- --test` runs each once (CI smoke).
#![allow(missing_docs)] // criterion_group! generates undocumented items

use criterion::{criterion_group, criterion_main, Criterion};
use perf_exporter::export::live::{frame_with, Reasons};
use std::hint::black_box;

#[path = "support/sim_engine.rs"]
mod sim_engine;
#[path = "support/sysfs_gen.rs"]
mod sysfs_gen;

fn bench_live_frame(c: &mut Criterion) {
    let tmp = tempfile::tempdir().expect("tempdir");
    sysfs_gen::generate(tmp.path(), sysfs_gen::SHAPE_512).expect("generate 512-CPU tree");
    let (k, mut e) = sim_engine::sim_engine(tmp.path());
    let a = e.collect();
    k.advance(1_000_000_000);
    let b = e.collect();
    let reasons = Reasons::default();
    for per_cpu in [false, true] {
        let f = frame_with(&a.families, &b.families, 1.0, &reasons, per_cpu);
        let json = f.to_json();
        eprintln!(
            "frame at 512 CPUs, per_cpu={per_cpu}: {} bytes of JSON, {} series",
            json.len(),
            b.families.iter().map(|f| f.samples.len()).sum::<usize>()
        );
        let suffix = if per_cpu { "_per_cpu" } else { "" };
        c.bench_function(&format!("live_frame_build_512cpu{suffix}"), |bench| {
            bench.iter(|| black_box(frame_with(&a.families, &b.families, 1.0, &reasons, per_cpu)))
        });
        c.bench_function(&format!("live_frame_512cpu{suffix}"), |bench| {
            bench.iter(|| {
                black_box(frame_with(&a.families, &b.families, 1.0, &reasons, per_cpu).to_json())
            })
        });
    }
}

criterion_group!(benches, bench_live_frame);
criterion_main!(benches);
