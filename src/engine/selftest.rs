//! The optional start-up self-test (`--collector.self-test`, issue 27
//! item 2): what catches a PMU that counts, reads and schedules like a
//! good one but does not count what the CPU runs (the guest that reports
//! 395 instructions per second on a fully busy CPU, with `time_running`
//! equal to `time_enabled`: no state a collection judges can tell).
//!
//! Per core PMU, a thread of its own is pinned to the PMU's first online
//! CPU ([`Kernel::pin_thread`]), opens `cycles` and `instructions` as one
//! group counting that thread in user space only ([`Kernel::open_thread`];
//! this needs no privilege beyond counting one's own thread), runs a
//! calibrated loop of [`ITERATIONS`] iterations ([`spin`]) and reads the
//! group. The counts must have moved by what the loop ran:
//!
//! * **instructions ≥ [`FLOOR_SHARE`] × iterations ×
//!   [`MIN_PER_ITERATION`]**: an iteration is a multiply, an add and the
//!   loop's compare-and-branch at least, whatever the compiler makes of
//!   it; and **≤ iterations × [`MAX_PER_ITERATION`] +
//!   [`SLACK_INSTRUCTIONS`]** (an unoptimised build runs a few dozen per
//!   iteration; the slack is the few user-space instructions of the
//!   enable and read around the loop);
//! * **cycles ≥ iterations × [`MIN_CYCLES_PER_ITERATION`]**: each
//!   iteration's multiply depends on the last one's, 3 cycles of latency
//!   or more on every x86 and Arm core;
//! * **cycles ≤ the thread's busy time × maximum frequency × margin**, the
//!   bound and sources of the plausibility checks
//!   ([`crate::problem::plausible`]: cpufreq's `cpuinfo_max_freq` with
//!   [`FREQ_MARGIN`](crate::problem::plausible::FREQ_MARGIN), else the TSC
//!   rate with its margin; not checked where neither is known). The busy
//!   time is the group's `time_enabled`: for a counter of one thread the
//!   kernel's scheduler clock of the time that thread ran, which the PMU
//!   does not drive;
//! * **instructions per cycle ≤ retire width × margin**
//!   ([`retire_width`], [`IPC_MARGIN`]).
//!
//! A failure is a [`Problem::SelfTestFailed`], logged at start-up (the
//! one renderer, [`crate::problem::log_reason`]), shown by `check` (text
//! and `--json`'s `self_test`) and on the landing page, and exported as
//! `perf_self_test_passed{pmu}` (0 or 1). A host without a core PMU skips
//! it: no hardware counters to test.
//!
//! Cost: once, at start-up (and `check`): a thread, two counters and the
//! loop, a few milliseconds of one CPU in an optimised build; nothing per
//! scrape.
//!
//! In the simulation the loop's instructions are told to the simulated
//! kernel ([`Kernel::thread_ran`]), whose CPU runs them at its rate while
//! the thread's counters count as its CPU's do: it passes by default and
//! fails under a fake guest PMU ([`crate::perf::sim::SimKernel::set_guest_rate`]).

use crate::perf::{EventAttr, GroupReading, Kernel};
use crate::pmu::cpuclock::MaxFreq;
use crate::pmu::PmuTable;
use crate::problem::plausible::{retire_width, IPC_MARGIN};
use crate::problem::{log_reason, LogFields, Problem};
use crate::snapshot::{Family, Kind, Labels, Sample};
use crate::sys::abi;
use std::path::Path;
use tracing::Level;

/// Iterations of the calibrated loop: about 4 ms of a 3 GHz core in an
/// optimised build (4 cycles an iteration), long enough for the counts to
/// dwarf what the enable and the read add.
pub const ITERATIONS: u64 = 3_000_000;
/// Instructions an iteration runs at least: a multiply, an add and the
/// loop's branch.
pub const MIN_PER_ITERATION: f64 = 3.0;
/// The share of `iterations × MIN_PER_ITERATION` the instructions must
/// reach.
pub const FLOOR_SHARE: f64 = 0.5;
/// Instructions an iteration runs at most, generously (an unoptimised
/// build calls out for `black_box` and checks for overflow).
pub const MAX_PER_ITERATION: f64 = 200.0;
/// User-space instructions around the loop that may be counted (the
/// enable's return, the read's call).
pub const SLACK_INSTRUCTIONS: f64 = 1.0e6;
/// Cycles an iteration takes at least (its multiply waits for the last
/// one's: 3 cycles or more on every x86 and Arm core).
pub const MIN_CYCLES_PER_ITERATION: f64 = 1.0;
/// Cycles of slack over the maximum-frequency bound (the enable and read
/// around the loop).
const SLACK_CYCLES: f64 = 1.0e6;
/// The instructions an iteration is told to run, for the simulated
/// kernel ([`Kernel::thread_ran`]).
const NOMINAL_PER_ITERATION: u64 = 6;

/// The calibrated loop: `iterations` multiply-adds, each depending on the
/// last, through [`std::hint::black_box`] so the compiler can neither
/// remove nor fold it.
#[inline(never)]
pub fn spin(iterations: u64) -> u64 {
    let mut x: u64 = std::hint::black_box(1);
    let mut i = 0;
    while i < iterations {
        x = std::hint::black_box(
            x.wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407),
        );
        i += 1;
    }
    x
}

/// What the self-test found on one core PMU.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The counts moved as the loop ran.
    Passed(Counts),
    /// They did not: why.
    Failed(Problem),
    /// Not run: why (no hardware counters, they did not open).
    Skipped(String),
}

/// The counts of one run of the loop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Counts {
    /// Iterations of the loop.
    pub iterations: u64,
    /// Instructions counted (scaled by enabled/running if multiplexed).
    pub instructions: f64,
    /// Cycles counted (likewise).
    pub cycles: f64,
    /// The thread's busy time while counting, nanoseconds.
    pub busy_ns: u64,
}

/// The self-test of one core PMU.
#[derive(Debug, Clone, PartialEq)]
pub struct SelfTest {
    /// The core PMU (empty when the host has none).
    pub pmu: String,
    /// The CPU it ran on.
    pub cpu: Option<u32>,
    /// What it found.
    pub outcome: Outcome,
}

impl SelfTest {
    /// `passed`, `failed` or `skipped`.
    pub fn result(&self) -> &'static str {
        match self.outcome {
            Outcome::Passed(_) => "passed",
            Outcome::Failed(_) => "failed",
            Outcome::Skipped(_) => "skipped",
        }
    }

    /// One line: `cpu: passed on CPU 0 (...)`, `cpu: failed on CPU 0:
    /// why`, `skipped because ...`.
    pub fn summary(&self) -> String {
        let on = self.cpu.map(|c| format!(" on CPU {c}")).unwrap_or_default();
        let pmu = if self.pmu.is_empty() {
            String::new()
        } else {
            format!("{}: ", self.pmu)
        };
        match &self.outcome {
            Outcome::Passed(c) => format!(
                "{pmu}passed{on} ({} iterations: {:.0} instructions, {:.0} cycles in {:.3} ms)",
                c.iterations,
                c.instructions,
                c.cycles,
                c.busy_ns as f64 / 1e6
            ),
            Outcome::Failed(p) => format!("{pmu}failed{on}: {p}"),
            Outcome::Skipped(why) => format!("{pmu}skipped because {why}"),
        }
    }
}

/// Runs the self-test on each core PMU of `table` with online CPUs
/// `online`, through `kernel` (maximum frequencies under `procfs` and the
/// table's sysfs), and logs each verdict.
pub fn run(kernel: &dyn Kernel, table: &PmuTable, online: &[u32], procfs: &Path) -> Vec<SelfTest> {
    let cores = table.core_pmus();
    let out: Vec<SelfTest> = if cores.is_empty() {
        vec![SelfTest {
            pmu: String::new(),
            cpu: None,
            outcome: Outcome::Skipped("no hardware counters (no core PMU)".into()),
        }]
    } else {
        let hybrid = cores.len() > 1;
        cores
            .iter()
            .map(|p| {
                let ext = if hybrid { u64::from(p.type_) << 32 } else { 0 };
                let Some(cpu) = super::counters::cpu_of(p, online) else {
                    return SelfTest {
                        pmu: p.name.clone(),
                        cpu: None,
                        outcome: Outcome::Skipped("none of its CPUs is online".into()),
                    };
                };
                let max = kernel
                    .max_freqs(&table.sysfs, procfs, &[cpu])
                    .into_iter()
                    .next()
                    .map(|(_, m)| m);
                let outcome = match run_on(kernel, &p.name, ext, cpu) {
                    Ok(c) => judge(&p.name, cpu, c, max.as_ref()),
                    Err(why) => Outcome::Skipped(why),
                };
                SelfTest {
                    pmu: p.name.clone(),
                    cpu: Some(cpu),
                    outcome,
                }
            })
            .collect()
    };
    for t in &out {
        log(t);
    }
    out
}

/// Logs a verdict: a failure through the one renderer of reasons.
fn log(t: &SelfTest) {
    match &t.outcome {
        Outcome::Failed(p) => log_reason!(
            Level::WARN,
            LogFields::of(p),
            [pmu = %t.pmu, cpu = t.cpu,],
            [],
            "self-test failed: this PMU's counts are not measurements"
        ),
        Outcome::Passed(c) => tracing::info!(
            pmu = %t.pmu,
            cpu = t.cpu,
            iterations = c.iterations,
            instructions = c.instructions,
            cycles = c.cycles,
            "self-test passed"
        ),
        Outcome::Skipped(why) => tracing::info!(pmu = %t.pmu, reason = %why, "self-test skipped"),
    }
}

/// `cycles:u` and `instructions:u` of core PMU `pmu` (extended type
/// `ext` on a hybrid part).
fn attrs(pmu: &str, ext: u64) -> [EventAttr; 2] {
    let user_only = abi::Exclude {
        kernel: true,
        hv: true,
        ..Default::default()
    };
    let attr = |id: u64, name: &str| EventAttr {
        type_: abi::TYPE_HARDWARE,
        config: [ext | id, 0, 0, 0],
        event: name.into(),
        pmu: pmu.into(),
        exclude: user_only,
    };
    [
        attr(abi::HW_CPU_CYCLES, "cycles:u"),
        attr(abi::HW_INSTRUCTIONS, "instructions:u"),
    ]
}

/// Runs the loop on a thread pinned to `cpu`, counting it: the counts,
/// or why they could not be taken.
fn run_on(kernel: &dyn Kernel, pmu: &str, ext: u64, cpu: u32) -> Result<Counts, String> {
    std::thread::scope(|s| {
        s.spawn(|| count_loop(kernel, pmu, ext, cpu))
            .join()
            .unwrap_or_else(|_| Err("the self-test's thread panicked".into()))
    })
}

/// On the pinned thread: open, enable, spin, read.
fn count_loop(kernel: &dyn Kernel, pmu: &str, ext: u64, cpu: u32) -> Result<Counts, String> {
    kernel.pin_thread(cpu).map_err(|e| {
        format!(
            "the thread could not be pinned to CPU {cpu}: {}",
            std::io::Error::from_raw_os_error(e)
        )
    })?;
    let [cyc, ins] = attrs(pmu, ext);
    let not_open = |e: crate::perf::PerfError| match e.problem() {
        p @ (Problem::NotOnPlatform { .. } | Problem::PmuRefused(_)) => {
            format!("no hardware counters ({p})")
        }
        p => format!("its counters did not open: {}", p.explain()),
    };
    let leader = kernel.open_thread(&cyc, cpu, None).map_err(not_open)?;
    let member = kernel
        .open_thread(&ins, cpu, Some(&leader))
        .map_err(not_open)?;
    kernel
        .enable_group(&leader, &cyc, cpu)
        .map_err(|e| format!("its counters did not enable: {}", e.problem().explain()))?;
    let x = spin(ITERATIONS);
    std::hint::black_box(x);
    kernel.thread_ran(ITERATIONS * NOMINAL_PER_ITERATION);
    let mut r = GroupReading::default();
    let read = kernel.read_group(&leader, &cyc, cpu, &mut r);
    drop(member);
    drop(leader);
    read.map_err(|e| format!("its counters could not be read: {}", e.problem().explain()))?;
    let scale = if r.time_running > 0 && r.time_running < r.time_enabled {
        r.time_enabled as f64 / r.time_running as f64
    } else {
        1.0
    };
    let value = |i: usize| r.values.get(i).map_or(0.0, |v| v.1 as f64 * scale);
    if r.time_running == 0 && r.time_enabled > 0 {
        // Never on the PMU: judged as counting nothing.
        return Ok(Counts {
            iterations: ITERATIONS,
            instructions: 0.0,
            cycles: 0.0,
            busy_ns: r.time_enabled,
        });
    }
    Ok(Counts {
        iterations: ITERATIONS,
        cycles: value(0),
        instructions: value(1),
        busy_ns: r.time_enabled,
    })
}

/// Judges the counts of one run against the bounds (module docs).
pub fn judge(pmu: &str, cpu: u32, c: Counts, max: Option<&MaxFreq>) -> Outcome {
    let n = c.iterations as f64;
    let fail = |detail: String| {
        Outcome::Failed(Problem::SelfTestFailed {
            pmu: pmu.into(),
            cpu,
            detail,
        })
    };
    let floor = FLOOR_SHARE * n * MIN_PER_ITERATION;
    if c.instructions < floor {
        return fail(format!(
            "{:.0} instructions counted for {} iterations of a loop of at least {MIN_PER_ITERATION} instructions each, expected at least {floor:.0}",
            c.instructions, c.iterations
        ));
    }
    let ceiling = n * MAX_PER_ITERATION + SLACK_INSTRUCTIONS;
    if c.instructions > ceiling {
        return fail(format!(
            "{:.0} instructions counted for {} iterations of a loop of at most {MAX_PER_ITERATION} instructions each, expected at most {ceiling:.0}",
            c.instructions, c.iterations
        ));
    }
    let min_cycles = n * MIN_CYCLES_PER_ITERATION;
    if c.cycles < min_cycles {
        return fail(format!(
            "{:.0} cycles counted for {} iterations that take at least {MIN_CYCLES_PER_ITERATION} cycle each, expected at least {min_cycles:.0}",
            c.cycles, c.iterations
        ));
    }
    let busy_s = c.busy_ns as f64 / 1e9;
    if let Some(&MaxFreq::Known(hz, source)) = max {
        let most = hz * busy_s * source.margin() + SLACK_CYCLES;
        if c.cycles > most {
            return fail(format!(
                "{:.0} cycles counted in {:.3} ms of the thread's time, more than {:.2} GHz ({}) allows ({most:.0})",
                c.cycles,
                busy_s * 1e3,
                hz / 1e9,
                source.as_str()
            ));
        }
    }
    if let Some((width, arch)) = retire_width(pmu) {
        let ipc = c.instructions / c.cycles;
        if ipc > width * IPC_MARGIN {
            return fail(format!(
                "{ipc:.1} instructions per cycle, more than an {arch} core retires ({width})"
            ));
        }
    }
    Outcome::Passed(c)
}

/// `perf_self_test_passed{pmu}`: 1 passed, 0 failed; nothing for a PMU
/// skipped.
pub fn family(tests: &[SelfTest]) -> Option<Family> {
    let samples: Vec<Sample> = tests
        .iter()
        .filter(|t| !matches!(t.outcome, Outcome::Skipped(_)))
        .map(|t| Sample {
            labels: Labels::new(vec![("pmu", t.pmu.clone())]),
            value: f64::from(u8::from(matches!(t.outcome, Outcome::Passed(_)))),
            start_unix_nanos: 0,
        })
        .collect();
    (!tests.is_empty()).then(|| Family {
        name: "perf_self_test_passed".into(),
        help: "1 when the start-up self-test (--collector.self-test) counted a calibrated loop on a core PMU as it ran (instructions and cycles within bounds of its iterations, busy time and maximum frequency), 0 when it did not: that PMU's counts are not measurements (why: the log, `check`, the landing page). No series for a PMU it skipped.".into(),
        kind: Kind::Gauge,
        samples,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::sim::SimKernel;
    use crate::pmu::fixtures::table;
    use crate::problem::plausible::FreqSource;

    fn run_sim(k: &SimKernel) -> Vec<SelfTest> {
        let t = k.table().clone();
        run(k, &t, &t.topology.online, Path::new("/nonexistent"))
    }

    #[test]
    fn the_simulated_pmu_passes_and_a_fake_guest_pmu_fails() {
        let k = SimKernel::with_manual_clock(table("intel-skx"));
        let ok = run_sim(&k);
        assert_eq!(ok.len(), 1);
        assert_eq!((ok[0].pmu.as_str(), ok[0].cpu), ("cpu", Some(0)));
        let Outcome::Passed(c) = ok[0].outcome else {
            panic!("{ok:?}");
        };
        // The simulated CPU ran 6 instructions an iteration, 3/4 of them
        // in user space, at IPC 1.5.
        assert_eq!(c.instructions, 4.5 * ITERATIONS as f64);
        assert_eq!(c.cycles, 3.0 * ITERATIONS as f64);
        assert_eq!(c.busy_ns, 6_000_000);
        // The guest that counts 395 instructions per second.
        k.set_guest_rate("cpu", Some(395.0));
        let bad = run_sim(&k);
        let Outcome::Failed(p) = &bad[0].outcome else {
            panic!("{bad:?}");
        };
        assert_eq!(p.code(), "self_test_failed");
        assert!(
            p.to_string()
                .contains("2 instructions counted for 3000000 iterations"),
            "{p}"
        );
        assert_eq!(family(&bad).unwrap().samples[0].value, 0.0);
        assert_eq!(family(&ok).unwrap().samples[0].value, 1.0);
    }

    #[test]
    fn each_core_pmu_of_a_hybrid_part_is_tested_on_its_own_cpus() {
        let k = SimKernel::with_manual_clock(table("intel-hybrid"));
        let r = run_sim(&k);
        assert_eq!(r.len(), 2);
        assert!(r.iter().all(|t| t.result() == "passed"), "{r:?}");
        assert_ne!(r[0].cpu, r[1].cpu);
    }

    #[test]
    fn a_host_without_a_core_pmu_skips_it() {
        let k = SimKernel::with_manual_clock(table("vm-no-pmu"));
        let r = run_sim(&k);
        assert_eq!(r.len(), 1);
        assert_eq!(
            r[0].summary(),
            "skipped because no hardware counters (no core PMU)"
        );
        assert!(family(&r).unwrap().samples.is_empty());
    }

    #[test]
    fn counts_beyond_the_bounds_fail() {
        let n = 1_000_000;
        let good = Counts {
            iterations: n,
            instructions: 5.0e6,
            cycles: 4.0e6,
            busy_ns: 2_000_000,
        };
        let max = MaxFreq::Known(3.0e9, FreqSource::Cpufreq);
        assert!(matches!(
            judge("cpu", 0, good, Some(&max)),
            Outcome::Passed(_)
        ));
        let code = |c: Counts| match judge("cpu", 0, c, Some(&max)) {
            Outcome::Failed(p) => p.to_string(),
            o => format!("{o:?}"),
        };
        // Too many instructions (counting more than the thread).
        let many = code(Counts {
            instructions: 3.0e8,
            ..good
        });
        assert!(many.contains("expected at most"), "{many}");
        // Fewer cycles than the dependent chain needs.
        let few = code(Counts {
            cycles: 1.0e5,
            ..good
        });
        assert!(few.contains("cycles counted"), "{few}");
        // More cycles than 3 GHz × 1.25 in 2 ms (+ slack).
        let fast = code(Counts {
            cycles: 2.0e7,
            instructions: 2.0e7,
            ..good
        });
        assert!(fast.contains("more than 3.00 GHz"), "{fast}");
        // An unknown maximum frequency is not judged against.
        assert!(matches!(
            judge(
                "cpu",
                0,
                Counts {
                    cycles: 2.0e7,
                    instructions: 2.0e7,
                    ..good
                },
                None
            ),
            Outcome::Passed(_)
        ));
        // An IPC no core retires.
        let wide = code(Counts {
            instructions: 1.9e8,
            cycles: 1.0e6,
            busy_ns: 1_000_000_000,
            ..good
        });
        assert!(wide.contains("instructions per cycle"), "{wide}");
    }
}
