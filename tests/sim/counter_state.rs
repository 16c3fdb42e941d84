//! Counter states (issue 27) on the simulated PMU, one test per state,
//! each driven by the simulator's knob for the failure: a counter budget,
//! the NMI watchdog taking one counter, counters that stall
//! (`implausible`: `plausibility.rs`). The manual clock makes every ratio
//! exact.

use crate::engines::{family, frame_since_start, skx_engine as engine, SEC};
use perf_exporter::engine::Engine;
use perf_exporter::problem::CounterState;
use std::collections::BTreeMap;

/// One group of two core events per CPU (intel-skx: 8 CPUs, PMU `cpu`).
const CORE: &str = crate::config!("cycles_instructions");

/// CORE under the names the live view derives `ipc` from.
const NAMED: &str = crate::config!("counter_state/named");
const C: &str = "perf_cpu_cycles_total";
const I: &str = "perf_instructions_total";

/// Two groups of two core events per CPU, and software events.
const TWO_SETS: &str = crate::config!("counter_state/two_sets");

/// metric → the states of its series (over CPUs), with the ratios.
fn states(e: &Engine) -> BTreeMap<String, Vec<(CounterState, f64)>> {
    let mut out: BTreeMap<String, Vec<(CounterState, f64)>> = BTreeMap::new();
    for (m, _, s, r) in e.counter_states() {
        out.entry(m).or_default().push((s, r));
    }
    out
}

/// Every series of `metric` is in `state` at `ratio`, on 8 CPUs.
fn all(e: &Engine, metric: &str, state: CounterState, ratio: f64) {
    let st = states(e);
    let v = st.get(metric).unwrap_or_else(|| panic!("{metric}: {st:?}"));
    assert_eq!(v.len(), 8, "{metric}: {v:?}");
    for &(s, r) in v {
        assert_eq!(s, state, "{metric}: {v:?}");
        assert!((r - ratio).abs() < 1e-9, "{metric}: {v:?}");
    }
}

#[test]
fn counters_on_a_pmu_with_room_are_counting() {
    let (k, mut e) = engine(TWO_SETS, |k| k.set_counters("cpu", 4));
    e.collect();
    k.advance(SEC);
    let s = e.collect();
    for m in ["c_total", "i_total", "br_total", "bm_total", "cs_total"] {
        all(&e, m, CounterState::Counting, 1.0);
    }
    // Bounded: per metric, how many counters are in each state; no
    // per-CPU series while everything counts.
    let states = family(&s, "perf_counter_states");
    assert_eq!(states.len(), 5 * 5);
    assert_eq!(
        states[..4],
        [
            ("{metric=\"c_total\",state=\"counting\"}".to_string(), 8.0),
            (
                "{metric=\"c_total\",state=\"multiplexed\"}".to_string(),
                0.0
            ),
            ("{metric=\"c_total\",state=\"stalled\"}".to_string(), 0.0),
            ("{metric=\"c_total\",state=\"never_ran\"}".to_string(), 0.0),
        ]
    );
    assert!(family(&s, "perf_counter_state").is_empty());
    assert!(family(&s, "perf_counter_running_ratio").is_empty());
}

#[test]
fn groups_that_fit_but_exceed_the_budget_are_multiplexed() {
    // Two groups of two on three counters: each runs 3/4 of the time;
    // the software group takes no counter.
    let (k, mut e) = engine(TWO_SETS, |k| k.set_counters("cpu", 3));
    e.collect();
    k.advance(SEC);
    let s = e.collect();
    for m in ["c_total", "i_total", "br_total", "bm_total"] {
        all(&e, m, CounterState::Multiplexed, 0.75);
    }
    all(&e, "cs_total", CounterState::Counting, 1.0);
    assert!(family(&s, "perf_counter_state").contains(&(
        "{metric=\"c_total\",cpu=\"3\",state=\"multiplexed\"}".into(),
        1.0
    )));
    // The estimate restores the count (2e9 cycles/s).
    let c = family(&s, "c_total");
    assert!((c[0].1 - 2.0e9).abs() < 1.0, "{c:?}");
    // The live view says so, as perf's (75.00%).
    let f = frame_since_start(&s.families);
    assert_eq!(f.multiplexed.get("c_total"), Some(&0.75));
    assert!(!f.multiplexed.contains_key("cs_total"));
    assert!(f.to_json().contains("\"multiplexed\":{\"bm_total\":0.75,"));
}

#[test]
fn a_group_larger_than_the_free_counters_never_runs() {
    // Two counters: the 2-event group fits when it is planned; then the
    // NMI watchdog takes one, before the group ever ran. It stays opened
    // and never runs.
    let (k, mut e) = engine(NAMED, |k| k.set_counters("cpu", 2));
    e.collect();
    k.set_watchdog("cpu", true);
    k.advance(SEC);
    let s = e.collect();
    all(&e, C, CounterState::NeverRan, 0.0);
    all(&e, I, CounterState::NeverRan, 0.0);
    assert!(family(&s, C).is_empty(), "no value, not zero");
    // Not a measurement: the live view says why instead of a count, and
    // so do the values derived from it.
    let f = frame_since_start(&s.families);
    assert!(!f.counts.contains_key(C), "{f:?}");
    assert!(f.not_counted.contains(C));
    let why = CounterState::NeverRan.explain();
    assert_eq!(f.unavailable[C], why);
    assert_eq!(f.unavailable["ipc"], format!("needs {I}: {why}"));
    assert!(f
        .to_json()
        .ends_with(&format!(",\"not_counted\":[\"{C}\",\"{I}\"]}}")));
    // At the second never-ran read the engine splits the group: single
    // events fit the one free counter and take turns.
    k.advance(SEC);
    e.collect();
    k.advance(SEC);
    e.collect();
    all(&e, C, CounterState::Multiplexed, 0.5);
    all(&e, I, CounterState::Multiplexed, 0.5);
}

#[test]
fn the_watchdog_taking_a_counter_mid_run_is_seen() {
    // Two counters, both free: counting; the watchdog takes one: the
    // group no longer fits and stops running.
    let (k, mut e) = engine(CORE, |k| k.set_counters("cpu", 2));
    e.collect();
    k.advance(SEC);
    let before = family(&e.collect(), "c_total");
    all(&e, "c_total", CounterState::Counting, 1.0);
    k.set_watchdog("cpu", true);
    k.advance(SEC);
    let s = e.collect();
    all(&e, "c_total", CounterState::NeverRan, 0.0);
    // The total it had stays (a counter never goes down), flagged.
    assert_eq!(family(&s, "c_total"), before);
    let f = frame_since_start(&s.families);
    assert!(f.not_counted.contains("c_total") && !f.counts.contains_key("c_total"));
    k.set_watchdog("cpu", false);
    k.advance(SEC);
    e.collect();
    all(&e, "c_total", CounterState::Counting, 1.0);
}

#[test]
fn cycles_and_instructions_that_stand_still_while_running_are_stalled() {
    let (k, mut e) = engine(TWO_SETS, |k| {
        k.set_stalled("cpu", true);
        // An idle software counter stands still too: not judged.
        k.set_activity("software", 0.0);
    });
    e.collect();
    for _ in 1..3 {
        k.advance(SEC);
        e.collect();
        all(&e, "c_total", CounterState::Counting, 1.0);
    }
    k.advance(SEC);
    let s = e.collect();
    // Three collections in a row on the PMU and not moving.
    all(&e, "c_total", CounterState::Stalled, 1.0);
    all(&e, "i_total", CounterState::Stalled, 1.0);
    // Branches may legitimately stand still; context switches too.
    all(&e, "br_total", CounterState::Counting, 1.0);
    all(&e, "cs_total", CounterState::Counting, 1.0);
    assert!(family(&s, "perf_counter_state").contains(&(
        "{metric=\"i_total\",cpu=\"7\",state=\"stalled\"}".into(),
        1.0
    )));
    // Moving again: counting at the next collection.
    k.set_stalled("cpu", false);
    k.advance(SEC);
    e.collect();
    all(&e, "c_total", CounterState::Counting, 1.0);
}

/// Seven events of one PMU in one set.
const SEVEN: &str = crate::config!("counter_state/seven");

#[test]
fn a_group_that_can_never_schedule_is_split_before_it_is_opened() {
    // A 6-counter core given a 7-event set: as one group it would never
    // run. The plan knows the budget, so it opens 6 + 1 and says so.
    let (k, mut e) = engine(SEVEN, |k| k.set_counters("cpu", 6));
    let problems = e.problems();
    for m in ["c_total", "bc_total"] {
        let p = problems
            .iter()
            .find(|(x, _)| x == m)
            .map(|(_, p)| p)
            .unwrap_or_else(|| panic!("{m}: {problems:?}"));
        assert_eq!(p.code(), "group_too_large");
        assert!(
            p.what_to_do()
                .starts_with("split set `big` into sets of at most 6 events"),
            "{}",
            p.what_to_do()
        );
    }
    e.collect();
    k.advance(SEC);
    let s = e.collect();
    // Never a window that never ran: the two groups take turns from the
    // start (6 of 7 counters' worth of time each).
    for m in [
        "c_total", "i_total", "cr_total", "cm_total", "br_total", "bm_total", "bc_total",
    ] {
        all(&e, m, CounterState::Multiplexed, 6.0 / 7.0);
    }
    let c = family(&s, "c_total");
    assert_eq!(c.len(), 8);
    assert!((c[0].1 - 2.0e9).abs() < 10.0, "{c:?}");
    // Still one group per CPU when it fits.
    let (_, e) = engine(SEVEN, |k| k.set_counters("cpu", 7));
    assert!(e
        .problems()
        .iter()
        .all(|(_, p)| p.code() != "group_too_large"));
    assert_eq!(e.open_groups(), 8);
}
