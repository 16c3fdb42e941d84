//! Live-kernel tests: real `perf_event_open`, system-wide (`pid = -1`) on
//! every online CPU, through the same `Engine` the exporter serves.
//!
//! Requirements (each test FAILS with the reason when one is missing; none
//! is skipped): root, tracefs at /sys/kernel/tracing (`mount -t tracefs
//! nodev /sys/kernel/tracing`), `perf` on PATH (linux-perf), the `msr`
//! PMU, and a hotpluggable cpu1 (/sys/devices/system/cpu/cpu1/online).
//!
//! Every test takes `common::serial()`: the hotplug test takes cpu1 offline, and
//! the others count per CPU, so they must never overlap.

use crate::common;

use common::serial;

use common::{set_cpu1, Cpu1Guard, CPU1_ONLINE};
use perf_exporter::config::Config;
use perf_exporter::engine::{Engine, Fds, ToCount};
use perf_exporter::perf::hotplug::UeventWatcher;
use perf_exporter::perf::live::LiveKernel;
use perf_exporter::perf::Kernel;
use perf_exporter::pmu::{read_online_cpus, PmuTable};
use perf_exporter::probe::prober;
use perf_exporter::resolve::chain::{resolve_config, Status};
use perf_exporter::resolve::Context;
use perf_exporter::snapshot::{Kind, Snapshot};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

const SYSFS: &str = "/sys";

/// The effective uid, from /proc/self/status (`Uid: real effective ...`).
fn euid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

fn require_root() {
    let euid = euid();
    assert_eq!(
        euid,
        Some(0),
        "tests/live/live.rs needs root (system-wide perf_event_open, tracefs, CPU hotplug); \
         run `sudo cargo test --test live live::` (effective uid: {euid:?})"
    );
}

fn require_tracefs() -> Context {
    let ctx = Context::for_host(Path::new(SYSFS), Path::new("/proc"));
    assert!(
        ctx.tracefs.is_some(),
        "tracefs is not mounted: /sys/kernel/tracing/events is missing; \
         run `mount -t tracefs nodev /sys/kernel/tracing`"
    );
    ctx
}

fn online_cpus() -> Vec<u32> {
    read_online_cpus(Path::new(SYSFS)).expect("read /sys/devices/system/cpu/online")
}

/// Resolves `yaml` on the live host (probing each event with a real open)
/// and opens it. Fails if any metric is unavailable or fails to open.
fn live_engine(yaml: &str) -> Engine {
    require_root();
    let ctx = require_tracefs();
    let cfg = Config::parse(yaml, "live.yaml").unwrap_or_else(|e| panic!("test config: {e}"));
    let table = PmuTable::discover(Path::new(SYSFS)).expect("discover PMUs under /sys");
    let kernel: Arc<dyn Kernel> = Arc::new(LiveKernel::new());
    let engine = Engine::for_config(
        kernel,
        table,
        ToCount::Config(&cfg, Some(&ctx)),
        Fds::Unbounded,
    );
    for m in &engine.resolution().metrics {
        assert_ne!(
            m.status,
            Status::Unavailable,
            "{} is unavailable on this host: {}",
            m.metric,
            m.reason()
        );
    }
    assert!(
        engine.problems().is_empty(),
        "open failures: {:?}",
        engine.problems()
    );
    assert_eq!(engine.open_fds(), engine.planned_fds());
    engine
}

/// `cpu` label -> value of family `name`; fails if it is missing.
fn per_cpu(snap: &Snapshot, name: &str) -> BTreeMap<u32, f64> {
    let fam = snap
        .families
        .iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("no family {name} in {snap:#?}"));
    fam.samples
        .iter()
        .map(|s| {
            let cpu = s
                .labels
                .iter()
                .find(|(k, _)| *k == "cpu")
                .unwrap_or_else(|| panic!("{name} sample without a cpu label: {s:?}"));
            (cpu.1.parse().expect("numeric cpu label"), s.value)
        })
        .collect()
}

/// The sum of every sample of family `name`.
fn total(snap: &Snapshot, name: &str) -> f64 {
    snap.families
        .iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("no family {name} in {snap:#?}"))
        .samples
        .iter()
        .map(|s| s.value)
        .sum()
}

/// Pins the calling thread to `cpu` (with `taskset` on its tid: the
/// crate denies `unsafe` outside the perf layer, so no raw
/// `sched_setaffinity`).
fn pin(cpu: u32) -> bool {
    // `/proc/thread-self` -> `<pid>/task/<tid>`.
    let Some(tid) = std::fs::read_link("/proc/thread-self")
        .ok()
        .and_then(|p| p.file_name().map(|t| t.to_string_lossy().into_owned()))
    else {
        return false;
    };
    Command::new("taskset")
        .args(["-p", "-c", &cpu.to_string(), &tid])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Context-switch load: one thread per given CPU doing short sleeps
/// (each sleep is a switch to idle and back). Stops and joins on drop.
struct Load {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<bool>>,
}

impl Load {
    /// Starts the threads; returns once every one of them runs its loop.
    fn on(cpus: &[u32]) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let running = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let threads = cpus
            .iter()
            .map(|&cpu| {
                let stop = stop.clone();
                let running = running.clone();
                thread::spawn(move || {
                    let pinned = pin(cpu);
                    running.fetch_add(1, Ordering::SeqCst);
                    // Idle on its CPU until stopped (the thread only
                    // holds the pin).
                    while !stop.load(Ordering::Relaxed) {
                        thread::sleep(Duration::from_micros(100));
                    }
                    pinned
                })
            })
            .collect();
        common::wait_for("the load threads to run", Duration::from_secs(10), || {
            running.load(Ordering::SeqCst) == cpus.len()
        });
        Load { stop, threads }
    }

    /// Stops the load; whether every thread was pinned to its CPU.
    fn finish(mut self) -> bool {
        self.stop.store(true, Ordering::Relaxed);
        // Join every thread before looking at the results.
        let pinned: Vec<bool> = self
            .threads
            .drain(..)
            .map(|t| t.join().unwrap_or(false))
            .collect();
        pinned.into_iter().all(|p| p)
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

const MIXED: &str = concat!(
    crate::software_set!(),
    r#"  - name: msr
    events:
      - metric: perf_msr_tsc_total
        event: "msr/tsc/"
  - name: sched
    events:
      - metric: perf_sched_switch_total
        event: "sched:sched_switch"
"#
);

const MIXED_METRICS: [&str; 4] = [
    "perf_cpu_clock_seconds_total",
    "perf_context_switches_total",
    "perf_msr_tsc_total",
    "perf_sched_switch_total",
];

/// Software events, `msr/tsc/` and a tracepoint through one engine: a
/// series per online CPU, each increasing; cpu-clock tracks wall time.
#[test]
fn software_msr_tracepoint_per_cpu() {
    let _g = serial();
    let mut engine = live_engine(MIXED);
    let cpus = online_cpus();
    let load = Load::on(&cpus);

    // cpu-clock per CPU against the wall clock, read on both sides of each
    // collection (common::clocks): a collection delayed on a busy machine
    // moves the window's edges, not the counts.
    let origin = Instant::now();
    let wall_clock = || vec![origin.elapsed().as_secs_f64()];
    let mut last = None;
    let large_gap = Duration::from_millis(20);
    common::clocks::compare_clocks("cpu-clock per CPU vs wall time", large_gap, |_| {
        let a = common::clocks::bracket(wall_clock, || engine.collect());
        // The measured interval.
        thread::sleep(Duration::from_millis(200));
        let b = common::clocks::bracket(wall_clock, || engine.collect());
        let wall = a.growth(&b, 0);
        let (ca, cb) = (
            per_cpu(&a.value, "perf_cpu_clock_seconds_total"),
            per_cpu(&b.value, "perf_cpu_clock_seconds_total"),
        );
        let mut o = common::clocks::Outcome::new(a.max_gap(&b));
        for (cpu, v) in &cb {
            let d = v - ca.get(cpu).copied().unwrap_or(0.0);
            o.check(wall.agrees(d, 0.10 * wall.mid()), || {
                format!("cpu-clock on CPU {cpu} advanced {d:.4} s over {wall} s of wall time")
            });
        }
        last = Some((a.value, b.value));
        o
    });
    let (a, b) = last.expect("measured");
    // Software, tracepoint and msr events are never time-sliced: on the
    // live kernel their running time equals their enabled time exactly,
    // so every counter is `counting` (issue 27).
    let states = engine.counter_states();
    assert!(!states.is_empty());
    for (metric, labels, state, ratio) in &states {
        assert_eq!(
            (*state, *ratio),
            (perf_exporter::problem::CounterState::Counting, 1.0),
            "{metric}{}",
            labels.rendered()
        );
    }
    assert!(
        load.finish(),
        "could not pin the load threads to {cpus:?} \
         (`taskset -p -c CPU TID` failed; is util-linux installed?)"
    );

    let want: BTreeSet<u32> = cpus.iter().copied().collect();
    for name in MIXED_METRICS {
        let (va, vb) = (per_cpu(&a, name), per_cpu(&b, name));
        assert_eq!(
            vb.keys().copied().collect::<BTreeSet<_>>(),
            want,
            "{name}: cpu labels vs online CPUs"
        );
        assert_eq!(va.keys().collect::<Vec<_>>(), vb.keys().collect::<Vec<_>>());
        for (cpu, v) in &vb {
            assert!(
                *v > va[cpu],
                "{name}{{cpu=\"{cpu}\"}} did not increase: {} -> {v}",
                va[cpu]
            );
        }
    }
    // The availability gauge says 1 for each of them.
    let avail = a
        .families
        .iter()
        .find(|f| f.name == "perf_event_available")
        .expect("perf_event_available");
    assert_eq!(avail.samples.len(), MIXED_METRICS.len(), "{avail:?}");
    assert!(avail.samples.iter().all(|s| s.value == 1.0), "{avail:?}");
}

const GETPPID_CALLS: u64 = 200_000;

/// Set (to the number of calls) in the environment of the child process
/// that runs [`getppid_child`].
const GETPPID_ENV: &str = "PERF_EXPORTER_LIVE_GETPPID_CALLS";

/// Not a test: the body of the child process of
/// `tracepoint_counts_exact_getppid_calls`, which re-runs this test binary
/// with only this function selected and `GETPPID_ENV` set. Without the
/// variable (`cargo test -- --ignored`) it has nothing to do.
#[test]
#[ignore = "helper process of tracepoint_counts_exact_getppid_calls"]
fn getppid_child() {
    let Ok(n) = std::env::var(GETPPID_ENV) else {
        return;
    };
    let n: u64 = n.parse().expect("a number of calls");
    for _ in 0..n {
        // getppid(2) every time: neither std nor glibc caches it.
        std::hint::black_box(std::os::unix::process::parent_id());
    }
    println!("getppid-child: {n} calls");
}

/// Runs a child process that makes exactly `n` getppid system calls.
fn child_getppid(n: u64) {
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = Command::new(&exe)
        .args(["--exact", "live::getppid_child", "--ignored", "--nocapture"])
        .args(["--test-threads=1"])
        .env(GETPPID_ENV, n.to_string())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", exe.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains(&format!("getppid-child: {n} calls")),
        "the getppid child did not run ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A tracepoint summed over CPUs (`per_cpu: false`) against an exact
/// reference: a child that makes 200,000 getppid calls.
#[test]
fn tracepoint_counts_exact_getppid_calls() {
    let _g = serial();
    let mut engine = live_engine(crate::config!("live/getppid"));
    let series = |s: &Snapshot| {
        let f = s
            .families
            .iter()
            .find(|f| f.name == "perf_getppid_total")
            .unwrap_or_else(|| panic!("no perf_getppid_total in {s:#?}"));
        assert_eq!(f.kind, Kind::Counter);
        assert_eq!(f.samples.len(), 1, "per: node sums CPUs: {f:?}");
        assert!(f.samples[0].labels.is_empty(), "{f:?}");
        f.samples[0].value
    };
    let before = series(&engine.collect());
    child_getppid(GETPPID_CALLS);
    let after = series(&engine.collect());
    let d = after - before;
    let n = GETPPID_CALLS as f64;
    eprintln!("sys_enter_getppid: {d} counted for {GETPPID_CALLS} calls");
    assert!(
        d >= n && d <= n * 1.01,
        "sys_enter_getppid counted {d} for {GETPPID_CALLS} calls (want >= N, within 1%)"
    );
}

/// The counts of two collections' difference, by family.
fn deltas(a: &Snapshot, b: &Snapshot, names: &[&str]) -> Vec<f64> {
    names.iter().map(|n| total(b, n) - total(a, n)).collect()
}

/// perf's modifiers on a software event, live: `page-faults:u` and
/// `page-faults:k` (the kernel applies `exclude_user`/`exclude_kernel`
/// to the registers of the faulting code) split `page-faults` exactly
/// (the three are one group per CPU, read at once); faults on fresh
/// pages written in user space land in `:u`, those the kernel takes
/// filling fresh pages for read(2) in `:k`.
#[test]
fn page_faults_split_into_user_and_kernel() {
    let _g = serial();
    let mut engine = live_engine(crate::config!("live/page_faults_modes"));
    const PAGES: usize = 8192;
    const KERNEL_PAGES: usize = 1024;
    let a = engine.collect();
    // 32 MiB from calloc (mmap: untouched zero pages), each page written
    // once, in user mode.
    let mut v = vec![0u8; PAGES * 4096];
    for i in (0..v.len()).step_by(4096) {
        v[i] = 1;
    }
    std::hint::black_box(&v);
    // 4 MiB of untouched pages filled by read(2): the kernel's copy to
    // user memory takes these faults, in kernel mode. The buffer is 32 MiB
    // so that it is a fresh mmap: glibc serves smaller ones from memory
    // other tests of this binary may have touched (no fault then), but
    // never one of its mmap threshold's maximum (32 MiB on 64-bit) or more.
    let mut k = vec![0u8; PAGES * 4096];
    let exe = std::env::current_exe().expect("the test binary's path");
    std::io::Read::read_exact(
        &mut std::fs::File::open(&exe).expect("open the test binary"),
        &mut k[..KERNEL_PAGES * 4096],
    )
    .expect("the test binary has 4 MiB");
    std::hint::black_box(&k);
    let b = engine.collect();
    drop((v, k));
    let d = deltas(
        &a,
        &b,
        &[
            "perf_page_faults_total",
            "perf_page_faults_user_total",
            "perf_page_faults_kernel_total",
        ],
    );
    let (all, user, kernel) = (d[0], d[1], d[2]);
    eprintln!("page faults: all {all}, user {user}, kernel {kernel}");
    // With transparent huge pages always on, a fault may map 512 pages.
    let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .unwrap_or_default()
        .contains("[always]");
    let huge = if thp { 512 } else { 1 };
    assert!(
        user >= (PAGES / huge) as f64,
        "page-faults:u counted {user} for {PAGES} fresh pages written in user space"
    );
    assert!(
        kernel >= (KERNEL_PAGES / huge) as f64,
        "page-faults:k counted {kernel} for {KERNEL_PAGES} fresh pages filled by read(2)"
    );
    assert!(user > kernel, "user {user}, kernel {kernel}");
    assert!(
        (user + kernel - all).abs() <= 0.001 * all + 1.0,
        "page-faults:u + :k = {user} + {kernel}, page-faults = {all}"
    );
}

/// perf's `u` on tracepoints, live: the kernel keeps the hits taken with
/// user-mode registers (`perf_tp_event_match`); a syscall tracepoint gets
/// the caller's, so `syscalls:sys_enter_getppid:u` counts every call,
/// while `sched:sched_switch` fires in the kernel and `:u` counts none.
#[test]
fn tracepoint_u_keeps_syscalls_and_drops_kernel_hits() {
    let _g = serial();
    let mut engine = live_engine(crate::config!("live/tracepoint_u"));
    let a = engine.collect();
    child_getppid(GETPPID_CALLS);
    let b = engine.collect();
    let d = deltas(
        &a,
        &b,
        &[
            "perf_getppid_user_total",
            "perf_switches_user_total",
            "perf_switches_total",
        ],
    );
    let n = GETPPID_CALLS as f64;
    assert!(
        d[0] >= n && d[0] <= n * 1.01,
        "sys_enter_getppid:u counted {} for {GETPPID_CALLS} calls",
        d[0]
    );
    assert!(d[2] > 0.0, "no context switch at all: {d:?}");
    assert_eq!(d[1], 0.0, "sched_switch:u counted kernel hits: {d:?}");
}

/// A PMU registered with `PERF_PMU_CAP_NO_EXCLUDE` (`msr`, as RAPL and
/// the uncore PMUs) refuses modifiers with EINVAL: `msr/tsc/u` is
/// reported unavailable with the kernel's errno, never exported as 0,
/// and `msr/tsc/` next to it counts.
#[test]
fn msr_refuses_modifiers_as_unavailable() {
    let _g = serial();
    require_root();
    let ctx = require_tracefs();
    let cfg = Config::parse(crate::config!("live/msr_modifiers"), "live.yaml").unwrap();
    let table = PmuTable::discover(Path::new(SYSFS)).expect("discover PMUs under /sys");
    let kernel = LiveKernel::new();
    let probe = prober(&kernel);
    let res = resolve_config(&cfg, &table, &ctx, Some(&probe));
    let by = |n: &str| res.metrics.iter().find(|m| m.metric == n).unwrap();
    let u = by("perf_tsc_user_total");
    assert_eq!(u.status, Status::Unavailable, "{u:?}");
    let p = u.problem().expect("a reason");
    assert_eq!(p.code(), "pmu_refused", "{p}");
    assert!(p.to_string().contains("errno 22"), "{p}");
    assert!(
        p.what_to_do().contains("drop the modifiers"),
        "{}",
        p.what_to_do()
    );
    assert_eq!(by("perf_tsc_total").status, Status::Resolved);
}

/// Runs `perf stat -a -x, -e context-switches,cpu-clock -- <cmd>` and
/// returns (context-switches, cpu-clock msec).
fn perf_stat(cmd: &[&str]) -> (f64, f64) {
    let out = Command::new("perf")
        .args([
            "stat",
            "-a",
            "-x,",
            "-e",
            "context-switches,cpu-clock",
            "--",
        ])
        .args(cmd)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run `perf stat` (install linux-perf; `perf` must be on PATH): {e}")
        });
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "`perf stat` failed ({}): {err}",
        out.status
    );
    // CSV: value,unit,event,run time,percentage,...
    let field = |event: &str, unit: &str| -> f64 {
        let line = err
            .lines()
            .find(|l| l.split(',').nth(2).is_some_and(|e| e == event))
            .unwrap_or_else(|| panic!("no {event} line in `perf stat` output:\n{err}"));
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f[1], unit, "{event} unit in `{line}`");
        f[0].parse()
            .unwrap_or_else(|_| panic!("{event} not counted by `perf stat`: `{line}`"))
    };
    (field("context-switches", ""), field("cpu-clock", "msec"))
}

fn within(ours: f64, theirs: f64, tol: f64) -> bool {
    theirs > 0.0 && ((ours - theirs) / theirs).abs() <= tol
}

/// Issue 24, item 12: the shared clock comparison (common::clocks)
/// compares with the span its bracketing reads allow, measures once more
/// only after a failure with a large gap, and fails with the gap and the
/// load average.
#[test]
fn clock_comparisons_bracket_retry_once_and_report_the_load() {
    use common::clocks::{bracket, compare_clocks, Outcome, Span};
    use std::panic::{catch_unwind, AssertUnwindSafe};
    let span = Span { lo: 1.0, hi: 1.5 };
    assert!(span.agrees(0.95, 0.06) && span.agrees(1.2, 0.0) && span.agrees(1.55, 0.06));
    assert!(!span.agrees(0.9, 0.05) && !span.agrees(1.6, 0.05));
    // A reference read before and after: 1 and 2, then 5 and 7.
    let reads = [1.0, 2.0, 5.0, 7.0];
    let i = std::cell::Cell::new(0);
    let reference = || {
        i.set(i.get() + 1);
        vec![reads[i.get() - 1]]
    };
    let a = bracket(reference, || "a");
    let b = bracket(reference, || "b");
    assert_eq!(a.growth(&b, 0), Span { lo: 3.0, hi: 6.0 });
    assert_eq!((a.value, b.value), ("a", "b"));

    let large = Duration::from_millis(50);
    let failing = |gap_ms: u64| {
        let mut o = Outcome::new(Duration::from_millis(gap_ms));
        o.check(false, || "ours 0.256 s vs cpu.stat 0.599 s".into());
        o
    };
    // Failed with a large gap, then agreed: measured twice, passes.
    let mut n = 0;
    compare_clocks("t", large, |k| {
        n += 1;
        assert_eq!(k, n);
        if k == 1 {
            failing(80)
        } else {
            Outcome::new(Duration::ZERO)
        }
    });
    assert_eq!(n, 2);
    // Failed with a small gap: not measured again; the message has the
    // gap and the load average.
    let mut n = 0;
    let e = catch_unwind(AssertUnwindSafe(|| {
        compare_clocks("small gap", large, |_| {
            n += 1;
            failing(3)
        })
    }))
    .expect_err("a failure with a small gap fails");
    let msg = e.downcast_ref::<String>().cloned().unwrap_or_default();
    assert_eq!(n, 1, "{msg}");
    assert!(
        msg.contains("0.599 s") && msg.contains("3ms apart") && msg.contains("load average "),
        "{msg}"
    );
    // Failed twice with a large gap: measured twice, then fails.
    let mut n = 0;
    let e = catch_unwind(AssertUnwindSafe(|| {
        compare_clocks("large gap", large, |_| {
            n += 1;
            failing(90)
        })
    }))
    .expect_err("two failures fail");
    let msg = e.downcast_ref::<String>().cloned().unwrap_or_default();
    assert_eq!(n, 2, "{msg}");
    assert!(
        msg.contains("measured 2 time(s)") && msg.contains("more than the 50ms"),
        "{msg}"
    );
}

/// context-switches and cpu-clock summed over CPUs agree with
/// `perf stat -a`, within 2%.
///
/// The exporter's window (between its two collections) holds `perf stat`'s
/// and also perf's own start-up and exit, which take tens of ms on a busy
/// machine: the counts over the two windows differ by that much. So each
/// tool is compared over its own window: `cpu-clock -a` is every CPU's
/// time while counting (idle or not), i.e. the window times the CPUs, so
/// context switches per cpu-clock second are the same rate in both; and
/// the exporter's cpu-clock is at least perf's and at most its own
/// window's wall time times the CPUs.
#[test]
fn software_counts_match_perf_stat() {
    let _g = serial();
    let mut engine = live_engine(MIXED);
    // Thousands of switches per second on every CPU.
    let load = Load::on(&online_cpus());

    // A first run outside the window: perf's cold start (loading the
    // binary, scanning sysfs) must not widen the window it is compared on.
    perf_stat(&["true"]);

    let cpus = online_cpus().len() as f64;
    // The gap: how much longer the exporter's window was than perf's
    // (perf's start-up and exit, and any wait for a CPU on a busy machine).
    let large_gap = Duration::from_millis(150);
    common::clocks::compare_clocks("software counts vs perf stat -a", large_gap, |_| {
        let t0 = Instant::now();
        let a = engine.collect();
        let (cs_perf, clock_perf_ms) = perf_stat(&["sleep", "2"]);
        let b = engine.collect();
        let wall_ms = t0.elapsed().as_secs_f64() * 1e3;

        let cs =
            total(&b, "perf_context_switches_total") - total(&a, "perf_context_switches_total");
        let clock_ms = (total(&b, "perf_cpu_clock_seconds_total")
            - total(&a, "perf_cpu_clock_seconds_total"))
            * 1e3;
        eprintln!(
            "context-switches: exporter {cs}, perf stat {cs_perf}; \
             cpu-clock: exporter {clock_ms:.1} ms, perf stat {clock_perf_ms:.1} ms"
        );
        assert!(
            cs_perf >= 1000.0,
            "the load made only {cs_perf} context switches in 2 s"
        );
        let mut o = common::clocks::Outcome::new(Duration::from_secs_f64(
            (wall_ms - clock_perf_ms / cpus).max(0.0) / 1e3,
        ));
        o.check(within(cs / clock_ms, cs_perf / clock_perf_ms, 0.02), || {
            format!(
                "context switches per cpu-clock ms: exporter {cs}/{clock_ms:.1} vs perf stat \
                 {cs_perf}/{clock_perf_ms:.1}"
            )
        });
        o.check(
            clock_ms >= clock_perf_ms * 0.98 && clock_ms <= wall_ms * cpus * 1.02,
            || {
                format!(
                    "cpu-clock: exporter {clock_ms:.1} ms, perf stat {clock_perf_ms:.1} ms, \
                     the exporter's window {wall_ms:.1} ms x {cpus} CPUs"
                )
            },
        );
        o
    });
    drop(load);
}

/// A series: family name and labels.
type SeriesId = (String, Vec<(&'static str, String)>);

/// Sets the flag when dropped.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

const ONLINE: u8 = 0;
const GOING_OFFLINE: u8 = 1;
const OFFLINE: u8 = 2;
const GOING_ONLINE: u8 = 3;
const BACK_ONLINE: u8 = 4;

fn has_cpu1(s: &Snapshot) -> Vec<String> {
    s.families
        .iter()
        .filter(|f| {
            f.samples
                .iter()
                .any(|x| x.labels.iter().any(|(k, v)| *k == "cpu" && v == "1"))
        })
        .map(|f| f.name.to_string())
        .collect()
}

/// cpu1 goes offline and back while another thread scrapes every 50 ms:
/// no counter goes backwards, cpu1's series leave while it is offline and
/// come back (continuing from their totals) once it is online.
#[test]
#[allow(clippy::too_many_lines)] // one scenario; to be split into steps (issue 26)
fn cpu_hotplug_while_scraping() {
    if common::hotplug_opted_out("cpu_hotplug_while_scraping") {
        return;
    }
    let _g = serial();
    require_root();
    let _guard = Cpu1Guard;
    assert!(
        Path::new(CPU1_ONLINE).exists(),
        "{CPU1_ONLINE} is missing: this test needs a second, hotpluggable CPU"
    );
    set_cpu1(true).unwrap_or_else(|e| panic!("write 1 to {CPU1_ONLINE}: {e}"));
    assert!(online_cpus().contains(&1), "cpu1 is not online");

    let mut engine = live_engine(MIXED);
    let phase = Arc::new(AtomicU8::new(ONLINE));
    let stop = Arc::new(AtomicBool::new(false));
    // Stops the scraper even when this thread panics.
    let _stop = StopOnDrop(stop.clone());
    let made = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let scraper = {
        let (phase, stop, made) = (phase.clone(), stop.clone(), made.clone());
        thread::spawn(move || {
            let mut out = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                let p0 = phase.load(Ordering::SeqCst);
                let snap = engine.collect();
                let p1 = phase.load(Ordering::SeqCst);
                out.push((p0, p1, snap));
                made.fetch_add(1, Ordering::SeqCst);
                // A collection every 50 ms while the main thread works.
                thread::sleep(Duration::from_millis(50));
            }
            out
        })
    };
    // Until the scraper has made `n` more collections.
    let collections = |n: usize| {
        let until = made.load(Ordering::SeqCst) + n;
        common::wait_for("collections", Duration::from_secs(30), || {
            made.load(Ordering::SeqCst) >= until
        });
    };
    // Each phase lasts 10 collections.
    let step = |p: u8, f: &dyn Fn()| {
        phase.store(p, Ordering::SeqCst);
        f();
        phase.store(p + 1, Ordering::SeqCst);
        collections(10);
    };
    collections(5);
    step(GOING_OFFLINE, &|| {
        set_cpu1(false).unwrap_or_else(|e| panic!("write 0 to {CPU1_ONLINE}: {e}"))
    });
    let offline_seen = online_cpus();
    step(GOING_ONLINE, &|| {
        set_cpu1(true).unwrap_or_else(|e| panic!("write 1 to {CPU1_ONLINE}: {e}"))
    });
    stop.store(true, Ordering::SeqCst);
    let snaps = match scraper.join() {
        Ok(s) => s,
        Err(e) => std::panic::resume_unwind(e),
    };
    assert_eq!(offline_seen, vec![0], "cpu1 did not go offline");

    // Monotonic: per (family, labels), never below the highest value seen.
    let mut max: BTreeMap<SeriesId, f64> = BTreeMap::new();
    for (i, (_, _, s)) in snaps.iter().enumerate() {
        for f in s.families.iter().filter(|f| f.kind == Kind::Counter) {
            for x in &f.samples {
                let k = (f.name.to_string(), x.labels.to_vec());
                let m = max.entry(k).or_insert(x.value);
                assert!(
                    x.value >= *m,
                    "scrape {i}: {}{:?} went backwards: {} -> {}",
                    f.name,
                    x.labels,
                    *m,
                    x.value
                );
                *m = x.value;
            }
        }
    }

    let phases: Vec<(u8, u8)> = snaps.iter().map(|(a, b, _)| (*a, *b)).collect();
    let before: Vec<&Snapshot> = snaps
        .iter()
        .filter(|(a, b, _)| *a == ONLINE && *b == ONLINE)
        .map(|x| &x.2)
        .collect();
    let offline: Vec<&Snapshot> = snaps
        .iter()
        .filter(|(a, b, _)| *a == OFFLINE && *b == OFFLINE)
        .map(|x| &x.2)
        .collect();
    let after: Vec<&Snapshot> = snaps
        .iter()
        .filter(|(a, b, _)| *a == BACK_ONLINE && *b == BACK_ONLINE)
        .map(|x| &x.2)
        .collect();
    assert!(
        before.len() >= 3 && offline.len() >= 5 && after.len() >= 5,
        "too few scrapes per phase: {phases:?}"
    );

    for s in &before {
        for name in MIXED_METRICS {
            assert!(per_cpu(s, name).contains_key(&1), "{name}: no cpu1 before");
        }
    }
    for (i, s) in offline.iter().enumerate() {
        let fams = has_cpu1(s);
        assert!(
            fams.is_empty(),
            "offline scrape {i}: cpu=\"1\" series still exported in {fams:?}"
        );
        for name in MIXED_METRICS {
            assert_eq!(
                per_cpu(s, name).keys().collect::<Vec<_>>(),
                vec![&0],
                "{name} offline"
            );
        }
    }
    // Back within a couple of scrapes, and from then on, counting again.
    let back = after
        .iter()
        .position(|s| MIXED_METRICS.iter().all(|n| per_cpu(s, n).contains_key(&1)))
        .unwrap_or_else(|| panic!("cpu1 series never came back: {phases:?}"));
    assert!(back <= 2, "cpu1 series came back only at scrape {back}");
    let last_before = before.last().expect("a scrape before");
    let first_back = after[back];
    let last = after.last().expect("a scrape after");
    for name in MIXED_METRICS {
        let v0 = per_cpu(last_before, name)[&1];
        let v1 = per_cpu(first_back, name)[&1];
        assert!(v1 >= v0, "{name}{{cpu=\"1\"}} restarted: {v0} -> {v1}");
        for s in &after[back..] {
            assert!(
                per_cpu(s, name).contains_key(&1),
                "{name}: cpu1 series left again"
            );
        }
    }
    for name in ["perf_cpu_clock_seconds_total", "perf_msr_tsc_total"] {
        let v1 = per_cpu(first_back, name)[&1];
        let v2 = per_cpu(last, name)[&1];
        assert!(
            v2 > v1,
            "{name}{{cpu=\"1\"}} does not count after coming back: {v1} -> {v2}"
        );
    }
}

/// cpu1 goes offline and comes back between two collections: the online
/// list looks unchanged, but the kernel disabled the old events. Their
/// enabled time stands still while the others' moves, so the engine
/// reopens them and cpu1 keeps counting.
#[test]
fn cpu_offline_and_back_between_collections() {
    if common::hotplug_opted_out("cpu_offline_and_back_between_collections") {
        return;
    }
    let _g = serial();
    require_root();
    let _guard = Cpu1Guard;
    set_cpu1(true).unwrap_or_else(|e| panic!("write 1 to {CPU1_ONLINE}: {e}"));
    let mut engine = live_engine(MIXED);
    engine.collect();
    // The interval `before` measures: every online CPU's clock moves.
    thread::sleep(Duration::from_millis(100));
    let before = per_cpu(&engine.collect(), "perf_cpu_clock_seconds_total");
    let reads_before = engine.online_reads();
    set_cpu1(false).unwrap_or_else(|e| panic!("write 0 to {CPU1_ONLINE}: {e}"));
    set_cpu1(true).unwrap_or_else(|e| panic!("write 1 to {CPU1_ONLINE}: {e}"));
    // The interval in which the others' enabled time moves and the old
    // events of cpu1 (disabled by the kernel) stand still: what the next
    // collection detects.
    thread::sleep(Duration::from_millis(100));
    // This collection sees cpu1's clock stand still and reopens it.
    engine.collect();
    assert!(
        engine.online_reads() > reads_before,
        "the hotplug did not make the engine re-read the online CPUs"
    );
    // cpu1 counts again: its clock gains 0.2 s (at least that much wall
    // time), polled against a deadline.
    let mut after = BTreeMap::new();
    let counts = common::poll(Duration::from_secs(3), Duration::from_millis(100), || {
        after = per_cpu(&engine.collect(), "perf_cpu_clock_seconds_total");
        (after.get(&1).copied().unwrap_or(0.0) > before[&1] + 0.2).then_some(())
    });
    assert!(
        counts.is_some(),
        "cpu1's clock stopped: before {before:?}, after {after:?}"
    );
    assert!(after[&0] > before[&0]);
}

/// Without hotplug, a collection reads no file: the online CPU list is
/// re-read only on a hotplug signal (a uevent), a failed read or a stalled
/// group. (The syscalls themselves are counted by
/// `scripts/bench-vs-node-exporter.sh` with strace.)
#[test]
fn no_online_list_reads_without_hotplug() {
    let _g = serial();
    let mut engine = live_engine(MIXED);
    for _ in 0..20 {
        engine.collect();
        // Collections 5 ms apart: the span in which no read may happen.
        thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(
        engine.online_reads(),
        0,
        "the engine re-read the online CPU list without a hotplug"
    );
}

/// The uevent watcher counts real CPU hotplug events.
#[test]
fn uevent_watcher_sees_cpu_hotplug() {
    if common::hotplug_opted_out("uevent_watcher_sees_cpu_hotplug") {
        return;
    }
    let _g = serial();
    require_root();
    let _guard = Cpu1Guard;
    set_cpu1(true).unwrap_or_else(|e| panic!("write 1 to {CPU1_ONLINE}: {e}"));
    let w = UeventWatcher::start().expect("NETLINK_KOBJECT_UEVENT socket");
    let g0 = w.generation().expect("watcher running");
    let wait_past = |g: u64| {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if w.generation().is_some_and(|x| x > g) {
                return w.generation().unwrap_or(g);
            }
            thread::sleep(Duration::from_millis(10));
        }
        panic!("no CPU uevent seen within 5 s (generation stays {g})");
    };
    set_cpu1(false).unwrap_or_else(|e| panic!("write 0 to {CPU1_ONLINE}: {e}"));
    let g1 = wait_past(g0);
    set_cpu1(true).unwrap_or_else(|e| panic!("write 1 to {CPU1_ONLINE}: {e}"));
    wait_past(g1);
}

/// The hotplug tests of this file, by name (`PERF_EXPORTER_TEST_NO_HOTPLUG`
/// opts out of them; tests/live/faults.rs has one more).
const HOTPLUG_TESTS: [&str; 4] = [
    "cpu_hotplug_while_scraping",
    "cpu_offline_and_back_between_collections",
    "uevent_watcher_sees_cpu_hotplug",
    "cpu1_clock_matches_its_online_time_through_hotplug_cycles",
];

/// Issue 24, item 11: with `PERF_EXPORTER_TEST_NO_HOTPLUG=1`, the hotplug
/// tests take no CPU offline (no CPU uevent while this test binary runs
/// them) and each says so on stderr, which `scripts/test.sh` counts as a
/// skip; without it, they run (the variable's parsing).
#[test]
fn hotplug_tests_opted_out_offline_nothing_and_say_so() {
    let _g = serial();
    for (v, out) in [(None, false), (Some(""), false), (Some("0"), false)] {
        assert_eq!(common::hotplug_opted_out_by(v), out, "{v:?}");
    }
    for v in ["1", "yes", "true"] {
        assert!(common::hotplug_opted_out_by(Some(v)), "{v}");
    }
    let w = UeventWatcher::start().expect("NETLINK_KOBJECT_UEVENT socket");
    let g0 = w.generation().expect("watcher running");
    // The tests' names in this binary: `<module>::<test>`.
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    let names = HOTPLUG_TESTS.map(|t| format!("{module}::{t}"));
    let out = Command::new(std::env::current_exe().expect("this test binary"))
        .args(names)
        .args(["--exact", "--test-threads=1"])
        .env(common::NO_HOTPLUG_ENV, "1")
        // This test holds the serial lock for its child.
        .env(common::SERIAL_HELD_ENV, "1")
        .output()
        .expect("run this test binary again");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let ctx = format!("stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        out.status.success(),
        "the opted-out hotplug tests failed\n{ctx}"
    );
    assert!(
        stdout.contains(&format!("{} passed", HOTPLUG_TESTS.len())),
        "not every hotplug test ran\n{ctx}"
    );
    for t in HOTPLUG_TESTS {
        assert!(
            stderr.contains(&format!("{}: {t}: ", common::NO_HOTPLUG_NOTICE)),
            "{t} did not say that it was opted out\n{ctx}"
        );
    }
    // The uevent socket sees every CPU hotplug on the machine: none may
    // have happened (another process that hotplugs CPUs at the same time
    // would fail this test too; nothing else of this crate runs now). A
    // hotplug test that did hotplug would go on for a while after it, so
    // its uevent has been read by the time the child exited.
    assert_eq!(
        w.generation(),
        Some(g0),
        "a CPU went offline or online while the opted-out hotplug tests ran\n{ctx}"
    );
}

/// cpu1's /proc/stat times in USER_HZ ticks (1/100 s): user, nice,
/// system, idle, iowait, irq, softirq, steal (guest time is already in
/// user). cpu1 must be online.
fn proc_stat_cpu1() -> [u64; 8] {
    let stat = std::fs::read_to_string("/proc/stat").expect("read /proc/stat");
    let line = stat
        .lines()
        .find(|l| l.starts_with("cpu1 "))
        .unwrap_or_else(|| panic!("no cpu1 line in /proc/stat (cpu1 offline?)"));
    let mut t = [0u64; 8];
    for (x, v) in t.iter_mut().zip(line.split_whitespace().skip(1)) {
        *x = v.parse().expect("numeric /proc/stat field");
    }
    t
}

/// Collects, checking that no counter went below its highest value and
/// that no group read failed; returns the snapshot.
fn checked_collect(engine: &Mutex<Engine>, max: &mut BTreeMap<SeriesId, f64>) -> Snapshot {
    let s = engine.lock().unwrap_or_else(|p| p.into_inner()).collect();
    for f in s.families.iter().filter(|f| f.kind == Kind::Counter) {
        for x in &f.samples {
            let m = max
                .entry((f.name.to_string(), x.labels.to_vec()))
                .or_insert(x.value);
            assert!(
                x.value >= *m,
                "{}{:?} went backwards: {} -> {}",
                f.name,
                x.labels,
                *m,
                x.value
            );
            *m = x.value;
            if f.name == "perf_read_errors_total" {
                assert_eq!(x.value, 0.0, "a group read failed: {:?}", x.labels);
            }
        }
    }
    s
}

/// Scrapes once a second for `ms` milliseconds, without a scrape at the
/// end (so what happens then falls between scrapes).
fn scrape_for(engine: &Mutex<Engine>, max: &mut BTreeMap<SeriesId, f64>, ms: u64) {
    let deadline = Instant::now() + Duration::from_millis(ms);
    loop {
        checked_collect(engine, max);
        let next = Instant::now() + Duration::from_secs(1);
        thread::sleep(next.min(deadline).saturating_duration_since(Instant::now()));
        if next >= deadline {
            return;
        }
    }
}

/// Issue 10, defect 1: four offline/online cycles of cpu1 while the engine
/// is scraped about once a second, with the hotplug signal applied between
/// scrapes (`follow_hotplug`, as the exporter does). cpu1's cpu-clock grows
/// by the online time /proc/stat reports for it, within 2%: the counts
/// since the last scrape are read before its groups close, and counting
/// resumes as soon as it is back, not at the next scrape. No counter goes
/// backwards and no read fails.
#[test]
fn cpu1_clock_matches_its_online_time_through_hotplug_cycles() {
    if common::hotplug_opted_out("cpu1_clock_matches_its_online_time_through_hotplug_cycles") {
        return;
    }
    let _g = serial();
    require_root();
    let _guard = Cpu1Guard;
    set_cpu1(true).unwrap_or_else(|e| panic!("write 1 to {CPU1_ONLINE}: {e}"));
    // /proc/stat is the reference, but its per-CPU times have been seen
    // (rarely) to jump by seconds across a hotplug, beyond the time that
    // even passed: such a window says nothing and is measured again, once.
    for attempt in 1..=2 {
        let m = hotplug_cycles();
        eprintln!("cpu1: {m:?}");
        assert!(
            m.proc_stat > 10.0,
            "/proc/stat shows only {m:?} s online for cpu1"
        );
        if m.proc_stat > m.at_most + 0.2 && attempt == 1 {
            eprintln!("/proc/stat counts more online time than passed: measuring again");
            continue;
        }
        assert!(
            m.proc_stat <= m.at_most + 0.2,
            "/proc/stat counts more online time for cpu1 than passed, twice: {m:?}"
        );
        // Under load the online time is known only to within the window
        // `at_least..at_most` (the writes to `online` take that long), and
        // /proc/stat's ticks may sit anywhere in it: a count inside that
        // window is right whatever /proc/stat says.
        let in_window = (m.at_least - 0.2..=m.at_most + 0.2).contains(&m.cpu_clock);
        assert!(
            within(m.cpu_clock, m.proc_stat, 0.02) || in_window,
            "cpu1's cpu-clock grew {:.3} s while /proc/stat shows {:.3} s online ({:+.1}%), outside the time known to have passed online: {m:?} \
             (online time known to within {:.3} s; load average {})",
            m.cpu_clock,
            m.proc_stat,
            (m.cpu_clock / m.proc_stat - 1.0) * 100.0,
            m.at_most - m.at_least,
            common::clocks::loadavg()
        );
        return;
    }
}

/// One window of `cpu1_clock_matches_its_online_time_through_hotplug_cycles`.
#[derive(Debug)]
#[allow(dead_code)] // Read through Debug in messages.
struct HotplugWindow {
    /// cpu1's cpu-clock growth, seconds.
    cpu_clock: f64,
    /// cpu1's /proc/stat time growth, seconds.
    proc_stat: f64,
    /// The same per field, in ticks (user .. steal).
    ticks: Vec<u64>,
    /// Wall time minus the offline phases measured from each offline
    /// write's start to the next online write's end (a lower bound of the
    /// online time) ...
    at_least: f64,
    /// ... and from each offline write's end to the online write's start
    /// (an upper bound).
    at_most: f64,
}

/// Four offline/online cycles of cpu1 in about 30 s, scraped once a second
/// with the hotplug thread running; no counter goes backwards, no read
/// fails, and cpu1's series follow each uevent within 5 s.
fn hotplug_cycles() -> HotplugWindow {
    let engine = Arc::new(Mutex::new(live_engine(MIXED)));
    let _follower = perf_exporter::engine::follow_hotplug(&engine)
        .expect("the live kernel's hotplug signal (uevents)");
    let mut max = BTreeMap::new();
    let clock1 = |s: &Snapshot| per_cpu(s, "perf_cpu_clock_seconds_total").get(&1).copied();
    let wait_for = |online: bool| {
        // Looks without collecting: the hotplug thread alone must act.
        let followed = common::poll(Duration::from_secs(5), Duration::from_millis(5), || {
            let s = engine.lock().unwrap_or_else(|p| p.into_inner()).snapshot();
            (clock1(&s).is_some() == online).then_some(())
        });
        assert!(
            followed.is_some(),
            "cpu1's series did not follow its online={online} within 5 s of the uevent"
        );
    };
    let c0 = clock1(&checked_collect(&engine, &mut max)).expect("cpu1 counted");
    let p0 = proc_stat_cpu1();
    let start = Instant::now();
    let (mut off_long, mut off_short) = (Duration::ZERO, Duration::ZERO);
    scrape_for(&engine, &mut max, 5300);
    for cycle in 0..4 {
        let back_for = if cycle < 3 { 5300 } else { 3300 };
        let (mut t0, mut t1) = (Instant::now(), Instant::now());
        for (on, stay_ms) in [(false, 1400), (true, back_for)] {
            let before = Instant::now();
            set_cpu1(on).unwrap_or_else(|e| panic!("write {on} to {CPU1_ONLINE}: {e}"));
            if on {
                off_long += t0.elapsed();
                off_short += before - t1;
            } else {
                (t0, t1) = (before, Instant::now());
            }
            wait_for(on);
            scrape_for(&engine, &mut max, stay_ms);
        }
    }
    let c1 = clock1(&checked_collect(&engine, &mut max)).expect("cpu1 counted");
    let p1 = proc_stat_cpu1();
    let window = start.elapsed();
    let ticks: Vec<u64> = p1.iter().zip(&p0).map(|(b, a)| b - a).collect();
    HotplugWindow {
        cpu_clock: c1 - c0,
        proc_stat: ticks.iter().sum::<u64>() as f64 / 100.0,
        ticks,
        at_least: (window - off_long).as_secs_f64(),
        at_most: (window - off_short).as_secs_f64(),
    }
}
