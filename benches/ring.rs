//! Sampling costs (docs/src/performance.md, "Sampling").
//!
//! * `drain_decode` (criterion): splitting a ring's bytes into records
//!   (one of them wrapping the end), decoding each `PERF_RECORD_SAMPLE`
//!   (`TID | TIME | CPU | PERIOD`) and adding it to the per-process
//!   aggregate: the exporter's whole cost per sample once the kernel has
//!   written it. Goal: under 200 ns per sample.
//! * Ring memory at 512 CPUs, printed first: the mapping a live kernel
//!   gives each CPU's sampler (`(1 + pages) × page size`, locked memory
//!   charged to `perf_event_mlock_kb`) for 1 to 64 data pages, and the
//!   exporter's own heap for 512 simulated samplers (a generated 512-CPU
//!   tree) after a second of 99 Hz samples.
//!
//! ```sh
//! cargo bench --bench ring [-- --quick]
//! ```

#[path = "support/sysfs_gen.rs"]
mod sysfs_gen;

use criterion::{Criterion, Throughput};
use perf_exporter::engine::sample::{Aggregate, By, Sampling, SamplingSettings};
use perf_exporter::perf::record::{decode, encode, Format};
use perf_exporter::perf::ring::{map_len, split_records, DEFAULT_RING_PAGES};
use perf_exporter::perf::sim::SimKernel;
use perf_exporter::perf::{Kernel, SampleRate, SampleSpec};
use perf_exporter::pmu::PmuTable;
use perf_exporter::sys::abi;
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::sync::Arc;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const FMT: Format = Format {
    sample_type: abi::SAMPLE_TID | abi::SAMPLE_TIME | abi::SAMPLE_CPU | abi::SAMPLE_PERIOD,
    read_format: 0,
};

/// A 32 KiB ring area full of samples of 64 processes, the tail placed so
/// that one record wraps: `(area, tail offset, bytes, records)`.
fn ring() -> (Vec<u8>, usize, usize, u64) {
    let size = DEFAULT_RING_PAGES * 4096;
    let mut recs = Vec::new();
    let mut n = 0u64;
    loop {
        let pid = (n % 64) as u32 + 100;
        let r = encode::record(
            abi::RECORD_SAMPLE,
            &encode::sample_body(pid, pid, n, 1, 10_101_010, None),
        );
        if recs.len() + r.len() > size {
            break;
        }
        recs.extend(r);
        n += 1;
    }
    let start = size - 20;
    let mut area = vec![0u8; size];
    for (i, b) in recs.iter().enumerate() {
        area[(start + i) % size] = *b;
    }
    (area, start, recs.len(), n)
}

fn drain_decode(c: &mut Criterion) {
    let (area, start, total, n) = ring();
    let mut g = c.benchmark_group("ring");
    g.throughput(Throughput::Elements(n));
    let mut agg = Aggregate::new(By::Process);
    let mut scratch = Vec::with_capacity(64);
    g.bench_function("drain_decode_aggregate", |b| {
        b.iter(|| {
            let a = &area[start..];
            let b2 = &area[..total - a.len()];
            debug_assert!(total > a.len());
            split_records(a, b2, &mut scratch, &mut |rec| {
                if let Ok(r) = decode(rec, &FMT) {
                    agg.add(1, &r);
                }
            })
            .unwrap()
        })
    });
    g.finish();
}

fn memory_at_512_cpus() {
    println!("ring mapping per CPU and at 512 CPUs (live kernel, 4 KiB pages):");
    for pages in [1usize, 2, 4, 8, 16, 64] {
        let per = map_len(pages);
        println!(
            "  {pages:>2} data pages: {:>4} KiB per CPU, {:>6.1} MiB at 512 CPUs{}",
            per / 1024,
            (per * 512) as f64 / (1 << 20) as f64,
            if pages == DEFAULT_RING_PAGES {
                "  (default)"
            } else {
                ""
            }
        );
    }
    let dir = tempfile::tempdir().expect("tempdir");
    sysfs_gen::generate(dir.path(), sysfs_gen::SHAPE_512).expect("generate the 512-CPU tree");
    let table = PmuTable::discover(dir.path()).expect("discover");
    let cpus = table.topology.online.clone();
    let kernel: Arc<dyn Kernel> = Arc::new(SimKernel::new(table));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let spec = SampleSpec::cpu_clock(SampleRate::Frequency(99));
    let region = Region::new(GLOBAL);
    let smp = rt.block_on(async {
        let mut smp = Sampling::open(
            &kernel,
            SamplingSettings {
                cpus: cpus.iter().map(|&c| (c, spec.clone())).collect(),
                by: By::Process,
                procfs: "/proc".into(),
                cgroupfs: None,
            },
        )
        .expect("open 512 samplers");
        let until = tokio::time::Instant::now() + std::time::Duration::from_secs(1);
        smp.wait(until).await;
        smp
    });
    let st = region.change();
    let heap = st.bytes_allocated.saturating_sub(st.bytes_deallocated);
    println!(
        "exporter heap for {} simulated samplers after 1 s at 99 Hz ({} samples): {:.1} KiB ({} B per CPU)",
        smp.cpus().len(),
        smp.aggregate().samples,
        heap as f64 / 1024.0,
        heap / smp.cpus().len().max(1)
    );
}

fn main() {
    memory_at_512_cpus();
    let mut c = Criterion::default().configure_from_args();
    drain_decode(&mut c);
    c.final_summary();
}
