//! Tests that truly need a hardware PMU (cycles and instructions from the
//! core PMU), so they are `#[ignore = "needs a hardware PMU"]`: the
//! development VMs have none. Run them on bare metal as root with
//! `cargo test --test live hardware_pmu:: -- --ignored`.
//!
//! * IPC under a known load is plausible (instructions / cycles of a busy
//!   loop between 0.05 and 8).
//! * The exporter's cycle count agrees with `perf stat -a` over the same
//!   busy interval (within 10%).

use crate::common;

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CORE: &str = crate::config!("hardware_pmu/core");

/// Keeps every CPU busy until dropped, so the cycle rate is steady.
struct Spin(Arc<AtomicBool>, Vec<std::thread::JoinHandle<()>>);

impl Spin {
    fn all_cpus() -> Spin {
        let stop = Arc::new(AtomicBool::new(false));
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        let hs = (0..n)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut x = 1u64;
                    while !stop.load(Ordering::Relaxed) {
                        x = std::hint::black_box(
                            x.wrapping_mul(6364136223846793005).wrapping_add(1),
                        );
                    }
                })
            })
            .collect();
        Spin(stop, hs)
    }
}

impl Drop for Spin {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
        for h in self.1.drain(..) {
            let _ = h.join();
        }
    }
}

/// The sum of every series of `name` in a scrape.
fn total(exp: &common::Proc, name: &str) -> f64 {
    let r = exp.get("/metrics");
    assert_eq!(r.status, 200, "{}", r.body);
    let s =
        common::exposition::parse_exposition(&r.body).unwrap_or_else(|e| panic!("{e}\n{}", r.body));
    let v: Vec<f64> = s
        .iter()
        .filter(|(k, _)| k.as_str() == name || k.starts_with(&format!("{name}{{")))
        .map(|(_, v)| *v)
        .collect();
    assert!(!v.is_empty(), "no {name} in the scrape:\n{}", r.body);
    v.iter().sum()
}

fn exporter_counting_cycles() -> (common::Proc, tempfile::TempDir) {
    common::require_perf_privilege();
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("core.yaml");
    std::fs::write(&cfg, CORE).expect("write config");
    let exp = common::exporter(&["--config.file", cfg.to_str().expect("utf-8")]);
    (exp, dir)
}

#[test]
#[ignore = "needs a hardware PMU"]
fn ipc_of_a_busy_loop_is_plausible() {
    let (exp, _dir) = exporter_counting_cycles();
    let _spin = Spin::all_cpus();
    let (c0, i0) = (
        total(&exp, "perf_cpu_cycles_total"),
        total(&exp, "perf_instructions_total"),
    );
    // Polls (no fixed sleep) until the busy loop has run 1e8 cycles, which
    // a spinning CPU does in well under a second; 10 s is the deadline.
    let (dc, di) = common::poll(Duration::from_secs(10), Duration::from_millis(50), || {
        let (c1, i1) = (
            total(&exp, "perf_cpu_cycles_total"),
            total(&exp, "perf_instructions_total"),
        );
        (c1 - c0 > 1e8).then_some((c1 - c0, i1 - i0))
    })
    .unwrap_or_else(|| {
        panic!(
            "fewer than 1e8 cycles in 10 busy seconds: {}",
            total(&exp, "perf_cpu_cycles_total") - c0
        )
    });
    let ipc = di / dc;
    assert!((0.05..8.0).contains(&ipc), "IPC {ipc} ({di} / {dc})");
}

#[test]
#[ignore = "needs a hardware PMU"]
fn cycles_agree_with_perf_stat() {
    let (exp, _dir) = exporter_counting_cycles();
    let _spin = Spin::all_cpus();
    let c0 = total(&exp, "perf_cpu_cycles_total");
    let t0 = Instant::now();
    let out = Command::new("perf")
        .args(["stat", "-a", "-x", ",", "-e", "cycles", "--", "sleep", "2"])
        .output()
        .expect("perf(1) runs (linux-perf / linux-tools)");
    let c1 = total(&exp, "perf_cpu_cycles_total");
    let elapsed = t0.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // `-x ,` prints `value,unit,event,...` on stderr.
    let err = String::from_utf8_lossy(&out.stderr);
    let perf: f64 = err
        .lines()
        .find(|l| l.split(',').nth(2).is_some_and(|e| e.starts_with("cycles")))
        .and_then(|l| l.split(',').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no cycles count in perf stat's output:\n{err}"));
    let (ours, theirs) = ((c1 - c0) / elapsed, perf / 2.0);
    let diff = (ours - theirs).abs() / theirs;
    assert!(
        diff < 0.10,
        "cycles/s: exporter {ours:.3e}, perf stat {theirs:.3e} ({:.1}% apart)",
        diff * 100.0
    );
}
