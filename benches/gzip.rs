//! Criterion benchmark of `/metrics` gzip compression: the encoder built
//! per response (`GzEncoder`, what the exporter did before issue 29) against
//! the compressor kept per thread and reset
//! ([`perf_exporter::web::gzip::compress`]), on two exposition bodies of
//! the `vm-no-pmu` fixture (2 CPUs, the simulated PMU, 10 s of a manual
//! clock):
//!
//! * `five_software`: node_exporter's five software events per CPU (the
//!   one-set config of `benches/vs_node_exporter.rs`), about 3.8 KB;
//! * `default`: the embedded default config, about 14 KB.
//!
//! `cargo bench --bench gzip`; `-- --test` runs each once (CI smoke).
#![allow(missing_docs)] // criterion_group! generates undocumented items

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use flate2::write::GzEncoder;
use flate2::Compression;
use perf_exporter::config::Config;
use perf_exporter::engine::{Engine, Fds};
use perf_exporter::export::prometheus::encode_text;
use perf_exporter::perf::sim::SimKernel;
use perf_exporter::pmu::PmuTable;
use perf_exporter::web::gzip::compress;
use std::hint::black_box;
use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;

#[path = "support/five_software.rs"]
mod five_software;

/// The text exposition of `cfg` on the `vm-no-pmu` fixture's simulated PMU.
fn body(cfg: &Config) -> Vec<u8> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sysfs/vm-no-pmu");
    let table = PmuTable::discover(&root).expect("fixture");
    let k = Arc::new(SimKernel::with_manual_clock(table.clone()));
    let mut e = Engine::for_config(k.clone(), table, cfg, Fds::Unbounded);
    e.collect();
    k.advance(10_000_000_000);
    let mut text = String::new();
    encode_text(&e.collect().families, &mut text);
    text.into_bytes()
}

/// Before issue 29: a new encoder (and compressor state) per response.
fn per_response(body: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::with_capacity(body.len() / 6 + 64), Compression::fast());
    let _ = e.write_all(body);
    e.finish().unwrap_or_default()
}

fn gzip(c: &mut Criterion) {
    let five = Config::parse(five_software::CONFIG, "five_software").expect("config");
    for (name, body) in [
        ("five_software", body(&five)),
        ("default", body(&Config::default_config())),
    ] {
        let mut g = c.benchmark_group(format!("gzip/{name}"));
        g.throughput(Throughput::Bytes(body.len() as u64));
        eprintln!(
            "gzip/{name}: {} B of text, {} B gzipped",
            body.len(),
            compress(&body).map_or(0, |z| z.len())
        );
        g.bench_function("per_response_encoder", |b| {
            b.iter(|| per_response(black_box(&body)));
        });
        g.bench_function("kept_compressor", |b| {
            b.iter(|| compress(black_box(&body)));
        });
        g.finish();
    }
}

criterion_group!(benches, gzip);
criterion_main!(benches);
