//! Plausibility (issue 27 item 2) on the simulated PMU: the simulator's
//! knobs make counts the CPU cannot produce (a fake guest PMU counting a
//! tiny constant rate, cycles beyond the maximum frequency), and the
//! counters' state says `implausible`, with why, at most once per check
//! interval. The manual clock makes every window exact.

use crate::engines::{family, frame_since_start, skx_engine, SEC};
use perf_exporter::engine::Engine;
use perf_exporter::perf::sim::SimKernel;
use perf_exporter::problem::plausible::Implausible;
use perf_exporter::problem::CounterState;
use perf_exporter::snapshot::Snapshot;
use std::sync::Arc;

/// Cycles and instructions in one group per CPU, under the names the live
/// view derives `ipc` from (intel-skx: 8 CPUs, PMU `cpu`).
const NAMED: &str = crate::config!("counter_state/named");
const C: &str = "perf_cpu_cycles_total";
const I: &str = "perf_instructions_total";

fn engine(setup: impl FnOnce(&SimKernel)) -> (Arc<SimKernel>, Engine) {
    let (k, mut e) = skx_engine(NAMED, setup);
    e.check_plausibility("/nonexistent/proc".into());
    (k, e)
}

/// The states of `metric`'s series (one per CPU).
fn states(e: &Engine, metric: &str) -> Vec<CounterState> {
    e.counter_states()
        .into_iter()
        .filter(|(m, ..)| m == metric)
        .map(|(_, _, s, _)| s)
        .collect()
}

/// Collects every second for `secs` seconds, each collection followed by
/// the work it leaves for after it (a check's busy-time reading, as
/// `serve`'s collector does); the last snapshot.
fn run(k: &SimKernel, e: &mut Engine, secs: u32) -> Snapshot {
    let mut s = e.collect();
    e.run_upkeep();
    for _ in 0..secs {
        k.advance(SEC);
        s = e.collect();
        e.run_upkeep();
    }
    s
}

#[test]
fn a_plausible_pmu_is_counting() {
    let (k, mut e) = engine(|_| {});
    let s = run(&k, &mut e, 21);
    assert_eq!(states(&e, C), [CounterState::Counting; 8]);
    assert_eq!(states(&e, I), [CounterState::Counting; 8]);
    assert!(family(&s, "perf_counter_implausible_info").is_empty());
    assert!(family(&s, "perf_counter_states").contains(&(
        "{metric=\"perf_cpu_cycles_total\",state=\"implausible\"}".into(),
        0.0
    )));
}

#[test]
fn a_guest_pmu_counting_next_to_nothing_on_a_busy_cpu_is_implausible() {
    // 395 events per second on fully busy CPUs, time_running equal to
    // time_enabled: no multiplexing flag catches it.
    let (k, mut e) = engine(|k| k.set_guest_rate("cpu", Some(395.0)));
    // The first check (at the first collection) takes the marks; the
    // next comes 10 s later, not before.
    let s = run(&k, &mut e, 9);
    assert_eq!(states(&e, I), [CounterState::Counting; 8]);
    assert!(family(&s, "perf_counter_implausible_info").is_empty());
    // The check at 10 s judges after its collection (off the collection
    // path); its verdict counts from the next collection.
    k.advance(SEC);
    e.collect();
    assert_eq!(states(&e, I), [CounterState::Counting; 8]);
    e.run_upkeep();
    k.advance(SEC);
    let s = e.collect();
    e.run_upkeep();
    assert_eq!(states(&e, I), [CounterState::Implausible; 8]);
    assert_eq!(states(&e, C), [CounterState::Implausible; 8]);
    let info = family(&s, "perf_counter_implausible_info");
    assert!(info.contains(&(
        "{metric=\"perf_instructions_total\",cpu=\"3\",reason=\"near_zero_while_busy\"}".into(),
        1.0
    )));
    assert_eq!(info.len(), 16, "{info:?}");
    assert!(family(&s, "perf_counter_state").contains(&(
        "{metric=\"perf_instructions_total\",cpu=\"0\",state=\"implausible\"}".into(),
        1.0
    )));
    // Not a measurement: the live view says why instead of the value, and
    // so do the values derived from it; no per-CPU value either.
    let f = frame_since_start(&s.families);
    assert!(
        !f.counts.contains_key(I) && !f.counts.contains_key(C),
        "{f:?}"
    );
    assert!(f.implausible.contains(I));
    let why = Implausible::explain_code("near_zero_while_busy").unwrap();
    assert_eq!(f.unavailable[I], why);
    assert_eq!(f.unavailable["ipc"], format!("needs {I}: {why}"));
    assert!(f
        .to_json()
        .contains(&format!(",\"implausible\":[\"{C}\",\"{I}\"]")));
    // The state stays until a check finds it plausible again.
    k.set_guest_rate("cpu", None);
    run(&k, &mut e, 9);
    assert_eq!(states(&e, I), [CounterState::Implausible; 8]);
    k.advance(SEC);
    let s = e.collect();
    assert_eq!(states(&e, I), [CounterState::Counting; 8]);
    assert!(family(&s, "perf_counter_implausible_info").is_empty());
}

#[test]
fn an_idle_cpu_may_count_next_to_nothing() {
    let (k, mut e) = engine(|k| {
        k.set_guest_rate("cpu", Some(395.0));
        k.set_busy_share(0.05);
    });
    run(&k, &mut e, 21);
    assert_eq!(states(&e, I), [CounterState::Counting; 8]);
}

#[test]
fn cycles_beyond_the_maximum_frequency_are_implausible() {
    // 3x busier: 6e9 cycles per second of a fully busy CPU whose maximum
    // is 3 GHz; the instructions keep an IPC of 1.5 and are not judged
    // by the frequency.
    // (Judged after the collection at 10 s, seen at the next one.)
    let (k, mut e) = engine(|k| k.set_activity("cpu", 3.0));
    let s = run(&k, &mut e, 11);
    assert_eq!(states(&e, C), [CounterState::Implausible; 8]);
    assert_eq!(states(&e, I), [CounterState::Counting; 8]);
    assert!(family(&s, "perf_counter_implausible_info").contains(&(
        "{metric=\"perf_cpu_cycles_total\",cpu=\"7\",reason=\"cycles_above_max_frequency\"}".into(),
        1.0
    )));
    let f = frame_since_start(&s.families);
    assert!(f.implausible.contains(C) && !f.implausible.contains(I));
    assert!(f.unavailable[C].contains("maximum frequency"), "{f:?}");
    // Where the maximum frequency is unknown, the bound is not checked.
    let (k, mut e) = engine(|k| {
        k.set_activity("cpu", 3.0);
        k.set_max_freq(None);
    });
    run(&k, &mut e, 11);
    assert_eq!(states(&e, C), [CounterState::Counting; 8]);
}
