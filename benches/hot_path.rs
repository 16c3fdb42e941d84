//! Criterion benchmarks of the scrape hot path, stage by stage:
//!
//! * `parse_group_read`: one group `read()` buffer (6 members) into a
//!   reused [`GroupReading`];
//! * `scale_accumulate`: multiplexing scale and monotonic accumulation of
//!   10,000 counters (the engine's inner loop, through its public
//!   [`mux_factor`] and [`monotonic_delta`]);
//! * `encode`: a snapshot of 10,000 series to the Prometheus text format
//!   and to OpenMetrics, into a reused buffer;
//! * `collect`: a whole collection (one read per group, accumulation,
//!   snapshot) on the simulated PMU, on the 8-CPU `intel-skx` fixture and
//!   on a generated 512-CPU, 2-socket tree, with the default config. This
//!   includes the simulated kernel's own bookkeeping per read. Each also
//!   `_with_detail`: the same plus the per-CPU detail of the summed sets
//!   that the live view's and `/api/v1/snapshot`'s collections build (a
//!   scrape's collection does not: the difference is what a scrape no
//!   longer pays);
//! * `counter_states`: the counter states' and plausibility's judgement
//!   of one collection alone (issue 27: every counter's window judged,
//!   the series' verdicts, the plausibility step, the state families),
//!   without the reads, on the same 512-CPU tree, with plausibility
//!   checks on: what the checks cost per scrape.
//!
//! The live view's frames have their own benchmark (`benches/live_frame.rs`).
//!
//! `cargo bench --bench hot_path`; `-- --test` runs each once (CI smoke).
#![allow(missing_docs)] // criterion_group! generates undocumented items

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use perf_exporter::engine::{monotonic_delta, mux_factor};
use perf_exporter::export::prometheus::{encode_openmetrics, encode_text};
use perf_exporter::perf::{parse_group_read, GroupReading};
use perf_exporter::snapshot::{Family, Kind, Sample, Snapshot};
use std::hint::black_box;
use std::sync::Arc;

#[path = "support/sim_engine.rs"]
mod sim_engine;
#[path = "support/sysfs_gen.rs"]
mod sysfs_gen;

use sim_engine::sim_engine;

fn group_bytes(members: u64) -> Vec<u8> {
    let mut w = vec![members, 1_000_000_000, 750_000_000];
    for k in 0..members {
        w.push(123_456_789_000 + k * 17);
        w.push(1000 + k);
    }
    w.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

fn bench_parse(c: &mut Criterion) {
    let buf = group_bytes(6);
    let mut out = GroupReading::default();
    c.bench_function("parse_group_read/6_members", |b| {
        b.iter(|| {
            parse_group_read(black_box(&buf), &mut out).expect("valid buffer");
            black_box(&out);
        })
    });
}

fn bench_scale(c: &mut Criterion) {
    // 10,000 counters in groups of 6, multiplexed at 3/4.
    const N: usize = 10_000;
    let readings: Vec<GroupReading> = (0..N.div_ceil(6))
        .map(|g| GroupReading {
            time_enabled: 4_000_000_000,
            time_running: 3_000_000_000,
            values: (0..6)
                .map(|k| (k as u64, 1_000_000 + (g * 6 + k) as u64))
                .collect(),
        })
        .collect();
    let mut highs = vec![0.0f64; N];
    let mut totals = vec![0.0f64; N];
    let mut step = 0u64;
    let mut g = c.benchmark_group("scale_accumulate");
    g.throughput(Throughput::Elements(N as u64));
    g.bench_function("10000_counters", |b| {
        b.iter(|| {
            step += 1;
            let mut i = 0;
            for r in &readings {
                let Some(f) = mux_factor(r.time_enabled + step, r.time_running) else {
                    continue;
                };
                for &(_, raw) in &r.values {
                    if i < N {
                        totals[i] += monotonic_delta(&mut highs[i], (raw + step) as f64 * f) * 64.0;
                    }
                    i += 1;
                }
            }
            black_box(&totals);
        })
    });
    g.finish();
}

/// A snapshot of `n` series: 20 per-CPU families of n/20 CPUs each.
fn snapshot_of(n: usize) -> Snapshot {
    let per = n / 20;
    Snapshot {
        families: (0..20)
            .map(|f| Family {
                name: format!("perf_bench_metric_{f}_total").into(),
                help: format!("Benchmark family {f}, per CPU.").into(),
                kind: if f % 5 == 4 {
                    Kind::Gauge
                } else {
                    Kind::Counter
                },
                samples: (0..per)
                    .map(|cpu| Sample {
                        labels: vec![("cpu", cpu.to_string())].into(),
                        value: 1.234_567_891e12 + (cpu * 7919 + f) as f64 * 0.25,
                        start_unix_nanos: 0,
                    })
                    .collect(),
            })
            .collect(),
    }
}

fn bench_encode(c: &mut Criterion) {
    let snap = snapshot_of(10_000);
    assert_eq!(snap.series(), 10_000);
    let mut out = String::new();
    let mut g = c.benchmark_group("encode_10000_series");
    g.throughput(Throughput::Elements(10_000));
    g.bench_function("text", |b| {
        b.iter(|| {
            out.clear();
            encode_text(black_box(&snap.families[..]), &mut out);
            black_box(out.len());
        })
    });
    let families = Arc::new(snap.families);
    g.bench_function("openmetrics", |b| {
        b.iter(|| {
            out.clear();
            encode_openmetrics(families.clone(), &mut out).expect("encodes");
            black_box(out.len());
        })
    });
    g.finish();
}

fn bench_collect(c: &mut Criterion) {
    let tmp = tempfile::tempdir().expect("tempdir");
    sysfs_gen::generate(tmp.path(), sysfs_gen::SHAPE_512).expect("generate 512-CPU tree");
    let mut g = c.benchmark_group("collect_sim_default_config");
    for (name, root) in [
        ("skx_8cpu", sysfs_gen::skx_fixture()),
        ("skx_512cpu", tmp.path().to_path_buf()),
    ] {
        let (k, mut e) = sim_engine(&root);
        e.collect();
        g.bench_function(name, |b| {
            b.iter(|| {
                k.advance(1_000_000_000);
                black_box(e.collect());
            })
        });
        g.bench_function(format!("{name}_with_detail"), |b| {
            b.iter(|| {
                k.advance(1_000_000_000);
                black_box((e.collect(), e.detail_families()));
            })
        });
    }
    g.finish();
}

fn bench_states(c: &mut Criterion) {
    let tmp = tempfile::tempdir().expect("tempdir");
    sysfs_gen::generate(tmp.path(), sysfs_gen::SHAPE_512).expect("generate 512-CPU tree");
    let (k, mut e) = sim_engine(tmp.path());
    e.check_plausibility(std::path::PathBuf::from("/proc"));
    e.collect();
    let mut g = c.benchmark_group("counter_states");
    g.bench_function("skx_512cpu_judgement", |b| {
        b.iter(|| {
            k.advance(1_000_000_000);
            black_box(e.judge_states_alone());
        })
    });
    g.finish();
}

criterion_group!(
    benches,
    bench_states,
    bench_parse,
    bench_scale,
    bench_encode,
    bench_collect
);
criterion_main!(benches);
